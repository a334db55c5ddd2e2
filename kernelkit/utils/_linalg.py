"""Stable dense linear algebra for kernel systems."""

import warnings

import numpy as np
from scipy import linalg
from scipy.linalg import lapack

from ._potrf import potrf
from ._threads import blas_threads_for


def solve_ridge(K, Y, alpha, return_inv_diag=False, overwrite_k=False, psd=False, info=None):
    """Solve ``(K + alpha I) C = Y`` for symmetric positive semi-definite ``K``.

    Cholesky in float64 of ``K + alpha I`` equilibrated to a unit diagonal (rows of
    very different scale, e.g. large sample weights, cost no accuracy); when it fails
    or succeeds on a numerically singular matrix (reciprocal condition estimate of the
    equilibrated matrix below ``n * eps``; e.g. ``alpha = 0`` with duplicate points)
    the minimum-norm least-squares solution ``pinv(K + alpha I) @ Y`` (the cutoff of
    ``numpy.linalg.pinv``) is computed from the eigendecomposition of ``K`` instead, with a
    :class:`scipy.linalg.LinAlgWarning`.

    Parameters
    ----------
    K : ndarray of shape (n, n), float64
        Not modified, unless ``overwrite_k``.
    Y : ndarray of shape (n,) or (n, k)
    alpha : float or ndarray of shape (k,)
        Ridge penalty, >= 0; one per column of ``Y`` when an array.
    return_inv_diag : bool, default=False
        Also return the diagonal of ``(K + alpha I)^-1`` (of the pseudo-inverse on the
        fallback path), for exact leave-one-out values: from the Cholesky factor by one
        triangular inversion (LAPACK trtri, ``n^3/3`` flops, as many as the
        factorization).
    info : dict, optional
        On the minimum-norm path, receives ``"residual"``: ``Y - (K + alpha I) C``, the
        part of each column outside the range the solution reaches (what a bordered
        system's intercept must fit, :func:`~kernelkit.ridge._intercept.split_joint`).

    Returns
    -------
    C : ndarray, same shape as ``Y``
    inv_diag : ndarray of shape (n,) or (n, k)
        Only with ``return_inv_diag``; one column per column of ``Y`` on the
        fallback path.

    Raises
    ------
    ValueError
        If the solution is not finite.
    """
    with blas_threads_for(K.shape[0]):  # the one thread-count rule (utils._threads)
        return _solve_ridge(K, Y, alpha, return_inv_diag, overwrite_k, psd, info)


def _inv_diag(factor, s):
    """``diag(A^-1)`` for ``A = D^-1/2 A_eq D^-1/2`` from the Cholesky factor of ``A_eq``
    (``s = D^-1/2``): one in-place trtri, then squared norms of the inverse factor's
    columns (lower) or rows (upper), one column block at a time (the other triangle of
    the factor is stale: each block keeps only its own triangle)."""
    c, lower = factor
    inv, info = lapack.dtrtri(c, lower=int(lower), overwrite_c=1)
    if info != 0:
        return None
    n = inv.shape[0]
    d = np.empty(n)
    for j0 in range(0, n, 256):
        j1 = min(n, j0 + 256)
        if lower:  # (A_eq^-1)_ii = ||L^-1 e_i||^2: column i of L^-1, rows i..n
            blk = np.tril(inv[j0:, j0:j1])
            d[j0:j1] = np.einsum("ij,ij->j", blk, blk)
        else:  # (A_eq^-1)_ii = ||row i of U^-1||^2, columns i..n
            blk = np.triu(inv[j0:j1, j0:])
            d[j0:j1] = np.einsum("ij,ij->i", blk, blk)
    return d * s * s


def _solve_ridge(K, Y, alpha, return_inv_diag=False, overwrite_k=False, psd=False, info=None):
    alphas = np.atleast_1d(np.asarray(alpha, dtype=np.float64))
    n = K.shape[0]
    if np.all(alphas == alphas[0]):
        a0 = float(alphas[0])
        d = np.diag(K) + a0  # the diagonal of K + alpha I (a copy)
        if np.all(d > 0) and np.all(np.isfinite(d)):
            A = _workspace(K, overwrite_k)
            Af = A if A.flags.f_contiguous else A.T  # the same symmetric matrix, for LAPACK
            # Equilibrate to a unit diagonal first: Cholesky's accuracy depends on the condition
            # of D^-1/2 A D^-1/2, not of A (van der Sluis), so sample weights of 1e14 or rows of
            # very different norms are solved exactly where A's own condition estimate is huge.
            # A constant diagonal (stationary kernels, no weights) needs no scaling.
            s = 1.0 / np.sqrt(d)
            scaled = bool(d.max() != d.min())
            _shift_scale(Af, a0, s if scaled else None)
            s = s if scaled else np.ones(n)
            anorm = float(lapack.dlange("1", Af))  # 1-norm, for the condition estimate
            try:
                if potrf(Af, lower=False):  # cho_factor's upper factor, in place
                    raise linalg.LinAlgError("not positive definite")
                factor = (Af, False)
                if _well_conditioned(factor, anorm, a0 * float(np.min(s * s)), n, psd):
                    sY = s if Y.ndim == 1 else s[:, None]
                    C = sY * linalg.cho_solve(factor, sY * Y, check_finite=False)
                    if np.all(np.isfinite(C)):
                        if not return_inv_diag:
                            return C
                        dinv = _inv_diag(factor, s)
                        if dinv is not None and np.all(np.isfinite(dinv)):
                            return C, dinv
            except linalg.LinAlgError:
                pass
            if A is K:  # rebuild K from the triangle that the factorization left untouched
                _restore(Af, a0, s, d)
        warnings.warn(
            f"K + alpha*I is singular or not numerically positive definite (alpha="
            f"{alphas[0]:g}); using the minimum-norm least-squares solution from an "
            "eigendecomposition instead. Increase alpha to regularise.",
            linalg.LinAlgWarning, stacklevel=4)
    return _min_norm_solve(K, Y, alphas, return_inv_diag, info)


