"""Results follow the input: array namespaces, moving arrays, host state for pickling.

kernelkit follows scikit-learn's array API dispatch: NumPy in, NumPy out; CuPy
(or any array API namespace) in, the same namespace out. The helpers here are
the one place that decides

* which namespace the inputs of a call live in (:func:`array_namespace`),
* how a result is moved back there (:func:`to_namespace`, :func:`follow_input`),
* how device-resident fitted attributes reach the host when an estimator is
  pickled (:func:`state_to_host`, :class:`HostPickleMixin`), so that a model
  fitted on a GPU loads on a machine without one.
* how every estimator's public methods follow their input under scikit-learn's
  array API dispatch (:class:`ArrayAPIMixin`, on each estimator's base class): the
  call computes on host views of its inputs, fitted arrays and results go back to
  the input's namespace and device (user guide: ``doc/array_api.rst``).

Host (NumPy) inputs and plain Python sequences are "host"; an array whose type
is not ``numpy.ndarray`` but which has ``__array_namespace__`` (CuPy,
array-api-strict, ...) is a "device" array of that namespace.
"""

import contextvars
import functools
import inspect

import numpy as np
from sklearn.utils._available_if import _AvailableIfDescriptor

from ..backend import is_cupy_array

__all__ = ["array_namespace", "is_host_namespace", "is_device_array", "to_host",
           "to_namespace", "follow_input", "state_to_host", "HostPickleMixin",
           "ArrayAPIMixin", "FOLLOWED_METHODS", "cupy_input_active"]


def is_host_namespace(xp):
    """Whether ``xp`` is NumPy (the host namespace).

    Parameters
    ----------
    xp : module

    Returns
    -------
    bool
    """
    return xp is np or getattr(xp, "__name__", None) == "numpy"


def is_device_array(a):
    """Whether ``a`` is an array of a namespace other than NumPy (CuPy, array-api-strict, ...).

    Parameters
    ----------
    a : object

    Returns
    -------
    bool
    """
    if a is None or isinstance(a, (np.ndarray, np.generic)):
        return False
    return is_cupy_array(a) or hasattr(a, "__array_namespace__") or _is_compat_array(a)


def _is_compat_array(a):
    """PyTorch tensors and the other arrays array-api-compat wraps (no ``__array_namespace__``)."""
    mod = type(a).__module__.split(".")[0]
    if mod not in ("torch", "dask", "jax", "ndonnx", "sparse"):  # cheap test first
        return False
    from sklearn.externals import array_api_compat

    return array_api_compat.is_array_api_obj(a)


def _namespace_of(a):
    if not is_device_array(a):
        return np
    if is_cupy_array(a):  # CuPy before v14 has no __array_namespace__ on every array
        import cupy

        return cupy
    if not hasattr(a, "__array_namespace__"):  # PyTorch: array-api-compat's wrapper namespace
        from sklearn.externals import array_api_compat

        return array_api_compat.array_namespace(a)
    return a.__array_namespace__()


def array_namespace(*arrays):
    """The array namespace the inputs of a call live in.

    Host inputs (NumPy arrays, lists, scalars, None) do not choose: the namespace is
    that of the device arrays among ``arrays`` (targets or weights given as NumPy
    next to a CuPy ``X`` are moved to the device by the caller), else NumPy.

    Parameters
    ----------
    *arrays : array-like or None

    Returns
    -------
    xp : module
        ``numpy``, ``cupy``, or the namespace returned by the arrays'
        ``__array_namespace__()``.

    Raises
    ------
    TypeError
        If device arrays of two different namespaces are mixed.
    """
    found = None
    for a in arrays:
        ns = _namespace_of(a)
        if is_host_namespace(ns):
            continue
        if found is not None and ns is not found:
            raise TypeError(f"inputs live in different array namespaces ({found.__name__} and "
                            f"{ns.__name__}); pass them all in one (e.g. all CuPy, or all NumPy).")
        found = ns
    return np if found is None else found


def to_host(a):
    """A NumPy array with the values of ``a`` (no copy for a NumPy array).

    CuPy arrays are copied with ``.get()``; other namespaces' arrays through the
    buffer protocol when they are host-resident, else over DLPack.

    Parameters
    ----------
    a : array-like or None

    Returns
    -------
    out : ndarray or None
    """
    if a is None or isinstance(a, np.ndarray):
        return a
    if is_cupy_array(a):
        return a.get()
    try:
        return np.asarray(a)
    except (TypeError, RuntimeError, ValueError):  # a device the buffer protocol cannot read
        try:
            return np.from_dlpack(a, device="cpu")  # cross-device copy (NumPy >= 2.1)
        except TypeError:
            return np.from_dlpack(a)


