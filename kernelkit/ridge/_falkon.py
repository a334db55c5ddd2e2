"""FALKON: Nyström kernel ridge solved by preconditioned conjugate gradients.

Rudi, Carratino & Rosasco, "FALKON: An Optimal Large Scale Kernel Method", NeurIPS
2017 (Algorithm 1 and Section 3); Meanti, Carratino, Rosasco & Rudi, "Kernel Methods
Through the Roof: Handling Billions of Points Efficiently", NeurIPS 2020 (the
out-of-core products). Leverage-score centers as in FALKON-BLESS (Rudi, Calandriello,
Carratino & Rosasco, "On Fast Leverage Score Sampling and Optimal Learning",
NeurIPS 2018), drawn here by kernelkit's SQUEAK-based :class:`~kernelkit.RLSNystroem`.
"""

import warnings
from numbers import Integral, Real

import numpy as np
from scipy import linalg
from scipy.linalg import lapack
from sklearn.base import BaseEstimator, MultiOutputMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from ..backend import resolve_backend
from ..kernels import resolve_kernel
from ..utils._verbose import Progress, check_verbose
from ._kernel_ridge import _check_alpha, _ClassifierMixin
from ._pcg import DEFAULT_MAX_ITER, conjugate_gradient, product_dtype

CENTERS = ("uniform", "rls", "thinning")


def _auto_centers(n):
    """FALKON's statistical rate needs ``M ~ sqrt(n) log n`` centers (Theorem 3)."""
    return int(min(n, max(100, round(np.sqrt(n) * np.log(n)))))


