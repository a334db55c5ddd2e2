"""Kernel ridge with built-in model selection: leave-one-out, GCV or K-fold over ``alphas``
and the kernel's own parameters (a grid, or a bounded search over ``log(gamma)``), one
decomposition per kernel (and fold): exact (``n x n``) or Nyström (``m x m``)."""

from functools import partial

import numpy as np
import scipy.sparse as sp
from sklearn.base import (BaseEstimator, ClassifierMixin, MultiOutputMixin, RegressorMixin,
                          is_classifier)
from sklearn.compose import TransformedTargetRegressor
from sklearn.metrics import check_scoring
from sklearn.model_selection import check_cv
from sklearn.preprocessing import LabelBinarizer
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from ..backend import resolve_backend
from ..utils._array_api import ArrayAPIMixin
from ..utils._class_weight import check_class_weight, row_weights
from ..utils._classes import _calibration_on
from ..utils._state import atomic
from ..utils._validation import check_bool, check_kernel_matrix
from ..utils._verbose import check_verbose
from ._cv_grid import KernelGrid, _allowed_names, check_param_grid, ridge_params
from ._cv_scoring import (GivenClassifier, GivenRegressor, check_alphas, check_cv_param,
                          scaled_alphas, squared_units, weight_params)
from ._cv_search import (check_gamma_search, check_solver, fill_docs, fold_model,
                         resolve_solver, search_log_gamma, report_kernel, search_plan,
                         select_centers)
from ._falkon import FalkonClassifier, FalkonRegressor
from ._kernel_ridge import _SPARSE, KernelRidge, KernelRidgeClassifier
from ._loo import EigenRidge, loo_predictions, roundoff_alphas, weighted
from ._loo_nystrom import NystromRidge
from ._primal import LinearEigen, primal_applies


