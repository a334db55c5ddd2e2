"""The one probability calibration behind every ridge-type classifier's ``predict_proba``.

A one-vs-all (or two-class) decision function ``s(x)`` becomes probabilities by a
softmax at one inverse temperature ``beta > 0``,

    p_k(x) = exp(beta s_k(x)) / sum_j exp(beta s_j(x)),

with ``beta`` fitted by minimising the (weighted) log-loss of *out-of-sample*
decision values: leave-one-out values where the solver gives them cheaply, otherwise
a held-out split. One positive scale never changes the arg-max, so
``argmax(predict_proba) == predict`` holds by construction; for two classes the map
is ``sigmoid(beta s)``, Platt scaling without an intercept (an intercept would move
the decision threshold). This is "temperature scaling" (Guo, Pleiss, Sun & Weinberger,
"On Calibration of Modern Neural Networks", ICML 2017); the log-loss is convex in
``beta``, so its minimiser is unique.
"""

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax

# beta is searched over [1e-6, 1e6] / (score scale): beyond, the map is a step or flat
_LOG_BETA_RANGE = 6.0 * np.log(10.0)


def class_scores(decision):
    """Decision values as one column per class: a 1-D two-class ``d`` becomes
    ``[-d / 2, d / 2]``, so that the softmax of ``beta`` times it is ``sigmoid(beta d)``."""
    decision = np.asarray(decision, dtype=np.float64)
    if not np.all(np.isfinite(decision)):
        raise ValueError("The decision values contain NaN or infinity; the model cannot "
                         "give probabilities for these rows.")
    if decision.ndim == 1:
        return np.column_stack([-0.5 * decision, 0.5 * decision])
    return decision


def _loss(beta, S, y_idx, w):
    logp = log_softmax(beta * S, axis=1)
    return -float(np.dot(w, logp[np.arange(len(y_idx)), y_idx]))


def fit_temperature(decision, y_idx, sample_weight=None):
    """The inverse temperature that minimises the log-loss of ``softmax(beta * scores)``.

    Parameters
    ----------
    decision : ndarray of shape (n,) or (n, n_classes)
        Out-of-sample decision values (positive for the second class when 1-D).
    y_idx : ndarray of shape (n,), int
        Index of each row's true class.
    sample_weight : ndarray of shape (n,) or None

    Returns
    -------
    beta : float > 0
    """
    S = class_scores(decision)
    y_idx = np.asarray(y_idx, dtype=np.intp)
    w = np.ones(len(S)) if sample_weight is None else np.asarray(sample_weight, float)
    w = w / w.sum()
    # scores relative to their own spread keep the search interval scale-free
    scale = float(np.std(S - S.mean(axis=1, keepdims=True)))
    if not scale > 0:
        return 1.0  # constant scores: every beta gives the same probabilities
    res = minimize_scalar(lambda t: _loss(np.exp(t) / scale, S, y_idx, w),
                          bounds=(-_LOG_BETA_RANGE, _LOG_BETA_RANGE), method="bounded",
                          options={"xatol": 1e-10})
    return float(np.exp(res.x) / scale)


def predict_log_proba_from(decision, beta):
    """``log softmax(beta * scores)``, stable for any finite score."""
    return log_softmax(beta * class_scores(decision), axis=1)
