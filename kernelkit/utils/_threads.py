"""BLAS thread control shared by the engines and the dense solvers."""

import os
import sys
import threading
from contextlib import contextmanager


def _controller():
    """threadpoolctl's view of the loaded BLAS libraries, re-read when modules were imported
    since the last look (a package imported later may bring its own BLAS, which a stale
    view would leave at its own thread count); inspecting them costs milliseconds."""
    key = len(sys.modules)
    if _CONTROLLER.get("key") != key:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER.update(key=key, controller=ThreadpoolController())
    return _CONTROLLER["controller"]


_CONTROLLER = {}


# BLAS's thread count is one process-wide setting, so concurrent callers (two fits in
# threads) cannot each have their own. It is therefore owned: a thread's outermost region
# sets it and holds a share. A single-thread region joins whatever region is in force and
# never waits (a fit's own joblib or Dask threads run inside their caller's region, and a
# waiting worker would deadlock the caller that waits for it); it then runs under that
# region's count. A multi-thread region (a large factorization using every core, a fit's
# outer region) waits until no region is held, so that its BLAS calls run under the count
# it asked for (OpenBLAS's LAPACK blocks differently per thread count) without
# oversubscribing the cores; after ``_WIDE_WAIT`` seconds it joins the region in force
# instead, so no wait is unbounded. The setting in force before the first region is
# restored when the last share is released.
_cond = threading.Condition()
_state = {"limit": None, "holders": 0, "limiter": None, "outside": 1}
_local = threading.local()  # .limit: the region this thread runs under (None: none)
_WIDE_WAIT = 1.0


def _acquire(limit):
    with _cond:
        if limit > 1:
            _cond.wait_for(lambda: _state["holders"] == 0, timeout=_WIDE_WAIT)
        if _state["holders"] == 0:
            _state["outside"] = _blas_count()
            _state["limiter"] = _controller().limit(limits=limit, user_api="blas")
            _state["limit"] = limit
        _state["holders"] += 1


def _release():
    with _cond:
        _state["holders"] -= 1
        if _state["holders"] == 0:
            _state["limiter"].restore_original_limits()
            _state["limiter"] = _state["limit"] = None
        _cond.notify_all()


@contextmanager
def _blas_region(limit):
    """Run the block with BLAS on ``limit`` threads, owned as described above.

    Nested in this thread's own region: a limit at least the outer one's keeps the
    outer one (kernelkit's workers may be running on one thread each); a lower one
    hands the outer share back, takes its own and takes the outer one again after
    (never waiting while holding a share, so no two threads can wait on each other).
    """
    outer = getattr(_local, "limit", None)
    if outer is not None and outer <= limit:
        yield
        return
    if outer is not None:
        _release()
    _acquire(limit)
    _local.limit = limit
    try:
        yield
    finally:
        _release()
        _local.limit = outer
        if outer is not None:
            _acquire(outer)


def _outside_limit():
    """The BLAS thread count in force outside kernelkit's regions."""
    with _cond:
        if _state["holders"]:
            return _state["outside"]
        return _blas_count()


def _blas_count():
    counts = [lib.num_threads for lib in _controller().lib_controllers if lib.user_api == "blas"]
    return max(counts, default=1)


@contextmanager
def owned_blas():
    """A top-level call's region (every ``fit`` through :func:`~kernelkit.utils._state.atomic`).

    Its BLAS calls outside any narrower region run under the count in force outside
    kernelkit, owned like any region: a concurrent caller's single-thread region cannot
    lower it under this call's feet (which changed FALKON's predictions by ~1e-8).
    Nested (a fit inside a fit, or inside another region) it changes nothing.
    """
    if blas_limit() is not None:
        yield
        return
    with _blas_region(_outside_limit()):
        yield


def blas_limit():
    """The BLAS thread count this thread's kernelkit region runs under (None outside one)."""
    return getattr(_local, "limit", None)


@contextmanager
def single_blas_thread():
    """Run the block with BLAS limited to one thread.

    Used where kernelkit parallelises itself, and for small dense solves where two
    OpenBLAS threads gain little and stall badly whenever a core is busy. It joins a
    region already held by another thread without waiting (and then runs under that
    region's count); a region asking for more threads (:func:`blas_threads_for`) waits
    for it.
    """
    with _blas_region(1):
        yield


# Below this order a dense eigen/solve/product runs on one BLAS thread: a second
# OpenBLAS thread gains little there and stalls badly whenever a core is busy (a
# 1,797 x 1,797 eigh: 0.44 s on one thread, 17 s on two with another process busy).
SMALL_PROBLEM = 2500
_MAX_THREADS = 8  # large factorizations: bounded, so that no BLAS build can oversubscribe


@contextmanager
def blas_threads_for(n):
    """BLAS threads fitted to work of size ``n`` (a matrix order): the one thread-count rule.

    One thread (:func:`single_blas_thread`) when ``n < SMALL_PROBLEM``; else at most
    ``min(cores, 8)``: OpenBLAS with one thread per core of a large machine and a
    large matrix has crashed (memory regions exhausted) when kernelkit's own worker
    pool was alive, and gains nothing past a few threads on these sizes. Inside this
    thread's :func:`single_blas_thread` block (kernelkit's workers running) the
    single-thread limit stays in force. A multi-thread region waits (boundedly) for the
    regions of other threads to end, so that it runs under its own count.
    """
    limit = 1 if n < SMALL_PROBLEM else max(1, min(_MAX_THREADS, n_workers()))
    with _blas_region(limit):
        yield


_POOL = {}
_POOL_NAME = "kernelkit"
# a forked child inherits the pool object but not its threads: start a new one there
os.register_at_fork(after_in_child=_POOL.clear)


def n_workers():
    """Cores this process may run on: the size of kernelkit's row-block pool."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def map_row_blocks(job, n, rows):
    """``job(r0, r1)`` over row blocks of ``0:n``, on kernelkit's one thread pool (the
    engines' fused kernel passes and the held-matrix products of PCG and FALKON), BLAS
    on one thread each.

    For memory-bound products of a held matrix with a few columns: OpenBLAS's own
    threading packs the whole matrix per call, while independent row panels on one
    BLAS thread each stream it once (measured 1.2x faster on 2 cores, 20,000^2 float32
    times 10 columns). Runs inline when there is one block or one core.
    """
    starts = list(range(0, n, max(1, int(rows))))
    # inline: one block, one core, or called from a pool worker (waiting there on the
    # pool's own futures could deadlock)
    if (len(starts) <= 1 or n_workers() == 1
            or threading.current_thread().name.startswith(_POOL_NAME)):
        for r0 in starts:
            job(r0, min(n, r0 + rows))
        return
    if "pool" not in _POOL:
        from concurrent.futures import ThreadPoolExecutor

        _POOL["pool"] = ThreadPoolExecutor(n_workers(), thread_name_prefix=_POOL_NAME)

    def run(r0, r1):  # a worker runs under its submitter's single-thread region
        _local.limit = 1
        try:
            job(r0, r1)
        finally:
            _local.limit = None

    with single_blas_thread():
        for f in [_POOL["pool"].submit(run, r0, min(n, r0 + rows)) for r0 in starts]:
            f.result()
