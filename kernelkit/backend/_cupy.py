"""The CuPy engine: cuBLAS products and fused CUDA element-wise kernels.

The block driver and all array code come from :class:`ArrayBackend`, written
against the array namespace, so this engine also runs with ``xp=numpy`` on a
machine without a GPU (that is how its array code is tested on CPU). The two
hot finishers (stationary kernels and the NTK/NNGP recursion) are raw CUDA
element-wise kernels whose NumPy reference is the corresponding
:class:`ArrayBackend` method; they are used only when ``xp`` is CuPy.

Device memory is bounded as host memory is, and more strictly: a row block takes
at most ``working_memory`` and at most :data:`BLOCK_SHARE` of the memory free on
the device when it is sized, and every large allocation (the float64 copies of
the inputs, a whole kernel matrix) is checked against the free memory first, so
that a kernel matrix larger than the device raises a ``MemoryError`` that says
what to do instead (row blocks, the fused product) rather than a CUDA
out-of-memory error half-way through; the fused product ``k(X, Y) @ W`` then
runs in blocks that fit.
"""

import math

from ._array import CANCELLATION, NEAR_PARALLEL, ArrayBackend

# Share of the free device memory one row block may take: the float64 Gram block
# plus the block-sized temporaries of the finishers without a CUDA kernel
# (polynomial, cosine, Laplacian: up to about four), with room to spare.
BLOCK_SHARE = 1 / 8
# Kept free beyond each checked allocation: cuBLAS workspaces, compiled kernels,
# the memory pool's rounding, and at least one row block.
HEADROOM_BYTES = 256 * 2**20

# in-params of the two kernels (the out-param of both is "float64 g": the Gram
# block, read and overwritten in place)
_STATIONARY_PARAMS = (
    "raw float64 sx, raw float64 sy, raw float64 X, raw float64 Y, int64 m, "
    "int64 d, int32 code, float64 gamma, int64 self_offset, "
    "float64 cancellation")