def to_namespace(a, xp, device=None):
    """``a`` as an array of namespace ``xp`` (no copy when it already is one).

    Parameters
    ----------
    a : array-like or None
    xp : module
        Target namespace (from :func:`array_namespace`).
    device : device object, default=None
        Where a moved array goes (an input's ``.device``); None: the namespace's
        current device.

    Returns
    -------
    out : array of ``xp`` or None
    """
    if a is None:
        return None
    if is_host_namespace(xp):
        return to_host(a)
    if _namespace_of(a) is xp:
        return a
    # host -> device; a device array of another namespace goes through the host (the
    # two libraries need not share a device)
    host = to_host(a)
    if device is None:
        return xp.asarray(host)
    if getattr(xp, "__name__", None) == "cupy":  # cupy.asarray has no device argument
        with device:
            return xp.asarray(host)
    return xp.asarray(host, device=device)


def follow_input(result, *inputs):
    """Return ``result`` in the namespace of ``inputs``: results follow the input.

    Parameters
    ----------
    result : array, tuple of arrays, or None
        Computed on whatever engine ran the call.
    *inputs : array-like
        The call's inputs, as the user passed them (before validation turned them
        into NumPy arrays).

    Returns
    -------
    result : array or tuple of arrays of the inputs' namespace

    Raises
    ------
    TypeError
        As :func:`array_namespace`.
    """
    xp = array_namespace(*inputs)
    device = next((getattr(a, "device", None) for a in inputs if is_device_array(a)), None)
    if isinstance(result, tuple):
        return tuple(to_namespace(r, xp, device) for r in result)
    return to_namespace(result, xp, device)


def state_to_host(state):
    """A copy of an object's state with every device array moved to the host.

    Arrays inside lists, tuples and dicts are moved too; anything else (parameters,
    host arrays, fitted sub-estimators, which handle their own pickling) is kept as
    it is. ``state`` itself is not modified.

    Parameters
    ----------
    state : dict
        E.g. ``estimator.__dict__``.

    Returns
    -------
    state : dict
    """
    def host(v):
        if is_device_array(v):
            return to_host(v)
        if isinstance(v, (list, tuple)):
            return type(v)(host(x) for x in v)
        if isinstance(v, dict):
            return {k: host(x) for k, x in v.items()}
        return v

    return {k: host(v) for k, v in state.items()}


class HostPickleMixin:
    """Estimator mixin: pickling stores fitted device arrays as NumPy arrays.

    Fitted attributes may live on the device (CuPy arrays after a fit on CuPy
    input); the pickled state holds their host copies, so a model fitted on a GPU
    loads anywhere, and the live estimator keeps its device arrays. Put it before
    :class:`sklearn.base.BaseEstimator` in the bases.
    """

    def __getstate__(self):
        parent = getattr(super(), "__getstate__", None)
        state = parent() if parent is not None else self.__dict__.copy()
        return state_to_host(state)


# --------------------------------------------------------------------------------------
# Estimators: results follow the input (scikit-learn's array API dispatch)
# --------------------------------------------------------------------------------------

#: Public methods the mixin wraps, by kind: "fit" mutates and returns self; "fit_result"
#: mutates and returns a result; "read" leaves the estimator unchanged.
FOLLOWED_METHODS = {
    "fit": "fit", "partial_fit": "fit",
    "fit_predict": "fit_result", "fit_transform": "fit_result",
    "partial_fit_predict": "fit_result", "partial_fit_decision_function": "fit_result",
    "predict": "read", "predict_proba": "read", "predict_log_proba": "read",
    "decision_function": "read", "transform": "read", "inverse_transform": "read",
    "score": "read", "score_samples": "read", "estimate_leverage_scores": "read",
}

_FOLLOWING = contextvars.ContextVar("kernelkit_following", default=False)
_CUPY_INPUT = contextvars.ContextVar("kernelkit_cupy_input", default=False)


def cupy_input_active():
    """Whether the running estimator call was given CuPy input (``backend="auto"`` then
    resolves to the CuPy engine although the call computes on host copies of its inputs).

    Returns
    -------
    bool
    """
    return _CUPY_INPUT.get()


def _dispatch_on():
    from sklearn import get_config

    return bool(get_config().get("array_api_dispatch", False))


def _device_of(a):
    from sklearn.externals import array_api_compat

    return array_api_compat.device(a)


def _where(a):
    """``(namespace, device)`` of a device array."""
    return _namespace_of(a), _device_of(a)


def _ns_name(xp):
    return getattr(xp, "__name__", str(xp)).replace("sklearn.externals.array_api_compat.", "")


def _same_place(where, other):
    return where[0] is other[0] and str(where[1]) == str(other[1])


