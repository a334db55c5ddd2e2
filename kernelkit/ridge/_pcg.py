"""Conjugate gradients for kernel ridge: the shared CG loop and the Nyström preconditioner.

Exact kernel ridge solves ``(K + alpha I) C = Y``. :func:`pcg_ridge` solves it by
conjugate gradients preconditioned with a randomized Nyström approximation
``K ~ F F^T`` (Frangella, Tropp & Udell, "Randomized Nyström Preconditioning", SIAM J.
Matrix Anal. Appl. 44(2), 2023), here drawn by block randomly pivoted Cholesky (Chen,
Epperly, Tropp & Webber, "Randomly pivoted Cholesky: Practical approximation of a
kernel matrix with few entry evaluations", Comm. Pure Appl. Math. 2024), the
preconditioner Díaz, Epperly, Frangella, Tropp & Webber ("Robust, randomized
preconditioning for kernel ridge regression", 2023) recommend for kernel ridge: it
reads ``r`` columns of ``K`` and its diagonal (``O(n r)`` kernel entries, ``O(n r^2)``
flops) where a Gaussian sketch needs ``r`` full products with ``K``. With the rank
near the effective dimension ``d_eff(alpha)`` the preconditioned system has a
condition number ``O(1)`` whatever ``n`` (FTU's Theorem 5.1; Díaz et al.'s analysis
for RPCholesky), so the iteration count stays bounded as ``n`` grows. Targets are solved
together: one preconditioner, one kernel product per iteration for all columns, each
column its own CG scalars.

The kernel matrix is held in float32 when it fits ``cache_size`` (products in
float32, CG vectors and scalars in float64), else every product recomputes it blockwise
through the resolver's fused ``matmul`` (float64, ``working_memory`` bounded).
"""

import contextlib
import warnings

import numpy as np
from scipy import linalg
from sklearn.exceptions import ConvergenceWarning

from .._config import get_config
from ..utils._threads import blas_threads_for, map_row_blocks, single_blas_thread
from ._kernel_product import PANEL_ROWS, KernelProduct

# tolerances at or above this are met by float32 kernel products (float32 holds K to
# ~6e-8 relative; the residual floor of a float32 product is a few times that)
FLOAT32_MIN_TOL = 1e-6
DEFAULT_MAX_ITER = 500
_RANK0 = 128             # first rank checked (then doubled)
_BLOCK = 128             # pivots drawn per block-RPCholesky step
_RANK_RATIO = 10.0       # stop growing once the last Nyström eigenvalue <= this * alpha
_MAX_RANK = 4096
# A held K: the two passes over F (n x r float64) per iteration cost about 4 r / n of a
# float32 product; r <= n / 8 keeps them within a half (on Fashion-MNIST, n 4,000, alpha
# 1e-3-1e-4: 14-30% fewer iterations than n / 16, 3-13% fewer product-equivalents), and
# r <= 1,280: beyond, the sketch's n r^2 work outgrows its saving (n 20,000, alpha 1e-2:
# fits of 29.2 / 20.7 s at rank 1,250, 31.2 / 24.1 s at 2,500, gamma 0.01 / 0.05)
_HELD_RANK_FRACTION, _MAX_HELD_RANK = 1 / 8, 1280
_PATIENCE = 25           # CG steps without a 10% gain before float32 products count as stalled
# ... counted once the residual is within this factor of tol (float32's floor lies near
# tol; an early plateau far above it is CG's own, e.g. 25 steps at 0.82 of the start at
# alpha 1e-4, n 3,000, which float64 products would only repeat)
_STALL_ZONE = 100.0


def product_dtype(tol, forced=None):
    """float32 when ``tol`` allows float32 kernel products, else float64."""
    if forced is not None:
        return np.dtype(forced)
    return np.dtype(np.float32) if tol >= FLOAT32_MIN_TOL else np.dtype(np.float64)


def target_scale(Y2):
    """Per column of ``Y2 (n, k)``: its root mean square, computed without overflow or
    underflow (1 for a zero column). Solvers divide targets by it and multiply the
    coefficients back, so that ``y`` and ``c y`` give ``c`` times the coefficients for
    any ``c`` float64 holds, and a tiny column beside a large one keeps its digits."""
    top = np.abs(Y2).max(axis=0)
    top = np.where(top > 0, top, 1.0)
    scale = np.sqrt(np.mean(np.square(Y2 / top), axis=0)) * top
    return np.where(np.isfinite(scale) & (scale > 0), scale, 1.0)


