"""Kernel ridge regression and classification on kernelkit kernels and engines.

:class:`NTKRidge` is kernel ridge regression with the infinite-width neural
tangent kernel: with ``alpha -> 0`` it is the mean prediction, over random
initialisations, of an infinitely wide fully-connected network trained to
convergence by gradient flow on the squared loss (the trained network itself when
its output at initialisation is zero) (Jacot et al. 2018; Lee et al. 2019;
Arora et al. 2019).
"""

import functools
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, MultiOutputMixin, RegressorMixin
from sklearn.preprocessing import LabelBinarizer
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from ..backend import resolve_backend
from ..kernels import NTK, Kernel, check_kernel_scale, is_precomputed, make_kernel
from ..kernels._library import RBF, Laplacian, Matern
from ..kernels._resolve import KernelOperator
from ..utils._array_api import ArrayAPIMixin
from ..utils._class_weight import check_class_weight, row_weights
from ..utils._classes import CALIBRATION_ATTR_DOC, OneVsAllClassifierMixin
from ..utils._state import atomic
from ..utils._validation import check_bool, check_kernel_matrix
from ..utils._verbose import check_verbose
from . import _auto
from ._gp import ridge_predict_moments
from ._intercept import FIT_INTERCEPT_DOC, joint_rhs, split_joint
from ._kernel_product import KernelProduct
from ._primal import announce as announce_primal, primal_applies, primal_fit
from ._pcg import DEFAULT_MAX_ITER, pcg_ridge, product_dtype
from ._ridge_proba import CLASSES_DOC, cholesky_fit, loo_by_cholesky, pcg_oos

_SPARSE = ("csr", "csc")  # sparse X is evaluated by scikit-learn's kernels (kernel_metrics())
SOLVERS = ("auto", "cholesky", "pcg")
_PD_KERNELS = (RBF, Laplacian, Matern)  # positive definite: solve_ridge(psd=True)


def _check_alpha(alpha, n_targets=None):
    """``alpha`` as a float or a float64 array; ``n_targets`` None checks its values only
    (before the data are read)."""
    a = np.atleast_1d(np.asarray(alpha))
    if a.dtype.kind not in "iuf" or a.ndim != 1 or not np.all(np.isfinite(a)) or np.any(a < 0):
        raise ValueError(f"alpha must be a non-negative finite number or an array of them, "
                         f"got {alpha!r}.")
    if n_targets is not None and a.size not in (1, n_targets):
        raise ValueError(f"alpha has {a.size} values but y has {n_targets} targets; give one "
                         "alpha or one per target.")
    a = a.astype(np.float64)
    return a if a.size > 1 else float(a[0])


