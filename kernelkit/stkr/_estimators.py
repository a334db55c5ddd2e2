"""STKRRegressor and STKRClassifier: spectrally transformed kernel regression.

Zhai, Pukdee, Jin, Balcan & Ravikumar, "Spectrally Transformed Kernel Regression",
ICLR 2024 (arXiv:2402.00645).
"""

import numpy as np
from sklearn.base import MultiOutputMixin, RegressorMixin
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils import check_array
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import assert_all_finite, column_or_1d

from ..utils._calibration import calibration_folds, predict_log_proba_from
from ..utils._class_weight import check_class_weight, row_weights
from ..utils._classes import CALIBRATION_ATTR_DOC, CALIBRATION_DOC, OneVsAllClassifierMixin
from ..utils._state import atomic
from ._base import _STKRBase
from ._labels import labeled_rows

_PARAMS_DOC = """
    transformation : {"inverse_laplacian", "polynomial", "kpca", "identity"}, \
default="inverse_laplacian"
        The spectral transformation ``s`` of the base kernel's eigenvalues ``mu``,
        measured in units of the largest one (``mu in [0, 1]``; this makes ``eta`` and the
        polynomial scale-free and leaves ``s(mu) = mu`` the base kernel itself):

        - ``"inverse_laplacian"``: ``s(mu)^-1 = mu^-1 - eta`` (the regularised Laplacian
          of the paper's Example 1; the paper's eta is ours over the top eigenvalue of the
          empirical integral operator), solved by STKR-Prop (Algorithm 2);
        - ``"polynomial"``: ``s(mu) = sum_p pi_p mu^p`` (``power`` or ``coefs``), solved
          by STKR-Prop (Algorithm 1);
        - ``"kpca"``: ridge on the top ``n_components`` kernel-PCA eigenfunctions of all
          training points (the transform-agnostic STKR of the paper's Sec. 3.2);
        - ``"identity"``: ``s(mu) = mu``, kernel ridge on the labeled points only
          (``alpha = n_labeled * beta``; the unlabeled rows are ignored).
    eta : float in [0, 1), default=0.99
        Inverse-Laplacian strength: how far label information propagates through the
        unlabeled points (``eta = 0`` is the base kernel; towards 1, the top eigenvector
        dominates).
    power : int >= 1, default=4
        ``s(mu) = mu^power`` for ``transformation="polynomial"`` (ignored when ``coefs`` is
        given); each solver step costs ``power`` kernel products.
    coefs : array-like of shape (q,), default=None
        Non-negative ``(pi_1, ..., pi_q)`` of ``s(mu) = sum_p pi_p mu^p``.
    n_components : int >= 1, default=64
        Number of kernel-PCA eigenfunctions for ``transformation="kpca"``.
    beta : float > 0, default=1e-3
        Ridge penalty per labeled sample (the paper's ``beta_n``): the labeled system
        is ``(K_s[L, L] + n_labeled * beta * I) alpha = y``.
    kernel : str, Kernel or callable, default="knn"
        Base kernel: ``"knn"`` (the default: it captures clusters and manifolds that a
        global Gaussian kernel blurs, and costs linear time per step), a kernelkit
        kernel name ({names}), a
        :class:`kernelkit.kernels.Kernel`, a callable ``f(X, Y)``, ``"precomputed"``
        (``X`` is then the kernel matrix of all training points in ``fit``, and kernel
        values against them in ``predict``), or ``"knn"``: the sparse symmetric
        k-nearest-neighbour graph normalised as in label propagation, ``(I + D^-1/2 W
        D^-1/2) / 2``, whose products cost ``O(n_samples * n_neighbors)`` (the graph is
        built by a k-d tree up to 16 features, else by float32 Gram tiles, and decided
        on exact distances: the graph of all pairwise distances); exactly
        repeated rows count as one location (one value, one neighbour), and a new point
        stands in for its nearest training point (no jump next to training rows).
        Sparse ``X`` (CSR/CSC/COO) is taken by ``"knn"``, ``"precomputed"``, the
        kernels that scikit-learn evaluates on sparse rows and callables.
    gamma : float, default=None
        Kernel scale for rbf, laplacian, matern and polynomial; None means
        ``1 / n_features``.
    degree : float, default=3
        Degree of the polynomial base kernel.
    coef0 : float, default=1
        Constant term of the polynomial base kernel.
    kernel_params : dict, default=None
        Further parameters of the named kernel or of the callable.
    n_neighbors : int >= 1, default=7
        Neighbours per point for ``kernel="knn"``.
    solver : {"cg", "richardson"}, default="cg"
        Iteration of STKR-Prop: conjugate gradients (polynomial: on the symmetric
        positive definite labeled system; inverse Laplacian: in the inner product of
        the kernel matrix, where its system is self-adjoint and positive) or the
        paper's Richardson iteration with the step from the spectrum bounds. Both cost
        the same per step; CG needs several times fewer steps (see the user guide).
    tol : float > 0, default=1e-4
        Stop when the relative residual falls below ``tol``.
    max_iter : int >= 1, default=1000
        Maximum number of solver steps; a :class:`~sklearn.exceptions.ConvergenceWarning`
        is raised when it is reached first.
    cache_size : float >= 0, default=1024
        MiB: when the dense base kernel matrix fits, it is computed once (blockwise) and
        kept during ``fit``; otherwise every product recomputes it blockwise in
        ``working_memory``. Not used by ``"knn"`` and ``"precomputed"``.
    backend : {"auto", "numpy", "numba", "cupy"} or None, default=None
        Engine computing the base kernel; None follows :func:`kernelkit.set_config`.
        For ``"knn"``: the engine of the neighbour search's selection pass (Numba when
        it resolves to ``"numba"``, else NumPy; the graph is the same either way).
    random_state : int, RandomState instance or None, default=None
        Seeds the start vector of the Lanczos eigen-solver (top eigenvalue, kpca).
    verbose : int, default=0
        1: one line per fit; 2: also the residual at every solver step."""

