"""Nyström kernel logistic regression (binary and multinomial) at FALKON's scale.

Marteau-Ferey, Bach & Rudi, "Globally Convergent Newton Methods for Ill-conditioned
Generalized Self-concordant Losses", NeurIPS 2019: the logistic loss is generalized
self-concordant, so Newton's method converges from a point within the Dikin ellipsoid
of the optimum; with a strong penalty ``b = 0`` is one, and the optimum of each penalty
of a decreasing sequence lies within the ellipsoid of the next, so approximate Newton
steps, each solved only to a constant relative accuracy, keep the iterate there all
the way down to the target. Each Newton system ``(K_Mn D K_nM + alpha K_MM) step =
-gradient`` (``D`` the loss's Hessian at the current fit, per row a scalar for two
classes, the softmax block ``diag(p) - p p^T`` for more) is solved by CG with FALKON's
preconditioner built for ``D`` (``A^T A = T D_M T^T / n + lambda I``, ``D_M`` the
Hessian weights of the centers; the paper's Algorithm 2).

The schedule (measured on Fashion-MNIST, ``gamma=0.02, alpha=0.01, tol=1e-3``; 20,000
images, 2,000 centers: 95 CG iterations over 10 Newton steps, where the previous
schedule of two steps per penalty, CG to 1e-2 and a stop on the fitted values took 293
over 19, for the same accuracy and log-loss):

* penalties a tenth apart from ``1e-2`` of the data term's curvature scale, one Newton
  step each with CG to 0.2 (1-7 CG iterations each there); then the target penalty,
  each step's CG to the last step's relative change of the fitted values (at most 0.3:
  a forcing term, Dembo, Eisenstat & Steihaug 1982);
* with more than two classes the preconditioner is per class at the target penalty
  (block Jacobi over classes, :mod:`._falkon_logistic_pre`: one weight per row cannot
  follow a softmax block whose curvature lies in one or two classes; 12-46 CG
  iterations per step with the shared one on 5,000 images, 7-13 per class), the rows
  that carry half of a class's curvature taken exactly rather than estimated from
  the centers (:func:`._falkon_logistic_pre.heavy_rows`: on all 60,000 images 78 CG
  iterations over the fit instead of 193); the shared preconditioner takes them too at
  the target penalty (two classes, "tops" against the rest of those images: 70 CG
  iterations instead of 133, the fit 6.8 s instead of 9.1 s);
* from ``_SAMPLED_FROM`` centers on (or where the ``k`` factors would take more than
  ``_CLASS_PRE_BYTES``), a factor per class (``2 M^3 / 3`` each, ``k`` per build) and
  even the shared one refactored at every penalty outgrow the fit, so every
  penalty is preconditioned by a sample of ``_SAMPLE_R`` rows per group (fewer where
  ``k`` samples would exceed ``_SAMPLE_BYTES``; shared on the path, per class at the
  target; :class:`._falkon_logistic_pre._SampledPreconditioner`, PCG): all 60,000
  Fashion-MNIST images, 8,000 centers, the fit took 91 s (bench_proba part c) where
  the shared factor took 282 s (ten per-class factors exceed 2 GiB there), for the
  same accuracy and log-loss; at 5,000 centers the per-class factors and the sample
  were on a par (59 s, 63 s);
* a preconditioner is refactored only when the penalty changes, its Hessian weights
  moved by more than 30% (L1) since it was built (5,000 images, 1,000 centers: 3
  per-class builds instead of 4 at 10%, 63 CG iterations instead of 61), or the last
  step's CG took more than 1.5 times the iterations of the first step on it, and more
  extra iterations than a refactoring costs in CG iterations (``M^2 / 6n``; all
  60,000 images, 2,000 centers: the last step 37 CG iterations instead of 87 on the
  stale factors, 174 in all instead of 224, one build more; refactoring at every step
  took 98 instead of 77 at 20,000 images);
* the fitted values and the gradient come from one pass over ``K_nM`` (``K_nM b``, then
  ``K_Mn G`` on the same row block), in float64; the step's ``K_nM d`` is summed inside
  CG from its products' ``K_nM U`` (no pass of its own);
* while CG's tolerance is at least ``1e-3`` the Hessian products use the held float32
  ``K_nM`` as stored (``V`` split in two float32 parts; measured 3x cheaper than
  upcasting each block, 5,000 x 1,000, ten classes); the fixed point is the gradient's,
  computed in float64, so they change the path, not the optimum. A CG that stalls on
  them (no 10% gain in 10 iterations, and its residual more than 10% off the true one,
  checked by one float64 product: an ill-conditioned ``K_MM``) switches the fit to
  float64 products; a plateau without that gap is CG's own and goes on in float32 (all
  60,000 images, 2,000 centers: the plateau of the ninth step had switched the last two
  steps, 87 products, to float64 at 1.9 times the float32 product's cost);
* the fit stops when the estimated distance of the training probabilities to the
  optimum's, root mean square over rows (weighted), is below ``tol``: the last step's
  change ``dp`` times ``q / (1 - q)``, ``q`` its ratio to the step before (the changes
  fall at least linearly once steps are full; the bare ``dp`` while ``q >= 0.5``; a
  step the line search shortened to ``t`` counts as ``dp / t``, its whole length).
  The fitted values' relative change overstates what the model's output still moves
  by far: 0.08 where the probabilities were within 8e-4 of the optimum's (5,000
  images, 1,000 centers), the logits of confident rows still growing.

A backtracking line search on the objective guards every step (it is never shortened
on well-posed problems; it keeps rounding or an inexact step from increasing the
objective).

The objective, with ``f = K_nM b`` and row weights ``w``::

    J(b) = sum_i w_i logloss(y_i, f_i) + alpha / 2 tr(b^T K_MM b)

(two classes: ``log(1 + exp(-y_i f_i))``, ``y_i = +-1``; more: ``-log softmax(f_i)_{y_i}``
over one output per class; the penalty makes the softmax's shift invariance unique).
The penalty's ``K_MM`` is taken as ``T^T T = K_MM + eps I`` with the jitter floor of
FALKON's preconditioner (``eps = 1e-12 M max k(c, c)``): the rounding of a numerically
singular ``K_MM`` would otherwise leave directions of negative curvature along which the
(flat) loss lets ``b`` run off; the change of the model is ``alpha eps ||b||^2 / 2``.
Cost per Newton step: the CG iterations (``O(n M k)`` each, one pass over ``K_nM``,
plus ``2 k`` triangular solves on ``M x M`` factors with the per-class preconditioner),
one more pass (fitted values and gradient), and, when refactored, the preconditioner's
two ``M^3/3`` factorizations (``2 k`` per class).
"""

