"""RLSNystroem's column draw: regulariser matched to the budget, units, inclusion sampling.

Degenerate data (repeated points, smooth kernels of numerical rank far below the budget)
break the naive recipe in two places, both handled here:

* the budget's effective dimension may be unattainable: ``d_eff(gamma) <= rank(K)``, so
  matching ``d_eff = n_components / qbar`` drives ``gamma`` to the floating-point noise
  of ``K``, where every RLS estimator cancels catastrophically. The regulariser is
  therefore never lowered below ``GAMMA_FLOOR * lambda_max(K)`` (the kernel's scale floor);
* copies of one point carry one direction of feature space between them: a second copy
  adds nothing to the Nyström span. Columns are drawn among *distinct* points (units),
  a unit's score being the sum of its copies' scores (at most 1, as the RLS mass of one
  direction), and a budget larger than the number of units takes every unit and fills
  the rest uniformly among the remaining rows.
"""

import numpy as np
from scipy import linalg

from ._common import _take
from ._dictionary import _blas_for

# Lowest regulariser, relative to the largest eigenvalue of K: the estimators compute
# tau = (k_ii - k_i' (K_S + gamma I)^{-1} k_i) / gamma, whose rounding error grows like
# eps_64 lambda_max / gamma (1e-8 here: estimates good to ~1e-8 absolute).
GAMMA_FLOOR = 1e-8


def _match_gamma_reg(kern, pts, n, target, rs):
    """``(gamma, d_eff(gamma))`` with ``d_eff(gamma) ~= target``, from a uniform pilot.

    A uniform pilot of ``s`` points weighted ``n / s`` gives, through SQUEAK's
    estimator, RLS estimates ``tau^_i(gamma)`` of (a uniform sample of) all points
    for every gamma at once from one eigendecomposition; ``d_eff`` is estimated as
    ``sum_i min(1, tau^_i)`` and gamma found by bisection on ``log gamma``. Isolated
    points far from the pilot count fully, as they do in the true ``d_eff``.

    Where the target exceeds ``d_eff`` at the kernel's scale floor (``GAMMA_FLOOR``
    times the largest eigenvalue: the numerical rank is below the target), the floor is
    returned with the ``d_eff`` it reaches.
    """
    s = min(n, max(500, int(2 * target)))
    P = np.sort(rs.choice(n, s, replace=False)) if s < n else np.arange(n)
    nq = min(n, 5000)
    Q = np.sort(rs.choice(n, nq, replace=False)) if nq < n else np.arange(n)
    w = n / s
    with _blas_for(s):
        lam, V = linalg.eigh(w * kern(_take(pts, P)), check_finite=False)
    lam = np.clip(lam, 0.0, None)
    kd = kern.diag(_take(pts, Q))
    Z2 = np.empty((s, nq))
    rows = kern.rows_per_block(s)
    for r0 in range(0, nq, rows):
        C = kern(_take(pts, P), _take(pts, Q[r0:r0 + rows]))
        Z2[:, r0:r0 + rows] = (V.T @ C) ** 2 * w

    def d_eff(g):
        tau = (kd - (Z2 / (lam + g)[:, None]).sum(axis=0)) / g
        return (n / nq) * float(np.clip(tau, 0.0, 1.0).sum())

    top = max(float(lam.max()), float(kd.max()), 1e-300)
    floor = GAMMA_FLOOR * top
    d_floor = d_eff(floor)
    if d_floor <= target:
        return floor, d_floor
    lo, hi = np.log(floor), np.log(top * 1e3)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if d_eff(np.exp(mid)) > target:
            lo = mid
        else:
            hi = mid
    g = float(np.exp(0.5 * (lo + hi)))
    return g, d_eff(g)


def _inclusion_probabilities(scores, m):
    """``pi_i = min(1, c s_i)`` with ``sum(pi) = m`` (capping at 1 by water-filling)."""
    n = len(scores)
    if m >= n:
        return np.ones(n)
    s = np.maximum(scores, max(float(scores.max()), 1.0) * 1e-12)
    order = np.argsort(-s, kind="stable")
    ss = s[order]
    suffix = np.cumsum(ss[::-1])[::-1]
    k = np.arange(m)  # k entries capped at 1
    c = (m - k) / suffix[:m]
    ok = np.flatnonzero(c * ss[:m] <= 1.0)
    k0 = int(ok[0])
    pi = np.minimum(1.0, c[k0] * s)
    pi[order[:k0]] = 1.0
    return pi