def _workspace(K, overwrite_k):
    """``K`` itself where it may be overwritten (float64, contiguous, writeable), else a
    copy in its own memory order (a symmetric matrix needs no transposition)."""
    if (overwrite_k and isinstance(K, np.ndarray) and K.dtype == np.float64
            and K.flags.writeable and (K.flags.c_contiguous or K.flags.f_contiguous)):
        return K
    K = np.asarray(K, dtype=np.float64)
    return np.array(K, order="F" if K.flags.f_contiguous else "C", copy=True)


def _shift_scale(Af, a0, s, rows=256):
    """In place: ``Af += a0 I``, then ``Af = S Af S`` (``s`` None: no scaling), one pass
    over column blocks."""
    n = Af.shape[0]
    idx = np.arange(n)
    Af[idx, idx] += a0
    if s is None:
        return
    for j0 in range(0, n, rows):
        j1 = min(n, j0 + rows)
        Af[:, j0:j1] *= s[:, None] * s[None, j0:j1]


def _well_conditioned(factor, anorm, lam_lo, n, psd):
    """Whether the equilibrated ``A`` (factored) is far from numerical singularity:
    reciprocal condition above ``n * eps``.

    For a positive semi-definite ``K`` the smallest eigenvalue of ``S (K + alpha I) S``
    is at least ``lam_lo = alpha min(s^2)`` and ``||A^-1||_1 <= sqrt(n) / lam_lo``, so
    ``rcond >= lam_lo / (sqrt(n) ||A||_1)``: when that bound clears ``n * eps`` with a
    margin of 100 (round-off in ``K``'s evaluation), no estimate is needed. Otherwise
    (or for a kernel not known to be PSD) LAPACK pocon estimates it (O(n^2), a few
    triangular solves)."""
    eps = np.finfo(np.float64).eps
    if psd and lam_lo > 100.0 * n * eps * np.sqrt(n) * anorm:
        return True
    rcond, info = lapack.dpocon(factor[0], anorm, uplo="L" if factor[1] else "U")
    return info == 0 and rcond > n * eps


def _restore(Af, a0, s, d):
    """Undo :func:`_shift_scale` and a (failed) factorization on ``Af``: LAPACK wrote
    the upper triangle only, the strict lower one still holds ``S (K + a0 I) S``."""
    n = Af.shape[0]
    for j0 in range(0, n, 256):  # strict lower triangle, unscaled, then mirrored
        j1 = min(n, j0 + 256)
        Af[:, j0:j1] /= s[:, None] * s[None, j0:j1]
    low = np.tril(Af, -1)
    Af[...] = low
    Af += low.T
    idx = np.arange(n)
    Af[idx, idx] = d - a0


def _min_norm_solve(K, Y, alphas, return_inv_diag=False, info=None):
    """``pinv(K + alpha I) @ Y`` per column from one eigendecomposition of ``K``.

    The cutoff is that of ``numpy.linalg.pinv(A, rtol=None)``: ``n eps`` times the
    largest ``|w + alpha|``, relative at every scale of ``K``, so that the result is the
    minimum-norm least-squares solution that the warning announces.
    """
    n = K.shape[0]
    w, V = linalg.eigh(K, check_finite=False)
    proj = V.T @ Y
    Y2 = proj.reshape(n, -1)
    a = np.broadcast_to(alphas, (Y2.shape[1],))
    denom = w[:, None] + a[None, :]
    cut = n * np.finfo(np.float64).eps * np.abs(denom).max(axis=0, initial=0.0)
    keep = np.abs(denom) > cut[None, :]
    inv = np.where(keep, 1.0 / np.where(keep, denom, 1.0), 0.0)
    C = (V @ (Y2 * inv)).reshape(Y.shape)
    if info is not None:  # the dropped directions' part of Y: Y - (K + alpha I) C
        info["residual"] = (V @ np.where(keep, 0.0, Y2)).reshape(Y.shape)
    if not np.all(np.isfinite(C)):
        raise ValueError("kernel ridge solve produced non-finite coefficients; check alpha "
                         "and the kernel parameters.")
    if return_inv_diag:
        return C, (V * V) @ inv  # diag of the pseudo-inverse, per column
    return C


def weighted_kernel(K, sw, owned=False):
    """``S K S`` with ``S = diag(sw)`` (``sw`` None: ``K``) for :func:`solve_ridge`, and
    whether the result may be its workspace (``overwrite_k``).

    ``owned``: the caller needs ``K`` no more (a matrix it computed itself), so the rows
    are weighted in place (one column block at a time) rather than into a new matrix.
    """
    if sw is None:
        return K, owned
    if not owned:
        K = K * sw[:, None]
    for j0 in range(0, K.shape[1], 256):
        j1 = min(K.shape[1], j0 + 256)
        if owned:
            K[:, j0:j1] *= sw[:, None] * sw[None, j0:j1]
        else:
            K[:, j0:j1] *= sw[None, j0:j1]
    return K, True
