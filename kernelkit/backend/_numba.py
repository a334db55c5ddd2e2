"""The Numba engine: BLAS products, then one fused parallel pass per block.

Each finisher reads the Gram block ``X @ Y.T`` in place and writes the kernel
value in the same pass (distance, clipping and kernel function; for the NTK the
whole layer recursion per entry), with no temporaries. For ``k(X, X)`` only the
lower triangle is computed and then mirrored, halving the element-wise work.
Functions compile lazily on first use and are cached on disk (``cache=True``).
"""

import math
import threading

import numba as nb
import numpy as np

from ..utils._threads import map_row_blocks, n_workers, single_blas_thread
from ._array import CANCELLATION, NEAR_PARALLEL
from ._numpy import NumpyBackend

_PI = math.pi
_SQRT3 = math.sqrt(3.0)
_SQRT5 = math.sqrt(5.0)
_T_MAX = 1e3  # exp(-t) == 0.0 in float64 beyond ~745


@nb.njit(inline="always", cache=True)
def _row_end(i, m, self_offset, tri):
    if tri:
        return min(m, self_offset + i + 1)
    return m


@nb.njit(inline="always", cache=True)
def _stationary_value(code, d2, gamma):
    if code == 0:
        return math.exp(-gamma * d2)
    r = math.sqrt(2.0 * (gamma * d2))  # this order: no 0 * inf when gamma is huge
    if code == 1:
        return math.exp(-r)
    # t capped where exp(-t) is already exactly 0: an infinite distance gives 0, not inf * 0
    if code == 2:
        t = min(_SQRT3 * r, _T_MAX)
        return (1.0 + t) * math.exp(-t)
    t = min(_SQRT5 * r, _T_MAX)
    return (1.0 + t + t * t / 3.0) * math.exp(-t)


@nb.njit(nogil=True, cache=True)
def stationary_inplace(code, block, dst, sx, sy, gamma, self_offset, tri, X, Y):
    """Gram block -> Gaussian / Matérn kernel block, in place.

    Near-duplicate pairs, where ``|x|^2 + |y|^2 - 2 x.y`` cancels, get their squared
    distance recomputed from the coordinates ``X``, ``Y``. The distances come from
    :func:`_row_sqdist` (a vectorised pass), then the kernel values.
    """
    n, m = block.shape
    for i in range(n):
        end = _row_end(i, m, self_offset, tri)
        _row_sqdist(block, sx, sy, self_offset, i, end, X, Y)
        for j in range(end):
            dst[i, j] = _stationary_value(code, block[i, j], gamma)


@nb.njit(inline="always", cache=True)
def _row_sqdist(block, sx, sy, self_offset, i, end, X, Y):
    """Row ``i`` of a Gram block -> squared distances ``||x_i - y_j||^2``, ``j < end``.

    A branch-free pass (it vectorises) writes ``|x|^2 + |y|^2 - 2 x.y`` and counts the
    pairs where that cancels; only then a second look recomputes those from the
    coordinates. The self-pair (``self_offset`` >= 0) gets exactly 0.
    """
    xi = sx[i]
    row = block[i]
    nbad = 0
    for j in range(end):
        s = xi + sy[j]
        d2 = s - 2.0 * row[j]
        nbad += d2 <= CANCELLATION * s
        row[j] = d2
    if nbad:
        d = X.shape[1]
        for j in range(end):
            if row[j] <= CANCELLATION * (xi + sy[j]):
                acc = 0.0
                for k in range(d):
                    acc += (X[i, k] - Y[j, k]) ** 2
                row[j] = acc
    if self_offset >= 0 and self_offset + i < end:
        row[self_offset + i] = 0.0


