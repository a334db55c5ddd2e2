"""RLSNystroem: Nyström features whose columns are sampled by ridge leverage scores."""

import warnings

import numpy as np
from scipy import linalg
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from ..backend import resolve_backend
from ..kernels import check_kernel_scale, is_precomputed
from ..utils._array_api import ArrayAPIMixin
from ..utils._state import atomic
from ..utils._validation import check_scalar_param
from ..utils._verbose import Progress, check_verbose, flops
from ._common import (
    _MIN_SAMPLER_QBAR,
    _SAMPLERS,
    _check_dense_size,
    _check_epsilon,
    _check_gamma_reg,
    _make_eval,
    _resolve_qbar,
    _take,
)
from ._dictionary import _blas_for
from ._exact import _exact_scores
from ._ink import _ink_run
from ._sampling import _draw_columns, _match_gamma_reg
from ._squeak import SQUEAK, _partition_scores, _repair, _run_squeak




_EXACT_CALLER = "RLSNystroem(sampler='exact')"


class RLSNystroem(ClassNamePrefixFeaturesOutMixin, TransformerMixin, ArrayAPIMixin, BaseEstimator):
    """Nyström features from columns sampled by ridge leverage scores.

    The interface of :class:`sklearn.kernel_approximation.Nystroem` (``kernel``,
    ``gamma``, ``n_components``, ``random_state``, ``components_``,
    ``component_indices_``, ``normalization_``, ``set_output``), with columns chosen
    by their ridge leverage scores instead of uniformly:

    1. the regulariser is matched to the budget as the papers do: with
       ``gamma_reg="auto"``, ``gamma_reg_`` makes the effective dimension about
       ``n_components / qbar`` (so the expected RLS dictionary, ``qbar * d_eff``
       copies, has the budget's size), estimated through a uniform pilot dictionary.
       It is never lowered below ``1e-8`` times the largest eigenvalue of ``K`` (below
       it the estimators cancel catastrophically): where the numerical rank is too low
       to reach the target (repeated points, smooth kernels on low-dimensional data),
       the floor is used and the share of the budget that RLS cannot spend is drawn
       uniformly;
    2. the sampler estimates every point's RLS ``tau~_i(gamma_reg_)``: SQUEAK
       (default; one pass, never the ``n x n`` matrix), INK-ESTIMATE, or the exact
       scores; ``"uniform"`` reproduces scikit-learn's ``Nystroem`` sampling;
    3. exactly ``n_components`` distinct columns are drawn with inclusion
       probabilities ``pi_i = min(1, c tau~_i)``, ``sum pi = n_components``
       (systematic sampling in random order), and weighted as the theory requires,
       ``w_i = 1 / pi_i`` (so ``sum_i w_i phi_i phi_i'`` is unbiased for the
       covariance). Repeated points form one unit (a second copy adds nothing to
       the span): units are drawn by the sum of their copies' scores, one copy each,
       weighted ``copies / pi``; a budget above the number of distinct points takes
       them all and fills the rest with uniform extra copies. The features are
       ``k(x, C) W (W K_CC W)^{+1/2}`` with a pseudo-inverse that drops the null
       space, so that their Gram matrix is the Nyström approximation
       ``K_nC K_CC^+ K_Cn`` even with duplicate points or rank-deficient kernels,
       and satisfies ``K - K~ <= gamma_reg_ / (1 - epsilon) I`` when the columns
       form an accurate dictionary.

    RLS sampling pays once ``n_components`` is at least about ``d_eff`` of the
    matched regulariser; it spends columns on isolated points (outliers) that
    uniform sampling misses, which is where its approximation, and the predictions
    of a model built on it, are better.

    Parameters
    ----------
    kernel : str, Kernel or callable, default="rbf"
        A kernelkit kernel name, a Kernel, a callable, or ``"precomputed"`` (``X``
        is then the training kernel matrix in ``fit`` and the ``(n_test, n_train)``
        kernel with the training points in ``transform``; works with
        ``n_components < n``).
    gamma : float, default=None
        Kernel scale; None means ``1 / n_features``.
    coef0 : float, default=None
        Polynomial kernel constant; None means 1.
    degree : float, default=None
        Polynomial kernel degree; None means 3.
    kernel_params : dict, default=None
        Further kernel parameters.
    n_components : int >= 1, default=100
        Number of columns (features). Capped at ``n_samples`` with a warning.
    sampler : {"squeak", "ink", "exact", "uniform"}, default="squeak"
        How the RLS are estimated; "uniform" samples as ``Nystroem`` does.
    gamma_reg : float > 0 or "auto", default="auto"
        RLS regularisation gamma (see :class:`SQUEAK`); "auto" matches it to the
        budget (step 1).
    epsilon : float in (0, 1), default=0.5
        Accuracy parameter of the SQUEAK / INK samplers.
    qbar : int >= 1, default=2
        Oversampling of the budget: ``gamma_reg="auto"`` makes
        ``d_eff(gamma_reg_) = n_components / qbar``; 2 keeps ``d_eff`` at half the
        budget, where RLS sampling pays. The SQUEAK / INK samplers estimate the scores
        with ``max(qbar, 4)`` copies (with fewer, a dictionary can die out on large data).
    random_state : int, RandomState instance or None, default=None
        Seeds the pilot, the sampler and the column draw.
    n_jobs : int or None, default=None
        Passed to SQUEAK.
    backend : {"auto", "numpy", "numba", "cupy"} or None, default=None
        Engine for the kernel evaluations; resolved in ``fit`` into ``backend_``.
    verbose : int, default=0
        0: silent; >= 1: what ``fit`` will do before it starts, then one line per stage
        (regulariser, scores, columns) with its time; 2 also SQUEAK's blocks.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        The sampled training points (rows of the kernel matrix when precomputed).
    component_indices_ : ndarray of shape (n_components,), int64
        Their training indices, ascending.
    component_weights_ : ndarray of shape (n_components,)
        The column weights ``1 / pi_i`` (``n / n_components`` for "uniform"; for a
        repeated point, its number of copies over its inclusion probability, shared by
        its drawn copies): ``sum_i w_i f(x_i)`` estimates ``sum_j f(x_j)`` without bias.
    normalization_ : ndarray of shape (n_components, n_components)
        ``(W K_CC W)^{+1/2} W``: features are ``k(X, components_) @ normalization_.T``.
    gamma_reg_ : float or None
        The regulariser used (None for "uniform").
    leverage_scores_ : ndarray of shape (n_samples,) or None
        The sampler's RLS estimates, at most 1 (None for "uniform").
    effective_dim_ : float or None
        Their sum, the estimate of ``d_eff(gamma_reg_)`` (None for "uniform").
    backend_ : str
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Only when ``X`` has string column names.

    Raises
    ------
    ValueError
        In ``fit``: NaN/inf, fewer than 2 samples, an unknown ``sampler``,
        ``n_components < 1``, ``gamma_reg <= 0``, ``epsilon`` outside (0, 1),
        ``qbar < 1``, a precomputed matrix that is not square symmetric PSD,
        ``gamma``, ``degree`` or ``coef0`` given with a callable or precomputed kernel
        (as scikit-learn's ``Nystroem``).
    MemoryError
        With ``sampler="exact"``, when the dense ``n x n`` matrix is far over
        ``working_memory`` (see :func:`ridge_leverage_scores`).

    See Also
    --------
    sklearn.kernel_approximation.Nystroem : uniform column sampling.
    SQUEAK : the RLS sampler.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.linear_model import RidgeClassifier
    >>> from sklearn.pipeline import make_pipeline
    >>> from kernelkit.leverage import RLSNystroem
    >>> X, y = load_digits(return_X_y=True)
    >>> model = make_pipeline(RLSNystroem(gamma=1e-3, n_components=300, random_state=0),
    ...                       RidgeClassifier(alpha=1e-3)).fit(X[:1200], y[:1200])
    >>> model.score(X[1200:], y[1200:]) > 0.9
    True
    """

    def __init__(self, kernel="rbf", *, gamma=None, coef0=None, degree=None, kernel_params=None,
                 n_components=100, sampler="squeak", gamma_reg="auto", epsilon=0.5, qbar=2,
                 random_state=None, n_jobs=None, backend=None, verbose=0):
        self.kernel = kernel
        self.gamma = gamma
        self.coef0 = coef0
        self.degree = degree
        self.kernel_params = kernel_params
        self.n_components = n_components
        self.sampler = sampler
        self.gamma_reg = gamma_reg
        self.epsilon = epsilon
        self.qbar = qbar
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.backend = backend
        self.verbose = verbose

    _precomputed = SQUEAK._precomputed

    @atomic
    def fit(self, X, y=None):
        """Estimate the RLS, sample and weight the columns, build the feature map.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data (the kernel matrix when ``kernel="precomputed"``).
        y : None
            Ignored.

        Returns
        -------
        self : object
        """
        if not isinstance(self.kernel, str) or is_precomputed(self.kernel):
            given = [p for p in ("gamma", "coef0", "degree") if getattr(self, p) is not None]
            if given:  # scikit-learn's Nystroem raises the same error
                raise ValueError(f"Don't pass gamma, coef0 or degree to Nystroem (RLSNystroem) "
                                 f"if using a callable or precomputed kernel (got {given}); "
                                 "pass the callable's parameters as kernel_params.")
        if not isinstance(self.sampler, str) or self.sampler not in _SAMPLERS:
            raise ValueError(f"sampler must be one of {_SAMPLERS}, got {self.sampler!r}.")
        m = check_scalar_param(self.n_components, "n_components", low=1, low_inclusive=True,
                               integer=True)
        eps = _check_epsilon(self.epsilon)
        _resolve_qbar(self.qbar, 2, eps, 0.1)  # parameters before data
        auto = isinstance(self.gamma_reg, str) and self.gamma_reg == "auto"
        gamma_reg = None if auto else _check_gamma_reg(self.gamma_reg)
        progress = Progress(self, check_verbose(self.verbose))
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2)
        n = X.shape[0]
        if m > n:
            warnings.warn("n_components > n_samples. This is not possible.\nn_components was "
                          "set to n_samples, which results in inefficient evaluation of the "
                          "full kernel.", stacklevel=3)
            m = n
        qbar = _resolve_qbar(self.qbar, n, eps, 0.1)
        if self.sampler == "exact":  # before the pilot's kernel blocks
            _check_dense_size(n, _EXACT_CALLER)
        self.backend_ = resolve_backend(self.backend, X)
        kern, pts = _make_eval(self, X, kernel_params_default=(3, 1))
        rs = check_random_state(self.random_state)
        progress(f"n={n}: {m} columns by {self.sampler} sampling"
                 + ("" if self.sampler == "uniform" else ", from ridge leverage scores"
                    + (" at a regulariser matched to d_eff = m / qbar" if auto else ""))
                 + f", then the {m} x {m} kernel's eigendecomposition (~{flops(9 * m ** 3)})")
        check_kernel_scale(kern.op, X, type(self).__name__)

        if self.sampler == "uniform":
            idx = np.sort(rs.permutation(n)[:m])
            weights = np.full(m, n / m)
            scores = None
        else:
            share = 1.0
            if auto:  # beyond the numerical rank, the rest of the budget goes uniformly
                gamma_reg, d_reached = _match_gamma_reg(kern, pts, n, m / qbar, rs)
                share = min(1.0, qbar * d_reached / m)
                progress.done("regulariser", gamma_reg=gamma_reg)
            scores = self._scores(kern, pts, n, gamma_reg, eps, max(qbar, _MIN_SAMPLER_QBAR),
                                  int(rs.randint(0, 2**31 - 1)), progress)
            progress.done("leverage scores", effective_dim=float(scores.sum()))
            idx, weights = _draw_columns(scores, m, X, rs, share)

        comp_pts = _take(pts, idx)
        sw = np.sqrt(weights / weights.max())  # the scale of W cancels in the features
        B = sw[:, None] * kern(comp_pts) * sw[None, :]
        with _blas_for(m):
            lam, V = linalg.eigh(B, check_finite=False)
        tol = max(m, 1) * np.finfo(np.float64).eps * max(float(lam.max()), 0.0)
        keep = lam > tol
        if not np.any(keep):
            raise ValueError("the kernel matrix of the sampled columns is zero; check the "
                             "kernel and its parameters.")
        Vk = V[:, keep]
        self.normalization_ = (Vk / np.sqrt(lam[keep])) @ Vk.T * sw[None, :]
        progress.done("columns and feature map", rank=int(keep.sum()))
        self.gamma_reg_ = None if scores is None else float(gamma_reg)
        self.leverage_scores_ = scores
        self.effective_dim_ = None if scores is None else float(scores.sum())
        self.component_indices_ = idx
        self.component_weights_ = weights
        self.components_ = X[idx]
        self._n_features_out = m
        return self

    def _scores(self, kern, pts, n, gamma_reg, eps, qbar, seed, progress=None):
        """Every point's RLS estimate in [0, 1] from the chosen sampler."""
        if self.sampler == "exact":
            return _exact_scores(kern, pts, gamma_reg, _EXACT_CALLER)
        if self.sampler == "squeak":
            d = _run_squeak(kern, pts, n, gamma_reg, eps, qbar, 1, None, self.n_jobs, seed,
                            self.backend_, progress)
        else:
            d, _ = _ink_run(None, kern, pts, 0, gamma_reg, eps, qbar, seed, self.backend_)
        scores = _partition_scores(d, kern, pts, gamma_reg, qbar)
        scores = _repair(d, kern, pts, scores, gamma_reg, eps, qbar, seed + 1, self.backend_)[1]
        return np.minimum(scores, 1.0)  # a leverage score is at most 1

    def transform(self, X):
        """Nyström features ``k(X, components_) @ normalization_.T``, computed blockwise.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Data (for a precomputed kernel: the kernel between ``X`` and the training
            points, shape ``(n_samples, n_train)``).

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_components), float64
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        if self._precomputed():
            return X[:, self.component_indices_] @ self.normalization_.T
        op = _make_eval(self, X, kernel_params_default=(3, 1))[0].op
        out = op.matmul(X, self.components_, self.normalization_.T)
        return np.asarray(op.engine.to_host(out), dtype=np.float64)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self._precomputed()
        return tags

