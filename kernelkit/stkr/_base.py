"""Shared fit / predict of the STKR estimators: validation, base kernel, transformation, solve."""

from numbers import Integral, Real

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, validate_data

from ..backend import resolve_backend
from ..kernels import Kernel, check_kernel_scale, is_precomputed, resolve_kernel
from ..utils._array_api import ArrayAPIMixin
from ..utils._linalg import solve_ridge
from ..utils._validation import check_scalar_param
from ..utils._verbose import Progress, check_verbose
from . import _graph, _operator, _solvers

TRANSFORMS = ("polynomial", "inverse_laplacian", "kpca", "identity")
SOLVERS = ("cg", "richardson")


def _is_knn(kernel):
    return isinstance(kernel, str) and kernel == "knn"


class _STKRBase(ArrayAPIMixin, BaseEstimator):
    """Fit/predict machinery; subclasses encode targets and name the outputs."""

    def _check_params(self):
        if not isinstance(self.transformation, str) or self.transformation not in TRANSFORMS:
            raise ValueError(f"transformation must be one of {TRANSFORMS}, got "
                             f"{self.transformation!r}.")
        if not isinstance(self.solver, str) or self.solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}, got {self.solver!r}.")
        check_scalar_param(self.beta, "beta", low=0.0)
        check_scalar_param(self.tol, "tol", low=0.0)
        check_scalar_param(self.max_iter, "max_iter", low=1, low_inclusive=True, integer=True)
        check_scalar_param(self.cache_size, "cache_size", low=0.0, low_inclusive=True)
        check_verbose(self.verbose)
        resolve_backend(self.backend)  # an unknown or unusable engine before any data
        if _is_knn(self.kernel):
            check_scalar_param(self.n_neighbors, "n_neighbors", low=1, low_inclusive=True,
                               integer=True)
        if self.transformation == "polynomial":
            return self._coefs()
        if self.transformation == "inverse_laplacian":
            eta = self.eta
            if isinstance(eta, bool) or not isinstance(eta, Real) or not 0 <= eta < 1:
                raise ValueError(
                    "eta must be a number in [0, 1) for transformation='inverse_laplacian' "
                    "(s(mu)^-1 = mu^-1 - eta on eigenvalues mu scaled to [0, 1]: eta >= 1 "
                    f"makes the transformed kernel infinite or indefinite), got {eta!r}.")
        if self.transformation == "kpca":
            check_scalar_param(self.n_components, "n_components", low=1, low_inclusive=True,
                               integer=True)
        return None

    def _coefs(self):
        if self.coefs is None:
            p = self.power
            if isinstance(p, bool) or not isinstance(p, Integral) or p < 1:
                raise ValueError(f"power must be an integer >= 1 (s(mu) = mu^power), got {p!r}.")
            c = np.zeros(int(p))
            c[-1] = 1.0
            return c
        c = np.asarray(self.coefs, dtype=np.float64) if not isinstance(self.coefs, str) \
            else np.array([np.nan])
        if c.ndim != 1 or c.size < 1 or not np.all(np.isfinite(c)) or np.any(c < 0) \
                or not np.any(c > 0):
            raise ValueError("coefs must be a 1-D array (pi_1, ..., pi_q) of finite "
                             "non-negative numbers, not all zero (s(mu) = sum_p pi_p mu^p), "
                             f"got {self.coefs!r}.")
        return c

    def _sparse_ok(self):
        """Sparse X is taken where the base kernel can be evaluated on it."""
        from sklearn.metrics.pairwise import kernel_metrics

        k = self.kernel
        if isinstance(k, str):
            return _is_knn(k) or is_precomputed(k) or k in kernel_metrics()
        return callable(k) and not isinstance(k, Kernel)

    def _kernel_op(self, *arrays):
        return resolve_kernel(self.kernel, self.gamma, self.degree, self.coef0,
                              self.kernel_params, n_features=self.n_features_in_,
                              backend=self.backend_,
                              sparse=any(sparse.issparse(a) for a in arrays))

    # -- base kernel --------------------------------------------------------------------
    def _train_operator(self, X):
        """The base kernel on the training rows, and the fitted state it needs later."""
        if _is_knn(self.kernel):
            shift = _graph.offset(X)
            X = X if shift is None else X - shift
            e = _graph.max_exponent(X)
            f = _graph.scale_factor(e)
            if f is None or sparse.issparse(X):
                Xs, f = _graph.scale(X, e), 1.0
            else:  # dense rows are read scaled by f, the values a copy would hold
                Xs = X
            loc, first = _graph.locations(Xs, self.backend_, f)
            W, radius2, reverse = _graph.knn_graph(Xs, int(self.n_neighbors), loc, first,
                                                   self.backend_, f)
            S, degree = _graph.normalised_adjacency(W)
            state = dict(knn_radius2_=radius2, knn_degree_=degree, knn_location_=loc,
                         knn_scale_exp_=e, knn_offset_=shift, _knn_first=first,
                         _knn_reverse=reverse)
            return _operator.graph_operator(S, loc, self.backend_), state
        if is_precomputed(self.kernel):
            if X.shape[0] != X.shape[1]:
                raise ValueError(f"kernel='precomputed' needs a square X (the kernel matrix "
                                 f"of all training points), got shape {X.shape}.")
            if not _operator.is_symmetric(X):
                raise ValueError("kernel='precomputed' needs a symmetric kernel matrix X.")
            return _operator.precomputed_operator(X), {}
        op = self._kernel_op(X)
        check_kernel_scale(op, X, type(self).__name__)
        return _operator.dense_operator(op, X, float(self.cache_size) * 2**20), {}

    def _cross(self, X, theta):
        """``k(X, X_fit_) @ theta``: the inductive predictor."""
        if is_precomputed(self.kernel):
            if X.shape[1] != self.n_features_in_:
                raise ValueError(f"kernel='precomputed' needs X of shape (n_queries, "
                                 f"{self.n_features_in_}) (kernel values against the "
                                 f"training points), got {X.shape}.")
            return np.asarray(X @ theta, dtype=np.float64)
        if _is_knn(self.kernel):
            e, shift, Xf = self.knn_scale_exp_, self.knn_offset_, self.X_fit_
            X, Xf = (X, Xf) if shift is None else (X - shift, Xf - shift)
            fit = dict(degree=self.knn_degree_, loc=self.knn_location_,
                       first=self._knn_first, reverse=self._knn_reverse)
            return _graph.knn_cross_matmul(_graph.scale(X, e), _graph.scale(Xf, e),
                                           fit, int(self.n_neighbors), theta, self.backend_)
        op = self._kernel_op(X, self.X_fit_)
        return np.asarray(op.engine.to_host(op.matmul(X, self.X_fit_, theta)), np.float64)

    # -- fit ----------------------------------------------------------------------------
    def _fit_targets(self, X, Y, labeled, coefs, weights=None, folds=None):
        """Fit on validated float64 ``X`` and targets ``Y`` (n_labeled, n_targets).

        ``coefs`` is what :meth:`_check_params` returned (called before the data were
        validated); ``weights`` (n_labeled,) weight the labeled rows' squared loss.
        Fitted attributes are assigned at the end. With ``folds`` (pairs of index
        arrays into the labeled rows) the model is also refitted once per fold without
        that fold's labels, on the same base kernel, and the second value returned
        holds each labeled row's prediction by the fit that did not see its label
        (out-of-sample values; None without ``folds``).
        """
        if is_precomputed(self.kernel):
            backend = "numpy"
        elif _is_knn(self.kernel):  # the graph search's selection pass: Numba or NumPy
            backend = "numba" if resolve_backend(self.backend) == "numba" else "numpy"
        else:
            backend = resolve_backend(self.backend, X)
        self.backend_ = backend  # _kernel_op reads it; fit is atomic, a failure restores it
        progress = Progress(self, check_verbose(self.verbose))
        kname = self.kernel if isinstance(self.kernel, str) else type(self.kernel).__name__
        progress(f"n={X.shape[0]} ({labeled.size} labeled): building the {kname!r} operator"
                 f"{' (neighbour graph)' if _is_knn(self.kernel) else ''}, then "
                 f"{self.transformation} by {self.solver} (up to {int(self.max_iter)} iterations,"
                 " one product with the n x n operator each)")
        G, state = self._train_operator(X)
        progress.done("operator")
        # STKR is linear in y: solve for each column scaled by a power of two to ~1 (exact),
        # so that targets of any magnitude (1e-300, 1e300) neither underflow the residual
        # norms to 0 (a zero fit) nor overflow them.
        col_scale = np.array([np.ldexp(1.0, _graph.max_exponent(c)) for c in Y.T])
        Y = Y / col_scale
        if weights is not None:  # the same power-of-two scaling: the fit is invariant to
            # a common factor of the weights (its ridge is beta times their sum)
            weights = weights / np.ldexp(1.0, _graph.max_exponent(weights))
        lambda_max, basis = None, None
        if self.transformation == "kpca":
            basis = _solvers.kpca_basis(G, int(self.n_components), self.random_state)
        elif self.transformation != "identity":
            lambda_max = G.top_eigenvalue(self.random_state)
            if not lambda_max > 0:
                raise ValueError("the base kernel matrix has no positive eigenvalue; check "
                                 "the kernel and its parameters.")

        def _ridge(rows, wr):
            # beta per unit of weight: an integer weight is that many copies of the row
            return (rows.size if wr is None else float(np.sum(wr))) * float(self.beta)

        def _monitor():
            return _solvers._Monitor(progress, f"{self.transformation}/{self.solver}",
                                     float(self.tol), int(self.max_iter))

        def solve(rows, Yr, wr):
            """``(theta, fitted, n_iter, monitor)`` with labels on ``labeled[rows]`` only."""
            lab = labeled[rows]
            ridge, monitor = _ridge(rows, wr), _monitor()
            kw = dict(solver=self.solver, tol=float(self.tol), max_iter=int(self.max_iter),
                      monitor=monitor, weights=wr)
            if self.transformation == "identity":
                sq = np.ones((lab.size, 1)) if wr is None else np.sqrt(wr)[:, None]
                alpha = sq * solve_ridge(sq * G.block(lab) * sq.T, sq * Yr, ridge)
                theta = np.zeros((X.shape[0], Yr.shape[1]))
                theta[lab] = alpha
                return theta, G(theta), 0, monitor
            if self.transformation == "kpca":
                theta, fitted, _ = _solvers.solve_kpca(basis, lab, Yr, ridge, wr)
                return theta, fitted, 0, monitor
            # polynomial (the inverse Laplacian is solved in one batch below)
            return (*_solvers.solve_polynomial(G, lambda_max, coefs, lab, Yr, ridge, **kw),
                    monitor)

        every = np.arange(labeled.size)
        fold_w = [None if weights is None else weights[rows] for rows, _ in (folds or ())]
        out_of_sample = None if folds is None else np.empty(Y.shape)
        if self.transformation == "inverse_laplacian":
            # the fit and its calibration refits in one batch: they share each product
            problems = [(every, Y, weights)] + [(rows, Y[rows], w)
                                                for (rows, _), w in zip(folds or (), fold_w)]
            monitors = [_monitor() for _ in problems]
            solved = _solvers.solve_inverse_laplacian_many(
                G, lambda_max, float(self.eta),
                [(labeled[rows], Yr, _ridge(rows, wr), wr, m)
                 for (rows, Yr, wr), m in zip(problems, monitors)],
                solver=self.solver, tol=float(self.tol), max_iter=int(self.max_iter),
                engine=backend)
            (theta, fitted, n_iter), monitor = solved[0], monitors[0]
            fold_fits = [f for _, f, _ in solved[1:]]
        else:
            theta, fitted, n_iter, monitor = solve(every, Y, weights)
            fold_fits = [solve(rows, Y[rows], w)[1] for (rows, _), w in zip(folds or (), fold_w)]
        n_components = None if basis is None else basis[0].size
        if folds is not None:
            for (_, held), f in zip(folds, fold_fits):
                out_of_sample[held] = f[labeled[held]]
            out_of_sample *= col_scale
        theta, fitted = theta * col_scale, fitted * col_scale
        if not (np.all(np.isfinite(theta)) and np.all(np.isfinite(fitted))):
            raise ValueError(f"{type(self).__name__} produced non-finite coefficients: the "
                             "kernel's values overflow float64 arithmetic; check the kernel's "
                             "parameters or rescale X.")
        for name, value in state.items():
            setattr(self, name, value)
        if n_components is not None:
            self.n_components_ = n_components
        else:  # not left over from an earlier kpca fit
            vars(self).pop("n_components_", None)
        self.lambda_max_ = lambda_max
        self.n_iter_ = n_iter
        self.residuals_ = np.asarray(monitor.history)
        self.n_matvec_ = G.n_matvec
        progress(f"fit ({self.transformation}, {self.solver})", n_iter=self.n_iter_,
                 matvecs=G.n_matvec, seconds=round(progress.lap(), 3))
        self.dual_coef_ = theta
        self.X_fit_ = X
        self.labeled_indices_ = labeled
        return fitted, out_of_sample

    def _validate_X(self, X, reset):
        # float64 in native byte order (">f8", float16 and int inputs are converted before any
        # compiled code sees them); CSR where the base kernel takes sparse rows
        return validate_data(self, X, reset=reset, dtype=np.float64,
                             accept_sparse="csr" if self._sparse_ok() else False,
                             ensure_min_samples=2 if reset else 1)

    def _decision(self, X):
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        return self._cross(X, self.dual_coef_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = is_precomputed(self.kernel)
        tags.input_tags.sparse = self._sparse_ok()
        return tags

