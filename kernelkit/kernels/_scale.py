"""A warning for a kernel whose length scale does not fit the data.

A decaying stationary kernel (Gaussian, Laplacian, Matérn) with a ``gamma`` far too
large for the features' scale is numerically the identity matrix on the training rows:
every row is its own only neighbour, the model interpolates its labels and predicts
(near) nothing elsewhere: on scikit-learn's raw breast_cancer (features up to
thousands) at ``gamma = 1 / n_features``, or raw 0-255 pixels at ``gamma = 0.02``
(every value between distinct rows underflows to 0). Nothing fails, so the estimators
check once per fit: between each of up to 256 evenly spaced training rows and its
nearest neighbour among them, the median kernel value (1 for identical rows, which are
dropped first) must be at least ``floor``. Measured at ``gamma = 1 / n_features``: 0.27-1
on scikit-learn's bundled sets standardised and on Fashion-MNIST pixels in [0, 1]
(gamma up to 0.05); 2e-6 (breast_cancer), 1.5e-3 (digits, wine) raw, 0 on 0-255
pixels. A random-feature map resolves values down to about its Monte Carlo error
``1 / sqrt(2 D)`` only, so it passes that as its floor.
"""

import os
import sys
import warnings

import numpy as np

from ..exceptions import DegenerateKernelWarning
from ._library import RBF, Laplacian, Matern, _gamma
from ._resolve import KernelOperator

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCALE_FLOOR = 1e-2  # the median nearest-neighbour kernel value below which fit warns
_SAMPLE = 256


def nearest_kernel_value(op, X):
    """Median over up to ``_SAMPLE`` evenly spaced distinct rows of ``X`` of the kernel
    value to the nearest other one (``op``: a :class:`KernelOperator` or a kernel,
    evaluated by the NumPy engine); None when it does not apply (not a decaying
    stationary kernel, not a dense NumPy ``X``, fewer than two distinct rows)."""
    op = _operator(op, X)
    if op is None or not isinstance(op.kernel, (RBF, Laplacian, Matern)):
        return None
    if not isinstance(X, np.ndarray) or X.ndim != 2 or X.shape[0] < 2:
        return None
    rows = np.unique(np.linspace(0, X.shape[0] - 1, min(_SAMPLE, X.shape[0])).astype(np.intp))
    S = np.unique(np.asarray(X[rows], np.float64), axis=0)
    if S.shape[0] < 2:
        return None
    K = op.block_host(S)
    np.fill_diagonal(K, -np.inf)
    return float(np.median(K.max(axis=1)))


def check_kernel_scale(op, X, owner, floor=SCALE_FLOOR, resolution=None):
    """Warn (:class:`~kernelkit.exceptions.DegenerateKernelWarning`) when ``op``'s
    kernel is nearly the identity on the training rows ``X`` (see the module notes).

    Parameters
    ----------
    op : KernelOperator or Kernel
    X : ndarray of shape (n_samples, n_features)
        The training rows (anything else is not checked).
    owner : str
        The estimator's name, for the message.
    floor : float
        The smallest acceptable median nearest-neighbour kernel value.
    resolution : str or None
        Why the floor is what it is, when it is not :data:`SCALE_FLOOR`.

    Returns
    -------
    value : float or None
        The median nearest-neighbour kernel value (None where not checked).
    """
    op = _operator(op, X)
    value = nearest_kernel_value(op, X)
    if value is not None and value < floor:
        gamma = _gamma(op.kernel.gamma, op.n_features)
        why = resolution or "a kernel that sees neighbours is well above it"
        warnings.warn(
            f"{owner}: with gamma={gamma:.4g} the {type(op.kernel).__name__} kernel is nearly "
            f"the identity matrix on the training rows: between a row and its nearest "
            f"neighbour among {_SAMPLE} sampled rows its median value is {value:.3g}, below "
            f"{floor:.3g} ({why}). The model then only interpolates its training labels and "
            "predicts close to nothing elsewhere. gamma does not fit the features' scale: "
            "standardise X (sklearn.preprocessing.StandardScaler) or lower gamma.",
            DegenerateKernelWarning, stacklevel=_user_stacklevel())
    return value


def _operator(op, X):
    """``op`` as a :class:`KernelOperator` (a kernel: on the NumPy engine); None stays
    None (``kernel="precomputed"``)."""
    if op is None or isinstance(op, KernelOperator):
        return op
    return KernelOperator(op, X.shape[1] if getattr(X, "ndim", 0) == 2 else 1, "numpy")


def _user_stacklevel():
    """The ``stacklevel`` that names the first caller outside kernelkit (for a warning
    raised by the function that calls this)."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE + os.sep):
        frame, level = frame.f_back, level + 1
    return level
