"""Compiled copies of kernel thinning's sequential loops (see :mod:`._loops`).

Same arguments, same arithmetic and the same tie rules as the NumPy reference; the
only differences are summation orders (a loop here, BLAS ``dot`` there), so both
engines make the same decisions up to rounding-level ties. Compiled lazily on first
use and cached on disk; ``nogil`` so that independent halvings may run in threads.
"""

import math

import numba as nb
import numpy as np

from ..backend._numba import stationary_rows
from ._loops import PSD_TOL, SPLIT_NOT_PSD, SPLIT_OK


@nb.njit(cache=True, nogil=True)
def split_chunk(kmat, ri, ci, i0, i1, sign, uniforms, state, log_mult, acc, wb):
    """Compiled :func:`kernelkit.thinning._loops.split_chunk`."""
    sig2 = state[0]
    nacc = acc.shape[0]
    status = SPLIT_OK
    for i in range(i0, i1):
        r = 2 * (i - i0)
        p = 2 * i
        rx = ri[r]
        ry = ri[r + 1]
        kxx = kmat[rx, ci[p]]
        kyy = kmat[ry, ci[p + 1]]
        kxy = kmat[rx, ci[p + 1]]
        kyx = kmat[ry, ci[p]]
        b2 = kxx + kyy - 2.0 * kxy
        if b2 < -PSD_TOL * (abs(kxx) + abs(kyy)):
            status = SPLIT_NOT_PSD
        b2 = max(b2, 0.0)
        alpha = 0.0
        for q in range(p):
            c = ci[q]
            alpha += sign[q] * (kmat[rx, c] - kmat[ry, c])
        a = max(math.sqrt(sig2 * b2 * log_mult), b2)
        if a > 0.0:
            sig2 += b2 * max(0.0, 1.0 + (b2 - 2.0 * a) * sig2 / (a * a))
            prob = 0.5 * (1.0 - alpha / a)
        else:
            prob = 0.5
        if uniforms[i] < prob:
            sign[p] = 1.0
            sign[p + 1] = -1.0
        else:
            sign[p] = -1.0
            sign[p + 1] = 1.0
        if nacc == 1:
            sx = 0.0
            sy = 0.0
            for q in range(p):
                c = ci[q]
                u = kmat[rx, c]
                v = kmat[ry, c]
                acc[0, q] += u + v
                sx += u
                sy += v
            acc[0, p] += sx + kxx + kxy
            acc[0, p + 1] += sy + kyx + kyy
        elif nacc == 3:
            wx = 1.0 if sign[p] > 0 else 0.0
            wy = 1.0 - wx
            bx = wb[p]
            by = wb[p + 1]
            sx = 0.0
            sy = 0.0
            s1x = 0.0
            s1y = 0.0
            sbx = 0.0
            sby = 0.0
            for q in range(p):
                c = ci[q]
                u = kmat[rx, c]
                v = kmat[ry, c]
                w1 = 1.0 if sign[q] > 0 else 0.0
                acc[0, q] += u + v
                acc[1, q] += u * wx + v * wy
                acc[2, q] += u * bx + v * by
                sx += u
                sy += v
                s1x += u * w1
                s1y += v * w1
                sbx += u * wb[q]
                sby += v * wb[q]
            acc[0, p] += sx + kxx + kxy
            acc[0, p + 1] += sy + kyx + kyy
            acc[1, p] += s1x + kxx * wx + kxy * wy
            acc[1, p + 1] += s1y + kyx * wx + kyy * wy
            acc[2, p] += sbx + kxx * bx + kxy * by
            acc[2, p + 1] += sby + kyx * bx + kyy * by
    state[0] = sig2
    return status


@nb.njit(cache=True, nogil=True)
def refine_steps(stat, rows, row_index, base, full, coreset, t0, t1, counts, unique, scale,
                 tol, code, gamma, X, Xt):
    """Compiled :func:`kernelkit.thinning._loops.refine_steps`.

    With ``code >= 0`` (a :func:`stationary_rows` kernel, pool coordinates ``X`` and their
    transpose ``Xt``) the row of a swapped-in point is computed here and the loop goes
    on, instead of returning to the caller.
    """
    n = stat.shape[0]
    buf = np.empty((1, n)) if code >= 0 else np.empty((1, 0))
    for t in range(t0, t1):
        c = coreset[t]
        rc = row_index[t - base]
        for j in range(n):
            stat[j] -= scale * rows[rc, j]
        counts[c] -= 1
        y = _swap_target(stat, counts, unique, c, tol)
        counts[y] += 1
        if y == c:
            for j in range(n):
                stat[j] += scale * rows[rc, j]
            continue
        coreset[t] = y
        if full:
            for j in range(n):
                stat[j] += scale * rows[y, j]
            continue
        if code >= 0:
            stationary_rows(code, X[y:y + 1], Xt, gamma, buf)
            if code == 0 or code == 4:
                for j in range(n):
                    stat[j] += scale * math.exp(buf[0, j])
            else:
                for j in range(n):
                    stat[j] += scale * buf[0, j]
            continue
        return t, y
    return t1, -1


@nb.njit(cache=True, nogil=True)
def _swap_target(stat, counts, unique, c, tol):
    """KT-SWAP's choice for the slot of ``c``: the first point within ``tol`` of the
    smallest statistic (among those not in the coreset when ``unique``), else ``c``."""
    n = stat.shape[0]
    low = np.inf
    for j in range(n):
        if (not unique or counts[j] == 0) and stat[j] < low:
            low = stat[j]
    if low < stat[c] - tol:
        for j in range(n):
            if (not unique or counts[j] == 0) and stat[j] <= low + tol:
                return j
    return c


@nb.njit(cache=True, nogil=True)
def _add_packed_row(stat, tri, i, w):
    """``stat += w * K[i]`` for the matrix held as its lower triangle ``tri``."""
    n = stat.shape[0]
    o = i * (i + 1) // 2
    for j in range(i + 1):
        stat[j] += w * tri[o + j]
    for j in range(i + 1, n):
        stat[j] += w * tri[j * (j + 1) // 2 + i]


@nb.njit(cache=True, nogil=True)
def refine_packed(stat, tri, coreset, counts, unique, scale, tol):
    """Compiled :func:`kernelkit.thinning._loops.refine_packed`."""
    n = stat.shape[0]
    for t in range(coreset.shape[0]):
        c = coreset[t]
        _add_packed_row(stat, tri, c, -scale)
        counts[c] -= 1
        y = _swap_target(stat, counts, unique, c, tol)
        counts[y] += 1
        coreset[t] = y
        _add_packed_row(stat, tri, y, scale)
