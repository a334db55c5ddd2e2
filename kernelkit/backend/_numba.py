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
from ._vmath import acos_args, acos_from, asin_poly, vasin, vexp

try:
    from numpy._core._multiarray_umath import __cpu_features__ as _CPU
except ImportError:  # NumPy < 2
    from numpy.core._multiarray_umath import __cpu_features__ as _CPU

# NumPy's float64 exp runs on SIMD lanes only with AVX-512; its AVX2 build calls libm per
# entry (AMD EPYC, Zen 3: 10 ns an entry, the compiled vexp pass 4 ns). The Gaussian and
# Laplacian take NumPy's exp where it is vectorised, vexp in the compiled pass elsewhere.
NUMPY_SIMD_EXP = bool(_CPU.get("AVX512F"))
_PI = math.pi
_SQRT3 = math.sqrt(3.0)
_SQRT5 = math.sqrt(5.0)
_T_MAX = 1e3  # exp(-t) == 0.0 in float64 beyond ~745


@nb.njit(inline="always", cache=True)
def _row_end(i, m, self_offset, tri):
    if tri:
        return min(m, self_offset + i + 1)
    return m


@nb.njit(inline="always", cache=True, error_model="numpy")
def _stationary_value(code, d2, gamma):
    if code == 0:
        return vexp(-gamma * d2)
    r = math.sqrt(2.0 * (gamma * d2))  # this order: no 0 * inf when gamma is huge
    if code == 1:
        return vexp(-r)
    # t capped where exp(-t) is already exactly 0: an infinite distance gives 0, not inf * 0
    if code == 2:
        t = min(_SQRT3 * r, _T_MAX)
        return (1.0 + t) * vexp(-t)
    t = min(_SQRT5 * r, _T_MAX)
    return (1.0 + t + t * t / 3.0) * vexp(-t)


@nb.njit(nogil=True, cache=True, error_model="numpy")
def stationary_inplace(code, block, dst, sx, sy, gamma, self_offset, tri, X, Y):
    """Gram block -> Gaussian or Matérn kernel block in ``dst`` (columns ``len(sy)``).

    Near-duplicate pairs, where ``|x|^2 + |y|^2 - 2 x.y`` cancels, get their squared
    distance recomputed from the coordinates ``X``, ``Y``. Per row, the distances come
    from :func:`_row_sqdist` (a vectorised pass), then the kernel values (``vexp``: no
    libm call, so this pass vectorises too).
    """
    n, m = block.shape[0], sy.shape[0]
    for i in range(n):
        end = _row_end(i, m, self_offset, tri)
        _row_sqdist(block, sx, sy, self_offset, i, end, X, Y)
        _values_row(code, block[i], dst[i], gamma, end)


@nb.njit(inline="always", cache=True, error_model="numpy")
def _values_row(code, row, out, gamma, end):
    """``out[:end]`` = the kernel of the squared distances ``row[:end]``: one loop per
    ``code`` (a branch inside the loop keeps LLVM from vectorising it: 15 ms against 4 ms
    for a 1,000 x 1,000 Gaussian block)."""
    if code == 0:
        for j in range(end):
            out[j] = vexp(-gamma * row[j])
    elif code == 1:
        for j in range(end):
            out[j] = _stationary_value(1, row[j], gamma)
    elif code == 2:
        for j in range(end):
            out[j] = _stationary_value(2, row[j], gamma)
    else:
        for j in range(end):
            out[j] = _stationary_value(3, row[j], gamma)


@nb.njit(nogil=True, cache=True, error_model="numpy")
def exp_rows(src, dst, m, self_offset, tri):
    """``dst = exp(src)`` over columns ``:m`` (``tri``: the lower triangle's), by ``vexp``."""
    for i in range(src.shape[0]):
        end = _row_end(i, m, self_offset, tri)
        s = src[i]
        out = dst[i]
        for j in range(end):
            out[j] = vexp(s[j])


@nb.njit(nogil=True, cache=True, fastmath={"reassoc"})
def rows_nonfinite(A, r0, r1):
    """``sum(A[r0:r1] * 0)``: 0 where every entry is finite, NaN otherwise (``inf * 0`` is
    NaN). Reassociation alone lets the sum vectorise; NaN and inf keep their meaning."""
    acc = 0.0
    for i in range(r0, r1):
        row = A[i]
        for j in range(row.shape[0]):
            acc += row[j] * 0.0
    return acc


