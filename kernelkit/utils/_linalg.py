"""Stable dense linear algebra for kernel systems."""

import warnings

import numpy as np
from scipy import linalg
from scipy.linalg import lapack

from ._threads import blas_threads_for


def solve_ridge(K, Y, alpha, return_inv_diag=False):
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
        Not modified.
    Y : ndarray of shape (n,) or (n, k)
    alpha : float or ndarray of shape (k,)
        Ridge penalty, >= 0; one per column of ``Y`` when an array.
    return_inv_diag : bool, default=False
        Also return the diagonal of ``(K + alpha I)^-1`` (of the pseudo-inverse on the
        fallback path), for exact leave-one-out values: from the Cholesky factor by one
        triangular inversion (LAPACK trtri, ``n^3/3`` flops, as many as the
        factorization).

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
        return _solve_ridge(K, Y, alpha, return_inv_diag)


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


def _solve_ridge(K, Y, alpha, return_inv_diag=False):
    alphas = np.atleast_1d(np.asarray(alpha, dtype=np.float64))
    n = K.shape[0]
    if np.all(alphas == alphas[0]):
        A = np.array(K, dtype=np.float64, order="F", copy=True)
        A.flat[:: n + 1] += alphas[0]
        # Equilibrate to a unit diagonal first: Cholesky's accuracy depends on the condition
        # of D^-1/2 A D^-1/2, not of A (van der Sluis), so sample weights of 1e14 or rows of
        # very different norms are solved exactly where A's own condition estimate is huge
        d = np.diag(A).copy()
        if np.all(d > 0) and np.all(np.isfinite(d)):
            s = 1.0 / np.sqrt(d)
            A *= s[:, None]
            A *= s[None, :]
            anorm = float(np.abs(A).sum(axis=0).max())  # 1-norm, for the condition estimate
            try:
                factor = linalg.cho_factor(A, overwrite_a=True, check_finite=False)
                # A factorization that succeeds on a numerically singular matrix returns
                # huge, wrong coefficients: estimate the reciprocal condition number (LAPACK
                # pocon, O(n^2)) and take the stable path below when it is at round-off level
                rcond, info = lapack.dpocon(factor[0], anorm, uplo="L" if factor[1] else "U")
                if info == 0 and rcond > n * np.finfo(np.float64).eps:
                    sY = s if Y.ndim == 1 else s[:, None]
                    C = sY * linalg.cho_solve(factor, sY * Y, check_finite=False)
                    if np.all(np.isfinite(C)):
                        if not return_inv_diag:
                            return C
                        d = _inv_diag(factor, s)
                        if d is not None and np.all(np.isfinite(d)):
                            return C, d
            except linalg.LinAlgError:
                pass
        warnings.warn(
            f"K + alpha*I is singular or not numerically positive definite (alpha="
            f"{alphas[0]:g}); using the minimum-norm least-squares solution from an "
            "eigendecomposition instead. Increase alpha to regularise.",
            linalg.LinAlgWarning, stacklevel=4)
    return _min_norm_solve(K, Y, alphas, return_inv_diag)


def _min_norm_solve(K, Y, alphas, return_inv_diag=False):
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
    if not np.all(np.isfinite(C)):
        raise ValueError("kernel ridge solve produced non-finite coefficients; check alpha "
                         "and the kernel parameters.")
    if return_inv_diag:
        return C, (V * V) @ inv  # diag of the pseudo-inverse, per column
    return C
