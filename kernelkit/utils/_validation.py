"""Input and parameter validation with errors that name the argument."""

import math
from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_array

from ..backend import is_cupy_array
from ._array_api import is_device_array, to_host


def check_input(X, name="X", min_samples=1):
    """Validate a 2-D finite float array; float32 stays float32, the rest becomes float64.

    CuPy arrays are checked on their device and returned as CuPy arrays.

    Raises
    ------
    ValueError
        On NaN/inf, fewer than ``min_samples`` rows, no column, or not 2-D.
    """
    if is_cupy_array(X):
        import cupy as cp

        if X.ndim != 2:
            raise ValueError(f"Expected a 2D array for {name}, got {X.ndim}D; reshape it.")
        if X.shape[0] < min_samples or X.shape[1] < 1:
            raise ValueError(f"{name} has shape {X.shape}; need at least {min_samples} "
                             "sample(s) and 1 feature.")
        if X.dtype not in (cp.float32, cp.float64):
            X = X.astype(cp.float64)
        if not bool(cp.isfinite(X).all()):
            raise ValueError(f"Input {name} contains NaN or infinity.")
        return X
    if is_device_array(X):  # another namespace: computed on the host (its float32 kept,
        X = to_host(X)      # and scikit-learn's array-API dispatch not involved)
    return check_array(X, dtype=[np.float64, np.float32], input_name=name,
                       ensure_min_samples=min_samples)


def check_pair(X, Y, x_name="X", y_name="Y"):
    """Validate ``X`` and optional ``Y`` with matching feature counts.

    Returns
    -------
    X, Y : arrays (``Y`` None when given None)
    """
    X = check_input(X, x_name)
    if Y is None:
        return X, None
    Y = check_input(Y, y_name)
    if X.shape[1] != Y.shape[1]:
        raise ValueError(f"{y_name} has {Y.shape[1]} features but {x_name} has "
                         f"{X.shape[1]}; they must have the same number of columns.")
    return X, Y


def check_scalar_param(value, name, *, low=None, low_inclusive=False, allow_none=False,
                       integer=False):
    """Check a numeric parameter; return it as float (or int when ``integer``).

    Raises
    ------
    ValueError
        If ``value`` is not a finite number (an integer when ``integer``) above ``low``.
    """
    if value is None and allow_none:
        return None
    kind = Integral if integer else Real
    if isinstance(value, bool) or not isinstance(value, kind) or not math.isfinite(value):
        what = "an integer" if integer else "a finite real number"
        raise ValueError(f"{name} must be {what}, got {value!r}.")
    if low is not None and (value < low or (value == low and not low_inclusive)):
        op = ">=" if low_inclusive else ">"
        raise ValueError(f"{name} must be {op} {low}, got {value!r}.")
    return int(value) if integer else float(value)


def check_weights(w, n, name="sample_weight"):
    """The one weight normaliser: non-negative weights scaled to sum 1, without overflow.

    Scaled by their largest value before summing, so weights near the float64 maximum
    (whose plain sum overflows to inf) normalise exactly as any multiple of them would.

    Parameters
    ----------
    w : array-like of shape (n,) or None
        Weights (NumPy or CuPy); None means equal weights.
    n : int
        Expected length.
    name : str
        Argument name for the error messages.

    Returns
    -------
    w : ndarray of shape (n,), float64, summing to 1 (None when ``w`` is None)

    Raises
    ------
    ValueError
        If ``w`` is not a numeric 1-D array of length ``n``, has NaN/inf or negative
        entries, or sums to 0.
    """
    if w is None:
        return None
    w = np.asarray(w.get() if is_cupy_array(w) else w)
    if w.ndim != 1 or w.shape[0] != n:
        raise ValueError(f"{name} must be a 1-D array of length {n} (one weight per row), got "
                         f"shape {w.shape}.")
    if w.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be numeric, got dtype {w.dtype}.")
    w = w.astype(np.float64)
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"{name} must be finite and non-negative.")
    top = w.max()
    if not top > 0:
        raise ValueError(f"{name} must have a positive sum.")
    w = w / top  # in [0, 1]: the sum is at most n, no overflow
    return w / w.sum()


def check_bool(value, name):
    """A boolean parameter: ``True``/``False`` (NumPy bools too), nothing else.

    Raises
    ------
    TypeError
        If ``value`` is not a bool (a string such as "no" would otherwise be truthy).
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be True or False, got {value!r}.")


_PSD_SAMPLE = 1000  # rows of the principal submatrix whose smallest eigenvalue is checked


def check_kernel_matrix(K, name="X", *, square=True):
    """The one rule for a kernel matrix: finite, symmetric and positive semi-definite.

    Used for ``kernel="precomputed"`` inputs and for Gram matrices of callable kernels
    alike, so that every estimator accepts and rejects the same matrices.
    Symmetry to ``rtol=1e-7`` (``atol = 1e-10 max|K|``); PSD: the smallest eigenvalue
    of a regular sample of at most 1000 rows' principal submatrix (PSD whenever ``K``
    is) is at least ``-1e-8 max|K| k`` for ``k`` sampled rows (round-off of a PSD
    kernel's Gram matrix stays far below that).

    Parameters
    ----------
    K : ndarray of shape (n, n)
    name : str
        Argument name for the messages.
    square : bool, default=True
        Whether to check the shape (False when the caller already has).

    Returns
    -------
    lam_min : float
        The smallest sampled eigenvalue.

    Raises
    ------
    ValueError
        If ``K`` is not square, has NaN/inf, or is not symmetric PSD.
    """
    from scipy import linalg

    K = np.asarray(K)
    if square and (K.ndim != 2 or K.shape[0] != K.shape[1]):
        raise ValueError(f"kernel='precomputed' needs a square {name} (the n x n kernel "
                         f"matrix), got shape {K.shape}.")
    if not np.all(np.isfinite(K)):
        raise ValueError(f"the kernel matrix {name} has NaN or infinite entries.")
    n = K.shape[0]
    scale = max(float(np.abs(K).max()) if K.size else 0.0, np.finfo(np.float64).tiny)
    if not np.allclose(K, K.T, rtol=1e-7, atol=1e-10 * scale):
        raise ValueError(f"the kernel matrix {name} is not symmetric (k(x, y) != k(y, x)): a "
                         "kernel matrix must be symmetric positive semi-definite.")
    rows = np.unique(np.linspace(0, n - 1, min(n, _PSD_SAMPLE)).astype(np.int64))
    sub = np.asarray(K[np.ix_(rows, rows)], dtype=np.float64)
    sub = 0.5 * (sub + sub.T)
    lam_min = float(linalg.eigvalsh(sub, subset_by_index=[0, 0], check_finite=False)[0])
    low = min(lam_min, float(np.diagonal(K).min()))
    if low < -1e-8 * scale * len(rows):
        raise ValueError(f"the kernel matrix {name} is not positive semi-definite (eigenvalue "
                         f"{low:.3g}): a kernel matrix must be symmetric and positive "
                         "semidefinite; check the kernel and its parameters.")
    return lam_min


def check_client(client):
    """The ``client`` parameter alone (no connection): None, a scheduler address string or
    a ``dask.distributed.Client``."""
    if client is not None and not isinstance(client, str) and \
            type(client).__module__.split(".")[0] != "distributed":
        raise ValueError(f"client must be None, a dask.distributed.Client or a scheduler "
                         f"address string, got {client!r}.")
    return client
