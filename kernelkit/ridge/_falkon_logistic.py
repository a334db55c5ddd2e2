"""Nyström kernel logistic regression (binary and multinomial) at FALKON's scale.

Marteau-Ferey, Bach & Rudi, "Globally Convergent Newton Methods for Ill-conditioned
Generalized Self-concordant Losses", NeurIPS 2019: the logistic loss is generalized
self-concordant, so Newton's method converges from a point within the Dikin ellipsoid
of the optimum; with a strong penalty ``b = 0`` is one, and the optimum of each penalty
of a decreasing sequence lies within the ellipsoid of the next, so a few approximate
Newton steps per penalty keep the iterate there all the way down to the target. Each
Newton system ``(K_Mn D K_nM + alpha K_MM) step = -gradient`` (``D`` the loss's Hessian
at the current fit, per row a scalar for two classes, the softmax block
``diag(p) - p p^T`` for more) is solved by CG with FALKON's preconditioner rebuilt for
``D`` (``A^T A = T D_M T^T / n + lambda I``, ``D_M`` the Hessian weights of the centers;
the paper's Algorithm 2). With more than two classes one weight per row cannot follow
a softmax block whose curvature lies in one or two classes: once a Newton step's CG
needs many iterations, the preconditioner becomes per class (block Jacobi over classes,
:mod:`._falkon_logistic_pre`; measured on 3,000 Fashion-MNIST images, 500 centers: 630
CG iterations over 17 Newton steps -> 161; on 20,000 images, 2,000 centers: 293 over
19, 153 of them per class. Penalties a hundredth apart took 124 over 13 on the first,
331 over 17 on the second). A backtracking line search on the objective guards every step
(it is never shortened on well-posed problems; it keeps rounding or an inexact step
from increasing the objective).

The objective, with ``f = K_nM b`` and row weights ``w``::

    J(b) = sum_i w_i logloss(y_i, f_i) + alpha / 2 tr(b^T K_MM b)

(two classes: ``log(1 + exp(-y_i f_i))``, ``y_i = +-1``; more: ``-log softmax(f_i)_{y_i}``
over one output per class; the penalty makes the softmax's shift invariance unique).
The penalty's ``K_MM`` is taken as ``T^T T = K_MM + eps I`` with the jitter floor of
FALKON's preconditioner (``eps = 1e-12 M max k(c, c)``): the rounding of a numerically
singular ``K_MM`` would otherwise leave directions of negative curvature along which the
(flat) loss lets ``b`` run off; the change of the model is ``alpha eps ||b||^2 / 2``.
Cost per Newton step: the CG iterations (``O(n M k)`` each, one pass over ``K_nM``),
two more passes (gradient, step), and the preconditioner's two ``M^3/3`` factorizations.
"""

import warnings

import numpy as np
from scipy.special import expit, log_softmax
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from ..backend import resolve_backend
from ..utils._threads import blas_threads_for, single_blas_thread
from ..utils._verbose import Progress, flops
from ._falkon_logistic_pre import _ClassPreconditioner
from ._falkon_ops import _FalkonPreconditioner, _fortran_gram, _NystromNormalOperator
from ._pcg import conjugate_gradient, product_dtype

_RATIO = 0.1          # each penalty of the path is this times the previous one
_LEVEL_STEPS = 2      # Newton steps per intermediate penalty (the paper's "a few")
_LEVEL_TOL = 1e-2     # their CG tolerance and relative change of the fitted values
_FINAL_CAP = 0.1     # the loosest CG tolerance at the target penalty
_MAX_NEWTON = 50      # Newton steps at the target penalty
_CLASS_PRE_BYTES = 2 * 2**30  # at most this for the k per-class factors (else shared)
_CLASS_MIN_CG = 10    # per-class preconditioner from a Newton step after one this long
_MIXED_MAX_ERROR = 1e-4  # the float32 K_nM promise of the squared loss (ridge/_falkon.py)


class _Logistic:
    """Binary (one output, ``y = +-1``) or multinomial (one-vs-all +-1 columns) log-loss."""

    def __init__(self, Y, w):
        self.binary = Y.shape[1] == 1
        self.Y = Y[:, 0] if self.binary else (Y > 0).astype(np.float64)
        self.w = w
        self.H = None

    def value(self, F):
        if self.binary:
            return float(np.dot(self.w, np.logaddexp(0.0, -self.Y * F[:, 0])))
        return -float(np.dot(self.w, np.einsum("ij,ij->i", self.Y, log_softmax(F, axis=1))))

    def derivatives(self, F):
        """The gradient in ``F`` (n, k), the Hessian held for :meth:`hess`, and a
        per-row Hessian weight for the preconditioner."""
        if self.binary:
            t = self.Y * F[:, 0]
            self.H = self.w * expit(t) * expit(-t)
            return (-self.w * self.Y * expit(-t))[:, None], self.H
        P = np.exp(log_softmax(F, axis=1))
        self.H = P
        self.dk = self.w[:, None] * (P * (1.0 - P))  # the softmax blocks' diagonals
        d = np.mean(self.dk, axis=1)  # their mean
        return self.w[:, None] * (P - self.Y), d

    def hess(self, Z, r0, r1):
        """The loss's Hessian times the fitted-value direction ``Z`` on rows r0:r1."""
        if self.binary:
            return self.H[r0:r1, None] * Z
        P, w = self.H[r0:r1], self.w[r0:r1, None]
        PZ = P * Z
        return w * (PZ - P * PZ.sum(axis=1, keepdims=True))


