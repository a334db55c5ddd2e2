"""The EigenPro preconditioner: Nyström eigensystem, batch size and step size.

See :mod:`kernelkit.eigenpro._solver` for the notation (Ma & Belkin 2019;
Abedsoltan, Belkin & Pandit 2023).
"""

import math
import warnings

import numpy as np
from scipy import linalg

from ..utils._threads import blas_threads_for

# Nyström eigenvalues below this fraction of the largest are rounding noise.
RANK_RTOL = 1e-10

def nystrom_eigensystem(K_JJ, n_eig, C=None):
    """See :func:`_nystrom_eigensystem`; BLAS threads chosen for the size."""
    with blas_threads_for(K_JJ.shape[0]):
        return _nystrom_eigensystem(K_JJ, n_eig, C)


def _nystrom_eigensystem(K_JJ, n_eig, C=None):
    """Top eigenpairs of a kernel covariance operator restricted to ``span K(., Z_J)``.

    Parameters
    ----------
    K_JJ : ndarray of shape (s, s), float64
        Kernel matrix of the Nyström points ``Z_J``.
    n_eig : int
        Number of eigenpairs wanted (fewer are returned past the numerical rank).
    C : ndarray of shape (s, s_e), default=None
        ``K(Z_J, X_e)`` for a uniform data sample ``X_e``: the operator is then
        ``1/s_e sum_{x in X_e} k(., x) (x) k(., x)`` (generalised eigenproblem
        ``C C^T a / s_e = sigma K_JJ a``). None means ``Z_J`` itself is a uniform data
        sample (standard Nyström: eigenpairs of ``K_JJ / s``).

    Returns
    -------
    sigma : ndarray of shape (r,), descending, all > ``RANK_RTOL * sigma[0]``
    A : ndarray of shape (s, r)
        ``psi_i = K(., Z_J) A[:, i]`` are orthonormal in the RKHS.
    """
    s = K_JJ.shape[0]
    if C is None:
        lo = max(0, s - n_eig)
        lam, U = linalg.eigh(K_JJ, subset_by_index=[lo, s - 1], check_finite=False)
        lam, U = lam[::-1], U[:, ::-1]
        keep = lam > RANK_RTOL * max(lam[0], 0.0)
        if not keep[0]:
            raise ValueError("the kernel matrix of the Nyström subsample is zero; check the "
                             "kernel parameters.")
        lam, U = lam[keep], U[:, keep]
        return lam / s, U / np.sqrt(lam)
    lam, U = linalg.eigh(K_JJ, check_finite=False)
    keep = lam > RANK_RTOL * max(lam[-1], 0.0)
    if not np.any(keep):
        raise ValueError("the kernel matrix of the Nyström centers is zero; check the kernel "
                         "parameters.")
    W = U[:, keep] / np.sqrt(lam[keep])
    M = W.T @ C
    G = (M @ M.T) / C.shape[1]
    r = G.shape[0]
    sig, Q = linalg.eigh(G, subset_by_index=[max(0, r - n_eig), r - 1], check_finite=False)
    sig, Q = sig[::-1], Q[:, ::-1]
    keep = sig > RANK_RTOL * max(sig[0], 0.0)
    if not keep[0]:
        raise ValueError("the kernel is zero on the training data; check the kernel parameters.")
    return sig[keep], W @ Q[:, keep]


def preconditioned_top(sigma, q, damping, shift):
    """``lambda_1(P)``: top eigenvalue of the preconditioned operator for ``q`` components."""
    lam = sigma + shift
    if q == 0:
        return float(lam[0])
    return float(lam[q] ** damping * lam[0] ** (1.0 - damping))


def coefficients(sigma, q, damping, shift):
    """``c_i = 1 - ((sigma_{q+1} + mu) / (sigma_i + mu)) ** damping``, i < q."""
    lam = sigma + shift
    return 1.0 - (lam[q] / lam[:q]) ** damping


def auto_components(sigma, q_max, damping, shift, beta, target_batch, n, n_subsample):
    """Smallest ``q <= q_max`` whose critical batch reaches ``target_batch``.

    This is EigenPro 2's adaptation of the kernel to the hardware: precondition just
    enough that the largest batch the memory allows is within the linear-scaling
    regime (Ma & Belkin 2019). Never below the Nyström resolution: ``lambda_1(P)``
    stays >= ``beta / s`` (the EigenPro 2 code caps the batch at ``s`` likewise), since
    ``s`` points do not resolve smaller eigenvalues and flattening to a misestimated
    level would underestimate ``lambda_1(P)`` and overstep.
    """
    floor = beta / n_subsample
    best = 0
    for q in range(q_max + 1):
        top = preconditioned_top(sigma, q, damping, shift)
        if q and top < floor:
            break
        best = q
        if critical_batch(n, beta, top) >= target_batch:
            break
    return best


