"""FALKON: Nyström kernel ridge solved by preconditioned conjugate gradients.

Rudi, Carratino & Rosasco, "FALKON: An Optimal Large Scale Kernel Method", NeurIPS
2017 (Algorithm 1 and Section 3); Meanti, Carratino, Rosasco & Rudi, "Kernel Methods
Through the Roof: Handling Billions of Points Efficiently", NeurIPS 2020 (the
out-of-core products). Leverage-score centers as in FALKON-BLESS (Rudi, Calandriello,
Carratino & Rosasco, "On Fast Leverage Score Sampling and Optimal Learning",
NeurIPS 2018), drawn here by kernelkit's SQUEAK-based :class:`~kernelkit.RLSNystroem`.

Memory: ``K_nM`` (held in float32 from ``tol >= 1e-6``) and ONE ``M x M`` array
holding both triangular factors ``T`` and ``A`` (as FALKON's own implementation);
``K_MM`` is never held (``K_MM = T^T T - eps I``). Precision: from ``tol >= 1e-6`` the
CG runs on float32 products (float32 factors too from 8192 centers), and float64
residuals refine its result until the float64 stopping rule holds (mixed-precision
iterative refinement); a float32 ``K_nM`` whose rounding could move the fitted values
by more than 1e-4 is replaced by a float64 one and the system solved again. The
operators are in :mod:`kernelkit.ridge._falkon_ops`. The classifier's ``predict_proba``
is calibrated on out-of-sample values (:mod:`kernelkit.ridge._falkon_loo`): Nyström
leave-one-out values where cheap, else a held-out split refitted by a warm start.
"""

import functools
import time
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, MultiOutputMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from ..backend import resolve_backend
from ..kernels import check_kernel_scale, make_kernel, resolve_kernel
from ..utils._array_api import ArrayAPIMixin
from ..utils._class_weight import row_weights
from ..utils._classes import CALIBRATION_ATTR_DOC, CALIBRATION_DOC
from ..utils._state import atomic
from ..utils._threads import blas_threads_for, single_blas_thread
from ..utils._validation import check_client
from ..utils._verbose import Progress, check_verbose, flops
from ._falkon_logistic import fit_logistic
from ._falkon_loo import exact_loo_is_cheap, holdout_values, logistic_loo_values, loo_values
from ._falkon_ops import (_FalkonPreconditioner, _fortran_gram, _NystromNormalOperator,
                          _refined_solve)
from ._kernel_ridge import _check_alpha, _ClassifierMixin
from ._pcg import (
    DEFAULT_MAX_ITER,
    _not_converged,
    conjugate_gradient,
    product_dtype,
    target_scale,
)

