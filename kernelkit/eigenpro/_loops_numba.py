"""Compiled twin of :mod:`kernelkit.eigenpro._loops` (Numba).

:func:`residual_gradient` has the reference's signature and results (to rounding:
the sums are accumulated in float64). Each kernel row of the batch is read once,
in place in the held matrix (no gathered copy of the batch's rows): its dot
products with the coefficients give the residuals, and, while the row is still in
the L1 cache, it is added to the gradient with those residuals as factors. The
batch's rows are split over kernelkit's row-block pool, one partial gradient per
block, summed at the end.
"""

import numba as nb
import numpy as np

from ..utils._threads import map_row_blocks, n_workers

# entries per block: a smaller pass (a step's 681 x 2,000 rows, 0.5 ms) gains nothing
# from a second thread and loses whenever the other core is busy (measured 0.5 ms on one
# thread against 0.8-1.0 ms on two, 2 loaded cores)
_MIN_ENTRIES = 2**22


@nb.njit(nogil=True, cache=True, fastmath={"reassoc", "contract"})
def _rows_pass(M, idx, r0, r1, Wt, F0, Y, wrow, R, Gt):
    """Rows ``r0:r1`` of the batch: ``R`` rows, and their gradient added to ``Gt``."""
    k, p = Wt.shape
    rw = np.empty(k)
    for i in range(r0, r1):
        row = M[idx[i]]
        for c in range(k):
            w = Wt[c]
            acc = 0.0
            for j in range(p):
                acc += np.float64(row[j]) * np.float64(w[j])
            r = acc + F0[i, c] - Y[i, c]
            R[i, c] = r
            rw[c] = np.float64(R[i, c]) * wrow[i]
        for c in range(k):
            g = Gt[c]
            s = rw[c]
            for j in range(p):
                g[j] += np.float64(row[j]) * s


def residual_gradient(M, idx, W, F0, Y, wrow):
    """See :func:`kernelkit.eigenpro._loops.residual_gradient`."""
    b, k = Y.shape
    p = M.shape[1]
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    Wt = np.ascontiguousarray(W.T)
    F0 = np.zeros((b, k), dtype=np.float64) if F0 is None else np.ascontiguousarray(F0)
    Y = np.ascontiguousarray(Y)
    wrow = np.ones(b) if wrow is None else np.ascontiguousarray(wrow, dtype=np.float64)
    R = np.empty((b, k), dtype=M.dtype)
    rows = max(-(-_MIN_ENTRIES // max(1, p)), -(-b // n_workers()))
    parts = np.zeros((max(1, -(-b // rows)), k, p))

    def job(r0, r1):
        _rows_pass(M, idx, r0, r1, Wt, F0, Y, wrow, R, parts[r0 // rows])

    map_row_blocks(job, b, rows)
    G = parts[0] if parts.shape[0] == 1 else parts.sum(axis=0)
    return R, np.ascontiguousarray(G.T, dtype=M.dtype)
