"""EigenPro estimators: parameters, fitted attributes, and the fit driver."""

import math
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, MultiOutputMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.utils import check_array, check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from ..backend import resolve_backend
from ..kernels import KernelOperator, check_kernel_scale, make_kernel
from ..utils._array_api import ArrayAPIMixin
from ..utils._class_weight import row_weights
from ..utils._state import atomic
from ..utils._threads import blas_threads_for, single_blas_thread
from ..utils._validation import check_client
from ..utils._verbose import Progress, check_verbose, flops
from . import _solver as _ep
from ._checks import (
    _ALGORITHMS,
    CACHE_MAX_MIB,
    _available_bytes,
    _check_choice_or_number,
    _check_number,
    _divergence_message,
    _normalise_targets,
    _rescale,
)
from ._docs import _ATTRS_DOC, _NOTES_DOC, _PARAMS_DOC
from ._stopping import MONITOR_SIZE, StoppingRule, regression_score

__all__ = ["EigenProRegressor"]

_DTYPES = {"float32": np.float32, "float64": np.float64}
class _BaseEigenPro(ArrayAPIMixin, BaseEstimator):
    """Shared parameters, validation, training and prediction."""

    def __init__(self, *, n_centers=None, kernel="rbf", gamma=None, degree=3, coef0=1,
                 kernel_params=None, alpha=0.0, n_components="auto", subsample_size="auto",
                 batch_size="auto", eta="auto", damping=0.95, max_iter=30, tol=1e-3,
                 early_stopping="auto", validation_fraction=0.1, n_iter_no_change=2,
                 algorithm="auto", projection_period="auto", projection_max_iter=1,
                 cache_size="auto", dtype="float32", client=None, backend=None,
                 random_state=None, verbose=0):
        self.n_centers = n_centers
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.alpha = alpha
        self.n_components = n_components
        self.subsample_size = subsample_size
        self.batch_size = batch_size
        self.eta = eta
        self.damping = damping
        self.max_iter = max_iter
        self.tol = tol
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.algorithm = algorithm
        self.projection_period = projection_period
        self.projection_max_iter = projection_max_iter
        self.cache_size = cache_size
        self.dtype = dtype
        self.client = client
        self.backend = backend
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------ validation
    def _compute_dtype(self):
        try:
            dt = np.dtype(self.dtype) if self.dtype is not None else None
        except TypeError:
            dt = None
        if dt is None or dt.name not in _DTYPES or isinstance(self.dtype, bool):
            raise ValueError(f"dtype must be 'float32' or 'float64', got {self.dtype!r}.")
        return dt

    def _get_kernel(self):
        if isinstance(self.kernel, str) and self.kernel == "precomputed":
            raise ValueError("kernel='precomputed' is not supported: EigenPro never forms the "
                             "kernel matrix, it evaluates kernel blocks from the inputs. Pass "
                             "the kernel by name, as a kernelkit Kernel or as a callable "
                             "(or use kernelkit.KernelRidge(kernel='precomputed')).")
        return make_kernel(self.kernel, self.gamma, self.degree, self.coef0, self.kernel_params)

    def _check_params(self):
        p = {}
        p["alpha"] = _check_number(self.alpha, "alpha", low=0.0)
        p["n_components"] = _check_choice_or_number(self.n_components, "n_components", low=0,
                                                    integer=True)
        p["subsample_size"] = _check_choice_or_number(self.subsample_size, "subsample_size",
                                                      low=1, integer=True)
        if p["n_components"] is not None and p["subsample_size"] is not None and \
                p["n_components"] >= p["subsample_size"]:
            raise ValueError(f"n_components={self.n_components} must be < subsample_size="
                             f"{self.subsample_size}: the preconditioner needs the top "
                             "n_components + 1 eigenvalues of the subsample's kernel matrix.")
        if isinstance(self.batch_size, Integral) and not isinstance(self.batch_size, bool) \
                and self.batch_size <= 0:
            raise ValueError(f"batch_size must be 'auto' or a positive integer, got "
                             f"{self.batch_size!r}.")
        p["batch_size"] = _check_choice_or_number(self.batch_size, "batch_size", low=1,
                                                  integer=True)
        p["eta"] = _check_choice_or_number(self.eta, "eta", low=0.0, integer=False,
                                           low_inclusive=False)
        p["damping"] = _check_number(self.damping, "damping", low=0.0, low_inclusive=False,
                                     high=1.0)
        p["max_iter"] = _check_number(self.max_iter, "max_iter", low=1, integer=True)
        p["tol"] = _check_number(self.tol, "tol", low=0.0, allow_none=True)
        p["validation_fraction"] = _check_number(self.validation_fraction,
                                                 "validation_fraction", low=0.0,
                                                 low_inclusive=False, high=1.0,
                                                 high_inclusive=False)
        p["n_iter_no_change"] = _check_number(self.n_iter_no_change, "n_iter_no_change", low=1,
                                              integer=True)
        p["projection_max_iter"] = _check_number(self.projection_max_iter,
                                                 "projection_max_iter", low=1, integer=True)
        p["verbose"] = check_verbose(self.verbose)
        if not isinstance(self.algorithm, str) or self.algorithm not in _ALGORITHMS:
            raise ValueError(f"algorithm must be one of {_ALGORITHMS}, got {self.algorithm!r}.")
        if self.algorithm == "ep2" and self.n_centers is not None:
            raise ValueError("algorithm='ep2' trains the model whose centers are the training "
                             "points: pass n_centers=None, or algorithm='ep3'/'ep4' for "
                             f"n_centers={self.n_centers!r}.")
        p["projection_period"] = _check_choice_or_number(
            self.projection_period, "projection_period", low=1, integer=True)
        p["cache_size"] = _check_choice_or_number(self.cache_size, "cache_size", low=0.0,
                                                  integer=False)
        check_client(self.client)
        if not (isinstance(self.early_stopping, (bool, np.bool_)) or
                (isinstance(self.early_stopping, str) and self.early_stopping == "auto")):
            raise ValueError(f"early_stopping must be 'auto' or a bool, got "
                             f"{self.early_stopping!r}.")
        # "auto": the held-out rule whenever there is a rule at all (tol given)
        p["early_stopping"] = bool(self.tol is not None if self.early_stopping == "auto"
                                   else self.early_stopping)
        nc = self.n_centers
        if isinstance(nc, (str, bool, np.bool_)):
            raise ValueError(f"n_centers must be None, an int, a float in (0, 1] or an array "
                             f"of centers, got {nc!r}.")
        if isinstance(nc, Integral) and nc < 1:
            raise ValueError(f"n_centers must be >= 1, got {nc!r}.")
        if isinstance(nc, Real) and not isinstance(nc, Integral) and \
                not (math.isfinite(nc) and 0.0 < nc <= 1.0):
            raise ValueError(f"n_centers as a float is a fraction of the training samples "
                             f"and must be in (0, 1], got {nc!r}.")
        p["dtype"] = self._compute_dtype()
        p["kernel"] = self._get_kernel()
        return p

    def _centers(self, X_train, rng, held_out=False):
        """(centers, drawn_from_data) for ``n_centers``; None centers means EigenPro 2.

        At the inputs' own precision (float32 storage never rounds the data: the kernel
        is evaluated in float64 from them and only its values are rounded).
        """
        n = X_train.shape[0]
        nc = self.n_centers
        if nc is None:
            return None, True
        if isinstance(nc, (Integral, Real)) and not isinstance(nc, bool) and np.ndim(nc) == 0:
            if isinstance(nc, Integral):
                p = int(nc)
                if p < 1:
                    raise ValueError(f"n_centers must be >= 1, got {nc!r}.")
                if p > n:
                    raise ValueError(
                        f"n_centers={p} exceeds the number of training samples ({n}"
                        + (" after holding out validation_fraction" if held_out
                           else "") + "); use at most that many, a fraction in (0, 1], or "
                        "n_centers=None for EigenPro 2 (centers = training data).")
            else:
                if not (math.isfinite(nc) and 0.0 < nc <= 1.0):
                    raise ValueError(f"n_centers as a float is a fraction of the training "
                                     f"samples and must be in (0, 1], got {nc!r}.")
                p = max(1, int(round(nc * n)))
            idx = np.arange(n) if p == n else np.sort(rng.choice(n, p, replace=False))
            return np.array(X_train[idx], order="C", copy=True), True
        if isinstance(nc, str):
            raise ValueError(f"n_centers must be None, an int, a float in (0, 1] or an array of "
                             f"centers, got {nc!r}.")
        Z = check_array(nc, dtype=[np.float64, np.float32], input_name="n_centers")
        if Z.shape[1] != X_train.shape[1]:
            raise ValueError(f"n_centers has {Z.shape[1]} features but X has "
                             f"{X_train.shape[1]}; centers must live in the input space.")
        return np.array(Z, order="C", copy=True), False

    # -------------------------------------------------------------- client
    def _operator(self, evaluator, Z_dev, dtype):
        """(operator, closer): local, or on the Dask cluster named by ``client``."""
        if self.client is None:
            return _ep.LocalOperator(evaluator, Z_dev, dtype), None
        from ..distributed._operator import DaskKernelOperator, _resolve_client

        client, owned = _resolve_client(self.client)
        try:
            op = DaskKernelOperator(client, evaluator, evaluator.engine.to_host(Z_dev), dtype)
        except BaseException:
            if owned:
                client.close()
            raise
        return op, (client if owned else None)

    # ------------------------------------------------------------------ fit
    def _fit(self, X, Y, stratify, params, backend, sample_weight=None, hold_out=False):
        """Train on validated ``X`` (n, d) and 2-D targets ``Y`` (n, k).

        ``params`` and ``backend`` were checked before the data; fitted attributes are
        assigned at the end only (``fit`` is :func:`~kernelkit.utils._state.atomic`).
        ``sample_weight`` (n,) weights the squared loss; ``hold_out`` keeps
        ``validation_fraction`` of the rows out of training even without the held-out
        stopping rule (for the classifier's calibration). Returns the held-out rows'
        indices and predictions ``(va, pred)`` in the targets' units, or None.
        """
        dtype, kernel = params["dtype"], params["kernel"]
        rng = check_random_state(self.random_state)
        # independent streams: setup (split, centers, Nyström points), outer batches and
        # the inner projection's batches, so that EigenPro 2 and EigenPro 3 on all the
        # training points draw the same subsample and the same batches
        seeds = rng.randint(np.iinfo(np.int32).max, size=3)
        rng, batch_rng, inner_rng = (np.random.RandomState(sd) for sd in seeds)
        n_all = X.shape[0]
        progress = Progress(self, params["verbose"])
        # the first line before any O(n d) copy (the split's copies of a large X alone
        # take seconds on a machine slow to touch fresh memory)
        progress(f"n={n_all}, d={X.shape[1]}, {Y.shape[1]} target(s): the validation split "
                 "(where one is held out), the centers, then the preconditioner", level=1,
                 validation_fraction=params["validation_fraction"])
        # Scale-free targets: the iteration runs on each column over its RMS, so y and
        # c y give the same iterates whatever the dtype's range
        Y, y_scale = _normalise_targets(Y)

        es = params["early_stopping"]
        auto_es = self.early_stopping == "auto"  # too little data: the change rule instead
        n_val = int(math.ceil(params["validation_fraction"] * n_all))
        can_split = n_val >= 1 and n_all - n_val >= 2
        if es and not can_split:
            if not auto_es:
                raise ValueError(f"validation_fraction={self.validation_fraction} leaves "
                                 f"{n_val} validation and {n_all - n_val} training "
                                 f"samples out of {n_all}; need at least 1 and 2.")
            es = False
        hold = (es or hold_out) and can_split
        if hold:
            try:
                tr, va = train_test_split(np.arange(n_all), test_size=n_val, random_state=rng,
                                          stratify=stratify)
            except ValueError as exc:  # stratification impossible (rare classes)
                if es and not auto_es:
                    raise ValueError(f"cannot hold out validation_fraction="
                                     f"{self.validation_fraction} of the data stratified by "
                                     f"class: {exc}") from exc
                # classes too rare to stratify: a plain split is good enough to stop on
                tr, va = train_test_split(np.arange(n_all), test_size=n_val, random_state=rng)
            tr, va = np.sort(tr), np.sort(va)
            X_train, Y_train, X_val, Y_val = X[tr], Y[tr], X[va], Y[va]
        else:
            tr = va = None
            X_train, Y_train, X_val, Y_val = X, Y, None, None
        n = X_train.shape[0]
        alpha, w_train, w_val = params["alpha"], None, None
        if sample_weight is not None:
            w_train = sample_weight if tr is None else sample_weight[tr]
            w_val = None if va is None else sample_weight[va]
            w_max = float(np.max(w_train))
            if not w_max > 0:
                raise ValueError("sample_weight is zero on every training row (after holding "
                                 "out validation_fraction); give some row a positive weight.")
            # weights at most 1 keep the unweighted step stable; alpha / w_max with w / w_max
            # has the same fixed point as alpha with w: (K + alpha W^-1) c = y
            w_train, alpha = w_train / w_max, alpha / w_max

        Z, from_data = self._centers(X_train, rng, es)
        on_train = Z is None
        if on_train:
            Z = np.array(X_train, order="C", copy=True)
        algorithm = self.algorithm
        if algorithm == "auto":
            algorithm = "ep2" if on_train else "ep4"
        epro2 = algorithm == "ep2"
        user_centers = not from_data
        p = Z.shape[0]

        s = params["subsample_size"]
        if s is None:
            # the O(s^3) Nyström eigensolve must stay small next to one pass over the
            # data: all points up to 2,000, then s = n / 10 within [500, 2000] (the
            # EigenPro 2 code's 2000 made the setup alone slower than a direct solve at
            # n = 6,000), 4000 from 100,000 on
            s = min(p, n if n <= 2000 else 4000 if n >= 100_000
                    else max(_ep.MIN_NYSTROM, min(2000, n // 10)))
        elif s > p:
            raise ValueError(f"subsample_size={s} exceeds the number of centers ({p}); the "
                             "Nyström points are drawn from the centers.")
        q_req = params["n_components"]
        if q_req is not None and q_req >= s:
            raise ValueError(f"n_components={q_req} must be < subsample_size={s}.")
        q_max = min(s - 1, max(1, s // 3), 1000) if q_req is None else q_req
        J = np.sort(rng.choice(p, s, replace=False))
        progress(f"{algorithm}: n={n}, d={X.shape[1]}, {p} centers; setting up the "
                 f"preconditioner from s={s} rows (s x s kernel and its top eigenvectors, "
                 f"~{flops(4 * s ** 3)})", q=q_max if q_req is not None else f"auto <= {q_max}",
                 batch=params["batch_size"] or "auto", max_epochs=params["max_iter"])

        evaluator = KernelOperator(kernel, X.shape[1], backend)
        check_kernel_scale(evaluator, X, type(self).__name__)
        engine = evaluator.engine
        xp = np if self.client is not None else engine.xp
        budget = _ep.budget_bytes()

        on_host = self.client is not None  # the Dask operator works on host arrays

        def dev(a, dt=dtype):
            a = np.asarray(a, dtype=dt)
            return a if on_host else engine.asarray(a)

        Z_dev = dev(Z, Z.dtype)
        X_dev = Z_dev if epro2 else dev(X_train, X_train.dtype)
        Y_dev = dev(Y_train)

        # beta = max k(x, x) over the training data (measured: not 1 for e.g. the NTK)
        beta = float(np.max(evaluator.diag(X_dev)))
        ZJ64 = dev(Z[J], np.float64)
        K_JJ = np.asarray(engine.to_host(evaluator.block(ZJ64, ZJ64, np.float64)), np.float64)
        if not np.all(np.isfinite(K_JJ)):
            raise ValueError("the kernel produced non-finite values on the training data; "
                             "check the kernel parameters.")
        sigma_std = A_std = None
        # few centers (s < MIN_NYSTROM) are too small a data sample to estimate the data
        # operator's spectrum from (one center: one point): use the generalised problem on
        # a data sample of MIN_NYSTROM points, as for user-given centers
        if user_centers or (not on_train and s < _ep.MIN_NYSTROM):
            e_idx = rng.choice(n, min(n, max(s, _ep.MIN_NYSTROM)), replace=False)
            C = np.asarray(engine.to_host(evaluator.block(ZJ64, dev(X_train[e_idx], np.float64),
                                                          np.float64)), np.float64)
            sigma, A = _ep.nystrom_eigensystem(K_JJ, q_max + 2, C)
        else:
            sigma, A = _ep.nystrom_eigensystem(K_JJ, q_max + 2)
            sigma_std, A_std = sigma, A

        itemsize = dtype.itemsize

        def check_blocks(points, count):
            """Kernel blocks of a fresh sample of ``points`` to measure lambda_1(P) on."""
            v = points[np.sort(rng.choice(points.shape[0], min(count, points.shape[0]),
                                          replace=False))]
            v64 = dev(v, np.float64)
            return (np.asarray(engine.to_host(evaluator.block(v64, v64, np.float64))),
                    np.asarray(engine.to_host(evaluator.block(v64, ZJ64, np.float64))),
                    rng.uniform(-1.0, 1.0, v.shape[0]))  # Lanczos start: random_state's

        batch_limit = max(1, int(budget // ((p + s) * itemsize)))
        P = _ep.build_preconditioner(
            xp, dtype, sigma, A, J, "auto" if q_req is None else q_req, q_max,
            params["damping"], alpha / n, beta + alpha, params["batch_size"], batch_limit,
            params["eta"], n, "data", check=check_blocks(X_train, s))
        if params["batch_size"] is not None and params["batch_size"] > n:
            warnings.warn(f"batch_size={params['batch_size']} is larger than the number of "
                          f"training samples ({n}); using {n}.", UserWarning, stacklevel=3)

        inner = None
        if not epro2:
            if sigma_std is None:
                q_in = min(s - 1, max(1, s // 3), 1000)
                sigma_std, A_std = _ep.nystrom_eigensystem(K_JJ, q_in + 2)
            beta_z = float(np.max(evaluator.diag(Z_dev)))
            inner = _ep.build_preconditioner(
                xp, dtype, sigma_std, A_std, J, "auto", min(s - 1, max(1, s // 3), 1000),
                params["damping"], 0.0, beta_z, None, batch_limit, None, p, "centers",
                eta_scale=_ep.PROJECTION_ETA_SCALE, check=check_blocks(Z, s))

        progress.done("preconditioner", q=P.q, batch=P.batch_size, eta=P.eta)
        cache = params["cache_size"]
        cache = min(CACHE_MAX_MIB * 2**20, 0.5 * _available_bytes()) if cache is None \
            else cache * 2**20
        # the change rule follows the predictions on a fixed training sample (drawn last:
        # the setup's random stream is that of earlier versions)
        mon = np.sort(rng.choice(n, min(n, MONITOR_SIZE), replace=False))
        op, owned_client = self._operator(evaluator, Z_dev, dtype)
        period = None
        if algorithm == "ep4":
            period = params["projection_period"] or _ep.auto_period(p, P.batch_size, n,
                                                                     dtype.itemsize, cache)
        elif algorithm == "ep3":
            period = 1
        if n * p * dtype.itemsize <= cache:  # cache_rows will hold them
            progress(f"evaluating the {n} x {p} kernel rows to hold them ("
                     f"{n * p * dtype.itemsize / 2**20:.0f} MiB, ~{flops(2 * n * p * X.shape[1])})")
        try:
            solver = _ep.EigenProSolver(op, X_dev, Y_dev, P, algorithm, alpha, inner,
                                        params["projection_max_iter"], batch_rng, inner_rng,
                                        dtype, period=period or 1, cache_budget=cache,
                                        evaluator=evaluator, sample_weight=None if
                                        w_train is None else dev(w_train[:, None]))
            # the monitored points' kernel block is kept when it fits: the rule then
            # costs one matrix product per epoch
            Xv = dev(X_val, X_val.dtype) if es else dev(X_train[mon], X_train.dtype)
            Kv = _ep.cache_rows(op, Xv, cache)
            progress.done("setup", kernel_rows_held=solver.rows is not None,
                          epochs=f"up to {params['max_iter']} of {-(-n // P.batch_size)} "
                                 f"batches of {P.batch_size} x {p} kernel blocks")

            def forward(w):
                return engine.to_host(op.forward(Xv, w) if Kv is None else Kv @ w)

            stop = StoppingRule(params["tol"], params["n_iter_no_change"], forward,
                                (lambda pred: self._validation_score(Y_val, pred, y_scale,
                                                                     w_val))
                                if es else None)

            # the numba engine runs its blocks on its own threads, one BLAS thread each;
            # the step's small products then also take one BLAS thread (two OpenBLAS
            # threads gain nothing on them and stall whenever a core is busy)
            blas = single_blas_thread() if backend == "numba" else \
                blas_threads_for(max(p, P.batch_size))
            try:
                with blas:
                    with np.errstate(over="ignore"):  # a 1e300 target's loss is inf
                        loss_scale = y_scale ** 2
                    hist = solver.run(params["max_iter"], stop, self, params["verbose"],
                                      loss_scale=loss_scale)
            except _ep.Diverged as exc:
                raise ValueError(_divergence_message(exc, P)) from None
            weights = np.asarray(engine.to_host(solver.weights))
            held_out = None
            if hold:  # the held-out rows' predictions by the kept coefficients
                pred = forward(solver.weights) if es else \
                    engine.to_host(op.forward(dev(X_val, X_val.dtype), solver.weights))
                held_out = (va, _rescale(pred, y_scale))
            n_projections, cached = solver.n_projections, solver.rows is not None
            solver.close()
        finally:
            op.close()
            if owned_client is not None:
                owned_client.close()

        dual_coef = _rescale(weights, y_scale)
        # fitted attributes
        self.backend_ = backend
        self.centers_ = Z
        self.dual_coef_ = dual_coef
        self.algorithm_ = algorithm
        self.projection_period_ = period
        self.n_auxiliary_centers_ = period * P.batch_size if algorithm == "ep4" else None
        self.n_projections_ = n_projections if algorithm == "ep4" else None
        self.kernel_cached_ = cached
        self.n_components_ = P.q
        self.subsample_size_ = s
        self.batch_size_ = P.batch_size
        self.eta_ = P.eta
        self.beta_ = beta
        self.eigenvalues_ = np.asarray(P.sigma, dtype=np.float64)
        self.top_eigenvalue_ = P.top
        self.critical_batch_size_ = P.critical_batch
        if inner is not None:
            self.projection_n_components_ = inner.q
            self.projection_batch_size_ = inner.batch_size
            self.projection_eta_ = inner.eta
        else:
            self.projection_n_components_ = None
            self.projection_batch_size_ = None
            self.projection_eta_ = None
        self.loss_curve_ = hist["loss_curve"]
        self.validation_scores_ = stop.scores if es else None
        self.best_validation_score_ = stop.best_score if es else None
        self.prediction_changes_ = None if es else stop.changes
        self.n_iter_ = hist["n_iter"]
        if not hist["converged"]:
            what = ("validation score improved by more than tol" if es else
                    "predictions changed by more than tol (relative)")
            warnings.warn(f"EigenPro stopped after max_iter={self.max_iter} epochs while the "
                          f"{what}={self.tol} in the last {self.n_iter_no_change} epochs; "
                          "increase max_iter or tol.", ConvergenceWarning, stacklevel=3)
        return held_out

    def _decision(self, X):
        """``k(X, centers_) @ dual_coef_`` in float64, shape (n, k) or (n,)."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32])
        evaluator = KernelOperator(self._get_kernel(), X.shape[1], self.backend_)
        engine = evaluator.engine
        W = self.dual_coef_ if self.dual_coef_.ndim == 2 else self.dual_coef_[:, None]
        # the inputs as given: the float64 product never rounds them
        Z, Xd, dtype = self.centers_, X, W.dtype
        if self.client is None:
            Z, Xd, W = engine.asarray(Z), engine.asarray(Xd), engine.asarray(W)
        op, owned = self._operator(evaluator, Z, dtype)
        try:
            out = np.asarray(engine.to_host(op.forward(Xd, W)), dtype=np.float64)
        finally:
            op.close()
            if owned is not None:
                owned.close()
        return out if self.dual_coef_.ndim == 2 else out[:, 0]


class EigenProRegressor(MultiOutputMixin, RegressorMixin, _BaseEigenPro):
    """Kernel regression by EigenPro 2 / 3 / 4 preconditioned SGD.

    Fits ``f(x) = sum_j dual_coef_[j] k(x, centers_[j])`` to the squared loss with
    the EigenPro iteration, in memory linear in the number of samples: the training
    data can be far larger than what a kernel matrix allows. Multi-output targets
    are fitted jointly (one set of coefficients per output).

    Parameters
    ----------
    {params}

    Attributes
    ----------
    {attrs}

    Raises
    ------
    ValueError
        In ``fit``: NaN/inf in ``X`` or ``y``, fewer than 2 samples, an invalid
        parameter (named), ``n_centers`` larger than the number of training samples,
        ``n_components >= subsample_size``, ``subsample_size`` larger than the number
        of centers, ``batch_size <= 0``, an unknown kernel or backend, or divergence.

    See Also
    --------
    EigenProClassifier : The classifier (one-vs-all on one-hot targets).
    kernelkit.KernelRidge : The exact dense solution, for data where ``K`` fits.

    Notes
    -----
    {notes}

    Examples
    --------
    >>> import numpy as np
    >>> from kernelkit import KernelRidge
    >>> from kernelkit.eigenpro import EigenProRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, (500, 2)); y = np.sin(3 * X[:, 0]) * X[:, 1]
    >>> ep = EigenProRegressor(gamma=2.0, alpha=0.1, dtype="float64", max_iter=30,
    ...                        tol=None, random_state=0).fit(X, y)
    >>> exact = KernelRidge(alpha=0.1, kernel="rbf", gamma=2.0).fit(X, y)
    >>> bool(np.abs(ep.predict(X) - exact.predict(X)).max() < 1e-3)
    True
    """

    @atomic
    def fit(self, X, y, sample_weight=None):
        """Fit the model by EigenPro iterations.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the squared loss (and of the held-out score): the
            fit converges to the weighted solution, for EigenPro 2 that of
            :class:`sklearn.kernel_ridge.KernelRidge` with the same weights, ``(K +
            alpha W^-1) c = y``. Rows of small weight converge more slowly (the step
            size is that of the unweighted problem over the largest weight).

        Returns
        -------
        self : object
            The fitted estimator.
        """
        params, backend = self._check_params(), resolve_backend(self.backend, X)
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=True,
                             dtype=[np.float64, np.float32], ensure_min_samples=2)
        w = None if sample_weight is None else row_weights(None, y, sample_weight, (), X)
        Y = np.asarray(y, dtype=np.float64)
        Y2 = Y[:, None] if Y.ndim == 1 else Y
        self._fit(X, Y2, None, params, backend, w)
        if Y.ndim == 1:
            self.dual_coef_ = self.dual_coef_[:, 0]
        return self

    def _validation_score(self, Y_val, pred, scale, weights):
        # scale-free: computed on the normalised targets (no overflow for 1e300)
        return regression_score(Y_val, pred, weights)

    def predict(self, X):
        """Predict ``k(X, centers_) @ dual_coef_``, blockwise within ``working_memory``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_outputs), float64
            Predictions.
        """
        return self._decision(X)




def fill_doc(doc, extra_params="", extra_attrs=""):
    """The shared numpydoc sections in an estimator's docstring."""
    names = "rbf, laplacian, matern, polynomial, linear, cosine, ntk, nngp"
    return (doc.replace("{params}", (_PARAMS_DOC.format(names=names) + extra_params).strip())
            .replace("{attrs}", (_ATTRS_DOC + extra_attrs).strip())
            .replace("{notes}", _NOTES_DOC.format().strip()))
EigenProRegressor.__doc__ = fill_doc(EigenProRegressor.__doc__)