@nb.njit(nogil=True, cache=True)
def sqdist_inplace(block, sx, sy, scale, self_offset, tri, X, Y):
    """Gram block -> ``scale * ||x - y||^2`` in place (zero where ``tri`` skips).

    The Gaussian then needs only ``np.exp`` over the block: NumPy's SIMD exp is
    several times faster than a scalar exp in a compiled loop. Distances from
    :func:`_row_sqdist`, then a scaling pass.
    """
    n, m = block.shape
    for i in range(n):
        end = _row_end(i, m, self_offset, tri)
        _row_sqdist(block, sx, sy, self_offset, i, end, X, Y)
        row = block[i]
        for j in range(end):
            row[j] *= scale
        for j in range(end, m):
            row[j] = 0.0


@nb.njit(nogil=True, cache=True)
def dot_inplace(code, block, dst, sx, sy, gamma, degree, coef0, self_offset, tri):
    """Gram block -> linear (0), polynomial (1) or cosine (2) kernel block in ``dst``."""
    n, m = block.shape
    for i in range(n):
        me = self_offset + i if self_offset >= 0 else -1
        for j in range(_row_end(i, m, self_offset, tri)):
            g = block[i, j]
            if code == 0:
                dst[i, j] = g
            elif code == 1:
                dst[i, j] = (gamma * g + coef0) ** degree
            else:
                norm = sx[i] * sy[j]
                c = g / norm if norm > 0.0 else 0.0
                if j == me and norm > 0.0:
                    c = 1.0
                dst[i, j] = min(1.0, max(-1.0, c))


@nb.njit(nogil=True, cache=True)
def poly_int_inplace(block, dst, gamma, coef0, power, self_offset, tri):
    """Gram block -> ``(gamma x.y + coef0) ** power`` in ``dst`` for an integer ``power``.

    Repeated products over a row instead of a ``pow`` call per entry: each pass is a
    plain loop that vectorises (``power - 1`` roundings, within a few ulps of ``pow``).
    """
    n, m = block.shape
    base = np.empty(m)
    acc = np.empty(m)
    for i in range(n):
        end = _row_end(i, m, self_offset, tri)
        for j in range(end):
            t = gamma * block[i, j] + coef0
            base[j] = t
            acc[j] = t
        for _ in range(power - 1):
            for j in range(end):
                acc[j] *= base[j]
        for j in range(end):
            dst[i, j] = acc[j]


_MAX_INT_POWER = 16  # integer polynomial degrees up to this: repeated products


# The NTK/NNGP recursion runs in stages over small row chunks of a block (kept in
# cache): compiled passes for the arithmetic, NumPy's SIMD arccos/arcsin between
# them (several times faster than a scalar libm call per entry).


@nb.njit(nogil=True, cache=True)
def nn_start(G, K, D, T, sx, sy, inv_d, relu, self_offset, X, Y):
    """Input layer: ``K = x.y / d``, ``T = 0`` and, for relu, the defect ``D = p - K``.

    Nearly parallel pairs get ``D`` from the unit vectors (``p |u - v|^2 / 2``);
    self-pairs (``self_offset`` >= 0: row ``i`` is point ``self_offset + i``) get 0.
    """
    n, m = K.shape
    d = X.shape[1]
    for i in range(n):
        me = self_offset + i if self_offset >= 0 else -1
        for j in range(m):
            k = G[i, j] * inv_d
            K[i, j] = k
            T[i, j] = 0.0
            if relu:
                p = sx[i, 0] * sy[j, 0]
                dd = max(p - k, 0.0)
                if j == me:
                    dd = 0.0
                elif k > (1.0 - CANCELLATION) * p and p > 0.0:
                    acc = 0.0
                    for c in range(d):
                        diff = X[i, c] / sx[i, 0] - Y[j, c] / sy[j, 0]
                        acc += diff * diff
                    dd = p * acc * (0.5 / d)
                D[i, j] = dd


