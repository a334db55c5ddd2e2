"""Numba twin of :mod:`._conv_numpy`: the recursion of one image pair at a time.

A tile of pairs runs in one compiled call that holds one pair's state (four flat
buffers of the largest ``h * w`` squared, or ``h * w`` for the equal-position state)
and releases the GIL, so kernelkit's thread pool runs tiles side by side. Summation
orders follow the NumPy reference (filter offsets in the same order; a 3x3 filter on
the full state sums each output's nine terms in registers, in that order). The relu
update is branch-free so that its row loops vectorise: its arc-cosine is a series
within an ulp of libm's and its divisions by ``2 pi`` are products, so values agree
with the reference to a few ulps rather than bit for bit.
"""

import math

import numba as nb
import numpy as np

from ..backend._vmath import vacos as _acos  # branch-free: its loops vectorise

_PI = math.pi
_INV2PI = 1.0 / (2.0 * math.pi)


@nb.njit(inline="always", cache=True)
def _relu(k, p):
    """Relu's (k', d k' / d k) from the covariance ``k`` and ``p = sqrt(q_a q_b)``.

    Branch-free (selects, no libm call), so the row loops vectorise; products by
    ``1 / (2 pi)`` (within an ulp of the reference's quotients).
    """
    c = k / p
    c = min(1.0, max(-1.0, c if p > 0 else 0.0))
    th = _PI - _acos(c)
    sn = math.sqrt((1.0 - c) * (1.0 + c))  # sin(th), one transcendental less
    return p * (sn + th * c) * _INV2PI, th * _INV2PI


@nb.njit(inline="always", cache=True)
def _erf(k, qa, qb):
    a, b = 1.0 + 2.0 * qa, 1.0 + 2.0 * qb
    p = math.sqrt(qa * qb)
    gap = a + b - 1.0 + 4.0 * max((p - k) * (p + k), 0.0)
    c = min(1.0, max(-1.0, 2.0 * k / math.sqrt(a * b)))
    return (2.0 / _PI) * math.asin(c), (4.0 / _PI) / math.sqrt(gap)


@nb.njit(nogil=True, cache=True)
def _input(xa, xb, K, full):
    H, W, C = xa.shape
    P = H * W
    for i1 in range(H):
        for j1 in range(W):
            p1 = i1 * W + j1
            if not full:
                s = 0.0
                for c in range(C):
                    s += xa[i1, j1, c] * xb[i1, j1, c]
                K[p1] = s / C
                continue
            for i2 in range(H):  # no index division in the inner loops
                o = p1 * P + i2 * W
                for j2 in range(W):
                    s = 0.0
                    for c in range(C):
                        s += xa[i1, j1, c] * xb[i2, j2, c]
                    K[o + j2] = s / C


@nb.njit(nogil=True, cache=True)
def _conv(S, out, f, pb, hi, wi, ho, wo, full):
    """``out`` = sum over the filter offsets of ``S`` (zero outside the map).

    Output row by output row (one row of the pair state: all pixels of the second image
    for one pixel of the first), offsets added in the reference's order (same rounding)
    over contiguous runs with the edges cut out of the ranges: the row being written
    stays in cache and each input row is read from cache ``f**2`` times.
    """
    Pi, Po = hi * wi, ho * wo
    if full and f == 3:
        _conv3_full(S, out, pb, hi, wi, ho, wo)
        return
    if not full:
        out[:Po] = 0.0
        for u in range(f):
            for v in range(f):
                lo, up = max(0, pb - v), min(wo, wi + pb - v)
                for i in range(max(0, pb - u), min(ho, hi + pb - u)):
                    for j in range(lo, up):
                        out[i * wo + j] += S[(i + u - pb) * wi + j + v - pb]
        return
    for p1 in range(Po):
        _conv_row(S, out, p1, f, pb, hi, wi, ho, wo)


@nb.njit(inline="always", cache=True)
def _conv_row(S, out, p1, f, pb, hi, wi, ho, wo):
    """One row (``p1``) of a full-state convolution: offset by offset over the row."""
    Pi, Po = hi * wi, ho * wo
    i1, j1 = p1 // wo, p1 % wo
    o = p1 * Po
    out[o:o + Po] = 0.0
    for u in range(f):
        a1 = i1 + u - pb
        if a1 < 0 or a1 >= hi:
            continue
        for v in range(f):
            c1 = j1 + v - pb
            if c1 < 0 or c1 >= wi:
                continue
            r = (a1 * wi + c1) * Pi
            lo, up = max(0, pb - v), min(wo, wi + pb - v)
            for i2 in range(max(0, pb - u), min(ho, hi + pb - u)):
                oo, s = o + i2 * wo, r + (i2 + u - pb) * wi + v - pb
                for j2 in range(lo, up):
                    out[oo + j2] += S[s + j2]


