"""Classical kernels, spelled as :func:`sklearn.metrics.pairwise.pairwise_kernels` spells them."""

from numbers import Real

from ..backend import KernelSpec
from ..utils._validation import check_scalar_param
from ._base import Kernel


def _gamma(gamma, n_features):
    g = check_scalar_param(gamma, "gamma", low=0.0, allow_none=True)
    return 1.0 / n_features if g is None else g


class RBF(Kernel):
    """Gaussian kernel ``k(x, y) = exp(-gamma ||x - y||^2)``.

    Same values as :func:`sklearn.metrics.pairwise.rbf_kernel`.

    Parameters
    ----------
    gamma : float > 0, default=None
        Inverse squared length scale; None means ``1 / n_features``.
    """

    _stationary = True

    def __init__(self, gamma=None):
        self.gamma = gamma

    def _spec(self, n_features):
        return KernelSpec("rbf", (_gamma(self.gamma, n_features),))


class Laplacian(Kernel):
    """Laplacian kernel ``k(x, y) = exp(-gamma ||x - y||_1)`` (L1 distance).

    Same values as :func:`sklearn.metrics.pairwise.laplacian_kernel`.

    Parameters
    ----------
    gamma : float > 0, default=None
        Inverse length scale; None means ``1 / n_features``.
    """

    _stationary = True

    def __init__(self, gamma=None):
        self.gamma = gamma

    def _spec(self, n_features):
        return KernelSpec("laplacian", (_gamma(self.gamma, n_features),))


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
    """

    _stationary = True

    def __init__(self, gamma=None, nu=1.5):
        self.gamma = gamma
        self.nu = nu

    def _spec(self, n_features):
        if not isinstance(self.nu, Real) or isinstance(self.nu, bool) or self.nu not in (
                0.5, 1.5, 2.5):
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
        Exponent.
    coef0 : float, default=1
        Additive constant inside the power.
    """

    def __init__(self, gamma=None, degree=3, coef0=1):
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0

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
