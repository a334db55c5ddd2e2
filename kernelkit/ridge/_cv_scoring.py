"""Parameters and scoring of the CV estimators: ``alphas`` (the default grid and its scale
per kernel), ``cv``, and the stand-in models through which any scikit-learn scorer scores
out-of-sample values computed by the algebra."""

import warnings
from inspect import signature
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin


# One decade apart from near-interpolation to strong smoothing, in units of the kernel's
# mean diagonal (alphas="auto"); see ALPHAS_DOC.
DEFAULT_ALPHAS = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0)

ALPHAS_DOC = """
    alphas : "auto" or array-like of float > 0, default="auto"
        Ridge penalties to try. ``"auto"``: the grid ``(1e-6, 1e-5, ..., 1, 10)``, one
        decade per step, times each kernel's scale, the mean of its diagonal on the
        training data ``sum_i w_i k(x_i, x_i) / sum_i w_i`` (``w`` the sample weights;
        ``trace(K) / n`` without them). A kernel matrix with diagonal ``c`` has
        eigenvalues between 0 and ``c n``, and alpha is the eigenvalue below which a
        direction is shrunk, so the grid runs from near-interpolation to strong
        smoothing whatever the kernel's units: for kernels with a unit diagonal (rbf,
        laplacian, matern) it is exactly ``(1e-6, ..., 10)``; for the linear kernel it
        scales with the mean ``||x||^2``, for polynomial, ntk and nngp with their own
        diagonal. Each candidate of ``param_grid`` or ``gamma_search`` gets the grid of
        its own scale (a polynomial's degree, an NTK's depth change it), and ``alphas_``
        holds the values scored. Points of this grid below the round-off level of a
        kernel matrix's eigenvalues (``10 n eps`` times the largest) are not scored
        for that kernel (NaN in ``scores_``) and do not warn. An array: those values,
        for every kernel alike; a value below the round-off level is scored and warns."""

CLASS_SCORING_DOC = """
    scoring : str, callable or None, default=None
        As :class:`KernelRidgeCV`, on the one-vs-all decision values (None: the
        squared residuals of their +-1 targets; accuracy for K-fold). A probability
        scorer (``"neg_log_loss"``, ``"neg_brier_score"``, ``"roc_auc_ovr"``) scores
        each candidate's out-of-sample values through the calibration map fitted on
        them: for the selected one, the map the refitted model calibrates with."""


def check_alphas(alphas):
    """``(alphas, default)``: the validated grid, and whether it is ``"auto"``'s (to be
    scaled per kernel by :func:`scaled_alphas`)."""
    if isinstance(alphas, str):
        if alphas == "auto":
            return np.asarray(DEFAULT_ALPHAS, dtype=np.float64), True
        raise ValueError(f"alphas must be 'auto' or a non-empty 1-D sequence of numbers > 0, "
                         f"got {alphas!r}.")
    a = np.asarray(alphas) if not np.isscalar(alphas) else np.asarray([alphas])
    if a.dtype.kind not in "iuf" or a.ndim != 1 or a.size == 0:
        raise ValueError(f"alphas must be 'auto' or a non-empty 1-D sequence of numbers > 0, "
                         f"got {alphas!r}.")
    a = a.astype(np.float64)
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError(f"alphas must be finite and > 0 (leave-one-out and GCV need a "
                         f"positive ridge penalty), got {alphas!r}.")
    return a, False


def scaled_alphas(alphas, diag, weights):
    """``alphas`` times the kernel's scale: the mean of its diagonal ``diag`` (weighted by
    ``weights``, None: unweighted). A diagonal of ones gives ``alphas`` exactly; a scale
    that is not finite and positive (a kernel vanishing on the data) leaves them as is."""
    diag = np.asarray(diag, dtype=np.float64)
    if weights is None:
        scale = float(np.mean(diag))
    else:
        scale = float(np.sum(weights * diag) / np.sum(weights))
    if not (np.isfinite(scale) and scale > 0):
        return alphas
    if scale * alphas.min() < np.finfo(np.float64).tiny:  # the grid would lose its digits
        raise ValueError(f"alphas='auto' scales its grid by the kernel's mean diagonal on X, "
                         f"{scale:.3g}: the smallest point, {scale * alphas.min():.3g}, is below "
                         f"float64's normal range; rescale X (e.g. StandardScaler) or pass "
                         f"alphas.")
    return alphas * scale


