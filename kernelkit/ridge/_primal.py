"""Kernel ridge with the linear kernel in the primal: a ``d x d`` problem when ``n > d``.

With ``K = X X^T``, row weights ``W = S^2`` and ``Xs = S X``, the weighted system of the
dual solvers is ``G Z = R`` with ``G = Xs Xs^T + alpha I`` (``n x n``). The push-through
identity ``Xs^T G^-1 = (C + alpha I)^-1 Xs^T`` (``C = Xs^T Xs``, ``d x d``) gives

    Z = (R - Xs V) / alpha,    V = (C + alpha I)^-1 Xs^T R,

and ``Xs^T Z = V``: the predictions ``k(x, X) S Z = x^T V`` are those of primal ridge. The
Woodbury identity ``G^-1 = (I - Xs (C + alpha I)^-1 Xs^T) / alpha`` gives the diagonal
that the exact leave-one-out values need: with ``C = Q diag(e) Q^T`` and
``U = Xs Q e^-1/2`` (the left singular vectors of ``Xs``, ``K = U diag(e) U^T``),

    diag(G^-1)_i = (1 - ||U_i||^2) / alpha + sum_j U_ij^2 / (e_j + alpha),

the first term the part of row ``i`` outside the column space of ``Xs`` (the null space
of ``K``, where ``G^-1`` is ``1 / alpha``), clipped at 0 so that the sum stays positive.
Everything costs ``O(n d^2 + d^3)`` time and ``O(d^2)`` memory beyond ``X`` (the
diagonal is accumulated over row blocks), against ``O(n^2 d + n^3)`` and ``n^2`` floats
in the dual. Accuracy: ``Z`` carries the relative error of the dual Cholesky solve,
``eps cond(K + alpha I)`` (the residual ``R - Xs V`` is formed once); ``V``, and the
predictions from it, only ``eps cond(C + alpha I)``.

:class:`LinearEigen` is the same algebra for model selection (the counterpart of
:class:`~kernelkit.ridge._loo.EigenRidge`): one eigendecomposition of ``C`` serves every
alpha, as scikit-learn's ``RidgeCV`` does in its ``n > p`` mode.
"""

import numpy as np
import scipy.sparse as sp
from scipy import linalg

from ..utils._linalg import solve_ridge
from ..utils._threads import blas_threads_for
from ..utils._verbose import Progress, flops
from ._intercept import bordered_inv_diag, split_joint
from ._ridge_proba import loo_decision

BLOCK_ROWS = 4096  # rows of U formed at a time (the diagonal of G^-1, fitted rows)


def primal_applies(est, X, alpha, cache_mib):
    """Whether kernel ridge ``est`` fits ``X`` in the primal: the kernel is
    ``"linear"`` (by name or a :class:`~kernelkit.kernels.Linear`), ``X`` is data (not
    precomputed), every alpha is positive, ``2 d <= n`` and the ``d x d`` float64 matrix
    fits in ``cache_mib`` MiB."""
    if est._precomputed() or est._kernel_name() != "linear":
        return False
    n, d = X.shape
    return (float(np.min(alpha)) > 0 and 2 * d <= n
            and 8.0 * d * d <= cache_mib * 2.0 ** 20)


def weighted_rows(X, sw):
    """``Xs = S X`` (``sw`` None: ``X`` itself), dense or CSR."""
    if sw is None:
        return X
    if sp.issparse(X):
        return sp.csr_matrix(sp.diags(sw) @ X)
    return X * sw[:, None]


def gram(Xs):
    """``Xs^T Xs`` as a dense float64 ``d x d`` matrix."""
    with np.errstate(over="ignore"):  # an overflow is the ValueError below, not a warning
        if sp.issparse(Xs):
            C = np.asarray((Xs.T @ Xs).toarray(), dtype=np.float64)
        else:
            n, d = Xs.shape
            with blas_threads_for(round((n * d * d) ** (1.0 / 3.0))):  # as many flops' order
                C = Xs.T @ Xs
    if not np.all(np.isfinite(C)):  # as the kernel engines' check of the squared norms
        raise ValueError("X has values too large in magnitude for float64 kernel arithmetic "
                         "(X^T X overflows); rescale it.")
    return C


def _eigh(C):
    """``(e, Q)`` of the PSD ``C``, round-off below zero clipped."""
    with blas_threads_for(C.shape[0]):
        e, Q = linalg.eigh(C, check_finite=False)
    return np.maximum(e, 0.0), Q


def _kept(e, Q):
    """``(e_k, Q_k e_k^-1/2)`` for the eigenvalues above ``pinv``'s cutoff ``d eps max(e)``
    (the others are round-off of a rank-deficient ``C``: null space of ``K``)."""
    keep = e > len(e) * np.finfo(np.float64).eps * float(e.max(initial=0.0))
    return e[keep], Q[:, keep] / np.sqrt(e[keep])


