"""The CV estimators' solver choice (exact or Nyström), their centers and the continuous
search over ``log(gamma)``.

``solver="auto"`` keeps the exact path up to :data:`AUTO_NYSTROM_MIN_SAMPLES`: it gives
the exact estimator, and up to there it holds ~5 n^2 floats (1 GB at 5,000) and costs
about a minute per kernel on 2 cores. Measured here (2 shared cores, load 1.3 to 2.7;
rbf, d = 20, one kernel, eight alphas), exact against Nyström with the default centers:
0.7 s / 0.03 s at n = 1,000, 1.9 / 0.24 s at 2,000, 19 / 0.5 s at 3,000, 33 / 0.5 s at
4,000. Nyström is faster at every n, but it is an approximation; the crossover is where
the exact path stops being affordable, not where it stops being fastest. Beyond it the
Nyström path (``O(n m^2)`` per kernel, ``O(n m)`` memory) is the one that fits. The
linear kernel with ``n >= 2 d`` stays exact at every ``n``: its ``d x d``
eigendecomposition (:mod:`kernelkit.ridge._primal`) costs less than either.
"""

from functools import partial
from numbers import Integral, Real

import numpy as np
from scipy.optimize import minimize_scalar
from sklearn.utils import check_random_state

from ._cv_grid import KernelGrid
from ._loo import EigenRidge, weighted
from ._primal import linear_fold_model

SOLVERS = ("auto", "exact", "nystrom")
AUTO_NYSTROM_MIN_SAMPLES = 5000
# The search's centers by default: its O(n m^2) per kernel at m = 3,000 and n = 60,000 is
# ~5e11 flops (seconds on 2 cores); above, the final FALKON fit alone uses every center.
SEARCH_CENTERS_AUTO = 3000
# log(gamma) resolution of the bounded search: 5% of gamma, finer than the alphas' decades
# can tell apart; and the coarse grid that brackets the optimum before it
GAMMA_XATOL = 0.05
GAMMA_COARSE = 5


def check_solver(solver, n_centers, search_centers="auto"):
    """Validated ``solver``, ``n_centers`` (its range is checked with ``n``) and
    ``search_centers``."""
    if not isinstance(solver, str) or solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}.")
    for name, m in (("n_centers", n_centers), ("search_centers", search_centers)):
        if not (isinstance(m, str) and m == "auto") and (
                isinstance(m, bool) or not isinstance(m, Integral) or m < 1):
            raise ValueError(f"{name} must be 'auto' or an integer >= 1, got {m!r}.")
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
    """``"exact"`` or ``"nystrom"``; ``nystrom_ok`` False (sparse or precomputed input)
    keeps ``"auto"`` exact."""
    if solver == "auto":
        return "nystrom" if nystrom_ok and n > AUTO_NYSTROM_MIN_SAMPLES else "exact"
    return solver


def select_centers(n_centers, search_centers, random_state, backend, X):
    """``(centers, indices, search)``: FALKON's uniform draw of the final fit's centers
    (``n_centers="auto"``: its ``sqrt(n) log n``), and the positions in it of the search's
    centers: all of them up to ``search_centers`` (``"auto"``:
    :data:`SEARCH_CENTERS_AUTO`), else a uniform subset of that many, drawn after the
    centers so that these are FALKON's own draw with the same ``random_state``."""
    from ._falkon import FalkonRegressor

    helper = FalkonRegressor(n_centers=n_centers, centers="uniform")
    helper.backend_ = backend
    rng = check_random_state(random_state)
    C, idx, _ = helper._select_centers(X, rng)
    s = SEARCH_CENTERS_AUTO if search_centers == "auto" else search_centers
    search = np.arange(len(C)) if s >= len(C) else np.sort(rng.choice(len(C), s, replace=False))
    return C, idx, search


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


