"""BLAS thread control shared by the engines and the dense solvers."""

import os
import threading
from contextlib import contextmanager
from functools import lru_cache

_lock = threading.Lock()
_state = {"depth": 0, "limiter": None}


@lru_cache(maxsize=1)
def _controller():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()  # inspecting the loaded libraries costs ms: do it once


@contextmanager
def single_blas_thread():
    """Run the block with BLAS limited to one thread.

    Used where kernelkit parallelises itself, and for small dense solves where two
    OpenBLAS threads gain little and stall badly whenever a core is busy. The limit is
    process-wide (as BLAS's own setting is), so concurrent callers share one limit:
    the first to enter sets it and the last to leave restores the original.
    """
    with _lock:
        if _state["depth"] == 0:
            _state["limiter"] = _controller().limit(limits=1, user_api="blas")
        _state["depth"] += 1
    try:
        yield
    finally:
        with _lock:
            _state["depth"] -= 1
            if _state["depth"] == 0:
                _state["limiter"].restore_original_limits()
                _state["limiter"] = None


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
    pool was alive, and gains nothing past a few threads on these sizes. Inside a
    :func:`single_blas_thread` block (kernelkit's workers running) the single-thread
    limit stays in force.
    """
    if n < SMALL_PROBLEM:
        with single_blas_thread():
            yield
        return
    with _lock:
        nested = _state["depth"] > 0
    if nested:
        yield
        return
    limit = max(1, min(_MAX_THREADS, os.cpu_count() or 1))
    limiter = _controller().limit(limits=limit, user_api="blas")
    try:
        yield
    finally:
        limiter.restore_original_limits()


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
    with single_blas_thread():
        for f in [_POOL["pool"].submit(job, r0, min(n, r0 + rows)) for r0 in starts]:
            f.result()