@nb.njit(nogil=True, cache=True)
def nn_affine(K, D, T, C, sx, sy, layer, w2, b2, relu):
    """Dense layer ``layer``: ``K <- w2 K + b2``, ``T <- K + w2 T``, the defect update
    (``affine_defect``), and into ``C`` the argument of the activation's inverse
    trigonometric function (cosine of the angle for relu, arcsin argument for erf)."""
    n, m = K.shape
    scale = 1.0 if layer == 1 else math.sqrt(0.5)
    for i in range(n):
        for j in range(m):
            k = K[i, j]
            k_new = w2 * k + b2
            a = sx[i, layer]
            b = sy[j, layer]
            if relu:
                p_new = a * b
                sa = sx[i, layer - 1] * scale
                sb = sy[j, layer - 1] * scale
                dd = D[i, j]
                if k_new > 0.0:
                    num = w2 * w2 * dd * (sa * sb + k) + w2 * b2 * ((sa - sb) ** 2 + 2.0 * dd)
                    D[i, j] = num / (p_new + k_new)
                else:
                    D[i, j] = p_new - k_new
                c = k_new / p_new if p_new > 0.0 else 0.0
            else:
                c = 2.0 * k_new / math.sqrt(a * b)
            C[i, j] = min(1.0, max(-1.0, c))
            K[i, j] = k_new
            T[i, j] = k_new + w2 * T[i, j]


@nb.njit(nogil=True, cache=True)
def nn_activate(K, D, T, C, TH, sx, sy, layer, relu):
    """Activation of layer ``layer`` given ``TH`` = arccos (relu) or arcsin (erf) of ``C``
    (``C`` kept: relu reads its cosine there instead of dividing again).

    Relu pairs whose defect is below ``NEAR_PARALLEL * p`` take their angle from the
    defect instead (``relu_layer`` in :mod:`._array`).
    """
    n, m = K.shape
    for i in range(n):
        for j in range(m):
            k = K[i, j]
            a = sx[i, layer]
            b = sy[j, layer]
            if relu:
                p = a * b
                if p <= 0.0:
                    K[i, j] = 0.0
                    D[i, j] = 0.0
                    T[i, j] *= 0.25
                    continue
                dd = D[i, j]
                if dd < NEAR_PARALLEL * p:
                    h = math.sqrt(min(1.0, max(0.0, 0.5 * dd / p)))
                    th = 2.0 * math.asin(h)
                    omc = 2.0 * h * h
                    c = 1.0 - omc
                    sn = math.sin(th)
                    t2 = th * th
                    smtc = th * t2 * (1.0 / 3.0 - t2 * (1.0 / 30.0 - t2 * (1.0 / 840.0
                                                                           - t2 / 45360.0)))
                else:
                    th = TH[i, j]
                    c = C[i, j]  # min(1, max(-1, k / p)) from nn_affine
                    sn = math.sqrt(1.0 - c * c)
                    omc = 1.0 - c
                    smtc = sn - th * c
                K[i, j] = p * (sn + (_PI - th) * c) * (0.5 / _PI)
                D[i, j] = p * (_PI * omc - smtc) * (0.5 / _PI)
                T[i, j] *= (_PI - th) * (0.5 / _PI)
            else:
                p = 0.5 * math.sqrt((a - 1.0) * (b - 1.0))  # erf_gap in ._array
                gap = a + b - 1.0 + 4.0 * max((p - k) * (p + k), 0.0)
                T[i, j] *= (4.0 / _PI) / math.sqrt(gap)
                K[i, j] = (2.0 / _PI) * TH[i, j]


@nb.njit(nogil=True, cache=True)
def nn_finish(K, T, dst, w2, b2, want_ntk):
    """Readout layer: NNGP ``w2 K + b2``, NTK ``w2 K + b2 + w2 T``, written to ``dst``."""
    n, m = K.shape
    for i in range(n):
        for j in range(m):
            k = w2 * K[i, j] + b2
            dst[i, j] = k + w2 * T[i, j] if want_ntk else k