def fit_logistic(est, X, Y, sample_weight):
    """Fit ``est`` (a :class:`~kernelkit.ridge.FalkonClassifier`) by the Newton path.

    Sets ``dual_coef_``, ``centers_``, ``center_indices_``, ``n_centers_``,
    ``n_iter_`` (Newton steps), ``loss_curve_`` and ``kernel_nbytes_``.
    """
    n = X.shape[0]
    tol, max_iter, cache, verbose = est._check_params(n)
    alpha = np.atleast_1d(np.asarray(est.alpha, np.float64))
    if alpha.size != 1:
        raise ValueError("alpha must be one number with loss='logistic' (one penalty for the "
                         f"multinomial model), got {alpha.size} values.")
    alpha = float(alpha[0])
    if not alpha > 0:
        raise ValueError("loss='logistic' needs alpha > 0 (the loss has no minimiser on "
                         "separable data without a penalty).")
    est.backend_ = resolve_backend(est.backend, X)
    rng = check_random_state(est.random_state)
    progress = Progress(est, verbose)
    kind = est.centers if isinstance(est.centers, str) else "array"
    progress(f"logistic loss, n={n}, d={X.shape[1]}: choosing the centers", kind=kind)
    C, idx, wc = est._select_centers(X, rng)
    op = est._operator()
    m = C.shape[0]
    progress.done(f"{m} centers", kind=kind)
    progress(f"plan: K_nM ({n} x {m}, ~{flops(2 * n * m * X.shape[1])}), two M x M Cholesky "
             f"factors (M^3/3 ~ {flops(m ** 3 / 3)} each) per Newton step, CG over n x M "
             f"(~{flops(4 * n * m)} per iteration) in each Newton step", max_iter=max_iter)
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, np.float64)
    loss, kappa = _Logistic(Y, w), float(np.max(op.diag(C)))
    B, steps, curve, dtype = None, 0, [], product_dtype(tol)
    while True:
        normal = _NystromNormalOperator(op, X, C, dtype, cache, client=est.client)
        try:
            with blas_threads_for(C.shape[0]):
                pre = _FalkonPreconditioner(_fortran_gram(op, C), wc, n)  # float64 factors
            B, s, c, change = _newton_path(normal, pre, idx, wc, loss, n, alpha, kappa, tol,
                                           max_iter, progress, B)
            steps, curve = steps + s, curve + c
            # a float32 K_nM is a perturbed problem: where the coefficients grow (an
            # ill-conditioned K_MM, a small alpha) its rounding moves the fitted values;
            # then the float64 K_nM continues from here (as the squared loss refits)
            err = float(normal.rounding_error(B).max()) if normal.mixed else 0.0
        finally:
            normal.close()
        if err <= _MIXED_MAX_ERROR:
            break
        progress("float32 K_nM rounding", level=1, relative_prediction_error=err)
        dtype = np.dtype(np.float64)
    if not np.all(np.isfinite(B)):
        raise ValueError("FALKON logistic produced non-finite coefficients; check alpha and "
                         "the kernel parameters.")
    if change > tol:
        warnings.warn(f"FalkonClassifier(loss='logistic') stopped after {steps} Newton steps "
                      f"with a relative change of the fitted values of {change:.3g} > tol="
                      f"{tol:g}; increase alpha, tol or max_iter.", ConvergenceWarning,
                      stacklevel=4)
    est.kernel_nbytes_ = 0 if normal.KnM is None else int(normal.KnM.nbytes)
    est.dual_coef_ = B  # one column for two classes, as the squared loss
    est.centers_, est.center_indices_, est.n_centers_ = C, idx, C.shape[0]
    est.n_iter_, est.loss_curve_ = steps, curve
    return est