import warnings

import numpy as np
from scipy.special import expit, log_softmax
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from ..backend import resolve_backend
from ..kernels import check_kernel_scale
from ..utils._threads import blas_threads_for, single_blas_thread
from ..utils._verbose import Progress, flops
from ._falkon_logistic_pre import (_ClassPreconditioner, _SampledPreconditioner, exact_rows,
                                   heavy_rows)
from ._falkon_ops import _FalkonPreconditioner, _fortran_gram, _NystromNormalOperator
from ._pcg import product_dtype

_RATIO = 0.1          # each penalty of the path is this times the previous one
_START = 1e-2          # the first penalty, times the data term's curvature scale
_LEVEL_STEPS = 1      # Newton steps per intermediate penalty (the paper's "a few")
_LEVEL_CG = 0.2       # their CG tolerance (a constant relative accuracy, as the paper's)
_LEVEL_CHANGE = 1e-2  # (_LEVEL_STEPS > 1) a penalty's steps stop below this distance
_FINAL_CAP = 0.3      # the loosest CG tolerance at the target penalty
_STALL = 10           # CG iterations without a 10% lower residual: check the rounding
_MAX_NEWTON = 50      # Newton steps at the target penalty
_REUSE = 0.3          # a preconditioner is kept while its weights move less (L1, relative)
_SLOW = 1.5           # ... and while CG needs less than this times its first step's iterations
_F32_CG_MIN = 1e-3    # float32 Hessian products while the CG tolerance is at least this
_CLASS_PRE_BYTES = 2 * 2**30  # at most this for the k per-class factors (else shared)
_MIXED_MAX_ERROR = 1e-4  # the float32 K_nM promise of the squared loss (ridge/_falkon.py)
_SAMPLED_FROM = 6000  # from this many centers on, the sampled preconditioner
_SAMPLE_R = 2000      # ... of this many rows per group, at most
_SAMPLE_BYTES = 4 * 2**30  # ... and at most this for its k samples (float64) and cache


