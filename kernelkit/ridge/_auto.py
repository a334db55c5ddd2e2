"""``solver="auto"`` of the kernel ridge estimators: a cost model, not a fixed ``n``.

Both solvers compute the same ``n x n`` kernel matrix (float64 for Cholesky, float32
for PCG, from the same float64 arithmetic), so that cost cancels; what is weighed is

* Cholesky: ``n^3 / 3`` flops of LAPACK ``potrf`` at ``POTRF_EFFICIENCY`` times the
  machine's ``dgemm`` rate (one core's, times ``1 + 0.95 (threads - 1)``: on two quiet
  cores of an AMD EPYC potrf ran at 1.87, 1.93 and 2.04 times one core's ``dgemm`` rate
  at n 5,000, 10,000 and 20,000; 1.44 at 2,000, where the model is not consulted), plus
  ``_CHOL_PASSES`` streaming passes over the float64 ``K``: the kernel matrix is the
  factorization's own workspace (no copy), so what remains is the 1-norm (one pass),
  the two triangular solves (half the matrix each) and, where the diagonal is not
  constant (sample weights, non-stationary kernels), the equilibration (a read and a
  write); the condition estimate is skipped for a positive-definite kernel (``alpha``
  bounds it). Ten times the factorization with one ``alpha`` per target (an
  eigendecomposition then);
* PCG: its sketch (below), then ``t`` iterations of one product with the held ``K``
  (``n^2`` entries streamed) plus the preconditioner's two passes over the Nyström
  factor ``F`` (``n x r`` float64 times ``k`` columns: ``8 n r`` float32 product
  entries' worth, measured 5.4-8.4 on a 2-core AMD EPYC where the byte count says 4)
  and a fixed per-iteration overhead; measured iterations (n 2,000-5,000) took 0.86-0.96
  times this prediction (CG runs its BLAS on one thread, :func:`_pcg._cg_threads`).
  ``t`` comes from the spectrum the preconditioner leaves, read
  off the sketch that PCG draws first anyway
  (:func:`~kernelkit.ridge._pcg.nystrom_sketch`): with ``lam`` the smallest Nyström
  eigenvalue and ``mu`` the smallest ``alpha``, the preconditioned condition number
  is about ``kappa = 1 + 2 lam / mu`` (Frangella, Tropp & Udell 2023, Prop. 5.3:
  ``lam + ||K - F F^T||`` over ``mu``, with ``||K - F F^T|| ~ lam``), and
  ``t = 2.53 kappa^0.17 (n / 5,000)^0.38 ln(2 / tol)``, a least-squares fit of
  ``log t`` on the 32 cells of ``benchmarks/bench_auto.py`` (Fashion-MNIST, n 2,000-
  20,000, gamma 0.01-0.05, alpha 1e-4-1e-1, run before the rank cap 1,280 (n / 8),
  counts including float64 finishes): every count within a factor 1.88 over
  and 2.13 under the estimate (the earlier ``3.7 kappa^0.09``, fitted at n 3,000-
  5,000 only, was 2-4 times under the counts at n 20,000): CG converges far faster
  than the ``sqrt(kappa)`` worst case on kernel spectra, fastest where the spectrum
  left after the sketch is flat, and slower as ``n`` grows at the same ``kappa``.
  Where float32 rounding of the held ``K`` may keep the residual above ``tol``, a
  share of the iterations (:func:`float64_share`) is counted at the price of float64
  products.

Below ``AUTO_MIN_SAMPLES`` = 3,000 rows the model is not consulted: at ``alpha = 1``
(11 and 13 iterations) PCG took 0.16 and 0.35 s at n 2,000 and 3,000 of Fashion-MNIST
against Cholesky's 0.18 and 0.34 s, while the probes cost 40-70 ms.

PCG is chosen only when predicted ``_PREFER_CHOLESKY`` = 1.2 times faster: Cholesky's
time is that of a few LAPACK calls, PCG's varies with the iteration count (the fit
above is within a factor 2.1) and with the machine's load. The sketch is not drawn at
all when Cholesky costs at most 1.2 times PCG's floor, what PCG cannot avoid: the
sketch to its first rank check (128 pivots: ``2 n r (d + r + 128)`` flops of kernel
columns and RPCholesky updates, at ``_SKETCH_COST`` = 2.5 times the ``dgemm`` time,
measured 2.2-3.2 on whole sketches) and ``2 ln(2 / tol)`` iterations (fewer than any
count measured) at that rank; nor where the most PCG could save, Cholesky's cost less
that floor, is below ``_PAYBACK`` = 10 times the first check's cost: a sketch then
costs more than PCG can be expected to win back (Fashion-MNIST, n 5,000, 784
features, on the 2-core EPYC: at most 0.19 s to save against a check of 0.03 s
predicted, 0.035-0.046 s measured, where PCG lost all eight cells of the grid, by
0.05-2.9 s; with 10 features the check costs a quarter of that and is drawn). At
``n`` 6,000 there the first check is drawn and read.
Drawn, it is abandoned as soon as PCG cannot win: at each rank check where the rank
would still grow, the smallest Nyström eigenvalue's decay over the last doubling is
extrapolated to the final rank (optimistically: rank-linear sketch cost, ``kappa``
at least 1 + 2 x 5, iterations divided by the fit's largest overestimate, 1.88) and
when even that PCG (sketch time so far included), 1.2 times, costs more than Cholesky,
Cholesky is chosen without finishing the sketch.

The two rates (``dgemm`` flops per second, seconds per float32 entry of a product with
``k`` columns) are measured once per process and BLAS thread count by short probes,
each the fastest of a few runs: a 256 x 256 ``dgemm`` on one thread after one untimed
call (a small product gains nothing from threads, so a threaded probe reads the
threads' overhead, not the factorization's rate: two threads read as slow as one; a
first call read 0.6 of the rate) and a float32 product of a
16 MB (``n`` below 4,096) or 32 MB matrix after one untimed run (the first call
starts the row-block pool's threads), the fastest of five: 40-70 ms together in a
new process (3.1-3.9e-10 s per entry over four runs on the 2-core EPYC, against
3.3e-10 in products with a 20,000^2 matrix; two timed runs read 3.7-6.0e-10; 2.1-2.4e-10
on another run of that machine). The product probe, most of that time, is run only
where the entry time decides: both rules that spare the sketch are linear in it, so
where one holds at both ends of its plausible range (``_ENTRY_RANGE``: 2e-10 s per
entry divided by the threads, a thread streaming 20 GB/s, to 4e-9 s, 1 GB/s), it
holds at the machine's own rate (Fashion-MNIST, 784 features, n 5,000: Cholesky
without either probe's 32 MB).
PCG is also watched while it runs: from ``_WATCH_FROM`` iterations on, the observed
residual decrease per step and time per step predict the time left; when that exceeds
``_BAIL_MARGIN`` times the cost of starting over with Cholesky (the measured time of
the kernel matrix plus the model's factorization) and the float64 matrix fits
``cache_size``, the fit switches to Cholesky (the result is then exactly
``solver="cholesky"``'s). The rate is not read while the residual is above half the
start and CG has spent less than a third of that restart cost: at small ``alpha`` a
strongly preconditioned CG sits near its start for 20 steps and more (0.82 of it for
25 steps at ``alpha = 1e-4``, n 3,000) and then converges fast; a rate read there
would switch every such fit.
"""