class _KernelRidgeBase(ArrayAPIMixin, BaseEstimator):
    """Shared solver: dual coefficients of ``(K + alpha I) c = y``; subclasses name the kernel."""

    def _get_kernel(self, sparse=False):
        return make_kernel(self.kernel, self.gamma, self.degree, self.coef0, self.kernel_params,
                           sparse=sparse)

    def _precomputed(self):
        return is_precomputed(getattr(self, "kernel", None))

    def _owns_kernel_matrix(self):
        """Whether ``_kernel_matrix`` returns a new array (not the input, nor whatever a
        user's callable returns)."""
        k = getattr(self, "kernel", None)
        return not self._precomputed() and not (callable(k) and not isinstance(k, Kernel))

    def _sparse_ok(self):
        """Sparse X is taken where scikit-learn can evaluate the kernel on it."""
        from sklearn.metrics.pairwise import kernel_metrics

        k = getattr(self, "kernel", None)
        if isinstance(k, str):
            return k in kernel_metrics() or is_precomputed(k)
        return callable(k) and not isinstance(k, Kernel)

    def _operator(self, sparse=False):
        """The fitted kernel on the fitted engine (the one resolver); scikit-learn's
        evaluation of it once the model was fitted on sparse ``X`` (whatever the inputs)."""
        sparse = sparse or sp.issparse(getattr(self, "X_fit_", None))
        return KernelOperator(self._get_kernel(sparse), self.n_features_in_, self.backend_)

    def _kernel_matrix(self, X, Y):
        """Host float64 ``k(X, Y)`` (``Y`` None: ``k(X, X)``)."""
        if self._precomputed():
            return X
        return self._operator(sp.issparse(X)).block_host(X, Y)

    def _check_params(self):
        """Validate what needs no data, before ``X`` and ``y`` are read (as scikit-learn
        does): a bad parameter is reported as such whatever the data."""
        _check_alpha(self.alpha)
        self._intercept_on()
        self._check_solver(None, None)
        resolve_backend(self.backend)
        if not self._precomputed():
            self._get_kernel()

    def _intercept_on(self):
        return check_bool(getattr(self, "fit_intercept", False), "fit_intercept")

    def _fit_targets(self, X, Y, sample_weight, oos=False):
        """Fit the dual coefficients; with ``oos``, return out-of-sample decision values
        ``(rows, values)`` for the calibration (see :mod:`kernelkit.ridge._ridge_proba`),
        else ``self``."""
        if self._precomputed():
            X = X.toarray() if sp.issparse(X) else X
            check_kernel_matrix(X, "X")  # the one rule: square, finite, symmetric PSD
        self.backend_ = resolve_backend(self.backend, X)
        n_targets = 1 if Y.ndim == 1 else Y.shape[1]
        alpha = _check_alpha(self.alpha, n_targets)
        # the linear kernel with n >= 2 d: the d x d problem (_primal), before the dual's rules
        primal = self.solver == "auto" and primal_applies(self, X, alpha, self._cache_mib())
        solver, tol, max_iter, verbose = self._check_solver(None if primal else X.shape[0],
                                                            alpha)
        if oos and solver == "auto" and loo_by_cholesky(X.shape[0], self._cache_mib()):
            solver = "cholesky"  # one factorization: the fit and its leave-one-out values
        psd = not self._precomputed() and isinstance(self._get_kernel(), _PD_KERNELS)
        if primal:
            solver, progress = "primal", announce_primal(self, verbose, X.shape, n_targets)
        else:
            progress = _auto.announce(self, verbose, solver, X.shape, n_targets, alpha,
                                      max_iter)
        if psd:  # a length scale that fits the features' (kernels/_scale.py)
            check_kernel_scale(self._get_kernel(), X, type(self).__name__)
        sw, Y0 = None, Y
        if sample_weight is not None:
            sw = np.sqrt(_check_sample_weight(sample_weight, X, dtype=np.float64,
                                                 ensure_non_negative=True))
            Y = Y * (sw if Y.ndim == 1 else sw[:, None])
        # intercept: one more right-hand side u = W^1/2 1 of the same system (_intercept)
        u = (np.ones(X.shape[0]) if sw is None else sw) if self._intercept_on() else None
        rhs, rhs_alpha = joint_rhs(Y, u, alpha)
        out = b = coef = None
        if solver not in ("cholesky", "primal"):
            if self._precomputed():
                product = KernelProduct(None, None, K=X, sw=sw)
            else:  # held K computed after the preconditioner is drawn (see pcg_ridge)
                product = KernelProduct(self._operator(sp.issparse(X)), X, sw=sw, defer=True,
                                        dtype=product_dtype(tol), cache_size=self._cache_mib())
                product.check_recomputed(type(self).__name__, refuse=solver == "auto")
            rng = check_random_state(self.random_state)
            solve = functools.partial(pcg_ridge, alpha=alpha, tol=tol, max_iter=max_iter,
                                      random_state=rng, progress=progress)
            sketch = monitor = None
            if solver == "auto":
                solver, sketch, monitor = _auto.choose(
                    product, alpha, tol, rhs.reshape(len(rhs), -1).shape[1], rng, progress,
                    fits=self._precomputed() or _auto.cholesky_fits(X.shape[0],
                                                                   self._cache_mib()))
        if solver == "pcg":
            try:
                Z, self.n_iter_, self.preconditioner_rank_ = solve(
                    product, rhs, alpha=rhs_alpha, owner=type(self).__name__, sketch=sketch,
                    monitor=monitor)
            except _auto.SwitchToCholesky as stop:
                progress("solver auto: switching to cholesky after CG iteration",
                         stop.args[0], level=1)
                product.K = None  # free the float32 matrix before the float64 one
                solver = "cholesky"
            else:
                dual, b = split_joint(Z, Y, u)
                if oos:
                    out = pcg_oos(self, X, Y, Y0, sw, product, solve, rng,
                                  (rhs, rhs_alpha, u), psd)
        if solver == "primal":
            dual, b, out, coef = primal_fit(self, X, Y, Y0, sw, rhs, rhs_alpha, u, oos)
            progress.done("X^T W X and its factorization")
        if solver == "cholesky":
            dual, b, out = cholesky_fit(self, X, Y, Y0, sw, rhs, rhs_alpha, u, oos, psd)
            progress.done("kernel matrix and Cholesky solve")
        if solver in ("cholesky", "primal"):
            self.n_iter_ = 1  # a direct solve is one step (sklearn: n_iter_ >= 1 with max_iter)
            self.preconditioner_rank_ = None
        if sw is not None:
            dual = dual * (sw if dual.ndim == 1 else sw[:, None])
        self.solver_ = solver
        self.dual_coef_ = dual
        if hasattr(self, "fit_intercept"):  # 0.0 without one (as scikit-learn's Ridge)
            self.intercept_ = 0.0 if b is None else float(b[0]) if Y.ndim == 1 else b
        self._sqrt_sample_weight = None if sample_weight is None else sw  # GP noise alpha / w
        self._primal_coef = coef  # primal path: predictions x^T w + b, O(d) per row
        self.X_fit_ = X
        return out if oos else self

    def _cache_mib(self):
        c = self.cache_size
        if isinstance(c, bool) or not isinstance(c, Real) or not np.isfinite(c) or c < 0:
            raise ValueError(f"cache_size must be a number of MiB >= 0, got {c!r}.")
        return float(c)

    def _kernel_name(self):
        k = getattr(self, "kernel", "ntk")
        return type(k).__name__.lower() if not isinstance(k, str) and hasattr(k, "spec") else k

    def _check_solver(self, n, alpha):
        """Validated ``(solver, tol, max_iter, verbose)``; ``"auto"`` resolved where no
        cost model is needed (kept when ``n`` is None, and for the model in ``fit``)."""
        solver = self.solver
        if not isinstance(solver, str) or solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}.")
        tol = self.tol
        if isinstance(tol, bool) or not isinstance(tol, Real) or not np.isfinite(tol) or tol <= 0:
            raise ValueError(f"tol must be a finite number > 0 (the relative residual of the pcg "
                             f"solver), got {tol!r}.")
        max_iter = DEFAULT_MAX_ITER if self.max_iter is None else self.max_iter
        if isinstance(max_iter, bool) or not isinstance(max_iter, Integral) or max_iter < 1:
            raise ValueError(f"max_iter must be an integer >= 1 or None, got {self.max_iter!r}.")
        verbose = check_verbose(self.verbose)
        self._cache_mib()
        if n is None:  # parameters only (see _check_params)
            return solver, float(tol), int(max_iter), verbose
        min_alpha = float(np.min(alpha))
        if solver == "auto":  # dot-product kernels have rank <= their feature map's: the
            # Nyström preconditioner of a low-rank K converges badly, Cholesky is cheap there
            low_rank = isinstance(self._kernel_name(), str) and self._kernel_name() in (
                "linear", "poly", "polynomial", "cosine")
            if n < _auto.AUTO_MIN_SAMPLES or min_alpha <= 0 or low_rank:
                solver = "cholesky"  # else the cost model decides in _fit_targets
        elif solver == "pcg" and min_alpha <= 0:
            raise ValueError("solver='pcg' needs alpha > 0 (the Nyström preconditioner shifts "
                             "by alpha); use solver='cholesky' for alpha=0.")
        return solver, float(tol), int(max_iter), verbose

    def _decision(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64,
                          accept_sparse=_SPARSE if self._sparse_ok() else False)
        b = getattr(self, "intercept_", 0.0)
        if getattr(self, "_primal_coef", None) is not None:
            return np.asarray(X @ self._primal_coef) + b
        if self._precomputed():
            return X @ self.dual_coef_ + b
        sparse = sp.issparse(X) or sp.issparse(self.X_fit_)
        op = self._operator(sparse)
        if sparse:
            return op.matmul(X, self.X_fit_, self.dual_coef_) + b
        return np.asarray(op.engine.to_host(op.matmul(X, self.X_fit_, self.dual_coef_))) + b

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self._precomputed()
        tags.input_tags.sparse = self._sparse_ok()
        return tags