_ATTRS_DOC = """
    dual_coef_ : ndarray of shape (n_samples, n_targets)
        ``theta`` of the inductive predictor ``f(x) = k(x, X_fit_) theta``.
    X_fit_ : ndarray of shape (n_samples, n_features)
        All training rows (labeled and unlabeled), float64.
    labeled_indices_ : ndarray of shape (n_labeled,)
        Rows of ``X_fit_`` that carried a label.
    lambda_max_ : float or None
        Largest eigenvalue of the base kernel matrix (the unit of ``mu``); None for
        ``"kpca"`` and ``"identity"``.
    n_iter_ : int
        Solver steps taken (0 for the direct ``"kpca"`` and ``"identity"``).
    residuals_ : ndarray of shape (`n_iter_` + 1,)
        Relative residual after each step (the convergence history).
    n_matvec_ : int
        Number of products of the base kernel matrix with a vector during ``fit``.
    n_components_ : int
        Kernel-PCA eigenfunctions used (``"kpca"`` only).
    knn_radius2_, knn_degree_ : ndarray of shape (n_samples,)
        Squared distance to the k-th nearest other location and degree of each
        training point (``"knn"`` only; used by ``predict``), the distance in units of
        ``2**knn_scale_exp_``.
    knn_location_ : ndarray of int, shape (n_samples,)
        Location of each training row: exactly equal rows share one (``"knn"`` only).
    knn_scale_exp_ : int
        ``X`` is scaled by ``2**-knn_scale_exp_`` (exact) to ``max |X| < 1`` before
        distances are taken, so that the graph is the same at any scale (``"knn"``).
    knn_offset_ : ndarray of shape (n_features,) or None
        The mean training row, subtracted from the rows (and from queries) before
        distances are taken where it lies farther from the origin than any row from it,
        so that the graph is the same at any offset (``"knn"``); None otherwise.
    backend_ : str
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Only when ``X`` has string column names."""


