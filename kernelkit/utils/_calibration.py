"""The one probability calibration behind every ridge-type classifier's ``predict_proba``.

A one-vs-all (or two-class) decision function ``s(x)`` becomes probabilities by a
softmax at one inverse temperature ``beta > 0``,

    p_k(x) = exp(beta s_k(x)) / sum_j exp(beta s_j(x)),

with ``beta`` fitted by minimising the (weighted) log-loss of *out-of-sample*
decision values: exact leave-one-out values where they are cheap (kernel ridge up to
2,000 rows whatever its solver, FALKON's Nyström values on small problems), otherwise
a held-out split (drawn with a fixed seed when ``random_state`` is None), internal
folds or prequential values. One positive scale never changes the arg-max, so
``argmax(predict_proba) == predict`` holds by construction (where probabilities tie
to rounding while the scores do not, ``predict`` takes the first tied class, as
``argmax`` does: :meth:`~kernelkit.utils._classes.OneVsAllClassifierMixin._label_index`);
for two classes the map
is ``sigmoid(beta s)``, Platt scaling without an intercept (an intercept would move
the decision threshold). This is "temperature scaling" (Guo, Pleiss, Sun & Weinberger,
"On Calibration of Modern Neural Networks", ICML 2017); the log-loss is convex in
``beta``, so its minimiser is unique.

The targets are smoothed as Platt smooths his (Platt, "Probabilistic Outputs for
Support Vector Machines", 1999, sec. 2.2): each row aims at ``(N + 1) / (N + 2)`` for
its own class and shares the rest equally among the others, with ``N`` the weighted
number of calibration rows (weights act as repeated rows). Platt counts each class
apart, ``(N_c + 1) / (N_c + 2)``; with ten classes that caps the fitted confidence near
``(N/10 + 1) / (N/10 + 2)`` (0.93 on a held-out split of 135 digits, which raised
their test log-loss 2.3x), so the whole set's count is used. Without smoothing,
calibration rows that the scores separate perfectly (a small held-out split can)
drive ``beta`` to infinity and the probabilities to 0 and 1; with it ``beta`` stays
finite.

Two classes get one slope on each side of the decision threshold
(:func:`fit_calibration`): with ``d`` the decision value (positive for the second
class),

    p_1(x) = sigmoid(a_plus d(x))   where d(x) > 0,
    p_1(x) = sigmoid(a_minus d(x))  where d(x) <= 0,

with ``a_plus, a_minus > 0`` each minimising the same smoothed, weighted log-loss over
the rows on its side (the loss separates: a row's probability depends on its own
side's slope only). A score that is spread differently on the two sides (a one-vs-all
regression on an imbalanced problem, or one class more compact than the other) gets a
scale per side where one temperature is a compromise between them. Platt's intercept
also gives an asymmetric map, but it moves the threshold; these slopes do not:
``p_1 > 1/2`` exactly where ``d > 0``, so the arg-max is still the decision's. A side
with fewer than ``MIN_SIDE_ROWS`` positive-weight rows has too few values to fit a
slope of its own, and then both slopes are the temperature ``beta``. A problem that is
symmetric under ``d -> -d`` with the labels swapped gets ``a_plus == a_minus == beta``.
"""

import copy

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.utils import check_random_state

# beta is searched over [1e-6, 1e6] / (score scale): beyond, the map is a step or flat
_LOG_BETA_RANGE = 6.0 * np.log(10.0)
# two classes: a side of the threshold with fewer positive-weight rows keeps the temperature
MIN_SIDE_ROWS = 10


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


def platt_targets(y_idx, n_classes, sample_weight=None):
    """Smoothed targets: ``T[i, y_i] = (N + 1) / (N + 2)`` with ``N`` the weighted number
    of rows, the remainder spread over the other classes.

    Parameters
    ----------
    y_idx : ndarray of shape (n,), int
    n_classes : int >= 2
    sample_weight : ndarray of shape (n,) or None

    Returns
    -------
    T : ndarray of shape (n, n_classes), rows summing to 1
    """
    y_idx = np.asarray(y_idx, dtype=np.intp)
    w = np.ones(len(y_idx)) if sample_weight is None else np.asarray(sample_weight, float)
    count = float(np.sum(w))
    hit = (count + 1.0) / (count + 2.0)
    T = np.full((len(y_idx), n_classes), (1.0 - hit) / (n_classes - 1))
    T[np.arange(len(y_idx)), y_idx] = hit
    return T


def _loss(beta, S, T, w):
    return -float(np.dot(w, np.einsum("ij,ij->i", T, log_softmax(beta * S, axis=1))))


