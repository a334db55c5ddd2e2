"""Kernel thinning: KT, target KT, root / power KT, KT+, Compress and Compress++.

Kernel thinning compresses ``n`` points into about ``sqrt(n)`` points whose empirical
distribution is much closer, in maximum mean discrepancy (MMD), to the input than an
i.i.d. subsample of the same size: ``O(n^-1/2 sqrt(log n))`` against ``n^-1/4``.

References
----------
.. [KT] R. Dwivedi and L. Mackey, "Kernel Thinning", COLT 2021; JMLR 25(152), 2024.
   Algorithm 1 (KT) = 1a (KT-SPLIT) + 1b (KT-SWAP).
.. [GKT] R. Dwivedi and L. Mackey, "Generalized Kernel Thinning", ICLR 2022: target KT,
   power KT with the alpha-power kernel, KT+ with ``k/||k||_inf + k_alpha/||k_alpha||_inf``.
.. [CPP] A. Shetty, R. Dwivedi and L. Mackey, "Distribution Compression in Near-linear
   Time", ICLR 2022: Compress (Alg. 1) and Compress++ (Alg. 2).

The sequential loops run in the engine (:meth:`ArrayBackend.kt_split_chunk`,
:meth:`ArrayBackend.kt_refine_steps`: NumPy reference, compiled by the Numba engine) on
kernel blocks that the engine computes with its ``pairwise`` / ``matmul`` (BLAS and
fused element-wise passes), a whole kernel matrix when it fits in ``working_memory``,
else row blocks of that size (memory O(n d + working_memory)).
"""

import math
from functools import cache
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import _check_sample_weight, validate_data

from ._config import get_config
from .backend import KernelSpec, get_backend, resolve_backend
from .backend._thinning import SPLIT_OK
from .kernels import Kernel, make_kernel

__all__ = ["KernelThinning", "kernel_thinning"]

VARIANTS = ("target", "root", "power", "plus")
COMPRESS = (None, "compress", "compress++")
_POWER_NAMES = ("matern_power", "laplacian_power")
# kernels whose blocks come from kt_pairwise / kt_power_block (products are row blocks @ w);
# the others use the engine's fused matmul
_DIRECT_NAMES = _POWER_NAMES + ("rbf", "laplacian", "matern")
_HALF_INTEGERS = (0.5, 1.5, 2.5)
_PSD_SAMPLE = 64
_TIE_TOL = 1e-11  # relative: MMD comparisons closer than this are ties
_AUTO_MMD_MAX_N = 8192  # compress modes: exact MMD to the input costs n^2 kernel values


# ------------------------------------------------------------------- kernels
class _ThinKernel:
    """Kernel values on rows of ``X`` addressed by index: blocks, products, diagonal.

    One of: ``terms``, a tuple of ``(weight, KernelSpec)`` summed (engine kernels, and
    the power kernels ``"matern_power"`` / ``"laplacian_power"`` evaluated on the
    host); ``func``, a host callable ``f(A, B)``; or ``gram``, a precomputed matrix.
    """

    def __init__(self, engine, X, budget, terms=None, func=None, gram=None):
        self.engine, self.X, self.budget = engine, X, budget
        self.terms, self.func, self.gram = terms, func, gram
        self._buffers = {}

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
            return self.func(A, A if B is None else B)
        engine, out = self.engine, None
        for weight, spec in self.terms:
            if spec.name in _POWER_NAMES:
                blk = engine.kt_power_block(spec.name, spec.params, A, A if B is None else B)
            else:
                buf = None
                if key is not None and out is None and engine.is_native(np.empty(0)):
                    buf = self._buffer(key, (A.shape[0], (A if B is None else B).shape[0]))
                blk = np.asarray(engine.to_host(engine.kt_pairwise(spec, A, B, out=buf)),
                                 dtype=np.float64)
            if weight != 1.0:
                blk *= weight
            if out is None:
                out = blk
            else:
                out += blk
        return out

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
            return out
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
        return out


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
        """``k`` between local points ``ia`` and ``ib`` (index arrays), host float64."""
        if self.K is not None:
            return self.K[np.ix_(ia, ib)]
        return self.kern.block(self.pool[ia], self.pool[ib], key=key)

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


