"""Cholesky factorizations and rank-k updates that stay clear of a crash in OpenBLAS.

The OpenBLAS builds in numpy's and scipy's wheels (0.3.30 and 0.3.31) crash with a
segmentation fault in multithreaded float64 ``DSYRK`` with their SkylakeX-class kernels
once the result has about 16,000 rows (measured on a 2-core Xeon: ``A @ A.T`` for
``A`` of shape 16,000 x 784; ``dpotrf`` of a 16,000 x 16,000 matrix, which calls DSYRK
on its trailing blocks). With one thread, or at 15,000 rows, the same calls run.
Where such a library is loaded, factorizations and updates larger than
:data:`SAFE_N` are done here in blocks of :data:`BLOCK` rows: LAPACK ``potrf`` on the
diagonal blocks, triangular solves for the panels, small DSYRK calls on the diagonal
blocks and GEMM below them. The flops are the same, the same triangle is written and
the other one is left as it was (as LAPACK's ``potrf`` with ``clean=0``).
"""

from contextlib import contextmanager
from functools import lru_cache

import numpy as np
from scipy.linalg import blas, lapack

BLOCK = 4096      # rows of a diagonal block (DSYRK / potrf sizes that ran at every shape tried)
SAFE_N = 12_000   # at most this many rows: LAPACK / BLAS directly
_CORES = ("skylakex", "cooperlake", "sapphirerapids")  # OpenBLAS's AVX-512 kernels


@lru_cache(maxsize=None)
def dsyrk_unsafe():
    """Whether an OpenBLAS with AVX-512 (SkylakeX-class) kernels is loaded."""
    from threadpoolctl import threadpool_info

    return any(i.get("internal_api") == "openblas"
               and str(i.get("architecture") or "").lower() in _CORES
               for i in threadpool_info())


def _blocked(n, dtype):
    return dtype == np.float64 and n > SAFE_N and dsyrk_unsafe()


@contextmanager
def dsyrk_guard(n, dtype):
    """One BLAS thread for a LAPACK call that runs DSYRK on ``n`` rows (``lauum``)
    where that could crash; a no-op elsewhere."""
    if not _blocked(n, np.dtype(dtype)):
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"):
        yield


def potrf(A, lower=False, clean=False):
    """LAPACK ``potrf`` in place on the square, contiguous ``A``: the Cholesky factor of
    the symmetric matrix whose ``lower`` (else upper) triangle ``A`` holds, written
    into that triangle (``A = L L^T`` / ``U^T U``); the other triangle is not touched,
    or zeroed with ``clean``. Returns LAPACK's ``info`` (0: done; ``k > 0``: the
    leading minor of order ``k`` is not positive definite)."""
    if not A.flags.f_contiguous:  # a C-ordered buffer is the Fortran transpose
        return potrf(A.T, not lower, clean)
    if not _blocked(A.shape[0], A.dtype):
        f = lapack.get_lapack_funcs("potrf", (A,))
        return int(f(A, lower=int(lower), clean=int(clean), overwrite_a=1)[1])
    L = A if lower else A.T
    info = _blocked_lower(L)
    if clean and info == 0:
        for j0 in range(0, L.shape[0], BLOCK):  # the strict upper triangle of L, by rows
            L[j0:j0 + BLOCK] = np.tril(L[j0:j0 + BLOCK], j0)
    return info


def _blocked_lower(L):
    """Right-looking blocked Cholesky of the lower triangle of ``L`` (any order), in place."""
    n = L.shape[0]
    for k0 in range(0, n, BLOCK):
        k1 = min(n, k0 + BLOCK)
        D, info = lapack.dpotrf(np.asfortranarray(L[k0:k1, k0:k1]), lower=1, clean=0,
                                overwrite_a=1)
        if info:
            return k0 + int(info) if info > 0 else int(info)
        L[k0:k1, k0:k1] = D  # its upper triangle is the untouched input
        if k1 == n:
            break
        # the panel: P L11^T = A21
        P = blas.dtrsm(1.0, D, np.asfortranarray(L[k1:, k0:k1]), side=1, lower=1, trans_a=1)
        L[k1:, k0:k1] = P
        lower_update(L[k1:, k1:], P)
    return 0


def lower_update(C, P, alpha=-1.0):
    """``tril(C) += alpha tril(P P^T)`` in place, the strict upper triangle of ``C`` not
    touched: DSYRK on diagonal blocks of :data:`BLOCK` rows, GEMM below them."""
    n = C.shape[0]
    for j0 in range(0, n, BLOCK):
        j1 = min(n, j0 + BLOCK)
        Pj = P[j0:j1]
        C[j0:j1, j0:j1] = blas.dsyrk(alpha, Pj, beta=1.0,
                                     c=np.asfortranarray(C[j0:j1, j0:j1]), lower=1)
        for r0 in range(j1, n, BLOCK):  # GEMM in row blocks: bounded temporaries
            r1 = min(n, r0 + BLOCK)
            C[r0:r1, j0:j1] += alpha * (P[r0:r1] @ Pj.T)


def syrk_upper(G, Z):
    """``triu(G) += triu(Z^T Z)`` in place (``G`` float64, Fortran or C order)."""
    if not _blocked(G.shape[0], G.dtype):
        if G.flags.f_contiguous:
            blas.dsyrk(1.0, Z.T, beta=1.0, c=G, trans=0, lower=0, overwrite_c=1)
        else:  # the C-ordered G is the Fortran transpose: its lower triangle is G's upper
            blas.dsyrk(1.0, Z.T, beta=1.0, c=G.T, trans=0, lower=1, overwrite_c=1)
        return
    lower_update(G.T, Z.T, alpha=1.0)
