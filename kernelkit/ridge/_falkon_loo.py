"""Out-of-sample decision values of FALKON's (weighted) Nyström estimator for the
classifier's calibration: exact leave-one-out values, blockwise, where they are cheap,
else a held-out split refitted by a warm-started second solve.

The estimator is ``f = K_nM b``, ``b = (K_Mn W K_nM + alpha K_MM)^-1 K_Mn W y``, a
penalised weighted least-squares fit, so the leave-one-out identity holds (Allen
1974; leaving row ``i`` out is ``w_i = 0``): ``y_i - f_{-i}(x_i) = (y_i - f_i) / (1 -
h_ii)`` with ``h_ii`` the diagonal of the weighted hat matrix
``W^1/2 K_nM (K_Mn W K_nM + alpha K_MM)^-1 K_Mn W^1/2``. With ``T^T T = K_MM + eps I``
(Cholesky, the jitter floor of FALKON's preconditioner) and ``B = K_nM T^-1``::

    h_ii = w_i b_i^T (B^T W B + alpha I)^-1 b_i,

a system whose condition is that of the regularised problem (``>= alpha I``), not of
``K_MM``: ``B``'s rows are formed by triangular solves, row block by row block, never
``K_Mn W K_nM`` first (whose transform by ``T^-1`` would square ``K_MM``'s condition).

Cost: one pass over the ``n`` rows (``B`` block by a triangular solve, ``n M^2``
flops; ``B^T W B``, ``2 n M^2``; the blocks come from the held ``K_nM``, a float32
one upcast, and are recomputed only when it is not held), one ``M^3/3`` Cholesky, and
a second pass over the rows whose values are wanted (``2 M^2`` flops each). Memory:
``M^2`` plus one row block. FALKON takes these values only while this is small in
absolute terms or a small share of its fit (:func:`exact_loo_is_cheap`), else a
held-out split; and only at the rows that are not centers (:func:`loo_rows`). The
two-class logistic loss takes the same values for its last Newton step's weighted
least squares: one Newton step from the fit without the row
(:func:`logistic_loo_values`).
"""

import copy

import numpy as np
from scipy import linalg
from scipy.special import expit

from .._config import get_config
from ..utils._threads import blas_threads_for, single_blas_thread
from ._falkon_ops import _fortran_gram
from ._ridge_proba import HOLDOUT_FRACTION, calibration_split, split_rng

_LOO_ROWS = 20000  # rows whose leave-one-out values calibrate the classifier
_MIN_LOO_ROWS = 20  # fewer rows that are not centers: all rows' values (loo_rows)
# calibration="auto": exact Nystrom leave-one-out values while their estimated cost is at
# most this share of the fit's (both in flops, see exact_loo_is_cheap), a fit counted as
# at least _SMALL_FIT_FLOPS (so: always under 1e9 flops, ~0.1 s), else a held-out split
# refitted by a warm-started second CG solve
_LOO_SHARE = 0.2
_SMALL_FIT_FLOPS = 5e9
_HOLDOUT_ROWS = 5000  # at most this many rows (plus one per class) held out
_HOLDOUT_TOL = 1e-2  # the held-out solve's tolerance floor: beta within 2e-3 of a full solve's
_CG_STEP_FLOPS = 16.0  # a CG step's pass over K_nM, in GEMM flops per entry (measured ~60)
_FIT_FIXED_FLOPS = 3e8  # the fit's fixed costs (Python, thread pools), in GEMM flops


def exact_loo_is_cheap(n, m, d, n_iter, held):
    """Whether calibration="auto" takes the exact Nyström leave-one-out values: their
    estimated flops (:mod:`kernelkit.ridge._falkon_loo`: ``3 n M^2`` for ``B`` and
    ``B^T W B``, ``2 M^2`` per evaluated row, ``M^3 / 3``, the kernel blocks again
    when ``K_nM`` is not held) at most ``_LOO_SHARE`` times the fit's (``K_nM``:
    ``2 n M (d + 8)``; the factorizations: ``M^3``; each CG step: one memory-bound pass
    over ``K_nM``, counted as ``_CG_STEP_FLOPS n M`` flops; fixed costs:
    ``_FIT_FIXED_FLOPS``), a fit counted as at least ``_SMALL_FIT_FLOPS``: a small
    problem takes them whenever they cost under ``1e9`` flops (about 0.1 s), ``n`` up
    to ~1,900 rows with the default centers. Deterministic: the same data and seed
    take the same path. They calibrate on every row that is not a center where the
    split has a tenth: test log-loss of the default classifier, leave-one-out against
    held-out values, digits (3 splits) 0.086 / 0.071 / 0.077 against 0.104 / 0.082 /
    0.092, breast_cancer (5 splits) 0.078-0.108 against 0.103-0.135, Fashion-MNIST
    1,347 rows 0.628 against 0.636 (3,000 rows, 2.9e9 flops: 0.552 against 0.553)."""
    r = min(n, _LOO_ROWS)
    loo = (3.0 * n + 2.0 * r) * m * m + m ** 3 / 3.0
    if not held:
        loo += 2.0 * (n + r) * m * (d + 8)
    fit = (2.0 * n * m * (d + 8) + float(m) ** 3 + _CG_STEP_FLOPS * max(n_iter, 1) * n * m
           + _FIT_FIXED_FLOPS)
    return loo <= _LOO_SHARE * max(fit, _SMALL_FIT_FLOPS)



