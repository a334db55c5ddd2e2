"""Leave-one-out and GCV of Nyström kernel ridge (FALKON's estimator), every alpha from
``m x m`` decompositions.

With centers ``Z`` (``m`` of them), the estimator FALKON computes (Rudi, Carratino &
Rosasco, NeurIPS 2017) is ``f = K_nm b`` with
``b = (K_mn K_nm + alpha K_mm)^+ K_mn y`` (kernelkit's FALKON convention: its
``lambda`` is ``alpha / n``, so ``alpha`` means what it means in :class:`KernelRidge`),
and its hat matrix is ``H = K_nm (K_mn K_nm + alpha K_mm)^+ K_mn``. Derivation of what
:class:`NystromRidge` computes (as in Meanti et al., "Efficient Hyperparameter Tuning for
Large Scale Kernel Ridge Regression", AISTATS 2022, without their stochastic trace):

1. ``K_mm = V diag(e) V^T``; keep ``e_j > m eps max(e)`` (the relative cutoff of
   ``numpy.linalg.pinv``). A dropped direction ``v`` has ``v^T K_mm v ~ 0``: the function
   ``k(., Z) v`` has RKHS norm ~0, so ``K_nm v ~ 0`` and the estimator does not use it
   (duplicate centers are dropped exactly; a jitter would instead change the estimator).
   ``T = V_r diag(e_r^-1/2)``, ``B = K_nm T`` (entries bounded by ``sqrt(k(x, x))``).
2. On the kept directions ``K_mn K_nm + alpha K_mm = T^-T (B^T B + alpha I) T^-1``, so
   ``H = B (B^T B + alpha I)^-1 B^T``.
3. ``B^T B = U diag(s) U^T``; ``Q = B U diag(s^-1/2)`` has orthonormal columns (``s``
   below ``r eps max(s)`` dropped: their ``s / (s + alpha)`` is ~0) and
   ``H = Q diag(s / (s + alpha)) Q^T``. With ``w = alpha / (s + alpha)``::

       I - H = (I - Q Q^T) + Q diag(w) Q^T
       1 - H_ii = (1 - |Q_i|^2) + sum_j Q_ij^2 w_j
       y - f = (y - Q Q^T y) + Q diag(w) Q^T y

   The projection parts (the Nyström approximation's own error) are computed once; the
   alpha parts are sums without cancellation (as ``alpha c`` on the exact path).
4. Leave-one-out residual ``(y_i - f_i) / (1 - H_ii)`` (the leave-one-out identity holds
   for any penalised least squares, Allen 1974); GCV: ``(y_i - f_i) n / (n - tr H)`` with
   ``n - tr H = n - q + sum_j w_j`` (``q`` columns of ``Q``).

Sample weights as on the exact path (and as FALKON weighs its normal equations,
``b = (K_mn W K_nm + alpha K_mm)^+ K_mn W y``): the rows of ``B`` and ``y`` are scaled
by ``sqrt(w)``, and the residuals are those of the weighted problem.

An unpenalised intercept (``f = K_nm b + b0``, column ``u = W^1/2 1``) is the bordered
problem: with
``v = (I - H0) u`` (``H0`` the hat matrix above, applied as in 3.),
``b0 = v^T y / v^T u = u^T (I - H0) y / v^T u``, ``y - f = (y - H0 y) - b0 v``,
``1 - H_ii = (1 - H0_ii) - v_i^2 / v^T u`` and ``n - tr H = n - tr H0 - |v|^2 / v^T u``.

Cost per kernel: ``O(n m d)`` kernel blocks, ``3 n m^2`` flops (``B``, ``B^T B``, ``Q``),
two ``m x m`` ``eigh``; each alpha then ``O(n m t)``. Memory: ``Q`` (``n x m`` float64)
plus row blocks of ``working_memory``.
"""

import numpy as np
from scipy import linalg

from .._config import get_config
from ..utils._threads import blas_threads_for


