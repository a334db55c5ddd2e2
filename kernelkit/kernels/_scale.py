"""A warning for a kernel whose length scale does not fit the data.

A decaying stationary kernel (Gaussian, Laplacian, Matérn) with a ``gamma`` far too
large for the features' scale is numerically the identity matrix on the training rows:
every row is its own only neighbour, the model interpolates its labels and predicts
(near) nothing elsewhere: on scikit-learn's raw breast_cancer (features up to
thousands) at ``gamma = 1 / n_features``, or raw 0-255 pixels at ``gamma = 0.02``
(every value between distinct rows underflows to 0). Nothing fails, so the estimators
check once per fit (dense rows; a stream: its first batch of ten rows or more):
between each of up to 128 evenly spaced training rows and its nearest neighbour among
up to 2,048 evenly spaced ones (all of them up to that size), the median kernel value
(identical rows do not count as neighbours) must be at least ``floor``; fewer than 10
distinct rows are not checked. Sampled neighbours lie farther apart than all the
rows' (on 3,000 sorted points in one dimension, 256 of them: twelve times), hence the
larger set; about 10 ms on 784 features. Measured at ``gamma = 1 / n_features``: 0.27-1
on scikit-learn's bundled sets standardised and on Fashion-MNIST pixels in [0, 1]
(gamma up to 0.05); 2e-6 (breast_cancer), 1.5e-3 (digits, wine) raw, 0 on 0-255
pixels. A random-feature map resolves values down to about its Monte Carlo error
``1 / sqrt(2 D)`` only, so it passes that as its floor.

The opposite case, ``gamma`` far too small (features of scale 1e-20 at ``gamma = 1 /
n_features``), makes the kernel matrix numerically constant: the model predicts one
value everywhere. The same rows then warn where the median kernel value to the farthest
sampled row is within ``CONSTANT_GAP`` (1e-6) of 1; standardised data at ``gamma = 1 /
n_features`` stays far from it.
"""

import os
import sys
import warnings

import numpy as np

from ..exceptions import DegenerateKernelWarning
from ._library import RBF, Laplacian, Matern, _gamma
from ._resolve import KernelOperator

_PACKAGE_NAME = __name__.split(".")[0] + "."  # kernelkit's estimators name the warning
_PACKAGES = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep  # frames skipped
                  for m in (sys.modules[__name__.split(".")[0]], __import__("sklearn")))
SCALE_FLOOR = 1e-2  # the median nearest-neighbour kernel value below which fit warns
# ... and the median farthest-row value's distance to 1 below which it warns (the kernel's
# whole variation on the data below float32's resolution: a constant matrix)
CONSTANT_GAP = 1e-6
_SAMPLE, _NEIGHBOURS, _MIN_ROWS = 128, 2048, 10  # ~10 ms at 784 features


def _rows(n, m):
    return np.unique(np.linspace(0, n - 1, min(m, n)).astype(np.intp))


def _row_ids(A):
    """One integer per distinct row of ``A`` (by its bytes: ``np.unique(axis=0)`` sorts
    the rows, 0.26 s for 4,352 rows of 784 features against a few ms)."""
    seen = {}
    return np.array([seen.setdefault(row.tobytes(), len(seen)) for row in A], dtype=np.intp)


def nearest_kernel_value(op, X):
    """Median, over up to ``_SAMPLE`` evenly spaced rows of ``X``, of the kernel value to
    the nearest of up to ``_NEIGHBOURS`` evenly spaced rows that differ from it (``op``:
    a :class:`KernelOperator` or a kernel, evaluated by the NumPy engine).

    None where it does not apply or cannot be read: not a decaying stationary kernel,
    not a dense NumPy ``X``, fewer than ``_MIN_ROWS`` distinct rows, or rows whose
    kernel values overflow (the estimator reports those itself).
    """
    values = kernel_value_range(op, X)
    return None if values is None else values[0]