import math
import time
from functools import lru_cache

import numpy as np

from ..utils._threads import (blas_limit, blas_threads_for, map_row_blocks,
                              single_blas_thread)
from ._kernel_product import column_sq_norms
from ._pcg import _RANK0, _RANK_RATIO, nystrom_sketch

POTRF_EFFICIENCY = 0.95  # OpenBLAS dpotrf / one-thread dgemm rate per thread (n >= 5,000)
_THREAD_GAIN = 0.95      # potrf's speed-up per further thread (1.87-2.04x at n 5,000-20,000)
AUTO_MIN_SAMPLES = 3000  # below: the model cannot win back its own probes (see the notes)
_CHOL_PASSES = 4         # streaming passes over n^2 float64 of the Cholesky path
_F_ENTRIES = 8           # product entries per entry of F per iteration (its 2 passes, float64)
_ITER_OVERHEAD_S = 3e-3  # CG's bookkeeping, small products, dispatch (3-4 ms, n 5,000-20,000)
_SKETCH_COST = 2.5       # the sketch's seconds over its flops at the threaded dgemm rate (2.2-3.2)
# t = 2.53 kappa^0.17 (n / 5,000)^0.38 ln(2 / tol): see the module notes
_ITER_COEF, _ITER_EXP, _ITER_N_EXP, _ITER_N0 = 2.53, 0.17, 0.38, 5000
_MIN_ITER_COEF = 2.0     # the floor's fewest iterations, 2 ln(2 / tol): below every count seen
_FIT_SPREAD = 1.88       # the fit's largest overestimate: the sketch's optimistic forecast
_PREFER_CHOLESKY = 1.2   # PCG only when predicted this much faster (its time varies more)
_PAYBACK = 10.0          # the sketch only where PCG could save this many times its cost
# seconds per float32 product entry: a thread streams at most 20 GB/s (2e-10 s per entry,
# divided by the threads), a machine at least 1 GB/s (measured: 2.1-3.9e-10 on 2 cores)
_ENTRY_RANGE = (2e-10, 4e-9)
_FLOOR_DECADES = 2.0     # float32's bound this many decades above its start: float64 throughout
_SHARE_START = 20.0      # the bound over tol from which CG is predicted to finish in float64
_WATCH_FROM = 10         # CG steps before the observed rate is trusted
_BAIL_MARGIN = 1.5       # PCG's predicted remaining time over Cholesky's, to switch
_PLATEAU = 0.5           # above this relative residual the rate is not yet trusted ...


