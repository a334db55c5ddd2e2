"""Compiled :mod:`._loops`: one fused pass over each Gram block; CG's vector passes.

The search's selection runs serially on one block per call (kernelkit's pool runs the
blocks in parallel, see :mod:`._neighbours`). The block's entries are read once, in
the block's precision (``P + P``: float32 blocks stay float32, which the search's
margin allows for) and compared with the buffer's worst, kept in a register (a plain
loop with a rarely taken branch: measured faster than testing runs of entries as a
whole first); a smaller one is inserted into the sorted buffer.
"""

import numba as nb
import numpy as np

from ..utils._threads import map_row_blocks, n_workers

# rows of a block of the row-wise passes below, run on kernelkit's pool (a serial
# compiled kernel per block: no barrier of Numba's own threads, which stalls whenever
# another process holds a core)
_ROWS = 2048


def _even(n):
    """Rows per block of a pass whose rows are independent (no sums across rows: any
    blocking gives the same result): at most ``_ROWS``, in a number of blocks that is
    a multiple of twice the workers, of equal size (2,048-row blocks would split
    10,000 rows 3:2 over two workers)."""
    per = 2 * n_workers()
    return max(1, -(-n // (per * -(-n // (per * _ROWS)))))


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


@nb.njit(cache=True, nogil=True, fastmath=_FAST)
def keep_smallest(P, norms, col0, val, idx):
    """Compiled :func:`kernelkit.stkr._loops.keep_smallest`."""
    b, m = P.shape
    K = val.shape[1]
    nr = norms[col0:col0 + m]
    for i in range(b):
        row = P[i]
        worst = val[i, K - 1]
        for j in range(m):
            v = nr[j] - (row[j] + row[j])
            if v < worst:
                _insert(val, idx, i, v, col0 + j)
                worst = val[i, K - 1]


@nb.njit(cache=True, nogil=True, fastmath=_FAST)
def keep_smallest_columns(P, norms, row0, val, idx, start):
    """Compiled :func:`kernelkit.stkr._loops.keep_smallest_columns`: the block read row
    by row (contiguous, no transposed copy), the columns' worst kept at hand."""
    b, m = P.shape
    K = val.shape[1]
    worst = np.empty(m - start)
    for j in range(m - start):
        worst[j] = val[j, K - 1]
    for i in range(b):
        ni = norms[row0 + i]
        row = P[i, start:]
        for j in range(m - start):
            v = ni - (row[j] + row[j])
            if v < worst[j]:
                _insert(val, idx, j, v, row0 + i)
                worst[j] = val[j, K - 1]


@nb.njit(cache=True, nogil=True)
def _row_hashes(X, factor, mult, out):
    n, d = X.shape
    cell = np.empty(1)
    bits = cell.view(np.uint64)  # the bits of the scaled value, through one slot
    for i in range(n):
        h = np.uint64(0)
        for t in range(d):
            y = X[i, t] * factor
            if y != 0.0:
                cell[0] = y
                h += bits[0] * mult[t]
        out[i] = h


def row_hashes(X, factor, mult, out):
    """Compiled :func:`kernelkit.stkr._loops.row_hashes` (unsigned arithmetic wraps)."""
    map_row_blocks(lambda a, b: _row_hashes(X[a:b], factor, mult, out[a:b]), X.shape[0],
                   _even(X.shape[0]))


@nb.njit(cache=True, nogil=True)
def _centre32(A, mu, out, norms, factor):
    n, d = A.shape
    for i in range(n):
        s = 0.0
        for t in range(d):
            c = A[i, t] * factor - mu[t]
            out[i, t] = c
            s += c * c
        norms[i] = s


def centre32(A, mu, out, norms, factor):
    """Compiled :func:`kernelkit.stkr._loops.centre32` (one pass)."""
    map_row_blocks(lambda a, b: _centre32(A[a:b], mu, out[a:b], norms[a:b], factor),
                   A.shape[0], _even(A.shape[0]))


@nb.njit(cache=True, nogil=True)
def _project(A, mu, v, norms, proj, factor):
    n, d = A.shape
    for i in range(n):
        s = 0.0
        p = 0.0
        for t in range(d):
            c = A[i, t] * factor - mu[t]
            s += c * c
            p += c * v[t]
        norms[i] = s
        proj[i] = p


def project(A, mu, v, norms, proj, factor):
    """Compiled :func:`kernelkit.stkr._loops.project` (one pass)."""
    map_row_blocks(lambda a, b: _project(A[a:b], mu, v, norms[a:b], proj[a:b], factor),
                   A.shape[0], _even(A.shape[0]))


@nb.njit(cache=True, nogil=True)
def _centre32_rows(A, order, mu, out, factor):
    d = A.shape[1]
    for r in range(order.size):
        i = order[r]
        for t in range(d):
            out[r, t] = A[i, t] * factor - mu[t]


def centre32_rows(A, order, mu, out, factor):
    """Compiled :func:`kernelkit.stkr._loops.centre32_rows` (rows gathered as they are
    centred: no reordered float64 copy)."""
    map_row_blocks(lambda a, b: _centre32_rows(A, order[a:b], mu, out[a:b], factor),
                   order.size, _even(order.size))


@nb.njit(cache=True, nogil=True)
def _pair_sq_dists(A, B, rows, cols, out, f):
    d = A.shape[1]
    d4 = d - d % 4
    for p in range(rows.size):
        i = rows[p]
        j = cols[p]
        s0 = s1 = s2 = s3 = 0.0
        for t in range(0, d4, 4):
            e0 = A[i, t] * f - B[j, t] * f
            e1 = A[i, t + 1] * f - B[j, t + 1] * f
            e2 = A[i, t + 2] * f - B[j, t + 2] * f
            e3 = A[i, t + 3] * f - B[j, t + 3] * f
            s0 += e0 * e0
            s1 += e1 * e1
            s2 += e2 * e2
            s3 += e3 * e3
        for t in range(d4, d):
            e0 = A[i, t] * f - B[j, t] * f
            s0 += e0 * e0
        out[p] = (s0 + s1) + (s2 + s3)


def pair_sq_dists(A, B, rows, cols, out, factor):
    """Compiled :func:`kernelkit.stkr._loops.pair_sq_dists`: four partial sums per pair
    (independent chains of additions, not one chain four times as long), combined as
    ``(s0 + s1) + (s2 + s3)``: a fixed order, the same for a pair and its transpose."""
    map_row_blocks(lambda a, b: _pair_sq_dists(A, B, rows[a:b], cols[a:b], out[a:b], factor),
                   rows.size, 8 * _ROWS)


# -- STKR-Prop's inverse-Laplacian CG: each step's vector work in two passes -------------
# Row blocks of a fixed size, each summing its columns in row order, the blocks' sums
# then added in block order: the result depends neither on the number of threads nor,
# for a column, on the other columns present (a batch equals its parts).


@nb.njit(cache=True, nogil=True)
def _cg_direction(p, Gp, r, Gr, beta, c, ridge, d, Tp, part):
    n, m = p.shape
    for i in range(n):
        for j in range(m):
            pv = p[i, j] * beta[j] + r[i, j]
            gv = Gp[i, j] * beta[j] + Gr[i, j]
            p[i, j] = pv
            Gp[i, j] = gv
            t = (pv - gv * c) * ridge[j] + d[i, j] * gv
            Tp[i, j] = t
            part[j] += gv * t


def cg_direction(p, Gp, r, Gr, beta, c, ridge, d, Tp):
    """Compiled :func:`kernelkit.stkr._loops.cg_direction` (one pass over the rows)."""
    part = np.zeros((-(-p.shape[0] // _ROWS), p.shape[1]))
    map_row_blocks(lambda a, b: _cg_direction(p[a:b], Gp[a:b], r[a:b], Gr[a:b], beta, c,
                                              ridge, d[a:b], Tp[a:b], part[a // _ROWS]),
                   p.shape[0], _ROWS)
    return part.sum(axis=0)


@nb.njit(cache=True, nogil=True)
def _cg_update(a, p, Tp, GTp, theta, r, Gr, part):
    n, m = p.shape
    for i in range(n):
        for j in range(m):
            theta[i, j] += p[i, j] * a[j]
            rv = r[i, j] - Tp[i, j] * a[j]
            gv = Gr[i, j] - GTp[i, j] * a[j]
            r[i, j] = rv
            Gr[i, j] = gv
            part[j] += rv * gv


def cg_update(a, p, Tp, GTp, theta, r, Gr):
    """Compiled :func:`kernelkit.stkr._loops.cg_update` (one pass over the rows)."""
    part = np.zeros((-(-p.shape[0] // _ROWS), p.shape[1]))
    map_row_blocks(lambda s, e: _cg_update(a, p[s:e], Tp[s:e], GTp[s:e], theta[s:e], r[s:e],
                                           Gr[s:e], part[s // _ROWS]),
                   p.shape[0], _ROWS)
    return part.sum(axis=0)


@nb.njit(cache=True, nogil=True)
def _lazy_walk(indptr, indices, data, V, M, out, r0, r1):
    m = V.shape[1]
    for i in range(r0, r1):
        for j in range(m):
            out[i, j] = 0.0
        for q in range(indptr[i], indptr[i + 1]):
            w = data[q]
            col = indices[q]
            for j in range(m):
                out[i, j] += w * V[col, j]
        for j in range(m):
            out[i, j] = 0.5 * (M[i, j] + out[i, j])


def lazy_walk(indptr, indices, data, V, M, out):
    """Compiled :func:`kernelkit.stkr._loops.lazy_walk`."""
    map_row_blocks(lambda a, b: _lazy_walk(indptr, indices, data, V, M, out, a, b),
                   V.shape[0], _even(V.shape[0]))
