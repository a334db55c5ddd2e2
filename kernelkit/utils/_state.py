"""A rejected call leaves an estimator exactly as it was.

scikit-learn validates parameters before data and never commits a half-done fit. kernelkit
estimators compute into locals and assign fitted attributes last; this decorator is the
one shared guarantee behind that rule: whatever raises inside ``fit`` / ``partial_fit`` /
``learn_one`` (a bad parameter, bad data, a failure midway), the instance's ``__dict__``
is restored to the snapshot taken on entry.
"""

import contextlib
import copy
import functools

from ._threads import owned_blas


def atomic(method=None, *, deep=False):
    """Decorate a method that mutates ``self`` so that an exception rolls ``self`` back.

    Parameters
    ----------
    method : callable
        The method (``fit``, ``partial_fit``, ...).
    deep : bool, default=False
        ``False`` restores the attribute dictionary (enough when the method rebinds
        attributes rather than mutating them in place: every ``fit``). ``True`` also
        deep-copies the fitted and private attribute values on entry, for methods that update fitted
        arrays in place (online ``partial_fit``); its cost is one copy of the state.
    """
    if method is None:
        return functools.partial(atomic, deep=deep)

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with rollback(self, deep=deep), owned_blas():  # owned_blas: utils._threads
            return method(self, *args, **kwargs)

    return wrapper


@contextlib.contextmanager
def rollback(obj, deep=False):
    """Restore ``obj``'s attribute dictionary if the block raises (:func:`atomic`'s
    guarantee, for functions that fit an estimator passed to them)."""
    saved = vars(obj).copy()
    if deep:  # fitted and private state only: parameters keep their identity
        saved = {k: (copy.deepcopy(v) if k.startswith("_") or k.endswith("_") else v)
                 for k, v in saved.items()}
    try:
        yield
    except BaseException:
        state = vars(obj)
        state.clear()
        state.update(saved)
        raise
