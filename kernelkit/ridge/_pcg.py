"""Conjugate gradients for kernel ridge: the shared CG loop and the Nyström preconditioner.

Exact kernel ridge solves ``(K + alpha I) C = Y``. :func:`pcg_ridge` solves it by
conjugate gradients preconditioned with a randomized Nyström approximation of ``K``
(Frangella, Tropp & Udell, "Randomized Nyström Preconditioning", SIAM J. Matrix
Anal. Appl. 44(2), 2023: Algorithm 2.1 for the approximation, eq. (5.3) for the
preconditioner, Algorithm 5.4's rank doubling for its rank). With the rank near the
effective dimension ``d_eff(alpha)`` the preconditioned system has a condition number
``O(1)`` whatever ``n`` (their Theorem 5.1), so the iteration count stays bounded as
``n`` grows. Targets are solved together: one preconditioner, one kernel product per
iteration for all columns, each column its own CG scalars.

The kernel matrix is held in float32 when it fits ``cache_size`` (products in
float32, CG vectors and scalars in float64), else every product recomputes it blockwise
through the resolver's fused ``matmul`` (float64, ``working_memory`` bounded).
"""

import warnings

import numpy as np
from scipy import linalg
from sklearn.exceptions import ConvergenceWarning

from .._config import get_config
from ..utils._threads import single_blas_thread

# tolerances at or above this are met by float32 kernel products (float32 holds K to
# ~6e-8 relative; the residual floor of a float32 product is a few times that)
FLOAT32_MIN_TOL = 1e-6
DEFAULT_MAX_ITER = 500
_RANK0 = 64              # first sketch size of the rank doubling
_RANK_RATIO = 10.0       # stop doubling once the last Nyström eigenvalue <= this * alpha
_MAX_RANK = 4096
_MIN_COLS = 32           # cost of a memory-bound product, in GEMM columns


def product_dtype(tol, forced=None):
    """float32 when ``tol`` allows float32 kernel products, else float64."""
    if forced is not None:
        return np.dtype(forced)
    return np.dtype(np.float32) if tol >= FLOAT32_MIN_TOL else np.dtype(np.float64)


def _fits_float32(X):
    """Whether casting ``X`` to float32 keeps every entry (no overflow, no underflow)."""
    a = np.abs(X[X != 0])
    return a.size == 0 or (a.max() < 1e37 and a.min() > 1e-37)


