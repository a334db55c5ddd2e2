"""Kernel access for kernel thinning: blocks, products and diagonals of index sets."""

import math
from numbers import Real

import numpy as np

from ..backend import KernelSpec
from ._power import power_block

VARIANTS = ("target", "root", "power", "plus")
COMPRESS = ("auto", None, "compress", "compress++")
_POWER_NAMES = ("matern_power", "laplacian_power")
# kernels whose blocks come from pairwise_into / power_block (products are row blocks @ w);
# the others use the engine's fused matmul
_DIRECT_NAMES = _POWER_NAMES + ("rbf", "laplacian", "matern")
_HALF_INTEGERS = (0.5, 1.5, 2.5)
_PSD_SAMPLE = 64
_TIE_TOL = 1e-11  # relative: MMD comparisons closer than this are ties
_AUTO_MMD_MAX_N = 8192  # compress modes: exact MMD to the input costs n^2 kernel values
# compress="auto": KT (n^2 kernel values) up to this many points, Compress++ above
_AUTO_KT_MAX_N = 8192



def _host(engine, a):
    return np.asarray(engine.to_host(a), dtype=np.float64)


# ------------------------------------------------------------------- kernels
class _ThinKernel:
    """Kernel values on rows of ``X`` addressed by index: blocks, products, diagonal.

    One of: ``terms``, a tuple of ``(weight, KernelSpec)`` summed (engine kernels, and
    the power kernels ``"matern_power"`` / ``"laplacian_power"`` evaluated on the
    host); ``func``, a host callable ``f(A, B)``; or ``gram``, a precomputed matrix.
    """

    def __init__(self, engine, X, budget, terms=None, func=None, gram=None, label=None):
        self.engine, self.X, self.budget = engine, X, budget
        self.terms, self.func, self.gram = terms, func, gram
        self.label = label  # the user's kernel, named in the non-finite error
        self._buffers = {}

    def _finite(self, a):
        """Every kernel value is checked where it is produced (the loops never see NaN)."""
        # a sum is finite when every value is (one pass, no temporary); only a sum that
        # is not (NaN/inf, or an overflow of finite values) needs the element-wise check
        if not np.isfinite(np.sum(a)) and not np.all(np.isfinite(a)):
            what = self.label or self.terms
            raise ValueError(f"the kernel {what} produced NaN or infinite values on these "
                             "inputs; check its parameters (e.g. a fractional polynomial "
                             "degree on negative dot products, or a scale that overflows) or "
                             "rescale X.")
        return a

    def _rows(self, ia):
        return self.X[ia]

    def _buffer(self, key, shape):
        """A reused float64 buffer: fresh large arrays would be page-faulted on every call."""
        size = shape[0] * shape[1]
        buf = self._buffers.get(key)
        if buf is None or buf.size < size:
            buf = self._buffers[key] = np.empty(size)
        return buf[:size].reshape(shape)

    def block(self, ia, ib=None, key=None):
        """Host float64 ``k(X[ia], X[ib])`` (``ib`` None: the symmetric ``k(X[ia], X[ia])``).

        With ``key``, the result lives in a buffer reused by the next call with that key.
        """
        if self.gram is not None:
            return self.gram[np.ix_(ia, ia if ib is None else ib)]
        A = self._rows(ia)
        B = None if ib is None else self._rows(ib)
        if self.func is not None:
            return self._finite(self.func(A, A if B is None else B))
        engine, out = self.engine, None
        for weight, spec in self.terms:
            if spec.name in _POWER_NAMES:
                blk = power_block(spec.name, spec.params, _host(engine, A),
                                  _host(engine, A if B is None else B))
            else:
                buf = None
                if key is not None and out is None and engine.is_native(np.empty(0)):
                    buf = self._buffer(key, (A.shape[0], (A if B is None else B).shape[0]))
                blk = np.asarray(engine.to_host(engine.pairwise_into(spec, A, B, out=buf)),
                                 dtype=np.float64)
            if weight != 1.0:
                blk *= weight
            if out is None:
                out = blk
            else:
                out += blk
        return self._finite(out)

    def matvec(self, ia, ib, w):
        """Host float64 ``k(X[ia], X[ib]) @ w``, never more than ``budget`` bytes of kernel."""
        w = np.asarray(w, dtype=np.float64)
        if self.terms is not None and all(s.name not in _DIRECT_NAMES for _, s in self.terms):
            engine = self.engine
            A, B, W = self._rows(ia), self._rows(ib), engine.asarray(w)
            out = None
            for weight, spec in self.terms:
                v = np.asarray(engine.to_host(engine.matmul(spec, A, B, W)), dtype=np.float64)
                out = weight * v if out is None else out + weight * v
            return self._finite(out)
        ia = np.asarray(ia)
        ib = np.asarray(ib)
        step = max(1, self.budget // (8 * max(1, len(ib))))
        out = np.empty(len(ia))
        for r0 in range(0, len(ia), step):
            out[r0:r0 + step] = self.block(ia[r0:r0 + step], ib, key="matvec") @ w
        return out

    def diag(self, ia):
        """Host float64 ``k(x_i, x_i)`` for ``i`` in ``ia``."""
        ia = np.asarray(ia)
        if self.gram is not None:
            return np.asarray(self.gram[ia, ia], dtype=np.float64)
        if self.func is not None:
            out = np.empty(len(ia))
            for r0 in range(0, len(ia), 256):
                out[r0:r0 + 256] = np.diagonal(self.block(ia[r0:r0 + 256]))
            return out
        out = np.zeros(len(ia))
        A = self._rows(ia)
        for weight, spec in self.terms:
            if spec.name in _POWER_NAMES:  # Matérn profiles are 1 at distance 0
                out += weight
            else:
                out += weight * np.asarray(self.engine.to_host(self.engine.diag(spec, A)))
        return self._finite(out)


class _Pool:
    """The points ``pool`` (indices into the kernel's rows), local indices ``0..n-1``.

    Stores their kernel matrix when ``8 n^2`` bytes fit in ``budget``; otherwise every
    request is computed by the engine in blocks.
    """

    def __init__(self, kern, pool, budget):
        self.kern, self.pool, self.n, self.budget = kern, pool, len(pool), budget
        self.K = None
        if 8 * self.n * self.n <= budget:
            if kern.gram is not None and self.n == kern.gram.shape[0] and np.array_equal(
                    pool, np.arange(self.n)):
                self.K = kern.gram
            else:  # one pool of a kernel at a time keeps its matrix: a reused buffer
                self.K = kern.block(pool, key="pool")

    def block(self, ia, ib, key=None):
        """``k`` between local points ``ia`` and ``ib`` (index arrays; ``ib`` None: the
        symmetric ``k(ia, ia)``, one engine call), host float64."""
        if self.K is not None:
            return self.K[np.ix_(ia, ia if ib is None else ib)]
        return self.kern.block(self.pool[ia], None if ib is None else self.pool[ib], key=key)

    def matvec(self, ia, ib, w):
        """``k(ia, ib) @ w`` for local index arrays, host float64."""
        if self.K is not None:
            if 4 * len(ia) * len(ib) < self.n * self.n:  # small: gather the sub-block
                return self.K[np.ix_(ia, ib)] @ w
            v = np.bincount(ib, weights=w, minlength=self.n)
            return (self.K @ v)[ia]
        return self.kern.matvec(self.pool[ia], self.pool[ib], w)

    def single(self):
        """``(spec, points)`` when the kernel is one engine kernel, else ``(None, None)``."""
        terms = self.kern.terms
        if terms is None or len(terms) != 1 or terms[0][0] != 1.0:
            return None, None
        spec = terms[0][1]
        if spec.name in _POWER_NAMES:
            return None, None
        return spec, self.kern.X[self.pool]

    def diag(self):
        if self.K is not None:
            return np.array(np.diagonal(self.K), dtype=np.float64)
        return self.kern.diag(self.pool)


# -------------------------------------------------------------- power kernels
def _power_spec(spec, alpha, n_features, root):
    """The alpha-power kernel of ``spec`` [GKT] (up to a constant factor) and alpha.

    The alpha-power of a translation-invariant kernel has the Fourier transform of the
    kernel raised to the power alpha, so KT-SPLIT with it controls the target MMD with
    a less smooth kernel; alpha = 1/2 is the square-root kernel of [KT]. Constant
    factors are dropped: KT-SPLIT's decisions are invariant to scaling the kernel.

    * rbf ``exp(-gamma r^2)``: ``exp(-gamma r^2 / alpha)`` (any alpha in (0, 1]).
    * matern (smoothness nu, ``kappa = 2 sqrt(nu gamma)``, Fourier transform
      ``(kappa^2 + |w|^2)^-(nu + d/2)``): Matérn of smoothness
      ``alpha (nu + d/2) - d/2`` and the same kappa; exists for alpha > d / (2 nu + d).
    * laplacian ``exp(-gamma ||x - y||_1)`` (a product of one-dimensional Laplace
      kernels): the product of one-dimensional Matérn kernels of smoothness
      ``alpha - 1/2``; exists for alpha > 1/2 (no square root).

    Default alpha: 1/2 when the square root exists, else the midpoint
    ``(1 + alpha_min) / 2`` of the admissible range, which gives the power kernel
    half the target's smoothness (nu / 2).
    """
    name, p = spec
    d = n_features
    if name == "rbf":
        alpha_min, what = 0.0, "the Gaussian kernel"
    elif name == "matern":
        nu = p[1]
        alpha_min = d / (2.0 * nu + d)
        what = f"the Matérn kernel with nu={nu:g} in d={d}"
    elif name == "laplacian":
        alpha_min, what = 0.5, "the (L1) Laplacian kernel"
    else:
        raise ValueError(
            f"variant='{'root' if root else 'power/plus'}' needs a kernel with a known power "
            f"kernel (rbf, laplacian, matern); kernel '{name}' has none. Use variant='target'.")
    if root:
        if alpha is not None and alpha != 0.5:
            raise ValueError(f"alpha={alpha!r} conflicts with variant='root' (alpha = 1/2); "
                             "use variant='power' for other powers.")
        if not 0.5 > alpha_min:
            raise ValueError(
                f"variant='root': the square-root kernel of {what} does not exist (alpha = 1/2 "
                f"must exceed {alpha_min:.4g}); use variant='power' or 'plus', which use a "
                "fractional power kernel.")
        alpha = 0.5
    elif alpha is None:
        alpha = 0.5 if 0.5 > alpha_min else 0.5 * (1.0 + alpha_min)
    else:
        if isinstance(alpha, bool) or not isinstance(alpha, Real) or not math.isfinite(alpha):
            raise ValueError(f"alpha must be a real number in (0, 1] or None, got {alpha!r}.")
        alpha = float(alpha)
        if not (alpha_min < alpha <= 1.0):
            raise ValueError(f"alpha={alpha!r} is outside ({alpha_min:.4g}, 1], the powers for "
                             f"which {what} has a power kernel.")
    if name == "rbf":
        return KernelSpec("rbf", (p[0] / alpha,)), alpha
    if name == "matern":
        gamma, nu = p
        kappa = 2.0 * math.sqrt(nu * gamma)
        nu_a = alpha * (nu + d / 2.0) - d / 2.0
        for h in _HALF_INTEGERS:
            if abs(nu_a - h) < 1e-12:  # an engine kernel
                return KernelSpec("matern", (kappa * kappa / (4.0 * h), h)), alpha
        return KernelSpec("matern_power", (kappa, nu_a)), alpha
    gamma = p[0]
    if alpha == 1.0:
        return spec, alpha
    return KernelSpec("laplacian_power", (gamma, alpha - 0.5)), alpha


