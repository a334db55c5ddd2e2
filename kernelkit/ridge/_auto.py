"""``solver="auto"`` of the kernel ridge estimators: a cost model, not a fixed ``n``.

Both solvers compute the same ``n x n`` kernel matrix (float64 for Cholesky, float32
for PCG, from the same float64 arithmetic), so that cost cancels; what is weighed is
what each pays beyond it, in seconds at two measured machine rates:

* Cholesky: ``n^3 / 3`` flops of LAPACK ``potrf`` at ``POTRF_EFFICIENCY`` times the
  machine's ``dgemm`` rate, plus ``_CHOL_PASSES`` streaming passes over the float64
  ``K``: the kernel matrix is the factorization's own workspace (no copy), so what
  remains is the 1-norm (one pass), the two triangular solves (half the matrix each)
  and, where the diagonal is not constant (sample weights, non-stationary kernels),
  the equilibration (a read and a write); the condition estimate is skipped for a
  positive-definite kernel (``alpha`` bounds it). Ten times the factorization with one
  ``alpha`` per target (an eigendecomposition then);
* PCG: its sketch (:func:`~kernelkit.ridge._pcg.nystrom_sketch`, the Nyström factor
  ``F`` PCG draws first anyway: :func:`sketch_flops` at the ``dgemm`` rate plus a fixed
  cost per block of pivots), then ``t + 1`` streaming passes over the held ``K`` (the
  ``t`` iterations' products and the column norms of the rounding estimate), each with
  two passes over ``F`` (``n x r`` float64, about ``4 n r`` float32 entries' worth) and a
  fixed ``_ITER_OVERHEAD_S`` (3 ms: CG's bookkeeping, the preconditioner's small
  solves, thread dispatch; read off the quiet 2-core Xeon's PCG times, n 2,000-20,000,
  with the time per entry: 3.5 ms per iteration at n = 2,000, whose ``K`` the cache
  holds, 0.17 s at n = 20,000). ``t`` is

  ``t = 1.62 kappa^0.05 (n / 1000)^0.385 (1 + eps sqrt(n) / (alpha tol))^0.119 ln(2 / tol)``

  with ``kappa = 1 + 2 lam / alpha`` from the sketch's smallest Nyström eigenvalue
  ``lam`` (Frangella, Tropp & Udell 2023, Prop. 5.3: ``lam + ||K - F F^T||`` over
  ``alpha``, with ``||K - F F^T|| ~ lam``) and ``eps`` the relative accuracy of the held
  ``K`` (float32's, or float64's below ``tol = 1e-6``): a minimax fit of PCG's
  iteration counts on the 32 Fashion-MNIST cells of ``benchmarks/bench_auto.py``
  (n 2,000-20,000, gamma 0.01-0.05, alpha 1e-4-1e-1; every count within a factor 1.79;
  six of the eight smallest Nyström eigenvalues at n = 20,000 extrapolated from the
  smaller sizes).
  The counts grow with ``n`` at a fixed ``alpha`` (24, 38, 56, 78 at alpha 0.1 from
  n 2,000 to 20,000) and with the float32 rounding of ``K`` relative to ``tol``
  (column norms ``~ sqrt(n)``, coefficients ``~ 1 / alpha``): CG must push its own
  residual below ``tol`` minus that rounding, and finishes on float64 products where
  the rounding alone exceeds ``tol`` (up to 316 iterations at alpha 1e-4); ``kappa``
  itself explains little of the grid's spread once those two are in (the old
  ``3.7 kappa^0.09 ln(2 / tol)``, fitted at n 3,000-5,000, predicted 58-85 where
  n = 20,000 took 104-316). On one cell a larger rank did lower the count sharply
  (n = 10,000, alpha 0.1: rank 128 / 512 / 1,250 took 56 / 25 / 16 iterations at
  ``kappa`` 16 / 6.1 / 3.1), a dependence the grid's rank rule never exercises.

The decision is taken in three steps, each reading only what it needs:

1. Before any sketch, PCG's floor (:func:`pcg_floor`: the sketch to its first rank
   check, 128 pivots, and the fewest iterations, ``2 ln(2 / tol)``, with that rank)
   against Cholesky: when even the floor costs more, Cholesky is chosen and nothing
   is drawn.
2. At every rank check where the sketch would still grow, the PCG still to pay for:
   the rest of the sketch (its time so far scaled by :func:`sketch_flops` to the rank
   where the rank rule would stop, the smallest eigenvalue's decay over the last
   doubling extrapolated, ``1 / rank`` at the first check) and the iterations at that
   rank. When it exceeds Cholesky, Cholesky is chosen there (the sketch drawn so far
   is spent either way and not counted), usually at the first check (128 pivots).
3. A completed sketch: the iterations at its own ``lam`` against Cholesky.

The two rates (``dgemm`` flops per second, seconds per float32 entry of a product with
``k`` columns) are measured once per process and BLAS thread count by short probes: a
512 x 512 ``dgemm`` and a float32 product whose matrix is as large as the held ``K``
(:func:`probe_bytes`: at least 32 MiB, at most twice the last-level cache). A 32 MiB
probe alone reads the cache: on the 2-core Xeon (a 480 MiB cache shared with the host)
its rate was about a third of the time per entry that the quiet benchmark's PCG
times imply at n = 20,000 (about 0.4 ns per float32 entry, with 3 ms per iteration),
so PCG looked cheap there and lost (alpha 1e-3: 58 s against Cholesky's 38 s).

PCG is also watched while it runs (:class:`Watch`): from ``_WATCH_FROM`` iterations
on, the observed residual decrease per step and time per step predict the time left;
when that exceeds ``_BAIL_MARGIN`` times the cost of starting over with Cholesky (the
measured time of the kernel matrix plus the model's factorization) and the float64
matrix fits ``cache_size``, the fit switches to Cholesky (the result is then exactly
``solver="cholesky"``'s). The rate is not read while the residual is above half the
start and CG has spent less than a third of that restart cost: at small ``alpha`` a
strongly preconditioned CG sits near its start for 20 steps and more (0.82 of it for
25 steps at ``alpha = 1e-4``, n 3,000) and then converges fast; a rate read there
would switch every such fit. Before float64 products would finish a solve whose float32
rounding exceeds ``tol`` (a second, float64 kernel matrix, as Cholesky needs), the
watch switches when the steps left, at the observed rate and twice the time per step,
cost more than the factorization (:meth:`Watch.refine`); that finish ran unwatched
before (n = 20,000, gamma 0.05, alpha 1e-4: 295 iterations, 135 s against Cholesky's
43 s).
"""