def critical_batch(n, beta, top):
    """Critical batch size ``m*``: ``beta / lambda_1`` (Ma, Bassily & Belkin 2018).

    Batches are drawn without replacement from ``n`` points, which scales the
    gradient-noise term ``beta / m`` by ``c = (n - m) / (n - 1)``; ``m*`` solves
    ``m = c(m) beta / lambda_1``, i.e. ``n beta / ((n - 1) lambda_1 + beta)``, which is
    the papers' ``beta / lambda_1`` for ``n >> beta / lambda_1``.
    """
    if n <= 1:
        return 1.0
    return n * beta / ((n - 1) * top + beta)


def step_size(m, n, beta, top, lam_min, flat=False):
    """Step size for batch size ``m`` out of ``n`` (Ma, Bassily & Belkin 2018; EigenPro 2).

    With ``c = (n - m) / (n - 1)`` (sampling without replacement; 1 for ``m << n``):
    ``m / (c beta + (m - c) lam_min)`` up to the critical batch ``m*`` (linear scaling:
    ``m / beta`` in the papers), ``2 m / (c beta + (m - c) (lambda_1 + lam_min))``
    beyond (saturation: ``2 m / (beta + (m - 1) lambda_1)`` in the papers). These
    minimise the bound ``1 - 2 eta lambda + eta^2 lambda (c beta / m + (1 - c / m) lambda)``
    on the expected contraction along an eigenvalue ``lambda`` of the preconditioned
    operator, for the slowest direction (``lam_min``, the ridge shift) and, beyond
    ``m*``, for the slowest and fastest together.

    ``flat``: the preconditioned spectrum has nothing below ``lambda_1(P)`` (a kernel
    of numerical rank ``q + 1``, e.g. identical rows: rank one). The saturation step
    would then sit exactly on the top direction's stability limit (``eta lambda_1 =
    2``: the iterates oscillate and never converge); the step minimising that
    direction's bound, ``m / (c beta + (m - c) (lambda_1 + lam_min))``, is used
    beyond ``m*`` instead. One point (``n = 1``): the exact step ``1 / (beta + lam_min)``.
    """
    if n <= 1:
        return m / (beta + lam_min)
    c = (n - m) / (n - 1)
    # rounding must not move m = m* (e.g. 1 for a rank-one kernel) into saturation
    if m <= critical_batch(n, beta, top) * (1.0 + 1e-9):
        return m / (c * beta + (m - c) * lam_min)
    if flat:
        return m / (c * beta + (m - c) * (top + lam_min))
    return 2.0 * m / (c * beta + (m - c) * (top + lam_min))


class Preconditioner:
    """An EigenPro preconditioner with its step size, on the engine's device.

    Attributes
    ----------
    J : ndarray of int, sorted
        Center indices of the Nyström points.
    q : int
        Number of eigen-directions flattened.
    sigma : ndarray (host float64)
        Estimated top eigenvalues of the covariance operator (``q + 1`` of them).
    beta, top, critical_batch, batch_size, eta : float / int
    A, c : engine arrays in the compute dtype (``A`` restricted to ``q`` columns)
    """

    def __init__(self, xp, dtype, J, sigma, A, q, damping, shift, beta, batch_size, eta,
                 n_max, eta_scale=1.0, top=None):
        self.J = J
        self.q = int(q)
        # nothing below lambda_1(P): the caller asks for q + 2 eigenpairs, so fewer mean
        # the numerical rank is q + 1
        self.flat = sigma.shape[0] <= self.q + 1
        self.sigma = sigma[: self.q + 1]
        self.beta = float(beta)
        self.top_nystrom = preconditioned_top(sigma, self.q, damping, shift)
        self.top = self.top_nystrom if top is None else float(top)
        self.critical_batch = critical_batch(n_max, self.beta, self.top)
        if batch_size is None:
            batch_size = self.critical_batch
        self.batch_size = int(max(1, min(n_max, math.floor(batch_size))))
        self.n_max, self.shift = int(n_max), float(shift)
        # a flat spectrum's step (optimal for its one level) cannot overshoot: the
        # projection's half step (PROJECTION_ETA_SCALE) would only halve each solve
        self.eta_scale = 1.0 if self.flat else float(eta_scale)
        self.user_eta = eta is not None
        self.auto_eta = self.step(self.batch_size, auto=True)
        self.eta = self.auto_eta if eta is None else float(eta)
        self._steps = {}
        self.A = xp.asarray(A[:, : self.q], dtype=dtype)
        self.c = xp.asarray(coefficients(sigma, self.q, damping, shift), dtype=dtype)
        self.Jx = xp.asarray(J)

    def step(self, m, auto=False):
        """Step size for a batch of ``m`` points (the last batch of an epoch may be short).

        Automatic: the formula for ``m`` itself (a short batch with a full batch's step
        per point could leave the stable range). Given ``eta``: the same step per point,
        ``eta * m / batch_size``.
        """
        if not auto and self.user_eta:
            return self.eta * m / self.batch_size
        if auto:
            return self.eta_scale * step_size(m, self.n_max, self.beta, self.top, self.shift,
                                              self.flat)
        if m not in self._steps:
            self._steps[m] = self.step(m, auto=True)
        return self._steps[m]

    def direction(self, KJB_T_R):
        """``A diag(c) A^T v``: the Nyström-point coefficients of the correction."""
        if self.q == 0:
            return None
        w = self.A.T @ KJB_T_R
        return self.A @ (self.c[:, None] * w)


