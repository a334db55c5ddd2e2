"""Gaussian-process predictive moments of a fitted kernel ridge model.

:func:`ridge_predict_moments` is the Gaussian-process posterior of a fitted
:class:`~kernelkit.KernelRidge` / :class:`~kernelkit.NTKRidge` (kernel ``k``, noise
variance ``alpha``), as ``GaussianProcessRegressor.predict`` returns it. The helpers
here (flags, memory guards, variance clipping) are shared with the trained
infinite-width ensemble (:mod:`kernelkit.ridge._ensemble`).
"""

import threading
import warnings
import weakref

import numpy as np
import scipy.sparse as sp
from scipy import linalg
from scipy.special import log_ndtr, logsumexp
from sklearn.utils.validation import validate_data

from .._config import get_config
from ..utils._potrf import potrf
from ..utils._threads import blas_threads_for

__all__ = ["ridge_predict_moments"]

_EPS = np.finfo(np.float64).eps


def _budget():
    return float(get_config()["working_memory"]) * 2**20


def _check_flags(return_std, return_cov):
    for name, v in (("return_std", return_std), ("return_cov", return_cov)):
        if not isinstance(v, (bool, np.bool_)):
            raise TypeError(f"{name} must be a bool, got {v!r}.")
    if return_std and return_cov:
        raise ValueError("return_std and return_cov cannot both be True: the standard deviation "
                         "is the square root of the covariance's diagonal (as in "
                         "GaussianProcessRegressor.predict); ask for one.")


def _check_cov_size(n_bytes, m):
    if n_bytes > _budget():
        raise ValueError(
            f"return_cov=True on {m} rows needs {n_bytes / 2**20:.0f} MiB, more than the "
            f"working_memory budget of {get_config()['working_memory']:g} MiB; predict fewer "
            "rows at a time, use return_std=True (computed blockwise), or raise "
            "kernelkit.set_config(working_memory=...).")


# Estimators whose O(n) memory scales past any dense (n, n) matrix; named by the guards.
_AT_SCALE = ("for n in the tens of thousands and beyond, use kernelkit's RLSNystroem features "
             "with sklearn.linear_model.BayesianRidge (its predict(X, return_std=True) is the "
             "Nystroem GP's, O(n_components^2) memory), or FalkonRegressor / EigenProRegressor "
             "for the mean alone")


def check_dense_memory(n_bytes, owner, what, cache_size):
    """Refuse, before allocating, (n, n) matrices beyond the ``cache_size`` budget (MiB).

    Dense GP algebra holds whole (n, n) matrices; at n = 100,000 one is 74.5 GiB. The
    budget is the estimator's ``cache_size``, its documented allowance for holding
    kernel-sized matrices (``working_memory`` bounds the row blocks of each call).

    Raises
    ------
    ValueError
        Naming the estimator, the size needed, the budget and what to use instead.
    """
    if n_bytes > float(cache_size) * 2**20:
        raise ValueError(
            f"{owner}: {what} needs {n_bytes / 2**30:.3g} GiB of dense (n, n) float64 matrices, "
            f"more than cache_size={cache_size:g} MiB. Fit on fewer rows or raise cache_size; "
            f"{_AT_SCALE}.")


def _clip_variance(var):
    """Variances are >= 0 in exact arithmetic; clip rounding below 0, with a warning."""
    neg = var < 0
    if np.any(neg):
        warnings.warn(f"{int(np.count_nonzero(neg))} predicted variance(s) below 0 from "
                      f"rounding (min {float(var.min()):.3g}); set to 0.", RuntimeWarning,
                      stacklevel=3)
        var = np.where(neg, 0.0, var)
    return var


def _clip_cov_diag(cov):
    d = np.einsum("...ii->...i", cov)
    if np.any(d < 0):
        d[...] = _clip_variance(d.copy())
    return cov