def fit_temperature(decision, y_idx, sample_weight=None):
    """The inverse temperature that minimises the log-loss of ``softmax(beta * scores)``
    against smoothed targets (:func:`platt_targets`).

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
    S, T, w, scale = _prepared(decision, y_idx, sample_weight)
    if not scale > 0:
        return 1.0  # constant scores: every beta gives the same probabilities
    return _minimise(S, T, w, scale)


def fit_calibration(decision, y_idx, sample_weight=None):
    """The temperature and, for two classes, the two slopes of the probability map.

    Parameters
    ----------
    decision : ndarray of shape (n,) or (n, n_classes)
        Out-of-sample decision values; 1-D for two classes (positive for the second).
    y_idx : ndarray of shape (n,), int
        Index of each row's true class.
    sample_weight : ndarray of shape (n,) or None
        Row weights with a positive sum; a zero-weight row does not count.

    Returns
    -------
    beta : float > 0
        :func:`fit_temperature`'s inverse temperature.
    slopes : ndarray of shape (2,) or None
        For 1-D ``decision``: ``[a_minus, a_plus]``, the slopes of ``sigmoid(a d)``
        where ``d <= 0`` and where ``d > 0`` (index: the class that side predicts),
        each minimising the smoothed log-loss (the targets and weights of ``beta``'s)
        over the rows on its side; both ``beta`` when a side has fewer than
        ``MIN_SIDE_ROWS`` positive-weight rows or the values are constant. None for
        2-D ``decision``.
    """
    S, T, w, scale = _prepared(decision, y_idx, sample_weight)
    beta = _minimise(S, T, w, scale) if scale > 0 else 1.0
    if np.ndim(decision) != 1:
        return beta, None
    slopes = np.full(2, beta)
    d = S[:, 1]  # d / 2: the decision's sign
    sides = ((d < 0) & (w > 0), (d > 0) & (w > 0))  # a row at d == 0 is 1/2 whatever a is
    if scale > 0 and min(np.count_nonzero(side) for side in sides) >= MIN_SIDE_ROWS:
        for k, side in enumerate(sides):
            slopes[k] = _minimise(S[side], T[side], w[side], scale)
    return beta, slopes


def _prepared(decision, y_idx, sample_weight):
    """Class-column scores, smoothed targets, weights summing to 1 and the scores'
    spread (0 when every row's scores are equal)."""
    S = class_scores(decision)
    y_idx = np.asarray(y_idx, dtype=np.intp)
    w = np.ones(len(S)) if sample_weight is None else np.asarray(sample_weight, float)
    T = platt_targets(y_idx, S.shape[1], w)
    w = w / w.sum()
    # scores relative to their own spread keep the search interval scale-free
    scale = float(np.std(S - S.mean(axis=1, keepdims=True)))
    return S, T, w, scale


def _minimise(S, T, w, scale):
    """argmin over ``beta > 0`` of :func:`_loss`: a bounded search on ``log(beta *
    scale)`` within +-``_LOG_BETA_RANGE``, then Newton steps to the root."""
    res = minimize_scalar(lambda t: _loss(np.exp(t) / scale, S, T, w),
                          bounds=(-_LOG_BETA_RANGE, _LOG_BETA_RANGE), method="bounded",
                          options={"xatol": 1e-10})
    return _newton_polish(float(np.exp(res.x) / scale), S, T, w)


def _newton_polish(beta, S, T, w, steps=3):
    """A few Newton steps on the convex 1-D objective: Brent's search stops where the
    loss is flat to rounding (about 1e-8 relative in beta), Newton on its derivative
    ``sum_i w_i (E_p[s_i] - T_i . s_i)`` (curvature ``sum_i w_i Var_p[s_i]``) reaches
    the root to rounding, so equal problems (weights vs repeated rows) agree."""
    target = np.einsum("ij,ij->i", T, S)
    for _ in range(steps):
        P = np.exp(log_softmax(beta * S, axis=1))
        mean = np.einsum("ij,ij->i", P, S)
        grad = float(np.dot(w, mean - target))
        curv = float(np.dot(w, np.einsum("ij,ij->i", P, S * S) - mean**2))
        if not curv > 0:
            break
        new = beta - grad / curv
        if not new > 0 or not np.isfinite(new):
            break
        done = abs(new - beta) <= 1e-15 * beta
        beta = new
        if done:
            break
    return beta


def predict_log_proba_from(decision, beta, slopes=None):
    """``log softmax(beta * scores)``, stable for any finite score; for 1-D (two-class)
    ``decision`` and ``slopes = [a_minus, a_plus]``, ``log sigmoid(-+a d)`` with
    ``a = a_plus`` where ``d > 0``, else ``a_minus`` (``beta`` unused)."""
    S = class_scores(decision)
    if slopes is None or np.ndim(decision) != 1:
        return log_softmax(beta * S, axis=1)
    a = np.where(S[:, 1] > 0, slopes[1], slopes[0])
    return log_softmax(a[:, None] * S, axis=1)


def calibration_folds(idx, random_state, n_splits=5):
    """Folds of the rows with class indices ``idx`` for out-of-fold calibration values
    (stratified when every class allows it), shuffled by ``random_state``; None keeps
    the rows' order (the fit stays deterministic)."""
    counts = np.bincount(idx)
    k = int(min(n_splits, idx.size))
    kw = {} if random_state is None else dict(shuffle=True, random_state=_seed(random_state))
    cv = StratifiedKFold(k, **kw) if counts.min() >= k else KFold(k, **kw)
    return list(cv.split(np.zeros((idx.size, 1)), idx))


def _seed(random_state):
    """An int seed from ``random_state`` without advancing a caller's generator."""
    if random_state is None or isinstance(random_state, (int, np.integer)):
        return random_state
    return int(copy.deepcopy(check_random_state(random_state)).randint(2**31 - 1))