# ------------------------------------------- docstring sections of the CV estimators
SEARCH_DOC = f"""
    gamma_search : (float, float) or None, default=None
        Bounds ``(low, high)``, ``0 < low < high``, of a continuous search for ``gamma``
        instead of a grid: a coarse grid of {GAMMA_COARSE} log-spaced values brackets the
        best one, then a bounded Brent search (:func:`scipy.optimize.minimize_scalar`)
        over ``log(gamma)`` refines it to {GAMMA_XATOL:g} (about {100 * GAMMA_XATOL:g}%
        of gamma) on the best score over ``alphas`` at each gamma. For kernels with a
        ``gamma``; combined with a ``param_grid`` over other parameters, each of its
        combinations gets its own search.
    solver : {{"auto", "exact", "nystrom"}}, default="auto"
        ``"exact"``: one ``n x n`` eigendecomposition per kernel (the linear kernel with
        ``n >= 2 d``: one ``d x d`` of ``X^T W X``, exact too). ``"nystrom"``: the
        leave-one-out / GCV (or K-fold) of the Nyström (FALKON) estimator on
        ``n_centers`` centers (dense ``X``), refitted by
        :class:`FalkonRegressor` / :class:`FalkonClassifier` on the same centers.
        ``"auto"``: exact up to {AUTO_NYSTROM_MIN_SAMPLES:,} samples (about ``5 n^2``
        floats, one ``eigh`` of ``9 n^3`` flops per kernel), else Nyström where it
        applies; exact at every ``n`` for the linear kernel with ``n >= 2 d``.
    n_centers : int >= 1 or "auto", default="auto"
        Centers of the final FALKON fit, drawn uniformly as FALKON draws them ("auto":
        ``sqrt(n) log(n)``, at least 100, at most ``n``). Only for the Nyström path.
    search_centers : int >= 1 or "auto", default="auto"
        Centers of the Nyström leave-one-out / GCV / K-fold search: all ``n_centers``
        when there are at most this many, else a uniform subset of this many of them
        (``"auto"``: {SEARCH_CENTERS_AUTO:,}). The search costs ``O(n s^2)`` per kernel
        for ``s`` search centers, the final fit ``O(n m)`` per CG step for ``m``
        centers: many centers for the final model (accuracy) need not make every
        candidate cost ``m^2``. The selection is then exact for the estimator on the
        search's centers, and the final fit uses all ``n_centers``. Only for the
        Nyström path.
    random_state : int, RandomState instance or None, default=None
        Seeds the draw of the centers (Nyström path only).
    verbose : int, default=0
        0: silent; >= 1: the search's plan (kernels to evaluate, the cost of each)
        before the first kernel, then one line per kernel with its time and best score."""

SEARCH_ATTRS = """
    alphas_ : ndarray of shape (n_candidates, n_alphas)
        The penalties scored for each candidate (rows in ``candidate_params_`` order,
        aligned with ``scores_``): ``alphas`` itself in every row when an array,
        ``"auto"``'s grid at each kernel's own scale otherwise.
    n_kernel_evaluations_ : int
        Kernels evaluated (and decomposed) by the search: one per grid point, or per
        gamma tried by ``gamma_search``.
    solver_ : {"exact", "nystrom"}
        The path ``solver`` resolved to.
    centers_ : ndarray of shape (n_centers, n_features)
        The Nyström centers of ``best_estimator_`` (Nyström only).
    center_indices_ : ndarray of shape (n_centers,)
        Their rows in the training ``X`` (Nyström only).
    search_center_indices_ : ndarray of shape (n_search_centers,)
        The rows of the training ``X`` that the search used as centers: a subset of
        ``center_indices_`` (all of them up to ``search_centers``; Nyström only)."""

SEARCH_RAISES = ("an unknown ``solver``; ``n_centers`` not ``'auto'`` or in ``[1, n]``, "
                 "``search_centers`` not ``'auto'`` or ``>= 1``; "
                  "``gamma_search`` bounds not ``0 < low < high`` (or with a kernel without "
                  "``gamma``, or with ``gamma`` in ``param_grid``); ``solver='nystrom'`` with "
                  "``kernel='precomputed'``")


