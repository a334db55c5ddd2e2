"""Leave-one-out, GCV and K-fold algebra of kernel ridge regression on one eigendecomposition.

With ``K = V diag(s) V^T`` and ``G = K + alpha I``, every quantity model selection needs is
a diagonal rescaling in the eigenbasis, so one ``eigh`` serves the whole ``alphas`` grid
(each extra alpha costs ``O(n^2)`` per target, not ``O(n^3)``):

* dual coefficients ``c = V diag(1 / (s + alpha)) V^T y``;
* residuals ``y - K c = alpha c`` (no cancellation);
* leverages ``1 - H_ii = alpha (G^-1)_ii`` with ``H = K G^-1``, so the exact leave-one-out
  residual ``(y_i - f_i) / (1 - H_ii)`` is ``c_i / (G^-1)_ii`` (Allen 1974; Golub, Heath &
  Wahba, Technometrics 1979; as scikit-learn's ``RidgeCV`` computes it);
* ``n - tr H = alpha tr G^-1``, so generalized cross-validation
  ``GCV = n ||y - f||^2 / (n - tr H)^2`` is the mean square of ``c_i n / tr G^-1``: the
  leave-one-out residual with every leverage replaced by the mean one.

Sample weights enter as scikit-learn's ``_RidgeGCV`` defines them: the problem is solved
for ``K_w = W^1/2 K W^1/2`` and ``y_w = W^1/2 y``, whose leave-one-out residuals are
``sqrt(w_i) (y_i - f_{-i}(x_i))``.

An unpenalised intercept ``b`` (``f = K c + b``; column ``u = W^1/2 1`` in the weighted
problem) is the bordered system ``[[G, u], [u^T, 0]] [c; b] = [y; 0]``:
``b = u^T G^-1 y / u^T G^-1 u`` and ``c = G^-1 (y - b u)``, so the residual is still
``alpha c`` and ``I - H = alpha M`` with ``M = G^-1 - G^-1 u u^T G^-1 / u^T G^-1 u``:
the leave-one-out residual is ``c_i / M_ii`` (the identity holds for any penalised least
squares with unpenalised columns) and ``n - tr H = alpha tr M``.
"""

import warnings

import numpy as np
from scipy import linalg

from ..utils._threads import blas_threads_for

# alpha below this multiple of eps * n * max(s) is at the level of eigh's absolute error
_ROUNDOFF = 10.0


def roundoff_alphas(ridge, alphas, owner, default=False, warn=True):
    """Which ``alphas`` lie below the round-off level of ``ridge``'s eigenvalues.

    The level is ``10 n eps max(s)`` (``ridge.n``, ``ridge.top``: the largest eigenvalue
    of the matrix it decomposed), the absolute error of a symmetric eigensolver: a penalty
    below it is lost in the error of the small eigenvalues, and its cross-validation score
    is not accurate. One rule for every decomposition the CV estimators score
    (:class:`EigenRidge`, :class:`~kernelkit.ridge._primal.LinearEigen`,
    :class:`~kernelkit.ridge._loo_nystrom.NystromRidge`).

    Parameters
    ----------
    ridge : object with attributes ``n`` and ``top``
    alphas : ndarray of shape (n_alphas,)
    owner : str
        The estimator's name, for the warning.
    default : bool, default=False
        ``alphas`` is the default grid, which the user did not choose: its points below
        the level are dropped without a warning (all but the largest, should every one be
        below; that one warns).
    warn : bool, default=True
        Warn about the points below the level that are kept.

    Returns
    -------
    dropped : ndarray of bool, shape (n_alphas,)
        The points not to score (only with ``default``).
    """
    alphas = np.asarray(alphas, dtype=np.float64)
    floor = _ROUNDOFF * ridge.n * np.finfo(np.float64).eps * ridge.top
    low = alphas < floor
    dropped = low.copy() if default else np.zeros_like(low)
    if dropped.all():
        dropped[np.argmax(alphas)] = False
    kept_low = low & ~dropped
    if warn and kept_low.any():
        warnings.warn(
            f"{owner}: alphas {[float(a) for a in alphas[kept_low]]} are below "
            f"{floor:.3g}, the round-off level of the kernel matrix's eigenvalues; their "
            "cross-validation scores are not accurate. Use larger alphas.", RuntimeWarning,
            stacklevel=4)
    return dropped


def weighted(K, Y, sw):
    """``(W^1/2 K W^1/2, W^1/2 Y)`` for ``sw = sqrt(w)`` (None: unchanged, no copy; ``K``
    None: only ``Y``)."""
    if sw is None:
        return K, Y
    return None if K is None else K * np.outer(sw, sw), Y * sw[:, None]


