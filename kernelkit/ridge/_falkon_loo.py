"""Leave-one-out decision values of FALKON's (weighted) Nyström estimator, blockwise.

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
``M^2`` plus one row block. FALKON takes these values only while this is a small share
of its fit (:func:`kernelkit.ridge._falkon._exact_loo_is_cheap`), else a held-out
split.
"""

import numpy as np
from scipy import linalg

from ..utils._threads import blas_threads_for

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


def nystrom_loo_decision(block, n, K_mm, coef, Y, w, alpha, rows, rows_per_block):
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
        Row weights.
    alpha : float
        The penalty (FALKON's ``lambda n``).
    rows : ndarray of int
        Rows whose values are returned.
    rows_per_block : int

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
            h = np.einsum("ij,ij->j", V, V) * (1.0 if w is None else w[idx])
            f = Kb @ coef
            # 1 - h_ii > 0 exactly (alpha > 0); the floor only guards its rounding
            one_minus = np.maximum(1.0 - h, np.finfo(np.float64).eps)[:, None]
            out[s0:s0 + len(idx)] = Y[idx] - (Y[idx] - f) / one_minus
    return out
