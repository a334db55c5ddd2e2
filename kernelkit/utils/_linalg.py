"""Stable dense linear algebra for kernel systems."""

import warnings

import numpy as np
from scipy import linalg
from scipy.linalg import lapack

from ._threads import blas_threads_for


def solve_ridge(K, Y, alpha):
    """Solve ``(K + alpha I) C = Y`` for symmetric positive semi-definite ``K``.

    Cholesky in float64; when it fails or succeeds on a numerically singular matrix
    (reciprocal condition estimate below ``n * eps``; e.g. ``alpha = 0`` with
    duplicate points) the
    minimum-norm solution is computed from the eigendecomposition of ``K`` instead,
    with a :class:`scipy.linalg.LinAlgWarning`.

    Parameters
    ----------
    K : ndarray of shape (n, n), float64
        Not modified.
    Y : ndarray of shape (n,) or (n, k)
    alpha : float or ndarray of shape (k,)
        Ridge penalty, >= 0; one per column of ``Y`` when an array.

    Returns
    -------
    C : ndarray, same shape as ``Y``

    Raises
    ------
    ValueError
        If the solution is not finite.
    """
    with blas_threads_for(K.shape[0]):  # the one thread-count rule (utils._threads)
        return _solve_ridge(K, Y, alpha)


def _solve_ridge(K, Y, alpha):
    alphas = np.atleast_1d(np.asarray(alpha, dtype=np.float64))
    n = K.shape[0]
    if np.all(alphas == alphas[0]):
        A = np.array(K, dtype=np.float64, order="F", copy=True)
        A.flat[:: n + 1] += alphas[0]
        anorm = float(np.abs(A).sum(axis=0).max())  # 1-norm, for the condition estimate
        try:
            factor = linalg.cho_factor(A, overwrite_a=True, check_finite=False)
            # A factorization that succeeds on a numerically singular matrix returns huge,
            # wrong coefficients: estimate the reciprocal condition number (LAPACK pocon,
            # O(n^2)) and take the stable path below when it is at round-off level.
            rcond, info = lapack.dpocon(factor[0], anorm, uplo="L" if factor[1] else "U")
            if info == 0 and rcond > n * np.finfo(np.float64).eps:
                C = linalg.cho_solve(factor, Y, check_finite=False)
                if np.all(np.isfinite(C)):
                    return C
        except linalg.LinAlgError:
            pass
        warnings.warn(
            f"K + alpha*I is singular or not numerically positive definite (alpha="
            f"{alphas[0]:g}); using the minimum-norm least-squares solution from an "
            "eigendecomposition instead. Increase alpha to regularise.",
            linalg.LinAlgWarning, stacklevel=4)
    w, V = linalg.eigh(K, check_finite=False)
    tol = n * np.finfo(np.float64).eps * max(1.0, float(np.abs(w).max()))
    proj = V.T @ Y
    Y2 = proj.reshape(n, -1)
    a = np.broadcast_to(alphas, (Y2.shape[1],))
    denom = w[:, None] + a[None, :]
    inv = np.where(np.abs(denom) > tol, 1.0 / np.where(np.abs(denom) > tol, denom, 1.0), 0.0)
    C = (V @ (Y2 * inv)).reshape(Y.shape)
    if not np.all(np.isfinite(C)):
        raise ValueError("kernel ridge solve produced non-finite coefficients; check alpha "
                         "and the kernel parameters.")
    return C