def _rows_per_block(n, per_row_floats):
    return max(1, int(_budget() // (8 * max(1, n) * per_row_floats)))


# Gauss-Hermite rule for E[g(z)], z ~ N(0, 1): nodes sqrt(2) x_i, weights w_i / sqrt(pi)
_GH_X, _GH_W = np.polynomial.hermite.hermgauss(64)
_GH_Z, _GH_LOGW = np.sqrt(2.0) * _GH_X, np.log(_GH_W / np.sqrt(np.pi))


def argmax_log_proba(mean, std):
    """``log P(argmax_k f_k = j)`` for independent ``f_k ~ N(mean[..., k], std[...]**2)``.

    ``mean`` has shape ``(..., K)``; ``std >= 0`` has shape ``(...)``: one standard
    deviation shared by the K classes at each point (the trained ensemble's outputs).
    Two classes: ``P_1 = Phi((m_1 - m_0) / (sqrt(2) s))``, exact (``log_ndtr``). More:
    ``P_j = E_z[prod_{k != j} Phi(z + (m_j - m_k) / s)]`` by 64-node Gauss-Hermite
    quadrature (absolute error below 1e-12 against adaptive quadrature; with
    *unequal* variances the integrand becomes a step and 64 nodes err by 3e-3 at a
    ratio of 7, one reason this takes a shared ``s``), then rows normalised to sum
    to 1. Cost O(K^2 * 64) per point. Where ``s = 0`` every draw is the mean: the
    largest class gets 1 (tied largest ones share it).
    """
    mean = np.asarray(mean, dtype=np.float64)
    K = mean.shape[-1]
    M = mean.reshape(-1, K)
    S = np.broadcast_to(np.asarray(std, dtype=np.float64), mean.shape[:-1]).reshape(-1)
    out = np.empty_like(M)
    pos = S > 0
    if not pos.all():
        top = M[~pos] == M[~pos].max(axis=1, keepdims=True)
        with np.errstate(divide="ignore"):
            out[~pos] = np.log(top / top.sum(axis=1, keepdims=True))
    Mp, Sp = M[pos], S[pos]
    if K == 2:
        d = (Mp[:, 1] - Mp[:, 0]) / (np.sqrt(2.0) * Sp)
        out[pos] = np.column_stack([log_ndtr(-d), log_ndtr(d)])
        return out.reshape(mean.shape)
    res = np.empty_like(Mp)
    rows = max(1, 2**22 // (K * K * _GH_Z.size))
    diag = np.arange(K)
    for r0 in range(0, Mp.shape[0], rows):
        m, s = Mp[r0:r0 + rows], Sp[r0:r0 + rows, None, None]
        D = (m[:, :, None] - m[:, None, :]) / s  # (rows, j, k)
        L = log_ndtr(D[..., None] + _GH_Z)  # (rows, j, k, nodes)
        L[:, diag, diag] = 0.0  # no factor for k == j
        res[r0:r0 + rows] = logsumexp(L.sum(axis=2) + _GH_LOGW, axis=-1)
    out[pos] = res - logsumexp(res, axis=1, keepdims=True)
    return out.reshape(mean.shape)


def null_floor(evals):
    """Eigenvalues at or below this are null directions: relative to the largest.

    ``n eps max|lam|`` is the rounding level of a symmetric eigensolver on an (n, n)
    matrix, so the floor scales with the kernel: a kernel multiplied by ``c`` has
    every eigenvalue and this floor multiplied by ``c`` (an absolute floor made
    bias-free relu kernels of depth 60, values ~1e-18, all null).
    """
    return evals.size * _EPS * float(np.abs(evals).max(initial=0.0))


# --------------------------------------------------------------- ridge posterior
class _Whitener:
    """``W = L^{-1}`` for ``S K S + alpha I = L L^T`` (``S = diag(sqrt(w))``).

    ``k^T S (S K S + alpha I)^{-1} S k = ||W S k||^2`` is the reduction of the
    posterior variance. Cholesky when it succeeds; otherwise the
    eigendecomposition's pseudo-inverse square root (as the ridge solve's stable
    path), with a warning. ``A`` (the kernel matrix) is overwritten.
    """

    def __init__(self, A, alpha, sw, rebuild):
        n = A.shape[0]
        if sw is not None:
            A *= sw[:, None]
            A *= sw[None, :]
        A.flat[:: n + 1] += alpha
        self.sw = sw
        with blas_threads_for(n):
            try:  # A is symmetric: its transpose is the Fortran-ordered matrix, factored in place
                if potrf(A.T, lower=True):
                    raise linalg.LinAlgError("not positive definite")
                self.L, self.F = A.T, None  # solve_triangular reads its lower triangle only
                return
            except linalg.LinAlgError:
                pass
            A = rebuild()  # the failed factorization overwrote A
            if sw is not None:
                A *= np.outer(sw, sw)
            w, V = linalg.eigh(A.T, overwrite_a=True, check_finite=False)
        w = w + alpha
        tol = null_floor(w)
        inv_sqrt = np.where(w > tol, 1.0 / np.sqrt(np.where(w > tol, w, 1.0)), 0.0)
        V *= inv_sqrt
        self.L, self.F = None, V
        warnings.warn(f"K + alpha*I is not numerically positive definite (alpha={alpha:g});"
                      " predictive variances use its pseudo-inverse.",
                      linalg.LinAlgWarning, stacklevel=5)

    def __call__(self, Kxt):
        """``W S k(X_fit, x)`` for the columns of ``Kxt`` (n, b)."""
        if self.sw is not None:
            Kxt = Kxt * self.sw[:, None]
        if self.F is not None:
            return self.F.T @ Kxt
        return linalg.solve_triangular(self.L, Kxt, lower=True, check_finite=False)


# One factorization per fitted model and alpha, built on the first return_std/return_cov
# call and reused (an (n, n) refactorization per call cost O(n^3) and, at n = 30,000, 7 GB
# each time). Held beside the model, not in it: pickles and clones stay small, predict
# leaves the estimator's __dict__ unchanged, and the entry dies with the model.
_FACTORS = weakref.WeakKeyDictionary()
_FACTORS_LOCK = threading.Lock()


def _fitted_key(est):
    """What the factor depends on: the fitted arrays (by identity) and the parameters."""
    return (id(est.X_fit_), id(est.dual_coef_), repr(sorted(est.get_params(deep=False).items())))


def _whiteners(est, op, distinct, sparse):
    n = est.X_fit_.shape[0]
    key = _fitted_key(est)
    with _FACTORS_LOCK:
        entry = _FACTORS.get(est)
        if entry is None or entry["key"] != key:
            # the fitted arrays are held too, so that their ids stay theirs
            entry = {"key": key, "arrays": (est.X_fit_, est.dual_coef_), "white": {}}
            _FACTORS[est] = entry
        missing = [a for a in distinct if a not in entry["white"]]
        if missing:
            owner = type(est).__name__
            check_dense_memory(8.0 * n * n * (len(entry["white"]) + len(missing)), owner,
                               f"predict(return_std/return_cov) on {n:,} training rows (the "
                               f"factor of K + alpha*I, for {len(distinct)} alpha value(s))",
                               est._cache_mib())
        sw = getattr(est, "_sqrt_sample_weight", None)
        for a in missing:
            def rebuild():
                return np.array(op.block_host(est.X_fit_, None), dtype=np.float64, order="C")

            entry["white"][a] = _Whitener(rebuild(), float(a), sw, rebuild)
        return [entry["white"][a] for a in distinct]


def ridge_predict_moments(est, X, return_std=False, return_cov=False):
    """Mean and standard deviation or covariance of a fitted kernel ridge model.

    The Gaussian-process posterior with prior covariance ``k`` (the fitted kernel)
    and noise variance ``alpha`` (``alpha / w_i`` for a sample weight ``w_i``): the
    mean is the ridge prediction ``k(x, X) (K + alpha I)^{-1} y`` and the covariance
    ``k(x, x') - k(x, X) (K + alpha I)^{-1} k(X, x')``, the values of
    ``GaussianProcessRegressor(kernel, alpha=alpha, optimizer=None).predict``
    (Rasmussen & Williams 2006, Algorithm 2.1); with ``fit_intercept`` the model's
    ``b`` is the estimate under a vague prior (their eq. 2.42), and the variance gains
    ``(1 - 1^T K_a^-1 k_x)^2 / 1^T K_a^-1 1`` (``K_a = K + alpha W^-1``), the
    covariance the outer product of those residuals. ``K + alpha I`` is factored once,
    on the first such call (O(n^3) time, one (n, n) float64 factor per distinct
    ``alpha`` held beside the model until it is refitted or freed); every call then
    computes the standard deviation in row blocks within ``working_memory``.

    Parameters
    ----------
    est : fitted KernelRidge or NTKRidge
    X : array-like or sparse matrix of shape (n_samples, n_features)
        Sparse where the fitted kernel accepts it (scikit-learn's kernels).
    return_std, return_cov : bool
        At most one of them True.

    Returns
    -------
    y_mean : ndarray of shape (n_samples,) or (n_samples, n_targets)
    y_std : ndarray, same shape as ``y_mean``
        Only with ``return_std``.
    y_cov : ndarray of shape (n_samples, n_samples) or (n_samples, n_samples, n_targets)
        Only with ``return_cov``.

    Raises
    ------
    ValueError
        If both flags are True, for ``kernel="precomputed"`` (the test-test kernel
        is not available), if the factor exceeds the estimator's ``cache_size``
        (the message names the estimators for larger n), or if the covariance
        exceeds ``working_memory``.
    """
    _check_flags(return_std, return_cov)
    mean = est._decision(X)
    if not (return_std or return_cov):
        return mean
    if est._precomputed():
        raise ValueError("return_std/return_cov need k(X, X) on the test points, which "
                         "kernel='precomputed' does not provide; pass the kernel instead.")
    X = validate_data(est, X, reset=False, dtype=np.float64,
                      accept_sparse=("csr", "csc") if est._sparse_ok() else False)
    sparse = sp.issparse(X) or sp.issparse(est.X_fit_)
    if sparse:  # scikit-learn's kernels slice rows of CSR
        X = sp.csr_matrix(X) if sp.issparse(X) else X
    op = est._operator(sparse)
    n, m = est.X_fit_.shape[0], X.shape[0]
    alphas = np.atleast_1d(est.alpha).astype(np.float64)
    n_targets = 1 if mean.ndim == 1 else mean.shape[1]
    distinct = [float(a) for a in np.unique(alphas)]
    if return_cov:
        _check_cov_size(8 * (m * m * (1 + len(distinct)) + n * m * 2), m)
    whites = _whiteners(est, op, distinct, sparse)
    Xfit = sp.csr_matrix(est.X_fit_) if sp.issparse(est.X_fit_) else est.X_fit_
    out = {}
    for a, white in zip(distinct, whites, strict=True):
        # fit_intercept: a vague prior on b adds (1 - u^T G^-1 S k)^2 / u^T G^-1 u (R&W 2.42)
        Wu = white(np.ones((n, 1))) if getattr(est, "fit_intercept", False) else None
        q = None if Wu is None else float(Wu[:, 0] @ Wu[:, 0])
        if return_cov:
            Z = white(op.block_host(Xfit, X))
            cov = op.block_host(X, None) - Z.T @ Z
            if Wu is not None:
                r = 1.0 - Wu[:, 0] @ Z
                cov += np.outer(r, r) / q
            out[a] = _clip_cov_diag(cov)
            continue
        var = np.empty(m)
        rows = _rows_per_block(n, 3)
        for r0 in range(0, m, rows):
            Xb = X[r0:r0 + rows]
            Z = white(op.block_host(Xfit, Xb))
            var[r0:r0 + rows] = op.diag(Xb) - np.einsum("ij,ij->j", Z, Z)
            if Wu is not None:
                var[r0:r0 + rows] += (1.0 - Wu[:, 0] @ Z) ** 2 / q
        out[a] = np.sqrt(_clip_variance(var))
    per_target = [out[a] for a in np.broadcast_to(alphas, (n_targets,))]
    if mean.ndim == 1:
        return mean, per_target[0]
    return mean, np.stack(per_target, axis=-1)


# ----------------------------------------------------- noise by marginal likelihood
# Ratios noise / mean kernel eigenvalue tried by select_noise: 10 per decade over 1e-6..1e2.
# On standardised diabetes the optimum lies near 1 for every depth / posterior measured;
# the low end keeps a (near) noiseless target close to interpolation.
NOISE_GRID = np.logspace(-6.0, 2.0, 81)


def select_noise(evals, Z, grid=NOISE_GRID):
    """Noise ratio ``r`` and output scales ``c_j`` of ``y_j ~ N(0, c_j (K + r I))`` by evidence.

    Type-II maximum likelihood from one eigendecomposition ``K = V diag(evals) V^T``
    (``Z = V^T Y``): for each ``r`` the scale of output ``j`` has the closed form
    ``c_j = z_j^T (diag(evals) + r)^{-1} z_j / n``, and the profiled negative log
    evidence ``sum_j n log c_j + k sum_i log(evals_i + r)`` is evaluated on ``grid``
    (multiples of the mean eigenvalue), O(n k) per point. The choice of ``r`` is
    invariant to the scale of each target and of the kernel; ``c_j r`` is the
    maximum-likelihood noise variance of output ``j`` in its own units.

    Parameters
    ----------
    evals : ndarray of shape (n,)
        Eigenvalues of the training kernel (rounding below 0 is taken as 0).
    Z : ndarray of shape (n, k)
        Targets in the eigenbasis.
    grid : ndarray, default=NOISE_GRID

    Returns
    -------
    ratio : float
        The chosen ``r`` (kernel units), > 0.
    scales : ndarray of shape (k,)
        ``c_j`` at that ``r`` (0 for an all-zero target).
    """
    lam = np.maximum(evals, 0.0)
    n, k = Z.shape
    mean = float(lam.mean())
    ratios = grid * (mean if mean > 0 else 1.0)  # a zero kernel: any r gives mean 0
    D = lam[None, :] + ratios[:, None]  # (G, n)
    Z2 = Z * Z
    Q = (1.0 / D) @ Z2 / n  # (G, k): c_j(r)
    live = np.all(Q > 0, axis=0)  # all-zero targets carry no evidence about r
    with np.errstate(divide="ignore"):
        nll = n * np.log(Q[:, live]).sum(axis=1) + live.sum() * np.log(D).sum(axis=1)
    i = int(np.argmin(nll)) if live.any() else int(np.searchsorted(grid, 1.0))
    return float(ratios[i]), Q[i]