def _inv_diag(Xs, e, Q, a):
    """``diag(G^-1)`` per alpha in ``a``: shape (n, len(a)), over row blocks."""
    ek, Qk = _kept(e, Q)
    g = 1.0 / (ek[:, None] + a[None, :])
    n = Xs.shape[0]
    out = np.empty((n, len(a)))
    for r0 in range(0, n, BLOCK_ROWS):
        Ub = np.asarray(Xs[r0:r0 + BLOCK_ROWS] @ Qk)
        U2 = Ub * Ub
        out[r0:r0 + len(Ub)] = (np.maximum(1.0 - U2.sum(axis=1), 0.0)[:, None] / a[None, :]
                                + U2 @ g)
    return out


def primal_solve(Xs, rhs, alpha, return_inv_diag=False, return_coef=False):
    """What :func:`~kernelkit.utils._linalg.solve_ridge` returns for ``K = Xs Xs^T``,
    from ``d x d`` algebra.

    Parameters
    ----------
    Xs : ndarray or CSR matrix of shape (n, d)
        Weighted rows ``S X``.
    rhs : ndarray of shape (n,) or (n, k)
    alpha : float > 0 or ndarray of shape (k,)
        One per column of ``rhs`` when an array.
    return_inv_diag : bool, default=False
        Also return ``diag((Xs Xs^T + alpha I)^-1)``: (n,) for one alpha, else (n, k).
    return_coef : bool, default=False
        Also return ``V = Xs^T Z`` of shape (d, k): the primal weights of each column.

    Returns
    -------
    Z : ndarray, same shape as ``rhs``
    inv_diag : ndarray
        Only with ``return_inv_diag``.
    V : ndarray of shape (d, k)
        Only with ``return_coef``.
    """
    n = Xs.shape[0]
    R = rhs.reshape(n, -1)
    a = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (R.shape[1],)).copy()
    B = np.asarray(Xs.T @ R)
    C = gram(Xs)
    one = bool(np.all(a == a[0]))
    if return_inv_diag or not one:
        e, Q = _eigh(C)
        V = Q @ ((Q.T @ B) / (e[:, None] + a[None, :]))
    else:  # one Cholesky factor of C + alpha I (solve_ridge's checks and fallback)
        V = solve_ridge(C, B, float(a[0]), overwrite_k=True, psd=True)
    Z = (R - np.asarray(Xs @ V)) / a[None, :]
    if not np.all(np.isfinite(Z)):
        raise ValueError("kernel ridge solve produced non-finite coefficients; check alpha.")
    out = [Z.reshape(rhs.shape)]
    if return_inv_diag:
        d = _inv_diag(Xs, e, Q, a[:1] if one else a)
        out.append(d[:, 0] if one else d)
    if return_coef:
        out.append(V)
    return out[0] if len(out) == 1 else tuple(out)


def primal_fit(est, X, Y, Y0, sw, rhs, rhs_alpha, u, oos):
    """:func:`~kernelkit.ridge._ridge_proba.cholesky_fit` in the primal:
    ``(dual, b, out, coef)``, ``coef`` the unweighted model's weights ``w`` of shape (d,)
    or (d, n_targets) (``f(x) = x^T w + b``, equal to ``k(x, X) dual_coef_ + b``)."""
    Xs = weighted_rows(X, sw)
    res = primal_solve(Xs, rhs, rhs_alpha, return_inv_diag=oos, return_coef=True)
    Z, V = res[0], res[-1]
    dual, b = split_joint(Z, Y, u)
    k = Y.reshape(len(Y), -1).shape[1]
    w = V[:, :k] if u is None else V[:, :k] - V[:, k:] * b
    w = w[:, 0] if Y.ndim == 1 else w
    if not oos:
        return dual, b, None, w
    n = len(Y)
    z = dual.reshape(n, -1)
    d = res[1] if u is None else bordered_inv_diag(res[1], Z, Y, u)
    b0 = 0.0 if b is None else b
    W = w.reshape(-1, z.shape[1])
    out = (np.arange(n), loo_decision(Y0.reshape(n, -1), z, d, sw,
                                      lambda rows: np.asarray(X[rows] @ W) + b0))
    return dual, b, out, w


def announce(est, verbose, shape, n_targets):
    """The primal fit's first progress line; returns its Progress."""
    progress = Progress(est, verbose)
    n, d = shape
    progress(f"solver primal (auto: linear kernel, 2 d <= n), n={n}, d={d}, {n_targets} "
             f"target(s): the {d} x {d} matrix X^T W X (~{flops(2.0 * n * d * d)}) and its "
             "factorization")
    return progress


