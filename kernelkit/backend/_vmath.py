"""Element functions that vectorise inside compiled loops: ``exp``, ``asin``, ``acos``.

A call to libm's ``exp`` or ``acos`` in a Numba loop stops LLVM from vectorising the
loop (there is no vector libm without Intel's SVML), which is why the engine used to
leave those to NumPy in a separate pass over each block. These are written with
arithmetic, ``sqrt`` and a bit cast only, so a loop that calls them runs on SIMD lanes
and the kernel's whole element-wise work fits in one pass while the block is in cache.

Accuracy (tested against NumPy over their domains): within 2 ulps (``vexp``) and
3 ulps (``vasin``, ``vacos``).

* ``vexp``: Cody-Waite reduction ``x = k ln2 + r``, ``|r| <= ln2 / 2``, Taylor
  polynomial of degree 13 for ``exp(r)`` (truncation below 1e-17), scaled by ``2^k``
  built from its bits (two factors, so results down to the smallest subnormal are right).
* ``vasin`` / ``vacos``: ``asin`` by its Taylor series on ``[0, 1/2]`` (a polynomial
  in ``z = s^2`` with positive coefficients, by Estrin's scheme), and through
  ``acos(|c|) = 2 asin(sqrt((1 - |c|) / 2))`` above ``1/2``.
"""

import math
from fractions import Fraction

import numba as nb
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic


@intrinsic
def _bits_as_float(typingctx, bits):
    """The float64 whose IEEE bits are the int64 ``bits`` (an LLVM bit cast)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # ln 2 to 32 bits: k * _LN2_HI is exact
_LN2_LO = 1.90821492927058770002e-10
_ROUND = 6755399441055744.0  # 1.5 * 2^52: x + _ROUND rounds x to an integer
_EXP_MIN = -746.0  # exp below this is 0 (the smallest subnormal is exp(-744.4))
_EXP_MAX = 709.0
# 1 / k!, k = 13 .. 2
_EXP_TAYLOR = tuple(1.0 / math.factorial(k) for k in range(13, 1, -1))


@nb.njit(inline="always", cache=True, error_model="numpy")
def vexp(x):
    """``exp(x)`` for a float64 ``x <= 709`` (the kernels' exponents are <= 0; ``-inf``
    gives 0)."""
    x = min(max(x, _EXP_MIN), _EXP_MAX)
    kf = (x * _LOG2E + _ROUND) - _ROUND
    r = (x - kf * _LN2_HI) - kf * _LN2_LO
    p = 0.0
    for c in _EXP_TAYLOR:
        p = p * r + c
    p = 1.0 + (r + r * r * p)
    k = int(kf)
    k1 = k >> 1  # 2^k as two normal factors: k down to -1076 stays representable
    return p * _bits_as_float((k1 + 1023) << 52) * _bits_as_float((k - k1 + 1023) << 52)


_PI = math.pi


def _asin_series(n):
    """The first ``n`` coefficients of ``asin(s) = s + s z sum_k c_k z**(k-1)``, ``z = s**2``."""
    out, c = [], Fraction(1)
    for k in range(1, n + 1):
        c *= Fraction((2 * k - 1), 2 * k)  # (2k)! / (4**k (k!)**2)
        out.append(float(c / (2 * k + 1)))
    return np.array(out)


# on |s| <= 1/2 (z <= 1/4) the terms after the 24th add less than 3e-18 relative
_ASIN_C = _asin_series(24)


@nb.njit(inline="always", cache=True)
def asin_poly(s, z):
    """``asin(s)`` for ``0 <= s <= 1/2``, given ``z = s * s``."""
    C = _ASIN_C  # Estrin's scheme: a short dependency chain (Horner's is 24 deep)
    z2 = z * z
    z4 = z2 * z2
    z8 = z4 * z4
    q0 = (C[0] + C[1] * z) + (C[2] + C[3] * z) * z2
    q1 = (C[4] + C[5] * z) + (C[6] + C[7] * z) * z2
    q2 = (C[8] + C[9] * z) + (C[10] + C[11] * z) * z2
    q3 = (C[12] + C[13] * z) + (C[14] + C[15] * z) * z2
    q4 = (C[16] + C[17] * z) + (C[18] + C[19] * z) * z2
    q5 = (C[20] + C[21] * z) + (C[22] + C[23] * z) * z2
    p = (q0 + q1 * z4) + ((q2 + q3 * z4) + (q4 + q5 * z4) * z8) * z8
    return s + s * z * p


@nb.njit(inline="always", cache=True)
def acos_args(c):
    """``(s, z, big)`` for :func:`acos_from`: the reduced argument of ``acos(c)``."""
    a = abs(c)
    big = a > 0.5
    h = (1.0 - a) * 0.5
    return (math.sqrt(h) if big else a), (h if big else a * a), big


@nb.njit(inline="always", cache=True)
def acos_from(c, r, big):
    """``acos(c)`` from ``r = asin(s)`` of the reduced argument of :func:`acos_args`."""
    r2 = 2.0 * r
    rb = r2 if c > 0 else _PI - r2
    rs = 0.5 * _PI - (r if c >= 0 else -r)
    return rb if big else rs


@nb.njit(inline="always", cache=True)
def vacos(c):
    """``acos(c)`` on [-1, 1], branch-free so loops vectorise."""
    s, z, big = acos_args(c)
    return acos_from(c, asin_poly(s, z), big)


@nb.njit(inline="always", cache=True)
def vasin(y):
    """``asin(y)`` on [-1, 1], branch-free (``pi / 2 - 2 asin(sqrt((1 - |y|) / 2))``
    above ``|y| = 1/2``)."""
    s, z, big = acos_args(y)
    r = asin_poly(s, z)
    v = 0.5 * _PI - 2.0 * r if big else r
    return v if y >= 0.0 else -v
