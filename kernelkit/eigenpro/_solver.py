"""The EigenPro 2, 3 and 4 iterations behind :mod:`kernelkit.eigenpro`.

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
* EigenPro 4 (Abedsoltan, Ma, Pandit & Belkin, NeurIPS 2025, arXiv 2411.16658)
  delays that projection: each step adds its batch as *auxiliary centers* with
  coefficients ``-eta r / m`` (and the correction on ``Z_J``), so the model between
  projections is ``K(., Z) alpha + K(., X_aux) beta + K(., Z_J) gamma`` and every
  step is an exact functional step; it accumulates the auxiliary part's values on
  the centers, ``h``, and every ``T`` steps (and at the end of an epoch) projects
  it, ``alpha += K(Z, Z)^-1 h`` (the inner EigenPro 2 solve), dropping the
  auxiliary centers. The authors' default lets the auxiliary set grow to as many
  points as the model has centers: ``T = p // m``. With ``T = 1`` it is EigenPro 3.

Everything that touches all centers goes through an *operator* holding ``Z``
(:class:`LocalOperator` here, :class:`kernelkit.distributed.DaskKernelOperator`
on a Dask cluster), so the n x p kernel matrix is formed only when it fits the
cache budget (then once, and reused every epoch): one step holds a ``batch x p``
block. With the rows held, a step (and each batch of the projection, with ``k(Z, Z)``
held) reads its rows once, in place, for both its products (:mod:`._loops`).
"""

import math
import time

import numpy as np

from .._config import get_config
from ..utils._dispatch import select_loops
from ..utils._verbose import Progress
from ._precond import (  # noqa: F401  (re-exported: the estimators use them as _ep.*)
    RANK_RTOL,
    Preconditioner,
    build_preconditioner,
    critical_batch,
    measured_top,
    nystrom_eigensystem,
    step_size,
)

# Smallest data sample the data preconditioner's eigenvalues are estimated from.
MIN_NYSTROM = 500
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
        Centers, on the engine's device, at their own precision (float32 or float64).
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


