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
* ``vasin`` / ``vacos``: ``asin(s) = s + s z P(z)``, ``z = s^2``, on ``[0, 1/2]`` with
  ``P`` a polynomial of degree 12 (Chebyshev interpolation), and through
  ``acos(|c|) = 2 asin(sqrt((1 - |c|) / 2))`` above ``1/2``.
"""

import math

import numba as nb
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


# asin(s) = s + s z P(z), z = s^2 in [0, 1/4]: P of degree 12 interpolating at 13 Chebyshev
# nodes (computed in 50-digit arithmetic; max error 2e-16 of P, so ~1e-17 of asin)
_ASIN_P = (0.028757851367421566, -0.014851887071247204, 0.01740087944269402,
           0.005457506718640358, 0.01032281435018578, 0.011479177415184906,
           0.013971212973552933, 0.017352392720869973, 0.02237217294214989,
           0.030381944138531247, 0.04464285714635543, 0.07499999999998433,
           0.16666666666666669)


@nb.njit(inline="always", cache=True)
def asin_poly(s, z):
    """``asin(s)`` for ``0 <= s <= 1/2``, given ``z = s * s`` (Horner's scheme)."""
    p = 0.0
    for c in _ASIN_P:
        p = p * z + c
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
