"""BLAS thread control shared by the engines and the dense solvers."""

from contextlib import contextmanager
from functools import lru_cache


@lru_cache(maxsize=1)
def _controller():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()  # inspecting the loaded libraries costs ms: do it once


@contextmanager
def single_blas_thread():
    """Run the block with BLAS limited to one thread.

    Used where kernelkit parallelises itself, and for small dense solves where two
    OpenBLAS threads gain little and stall badly whenever a core is busy.
    """
    with _controller().limit(limits=1, user_api="blas"):
        yield