class _KernelRidgeCVBase(ArrayAPIMixin, BaseEstimator):
    """Shared search: validation, per-kernel decomposition, scores, selection, refit."""

    def _template(self):
        return KernelRidge(kernel=self.kernel, gamma=self.gamma, degree=self.degree,
                           coef0=self.coef0, kernel_params=self.kernel_params,
                           backend=self.backend)

    def _accept_sparse(self):
        if self.solver == "nystrom":  # FALKON evaluates dense rows against its centers
            return False
        return _SPARSE if self._template()._sparse_ok() else False

    def _check_params(self):
        alphas, default = check_alphas(self.alphas)
        mode = check_cv_param(self.cv)
        store = check_bool(self.store_cv_results, "store_cv_results")
        per_target = check_bool(getattr(self, "alpha_per_target", False), "alpha_per_target")
        if store and mode not in ("loo", "gcv"):
            raise ValueError("store_cv_results=True needs cv=None or cv='gcv' (the values "
                             "stored are one per training point); with K-fold cv pass "
                             "store_cv_results=False.")
        given = GivenClassifier() if is_classifier(self) else GivenRegressor()
        try:
            scorer = None if self.scoring is None else check_scoring(given, self.scoring)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"scoring={self.scoring!r} is not usable: {exc}") from None
        candidates = check_param_grid(self.param_grid, self.kernel)
        solver = check_solver(self.solver, self.n_centers, self.search_centers)
        if solver == "nystrom" and self._template()._precomputed():
            raise ValueError("solver='nystrom' evaluates the kernel at centers drawn in fit: "
                             "it cannot take kernel='precomputed' (use solver='exact').")
        log_bounds = check_gamma_search(self.gamma_search, self.kernel,
                                        set().union(*candidates), _allowed_names(self.kernel))
        intercept = check_bool(getattr(self, "fit_intercept", False), "fit_intercept")
        check_verbose(self.verbose)
        return (alphas, mode, store, per_target, scorer, candidates, solver, log_bounds, intercept,
                default)

    def _validated_weights(self, sample_weight, X):
        if sample_weight is None:
            return None
        # scikit-learn's check: finite, non-negative, not all zero, one per sample
        return _check_sample_weight(sample_weight, X, dtype=np.float64,
                                    ensure_non_negative=True)

    def _score(self, scorer, pred, y_true, per_target, score_params):
        """Score out-of-sample values ``pred`` (n, n_columns) against ``y_true``."""
        if is_classifier(self):
            given = GivenClassifier(self._classes, y_true, score_params.get("sample_weight"))
            dec = pred[:, 0] if pred.shape[1] == 1 else pred
            return scorer(given, dec, y_true, **score_params)
        given = GivenRegressor()
        if per_target:
            return np.array([scorer(given, pred[:, j], y_true[:, j], **score_params)
                             for j in range(pred.shape[1])])
        return scorer(given, pred[:, 0] if y_true.ndim == 1 else pred, y_true, **score_params)

    def _loo_candidate(self, ridge, K, Y, scale, y_true, sw, sample_weight, alphas, mode,
                       scorer, per_target, store, check):
        """Scores per alpha (``scoring=None``: in units of ``scale**2``) and stored values
        of one kernel's ``ridge`` (:class:`EigenRidge` or :class:`NystromRidge`); NaN at
        the alphas ``check(ridge)`` drops."""
        params = weight_params(scorer, sample_weight)
        scores, values = [], []
        self._intercepts.append([ridge.intercept(a) * scale for a in alphas])
        for alpha, drop in zip(alphas, check(ridge)):
            if drop:  # a default alpha below round-off: not scored
                scores.append(np.full(Y.shape[1], np.nan) if per_target else np.nan)
                values.append(np.full(Y.shape, np.nan) if store else None)
                continue
            r = ridge.loo_residuals(alpha) if mode == "loo" else ridge.gcv_residuals(alpha)
            if scorer is None:  # mean squared (weighted-space) residual, as RidgeCV
                sq = r * r
                scores.append(-sq.mean(axis=0) if per_target else -sq.mean())
                values.append(squared_units(sq, scale) if store else None)
            else:
                pred = loo_predictions(ridge, r, Y, K, sw, alpha) * scale
                scores.append(self._score(scorer, pred, y_true, per_target, params))
                values.append(pred)
        return scores, (np.stack(values, axis=-1) if store else None)

    def _kfold_candidate(self, fold_model, scale, y_true, sw, folds, alphas, scorer,
                         per_target, check):
        """Mean test-fold scores per alpha; ``fold_model(tr, te)`` is ``(ridge, predict)``,
        ``predict(alpha)`` the fold model's values at ``te`` (every alpha, one model); NaN
        at the alphas ``check`` drops on the first fold."""
        given = GivenClassifier(self._classes) if is_classifier(self) else GivenRegressor()
        if scorer is None and not is_classifier(self):  # R^2, scale free: scored in the
            y_true, scale = y_true / scale, 1.0  # scaled units (y ~ 1e200 would overflow)
        scorer = check_scoring(given, None) if scorer is None else scorer  # r2 / accuracy
        weights = None if sw is None else sw * sw
        fold_scores, dropped = [], None
        for tr, te in folds:
            ridge, predict = fold_model(tr, te)
            dropped = check(ridge) if dropped is None else dropped
            params = weight_params(scorer, None if weights is None else weights[te])
            nan = np.full(y_true.shape[1], np.nan) if per_target else np.nan
            fold_scores.append([nan if drop else self._score(
                scorer, predict(a) * scale, y_true[te], per_target, params)
                for a, drop in zip(alphas, dropped)])
        return list(np.mean(np.asarray(fold_scores, dtype=np.float64), axis=0))

    def _nystrom(self, X, Y, sw, kw):
        """:class:`NystromRidge` of ``(X, Y)`` (weights ``sw**2``) on the search's centers."""
        cross, K_mm = KernelGrid(X, self.backend_).cross(kw, self._centers[0][self._centers[2]])
        return NystromRidge(cross, K_mm, *weighted(None, Y, sw)[1:], sw=sw,
                            u=self._u(sw, len(Y)))

    def _search(self, X, Y, y_true, sample_weight, groups, y_split):
        """Scores of every (candidate, alpha); the selection; fitted attributes."""
        alphas, mode, store, per_target, scorer, candidates, _, log_bounds, icpt, default = (
            self._checked)
        per_target = per_target and Y.shape[1] > 1
        sw = None if sample_weight is None else np.sqrt(sample_weight)
        # Targets in units of their largest magnitude (per target with alpha_per_target):
        # squared residuals of y ~ 1e-200 (1e200) neither underflow to ties nor overflow;
        # the selection is scale invariant, predictions scaled back before any scorer.
        scale = np.max(np.abs(Y), axis=0 if per_target else None)
        scale = np.where(np.isfinite(scale) & (scale > 0), scale, 1.0)
        scale = scale if per_target else float(scale)
        Y = Y / scale
        precomputed = self._template()._precomputed()
        if precomputed:
            X = X.toarray() if sp.issparse(X) else X
            check_kernel_matrix(X, "X")
        folds = None
        if mode not in ("loo", "gcv"):
            splitter = check_cv(self.cv, y_split, classifier=is_classifier(self))
            folds = list(splitter.split(X, y_split, groups))
        grid = KernelGrid(X, self.backend_)
        nystrom = self.solver_ == "nystrom"
        progress = search_plan(self, X.shape, len(candidates), alphas, mode, folds, log_bounds)
        if nystrom:
            self._centers = select_centers(self.n_centers, self.search_centers,
                                           self.random_state, self.backend_, X)
        tried, scores, values, used, self._intercepts = [], [], [], [], []

        def evaluate(cand):  # one kernel: every alpha from one decomposition
            kw, warn = ridge_params(self, cand), not tried
            K = None if nystrom or self._primal else X if precomputed else grid.matrix(kw)
            a = scaled_alphas(alphas, grid.diag(kw) if K is None else np.diag(K),
                              sample_weight) if default else alphas  # the kernel's scale
            check = partial(roundoff_alphas, alphas=a, owner=type(self).__name__,
                            default=default, warn=warn or default)
            if folds is None:
                u = self._u(sw, len(Y))
                ridge = (self._nystrom(X, Y, sw, kw) if nystrom else LinearEigen(
                    X, weighted(None, Y, sw)[1], sw, u) if self._primal else
                         EigenRidge(*weighted(K, Y, sw), u=u))
                sc, vals = self._loo_candidate(ridge, K, Y, scale, y_true, sw, sample_weight,
                                               a, mode, scorer, per_target, store, check)
            else:
                sc, vals = self._kfold_candidate(fold_model(self, K, X, Y, sw, kw), scale,
                                                 y_true, sw, folds, a, scorer,
                                                 per_target, check), None
            tried.append(cand)
            used.append(a)
            report_kernel(progress, len(tried), cand, sc)
            scores.append(sc)
            values.append(vals)
            return np.asarray(sc, dtype=np.float64)

        for cand in candidates:
            if log_bounds is None:
                evaluate(cand)
            else:
                search_log_gamma(lambda g, c=cand: evaluate({**c, "gamma": g}), log_bounds,
                                 per_target)
        candidates, A = tried, np.asarray(used)  # A: (n_candidates, n_alphas)
        S = np.asarray(scores, dtype=np.float64)  # (n_candidates, n_alphas[, n_targets])
        if np.all(np.isnan(S)):
            raise ValueError("every cross-validation score is NaN; check scoring and cv "
                             "(e.g. R^2 is undefined on test folds of one sample).")
        ranked = np.where(np.isnan(S), -np.inf, S)  # NaN ranks last, as in GridSearchCV
        if per_target:
            best = ranked.max(axis=1)  # each target at its own alpha
            ci = int(np.argmax(best.mean(axis=1)))
            ai = np.argmax(ranked[ci], axis=0)
            alpha = A[ci][ai]
            best_score = S[ci][ai, np.arange(S.shape[2])]
        else:
            ci, ai = np.unravel_index(int(np.argmax(ranked)), S.shape)
            alpha, best_score = float(A[ci, ai]), float(S[ci, ai])
        if icpt and nystrom and not is_classifier(self):  # FALKON's refit takes y - b
            if folds is None:  # the intercepts of the search, at the selection
                b = np.asarray(self._intercepts[ci])[ai, np.arange(Y.shape[1])]
            else:  # K-fold scored fold models: the full-data intercept, once
                ridge = self._nystrom(X, Y, sw, ridge_params(self, candidates[ci]))
                alpha_j = np.broadcast_to(alpha, (Y.shape[1],))
                b = np.array([ridge.intercept(a)[j] for j, a in enumerate(alpha_j)]) * scale
            self.intercept_ = float(b[0]) if y_true.ndim == 1 else b
        if scorer is None and folds is None:  # back to the targets' units
            S = squared_units(S, scale)
            best_score = S[ci][ai, np.arange(S.shape[2])] if per_target else float(S[ci, ai])
        self.alpha_ = alpha
        self.alphas_ = A
        self.best_score_ = best_score
        self.best_params_ = dict(candidates[ci])
        self.candidate_params_ = candidates
        self.scores_ = S
        self.n_kernel_evaluations_ = len(candidates)
        if store:
            V = np.stack(values)
            if y_true.ndim == 1 and not is_classifier(self):
                V = V[:, :, 0, :]  # (n_samples, n_alphas) per candidate, as RidgeCV
            several = self.param_grid is not None or log_bounds is not None
            self.cv_results_ = V if several else V[0]
        return ridge_params(self, candidates[ci])

    def _resolve_solver(self, X):
        """``solver_``: "auto" is exact up to ``AUTO_NYSTROM_MIN_SAMPLES`` and where the
        Nyström path does not apply (sparse or precomputed X)."""
        solver = self._checked[6]
        ok = not sp.issparse(X) and not self._template()._precomputed()
        self._primal = solver != "nystrom" and primal_applies(self._template(), X, 1.0, 4096)
        self.solver_ = resolve_solver(solver, X.shape[0], ok and not self._primal)
        if self.solver_ == "nystrom" and self._checked[8] and is_classifier(self):
            raise ValueError("fit_intercept=True needs solver='exact' here: the Nystrom path "
                             f"refits FalkonClassifier, which has no intercept ({X.shape[0]:,}"
                             " rows resolve solver='auto' to 'nystrom').")

    def _u(self, sw, n):
        """The intercept's column in the weighted problem (None: no intercept)."""
        if not self._checked[8]:
            return None
        return np.ones(n) if sw is None else sw

    def _refit(self, X, y, sw, kwargs):
        """``best_estimator_``: exact kernel ridge (with its own ``fit_intercept``), or
        FALKON on the search's centers, fitted with ``fit_intercept`` to ``y - intercept_``
        (the Nystrom bordered system's ``c``)."""
        clf, icpt = is_classifier(self), self._checked[8]
        if self.solver_ == "nystrom":
            C, idx, search = self._centers
            self.centers_, self.center_indices_ = C, idx
            self.search_center_indices_ = idx[search]
            cls = FalkonClassifier if clf else FalkonRegressor
            est = cls(alpha=self.alpha_, centers=C, random_state=self.random_state,
                      backend=self.backend, **kwargs)
        else:
            for stale in ("centers_", "center_indices_", "search_center_indices_"):  # from an earlier Nystrom fit
                vars(self).pop(stale, None)
            cls = KernelRidgeClassifier if clf else KernelRidge
            est = cls(alpha=self.alpha_, solver="auto" if self._primal else "cholesky",
                      backend=self.backend,
                      fit_intercept=icpt, **kwargs)
        fit = {} if sw is None else {"sample_weight": sw}
        if self.solver_ == "nystrom" and icpt and not clf:
            return TransformedTargetRegressor(est, func=partial(np.add, -self.intercept_),
                                              inverse_func=partial(np.add, self.intercept_),
                                              check_inverse=False).fit(X, y, **fit)
        est = est.fit(X, y, **fit)
        if not clf:  # the exact path's bordered b, or none
            b = np.asarray(getattr(est, "intercept_", 0.0), dtype=np.float64)
            self.intercept_ = float(b) if y.ndim == 1 else np.broadcast_to(b, y.shape[1:]).copy()
        return est

    def _prepare(self, X, y):
        self._checked = self._check_params()  # parameters before data
        self._centers, self._intercepts = None, []
        kw = {} if is_classifier(self) else {"multi_output": True, "y_numeric": True}
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_min_samples=2,
                             accept_sparse=self._accept_sparse(), **kw)
        self.backend_ = resolve_backend(self.backend, X)
        self._resolve_solver(X)
        return X, y

    def _predict_input(self, X):
        check_is_fitted(self)
        return validate_data(self, X, reset=False, dtype=np.float64,
                             accept_sparse=self._accept_sparse())

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        template = self._template()
        tags.input_tags.pairwise = template._precomputed()
        tags.input_tags.sparse = self._accept_sparse() is not False
        return tags