class _Logistic:
    """Binary (one output, ``y = +-1``) or multinomial (one-vs-all +-1 columns) log-loss.

    :meth:`gradient_rows` runs on row blocks of the fused pass over ``K_nM`` (several
    blocks at once, each writing its own rows) and keeps what :meth:`hess` and the
    preconditioner's weights need.
    """

    def __init__(self, Y, w):
        self.binary = Y.shape[1] == 1
        self.Y = Y[:, 0] if self.binary else (Y > 0).astype(np.float64)
        self.w = w
        n, k = Y.shape
        self.H = np.empty(n if self.binary else (n, k))
        self.dk = np.empty((n, k))  # the Hessian blocks' diagonals (preconditioner weights)

    def value(self, F):
        if self.binary:
            return float(np.dot(self.w, np.logaddexp(0.0, -self.Y * F[:, 0])))
        return -float(np.dot(self.w, np.einsum("ij,ij->i", self.Y, log_softmax(F, axis=1))))

    def gradient_rows(self, F, r0, r1):
        """The gradient in the fitted values ``F`` of rows ``r0:r1``; keeps their Hessian."""
        w = self.w[r0:r1]
        if self.binary:
            t = self.Y[r0:r1] * F[:, 0]
            self.H[r0:r1] = self.dk[r0:r1, 0] = w * expit(t) * expit(-t)
            return (-w * self.Y[r0:r1] * expit(-t))[:, None]
        P = np.exp(log_softmax(F, axis=1))
        self.H[r0:r1] = P
        self.dk[r0:r1] = w[:, None] * (P * (1.0 - P))
        return w[:, None] * (P - self.Y[r0:r1])

    def probabilities(self, F):
        """The model's probabilities at the fitted values ``F`` (n, 1 or k)."""
        return expit(F) if self.binary else np.exp(log_softmax(F, axis=1))

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
    check_kernel_scale(op, X, type(est).__name__)
    m = C.shape[0]
    progress.done(f"{m} centers", kind=kind)
    progress(f"plan: K_nM ({n} x {m}, ~{flops(2 * n * m * X.shape[1])}), one Newton step per "
             f"penalty of the path, then Newton steps at alpha; two M x M Cholesky factors "
             f"(M^3/3 ~ {flops(m ** 3 / 3)} each; two per class at alpha) when the Hessian "
             f"weights moved, CG over n x M (~{flops(4 * n * m)} per iteration) in each step",
             max_iter=max_iter)
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, np.float64)
    loss, kappa = _Logistic(Y, w), float(np.max(op.diag(C)))
    B, steps, curve, dtype = None, 0, [], product_dtype(tol)
    while True:
        normal = _NystromNormalOperator(op, X, C, dtype, cache, client=est.client)
        try:
            with blas_threads_for(C.shape[0]):
                pre = _FalkonPreconditioner(_fortran_gram(op, C), wc, n)  # float64 factors
            B, s, c, change = _newton_path(normal, pre, idx, wc, loss, n, alpha, kappa, tol,
                                           max_iter, progress, rng, B)
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
                      f"with the training probabilities an estimated {change:.3g} (root mean "
                      f"square) from the optimum's > tol={tol:g}; increase alpha, tol or "
                      "max_iter.", ConvergenceWarning,
                      stacklevel=4)
    est.kernel_nbytes_ = 0 if normal.KnM is None else int(normal.KnM.nbytes)
    est.dual_coef_ = B  # one column for two classes, as the squared loss
    est.centers_, est.center_indices_, est.n_centers_ = C, idx, C.shape[0]
    est.n_iter_, est.loss_curve_ = steps, curve
    return est