class KernelProduct:
    """``v -> S K S v`` for ``S = diag(sqrt(sample_weight))`` (identity when None).

    ``K`` is held (the precomputed matrix, or ``k(X, X)`` cast to ``dtype`` when
    ``n^2`` entries fit ``cache_size`` MiB) or recomputed blockwise on each call.

    Parameters
    ----------
    op : KernelOperator or None
        The resolved kernel (None when ``K`` is given).
    X : ndarray of shape (n, d) or None
    K : ndarray of shape (n, n) or None
        A precomputed kernel matrix, used as given (never modified).
    sw : ndarray of shape (n,) or None
        Square roots of the sample weights.
    dtype : numpy dtype
        Storage and product precision of a held ``K``.
    cache_size : float
        MiB allowed for a held ``K``.
    """

    def __init__(self, op, X, K=None, sw=None, dtype=np.float32, cache_size=4096.0):
        self.op, self.X, self.sw = op, X, sw
        self.dtype = np.dtype(dtype)
        if K is not None:
            self.K, self.stored = K, True
            self.dtype = K.dtype
            return
        n = X.shape[0]
        self.stored = n * n * self.dtype.itemsize <= cache_size * 2**20
        self.K = None
        if self.stored and (self.dtype == np.float64 or _fits_float32(X)):
            # the engine computes float32 blocks from float64 arithmetic (accurate entries)
            self.K = np.asarray(op.engine.to_host(op.block(X.astype(self.dtype, copy=False))))
        elif self.stored:  # X itself would over/underflow in float32: float64 row blocks
            self.K = np.empty((n, n), self.dtype)
            rows = max(1, int(get_config()["working_memory"] * 2**20 // (8 * n)))
            for r0 in range(0, n, rows):
                self.K[r0:r0 + rows] = op.block_host(X[r0:r0 + rows], X)

    @property
    def n(self):
        return self.X.shape[0] if self.K is None else self.K.shape[0]

    def __call__(self, V):
        V = V if self.sw is None else V * self.sw.reshape((-1,) + (1,) * (V.ndim - 1))
        if self.stored:
            out = (self.K @ V.astype(self.dtype, copy=False)).astype(np.float64)
        else:
            out = np.asarray(self.op.engine.to_host(self.op.matmul(self.X, self.X, V)),
                             dtype=np.float64)
        return out if self.sw is None else out * self.sw.reshape((-1,) + (1,) * (V.ndim - 1))

    def nbytes(self):
        """Bytes of the held kernel matrix (0 when recomputed on every product)."""
        return 0 if self.K is None else self.K.nbytes


def _orthonormalize(G, Q):
    """Columns of ``G`` made orthonormal and orthogonal to ``Q`` (BLAS-3 only).

    Block Gram-Schmidt against ``Q`` then CholeskyQR, each twice (Yamamoto et al. 2015:
    CholeskyQR2 is as orthogonal as Householder QR for a well-conditioned ``G``, which a
    Gaussian matrix is), instead of LAPACK's panel QR, slow on tall matrices.
    """
    for _ in range(2):
        if Q.shape[1]:
            G = G - Q @ (Q.T @ G)
        R = linalg.cholesky(G.T @ G, check_finite=False)
        G = linalg.solve_triangular(R, G.T, trans="T", check_finite=False).T
    return G


def nystrom_sketch(matvec, n, mu, rng, *, rank0=_RANK0, max_rank=_MAX_RANK, n_targets=1,
                   tol=1e-5, fixed_cost=0.0, progress=None):
    """Randomized Nyström approximation ``U diag(lam) U^T`` of a psd operator.

    Frangella, Tropp & Udell (2023), Algorithm 2.1 (orthonormal Gaussian test matrix,
    shift ``nu = sqrt(n) eps ||Y||`` for stability, Cholesky, thin SVD, here through
    the eigendecomposition of ``B^T B``), with the rank doubled (Algorithm 5.4) from
    ``rank0``. New test columns are orthonormalised against the kept ones (the
    approximation depends only on their span), so doubling costs no more products than
    sketching the final rank at once. Doubling stops when the smallest retained
    eigenvalue is at most ``10 mu``, at ``max_rank``, or when the CG iterations it would
    save (from ``sqrt(kappa)``, the spectrum extrapolated geometrically) cost less than
    the larger sketch: with few targets a product is cheap and a huge rank does not pay.

    Parameters
    ----------
    matvec : callable
        ``V (n, l) -> K V`` in float64.
    n : int
    mu : float
        The ridge shift (smallest ``alpha``).
    rng : numpy.random.RandomState
    n_targets : int
        Columns per CG product (for the cost model).
    tol : float
        CG tolerance (for the cost model).
    fixed_cost : float
        Cost of one product call beyond its columns, in columns (the feature count
        when the kernel is recomputed on every product).

    Returns
    -------
    U : ndarray of shape (n, l), float64, orthonormal columns
    lam : ndarray of shape (l,), float64, descending, >= 0
    """
    max_rank = max(1, min(max_rank, n))
    l = min(rank0, max_rank)  # noqa: E741 (the sketch size l of Frangella, Tropp & Udell)
    Q = np.empty((n, 0))
    Y = np.empty((n, 0))
    log_tol = np.log(2.0 / tol)
    while True:
        G = rng.standard_normal((n, l - Q.shape[1]))
        Qn = _orthonormalize(G, Q)
        Q = np.hstack([Q, Qn])
        Y = np.hstack([Y, matvec(Qn)])
        # FTU use ||Y||_2; the Frobenius norm bounds it at no SVD's cost (a larger, still
        # negligible shift)
        nu = np.sqrt(n) * np.finfo(np.float64).eps * np.linalg.norm(Y)
        # in place and without forming B = Y_nu C^-1: three n x l arrays at most (Q, Y, U)
        Y += nu * Q
        core = Q.T @ Y
        core = (core + core.T) / 2
        try:
            C = linalg.cholesky(core, check_finite=False)
        except linalg.LinAlgError:  # only for a non-psd operator: clip its spectrum
            w, V = linalg.eigh(core)
            C = linalg.qr(np.sqrt(np.clip(w, nu, None))[:, None] * V.T, mode="r")[0]
        Ci = linalg.solve_triangular(C, np.eye(C.shape[0]), check_finite=False)
        BtB = Ci.T @ (Y.T @ Y) @ Ci  # B^T B, whose eigenpairs give B's SVD
        s2, V = linalg.eigh((BtB + BtB.T) / 2, check_finite=False)
        s2, V = s2[::-1], V[:, ::-1]
        keep = s2 > s2[0] * np.finfo(np.float64).eps * l
        U = Y @ (Ci @ (V[:, keep] / np.sqrt(s2[keep])))
        Y -= nu * Q
        lam = np.clip(s2[keep] - nu, 0.0, None)
        if progress is not None:
            progress("Nystrom rank", l, level=2, last_eig=float(lam[-1]), alpha=float(mu))
        if lam[-1] <= _RANK_RATIO * mu or l >= max_rank or not keep.all():
            return U, lam
        # cost model, in product columns: doubling costs l more columns (+ its fixed
        # cost) and ~5 n l^2 / n^2 of dense algebra; it saves CG iterations
        half = lam[len(lam) // 2]
        lam2 = lam[-1] * min(1.0, lam[-1] / half) if half > 0 else 0.0
        saved = (np.sqrt(1 + lam[-1] / mu) - np.sqrt(1 + lam2 / mu)) / 2 * log_tol
        # a product with few columns is memory-bound: it costs about _MIN_COLS columns;
        # CG needs about twice the sqrt(kappa) estimate in practice (measured)
        per_iter = max(n_targets, _MIN_COLS) + fixed_cost
        if 2.0 * saved * per_iter < l + fixed_cost + 20.0 * l * l / n:
            return U, lam
        l = min(2 * l, max_rank)  # noqa: E741


class NystromPreconditioner:
    """``P^-1 = (lam_l + mu) U (Lam + mu)^-1 U^T + (I - U U^T)`` (FTU 2023, eq. (5.3)).

    One per ``mu`` column (an ``alpha`` per target shares ``U`` and ``lam``).
    """

    def __init__(self, U, lam, mu):
        self.U, self.lam = U, lam
        self.mu = np.atleast_1d(np.asarray(mu, np.float64))

    def __call__(self, R):
        R2 = R.reshape(R.shape[0], -1)
        G = self.U.T @ R2
        mu = np.broadcast_to(self.mu, (R2.shape[1],))
        scale = (self.lam[-1] + mu)[None, :] / (self.lam[:, None] + mu[None, :]) - 1.0
        return (R2 + self.U @ (scale * G)).reshape(R.shape)


def conjugate_gradient(apply_A, B, tol, max_iter, *, precond=None, progress=None):
    """Preconditioned CG on the columns of ``B`` in lockstep (one product per step).

    Stops when every column's residual ``||b - A x|| <= tol ||b||`` (recursive
    residual, float64).

    Returns
    -------
    X : ndarray, shape of ``B``, float64
    n_iter : int
    rel_res : ndarray of shape (n_columns,)
    """
    B2 = np.asarray(B, np.float64).reshape(B.shape[0], -1)
    bnorm = np.linalg.norm(B2, axis=0)
    safe = np.where(bnorm > 0, bnorm, 1.0)
    X = np.zeros_like(B2)
    R = B2.copy()
    Z = R if precond is None else precond(R)
    P = Z.copy()
    rz = np.einsum("ij,ij->j", R, Z)
    rel = np.linalg.norm(R, axis=0) / safe
    it = 0
    while it < max_iter and np.any(rel > tol):
        it += 1
        AP = apply_A(P)
        pap = np.einsum("ij,ij->j", P, AP)
        live = (rel > tol) & (pap > 0)  # converged columns are frozen
        if not np.any(live):
            break
        step = np.where(live, rz / np.where(live, pap, 1.0), 0.0)
        X += step * P
        R -= step * AP
        rel = np.linalg.norm(R, axis=0) / safe
        Z = R if precond is None else precond(R)
        rz_new = np.einsum("ij,ij->j", R, Z)
        beta = np.where(live & (rz > 0), rz_new / np.where(rz > 0, rz, 1.0), 0.0)
        P = Z + beta * P
        rz = rz_new
        if progress is not None:
            progress("CG iteration", it, max_iter, level=2, max_rel_residual=float(rel.max()))
    return X.reshape(B.shape), it, rel


def pcg_ridge(product, Y, alpha, *, tol, max_iter, random_state, progress=None,
              owner="KernelRidge"):
    """Solve ``(K + alpha I) C = Y`` by Nyström-preconditioned CG.

    Parameters
    ----------
    product : KernelProduct
    Y : ndarray of shape (n,) or (n, k), float64
    alpha : float or ndarray of shape (k,)
        > 0 (the preconditioner needs a positive shift).
    tol : float
        Relative residual per column.
    max_iter : int
    random_state : numpy.random.RandomState

    Returns
    -------
    C : ndarray, shape of ``Y``
    n_iter : int
    rank : int
        Rank of the Nyström preconditioner.

    Warns
    -----
    ConvergenceWarning
        When ``max_iter`` is reached before ``tol``.
    """
    # one BLAS thread: the sketch and CG are many small dense calls plus memory-bound
    # products, where threaded OpenBLAS gains little and stalls badly on busy cores
    # (measured: 3x slower on a loaded 2-core machine)
    with single_blas_thread():
        return _pcg_ridge(product, Y, alpha, tol, max_iter, random_state, progress, owner)


def _pcg_ridge(product, Y, alpha, tol, max_iter, random_state, progress, owner):
    a = np.atleast_1d(np.asarray(alpha, np.float64))
    mu = float(a.min())
    n = product.n
    # the sketch holds about six n x l float64 arrays at its peak: keep them within half
    # of the held kernel matrix (or 4 x working_memory), so the preconditioner never
    # costs more memory than the matrix it preconditions
    budget = max(4 * get_config()["working_memory"] * 2**20, 0.5 * product.nbytes())
    max_rank = min(_MAX_RANK, max(1, n // 2), max(_RANK0, int(budget // (48 * n))))
    k = 1 if Y.ndim == 1 else Y.shape[1]
    fixed = 0.0 if product.stored else float(product.X.shape[1])
    U, lam = nystrom_sketch(product, n, mu, random_state, max_rank=max_rank, n_targets=k,
                            tol=tol, fixed_cost=fixed, progress=progress)
    precond = NystromPreconditioner(U, lam, a)
    a_cols = a[None, :] if Y.ndim == 2 else a[0]

    def apply_A(V):
        V = V.reshape(Y.shape)
        return (product(V) + a_cols * V).reshape(n, -1)

    # scale-free: solve for Y / rms(Y) (float32 products would lose tiny or huge targets)
    scale = float(np.sqrt(np.mean(np.square(Y / max(np.abs(Y).max(), 1e-300)))))
    scale *= max(float(np.abs(Y).max()), 1e-300)
    scale = scale if np.isfinite(scale) and scale > 0 else 1.0
    Ys = Y / scale
    C, n_iter, rel = conjugate_gradient(apply_A, Ys, tol, max_iter, precond=precond,
                                        progress=progress)
    if np.any(rel > tol) and product.dtype == np.float32 and product.op is not None:
        # float32 products stall near eps32 * cond(K + alpha I): refine with float64
        # residuals (recomputed blockwise) and float32 inner solves
        exact = KernelProduct(product.op, product.X, sw=product.sw, dtype=np.float64,
                              cache_size=0.0)
        ynorm = np.linalg.norm(Ys.reshape(n, -1), axis=0)
        last = np.inf
        for _ in range(4):
            R = Ys - (exact(C) + a_cols * C)
            rel = np.linalg.norm(R.reshape(n, -1), axis=0) / np.where(ynorm > 0, ynorm, 1.0)
            if not np.any(rel > tol) or rel.max() > 0.5 * last:  # done, or not helping
                break
            last = rel.max()
            dC, it, _ = conjugate_gradient(apply_A, R, tol * ynorm.max() /
                                           max(float(np.linalg.norm(R)), 1e-300),
                                           max_iter, precond=precond, progress=progress)
            C, n_iter = C + dC, n_iter + it
    C = C * scale
    if progress is not None:
        progress("PCG done", n_iter, max_iter, rank=U.shape[1], max_rel_residual=float(rel.max()))
    if np.any(rel > tol):
        warnings.warn(f"{owner} solver='pcg' stopped after {n_iter} iterations (max_iter="
                      f"{max_iter}) with relative residual {rel.max():.3g} > tol={tol:g}; "
                      "increase max_iter, tol or alpha, or use solver='cholesky'.",
                      ConvergenceWarning, stacklevel=5)
    if not np.all(np.isfinite(C)):
        raise ValueError("the pcg solve produced non-finite coefficients; check alpha and the "
                         "kernel parameters.")
    return C, n_iter, U.shape[1]