class SwitchToCholesky(Exception):
    """Raised by the PCG monitor of ``solver="auto"``: Cholesky will finish first."""


@lru_cache(maxsize=None)
def _dgemm_rate(limit):
    """dgemm flops per second under the BLAS thread count ``limit``: one core's rate on
    a 256 x 256 product (the fastest of five runs after an untimed one; a few ms),
    scaled to the threads. Measured once per process."""
    A = np.full((256, 256), 0.5)
    best = math.inf
    with single_blas_thread():  # one core's rate: a small dgemm gains nothing from threads
        A @ A  # a first call ran at 0.6 of the rate (the core's clock, OpenBLAS's setup)
        for _ in range(5):
            t0 = time.perf_counter()
            A @ A
            best = min(best, time.perf_counter() - t0)
    return 2 * 256**3 / max(best, 1e-9) * (1 + _THREAD_GAIN * (max(int(limit), 1) - 1))


@lru_cache(maxsize=None)
def _entry_seconds(limit, k, rows):
    """Seconds per float32 entry of a ``k``-column product streaming a ``rows x 2048``
    float32 matrix (16 MB below ``n`` = 4,096, the held ``K`` there, else 32 MB), on
    kernelkit's row-block pool as CG runs it: the fastest of five runs after an
    untimed one. Measured once per process (``limit`` keys the thread count)."""
    M = np.full((rows, 2048), 0.5, np.float32)
    V = np.ones((2048, max(1, k)), np.float32)
    out = np.empty((rows, V.shape[1]), np.float32)

    def job(r0, r1):
        out[r0:r1] = M[r0:r1] @ V

    best = math.inf
    with single_blas_thread():  # as CG runs its products (see _pcg._cg_threads)
        map_row_blocks(job, rows, 1024)  # untimed: the pool's threads may start here
        for _ in range(5):
            t0 = time.perf_counter()
            map_row_blocks(job, rows, 1024)
            best = min(best, time.perf_counter() - t0)
    return max(best, 1e-12) / M.size


def machine_rates(k, n=4096):
    """``(dgemm flops/s, seconds per float32 entry of a k-column product)`` for ``k``
    target columns and order ``n`` under the current BLAS thread count."""
    limit = blas_limit() or 1
    return (_dgemm_rate(limit),
            _entry_seconds(limit, min(int(k), 64), 2048 if n < 4096 else 4096))


def entry_bounds():
    """The dgemm rate with the fastest and the slowest plausible entry times
    (``_ENTRY_RANGE``, the fastest per thread): two ``rates`` between which the measured
    one lies, for a decision that needs no product probe."""
    limit = blas_limit() or 1
    gemm = _dgemm_rate(limit)
    return (gemm, _ENTRY_RANGE[0] / limit), (gemm, _ENTRY_RANGE[1])


def cholesky_seconds(n, n_alphas=1, rates=None):
    """Predicted seconds of the Cholesky solve of an ``n x n`` system (kernel excluded)."""
    gemm, entry = rates
    t = n**3 / 3 / (POTRF_EFFICIENCY * gemm) + _CHOL_PASSES * 2 * n * n * entry
    return t * (10 if n_alphas > 1 else 1)


def iteration_seconds(n, rank, itemsize=4, rates=None):
    """Predicted seconds of one PCG iteration with ``K`` held (``itemsize`` 4 or 8): the
    product, the preconditioner's two float64 passes over ``F`` (``_F_ENTRIES`` product
    entries per entry of ``F``: skinny float64 products run at a quarter of a float32
    product's rate per byte), CG's own work."""
    _, entry = rates
    return (n * n * itemsize / 4 + _F_ENTRIES * n * rank) * entry + _ITER_OVERHEAD_S


