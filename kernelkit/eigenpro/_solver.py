"""The EigenPro 2 and EigenPro 3 iterations behind :mod:`kernelkit.eigenpro`.

Notation (Ma & Belkin 2019; Abedsoltan, Belkin & Pandit 2023). Training data
``X`` (n points), targets ``Y`` (n x k), centers ``Z`` (p points; ``Z = X`` for
EigenPro 2), model ``f = sum_j alpha_j k(., z_j)``, loss
``L(f) = 1/(2n) sum_i ||f(x_i) - y_i||^2 + alpha_ridge/(2n) ||f||_H^2``.

* Covariance operator ``K = 1/n sum_i k(., x_i) (x) k(., x_i)``; its top
  eigenpairs ``(sigma_i, psi_i)`` are estimated on ``s`` Nyström points ``Z_J``
  (a subset of the centers) as ``psi_i = K(., Z_J) a_i`` with ``||psi_i||_H = 1``.
* Preconditioner ``P = I - sum_{i<=q} c_i psi_i (x) psi_i`` with
  ``c_i = 1 - ((sigma_{q+1} + mu) / (sigma_i + mu)) ** damping`` and
  ``mu = alpha_ridge / n``; ``P K`` then has top eigenvalue
  ``lambda_1(P) = (sigma_{q+1} + mu) ** damping * (sigma_1 + mu) ** (1 - damping)``.
* ``lambda_1(P)`` is the larger of that Nyström value and its measurement on a fresh
  data sample (:func:`measured_top`).
* ``beta = max_i k(x_i, x_i)`` (+ ``alpha_ridge``), critical batch size
  ``m* = beta / lambda_1(P)`` and step size ``eta(m) = m / beta`` for ``m <= m*``,
  ``2 m / (beta + (m - 1) lambda_1(P))`` beyond (Ma, Bassily & Belkin 2018, used by
  EigenPro 2 to set the step from the batch size), here with the ridge shift and
  the without-replacement factor ``c = (n - m) / (n - 1)`` (:func:`step_size`).
* One step on a batch ``B`` of size ``m`` with residuals ``r = f(X_B) - Y_B``:
  the preconditioned stochastic gradient ``P g`` of
  ``g = 1/m K(., X_B) r (+ mu f)`` lies in ``span K(., X_B) + span K(., Z_J)``.
  EigenPro 2 (``Z = X``) updates those coefficients directly; EigenPro 3 evaluates
  ``P g`` on the centers, ``h = (P g)(Z)``, and projects it onto ``span K(., Z)``
  by solving ``K(Z, Z) theta = h`` with an inner EigenPro 2 run on the centers.

Everything that touches all centers goes through an *operator* holding ``Z``
(:class:`LocalOperator` here, :class:`kernelkit.distributed.DaskKernelOperator`
on a Dask cluster), so the n x p kernel matrix is never formed: one step holds a
``batch x p`` block.
"""

import math
import time
import warnings

import numpy as np
from scipy import linalg

from .._config import get_config
from ..utils._linalg import SMALL_SOLVE
from ..utils._threads import single_blas_thread

# Nyström eigenvalues below this fraction of the largest are rounding noise.
RANK_RTOL = 1e-10
# A batch loss this many times that of the zero model means the iteration diverges.
DIVERGENCE_FACTOR = 1e4
# The inner (projection) solve takes half the EigenPro 2 step, as the EigenPro 3 code
# does: each inner step then contracts every direction without overshoot, so the
# inexact projection M satisfies M <= K(Z, Z)^-1 and never enlarges the outer step
# (with the full step, M overshoots up to 2x on some directions and EigenPro 3
# diverges at the outer step size that EigenPro 2 tolerates).
PROJECTION_ETA_SCALE = 0.5


class Diverged(ArithmeticError):
    """Raised by the iteration when the loss becomes non-finite or explodes."""


def budget_bytes():
    """The configured ``working_memory`` in bytes."""
    return float(get_config()["working_memory"]) * 2**20


class _Lazy:
    """A batch whose ``batch x p`` block does not fit in ``working_memory``."""

    def __init__(self, X):
        self.X = X


