"""Configuration: compute backend and working memory.

Mirrors :func:`sklearn.set_config` / :func:`sklearn.get_config` /
:func:`sklearn.config_context`. :func:`set_config` changes the process-wide
defaults (seen by every thread); :func:`config_context` overrides them for the
current thread only, inside a ``with`` block. New processes (e.g. joblib's loky
workers in ``GridSearchCV(n_jobs=...)``) start from the defaults, read from the
environment variables ``KERNELKIT_BACKEND`` and ``KERNELKIT_WORKING_MEMORY`` when
set: to choose an engine for parallel searches, pass ``backend=`` to the estimator
or set the environment variable.
"""

import os
import threading
import warnings
from contextlib import contextmanager
from numbers import Real

BACKEND_NAMES = ("auto", "numpy", "numba", "cupy")
MAX_WORKING_MEMORY = 2.0**30  # MiB (1 PiB): beyond it block sizes stop being numbers


def _check_backend_name(backend, name="backend"):
    if not isinstance(backend, str) or backend not in BACKEND_NAMES:
        raise ValueError(f"{name} must be one of {BACKEND_NAMES} or None, got {backend!r}.")


def _check_working_memory(working_memory):
    if (
        isinstance(working_memory, bool)
        or not isinstance(working_memory, Real)
        or not 0 < working_memory <= MAX_WORKING_MEMORY
    ):
        raise ValueError(f"working_memory must be a number of MiB in (0, {MAX_WORKING_MEMORY:g}]"
                         f", got {working_memory!r}.")


def _defaults_from_environment():
    """Defaults, from KERNELKIT_BACKEND / KERNELKIT_WORKING_MEMORY when set.

    Raises
    ------
    ValueError
        If a variable is set to an invalid value (the message names it).
    """
    config = {"backend": "auto", "working_memory": 256}
    backend = os.environ.get("KERNELKIT_BACKEND")
    if backend is not None:
        if backend not in BACKEND_NAMES:
            raise ValueError(f"environment variable KERNELKIT_BACKEND must be one of "
                             f"{BACKEND_NAMES}, got {backend!r}.")
        config["backend"] = backend
    memory = os.environ.get("KERNELKIT_WORKING_MEMORY")
    if memory is not None:
        try:
            config["working_memory"] = float(memory)
            _check_working_memory(config["working_memory"])
        except ValueError:
            raise ValueError("environment variable KERNELKIT_WORKING_MEMORY must be a number "
                             f"of MiB in (0, {MAX_WORKING_MEMORY:g}], got {memory!r}.") from None
    return config


def _initial_config():
    try:
        return _defaults_from_environment()
    except ValueError as exc:  # a bad variable must not make `import kernelkit` fail
        warnings.warn(f"{exc} Using the defaults.", RuntimeWarning, stacklevel=2)
        return {"backend": "auto", "working_memory": 256}


_global = _initial_config()
_local = threading.local()  # per-thread overrides from config_context


def get_config():
    """Return a copy of the configuration in force in this thread.

    Returns
    -------
    config : dict
        ``{"backend": str, "working_memory": float}``. ``backend`` is one of
        ``"auto"``, ``"numpy"``, ``"numba"``, ``"cupy"``; ``working_memory`` is the
        memory budget, in MiB, of the blocks of a kernel matrix computed blockwise.
    """
    return {**_global, **getattr(_local, "overrides", {})}


def _validated(backend, working_memory):
    changes = {}
    if backend is not None:
        _check_backend_name(backend)
        changes["backend"] = backend
    if working_memory is not None:
        _check_working_memory(working_memory)
        changes["working_memory"] = working_memory
    return changes


def set_config(backend=None, working_memory=None):
    """Set the process-wide kernelkit configuration (every thread sees it).

    Parameters
    ----------
    backend : {"auto", "numpy", "numba", "cupy"}, default=None
        Compute engine used by estimators and kernels whose own ``backend`` is None.
        ``"auto"`` picks CuPy for CuPy input arrays, else Numba when installed, else
        NumPy. None leaves the setting unchanged.
    working_memory : float, default=None
        Budget in MiB for the blocks of a kernel matrix (as scikit-learn's
        ``working_memory``): kernel matrix-vector products and predictions never
        hold more than about this much kernel matrix at once. None leaves it unchanged.

    Raises
    ------
    ValueError
        If ``backend`` is not a known name or ``working_memory`` is not positive.
    """
    _global.update(_validated(backend, working_memory))


@contextmanager
def config_context(*, backend=None, working_memory=None):
    """Override the configuration in the current thread inside a ``with`` block.

    Parameters
    ----------
    backend : {"auto", "numpy", "numba", "cupy"}, default=None
        See :func:`set_config`.
    working_memory : float, default=None
        See :func:`set_config`.

    Yields
    ------
    None

    Raises
    ------
    ValueError
        As :func:`set_config`.

    Examples
    --------
    >>> import kernelkit
    >>> with kernelkit.config_context(backend="numpy"):
    ...     kernelkit.get_config()["backend"]
    'numpy'
    """
    changes = _validated(backend, working_memory)
    old = getattr(_local, "overrides", {})
    _local.overrides = {**old, **changes}
    try:
        yield
    finally:
        _local.overrides = old