def _newton_path(normal, pre, idx, wc, loss, n, alpha, kappa, tol, max_iter, progress, rng,
                 B=None):
    """Newton steps along ``lambda_0 > ... > alpha / n`` (FALKON's ``lambda``); from
    ``B`` at ``alpha / n`` when given."""
    m, k = pre.m, (1 if loss.binary else loss.Y.shape[1])
    lam_end = alpha / n
    # the start: a penalty at the scale of the data term's curvature (w k(x, x) / 4
    # per row): b = 0 is close to its optimum, well within its Dikin ellipsoid
    lam = max(lam_end, _START * float(np.mean(loss.w)) * kappa) if B is None else lam_end
    B0, B = B, (np.zeros((m, k)) if B is None else B)
    F = np.empty((n, k))

    # the penalty takes T^T T = K_MM + eps I, psd by construction: K_MM's own rounding
    # (or subtracting the jitter, as the squared loss does) leaves directions of
    # negative curvature at ~1e-16 along which b runs off, the loss being flat there
    def kmm(V):
        return pre.kmm(V) + pre.eps * V

    def fitted_and_gradient(Pb, r0, r1):  # one pass: F = K_nM B, then K_Mn G(F)
        F[r0:r1] = Pb
        return loss.gradient_rows(Pb, r0, r1)

    wsum = max(float(np.sum(loss.w)), np.finfo(np.float64).tiny)
    wnorm = np.sqrt(wsum)  # fitted values of order 1 per row
    # the per-class preconditioner (multinomial only, at the target penalty): 2 k
    # factorizations per build instead of 2, k factors held
    # ... while they are cheap and fit in memory; else a sample of rows per class
    fits = k * m ** 2 * (4 if normal.mixed else 8) <= _CLASS_PRE_BYTES
    sampled = m >= _SAMPLED_FROM or not (loss.binary or fits)
    samp = _SampledPreconditioner(pre, k, _sample_size(m, k), rng) if sampled else None
    per_class = not (sampled or loss.binary)
    exact = False  # float64 products only (float32 ones stalled CG)
    cls, built = None, None  # built: (preconditioner, lambda, weights) last factored
    it_built, it = None, 0  # CG iterations of the first step on it, of the last step
    # a refactoring (k per class, 2 M^3 / 3 each) costs this many CG iterations (a
    # pass over K_nM each way, 4 n M k): a slow CG refreshes only when its extra
    # iterations would pay for it (11 at 60,000 rows and 2,000 centers, 69 at 5,000)
    rebuild_its = (samp.r ** 2 / (4.0 * n) if sampled else
                   m * m / (6.0 * n) / (1 if per_class else k))
    steps, curve, change = 0, [], (np.inf if B0 is None else tol)
    err = change  # the estimated relative distance of the fitted values to the optimum
    KU = np.empty((n, k))  # K_nM U of the last CG product (U = B p)
    while True:
        final = lam <= lam_end * (1 + 1e-12)
        lam = lam_end if final else lam
        last = None  # the previous full step's change at this penalty
        if final and per_class and cls is None:
            cls = _ClassPreconditioner(pre, k, np.float32 if normal.mixed else np.float64)
        for step in range(_MAX_NEWTON if final else _LEVEL_STEPS):
            # small products on one BLAS thread (a second one only stalls, measured 18 ms
            # per K_MM product at 500 centers on a busy machine); the factorizations on all
            with single_blas_thread():
                # the exact (float64) fitted values and gradient at B, in one pass
                if normal.mixed and not final:  # the path's penalties: float32 products
                    grad = _sandwich32(normal, B, fitted_and_gradient)
                else:
                    grad = normal.sandwich(B, fitted_and_gradient)
                KB = kmm(B)
                grad += (lam * n) * KB
            dk = loss.dk[idx] if idx is not None else np.mean(loss.dk, axis=0)[None, :]
            classes = cls is not None or (sampled and final and k > 1)  # a group per class
            weights = np.reshape(wc, (-1, 1)) * (dk if classes else
                                                  np.mean(dk, axis=1, keepdims=True)) / n
            P_ = cls if cls is not None else (samp if sampled else pre)
            fresh = built is None or built[0] is not P_ or built[1] != lam or (
                built[2].shape != weights.shape) or (
                np.abs(weights - built[2]).sum() > _REUSE * built[2].sum()) or (
                it_built is not None and it > _SLOW * max(it_built, 1)
                and it - it_built > rebuild_its)
            if fresh:
                with blas_threads_for(m):
                    if P_ is samp:  # at the target penalty the heavy rows exactly
                        heavy = final and idx is not None
                        dkn = (loss.dk if classes else np.mean(loss.dk, axis=1, keepdims=True))
                        samp.set_weights(weights * np.ones((m, 1)), lam,
                                         dk=dkn / n if heavy else None, idx=idx,
                                         rows=normal.rows)
                    elif P_ is cls:  # the softmax blocks' diagonals, per class; the
                        # rows that carry most of a class's weight exactly (centers that
                        # are training rows: the rest is estimated from them)
                        heavy = None if idx is None else heavy_rows(loss.dk, m)
                        cls.set_weights(np.sqrt(weights) * np.ones((m, 1)), lam,
                                        heavy=heavy, dk=loss.dk / n, idx=idx,
                                        rows=normal.rows)
                    else:  # one weight per row: the mean diagonal; at the target
                        # penalty its heaviest rows exactly, as the per-class one does
                        pre.scale, extra = np.sqrt(weights[:, 0] * np.ones(m)), None
                        if final and idx is not None:
                            dm = np.mean(loss.dk, axis=1) / n
                            H = heavy_rows(dm[:, None], m)[0]
                            pre.scale = pre.scale * ~np.isin(idx, H)
                            extra = exact_rows(lambda V: pre.solve_T(V, trans=True),
                                               normal.rows, H, dm, pre.F.dtype)
                        pre.set_lambda(lam, extra=extra)
                built, it_built = (P_, lam, weights), None
            # inexact Newton (a forcing term, Dembo, Eisenstat & Steihaug 1982): CG to
            # the last step's relative change, so that solves are loose far from the
            # optimum and only the last ones reach tol (measured: 200 -> ~30 CG
            # iterations per step at a 1e-7 penalty; a cap of 0.1 rather than 1e-2:
            # 192 -> 161 CG iterations on 3,000 Fashion-MNIST images, same Newton steps)
            inner = min(_FINAL_CAP, max(0.1 * tol, change)) if final else _LEVEL_CG
            fast = normal.mixed and inner >= _F32_CG_MIN and not exact

            def hess(Pb, r0, r1):
                KU[r0:r1] = Pb
                return loss.hess(Pb, r0, r1)

            # + n lam eps U: apply subtracts the jitter
            def product(U, lam=lam, fast=fast, fn=hess):
                out = _sandwich32(normal, U, fn) if fast else normal.sandwich(U, fn)
                return out + (n * lam * pre.eps) * U

            def apply(V, lam=lam, P_=P_):
                return (P_.apply(V.reshape(m, k), product=product, lam=lam, n=n).reshape(-1),
                        KU)

            def exact_apply(V, lam=lam, P_=P_, product=product):  # float64, KU untouched
                def product64(U):
                    return product(U, fast=False, fn=loss.hess)

                return P_.apply(V.reshape(m, k), product=product64, lam=lam, n=n).reshape(-1)

            with single_blas_thread():
                precond = None if P_ is not samp else (
                    lambda v: samp.precond(v.reshape(m, k)).reshape(-1))
                g, KD, it, done = _newton_cg(apply, P_.Bt(-grad / n).reshape(-1), inner,
                                             max_iter, progress, np.zeros((n, k)),
                                             exact=exact_apply if fast else None,
                                             precond=precond)
                D = P_.B(g.reshape(m, k))
                KmmD = kmm(D)
            it_built = it if it_built is None else it_built
            if fast and not done:  # float32 products too rounded here: float64 from now on
                exact = True
            t, J = _line_search(loss, F, KD, B, KB, D, KmmD, lam * n, float(np.sum(grad * D)))
            P0 = loss.probabilities(F)
            B, F = B + t * D, F + t * KD
            steps += 1
            curve.append(J)
            # relative change of the fitted values; a step the line search rejected
            # (rounding floor) counts at its full length: it is not convergence
            change = max(t, t == 0) * float(np.linalg.norm(KD)) / max(
                float(np.linalg.norm(F)), wnorm)
            # the root mean square change of the training rows' probabilities (weighted)
            dp = np.sqrt(float(np.dot(loss.w, np.sum((loss.probabilities(F) - P0) ** 2,
                                                      axis=1))) / wsum)
            # a shortened step moved the probabilities by t times its own length: the
            # distance is judged on the whole step (a step of 6e-8 is not convergence)
            dp = dp / t if t > 0 else np.inf
            # past the damped phase the changes fall at least linearly, at a rate
            # q = dp / last (quadratically: q itself falls): the probabilities are
            # then within q / (1 - q) dp of the optimum's, not within dp
            q = dp / last if (last and t == 1.0) else 1.0
            err = dp * q / (1.0 - q) if q < 0.5 else dp
            last = dp if t == 1.0 else None
            progress("Newton step", steps, level=1, penalty=lam, cg_iterations=it,
                     step_size=t, relative_change=change, probability_change=dp,
                     distance_estimate=err, objective=J,
                     preconditioner=("per class" if classes else "shared")
                     + (" sampled" if P_ is samp else "")
                     + (" (new)" if fresh else ""))
            if err <= (tol if final else _LEVEL_CHANGE) or t == 0:
                break
        if final:
            return B, steps, curve, err
        lam *= _RATIO