def row_block(n_cols, n_rows):
    """Rows per block so that a float64 block of ``n_cols`` columns fits ``working_memory``."""
    budget = float(get_config()["working_memory"]) * 2**20
    return int(min(n_rows, max(1, budget // (8 * max(1, n_cols)))))


def _kept_eigh(A, what):
    """``(eigenvalues, eigenvectors)`` of symmetric PSD ``A`` above ``size eps max``."""
    with blas_threads_for(A.shape[0]):
        e, V = linalg.eigh(A, check_finite=False)
    top = float(e[-1]) if e.size else 0.0
    if not top > 0:
        raise ValueError(f"the {what} is zero: the kernel vanishes at the centers; check "
                         "the kernel parameters.")
    keep = e > A.shape[0] * np.finfo(np.float64).eps * top
    return e[keep], V[:, keep]


class NystromRidge:
    """Nyström kernel ridge (FALKON's estimator) for any ``alpha > 0`` from one pass.

    Same interface as :class:`~kernelkit.ridge._loo.EigenRidge` (``loo_residuals``,
    ``gcv_residuals``, ``n`` and ``top`` for
    :func:`~kernelkit.ridge._loo.roundoff_alphas`), so the CV estimators score either alike.

    Parameters
    ----------
    cross : callable
        ``cross(rows)`` returns ``k(X[rows], Z)`` (``rows`` a slice or an index array) as
        a host float64 array.
    K_mm : ndarray of shape (m, m)
        ``k(Z, Z)``, symmetric.
    Y : ndarray of shape (n, n_targets), float64
        Targets, weighted (``sqrt(w) y``) when ``sw`` is given. Not modified.
    sw : ndarray of shape (n,) or None, default=None
        Square roots of the sample weights: the rows of ``cross`` are scaled by them.
    u : ndarray of shape (n,) or None, default=None
        The column of an unpenalised intercept (``sw``, or ones); None: no intercept.
    """

    def __init__(self, cross, K_mm, Y, sw=None, u=None):
        n, m = Y.shape[0], K_mm.shape[0]
        self.cross, self.sw = cross, sw
        e, V = _kept_eigh(K_mm, "kernel matrix of the centers")
        T = V / np.sqrt(e)
        r = T.shape[1]
        B = np.empty((n, r))
        G = np.zeros((r, r))
        BtY = np.zeros((r, Y.shape[1]))
        rows = row_block(m + r, n)
        with blas_threads_for(n):
            for r0 in range(0, n, rows):  # pass 1: B and B^T B, blockwise over K_nm
                r1 = min(n, r0 + rows)
                Kb = cross(slice(r0, r1))
                Bb = (Kb if sw is None else Kb * sw[r0:r1, None]) @ T
                B[r0:r1] = Bb
                G += Bb.T @ Bb
                BtY += Bb.T @ Y[r0:r1]
        G = (G + G.T) / 2
        s, U = _kept_eigh(G, "Nystrom normal matrix")
        M = U / np.sqrt(s)
        q = M.shape[1]
        rows = row_block(r + q, n)
        with blas_threads_for(n):
            for r0 in range(0, n, rows):  # pass 2: Q = B U diag(s^-1/2), in B's memory
                r1 = min(n, r0 + rows)
                B[r0:r1, :q] = B[r0:r1] @ M
        Q = B if q == r else B[:, :q]
        self.Q, self.s, self.n, self.TM = Q, s, n, T @ M
        self.top = float(s.max(initial=0.0))
        self.QtY = M.T @ BtY
        self.R0 = Y - Q @ self.QtY  # projection residual: y - Q Q^T y
        self.lev0 = np.maximum(1.0 - np.einsum("ij,ij->i", Q, Q), 0.0)  # 1 - |Q_i|^2
        self.u = u
        if u is not None:  # the same split for the intercept's column
            self.Qtu = Q.T @ u
            self.U0 = u - Q @ self.Qtu

    def _v(self, alpha):
        """``v = (I - H0) u`` and ``v^T u`` (None without an intercept); the last alpha's
        kept (the intercept, residuals and leverages of one alpha all read it)."""
        if self.u is None:
            return None, None
        if getattr(self, "_v_last", (None,))[0] != alpha:
            v = self.U0 + self.Q @ (self._w(alpha) * self.Qtu)
            self._v_last = (alpha, v, float(v @ self.u))
        return self._v_last[1:]

    def intercept(self, alpha):
        """The intercept per target (zeros without one)."""
        v, vu = self._v(alpha)
        if v is None:
            return np.zeros(self.QtY.shape[1])
        return (self.u @ self._residuals0(alpha)) / vu  # v^T y = u^T (I - H0) y

    def predict(self, K_xz, alpha):
        """Predictions ``k(x, Z) c + b0`` from ``K_xz = k(x, Z)``, with
        ``c = T U diag(s^-1/2) diag(s / (s + alpha)) Q^T (y - b0 u)``."""
        b0 = self.intercept(alpha)
        Z = self.QtY if self.u is None else self.QtY - np.outer(self.Qtu, b0)
        return K_xz @ (self.TM @ ((self.s / (self.s + alpha))[:, None] * Z)) + b0

    def fitted_rows(self, rows, alpha):
        """The full fit's (unweighted) predictions at the training rows ``rows``."""
        step = row_block(self.TM.shape[0], len(rows))
        return np.vstack([self.predict(self.cross(rows[k:k + step]), alpha)
                          for k in range(0, len(rows), step)])

    def _w(self, alpha):
        return alpha / (self.s + alpha)

    def _residuals0(self, alpha):
        """``(I - H0) y``: the residual without an intercept."""
        return self.R0 + self.Q @ (self._w(alpha)[:, None] * self.QtY)

    def residuals(self, alpha):
        """``y - f`` at ``alpha``, shape (n, n_targets)."""
        R = self._residuals0(alpha)
        v, vu = self._v(alpha)
        return R if v is None else R - np.outer(v, (self.u @ R) / vu)

    def loo_residuals(self, alpha):
        """Exact leave-one-out residuals ``(y_i - f_i) / (1 - H_ii)``."""
        w = self._w(alpha)
        d = self.lev0.copy()
        rows = row_block(self.Q.shape[1], self.n)
        for r0 in range(0, self.n, rows):  # Q_i^2 w without an n x q temporary
            Qb = self.Q[r0:r0 + rows]
            d[r0:r0 + rows] += (Qb * Qb) @ w
        v, vu = self._v(alpha)
        if v is not None:
            d -= v * v / vu
        return self.residuals(alpha) / d[:, None]

    def gcv_residuals(self, alpha):
        """GCV residuals ``(y_i - f_i) n / (n - tr H)``."""
        w = self._w(alpha)
        dof = self.n - len(w) + float(np.sum(w))  # n - tr H0
        v, vu = self._v(alpha)
        if v is not None:
            dof -= float(v @ v) / vu
        return self.residuals(alpha) * (self.n / dof)