_KERNEL_PARAMS_DOC = """
    kernel : str, Kernel or callable, default="linear"
        A name ({names}), a :class:`kernelkit.kernels.Kernel`, ``"precomputed"``
        (``X`` is then the kernel matrix), or a callable ``f(X, Y) -> (n_X, n_Y)``
        evaluated on the host (the default, ``"linear"``, is scikit-learn's). A Kernel
        object's parameters are tunable as ``kernel__<name>`` in a grid search. The
        other names of :func:`sklearn.metrics.pairwise.kernel_metrics` (``chi2``,
        ``additive_chi2``, ``sigmoid``) are evaluated by scikit-learn, as is every
        such name on sparse ``X``. A callable may follow either convention, told apart
        on its first call: ``f(X, Y, **kernel_params)`` returning the matrix, or
        scikit-learn's ``f(x, y, **kernel_params)`` of two rows returning a number.
    gamma : float, default=None
        Kernel scale for rbf, laplacian, matern and polynomial; None means ``1 / n_features``.
    degree : float, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1
        Constant term of the polynomial kernel.
    kernel_params : dict, default=None
        Further parameters of the named kernel (e.g. ``{{"nu": 2.5}}`` for matern,
        ``{{"depth": 3}}`` for ntk) or of the callable."""

_NTK_PARAMS_DOC = """
    depth : int >= 1, default=1
        Number of hidden layers of the infinitely wide network.
    activation : {"relu", "erf"}, default="relu"
    w_std : float > 0, default=1.0
        Weight standard deviation (NTK parameterization).
    b_std : float >= 0 or None, default=None
        Bias standard deviation; None means no bias."""