def sketch_seconds(n, rank, d, rates):
    """Predicted seconds of the Nyström sketch up to ``rank``: kernel columns from ``d``
    features (``d = 0`` for a held or given ``K``) and block RPCholesky's updates,
    ``2 n r (d + r + 128)`` flops, at ``_SKETCH_COST`` times the dgemm time."""
    gemm, _ = rates
    return _SKETCH_COST * 2.0 * n * rank * (d + rank + 128) / gemm


def pcg_floor_seconds(n, d, itemsize, tol, rates):
    """What PCG cannot avoid: its sketch to the first rank check and the fewest
    iterations (:func:`min_iterations`) at that rank."""
    r = min(_RANK0, n)
    return (sketch_seconds(n, r, d, rates)
            + min_iterations(tol) * iteration_seconds(n, r, itemsize, rates))


def estimated_iterations(lam_min, mu, tol, n):
    """PCG iterations of an order-``n`` system from the sketch's smallest Nyström
    eigenvalue (see module notes)."""
    kappa = 1.0 + 2.0 * max(float(lam_min), 0.0) / float(mu)
    return (_ITER_COEF * kappa**_ITER_EXP * (n / _ITER_N0)**_ITER_N_EXP
            * math.log(2.0 / tol))


def float64_share(product, mu, tol):
    """The predicted share of CG's work done with float64 products (twice a float32
    product's cost), from ``0`` to ``1``: where float32 rounding of a held ``K`` keeps the
    residual above ``tol``, CG finishes on float64 products (see
    :meth:`~kernelkit.ridge._kernel_product.KernelProduct.storage_error`). Its bound, ``eps32
    max_j ||K_:j|| ||c|| / ||y||`` with ``||c|| <= ||y|| / mu``, over ``tol``: a share of
    ``log10(bound / (20 tol)) / 2``. The rounding CG stops on is measured, 5-16 times
    below ``eps32 max_j ||K_:j|| ||c||`` on Fashion-MNIST; there, n 20,000: bound 7.7
    and 16 tol, no float64 products; 77 tol, a float64 finish of 41 of 169 iterations
    (and a second kernel evaluation, the float64 ``K``). The column norms are those of
    64 evenly spaced columns (no random draw: the sketch's pivots stay those of
    ``solver="pcg"``)."""
    if product.dtype != np.float32 or product.op is None:
        return 0.0
    S = np.unique(np.linspace(0, product.n - 1, min(64, product.n)).astype(np.intp))
    colnorm = float(np.sqrt(column_sq_norms(product.columns(S)).max(initial=0.0)))
    bound = np.finfo(np.float32).eps * colnorm / mu
    if not bound > _SHARE_START * tol:
        return 0.0
    return min(1.0, math.log10(bound / (_SHARE_START * tol)) / _FLOOR_DECADES)


