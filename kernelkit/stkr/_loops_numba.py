"""Compiled :mod:`._loops`: one fused pass over each Gram block, parallel over rows.

The block's entries are read once and mostly rejected by one comparison with the
row's current ``K``-th value; accepted ones are inserted in the sorted buffer.
"""

import numba as nb


@nb.njit(parallel=True, cache=True, nogil=True)
def keep_smallest(P, norms, col0, val, idx):
    """Compiled :func:`kernelkit.stkr._loops.keep_smallest`."""
    b, m = P.shape
    K = val.shape[1]
    for i in nb.prange(b):
        worst = val[i, K - 1]
        for j in range(m):
            v = norms[col0 + j] - 2.0 * P[i, j]
            if v < worst:
                p = K - 1
                while p > 0 and val[i, p - 1] > v:
                    val[i, p] = val[i, p - 1]
                    idx[i, p] = idx[i, p - 1]
                    p -= 1
                val[i, p] = v
                idx[i, p] = col0 + j
                worst = val[i, K - 1]