class EigenRidge:
    """Kernel ridge on one eigendecomposition ``K = V diag(s) V^T``, for any ``alpha > 0``.

    Parameters
    ----------
    K : ndarray of shape (n, n), float64
        Symmetric positive semidefinite (weighted, when weights are used). Not modified.
    Y : ndarray of shape (n, n_targets), float64
        Targets (weighted likewise).

    Notes
    -----
    Eigenvalues below zero are round-off of a PSD matrix and are clipped to 0, so that
    ``s + alpha >= alpha > 0``.
    """

    def __init__(self, K, Y, u=None):
        with blas_threads_for(K.shape[0]):
            s, V = linalg.eigh(K, check_finite=False)
        self.s = np.maximum(s, 0.0)
        self.top = float(self.s.max(initial=0.0))  # the largest eigenvalue (round-off floor)
        self.V = V
        self.VtY = V.T @ Y
        self.Vu = None if u is None else V.T @ u  # the intercept's column, eigenbasis
        self._V2 = None
        self.n = K.shape[0]

    def intercept(self, alpha):
        """``b = u^T G^-1 y / u^T G^-1 u`` per target (zeros without an intercept)."""
        if self.Vu is None:
            return np.zeros(self.VtY.shape[1])
        g = self.Vu / (self.s + alpha)
        return (g @ self.VtY) / float(g @ self.Vu)

    def _coef(self, alpha):
        """``V^T c`` scaled: ``diag(1 / (s + alpha)) V^T (y - b u)``."""
        Z = self.VtY if self.Vu is None else self.VtY - np.outer(self.Vu, self.intercept(alpha))
        return Z / (self.s + alpha)[:, None]

    def dual(self, alpha):
        """``c = (K + alpha I)^-1 (Y - b u)``, shape (n, n_targets)."""
        return self.V @ self._coef(alpha)

    def loo_residuals(self, alpha):
        """Exact leave-one-out residuals ``(y_i - f_i) / (1 - H_ii) = c_i / M_ii``."""
        if self._V2 is None:
            self._V2 = self.V * self.V
        g = 1.0 / (self.s + alpha)
        d = self._V2 @ g  # diag of G^-1
        if self.Vu is not None:
            Gu = self.V @ (g * self.Vu)
            d = d - Gu * Gu / float(self.Vu @ (g * self.Vu))
        return self.dual(alpha) / d[:, None]

    def gcv_residuals(self, alpha):
        """GCV residuals ``(y_i - f_i) / (1 - tr H / n) = c_i n / tr M``."""
        g = 1.0 / (self.s + alpha)
        tr = float(np.sum(g))
        if self.Vu is not None:
            tr -= float((g * g) @ (self.Vu * self.Vu)) / float(g @ (self.Vu * self.Vu))
        return self.dual(alpha) * (self.n / tr)

    def projected(self, K_cross_sw):
        """``K_cross_sw @ V``: the cross block in the eigenbasis, for :meth:`predict_from`."""
        return K_cross_sw @ self.V

    def predict_from(self, P, alpha):
        """Predictions ``P V^T c + b`` from ``P = projected(...)``."""
        return P @ self._coef(alpha) + self.intercept(alpha)


def loo_predictions(ridge, residuals, Y, K, sw, alpha):
    """Out-of-sample predictions in the original scale from weighted-space residuals.

    ``f_{-i}(x_i) = y_i - r_i / sqrt(w_i)``; a zero-weight point does not move the fit,
    so its leave-one-out prediction is the full fit's, ``k(x_i, X) W^1/2 c``.

    Parameters
    ----------
    ridge : EigenRidge
    residuals : ndarray of shape (n, n_targets)
        Weighted-space residuals (:meth:`EigenRidge.loo_residuals` or ``gcv_residuals``).
    Y : ndarray of shape (n, n_targets)
        Unweighted targets.
    K : ndarray of shape (n, n) or None
        Unweighted kernel matrix (read only for zero-weight rows); None for a
        :class:`~kernelkit.ridge._loo_nystrom.NystromRidge`.
    sw : ndarray of shape (n,) or None
        Square roots of the sample weights.
    alpha : float

    Returns
    -------
    predictions : ndarray of shape (n, n_targets)
    """
    if sw is None:
        return Y - residuals
    pos = sw > 0
    out = np.empty_like(residuals)
    out[pos] = Y[pos] - residuals[pos] / sw[pos, None]
    if not np.all(pos):
        if K is None:  # the Nystrom path evaluates its rows against the centers
            out[~pos] = ridge.fitted_rows(np.flatnonzero(~pos), alpha)
        else:
            out[~pos] = K[~pos] @ (ridge.dual(alpha) * sw[:, None]) + ridge.intercept(alpha)
    return out