def _newton_path(normal, pre, idx, wc, loss, n, alpha, kappa, tol, max_iter, progress,
                 B=None):
    """Newton steps along ``lambda_0 > ... > alpha / n`` (FALKON's ``lambda``); from
    ``B`` at ``alpha / n`` when given."""
    m, k = pre.m, (1 if loss.binary else loss.Y.shape[1])
    lam_end = alpha / n
    # the start: a penalty at the scale of the data term's curvature (w k(x, x) / 4
    # per row): b = 0 is close to its optimum, well within its Dikin ellipsoid
    lam = max(lam_end, float(np.mean(loss.w)) * kappa) if B is None else lam_end
    F = np.zeros((n, k)) if B is None else normal.knm(B)
    B0, B = B, (np.zeros((m, k)) if B is None else B)

    # the penalty takes T^T T = K_MM + eps I, psd by construction: K_MM's own rounding
    # (or subtracting the jitter, as the squared loss does) leaves directions of
    # negative curvature at ~1e-16 along which b runs off, the loss being flat there
    def kmm(V):
        return pre.kmm(V) + pre.eps * V

    wnorm = np.sqrt(float(np.sum(loss.w)))  # fitted values of order 1 per row
    # the per-class preconditioner (multinomial only): k factorizations per Newton step
    # instead of one, worth it once CG passes cost more than that (switch_at iterations)
    per_class = not loss.binary and k * pre.m ** 2 * (4 if normal.mixed else 8) <= _CLASS_PRE_BYTES
    switch_at = max(_CLASS_MIN_CG, pre.m ** 2 / (6.0 * n))
    cls = None
    steps, curve, change = 0, [], (np.inf if B0 is None else tol)
    while True:
        final = lam <= lam_end * (1 + 1e-12)
        lam = lam_end if final else lam
        for step in range(_MAX_NEWTON if final else _LEVEL_STEPS):
            G, d = loss.derivatives(F)
            KB = kmm(B)
            grad = normal.kmn(G) + (lam * n) * KB
            with blas_threads_for(m):
                if cls is not None:  # the softmax blocks' diagonals, per class
                    dk = loss.dk[idx] if idx is not None else np.mean(loss.dk, axis=0)
                    cls.set_weights(np.sqrt(np.reshape(wc, (-1, 1)) * dk / n)
                                    * np.ones((m, 1)), lam)
                    P_ = cls
                else:  # one weight per row: the mean diagonal
                    pre.scale = np.sqrt(wc * (d[idx] if idx is not None else np.mean(d)) / n)
                    pre.set_lambda(lam)
                    P_ = pre
            # inexact Newton (a forcing term, Dembo, Eisenstat & Steihaug 1982): CG to
            # the last step's relative change, so that solves are loose far from the
            # optimum and only the last ones reach tol (measured: 200 -> ~30 CG
            # iterations per step at a 1e-7 penalty; a cap of 0.1 rather than 1e-2:
            # 192 -> 161 CG iterations on 3,000 Fashion-MNIST images, same Newton steps)
            inner = min(_FINAL_CAP, max(0.1 * tol, change)) if final else _LEVEL_TOL

            def product(P, lam=lam):  # + n lam eps P: pre.apply subtracts the jitter
                return normal.sandwich(P, loss.hess) + (n * lam * pre.eps) * P

            def apply(V, lam=lam):
                return P_.apply(V.reshape(m, k), product=product, lam=lam, n=n).reshape(-1, 1)

            # no best-residual restart (patience): each CG iterate from 0 lowers the
            # quadratic model, so the last one is the best Newton direction found
            with single_blas_thread():
                g, it, _ = conjugate_gradient(apply, P_.Bt(-grad / n).reshape(-1, 1), inner,
                                              max_iter, progress=progress)
            D = P_.B(g.reshape(m, k))
            KD, KmmD = normal.knm(D), kmm(D)
            t, J = _line_search(loss, F, KD, B, KB, D, KmmD, lam * n, float(np.sum(grad * D)))
            B, F = B + t * D, F + t * KD
            steps += 1
            curve.append(J)
            # relative change of the fitted values; a step the line search rejected
            # (rounding floor) counts at its full length: it is not convergence
            change = max(t, t == 0) * float(np.linalg.norm(KD)) / max(
                float(np.linalg.norm(F)), wnorm)
            progress("Newton step", steps, level=1, penalty=lam, cg_iterations=it,
                     step_size=t, relative_change=change, objective=J,
                     preconditioner="per class" if P_ is cls else "shared")
            if per_class and cls is None and it >= switch_at:
                cls = _ClassPreconditioner(pre, k, np.float32 if normal.mixed else np.float64)
            if change <= (tol if final else _LEVEL_TOL) or t == 0:
                break
        if final:
            return B, steps, curve, change
        lam *= _RATIO


def _line_search(loss, F, KD, B, KB, D, KmmD, a, slope):
    """Backtracking (Armijo) on ``J(B + t D)``: every term is known from ``K_nM D`` and
    ``K_MM D``, so a trial costs the loss on ``n`` rows, no kernel pass."""
    bkb, bkd, dkd = float(np.sum(B * KB)), float(np.sum(B * KmmD)), float(np.sum(D * KmmD))
    J0 = loss.value(F) + 0.5 * a * bkb
    t = 1.0
    for _ in range(40):
        J = loss.value(F + t * KD) + 0.5 * a * (bkb + 2 * t * bkd + t * t * dkd)
        if J <= J0 + 1e-4 * t * min(slope, 0.0):
            return t, J
        t *= 0.5
    return 0.0, J0  # no decrease along the step (at the rounding floor): stay