def kernel_value_range(op, X):
    """``(nearest, farthest)``: :func:`nearest_kernel_value`, and the median over the same
    rows of the kernel value to the farthest of the sampled rows; None as there."""
    op = _operator(op, X)
    if op is None or not isinstance(op.kernel, (RBF, Laplacian, Matern)):
        return None
    if not isinstance(X, np.ndarray) or X.ndim != 2 or X.shape[0] < _MIN_ROWS:
        return None
    T = np.asarray(X[_rows(X.shape[0], _NEIGHBOURS)], np.float64)
    S = T[_rows(T.shape[0], _SAMPLE)] if T.shape[0] > _SAMPLE else T
    ids = _row_ids(np.vstack([S, T]))
    if np.unique(ids[len(S):]).size < _MIN_ROWS:
        return None
    try:
        with np.errstate(all="ignore"):
            K = op.block_host(S, T)
    except (ValueError, FloatingPointError, OverflowError):
        return None
    far = float(np.median(K.min(axis=1)))
    K[ids[:len(S), None] == ids[None, len(S):]] = -np.inf  # a row and its copies
    return float(np.median(K.max(axis=1))), far


def check_kernel_scale(op, X, owner, floor=SCALE_FLOOR, resolution=None, advice=None):
    """Warn (:class:`~kernelkit.exceptions.DegenerateKernelWarning`) when ``op``'s
    kernel is nearly the identity on the training rows ``X`` (see the module notes).

    Parameters
    ----------
    op : KernelOperator or Kernel
    X : ndarray of shape (n_samples, n_features)
        The training rows (anything else is not checked).
    owner : str
        The estimator's name, for the message (the outermost kernelkit estimator whose
        fit is running takes its place: a CV search's, not its refit's).
    floor : float
        The smallest acceptable median nearest-neighbour kernel value.
    resolution : str or None
        Why the floor is what it is, when it is not :data:`SCALE_FLOOR`.
    advice : str or None
        A remedy beside standardising ``X`` and lowering gamma.

    Returns
    -------
    value : float or None
        The median nearest-neighbour kernel value (None where not checked).
    """
    op = _operator(op, X)
    values = kernel_value_range(op, X)
    if values is None:
        return None
    value, far = values
    found = []
    if 1.0 - far < CONSTANT_GAP:
        found.append(
            f"nearly constant on the training rows: between a row and the farthest sampled "
            f"row its median value is 1 - {1.0 - far:.3g}, within {CONSTANT_GAP:g} of 1. "
            "The model then predicts close to one value everywhere. gamma does not fit the "
            "features' scale: standardise X (sklearn.preprocessing.StandardScaler) or raise "
            "gamma.")
    if value < floor:
        why = resolution or "a kernel that sees neighbours is well above it"
        found.append(
            f"nearly the identity matrix on the training rows: between a row and its nearest "
            f"neighbour its median value is {value:.3g}, below {floor:.3g} ({why}). The model "
            "then only interpolates its training labels and predicts close to nothing "
            "elsewhere. gamma does not fit the features' scale: standardise X "
            f"(sklearn.preprocessing.StandardScaler){advice or ''} or lower gamma.")
    if found:
        gamma = _gamma(op.kernel.gamma, op.n_features)
        level, outer = _caller()
        for text in found:
            warnings.warn(f"{outer or owner}: with gamma={gamma:.4g} the "
                          f"{type(op.kernel).__name__} kernel is {text}",
                          DegenerateKernelWarning, stacklevel=level)
    return value


def _operator(op, X):
    """``op`` as a :class:`KernelOperator` (a kernel: on the NumPy engine); None stays
    None (``kernel="precomputed"``)."""
    if op is None or isinstance(op, KernelOperator):
        return op
    return KernelOperator(op, X.shape[1] if getattr(X, "ndim", 0) == 2 else 1, "numpy")


def _caller():
    """``(stacklevel, name)`` for a warning raised by the function that calls this: the
    first frame outside kernelkit and scikit-learn (the user's line, not a Pipeline's
    or a CV search's), and the class of the outermost kernelkit estimator whose method
    is running (None if none is found)."""
    frame, level, name = sys._getframe(2), 2, None
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGES):
        owner = frame.f_locals.get("self")
        if type(owner).__module__.startswith(_PACKAGE_NAME) and hasattr(owner, "get_params"):
            name = type(owner).__name__
        frame, level = frame.f_back, level + 1
    return level, name