CENTERS = ("uniform", "rls", "thinning")
LOSSES = ("squared", "logistic")
_F32_PRECOND_MIN = 8192  # from this many centers a mixed solve holds T and A in float32
# a mixed (float32 K_nM) solve whose predictions the rounding of K_nM may move by more than
# this (relative) is redone in float64: the float32 path promises the float64 solve to 1e-4
_MIXED_MAX_ERROR = 1e-4
# float64 CG steps without a 10% gain that count as a stall (then refined from the true
# residual); longer than float32's: an ill-conditioned float64 CG also plateaus and recovers
_PATIENCE64 = 100
def _dropped_residual(normal, rows, w_rows, Y, beta):
    """``K_Sn^T W_S (y_S - K_SM beta)`` over the rows ``S``, in 32 MiB blocks of ``K_nM``
    (held: as the system holds it; else recomputed)."""
    m = normal.C.shape[0]
    step = max(1, 2**25 // (8 * m))
    out = np.zeros((m, Y.shape[1]))
    for s in range(0, len(rows), step):
        r = rows[s:s + step]
        K = (normal.KnM[r].astype(np.float64) if normal.KnM is not None
             else np.asarray(normal.op.block_host(normal.X[r], normal.C), np.float64))
        out += K.T @ (w_rows[s:s + step, None] * (Y[r] - K @ beta))
    return out


def _auto_centers(n):
    """FALKON's statistical rate needs ``M ~ sqrt(n) log n`` centers (Theorem 3)."""
    return int(min(n, max(100, round(np.sqrt(n) * np.log(n)))))


class _FalkonBase(ArrayAPIMixin, BaseEstimator):
    """Shared fit: centers, the FALKON preconditioner and CG on the normal equations."""

    def _sparse_ok(self):
        return False  # dense X only: centers and K_nM blocks go through the engines

    def _operator(self):
        return resolve_kernel(self.kernel, self.gamma, self.degree, self.coef0,
                              self.kernel_params, n_features=self.n_features_in_,
                              backend=self.backend_)

    def _default_tol(self):
        """What ``tol=None`` means (None: no default, ``tol`` must be given)."""
        return None

    def _check_params(self, n=None):
        """Validated ``(tol, max_iter, cache_size, verbose)``; with ``n`` None (before
        the data are read) also every other parameter that needs no data."""
        if isinstance(self.kernel, str) and self.kernel == "precomputed":
            raise ValueError("kernel='precomputed' cannot be used by FALKON: it evaluates the "
                             "kernel between the data and centers chosen in fit; pass a kernel "
                             "name, a Kernel or a callable.")
        if n is None:
            _check_alpha(self.alpha)
            make_kernel(self.kernel, self.gamma, self.degree, self.coef0, self.kernel_params)
            resolve_backend(self.backend)
            check_client(self.client)
            c = self.centers
            if np.ndim(c) != 2 and not (isinstance(c, str) and c in CENTERS):
                raise ValueError(f"centers must be one of {CENTERS} or an array of shape "
                                 f"(n_centers, n_features), got {c!r}.")
            m = self.n_centers
            if not (isinstance(m, str) and m == "auto") and (
                    isinstance(m, bool) or not isinstance(m, Integral) or m < 1):
                raise ValueError(f"n_centers must be 'auto' or an integer >= 1, got {m!r}.")
        tol = self._default_tol() if self.tol is None else self.tol
        if isinstance(tol, bool) or not isinstance(tol, Real) or not np.isfinite(tol) or tol <= 0:
            none = " or None" if self._default_tol() is not None else ""
            raise ValueError(f"tol must be a finite number > 0 (CG's relative residual){none}, "
                             f"got {tol!r}.")
        max_iter = DEFAULT_MAX_ITER if self.max_iter is None else self.max_iter
        if isinstance(max_iter, bool) or not isinstance(max_iter, Integral) or max_iter < 1:
            raise ValueError(f"max_iter must be an integer >= 1 or None, got {self.max_iter!r}.")
        c = self.cache_size
        if isinstance(c, bool) or not isinstance(c, Real) or not np.isfinite(c) or c < 0:
            raise ValueError(f"cache_size must be a number of MiB >= 0, got {c!r}.")
        return float(tol), int(max_iter), float(c), check_verbose(self.verbose)

    def _n_centers(self, n):
        m = self.n_centers
        if isinstance(m, str) and m == "auto":
            return _auto_centers(n)
        if isinstance(m, bool) or not isinstance(m, Integral) or not 1 <= m <= n:
            raise ValueError(f"n_centers must be 'auto' or an integer in [1, n_samples={n}], "
                             f"got {m!r}.")
        return int(m)

    def _select_centers(self, X, rng):
        """(centers, indices or None, weights ``w_j`` with ``sum_j w_j f_j ~ sum_i f_i``)."""
        n, d = X.shape
        spec = self.centers
        if not isinstance(spec, str):
            C = np.asarray(spec)
            if C.ndim != 2 or C.dtype.kind not in "iuf":
                raise ValueError(f"centers must be one of {CENTERS} or a numeric array of shape "
                                 f"(n_centers, n_features), got {type(spec).__name__} of "
                                 f"shape {getattr(C, 'shape', None)}.")
            if C.shape[1] != d or C.shape[0] < 1:
                raise ValueError(f"centers has shape {C.shape}; it needs at least one row and "
                                 f"n_features={d} columns, as X.")
            if not np.all(np.isfinite(C)):
                raise ValueError("centers contains NaN or infinity.")
            C = np.array(C, dtype=np.float64)  # a copy: the user's array is never touched
            return C, None, np.full(C.shape[0], n / C.shape[0])
        if spec not in CENTERS:
            raise ValueError(f"centers must be one of {CENTERS} or an array, got {spec!r}.")
        m = self._n_centers(n)
        seed = int(rng.randint(0, 2**31 - 1))
        if spec == "uniform" or m == n:
            idx = np.sort(rng.choice(n, m, replace=False))
            return X[idx], idx, np.full(m, n / m)
        if spec == "rls":
            from .. import RLSNystroem

            rls = RLSNystroem(self.kernel, gamma=self.gamma, coef0=self.coef0,
                              degree=self.degree, kernel_params=self.kernel_params,
                              n_components=m, random_state=seed, backend=self.backend_).fit(X)
            idx = np.asarray(rls.component_indices_)
            return X[idx], idx, np.asarray(rls.component_weights_, np.float64)
        from .. import KernelThinning

        # KT halves g times: thin a uniform subset of M 2^g points to exactly M centers
        g = int(np.floor(np.log2(n / m)))
        pool = np.sort(rng.choice(n, m * 2**g, replace=False))
        compress = "compress++" if len(pool) > 8192 and g >= 2 else None
        kt = KernelThinning(self.kernel, gamma=self.gamma, degree=self.degree, coef0=self.coef0,
                            kernel_params=self.kernel_params, m=g, compress=compress,
                            g=min(4, max(0, g - 1)), compute_mmd=False, backend=self.backend_,
                            random_state=seed).fit(X[pool])
        idx = pool[np.asarray(kt.coreset_indices_)]
        return X[idx], idx, np.full(len(idx), n / len(idx))

    def _solve(self, normal, pre, idx, lam, Y, n, m, tol, max_iter, progress, start=None,
               dropped=None):
        """CG on ``B^T H B g = B^T K_Mn y / n`` per group of targets sharing ``lambda``;
        with ``start`` (coefficients of a nearby system), warm-started from it. With
        ``dropped = (rows, w_rows)``, ``start`` solves this system but with those rows
        weighted ``w_rows`` (the full fit, for a held-out split): its residual here is
        then ``-K_Sn^T W_S (y_S - K_SM start) / n`` from those rows alone, up to the
        full solve's own residual (``tol`` of it), not a pass over all rows."""
        Y2 = Y.reshape(n, -1)
        scale = target_scale(Y2)  # scale-free: y and c y give c times the coefficients
        rhs_full = normal.kmn(normal._weigh(Y2 / scale, 0, n)) / n  # K_Mn W y / n
        coef = np.empty((m, Y2.shape[1]))
        n_iter = 0
        groups = [np.arange(Y2.shape[1])] if len(lam) == 1 else [[j] for j in range(len(lam))]
        for gi, cols in enumerate(groups):
            lj = lam[gi]
            # the first group's A was formed with T (a second solve: A holds the last group's)
            if gi or (start is not None and len(groups) > 1):
                with blas_threads_for(m):
                    pre.set_lambda(lj)
            # B^T H B with B = T^-1 A^-1, H = K_Mn K_nM / n + lam K_MM (exact in float64,
            # so the solution is the Nyström estimator whatever jitter the factors took)
            apply = functools.partial(pre.apply, product=normal, lam=lj, n=n)
            rhs = rhs_full[:, cols]

            def H64(beta, lj=lj):
                # K_MM as the factors hold it (float64), or as K_nM does (float32)
                kmm = pre.kmm(beta) if pre.F.dtype == np.float64 else normal.kmm(beta, idx)
                return normal.exact(beta) / n + lj * kmm

            apply64 = (functools.partial(pre.apply, product=normal.exact, lam=lj, n=n)
                       if normal.mixed else apply)
            if dropped is not None:  # the correction d: H d = r0, to tol of ||B^T rhs||
                beta0 = start[:, cols] / scale[cols]
                r0 = -_dropped_residual(normal, *dropped, Y2[:, cols] / scale[cols],
                                        beta0) / n
                ratio = (np.linalg.norm(pre.Bt(rhs), axis=0)
                         / np.maximum(np.linalg.norm(pre.Bt(r0), axis=0), 1e-300))
                tol_d = min(0.5, tol * float(ratio.min()))
                progress(f"held-out rows: the correction from the full fit, to {tol_d:.3g} "
                         f"of its own residual (tol {tol:.3g} of the system's)", level=1)
                if normal.mixed:
                    d, it, rel = _refined_solve(pre, apply, apply64, H64, r0, tol_d, max_iter,
                                                progress)
                else:
                    gd, it, rel = conjugate_gradient(apply, pre.Bt(r0), tol_d, max_iter,
                                                     progress=progress, patience=_PATIENCE64)
                    d = pre.B(gd)
                beta, rel = beta0 + d, rel / ratio
                progress("held-out solve", it, max_iter, level=1, tol=tol,
                         max_rel_residual=float(rel.max()))
            elif start is not None:  # from the true residual at start: rounds of correction
                beta, it, rel = _refined_solve(pre, apply, apply64, H64, rhs, tol, max_iter,
                                               progress, exact=not normal.mixed,
                                               beta0=start[:, cols] / scale[cols])
            elif normal.mixed:  # float32 rounds refined by float64 residuals
                apply64 = functools.partial(pre.apply, product=normal.exact, lam=lj, n=n)
                beta, it, rel = _refined_solve(pre, apply, apply64, H64, rhs, tol, max_iter,
                                               progress)
            else:
                gamma, it, rel = conjugate_gradient(apply, pre.Bt(rhs), tol, max_iter,
                                                    progress=progress,
                                                    patience=_PATIENCE64)
                beta = pre.B(gamma)
                if np.any(rel > tol) and it < max_iter:
                    # CG on an ill-conditioned B^T H B broke down or stalled near its
                    # rounding floor (once 180 steps for nothing, 350x off tol=1e-6's
                    # result): refined from the true residual, as the mixed solve is
                    beta, it2, rel = _refined_solve(pre, apply, apply, H64, rhs, tol,
                                                    max_iter - it, progress, exact=True,
                                                    beta0=beta)
                    it += it2
            coef[:, cols] = beta * scale[cols]
            n_iter = max(n_iter, it)
            if np.any(rel > tol):
                warnings.warn(_not_converged(type(self).__name__, it, max_iter,
                                             float(rel.max()), tol,
                                             "or use fewer or better-spread centers"),
                              ConvergenceWarning, stacklevel=4)
        return coef, n_iter

    def _solve_with(self, op, X, C, idx, w, lam, Y, n, m, dtype, tol, max_iter, cache,
                    progress, sample_weight=None, keep=False):
        """Build ``K_nM`` (``dtype``) and the preconditioner, and solve: one attempt.
        Returns ``(coef, n_iter, normal, pre)``; with ``keep``, ``normal`` stays open and
        ``pre`` is the preconditioner (for a second solve; the caller closes ``normal``),
        else ``normal`` is closed and ``pre`` None."""
        t0 = time.perf_counter()
        progress(f"K_nM: evaluating {n} x {m} ({np.dtype(dtype).name})", level=1)
        # K_nM first: its float64 working copies of X are freed before K_MM is formed
        normal = _NystromNormalOperator(op, X, C, dtype, cache, client=self.client,
                                        w=sample_weight)
        progress("K_nM", n, level=1, held=normal.stored, dask=normal.dask is not None,
                 seconds=round(time.perf_counter() - t0, 2))
        try:
            t0 = time.perf_counter()
            progress(f"K_MM: computing its Cholesky factors (M^3/3 ~ {flops(m ** 3 / 3)} each)",
                     level=1)
            with blas_threads_for(m):  # M^3/3-flop factorizations: BLAS on every core
                # float32 K_MM (from the held K_nM rows when the centers are training
                # rows) for the mixed-precision solve: B only preconditions there
                pre = _FalkonPreconditioner(normal.gram(idx) if normal.mixed and m >=
                                            _F32_PRECOND_MIN else _fortran_gram(op, C), w, n)
                pre.set_lambda(lam[0])
            progress("preconditioner", m, level=1, seconds=round(time.perf_counter() - t0, 2))
            t0 = time.perf_counter()
            progress(f"CG up to {max_iter} iterations over {n} x {m}", level=1)
            # CG: memory-bound products and few-column triangular solves, where a second
            # OpenBLAS thread gains little and stalls badly whenever a core is busy
            with single_blas_thread():
                coef, n_iter = self._solve(normal, pre, idx, lam, Y, n, m, tol, max_iter,
                                           progress)
        except BaseException:
            normal.close()
            raise
        if not keep:
            normal.close()
            pre = None
        progress("CG", level=1, seconds=round(time.perf_counter() - t0, 2))
        return coef, n_iter, normal, pre

    def _fit_targets(self, X, Y, sample_weight=None, oos=False):
        """Fit ``dual_coef_``; with ``oos``, return the Nyström leave-one-out decision
        values ``(rows, values)`` of up to ``_LOO_ROWS`` rows (all when fewer), else
        ``self``."""
        n = X.shape[0]
        tol, max_iter, cache, verbose = self._check_params(n)
        n_targets = 1 if Y.ndim == 1 else Y.shape[1]
        alpha = _check_alpha(self.alpha, n_targets)
        self.backend_ = resolve_backend(self.backend, X)
        rng = check_random_state(self.random_state)
        progress = Progress(self, verbose)
        kind = self.centers if isinstance(self.centers, str) else "array"
        progress(f"n={n}, d={X.shape[1]}: choosing the centers", kind=kind,
                 n_centers=self.n_centers if isinstance(self.centers, str) else len(self.centers))
        C, idx, w = self._select_centers(X, rng)
        if sample_weight is not None:  # the preconditioner's T W T^T / n ~ K_Mn W K_nM / n
            w = w * (sample_weight[idx] if idx is not None else np.mean(sample_weight))
        m = C.shape[0]
        op = self._operator()
        check_kernel_scale(op, X, type(self).__name__)
        progress.done(f"{m} centers", kind=kind)
        progress(f"plan: K_nM ({n} x {m}, ~{flops(2 * n * m * X.shape[1])}), K_MM and two "
                 f"M x M Cholesky factors (M^3/3 ~ {flops(m ** 3 / 3)} each), CG up to "
                 f"{max_iter} iterations over n x M (~{flops(4 * n * m)} each)")

        # Preconditioner (Rudi et al. 2017, Alg. 1): T^T T = K_MM, A^T A = T W T^T / n + lam I,
        # W the centers' weights (n / M each when uniform; 1 / pi_j for RLS draws, FALKON-BLESS)
        lam = np.atleast_1d(alpha) / n
        dtypes = [product_dtype(tol)]
        if dtypes[0] == np.float32:
            dtypes.append(np.dtype(np.float64))
        for dtype in dtypes:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                coef, n_iter, normal, pre = self._solve_with(op, X, C, idx, w, lam, Y, n, m,
                                                             dtype, tol, max_iter, cache,
                                                             progress, sample_weight,
                                                             keep=oos)
            if not normal.mixed:
                break
            # the float32 K_nM is a perturbed problem: where K_MM is near-singular (close
            # centers, tiny lambda) the coefficients grow until its rounding, eps32 |b|
            # per prediction, is no longer small; and float32 rounds can fail outright
            # (a flat kernel under a large target mean). Either way: solve again in float64
            err = normal.rounding_error(coef)
            failed = any(issubclass(c.category, ConvergenceWarning) for c in caught)
            progress("float32 K_nM rounding", level=1, relative_prediction_error=float(err.max()),
                     converged=not failed)
            if not (failed or np.any(err > _MIXED_MAX_ERROR)):
                break
            progress("refitting with a float64 K_nM", level=1)
            normal.close()
            normal = coef = pre = None  # free the float32 K_nM before the float64 one is built
        for w_ in caught:  # the kept attempt's warnings only
            warnings.warn_explicit(w_.message, w_.category, w_.filename, w_.lineno)
        try:
            self.kernel_nbytes_ = 0 if normal.KnM is None else int(normal.KnM.nbytes)
            if not np.all(np.isfinite(coef)):
                raise ValueError("FALKON produced non-finite coefficients; check alpha and the "
                                 "kernel parameters.")
            progress("CG done", n_iter, max_iter, n_centers=m)
            out = None
            if oos:
                t0 = time.perf_counter()
                if exact_loo_is_cheap(n, m, X.shape[1], n_iter, normal.KnM is not None):
                    pre = None  # its M x M array is not needed: free it before LOO's own
                    out, what = loo_values(normal, op, X, C, coef, Y, sample_weight, alpha,
                                           rng, idx), "leave-one-out values"
                else:
                    out = holdout_values(self, normal, pre, op, X, C, idx, lam, coef, Y,
                                         sample_weight, rng, tol, max_iter, progress)
                    what = "held-out values"
                progress(what, 0 if out is None else len(out[0]), n, level=1,
                         seconds=round(time.perf_counter() - t0, 2))
        finally:
            normal.close()
            pre = None
        self.dual_coef_ = coef[:, 0] if Y.ndim == 1 else coef
        self.centers_ = C
        self.center_indices_ = idx
        self.n_centers_ = m
        self.n_iter_ = n_iter
        return out if oos else self

    def _decision(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        op = self._operator()
        return np.asarray(op.engine.to_host(op.matmul(X, self.centers_, self.dual_coef_)),
                          np.float64)


_PARAMS_DOC = """
    alpha : float >= 0 or array of shape (n_targets,), default=1e-3
        Ridge penalty, as in :class:`KernelRidge`: the coefficients minimise
        ``||y - K_nM b||^2 + alpha b^T K_MM b`` (FALKON's ``lambda`` is ``alpha / n``).
        With every training point a center this is exact kernel ridge.
    n_centers : int >= 1 or "auto", default="auto"
        Number of Nyström centers ``M``, at most ``n_samples``; "auto" is
        ``sqrt(n) log(n)`` (at least 100, at most ``n``), the size of FALKON's
        optimal-rate theorem. Ignored when ``centers`` is an array.
    centers : {"uniform", "rls", "thinning"} or array of shape (M, n_features), default="uniform"
        ``"uniform"``: a uniform draw without replacement (FALKON). ``"rls"``: drawn by
        ridge leverage scores estimated by SQUEAK (:class:`kernelkit.RLSNystroem`, as
        FALKON-BLESS; better where the density is uneven). ``"thinning"``: a
        kernel-thinning coreset (:class:`kernelkit.KernelThinning`, Compress++ on large
        inputs) of a uniform subset of ``M 2^g`` points. An array: these centers, used
        exactly as given.
    kernel : str, Kernel or callable, default="rbf"
        A kernel name, a :class:`kernelkit.kernels.Kernel` or a callable (not
        "precomputed": FALKON evaluates the kernel at its centers).
    gamma, degree, coef0, kernel_params
        As in :class:`KernelRidge`.
    tol : {tol}
        Stop when the relative residual of the preconditioned normal equations is at
        most ``tol`` (for every target). From ``1e-6`` up, ``K_nM`` is held in float32 and
        CG runs on float32 products (and, from 8192 centers, float32 factors ``T``,
        ``A``: half their memory), refined by float64 residuals until the float64 rule
        holds; below ``1e-6`` all is float64 (a CG run that breaks down near its
        rounding floor is refined from the true residual likewise). Classification
        needs far less: on
        Fashion-MNIST the test accuracy settles by a relative residual of ~1e-2.{tol_default}
    max_iter : int >= 1 or None, default=None
        CG iteration limit (None: 500); reaching it raises a ``ConvergenceWarning``,
        as does a breakdown before it (rounding in an ill-conditioned system; the
        warning says which).
    cache_size : float >= 0, default=4096
        MiB for holding ``K_nM``; when it does not fit, every CG step recomputes it in
        row blocks of ``working_memory`` (``O(n M d)`` time, ``O(M^2)`` memory).
    client : None, str or distributed.Client, default=None
        When given, the ``K_nM`` products of ``fit`` run on this Dask cluster
        (:class:`kernelkit.distributed.DaskKernelOperator`): each worker holds the kernel
        block of its share of the rows against the centers, and a CG step moves only
        ``n x n_targets`` vectors. A string is a scheduler address: pass one rather than a
        ``Client`` to clone or pickle it (``GridSearchCV``). Needs ``kernelkit[dist]``.
    random_state : int, RandomState instance or None, default=None
        Seeds the choice of centers.
    verbose : int, default=0
        1: one line per phase; 2: every CG iteration.
    backend : {"auto", "numpy", "numba", "cupy"} or None, default=None
        Compute engine for the kernel; resolved in ``fit`` into ``backend_``."""

_ATTR_DOC = """
    centers_ : ndarray of shape (`n_centers_`, n_features), float64
        The Nyström centers.
    center_indices_ : ndarray of shape (`n_centers_`,) or None
        Rows of the training ``X`` used as centers (None when ``centers`` is an array).
    n_centers_ : int
    n_iter_ : int
        CG iterations (the largest over groups of targets).
    kernel_nbytes_ : int
        Bytes of the held ``K_nM`` (0 when computed blockwise).
    backend_ : str
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)"""

_RAISES_DOC = """
    Raises
    ------
    ValueError
        In ``fit``: NaN/inf, fewer than 2 samples, ``n_centers`` not in
        ``[1, n_samples]``, centers with the wrong feature count or non-finite values,
        an unknown ``centers`` string, ``tol <= 0``, ``max_iter < 1``, negative
        ``alpha``, ``kernel="precomputed"``."""


class FalkonRegressor(MultiOutputMixin, RegressorMixin, _FalkonBase):
    """FALKON: Nyström kernel ridge regression by preconditioned conjugate gradients.

    Restricts kernel ridge to ``f(x) = sum_j b_j k(x, c_j)`` over ``M`` centers and
    solves the normal equations ``(K_Mn K_nM + alpha K_MM) b = K_Mn y`` by CG with
    FALKON's preconditioner ``B = T^-1 A^-1 / sqrt(n)``, ``T = chol(K_MM)``,
    ``A = chol(T T^T / M + lambda I)`` (Rudi, Carratino & Rosasco, NeurIPS 2017,
    Algorithm 1; ``T W T^T / n`` with the centers' sampling weights ``W`` for
    leverage-score centers, Rudi et al. NeurIPS 2018). Memory: ``K_nM`` (``4 n M``
    bytes from ``tol >= 1e-6``, else ``8 n M``) plus one ``M x M`` array holding both
    ``T`` and ``A`` (``8 M^2`` bytes; ``4 M^2`` from 8192 centers with ``tol >= 1e-6``);
    ``K_MM`` is not kept. Time: ``O(n M d)`` to form ``K_nM``, three ``M^3/3``-flop
    factorizations (``potrf``, ``lauum``, ``potrf``), then ``O(n M + M^2)`` per CG
    iteration (one pass over ``K_nM``, four triangular solves); the iterations grow
    as ``log(1/tol)``, not with ``n``. Out-of-core products as in Meanti et al.
    (NeurIPS 2020).

    Parameters
    ----------
    {params}

    Attributes
    ----------
    dual_coef_ : ndarray of shape (`n_centers_`,) or (`n_centers_`, n_targets), float64
    {attrs}

    {raises}

    Examples
    --------
    >>> import numpy as np
    >>> from kernelkit.ridge import FalkonRegressor
    >>> rng = np.random.RandomState(0); X = rng.rand(500, 2); y = np.sin(6 * X[:, 0])
    >>> m = FalkonRegressor(alpha=1e-3, n_centers=100, gamma=5.0, random_state=0).fit(X, y)
    >>> bool(m.score(X, y) > 0.99)
    True
    """

    def __init__(self, alpha=1e-3, *, n_centers="auto", centers="uniform", kernel="rbf",
                 gamma=None, degree=3, coef0=1, kernel_params=None, tol=1e-5, max_iter=None,
                 cache_size=4096, client=None, random_state=None, verbose=0, backend=None):
        self.alpha = alpha
        self.n_centers = n_centers
        self.centers = centers
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.tol = tol
        self.max_iter = max_iter
        self.cache_size = cache_size
        self.client = client
        self.random_state = random_state
        self.verbose = verbose
        self.backend = backend

    @atomic
    def fit(self, X, y, sample_weight=None):
        """Choose the centers and solve the Nyström normal equations.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative row weights ``W`` of the squared loss: the coefficients solve
            ``(K_Mn W K_nM + alpha K_MM) b = K_Mn W y`` exactly (the preconditioner
            takes the centers' weights).

        Returns
        -------
        self : object
        """
        self._check_params()
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=True, dtype=np.float64,
                             ensure_min_samples=2)
        w = None if sample_weight is None else row_weights(None, y, sample_weight, (), X)
        # validate_data keeps a float16 / float32 / byte-swapped y as given
        return self._fit_targets(X, np.asarray(y, dtype=np.float64), w)

    def predict(self, X):
        """``k(X, centers_) @ dual_coef_``, computed blockwise.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets), float64
        """
        return self._decision(X)


class FalkonClassifier(_ClassifierMixin, _FalkonBase):
    """FALKON classifier: Nyström kernel ridge or kernel logistic regression.

    ``loss="squared"``: :class:`FalkonRegressor` on the {-1, +1} encoding of the
    classes, one-vs-all (all classes share the centers, the preconditioner and the CG
    products). ``loss="logistic"``: Nyström kernel logistic regression (binary, or
    multinomial with a softmax over one output per class) by the globally convergent
    second-order method of Marteau-Ferey, Bach & Rudi, NeurIPS 2019: a decreasing
    sequence of penalties, one approximate Newton step each, then Newton steps at
    ``alpha``, whose systems ``K_Mn D K_nM + alpha K_MM`` (``D`` the loss's Hessian at
    the current fit) are solved by CG with the FALKON preconditioner built for ``D``
    (with more than two classes, one preconditioner per class at ``alpha``: the
    softmax's curvature lies in a row's one or two contested classes); see
    :mod:`kernelkit.ridge._falkon_logistic`.

    Parameters
    ----------
    {params}
    loss : {"squared", "logistic"}, default="squared"
        ``"logistic"`` minimises ``sum_i w_i logloss(y_i, K_nM b) + alpha / 2
        tr(b^T K_MM b)`` (probabilities: see ``calibration``). ``tol`` then bounds
        the estimated distance of the training rows' probabilities to the optimum's
        (root mean square over rows, weighted: the last Newton step's change times
        ``q / (1 - q)``, ``q`` its ratio to the step before); ``max_iter`` the CG
        iterations of a Newton step; ``n_iter_`` the Newton steps of the path.
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes in the loss, as scikit-learn's classifiers take them
        (``"balanced"``: ``n_samples / (n_classes * bincount(y))``), multiplied with
        ``sample_weight``. A class that is not in ``y`` is a ValueError.
    {calibration}
        Out-of-sample values (``loss="squared"``), whichever is cheap: the Nyström
        estimator's exact leave-one-out decision values at the rows that are not
        centers (a center left out keeps its own basis function: not a test point;
        hat diagonal of ``B^T W B + alpha I``, ``B = K_nM T^-1``: ``3 n M^2`` flops,
        one ``M^3/3`` factorization, at most 20,000 rows) while estimated under 1e9
        flops or a fifth of the fit's own (``K_nM``, the factorizations, a pass over
        ``K_nM`` per CG step; ``n`` below ~1,900 with the default centers), else a
        held-out split: a stratified tenth of each class's positive-weight rows
        that are not centers (at most 5,000 rows, drawn with ``random_state``; with
        None, a fixed seed) gets weight 0 in a second solve of the same weighted
        normal equations on the same centers and ``K_nM``, warm-started from the
        full solution with the fit's preconditioner, to a relative residual of
        ``max(tol, 1e-2)`` of the right-hand side (``verbose``: the ``held-out
        solve`` line; measured 0.1-0.3x the fit). The fitted model is the full-data
        one either way. ``loss="logistic"``, two classes: the slopes are fitted on
        approximate leave-one-out values at the rows that are not centers (one
        Newton step from the fit without the row, Cawley & Talbot 2008; same cost
        and rule; with a small ``alpha`` the model's own sigmoid is over-confident
        on small data), else (more classes, or not cheap) the model's own sigmoid /
        softmax: ``calibration_temperature_`` 1, ``calibration_slopes_`` None.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    dual_coef_ : ndarray of shape (`n_centers_`, n_classes) (one column for two classes)
    {attrs}
    loss_curve_ : list of float
        ``loss="logistic"`` only: the objective after each Newton step.
    {calattr}

    {raises}
    """

    def __init__(self, alpha=1e-3, *, n_centers="auto", centers="uniform", kernel="rbf",
                 gamma=None, degree=3, coef0=1, kernel_params=None, tol=None, max_iter=None,
                 cache_size=4096, client=None, random_state=None, verbose=0, backend=None,
                 loss="squared", class_weight=None, calibration="auto"):
        FalkonRegressor.__init__(self, alpha, n_centers=n_centers, centers=centers,
                                 kernel=kernel, gamma=gamma, degree=degree, coef0=coef0,
                                 kernel_params=kernel_params, tol=tol, max_iter=max_iter,
                                 cache_size=cache_size, client=client,
                                 random_state=random_state, verbose=verbose, backend=backend)
        self.loss = loss
        self.class_weight = class_weight
        self.calibration = calibration

    def _default_tol(self):
        return 1e-3 if self.loss == "squared" else 1e-5

    def _check_params(self, n=None):
        if n is None and self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {self.loss!r}.")
        return _FalkonBase._check_params(self, n)

    @atomic
    def fit(self, X, y, sample_weight=None):
        """Fit one-vs-all FALKON regressions on {-1, +1} encoded classes, or the
        Nyström kernel logistic regression (``loss="logistic"``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Class labels of any type.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative row weights of the loss, multiplied by ``class_weight``;
            they also weight the calibration's log-loss.

        Returns
        -------
        self : object
        """
        return _ClassifierMixin.fit.__wrapped__(self, X, y, sample_weight)

    def _fit_targets(self, X, Y, sample_weight=None, oos=False):
        if self.loss == "squared":
            return _FalkonBase._fit_targets(self, X, Y, sample_weight, oos)
        fit_logistic(self, X, Y, sample_weight)  # oos: two classes, approximate LOO values
        rng = check_random_state(self.random_state)
        return logistic_loo_values(self, X, Y, sample_weight, rng) if oos else self

    def _fit_calibration(self, decision, y_idx, sample_weight=None):
        if self.loss == "squared" or len(y_idx):  # (logistic: out-of-sample values given)
            return _ClassifierMixin._fit_calibration(self, decision, y_idx, sample_weight)
        # a probability model: its own sigmoid / softmax, no temperature nor slopes
        self.calibration_temperature_ = 1.0 if self._check_calibration() else None
        self.calibration_slopes_ = None
        return self


_TOL_DOC = {FalkonRegressor: ("float > 0, default=1e-5", ""),
            FalkonClassifier: ("float > 0 or None, default=None", """
        None: ``1e-3`` with the squared loss (a margin of ten under the ~1e-2 at which
        Fashion-MNIST's accuracy settles; tighter costs CG steps, not accuracy),
        ``1e-5`` with the logistic loss (where ``tol`` bounds the distance of the
        training probabilities to the optimum's, see ``loss``).""")}
for _cls in (FalkonRegressor, FalkonClassifier):
    _PARAMS_CLS = _PARAMS_DOC.replace("{tol}", _TOL_DOC[_cls][0]).replace(
        "{tol_default}", _TOL_DOC[_cls][1])
    for _key, _text in (("{params}", _PARAMS_CLS), ("{attrs}", _ATTR_DOC),
                        ("{raises}", _RAISES_DOC), ("{calibration}", CALIBRATION_DOC),
                        ("{calattr}", CALIBRATION_ATTR_DOC)):
        _cls.__doc__ = _cls.__doc__.replace(_key, _text.strip())
del _cls, _key, _text, _PARAMS_CLS