@nb.njit(inline="always", cache=True)
def _window(S, i1, j1, i2, j2, u0, u1, va, vb, pb, wi, Pi):
    """One output of a full-state convolution, its terms in the reference's order."""
    acc = 0.0
    for u in range(u0, u1):
        r = ((i1 + u - pb) * wi + j1 - pb) * Pi + (i2 + u - pb) * wi + j2 - pb
        for v in range(max(va, pb - j2), min(vb, wi + pb - j2)):
            acc += S[r + v * Pi + v]
    return acc


@nb.njit(nogil=True, cache=True)
def _conv3_full(S, out, pb, hi, wi, ho, wo):
    """:func:`_conv` of a 3x3 filter on the full state, the nine terms of each output at once.

    Where all nine offsets are inside both maps (the interior of an output row) the
    sum runs over a contiguous run of outputs with the terms in registers (one store
    per output instead of nine read-modify-writes); the first and last output of such
    a row add their in-range terms one at a time, the top and bottom rows of image 2
    and the edge pixels of image 1 go offset by offset. Each output sums the same terms
    in the same (row, column) offset order as :func:`_conv`, so the results are equal.
    """
    Pi, Po = hi * wi, ho * wo
    jlo, jhi = min(wo, pb), max(min(wo, pb), min(wo, wi + pb - 2))
    for p1 in range(Po):
        i1, j1 = p1 // wo, p1 % wo
        ua, ub = max(0, pb - i1), min(3, hi + pb - i1)
        va, vb = max(0, pb - j1), min(3, wi + pb - j1)
        if not (ua == 0 and ub == 3 and va == 0 and vb == 3):  # an edge pixel of image 1
            _conv_row(S, out, p1, 3, pb, hi, wi, ho, wo)
            continue
        for i2 in range(ho):
            oo = p1 * Po + i2 * wo
            u0, u1 = max(ua, pb - i2), min(ub, hi + pb - i2)
            if u0 == 0 and u1 == 3:
                b0 = ((i1 - pb) * wi + j1 - pb) * Pi + (i2 - pb) * wi - pb
                b1, b2 = b0 + wi * Pi + wi, b0 + 2 * (wi * Pi + wi)
                d1, d2 = Pi + 1, 2 * (Pi + 1)
                for j2 in range(jlo, jhi):
                    out[oo + j2] = (((((((((0.0 + S[b0 + j2]) + S[b0 + d1 + j2])
                                         + S[b0 + d2 + j2]) + S[b1 + j2]) + S[b1 + d1 + j2])
                                      + S[b1 + d2 + j2]) + S[b2 + j2]) + S[b2 + d1 + j2])
                                    + S[b2 + d2 + j2])
                if pb == 1 and wo == wi and wo > 1:  # "same": the two end columns
                    out[oo] = (((((0.0 + S[b0 + d1]) + S[b0 + d2]) + S[b1 + d1])
                                + S[b1 + d2]) + S[b2 + d1]) + S[b2 + d2]
                    j = wo - 1
                    out[oo + j] = (((((0.0 + S[b0 + j]) + S[b0 + d1 + j]) + S[b1 + j])
                                    + S[b1 + d1 + j]) + S[b2 + j]) + S[b2 + d1 + j]
                else:
                    for j2 in range(jlo):
                        out[oo + j2] = _window(S, i1, j1, i2, j2, 0, 3, 0, 3, pb, wi, Pi)
                    for j2 in range(jhi, wo):
                        out[oo + j2] = _window(S, i1, j1, i2, j2, 0, 3, 0, 3, pb, wi, Pi)
            else:  # a top or bottom row of image 2: its in-range offsets, pass by pass
                out[oo:oo + wo] = 0.0
                for u in range(u0, u1):
                    for v in range(3):
                        s = ((i1 + u - pb) * wi + j1 + v - pb) * Pi + (i2 + u - pb) * wi + v - pb
                        for j2 in range(max(0, pb - v), min(wo, wi + pb - v)):
                            out[oo + j2] += S[s + j2]


@nb.njit(nogil=True, cache=True)
def _pool(S, out, s, hi, wi, ho, wo):
    Pi, Po = hi * wi, ho * wo
    inv = 1.0 / (s * s * s * s)
    for p1 in range(Po):
        i1, j1 = p1 // wo, p1 % wo
        for p2 in range(Po):
            i2, j2 = p2 // wo, p2 % wo
            acc = 0.0
            for u1 in range(s):
                for v1 in range(s):
                    r = ((i1 * s + u1) * wi + j1 * s + v1) * Pi
                    for u2 in range(s):
                        base = r + (i2 * s + u2) * wi + j2 * s
                        for v2 in range(s):
                            acc += S[base + v2]
            out[p1 * Po + p2] = acc * inv


