"""FALKON's linear algebra: the ``K_nM`` normal operator and the one-array preconditioner.

Rudi, Carratino & Rosasco, "FALKON: An Optimal Large Scale Kernel Method", NeurIPS
2017 (Algorithm 1); Meanti, Carratino, Rosasco & Rudi, "Kernel Methods Through the
Roof", NeurIPS 2020 (both triangular factors in one array, blockwise products). The
estimators are in :mod:`kernelkit.ridge._falkon`.
"""

import numpy as np
from scipy.linalg import blas, lapack

from ..utils._potrf import dsyrk_guard, potrf
from ..utils._threads import map_row_blocks
from ._kernel_product import column_sq_norms, held_dtype, held_kernel
from ._pcg import _PATIENCE, conjugate_gradient

_JITTER64 = 1e-12  # relative jitter floor per center of the float64 Cholesky of K_MM
_MAX_REFINE = 8  # float32 rounds of a mixed-precision solve (each gains ~1/delta)
_F32_BLOCK_BYTES = 4 * 2**20  # a row block of K_nM reused from cache by its 2nd GEMM
_ROW_CHUNK = 2048  # rows of K_nM per task of the product pool


class _NystromNormalOperator:
    """``v -> K_nM^T W (K_nM v)``: ``K_nM`` held when it fits, else blockwise (one pass).

    Meanti et al. (2020) keep ``K_nM`` out of memory by computing it in row blocks on
    every product; one block serves both ``K_nM v`` and its transpose product. ``w``
    (row weights, None for all ones) weighs the rows between the two products: the
    weighted normal equations ``K_Mn W K_nM + alpha K_MM`` are taken exactly.
    """

    def __init__(self, op, X, C, dtype, cache_size, client=None, w=None):
        self.op, self.X, self.C = op, X, C
        self.w = None if w is None else np.asarray(w, np.float64)[:, None]
        n, m = X.shape[0], C.shape[0]
        self.dtype = np.dtype(dtype)
        self.dask = self.handle = None
        self._owned = False
        if client is not None:
            # the data rows live on the workers, each keeping its block k(C, X_chunk):
            # a CG step sends V and gets back M x k (Meanti et al. 2020's out-of-core
            # products, here across machines)
            from ..distributed import DaskKernelOperator
            from ..distributed._operator import _resolve_client

            client, self._owned = _resolve_client(client)  # an address: connect, close after
            try:
                self.dask = DaskKernelOperator(client, op, X, np.float64)
                self.handle = self.dask.prepare(C)
            except BaseException:
                if self._owned:
                    client.close()
                raise
        self.stored = client is None and n * m * self.dtype.itemsize <= cache_size * 2**20
        self.KnM = None
        if self.stored:
            self.dtype = held_dtype(op, X, self.dtype, C)
            self.stored = n * m * self.dtype.itemsize <= cache_size * 2**20
        if self.stored:
            self.KnM = held_kernel(op, X, C, self.dtype)

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

    def rows(self, I):
        """The kernel rows ``K_nM[I]`` (held, else computed from ``X[I]``)."""
        if self.stored:
            return self.KnM[I]
        return self.op.block_host(self.X[I], self.C)

    def gram(self, idx):
        """``K_MM`` in float32, Fortran order, for the mixed-precision preconditioner."""
        if self.stored and idx is not None:
            return self.KnM[idx].T  # k(c_j, c_i) as held in K_nM: a fresh C-order gather
        return np.array(held_kernel(self.op, self.C, None, np.float32), np.float32, order="F")

    def close(self):
        """Free the blocks held on the Dask workers."""
        if self.dask is not None:
            self.dask.release(self.handle)
            self.dask.close()
            if self._owned:
                self.dask.client.close()
            self.dask = None

    def knm(self, V):
        """``K_nM @ V`` (float64)."""
        if self.dask is not None:
            return self.dask.rmatmul(self.handle, V).astype(np.float64)
        if not self.stored:
            return np.asarray(self.op.engine.to_host(self.op.matmul(self.X, self.C, V)),
                              np.float64)
        # held: row chunks on the row-block pool, one BLAS thread each (as _held_sum); a
        # GEMV per cache-sized block under OpenBLAS's own threads stalled whenever a core
        # was busy (the rounding check's one pass took longer than the whole CG)
        K = self.KnM
        out = np.empty((K.shape[0],) + V.shape[1:])
        step = max(16, int(_F32_BLOCK_BYTES // (8 * max(1, K.shape[1]))))

        def run(a, b):
            for r0 in range(a, b, step):
                r1 = min(b, r0 + step)
                out[r0:r1] = K[r0:r1].astype(np.float64, copy=False) @ V

        map_row_blocks(run, K.shape[0], step * max(1, _ROW_CHUNK // step))
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
        ``||dK b|| ~ eps / sqrt(12) ||b|| max_j ||K_:j||`` at most (the largest column
        norm already overestimates: measured 7x on digits).
        """
        B = coef.reshape(coef.shape[0], -1)
        top = np.abs(B).max(axis=0)
        B = B / np.where(top > 0, top, 1.0)  # the ratio is scale-free; this keeps it finite
        sq = column_sq_norms(self.KnM)
        fitted = np.linalg.norm(self.knm(B), axis=0)
        est = (float(np.finfo(self.KnM.dtype).eps) / np.sqrt(12.0) * np.sqrt(sq.max())
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
        """``K_nM^T W K_nM V`` in float64 arithmetic (a held float32 ``K_nM`` upcast per block)."""
        return self.sandwich(V, self._weigh)

    def sandwich(self, V, fn):
        """``K_nM^T fn(K_nM V)`` in one float64 pass over the row blocks; ``fn(P, r0, r1)``
        maps the block ``P = K_nM[r0:r1] V`` row-wise (the weights of a weighted solve,
        the Hessian of a loss), and runs on several blocks at once."""
        if self.dask is not None:
            return self.kmn(fn(self.knm(V), 0, self.X.shape[0]))
        if self.stored:
            def job(Kb, r0, r1):
                Kb = Kb.astype(np.float64, copy=False)
                return Kb.T @ fn(Kb @ V, r0, r1)

            return self._held_sum(job, np.float64)
        out = np.zeros((self.C.shape[0],) + V.shape[1:])
        for r0, r1, Kb in self._blocks():
            out += Kb.T @ fn(Kb @ V, r0, r1)
        return out

    def _weigh(self, P, r0, r1):
        """``W[r0:r1] P`` for a row block ``P`` of ``K_nM V`` (unchanged when unweighted)."""
        if self.w is None:
            return P
        w = self.w[r0:r1]
        return P * (w if P.ndim == 2 else w[:, 0]).astype(P.dtype, copy=False)

    def _normal32(self, V, fn=None):
        """``K_nM^T K_nM V`` (weighted) from the held float32 ``K_nM`` without upcasting it;
        with ``fn``, ``K_nM^T fn(K_nM V)`` (``fn(Z, r0, r1)`` maps the float64 row block
        ``Z`` of rows ``r0:r1``: logistic FALKON's Hessian and gradient passes).

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
            if fn is None:
                t[:, :k] += t[:, k:]
                return Kb.T @ self._weigh(t[:, :k], r0, r1)
            Z = t[:, :k].astype(np.float64)
            Z += t[:, k:]
            return Kb.T @ fn(Z, r0, r1).astype(np.float32)

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


def _refined_solve(pre, apply32, apply64, H64, rhs, tol, max_iter, progress, exact=False,
                   beta0=None):
    """``H beta = rhs`` by FALKON-CG rounds with float32 products, refined in float64.

    The rounds' float32 ``K_nM`` products solve the preconditioned system only to
    ``delta ~ eps32 cond(T)`` (float32 rounding, amplified by ``T^-1``);
    mixed-precision iterative refinement makes the result that of the float64
    system: ``r = rhs - H beta`` in float64 (``K_nM`` upcast block by block), a round
    on ``B^T H B g = B^T r`` to the remaining tolerance, ``beta += B g``, until
    ``||B^T r|| <= tol ||B^T rhs||``, the stopping rule of the float64 solve. A round
    that does not halve the residual (``delta`` near 1 or above: an ill-conditioned
    ``K_MM``) is rejected unless it helped, and the next rounds use float64 products
    (``apply64``). ``exact`` starts with float64 products, from ``beta0`` (the result
    of a float64 CG run that stalled or broke down near the rounding floor of an
    ill-conditioned system): its rounds restart CG from the true residual, each round
    stopping once it stalls (best iterate).

    Returns ``(beta, n_iter, rel)``: float64 coefficients, the CG iterations of all
    rounds, the final relative residual per column.
    """
    R2 = rhs.reshape(rhs.shape[0], -1)
    rb = pre.Bt(R2)
    bnorm = np.linalg.norm(rb, axis=0)
    safe = np.where(bnorm > 0, bnorm, 1.0)
    beta = np.zeros_like(R2) if beta0 is None else np.array(beta0, np.float64).reshape(R2.shape)
    if beta0 is not None:
        rb = pre.Bt(R2 - H64(beta))
    rel = np.linalg.norm(rb, axis=0) / safe
    n_iter, last = 0, float(rel.max())
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
                                      max_iter - n_iter, progress=progress,
                                      patience=_PATIENCE if exact else None)
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
        self.lauum = lapack.get_lapack_funcs("lauum", (F,))
        self.trsm, self.trsv = blas.get_blas_funcs(("trsm", "trsv"), (F,))
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
            info = potrf(F, lower=False)
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

    def set_lambda(self, lam, extra=None):
        """Factor ``A^T A = T W T^T / n + lam I`` into the lower triangle of ``F``;
        ``+ P P^T`` with ``extra = P`` (M x h, ``F``'s dtype, Fortran order: rows that
        logistic FALKON takes exactly, :mod:`._falkon_logistic_pre`)."""
        F, m = self.F, self.m
        jitter = 0.0
        for _ in range(12):
            # lower <- L = D T^T (D = sqrt(W / n)); LAPACK lauum: L^T L = T D^2 T^T in
            # M^3/3 flops, in place in the lower triangle
            _mirror_upper(F, lo=True, d=self.scale)
            F.flat[:: m + 1] = self.tdiag * self.scale
            with dsyrk_guard(m, F.dtype):
                _, info = self.lauum(F, lower=1, overwrite_c=1)
            if info != 0:
                raise ValueError(f"LAPACK lauum failed (info={info}) on the centers' Cholesky "
                                 "factor.")
            if extra is not None:  # in place (F is Fortran-ordered: syrk writes into it)
                blas.get_blas_funcs("syrk", (F,))(1.0, extra, beta=1.0, c=F, lower=1,
                                                  overwrite_c=1)
            base = np.diag(F).copy()
            F.flat[:: m + 1] = base + (lam + jitter)
            info = potrf(F, lower=True)
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
        if V2.shape[1] == 1:  # trsm with one right-hand side: 7-10x trsv's time
            out = self.trsv(self.F, V2[:, 0], lower=lower, trans=int(trans))
        else:
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