class STKRRegressor(MultiOutputMixin, RegressorMixin, _STKRBase):
    """Spectrally transformed kernel regression: kernel ridge that learns from unlabeled data.

    STKR regresses with the transformed kernel ``K_s = sum_i s(lambda_i) psi_i psi_i^T``
    whose eigenpairs ``(lambda_i, psi_i)`` are those of the base kernel's integral
    operator on the data distribution, estimated from all training rows, labeled or
    not (Zhai, Pukdee, Jin, Balcan & Ravikumar, "Spectrally Transformed Kernel
    Regression", ICLR 2024, arXiv:2402.00645). A transform ``s`` that grows faster
    than ``lambda`` favours functions smooth along the data's clusters and manifolds.

    Semi-supervised input as :mod:`sklearn.semi_supervised` spells it: rows whose
    target is NaN are unlabeled; every row passed to ``fit`` serves as unlabeled data.
    The fit is the paper's STKR-Prop: only products of the base kernel matrix with
    vectors, computed blockwise by the kernel engine (or sparse, ``kernel="knn"``);
    no matrix of the transformed kernel and no inverse is formed. ``predict`` is
    inductive (``f(x) = k(x, X_fit_) theta``) and equals the transductive fit at the
    training points.

    Parameters
    ----------
    {params}

    Attributes
    ----------
    transduction_ : ndarray of shape (n_samples,) or (n_samples, n_targets)
        Predictions at every training row (labeled and unlabeled).
    {attrs}

    Raises
    ------
    ValueError
        In ``fit``: NaN/inf in ``X``; no labeled row; a row with only some targets NaN;
        ``power < 1``; ``eta`` outside ``[0, 1)``; ``beta <= 0``; an unknown transform,
        solver, kernel or backend; a callable kernel whose matrix on the training
        rows is not symmetric.

    See Also
    --------
    STKRClassifier : The classifier (one-vs-all on one-hot targets).
    kernelkit.KernelRidge : Kernel ridge regression on labeled data only.

    Notes
    -----
    Cost per solver step: ``q`` (polynomial degree) or 1 (inverse Laplacian) products
    with the ``N x N`` base kernel matrix, ``O(N^2 d)`` blockwise (or ``O(N^2)`` when
    cached), ``O(N k)`` for the kNN graph; memory ``O(N)`` beyond the kernel blocks.
    ``score`` ignores unlabeled rows, so that :class:`~sklearn.model_selection.GridSearchCV`
    with :class:`kernelkit.stkr.SemiSupervisedKFold` tunes on the labeled rows only.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelkit.stkr import STKRRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-3, 3, (200, 1)); y = np.sin(X[:, 0])
    >>> y_semi = np.full(200, np.nan); y_semi[:20] = y[:20]
    >>> model = STKRRegressor(kernel="rbf", gamma=1.0).fit(X, y_semi)
    >>> model.transduction_.shape
    (200,)
    """

    def __init__(self, transformation="inverse_laplacian", *, eta=0.99, power=4, coefs=None,
                 n_components=64, beta=1e-3, kernel="knn", gamma=None, degree=3, coef0=1,
                 kernel_params=None, n_neighbors=7, solver="cg", tol=1e-4, max_iter=1000,
                 cache_size=1024, backend=None, random_state=None, verbose=0):
        self.transformation = transformation
        self.eta = eta
        self.power = power
        self.coefs = coefs
        self.n_components = n_components
        self.beta = beta
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.n_neighbors = n_neighbors
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.cache_size = cache_size
        self.backend = backend
        self.random_state = random_state
        self.verbose = verbose

    @atomic
    def fit(self, X, y, sample_weight=None):
        """Fit on all rows of ``X``; rows with ``y`` NaN are unlabeled.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Labeled and unlabeled rows (``kernel="precomputed"``: the kernel matrix of
            shape (n_samples, n_samples)).
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets; NaN marks an unlabeled row (all its targets NaN).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the labeled rows' squared loss (those of unlabeled
            rows are ignored): the labeled system becomes ``(K_s[L, L] + sum(w) * beta *
            W^-1) alpha = y`` (``beta`` per unit of weight, so an integer weight
            counts as that many copies of the row in the ridge system).

        Returns
        -------
        self : object
            The fitted estimator.

        Raises
        ------
        ValueError
            If ``y`` has no labeled row, infinite values, a partly-NaN row, or a length
            other than ``X``'s; the parameter errors before any of these. A rejected
            call leaves a fitted model as it was.
        """
        coefs = self._check_params()  # parameters before data, as scikit-learn
        X = self._validate_X(X, reset=True)
        _require_y(self, y)
        y = check_array(y, ensure_2d=False, dtype=np.float64, ensure_all_finite="allow-nan",
                        input_name="y")
        if y.ndim > 2 or y.shape[0] != X.shape[0]:
            raise ValueError(f"y must have shape ({X.shape[0]},) or ({X.shape[0]}, "
                             f"n_targets) to match X, got {y.shape}.")
        Y = y.reshape(y.shape[0], -1)
        nan = np.isnan(Y)
        if np.any(nan.any(axis=1) & ~nan.all(axis=1)):
            raise ValueError("y has rows with some targets NaN and others not; an unlabeled "
                             "row must have all its targets NaN.")
        labeled = np.flatnonzero(~nan[:, 0])
        if labeled.size == 0:
            raise ValueError("y has no labeled sample (every target is NaN); STKR needs at "
                             "least one labeled row.")
        w = row_weights(None, y, sample_weight, (), X)
        fitted, _ = self._fit_targets(X, Y[labeled], labeled, coefs,
                                      None if w is None else _positive(w[labeled]))
        self.transduction_ = fitted[:, 0] if y.ndim == 1 else fitted
        self._single_target = y.ndim == 1
        return self

    def predict(self, X):
        """Inductive predictions ``f(x) = k(x, X_fit_) theta``.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            (``kernel="precomputed"``: kernel values of shape (n_queries, n_samples).)

        Returns
        -------
        y_pred : ndarray of shape (n_queries,) or (n_queries, n_targets), float64
            Predictions at the rows of ``X``.
        """
        out = self._decision(X)
        return out[:, 0] if self._single_target else out

    def score(self, X, y, sample_weight=None):
        """R^2 on the labeled rows only (rows with ``y`` NaN are ignored).

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Query rows.
        y : array-like of shape (n_queries,) or (n_queries, n_targets)
            Targets; NaN rows are skipped.
        sample_weight : array-like of shape (n_queries,), default=None
            Weights of the rows.

        Returns
        -------
        score : float
            NaN when no row is labeled.
        """
        y = check_array(y, ensure_2d=False, dtype=np.float64, ensure_all_finite="allow-nan",
                        input_name="y")
        keep = labeled_rows(y, classification=False)
        if not keep.any():
            return float("nan")
        sw = None if sample_weight is None else np.asarray(sample_weight)[keep]
        return r2_score(y[keep], self.predict(_take(X, keep)), sample_weight=sw)