def auto_period(p, batch, n, itemsize, budget):
    """EigenPro 4's default projection period ``T`` for ``p`` centers.

    The authors' ``T = p // batch`` lets the auxiliary centers grow to ``p`` points
    between projections. When ``k(Z, Z)`` is held in the cache (after ``k(X, Z)``, which
    :func:`cache_rows` keeps first when it fits), a projection costs products with it
    only, while every step evaluates the kernel on all auxiliary centers: half that
    period is then cheaper per epoch (Fashion-MNIST, 20,000 points, 4,000 centers,
    batch 436: ``T = 4`` against ``9``, 7.2 s against 10.7 s per epoch with ``k(X, Z)``
    held, 22.9 s against 23.7 s without; ``T = 2`` slower in both) and no less accurate.
    A short period is kept: halving ``T = 2`` to 1 made an epoch slower (10^5 synthetic
    points, 2,000 centers, batch 681: 2.9 s against 2.1 s; with the one-pass steps and
    projections over held rows, 2.2 s against 1.9 s with ``k(X, Z)`` held and 4.5 s
    against 4.1 s without, on a loaded machine), so only ``T >= 4`` is halved.
    The rule reads the budget only, not where the kernel is evaluated, so that a fit on
    a cluster runs the same iteration as the local one.
    """
    rows = n * p * itemsize
    held = p * p * itemsize <= budget - (rows if rows <= budget else 0)
    period = max(1, p // batch)
    return period // 2 if held and period >= 4 else period


def cache_rows(op, X, budget):
    """``k(X, Z)`` in full when ``op`` is local and it fits in ``budget`` bytes, else None.

    Computed in row blocks of ``working_memory`` through ``op.prepare``, so each row
    holds the values a step would compute for it.
    """
    if not isinstance(op, LocalOperator) or \
            X.shape[0] * op.n_centers * op.dtype.itemsize > budget:
        return None
    rows = max(1, int(budget_bytes() // (op.n_centers * op.dtype.itemsize)))
    if rows >= X.shape[0]:  # one block: held as computed, row-major (no second copy)
        return op.xp.ascontiguousarray(op.prepare(X))
    out = op.xp.empty((X.shape[0], op.n_centers), dtype=op.dtype)
    for a in range(0, X.shape[0], rows):
        h = op.prepare(X[a:a + rows])
        out[a:a + rows] = h if not isinstance(h, _Lazy) else \
            op.evaluator.block(X[a:a + rows], op.Z, op.dtype)
    return out


# ---------------------------------------------------------------------- the solver
class EigenProSolver:
    """The EigenPro 2 / 3 / 4 iteration (see the module docstring).

    Parameters
    ----------
    op : LocalOperator or DaskKernelOperator
        Products against the centers.
    X : engine array (n, d), float32 or float64
        Training inputs at their own precision (for EigenPro 2, the centers
        themselves): the kernel is evaluated in float64 from them, only its values
        are rounded to the compute dtype.
    Y : engine array (n, k), compute dtype
    precond : Preconditioner
        Data preconditioner (its ``J`` index the centers).
    algorithm : {"ep2", "ep3", "ep4"}
        "ep2": centers = training data in the same order, the gradient's coefficients
        are updated directly; "ep3": projection every step; "ep4": delayed projection.
    ridge : float
        ``alpha >= 0`` of the ridge penalty (0: interpolation / least squares).
    inner : Preconditioner or None
        Preconditioner of the projection solve on the centers (EigenPro 3 and 4).
    projection_max_iter : int
        Epochs of the inner EigenPro 2 solve per projection.
    rng, inner_rng : numpy.random.RandomState
        Streams of the outer and of the inner (projection) batches.
    dtype : numpy dtype
        Compute dtype.
    period : int
        EigenPro 4: steps between projections.
    cache_budget : float
        Bytes allowed for kernel blocks kept for the whole fit: ``k(X, Z)`` (then
        ``k(Z, Z)`` for the projection) when they fit.
    sample_weight : engine array (n, 1), compute dtype, or None
        Per-row weights in ``[0, 1]`` of the squared loss: each row's residual is
        scaled by its weight in the gradient (not in the reported loss), so the fixed
        point solves the weighted normal equations (EigenPro 2: ``(W K + ridge I) c =
        W y``). Weights at most 1 keep the unweighted step size stable.
    """

    def __init__(self, op, X, Y, precond, algorithm, ridge, inner, projection_max_iter, rng,
                 inner_rng, dtype, period=1, cache_budget=0.0, evaluator=None,
                 sample_weight=None):
        self.op, self.X, self.Y = op, X, Y
        self.sw = sample_weight
        self.P, self.algorithm, self.ridge = precond, algorithm, float(ridge)
        self.exact = algorithm == "ep2"
        self.inner, self.projection_max_iter = inner, projection_max_iter
        self.rng, self.inner_rng = rng, inner_rng
        self.xp = op.xp
        self.dtype = np.dtype(dtype)
        self.n = X.shape[0]
        self.period = int(period)
        self.evaluator = evaluator
        xp = self.xp
        self.weights = xp.zeros((op.n_centers, Y.shape[1]), dtype=self.dtype)
        self.zero_loss = float(xp.mean(Y.astype(xp.float64) ** 2))
        self.ZJ = op.Z[precond.J] if not self.exact else None
        # k(X, Z) once for the whole fit when it fits the cache budget (EigenPro 2: the
        # n x n kernel matrix), then k(Z, Z) for the projection's inner solve
        budget = float(cache_budget)
        self.rows = cache_rows(op, X, budget)
        if self.rows is not None:
            budget -= self.rows.nbytes
        self.zrows = None
        if not self.exact:
            self.zrows = self.rows if self.rows is not None and X is op.Z else \
                cache_rows(op, op.Z, budget)
        # the held rows' one-pass products: compiled for the Numba engine
        self.loops = select_loops(__package__, getattr(evaluator, "backend", "numpy"))
        # EigenPro 3 / 4 evaluate the correction on the centers every step: K(Z, Z_J) A
        # once (p x q, as the authors' code keeps it) replaces a product with the p x s
        # block per step. The ridge term also needs k(Z_J, Z) itself: kept when it fits
        # in working_memory, else recomputed per step
        self._hj = self._KA = None
        if not self.exact and precond.q:
            hj = self.zrows[precond.Jx] if self.zrows is not None else op.prepare(self.ZJ)
            self._KA = op.rmatmul(hj, precond.A)
            if self.ridge and (self.zrows is not None or len(precond.J) * op.n_centers
                               * self.dtype.itemsize <= budget_bytes()):
                self._hj = hj
            elif self.zrows is None:
                op.release(hj)
        if algorithm == "ep4":
            k, d, cap = Y.shape[1], X.shape[1], self.period * precond.batch_size
            # at the inputs' own precision: storage in float32 never rounds the data
            self.aux_X = xp.empty((min(cap, self.n), d), dtype=X.dtype)
            self.aux_beta = xp.empty((min(cap, self.n), k), dtype=self.dtype)
            self._reset_aux()
        self.n_projections = 0

    def close(self):
        """Release the kept blocks."""
        if self._hj is not None and self.zrows is None:
            self.op.release(self._hj)
        self._hj = self.rows = self.zrows = None

    # ------------------------------------------------------------------ steps
    def _loss(self, R, epoch):
        """Per-output mean squared residual of a batch (host float64); raises on divergence."""
        xp = self.xp
        mse = xp.mean(R.astype(xp.float64) ** 2, axis=0)
        mse = np.asarray(self.op.evaluator.engine.to_host(mse), dtype=np.float64)
        loss = float(np.mean(mse))
        if not math.isfinite(loss) or loss > DIVERGENCE_FACTOR * max(self.zero_loss, 1e-300):
            raise Diverged(f"the training loss became {loss:.3g} at epoch {epoch + 1}")
        return mse

    def _weighted(self, R, Bx):
        """The batch residuals times the rows' weights (the weighted loss's gradient)."""
        return R if self.sw is None else R * self.sw[Bx]

    def _prepare(self, B):
        """The ``batch x p`` block of training rows ``B`` (from the cache when kept)."""
        if self.rows is not None:
            return self.rows[B]
        return self.op.prepare(self.X[B])

    def _release(self, handle):
        if self.rows is None:
            self.op.release(handle)

    def _step_exact(self, B, epoch):
        """EigenPro 2: batch coefficients get ``-eta/m r``, Nyström points the correction."""
        xp, P = self.xp, self.P
        m = B.shape[0]
        Bx = xp.asarray(B)
        handle = self._prepare(Bx)
        R = self.op.matmul(handle, self.weights) - self.Y[Bx]
        loss = self._loss(R, epoch)
        R = self._weighted(R, Bx)
        if self.ridge:
            # SGD on the kernel K + alpha I: the ridge gradient alpha/n f, estimated
            # unbiasedly from the batch (Ma & Belkin's interpolation of K + alpha I).
            R = R + self.ridge * self.weights[Bx]
        corr = P.direction(self.op.columns(handle, P.Jx).T @ R) if P.q else None
        self._release(handle)
        scale = P.step(m) / m
        self.weights[Bx] -= scale * R
        if corr is not None:
            self.weights[P.Jx] += scale * corr
        return loss

    def _residual_gradient(self, Bx, W, F0, m):
        """``(R, h)``: the batch's residuals ``R = f(X_B) - Y_B`` and ``h = K(Z, X_B) R_w / m``.

        ``f = K(., Z) W`` plus ``F0`` (the auxiliary centers' predictions, or None);
        ``R_w`` are the residuals times the rows' weights. With ``k(X, Z)`` held, one
        pass over the batch's held rows (:mod:`._loops`); else the batch's block, then
        a product with it each way.
        """
        xp, op = self.xp, self.op
        if self.rows is not None:
            wrow = xp.full(m, 1.0 / m, dtype=self.dtype) if self.sw is None else \
                self.sw[Bx][:, 0] / m
            return self.loops.residual_gradient(self.rows, Bx, W, F0, self.Y[Bx], wrow)
        handle = op.prepare(self.X[Bx])
        F = op.matmul(handle, W)
        R = (F if F0 is None else F + F0) - self.Y[Bx]
        h = op.rmatmul(handle, self._weighted(R, Bx) / m)
        op.release(handle)
        return R, h

    def _precondition(self, h, f_J):
        """``((P g)(Z), correction's coefficients on Z_J)`` from ``h = g(Z)``.

        ``g(Z_J) = h[J]`` (the Nyström points are centers); the correction
        ``K(., Z_J) A diag(c) A^T g(Z_J)`` is evaluated on the centers through the
        kept ``K(Z, Z_J) A``. ``f_J`` gives the model on the Nyström points from
        ``k(Z_J, Z)`` (the ridge term), or is None.
        """
        op, P = self.op, self.P
        if not P.q:
            return h, None
        v = h[P.Jx]                                                # K(Z_J, X_B) r / m
        if f_J is not None:
            hj = self._hj if self._hj is not None else op.prepare(self.ZJ)
            v = v + (self.ridge / self.n) * f_J(hj)                # + mu f(Z_J)
            if hj is not self._hj:
                op.release(hj)
        w = P.c[:, None] * (P.A.T @ v)
        return h - self._KA @ w, P.A @ w                           # (P g)(Z), on Z_J

    def _step_projected(self, B, epoch):
        """EigenPro 3: ``h = (P g)(Z)``, ``theta = K(Z, Z)^-1 h`` (inner solve), ``-eta theta``."""
        xp, op = self.xp, self.op
        m = B.shape[0]
        Bx = xp.asarray(B)
        R, h = self._residual_gradient(Bx, self.weights, None, m)
        loss = self._loss(R, epoch)
        mu = self.ridge / self.n
        h, _ = self._precondition(h, (lambda hj: op.matmul(hj, self.weights)) if mu else None)
        if mu:
            # the ridge gradient mu f is in span K(., Z): theta = K(Z, Z)^-1 (h + mu K(Z, Z) alpha).
            # Solving K(Z, Z) phi = h from phi_0 = -mu alpha and adding mu alpha gives it with
            # no extra kernel evaluations, and keeps the fixed point exact although the
            # inner solve is not (adding mu alpha outside the solve would bias it).
            theta = self.project(h, init=-mu * self.weights) + mu * self.weights
        else:
            theta = self.project(h)
        self.weights -= self.P.step(m) * theta
        return loss

    # ---------------------------------------------------------- EigenPro 4
    def _reset_aux(self):
        """Drop the auxiliary centers after a projection."""
        self.aux_used = 0
        self.aux_h = self.xp.zeros_like(self.weights)      # auxiliary model on Z
        self.aux_gamma = None                  # its coefficients on Z_J (on all of Z)
        self.aux_decay = 0.0                               # pending ridge decay of alpha
        self.aux_steps = 0

    def _aux_block(self, Xb):
        """``k(X_B, X_aux)`` for the auxiliary centers added so far."""
        A = self.aux_X[:self.aux_used]
        if Xb.shape[0] * self.aux_used * self.dtype.itemsize <= budget_bytes():
            return self.evaluator.block(Xb, A, self.dtype)
        return None

    def _step_delayed(self, B, epoch):
        """EigenPro 4: an exact functional step on ``alpha, beta (X_aux), gamma (Z_J)``.

        The batch joins the auxiliary centers with ``-eta r / m``, the Nyström points'
        ``gamma`` takes ``eta`` times the correction, and ``h`` (the auxiliary model on
        the centers) follows; :meth:`delayed_projection` folds ``h`` into ``alpha``.
        """
        xp, op, P = self.xp, self.op, self.P
        m = B.shape[0]
        Bx = xp.asarray(B)
        Xb = self.X[Bx]
        F0 = None
        if self.aux_used:
            u = self.aux_used
            Kb = self._aux_block(Xb)
            F0 = Kb @ self.aux_beta[:u] if Kb is not None else xp.asarray(
                self.evaluator.matmul(Xb, self.aux_X[:u], self.aux_beta[:u])).astype(
                    self.dtype, copy=False)
        # K(., Z_J) gamma = K(., Z) gamma scattered on J: gamma is kept on all centers
        W = self.weights if self.aux_gamma is None else self.weights + self.aux_gamma
        R, h = self._residual_gradient(Bx, W, F0, m)
        loss = self._loss(R, epoch)
        R = self._weighted(R, Bx)
        mu = self.ridge / self.n
        h, corr = self._precondition(
            h, (lambda hj: op.matmul(hj, self.weights) + self.aux_h[P.Jx]) if mu else None)
        eta = P.step(m)
        if mu:
            # the ridge gradient mu f: the auxiliary part decays now; alpha's decay is
            # passed through the projection (see delayed_projection)
            keep = 1.0 - eta * mu
            self.aux_beta[:self.aux_used] *= keep
            self.aux_h *= keep
            if self.aux_gamma is not None:
                self.aux_gamma *= keep
            self.aux_decay += eta * mu
        u = self.aux_used
        self.aux_X[u:u + m] = Xb
        self.aux_beta[u:u + m] = -(eta / m) * R
        self.aux_used = u + m
        if corr is not None:
            if self.aux_gamma is None:
                self.aux_gamma = xp.zeros_like(self.weights)
            self.aux_gamma[P.Jx] += eta * corr
        self.aux_h -= eta * h
        self.aux_steps += 1
        if self.aux_steps >= self.period or self.aux_used + m > self.aux_X.shape[0]:
            self.delayed_projection()
        return loss

    def delayed_projection(self):
        """``alpha += K(Z, Z)^-1 (h - d K(Z, Z) alpha)``; drop the auxiliary centers.

        ``d`` is the ridge decay of ``alpha`` accumulated over the period. As in
        EigenPro 3, it goes through the inner solve (started from ``d alpha``) so that
        the fixed point is exact although the solve is not; with one step per period
        the update is EigenPro 3's.
        """
        if not self.aux_steps:
            return
        if self.aux_decay:
            d = self.aux_decay
            self.weights += self.project(self.aux_h, init=d * self.weights) - d * self.weights
        else:
            self.weights += self.project(self.aux_h)
        self.n_projections += 1
        self._reset_aux()

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
                if self.zrows is not None:  # one pass over the held rows
                    R, g = self.loops.residual_gradient(self.zrows, B, theta, None, H[B], None)
                    corr = Q.direction(g[Q.Jx]) if Q.q else None
                else:
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
    def run(self, max_iter, stop, owner, verbose, loss_scale=None):
        """Epoch loop; returns a history dict.

        ``stop`` is a :class:`StoppingRule`; ``owner`` names the progress reports.
        ``loss_scale`` (one factor per output, default 1) converts each output's mean
        squared residual to the user's units (the targets' scale squared): the
        reported loss is the mean over outputs of the converted values.
        """
        xp = self.xp
        progress = Progress(owner, verbose)
        loss_curve = []
        step = {"ep2": self._step_exact, "ep3": self._step_projected,
                "ep4": self._step_delayed}[self.algorithm]
        bs = self.P.batch_size
        for epoch in range(max_iter):
            t0 = time.perf_counter()
            perm = self.rng.permutation(self.n)
            total, count = 0.0, 0
            for b0 in range(0, self.n, bs):
                B = perm[b0:b0 + bs]
                total = total + step(B, epoch) * B.shape[0]
                count += B.shape[0]
            if self.algorithm == "ep4":
                self.delayed_projection()  # the authors' code also projects at epoch end
            if not bool(xp.all(xp.isfinite(self.weights))):
                raise Diverged(f"the coefficients became non-finite at epoch {epoch + 1}")
            per_output = total / count
            if loss_scale is not None:
                with np.errstate(over="ignore", invalid="ignore"):  # a 1e300 target: inf
                    per_output = np.where(per_output > 0, per_output * loss_scale, 0.0)
            loss = float(np.mean(per_output))
            loss_curve.append(loss)
            done = stop.update(self.weights)
            progress("epoch", epoch + 1, max_iter, training_loss=loss, **stop.report(),
                     seconds=time.perf_counter() - t0)
            if done:
                progress(stop.reason())
                break
        self.weights = stop.final(self.weights)
        return {"loss_curve": loss_curve, "n_iter": len(loss_curve),
                "converged": stop.converged}
