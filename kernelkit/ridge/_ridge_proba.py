"""Out-of-sample decision values of the ridge-type classifiers, for their calibration.

The shared calibration (:mod:`kernelkit.utils._calibration`) fits one inverse
temperature on decision values the model did not see. Here is where they come from:

* exact kernel ridge (Cholesky): the exact leave-one-out values of the same fit. With
  ``G = K + alpha W^-1`` (``W`` the row weights, class weights included) the fit is
  ``c = G^-1 y`` and ``y - K c = alpha W^-1 c``; the hat matrix ``H = K G^-1`` has
  ``I - H = alpha W^-1 G^-1``, so the leave-one-out residual
  ``(y_i - f_i) / (1 - H_ii)`` (Allen 1974; it holds for weighted least squares,
  leaving a row out being ``w_i = 0``) is ``c_i / (G^-1)_ii``. The solver factors
  ``M = S K S + alpha I`` (``S = W^1/2``), whose solution is ``z = S^-1 c`` and
  ``G^-1 = S M^-1 S``: ``f_loo_i = y_i - z_i / (s_i (M^-1)_ii)``; a zero-weight row
  does not move the fit, so its value is the fit's own.
* kernel ridge by PCG: :func:`calibration_split` holds out a stratified tenth of the
  rows, and a second PCG solve with their weights set to 0 (the same system, so the
  same solver) is the model those rows are out of.
* FALKON: the Nyström leave-one-out values (:mod:`kernelkit.ridge._falkon_loo`).
"""

import copy

import numpy as np
import scipy.sparse as sp

from ._intercept import joint_rhs, split_joint

HOLDOUT_FRACTION = 0.1  # of each class, for the calibration of iterative solvers


def loo_decision(Y, z, inv_diag, sw, fitted):
    """Exact leave-one-out decision values of a (weighted) Cholesky kernel ridge fit.

    Parameters
    ----------
    Y : ndarray of shape (n, k)
        Unweighted targets.
    z : ndarray of shape (n, k)
        Solution of ``(S K S + alpha I) z = S Y``.
    inv_diag : ndarray of shape (n,) or (n, k)
        ``diag((S K S + alpha I)^-1)``.
    sw : ndarray of shape (n,) or None
        ``S``'s diagonal (square roots of the row weights).
    fitted : callable
        ``fitted(rows)``: the full fit's values at those rows (read for zero-weight rows).

    Returns
    -------
    f_loo : ndarray of shape (n, k)
    """
    n = Y.shape[0]
    d = inv_diag.reshape(n, -1)
    if sw is None:
        return Y - z / d
    pos = sw > 0
    out = np.empty_like(Y)
    out[pos] = Y[pos] - z[pos] / (sw[pos, None] * d[pos])
    if not np.all(pos):
        out[~pos] = fitted(np.flatnonzero(~pos))
    return out


def calibration_split(y_idx, weights, rng, fraction=HOLDOUT_FRACTION):
    """Rows held out for the calibration: ``ceil(fraction n_k)`` of each class's
    positive-weight rows, leaving at least one of them in training.

    Parameters
    ----------
    y_idx : ndarray of shape (n,), int
    weights : ndarray of shape (n,) or None
    rng : numpy.random.RandomState

    Returns
    -------
    held : ndarray of shape (n,), bool
        All False when no class has two positive-weight rows.
    """
    held = np.zeros(len(y_idx), bool)
    live = np.ones(len(y_idx), bool) if weights is None else weights > 0
    for k in np.unique(y_idx):
        rows = np.flatnonzero((y_idx == k) & live)
        if len(rows) >= 2:
            take = min(len(rows) - 1, int(np.ceil(fraction * len(rows))))
            held[rng.choice(rows, take, replace=False)] = True
    return held


def holdout_decision(est, X, Y0, sw, product, solve, rng):
    """PCG: the decision values of a held-out tenth of the rows (stratified, positive
    weights) from a second solve of the same system with their weights set to 0 (with
    ``fit_intercept``, the bordered system's, its intercept refitted too).

    ``est`` is the kernel ridge classifier being fitted (its ``_y_idx``, kernel and
    ``fit_intercept``), ``product`` the fit's :class:`~kernelkit.ridge._pcg.KernelProduct`,
    ``solve`` its ``pcg_ridge`` with the fit's settings. Returns ``(rows, values)`` or
    None when no row can be held out.
    """
    held = calibration_split(est._y_idx, None if sw is None else sw, rng)
    if not held.any():
        return None
    sw2 = np.where(held, 0.0, 1.0) if sw is None else np.where(held, 0.0, sw)
    p2 = copy.copy(product)  # the held kernel matrix is shared, not copied
    p2.sw = sw2
    Y2 = Y0.reshape(len(sw2), -1) * sw2[:, None]
    u2 = sw2 if est._intercept_on() else None
    rhs, rhs_alpha = joint_rhs(Y2, u2, solve.keywords["alpha"])
    Z, _, _ = solve(p2, rhs, alpha=rhs_alpha, owner=f"{type(est).__name__} (calibration split)")
    z, b = split_joint(Z, Y2, u2)
    c = z * sw2[:, None]
    b = 0.0 if b is None else b
    rows = np.flatnonzero(held)
    if est._precomputed():
        return rows, X[rows] @ c + b
    op = est._operator(sp.issparse(X))
    dec = op.matmul(X[rows], X, c)
    return rows, np.asarray(dec if sp.issparse(X) else op.engine.to_host(dec)) + b