def _sample_size(m, k):
    """Rows per group of the sampled preconditioner: ``_SAMPLE_R``, fewer where the
    ``k`` samples (``M x r`` and ``r x r`` each) and the heavy rows' cache (up to
    ``k r / 2`` columns of ``M``) would exceed ``_SAMPLE_BYTES`` (float64)."""
    per = _SAMPLE_BYTES / (8.0 * k)  # r^2 + 1.5 M r <= per
    r = int((np.sqrt((1.5 * m) ** 2 + 4 * per) - 1.5 * m) / 2)
    return max(1, min(m, _SAMPLE_R, r))


def _newton_cg(apply, b, tol, max_iter, progress, KX, exact=None, precond=None):
    """CG from 0 on the preconditioned Newton system ``A x = b`` (``b`` a vector).

    ``apply(p)`` returns ``(A p, K_nM B p)``; the second is summed into ``KX`` (zeros
    on entry) along with ``x``, so that the step's change of the fitted values
    ``K_nM B x`` costs no pass of its own. No best-residual restart: each CG iterate
    from 0 lowers the quadratic model, so the last one is the best Newton direction
    found. With ``exact`` (``x -> A x`` from float64 products, where ``apply`` rounds
    them to float32), a residual that has not fallen by 10% for ``_STALL`` iterations
    is checked against the true one, ``b - exact(x)``: CG stops there when they differ
    by more than a tenth of it (the products' rounding holds CG up), else goes on (a
    plateau of CG's residual, which is not monotone in any arithmetic: float64
    products sat 15 iterations within 10% on all 60,000 Fashion-MNIST images). Returns
    ``(x, K_nM B x, iterations, converged)``. With ``precond`` (``r -> P^-1 r``, symmetric
    positive definite) it is PCG, and the residual is measured as ``sqrt(r^T P^-1 r)``: the
    split form's (CG on ``L^T A L`` for ``L L^T = P^-1``).
    """
    x, r = np.zeros_like(b), b.copy()
    z = r if precond is None else precond(r)
    p, rr = z.copy(), max(float(r @ z), 0.0)
    stop, it = tol * np.sqrt(rr), 0
    best, since = rr, 0
    while it < max_iter and np.sqrt(rr) > stop:
        if exact is not None and since >= _STALL:
            gap, rn = float(np.linalg.norm(b - exact(x) - r)), float(np.linalg.norm(r))
            progress("CG plateau", it, level=2, residual_gap=gap / max(rn, 1e-300))
            if gap > 0.1 * rn:
                break
            best, since = rr, 0
        it += 1
        Ap, Kp = apply(p)
        pap = float(p @ Ap)
        if not pap > 0:  # rounding at the floor: keep what was found
            break
        a = rr / pap
        x += a * p
        r -= a * Ap
        KX += a * Kp
        z = r if precond is None else precond(r)
        rr, rr_old = max(float(r @ z), 0.0), rr
        p = z + (rr / rr_old) * p
        best, since = (rr, 0) if rr < 0.81 * best else (best, since + 1)
        progress("CG iteration", it, max_iter, level=2,
                 relative_residual=np.sqrt(rr) / max(stop / tol, 1e-300))
    return x, KX, it, bool(np.sqrt(rr) <= stop)


def _sandwich32(normal, V, fn):
    """``K_nM^T fn(K_nM V)`` from the held float32 ``K_nM`` without upcasting it: the
    Hessian products of a loose CG solve, where float32's ~1e-6 relative error is far
    below the solve's tolerance (``V`` split into float32 ``hi + lo``, unrounded)."""
    return normal._normal32(V, fn)


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