_JITTER = 1e-12  # relative, per center: the float64 floor of FALKON's preconditioner


def _center_factor(K_mm):
    """Upper ``T`` with ``T^T T = K_MM + eps I``, the smallest jitter of FALKON's floor."""
    m = K_mm.shape[0]
    scale = max(float(np.max(np.abs(np.diag(K_mm)))), np.finfo(np.float64).tiny)
    jitter = _JITTER * m * scale
    for _ in range(12):
        try:
            return linalg.cholesky(K_mm + jitter * np.eye(m), lower=False, check_finite=False)
        except linalg.LinAlgError:
            jitter *= 100.0
    raise ValueError("the kernel matrix of the centers is not positive semi-definite.")


def nystrom_loo_decision(block, n, K_mm, coef, Y, w, alpha, rows, rows_per_block,
                         grad=None):
    """Leave-one-out values ``f_{-i}(x_i)`` of the Nyström estimator at ``rows``.

    Parameters
    ----------
    block : callable
        ``block(r0, r1)`` or ``block(index_array)``: float64 ``k(X[rows], centers)``.
    n : int
    K_mm : ndarray of shape (M, M), float64
    coef : ndarray of shape (M, k)
        The fitted coefficients ``b``.
    Y : ndarray of shape (n, k)
        Targets.
    w : ndarray of shape (n,) or None
        Row weights (with ``grad``: the loss's curvature ``w_i l''(f_i)`` at the fit).
    alpha : float
        The penalty (FALKON's ``lambda n``).
    rows : ndarray of int
        Rows whose values are returned.
    rows_per_block : int
    grad : ndarray of shape (n, k) or None
        A loss other than the squared: ``w_i l'(f_i)``, the weighted derivative at the
        optimum. The value is then one Newton step from the fit without row ``i``
        (:func:`logistic_loo_values`): ``f_i + grad_i q_i / (1 - h_ii)``, ``q_i =
        k_i^T H^-1 k_i`` and ``h_ii = w_i q_i`` (for the squared loss, ``grad = w (f -
        y)``, this is the exact identity above).

    Returns
    -------
    f_loo : ndarray of shape (len(rows), k)
    """
    m = K_mm.shape[0]
    with blas_threads_for(m):  # outside a region, a small potrf stalled 50 ms on busy cores
        T = _center_factor(K_mm)
    G = np.zeros((m, m))
    with blas_threads_for(n):
        for r0 in range(0, n, rows_per_block):
            r1 = min(n, r0 + rows_per_block)
            Bb = linalg.solve_triangular(T, block(r0, r1).T, trans="T", check_finite=False)
            G += (Bb if w is None else Bb * w[r0:r1]) @ Bb.T  # B^T W B, m x m
        G.flat[:: m + 1] += alpha
        jitter = np.finfo(np.float64).eps * m * max(float(np.diag(G).max()), 1e-300)
        for _ in range(12):  # alpha = 0 with rank-deficient B: the smallest jitter
            try:
                L = linalg.cholesky(G, lower=True, check_finite=False)
                break
            except linalg.LinAlgError:
                G.flat[:: m + 1] += jitter
                jitter *= 100.0
        else:
            raise ValueError("the Nystrom leave-one-out system is not positive definite; "
                             "increase alpha.")
        out = np.empty((len(rows), coef.shape[1]))
        for s0 in range(0, len(rows), rows_per_block):
            idx = rows[s0:s0 + rows_per_block]
            Kb = block(idx)
            V = linalg.solve_triangular(
                L, linalg.solve_triangular(T, Kb.T, trans="T", check_finite=False),
                lower=True, check_finite=False)
            q = np.einsum("ij,ij->j", V, V)
            h = q * (1.0 if w is None else w[idx])
            f = Kb @ coef
            # 1 - h_ii > 0 exactly (alpha > 0); the floor only guards its rounding
            one_minus = np.maximum(1.0 - h, np.finfo(np.float64).eps)[:, None]
            out[s0:s0 + len(idx)] = (Y[idx] - (Y[idx] - f) / one_minus if grad is None
                                     else f + grad[idx] * q[:, None] / one_minus)
    return out


