"""Classical kernels, spelled as :func:`sklearn.metrics.pairwise.pairwise_kernels` spells them."""

import math
from numbers import Real

import numpy as np
from scipy.spatial.distance import cdist

from ..backend import KernelSpec
from ..utils._validation import check_scalar_param
from ._base import Kernel


MATERN_NU = (0.5, 1.5, 2.5)  # the orders with a closed form


def _gamma(gamma, n_features):
    g = check_scalar_param(gamma, "gamma", low=0.0, allow_none=True)
    return 1.0 / n_features if g is None else g


_GAMMA_BOUNDS_DOC = """
    gamma_bounds : pair of floats > 0 or "fixed", default=(1e-5, 1e5)
        Range of ``gamma`` searched by a GP optimiser (``theta = [log gamma]``, exact
        gradient); "fixed" freezes it. ``gamma=None`` is always fixed."""


def _k_log_k(K):
    """``dK/dlog(gamma) = -gamma dist K = K log K`` for ``K = exp(-gamma dist)`` (0 where
    ``K`` underflowed: the limit of ``K log K``)."""
    pos = K > 0
    return np.where(pos, K * np.log(np.where(pos, K, 1.0)), 0.0)[..., None]


class RBF(Kernel):
    """Gaussian kernel ``k(x, y) = exp(-gamma ||x - y||^2)``.

    Same values as :func:`sklearn.metrics.pairwise.rbf_kernel`.

    Parameters
    ----------
    gamma : float > 0, default=None
        Inverse squared length scale; None means ``1 / n_features``.{bounds}
    """

    _stationary = True

    def __init__(self, gamma=None, gamma_bounds=(1e-5, 1e5)):
        self.gamma = gamma
        self.gamma_bounds = gamma_bounds

    def _spec(self, n_features):
        return KernelSpec("rbf", (_gamma(self.gamma, n_features),))

    def _gradient(self, X, K, free):
        return _k_log_k(K)


class Laplacian(Kernel):
    """Laplacian kernel ``k(x, y) = exp(-gamma ||x - y||_1)`` (L1 distance).

    Same values as :func:`sklearn.metrics.pairwise.laplacian_kernel`.

    Parameters
    ----------
    gamma : float > 0, default=None
        Inverse length scale; None means ``1 / n_features``.{bounds}
    """

    _stationary = True

    def __init__(self, gamma=None, gamma_bounds=(1e-5, 1e5)):
        self.gamma = gamma
        self.gamma_bounds = gamma_bounds

    def _spec(self, n_features):
        return KernelSpec("laplacian", (_gamma(self.gamma, n_features),))

    def _gradient(self, X, K, free):
        return _k_log_k(K)


class Matern(Kernel):
    """Matérn kernel with smoothness ``nu`` in {0.5, 1.5, 2.5}.

    With ``r = ||x - y||_2`` and length scale ``l = 1 / sqrt(2 gamma)`` (so that
    Matérn tends to ``RBF(gamma)`` as ``nu`` grows), ``nu = 0.5`` gives
    ``exp(-r / l)``, ``nu = 1.5`` gives ``(1 + sqrt(3) r / l) exp(-sqrt(3) r / l)`` and
    ``nu = 2.5`` gives ``(1 + sqrt(5) r / l + 5 r^2 / (3 l^2)) exp(-sqrt(5) r / l)``,
    equal to :class:`sklearn.gaussian_process.kernels.Matern` with ``length_scale=l``.

    Parameters
    ----------
    gamma : float > 0, default=None
        None means ``1 / n_features``.
    nu : {0.5, 1.5, 2.5}, default=1.5
        Not a hyperparameter (as in scikit-learn's ``Matern``).{bounds}
    """

    _stationary = True

    def __init__(self, gamma=None, nu=1.5, gamma_bounds=(1e-5, 1e5)):
        self.gamma = gamma
        self.nu = nu
        self.gamma_bounds = gamma_bounds

    def _gradient(self, X, K, free):
        # s = r / l = r sqrt(2 gamma): dK/dlog(gamma) = (s / 2) dK/ds
        s = cdist(X, X) * math.sqrt(2.0 * self.gamma)
        if self.nu == 0.5:
            g = -s * np.exp(-s)
        elif self.nu == 1.5:
            g = -3.0 * s * s * np.exp(-math.sqrt(3.0) * s)
        else:
            g = -(5.0 / 3.0) * s * s * (1.0 + math.sqrt(5.0) * s) * np.exp(-math.sqrt(5.0) * s)
        return (0.5 * g)[..., None]

    def _spec(self, n_features):
        if not isinstance(self.nu, Real) or isinstance(self.nu, bool) or self.nu not in MATERN_NU:
            raise ValueError(f"nu must be one of 0.5, 1.5, 2.5, got {self.nu!r}.")
        return KernelSpec("matern", (_gamma(self.gamma, n_features), float(self.nu)))


class Polynomial(Kernel):
    """Polynomial kernel ``k(x, y) = (gamma x.y + coef0) ** degree``.

    Same values as :func:`sklearn.metrics.pairwise.polynomial_kernel`.

    Parameters
    ----------
    gamma : float > 0, default=None
        None means ``1 / n_features``.
    degree : float >= 0, default=3
        Exponent (not a hyperparameter).
    coef0 : float, default=1
        Additive constant inside the power (not a hyperparameter: it may be <= 0).{bounds}
    """

    def __init__(self, gamma=None, degree=3, coef0=1, gamma_bounds=(1e-5, 1e5)):
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.gamma_bounds = gamma_bounds

    def _gradient(self, X, K, free):
        # dK/dlog(gamma) = degree * gamma x.y * (gamma x.y + coef0)^(degree - 1)
        d = float(self.degree)
        if d == 0:
            return np.zeros(K.shape + (1,))
        gxy = self.gamma * (X @ X.T)
        with np.errstate(divide="ignore", invalid="ignore"):
            G = d * gxy * (gxy + self.coef0) ** (d - 1.0)
        # x.y = 0: exactly 0 (K does not move with gamma there), not 0 * inf where coef0 = 0
        # and degree < 1 (one-hot or boolean rows)
        return np.where(gxy == 0, 0.0, G)[..., None]

    def _spec(self, n_features):
        degree = check_scalar_param(self.degree, "degree", low=0.0, low_inclusive=True)
        coef0 = check_scalar_param(self.coef0, "coef0")
        return KernelSpec("polynomial", (_gamma(self.gamma, n_features), degree, coef0))


class Linear(Kernel):
    """Linear kernel ``k(x, y) = x.y`` (:func:`sklearn.metrics.pairwise.linear_kernel`)."""

    def __init__(self):
        pass

    def _spec(self, n_features):
        return KernelSpec("linear", ())


class Cosine(Kernel):
    """Cosine similarity ``x.y / (||x|| ||y||)``, 0 where either vector is zero.

    Same values as :func:`sklearn.metrics.pairwise.cosine_similarity`, clipped to [-1, 1].
    """

    def __init__(self):
        pass

    def _spec(self, n_features):
        return KernelSpec("cosine", ())


for _cls in (RBF, Laplacian, Matern, Polynomial):
    _cls.__doc__ = _cls.__doc__.replace("{bounds}", _GAMMA_BOUNDS_DOC)
del _cls