def _wide(a):
    """A column prefix ``base[r0:r1, :c]`` of C-contiguous rows as the 'C' array of its
    whole rows (the width its row stride gives), for the compiled passes, which are told
    the columns to touch: Numba vectorises a loop over a row of a 'C' array, not over one
    of an 'A' view (exp over 1,000 x 1,000 entries: 4.9 ms against 13 ms, AMD EPYC).
    Anything else is returned as it is."""
    if a.ndim != 2 or a.flags.c_contiguous:
        return a
    rs, cs = a.strides
    if cs != a.itemsize or rs <= 0 or rs % cs or rs // cs < a.shape[1]:
        return a
    return np.lib.stride_tricks.as_strided(a, (a.shape[0], rs // cs), (rs, cs))


@nb.njit(nogil=True, cache=True)
def sqdist_inplace(block, sx, sy, scale, self_offset, tri, X, Y):
    """Gram block -> ``scale * ||x - y||^2`` in place (columns ``len(sy)``; zero where
    ``tri`` skips).

    The Gaussian then needs only ``np.exp`` over the block, where NumPy's exp is
    vectorised (``NUMPY_SIMD_EXP``). Distances from :func:`_row_sqdist`, then a scaling
    pass.
    """
    n, m = block.shape[0], sy.shape[0]
    for i in range(n):
        end = _row_end(i, m, self_offset, tri)
        _row_sqdist(block, sx, sy, self_offset, i, end, X, Y)
        row = block[i]
        for j in range(end):
            row[j] *= scale
        for j in range(end, m):
            row[j] = 0.0


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
def dot_inplace(code, block, dst, sx, sy, gamma, degree, coef0, self_offset, tri, m):
    """Gram block -> linear (0), polynomial (1) or cosine (2) kernel block in ``dst``
    (columns ``:m``)."""
    n = block.shape[0]
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
def poly_int_inplace(block, dst, gamma, coef0, power, self_offset, tri, m):
    """Gram block -> ``(gamma x.y + coef0) ** power`` in ``dst`` for an integer ``power``.

    Repeated products over a row instead of a ``pow`` call per entry: each pass is a
    plain loop that vectorises (``power - 1`` roundings, within a few ulps of ``pow``).
    Columns ``:m``.
    """
    n = block.shape[0]
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


# The NTK/NNGP recursion: one compiled pass per block, row by row. Each row's covariance
# K, defect D and tangent sum T live in three row buffers (in cache) and go through every
# layer there, the layer's whole update (affine map, arc-cosine or arcsine, the NTK
# factor) in one loop whose arithmetic vectorises (``_vmath``: no libm call in it).


@nb.njit(nogil=True, cache=True, error_model="numpy")
def _nn_input_row(g, K, D, T, s0, sy0, inv_d, end, me, x, Y, relu):
    """Input layer of one row: ``K = x.y / d``, ``T = 0``, relu's defect ``D = p - K``.

    Nearly parallel pairs get ``D`` from the unit vectors (``p |u - v|^2 / 2``), the
    self-pair (column ``me`` >= 0) gets 0: a second look only where a pair needs it.
    """
    near = 0
    for j in range(end):
        k = g[j] * inv_d
        p = s0 * sy0[j]
        K[j] = k
        T[j] = 0.0
        D[j] = max(p - k, 0.0)
        near += (k > (1.0 - CANCELLATION) * p) & (p > 0.0)
    if relu and near:
        d = x.shape[0]
        for j in range(end):
            p = s0 * sy0[j]
            if K[j] > (1.0 - CANCELLATION) * p and p > 0.0:
                acc = 0.0
                for c in range(d):
                    diff = x[c] / s0 - Y[j, c] / sy0[j]
                    acc += diff * diff
                D[j] = p * acc * (0.5 / d)
    if 0 <= me < end:
        D[me] = 0.0


@nb.njit(nogil=True, cache=True, error_model="numpy", fastmath={"contract"})
def _relu_layer_row(K, D, T, M, a, sa, syl, syp, scale, w2, b2, end):
    """Dense layer then relu for one row, in place (``affine_defect`` and ``relu_layer``
    of :mod:`._array`): ``a``, ``syl`` the square roots of the variances after the
    affine map, ``sa``, ``syp`` before it (times ``scale``).

    One vectorised loop takes every pair by ``acos(c)``; nearly parallel pairs (defect
    below ``NEAR_PARALLEL p``, few) are marked in ``M`` with their affine state kept,
    and a second loop, only if there are any, takes their angle from the defect.
    """
    near_count = 0
    for j in range(end):
        k, dd = K[j], D[j]
        b = syl[j]
        sb = syp[j] * scale
        k_new = w2 * k + b2
        p = a * b
        num = w2 * w2 * dd * (sa * sb + k) + w2 * b2 * ((sa - sb) ** 2 + 2.0 * dd)
        dd = num / (p + k_new) if k_new > 0.0 else p - k_new
        t = k_new + w2 * T[j]
        pos = p > 0.0
        ps = p if pos else 1.0
        c = min(1.0, max(-1.0, k_new / ps)) if pos else 0.0  # as the reference: acos(c)
        # is ill-conditioned at c = -1, so c must be its quotient to the ulp
        near = dd < NEAR_PARALLEL * ps and pos
        near_count += near
        s_, z, big = acos_args(c)
        th = acos_from(c, asin_poly(s_, z), big)
        sn = math.sqrt(1.0 - c * c)
        k_out = p * (sn + (_PI - th) * c) * (0.5 / _PI) if pos else 0.0
        d_out = p * (_PI * (1.0 - c) - (sn - th * c)) * (0.5 / _PI) if pos else 0.0
        t_out = t * ((_PI - th) * (0.5 / _PI) if pos else 0.25)
        M[j] = near
        K[j] = k_new if near else k_out
        D[j] = dd if near else d_out
        T[j] = t if near else t_out
    if near_count:
        for j in range(end):
            if M[j]:
                p = a * syl[j]
                dd = D[j]
                h = math.sqrt(min(1.0, max(0.0, 0.5 * dd / p)))  # sin(th / 2)
                th = 2.0 * asin_poly(h, h * h)
                omc = 2.0 * h * h
                sn = 2.0 * h * math.sqrt(1.0 - h * h)
                t2 = th * th
                smtc = th * t2 * (1.0 / 3.0 - t2 * (1.0 / 30.0 - t2 * (1.0 / 840.0
                                                                       - t2 / 45360.0)))
                K[j] = p * (sn + (_PI - th) * (1.0 - omc)) * (0.5 / _PI)
                D[j] = p * (_PI * omc - smtc) * (0.5 / _PI)
                T[j] *= (_PI - th) * (0.5 / _PI)


@nb.njit(nogil=True, cache=True, error_model="numpy")
def _erf_layer_row(K, T, a, syl, w2, b2, end):
    """Dense layer then erf for one row, in place: ``a``, ``syl`` hold ``1 + 2 q``."""
    for j in range(end):
        b = syl[j]
        k = w2 * K[j] + b2
        c = min(1.0, max(-1.0, 2.0 * k / math.sqrt(a * b)))
        p = 0.5 * math.sqrt((a - 1.0) * (b - 1.0))  # erf_gap in ._array
        gap = a + b - 1.0 + 4.0 * max((p - k) * (p + k), 0.0)
        T[j] = (k + w2 * T[j]) * ((4.0 / _PI) / math.sqrt(gap))
        K[j] = (2.0 / _PI) * vasin(c)


@nb.njit(nogil=True, cache=True, error_model="numpy")
def nn_block(G, dst, sx, syT, depth, relu, w2, b2, inv_d, want_ntk, self_offset, tri, X, Y):
    """Gram block ``G`` -> NTK (``want_ntk``) or NNGP block in ``dst``, every layer per row.

    ``sx`` (rows x depth + 1) and ``syT`` (depth + 1 x columns) are the per-point
    statistics of :func:`._array.nn_row_stats`; readout ``w2 K + b2 (+ w2 T)``.
    """
    n, m = G.shape[0], syT.shape[1]
    K, D, T = np.empty(m), np.empty(m), np.empty(m)
    M = np.empty(m, dtype=np.bool_)
    half = math.sqrt(0.5)
    for i in range(n):
        end = _row_end(i, m, self_offset, tri)
        me = self_offset + i if self_offset >= 0 else -1
        _nn_input_row(G[i], K, D, T, sx[i, 0], syT[0], inv_d, end, me, X[i], Y, relu)
        for layer in range(1, depth + 1):
            if relu:
                scale = 1.0 if layer == 1 else half
                _relu_layer_row(K, D, T, M, sx[i, layer], sx[i, layer - 1] * scale,
                                syT[layer], syT[layer - 1], scale, w2, b2, end)
            else:
                _erf_layer_row(K, T, sx[i, layer], syT[layer], w2, b2, end)
        out = dst[i]
        for j in range(end):
            k = w2 * K[j] + b2
            out[j] = k + w2 * T[j] if want_ntk else k


@nb.njit(nogil=True, cache=True, error_model="numpy")
def laplacian_block(X, Y, gamma, block, self_offset, tri):
    """``-gamma * ||x - y||_1`` (0 where ``tri`` skips) computed directly (no Gram
    product applies): row passes over ``Y`` transposed (:func:`stationary_direct`)."""
    stationary_direct(4, X, np.ascontiguousarray(Y.T), gamma, block, self_offset, tri,
                      Y.shape[0])


@nb.njit(nogil=True, cache=True)
def mirror_rows(out, r0, r1):
    """Copy the lower-triangle rows ``r0:r1`` of square ``out`` onto their transposes.

    Row by row of the destination, so writes are contiguous and the block's rows,
    just computed, are read from cache.
    """
    for j in range(r1):
        for i in range(max(r0, j + 1), r1):
            out[j, i] = out[i, j]


@nb.njit(inline="always", cache=True)
def _direct_row(code, x, Yt, c, row, end):
    """``row[:end]`` from the coordinates (see :func:`stationary_rows`): the exponent for
    codes 0 and 4, the squared distance for Matérn. ``c`` scales the coordinates."""
    for k in range(Yt.shape[0]):
        xk = c * x[k]
        y = Yt[k]
        if code == 4:
            if k == 0:
                for j in range(end):
                    row[j] = -abs(xk - c * y[j])
            else:
                for j in range(end):
                    row[j] -= abs(xk - c * y[j])
        elif code == 0:
            if k == 0:
                for j in range(end):
                    t = xk - c * y[j]
                    row[j] = -t * t
            else:
                for j in range(end):
                    t = xk - c * y[j]
                    row[j] -= t * t
        else:
            if k == 0:
                for j in range(end):
                    t = xk - y[j]
                    row[j] = t * t
            else:
                for j in range(end):
                    t = xk - y[j]
                    row[j] += t * t


@nb.njit(inline="always", cache=True)
def _direct_scale(code, gamma):
    # the first pass writes and the others accumulate the exponent directly:
    # sqrt(gamma) (x - y) for rbf, gamma (x - y) for the L1 Laplacian
    return gamma if code == 4 else math.sqrt(gamma) if code == 0 else 1.0


@nb.njit(cache=True, nogil=True, error_model="numpy")
def stationary_rows(code, X, Yt, gamma, out):
    """Stationary kernel rows from the coordinates, for inputs of few features.

    ``code`` 0: rbf, 1/2/3: Matérn nu = 1/2, 3/2, 5/2 (length scale ``1 / sqrt(2 gamma)``),
    4: L1 Laplacian. ``Yt`` holds the second point set transposed (features x points),
    so the inner loops run over contiguous points. For codes 0 and 4 ``out`` receives
    the exponent (``-gamma ||x - y||_2^2`` or ``-gamma ||x - y||_1``), to be
    exponentiated by the caller; for Matérn the value.
    """
    m = Yt.shape[1]
    c = _direct_scale(code, gamma)
    for i in range(X.shape[0]):
        row = out[i]
        _direct_row(code, X[i], Yt, c, row, m)
        if 1 <= code <= 3:  # Matérn: the engine's scalar formulas
            for j in range(m):
                row[j] = _stationary_value(code, row[j], gamma)


@nb.njit(cache=True, nogil=True, error_model="numpy")
def stationary_direct(code, X, Yt, gamma, out, self_offset, tri, m):
    """:func:`stationary_rows` into ``out`` (float64, columns ``:m``), ``tri``: columns
    ``<= self_offset + i`` of row ``i`` only, the rest of the row 0 (exponent) or the
    value (Matérn)."""
    c = _direct_scale(code, gamma)
    for i in range(X.shape[0]):
        end = _row_end(i, m, self_offset, tri)
        row = out[i]
        _direct_row(code, X[i], Yt, c, row, end)
        if 1 <= code <= 3:  # Matérn: the engine's scalar formulas
            for j in range(end):
                row[j] = _stationary_value(code, row[j], gamma)
        for j in range(end, m):
            row[j] = 0.0


_DIRECT = {"rbf": 0, "matern": None, "laplacian": 4}  # kernels of the direct path
_DIRECT_MAX_D = 16
# pairwise takes the direct path up to this many features: measured (2 cores, loaded), the
# direct path against Gram blocks at n = 4,000: d = 2 55 vs 60 ms, d = 5 41 vs 45 ms,
# d = 10 51 vs 43 ms, d = 16 59 vs 45 ms (n = 1,000: 3.6 vs 4.8, 4.5 vs 5.3, 5.1 vs 5.2 ms)
_PAIRWISE_DIRECT_MAX_D = 8
_CACHE_BLOCK_BYTES = 32 * 2**20  # rows per block: a longer GEMM, its pass still in L3
# (measured, 2 cores: a 20,000^2 float32 rbf matrix of 784 features 6.5 s at 8 MiB, 4.2 s
# at 32 MiB, 4.7 s at 128 MiB; 20,000 x 64 features 2.5 s -> 1.4 s)
_MIN_BLOCKS_PER_WORKER = 4  # granularity: the triangle's blocks differ in size
_MIN_ROWS = 128  # below this a block's GEMM loses efficiency
# the direct path (few features) computes up to this many entries inline, in one block:
# the pool's dispatch costs more than a second core gains (AMD EPYC, 5 features,
# medians: 256^2 triangle 0.81 ms inline vs 1.12 ms on the pool, 150 x 256 0.81 vs
# 0.86, 400^2 triangle 1.7 vs 1.1; SQUEAK's blocks are of the first two kinds)
_INLINE_ENTRIES = 2**17
_FINITE_PANEL = 2**20  # entries per panel of the finiteness pass: one panel inline


class NumbaBackend(NumpyBackend):
    """CPU engine: BLAS for products, fused parallel Numba passes for the rest."""

    name = "numba"

    def _stationary(self, code, block, dst, sx, sy, gamma, self_offset, tri, Xb, Yb):
        if code == 0 and NUMPY_SIMD_EXP and dst.dtype == np.float64:
            # Gaussian: compiled distance pass, then NumPy's vectorised exp
            sqdist_inplace(_wide(block), sx, sy, -float(gamma), self_offset, tri, Xb, Yb)
            np.exp(block, out=dst)
            return
        stationary_inplace(code, _wide(block), _wide(dst), sx, sy, float(gamma), self_offset,
                           tri, Xb, Yb)

    def _exp(self, src, dst, self_offset, tri):
        """``dst = exp(src)``: NumPy's where vectorised, else the compiled ``vexp`` pass."""
        if NUMPY_SIMD_EXP and dst.dtype == src.dtype:
            np.exp(src, out=dst)
        else:
            exp_rows(_wide(src), _wide(dst), src.shape[1], self_offset, tri)

    def _dot(self, code, block, dst, sx, sy, gamma, degree, coef0, self_offset, tri):
        m = block.shape[1]
        if code == 1 and float(degree).is_integer() and 1 <= degree <= _MAX_INT_POWER:
            poly_int_inplace(_wide(block), _wide(dst), float(gamma), float(coef0), int(degree),
                             self_offset, tri, m)
            return
        dummy = np.empty(0)
        dot_inplace(code, _wide(block), _wide(dst), dummy if sx is None else sx,
                    dummy if sy is None else sy, float(gamma), float(degree), float(coef0),
                    self_offset, tri, m)

    def _nn(self, block, dst, sx, sy, depth, act, w2, b2, inv_d, want_ntk, self_offset, tri,
            Xb, Yb):
        cols = block.shape[1]
        nn_block(_wide(block), _wide(dst), np.ascontiguousarray(sx),
                 np.ascontiguousarray(sy[:cols].T), depth, act == 0, float(w2), float(b2),
                 float(inv_d), want_ntk, self_offset, tri, Xb, Yb)

    def _laplacian(self, Xb, Yb, gamma, block, self_offset, tri):
        tmp = block if block.dtype == np.float64 else np.empty(block.shape)
        laplacian_block(Xb, Yb, float(gamma), _wide(tmp), self_offset, tri)
        self._exp(tmp, block, self_offset, tri)

    def all_finite(self, A):
        """One compiled pass over row panels on the pool (a 4,000^2 float64 matrix: 7 ms
        by NumPy's min and max, one thread each)."""
        if (not isinstance(A, np.ndarray) or A.ndim != 2 or not A.flags.c_contiguous
                or A.dtype not in (np.float32, np.float64)):
            return super().all_finite(A)
        sums = []
        map_row_blocks(lambda r0, r1: sums.append(rows_nonfinite(A, r0, r1)), A.shape[0],
                       max(1, _FINITE_PANEL // max(1, A.shape[1])))
        return all(s == 0.0 for s in sums)

    def _mirror_rows(self, out, r0, r1):
        mirror_rows(out, r0, r1)

    def pairwise_into(self, spec, X, Y=None, out=None):
        """Stationary kernels of few features from the coordinates (:meth:`_direct`),
        into ``out`` when it has the shape; other kernels: :meth:`pairwise`."""
        code = self.direct_code(spec, X, Y)
        if code < 0:
            return self.pairwise(spec, X, Y)
        shape = (X.shape[0], (X if Y is None else Y).shape[0])
        if out is None or out.shape != shape or out.dtype != np.float64:
            out = np.empty(shape)
        return self._direct(code, float(spec.params[0]), X, Y, out)

    def pairwise_columns(self, spec, X):
        """:meth:`ArrayEngine.pairwise_columns`, or per call the direct path of few
        features (which prepares nothing)."""
        if self.direct_code(spec, X) >= 0 and X.shape[1] <= _PAIRWISE_DIRECT_MAX_D:
            return lambda S: self.pairwise(spec, X, X[S])
        return super().pairwise_columns(spec, X)

    def _direct_pairwise(self, spec, X, Y, out_dtype):
        code = self.direct_code(spec, X, Y)
        if code < 0 or X.shape[1] > _PAIRWISE_DIRECT_MAX_D:
            return None
        out = np.empty((X.shape[0], (X if Y is None else Y).shape[0]), dtype=out_dtype)
        return self._direct(code, float(spec.params[0]), X, Y, out)

    def _direct(self, code, gamma, X, Y, out):
        """Rbf, Matérn or Laplacian ``k(X, Y)`` of few features from the coordinates.

        With few features the GEMM behind :meth:`pairwise` is memory-bound (its inner
        dimension is tiny); a direct pass over the coordinates per row is faster (up to
        8 features for :meth:`pairwise`, 16 for the thinning loops' single rows) and
        exact for near-duplicate points. ``k(X, X)`` is computed on the lower triangle and
        mirrored, threaded by row blocks.
        """
        X = np.ascontiguousarray(X, dtype=np.float64)
        Yt = np.ascontiguousarray((X if Y is None else Y).T, dtype=np.float64)
        if max(float(np.abs(X).max(initial=0.0)), float(np.abs(Yt).max(initial=0.0))) > 1e150:
            # refused as pairwise refuses them (the engines agree on what they compute)
            Yf = X if Y is None else Yt.T
            shift = np.concatenate([X, Yf]).mean(axis=0) if Y is not None else X.mean(axis=0)
            self._check_centered_norms(X - shift, Yf - shift, X, Y)
        tri = Y is None
        m = Yt.shape[1]
        direct = out.dtype == np.float64

        def job(r0, r1, scratch):
            cols = r1 if tri else m
            dst = out[r0:r1, :cols]
            block = dst if direct else scratch[: r1 - r0, :cols]
            stationary_direct(code, X[r0:r1], Yt, gamma, _wide(block), r0 if tri else -1, tri,
                              cols)
            if code == 0 or code == 4:  # the exponent
                self._exp(block, dst, r0 if tri else -1, tri)
            elif not direct:
                dst[...] = block
            if tri:
                self._mirror_rows(out, r0, r1)

        self._map_blocks(job, X.shape[0], m, scratch=not direct, inline=_INLINE_ENTRIES)
        return out

    def direct_code(self, spec, X, Y=None):
        """The :func:`stationary_rows` code of ``spec`` for host points ``X`` (and ``Y``),
        else -1."""
        if (spec is None or X is None or spec.name not in _DIRECT or X.shape[1] > _DIRECT_MAX_D
                or not isinstance(X, np.ndarray) or not isinstance(Y, (np.ndarray, type(None)))):
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

    def _map_blocks(self, job, n, ncols, scratch, inline=0):
        """Blocks run concurrently on a thread pool, BLAS held to one thread per block.

        Compiled passes release the GIL, so each worker does its block's GEMM and
        fused pass back to back while the block is still in cache; one BLAS thread
        per worker avoids OpenBLAS threads spinning against the workers. At least
        ``_MIN_BLOCKS_PER_WORKER`` blocks per worker (of at least ``_MIN_ROWS`` rows),
        submitted last block first: the blocks of a triangle ``k(X, X)`` grow with
        their row index, and the largest first balances the workers. Up to ``inline``
        entries (``n * ncols``) one block, on the calling thread.
        """
        workers = n_workers()
        rows = max(1, min(self._budget_rows(ncols) // workers,
                          _CACHE_BLOCK_BYTES // (8 * max(1, ncols))))
        if workers > 1 and n * ncols > inline:
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