@nb.njit(nogil=True, cache=True)
def laplacian_block(X, Y, gamma, block, self_offset, tri):
    """``exp(-gamma * ||x - y||_1)`` computed directly (no Gram product applies)."""
    n, m = block.shape
    d = X.shape[1]
    for i in range(n):
        for j in range(_row_end(i, m, self_offset, tri)):
            s = 0.0
            for k in range(d):
                s += abs(X[i, k] - Y[j, k])
            block[i, j] = math.exp(-gamma * s)


@nb.njit(nogil=True, cache=True)
def mirror_rows(out, r0, r1):
    """Copy the lower-triangle rows ``r0:r1`` of square ``out`` onto their transposes.

    Row by row of the destination, so writes are contiguous and the block's rows,
    just computed, are read from cache.
    """
    for j in range(r1):
        for i in range(max(r0, j + 1), r1):
            out[j, i] = out[i, j]


@nb.njit(cache=True, nogil=True)
def stationary_rows(code, X, Yt, gamma, out):
    """Stationary kernel rows from the coordinates, for inputs of few features.

    ``code`` 0: rbf, 1/2/3: Matérn nu = 1/2, 3/2, 5/2 (length scale ``1 / sqrt(2 gamma)``),
    4: L1 Laplacian. ``Yt`` holds the second point set transposed (features x points),
    so the inner loops run over contiguous points. For codes 0 and 4 ``out`` receives
    the exponent (``-gamma ||x - y||_2^2`` or ``-gamma ||x - y||_1``), to be
    exponentiated by the caller with NumPy's vectorised ``exp``; for Matérn the value.
    """
    n = X.shape[0]
    d, m = Yt.shape
    # scale the coordinates so that the first pass writes and the others accumulate the
    # exponent directly: sqrt(gamma) (x - y) for rbf, gamma (x - y) for the L1 Laplacian
    c = gamma if code == 4 else math.sqrt(gamma) if code == 0 else 1.0
    for i in range(n):
        row = out[i]
        for k in range(d):
            xk = c * X[i, k]
            if code == 4:
                if k == 0:
                    for j in range(m):
                        row[j] = -abs(xk - c * Yt[k, j])
                else:
                    for j in range(m):
                        row[j] -= abs(xk - c * Yt[k, j])
            elif code == 0:
                if k == 0:
                    for j in range(m):
                        t = xk - c * Yt[k, j]
                        row[j] = -t * t
                else:
                    for j in range(m):
                        t = xk - c * Yt[k, j]
                        row[j] -= t * t
            else:
                if k == 0:
                    for j in range(m):
                        t = xk - Yt[k, j]
                        row[j] = t * t
                else:
                    for j in range(m):
                        t = xk - Yt[k, j]
                        row[j] += t * t
        if 1 <= code <= 3:  # Matérn: the engine's scalar formulas
            for j in range(m):
                row[j] = _stationary_value(code, row[j], gamma)


_DIRECT = {"rbf": 0, "matern": None, "laplacian": 4}  # pairwise_into's direct path
_DIRECT_MAX_D = 16
_CACHE_BLOCK_BYTES = 32 * 2**20  # rows per block: a longer GEMM, its pass still in L3
# (measured, 2 cores: a 20,000^2 float32 rbf matrix of 784 features 6.5 s at 8 MiB, 4.2 s
# at 32 MiB, 4.7 s at 128 MiB; 20,000 x 64 features 2.5 s -> 1.4 s)
_MIN_BLOCKS_PER_WORKER = 4  # granularity: the triangle's blocks differ in size
_MIN_ROWS = 128  # below this a block's GEMM loses efficiency
_NN_CHUNK_BYTES = 2**19  # rows of one NTK stage buffer (five of them per worker)