class _NystromNormalOperator:
    """``v -> K_nM^T (K_nM v)``: ``K_nM`` held when it fits, else blockwise (one pass).

    Meanti et al. (2020) keep ``K_nM`` out of memory by computing it in row blocks on
    every product; one block serves both ``K_nM v`` and its transpose product.
    """

    def __init__(self, op, X, C, dtype, cache_size, client=None):
        self.op, self.X, self.C = op, X, C
        n, m = X.shape[0], C.shape[0]
        self.dtype = np.dtype(dtype)
        self.dask = self.handle = None
        if client is not None:
            # the data rows live on the workers, each keeping its block k(C, X_chunk):
            # a CG step sends V and gets back M x k (Meanti et al. 2020's out-of-core
            # products, here across machines)
            from ..distributed import DaskKernelOperator

            self.dask = DaskKernelOperator(client, op, X, np.float64)
            self.handle = self.dask.prepare(C)
        self.stored = client is None and n * m * self.dtype.itemsize <= cache_size * 2**20
        self.KnM = None
        if self.stored:
            self.KnM = np.asarray(op.engine.to_host(
                op.block(X.astype(self.dtype, copy=False), C.astype(self.dtype, copy=False))))

    def rows_per_block(self):
        from .._config import get_config

        budget = get_config()["working_memory"] * 2**20
        return max(1, int(budget // (8 * max(1, self.C.shape[0]))))

    def _blocks(self):
        """Float64 row blocks ``(r0, r1, K_nM[r0:r1])``, from the held matrix or recomputed.

        A held float32 ``K_nM`` is upcast block by block: float32 *storage* perturbs the
        system once, but float32 *products* would add rounding noise on every step,
        which ``T^-1`` amplifies by up to ``1 / lambda_min(K_MM)`` (measured: 4e-3
        against 5e-6 relative error of the predictions).
        """
        step = self.rows_per_block()
        for r0 in range(0, self.X.shape[0], step):
            r1 = min(self.X.shape[0], r0 + step)
            if self.stored:
                yield r0, r1, self.KnM[r0:r1].astype(np.float64, copy=False)
            else:
                yield r0, r1, self.op.block_host(self.X[r0:r1], self.C)

    def close(self):
        """Free the blocks held on the Dask workers."""
        if self.dask is not None:
            self.dask.release(self.handle)
            self.dask.close()
            self.dask = None

    def knm(self, V):
        """``K_nM @ V`` (float64)."""
        if self.dask is not None:
            return self.dask.rmatmul(self.handle, V).astype(np.float64)
        if not self.stored:
            return np.asarray(self.op.engine.to_host(self.op.matmul(self.X, self.C, V)),
                              np.float64)
        out = np.empty((self.X.shape[0],) + V.shape[1:])
        for r0, r1, Kb in self._blocks():
            out[r0:r1] = Kb @ V
        return out

    def kmn(self, U):
        """``K_nM^T @ U`` (float64)."""
        if self.dask is not None:
            return self.dask.matmul(self.handle, U).astype(np.float64)
        out = np.zeros((self.C.shape[0],) + U.shape[1:])
        for r0, r1, Kb in self._blocks():
            out += Kb.T @ U[r0:r1]
        return out

    def __call__(self, V):
        """``K_nM^T K_nM V``: one pass over the row blocks."""
        if self.dask is not None:
            return self.kmn(self.knm(V))
        out = np.zeros_like(V)
        for _, _, Kb in self._blocks():
            out += Kb.T @ (Kb @ V)
        return out


def _upper_cholesky(A, name, shift=0.0):
    """Upper Cholesky of ``A + shift I`` with the smallest jitter that succeeds.

    Reads only the upper triangle of ``A`` (LAPACK ``potrf``); one ``M x M`` copy.
    """
    m = A.shape[0]
    scale = max(float(np.max(np.abs(np.diag(A)))), np.finfo(np.float64).tiny)
    jitter = np.finfo(np.float64).eps * m * scale
    for _ in range(12):
        B = np.array(A, order="F", copy=True)
        B.flat[:: m + 1] += shift + jitter
        try:
            return linalg.cholesky(B, lower=False, overwrite_a=True, check_finite=False)
        except linalg.LinAlgError:
            del B
            jitter *= 100.0
    raise ValueError(f"{name} is not positive semi-definite: the kernel is not a valid (psd) "
                     "kernel on these centers.")


class _FalkonBase(BaseEstimator):
    """Shared fit: centers, the FALKON preconditioner and CG on the normal equations."""

    def _sparse_ok(self):
        return False  # dense X only: centers and K_nM blocks go through the engines

    def _operator(self):
        return resolve_kernel(self.kernel, self.gamma, self.degree, self.coef0,
                              self.kernel_params, n_features=self.n_features_in_,
                              backend=self.backend_)

    def _check_params(self, n):
        if isinstance(self.kernel, str) and self.kernel == "precomputed":
            raise ValueError("kernel='precomputed' cannot be used by FALKON: it evaluates the "
                             "kernel between the data and centers chosen in fit; pass a kernel "
                             "name, a Kernel or a callable.")
        tol = self.tol
        if isinstance(tol, bool) or not isinstance(tol, Real) or not np.isfinite(tol) or tol <= 0:
            raise ValueError(f"tol must be a finite number > 0 (the relative residual of CG), "
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

    def _solve(self, normal, T, Kmm, As, lam, Y, n, m, tol, max_iter, progress):
        """CG on ``B^T H B g = B^T K_Mn y / n`` per group of targets sharing ``lambda``."""
        Y2 = Y.reshape(n, -1)
        rhs_full = normal.kmn(Y2) / n  # K_Mn y / n
        coef = np.empty((m, Y2.shape[1]))
        n_iter = 0
        groups = [np.arange(Y2.shape[1])] if len(lam) == 1 else [[j] for j in range(len(lam))]
        for gi, cols in enumerate(groups):
            A, lj = As[gi], lam[gi]

            def precond_apply(V, A=A, lj=lj):
                # B^T H B V with B = T^-1 A^-1, H = K_Mn K_nM / n + lam K_MM (exact, so the
                # solution is the Nyström estimator whatever jitter the factors took)
                U = linalg.solve_triangular(A, V, check_finite=False)
                U = linalg.solve_triangular(T, U, check_finite=False)
                H = normal(U) / n + lj * (Kmm @ U)
                H = linalg.solve_triangular(T, H, trans="T", check_finite=False)
                return linalg.solve_triangular(A, H, trans="T", check_finite=False)

            b = linalg.solve_triangular(T, rhs_full[:, cols], trans="T", check_finite=False)
            b = linalg.solve_triangular(A, b, trans="T", check_finite=False)
            gamma, it, rel = conjugate_gradient(precond_apply, b, tol, max_iter,
                                                progress=progress)
            n_iter = max(n_iter, it)
            beta = linalg.solve_triangular(A, gamma, check_finite=False)
            coef[:, cols] = linalg.solve_triangular(T, beta, check_finite=False)
            if np.any(rel > tol):
                warnings.warn(f"{type(self).__name__} stopped after {it} CG iterations "
                              f"(max_iter={max_iter}) with relative residual {rel.max():.3g} > "
                              f"tol={tol:g}; increase max_iter, tol or alpha.",
                              ConvergenceWarning, stacklevel=4)
        return coef, n_iter

    def _fit_targets(self, X, Y):
        n = X.shape[0]
        tol, max_iter, cache, verbose = self._check_params(n)
        n_targets = 1 if Y.ndim == 1 else Y.shape[1]
        alpha = _check_alpha(self.alpha, n_targets)
        self.backend_ = resolve_backend(self.backend, X)
        rng = check_random_state(self.random_state)
        progress = Progress(self, verbose)
        C, idx, w = self._select_centers(X, rng)
        m = C.shape[0]
        op = self._operator()
        progress("centers", m, n, kind=self.centers if isinstance(self.centers, str) else "array")

        # Preconditioner (Rudi et al. 2017, Alg. 1): T^T T = K_MM, A^T A = T W T^T / n + lam I,
        # W the centers' weights (n / M each when uniform; 1 / pi_j for RLS draws, FALKON-BLESS)
        lam = np.atleast_1d(alpha) / n
        Kmm = op.block_host(C)
        T = _upper_cholesky(Kmm, "the kernel matrix of the centers")
        # T W T^T = (T D)(T D)^T, D = sqrt(W / n): LAPACK's lauum forms the product of an
        # upper triangle with its transpose in M^3/3 flops (a GEMM takes 2 M^3)
        base, info = lapack.dlauum(T * np.sqrt(w / n)[None, :], lower=0, overwrite_c=1)
        if info != 0:
            raise ValueError(f"LAPACK dlauum failed (info={info}) on the centers' Cholesky "
                             "factor.")
        # only the upper triangle of ``base`` is set, and only it is read
        As = [_upper_cholesky(base, "the FALKON preconditioner", shift=lj) for lj in lam]
        del base
        progress("preconditioner", m, level=1)
        normal = _NystromNormalOperator(op, X, C, product_dtype(tol), cache, client=self.client)
        progress("K_nM", n, level=1, held=normal.stored, dask=normal.dask is not None)
        try:
            coef, n_iter = self._solve(normal, T, Kmm, As, lam, Y, n, m, tol, max_iter, progress)
        finally:
            normal.close()
        self.kernel_nbytes_ = 0 if normal.KnM is None else int(normal.KnM.nbytes)

        if not np.all(np.isfinite(coef)):
            raise ValueError("FALKON produced non-finite coefficients; check alpha and the kernel "
                             "parameters.")
        progress("CG done", n_iter, max_iter, n_centers=m)
        self.dual_coef_ = coef[:, 0] if Y.ndim == 1 else coef
        self.centers_ = C
        self.center_indices_ = idx
        self.n_centers_ = m
        self.n_iter_ = n_iter
        return self

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
    tol : float > 0, default=1e-5
        Stop when the relative residual of the preconditioned normal equations is at
        most ``tol`` (for every target). From ``1e-6`` up, ``K_nM`` is held and multiplied
        in float32, below in float64.
    max_iter : int >= 1 or None, default=None
        CG iteration limit (None: 500); reaching it raises a ``ConvergenceWarning``.
    cache_size : float >= 0, default=4096
        MiB for holding ``K_nM``; when it does not fit, every CG step recomputes it in
        row blocks of ``working_memory`` (``O(n M d)`` time, ``O(M^2)`` memory).
    client : distributed.Client or None, default=None
        When given, the ``K_nM`` products run on this Dask cluster
        (:class:`kernelkit.distributed.DaskKernelOperator`): each worker holds the
        kernel block of its share of the training rows against the centers, and a CG
        step moves only ``n x n_targets`` vectors. Needs ``kernelkit[dist]``.
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
    leverage-score centers, Rudi et al. NeurIPS 2018). ``O(n M + M^2)`` memory and
    ``O(n M t)`` time for ``t`` iterations; ``t`` grows as ``log(1/tol)``, not with ``n``.
    Out-of-core products as in Meanti et al. (NeurIPS 2020).

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

    def fit(self, X, y):
        """Choose the centers and solve the Nyström normal equations.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_targets)

        Returns
        -------
        self : object
        """
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=True, dtype=np.float64,
                             ensure_min_samples=2)
        return self._fit_targets(X, y)

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
    """FALKON classifier: one-vs-all Nyström kernel ridge on {-1, +1} targets.

    :class:`FalkonRegressor` on the {-1, +1} encoding of the classes (all classes
    share the centers, the preconditioner and the CG products).

    Parameters
    ----------
    {params}

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    dual_coef_ : ndarray of shape (`n_centers_`, n_classes) (one column for two classes)
    {attrs}
    {raises}
    """

    __init__ = FalkonRegressor.__init__

    def fit(self, X, y):
        """Fit one-vs-all FALKON regressions on {-1, +1} encoded classes.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Class labels of any type.

        Returns
        -------
        self : object
        """
        return _ClassifierMixin.fit(self, X, y)

    def _fit_targets(self, X, Y, sample_weight=None):
        return _FalkonBase._fit_targets(self, X, Y)


for _cls in (FalkonRegressor, FalkonClassifier):
    for _key, _text in (("{params}", _PARAMS_DOC), ("{attrs}", _ATTR_DOC),
                        ("{raises}", _RAISES_DOC)):
        _cls.__doc__ = _cls.__doc__.replace(_key, _text.strip())
del _cls, _key, _text
