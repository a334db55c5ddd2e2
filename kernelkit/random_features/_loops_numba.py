"""Compiled twin of :mod:`kernelkit.random_features._loops` (Numba, same signatures)."""

import math

import numba as nb
import numpy as np

# pi / 2 in three parts of 33 significant bits (Cody & Waite): k * part is exact for
# |k| < 2^20, so the reduced argument keeps full precision for |x| up to ~1.6e6
_PIO2_1 = 1.57079632673412561417e+00
_PIO2_2 = 6.07710050630396597660e-11
_PIO2_3 = 2.02226624871116645580e-21
_INV_PIO2 = 6.36619772367581382433e-01
_REDUCE_MAX = 1.0e6  # beyond this the libm functions take over
# no reassociation (it would undo the three-part reduction), no reciprocal or FMA
# contraction (each would round the argument w.x differently from the NumPy reference)
_FLAGS = {"nsz"}


@nb.njit(cache=True, nogil=True)
def fwht(a):
    """Unnormalised Walsh-Hadamard transform of every row of ``a``, in place.

    See :func:`kernelkit.random_features._loops.fwht`: the same butterflies, one row at a
    time (the row stays in cache through its ``log2 m`` passes).
    """
    n, m = a.shape
    for r in range(n):
        _fwht_row(a[r])
    return a


@nb.njit(cache=True, nogil=True, inline="always")
def _fwht_row(v):
    m = v.shape[0]
    h = 1
    while h < m:
        for s in range(0, m, 2 * h):
            for j in range(s, s + h):
                x = v[j]
                y = v[j + h]
                v[j] = x + y
                v[j + h] = x - y
        h *= 2


@nb.njit(cache=True, nogil=True, fastmath=_FLAGS, inline="always")
def _sincos(x):
    """``(sin x, cos x)`` by a three-part reduction to [-pi/4, pi/4] and Taylor series to
    degree 15 / 16 (truncation < 5e-17 there); branch-free so that loops vectorise."""
    k = math.floor(x * _INV_PIO2 + 0.5)
    r = ((x - k * _PIO2_1) - k * _PIO2_2) - k * _PIO2_3
    z = r * r
    s = r + r * z * (-1.0 / 6.0 + z * (1.0 / 120.0 + z * (-1.0 / 5040.0 + z * (
        1.0 / 362880.0 + z * (-1.0 / 39916800.0 + z * (1.0 / 6227020800.0 + z * (
            -1.0 / 1307674368000.0)))))))
    c = 1.0 + z * (-0.5 + z * (1.0 / 24.0 + z * (-1.0 / 720.0 + z * (1.0 / 40320.0 + z * (
        -1.0 / 3628800.0 + z * (1.0 / 479001600.0 + z * (-1.0 / 87178291200.0 + z * (
            1.0 / 20922789888000.0))))))))
    q = k - 4.0 * math.floor(k * 0.25)  # quadrant 0..3
    sin = s if q == 0.0 else (c if q == 1.0 else (-s if q == 2.0 else -c))
    cos = c if q == 0.0 else (-s if q == 1.0 else (-c if q == 2.0 else s))
    return sin, cos


@nb.njit(cache=True, nogil=True, parallel=True, fastmath=_FLAGS)
def sorf_features(X, signs, radii, offset, out):
    """Structured (SORF) Fourier features of the rows of ``X``, written into ``out``.

    See :func:`kernelkit.random_features._loops.sorf_features`: the same map fused per
    row (three transforms per block, scaling, cos/sin straight into ``out``) with no
    temporary beyond one row, rows in parallel; cos/sin by :func:`_sincos` (libm past
    ``|w.x| > 1e6``).
    """
    n, d = X.shape
    n_blocks, _, pad = signs.shape
    m = radii.shape[0]
    paired = offset.shape[0] == 0
    scale = 1.0 / math.sqrt(m) if paired else math.sqrt(2.0 / m)
    norm = pad**1.5  # t rounds as the reference's proj * (radii / pad**1.5)
    for i in nb.prange(n):
        buf = np.empty(pad)
        proj = np.empty(n_blocks * pad)
        for k in range(n_blocks):
            for j in range(d):
                buf[j] = X[i, j] * signs[k, 2, j]
            for j in range(d, pad):
                buf[j] = 0.0
            _fwht_row(buf)
            for j in range(pad):
                buf[j] *= signs[k, 1, j]
            _fwht_row(buf)
            for j in range(pad):
                buf[j] *= signs[k, 0, j]
            _fwht_row(buf)
            for j in range(pad):
                proj[k * pad + j] = buf[j]
        row = out[i]
        if paired:
            for j in range(m):
                t = proj[j] * (radii[j] / norm)
                s, c = _sincos(t)
                row[j] = c * scale
                row[m + j] = s * scale
            for j in range(m):  # rare huge arguments: the series' reduction is not exact
                t = proj[j] * (radii[j] / norm)
                if abs(t) > _REDUCE_MAX:
                    row[j] = math.cos(t) * scale
                    row[m + j] = math.sin(t) * scale
        else:
            for j in range(m):
                t = proj[j] * (radii[j] / norm) + offset[j]
                s, c = _sincos(t)
                row[j] = c * scale
            for j in range(m):
                t = proj[j] * (radii[j] / norm) + offset[j]
                if abs(t) > _REDUCE_MAX:
                    row[j] = math.cos(t) * scale
    return out