def loo_rows(n, idx, w, rng):
    """The rows whose leave-one-out values calibrate the classifier: the
    positive-weight rows that are not centers (``idx``), when there are at least
    ``_MIN_LOO_ROWS`` of them, else all rows; at most ``_LOO_ROWS``, drawn with ``rng``.

    A center's leave-one-out value is not out-of-sample in the sense that matters: the
    model left without ``y_i`` still holds the basis function ``k(., x_i)``, fitted to
    the neighbours alone and free (but for ``alpha``) to take any value at ``x_i``, a
    place no test point is (it is never a center). On digits 3 vs 8 (100 centers, 267
    rows) the centers' values had 7% of their signs wrong and 1.8x the spread of the
    others (which had none wrong, as on the test rows); their slopes, 2.7 and 0.7 where
    the other rows' were 7.6 and 7.3, took the test log-loss from 0.016 to 0.11. With
    every row a center (``M = n``: kernel ridge) the value is exact kernel ridge's
    leave-one-out (the representer theorem: the minimiser without row ``i`` lies in
    the span of the other rows' functions), and the fallback keeps it."""
    pool = np.arange(n)
    if idx is not None:
        live = np.ones(n, bool) if w is None else np.asarray(w) > 0
        live[idx] = False
        if np.count_nonzero(live) >= _MIN_LOO_ROWS:
            pool = np.flatnonzero(live)
    return pool if len(pool) <= _LOO_ROWS else np.sort(rng.choice(pool, _LOO_ROWS, False))


def center_rows(X, C, idx):
    """The rows of ``X`` that are centers: ``idx`` where the centers were drawn from the
    rows, else the rows equal to a given center (a search's or the user's array of
    rows), found by hashing."""
    if idx is not None:
        return idx
    keys = {row.tobytes() for row in np.ascontiguousarray(C, dtype=np.float64)}
    Xc = np.ascontiguousarray(X, dtype=np.float64)
    return np.flatnonzero([row.tobytes() in keys for row in Xc])


def loo_values(normal, op, X, C, coef, Y, w, alpha, rng, idx=None):
    """Nyström leave-one-out values (:mod:`kernelkit.ridge._falkon_loo`) at the rows of
    :func:`loo_rows` (``idx``: the centers' rows, or None when the centers are given)."""
    n = X.shape[0]

    def block(a, b=None):
        # K_nM as the system held it (a float32 one upcast: the fitted system's own
        # matrix, and no kernel evaluations); recomputed only when not held
        rows = slice(a, b) if b is not None else a
        if normal.KnM is not None:
            return normal.KnM[rows].astype(np.float64, copy=False)
        return op.block_host(X[rows], C)

    rows = loo_rows(n, center_rows(X, C, idx), w, rng)
    Y2, B = Y.reshape(n, -1), coef.reshape(len(C), -1)
    K_mm = np.array(_fortran_gram(op, C))
    alphas = np.broadcast_to(np.asarray(alpha, np.float64), (Y2.shape[1],))
    f = np.empty((len(rows), Y2.shape[1]))
    for a in np.unique(alphas):  # one pass per distinct penalty
        cols = np.flatnonzero(alphas == a)
        f[:, cols] = nystrom_loo_decision(block, n, K_mm, B[:, cols], Y2[:, cols], w,
                                          float(a), rows, normal.rows_per_block())
    return rows, f

