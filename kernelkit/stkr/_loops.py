"""NumPy references of the STKR loops (twin: :mod:`._loops_numba`).

:func:`keep_smallest` merges one block of approximate squared distances into each
row's buffer of the ``K`` smallest seen so far. The buffers only bound the radii
(see :mod:`._neighbours`), so the two engines need not agree on ties inside them.
:func:`cg_direction`, :func:`cg_update` and :func:`lazy_walk` are the vector passes and
the kNN kernel's product of each step of STKR-Prop's inverse-Laplacian CG
(:mod:`._solvers`); the compiled twins do the same arithmetic per entry, summing the
columns' inner products in another order.
"""

import numpy as np
from scipy import sparse


def keep_smallest(P, norms, col0, val, idx):
    """Merge ``v_ij = norms[col0 + j] - 2 P[i, j]`` into the sorted row buffers.

    Parameters
    ----------
    P : ndarray of shape (b, m), float32 or float64
        Gram block of ``b`` buffer rows against columns ``col0:col0 + m``.
    norms : ndarray of shape (n_columns,), P's dtype
        Squared norms of all columns (``v`` is computed in ``P``'s precision).
    col0 : int
    val : ndarray of shape (b, K), float64
        Per-row ascending buffer of the ``K`` smallest ``v`` (``inf`` where empty),
        updated in place.
    idx : ndarray of shape (b, K), intp
        Their column indices (-1 where empty), updated in place.
    """
    K = val.shape[1]
    V = (norms[col0:col0 + P.shape[1]][None, :] - (P + P)).astype(np.float64)
    allv = np.concatenate([val, V], axis=1)
    alli = np.concatenate([idx, np.broadcast_to(np.arange(col0, col0 + P.shape[1]), V.shape)],
                          axis=1)
    if allv.shape[1] > K:
        part = np.argpartition(allv, K - 1, axis=1)[:, :K]
        allv = np.take_along_axis(allv, part, axis=1)
        alli = np.take_along_axis(alli, part, axis=1)
    order = np.argsort(allv, axis=1, kind="stable")
    val[:] = np.take_along_axis(allv, order, axis=1)
    idx[:] = np.take_along_axis(alli, order, axis=1)


def keep_smallest_columns(P, norms, row0, val, idx, start):
    """:func:`keep_smallest` for the columns ``start:`` of ``P``: ``v_ji = norms[row0 + i] -
    2 P[i, j]`` merged into the buffers of those ``m - start`` columns (``val[j - start]``;
    the transposed block, not copied)."""
    keep_smallest(P[:, start:].T, norms, row0, val, idx)


def _scaled(A, factor):
    return A if factor == 1.0 else A * factor


def row_hashes(X, factor, mult, out):
    """``out[i] = sum_j bits(y_ij) mult_j mod 2**64`` for the rows ``Y = X * factor``
    (C-ordered ``X``; ``bits``: the float64's as uint64, ``-0.0`` hashes as ``0.0``):
    order-free and exact, so the engines agree to the bit."""
    step = max(1, 2**21 // max(1, X.shape[1]))
    for s in range(0, X.shape[0], step):
        Y = np.ascontiguousarray(_scaled(X[s:s + step], factor))
        b = np.where(Y == 0.0, np.uint64(0), Y.view(np.uint64))
        out[s:s + step] = (b * mult).sum(axis=1, dtype=np.uint64)


def centre32(A, mu, out, norms, factor):
    """``out = float32(Y - mu)`` and ``norms = |Y - mu|^2`` per row (from the float64
    differences) for the dense rows ``Y = A * factor`` (each pass below reads its rows
    scaled so: by a power of two, the values that a scaled copy would hold)."""
    step = max(1, 2**22 // max(1, A.shape[1]))
    for s in range(0, A.shape[0], step):
        C = _scaled(A[s:s + step], factor) - mu
        out[s:s + step] = C
        norms[s:s + step] = np.einsum("ij,ij->i", C, C)


def project(A, mu, v, norms, proj, factor):
    """``norms = |Y - mu|^2`` and ``proj = (Y - mu) . v`` per row of ``Y = A * factor``
    (from the float64 differences; the search's ordering of the rows)."""
    step = max(1, 2**22 // max(1, A.shape[1]))
    for s in range(0, A.shape[0], step):
        C = _scaled(A[s:s + step], factor) - mu
        norms[s:s + step] = np.einsum("ij,ij->i", C, C)
        proj[s:s + step] = C @ v


def centre32_rows(A, order, mu, out, factor):
    """``out[r] = float32(Y[order[r]] - mu)``, ``Y = A * factor``: :func:`centre32`'s rows
    in another order."""
    step = max(1, 2**22 // max(1, A.shape[1]))
    for s in range(0, order.size, step):
        out[s:s + step] = _scaled(A[order[s:s + step]], factor) - mu


def pair_sq_dists(A, B, rows, cols, out, factor):
    """``out[p] = |Y[rows[p]] - Z[cols[p]]|^2`` for the dense rows ``Y = A * factor``,
    ``Z = B * factor`` (differences: exact to rounding, no cancellation of large norms)."""
    step = max(1, 2**22 // max(1, A.shape[1]))
    for s in range(0, rows.size, step):
        D = _scaled(A[rows[s:s + step]], factor) - _scaled(B[cols[s:s + step]], factor)
        out[s:s + step] = np.einsum("ij,ij->i", D, D)


# -- STKR-Prop's inverse-Laplacian CG (see ._solvers): the per-step vector passes --------


def cg_direction(p, Gp, r, Gr, beta, c, ridge, d, Tp):
    """The next direction and its image under ``T``, in place.

    ``p <- beta p + r``, ``Gp <- beta Gp + Gr`` (columnwise ``beta``), then
    ``Tp <- ridge (p - c Gp) + d Gp`` (``T p`` given ``G p``: no product).

    Returns
    -------
    pTp : ndarray of shape (m,)
        ``sum_i Gp[i] Tp[i]`` per column: the ``G`` inner product ``<p, T p>_G``.
    """
    p *= beta
    p += r
    Gp *= beta
    Gp += Gr
    np.multiply(Gp, c, out=Tp)
    np.subtract(p, Tp, out=Tp)
    Tp *= ridge
    Tp += d * Gp
    return np.sum(Gp * Tp, axis=0)


def cg_update(a, p, Tp, GTp, theta, r, Gr):
    """``theta += a p``, ``r -= a Tp``, ``Gr -= a GTp`` in place (columnwise ``a``).

    Returns
    -------
    rho : ndarray of shape (m,)
        ``sum_i r[i] Gr[i]`` per column: the squared ``G`` norm of the new residual.
    """
    theta += p * a
    r -= Tp * a
    Gr -= GTp * a
    return np.sum(r * Gr, axis=0)


def lazy_walk(indptr, indices, data, V, M, out):
    """``out = (M + S V) / 2`` for the CSR matrix ``S = (data, indices, indptr)``.

    ``V`` and ``M`` of shape (n, m); ``M`` is ``E V`` (``V`` itself without duplicate
    rows): the kNN kernel's product (see :func:`._operator.graph_operator`).
    """
    S = sparse.csr_matrix((data, indices, indptr), shape=(V.shape[0], V.shape[0]))
    out[:] = 0.5 * (M + S @ V)
