"""BLAS thread control shared by the engines and the dense solvers."""

import threading
from contextlib import contextmanager, nullcontext
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


def blas_threads_for(n):
    """Context choosing BLAS threads for work of size ``n`` (a matrix order).

    One thread (:func:`single_blas_thread`) when ``n < SMALL_PROBLEM``; otherwise the
    BLAS default is left unchanged.
    """
    return single_blas_thread() if n < SMALL_PROBLEM else nullcontext()
