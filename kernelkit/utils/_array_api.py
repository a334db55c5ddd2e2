"""Results follow the input: array namespaces, moving arrays, host state for pickling.

kernelkit follows scikit-learn's array API dispatch: NumPy in, NumPy out; CuPy
(or any array API namespace) in, the same namespace out. The helpers here are
the one place that decides

* which namespace the inputs of a call live in (:func:`array_namespace`),
* how a result is moved back there (:func:`to_namespace`, :func:`follow_input`),
* how device-resident fitted attributes reach the host when an estimator is
  pickled (:func:`state_to_host`, :class:`HostPickleMixin`), so that a model
  fitted on a GPU loads on a machine without one.

Host (NumPy) inputs and plain Python sequences are "host"; an array whose type
is not ``numpy.ndarray`` but which has ``__array_namespace__`` (CuPy,
array-api-strict, ...) is a "device" array of that namespace.
"""

import numpy as np

from ..backend import is_cupy_array

__all__ = ["array_namespace", "is_host_namespace", "is_device_array", "to_host",
           "to_namespace", "follow_input", "state_to_host", "HostPickleMixin"]


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
    return is_cupy_array(a) or hasattr(a, "__array_namespace__")


def _namespace_of(a):
    if not is_device_array(a):
        return np
    if is_cupy_array(a):  # CuPy before v14 has no __array_namespace__ on every array
        import cupy

        return cupy
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