def fold_model(est, K, X, Y, sw, kw):
    """``fold_model(tr, te) -> (ridge, predict)`` for the K-fold scores of the search
    ``est``: blocks of ``K`` (exact), or the Nyström estimator on the training rows with
    the search's centers."""
    def exact(tr, te):
        swt = None if sw is None else sw[tr]
        ridge = EigenRidge(*weighted(K[np.ix_(tr, tr)], Y[tr], swt), u=est._u(swt, len(tr)))
        cross = K[np.ix_(te, tr)]
        P = ridge.projected(cross if swt is None else cross * swt[None, :])
        return ridge, partial(ridge.predict_from, P)

    def nystrom(tr, te):
        swt = None if sw is None else sw[tr]
        ridge = est._nystrom(X[tr], Y[tr], swt, kw)
        C = est._centers[0][est._centers[2]]
        K_te = KernelGrid(X, est.backend_).operator(kw).block_host(X[te], C)
        return ridge, partial(ridge.predict, K_te)

    if getattr(est, "_primal", False):
        return linear_fold_model(est, X, Y, sw)
    return exact if K is not None else nystrom


def search_plan(est, shape, n_grid, alphas, mode, folds, log_bounds):
    """Print the search's plan (before its first kernel); return its
    :class:`~kernelkit.utils._verbose.Progress`."""
    from ..utils._verbose import Progress, check_verbose, flops

    progress = Progress(est, check_verbose(est.verbose))
    n, d = shape
    kernels = f"{n_grid} grid point(s)" + (
        f", each a gamma search ({GAMMA_COARSE} coarse values, then Brent)" if log_bounds
        else "")
    if est.solver_ == "nystrom":
        each = "an n x s kernel against the search centers and s x s factorizations"
    elif getattr(est, "_primal", False):
        each = (f"the {d} x {d} matrix X^T W X and its eigendecomposition (linear kernel, "
                f"n >= 2 d; ~{flops(2.0 * n * d * d + 9.0 * d ** 3)})")
    else:
        each = f"the {n} x {n} kernel and its eigendecomposition (9 n^3 ~ {flops(9.0 * n ** 3)})"
    scored = mode if folds is None else f"{len(folds)}-fold cv"
    progress(f"n={n}, d={d}, solver {est.solver_}: {kernels}; per kernel {each}; "
             f"{len(np.atleast_1d(alphas))} alphas scored by {scored}")
    return progress


def report_kernel(progress, k, candidate, scores):
    """The line of the ``k``-th kernel of the search: its parameters, time, best score."""
    best = np.fmax.reduce(np.ravel(np.asarray(scores, dtype=np.float64)))  # NaN: unusable
    progress.done(f"kernel {k}", **candidate, best_score=float(best))


def fill_docs(classes):
    """Fill the CV estimators' docstring sections (kernel, search, calibration)."""
    from ..utils._classes import CALIBRATION_DOC
    from ._cv_scoring import ALPHAS_DOC, CLASS_SCORING_DOC
    from ._kernel_ridge import _KERNEL_PARAMS_DOC

    names = "rbf, laplacian, matern, polynomial, linear, cosine, ntk, nngp"
    text = _KERNEL_PARAMS_DOC.format(names=names).strip()
    for cls in classes:
        doc = cls.__doc__.replace("{kernel}", text)
        for key, value in (("{alphas}", ALPHAS_DOC), ("{search}", SEARCH_DOC), ("{search_attrs}", SEARCH_ATTRS),
                           ("{search_raises}", SEARCH_RAISES),
                           ("{class_scoring}", CLASS_SCORING_DOC)):
            doc = doc.replace(key, value.strip())
        doc = doc.replace("{calibration}", CALIBRATION_DOC.replace("{", "{{").replace("}", "}}"))
        cls.__doc__ = doc.replace("{{", "{").replace("}}", "}")
