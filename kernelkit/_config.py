"""Global configuration: compute backend and working memory.

Mirrors :func:`sklearn.set_config` / :func:`sklearn.get_config` /
:func:`sklearn.config_context`, with a thread-local state so that one thread's
``config_context`` does not leak into another's.
"""

import threading
from contextlib import contextmanager
from numbers import Real

BACKEND_NAMES = ("auto", "numpy", "numba", "cupy")

_DEFAULTS = {"backend": "auto", "working_memory": 256}
_local = threading.local()


def _state():
    if not hasattr(_local, "config"):
        _local.config = dict(_DEFAULTS)
    return _local.config


def get_config():
    """Return a copy of the current kernelkit configuration.

    Returns
    -------
    config : dict
        ``{"backend": str, "working_memory": float}``. ``backend`` is one of
        ``"auto"``, ``"numpy"``, ``"numba"``, ``"cupy"``; ``working_memory`` is the
        memory budget, in MiB, of one block of a kernel matrix computed blockwise.
    """
    return dict(_state())


def _check_backend_name(backend, name="backend"):
    if not isinstance(backend, str) or backend not in BACKEND_NAMES:
        raise ValueError(f"{name} must be one of {BACKEND_NAMES} or None, got {backend!r}.")


def _check_working_memory(working_memory):
    if (
        isinstance(working_memory, bool)
        or not isinstance(working_memory, Real)
        or not working_memory > 0
        or working_memory == float("inf")
    ):
        raise ValueError(
            f"working_memory must be a positive finite number of MiB, got {working_memory!r}."
        )


def set_config(backend=None, working_memory=None):
    """Set the global kernelkit configuration.

    Parameters
    ----------
    backend : {"auto", "numpy", "numba", "cupy"}, default=None
        Compute engine used by estimators and kernels whose own ``backend`` is None.
        ``"auto"`` picks CuPy for CuPy input arrays, else Numba when installed, else
        NumPy. None leaves the setting unchanged.
    working_memory : float, default=None
        Budget in MiB for one block of a kernel matrix (as scikit-learn's
        ``working_memory``). Kernel matrix-vector products and predictions never
        hold more than about this much kernel matrix at once. None leaves it unchanged.

    Raises
    ------
    ValueError
        If ``backend`` is not a known name or ``working_memory`` is not positive.
    """
    state = _state()
    if backend is not None:
        _check_backend_name(backend)
        state["backend"] = backend
    if working_memory is not None:
        _check_working_memory(working_memory)
        state["working_memory"] = working_memory


@contextmanager
def config_context(*, backend=None, working_memory=None):
    """Temporarily change the kernelkit configuration inside a ``with`` block.

    Parameters
    ----------
    backend : {"auto", "numpy", "numba", "cupy"}, default=None
        See :func:`set_config`.
    working_memory : float, default=None
        See :func:`set_config`.

    Yields
    ------
    None

    Examples
    --------
    >>> import kernelkit
    >>> with kernelkit.config_context(backend="numpy"):
    ...     kernelkit.get_config()["backend"]
    'numpy'
    """
    old = get_config()
    set_config(backend=backend, working_memory=working_memory)
    try:
        yield
    finally:
        _state().clear()
        _state().update(old)