_COMMON_DOC = """
    solver : {"auto", "cholesky", "pcg"}, default="auto"
        ``"cholesky"``: dense float64 Cholesky of ``K + alpha I`` (``O(n^3)`` time,
        ``2 n^2`` floats). ``"pcg"``: conjugate gradients preconditioned by a randomized
        Nyström approximation of ``K`` (Frangella, Tropp & Udell, SIAM J. Matrix Anal.
        Appl. 2023) drawn by randomly pivoted Cholesky (Díaz, Epperly, Frangella, Tropp
        & Webber, 2023), ``O(n^2 k)`` per iteration with ``K`` held (``O(n^2 (d + k))``
        recomputed), the iteration count bounded in ``n``; needs ``alpha > 0``.
        ``"auto"``: whichever a cost model predicts is faster (see the user guide
        "Which kernel ridge solver when"): Cholesky's ``n^3 / 3`` flops at this
        machine's measured ``dgemm`` rate against PCG's iterations times the cost of
        one product with ``K``, the iteration count estimated from the spectrum
        that PCG's preconditioner leaves (drawn first, and kept when PCG is chosen).
        Cholesky below {auto_n} samples, for ``alpha = 0`` and for the low-rank
        dot-product kernels (polynomial, cosine, linear with ``n < 2 d``). For the
        linear kernel (``"linear"`` or ``Linear()``) with ``alpha > 0``, ``n >= 2 d``
        and the ``d x d`` float64 matrix within ``cache_size``, the primal solver
        (``solver_ = "primal"``): the weights ``w`` of ``f(x) = x^T w + b`` from
        ``(X^T W X + alpha I) w = X^T W (y - b)`` (``O(n d^2 + d^3)`` time, ``d^2``
        floats beyond ``X``), the same model and the same ``dual_coef_``
        (``W (y - X w - b) / alpha``), predictions in ``O(d)`` per row. PCG when the
        float64 ``K`` does not fit ``cache_size`` (a ValueError when not even the
        one PCG holds does: float32 from ``tol = 1e-6`` up, float64 below; see
        ``cache_size``). While PCG runs, its observed convergence is
        checked against the cost of starting over with Cholesky, which it switches
        to when that is cheaper (``solver_`` then says ``"cholesky"`` and the
        result is exactly that solver's).
    tol : float > 0, default=1e-4
        pcg: stop when every target's relative residual ``||y - (K + alpha I) c|| / ||y||``
        is at most ``tol`` (scikit-learn's ``Ridge`` default). From ``1e-6`` up, the
        kernel matrix is held and multiplied in float32 (CG vectors in float64), and the
        residual is certified against the exact ``K``: an estimate of the float32
        rounding is added to it, and where that could exceed ``tol`` (or float32 CG
        stalls) float64 products finish the solve; below ``1e-6``, float64 throughout.
    max_iter : int >= 1 or None, default=None
        pcg: iteration limit (None: 500); reaching it raises a ``ConvergenceWarning``,
        as does a breakdown before it (rounding in an ill-conditioned system; the
        warning says which). With ``sample_weight`` the residual is that of
        ``(K + alpha W^-1) c = y`` (rows of zero weight, whose coefficients are 0,
        left out), whatever the weights' range.
    cache_size : float >= 0, default=4096
        pcg: MiB for holding the kernel matrix (float32 or float64, as ``tol``
        says); when ``n^2`` entries do not fit, every product recomputes it blockwise in
        ``working_memory`` (much slower, ``O(n)`` memory: an explicit ``"pcg"`` warns
        with an ``EfficiencyWarning``, while ``"auto"`` refuses with a ValueError naming
        FALKON, the solver for that size, and the ``cache_size`` that would hold it).
    random_state : int, RandomState instance or None, default=None
        pcg: seeds the pivots of the randomly pivoted Cholesky preconditioner (and
        a classifier's held-out calibration split; None: a fixed seed for the split).
    verbose : int, default=0
        pcg: 1 prints a summary line (and ``"auto"``'s predicted costs), 2 every
        iteration and preconditioner rank.
    backend : {"auto", "numpy", "numba", "cupy"} or None, default=None
        Compute engine for the kernel; None follows :func:`kernelkit.set_config`.
        Resolved in ``fit`` into ``backend_``.""".replace("{auto_n}", f"{_auto.AUTO_MIN_SAMPLES:,}")