@nb.njit(nogil=True, cache=True, error_model="numpy")
def _relu_rows(K, T, qa, qs, off, P, full, want_ntk):
    """The relu update of the state, row by row (the inner loops vectorise).

    ``sqrt(q_a q_b)`` per pixel pair as the reference has it (a product of two square
    roots would move equal pixels off ``c = 1`` by an ulp, ``1e-8`` in the angle).
    """
    for p1 in range(P if full else 1):
        a, o = qa[off + p1], p1 * P
        if want_ntk:
            for p2 in range(P):
                k, fac = _relu(K[o + p2], math.sqrt((a if full else qa[off + p2])
                                                    * qs[off + p2]))
                K[o + p2] = k
                T[o + p2] *= fac
        else:
            for p2 in range(P):
                K[o + p2] = _relu(K[o + p2], math.sqrt((a if full else qa[off + p2])
                                                       * qs[off + p2]))[0]


@nb.njit(nogil=True, cache=True)
def _erf_rows(K, T, qa, qs, off, P, full, want_ntk):
    for p1 in range(P if full else 1):
        o = p1 * P
        for p2 in range(P):
            k, fac = _erf(K[o + p2], qa[off + p1] if full else qa[off + p2], qs[off + p2])
            K[o + p2] = k
            if want_ntk:
                T[o + p2] *= fac


@nb.njit(nogil=True, cache=True)
def _pair(xa, xb, qa, qb, program, readout, w2, b2, want_ntk, full, self_mode, K, T, K2, T2):
    """NNGP and NTK of one pair (``self_mode``: of ``xa`` with itself, writing ``qa``)."""
    _input(xa, xb, K, full)
    h, w = xa.shape[0], xa.shape[1]
    n = (h * w) ** 2 if full else h * w
    if want_ntk:
        T[:n] = 0.0
    for r in range(program.shape[0]):
        code, size, pb = program[r, 0], program[r, 1], program[r, 2]
        hi, wi, ho, wo, off = program[r, 3], program[r, 4], program[r, 5], program[r, 6], \
            program[r, 7]
        P = hi * wi
        if code == 0:  # conv
            scale = w2 / (size * size)
            _conv(K, K2, size, pb, hi, wi, ho, wo, full)
            if want_ntk:
                _conv(T, T2, size, pb, hi, wi, ho, wo, full)
            n = (ho * wo) ** 2 if full else ho * wo
            for e in range(n):
                K2[e] = scale * K2[e] + b2
                if want_ntk:
                    T2[e] = K2[e] + scale * T2[e]
            K, K2 = K2, K
            T, T2 = T2, T
        elif code == 3:  # average pool (full state only)
            _pool(K, K2, size, hi, wi, ho, wo)
            if want_ntk:
                _pool(T, T2, size, hi, wi, ho, wo)
            K, K2 = K2, K
            T, T2 = T2, T
        else:
            if self_mode:
                for p in range(P):
                    qa[off + p] = K[p * P + p] if full else K[p]
            qs = qa if self_mode else qb
            if code == 1:
                _relu_rows(K, T, qa, qs, off, P, full, want_ntk)
            else:
                _erf_rows(K, T, qa, qs, off, P, full, want_ntk)
        h, w = ho, wo
    P = h * w
    rk, rt = 0.0, 0.0
    if full and readout == 0:
        for p in range(P):
            rk += K[p * P + p]
            if want_ntk:
                rt += T[p * P + p]
        rk, rt = rk / P, rt / P
    else:
        n = P * P if full else P
        for e in range(n):
            rk += K[e]
            if want_ntk:
                rt += T[e]
        rk, rt = rk / n, rt / n
    nngp = w2 * rk + b2
    return nngp, nngp + w2 * rt


def _scratch(size, want_ntk):
    nt = size if want_ntk else 1  # NNGP only: the T buffers are never read
    return np.empty(size), np.empty(nt), np.empty(size), np.empty(nt)


@nb.njit(nogil=True, cache=True)
def _pairs(A, B, QA, QB, ii, jj, program, readout, w2, b2, want_ntk, full, self_mode, out,
           K, T, K2, T2):
    for k in range(ii.shape[0]):
        i, j = ii[k], jj[k]
        nngp, ntk = _pair(A[i], B[j], QA[i], QB[j], program, readout, w2, b2, want_ntk, full,
                          self_mode, K, T, K2, T2)
        out[k] = ntk if want_ntk else nngp


def run_pairs(A, B, QA, QB, ii, jj, prog, w2, b2, want_ntk, full, self_mode, state_size):
    """Values of the pairs ``(A[ii[k]], B[jj[k]])``, one pair's state at a time.

    With ``self_mode`` (``B is A``, ``ii == jj``) the pairs are images with
    themselves and their variance trajectories are written into ``QA``.
    """
    out = np.empty(ii.shape[0])
    _pairs(A, B, QA, QB, ii, jj, prog[0], prog[1], w2, b2, want_ntk, full, self_mode, out,
           *_scratch(state_size, want_ntk))
    return out