def rp_cholesky(columns, diag, mu, rng, *, max_rank, eps=2.0**-52,
                block=_BLOCK, progress=None, info=None, stop=None):
    """Block randomly pivoted Cholesky: ``K ~ F F^T`` from a few columns of a psd ``K``.

    Chen, Epperly, Tropp & Webber (2024), block RPCholesky: draw ``block`` pivots
    i.i.d. with probabilities proportional to the diagonal of the residual
    ``K - F F^T``, take the residual's columns ``G`` at the (distinct) pivots and add
    the Nyström update ``G W^+ G^T`` (``W`` the pivots' block of ``G``, factored by an
    eigendecomposition that drops its numerically zero directions, so an exactly
    low-rank or duplicated-point kernel stops early instead of failing). The rank is
    doubled from ``_RANK0`` and stops growing when the smallest eigenvalue of
    ``F F^T`` is at most ``10 mu`` (the preconditioned condition number is then about
    ``1 + ||K - F F^T|| / mu``, small), when the residual trace vanishes, or at
    ``max_rank``.

    Parameters
    ----------
    columns : callable
        ``S (s,) int -> K[:, S]`` as an ``(n, s)`` float64 array.
    diag : ndarray of shape (n,)
        The diagonal of ``K`` (the same values the columns hold there).
    mu : float
        The ridge shift (smallest ``alpha``).
    rng : numpy.random.RandomState
    max_rank : int
    eps : float
        Relative accuracy of the columns (float32's eps for a float32-held ``K``): a
        row's residual below ``1000 eps`` times its diagonal is rounding, not signal (the
        updates ``G - F F_S^T`` accumulate it).
    info : dict, optional
        Filled with ``lam_min`` (the estimated smallest eigenvalue of ``F^T F``, i.e. of
        the Nyström approximation, 0 for rank 0), ``residual_trace``
        (``tr(K - F F^T)``), ``rank`` and ``stopped``: what the ``solver="auto"`` cost
        model reads.
    stop : callable, optional
        ``stop(rank, lam_min, max_rank) -> bool`` at each rank check where the rank would grow:
        True ends the pivoting there (``info["stopped"]``; ``solver="auto"`` abandons
        a sketch once PCG cannot win).

    Returns
    -------
    F : ndarray of shape (n, r), float64
    FtF : ndarray of shape (r, r), float64
        ``F^T F``.
    """
    n = diag.shape[0]
    d = np.clip(np.asarray(diag, np.float64), 0.0, None)
    max_rank = max(1, min(int(max_rank), n))
    F = np.empty((n, max_rank))
    F32 = np.empty((n, max_rank), np.float32) if eps >= np.finfo(np.float32).eps else None
    FtF = np.empty((max_rank, max_rank))
    # a row's residual below this is rounding (of float32 columns, or of the updates), per
    # row: rows of very different scale (sample weights of 1e20) round at their own scale
    floor = 1000 * eps * d
    k, check, lam_min, stopped = 0, min(_RANK0, max_rank), None, False
    while k < max_rank:
        d[d <= floor] = 0.0
        total = float(d.sum())
        if not np.isfinite(total):  # F F^T ~ K: its trace, ||F||_F^2, overflows too
            raise ValueError("the kernel's diagonal sums beyond float64's range (the "
                             "Nystrom factor of solver='pcg' would overflow); rescale X or "
                             "the sample weights, or use solver='cholesky'.")
        if not total > 0:
            break
        S = np.unique(rng.choice(n, min(block, check - k), p=d / total))
        G = columns(S)
        if k:  # the residual's columns; float32 columns tolerate a float32 update
            Fu = F if F32 is None else F32
            G -= Fu[:, :k] @ Fu[S, :k].T
        with single_blas_thread():  # a small eigenproblem: a second thread only stalls
            w, V = linalg.eigh((G[S] + G[S].T) / 2, check_finite=False)
        keep = w > max(float(floor[S].min()), float(w[-1]) * len(S) * 100 *
                       np.finfo(np.float64).eps)
        if not keep.any():
            d[S] = 0.0  # only rounding left at these pivots
            continue
        V, w = V[:, keep], w[keep]
        j = min(V.shape[1], max_rank - k)
        Fn = G @ (V[:, -j:] / np.sqrt(w[-j:]))
        F[:, k:k + j] = Fn
        if F32 is not None:
            F32[:, k:k + j] = Fn
        FtF[:k, k:k + j] = F[:, :k].T @ Fn
        FtF[k:k + j, :k] = FtF[:k, k:k + j].T
        FtF[k:k + j, k:k + j] = Fn.T @ Fn
        k += j
        d -= np.einsum("ij,ij->i", Fn, Fn)
        np.clip(d, 0.0, None, out=d)
        d[S] = 0.0  # the pivots are interpolated exactly
        lam_min = None  # of an earlier rank
        if k >= check and k < max_rank:
            lam_min = _smallest_eigenvalue(FtF[:k, :k], rng)
            if progress is not None:
                progress("Nystrom rank", k, level=2, last_eig=lam_min, alpha=float(mu),
                         residual_trace=float(d.sum()))
            if lam_min <= _RANK_RATIO * mu:
                break
            if stop is not None and stop(k, lam_min, max_rank):
                stopped = True
                break
            check = min(2 * check, max_rank)
    if info is not None:
        if lam_min is None:
            lam_min = _smallest_eigenvalue(FtF[:k, :k], rng) if k else 0.0
        info.update(lam_min=float(lam_min), residual_trace=float(d.sum()), rank=k,
                    stopped=stopped)
    return F[:, :k].copy() if k < max_rank else F, FtF[:k, :k].copy()


