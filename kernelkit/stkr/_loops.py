"""The kNN search's per-block selection: the NumPy reference (twin: :mod:`._loops_numba`).

:func:`keep_smallest` merges one block of approximate squared distances into each
row's buffer of the ``K`` smallest seen so far. The buffers only bound the radii
(see :mod:`._neighbours`), so the two engines need not agree on ties inside them.
"""

import numpy as np


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


def keep_smallest_columns(P, norms, row0, val, idx):
    """:func:`keep_smallest` for the columns of ``P``: ``v_ji = norms[row0 + i] - 2 P[i, j]``
    merged into the buffers of the ``m`` columns (the transposed tile, not copied)."""
    keep_smallest(P.T, norms, row0, val, idx)


def pair_sq_dists(A, B, rows, cols, out):
    """``out[p] = |A[rows[p]] - B[cols[p]]|^2`` for dense rows (differences: exact to
    rounding, no cancellation of large norms)."""
    step = max(1, 2**22 // max(1, A.shape[1]))
    for s in range(0, rows.size, step):
        D = A[rows[s:s + step]] - B[cols[s:s + step]]
        out[s:s + step] = np.einsum("ij,ij->i", D, D)
