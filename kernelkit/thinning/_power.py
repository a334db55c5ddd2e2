"""Power kernels of Generalized Kernel Thinning without an engine kernel (host, SciPy)."""

import math

import numpy as np


def matern_profile(nu, u):
    """Matérn correlation ``2^(1-nu) / Gamma(nu) u^nu K_nu(u)`` (1 at ``u = 0``).

    Parameters
    ----------
    nu : float > 0
        Smoothness.
    u : ndarray of float >= 0
        Scaled distance.

    Returns
    -------
    values : ndarray of the shape of ``u``, float64 in (0, 1]
    """
    from scipy.special import gammaln, kve

    u = np.asarray(u, dtype=np.float64)
    out = np.ones_like(u)
    # For nu > 1 the profile is 1 - O(u^2): 1 to rounding below u = 1e-8, where
    # K_nu(u) ~ u^-nu could overflow. For nu <= 1 the formula is finite down to
    # the smallest positive u.
    pos = u > (1e-8 if nu > 1.0 else 0.0)
    up = u[pos]
    with np.errstate(over="ignore", divide="ignore"):
        log_val = ((1.0 - nu) * math.log(2.0) - gammaln(nu) + nu * np.log(up)
                   + np.log(kve(nu, up)) - up)
    out[pos] = np.minimum(np.exp(log_val), 1.0)
    return out


def power_block(name, params, X, Y):
    """Power-kernel block ``k_alpha(X, Y)`` for the kernels without an engine spec.

    Parameters
    ----------
    name : {"matern_power", "laplacian_power"}
        ``"matern_power"``, ``params = (kappa, nu)``: the Matérn kernel
        ``matern_profile(nu, kappa ||x - y||_2)``. ``"laplacian_power"``,
        ``params = (gamma, nu)``: the product over coordinates
        ``prod_j matern_profile(nu, gamma |x_j - y_j|)``.
    params : tuple of float
    X : ndarray of shape (n_X, d), float64
    Y : ndarray of shape (n_Y, d), float64

    Returns
    -------
    K : ndarray of shape (n_X, n_Y), float64
    """
    from scipy.spatial.distance import cdist

    if name == "matern_power":
        kappa, nu = params
        return matern_profile(nu, kappa * cdist(X, Y))
    if name == "laplacian_power":
        gamma, nu = params
        K = np.ones((X.shape[0], Y.shape[0]))
        for j in range(X.shape[1]):
            K *= matern_profile(nu, gamma * np.abs(X[:, j, None] - Y[None, :, j]))
        return K
    raise ValueError(f"unknown power kernel {name!r}")