def _check_namespace(xp, argument):
    """The namespace gives back what the mixin needs: ``asarray`` (results, fitted arrays)."""
    missing = [f for f in ("asarray",) if not hasattr(xp, f)]
    if missing:
        raise TypeError(f"{argument} is an array of namespace {_ns_name(xp)}, which lacks "
                        f"{', '.join(missing)}: kernelkit needs it to return results there. "
                        f"Pass a NumPy array or an array of a namespace following the array API.")


def _host_arg(a, name):
    """A device array argument as NumPy (zero-copy where the buffer protocol or DLPack allow);
    anything else unchanged."""
    if not is_device_array(a):
        return a
    why = None
    try:
        host = to_host(a)
    except Exception as exc:  # noqa: BLE001 - named in the message, chained
        host, why = None, exc
    if host is None or host.dtype == object and host.ndim == 0:  # NumPy wrapped it as a scalar
        raise TypeError(f"{name} ({type(a).__module__}.{type(a).__name__}) cannot be read on the "
                        "host: it offers neither the buffer protocol, __array__ nor DLPack"
                        + (f" ({why})" if why else "") + ".") from why
    return host


def _max_float(xp, device):
    """float64, or float32 on a device without float64 (e.g. Apple MPS)."""
    info = getattr(xp, "__array_namespace_info__", None)
    if info is None:
        return np.float64
    try:
        kinds = info().dtypes(kind="real floating", device=device)
    except Exception:  # noqa: BLE001 - a namespace without the inspection API keeps float64
        return np.float64
    return np.float64 if "float64" in kinds else np.float32


def _to_place(a, xp, device, max_float):
    """A host array in ``xp`` on ``device``; object and string arrays (class labels) stay NumPy."""
    if not isinstance(a, np.ndarray) or a.dtype.kind not in "biufc":
        return a
    if a.dtype == np.float64 and max_float == np.float32:
        a = a.astype(np.float32)
    if a.ndim and any(s < 0 for s in a.strides):
        a = np.ascontiguousarray(a)
    return to_namespace(a, xp, device)


def _is_param(key):
    """Constructor parameters are the user's: never moved (fitted and private state is)."""
    return not (key.startswith("_") or key.endswith("_"))


def _state_host(state, copy=False):
    """Copy of an estimator's ``__dict__`` whose fitted device arrays (and those of fitted
    sub-estimators) are NumPy; parameters kept. ``copy``: never views of device memory
    (a ``partial_fit`` updates its arrays in place, and a failed one is rolled back)."""
    def host(v):
        if is_device_array(v):
            return np.array(to_host(v), copy=True) if copy else to_host(v)
        if isinstance(v, ArrayAPIMixin):
            return _host_view(v) if _has_device_state(v) else v
        if isinstance(v, (list, tuple)):
            return type(v)(host(x) for x in v)
        if isinstance(v, dict):
            return {k: host(x) for k, x in v.items()}
        return v

    return {k: (v if _is_param(k) else host(v)) for k, v in state.items()}


def _host_view(est):
    """A shallow copy of ``est`` with host copies of its fitted arrays (``est`` untouched)."""
    view = object.__new__(type(est))
    view.__dict__.update(_state_host(vars(est)))
    return view


def _device_where(v):
    """``(namespace, device)`` of the first device array in a fitted value, else None."""
    if is_device_array(v):
        return _where(v)
    if isinstance(v, ArrayAPIMixin):
        return _model_where(v)
    if isinstance(v, (list, tuple)):
        return next((w for w in map(_device_where, v) if w is not None), None)
    if isinstance(v, dict):
        return next((w for w in map(_device_where, v.values()) if w is not None), None)
    return None


def _model_where(est):
    """Where a fitted estimator's arrays live: ``(namespace, device)``, None for the host."""
    for k, v in vars(est).items():
        if not _is_param(k):
            w = _device_where(v)
            if w is not None:
                return w
    return None


def _holds_host_arrays(est):
    def host(v):
        if isinstance(v, (list, tuple)):
            return any(map(host, v))
        if isinstance(v, dict):
            return any(map(host, v.values()))
        return isinstance(v, np.ndarray) and v.dtype.kind in "biufc"

    return any(host(v) for k, v in vars(est).items() if not _is_param(k))


def _has_device_state(est):
    return _model_where(est) is not None


def _move_state(est, xp, device, max_float):
    """Move the fitted arrays of ``est`` (and of its fitted sub-estimators) to ``xp``/``device``."""
    def move(v):
        if isinstance(v, np.ndarray):
            return _to_place(v, xp, device, max_float)
        if isinstance(v, ArrayAPIMixin):
            _move_state(v, xp, device, max_float)
            return v
        if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
            return type(v)(move(x) for x in v)
        if isinstance(v, dict):
            return {k: move(x) for k, x in v.items()}
        return v

    state = vars(est)
    for k in list(state):
        if not _is_param(k):
            state[k] = move(state[k])