def _smallest_eigenvalue(A, rng, n_iter=8):
    """Rayleigh quotient of inverse iteration on a psd ``A`` (0 if it is singular).

    An upper estimate of ``lambda_min(A)``, good within a small factor after a few
    steps (all the rank rule needs), for ``r^3 / 3`` flops where a dense
    eigensolver costs ``~10 r^3``.
    """
    with single_blas_thread():  # r <= 4,096: on two threads a 128 x 128 factor took 42 ms
        try:
            c = linalg.cho_factor(A, lower=True, check_finite=False)
        except linalg.LinAlgError:
            return 0.0
        x = rng.standard_normal(A.shape[0])
        for _ in range(n_iter):
            x = linalg.cho_solve(c, x, check_finite=False)
            x /= np.linalg.norm(x)
            if not np.all(np.isfinite(x)):
                return 0.0
        return float(x @ (A @ x))


class NystromPreconditioner:
    """``P = F F^T + mu I``, applied as ``P^-1 R = (R - F (mu I + F^T F)^-1 F^T R) / mu``.

    The Nyström preconditioner (FTU 2023, eq. (5.3) up to the scaling of its range;
    Díaz et al. 2023, eq. (2.3)) by the Woodbury identity: one Cholesky factor of an
    ``r x r`` matrix per distinct ``mu`` (an ``alpha`` per target), float64 throughout
    (``1 - s^2 / (s^2 + mu)`` cancels to float32's eps when ``mu`` is tiny).
    """

    def __init__(self, F, FtF, mu):
        self.F = F
        self.mu = np.atleast_1d(np.asarray(mu, np.float64))
        r = F.shape[1]
        self._factors = {}
        # F^T F is psd up to its rounding, which kernel values far above alpha (a
        # polynomial of high degree) can make larger than mu: only then a shift at that
        # rounding (any mu' >= mu still gives CG an spd preconditioner; always taking it
        # would weaken the preconditioner of rows weighted far below the largest)
        jitter = r * np.finfo(np.float64).eps * float(np.max(np.diag(FtF), initial=0.0))
        for m in np.unique(self.mu):
            for shift in (float(m), max(float(m), jitter), None):
                if shift is None:
                    raise ValueError(
                        "the Nystrom preconditioner of solver='pcg' cannot be factored: the "
                        "kernel's values are too large for float64 against alpha; rescale "
                        "X, check the kernel's parameters or use solver='cholesky'.")
                try:
                    self._factors[float(m)] = linalg.cho_factor(
                        FtF + shift * np.eye(r), lower=True, check_finite=False)
                    break
                except linalg.LinAlgError:
                    continue

    def __call__(self, R):
        R2 = np.ascontiguousarray(R.reshape(R.shape[0], -1), dtype=np.float64)
        mu = np.broadcast_to(self.mu, (R2.shape[1],))
        if self.F.shape[1] == 0:
            return (R2 / mu).reshape(R.shape)
        n, F = R2.shape[0], self.F
        rows = max(PANEL_ROWS, -(-n // 8))
        parts = {}

        def left(r0, r1):  # F^T R by row panels, summed below (one pass over F)
            parts[r0] = F[r0:r1].T @ R2[r0:r1]

        map_row_blocks(left, n, rows)
        G = sum(parts.values())
        for m, fac in self._factors.items():
            cols = np.flatnonzero(mu == m)
            G[:, cols] = linalg.cho_solve(fac, G[:, cols], check_finite=False)
        out = np.empty_like(R2)

        def right(r0, r1):
            out[r0:r1] = (R2[r0:r1] - F[r0:r1] @ G) / mu[None, :]

        map_row_blocks(right, n, rows)
        return out.reshape(R.shape)


def conjugate_gradient(apply_A, B, tol, max_iter, *, precond=None, progress=None,
                       slack=None, patience=None, row_scale=None, monitor=None,
                       stall_below=None):
    """Preconditioned CG on the columns of ``B`` in lockstep (one product per step).

    Stops when every column's residual ``||b - A x|| <= tol ||b||`` (recursive
    residual, float64), or ``||b - A x|| / ||b|| + slack(x) <= tol`` with ``slack``
    (per column: an error of ``A`` itself that the recursive residual cannot see).
    With ``row_scale`` (n,), both norms weigh row ``i`` by ``row_scale[i]``: CG on
    ``S A S z = S b`` then stops on the residual of ``A x = b`` (``x = S z``), the
    system a sample-weighted ridge solves, whatever the weights' range.
    With ``patience``, also when the largest residual has not improved by 10% for that
    many steps (CG on rounded products stalls, or diverges, near their noise floor),
    returning the best iterate seen (``x = 0`` included) rather than the last. With
    ``stall_below``, steps count towards ``patience`` only once the best residual is
    below it (CG's residual is not monotone: a strongly preconditioned solve at small
    ``alpha`` plateaus near its start for 20 steps and more before it falls), or after
    four times ``patience`` steps without that gain anywhere.
    ``monitor(it, rel)`` is called after every step with the largest relative residual
    (``solver="auto"``'s bail-out raises from it).

    Returns
    -------
    X : ndarray, shape of ``B``, float64
    n_iter : int
    rel_res : ndarray of shape (n_columns,)
    """
    B2 = np.asarray(B, np.float64).reshape(B.shape[0], -1)
    rs = None if row_scale is None else np.asarray(row_scale, np.float64)[:, None]

    def norm(R):
        return np.linalg.norm(R if rs is None else R * rs, axis=0)

    bnorm = norm(B2)
    safe = np.where(bnorm > 0, bnorm, 1.0)
    X = np.zeros_like(B2)
    R = B2.copy()
    Z = R if precond is None else precond(R)
    P = Z.copy()
    rz = np.einsum("ij,ij->j", R, Z)
    rel = norm(R) / safe
    gap = np.zeros_like(rel)
    best, best_X, best_rel, since = float(rel.max()), X.copy(), rel.copy(), 0
    it = 0
    while it < max_iter and np.any(rel + gap > tol):
        it += 1
        AP = apply_A(P)
        pap = np.einsum("ij,ij->j", P, AP)
        live = (rel + gap > tol) & (pap > 0)  # converged columns are frozen
        if not np.any(live):
            break
        step = np.where(live, rz / np.where(live, pap, 1.0), 0.0)
        X += step * P
        R -= step * AP
        rel = norm(R) / safe
        if slack is not None:
            gap = slack(X)
        Z = R if precond is None else precond(R)
        rz_new = np.einsum("ij,ij->j", R, Z)
        beta = np.where(live & (rz > 0), rz_new / np.where(rz > 0, rz, 1.0), 0.0)
        P = Z + beta * P
        rz = rz_new
        if progress is not None:
            progress("CG iteration", it, max_iter, level=2, max_rel_residual=float(rel.max()))
        if monitor is not None:
            monitor(it, float((rel + gap).max()))
        if patience is not None:
            cur = float((rel + gap).max())
            if cur < best:
                since = 0 if cur < 0.9 * best else since + 1
                best, best_X, best_rel = cur, X.copy(), rel.copy()
            else:
                since += 1
            near = stall_below is None or best <= stall_below
            if since >= (patience if near else 4 * patience) or not np.isfinite(cur):
                break
    if patience is not None and not float((rel + gap).max()) <= best:
        X, rel = best_X, best_rel
    return X.reshape(B.shape), it, rel


def _not_converged(who, n_iter, max_iter, rel, tol, alternative):
    """The warning text of a CG solve that missed ``tol``: the iteration limit when it was
    reached, else a breakdown (``p^T A p <= 0``, or a residual that stopped decreasing:
    rounding in an ill-conditioned system, which more iterations do not cure)."""
    if n_iter >= max_iter:
        return (f"{who} stopped after {n_iter} iterations (max_iter={max_iter}) with relative "
                f"residual {rel:.3g} > tol={tol:g}; increase max_iter, tol or alpha, "
                f"{alternative}.")
    return (f"{who} broke down after {n_iter} iterations (max_iter={max_iter} not reached): "
            f"rounding in this ill-conditioned system stopped the residual at {rel:.3g} > "
            f"tol={tol:g}; increase alpha or tol, {alternative}.")


def nystrom_sketch(product, alpha, random_state, progress=None, stop=None, keep=False):
    """The Nyström factor of the preconditioner, ``(F, FtF, info)`` (see :func:`rp_cholesky`):
    drawn before a held ``K`` is computed (:meth:`KernelProduct.hold`), from float64
    columns of the kernel: ``solver="auto"`` reads the spectrum it leaves (``info``) to
    weigh PCG against Cholesky before paying for ``K``, and the float64 columns let the
    pivoting resolve residuals below float32's rounding (small ``alpha``). The rank
    doubles from 128 while the smallest Nyström eigenvalue exceeds ``10 alpha``, within
    half the held matrix's memory (or ``4 working_memory``), and ``n / 8``, at most
    1,280, when ``K`` is held (applying ``F`` twice per iteration then costs at most
    half a product, and the sketch's ``n r^2`` work stays below what it saves).
    ``stop``: see :func:`rp_cholesky`; ``keep``: the caller drops the prepared columns."""
    a = np.atleast_1d(np.asarray(alpha, np.float64))
    mu = float(a.min())
    n = product.n
    with blas_threads_for(n):
        budget = max(4 * get_config()["working_memory"] * 2**20, 0.5 * product.held_nbytes())
        max_rank = min(_MAX_RANK, n, max(_RANK0, int(budget // (16 * n))))
        if product.stored:
            max_rank = min(max_rank, _MAX_HELD_RANK, max(_RANK0, int(n * _HELD_RANK_FRACTION)))
        info = {}
        try:
            F, FtF = rp_cholesky(product.columns, product.diagonal(), mu, random_state,
                                 max_rank=max_rank, eps=product.eps, progress=progress,
                                 info=info, stop=stop)
        finally:
            if not keep:
                product.drop_columns()
    return F, FtF, info


def pcg_ridge(product, Y, alpha, *, tol, max_iter, random_state, progress=None,
              owner="KernelRidge", sketch=None, monitor=None):
    """Solve ``(K + alpha I) C = Y`` by Nyström-preconditioned CG.

    Parameters
    ----------
    product : KernelProduct
        Its held matrix is computed after the preconditioner is drawn.
    Y : ndarray of shape (n,) or (n, k), float64
    alpha : float or ndarray of shape (k,)
        > 0 (the preconditioner needs a positive shift).
    tol : float
        Relative residual per column.
    max_iter : int
    random_state : numpy.random.RandomState
    sketch : tuple, optional
        :func:`nystrom_sketch`'s result, when the caller drew it already.
    monitor : callable, optional
        ``monitor(it, rel)`` after every CG step (see :func:`conjugate_gradient`).

    Returns
    -------
    C : ndarray, shape of ``Y``
    n_iter : int
    rank : int
        Rank of the Nyström preconditioner.

    Warns
    -----
    ConvergenceWarning
        When ``max_iter`` is reached before ``tol``, or CG breaks down first (rounding
        in an ill-conditioned system), saying which.
    """
    if sketch is None:
        sketch = nystrom_sketch(product, alpha, random_state, progress)
    if progress is not None:
        progress.done("Nystrom preconditioner", rank=sketch[0].shape[1])
    with blas_threads_for(product.n):
        product.hold()
        if progress is not None:
            progress.done("kernel matrix", held=bool(getattr(product, "stored", False)))
        return _pcg_ridge(product, Y, alpha, tol, max_iter, sketch[0], sketch[1], progress,
                          owner, monitor)


def _cg_threads(product):
    """CG over a held ``K`` on one BLAS thread: its products run on kernelkit's row-block
    pool, and a BLAS thread woken by CG's small operations spins on a core that pool needs
    (a 10,000^2 float32 product: 0.054 s inside CG, 0.034 s alone, on 2 cores)."""
    return single_blas_thread() if product.stored else contextlib.nullcontext()


def _pcg_ridge(product, Y, alpha, tol, max_iter, F, FtF, progress, owner, monitor):
    a = np.atleast_1d(np.asarray(alpha, np.float64))
    n = product.n
    precond = NystromPreconditioner(F, FtF, a)
    a_cols = a[None, :] if Y.ndim == 2 else a[0]

    def apply_A(V):
        V = V.reshape(Y.shape)
        return (product(V) + a_cols * V).reshape(n, -1)

    # sample weights: CG runs on S K S + alpha I (the preconditioner's system) but stops on
    # the residual of K + alpha W^-1 (rows divided by S; zero-weight rows, whose
    # coefficients are 0, left out), so a weight of 1e20 cannot hide the other rows'
    # residual; the scale of the weights no longer matters
    sw = product.sw
    row = None if sw is None else np.where(sw > 0, 1.0 / np.where(sw > 0, sw, 1.0), 0.0)

    def norm(R):
        return np.linalg.norm(R if row is None else R * row[:, None], axis=0)

    # scale-free: each target column divided by its rms (float32 products would lose tiny
    # or huge targets, and a tiny column beside a large one)
    Y2 = Y.reshape(n, -1)
    scale = target_scale(Y2 if row is None else Y2 * row[:, None])
    Ys = (Y2 / scale).reshape(Y.shape)
    ynorm = norm(Ys.reshape(n, -1))
    safe = np.where(ynorm > 0, ynorm, 1.0)

    def rounding(C):  # the float32 rounding of a held K, as a relative residual
        return product.storage_error(C) / safe

    # a held float32 K: CG stops when its residual plus the rounding meets tol (while the
    # rounding is small next to tol), or when it stalls near the noise floor of float32
    # products, eps32 cond(K + alpha I); float64 products then finish the solve
    slack = (lambda C: np.minimum(rounding(C), tol / 2)) if product.rounded else None
    with _cg_threads(product):
        C, n_iter, rel = conjugate_gradient(apply_A, Ys, tol, max_iter, precond=precond,
                                            progress=progress, slack=slack,
                                            patience=_PATIENCE if product.rounded else None,
                                            row_scale=row, monitor=monitor,
                                            stall_below=_STALL_ZONE * tol)
    est = rounding(C) if product.rounded else np.zeros_like(rel)
    if product.rounded and n_iter < max_iter and not np.all(rel + est <= tol):
        # float64 products on the true residual: K held in float64 when it fits the
        # cache once the float32 copy is dropped, else recomputed blockwise per product
        op, X, sw, cache = product.op, product.X, product.sw, product.cache_size
        product.K, product.stored = None, False
        exact = KernelProduct(op, X, sw=sw, dtype=np.float64, cache_size=cache).hold()

        def apply_exact(V):
            V = V.reshape(Y.shape)
            return (exact(V) + a_cols * V).reshape(n, -1)

        with _cg_threads(exact):
            R = Ys.reshape(n, -1) - apply_exact(C)
            rnorm = norm(R)
            dC, it, _ = conjugate_gradient(
                apply_exact, R.reshape(Ys.shape),
                float(np.min(tol * safe / np.maximum(rnorm, 1e-300))), max_iter - n_iter,
                precond=precond, progress=progress, row_scale=row)
        C, n_iter = C + dC.reshape(C.shape), n_iter + it
        rel = norm(Ys.reshape(n, -1) - apply_exact(C)) / safe
        est = np.zeros_like(rel)  # rel is now the true residual
        if progress is not None:
            progress("float64 products", n_iter, max_iter, level=1,
                     max_rel_residual=float(rel.max()))
    C = (C.reshape(n, -1) * scale).reshape(C.shape)
    bad = ~(rel + est <= tol)  # NaN counts as not converged
    if progress is not None:
        progress("PCG done", n_iter, max_iter, rank=F.shape[1],
                 max_rel_residual=float((rel + est).max()), seconds=round(progress.lap(), 3))
    if np.any(bad):
        warnings.warn(_not_converged(f"{owner} solver='pcg'", n_iter, max_iter,
                                     float((rel + est).max()), tol,
                                     "or use solver='cholesky'"),
                      ConvergenceWarning, stacklevel=5)
    if not np.all(np.isfinite(C)):
        raise ValueError("the pcg solve produced non-finite coefficients; check alpha and the "
                         "kernel parameters.")
    return C, n_iter, F.shape[1]