class KernelRidgeCV(MultiOutputMixin, RegressorMixin, _KernelRidgeCVBase):
    """Kernel ridge regression with built-in model selection over ``alphas`` and kernels.

    For each kernel of ``param_grid``, one eigendecomposition ``K = V diag(s) V^T``
    serves every alpha: the dual coefficients are ``c = V diag(1 / (s + alpha)) V^T y``,
    the hat matrix ``H = V diag(s / (s + alpha)) V^T``, and

    * ``cv=None``: the exact leave-one-out residuals ``(y_i - f_i) / (1 - H_ii)``, equal
      to ``n`` refits each leaving one point out (Allen 1974);
    * ``cv="gcv"``: generalized cross-validation ``n ||y - f||^2 / (n - tr H)^2``
      (Golub, Heath & Wahba, Technometrics 1979), leave-one-out with every leverage
      ``H_ii`` replaced by their mean: rotation invariant, less swayed by points of
      high leverage;
    * K-fold ``cv``: per fold, one eigendecomposition of the training block serves
      every alpha.

    The selected kernel parameters and alpha are refitted on all the data as
    :class:`KernelRidge` (``solver="cholesky"``), ``best_estimator_``, to which
    ``predict`` delegates. Costs: ``9 n^3`` flops per kernel (``eigh``) plus ``O(n^2)``
    per alpha and target, about ``5 n^2`` floats of memory; K-fold, the same per fold on its
    training block. The kernel matrices are computed once per kernel, never per alpha;
    rbf, laplacian and matern share one distance matrix over the whole grid. The linear
    kernel with ``n >= 2 d``: the same values from the ``d x d`` eigendecomposition of
    ``X^T W X`` (``K = U diag(e) U^T``, ``U`` the left singular vectors of ``W^1/2 X``;
    ``1 / alpha`` on the null space of ``K``), as :class:`~sklearn.linear_model.RidgeCV`
    when ``n > p``: ``O(n d^2 + d^3)`` time, ``O(n d)`` memory, at any ``n``; the refit
    is :class:`KernelRidge`'s primal solver.

    ``solver="nystrom"`` (large ``n``): the same leave-one-out / GCV of the Nyström
    estimator that :class:`FalkonRegressor` fits on ``m`` uniform centers (all
    ``n_centers``, or ``search_centers`` of them when fewer), exact for that estimator,
    from two ``m x m`` eigendecompositions per kernel (``O(n m^2)`` time, ``O(n m)``
    memory; Rudi et al. 2017, Meanti et al. AISTATS 2022); the selection is refitted as
    FALKON on all ``n_centers`` centers. ``gamma_search``
    replaces a grid over ``gamma`` by a bounded search over ``log(gamma)``.

    Parameters
    ----------
    {alphas}
    {kernel}
    param_grid : dict or list of dicts, default=None
        Kernel parameters to search, as :class:`~sklearn.model_selection.GridSearchCV`'s
        ``param_grid`` (lists of values per name, every combination tried): the kernel's
        own parameter names, e.g. ``{{"gamma": [0.1, 1, 10]}}`` for rbf, laplacian,
        matern and polynomial, ``{{"nu": [0.5, 2.5]}}`` for matern, ``{{"depth": [1, 2]}}``
        for ntk, any parameter of a Kernel object (``{{"b_std": [0, 0.5]}}``), or the
        keyword arguments of a callable. ``gamma``, ``degree`` and ``coef0`` replace the
        estimator's arguments, the others go in ``kernel_params``. None: the kernel as
        given.
    cv : None, "gcv", int, cross-validation splitter or iterable, default=None
        None: exact leave-one-out; ``"gcv"``: generalized cross-validation; an int:
        (stratified, for classifiers) K-fold with that many folds; a splitter or an
        iterable of ``(train, test)`` index arrays. With ``kernel="precomputed"`` the
        folds are sub-blocks of the given matrix.
    scoring : str, callable or None, default=None
        None: the negative mean squared leave-one-out (or GCV) residual, with
        ``sample_weight`` the weighted one as :class:`~sklearn.linear_model.RidgeCV`
        defines it; :math:`R^2` for K-fold (as ``RidgeCV``). A scorer name or callable
        is evaluated on the leave-one-out (GCV) predictions, or on each test fold and
        averaged over folds (as ``GridSearchCV``), with the scored points'
        ``sample_weight`` where the scorer takes it (else a warning).
    fit_intercept : bool, default=False
        Add an unpenalised intercept ``b`` (``f = K c + b``), as
        :class:`~sklearn.linear_model.RidgeCV` does: the bordered system
        ``[[K + alpha W^-1, 1], [1^T, 0]]``, whose leave-one-out and GCV are computed
        exactly on the same decomposition (leaving a point out refits ``b`` too), and
        ``best_estimator_`` is ``KernelRidge(fit_intercept=True)``. Nyström path: the
        Nyström bordered system, and a TransformedTargetRegressor around FALKON
        fitted to ``y - intercept_`` (its ``c``, to FALKON's ``tol``). False (default):
        no intercept, as :class:`KernelRidge`.
    alpha_per_target : bool, default=False
        With several targets, pick an alpha for each (the kernel parameters, one kernel
        for all targets, maximise the mean over targets of each one's best score).
    store_cv_results : bool, default=False
        Keep ``cv_results_`` (leave-one-out or GCV only).
    {search}
    backend : {{"auto", "numpy", "numba", "cupy"}} or None, default=None
        Engine for the kernels the search does not share distances for, and for the
        refit; None follows :func:`kernelkit.set_config`.

    Attributes
    ----------
    alpha_ : float or ndarray of shape (n_targets,)
        Selected penalty (one per target with ``alpha_per_target``), from ``alphas_``.
    best_params_ : dict
        Selected kernel parameters (empty without ``param_grid``).
    best_score_ : float or ndarray of shape (n_targets,)
        Score at the selection (higher is better).
    intercept_ : float or ndarray of shape (n_targets,)
        The unpenalised intercept at the selection (0.0 without ``fit_intercept``).
    best_estimator_ : KernelRidge, FalkonRegressor or TransformedTargetRegressor
        The model refitted on all data at the selection (FALKON, wrapped with its
        intercept with ``fit_intercept``, when ``solver_`` is ``"nystrom"``).
    scores_ : ndarray of shape (n_candidates, n_alphas) or (n_candidates, n_alphas, n_targets)
        Every score at ``alphas_``, candidates in ``candidate_params_`` order (per target
        with ``alpha_per_target``); NaN where ``alphas="auto"`` did not score an alpha.
    candidate_params_ : list of dict
        The kernel parameter combinations of ``param_grid`` (``[{{}}]`` without one);
        with ``gamma_search``, every one evaluated, in order.
    {search_attrs}
    cv_results_ : ndarray of shape (n_samples, n_alphas) or (n_samples, n_targets, n_alphas)
        As ``RidgeCV``: squared (weighted) residuals when ``scoring`` is None, else the
        out-of-sample predictions. With ``param_grid`` a leading axis runs over
        ``candidate_params_``. Only with ``store_cv_results``.
    backend_ : str
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Only when ``X`` has string column names.

    Raises
    ------
    ValueError
        In ``fit``: ``alphas`` empty, non-finite, non-positive or a string but "auto"; a
        ``param_grid`` key the kernel lacks (or any with ``kernel="precomputed"``); an
        unknown ``cv`` string or ``cv < 2``; ``store_cv_results`` with K-fold ``cv``; an
        unknown ``scoring``; {search_raises}; and the input errors of :class:`KernelRidge`.

    Warns
    -----
    RuntimeWarning
        When an alpha of a given array is at the round-off level of the kernel matrix's
        eigenvalues (its score is not accurate); ``"auto"`` leaves such points out.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelkit import KernelRidgeCV
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, (80, 1)); y = np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=80)
    >>> cv = KernelRidgeCV(kernel="rbf", param_grid={{"gamma": [0.1, 1.0, 10.0]}}).fit(X, y)
    >>> sorted(cv.best_params_)
    ['gamma']
    """

    def __init__(self, alphas="auto", *, kernel="linear", gamma=None, degree=3,
                 coef0=1, kernel_params=None, param_grid=None, gamma_search=None, cv=None,
                 scoring=None, fit_intercept=False, alpha_per_target=False,
                 store_cv_results=False, solver="auto", n_centers="auto", search_centers="auto",
                 random_state=None, verbose=0, backend=None):
        self.alphas = alphas
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.param_grid = param_grid
        self.gamma_search = gamma_search
        self.cv = cv
        self.scoring = scoring
        self.fit_intercept = fit_intercept
        self.alpha_per_target = alpha_per_target
        self.store_cv_results = store_cv_results
        self.solver = solver
        self.n_centers = n_centers
        self.search_centers = search_centers
        self.random_state = random_state
        self.verbose = verbose
        self.backend = backend

    @atomic
    def fit(self, X, y, sample_weight=None, groups=None):
        """Select kernel parameters and alpha, then refit on all data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data (for ``kernel="precomputed"``: the kernel matrix).
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the training loss (and of the leave-one-out / GCV score).
        groups : array-like of shape (n_samples,), default=None
            Group labels for a group splitter ``cv``.

        Returns
        -------
        self : object
        """
        self._classes = None
        X, y = self._prepare(X, y)
        sw = self._validated_weights(sample_weight, X)
        Y = y.reshape(-1, 1) if y.ndim == 1 else y
        kwargs = self._search(X, Y, y, sw, groups, y)
        self.best_estimator_ = self._refit(X, y, sw, kwargs)
        del self._checked, self._classes, self._centers, self._intercepts, self._primal
        return self

    def predict(self, X, return_std=False, return_cov=False):
        """Predict with ``best_estimator_`` (see :meth:`KernelRidge.predict`).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std, return_cov : bool, default=False
            Gaussian-process moments, as :meth:`KernelRidge.predict`.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
        """
        X = self._predict_input(X)
        if not (return_std or return_cov):
            return self.best_estimator_.predict(X)
        if self.solver_ == "nystrom":
            raise ValueError("return_std and return_cov need solver='exact' (the Gaussian-"
                             "process moments of exact kernel ridge); this model was "
                             "selected and fitted by the Nystrom path.")
        return self.best_estimator_.predict(X, return_std=return_std, return_cov=return_cov)