class LinearEigen:
    """:class:`~kernelkit.ridge._loo.EigenRidge` for ``K = Xs Xs^T`` from the ``d x d``
    eigendecomposition ``Xs^T Xs = Q diag(e) Q^T``: ``K = U diag(e) U^T`` with
    ``U = Xs Q e^-1/2`` (``n x r``, ``r`` the numerical rank), and ``G^-1`` is
    ``U diag(1 / (e + alpha)) U^T + (I - U U^T) / alpha``.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n, d)
        Unweighted training rows.
    Y : ndarray of shape (n, n_targets)
        Weighted targets ``S y``.
    sw : ndarray of shape (n,) or None
        ``S``'s diagonal.
    u : ndarray of shape (n,) or None
        The intercept's column ``S 1`` (None: no intercept).
    """

    def __init__(self, X, Y, sw=None, u=None):
        self.X, self.sw = X, sw
        Xs = weighted_rows(X, sw)
        e, Q = _eigh(gram(Xs))
        self.top = float(e.max(initial=0.0))  # K's largest eigenvalue (round-off floor)
        self.s, Qk = _kept(e, Q)  # s: the nonzero eigenvalues of K
        self.Q = Qk  # x^T Q: the coordinates of a row in the basis of U (times e^1/2)
        self.U = np.asarray(Xs @ Qk)
        self.UtY = self.U.T @ Y
        self.R = Y - self.U @ self.UtY  # the targets' part in the null space of K
        self.lev = np.maximum(1.0 - np.einsum("ij,ij->i", self.U, self.U), 0.0)
        if u is None:
            self.Uu = None
        else:
            self.Uu = self.U.T @ u
            self.Ru = u - self.U @ self.Uu
            self.ru2 = float(self.Ru @ self.Ru)
        self.n, self.d = X.shape
        self._U2 = None

    def _gu(self, alpha):
        """``(u^T G^-1 u, G^-1 u)``."""
        g = 1.0 / (self.s + alpha)
        return (float(self.Uu @ (g * self.Uu)) + self.ru2 / alpha,
                self.U @ (g * self.Uu) + self.Ru / alpha)

    def intercept(self, alpha):
        """``b = u^T G^-1 y / u^T G^-1 u`` per target (zeros without an intercept)."""
        if self.Uu is None:
            return np.zeros(self.UtY.shape[1])
        g = 1.0 / (self.s + alpha)
        num = (g * self.Uu) @ self.UtY + (self.Ru @ self.R) / alpha
        return num / self._gu(alpha)[0]

    def _coef(self, alpha):
        """``(U^T c scaled by 1 / (e + alpha), null-space part of y - b u)``."""
        if self.Uu is None:
            T, N = self.UtY, self.R
        else:
            b = self.intercept(alpha)
            T, N = self.UtY - np.outer(self.Uu, b), self.R - np.outer(self.Ru, b)
        return T / (self.s + alpha)[:, None], N

    def dual(self, alpha):
        """``c = G^-1 (Y - b u)``, shape (n, n_targets)."""
        T, N = self._coef(alpha)
        return self.U @ T + N / alpha

    def _inv_diag(self, alpha):
        if self._U2 is None:
            self._U2 = self.U * self.U
        d = self.lev / alpha + self._U2 @ (1.0 / (self.s + alpha))
        if self.Uu is not None:
            uGu, Gu = self._gu(alpha)
            d = d - Gu * Gu / uGu
        return d

    def loo_residuals(self, alpha):
        """Exact leave-one-out residuals ``c_i / M_ii`` (see :mod:`~kernelkit.ridge._loo`)."""
        return self.dual(alpha) / self._inv_diag(alpha)[:, None]

    def gcv_residuals(self, alpha):
        """GCV residuals ``c_i n / tr M``."""
        g = 1.0 / (self.s + alpha)
        tr = float(np.sum(g)) + (self.n - len(self.s)) / alpha
        if self.Uu is not None:
            uGu, Gu = self._gu(alpha)
            tr -= float(Gu @ Gu) / uGu
        return self.dual(alpha) * (self.n / tr)

    def projected(self, Xq):
        """Unweighted rows ``Xq`` in the eigenbasis, ``P = Xq Q e^-1/2``, so that
        ``k(Xq, X) S U = P diag(e)``."""
        return np.asarray(Xq @ self.Q)

    def predict_from(self, P, alpha):
        """Predictions ``k(Xq, X) S c + b`` from ``P = projected(Xq)``: ``P diag(e) U^T c``
        (the null-space part of ``c`` is orthogonal to ``Xs``'s columns)."""
        T, _ = self._coef(alpha)
        return P @ (self.s[:, None] * T) + self.intercept(alpha)

    def fitted_rows(self, rows, alpha):
        """The full fit's values at ``rows`` (zero-weight rows of :func:`loo_predictions`)."""
        return self.predict_from(self.projected(self.X[rows]), alpha)


def linear_fold_model(est, X, Y, sw):
    """K-fold scores in the primal: ``fold_model(tr, te) -> (ridge, predict)`` as
    :func:`~kernelkit.ridge._cv_search.fold_model`."""
    from functools import partial

    def model(tr, te):
        swt = None if sw is None else sw[tr]
        Yt = Y[tr] if swt is None else Y[tr] * swt[:, None]
        ridge = LinearEigen(X[tr], Yt, swt, est._u(swt, len(tr)))
        return ridge, partial(ridge.predict_from, ridge.projected(X[te]))

    return model