class KernelRidge(MultiOutputMixin, RegressorMixin, _KernelRidgeBase):
    """Kernel ridge regression computed by kernelkit engines.

    Minimises ``||y - K c||^2_W + alpha c^T K c``: the dual coefficients solve
    ``(K + alpha I) c = y`` (``(S K S + alpha I) S^-1 c = S y``, ``S = W^1/2``, with
    sample weights; Cholesky in float64 on the unit-diagonal scaling of that matrix,
    so weights of any range are solved exactly; the minimum-norm least-squares
    solution, ``numpy.linalg.pinv``'s, with a warning when it is singular). Same model as :class:`sklearn.kernel_ridge.KernelRidge`;
    predictions are computed blockwise (``working_memory``), never forming the
    full test kernel matrix.

    Parameters
    ----------
    alpha : float >= 0 or array of shape (n_targets,), default=1.0
        Ridge penalty; 0 gives the kernel interpolant.
    {kernel}
    {intercept}
    {common}

    Attributes
    ----------
    dual_coef_ : ndarray of shape (n_samples,) or (n_samples, n_targets)
    intercept_ : float or ndarray of shape (n_targets,)
        The unpenalised intercept (0.0 without ``fit_intercept``).
    X_fit_ : ndarray of shape (n_samples, n_features)
        Training inputs (the kernel centers), float64.
    backend_ : str
        The engine used: ``"numpy"``, ``"numba"`` or ``"cupy"``. Inputs are NumPy
        arrays (``fit`` validates them on the host); ``backend="cupy"`` computes the
        kernel matrices on the GPU.
    solver_ : str
        The solver used: ``"cholesky"``, ``"pcg"`` or ``"primal"`` (linear kernel).
    n_iter_ : int
        pcg iterations (1 for the Cholesky solve).
    preconditioner_rank_ : int or None
        Rank of the pcg Nyström preconditioner (None for Cholesky).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Only when ``X`` has string column names.

    Raises
    ------
    ValueError
        In ``fit``: NaN/inf, fewer than 2 samples, negative ``alpha``, unknown kernel
        or backend, invalid kernel parameters, unknown ``solver``, ``tol <= 0``,
        ``max_iter < 1``, ``solver="pcg"`` with ``alpha=0``, a precomputed ``X`` that
        is not a square symmetric positive semidefinite matrix.
    TypeError
        Sparse ``X`` with a kernel scikit-learn cannot evaluate on it (kernelkit's own
        matern, ntk, nngp or a Kernel object).

    Examples
    --------
    >>> import numpy as np
    >>> from kernelkit import KernelRidge
    >>> X = np.linspace(0, 1, 20)[:, None]; y = np.sin(4 * X[:, 0])
    >>> KernelRidge(alpha=1e-3, kernel="rbf", gamma=10.0).fit(X, y).predict(X[:2]).shape
    (2,)
    """

    def __init__(self, alpha=1.0, *, kernel="linear", gamma=None, degree=3, coef0=1,
                 kernel_params=None, fit_intercept=False, solver="auto", tol=1e-4,
                 max_iter=None, cache_size=4096, random_state=None, verbose=0, backend=None):
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.cache_size = cache_size
        self.random_state = random_state
        self.verbose = verbose
        self.backend = backend

    @atomic
    def fit(self, X, y, sample_weight=None):
        """Fit the model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data (for ``KernelRidge(kernel="precomputed")``: the kernel matrix).
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self : object
        """
        self._check_params()
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=True, dtype=np.float64,
                             ensure_min_samples=2,
                             accept_sparse=_SPARSE if self._sparse_ok() else False)
        # validate_data keeps a float16 / float32 / byte-swapped y as given
        return self._fit_targets(X, np.asarray(y, dtype=np.float64), sample_weight)

    def predict(self, X, return_std=False, return_cov=False):
        """Predict ``k(X, X_fit_) @ dual_coef_``, optionally with GP uncertainty.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the Gaussian-process posterior standard deviation (prior
            covariance the kernel, noise variance ``alpha``), as
            ``GaussianProcessRegressor.predict``; computed in row blocks.
        return_cov : bool, default=False
            Also return the posterior covariance of the rows.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets), float64
        y_std : ndarray, same shape as ``y_pred``
            Only with ``return_std``.
        y_cov : ndarray of shape (n_samples, n_samples[, n_targets])
            Only with ``return_cov``.

        Raises
        ------
        ValueError
            Both ``return_std`` and ``return_cov``; ``kernel="precomputed"`` with
            either; a covariance larger than ``working_memory``.
        """
        return ridge_predict_moments(self, X, return_std, return_cov)