def measured_top(A, c, K_vv, K_vJ, shift, v0=None):
    """``lambda_1(P K)`` measured on a data sample ``X_v`` of ``v`` points.

    ``v0`` (length ``v``) starts the Lanczos iteration; the fit draws it from its
    ``random_state``. Without it ARPACK draws its own start from a process-wide seed
    that advances with every call, so the same fit would depend on what ran before.

    On the span of ``k(., x)``, ``x`` in ``X_v``, the operator ``P K_v`` (with
    ``K_v = 1/v sum_x k(., x) (x) k(., x)``) has the nonzero eigenvalues of the ``v x v``
    matrix ``(K_vv - K_vJ A diag(c) A^T K_Jv) / v``. Unlike the Nyström value
    ``lambda_{q+1}^rho lambda_1^(1 - rho)`` it sees the top eigen-directions that the
    ``s`` Nyström points capture only in part, so the step size does not overshoot them.
    """
    with blas_threads_for(K_vv.shape[0]):
        return _measured_top(A, c, K_vv, K_vJ, shift, v0)


def _measured_top(A, c, K_vv, K_vJ, shift, v0):
    v = K_vv.shape[0]
    B = K_vJ @ A
    M = (K_vv - (B * c) @ B.T) / v
    M = (M + M.T) / 2
    try:
        from scipy.sparse.linalg import eigsh

        lam = float(eigsh(M, k=1, which="LA", return_eigenvectors=False, tol=1e-6,
                          v0=v0)[0])
    except Exception:  # ARPACK failure: dense fallback
        lam = float(linalg.eigh(M, eigvals_only=True, subset_by_index=[v - 1, v - 1])[0])
    return lam + shift


def build_preconditioner(xp, dtype, sigma, A, J, n_components, q_max, damping, shift, beta,
                         batch_size, batch_limit, eta, n_max, what, eta_scale=1.0, check=None):
    """Choose ``q`` (auto or given), then batch size and step size, as in EigenPro 2.

    ``batch_limit`` is the largest batch fitting in ``working_memory``; ``n_max`` the
    number of points the batches are drawn from. ``check = (K_vv, K_vJ, v0)``, kernel
    blocks of a fresh data sample and a start vector, measures ``lambda_1(P)``
    (:func:`measured_top`); the larger of that and the Nyström value sets the critical
    batch and the step. Warns when a given ``n_components`` exceeds the numerical rank
    of the subsample's kernel matrix.
    """
    n_subsample = len(J)
    r = sigma.shape[0]
    if n_components == "auto":
        # As the EigenPro 2 code, a critical batch beyond the subsample size would rest on
        # eigenvalues below ~1/s, which s Nyström points do not resolve. Half the points
        # at most: beyond, sampling without replacement leaves little gradient noise, the
        # critical batch approaches n only as lambda_1(P) -> 0, and q would flatten the
        # spectrum far below what the step size can use.
        target = min(max(1, n_max // 2), batch_limit if batch_size is None else batch_size,
                      n_subsample)
        q = auto_components(sigma, min(q_max, r - 1), damping, shift, beta, target, n_max,
                            n_subsample)
    else:
        q = int(n_components)
        if q > r - 1:
            warnings.warn(f"n_components={q} exceeds the numerical rank of the kernel on the "
                          f"{what} Nyström subsample ({r} eigenvalues above {RANK_RTOL:g} of "
                          f"the largest); using n_components={r - 1}.", UserWarning,
                          stacklevel=4)
            q = r - 1
    top = preconditioned_top(sigma, q, damping, shift)
    measured = None
    if check is not None and q > 0:
        K_vv, K_vJ, v0 = check
        measured = measured_top(A[:, :q], coefficients(sigma, q, damping, shift), K_vv, K_vJ,
                                shift, v0=v0)
        top = max(top, measured)
    if batch_size is None:
        # a flat spectrum gains nothing from small batches (no linear-scaling regime to
        # stay in): the largest batch that fits, whose step then averages the most points
        flat = sigma.shape[0] <= q + 1
        batch_size = max(1, min(n_max if flat else critical_batch(n_max, beta, top),
                                batch_limit))
    P = Preconditioner(xp, dtype, J, sigma, A, q, damping, shift, beta, batch_size, eta,
                       n_max, eta_scale, top=top)
    P.top_measured = measured
    return P