def min_iterations(tol):
    """The floor's fewest iterations, ``2 ln(2 / tol)`` (about 20 at ``tol = 1e-4``, under
    every count measured, 29 at the least): below this Cholesky is certain."""
    return _MIN_ITER_COEF * math.log(2.0 / tol)


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
    """

    def __init__(self, tol, restart_s):
        self.tol, self.restart_s = tol, restart_s
        self.t0, self.best = None, [1.0]

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
        h = max(_WATCH_FROM // 2, it // 4)
        cur, old = self.best[it], self.best[it - h]
        rate = math.log(max(cur, 1e-300) / max(old, 1e-300)) / h
        per_step = (now - self.t0) / max(it - 1, 1)
        left = math.inf if rate >= 0 else math.log(self.tol / cur) / rate
        if left * per_step > _BAIL_MARGIN * restart:
            raise SwitchToCholesky(it)


class _Abandon:
    """``stop(rank, lam_min, max_rank)`` of the sketch under ``"auto"``: True once even
    an optimistic PCG (see the module notes) would cost more than Cholesky's ``chol``
    seconds.

    ``share()`` gives the float64 share (:func:`float64_share`, computed on first use):
    a forecast without it is a lower bound, so it is read only when that bound alone
    does not settle the check (a sketch abandoned at its first check never reads the
    64 columns it needs).
    """

    def __init__(self, n, mu, tol, chol, rates, share=lambda: 0.0):
        self.n, self.mu, self.tol = n, mu, tol
        self.chol, self.rates, self.share = chol, rates, share
        self.t0, self.last = time.perf_counter(), None

    def forecast(self, k, lam, max_rank, share=0.0):
        """Optimistic PCG seconds from the sketch at rank ``k`` (smallest eigenvalue ``lam``)."""
        spent = time.perf_counter() - self.t0
        p = 1.0  # decay exponent of lam_min in the rank; one check: assume 1/k
        if self.last is not None and self.last[1] > lam > 0:
            p = math.log(self.last[1] / lam) / math.log(k / self.last[0])
        target = _RANK_RATIO * self.mu  # the sketch's rank rule
        r = max_rank
        if lam > 0 and p > 0:  # where the rank rule would stop, at the latest the cap
            r = min(r, max(k, k * (lam / target) ** (1.0 / p)))
        lam_r = max(lam * (k / r) ** p if lam > 0 else 0.0, 0.5 * target)
        t = estimated_iterations(lam_r, self.mu, self.tol, self.n) / _FIT_SPREAD
        return (spent * r / k
                + t * (1 + share) * iteration_seconds(self.n, r, 4, self.rates))

    def __call__(self, k, lam, max_rank):
        stop = _PREFER_CHOLESKY * self.forecast(k, lam, max_rank) > self.chol
        if not stop:
            t0 = time.perf_counter()
            share = self.share()
            self.t0 += time.perf_counter() - t0  # the share's columns are not the sketch's
            stop = _PREFER_CHOLESKY * self.forecast(k, lam, max_rank, share) > self.chol
        self.last = (k, lam)
        return stop


def choose(product, alpha, tol, n_targets, rng, progress, fits):
    """``solver="auto"`` for this fit: ``(solver, sketch, monitor)``.

    ``fits``: whether Cholesky's float64 ``K`` fits ``cache_size``.
    The sketch (PCG's own first step, :func:`~kernelkit.ridge._pcg.nystrom_sketch`) is
    drawn only when the cost floor leaves the choice open, abandoned once PCG cannot
    win, and handed on when PCG is chosen, with the :class:`Watch` that may still
    switch to Cholesky.
    """
    n = product.n
    a = np.atleast_1d(alpha)
    if not fits:
        progress("solver auto", level=1, choice="pcg", reason="the float64 n x n matrix of "
                 "Cholesky exceeds cache_size")
        return "pcg", None, None
    itemsize = product.dtype.itemsize
    d = 0 if product.K is not None or product.X is None else product.X.shape[1]
    n_alphas = np.unique(a).size

    def no_sketch(rates):  # (PCG cannot win clearly, nor repay its sketch), costs
        chol = cholesky_seconds(n, n_alphas, rates)
        floor = pcg_floor_seconds(n, d, itemsize, tol, rates)
        check = sketch_seconds(n, min(_RANK0, n), d, rates)
        return ((chol <= _PREFER_CHOLESKY * floor, chol - floor < _PAYBACK * check),
                dict(cholesky_s=chol, pcg_min_s=floor, sketch_s=check))

    with blas_threads_for(n):  # the rates of the thread count the solvers run with
        # both rules are linear in the entry time: where one holds at both ends of its
        # plausible range, it holds at the measured one, which is then not probed
        # (its 32 MB: 30-70 ms in a new process, as much as the sketch it would spare)
        (lo, costs), (hi, _) = (no_sketch(r) for r in entry_bounds())
        probed = not (lo[0] and hi[0] or lo[1] and hi[1])
        if probed:
            rates = machine_rates(n_targets, n)
            lo, costs = no_sketch(rates)
    chol = costs["cholesky_s"]
    if lo[0] or lo[1]:  # PCG cannot win clearly, or not by enough to pay for the sketch
        progress("solver auto", level=1, **costs, memory_probed=probed, choice="cholesky")
        return "cholesky", None, None
    mu = float(a.min())
    share = lru_cache(maxsize=None)(lambda: float64_share(product, mu, tol))
    abandon = _Abandon(n, mu, tol, chol, rates, share)
    try:  # the sketch's prepared columns serve the share's too
        sketch = nystrom_sketch(product, alpha, rng, progress, stop=abandon, keep=True)
        info = sketch[2]
        share = 0.0 if info.get("stopped") else share()
    finally:
        product.drop_columns()
    if info.get("stopped"):
        progress("solver auto", level=1, cholesky_s=chol, rank=info["rank"],
                 choice="cholesky", reason="the sketch says PCG cannot win")
        return "cholesky", None, None
    t = estimated_iterations(info["lam_min"], mu, tol, n)
    pcg = t * (1 + share) * iteration_seconds(n, info["rank"], itemsize, rates)
    choice = "pcg" if _PREFER_CHOLESKY * pcg < chol else "cholesky"
    progress("solver auto", level=1, cholesky_s=chol, pcg_s=pcg, iterations=t,
             float64_share=share, rank=info["rank"], choice=choice)
    if choice == "cholesky":
        return choice, None, None
    return choice, sketch, Watch(tol, lambda: product.build_s + chol)


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