class KernelRidgeClassifierCV(ClassifierMixin, _KernelRidgeCVBase):
    """Kernel ridge classifier (one-vs-all on {-1, 1} targets) with built-in model selection.

    As :class:`KernelRidgeCV` on the {-1, 1} encoding of the classes that
    :class:`KernelRidgeClassifier` fits (one column for two classes), the kernel analogue
    of :class:`~sklearn.linear_model.RidgeClassifierCV`: all one-vs-all columns share
    the decomposition and one alpha. ``scoring=None`` is, as there, the mean squared
    leave-one-out residual of the encoded targets (accuracy for K-fold); a scorer (e.g.
    ``"accuracy"``, ``"roc_auc"``) is evaluated on the leave-one-out decision values.

    Parameters
    ----------
    alphas : "auto" or array-like of float > 0, default="auto"
        Ridge penalties to try (see :class:`KernelRidgeCV`).
    {kernel}
    param_grid : dict or list of dicts, default=None
        Kernel parameters to search (see :class:`KernelRidgeCV`).
    cv : None, "gcv", int, cross-validation splitter or iterable, default=None
        As :class:`KernelRidgeCV`; an int means stratified K-fold.
    {class_scoring}
    fit_intercept : bool, default=False
        An unpenalised intercept per column (see :class:`KernelRidgeCV`); exact path
        only (FalkonClassifier has none: a ValueError when ``solver_`` is "nystrom").
    store_cv_results : bool, default=False
        Keep ``cv_results_`` of shape ``(n_samples, n_columns, n_alphas)``.
    {search}
    backend : {{"auto", "numpy", "numba", "cupy"}} or None, default=None
    class_weight : None, "balanced" or dict, default=None
        As scikit-learn's classifiers: multiplies ``sample_weight``, in the selection and
        in the refit alike.
    {calibration}
        Here the refitted ``best_estimator_`` is calibrated on its own out-of-sample
        values at the selected parameters, and ``predict_proba`` is its.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    alpha_ : float
    best_params_ : dict
    best_score_ : float
    best_estimator_ : KernelRidgeClassifier or FalkonClassifier
    scores_ : ndarray of shape (n_candidates, n_alphas)
    candidate_params_ : list of dict
    {search_attrs}
    cv_results_ : ndarray
        Only with ``store_cv_results`` (see :class:`KernelRidgeCV`).
    backend_ : str
    n_features_in_ : int

    Raises
    ------
    ValueError
        As :class:`KernelRidgeCV`, and for fewer than two classes.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelkit import KernelRidgeClassifierCV
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(300, 2))
    >>> y = X[:, 0] ** 2 + X[:, 1] ** 2 > 1.4
    >>> clf = KernelRidgeClassifierCV(kernel="rbf", gamma_search=(0.01, 10.0),
    ...                               solver="nystrom", n_centers=60, random_state=0)
    >>> clf.fit(X, y).solver_, type(clf.best_estimator_).__name__
    ('nystrom', 'FalkonClassifier')
    """

    def __init__(self, alphas="auto", *, kernel="linear", gamma=None, degree=3,
                 coef0=1, kernel_params=None, param_grid=None, gamma_search=None, cv=None,
                 scoring=None, fit_intercept=False, store_cv_results=False, solver="auto",
                 n_centers="auto", search_centers="auto", random_state=None, verbose=0,
                 backend=None, class_weight=None, calibration="auto"):
        self.fit_intercept = fit_intercept
        self.class_weight = class_weight
        self.calibration = calibration
        self.alphas = alphas
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.param_grid = param_grid
        self.gamma_search = gamma_search
        self.cv = cv
        self.scoring = scoring
        self.store_cv_results = store_cv_results
        self.solver = solver
        self.n_centers = n_centers
        self.search_centers = search_centers
        self.random_state = random_state
        self.verbose = verbose
        self.backend = backend

    @atomic
    def fit(self, X, y, sample_weight=None, groups=None):
        """Select kernel parameters and alpha, then refit on all data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Class labels of any type.
        sample_weight : array-like of shape (n_samples,), default=None
        groups : array-like of shape (n_samples,), default=None

        Returns
        -------
        self : object
        """
        check_class_weight(self.class_weight)  # parameters before data
        if self.calibration not in (None, False, True, "auto"):
            raise ValueError(f"calibration must be 'auto' or None, got {self.calibration!r}.")
        X, y = self._prepare(X, y)
        check_classification_targets(y)
        if np.unique(y).shape[0] < 2:
            raise ValueError("The number of classes has to be greater than one; got 1 class "
                             "in y.")
        binarizer = LabelBinarizer(pos_label=1, neg_label=-1)
        Y = binarizer.fit_transform(y).astype(np.float64)
        self._classes = binarizer.classes_
        # class weights select and refit as the sample weights they are (scikit-learn's rule)
        sw = row_weights(self.class_weight, y, self._validated_weights(sample_weight, X),
                         self._classes)
        kwargs = self._search(X, Y, y, sw, groups, y)
        self.classes_ = binarizer.classes_
        self.best_estimator_ = self._refit(X, y, sw, {**kwargs,
                                                     "calibration": self.calibration})
        del self._checked, self._classes, self._centers, self._intercepts, self._primal
        return self

    def decision_function(self, X):
        """Per-class scores of ``best_estimator_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray of shape (n_samples,) for two classes, else (n_samples, n_classes)
        """
        X = self._predict_input(X)
        return self.best_estimator_.decision_function(X)

    def predict(self, X):
        """Predicted class labels.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        X = self._predict_input(X)
        return self.best_estimator_.predict(X)

    @available_if(_calibration_on)
    def predict_proba(self, X):
        """``best_estimator_.predict_proba``: calibrated on its out-of-sample values at the
        selected parameters. Shape (n_samples, n_classes)."""
        X = self._predict_input(X)  # NotFittedError first
        return self.best_estimator_.predict_proba(X)

    @available_if(_calibration_on)
    def predict_log_proba(self, X):
        """``best_estimator_.predict_log_proba``. Shape (n_samples, n_classes)."""
        X = self._predict_input(X)
        return self.best_estimator_.predict_log_proba(X)


fill_docs((KernelRidgeCV, KernelRidgeClassifierCV))
