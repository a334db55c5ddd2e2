"""Compute engines behind one switch.

An engine (an :class:`ArrayBackend`) evaluates kernels described by a
:class:`KernelSpec`: the kernel matrix ``k(X, Y)`` (``pairwise``), its row blocks
within ``working_memory`` (``pairwise_chunked``), the fused product
``k(X, Y) @ W`` (``matmul``) and the diagonal (``diag``). Engines: ``"numpy"`` (reference, always
available), ``"numba"`` (fused CPU kernels), ``"cupy"`` (GPU). Estimators store
the backend *name*; :func:`get_backend` turns it into an engine when computing.
"""

import importlib.util
from typing import NamedTuple

from .._config import BACKEND_NAMES, _check_backend_name, get_config
from ._array import KERNEL_NAMES, ArrayBackend

__all__ = [
    "KernelSpec", "ArrayBackend", "KERNEL_NAMES", "available_backends", "resolve_backend",
    "get_backend", "is_cupy_array",
]


class KernelSpec(NamedTuple):
    """What to compute: a kernel family ``name`` and its numeric ``params``.

    ``params`` by name: rbf, laplacian ``(gamma,)``; matern ``(gamma, nu)``;
    polynomial ``(gamma, degree, coef0)``; linear, cosine ``()``; ntk, nngp
    ``(depth, activation, w_std**2, b_std**2)``.
    """

    name: str
    params: tuple


def is_cupy_array(a):
    """Whether ``a`` is a CuPy array (checked without importing CuPy).

    Parameters
    ----------
    a : object

    Returns
    -------
    bool
    """
    return type(a).__module__.split(".")[0] == "cupy"


def _numba_installed():
    return importlib.util.find_spec("numba") is not None


def _cupy_usable():
    if importlib.util.find_spec("cupy") is None:
        return False, "CuPy is not installed (pip install 'kernelkit[cuda12]' or '[cuda13]')"
    try:
        import cupy

        if not cupy.cuda.is_available():
            return False, "CuPy is installed but no CUDA GPU is available"
    except Exception as exc:  # a broken CUDA install raises many kinds of errors
        return False, f"CuPy could not initialise CUDA ({exc})"
    return True, ""


def available_backends():
    """Names of the engines usable on this machine, reference first.

    Returns
    -------
    names : list of str
    """
    names = ["numpy"]
    if _numba_installed():
        names.append("numba")
    if _cupy_usable()[0]:
        names.append("cupy")
    return names


def resolve_backend(backend=None, *arrays, name="backend"):
    """Resolve a backend setting to a concrete engine name.

    Parameters
    ----------
    backend : {"auto", "numpy", "numba", "cupy"} or None
        None defers to :func:`kernelkit.get_config`. ``"auto"`` picks CuPy when any
        of ``arrays`` is a CuPy array, else Numba when installed, else NumPy.
    *arrays : array-like
        The inputs, inspected by ``"auto"``.
    name : str
        Argument name used in error messages.

    Returns
    -------
    engine : {"numpy", "numba", "cupy"}

    Raises
    ------
    ValueError
        If the name is unknown, or the named engine is not usable here.
    """
    if backend is None:
        backend = get_config()["backend"]
    _check_backend_name(backend, name)
    if backend == "auto":
        from ..utils._array_api import cupy_input_active  # an estimator call given CuPy input

        if cupy_input_active() or any(is_cupy_array(a) for a in arrays):
            return "cupy"
        return "numba" if _numba_installed() else "numpy"
    if backend == "numba" and not _numba_installed():
        raise ValueError(f"{name}='numba' but Numba is not installed; pip install numba.")
    if backend == "cupy":
        ok, why = _cupy_usable()
        if not ok:
            raise ValueError(f"{name}='cupy' is not usable: {why}. Use {name}='auto' or 'numba'.")
    return backend


_ENGINES = {}


def get_backend(backend=None, *arrays):
    """Return the engine object for a backend setting (see :func:`resolve_backend`).

    Parameters
    ----------
    backend : {"auto", "numpy", "numba", "cupy"} or None, default=None
    *arrays : array-like
        Inputs inspected by ``"auto"``.

    Raises
    ------
    ValueError
        As :func:`resolve_backend`.

    Returns
    -------
    engine : ArrayBackend
    """
    name = resolve_backend(backend, *arrays)
    if name not in _ENGINES:
        if name == "numpy":
            from ._numpy import NumpyBackend as cls
        elif name == "numba":
            from ._numba import NumbaBackend as cls
        else:
            from ._cupy import CupyBackend as cls
        _ENGINES[name] = cls()
    return _ENGINES[name]


assert set(BACKEND_NAMES) == {"auto", "numpy", "numba", "cupy"}
