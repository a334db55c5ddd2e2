"""Numba twin of :func:`kernelkit.kernels._neural.nn_gradient` (the NumPy reference).

The exact gradient of the NTK / NNGP matrix with respect to ``(w_std^2, b_std^2)``
by forward-mode differentiation of the layer recursion, one pair at a time with
scalars only (no (n, n, 2) temporaries), over the lower triangle, then mirrored.
The reference documents the derivative rules; this module follows it line by line.
"""

import math

import numba as nb
import numpy as np

from ._array import NEAR_PARALLEL

_PI = math.pi


@nb.njit(inline="always", cache=True)
def _div(a, b):
    return a / b if b != 0.0 else 0.0


@nb.njit(cache=True)
def _pair(K, qa, qb, D, depth, relu, w2, b2, want_ntk):
    """Gradient ``(dk/dw2, dk/db2)`` of one pair from its input statistics."""
    dKw = dKb = 0.0
    T = dTw = dTb = 0.0
    dqaw = dqab = dqbw = dqbb = 0.0
    dDw = dDb = 0.0
    for _ in range(depth):
        sa, sb = math.sqrt(qa), math.sqrt(qb)
        dsaw, dsab = _div(dqaw, 2.0 * sa), _div(dqab, 2.0 * sa)
        dsbw, dsbb = _div(dqbw, 2.0 * sb), _div(dqbb, 2.0 * sb)
        Ko, dKow, dKob = K, dKw, dKb
        K = w2 * Ko + b2
        dKw, dKb = w2 * dKow + Ko, w2 * dKob + 1.0
        qao, qbo = qa, qb
        qa, qb = w2 * qa + b2, w2 * qb + b2
        dqaw, dqab = w2 * dqaw + qao, w2 * dqab + 1.0
        dqbw, dqbb = w2 * dqbw + qbo, w2 * dqbb + 1.0
        p = math.sqrt(qa * qb)
        dlw = 0.5 * (_div(dqaw, qa) + _div(dqbw, qb))
        dlb = 0.5 * (_div(dqab, qa) + _div(dqbb, qb))
        dpw, dpb = p * dlw, p * dlb
        if relu:
            po = sa * sb
            dpow, dpob = dsaw * sb + sa * dsbw, dsab * sb + sa * dsbb
            gap = (sa - sb) ** 2 + 2.0 * D
            dgw = 2.0 * (sa - sb) * (dsaw - dsbw) + 2.0 * dDw
            dgb = 2.0 * (sa - sb) * (dsab - dsbb) + 2.0 * dDb
            num = w2 * w2 * D * (po + Ko) + w2 * b2 * gap
            dnw = (2.0 * w2 * D * (po + Ko) + w2 * w2 * (dDw * (po + Ko) + D * (dpow + dKow))
                   + gap * b2 + w2 * b2 * dgw)
            dnb = (w2 * w2 * (dDb * (po + Ko) + D * (dpob + dKob)) + gap * w2
                   + w2 * b2 * dgb)
            if K > 0.0:
                D = num / (p + K)
                dDw = _div(dnw - D * (dpw + dKw), p + K)
                dDb = _div(dnb - D * (dpb + dKb), p + K)
            else:
                D = p - K
                dDw, dDb = dpw - dKw, dpb - dKb
        To = T
        T = K + w2 * T
        dTw, dTb = dKw + To + w2 * dTw, dKb + w2 * dTb
        if relu:
            if p <= 0.0:
                K = D = c = omc = 0.0
                factor, th, sn, smtc = 0.25, 0.0, 0.0, 0.0
            else:
                if D < NEAR_PARALLEL * p:  # relu_layer in ._array
                    h = math.sqrt(min(1.0, max(0.0, 0.5 * D / p)))
                    th = 2.0 * math.asin(h)
                    omc = 2.0 * h * h
                    c = 1.0 - omc
                    t2 = th * th
                    smtc = th * t2 * (1.0 / 3.0 - t2 * (1.0 / 30.0 - t2 * (1.0 / 840.0
                                                                           - t2 / 45360.0)))
                else:
                    c = min(1.0, max(-1.0, K / p))
                    th = math.acos(c)
                    omc = 1.0 - c
                    smtc = math.sin(th) - th * c
                sn = math.sin(th)
                factor = (_PI - th) / (2.0 * _PI)
            duw = _div(dDw - _div(D * dpw, p), p)
            dub = _div(dDb - _div(D * dpb, p), p)
            anti = th > 0.5 * _PI and sn < 1e-8
            dthw = 0.0 if anti else _div(duw, sn)
            dthb = 0.0 if anti else _div(dub, sn)
            dKw = factor * dKw + p * sn / (2.0 * _PI) * dlw
            dKb = factor * dKb + p * sn / (2.0 * _PI) * dlb
            if th < 0.1:
                t2 = th * th
                smtc = th * t2 * (1.0 / 3.0 - t2 * (1.0 / 30.0 - t2 * (1.0 / 840.0
                                                                       - t2 / 45360.0)))
            else:
                smtc = sn - th * math.cos(th)
            dDw = (_PI * dDw - dpw * smtc - th * p * duw) / (2.0 * _PI)
            dDb = (_PI * dDb - dpb * smtc - th * p * dub) / (2.0 * _PI)
            dTw = factor * dTw - T * dthw / (2.0 * _PI)
            dTb = factor * dTb - T * dthb / (2.0 * _PI)
            T *= factor
            if p > 0.0:
                K = p * (sn + (_PI - th) * c) / (2.0 * _PI)
                D = p * (_PI * omc - smtc) / (2.0 * _PI)
            qa, qb = 0.5 * qa, 0.5 * qb
            dqaw, dqab, dqbw, dqbb = 0.5 * dqaw, 0.5 * dqab, 0.5 * dqbw, 0.5 * dqbb
        else:
            a, b = 1.0 + 2.0 * qa, 1.0 + 2.0 * qb
            daw, dab = 2.0 * dqaw / a, 2.0 * dqab / a
            dbw, dbb = 2.0 * dqbw / b, 2.0 * dqbb / b
            pp = 0.5 * math.sqrt((a - 1.0) * (b - 1.0))  # erf_gap in ._array
            g = a + b - 1.0 + 4.0 * max((pp - K) * (pp + K), 0.0)
            rg = 1.0 / math.sqrt(g)
            dgw = a * b * (daw + dbw) - 8.0 * K * dKw
            dgb = a * b * (dab + dbb) - 8.0 * K * dKb
            factor = (4.0 / _PI) * rg
            dTw = factor * dTw - T * (2.0 / _PI) * rg**3 * dgw
            dTb = factor * dTb - T * (2.0 / _PI) * rg**3 * dgb
            T *= factor
            dKw = (2.0 / _PI) * (2.0 * dKw - K * (daw + dbw)) * rg
            dKb = (2.0 / _PI) * (2.0 * dKb - K * (dab + dbb)) * rg
            K = (2.0 / _PI) * math.asin(min(1.0, max(-1.0, 2.0 * K / math.sqrt(a * b))))
            dqaw = (4.0 / _PI) * dqaw / (a * math.sqrt(1.0 + 4.0 * qa))
            dqab = (4.0 / _PI) * dqab / (a * math.sqrt(1.0 + 4.0 * qa))
            dqbw = (4.0 / _PI) * dqbw / (b * math.sqrt(1.0 + 4.0 * qb))
            dqbb = (4.0 / _PI) * dqbb / (b * math.sqrt(1.0 + 4.0 * qb))
            qa = (2.0 / _PI) * math.asin(2.0 * qa / a)
            qb = (2.0 / _PI) * math.asin(2.0 * qb / b)
    gw, gb = w2 * dKw + K, w2 * dKb + 1.0
    if want_ntk:
        gw += T + w2 * dTw
        gb += w2 * dTb
    return gw, gb


@nb.njit(cache=True)
def nn_gradient_tri(G, sq, D0, depth, relu, w2, b2, want_ntk, out):
    """Lower triangle of the (n, n, 2) gradient from the Gram matrix ``G = X X^T / d``.

    ``sq``: ``|x|^2 / d``; ``D0``: the input defects ``sqrt(q_i q_j) - G_ij`` (relu),
    exact for nearly parallel pairs. ``out`` is filled completely (mirrored).
    """
    n = G.shape[0]
    for i in range(n):
        for j in range(i + 1):
            gw, gb = _pair(G[i, j], sq[i], sq[j], D0[i, j], depth, relu, w2, b2, want_ntk)
            out[i, j, 0] = gw
            out[i, j, 1] = gb
            out[j, i, 0] = gw
            out[j, i, 1] = gb
    return out


def nn_gradient_numba(G, sq, D0, depth, relu, w2, b2, want_ntk):
    """Allocate and fill the gradient (host float64, shape (n, n, 2))."""
    out = np.empty(G.shape + (2,))
    return nn_gradient_tri(G, sq, D0, int(depth), bool(relu), float(w2), float(b2),
                           bool(want_ntk), out)
