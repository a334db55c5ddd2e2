"""Spectral densities of the stationary kernels, as samplers of frequencies.

By Bochner's theorem a stationary kernel ``k(x - y)`` with ``k(0) = 1`` is the
characteristic function of a probability density ``p(w)``: ``k(delta) = E cos(w.delta)``.
In kernelkit's conventions (:mod:`kernelkit.kernels`):

* RBF ``exp(-gamma ||delta||^2)``: ``w ~ N(0, 2 gamma I)``;
* Laplacian ``exp(-gamma ||delta||_1)`` (L1: a product over coordinates of
  ``exp(-gamma |delta_j|)``): ``w_j`` i.i.d. Cauchy of scale ``gamma``;
* Matérn of smoothness ``nu`` and length scale ``l = 1 / sqrt(2 gamma)``: the
  multivariate t density with ``2 nu`` degrees of freedom and scale ``1 / l``,
  ``p(w) ~ (1 + l^2 ||w||^2 / (2 nu))^-(nu + d/2)``, sampled as
  ``w = sqrt(2 gamma) g sqrt(2 nu / u)`` with ``g ~ N(0, I_d)``, ``u ~ chi^2_{2 nu}``
  (it tends to the RBF's Gaussian as ``nu`` grows).

RBF and Matérn densities are radial, so a frequency is a uniform direction times an
independent radius: ``sqrt(2 gamma) chi_d`` (times ``sqrt(2 nu / u)`` for Matérn). The
orthogonal and structured samplers replace the i.i.d. directions by orthogonal ones and
keep these radii, so each frequency keeps its exact marginal law. The Laplacian's
product-Cauchy density is not radial: it has no orthogonal sampler here.
"""

import math
from numbers import Real

import numpy as np

RADIAL = ("rbf", "matern")


def check_nu(nu):
    """Matérn smoothness: a number > 0 (``inf``: the RBF limit); returns a float."""
    if isinstance(nu, bool) or not isinstance(nu, Real) or not nu > 0:
        raise ValueError(f"nu must be a number > 0 (a Matérn kernel with nu <= 0 has no "
                         f"spectral density; nu=inf is the RBF), got {nu!r}.")
    return float(nu)


def radii(kernel, gamma, nu, dof, size, rng):
    """Norms of ``size`` frequencies of a radial density in ``dof`` dimensions."""
    r = math.sqrt(2.0 * gamma) * np.sqrt(rng.chisquare(dof, size))
    if kernel == "matern" and math.isfinite(nu):
        r *= np.sqrt(2.0 * nu / rng.chisquare(2.0 * nu, size))
    return r


def iid_frequencies(kernel, gamma, nu, d, m, rng):
    """``m`` independent frequencies, shape (d, m)."""
    if kernel == "laplacian":
        return gamma * rng.standard_cauchy((d, m))
    W = rng.standard_normal((d, m)) * math.sqrt(2.0 * gamma)
    if kernel == "matern" and math.isfinite(nu):
        W *= np.sqrt(2.0 * nu / rng.chisquare(2.0 * nu, m))[None, :]
    return W


def random_orthogonal(d, rng):
    """A Haar-distributed orthogonal ``d x d`` matrix: QR of a Gaussian matrix with the
    signs of ``R``'s diagonal moved into ``Q`` (without it ``Q`` is not uniform)."""
    Q, R = np.linalg.qr(rng.standard_normal((d, d)))
    return Q * np.where(np.diag(R) < 0, -1.0, 1.0)[None, :]


def orthogonal_frequencies(kernel, gamma, nu, d, m, rng):
    """ORF (Yu et al., NeurIPS 2016): blocks of ``d`` orthogonal directions, each scaled
    by an independent radius of the kernel's radial law; shape (d, m)."""
    blocks = [random_orthogonal(d, rng) for _ in range(-(-m // d))]
    directions = np.concatenate(blocks, axis=1)[:, :m]  # columns: unit vectors
    return directions * radii(kernel, gamma, nu, d, m, rng)[None, :]