class _ClassifierMixin(OneVsAllClassifierMixin):
    """One-vs-all ridge classification on {-1, +1} targets (as ``RidgeClassifier``),
    ``class_weight`` and ``predict_proba`` calibrated on out-of-sample decision values
    (the estimator's ``_fit_targets(X, Y, weights, oos=True)`` gives them)."""

    @atomic
    def fit(self, X, y, sample_weight=None):
        """Fit one-vs-all ridge regressions on {-1, +1} encoded classes.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Class labels of any type.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative row weights of the squared loss, multiplied by
            ``class_weight`` (as scikit-learn's classifiers combine them); they also
            weight the calibration's log-loss.

        Returns
        -------
        self : object
        """
        self._check_params()
        check_class_weight(self.class_weight)
        calibrate = self._check_calibration()
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_min_samples=2,
                             accept_sparse=_SPARSE if self._sparse_ok() else False)
        check_classification_targets(y)
        if np.unique(y).shape[0] < 2:  # as scikit-learn's classifiers
            raise ValueError("The number of classes has to be greater than one; got 1 class "
                             "in y.")
        binarizer = LabelBinarizer(pos_label=1, neg_label=-1)
        Y = binarizer.fit_transform(y).astype(np.float64)
        classes = binarizer.classes_
        w = row_weights(self.class_weight, y, sample_weight, classes, X)
        self._label_binarizer, self.classes_ = binarizer, classes
        self._y_idx = np.searchsorted(classes, y)  # for the calibration split
        oos = self._fit_targets(X, Y, w, oos=calibrate)
        y_idx = self._y_idx
        del self._y_idx
        if not calibrate:
            return self._fit_calibration(None, y_idx)
        if oos is None:  # no row could be held out: the fit's own values
            rows, dec = np.arange(len(y)), self._decision_in_sample(X)
        else:
            rows, dec = oos
        dec = dec[:, 0] - self._binary_offset if dec.shape[1] == 1 else dec
        return self._fit_calibration(dec, y_idx[rows], None if w is None else w[rows])

    def _decision_in_sample(self, X):
        return self._decision(X).reshape(X.shape[0], -1)