class STKRClassifier(OneVsAllClassifierMixin, _STKRBase):
    """Spectrally transformed kernel classifier: one-vs-all STKR on one-hot targets.

    :class:`STKRRegressor` on the one-hot encoding of the classes; the predicted class
    is the largest score. Unlabeled rows carry ``y = -1`` as in
    :mod:`sklearn.semi_supervised`, or NaN in a float ``y`` (Zhai et al., "Spectrally Transformed Kernel
    Regression", ICLR 2024, arXiv:2402.00645).

    Parameters
    ----------
    {params}
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes in the labeled rows' squared loss, as scikit-learn's
        classifiers take them (``"balanced"`` counts the labeled rows), multiplied
        with ``sample_weight``. A class that is not among the labels is a ValueError.
    {calibration}
        Out-of-sample values: the model is refitted 5 times (fewer when there are
        fewer labeled rows), each time with one fold of the labeled rows unlabeled
        (stratified; shuffled by ``random_state``, in row order when it is None),
        on the same base kernel: each labeled row's decision value
        comes from the fit that did not see its label (the STKR solve is linear in
        the labels, so this costs five more solves and no kernel work; for the
        inverse Laplacian they run in one batch with the fit, sharing its products
        with the base kernel, each stopping on its own residual).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The labels seen (``-1`` excluded).
    transduction_ : ndarray of shape (n_samples,)
        Labels assigned to every training row (as
        :class:`~sklearn.semi_supervised.LabelSpreading`'s).
    label_distributions_ : ndarray of shape (n_samples, n_classes) or None
        The transductive probabilities of every training row: the calibrated map
        of ``predict_proba`` applied to the fitted scores, rows normalised (as
        :class:`~sklearn.semi_supervised.LabelSpreading`'s attribute); equal to
        ``predict_proba`` on the training rows. None when ``calibration=None``.
    {calibration_attr}
    {attrs}

    Raises
    ------
    ValueError
        In ``fit``: ``y`` continuous or of another non-class type; no labeled row; the
        parameter errors of :class:`STKRRegressor`.

    See Also
    --------
    STKRRegressor : The regressor.
    sklearn.semi_supervised.LabelSpreading : Transductive graph method.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from kernelkit.stkr import STKRClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> X = X[:500] / 16; y_semi = y[:500].copy(); y_semi[50:] = -1
    >>> clf = STKRClassifier().fit(X, y_semi)
    >>> float((clf.transduction_[50:] == y[50:500]).mean()) > 0.8
    True
    """

    def __init__(self, transformation="inverse_laplacian", *, eta=0.99, power=4, coefs=None,
                 n_components=64, beta=1e-3, kernel="knn", gamma=None, degree=3, coef0=1,
                 kernel_params=None, n_neighbors=7, solver="cg", tol=1e-4, max_iter=1000,
                 cache_size=1024, backend=None, random_state=None, verbose=0,
                 class_weight=None, calibration="auto"):
        STKRRegressor.__init__(
            self, transformation, eta=eta, power=power, coefs=coefs,
            n_components=n_components, beta=beta, kernel=kernel, gamma=gamma, degree=degree,
            coef0=coef0, kernel_params=kernel_params, n_neighbors=n_neighbors, solver=solver,
            tol=tol, max_iter=max_iter, cache_size=cache_size, backend=backend,
            random_state=random_state, verbose=verbose)
        self.class_weight = class_weight
        self.calibration = calibration

    @atomic
    def fit(self, X, y, sample_weight=None):
        """Fit on all rows of ``X``; rows with ``y == -1`` (or NaN) are unlabeled.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Labeled and unlabeled rows (``kernel="precomputed"``: the kernel matrix).
        y : array-like of shape (n_samples,)
            Class labels of any type; ``-1`` (or NaN in a float ``y``) marks an
            unlabeled row.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the labeled rows (see :class:`STKRRegressor`),
            multiplied by ``class_weight``; they also weight the calibration.

        Returns
        -------
        self : object
            The fitted estimator.

        Raises
        ------
        ValueError
            If ``y`` is not a vector of class labels, has no labeled row, infinite
            values, a single class among the labeled rows, or a length other than
            ``X``'s; the parameter errors before any of these. A rejected call leaves
            a fitted model as it was.
        """
        coefs = self._check_params()  # parameters before data, as scikit-learn
        calibrate = self._check_calibration()
        check_class_weight(self.class_weight)
        X = self._validate_X(X, reset=True)
        _require_y(self, y)
        y = _check_class_targets(y, X.shape[0])
        labeled = np.flatnonzero(labeled_rows(y, classification=True))
        if labeled.size == 0:
            raise ValueError("y has no labeled sample (every entry is -1, the unlabeled "
                             "marker); STKR needs at least one labeled row.")
        classes, idx = np.unique(y[labeled], return_inverse=True)
        if classes.size < 2:  # as scikit-learn's classifiers
            raise ValueError(f"The number of classes has to be greater than one; got 1 class "
                             f"({classes[0]!r}) among the labeled rows of y.")
        if sample_weight is not None:
            sample_weight = row_weights(None, y, sample_weight, (), X)[labeled]
        w = row_weights(self.class_weight, y[labeled], sample_weight, classes)
        w = None if w is None else _positive(w)
        Y = np.zeros((labeled.size, classes.size))
        Y[np.arange(labeled.size), idx] = 1.0
        folds = calibration_folds(idx, self.random_state) if calibrate else None
        fitted, oos = self._fit_targets(X, Y, labeled, coefs, w, folds)
        self.classes_ = classes
        self.transduction_ = classes[fitted.argmax(axis=1)]
        beta, slopes = (None, None) if oos is None else \
            self._calibrate(self._layout(oos), idx, w)
        self.calibration_temperature_, self.calibration_slopes_ = beta, slopes
        self.label_distributions_ = None if beta is None else \
            np.exp(predict_log_proba_from(self._layout(fitted), beta, slopes))
        return self

    def _layout(self, s):
        """Scores (n, n_classes) in ``decision_function``'s layout."""
        return s[:, 1] - s[:, 0] if s.shape[1] == 2 else s

    def decision_function(self, X):
        """One-vs-all scores (two classes: second minus first).

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Query rows.

        Returns
        -------
        scores : ndarray of shape (n_queries,) for two classes, else (n_queries, n_classes)
            One-vs-all regression scores.
        """
        return self._layout(self._decision(X))

    def score(self, X, y, sample_weight=None):
        """Accuracy on the labeled rows only (rows with ``y == -1`` are ignored).

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Query rows.
        y : array-like of shape (n_queries,)
            True labels; rows with ``-1`` are skipped.
        sample_weight : array-like of shape (n_queries,), default=None
            Weights of the rows.

        Returns
        -------
        score : float
            NaN when no row is labeled.
        """
        y = np.asarray(y)
        keep = labeled_rows(y, classification=True)
        if not keep.any():
            return float("nan")
        sw = None if sample_weight is None else np.asarray(sample_weight)[keep]
        return accuracy_score(y[keep], self.predict(_take(X, keep)), sample_weight=sw)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags


def _require_y(est, y):
    if y is None:
        raise ValueError(f"{type(est).__name__} requires y to be passed, but the target y "
                         "is None (mark unlabeled rows with NaN or -1).")


def _take(X, rows):
    return X.iloc[rows] if hasattr(X, "iloc") else np.asarray(X)[rows]


def _positive(w):
    if not np.sum(w) > 0:
        raise ValueError("sample_weight (times class_weight) is zero on every labeled row; "
                         "at least one labeled row needs a positive weight.")
    return w


def _check_class_targets(y, n):
    y = np.asarray(y)
    if y.dtype.byteorder == ">" or (y.dtype.byteorder == "<" and np.little_endian is False):
        y = y.astype(y.dtype.newbyteorder("="))  # classes_ in native byte order
    if y.ndim == 2 and y.shape[1] == 1:
        y = column_or_1d(y, warn=True)
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"y must be a 1-D array of {n} class labels (-1: unlabeled), got "
                         f"shape {y.shape}.")
    lab = labeled_rows(y, classification=True)
    if y.dtype.kind == "f":  # NaN marks an unlabeled row; inf is no label
        assert_all_finite(y[lab], input_name="y")
    kind = type_of_target(y[lab], input_name="y") if lab.any() else "binary"
    if kind not in ("binary", "multiclass"):
        raise ValueError(f"Unknown label type {kind!r} for y: STKRClassifier needs class "
                         "labels (integers or strings; -1 marks an unlabeled row); use "
                         "STKRRegressor for continuous targets.")
    check_classification_targets(y[lab])
    return y


_names = "rbf, laplacian, matern, polynomial, linear, cosine, ntk, nngp"
for _cls in (STKRRegressor, STKRClassifier):
    _params = _PARAMS_DOC.replace("{names}", _names).strip()
    _cls.__doc__ = (_cls.__doc__.replace("{params}", _params)
                    .replace("{attrs}", _ATTRS_DOC.strip())
                    .replace("{calibration}", CALIBRATION_DOC)
                    .replace("{calibration_attr}", CALIBRATION_ATTR_DOC.strip()))
del _cls, _names, _params
