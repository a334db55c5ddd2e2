"""Exact ridge leverage scores and effective dimension (dense, blockwise)."""


import numpy as np
from scipy import linalg
from scipy.linalg import lapack

from ..utils._potrf import potrf
from ..utils._validation import check_kernel_matrix
from ._common import _check_dense_size, _check_gamma_reg, _kernel_eval_from_args
from ._dictionary import _blas_for


def ridge_leverage_scores(X, kernel="rbf", gamma_reg=1.0, *, gamma=None, degree=3, coef0=1,
                          kernel_params=None, backend=None):
    """Exact ridge leverage scores ``tau_i = [K (K + gamma_reg I)^{-1}]_ii``.

    The reference the sequential estimators are tested against, and a tool in its
    own right for data sets whose ``n x n`` kernel matrix fits in memory. The kernel
    matrix is built blockwise by the engine directly into one float64 buffer, which
    is then factored and inverted in place (Cholesky, triangular inverse), so the
    peak memory is one ``n x n`` float64 matrix; time ``O(n^2 d + n^3)``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Data, or the ``(n_samples, n_samples)`` kernel matrix when
        ``kernel="precomputed"``. Not modified.
    kernel : str, Kernel or callable, default="rbf"
        As :class:`kernelkit.KernelRidge`'s ``kernel``, or ``"precomputed"``.
    gamma_reg : float > 0, default=1.0
        Ridge regularisation gamma of the papers, on the unnormalised kernel matrix:
        equal to ``KernelRidge``'s ``alpha`` and to ``n * lambda`` for the normalised
        ridge penalty ``lambda`` (see the module docstring for how it scales with ``n``).
    gamma, degree, coef0, kernel_params
        Kernel parameters, as in :class:`kernelkit.KernelRidge`.
    backend : {"auto", "numpy", "numba", "cupy"} or None, default=None
        Engine that evaluates the kernel; None follows :func:`kernelkit.set_config`.

    Returns
    -------
    tau : ndarray of shape (n_samples,), float64
        Values in [0, 1]; their sum is :func:`effective_dimension`.

    Raises
    ------
    ValueError
        On NaN/inf, empty input, ``gamma_reg <= 0``, an unknown kernel or backend,
        or a precomputed matrix that is not square symmetric PSD.
    MemoryError
        Before any kernel evaluation, when the ``n x n`` float64 matrix
        (``8 n^2`` bytes) exceeds 64 times kernelkit's ``working_memory``
        (16 GiB at the default 256 MiB): use :class:`SQUEAK` or :class:`INKEstimate`,
        or raise ``working_memory``.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelkit.leverage import ridge_leverage_scores
    >>> X = np.random.default_rng(0).standard_normal((50, 3))
    >>> tau = ridge_leverage_scores(X, gamma_reg=1.0, gamma=0.5)
    >>> bool(np.all((tau >= 0) & (tau <= 1)))
    True
    """
    gamma_reg = _check_gamma_reg(gamma_reg)
    kern, pts = _kernel_eval_from_args(X, kernel, gamma, degree, coef0, kernel_params, backend)
    return _exact_scores(kern, pts, gamma_reg, "ridge_leverage_scores")


def _exact_scores(kern, pts, gamma_reg, caller):
    _check_dense_size(len(pts), caller)
    A = kern(pts)  # a fresh float64 buffer (a copy for precomputed input)
    n = A.shape[0]
    with _blas_for(n):
        return _exact_from_matrix(A, n, gamma_reg, kern)


def _exact_from_matrix(A, n, gamma_reg, kern):
    A = np.ascontiguousarray(A)
    A.flat[:: n + 1] += gamma_reg
    # A is symmetric: factor its C-ordered buffer as the Fortran transpose (same matrix)
    F = A.T if A.flags.c_contiguous else A
    info = potrf(F, lower=True, clean=True)
    L = F
    if info != 0:
        raise ValueError("the kernel matrix plus gamma_reg * I is not positive definite: the "
                         "kernel is not positive semi-definite; check the kernel and its "
                         "parameters.")
    Linv, info = lapack.dtrtri(L, lower=1, overwrite_c=1)
    if info != 0:
        raise ValueError("triangular inversion failed; increase gamma_reg.")
    # diag((K + gamma I)^{-1}) = column sums of squares of L^{-1}, blockwise
    diag_inv = np.zeros(n)
    rows = max(1, kern.rows_per_block(n))
    for r0 in range(0, n, rows):
        blk = Linv[r0:r0 + rows]
        diag_inv += np.einsum("ij,ij->j", blk, blk)
    return np.clip(1.0 - gamma_reg * diag_inv, 0.0, 1.0)


def effective_dimension(X, kernel="rbf", gamma_reg=1.0, *, gamma=None, degree=3, coef0=1,
                        kernel_params=None, backend=None):
    """Effective dimension ``d_eff(gamma) = tr(K (K + gamma I)^{-1}) = sum_i tau_i``.

    Computed exactly from the eigenvalues ``lambda_j`` of the kernel matrix as
    ``sum_j lambda_j / (lambda_j + gamma)``, so many regularisations cost one
    eigendecomposition (``O(n^3)`` time, one ``n x n`` matrix in memory).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Data, or the kernel matrix when ``kernel="precomputed"``. Not modified.
    kernel : str, Kernel or callable, default="rbf"
        As :func:`ridge_leverage_scores`.
    gamma_reg : float > 0 or array-like of floats > 0, default=1.0
        Regularisation(s) gamma (see :func:`ridge_leverage_scores`).
    gamma, degree, coef0, kernel_params
        Kernel parameters, as in :class:`kernelkit.KernelRidge`.
    backend : {"auto", "numpy", "numba", "cupy"} or None, default=None
        Engine that evaluates the kernel.

    Returns
    -------
    d_eff : float or ndarray
        A float for a scalar ``gamma_reg``, else an array of its shape. Between 0 and
        the rank of ``K``, decreasing in ``gamma_reg``; eigenvalues within ``n eps``
        of the largest count as 0 (rounding, not signal).

    Raises
    ------
    ValueError, MemoryError
        As :func:`ridge_leverage_scores`.
    """
    g = np.asarray(gamma_reg) if not isinstance(gamma_reg, (str, bool)) else None
    g = g.astype(np.float64) if g is not None and g.dtype.kind in "iuf" else None
    if g is None or g.size == 0 or not np.all(np.isfinite(g)) or np.any(g <= 0):
        raise ValueError(f"gamma_reg must be a positive finite number or an array of them, "
                         f"got {gamma_reg!r}.")
    kern, pts = _kernel_eval_from_args(X, kernel, gamma, degree, coef0, kernel_params, backend)
    _check_dense_size(len(pts), "effective_dimension")
    K = kern(pts)
    if kern.K is None:  # a precomputed matrix was checked already; a Gram matrix here
        check_kernel_matrix(K, "K(X, X)", square=False)
    lam = linalg.eigvalsh(K, overwrite_a=True, check_finite=False)
    # eigenvalues within the rounding of the largest (n eps lambda_max) are 0: the rank's
    # null directions, which a tiny gamma_reg would otherwise count as signal
    lam = np.where(lam > len(lam) * np.finfo(np.float64).eps * max(float(lam[-1]), 0.0),
                   lam, 0.0)
    out = (lam[None, :] / (lam[None, :] + g.reshape(-1, 1))).sum(axis=1)
    return float(out[0]) if g.ndim == 0 else out.reshape(g.shape)