def _result(out, xp, device, max_float):
    if isinstance(out, np.ndarray):
        return _to_place(out, xp, device, max_float)
    if isinstance(out, tuple) and not hasattr(out, "_fields"):
        return tuple(_result(o, xp, device, max_float) for o in out)
    return out


def _call_host(self, method, kind, args, kwargs, target):
    """Run ``method`` on host values; move fitted state and the result to ``target``."""
    names = iter(("X", "y"))
    args = tuple(_host_arg(a, next(names, f"argument {i}")) for i, a in enumerate(args))
    kwargs = {k: _host_arg(v, k) for k, v in kwargs.items()}
    tokens = (_FOLLOWING.set(True),
              _CUPY_INPUT.set(target is not None and _ns_name(target[0]) == "cupy"))
    try:
        if kind == "read":
            obj = _host_view(self) if _has_device_state(self) else self
            out = method(obj, *args, **kwargs)
        else:
            saved = vars(self).copy()
            if _has_device_state(self):
                vars(self).update(_state_host(saved, copy=True))
            try:
                out = method(self, *args, **kwargs)
                if target is not None:
                    _move_state(self, *target)
            except BaseException:
                vars(self).clear()
                vars(self).update(saved)
                raise
    finally:
        _CUPY_INPUT.reset(tokens[1])
        _FOLLOWING.reset(tokens[0])
    if kind == "fit":
        return self if out is self else out
    return out if target is None else _result(out, *target)


def _follow(name, method, kind):
    @functools.wraps(method)
    def follow(self, *args, **kwargs):
        if _FOLLOWING.get():  # a nested call: the outer one moved everything to the host
            return method(self, *args, **kwargs)
        X = args[0] if args else kwargs.get("X")
        dispatch = _dispatch_on()
        foreign = is_device_array(X) and (dispatch or is_cupy_array(X))
        if not foreign:
            others = dispatch and any(map(is_device_array, (*args[1:], *kwargs.values())))
            if not others and not _has_device_state(self):
                return method(self, *args, **kwargs)  # scikit-learn's own behaviour
            if dispatch and kind == "read" and _has_device_state(self):
                _refuse_other_place(self, name, X, None)
            return _call_host(self, method, kind, args, kwargs, None)
        xp, device = _where(X)
        _check_namespace(xp, "X")
        if kind == "read" and dispatch:
            _refuse_other_place(self, name, X, (xp, device))
        return _call_host(self, method, kind, args, kwargs, (xp, device, _max_float(xp, device)))

    follow._kernelkit_follows = True
    return follow


def _refuse_other_place(est, method, X, where):
    """scikit-learn's rule under array API dispatch: a fitted model is used with inputs of the
    namespace and device it was fitted on."""
    fitted = _model_where(est)
    if fitted is None and (where is None or not _holds_host_arrays(est)) \
            or fitted is not None and where is not None and _same_place(fitted, where):
        return  # same place, or a model with no fitted arrays to tell where it lives
    got = "NumPy" if where is None else f"{_ns_name(where[0])} on device {where[1]}"
    had = "NumPy" if fitted is None else f"{_ns_name(fitted[0])} on device {fitted[1]}"
    raise ValueError(f"Inputs passed to {type(est).__name__}.{method}() must use the same "
                     f"namespace and the same device as those passed to fit(): X is {got}, "
                     f"the model was fitted on {had}. Move X there, or refit; a model pickled "
                     "and loaded again holds NumPy arrays (and outside array_api_dispatch a "
                     "model fitted on a device predicts on NumPy input).")


class ArrayAPIMixin(HostPickleMixin):
    """Estimator mixin: results follow the input, as scikit-learn's array API dispatch does.

    With ``sklearn.set_config(array_api_dispatch=True)`` (and for CuPy input always),
    the public methods listed in :data:`FOLLOWED_METHODS` take arrays of any array API
    namespace and device: the call computes on host (NumPy) views of its inputs (the
    kernel blocks on the CuPy engine for CuPy input with ``backend="auto"``), fitted
    arrays are moved to the input's namespace and device, and results come back there.
    ``y`` and ``sample_weight`` follow ``X``. NumPy input, and any input without
    dispatch, goes straight through (scikit-learn's behaviour: converted to NumPy).
    Pickling stores host arrays. Put it before :class:`sklearn.base.BaseEstimator`.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name, kind in FOLLOWED_METHODS.items():
            method = inspect.getattr_static(cls, name, None)
            if isinstance(method, _AvailableIfDescriptor):  # keep hasattr's answer
                if not getattr(method.fn, "_kernelkit_follows", False):
                    setattr(cls, name, _AvailableIfDescriptor(
                        _follow(name, method.fn, kind), method.check, method.attribute_name))
            elif callable(method) and not getattr(method, "_kernelkit_follows", False):
                setattr(cls, name, _follow(name, method, kind))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.array_api_support = True
        return tags