def check_cv_param(cv):
    """``"loo"``, ``"gcv"`` or the cv object for :func:`~sklearn.model_selection.check_cv`."""
    if cv is None:
        return "loo"
    if isinstance(cv, str):
        if cv == "gcv":
            return "gcv"
        raise ValueError(f"cv must be None (exact leave-one-out), 'gcv', an int >= 2, a "
                         f"splitter or an iterable of (train, test) splits; got {cv!r}.")
    if isinstance(cv, bool) or (isinstance(cv, Integral) and cv < 2):
        raise ValueError(f"cv as an int is the number of folds and must be >= 2, got {cv!r}.")
    if not (isinstance(cv, Integral) or hasattr(cv, "split") or hasattr(cv, "__iter__")):
        raise ValueError(f"cv must be None, 'gcv', an int, a splitter or an iterable of "
                         f"(train, test) splits; got {cv!r}.")
    return cv


def weight_params(scorer, sample_weight):
    """Scorer keyword arguments: the weights of the scored points, where the scorer takes
    them (as ``GridSearchCV`` forwards ``sample_weight``); a warning where it does not."""
    if sample_weight is None or scorer is None:
        return {}
    accept = getattr(scorer, "_accept_sample_weight", None)
    if accept() if accept is not None else "sample_weight" in signature(scorer).parameters:
        return {"sample_weight": sample_weight}
    warnings.warn(f"the scoring {scorer} does not take sample_weight: the validation scores "
                  "are unweighted.", UserWarning, stacklevel=4)
    return {}


class GivenRegressor(RegressorMixin, BaseEstimator):
    """A fitted-model stand-in whose ``predict(P)`` is ``P``, so that any scorer can score
    out-of-sample predictions computed by the algebra (as scikit-learn's ``RidgeCV``)."""

    def fit(self, X, y=None):
        return self

    def predict(self, X):
        return X


class GivenClassifier(ClassifierMixin, BaseEstimator):
    """As :class:`GivenRegressor` for one-vs-all decision values; with the true labels
    ``y`` (and their weights) also ``predict_proba``: the classifiers' calibration map
    (:func:`~kernelkit.utils._calibration.fit_calibration`) fitted on these
    out-of-sample values, so that probability scorers (``neg_log_loss``,
    ``neg_brier_score``, ``roc_auc_ovr``) score the probabilities the calibrated model
    would give them."""

    def __init__(self, classes=None, y=None, sample_weight=None):
        self.classes = classes
        self.y = y
        self.sample_weight = sample_weight

    def predict_proba(self, X):
        from ..utils._calibration import fit_calibration, predict_log_proba_from

        classes = np.asarray(self.classes)
        y_idx = np.searchsorted(classes, self.y)
        beta, slopes = fit_calibration(X, y_idx, self.sample_weight)
        return np.exp(predict_log_proba_from(X, beta, slopes))

    @property
    def classes_(self):
        return self.classes

    def fit(self, X, y=None):
        return self

    def decision_function(self, X):
        return X

    def predict(self, X):
        idx = (X > 0).astype(int) if X.ndim == 1 else X.argmax(axis=1)
        return self.classes[idx]


def squared_units(values, scale):
    """``values * scale**2``: squared errors computed on targets divided by ``scale`` back
    in the targets' units. Beyond float64's range (targets ~1e200) they are infinite: a
    ``RuntimeWarning`` says so (the selection itself was made in scaled units)."""
    with np.errstate(over="ignore"):
        out = np.asarray(values, dtype=np.float64) * np.asarray(scale, np.float64) ** 2
    if np.any(np.isinf(out) & np.isfinite(values)):
        warnings.warn(f"squared errors of targets of magnitude {np.max(scale):.3g} overflow "
                      "float64: the stored scores are infinite. The selection was made on "
                      "targets scaled to unit magnitude and is unaffected.", RuntimeWarning,
                      stacklevel=4)
    return out