class LocalOperator:
    """Products with the kernel against the centers ``Z``, on this machine.

    A step calls :meth:`prepare` on its batch, then any of :meth:`matmul`,
    :meth:`columns`, :meth:`rmatmul`, then :meth:`release`. The ``batch x p`` block
    is computed once when it fits in ``working_memory``; otherwise each product is
    computed blockwise from scratch (twice the kernel evaluations, bounded memory).

    Parameters
    ----------
    evaluator : kernelkit.kernels.KernelOperator
    Z : array of shape (p, n_features)
        Centers, on the engine's device, in the compute dtype.
    dtype : numpy dtype
        Compute dtype of blocks and products.
    """

    def __init__(self, evaluator, Z, dtype):
        self.evaluator = evaluator
        self.Z = Z
        self.dtype = np.dtype(dtype)
        self.n_centers = Z.shape[0]

    @property
    def xp(self):
        return self.evaluator.engine.xp

    def prepare(self, X):
        if X.shape[0] * self.n_centers * self.dtype.itemsize <= budget_bytes():
            if X.shape[0] < self.n_centers:
                # the engines split k(A, B) into row blocks of A: with the many centers as
                # A, each block reuses the (small) batch from cache instead of streaming
                # all centers from memory once per block
                return self.evaluator.block(self.Z, X, self.dtype).T
            return self.evaluator.block(X, self.Z, self.dtype)
        return _Lazy(X)

    def matmul(self, handle, W):
        """``k(X, Z) @ W`` for the prepared batch ``X``."""
        if isinstance(handle, _Lazy):
            out = self.evaluator.matmul(handle.X, self.Z, W)
            return self.xp.asarray(out).astype(self.dtype, copy=False)
        return handle @ W

    def columns(self, handle, J):
        """``k(X, Z[J])`` for the prepared batch ``X`` (``J`` sorted center indices)."""
        if isinstance(handle, _Lazy):
            return self.evaluator.block(handle.X, self.Z[J], self.dtype)
        return handle[:, J]

    def rmatmul(self, handle, R):
        """``k(Z, X) @ R`` for the prepared batch ``X``."""
        if isinstance(handle, _Lazy):
            out = self.evaluator.matmul(self.Z, handle.X, R)
            return self.xp.asarray(out).astype(self.dtype, copy=False)
        return handle.T @ R

    def release(self, handle):
        pass

    def forward(self, X, W):
        """``k(X, Z) @ W`` in float64 for any number of rows (prediction)."""
        return self.evaluator.matmul(X, self.Z, W)

    def close(self):
        pass


# ------------------------------------------------------------------ preconditioner
def nystrom_eigensystem(K_JJ, n_eig, C=None):
    """See :func:`_nystrom_eigensystem`; one BLAS thread below ``SMALL_SOLVE`` points."""
    if K_JJ.shape[0] < SMALL_SOLVE:
        with single_blas_thread():
            return _nystrom_eigensystem(K_JJ, n_eig, C)
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


def step_size(m, n, beta, top, lam_min):
    """Step size for batch size ``m`` out of ``n`` (Ma, Bassily & Belkin 2018; EigenPro 2).

    With ``c = (n - m) / (n - 1)`` (sampling without replacement; 1 for ``m << n``):
    ``m / (c beta + (m - c) lam_min)`` up to the critical batch ``m*`` (linear scaling:
    ``m / beta`` in the papers), ``2 m / (c beta + (m - c) (lambda_1 + lam_min))``
    beyond (saturation: ``2 m / (beta + (m - 1) lambda_1)`` in the papers). These
    minimise the bound ``1 - 2 eta lambda + eta^2 lambda (c beta / m + (1 - c / m) lambda)``
    on the expected contraction along an eigenvalue ``lambda`` of the preconditioned
    operator, for the slowest direction (``lam_min``, the ridge shift) and, beyond
    ``m*``, for the slowest and fastest together.
    """
    c = (n - m) / (n - 1) if n > 1 else 0.0
    if m <= critical_batch(n, beta, top):
        return m / (c * beta + (m - c) * lam_min)
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
        self.sigma = sigma[: self.q + 1]
        self.beta = float(beta)
        self.top_nystrom = preconditioned_top(sigma, self.q, damping, shift)
        self.top = self.top_nystrom if top is None else float(top)
        self.critical_batch = critical_batch(n_max, self.beta, self.top)
        if batch_size is None:
            batch_size = self.critical_batch
        self.batch_size = int(max(1, min(n_max, math.floor(batch_size))))
        self.n_max, self.shift = int(n_max), float(shift)
        self.eta_scale, self.user_eta = float(eta_scale), eta is not None
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
            return self.eta_scale * step_size(m, self.n_max, self.beta, self.top, self.shift)
        if m not in self._steps:
            self._steps[m] = self.step(m, auto=True)
        return self._steps[m]

    def direction(self, KJB_T_R):
        """``A diag(c) A^T v``: the Nyström-point coefficients of the correction."""
        if self.q == 0:
            return None
        w = self.A.T @ KJB_T_R
        return self.A @ (self.c[:, None] * w)