def _systematic_sample(pi, m, rs):
    """Exactly ``m`` distinct units with inclusion probabilities ``pi`` (sum m), in random order.

    Madow's systematic sampling: cumulate ``pi`` over a random permutation and take
    the units hit by ``u, u + 1, ..., u + m - 1`` for one uniform ``u``.
    """
    n = len(pi)
    perm = rs.permutation(n)
    cs = np.cumsum(pi[perm])
    cs *= m / cs[-1]
    hits = np.searchsorted(cs, rs.uniform() + np.arange(m), side="right")
    hits = np.minimum(hits, n - 1)
    chosen = np.unique(perm[hits])
    if len(chosen) < m:  # only through rounding at pi = 1: top up with the largest pi
        rest = np.setdiff1d(np.arange(n), chosen)
        extra = rest[np.argsort(-pi[rest], kind="stable")[: m - len(chosen)]]
        chosen = np.sort(np.concatenate([chosen, extra]))
    return chosen


def _distinct_rows(A, rs):
    """Unit label of every row of ``A`` (equal rows share one), or None if all differ.

    A random projection screens in ``O(n d)``: rows with distinct projections differ,
    so the exact grouping (a sort of the rows) runs only when some projections tie.
    """
    h = A @ rs.standard_normal(A.shape[1])
    if len(np.unique(h)) == len(h):
        return None
    _, labels = np.unique(A, axis=0, return_inverse=True)
    return labels.reshape(-1)


def _draw_columns(scores, m, A, rs, rls_share=1.0):
    """``m`` training rows and their weights, drawn by RLS over distinct points.

    Parameters
    ----------
    scores : ndarray of shape (n,)
        RLS estimates; clipped to [0, 1] (a leverage score is at most 1; estimators
        over-shoot for points their dictionary misses).
    m : int
        Number of rows to return, ``m <= n``.
    A : ndarray of shape (n, d)
        The rows (features, or the kernel matrix) that define which points are equal.
    rs : RandomState
    rls_share : float in (0, 1], default=1.0
        Share of the budget drawn by RLS; the rest is spread uniformly over the rows (the
        budget beyond what the regulariser can use, where the numerical rank is lower).

    Returns
    -------
    idx : ndarray of shape (m,), int64
        Distinct rows, ascending: one per drawn unit, and uniform extra copies when
        ``m`` exceeds the number of distinct points.
    weights : ndarray of shape (m,)
        Horvitz-Thompson weights: a drawn unit of ``c`` copies and inclusion probability
        ``pi`` weighs ``c / pi``, shared by its rows in ``idx``, so that
        ``sum_idx w_i f(x_i)`` is unbiased for ``sum_i f(x_i)``.
    """
    n = len(scores)
    s = np.clip(scores, 0.0, 1.0)
    if rls_share < 1.0:  # probabilities: rls_share of them by RLS, the rest uniform
        s = rls_share * s / max(float(s.sum()), 1e-300) + (1.0 - rls_share) / n
    labels = _distinct_rows(A, rs)
    if labels is None:
        pi = _inclusion_probabilities(s, m)
        idx = _systematic_sample(pi, m, rs)
        return idx, 1.0 / pi[idx]
    n_units = int(labels.max()) + 1
    counts = np.bincount(labels, minlength=n_units)
    unit_s = np.bincount(labels, weights=s, minlength=n_units)
    unit_s = np.minimum(unit_s, 1.0) if rls_share >= 1.0 else unit_s
    m_units = min(m, n_units)
    pi = _inclusion_probabilities(unit_s, m_units)
    units = _systematic_sample(pi, m_units, rs)
    # one representative row per drawn unit, chosen uniformly among its copies
    order = np.lexsort((rs.random(n), labels))
    first = np.searchsorted(labels[order], units)
    idx = order[first]
    if m > m_units:  # more columns than distinct points: uniform extra copies
        rest = np.setdiff1d(np.arange(n), idx)
        idx = np.concatenate([idx, rs.choice(rest, m - m_units, replace=False)])
    idx = np.sort(idx)
    lab = labels[idx]
    taken = np.bincount(lab, minlength=n_units)
    weights = counts[lab] / (pi[lab] * taken[lab])
    return idx, weights