class KernelRidgeClassifier(_ClassifierMixin, _KernelRidgeBase):
    """Kernel ridge classifier: one-vs-all kernel ridge on {-1, +1} targets.

    The kernel analogue of :class:`sklearn.linear_model.RidgeClassifier`.

    Parameters
    ----------
    alpha : float >= 0, default=1.0
        Ridge penalty of each one-vs-all regression.
    {kernel}
    {intercept}
    {common}
    {classes}

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    dual_coef_ : ndarray of shape (n_samples, n_classes) (one column for two classes)
    intercept_ : ndarray of shape (n_columns,) or 0.0
        One per column of ``dual_coef_`` (0.0 without ``fit_intercept``).
    X_fit_ : ndarray of shape (n_samples, n_features)
    backend_ : str
    solver_ : str
        The solver used: ``"cholesky"``, ``"pcg"`` or ``"primal"`` (linear kernel).
    n_iter_ : int
        pcg iterations (1 for the Cholesky solve).
    preconditioner_rank_ : int or None
        Rank of the pcg Nyström preconditioner (None for Cholesky).
    {calattr}
    n_features_in_ : int
    """

    def __init__(self, alpha=1.0, *, kernel="linear", gamma=None, degree=3, coef0=1,
                 kernel_params=None, fit_intercept=False, solver="auto", tol=1e-4,
                 max_iter=None, cache_size=4096, random_state=None, verbose=0, backend=None,
                 class_weight=None, calibration="auto"):
        KernelRidge.__init__(self, alpha, kernel=kernel, gamma=gamma, degree=degree,
                             coef0=coef0, kernel_params=kernel_params,
                             fit_intercept=fit_intercept, solver=solver, tol=tol,
                             max_iter=max_iter, cache_size=cache_size,
                             random_state=random_state, verbose=verbose, backend=backend)
        self.class_weight = class_weight
        self.calibration = calibration


