"""The CuPy engine: cuBLAS products and fused CUDA element-wise kernels.

The block driver and all array code come from :class:`ArrayBackend`, written
against the array namespace, so this engine also runs with ``xp=numpy`` on a
machine without a GPU (that is how its array code is tested on CPU). The two
hot finishers (stationary kernels and the NTK/NNGP recursion) are raw CUDA
element-wise kernels whose NumPy reference is the corresponding
:class:`ArrayBackend` method; they are used only when ``xp`` is CuPy.
"""

import math

from ._array import CANCELLATION, ArrayBackend

_STATIONARY_SRC = r"""
const long long row = i / m, col = i % m;
double d2 = sx[row] + sy[col] - 2.0 * g;
if (d2 <= cancellation * (sx[row] + sy[col])) {
    d2 = 0.0;
    for (long long k = 0; k < d; ++k) {
        const double diff = X[row * d + k] - Y[col * d + k];
        d2 += diff * diff;
    }
}
if (self_offset >= 0 && col == self_offset + row) d2 = 0.0;
if (code == 0) {
    g = exp(-gamma * d2);
} else {
    const double r = sqrt(d2) * inv_ell;
    if (code == 1) {
        g = exp(-r);
    } else if (code == 2) {
        const double t = 1.7320508075688772 * r;
        g = (1.0 + t) * exp(-t);
    } else {
        const double t = 2.23606797749979 * r;
        g = (1.0 + t + t * t / 3.0) * exp(-t);
    }
}
"""

_NN_SRC = r"""
const long long row = i / m, col = i % m;
const double PI = 3.141592653589793;
double k = g * inv_d, t = 0.0;
for (int l = 0; l < depth; ++l) {
    k = w2 * k + b2;
    t = k + w2 * t;
    const double a = sx[row * depth + l], b = sy[col * depth + l];
    if (act == 0) {
        const double p = a * b;
        double c = p > 0.0 ? k / p : 0.0;
        c = (self_offset >= 0 && col == self_offset + row && p > 0.0) ? 1.0
                                                                      : fmin(1.0, fmax(-1.0, c));
        const double th = acos(c);
        k = p * (sqrt(1.0 - c * c) + (PI - th) * c) * (0.5 / PI);
        t *= (PI - th) * (0.5 / PI);
    } else {
        const double den = a * b;
        t *= (4.0 / PI) / sqrt(den - 4.0 * k * k);
        k = (2.0 / PI) * asin(fmin(1.0, fmax(-1.0, 2.0 * k / sqrt(den))));
    }
}
k = w2 * k + b2;
g = want_ntk ? k + w2 * t : k;
"""


class CupyBackend(ArrayBackend):
    """GPU engine on CuPy (or, for CPU testing, the same array code on ``xp``).

    Parameters
    ----------
    xp : module, default=None
        Array namespace; None imports :mod:`cupy`. Passing :mod:`numpy` runs the
        engine's array code on the CPU with the NumPy references of its CUDA kernels.
    """

    name = "cupy"

    def __init__(self, xp=None):
        if xp is None:
            import cupy as xp
        super().__init__(xp)
        self._on_gpu = xp.__name__ == "cupy"
        self._kernels = {}

    def to_host(self, a):
        if self._on_gpu and isinstance(a, self.xp.ndarray):
            return a.get()
        return super().to_host(a)

    def _kernel(self, name):
        if name not in self._kernels:
            cp = self.xp
            if name == "stationary":
                self._kernels[name] = cp.ElementwiseKernel(
                    "raw float64 sx, raw float64 sy, raw float64 X, raw float64 Y, int64 m, "
                    "int64 d, int32 code, float64 gamma, float64 inv_ell, int64 self_offset, "
                    "float64 cancellation",
                    "float64 g", _STATIONARY_SRC, "kernelkit_stationary")
            else:
                self._kernels[name] = cp.ElementwiseKernel(
                    "raw float64 sx, raw float64 sy, int64 m, int32 depth, int32 act, "
                    "float64 w2, float64 b2, float64 inv_d, bool want_ntk, int64 self_offset",
                    "float64 g", _NN_SRC, "kernelkit_nn")
        return self._kernels[name]

    def _stationary(self, code, block, sx, sy, gamma, self_offset, tri, Xb, Yb):
        if not self._on_gpu:
            return super()._stationary(code, block, sx, sy, gamma, self_offset, tri, Xb, Yb)
        xp = self.xp
        self._kernel("stationary")(sx, sy, xp.ascontiguousarray(Xb).ravel(),
                                   xp.ascontiguousarray(Yb).ravel(), block.shape[1], Xb.shape[1],
                                   code, float(gamma), math.sqrt(2.0 * gamma), self_offset,
                                   CANCELLATION, block)

    def _nn(self, block, sx, sy, depth, act, w2, b2, inv_d, want_ntk, self_offset, tri):
        if not self._on_gpu:
            return super()._nn(block, sx, sy, depth, act, w2, b2, inv_d, want_ntk,
                               self_offset, tri)
        xp = self.xp
        self._kernel("nn")(xp.ascontiguousarray(sx).ravel(), xp.ascontiguousarray(sy).ravel(),
                           block.shape[1], depth, act, float(w2), float(b2), float(inv_d),
                           bool(want_ntk), self_offset, block)
