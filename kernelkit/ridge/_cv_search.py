"""The CV estimators' solver choice (exact or Nyström), their centers and the continuous
search over ``log(gamma)``.

``solver="auto"`` keeps the exact path up to :data:`AUTO_NYSTROM_MIN_SAMPLES`: it gives
the exact estimator, and up to there it holds ~5 n^2 floats (1 GB at 5,000) and costs
about a minute per kernel on 2 cores. Measured here (2 shared cores, load 1.3 to 2.7;
rbf, d = 20, one kernel, eight alphas), exact against Nyström with the default centers:
0.7 s / 0.03 s at n = 1,000, 1.9 / 0.24 s at 2,000, 19 / 0.5 s at 3,000, 33 / 0.5 s at
4,000. Nyström is faster at every n, but it is an approximation; the crossover is where
the exact path stops being affordable, not where it stops being fastest. Beyond it the
Nyström path (``O(n m^2)`` per kernel, ``O(n m)`` memory) is the one that fits.
"""

from numbers import Integral, Real

import numpy as np
from scipy.optimize import minimize_scalar
from sklearn.utils import check_random_state

SOLVERS = ("auto", "exact", "nystrom")
AUTO_NYSTROM_MIN_SAMPLES = 5000
# log(gamma) resolution of the bounded search: 5% of gamma, finer than the alphas' decades
# can tell apart; and the coarse grid that brackets the optimum before it
GAMMA_XATOL = 0.05
GAMMA_COARSE = 5


def check_solver(solver, n_centers):
    """Validated ``solver`` and ``n_centers`` (the latter's range is checked with ``n``)."""
    if not isinstance(solver, str) or solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}.")
    m = n_centers
    if not (isinstance(m, str) and m == "auto") and (
            isinstance(m, bool) or not isinstance(m, Integral) or m < 1):
        raise ValueError(f"n_centers must be 'auto' or an integer >= 1, got {m!r}.")
    return solver


def check_gamma_search(bounds, kernel, param_grid_keys, allowed):
    """``(log(low), log(high))`` of a ``gamma_search=(low, high)``; None when not set.

    Raises
    ------
    ValueError
        Bounds that are not two finite numbers with ``0 < low < high``; a kernel without
        a ``gamma``; ``gamma`` also in ``param_grid``.
    """
    if bounds is None:
        return None
    ok = (not isinstance(bounds, (str, bytes)) and np.ndim(bounds) == 1
          and len(bounds) == 2 and all(isinstance(b, Real) and not isinstance(b, bool)
                                       for b in bounds))
    if not ok or not (np.all(np.isfinite(bounds)) and 0 < bounds[0] < bounds[1]):
        raise ValueError(f"gamma_search must be a pair (low, high) of finite numbers with "
                         f"0 < low < high, got {bounds!r}.")
    if allowed is not None and "gamma" not in allowed:
        raise ValueError(f"gamma_search needs a kernel with a gamma parameter; kernel "
                         f"{kernel!r} has {sorted(allowed)}.")
    if "gamma" in param_grid_keys:
        raise ValueError("gamma_search and a param_grid over gamma are alternatives: drop "
                         "'gamma' from param_grid.")
    return float(np.log(bounds[0])), float(np.log(bounds[1]))


def resolve_solver(solver, n, nystrom_ok):
    """``"exact"`` or ``"nystrom"``; ``nystrom_ok`` False (K-fold cv, sample weights,
    sparse or precomputed input) keeps ``"auto"`` exact."""
    if solver == "auto":
        return "nystrom" if nystrom_ok and n > AUTO_NYSTROM_MIN_SAMPLES else "exact"
    return solver


def select_centers(n_centers, random_state, backend, X):
    """``(centers, indices)``: FALKON's uniform draw (``n_centers="auto"``: its
    ``sqrt(n) log n``), so that the search and the final fit share the centers."""
    from ._falkon import FalkonRegressor

    helper = FalkonRegressor(n_centers=n_centers, centers="uniform")
    helper.backend_ = backend
    C, idx, _ = helper._select_centers(X, check_random_state(random_state))
    return C, idx


def best_of(scores, per_target):
    """The selection criterion of one kernel: its best score over alphas (per target,
    then averaged, with ``alpha_per_target``); NaN ranks last."""
    S = np.where(np.isnan(scores), -np.inf, np.asarray(scores, dtype=np.float64))
    return float(S.max(axis=0).mean()) if per_target else float(S.max())


def search_log_gamma(evaluate, log_bounds, per_target):
    """Bounded search over ``log(gamma)`` of the best score over alphas.

    A coarse grid of :data:`GAMMA_COARSE` points brackets the best region (the score
    over gamma can have several local optima); Brent's bounded method
    (:func:`scipy.optimize.minimize_scalar`) refines between the best point's neighbours
    to :data:`GAMMA_XATOL`.

    Parameters
    ----------
    evaluate : callable
        ``evaluate(gamma)`` scores one kernel: an array of shape (n_alphas[, n_targets]).
    log_bounds : (float, float)
    per_target : bool

    Returns
    -------
    gammas : list of float
        Every gamma evaluated, in order (one kernel each).
    """
    gammas, cache = [], {}

    def objective(t):
        if t not in cache:
            g = float(np.exp(t))
            gammas.append(g)
            value = best_of(evaluate(g), per_target)
            cache[t] = -value if np.isfinite(value) else np.finfo(np.float64).max
        return cache[t]

    grid = np.linspace(*log_bounds, GAMMA_COARSE)
    values = [objective(t) for t in grid]
    k = int(np.argmin(values))
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, GAMMA_COARSE - 1)]
    minimize_scalar(objective, bounds=(lo, hi), method="bounded",
                    options={"xatol": GAMMA_XATOL})
    return gammas
