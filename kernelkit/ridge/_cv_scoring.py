"""Parameters and scoring of the CV estimators: ``alphas``, ``cv``, and the stand-in models
through which any scikit-learn scorer scores out-of-sample values computed by the algebra."""

import warnings
from inspect import signature
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin


def check_alphas(alphas):
    a = np.asarray(alphas) if not np.isscalar(alphas) else np.asarray([alphas])
    if a.dtype.kind not in "iuf" or a.ndim != 1 or a.size == 0:
        raise ValueError(f"alphas must be a non-empty 1-D sequence of numbers > 0, got "
                         f"{alphas!r}.")
    a = a.astype(np.float64)
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError(f"alphas must be finite and > 0 (leave-one-out and GCV need a "
                         f"positive ridge penalty), got {alphas!r}.")
    return a


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
    """As :class:`GivenRegressor` for one-vs-all decision values."""

    def __init__(self, classes=None):
        self.classes = classes

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
        out = np.asarray(values, dtype=np.float64) * np.float64(scale) ** 2
    if np.any(np.isinf(out) & np.isfinite(values)):
        warnings.warn(f"squared errors of targets of magnitude {scale:.3g} overflow float64: "
                      "the stored scores are infinite. The selection was made on targets "
                      "scaled to unit magnitude and is unaffected.", RuntimeWarning,
                      stacklevel=4)
    return out
