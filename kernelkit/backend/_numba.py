"""The Numba engine: BLAS products, then one fused parallel pass per block.

Each finisher reads the Gram block ``X @ Y.T`` in place and writes the kernel
value in the same pass (distance, clipping and kernel function; for the NTK the
whole layer recursion per entry), with no temporaries. For ``k(X, X)`` only the
lower triangle is computed and then mirrored, halving the element-wise work.
Functions compile lazily on first use and are cached on disk (``cache=True``).
"""

import math

import numba as nb
import numpy as np

from ._array import CANCELLATION
from ._numpy import NumpyBackend

_PI = math.pi
_SQRT3 = math.sqrt(3.0)
_SQRT5 = math.sqrt(5.0)


@nb.njit(inline="always", cache=True)
def _row_end(i, m, self_offset, tri):
    if tri:
        return min(m, self_offset + i + 1)
    return m


@nb.njit(inline="always", cache=True)
def _stationary_value(code, d2, gamma, inv_ell):
    if code == 0:
        return math.exp(-gamma * d2)
    r = math.sqrt(d2) * inv_ell
    if code == 1:
        return math.exp(-r)
    if code == 2:
        t = _SQRT3 * r
        return (1.0 + t) * math.exp(-t)
    t = _SQRT5 * r
    return (1.0 + t + t * t / 3.0) * math.exp(-t)


@nb.njit(parallel=True, cache=True)
def stationary_inplace(code, block, sx, sy, gamma, self_offset, tri, X, Y):
    """Gram block -> Gaussian / Matérn kernel block, in place.

    Near-duplicate pairs, where ``|x|^2 + |y|^2 - 2 x.y`` cancels, get their squared
    distance recomputed from the coordinates ``X``, ``Y``.
    """
    n, m = block.shape
    d = X.shape[1]
    inv_ell = math.sqrt(2.0 * gamma)
    for i in nb.prange(n):
        xi = sx[i]
        me = self_offset + i if self_offset >= 0 else -1
        for j in range(_row_end(i, m, self_offset, tri)):
            d2 = xi + sy[j] - 2.0 * block[i, j]
            if d2 <= CANCELLATION * (xi + sy[j]):
                d2 = 0.0
                for k in range(d):
                    d2 += (X[i, k] - Y[j, k]) ** 2
            if j == me:
                d2 = 0.0
            block[i, j] = _stationary_value(code, d2, gamma, inv_ell)


@nb.njit(parallel=True, cache=True)
def dot_inplace(code, block, sx, sy, gamma, degree, coef0, self_offset, tri):
    """Gram block -> polynomial (code 1) or cosine (code 2) kernel block, in place."""
    n, m = block.shape
    if code == 0:
        return
    for i in nb.prange(n):
        me = self_offset + i if self_offset >= 0 else -1
        for j in range(_row_end(i, m, self_offset, tri)):
            g = block[i, j]
            if code == 1:
                block[i, j] = (gamma * g + coef0) ** degree
            else:
                norm = sx[i] * sy[j]
                c = g / norm if norm > 0.0 else 0.0
                if j == me and norm > 0.0:
                    c = 1.0
                block[i, j] = min(1.0, max(-1.0, c))


@nb.njit(parallel=True, cache=True)
def nn_inplace(block, sx, sy, depth, act, w2, b2, inv_d, want_ntk, self_offset, tri):
    """Gram block -> infinite-width NTK / NNGP block, the layer recursion per entry.

    ``sx``/``sy`` are the per-layer row statistics of ``nn_row_stats``.
    """
    n, m = block.shape
    for i in nb.prange(n):
        me = self_offset + i if self_offset >= 0 else -1
        for j in range(_row_end(i, m, self_offset, tri)):
            k = block[i, j] * inv_d
            t = 0.0
            for layer in range(depth):
                k = w2 * k + b2
                t = k + w2 * t
                a = sx[i, layer]
                b = sy[j, layer]
                if act == 0:
                    p = a * b
                    c = k / p if p > 0.0 else 0.0
                    # a self-pair is at angle 0 exactly (arccos amplifies rounding near 1)
                    c = 1.0 if j == me and p > 0.0 else min(1.0, max(-1.0, c))
                    th = math.acos(c)
                    k = p * (math.sqrt(1.0 - c * c) + (_PI - th) * c) * (0.5 / _PI)
                    t *= (_PI - th) * (0.5 / _PI)
                else:
                    den = a * b
                    t *= (4.0 / _PI) / math.sqrt(den - 4.0 * k * k)
                    s = 2.0 * k / math.sqrt(den)
                    k = (2.0 / _PI) * math.asin(min(1.0, max(-1.0, s)))
            k = w2 * k + b2
            block[i, j] = k + w2 * t if want_ntk else k


@nb.njit(parallel=True, cache=True)
def laplacian_block(X, Y, gamma, block, self_offset, tri):
    """``exp(-gamma * ||x - y||_1)`` computed directly (no Gram product applies)."""
    n, m = block.shape
    d = X.shape[1]
    for i in nb.prange(n):
        for j in range(_row_end(i, m, self_offset, tri)):
            s = 0.0
            for k in range(d):
                s += abs(X[i, k] - Y[j, k])
            block[i, j] = math.exp(-gamma * s)


@nb.njit(parallel=True, cache=True)
def mirror_lower(out):
    """Copy the strict lower triangle of square ``out`` onto its upper triangle."""
    n = out.shape[0]
    tile = 64
    nt = (n + tile - 1) // tile
    for bi in nb.prange(nt):
        i0 = bi * tile
        i1 = min(n, i0 + tile)
        for j0 in range(i0, n, tile):
            j1 = min(n, j0 + tile)
            for i in range(i0, i1):
                for j in range(max(j0, i + 1), j1):
                    out[i, j] = out[j, i]


class NumbaBackend(NumpyBackend):
    """CPU engine: BLAS for products, fused parallel Numba passes for the rest."""

    name = "numba"
    triangular = True

    def _stationary(self, code, block, sx, sy, gamma, self_offset, tri, Xb, Yb):
        stationary_inplace(code, block, sx, sy, float(gamma), self_offset, tri, Xb, Yb)

    def _dot(self, code, block, sx, sy, gamma, degree, coef0, self_offset, tri):
        dummy = np.empty(0)
        dot_inplace(code, block, dummy if sx is None else sx, dummy if sy is None else sy,
                    float(gamma), float(degree), float(coef0), self_offset, tri)

    def _nn(self, block, sx, sy, depth, act, w2, b2, inv_d, want_ntk, self_offset, tri):
        nn_inplace(block, np.ascontiguousarray(sx), np.ascontiguousarray(sy), depth, act,
                   float(w2), float(b2), float(inv_d), want_ntk, self_offset, tri)

    def _laplacian(self, Xb, Yb, gamma, block, self_offset, tri):
        laplacian_block(Xb, Yb, float(gamma), block, self_offset, tri)

    def _mirror_lower(self, out):
        mirror_lower(out)