def measured_top(A, c, K_vv, K_vJ, shift):
    """``lambda_1(P K)`` measured on a data sample ``X_v`` of ``v`` points.

    On the span of ``k(., x)``, ``x`` in ``X_v``, the operator ``P K_v`` (with
    ``K_v = 1/v sum_x k(., x) (x) k(., x)``) has the nonzero eigenvalues of the ``v x v``
    matrix ``(K_vv - K_vJ A diag(c) A^T K_Jv) / v``. Unlike the Nyström value
    ``lambda_{q+1}^rho lambda_1^(1 - rho)`` it sees the top eigen-directions that the
    ``s`` Nyström points capture only in part, so the step size does not overshoot them.
    """
    v = K_vv.shape[0]
    if v < SMALL_SOLVE:
        with single_blas_thread():
            return _measured_top(A, c, K_vv, K_vJ, shift)
    return _measured_top(A, c, K_vv, K_vJ, shift)


def _measured_top(A, c, K_vv, K_vJ, shift):
    v = K_vv.shape[0]
    B = K_vJ @ A
    M = (K_vv - (B * c) @ B.T) / v
    M = (M + M.T) / 2
    try:
        from scipy.sparse.linalg import eigsh

        lam = float(eigsh(M, k=1, which="LA", return_eigenvectors=False, tol=1e-6)[0])
    except Exception:  # ARPACK failure: dense fallback
        lam = float(linalg.eigh(M, eigvals_only=True, subset_by_index=[v - 1, v - 1])[0])
    return lam + shift


