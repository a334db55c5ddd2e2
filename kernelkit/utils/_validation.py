"""Input and parameter validation with errors that name the argument."""

import math
from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_array

from ..backend import is_cupy_array


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