class NTKRidge(MultiOutputMixin, RegressorMixin, _KernelRidgeBase):
    """Kernel ridge regression with the infinite-width neural tangent kernel.

    Fits ``(Theta + alpha I) c = y`` with ``Theta`` the NTK of
    ``[Dense(w_std, b_std), activation] * depth + Dense(w_std, b_std)`` (see
    :class:`kernelkit.kernels.NTK`). With ``alpha = 0`` the prediction is the mean,
    over random initialisations, of the infinite-width network trained to
    convergence by gradient flow on the squared loss (Jacot et al., NeurIPS 2018;
    Lee et al., NeurIPS 2019; Arora et al., NeurIPS 2019).

    Parameters
    ----------
    alpha : float >= 0 or array of shape (n_targets,), default=1.0
        Ridge penalty.
    {ntk}
    {common}

    Attributes
    ----------
    dual_coef_ : ndarray of shape (n_samples,) or (n_samples, n_targets)
    X_fit_ : ndarray of shape (n_samples, n_features)
    backend_ : str
    solver_ : str
        The solver used: ``"cholesky"`` or ``"pcg"``.
    n_iter_ : int
        pcg iterations (1 for the Cholesky solve).
    preconditioner_rank_ : int or None
        Rank of the pcg Nyström preconditioner (None for Cholesky).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)

    Raises
    ------
    ValueError
        In ``fit``: NaN/inf, fewer than 2 samples, negative ``alpha``,
        ``depth < 1``, unknown ``activation`` or backend.

    Examples
    --------
    >>> from sklearn.compose import TransformedTargetRegressor
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from kernelkit import NTKRidge
    >>> X, y = load_diabetes(return_X_y=True)
    >>> model = TransformedTargetRegressor(make_pipeline(StandardScaler(), NTKRidge(alpha=1.0)),
    ...                                    transformer=StandardScaler())
    >>> model.fit(X[:300], y[:300]).score(X[300:], y[300:]) > 0.3
    True
    """

    kernel = "ntk"

    def __init__(self, alpha=1.0, *, depth=1, activation="relu", w_std=1.0, b_std=None,
                 solver="auto", tol=1e-4, max_iter=None, cache_size=4096, random_state=None,
                 verbose=0, backend=None):
        self.alpha = alpha
        self.depth = depth
        self.activation = activation
        self.w_std = w_std
        self.b_std = b_std
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.cache_size = cache_size
        self.random_state = random_state
        self.verbose = verbose
        self.backend = backend

    def _get_kernel(self, sparse=False):
        if sparse:
            raise TypeError("the NTK needs dense X; pass X.toarray().")
        return NTK(depth=self.depth, activation=self.activation, w_std=self.w_std,
                   b_std=self.b_std)

    fit = KernelRidge.fit
    predict = KernelRidge.predict


class NTKRidgeClassifier(_ClassifierMixin, _KernelRidgeBase):
    """NTK kernel ridge classifier: one-vs-all on {-1, +1} targets.

    As :class:`NTKRidge` on the {-1, +1} encoding of the classes (as
    :class:`sklearn.linear_model.RidgeClassifier` encodes them).

    Parameters
    ----------
    alpha : float >= 0, default=1.0
        Ridge penalty of each one-vs-all regression.
    {ntk}
    {common}
    {classes}

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    dual_coef_ : ndarray of shape (n_samples, n_classes) (one column for two classes)
    X_fit_ : ndarray of shape (n_samples, n_features)
    backend_ : str
    solver_ : str
        The solver used: ``"cholesky"`` or ``"pcg"``.
    n_iter_ : int
        pcg iterations (1 for the Cholesky solve).
    preconditioner_rank_ : int or None
        Rank of the pcg Nyström preconditioner (None for Cholesky).
    {calattr}
    n_features_in_ : int
    """

    kernel = "ntk"

    def __init__(self, alpha=1.0, *, depth=1, activation="relu", w_std=1.0, b_std=None,
                 solver="auto", tol=1e-4, max_iter=None, cache_size=4096, random_state=None,
                 verbose=0, backend=None, class_weight=None, calibration="auto"):
        NTKRidge.__init__(self, alpha, depth=depth, activation=activation, w_std=w_std,
                          b_std=b_std, solver=solver, tol=tol, max_iter=max_iter,
                          cache_size=cache_size, random_state=random_state, verbose=verbose,
                          backend=backend)
        self.class_weight = class_weight
        self.calibration = calibration
    _get_kernel = NTKRidge._get_kernel


_names = "rbf, laplacian, matern, polynomial, linear, cosine, ntk, nngp"
for _cls in (KernelRidge, KernelRidgeClassifier, NTKRidge, NTKRidgeClassifier):
    for _key, _text in (("{kernel}", _KERNEL_PARAMS_DOC.format(names=_names)),
                        ("{ntk}", _NTK_PARAMS_DOC), ("{common}", _COMMON_DOC),
                        ("{intercept}", FIT_INTERCEPT_DOC),
                        ("{classes}", CLASSES_DOC), ("{calattr}", CALIBRATION_ATTR_DOC)):
        _cls.__doc__ = _cls.__doc__.replace(_key, _text.strip())
del _cls, _names, _key, _text