class NumbaBackend(NumpyBackend):
    """CPU engine: BLAS for products, fused parallel Numba passes for the rest."""

    name = "numba"

    def _stationary(self, code, block, dst, sx, sy, gamma, self_offset, tri, Xb, Yb):
        if code == 0:  # Gaussian: compiled distance pass, then NumPy's vectorised exp
            sqdist_inplace(block, sx, sy, -float(gamma), self_offset, tri, Xb, Yb)
            np.exp(block, out=dst)
            return
        stationary_inplace(code, block, dst, sx, sy, float(gamma), self_offset, tri, Xb, Yb)

    def _dot(self, code, block, dst, sx, sy, gamma, degree, coef0, self_offset, tri):
        if code == 1 and float(degree).is_integer() and 1 <= degree <= _MAX_INT_POWER:
            poly_int_inplace(block, dst, float(gamma), float(coef0), int(degree), self_offset,
                             tri)
            return
        dummy = np.empty(0)
        dot_inplace(code, block, dst, dummy if sx is None else sx, dummy if sy is None else sy,
                    float(gamma), float(degree), float(coef0), self_offset, tri)

    def _nn(self, block, dst, sx, sy, depth, act, w2, b2, inv_d, want_ntk, self_offset, tri,
            Xb, Yb):
        sx, sy = np.ascontiguousarray(sx), np.ascontiguousarray(sy)
        w2, b2, inv_d = float(w2), float(b2), float(inv_d)
        relu = act == 0
        trig = np.arccos if relu else np.arcsin
        n, m = block.shape
        rows = max(1, _NN_CHUNK_BYTES // (8 * m))
        buf = np.empty((5, min(rows, n), m))
        for a in range(0, n, rows):
            b = min(n, a + rows)
            cols = min(m, self_offset + b) if tri else m
            K, D, T, C, TH = (buf[q, : b - a, :cols] for q in range(5))
            nn_start(block[a:b, :cols], K, D, T, sx[a:b], sy[:cols], inv_d, relu,
                     self_offset + a if self_offset >= 0 else -1, Xb[a:b], Yb[:cols])
            for layer in range(1, depth + 1):
                nn_affine(K, D, T, C, sx[a:b], sy[:cols], layer, w2, b2, relu)
                trig(C, out=TH)
                nn_activate(K, D, T, C, TH, sx[a:b], sy[:cols], layer, relu)
            nn_finish(K, T, dst[a:b, :cols], w2, b2, want_ntk)

    def _laplacian(self, Xb, Yb, gamma, block, self_offset, tri):
        laplacian_block(Xb, Yb, float(gamma), block, self_offset, tri)

    def _mirror_rows(self, out, r0, r1):
        mirror_rows(out, r0, r1)

    def pairwise_into(self, spec, X, Y=None, out=None):
        """Stationary kernels of few features from the coordinates, threaded by row blocks.

        With ``d <= 16`` features the GEMM behind :meth:`pairwise` is memory-bound (its
        inner dimension is tiny); a direct pass over the coordinates is several times
        faster and exact for near-duplicate points. ``k(X, X)`` is computed on the lower
        triangle and mirrored. Other kernels: :meth:`pairwise`.
        """
        name, p = spec
        if name not in _DIRECT or X.shape[1] > _DIRECT_MAX_D:
            return self.pairwise(spec, X, Y)
        from ._array import STATIONARY_CODES

        code = _DIRECT[name] if name != "matern" else STATIONARY_CODES[("matern", p[1])]
        X = np.ascontiguousarray(X, dtype=np.float64)
        Yt = np.ascontiguousarray((X if Y is None else Y).T, dtype=np.float64)
        if max(float(np.abs(X).max(initial=0.0)), float(np.abs(Yt).max(initial=0.0))) > 1e150:
            # refused as pairwise refuses them (the engines agree on what they compute)
            Yf = X if Y is None else Yt.T
            shift = np.concatenate([X, Yf]).mean(axis=0) if Y is not None else X.mean(axis=0)
            self._check_centered_norms(X - shift, Yf - shift, X, Y)
        if out is None or out.shape != (X.shape[0], Yt.shape[1]):
            out = np.empty((X.shape[0], Yt.shape[1]))
        gamma = float(p[0])

        def job(r0, r1, scratch):
            cols = r1 if Y is None else Yt.shape[1]
            block = out[r0:r1, :cols]
            stationary_rows(code, X[r0:r1], Yt[:, :cols], gamma, block)
            if code == 0 or code == 4:
                np.exp(block, out=block)
            if Y is None:
                self._mirror_rows(out, r0, r1)

        self._map_blocks(job, X.shape[0], Yt.shape[1], scratch=False)
        return out

    def direct_code(self, spec, X):
        """The :func:`stationary_rows` code of ``spec`` for host points ``X``, else -1."""
        if (spec is None or X is None or spec.name not in _DIRECT or X.shape[1] > _DIRECT_MAX_D
                or not isinstance(X, np.ndarray)):
            return -1
        from ._array import STATIONARY_CODES

        if spec.name == "matern":
            return STATIONARY_CODES[("matern", spec.params[1])]
        return _DIRECT[spec.name]

    def _gemm(self, A, B, out):
        """``out[...] = A @ B``; where ``A`` is rows ``r0:r1`` of ``B.T`` (a block of
        ``k(X, X)``), the square ``A @ A.T`` goes through BLAS's symmetric rank-k
        update (NumPy's SYRK path: half the flops) and the rest through GEMM."""
        r0 = _rows_of(A, B.T)
        if r0 < 0:
            np.matmul(A, B, out=out)
            return
        r1 = r0 + A.shape[0]
        if r0:
            np.matmul(A, B[:, :r0], out=out[:, :r0])
        np.matmul(A, A.T, out=out[:, r0:r1])
        if r1 < B.shape[1]:
            np.matmul(A, B[:, r1:], out=out[:, r1:])

    def _map_blocks(self, job, n, ncols, scratch):
        """Blocks run concurrently on a thread pool, BLAS held to one thread per block.

        Compiled passes release the GIL, so each worker does its block's GEMM and
        fused pass back to back while the block is still in cache; one BLAS thread
        per worker avoids OpenBLAS threads spinning against the workers. At least
        ``_MIN_BLOCKS_PER_WORKER`` blocks per worker (of at least ``_MIN_ROWS`` rows),
        submitted last block first: the blocks of a triangle ``k(X, X)`` grow with
        their row index, and the largest first balances the workers.
        """
        workers = n_workers()
        rows = max(1, min(self._budget_rows(ncols) // workers,
                          _CACHE_BLOCK_BYTES // (8 * max(1, ncols))))
        if workers > 1:
            rows = min(rows, max(_MIN_ROWS, -(-n // (_MIN_BLOCKS_PER_WORKER * workers))))
        n_blocks = -(-n // rows)
        if n_blocks == 1:  # small: one thread, no BLAS threads left spinning afterwards
            with single_blas_thread():
                job(0, n, np.empty((n, ncols)) if scratch else None)
            return
        local = threading.local()

        def run(r0, r1):
            r0 = (n_blocks - 1 - r0 // rows) * rows  # last block first
            r1 = min(n, r0 + rows)
            buf = None
            if scratch:
                buf = getattr(local, "buf", None)
                if buf is None:
                    buf = local.buf = np.empty((rows, ncols))
            job(r0, r1, buf)

        map_row_blocks(run, n, rows)  # kernelkit's one row-block pool, one BLAS thread each


def _rows_of(A, C):
    """``r0`` if ``A`` is the rows ``r0:r0 + len(A)`` of ``C`` (same memory), else -1."""
    if (A.ndim != 2 or C.ndim != 2 or A.shape[1] != C.shape[1] or A.strides != C.strides
            or A.dtype != C.dtype or A.shape[0] == 0 or C.strides[0] <= 0):
        return -1
    offset = A.__array_interface__["data"][0] - C.__array_interface__["data"][0]
    r0, rem = divmod(offset, C.strides[0])
    if rem or r0 < 0 or r0 + A.shape[0] > C.shape[0]:
        return -1
    return r0