import glob
import math
import time
from functools import lru_cache

import numpy as np

from ..utils._threads import blas_limit, blas_threads_for, map_row_blocks
from ._pcg import _BLOCK, _RANK0, _RANK_RATIO, nystrom_sketch

POTRF_EFFICIENCY = 0.85  # OpenBLAS dpotrf / dgemm rate from n ~ 4,000 on (measured 0.89)
AUTO_MIN_SAMPLES = 1024  # below: Cholesky costs less than the model's own probes
_CHOL_PASSES = 4         # streaming passes over n^2 float64 of the Cholesky path
_ITER_OVERHEAD_S = 3e-3  # CG bookkeeping, preconditioner and thread dispatch per iteration
_BLOCK_OVERHEAD_S = 2e-3  # per block of sketch pivots: draws, eigh, rank check
# t = 1.62 kappa^0.05 (n / 1000)^0.385 (1 + eps sqrt(n) / (alpha tol))^0.119 ln(2 / tol):
# see the module notes
_ITER_COEF, _ITER_EXP, _ITER_N_EXP, _ITER_ROUND_EXP = 1.62, 0.05, 0.385, 0.119
_MIN_ITER_COEF = 2.0     # the floor's fewest iterations, 2 ln(2 / tol): see min_iterations
_WATCH_FROM = 10         # CG steps before the observed rate is trusted
_BAIL_MARGIN = 1.5       # PCG's predicted remaining time over Cholesky's, to switch
_PLATEAU = 0.5           # above this relative residual the rate is not yet trusted ...
_PROBE_MIN_BYTES = 32 * 2**20  # the product probe's least matrix: beyond most L2 caches
FLOAT32_EPS = float(np.finfo(np.float32).eps)