_NN_PARAMS = (
    "raw float64 sx, raw float64 sy, raw float64 X, raw float64 Y, int64 m, int64 d, "
    "int32 depth, int32 act, float64 w2, float64 b2, float64 inv_d, "
    "bool want_ntk, int64 self_offset, float64 cancellation, "
    "float64 near_parallel")

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
    const double r = sqrt(2.0 * (gamma * d2));
    if (code == 1) {
        g = exp(-r);
    } else if (code == 2) {
        const double t = fmin(1.7320508075688772 * r, 1e3);  // exp(-t) == 0 beyond: no inf * 0
        g = (1.0 + t) * exp(-t);
    } else {
        const double t = fmin(2.23606797749979 * r, 1e3);
        g = (1.0 + t + t * t / 3.0) * exp(-t);
    }
}
"""

_NN_SRC = r"""
const long long row = i / m, col = i % m;
const double PI = 3.141592653589793;
const int S = depth + 1;
double k = g * inv_d, t = 0.0, dd = 0.0;
if (act == 0) {  // defect D = p - K, exact for nearly parallel inputs (see relu_layer)
    const double p = sx[row * S] * sy[col * S];
    dd = fmax(p - k, 0.0);
    if (self_offset >= 0 && col == self_offset + row) {
        dd = 0.0;
    } else if (k > (1.0 - cancellation) * p && p > 0.0) {
        double acc = 0.0;
        for (long long c = 0; c < d; ++c) {
            const double diff = X[row * d + c] / sx[row * S] - Y[col * d + c] / sy[col * S];
            acc += diff * diff;
        }
        dd = p * acc * (0.5 / d);
    }
}
for (int l = 1; l <= depth; ++l) {
    const double p_new = sx[row * S + l] * sy[col * S + l];
    const double k_new = w2 * k + b2;
    if (act == 0) {
        const double scale = l == 1 ? 1.0 : 0.7071067811865476;
        const double sa = sx[row * S + l - 1] * scale, sb = sy[col * S + l - 1] * scale;
        const double num = w2 * w2 * dd * (sa * sb + k)
                           + w2 * b2 * ((sa - sb) * (sa - sb) + 2.0 * dd);
        dd = k_new > 0.0 ? num / (p_new + k_new) : p_new - k_new;
    }
    k = k_new;
    t = k + w2 * t;
    if (act == 0) {
        const double p = p_new;
        if (p <= 0.0) {
            k = 0.0; dd = 0.0; t *= 0.25;
        } else {
            double c, th, sn, omc, smtc;
            if (dd < near_parallel * p) {
                const double h = sqrt(fmin(1.0, fmax(0.0, 0.5 * dd / p)));
                th = 2.0 * asin(h);
                omc = 2.0 * h * h;
                c = 1.0 - omc;
                sn = sin(th);
                const double t2 = th * th;
                smtc = th * t2 * (1.0 / 3.0 - t2 * (1.0 / 30.0
                                                    - t2 * (1.0 / 840.0 - t2 / 45360.0)));
            } else {
                c = fmin(1.0, fmax(-1.0, k / p));
                th = acos(c);
                sn = sqrt(1.0 - c * c);
                omc = 1.0 - c;
                smtc = sn - th * c;
            }
            k = p * (sn + (PI - th) * c) * (0.5 / PI);
            dd = p * (PI * omc - smtc) * (0.5 / PI);
            t *= (PI - th) * (0.5 / PI);
        }
    } else {
        const double a = sx[row * S + l], b = sy[col * S + l];
        const double pq = 0.5 * sqrt((a - 1.0) * (b - 1.0));
        t *= (4.0 / PI) / sqrt(a + b - 1.0 + 4.0 * fmax((pq - k) * (pq + k), 0.0));
        k = (2.0 / PI) * asin(fmin(1.0, fmax(-1.0, 2.0 * k / sqrt(p_new))));
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
        Array namespace; None imports :mod:`cupy`. Passing :mod:`numpy` (or any
        array API namespace, e.g. ``array_api_strict``) runs the engine's array code
        on the CPU with the NumPy references of its CUDA kernels.
    free_memory : int, default=None
        Bytes of free device memory to assume instead of asking the device (for
        testing the block sizing and memory checks without a GPU). None: ask CuPy;
        on a namespace without a device, memory is bounded by ``working_memory`` only.
    """

    name = "cupy"

    def __init__(self, xp=None, free_memory=None):
        if xp is None:
            import cupy as xp
        super().__init__(xp)
        self._on_gpu = xp.__name__ == "cupy"
        self._free_memory = free_memory
        self._kernels = {}

    # ------------------------------------------------------------ device memory
    def device_free_bytes(self):
        """Bytes this engine may still allocate on the device.

        The driver's free memory (``cudaMemGetInfo``) plus the bytes CuPy's memory
        pool holds but no array uses (the pool hands those out first).

        Returns
        -------
        free : float
            ``inf`` for a namespace without a CUDA device (CPU stand-ins).
        """
        if self._free_memory is not None:
            return float(self._free_memory)
        cuda = getattr(self.xp, "cuda", None)
        if cuda is None:
            return math.inf
        free, _total = cuda.runtime.memGetInfo()
        return float(free + self.xp.get_default_memory_pool().free_bytes())

    def _usable_bytes(self):
        return max(self.device_free_bytes() - HEADROOM_BYTES, 0.0)

    def _budget_bytes(self):
        return min(super()._budget_bytes(), BLOCK_SHARE * self._usable_bytes())

    def _budget_rows(self, ncols):
        if 4 * 8 * max(1, ncols) > self._usable_bytes():  # one row and its temporaries
            raise MemoryError(
                f"one row of a kernel block ({ncols} float64 columns, with its element-wise "
                f"work) does not fit in the GPU memory left free "
                f"({_gib(self.device_free_bytes())}, keeping {_gib(HEADROOM_BYTES)} for the "
                "work); use fewer columns (centers, rows of Y) or free device memory.")
        return super()._budget_rows(ncols)

    def _check_room(self, nbytes, what, advice):
        free = self.device_free_bytes()
        if nbytes > self._usable_bytes():
            raise MemoryError(
                f"{what} needs {_gib(nbytes)} of GPU memory, but {_gib(free)} is free on the "
                f"device (keeping {_gib(HEADROOM_BYTES)} for the work): {advice}.")

    def to_host(self, a):
        if self._on_gpu and isinstance(a, self.xp.ndarray):
            return a.get()
        return super().to_host(a)

    def _kernel(self, name):
        if name not in self._kernels:
            cp = self.xp
            if name == "stationary":
                self._kernels[name] = cp.ElementwiseKernel(
                    _STATIONARY_PARAMS, "float64 g", _STATIONARY_SRC, "kernelkit_stationary")
            else:
                self._kernels[name] = cp.ElementwiseKernel(
                    _NN_PARAMS, "float64 g", _NN_SRC, "kernelkit_nn")
        return self._kernels[name]

    def _stationary(self, code, block, dst, sx, sy, gamma, self_offset, tri, Xb, Yb):
        if not self._on_gpu:
            return super()._stationary(code, block, dst, sx, sy, gamma, self_offset, tri, Xb, Yb)
        xp = self.xp
        self._kernel("stationary")(sx, sy, xp.ascontiguousarray(Xb).ravel(),
                                   xp.ascontiguousarray(Yb).ravel(), block.shape[1], Xb.shape[1],
                                   code, float(gamma), self_offset,
                                   CANCELLATION, block)
        if dst is not block:
            dst[...] = block

    def _nn(self, block, dst, sx, sy, depth, act, w2, b2, inv_d, want_ntk, self_offset, tri,
            Xb, Yb):
        if not self._on_gpu:
            return super()._nn(block, dst, sx, sy, depth, act, w2, b2, inv_d, want_ntk,
                               self_offset, tri, Xb, Yb)
        xp = self.xp
        self._kernel("nn")(xp.ascontiguousarray(sx).ravel(), xp.ascontiguousarray(sy).ravel(),
                           xp.ascontiguousarray(Xb).ravel(), xp.ascontiguousarray(Yb).ravel(),
                           block.shape[1], Xb.shape[1], depth, act, float(w2), float(b2),
                           float(inv_d), bool(want_ntk), self_offset, CANCELLATION,
                           NEAR_PARALLEL, block)
        if dst is not block:
            dst[...] = block


def _gib(nbytes):
    return "unbounded memory" if math.isinf(nbytes) else f"{nbytes / 2**30:.2f} GiB"