def logistic_loo_values(est, X, Y, w, rng):
    """Approximate leave-one-out decision values of the two-class Nyström kernel
    logistic regression (``loss="logistic"``) at the rows of :func:`loo_rows`, or
    ``(empty, empty)`` with more classes or where they are not cheap
    (:func:`exact_loo_is_cheap`, the kernel blocks recomputed).

    One Newton step from the fitted ``b`` on the objective without row ``i``
    (Cawley & Talbot, "Efficient approximate leave-one-out cross-validation for
    kernel logistic regression", Machine Learning 71, 2008; Rad & Maleki, JRSS B
    2020): its gradient there is ``-w_i l'(f_i) k_i``, its Hessian ``H - w_i d_i k_i
    k_i^T`` with ``H = K_Mn W D K_nM + alpha K_MM`` and ``d_i = s_i (1 - s_i)``,
    ``s_i = sigmoid(y_i f_i)``, so by Sherman-Morrison ``f_{-i}(x_i) ~ f_i + w_i
    l'(f_i) q_i / (1 - w_i d_i q_i)``, ``q_i = k_i^T H^-1 k_i``: the leave-one-out
    identity of the weighted least squares of the last Newton step (weights ``w_i
    d_i``), computed as the squared loss's (:func:`nystrom_loo_decision`).
    """
    n, C, idx = X.shape[0], est.centers_, est.center_indices_
    m = C.shape[0]
    if Y.shape[1] != 1 or not exact_loo_is_cheap(n, m, X.shape[1], est.n_iter_, False):
        return np.arange(0), np.empty((0, Y.shape[1]))
    op = est._operator()
    coef = np.asarray(est.dual_coef_, np.float64).reshape(m, 1)
    F = np.asarray(op.engine.to_host(op.matmul(X, C, coef)), np.float64).reshape(n)
    wt = np.ones(n) if w is None else np.asarray(w, np.float64)
    t = Y[:, 0] * F  # y_i f_i, y = +-1: the loss log(1 + exp(-t))
    curv = wt * expit(t) * expit(-t)
    grad = (-wt * Y[:, 0] * expit(-t))[:, None]
    rows = loo_rows(n, center_rows(X, C, idx), w, rng)

    def block(a, b=None):
        return op.block_host(X[slice(a, b) if b is not None else a], C)

    alpha = float(np.atleast_1d(est.alpha)[0])
    per_block = max(1, int(get_config()["working_memory"] * 2**20 // (8 * m)))
    return rows, nystrom_loo_decision(block, n, np.array(_fortran_gram(op, C)), coef, Y,
                                      curv, alpha, rows, per_block, grad=grad)


def holdout_values(est, normal, pre, op, X, C, idx, lam, coef, Y, sw, rng, tol, max_iter,
               progress):
    """Decision values of a held-out split from the model fitted without it.

    A stratified ``min(10%, _HOLDOUT_ROWS / n)`` of each class's positive-weight rows
    that are not centers (:func:`~kernelkit.ridge._ridge_proba.calibration_split`,
    drawn with ``rng``, or with a fixed seed when ``random_state`` is None:
    :func:`~kernelkit.ridge._ridge_proba.split_rng`; centers too only when too few
    other rows exist) get weight
    0 in a second solve of the same weighted normal equations on the same centers
    and ``K_nM``: exactly the Nyström estimator those rows are out of. The centers'
    weights are unchanged, so the fit's preconditioner is FALKON's for this system
    too; the solve is warm-started from the full solution ``coef`` (its residual,
    from the held rows alone, is that of removing them: ~3e-2 relative on
    Fashion-MNIST) and stops at ``max(tol, _HOLDOUT_TOL)``: 4-9 CG steps where the
    fit took 25-41. Returns
    ``(rows, values)``, or None when no row can be held out."""
    n, m = X.shape[0], C.shape[0]
    rng = split_rng(est.random_state, rng)
    frac = min(HOLDOUT_FRACTION, _HOLDOUT_ROWS / n)
    live = np.ones(n) if sw is None else sw
    idx = center_rows(X, C, idx)
    if len(idx):  # centers stay in: a center without its own row (little else
        live = live.copy()  # supports it in many dimensions) leaves a direction held
        live[idx] = 0.0  # by alpha alone, and CG slow (26 steps, not 9, at n=1000)
    held = calibration_split(est._y_idx, live, rng, frac)
    if not held.any():  # (nearly) every row a center: hold out centers too
        held = calibration_split(est._y_idx, sw, rng, frac)
    if not held.any():
        return None
    second = copy.copy(normal)  # shares the held K_nM (or the Dask blocks)
    second.w = np.where(held, 0.0, 1.0 if sw is None else sw)[:, None]
    Y2 = Y.reshape(n, -1)
    with single_blas_thread():
        rows = np.flatnonzero(held)
        coef2, _ = est._solve(second, pre, idx, lam, Y2, n, m, max(tol, _HOLDOUT_TOL),
                               max_iter, progress, start=coef.reshape(m, -1),
                               dropped=(rows, np.ones(len(rows)) if sw is None
                                        else sw[rows]))
    if normal.KnM is None:
        dec = op.engine.to_host(op.matmul(X[rows], C, coef2))
    else:  # K_nM as the system held it, upcast in 32 MiB blocks (beside the fit's peak)
        step = max(1, 2**25 // (8 * m))
        dec = np.concatenate([normal.KnM[rows[s:s + step]].astype(np.float64) @ coef2
                              for s in range(0, len(rows), step)])
    return rows, np.asarray(dec, np.float64).reshape(len(rows), -1)