class SwitchToCholesky(Exception):
    """Raised by the PCG monitor of ``solver="auto"``: Cholesky will finish first."""


@lru_cache(maxsize=None)
def _probe(limit, k, nbytes=_PROBE_MIN_BYTES):
    """``(dgemm flops/s, seconds per float32 entry of a k-column product)`` under the
    BLAS thread count ``limit`` (the caller's region), the product's matrix ``nbytes``
    large; measured once per process."""
    A = np.full((512, 512), 0.5)
    best = math.inf
    for _ in range(2):
        t0 = time.perf_counter()
        A @ A
        best = min(best, time.perf_counter() - t0)
    gemm = 2 * 512**3 / max(best, 1e-9)
    rows = max(1024, int(nbytes) // (4 * 2048))
    M = np.full((rows, 2048), 0.5, np.float32)
    V = np.ones((2048, max(1, k)), np.float32)
    out = np.empty((rows, V.shape[1]), np.float32)

    def job(r0, r1):
        out[r0:r1] = M[r0:r1] @ V

    best = math.inf
    for _ in range(2 if nbytes <= _PROBE_MIN_BYTES else 1):  # a large one reads memory
        t0 = time.perf_counter()
        map_row_blocks(job, rows, 1024)
        best = min(best, time.perf_counter() - t0)
    return gemm, max(best, 1e-12) / M.size


@lru_cache(maxsize=1)
def last_level_cache():
    """Bytes of the CPU's largest cache (Linux sysfs; 32 MiB where it cannot be read)."""
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    best = 0
    for path in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        try:
            with open(path) as f:
                txt = f.read().strip()
            best = max(best, int(txt[:-1]) * units[txt[-1]] if txt[-1] in units else int(txt))
        except (OSError, ValueError, IndexError):
            continue
    return best or _PROBE_MIN_BYTES


def probe_bytes(nbytes):
    """The product probe's size for a held matrix of ``nbytes``: the matrix's own size, at
    least 32 MiB and at most twice the last-level cache (from there on every product
    reads memory), rounded to a power of two (one probe serves nearby sizes). A probe
    smaller than the matrix would read a cache that the held matrix does not fit (or
    shares with other processes: 32 MB was 2.6x faster per entry than a 1.6 GB matrix on
    a 2-core Xeon whose 480 MiB cache is the host's)."""
    size = min(float(max(nbytes, 1)), 2.0 * last_level_cache())
    return max(_PROBE_MIN_BYTES, 2 ** round(math.log2(size)))


def machine_rates(k, nbytes=0):
    """The probes' rates for ``k`` target columns under the current BLAS thread count,
    for products with a held matrix of ``nbytes`` (see :func:`probe_bytes`)."""
    return _probe(blas_limit() or 0, min(int(k), 64), probe_bytes(nbytes))


def cholesky_seconds(n, n_alphas=1, rates=None):
    """Predicted seconds of the Cholesky solve of an ``n x n`` system (kernel excluded)."""
    gemm, entry = rates
    t = n**3 / 3 / (POTRF_EFFICIENCY * gemm) + _CHOL_PASSES * 2 * n * n * entry
    return t * (10 if n_alphas > 1 else 1)


def iteration_seconds(n, rank, itemsize=4, rates=None):
    """Predicted seconds of one PCG iteration with ``K`` held (``itemsize`` 4 or 8)."""
    _, entry = rates
    return (n * n * itemsize / 4 + 4 * n * rank) * entry + _ITER_OVERHEAD_S


def solve_seconds(n, rank, iterations, itemsize=4, rates=None):
    """Predicted seconds of PCG after its sketch: ``iterations`` products plus the one pass
    over the held ``K`` that its rounding estimate makes (the column norms)."""
    return (iterations + 1) * iteration_seconds(n, rank, itemsize, rates)


def sketch_flops(n, rank, d):
    """Flops of the rank-``rank`` sketch: the pivots' kernel columns (``2 n r d``; ``d`` 0
    for a precomputed ``K``), block RPCholesky's updates of the residual columns (float32,
    counted at half) and of ``F^T F`` (``1.5 n r^2`` together) and each block's own
    factor (``4 n r b``, ``b`` pivots per block)."""
    return 2.0 * n * rank * d + 1.5 * n * rank * rank + 4.0 * n * rank * _BLOCK


def sketch_seconds(n, rank, d, rates):
    """Predicted seconds of the rank-``rank`` sketch at the ``dgemm`` rate."""
    return sketch_flops(n, rank, d) / rates[0] + math.ceil(rank / _BLOCK) * _BLOCK_OVERHEAD_S


def estimated_iterations(lam_min, mu, tol, n, eps=FLOAT32_EPS):
    """PCG iterations from the sketch's smallest Nyström eigenvalue ``lam_min``, the
    smallest ``alpha`` ``mu``, ``n`` and the relative accuracy ``eps`` of the held
    kernel matrix's products (see the module notes)."""
    kappa = 1.0 + 2.0 * max(float(lam_min), 0.0) / float(mu)
    rounding = 1.0 + eps * math.sqrt(n) / (float(mu) * tol)
    return (_ITER_COEF * kappa**_ITER_EXP * (n / 1000.0) ** _ITER_N_EXP
            * rounding**_ITER_ROUND_EXP * math.log(2.0 / tol))


def min_iterations(tol):
    """The floor's fewest iterations, ``2 ln(2 / tol)`` (about 20 at ``tol = 1e-4``, under
    every count of the benchmark grid, n 2,000-20,000: 24 at the least; PCG took 18 at
    n = 1,000, below the model's range)."""
    return _MIN_ITER_COEF * math.log(2.0 / tol)


def pcg_floor(n, d, tol, itemsize, rates):
    """PCG's cheapest possible cost under the model: the sketch at its first rank check
    (``min(128, n)`` pivots) and the fewest iterations with that rank (the kernel matrix
    both solvers compute excluded). When even this exceeds Cholesky, no sketch is drawn."""
    r0 = min(_RANK0, n)
    return sketch_seconds(n, r0, d, rates) + solve_seconds(n, r0, min_iterations(tol),
                                                           itemsize, rates)


def cholesky_fits(n, cache_mib):
    """Whether the float64 ``K`` fits ``cache_size`` (the memory rule of "auto")."""
    return 8 * n * n <= cache_mib * 2**20


class Watch:
    """PCG's monitor under ``solver="auto"``: raise :class:`SwitchToCholesky` when the
    observed convergence says PCG will finish later than a fresh Cholesky solve.

    Parameters
    ----------
    tol : float
    restart_s : callable
        ``() -> seconds`` of switching: the kernel matrix again (as measured once it
        was held) plus the model's Cholesky.
    factor_s : float, optional
        The model's Cholesky alone (kernel excluded), against which :meth:`refine`
        weighs a float64 finish.
    """

    def __init__(self, tol, restart_s, factor_s=math.inf):
        self.tol, self.restart_s, self.factor_s = tol, restart_s, factor_s
        self.t0, self.best = None, [1.0]

    def _rate(self, it):
        """Log residual decrease per step over the last quarter of the steps."""
        h = max(1, min(it - 1, max(_WATCH_FROM // 2, it // 4)))
        cur, old = self.best[it], self.best[it - h]
        return math.log(max(cur, 1e-300) / max(old, 1e-300)) / h

    def __call__(self, it, rel):
        now = time.perf_counter()
        if self.t0 is None:  # the first step also paid for the preconditioner's setup
            self.t0 = now
        self.best.append(min(self.best[-1], rel))
        if it < _WATCH_FROM or not rel > self.tol:
            return
        restart = self.restart_s()
        if self.best[it] > _PLATEAU and now - self.t0 < restart / 3:
            return  # CG's early plateau (small alpha) is no rate: wait for the fall
        # the rate over the last quarter of the steps: CG accelerates, the start is slowest
        rate = self._rate(it)
        per_step = (now - self.t0) / max(it - 1, 1)
        left = math.inf if rate >= 0 else math.log(self.tol / self.best[it]) / rate
        if left * per_step > _BAIL_MARGIN * restart:
            raise SwitchToCholesky(it)

    def refine(self, it, start):
        """Before float64 products finish the solve from relative residual ``start``
        (float32 rounding above ``tol``): both that finish and Cholesky need the float64
        kernel matrix, so switch when the steps left (at the rate observed, each reading
        twice the bytes) would cost more than the factorization."""
        if self.t0 is None or it < 2 or len(self.best) <= it:
            return
        per_step = (time.perf_counter() - self.t0) / max(it - 1, 1)
        rate = self._rate(it)
        left = math.inf if rate >= 0 else max(0.0, math.log(self.tol / start) / rate)
        if 2 * left * per_step > self.factor_s:
            raise SwitchToCholesky(it)


class _Abandon:
    """``stop(rank, lam_min, max_rank)`` of the sketch under ``"auto"``: True once the
    PCG still to pay for (the rest of the sketch and the iterations, as forecast from the
    sketch so far) costs more than Cholesky's ``chol`` seconds."""

    def __init__(self, n, d, mu, tol, chol, rates, itemsize=4):
        self.n, self.d, self.mu, self.tol = n, d, mu, tol
        self.chol, self.rates, self.itemsize = chol, rates, itemsize
        self.eps = float(np.finfo(np.float32 if itemsize == 4 else np.float64).eps)
        self.t0, self.last = time.perf_counter(), None

    def forecast(self, k, lam, max_rank, final=False):
        """``(seconds, rank, iterations)`` of PCG from the sketch at rank ``k`` (smallest
        Nyström eigenvalue ``lam``) on: its decay over the last doubling (``1 / k`` at the
        first check) extrapolated to where the rank rule stops, at the latest the cap; the
        rest of the sketch scaled from its time so far by :func:`sketch_flops`. ``final``:
        the sketch is complete (``lam`` as it is)."""
        if final:
            t = estimated_iterations(lam, self.mu, self.tol, self.n, self.eps)
            return solve_seconds(self.n, k, t, self.itemsize, self.rates), k, t
        spent = time.perf_counter() - self.t0
        p = 1.0
        if self.last is not None and self.last[1] > lam > 0:
            p = math.log(self.last[1] / lam) / math.log(k / self.last[0])
        target = _RANK_RATIO * self.mu  # the sketch's rank rule
        r = max_rank
        if lam > 0 and p > 0:
            r = min(r, max(k, k * (lam / target) ** (1.0 / p)))
        lam_r = max(lam * (k / r) ** p if lam > 0 else 0.0, 0.5 * target)
        more = spent * (sketch_flops(self.n, r, self.d) / sketch_flops(self.n, k, self.d) - 1)
        t = estimated_iterations(lam_r, self.mu, self.tol, self.n, self.eps)
        return more + solve_seconds(self.n, r, t, self.itemsize, self.rates), r, t

    def __call__(self, k, lam, max_rank):
        pcg = self.forecast(k, lam, max_rank)[0]
        self.last = (k, lam)
        return pcg > self.chol


def choose(product, alpha, tol, n_targets, rng, progress, fits):
    """``solver="auto"`` for this fit: ``(solver, sketch, monitor)``.

    ``fits``: whether Cholesky's float64 ``K`` fits ``cache_size``.
    The sketch (PCG's own first step, :func:`~kernelkit.ridge._pcg.nystrom_sketch`) is
    drawn only when PCG's floor (:func:`pcg_floor`) leaves the choice open, abandoned at
    the first rank check where the PCG still to pay for costs more than Cholesky, and
    handed on when PCG is chosen, with the :class:`Watch` that may still switch.
    """
    n = product.n
    a = np.atleast_1d(alpha)
    if not fits:
        progress("solver auto", level=1, choice="pcg", reason="the float64 n x n matrix of "
                 "Cholesky exceeds cache_size")
        return "pcg", None, None
    itemsize = product.dtype.itemsize
    with blas_threads_for(n):  # the rates of the thread count the solvers run with
        rates = machine_rates(n_targets, n * n * itemsize)
    d = 0 if product.X is None or product.K is not None else product.X.shape[1]
    chol = cholesky_seconds(n, np.unique(a).size, rates)
    floor = pcg_floor(n, d, tol, itemsize, rates)
    if chol <= floor:  # Cholesky is certain: not even the sketch is drawn
        progress("solver auto", level=1, cholesky_s=chol, pcg_min_s=floor, choice="cholesky")
        return "cholesky", None, None
    mu = float(a.min())
    abandon = _Abandon(n, d, mu, tol, chol, rates, itemsize)
    sketch = nystrom_sketch(product, alpha, rng, progress, stop=abandon)
    info = sketch[2]
    if info.get("stopped"):
        progress("solver auto", level=1, cholesky_s=chol, rank=info["rank"],
                 choice="cholesky", reason="the sketch says PCG would cost more")
        return "cholesky", None, None
    pcg, _, t = abandon.forecast(info["rank"], info["lam_min"], info["rank"], final=True)
    choice = "pcg" if pcg < chol else "cholesky"
    progress("solver auto", level=1, cholesky_s=chol, pcg_s=pcg, iterations=t,
             rank=info["rank"], choice=choice)
    if choice == "cholesky":
        return choice, None, None
    return choice, sketch, Watch(tol, lambda: product.build_s + chol, chol)


def announce(est, verbose, solver, shape, n_targets, alpha, max_iter):
    """The fit's first progress line (printed before the kernel is evaluated): the solver,
    why where ``solver="auto"`` settled without the cost model, and the expected cost.
    Returns the fit's :class:`~kernelkit.utils._verbose.Progress`."""
    from ..utils._verbose import Progress, flops

    progress = Progress(est, verbose)
    n, d = shape[0], shape[1] if len(shape) > 1 else 1
    a = np.atleast_1d(alpha)
    head = f"n={n}, d={d}, {n_targets} target(s)"
    kernel = f"the {n} x {n} kernel (~{flops(2.0 * n * n * d)})"
    if solver == "cholesky":
        why = ""
        if est.solver == "auto":
            why = ("n < %d" % AUTO_MIN_SAMPLES if n < AUTO_MIN_SAMPLES else "alpha = 0 (pcg "
                   "needs alpha > 0)" if a.min() <= 0 else "a low-rank dot-product kernel")
            why = f" (auto: {why})"
        progress(f"solver cholesky{why}, {head}: {kernel} in float64, its Cholesky factor "
                 f"(n^3/3 ~ {flops(n ** 3 / 3)})")
    elif solver == "auto":
        progress(f"solver auto, {head}: weighing Cholesky (n^3/3 ~ {flops(n ** 3 / 3)}) against "
                 f"PCG (iterations estimated from the Nystrom sketch of its first step)")
    else:
        progress(f"solver pcg, {head}: {kernel}, a Nystrom preconditioner, CG up to {max_iter} "
                 f"iterations (~{flops(2.0 * n * n * n_targets)} each)")
    return progress
