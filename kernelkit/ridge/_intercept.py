"""The unpenalised intercept of kernel ridge: the bordered system by a Schur complement.

Minimising ``sum_i w_i (y_i - f(x_i) - b)^2 + alpha ||f||_H^2`` over ``f = K c`` and a
free ``b`` gives, with ``S = W^1/2``, ``z = S^-1 c``, ``u = S 1`` and
``G = S K S + alpha I``, the bordered system

    [[G, u], [u^T, 0]] [z; b] = [S y; 0]

(the first block row is the stationarity in ``c``, ``(K + alpha W^-1) c = y - b 1`` on
the positive-weight rows; the second is the stationarity in ``b``,
``1^T W (y - K c - b 1) = alpha 1^T c = 0``). Its Schur complement is a scalar: with
``z_y = G^-1 S y`` and ``z_u = G^-1 u`` (one extra right-hand side of the same system,
solved together with ``y`` by any solver of ``G``),

    b = u^T z_y / u^T z_u,    z = z_y - b z_u,

exact whenever the two solves are. For ``w = 1`` it reads
``b = 1^T (K + alpha I)^-1 y / 1^T (K + alpha I)^-1 1``, the generalised least-squares
mean of ``y`` under the covariance ``K + alpha I`` (Rasmussen & Williams 2006, eq. 2.42
with a vague prior on ``b``).
"""

import numpy as np

FIT_INTERCEPT_DOC = """
    fit_intercept : bool, default=False
        Fit an unpenalised intercept ``b`` (``f(x) = k(x, X) c + b``), exactly: the
        bordered system ``[[K + alpha W^-1, 1], [1^T, 0]] [c; b] = [y; 0]``, solved by
        its Schur complement (one extra right-hand side ``1`` of the same system, with
        the targets, by the same solver: ``b = u^T z_y / u^T z_u``, see
        ``intercept_``). False (default) is :class:`sklearn.kernel_ridge.KernelRidge`'s
        model, which has none. With ``return_std`` / ``return_cov`` the moments are
        the Gaussian process's with a vague prior on ``b`` (Rasmussen & Williams 2006,
        eq. 2.42): the variance gains ``(1 - 1^T K_a^-1 k_x)^2 / 1^T K_a^-1 1``
        (``K_a = K + alpha W^-1``), the uncertainty of the estimated ``b``."""


def joint_rhs(Y, u, alpha):
    """Right-hand sides ``[Y, u]`` and their alphas for one solve of ``G``.

    ``alpha`` a float: one column ``u``; an array (one per target): a column ``u`` per
    target, at that target's alpha. ``u`` None: ``(Y, alpha)`` unchanged.
    """
    if u is None:
        return Y, alpha
    Y2 = Y.reshape(len(Y), -1)
    if np.ndim(alpha) == 0:
        return np.column_stack([Y2, u]), alpha
    return (np.column_stack([Y2, np.repeat(u[:, None], Y2.shape[1], axis=1)]),
            np.concatenate([alpha, alpha]))


def split_joint(Z, Y, u, residual=None):
    """``(z, b)`` from the solution ``Z`` of :func:`joint_rhs`'s system (``b`` of shape
    (n_targets,), None without an intercept); ``z`` has ``Y``'s shape.

    ``residual``: ``rhs - G Z`` where ``Z`` is the minimum-norm solution of a singular
    ``G`` (:func:`~kernelkit.utils._linalg.solve_ridge`'s ``info``). Where ``u`` has a
    part ``u_o`` outside ``G``'s range, the intercept fits the targets' part ``y_o``
    there, ``b = u_o^T y_o / u_o^T u_o`` (the limit ``alpha -> 0+`` of the formula
    below, and for a linear kernel the least-squares intercept); ``z = z_y - b z_u``
    as always."""
    if u is None:
        return Z, None
    k = Y.reshape(len(Y), -1).shape[1]
    Zy, Zu = Z[:, :k], Z[:, k:]
    reach = np.ones(Zu.shape[1], dtype=bool)  # u within G's range (per column of u)
    if residual is not None:
        R = residual.reshape(len(Y), -1)
        Ry, Ru = R[:, :k], R[:, k:]
        out = (Ru * Ru).sum(axis=0)
        reach = out <= 1e-16 * float(u @ u)  # up to rounding
    den = u @ Zu
    if not (np.all(np.isfinite(den[reach])) and np.all(den[reach] > 0)):
        raise ValueError("fit_intercept=True: 1^T (K + alpha W^-1)^-1 1 is not positive at "
                         "this alpha (a singular system); increase alpha or set "
                         "fit_intercept=False.")
    b = (u @ Zy) / np.where(reach, den, 1.0)
    if not np.all(reach):
        b = np.where(reach, b, (Ru * Ry).sum(axis=0) / np.where(reach, 1.0, out))
    z = Zy - Zu * b
    return (z[:, 0] if Y.ndim == 1 else z), b


def bordered_inv_diag(inv_diag, Z, Y, u):
    """``diag(M)``, ``M = G^-1 - z_u z_u^T / u^T z_u``: the leverages' complement of the
    bordered system (``I - H = alpha S^-1 M S``), from ``diag(G^-1)`` (``inv_diag``,
    (n,) or one column per column of ``Z``) and the joint solution ``Z``."""
    n = len(Y)
    k = Y.reshape(n, -1).shape[1]
    d = inv_diag.reshape(n, -1)
    d = d[:, :k] if d.shape[1] > 1 else d
    Zu = Z[:, k:]
    return d - Zu * Zu / (u @ Zu)