def build_preconditioner(xp, dtype, sigma, A, J, n_components, q_max, damping, shift, beta,
                         batch_size, batch_limit, eta, n_max, what, eta_scale=1.0, check=None):
    """Choose ``q`` (auto or given), then batch size and step size, as in EigenPro 2.

    ``batch_limit`` is the largest batch fitting in ``working_memory``; ``n_max`` the
    number of points the batches are drawn from. ``check = (K_vv, K_vJ)``, kernel
    blocks of a fresh data sample, measures ``lambda_1(P)`` (:func:`measured_top`); the
    larger of that and the Nyström value sets the critical batch and the step. Warns
    when a given ``n_components`` exceeds the numerical rank of the subsample's kernel
    matrix.
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
        measured = measured_top(A[:, :q], coefficients(sigma, q, damping, shift), *check,
                                shift)
        top = max(top, measured)
    if batch_size is None:
        batch_size = max(1, min(critical_batch(n_max, beta, top), batch_limit))
    P = Preconditioner(xp, dtype, J, sigma, A, q, damping, shift, beta, batch_size, eta,
                       n_max, eta_scale, top=top)
    P.top_measured = measured
    return P


# ---------------------------------------------------------------------- the solver
class EigenProSolver:
    """The EigenPro 2 / EigenPro 3 iteration (see the module docstring).

    Parameters
    ----------
    op : LocalOperator or DaskKernelOperator
        Products against the centers.
    X : engine array (n, d), compute dtype
        Training inputs (for EigenPro 2, the centers themselves).
    Y : engine array (n, k), compute dtype
    precond : Preconditioner
        Data preconditioner (its ``J`` index the centers).
    exact : bool
        True for EigenPro 2 (centers = training data in the same order): the
        gradient's coefficients are updated directly. False for EigenPro 3.
    ridge : float
        ``alpha >= 0`` of the ridge penalty (0: interpolation / least squares).
    inner : Preconditioner or None
        Preconditioner of the projection solve on the centers (EigenPro 3).
    projection_max_iter : int
        Epochs of the inner EigenPro 2 solve per projection.
    rng, inner_rng : numpy.random.RandomState
        Streams of the outer and of the inner (projection) batches.
    dtype : numpy dtype
        Compute dtype.
    """

    def __init__(self, op, X, Y, precond, exact, ridge, inner, projection_max_iter, rng,
                 inner_rng, dtype):
        self.op, self.X, self.Y = op, X, Y
        self.P, self.exact, self.ridge = precond, exact, float(ridge)
        self.inner, self.projection_max_iter = inner, projection_max_iter
        self.rng, self.inner_rng = rng, inner_rng
        self.xp = op.xp
        self.dtype = np.dtype(dtype)
        self.n = X.shape[0]
        self.weights = self.xp.zeros((op.n_centers, Y.shape[1]), dtype=self.dtype)
        self.zero_loss = float(self.xp.mean(Y.astype(self.xp.float64) ** 2))
        self.ZJ = op.Z[precond.J] if not exact else None
        # EigenPro 3 needs k(Z_J, Z) every step (the correction evaluated on the centers):
        # kept when it fits in working_memory, else recomputed per step
        self._hj = None
        if not exact and precond.q and \
                len(precond.J) * op.n_centers * self.dtype.itemsize <= budget_bytes():
            self._hj = op.prepare(self.ZJ)

    def close(self):
        """Release the kept ``k(Z_J, Z)`` block."""
        if self._hj is not None:
            self.op.release(self._hj)
            self._hj = None

    # ------------------------------------------------------------------ steps
    def _check(self, loss, epoch):
        if not math.isfinite(loss) or loss > DIVERGENCE_FACTOR * max(self.zero_loss, 1e-300):
            raise Diverged(f"the training loss became {loss:.3g} at epoch {epoch + 1}")

    def _step_exact(self, B, epoch):
        """EigenPro 2: batch coefficients get ``-eta/m r``, Nyström points the correction."""
        xp, P = self.xp, self.P
        m = B.shape[0]
        Bx = xp.asarray(B)
        handle = self.op.prepare(self.X[Bx])
        R = self.op.matmul(handle, self.weights) - self.Y[Bx]
        loss = float(xp.mean(R.astype(xp.float64) ** 2))
        self._check(loss, epoch)
        if self.ridge:
            # SGD on the kernel K + alpha I: the ridge gradient alpha/n f, estimated
            # unbiasedly from the batch (Ma & Belkin's interpolation of K + alpha I).
            R = R + self.ridge * self.weights[Bx]
        corr = P.direction(self.op.columns(handle, P.Jx).T @ R) if P.q else None
        self.op.release(handle)
        scale = P.step(m) / m
        self.weights[Bx] -= scale * R
        if corr is not None:
            self.weights[P.Jx] += scale * corr
        return loss

    def _step_projected(self, B, epoch):
        """EigenPro 3: ``h = (P g)(Z)``, ``theta = K(Z, Z)^-1 h`` (inner solve), ``-eta theta``."""
        xp, P, op = self.xp, self.P, self.op
        m = B.shape[0]
        Bx = xp.asarray(B)
        handle = op.prepare(self.X[Bx])
        R = op.matmul(handle, self.weights) - self.Y[Bx]
        loss = float(xp.mean(R.astype(xp.float64) ** 2))
        self._check(loss, epoch)
        R = R / m
        h = op.rmatmul(handle, R)                                  # (K(., X_B) r / m)(Z)
        v = op.columns(handle, P.Jx).T @ R if P.q else None        # K(Z_J, X_B) r / m
        op.release(handle)
        mu = self.ridge / self.n
        if P.q:
            hj = self._hj if self._hj is not None else op.prepare(self.ZJ)
            if mu:
                v = v + mu * op.matmul(hj, self.weights)           # + mu K(Z_J, Z) alpha
            corr = P.direction(v)                                  # coefficients on Z_J
            h = h - op.rmatmul(hj, corr)                           # (P g)(Z)
            if hj is not self._hj:
                op.release(hj)
        if mu:
            # the ridge gradient mu f is in span K(., Z): theta = K(Z, Z)^-1 (h + mu K(Z, Z) alpha).
            # Solving K(Z, Z) phi = h from phi_0 = -mu alpha and adding mu alpha gives it with
            # no extra kernel evaluations, and keeps the fixed point exact although the
            # inner solve is not (adding mu alpha outside the solve would bias it).
            theta = self.project(h, init=-mu * self.weights) + mu * self.weights
        else:
            theta = self.project(h)
        self.weights -= P.step(m) * theta
        return loss

    def project(self, H, init=None):
        """Approximately solve ``K(Z, Z) theta = H`` by EigenPro 2 on the centers.

        ``projection_max_iter`` epochs from ``init`` (default zero). The result is
        affine in ``H`` and ``init``: ``init + M (H - K(Z, Z) init)`` with ``M`` a
        (random) approximation of ``K(Z, Z)^-1``.
        """
        xp, Q, op = self.xp, self.inner, self.op
        p = op.n_centers
        theta = xp.zeros_like(H) if init is None else init.astype(H.dtype, copy=True)
        for _ in range(self.projection_max_iter):
            perm = self.inner_rng.permutation(p)
            for b0 in range(0, p, Q.batch_size):
                B = xp.asarray(perm[b0:b0 + Q.batch_size])
                handle = op.prepare(op.Z[B])
                R = op.matmul(handle, theta) - H[B]
                corr = Q.direction(op.columns(handle, Q.Jx).T @ R) if Q.q else None
                op.release(handle)
                scale = Q.step(B.shape[0]) / B.shape[0]
                theta[B] -= scale * R
                if corr is not None:
                    theta[Q.Jx] += scale * corr
        return theta

    # ------------------------------------------------------------------ epochs
    def run(self, max_iter, tol, n_iter_no_change, score_fn, verbose, early_stopping):
        """Epoch loop with convergence / early stopping; returns a history dict.

        ``score_fn(weights) -> float`` scores the validation set (higher is better).
        """
        xp = self.xp
        loss_curve, val_scores = [], []
        best_loss, best_score, best_weights = np.inf, -np.inf, None
        no_improve, converged = 0, False
        step = self._step_exact if self.exact else self._step_projected
        bs = self.P.batch_size
        for epoch in range(max_iter):
            t0 = time.perf_counter()
            perm = self.rng.permutation(self.n)
            total, count = 0.0, 0
            for b0 in range(0, self.n, bs):
                B = perm[b0:b0 + bs]
                total += step(B, epoch) * B.shape[0]
                count += B.shape[0]
            if not bool(xp.all(xp.isfinite(self.weights))):
                raise Diverged(f"the coefficients became non-finite at epoch {epoch + 1}")
            loss = total / count
            loss_curve.append(loss)
            msg = f"Epoch {epoch + 1}/{max_iter}: training loss {loss:.6g}"
            if early_stopping:
                score = float(score_fn(self.weights))
                val_scores.append(score)
                msg += f", validation score {score:.6g}"
                if tol is not None and score < best_score + tol:
                    no_improve += 1
                else:
                    no_improve = 0
                if score > best_score:
                    best_score = score
                    best_weights = self.weights.copy()
            elif tol is not None:
                no_improve = no_improve + 1 if loss > best_loss * (1.0 - tol) else 0
                best_loss = min(best_loss, loss)
            if verbose:
                print(msg + f" ({time.perf_counter() - t0:.2f} s)", flush=True)
            if tol is not None and no_improve >= n_iter_no_change:
                converged = True
                if verbose:
                    what = "validation score" if early_stopping else "training loss"
                    print(f"{what} did not improve by more than tol={tol:g} for "
                          f"{n_iter_no_change} consecutive epochs; stopping.", flush=True)
                break
        if early_stopping and best_weights is not None:
            self.weights = best_weights
        return {"loss_curve": loss_curve, "validation_scores": val_scores,
                "n_iter": len(loss_curve), "converged": converged,
                "best_validation_score": best_score if early_stopping else None}
