"""Compiled :mod:`._loops`: one fused pass over each Gram block, parallel over rows.

The block's entries are read once, in the block's precision (``P + P``: float32 tiles
stay float32, which the search's margin allows for); a run of ``_RUN`` entries is first tested as a
whole (a vectorised minimum or comparison: nearly every run is rejected once the
buffers fill), and only the runs holding a smaller value are inserted entry by
entry into the sorted buffer.
"""

import numba as nb
import numpy as np

_RUN = 32
# reassociation lets the run's minimum vectorise; no "nnan"/"ninf": empty slots are inf
_FAST = {"nsz", "arcp", "contract", "reassoc"}


@nb.njit(inline="always", cache=True)
def _insert(val, idx, r, v, col):
    K = val.shape[1]
    p = K - 1
    while p > 0 and val[r, p - 1] > v:
        val[r, p] = val[r, p - 1]
        idx[r, p] = idx[r, p - 1]
        p -= 1
    val[r, p] = v
    idx[r, p] = col


@nb.njit(parallel=True, cache=True, nogil=True, fastmath=_FAST)
def keep_smallest(P, norms, col0, val, idx):
    """Compiled :func:`kernelkit.stkr._loops.keep_smallest`."""
    b, m = P.shape
    K = val.shape[1]
    for i in nb.prange(b):
        for s in range(0, m, _RUN):
            e = min(m, s + _RUN)
            low = np.inf
            for j in range(s, e):
                low = min(low, norms[col0 + j] - (P[i, j] + P[i, j]))
            if low < val[i, K - 1]:
                for j in range(s, e):
                    v = norms[col0 + j] - (P[i, j] + P[i, j])
                    if v < val[i, K - 1]:
                        _insert(val, idx, i, v, col0 + j)


@nb.njit(parallel=True, cache=True, nogil=True, fastmath=_FAST)
def keep_smallest_columns(P, norms, row0, val, idx):
    """Compiled :func:`kernelkit.stkr._loops.keep_smallest_columns`: threads take
    runs of columns and read the tile row by row (contiguous, no transposed copy)."""
    b, m = P.shape
    K = val.shape[1]
    width = 8 * _RUN  # columns per thread: long contiguous reads of each tile row
    for c in nb.prange((m + width - 1) // width):
        c0 = c * width
        c1 = min(m, c0 + width)
        worst = np.empty(c1 - c0)
        for j in range(c0, c1):
            worst[j - c0] = val[j, K - 1]
        for i in range(b):
            ni = norms[row0 + i]
            for s in range(c0, c1, _RUN):
                e = min(c1, s + _RUN)
                low = np.inf
                for j in range(s, e):
                    low = min(low, ni - (P[i, j] + P[i, j]) - worst[j - c0])
                if low < 0.0:
                    for j in range(s, e):
                        v = ni - (P[i, j] + P[i, j])
                        if v < worst[j - c0]:
                            _insert(val, idx, j, v, row0 + i)
                            worst[j - c0] = val[j, K - 1]


@nb.njit(parallel=True, cache=True, nogil=True)
def pair_sq_dists(A, B, rows, cols, out):
    """Compiled :func:`kernelkit.stkr._loops.pair_sq_dists`."""
    d = A.shape[1]
    for p in nb.prange(rows.size):
        i = rows[p]
        j = cols[p]
        s = 0.0
        for t in range(d):
            diff = A[i, t] - B[j, t]
            s += diff * diff
        out[p] = s
