"""FALKON: Nyström kernel ridge solved by preconditioned conjugate gradients.

Rudi, Carratino & Rosasco, "FALKON: An Optimal Large Scale Kernel Method", NeurIPS
2017 (Algorithm 1 and Section 3); Meanti, Carratino, Rosasco & Rudi, "Kernel Methods
Through the Roof: Handling Billions of Points Efficiently", NeurIPS 2020 (the
out-of-core products). Leverage-score centers as in FALKON-BLESS (Rudi, Calandriello,
Carratino & Rosasco, "On Fast Leverage Score Sampling and Optimal Learning",
NeurIPS 2018), drawn here by kernelkit's SQUEAK-based :class:`~kernelkit.RLSNystroem`.

Memory: ``K_nM`` (held in float32 from ``tol >= 1e-6``) and ONE ``M x M`` array
holding both triangular factors ``T`` and ``A`` (as FALKON's own implementation);
``K_MM`` is never held (``K_MM = T^T T - eps I``). Precision: from ``tol >= 1e-6`` the
CG runs on float32 products (float32 factors too from 8192 centers), and float64
residuals refine its result until the float64 stopping rule holds (mixed-precision
iterative refinement), so the solution is that of the float64 solve of the held
system.
"""

import functools
import time
import warnings
from numbers import Integral, Real

import numpy as np
from scipy.linalg import blas, lapack
from sklearn.base import BaseEstimator, MultiOutputMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from ..backend import resolve_backend
from ..kernels import resolve_kernel
from ..utils._threads import blas_threads_for, map_row_blocks, single_blas_thread
from ..utils._verbose import Progress, check_verbose
from ._kernel_ridge import _check_alpha, _ClassifierMixin
from ._pcg import DEFAULT_MAX_ITER, conjugate_gradient, product_dtype

CENTERS = ("uniform", "rls", "thinning")
_JITTER64 = 1e-12  # relative jitter floor per center of the float64 Cholesky of K_MM
_MAX_REFINE = 8  # float32 rounds of a mixed-precision solve (each gains ~1/delta)
_F32_PRECOND_MIN = 8192  # from this many centers a mixed solve holds T and A in float32
# a mixed (float32 K_nM) solve whose predictions the rounding of K_nM may move by more than
# this (relative) is redone in float64: the float32 path promises the float64 solve to 1e-4
_MIXED_MAX_ERROR = 1e-4
_F32_BLOCK_BYTES = 4 * 2**20  # a row block of K_nM reused from cache by its 2nd GEMM
_ROW_CHUNK = 2048  # rows of K_nM per task of the product pool


def _auto_centers(n):
    """FALKON's statistical rate needs ``M ~ sqrt(n) log n`` centers (Theorem 3)."""
    return int(min(n, max(100, round(np.sqrt(n) * np.log(n)))))