# ------------------------------------------------------------------- KT core
def _split_one(pool, engine, P, uniforms, log_mult, acc, wb, budget):
    """KT-SPLIT halving of the sequence ``P`` (local indices): the +1/-1 child signs.

    Reads a stored kernel matrix in place; otherwise computes the kernel rows of the
    pairs against the earlier positions, in blocks of at most ``budget`` bytes. ``acc``
    and ``wb``: see :meth:`ArrayBackend.kt_split_chunk`.
    """
    s = len(P)
    pairs = s // 2
    sign = np.zeros(s)
    state = np.zeros(1)
    if pool.K is not None:
        chunks = [(0, pairs, pool.K, P, P)]
    else:  # row blocks of the lower triangle, at least 8 so that little above it is computed
        step = max(1, min(budget // (16 * s), -(-pairs // 8)))
        ci = np.arange(s, dtype=np.int64)
        chunks = ((i0, min(pairs, i0 + step), None, None, ci) for i0 in range(0, pairs, step))
    for i0, i1, kmat, ri, ci in chunks:
        if kmat is None:
            kmat = pool.block(P[2 * i0:2 * i1], P[:2 * i1], key="split")
            ri = np.arange(2 * (i1 - i0), dtype=np.int64)
        status = engine.kt_split_chunk(kmat, ri, ci, i0, i1, sign, uniforms, state, log_mult,
                                       acc, wb)
        if status != SPLIT_OK:
            raise ValueError(
                "kernel is not positive semidefinite on the data: ||k(x, .) - k(y, .)||^2 = "
                "k(x, x) + k(y, y) - 2 k(x, y) came out negative; kernel thinning needs a "
                "positive semidefinite kernel.")
    return sign


def _kt_split(split, engine, seq_split, m, delta, uniforms, acc, wb, budget):
    """KT-SPLIT [KT, Alg. 1a]: the ``2^m`` candidate coresets of ``seq_split`` (in order).

    Level by level: the halving of one coreset reads only its own points, so this order
    makes the same decisions as the streaming order of Alg. 1a. Pair ``i`` of coreset
    ``ell`` at level ``j`` draws ``uniforms[j - 1, ell * s_j / 2 + i]`` (``s_j`` the parent
    size) and uses the failure probability ``delta' = delta 2^(j-1) / (n m)``
    (``delta_i = delta / n`` per pair, shared by the ``m`` levels as in Alg. 1a).
    ``acc``/``wb`` accumulate products at level 1 (see ``ArrayBackend.kt_split_chunk``).
    """
    n_split = len(seq_split)
    parents = [seq_split]
    for j in range(1, m + 1):
        log_mult = 2.0 * math.log(2.0 * n_split * m / (delta * 2.0 ** (j - 1)))
        s = n_split >> (j - 1)
        children = []
        for ell, P in enumerate(parents):
            u = uniforms[j - 1, ell * (s // 2):(ell + 1) * (s // 2)]
            sign = _split_one(split, engine, P, u, log_mult, acc if j == 1 else acc[:0], wb,
                              budget)
            children += [P[sign > 0], P[sign < 0]]
        parents = children
    return parents


def _kt(split, swap, engine, seq, m, delta, rng, budget, *, weights=None, unique=True,
        symmetrize=False, want_mmd=True):
    """Kernel thinning [KT, Alg. 1] of the points of ``swap`` (a :class:`_Pool`).

    Parameters
    ----------
    split, swap : _Pool
        The same points under the split and the swap (target) kernel (may be one object).
    seq : ndarray of int
        Local indices KT-SPLIT halves, in order (``arange(n)``, or a resampled sequence).
    m : int
        Halving rounds; the coreset has ``len(seq) >> m`` points.
    weights : ndarray or None
        Target measure's weights over the pool (None: uniform).
    unique : bool
        KT-SWAP keeps the coreset free of repeated points.
    symmetrize : bool
        Return the coreset or its complement with probability 1/2 each (needs m = 1,
        an even pool and ``unique``): the symmetrized halving of [CPP].

    Returns
    -------
    coreset : ndarray of int64
        Local indices.
    mmd : float or None
        MMD under the swap kernel between the target measure and the coreset (equal weights).
    """
    n = swap.n
    n_seq = len(seq)
    q = n_seq >> m
    n_split = q << m
    # random draws, always in this order: leftovers, KT-SPLIT coins, symmetrization coin
    if n_split < n_seq:
        keep = np.ones(n_seq, dtype=bool)
        keep[rng.choice(n_seq, n_seq - n_split, replace=False)] = False
        seq_split = seq[keep]
    else:
        seq_split = seq
    uniforms = rng.random_sample((m, n_split // 2))
    coin = rng.random_sample() if symmetrize else 1.0

    # KT-SPLIT. With one kernel and equal weights, level 1 reads every kernel entry of the
    # split points once: it also accumulates the row sums (the target's Pk) and, for a single
    # halving of the whole pool, k(., Q) 1 for the candidate Q and for the baseline.
    baseline_pos = n_seq - 1 - (n_seq // q) * np.arange(q)[::-1]
    use_acc = split is swap and weights is None
    halving = use_acc and m == 1 and n_split == n
    acc = np.zeros((3 if halving else 1 if use_acc else 0, n_split))
    wb = np.zeros(n_split)
    if halving:
        wb[baseline_pos] = 1.0
    parents = _kt_split(split, engine, seq_split, m, delta, uniforms, acc, wb, budget)

    # target measure: meanK[y] = sum_i w_i k(y, x_i)
    everything = np.arange(n)
    if weights is None:
        if use_acc:
            tot = np.zeros(n)
            tot[seq_split] = acc[0]
            if n_split < n:
                left = np.setdiff1d(everything, seq_split)
                tot[seq_split] += swap.matvec(seq_split, left, np.ones(len(left)))
                tot[left] = swap.matvec(left, everything, np.ones(n))
            meanK = tot / n
        else:
            meanK = swap.matvec(everything, everything, np.full(n, 1.0 / n))
    else:
        meanK = swap.matvec(everything, everything, weights)

    # KT-SWAP [KT, Alg. 1b], step 1: the candidate closest to the target, against a
    # standard-thinning baseline (every (n_seq // q)-th point counted from the end)
    # (the baseline counts as better only beyond rounding: it can tie a candidate exactly,
    # e.g. when it is a candidate's complement, and ties must not depend on the engine)
    baseline = seq[baseline_pos]
    ones_q = np.ones(q)
    diag = swap.diag()
    tol = _TIE_TOL * max(float(np.abs(meanK).max()), float(np.abs(diag).max()))
    best, best_val, best_v = None, np.inf, None
    if halving:  # complementary halves have equal MMD to the pool: one candidate
        for Q, v in ((parents[0], acc[1]), (baseline, acc[2])):
            val = v[Q].sum() / (q * q) - 2.0 * meanK[Q].mean()
            if val < best_val - tol:
                best, best_val, best_v = Q, val, v
    else:
        for Q in parents + [baseline]:
            val = swap.matvec(Q, Q, ones_q).sum() / (q * q) - 2.0 * meanK[Q].mean()
            if val < best_val - tol:
                best, best_val = Q, val

    # KT-SWAP step 2: replace each point in turn by the best point of the pool
    Q = np.array(best, dtype=np.int64)
    scale = 2.0 / q
    if best_v is None:
        best_v = swap.matvec(everything, Q, ones_q)
    stat = diag / q + scale * best_v - 2.0 * meanK
    counts = np.bincount(Q, minlength=n).astype(np.int64)
    if swap.K is not None:
        engine.kt_refine_steps(stat, swap.K, Q.copy(), 0, True, Q, 0, q, counts, unique, scale,
                               tol)
    else:
        spec, points = swap.single()
        per = max(1, budget // (8 * n))
        for t0 in range(0, q, per):
            t1 = min(q, t0 + per)
            R = swap.block(Q[t0:t1].copy(), everything, key="refine")
            row_index = np.arange(t1 - t0, dtype=np.int64)
            t = t0
            while t < t1:
                t, y = engine.kt_refine_steps(stat, R, row_index, t0, False, Q, t, t1, counts,
                                              unique, scale, tol, spec, points)
                if t < t1:
                    stat += scale * swap.block(np.array([y]), everything)[0]
                    t += 1
    mmd = None
    if want_mmd:
        core = (stat - diag / q + 2.0 * meanK) * (q / 2.0)  # sum_{c in Q} k(y, c)
        target = meanK.mean() if weights is None else float(weights @ meanK)
        mmd2 = target - 2.0 * meanK[Q].mean() + core[Q].sum() / (q * q)
        mmd = math.sqrt(max(mmd2, 0.0))
    if symmetrize and coin < 0.5:
        Q = np.flatnonzero(counts == 0)
    return Q, mmd


def _halve(split_kern, swap_kern, engine, cat, delta_per_sq, rng, budget):
    """Symmetrized KT halving of the points ``cat`` (indices into X): Compress's Halve [CPP].

    KT with one round and the failure probability ``delta_per_sq * ell^2`` for ``ell``
    points ([CPP]'s choice, proportional to ``ell^2``), returning the coreset or its
    complement with probability 1/2 each.
    """
    if len(cat) % 2:  # odd: one point, drawn uniformly, is left out of this halving
        cat = np.delete(cat, rng.randint(len(cat)))
    ell = len(cat)
    delta = min(0.5, delta_per_sq * ell * ell)
    split = _Pool(split_kern, cat, budget)
    swap = split if swap_kern is split_kern else _Pool(swap_kern, cat, budget)
    Q, _ = _kt(split, swap, engine, np.arange(ell), 1, delta, rng, budget, unique=True,
               symmetrize=True, want_mmd=False)
    return cat[Q]


def _compress(split_kern, swap_kern, engine, idx, height, delta_per_sq, rng, budget):
    """Compress [CPP, Alg. 1]: split into 4 consecutive parts, compress each, halve the union."""
    if height == 0:
        return idx
    parts = np.array_split(idx, 4)
    cat = np.concatenate([_compress(split_kern, swap_kern, engine, p, height - 1, delta_per_sq,
                                    rng, budget) for p in parts])
    return _halve(split_kern, swap_kern, engine, cat, delta_per_sq, rng, budget)


@cache
def _compress_plan(n, height):
    """(output size, sum of the squared halving sizes) of :func:`_compress` on n points."""
    if height == 0:
        return n, 0
    out, sq = 0, 0
    for size in (n // 4 + (i < n % 4) for i in range(4)):  # np.array_split's sizes
        o, q = _compress_plan(size, height - 1)
        out, sq = out + o, sq + q
    ell = out - out % 2
    return ell // 2, sq + ell * ell


def _systematic_resample(w, n, rng):
    """``n`` indices drawn by systematic resampling from weights ``w`` (sum 1), sorted.

    Each index ``i`` appears ``floor(n w_i)`` or ``ceil(n w_i)`` times.
    """
    c = np.cumsum(w)
    c[-1] = 1.0
    u = (np.arange(n) + rng.random_sample()) / n
    return np.minimum(np.searchsorted(c, u, side="right"), len(w) - 1).astype(np.int64)


def _check_psd(kern, n):
    """Reject a kernel whose Gram matrix on up to 64 of the points is not PSD."""
    idx = np.unique(np.linspace(0, n - 1, min(n, _PSD_SAMPLE)).astype(np.int64))
    G = np.asarray(kern.block(idx, idx), dtype=np.float64)
    scale = max(np.abs(G).max(), np.finfo(float).tiny)
    if not np.allclose(G, G.T, rtol=1e-8, atol=1e-10 * scale):
        raise ValueError("kernel is not symmetric on the data (k(x, y) != k(y, x)); kernel "
                         "thinning needs a symmetric positive semidefinite kernel.")
    low = np.linalg.eigvalsh(0.5 * (G + G.T)).min()
    if low < -1e-8 * scale * len(idx):
        raise ValueError(f"kernel is not positive semidefinite on the data: its Gram matrix on "
                         f"{len(idx)} of the points has eigenvalue {low:.3g}; kernel thinning "
                         "needs a positive semidefinite kernel.")


# ------------------------------------------------------------------ estimator
class KernelThinning(BaseEstimator):
    """Kernel thinning: a coreset of about sqrt(n) points with a small MMD to the input.

    Kernel thinning (KT, [KT]_ Algorithm 1) halves the input ``m`` times with
    **KT-SPLIT** (Alg. 1a), a self-balancing Hilbert walk that assigns each pair of
    points to opposite halves by a coin biased against the kernel mean discrepancy
    accumulated so far, with thresholds set by the failure probability ``delta``;
    of the ``2^m`` candidate coresets and a standard-thinning baseline, **KT-SWAP**
    (Alg. 1b) keeps the one closest in MMD to the input and then greedily replaces
    each point by the input point that most decreases that MMD. The coreset has
    ``n / 2^m`` points; at the default size ``sqrt(n)`` its MMD to the input is
    ``O_d(n^-1/2 sqrt(log n))`` with high probability (for compactly supported inputs;
    polylog factors otherwise), against ``Theta(n^-1/4)`` for an i.i.d. subsample of the
    same size.

    ``variant`` chooses the KT-SPLIT kernel ([GKT]_): the target kernel itself
    (target KT), its square-root or fractional power kernel (root / power KT), or the
    sum of both (KT+). KT-SWAP always uses the target kernel. ``compress="compress++"``
    runs Compress++ ([CPP]_ Alg. 2): Compress (Alg. 1) with symmetrized KT halvings,
    then KT, in ``O(4^g n log n)`` kernel evaluations instead of ``O(n^2)``, with MMD
    within a small factor of KT's.

    Parameters
    ----------
    kernel : str, Kernel or callable, default="rbf"
        Target kernel: a name (rbf, laplacian, matern, polynomial, linear, cosine, ntk,
        nngp), a :class:`kernelkit.kernels.Kernel`, ``"precomputed"`` (``X`` is then the
        ``n x n`` kernel matrix), or a callable ``f(X, Y) -> (n_X, n_Y)`` evaluated on the
        host. Must be positive semidefinite (checked on a subsample and during KT-SPLIT).
    gamma : float, default=None
        Kernel scale for rbf, laplacian, matern and polynomial; None means ``1 / n_features``.
    degree : float, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1
        Constant term of the polynomial kernel.
    kernel_params : dict, default=None
        Further parameters of the named kernel (e.g. ``{"nu": 2.5}``) or of the callable.
    variant : {"target", "root", "power", "plus"}, default="target"
        KT-SPLIT kernel. ``"target"``: the target kernel (target KT, [GKT]_; any kernel,
        the default because its guarantees need no power kernel). ``"root"``: the
        square-root kernel (alpha = 1/2, [KT]_; rbf, and matern with nu > d/2).
        ``"power"``: the alpha-power kernel (power KT; rbf, laplacian, matern).
        ``"plus"``: KT+, the target plus the alpha-power kernel, each normalised to sup 1.
        Power kernels: rbf(gamma) -> rbf(gamma / alpha); matern(nu) -> Matérn of
        smoothness ``alpha (nu + d/2) - d/2``; laplacian -> product of one-dimensional
        Matérn kernels of smoothness ``alpha - 1/2``.
    alpha : float in (alpha_min, 1], default=None
        Power of the power kernel (``"power"``, ``"plus"``). None: 1/2 where the square
        root exists, else ``(1 + alpha_min) / 2`` (``alpha_min = d / (2 nu + d)`` for
        matern, 1/2 for laplacian), which gives the power kernel smoothness ``nu / 2``.
    m : int >= 0, default=None
        Number of halving rounds: the coreset has ``n_samples // 2^m`` points. None:
        ``floor(log2(n_samples) / 2)``, the largest ``m`` with ``4^m <= n_samples``, so the
        coreset has between ``sqrt(n)`` and ``2 sqrt(n)`` points (exactly ``sqrt(n)`` when
        ``n`` is a power of 4), as in the papers.
    delta : float in (0, 1), default=0.5
        Failure probability of KT-SPLIT's thresholds ([KT]_: ``delta_i = delta / n`` per
        pair, ``delta_i 2^(j-1) / m`` at round ``j``). The papers' default.
    compress : {None, "compress", "compress++"}, default=None
        None: KT on all points (``O(n^2)`` kernel evaluations). ``"compress++"``:
        Compress++ ([CPP]_ Alg. 2) with oversampling ``g``: Compress (Alg. 1,
        ``beta = m - g`` levels of symmetrized KT halvings) builds ``2^g`` times the final
        size, then KT makes the final coreset; ``O(4^g n log n)`` kernel evaluations. As
        in the authors' implementation, the top level of Compress is folded into the
        final KT: the four quarters of the input are compressed separately
        (``beta - 1`` levels) and KT thins their union with ``g + 1`` rounds (same size
        and cost, lower MMD, as KT-SWAP then targets ``2^(g+1) sqrt(n)`` points).
        ``"compress"``: Compress alone, ``m`` levels, no final KT (at most
        ``floor(log4(n))`` levels, so that every leaf keeps a point: KT does the rest).
    g : int >= 0, default=4
        Oversampling parameter of Compress++; larger is closer to KT's quality and
        slower (``O(4^g n log n)``). 4 matches KT's MMD in [CPP]_'s experiments.
    compute_mmd : bool or "auto", default="auto"
        Compute ``mmd_``. KT gets it at no extra cost; Compress modes need ``n^2``
        kernel values, so ``"auto"`` computes it there only for ``n <= 8192``.
    backend : {"auto", "numpy", "numba", "cupy"} or None, default=None
        Compute engine for the kernels and loops; None follows :func:`kernelkit.set_config`.
        Resolved in ``fit`` into ``backend_``.
    random_state : int, RandomState instance or None, default=None
        Seeds KT-SPLIT's coins, the leftover points and Compress's symmetrization.

    Attributes
    ----------
    coreset_indices_ : ndarray of shape (n_coreset,), int64
        Rows of ``X`` in the coreset, sorted. Unique without ``sample_weight``; with it, a
        row may repeat (multiplicity = weight in the equal-weight coreset).
    coreset_ : ndarray of shape (n_coreset, n_features), float64
        ``X[coreset_indices_]``.
    mmd_ : float
        MMD, under the target kernel, between the (weighted) input and the coreset with
        equal weights; NaN when not computed (see ``compute_mmd``).
    m_ : int
        Halving rounds used.
    alpha_ : float or None
        Power of the power kernel used by KT-SPLIT (None for target KT).
    backend_ : str
        The engine used.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when ``X`` has string column names.

    Raises
    ------
    ValueError
        In ``fit``: NaN/inf or empty ``X``; ``m`` beyond ``log2(n_samples)``; ``delta``
        outside (0, 1); ``g < 0``; an unknown ``variant``/``compress``/kernel; a variant
        whose power kernel does not exist for the kernel; a kernel that is not positive
        semidefinite; invalid ``sample_weight``.

    Notes
    -----
    Leftover rule, for ``n`` not divisible by ``2^m``: the ``r = n mod 2^m`` leftover
    points, drawn uniformly at random, are left out of KT-SPLIT only; KT-SWAP still
    targets all ``n`` points and may swap any of them into the coreset, which has
    ``n // 2^m`` points. Compress splits its input recursively into 4 consecutive parts
    as equal as possible (``numpy.array_split``) and halves the union of their outputs,
    keeping ``floor(l / 2)`` of ``l`` points (for odd ``l`` one point, drawn uniformly, is
    left out of that halving): the size is ``n / 2^m`` when ``n`` is ``4^m`` times an
    integer, and within a few points of it otherwise. No input point is dropped up front
    (the authors' implementation first thins ``n`` down to a power of 4).

    Weights: with ``sample_weight``, KT-SPLIT halves ``n`` points drawn by systematic
    resampling from the weights (each point ``floor(n w_i)`` or ``ceil(n w_i)`` times,
    in input order) and KT-SWAP targets the weighted measure exactly (Compress targets
    the resampled points). Points of zero weight are left out entirely.

    Memory and speed: the kernel matrix of a halving is stored when it fits in
    ``working_memory`` (:func:`kernelkit.set_config`); otherwise it is computed in row
    blocks of that size, so memory stays ``O(n d + working_memory)``. Power kernels
    without a closed form (Matérn of smoothness other than 1/2, 3/2, 5/2; powers of the
    Laplacian) are evaluated on the host with SciPy's Bessel functions, several times
    slower than the closed-form kernels.

    References
    ----------
    .. [KT] R. Dwivedi and L. Mackey, "Kernel Thinning", COLT 2021; JMLR 25(152), 2024.
    .. [GKT] R. Dwivedi and L. Mackey, "Generalized Kernel Thinning", ICLR 2022.
    .. [CPP] A. Shetty, R. Dwivedi and L. Mackey, "Distribution Compression in Near-linear
       Time", ICLR 2022.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelkit.thinning import KernelThinning
    >>> X = np.random.default_rng(0).standard_normal((4096, 2))
    >>> kt = KernelThinning(gamma=0.25, random_state=0).fit(X)
    >>> kt.coreset_.shape
    (64, 2)
    >>> bool(kt.mmd_ < 0.02)
    True
    """

    def __init__(self, kernel="rbf", *, gamma=None, degree=3, coef0=1, kernel_params=None,
                 variant="target", alpha=None, m=None, delta=0.5, compress=None, g=4,
                 compute_mmd="auto", backend=None, random_state=None):
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.variant = variant
        self.alpha = alpha
        self.m = m
        self.delta = delta
        self.compress = compress
        self.g = g
        self.compute_mmd = compute_mmd
        self.backend = backend
        self.random_state = random_state

    def _precomputed(self):
        return isinstance(self.kernel, str) and self.kernel == "precomputed"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self._precomputed()
        tags.target_tags.required = False
        return tags

    def _check_params(self, n):
        if not isinstance(self.variant, str) or self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {self.variant!r}.")
        if self.compress not in COMPRESS:
            raise ValueError(f"compress must be one of {COMPRESS}, got {self.compress!r}.")
        delta = self.delta
        if (isinstance(delta, bool) or not isinstance(delta, Real) or not math.isfinite(delta)
                or not 0.0 < delta < 1.0):
            raise ValueError(f"delta must be a failure probability in (0, 1), got {delta!r}.")
        g = self.g
        if isinstance(g, bool) or not isinstance(g, Integral) or g < 0:
            raise ValueError(f"g must be an integer >= 0 (Compress++'s oversampling), got {g!r}.")
        if self.compute_mmd not in (True, False, "auto"):
            raise ValueError(f"compute_mmd must be True, False or 'auto', got "
                             f"{self.compute_mmd!r}.")
        max_m = n.bit_length() - 1  # largest m with 2^m <= n
        if self.m is None:
            m = max_m // 2
        else:
            m = self.m
            if isinstance(m, bool) or not isinstance(m, Integral) or m < 0:
                raise ValueError(f"m must be an integer >= 0 or None, got {m!r}.")
            if m > max_m:
                raise ValueError(
                    f"m={m} halving rounds leave no point of n_samples={n}: m must be at most "
                    f"log2(n_samples) = {math.log2(n):.3g}, i.e. m <= {max_m}.")
        return int(m), float(delta), int(g)

    def _kernels(self, engine, X, budget):
        """(split kernel, swap kernel, alpha) as _ThinKernel objects."""
        n, d = X.shape
        if self._precomputed():
            if n != d:
                raise ValueError(f"kernel='precomputed' needs a square X (the kernel matrix), "
                                 f"got shape {X.shape}.")
            if self.variant != "target":
                raise ValueError(f"variant={self.variant!r} needs a kernel with a power kernel; "
                                 "kernel='precomputed' supports variant='target' only.")
            kern = _ThinKernel(engine, None, budget, gram=X)
            _check_psd(kern, n)
            return kern, kern, None
        kernel = make_kernel(self.kernel, self.gamma, self.degree, self.coef0, self.kernel_params)
        Xe = engine.asarray(X)
        if not isinstance(kernel, Kernel):
            if self.variant != "target":
                raise ValueError(f"variant={self.variant!r} needs a kernelkit kernel with a "
                                 "power kernel (rbf, laplacian, matern); a callable kernel "
                                 "supports variant='target' only.")
            kern = _ThinKernel(engine, X, budget, func=kernel)
            _check_psd(kern, n)
            return kern, kern, None
        spec = kernel.spec(d)
        swap = _ThinKernel(engine, Xe, budget, terms=((1.0, spec),))
        if spec.name not in ("rbf", "laplacian", "matern"):
            _check_psd(swap, n)
        if self.variant == "target":
            return swap, swap, None
        power, alpha = _power_spec(spec, self.alpha, d, root=self.variant == "root")
        terms = ((1.0, power),) if self.variant in ("root", "power") else ((1.0, spec),
                                                                           (1.0, power))
        return _ThinKernel(engine, Xe, budget, terms=terms), swap, alpha

    def fit(self, X, y=None, sample_weight=None):
        """Select the coreset.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Points to thin (the kernel matrix when ``kernel="precomputed"``).
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the input points (the target measure); None: equal.

        Returns
        -------
        self : object
        """
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=1)
        n = X.shape[0]
        m, delta, g = self._check_params(n)
        weights = None
        if sample_weight is not None:
            weights = _check_sample_weight(sample_weight, X, ensure_non_negative=True)
            total = weights.sum()
            if not total > 0:
                raise ValueError("sample_weight must have a positive sum.")
            weights = weights / total
        self.backend_ = resolve_backend(self.backend, X)
        engine = get_backend(self.backend_)
        budget = int(get_config()["working_memory"] * 2**20)
        split_kern, swap_kern, alpha = self._kernels(engine, X, budget)
        rng = check_random_state(self.random_state)
        seq = np.arange(n) if weights is None else _systematic_resample(weights, n, rng)

        mmd = None
        if m == 0:  # no halving: the input itself (resampled, with weights)
            idx = seq
            mmd = 0.0 if weights is None else None
        elif self.compress is None:
            idx, mmd = self._kt_fit(split_kern, swap_kern, engine, seq, n, m, delta, rng,
                                    budget, weights, want_mmd=self.compute_mmd is not False)
        else:
            idx = self._compress_fit(split_kern, swap_kern, engine, seq, n, m, delta, g, rng,
                                     budget, weights)
        idx = np.sort(np.asarray(idx, dtype=np.int64))
        if mmd is None:
            mmd = math.nan
            want = self.compute_mmd is True or (self.compute_mmd == "auto" and n <= _AUTO_MMD_MAX_N)
            if want:
                mmd = _mmd_to_input(swap_kern, n, idx, weights, budget)
        self.coreset_indices_ = idx
        self.coreset_ = X[idx]
        self.mmd_ = float(mmd)
        self.m_ = m
        self.alpha_ = alpha
        return self

    def _kt_fit(self, split_kern, swap_kern, engine, seq, n, m, delta, rng, budget, weights,
                want_mmd):
        """KT on all points of positive weight: (indices into X, MMD or None)."""
        everything = np.arange(n)
        support = everything if weights is None else np.flatnonzero(weights > 0)
        split = _Pool(split_kern, support, budget)
        swap = split if swap_kern is split_kern else _Pool(swap_kern, support, budget)
        local = seq if weights is None else np.searchsorted(support, seq)
        idx, mmd = _kt(split, swap, engine, local, m, delta, rng, budget,
                       weights=None if weights is None else weights[support],
                       unique=weights is None, want_mmd=want_mmd)
        return support[idx], mmd

    def _compress_fit(self, split_kern, swap_kern, engine, seq, n, m, delta, g, rng, budget,
                      weights):
        """Compress (``m`` levels) or Compress++ (``m - g`` levels, then KT with the rest)."""
        max_beta = (n.bit_length() - 1) // 2  # 4^beta <= n: leaves keep >= 1 point
        if self.compress == "compress":  # beyond log4(n) levels, KT does the last rounds
            beta = min(m, max_beta)
            if beta == 0:
                return self._kt_fit(split_kern, swap_kern, engine, seq, n, m, delta, rng,
                                    budget, weights, want_mmd=False)[0]
            delta_per_sq = delta / _compress_plan(n, beta)[1]
            C = _compress(split_kern, swap_kern, engine, seq, beta, delta_per_sq, rng, budget)
            if beta == m:
                return C
            pool = _Pool(split_kern, C, budget)
            swap = pool if swap_kern is split_kern else _Pool(swap_kern, C, budget)
            Q, _ = _kt(pool, swap, engine, np.arange(len(C)), m - beta, delta, rng, budget,
                       unique=True, want_mmd=False)
            return C[Q]
        beta = min(max(m - g, 0), max_beta)
        if beta <= 1:  # no halving before the final KT: KT itself
            return self._kt_fit(split_kern, swap_kern, engine, seq, n, m, delta, rng, budget,
                                weights, want_mmd=False)[0]
        # Compress++ [CPP, Alg. 2] with the top level of Compress folded into Thin: the four
        # quarters are compressed separately (beta - 1 levels) and KT thins their union
        # with one more round; delta split as in [CPP]: Thin gets
        # m_t / (m_t + 2^m_t (beta - 1)) of it, the halvings the rest (each ~ ell^2)
        depth, m_thin = beta - 1, m - beta + 1
        parts = np.array_split(seq, 4)
        delta_t = delta * m_thin / (m_thin + 2.0 ** m_thin * depth)
        sq = sum(_compress_plan(len(p), depth)[1] for p in parts)
        C = np.concatenate([_compress(split_kern, swap_kern, engine, p, depth,
                                      (delta - delta_t) / sq, rng, budget) for p in parts])
        if len(C) < 2**m_thin:
            return C
        split = _Pool(split_kern, C, budget)
        swap = split if swap_kern is split_kern else _Pool(swap_kern, C, budget)
        Q, _ = _kt(split, swap, engine, np.arange(len(C)), m_thin, delta_t, rng, budget,
                   unique=True, want_mmd=False)
        return C[Q]

    def fit_transform(self, X, y=None, sample_weight=None):
        """Select the coreset and return its points.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Points to thin.
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the input points.

        Returns
        -------
        coreset : ndarray of shape (n_coreset, n_features), float64
            ``X[coreset_indices_]`` (fewer rows than ``X``).
        """
        return self.fit(X, y, sample_weight=sample_weight).coreset_


def _mmd_to_input(kern, n, idx, weights, budget):
    """Exact MMD between the (weighted) input and the equal-weight coreset ``idx``."""
    everything = np.arange(n)
    w = np.full(n, 1.0 / n) if weights is None else weights
    meanK = kern.matvec(everything, everything, w)
    q = len(idx)
    quad = kern.matvec(idx, idx, np.ones(q)).sum()
    mmd2 = float(w @ meanK) - 2.0 * meanK[idx].mean() + quad / (q * q)
    return math.sqrt(max(mmd2, 0.0))


def kernel_thinning(X, *, kernel="rbf", gamma=None, degree=3, coef0=1, kernel_params=None,
                    variant="target", alpha=None, m=None, delta=0.5, compress=None, g=4,
                    sample_weight=None, backend=None, random_state=None):
    """Indices of a kernel thinning coreset of ``X`` (function form of :class:`KernelThinning`).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Points to thin (the kernel matrix when ``kernel="precomputed"``).
    kernel : str, Kernel or callable, default="rbf"
        The target kernel, as in :class:`KernelThinning`.
    gamma : float, default=None
        Kernel scale for rbf, laplacian, matern and polynomial; None means ``1 / n_features``.
    degree : float, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1
        Constant term of the polynomial kernel.
    kernel_params : dict, default=None
        Further parameters of the named kernel or of the callable.
    variant : {"target", "root", "power", "plus"}, default="target"
        KT-SPLIT kernel; see :class:`KernelThinning`.
    alpha : float, default=None
        Power of the power kernel; see :class:`KernelThinning`.
    m : int, default=None
        Halving rounds (coreset of ``n_samples // 2^m`` points); None: about ``sqrt(n)``.
    delta : float in (0, 1), default=0.5
        KT-SPLIT's failure probability.
    compress : {None, "compress", "compress++"}, default=None
        Near-linear-time Compress / Compress++ instead of KT on all points.
    g : int >= 0, default=4
        Compress++'s oversampling parameter.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weights of the input points.
    backend : {"auto", "numpy", "numba", "cupy"} or None, default=None
        Compute engine.
    random_state : int, RandomState instance or None, default=None
        Seed.

    Returns
    -------
    indices : ndarray of shape (n_coreset,), int64
        Sorted rows of ``X`` in the coreset (unique unless ``sample_weight`` is given).

    Raises
    ------
    ValueError
        As :meth:`KernelThinning.fit`.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelkit.thinning import kernel_thinning
    >>> X = np.random.default_rng(0).standard_normal((1000, 3))
    >>> kernel_thinning(X, random_state=0).shape
    (62,)
    """
    est = KernelThinning(kernel=kernel, gamma=gamma, degree=degree, coef0=coef0,
                         kernel_params=kernel_params, variant=variant, alpha=alpha, m=m,
                         delta=delta, compress=compress, g=g, compute_mmd=False,
                         backend=backend, random_state=random_state)
    return est.fit(X, sample_weight=sample_weight).coreset_indices_