class _NystromNormalOperator:
    """``v -> K_nM^T (K_nM v)``: ``K_nM`` held when it fits, else blockwise (one pass).

    Meanti et al. (2020) keep ``K_nM`` out of memory by computing it in row blocks on
    every product; one block serves both ``K_nM v`` and its transpose product.
    """

    def __init__(self, op, X, C, dtype, cache_size, client=None):
        self.op, self.X, self.C = op, X, C
        n, m = X.shape[0], C.shape[0]
        self.dtype = np.dtype(dtype)
        self.dask = self.handle = None
        if client is not None:
            # the data rows live on the workers, each keeping its block k(C, X_chunk):
            # a CG step sends V and gets back M x k (Meanti et al. 2020's out-of-core
            # products, here across machines)
            from ..distributed import DaskKernelOperator

            self.dask = DaskKernelOperator(client, op, X, np.float64)
            self.handle = self.dask.prepare(C)
        self.stored = client is None and n * m * self.dtype.itemsize <= cache_size * 2**20
        self.KnM = None
        if self.stored:
            self.KnM = np.asarray(op.engine.to_host(
                op.block(X.astype(self.dtype, copy=False), C.astype(self.dtype, copy=False))))

    def rows_per_block(self):
        from .._config import get_config

        budget = get_config()["working_memory"] * 2**20
        return max(1, int(budget // (8 * max(1, self.C.shape[0]))))

    def _blocks(self):
        """Float64 row blocks ``(r0, r1, K_nM[r0:r1])``, from the held matrix or recomputed.

        A held float32 ``K_nM`` is upcast block by block: float32 *storage* perturbs the
        system once, but float32 *products* add rounding noise on every step, which
        ``T^-1`` amplifies (alone they leave 6e-3 relative error in the predictions of
        tests/test_ridge_solvers.py's float32 case): the float32 rounds of the mixed
        solve are refined with these float64 products (5e-6 there, as float64 CG).
        """
        if self.stored and self.KnM.dtype != np.float64:
            # cache-sized blocks: each upcast block is reused from cache by its GEMMs
            step = max(16, int(_F32_BLOCK_BYTES // (8 * max(1, self.C.shape[0]))))
        else:
            step = self.rows_per_block()
        for r0 in range(0, self.X.shape[0], step):
            r1 = min(self.X.shape[0], r0 + step)
            if self.stored:
                yield r0, r1, self.KnM[r0:r1].astype(np.float64, copy=False)
            else:
                yield r0, r1, self.op.block_host(self.X[r0:r1], self.C)

    def kmm(self, U, idx):
        """``K_MM @ U`` (float64): from the held rows ``K_nM[idx]`` when the centers are
        training rows ``idx`` (the same float32 values as ``K_nM``), else recomputed."""
        if not self.stored or idx is None:
            return np.asarray(self.op.engine.to_host(self.op.matmul(self.C, self.C, U)),
                              np.float64)
        out = np.empty((len(idx),) + U.shape[1:])
        step = max(16, int(_F32_BLOCK_BYTES // (8 * max(1, self.C.shape[0]))))
        for r0 in range(0, len(idx), step):
            out[r0:r0 + step] = self.KnM[idx[r0:r0 + step]].astype(np.float64) @ U
        return out

    def gram(self, idx):
        """``K_MM`` in float32, Fortran order, for the mixed-precision preconditioner."""
        if self.stored and idx is not None:
            return self.KnM[idx].T  # k(c_j, c_i) as held in K_nM: a fresh C-order gather
        K = np.asarray(self.op.engine.to_host(self.op.block(self.C.astype(np.float32))))
        return np.array(K, np.float32, order="F")

    def close(self):
        """Free the blocks held on the Dask workers."""
        if self.dask is not None:
            self.dask.release(self.handle)
            self.dask.close()
            self.dask = None

    def knm(self, V):
        """``K_nM @ V`` (float64)."""
        if self.dask is not None:
            return self.dask.rmatmul(self.handle, V).astype(np.float64)
        if not self.stored:
            return np.asarray(self.op.engine.to_host(self.op.matmul(self.X, self.C, V)),
                              np.float64)
        out = np.empty((self.X.shape[0],) + V.shape[1:])
        for r0, r1, Kb in self._blocks():
            out[r0:r1] = Kb @ V
        return out

    def kmn(self, U):
        """``K_nM^T @ U`` (float64)."""
        if self.dask is not None:
            return self.dask.matmul(self.handle, U).astype(np.float64)
        if self.stored:
            return self._held_sum(lambda Kb, r0, r1: Kb.astype(np.float64).T @ U[r0:r1],
                                  np.float64)
        out = np.zeros((self.C.shape[0],) + U.shape[1:])
        for r0, r1, Kb in self._blocks():
            out += Kb.T @ U[r0:r1]
        return out

    def _held_sum(self, job, dtype):
        """``sum_b job(K_b, r0, r1)`` over cache-sized row blocks ``K_b`` of the held
        ``K_nM``, accumulated in float64; row chunks run on kernelkit's row-block pool
        (:func:`~kernelkit.utils._threads.map_row_blocks`: one BLAS thread each;
        memory-bound GEMMs, measured 1.9x over one thread on 2 cores, where two
        OpenBLAS threads stall whenever a core is busy)."""
        K = self.KnM
        n, m = K.shape
        step = max(16, int(_F32_BLOCK_BYTES // (np.dtype(dtype).itemsize * max(1, m))))
        chunk = step * max(1, _ROW_CHUNK // step)
        parts = [None] * len(range(0, n, chunk))

        def run(a, b):
            out = None
            for r0 in range(a, b, step):
                part = job(K[r0:min(b, r0 + step)], r0, min(b, r0 + step))
                if out is None:
                    out = part.astype(np.float64)
                else:
                    out += part
            parts[a // chunk] = out

        map_row_blocks(run, n, chunk)
        total = parts[0]
        for part in parts[1:]:
            total += part
        return total

    def rounding_error(self, coef):
        """Estimated relative change of the fitted values ``K_nM b`` (per column of
        ``coef``) from the float32 rounding of the held ``K_nM``.

        Rounding errors are independent, uniform within ``eps |K_ij| / 2`` each, so
        ``||dK b|| ~ eps / sqrt(12) ||b|| max_j ||K_:j||`` at most; twice that is
        returned.
        """
        B = coef.reshape(coef.shape[0], -1)
        sq = self._held_sum(lambda Kb, r0, r1: np.einsum("ij,ij->j", Kb, Kb,
                                                           dtype=np.float64), np.float64)
        fitted = np.linalg.norm(self.knm(B), axis=0)
        est = (float(np.finfo(self.KnM.dtype).eps) / np.sqrt(3.0) * np.sqrt(sq.max())
               * np.linalg.norm(B, axis=0))
        return est / np.maximum(fitted, np.finfo(np.float64).tiny)

    @property
    def mixed(self):
        """Whether :meth:`__call__` uses float32 products (refined by :meth:`exact`)."""
        return self.stored and self.dtype == np.float32

    def __call__(self, V):
        """``K_nM^T K_nM V``: one pass over the row blocks (float32 products when mixed)."""
        if self.mixed:
            return self._normal32(V)
        return self.exact(V)

    def exact(self, V):
        """``K_nM^T K_nM V`` in float64 arithmetic (a held float32 ``K_nM`` upcast per block)."""
        if self.dask is not None:
            return self.kmn(self.knm(V))
        if self.stored:
            def job(Kb, r0, r1):
                Kb = Kb.astype(np.float64, copy=False)
                return Kb.T @ (Kb @ V)

            return self._held_sum(job, np.float64)
        out = np.zeros_like(V)
        for _, _, Kb in self._blocks():
            out += Kb.T @ (Kb @ V)
        return out

    def _normal32(self, V):
        """``K_nM^T K_nM V`` from the held float32 ``K_nM`` without upcasting it.

        Float32 GEMMs on row blocks small enough to stay in cache between their two
        products (``K_b V`` then ``K_b^T (K_b V)``), accumulated across blocks in
        float64: a third of the memory traffic of upcasting each block.
        """
        m = self.KnM.shape[1]
        V2 = V.reshape(m, -1)
        k = V2.shape[1]
        # V = hi + lo, both float32: K_b V without rounding V (its entries, scaled by
        # T^-1, cancel in the sum); memory-bound, so the k extra columns are nearly free
        S = np.empty((m, 2 * k), np.float32)
        S[:, :k] = V2
        S[:, k:] = V2 - S[:, :k]

        def job(Kb, r0, r1):
            t = Kb @ S
            t[:, :k] += t[:, k:]
            return Kb.T @ t[:, :k]

        return self._held_sum(job, np.float32).reshape(V.shape)


def _mirror_upper(F, lo, d=None, bs=512):
    """Copy the strict upper triangle of ``F`` onto its strict lower one, in place.

    ``lo=True``: lower <- upper^T, each row ``i`` of the new lower triangle times
    ``d[i]`` (``d`` None: 1); ``lo=False``: upper <- lower^T (a symmetric matrix
    restored from the triangle that ``potrf`` did not touch). Blocks of ``bs`` columns:
    no ``M x M`` temporary.
    """
    m = F.shape[0]
    iu = np.triu_indices(min(bs, m), 1)
    for r0 in range(0, m, bs):
        r1 = min(m, r0 + bs)
        k = r1 - r0
        D = F[r0:r1, r0:r1]
        ii, jj = (iu if k == min(bs, m) else np.triu_indices(k, 1))
        if lo:
            if r1 < m:
                blk = F[r0:r1, r1:].T
                F[r1:, r0:r1] = blk if d is None else blk * d[r1:, None]
            D[jj, ii] = D[ii, jj] if d is None else D[ii, jj] * d[r0:r1][jj]
        else:
            if r1 < m:
                F[r0:r1, r1:] = F[r1:, r0:r1].T
            D[ii, jj] = D[jj, ii]


def _refined_solve(pre, apply32, apply64, H64, rhs, tol, max_iter, progress):
    """``H beta = rhs`` by FALKON-CG rounds with float32 products, refined in float64.

    The rounds' float32 ``K_nM`` products solve the preconditioned system only to
    ``delta ~ eps32 cond(T)`` (float32 rounding, amplified by ``T^-1``);
    mixed-precision iterative refinement makes the result that of the float64
    system: ``r = rhs - H beta`` in float64 (``K_nM`` upcast block by block), a round
    on ``B^T H B g = B^T r`` to the remaining tolerance, ``beta += B g``, until
    ``||B^T r|| <= tol ||B^T rhs||``, the stopping rule of the float64 solve. A round
    that does not halve the residual (``delta`` near 1 or above: an ill-conditioned
    ``K_MM``) is rejected unless it helped, and the next rounds use float64 products
    (``apply64``).

    Returns ``(beta, n_iter, rel)``: float64 coefficients, the CG iterations of all
    rounds, the final relative residual per column.
    """
    R2 = rhs.reshape(rhs.shape[0], -1)
    rb = pre.Bt(R2)
    bnorm = np.linalg.norm(rb, axis=0)
    safe = np.where(bnorm > 0, bnorm, 1.0)
    beta = np.zeros_like(R2)
    rel = bnorm / safe
    n_iter, last, exact = 0, float(rel.max()), False
    for _ in range(_MAX_REFINE):
        if n_iter >= max_iter or not np.any(rel > tol):
            break
        # a round gains at most ~1/delta (unknown; measured 2e-2 with float32 factors):
        # ask each for the remaining factor (halved, against a round more), but for no
        # more than ~sqrt(tol) when that is far off, so that no round iterates on past
        # what its float32 products can resolve
        need = tol * float(np.min(safe / np.maximum(np.linalg.norm(rb, axis=0), 1e-300)))
        if not exact and 0.5 * need < 0.1 * np.sqrt(tol):
            need = np.sqrt(tol)
        inner = min(0.5, 0.5 * need)
        g, it, _ = conjugate_gradient(apply64 if exact else apply32, rb, inner,
                                      max_iter - n_iter, progress=progress)
        n_iter += it
        cand = beta + pre.B(g)
        rb_new = pre.Bt(R2 - H64(cand))
        rel_new = np.linalg.norm(rb_new, axis=0) / safe
        good = bool(np.all(np.isfinite(rel_new))) and rel_new.max() < last
        if progress is not None:
            progress("float64 residual", n_iter, max_iter, level=1,
                     max_rel_residual=float(rel_new.max()),
                     products="float64" if exact else "float32")
        if good:
            beta, rb, rel = cand, rb_new, rel_new
        if not good or rel_new.max() > 0.5 * last:
            if exact:
                break
            exact = True
        last = min(last, float(rel.max()))
    return beta.reshape(rhs.shape), n_iter, rel


def _fortran_gram(op, C):
    """``K_MM = k(C, C)`` as a writable float64 Fortran-order array (no extra copy)."""
    K = op.block_host(C)
    if op.spec is not None and K.flags.c_contiguous and K.flags.writeable \
            and K.dtype == np.float64:
        return K.T  # the engines return an exactly symmetric block: its transpose is K
    return np.array(K, dtype=np.float64, order="F")


class _FalkonPreconditioner:
    """FALKON's preconditioner ``B = T^-1 A^-1`` held in ONE ``M x M`` array.

    ``T`` (upper, ``T^T T = K_MM + eps I``) lies in the strict upper triangle of
    ``F`` with its diagonal in a vector; ``A^T`` (lower, ``A^T A = T W T^T / n +
    lambda I``) in the lower triangle and diagonal, as FALKON's own implementation
    keeps both (Meanti et al. 2020). ``K_MM`` itself is not kept. float64, or float32
    (half the memory) for the mixed-precision solve, where ``B`` only preconditions.

    Parameters
    ----------
    F : ndarray of shape (M, M), float64 or float32, Fortran order
        ``K_MM`` (only its upper triangle is read); factorised in place.
    w : ndarray of shape (M,)
        The centers' weights (``n / M`` each for uniform centers).
    n : int
    """

    def __init__(self, F, w, n):
        self.F, self.m = F, F.shape[0]
        self.potrf, self.lauum = lapack.get_lapack_funcs(("potrf", "lauum"), (F,))
        self.trsm = blas.get_blas_funcs("trsm", (F,))
        self.scale = np.sqrt(np.asarray(w, np.float64) / n).astype(F.dtype)
        diag0 = np.diag(F).copy()
        scale = max(float(np.max(np.abs(diag0))), np.finfo(np.float64).tiny)
        # the smallest jitter that factors is not enough: B = T^-1 A^-1 amplifies the
        # rounding of every product by ~1 / jitter, and CG stalls (measured: at 1e-3
        # relative residual with 400 near-duplicate centers). A floor of 1e-12 M (FALKON's
        # own is 1e-13 M, Meanti et al. 2020, pc_epsilon_64; 1e-12 converged where that
        # still stalled) bounds it; the solution stays the exact Nyström estimator (the
        # jitter is subtracted in the products)
        floor = _JITTER64 if F.dtype == np.float64 else float(np.finfo(F.dtype).eps)
        jitter = max(float(np.finfo(F.dtype).eps), floor) * self.m * scale
        for attempt in range(12):
            if attempt:  # potrf stopped part-way: restore K_MM from its lower triangle
                _mirror_upper(F, lo=False)
            F.flat[:: self.m + 1] = diag0 + jitter
            _, info = self.potrf(F, lower=0, clean=0, overwrite_a=1)
            if info == 0:
                break
            if info < 0:
                raise ValueError(f"LAPACK potrf failed (info={info}).")
            jitter *= 100.0
        else:
            raise ValueError("the kernel matrix of the centers is not positive semi-definite: "
                             "the kernel is not a valid (psd) kernel on these centers.")
        self.eps = float(F.dtype.type(jitter))  # T^T T = K_MM + eps I
        self.tdiag = np.diag(F).copy()
        self.adiag = None
        self._diag = "T"

    def set_lambda(self, lam):
        """Factor ``A^T A = T W T^T / n + lam I`` into the lower triangle of ``F``."""
        F, m = self.F, self.m
        jitter = 0.0
        for _ in range(12):
            # lower <- L = D T^T (D = sqrt(W / n)); LAPACK lauum: L^T L = T D^2 T^T in
            # M^3/3 flops, in place in the lower triangle
            _mirror_upper(F, lo=True, d=self.scale)
            F.flat[:: m + 1] = self.tdiag * self.scale
            _, info = self.lauum(F, lower=1, overwrite_c=1)
            if info != 0:
                raise ValueError(f"LAPACK lauum failed (info={info}) on the centers' Cholesky "
                                 "factor.")
            base = np.diag(F).copy()
            F.flat[:: m + 1] = base + (lam + jitter)
            _, info = self.potrf(F, lower=1, clean=0, overwrite_a=1)
            if info == 0:
                self.adiag = np.diag(F).copy()
                self._diag = "A"
                return
            jitter = (np.finfo(F.dtype).eps * m * max(float(base.max()), lam, 1e-30)
                      if jitter == 0.0 else jitter * 100.0)
        raise ValueError("the FALKON preconditioner is not positive definite; increase alpha.")

    def _use(self, which):
        if self._diag != which:
            self.F.flat[:: self.m + 1] = self.tdiag if which == "T" else self.adiag
            self._diag = which

    def _trsm(self, V, lower, trans):
        V2 = np.asfortranarray(V.reshape(self.m, -1), dtype=self.F.dtype)
        out = self.trsm(1.0, self.F, V2, lower=lower, trans_a=int(trans))
        return np.asarray(out, np.float64).reshape(V.shape)

    def solve_T(self, V, trans=False):
        """``T^-1 V`` (``T^-T V`` when ``trans``), float64 out."""
        self._use("T")
        return self._trsm(V, 0, trans)

    def solve_A(self, V, trans=False):
        """``A^-1 V`` (``A^-T V`` when ``trans``); ``A^T`` is the lower triangle."""
        self._use("A")
        return self._trsm(V, 1, not trans)

    def apply(self, V, product, lam, n):
        """``B^T H B V`` for ``H = product / n + lam K_MM``, ``K_MM = T^T T - eps I``.

        With ``W = A^-1 V`` and ``U = T^-1 W``:
        ``T^-T H U = T^-T (product(U) / n - lam eps U) + lam W`` (no ``K_MM`` held).
        """
        W = self.solve_A(V)
        U = self.solve_T(W)
        H = product(U) / n
        if self.eps:
            H -= (lam * self.eps) * U
        H = self.solve_T(H, trans=True)
        H += lam * W
        return self.solve_A(H, trans=True)

    def kmm(self, V):
        """``K_MM V = T^T (T V) - eps V`` (float64 factors: exactly the ``K_MM`` factored)."""
        self._use("T")
        trmm = blas.get_blas_funcs("trmm", (self.F,))
        V2 = np.asfortranarray(V.reshape(self.m, -1), dtype=self.F.dtype)
        TV = trmm(1.0, self.F, V2, lower=0, trans_a=0)
        out = np.asarray(trmm(1.0, self.F, TV, lower=0, trans_a=1), np.float64)
        return (out - self.eps * V2).reshape(V.shape)

    def Bt(self, R):
        """``B^T R = A^-T T^-T R``."""
        return self.solve_A(self.solve_T(R, trans=True), trans=True)

    def B(self, G):
        """``B G = T^-1 A^-1 G``."""
        return self.solve_T(self.solve_A(G))


class _FalkonBase(BaseEstimator):
    """Shared fit: centers, the FALKON preconditioner and CG on the normal equations."""

    def _sparse_ok(self):
        return False  # dense X only: centers and K_nM blocks go through the engines

    def _operator(self):
        return resolve_kernel(self.kernel, self.gamma, self.degree, self.coef0,
                              self.kernel_params, n_features=self.n_features_in_,
                              backend=self.backend_)

    def _check_params(self, n):
        if isinstance(self.kernel, str) and self.kernel == "precomputed":
            raise ValueError("kernel='precomputed' cannot be used by FALKON: it evaluates the "
                             "kernel between the data and centers chosen in fit; pass a kernel "
                             "name, a Kernel or a callable.")
        tol = self.tol
        if isinstance(tol, bool) or not isinstance(tol, Real) or not np.isfinite(tol) or tol <= 0:
            raise ValueError(f"tol must be a finite number > 0 (the relative residual of CG), "
                             f"got {tol!r}.")
        max_iter = DEFAULT_MAX_ITER if self.max_iter is None else self.max_iter
        if isinstance(max_iter, bool) or not isinstance(max_iter, Integral) or max_iter < 1:
            raise ValueError(f"max_iter must be an integer >= 1 or None, got {self.max_iter!r}.")
        c = self.cache_size
        if isinstance(c, bool) or not isinstance(c, Real) or not np.isfinite(c) or c < 0:
            raise ValueError(f"cache_size must be a number of MiB >= 0, got {c!r}.")
        return float(tol), int(max_iter), float(c), check_verbose(self.verbose)

    def _n_centers(self, n):
        m = self.n_centers
        if isinstance(m, str) and m == "auto":
            return _auto_centers(n)
        if isinstance(m, bool) or not isinstance(m, Integral) or not 1 <= m <= n:
            raise ValueError(f"n_centers must be 'auto' or an integer in [1, n_samples={n}], "
                             f"got {m!r}.")
        return int(m)

    def _select_centers(self, X, rng):
        """(centers, indices or None, weights ``w_j`` with ``sum_j w_j f_j ~ sum_i f_i``)."""
        n, d = X.shape
        spec = self.centers
        if not isinstance(spec, str):
            C = np.asarray(spec)
            if C.ndim != 2 or C.dtype.kind not in "iuf":
                raise ValueError(f"centers must be one of {CENTERS} or a numeric array of shape "
                                 f"(n_centers, n_features), got {type(spec).__name__} of "
                                 f"shape {getattr(C, 'shape', None)}.")
            if C.shape[1] != d or C.shape[0] < 1:
                raise ValueError(f"centers has shape {C.shape}; it needs at least one row and "
                                 f"n_features={d} columns, as X.")
            if not np.all(np.isfinite(C)):
                raise ValueError("centers contains NaN or infinity.")
            C = np.array(C, dtype=np.float64)  # a copy: the user's array is never touched
            return C, None, np.full(C.shape[0], n / C.shape[0])
        if spec not in CENTERS:
            raise ValueError(f"centers must be one of {CENTERS} or an array, got {spec!r}.")
        m = self._n_centers(n)
        seed = int(rng.randint(0, 2**31 - 1))
        if spec == "uniform" or m == n:
            idx = np.sort(rng.choice(n, m, replace=False))
            return X[idx], idx, np.full(m, n / m)
        if spec == "rls":
            from .. import RLSNystroem

            rls = RLSNystroem(self.kernel, gamma=self.gamma, coef0=self.coef0,
                              degree=self.degree, kernel_params=self.kernel_params,
                              n_components=m, random_state=seed, backend=self.backend_).fit(X)
            idx = np.asarray(rls.component_indices_)
            return X[idx], idx, np.asarray(rls.component_weights_, np.float64)
        from .. import KernelThinning

        # KT halves g times: thin a uniform subset of M 2^g points to exactly M centers
        g = int(np.floor(np.log2(n / m)))
        pool = np.sort(rng.choice(n, m * 2**g, replace=False))
        compress = "compress++" if len(pool) > 8192 and g >= 2 else None
        kt = KernelThinning(self.kernel, gamma=self.gamma, degree=self.degree, coef0=self.coef0,
                            kernel_params=self.kernel_params, m=g, compress=compress,
                            g=min(4, max(0, g - 1)), compute_mmd=False, backend=self.backend_,
                            random_state=seed).fit(X[pool])
        idx = pool[np.asarray(kt.coreset_indices_)]
        return X[idx], idx, np.full(len(idx), n / len(idx))

    def _solve(self, normal, pre, idx, lam, Y, n, m, tol, max_iter, progress):
        """CG on ``B^T H B g = B^T K_Mn y / n`` per group of targets sharing ``lambda``."""
        Y2 = Y.reshape(n, -1)
        rhs_full = normal.kmn(Y2) / n  # K_Mn y / n
        coef = np.empty((m, Y2.shape[1]))
        n_iter = 0
        groups = [np.arange(Y2.shape[1])] if len(lam) == 1 else [[j] for j in range(len(lam))]
        for gi, cols in enumerate(groups):
            lj = lam[gi]
            if gi:  # the first group's A was formed with T
                with blas_threads_for(m):
                    pre.set_lambda(lj)
            # B^T H B with B = T^-1 A^-1, H = K_Mn K_nM / n + lam K_MM (exact in float64,
            # so the solution is the Nyström estimator whatever jitter the factors took)
            apply = functools.partial(pre.apply, product=normal, lam=lj, n=n)
            rhs = rhs_full[:, cols]
            if normal.mixed:
                def H64(beta, lj=lj):
                    # K_MM as the factors hold it (float64), or as K_nM does (float32)
                    kmm = (pre.kmm(beta) if pre.F.dtype == np.float64 else
                           normal.kmm(beta, idx))
                    return normal.exact(beta) / n + lj * kmm

                apply64 = functools.partial(pre.apply, product=normal.exact, lam=lj, n=n)
                beta, it, rel = _refined_solve(pre, apply, apply64, H64, rhs, tol, max_iter,
                                               progress)
            else:
                gamma, it, rel = conjugate_gradient(apply, pre.Bt(rhs), tol, max_iter,
                                                    progress=progress)
                beta = pre.B(gamma)
            coef[:, cols] = beta
            n_iter = max(n_iter, it)
            if np.any(rel > tol):
                warnings.warn(f"{type(self).__name__} stopped after {it} CG iterations "
                              f"(max_iter={max_iter}) with relative residual {rel.max():.3g} > "
                              f"tol={tol:g}; increase max_iter, tol or alpha.",
                              ConvergenceWarning, stacklevel=4)
        return coef, n_iter

    def _solve_with(self, op, X, C, idx, w, lam, Y, n, m, dtype, tol, max_iter, cache,
                    progress):
        """Build ``K_nM`` (``dtype``) and the preconditioner, and solve: one attempt."""
        t0 = time.perf_counter()
        # K_nM first: its float64 working copies of X are freed before K_MM is formed
        normal = _NystromNormalOperator(op, X, C, dtype, cache, client=self.client)
        progress("K_nM", n, level=1, held=normal.stored, dask=normal.dask is not None,
                 seconds=round(time.perf_counter() - t0, 2))
        try:
            t0 = time.perf_counter()
            with blas_threads_for(m):  # M^3/3-flop factorizations: BLAS on every core
                # float32 K_MM (from the held K_nM rows when the centers are training
                # rows) for the mixed-precision solve: B only preconditions there
                pre = _FalkonPreconditioner(normal.gram(idx) if normal.mixed and m >=
                                            _F32_PRECOND_MIN else _fortran_gram(op, C), w, n)
                pre.set_lambda(lam[0])
            progress("preconditioner", m, level=1, seconds=round(time.perf_counter() - t0, 2))
            t0 = time.perf_counter()
            # CG: memory-bound products and few-column triangular solves, where a second
            # OpenBLAS thread gains little and stalls badly whenever a core is busy
            with single_blas_thread():
                coef, n_iter = self._solve(normal, pre, idx, lam, Y, n, m, tol, max_iter,
                                           progress)
        finally:
            normal.close()
        del pre
        progress("CG", level=1, seconds=round(time.perf_counter() - t0, 2))
        return coef, n_iter, normal

    def _fit_targets(self, X, Y):
        n = X.shape[0]
        tol, max_iter, cache, verbose = self._check_params(n)
        n_targets = 1 if Y.ndim == 1 else Y.shape[1]
        alpha = _check_alpha(self.alpha, n_targets)
        self.backend_ = resolve_backend(self.backend, X)
        rng = check_random_state(self.random_state)
        progress = Progress(self, verbose)
        C, idx, w = self._select_centers(X, rng)
        m = C.shape[0]
        op = self._operator()
        progress("centers", m, n, kind=self.centers if isinstance(self.centers, str) else "array")

        # Preconditioner (Rudi et al. 2017, Alg. 1): T^T T = K_MM, A^T A = T W T^T / n + lam I,
        # W the centers' weights (n / M each when uniform; 1 / pi_j for RLS draws, FALKON-BLESS)
        lam = np.atleast_1d(alpha) / n
        dtypes = [product_dtype(tol)]
        if dtypes[0] == np.float32:
            dtypes.append(np.dtype(np.float64))
        for dtype in dtypes:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                coef, n_iter, normal = self._solve_with(op, X, C, idx, w, lam, Y, n, m, dtype,
                                                        tol, max_iter, cache, progress)
            if not normal.mixed:
                break
            # the float32 K_nM is a perturbed problem: where K_MM is near-singular (close
            # centers, tiny lambda) the coefficients grow until its rounding, eps32 |b|
            # per prediction, is no longer small; then solve again in float64
            err = normal.rounding_error(coef)
            progress("float32 K_nM rounding", level=1, relative_prediction_error=float(err.max()))
            if not np.any(err > _MIXED_MAX_ERROR):
                break
            normal = coef = None  # free the float32 K_nM before the float64 one is built
        for w_ in caught:  # the kept attempt's warnings only
            warnings.warn_explicit(w_.message, w_.category, w_.filename, w_.lineno)
        self.kernel_nbytes_ = 0 if normal.KnM is None else int(normal.KnM.nbytes)
        if not np.all(np.isfinite(coef)):
            raise ValueError("FALKON produced non-finite coefficients; check alpha and the kernel "
                             "parameters.")
        progress("CG done", n_iter, max_iter, n_centers=m)
        self.dual_coef_ = coef[:, 0] if Y.ndim == 1 else coef
        self.centers_ = C
        self.center_indices_ = idx
        self.n_centers_ = m
        self.n_iter_ = n_iter
        return self

    def _decision(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        op = self._operator()
        return np.asarray(op.engine.to_host(op.matmul(X, self.centers_, self.dual_coef_)),
                          np.float64)


_PARAMS_DOC = """
    alpha : float >= 0 or array of shape (n_targets,), default=1e-3
        Ridge penalty, as in :class:`KernelRidge`: the coefficients minimise
        ``||y - K_nM b||^2 + alpha b^T K_MM b`` (FALKON's ``lambda`` is ``alpha / n``).
        With every training point a center this is exact kernel ridge.
    n_centers : int >= 1 or "auto", default="auto"
        Number of Nyström centers ``M``, at most ``n_samples``; "auto" is
        ``sqrt(n) log(n)`` (at least 100, at most ``n``), the size of FALKON's
        optimal-rate theorem. Ignored when ``centers`` is an array.
    centers : {"uniform", "rls", "thinning"} or array of shape (M, n_features), default="uniform"
        ``"uniform"``: a uniform draw without replacement (FALKON). ``"rls"``: drawn by
        ridge leverage scores estimated by SQUEAK (:class:`kernelkit.RLSNystroem`, as
        FALKON-BLESS; better where the density is uneven). ``"thinning"``: a
        kernel-thinning coreset (:class:`kernelkit.KernelThinning`, Compress++ on large
        inputs) of a uniform subset of ``M 2^g`` points. An array: these centers, used
        exactly as given.
    kernel : str, Kernel or callable, default="rbf"
        A kernel name, a :class:`kernelkit.kernels.Kernel` or a callable (not
        "precomputed": FALKON evaluates the kernel at its centers).
    gamma, degree, coef0, kernel_params
        As in :class:`KernelRidge`.
    tol : float > 0, default=1e-5
        Stop when the relative residual of the preconditioned normal equations is at
        most ``tol`` (for every target). From ``1e-6`` up, ``K_nM`` is held in float32 and
        CG runs on float32 products (and, from 8192 centers, float32 factors ``T``,
        ``A``: half their memory), refined by float64 residuals until the float64 rule
        holds; below ``1e-6`` all is float64. Classification needs far less: on
        Fashion-MNIST the test accuracy settles by a relative residual of ~1e-2.
    max_iter : int >= 1 or None, default=None
        CG iteration limit (None: 500); reaching it raises a ``ConvergenceWarning``.
    cache_size : float >= 0, default=4096
        MiB for holding ``K_nM``; when it does not fit, every CG step recomputes it in
        row blocks of ``working_memory`` (``O(n M d)`` time, ``O(M^2)`` memory).
    client : distributed.Client or None, default=None
        When given, the ``K_nM`` products run on this Dask cluster
        (:class:`kernelkit.distributed.DaskKernelOperator`): each worker holds the
        kernel block of its share of the training rows against the centers, and a CG
        step moves only ``n x n_targets`` vectors. Needs ``kernelkit[dist]``.
    random_state : int, RandomState instance or None, default=None
        Seeds the choice of centers.
    verbose : int, default=0
        1: one line per phase; 2: every CG iteration.
    backend : {"auto", "numpy", "numba", "cupy"} or None, default=None
        Compute engine for the kernel; resolved in ``fit`` into ``backend_``."""

_ATTR_DOC = """
    centers_ : ndarray of shape (`n_centers_`, n_features), float64
        The Nyström centers.
    center_indices_ : ndarray of shape (`n_centers_`,) or None
        Rows of the training ``X`` used as centers (None when ``centers`` is an array).
    n_centers_ : int
    n_iter_ : int
        CG iterations (the largest over groups of targets).
    kernel_nbytes_ : int
        Bytes of the held ``K_nM`` (0 when computed blockwise).
    backend_ : str
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)"""

_RAISES_DOC = """
    Raises
    ------
    ValueError
        In ``fit``: NaN/inf, fewer than 2 samples, ``n_centers`` not in
        ``[1, n_samples]``, centers with the wrong feature count or non-finite values,
        an unknown ``centers`` string, ``tol <= 0``, ``max_iter < 1``, negative
        ``alpha``, ``kernel="precomputed"``."""


class FalkonRegressor(MultiOutputMixin, RegressorMixin, _FalkonBase):
    """FALKON: Nyström kernel ridge regression by preconditioned conjugate gradients.

    Restricts kernel ridge to ``f(x) = sum_j b_j k(x, c_j)`` over ``M`` centers and
    solves the normal equations ``(K_Mn K_nM + alpha K_MM) b = K_Mn y`` by CG with
    FALKON's preconditioner ``B = T^-1 A^-1 / sqrt(n)``, ``T = chol(K_MM)``,
    ``A = chol(T T^T / M + lambda I)`` (Rudi, Carratino & Rosasco, NeurIPS 2017,
    Algorithm 1; ``T W T^T / n`` with the centers' sampling weights ``W`` for
    leverage-score centers, Rudi et al. NeurIPS 2018). Memory: ``K_nM`` (``4 n M``
    bytes from ``tol >= 1e-6``, else ``8 n M``) plus one ``M x M`` array holding both
    ``T`` and ``A`` (``8 M^2`` bytes; ``4 M^2`` from 8192 centers with ``tol >= 1e-6``);
    ``K_MM`` is not kept. Time: ``O(n M d)`` to form ``K_nM``, three ``M^3/3``-flop
    factorizations (``potrf``, ``lauum``, ``potrf``), then ``O(n M + M^2)`` per CG
    iteration (one pass over ``K_nM``, four triangular solves); the iterations grow
    as ``log(1/tol)``, not with ``n``. Out-of-core products as in Meanti et al.
    (NeurIPS 2020).

    Parameters
    ----------
    {params}

    Attributes
    ----------
    dual_coef_ : ndarray of shape (`n_centers_`,) or (`n_centers_`, n_targets), float64
    {attrs}
    {raises}

    Examples
    --------
    >>> import numpy as np
    >>> from kernelkit.ridge import FalkonRegressor
    >>> rng = np.random.RandomState(0); X = rng.rand(500, 2); y = np.sin(6 * X[:, 0])
    >>> m = FalkonRegressor(alpha=1e-3, n_centers=100, gamma=5.0, random_state=0).fit(X, y)
    >>> bool(m.score(X, y) > 0.99)
    True
    """

    def __init__(self, alpha=1e-3, *, n_centers="auto", centers="uniform", kernel="rbf",
                 gamma=None, degree=3, coef0=1, kernel_params=None, tol=1e-5, max_iter=None,
                 cache_size=4096, client=None, random_state=None, verbose=0, backend=None):
        self.alpha = alpha
        self.n_centers = n_centers
        self.centers = centers
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.tol = tol
        self.max_iter = max_iter
        self.cache_size = cache_size
        self.client = client
        self.random_state = random_state
        self.verbose = verbose
        self.backend = backend

    def fit(self, X, y):
        """Choose the centers and solve the Nyström normal equations.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_targets)

        Returns
        -------
        self : object
        """
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=True, dtype=np.float64,
                             ensure_min_samples=2)
        return self._fit_targets(X, y)

    def predict(self, X):
        """``k(X, centers_) @ dual_coef_``, computed blockwise.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets), float64
        """
        return self._decision(X)


class FalkonClassifier(_ClassifierMixin, _FalkonBase):
    """FALKON classifier: one-vs-all Nyström kernel ridge on {-1, +1} targets.

    :class:`FalkonRegressor` on the {-1, +1} encoding of the classes (all classes
    share the centers, the preconditioner and the CG products).

    Parameters
    ----------
    {params}

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    dual_coef_ : ndarray of shape (`n_centers_`, n_classes) (one column for two classes)
    {attrs}
    {raises}
    """

    __init__ = FalkonRegressor.__init__

    def fit(self, X, y):
        """Fit one-vs-all FALKON regressions on {-1, +1} encoded classes.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Class labels of any type.

        Returns
        -------
        self : object
        """
        return _ClassifierMixin.fit(self, X, y)

    def _fit_targets(self, X, Y, sample_weight=None):
        return _FalkonBase._fit_targets(self, X, Y)


for _cls in (FalkonRegressor, FalkonClassifier):
    for _key, _text in (("{params}", _PARAMS_DOC), ("{attrs}", _ATTR_DOC),
                        ("{raises}", _RAISES_DOC)):
        _cls.__doc__ = _cls.__doc__.replace(_key, _text.strip())
del _cls, _key, _text
