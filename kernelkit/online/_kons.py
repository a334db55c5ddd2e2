"""KONS, Sketched-KONS and PROS-N-KONS: second-order online kernel learning.

Calandriello, Lazaric & Valko, "Second-Order Kernel Online Convex Optimization with
Adaptive Sketching", ICML 2017 (KONS, Algorithm 1; Sketched-KONS with the KORS
sampler, Algorithms 2-3), and "Efficient Second-Order Online Kernel Learning with
Adaptive Embedding", NeurIPS 2017 (PROS-N-KONS).
"""

import numpy as np
from scipy.linalg import solve_triangular
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils._available_if import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ..backend import resolve_backend
from ..kernels import is_precomputed, resolve_kernel
from ..utils._classes import OneVsAllClassifierMixin
from ..utils._dispatch import select_loops
from ..utils._threads import single_blas_thread
from ..utils._validation import check_scalar_param
from ..utils._verbose import Progress, check_verbose

_METHODS = {"kons": 0, "sketched": 1, "pros-n-kons": 2}
_LOSSES = {"squared": 0, "logistic": 1, "squared_hinge": 2}
_FORGETTING = {None: 0, "discount": 1, "restart": 2}
_CHUNK = 256  # rows per kernel block: the chunk's own kernel matrix stays small
_TOL = 1e-10  # a point whose residual is below this fraction of k(x, x) is in the span


class _KONSBase(BaseEstimator):
    """Shared state and per-sample loop; subclasses encode the targets."""

    # ---------------------------------------------------------------- parameters
    def _check_params(self):
        if self.method not in _METHODS:
            raise ValueError(f"method must be one of {sorted(_METHODS)}, got {self.method!r}.")
        if self._loss_name() not in _LOSSES:
            raise ValueError(f"loss must be one of {self._allowed_losses()}, got "
                             f"{self._loss_name()!r}.")
        if self.forgetting not in _FORGETTING:
            raise ValueError("forgetting must be None, 'discount' or 'restart', got "
                             f"{self.forgetting!r}.")
        if is_precomputed(self.kernel):
            raise ValueError("kernel='precomputed' cannot be used online: new samples need "
                             "kernel values against the stored atoms; pass a kernel.")
        alpha = check_scalar_param(self.alpha, "alpha", low=0)
        gamma_reg = check_scalar_param(self.gamma_reg, "gamma_reg", low=0)
        eps = check_scalar_param(self.epsilon, "epsilon", low=0, low_inclusive=True)
        beta = check_scalar_param(self.beta, "beta", low=0)
        if isinstance(self.eta, str) and self.eta == "auto":
            eta = -1.0
        else:
            eta = check_scalar_param(self.eta, "eta", low=0)
        C = check_scalar_param(self.C, "C", low=0, allow_none=True)
        memory = check_scalar_param(self.memory, "memory", low=1, low_inclusive=True,
                                    integer=True)
        max_atoms = check_scalar_param(self.max_atoms, "max_atoms", low=1, low_inclusive=True,
                                       integer=True, allow_none=True)
        check_verbose(self.verbose)
        loss = _LOSSES[self._loss_name()]
        iparams = np.array([_METHODS[self.method], loss, _FORGETTING[self.forgetting], memory,
                            np.iinfo(np.int64).max if max_atoms is None else max_atoms,
                            int(loss == 0 and eta < 0)], dtype=np.int64)
        fparams = np.array([eta, alpha, gamma_reg, eps, beta, np.inf if C is None else C,
                            1.0 - 1.0 / memory, _TOL])
        return iparams, fparams

    # ---------------------------------------------------------------- state
    def _init_state(self, n_features, n_out, iparams):
        self.backend_ = resolve_backend(self.backend)
        self._op = resolve_kernel(self.kernel, self.gamma, self.degree, self.coef0,
                                  self.kernel_params, n_features=n_features,
                                  backend=self.backend_)
        self._rs = check_random_state(self.random_state)
        n_a = 1 if iparams[5] else n_out
        self._st = {
            "atoms": np.empty((0, n_features)), "L": np.zeros((0, 0)), "Lw": np.zeros((0, 0)),
            "sw": np.zeros(0), "W": np.zeros((0, n_out)), "Ainv": np.zeros((n_a, 0, 0)),
            "istate": np.zeros(4, dtype=np.int64), "fstate": np.zeros(1),
        }
        self.n_features_in_ = n_features
        self._sync()

    def _ensure_capacity(self, need):
        st = self._st
        cap = st["L"].shape[0]
        if need <= cap:
            return
        new = max(need, 2 * cap, 16)
        m = int(st["istate"][0])
        grown = {
            "atoms": np.empty((new, st["atoms"].shape[1])), "L": np.zeros((new, new)),
            "Lw": np.zeros((new, new)), "sw": np.zeros(new),
            "W": np.zeros((new, st["W"].shape[1])),
            "Ainv": np.zeros((st["Ainv"].shape[0], new, new)),
        }
        grown["atoms"][:m] = st["atoms"][:m]
        grown["L"][:m, :m] = st["L"][:m, :m]
        grown["Lw"][:m, :m] = st["Lw"][:m, :m]
        grown["sw"][:m] = st["sw"][:m]
        grown["W"][:m] = st["W"][:m]
        grown["Ainv"][:, :m, :m] = st["Ainv"][:, :m, :m]
        st.update(grown)

    def _sync(self):
        ist = self._st["istate"]
        self.n_atoms_ = int(ist[0])
        self.n_seen_ = int(ist[1])
        self.n_restarts_ = int(ist[3])
        self.cumulative_loss_ = float(self._st["fstate"][0])

    @property
    def atoms_(self):
        """ndarray of shape (`n_atoms_`, `n_features_in_`): the stored samples (a view)."""
        check_is_fitted(self)
        return self._st["atoms"][: self.n_atoms_]

    # ---------------------------------------------------------------- the loop
    def _learn(self, X, Y, iparams, fparams):
        """One pass over ``X`` in order; returns the prequential decision values.

        All-or-nothing: on any error the state is restored as it was before the call.
        """
        n = X.shape[0]
        st = self._st
        pred = np.empty((n, st["W"].shape[1]))
        backup = None
        if n > _CHUNK:  # later chunks' kernel blocks are computed after earlier updates
            backup = ({k: v.copy() for k, v in st.items()}, self._rs.get_state())
        loops = select_loops(__package__, self.backend_)
        progress = Progress(self, self.verbose)
        try:
            for r0 in range(0, n, _CHUNK):
                Xs = X[r0:r0 + _CHUNK]
                m = int(st["istate"][0])
                self._ensure_capacity(min(m + Xs.shape[0], int(iparams[4])))
                if Xs.shape[0] == 1:  # one kernel call: the sample sits in the free slot
                    st["atoms"][m] = Xs[0]
                    row = self._op.block_host(Xs, st["atoms"][:m + 1])
                    Kc, Kss = row[:, :m], row[:, m:]
                else:
                    Kc = (self._op.block_host(Xs, st["atoms"][:m]) if m
                          else np.empty((Xs.shape[0], 0)))
                    Kss = self._op.block_host(Xs)
                u = self._rs.random_sample(Xs.shape[0])
                new = np.empty(Xs.shape[0], dtype=np.int64)
                with single_blas_thread():
                    n_add = loops.run_chunk(
                        np.ascontiguousarray(Kc), Kss, Y[r0:r0 + _CHUNK], u, st["L"], st["Lw"],
                        st["sw"], st["W"], st["Ainv"], st["istate"], st["fstate"], new,
                        pred[r0:r0 + _CHUNK], iparams, fparams)
                if n_add:
                    st["atoms"][m:m + n_add] = Xs[new[:n_add]]
                if not np.isfinite(st["fstate"][0]):
                    raise ValueError("the cumulative loss became non-finite; the targets or "
                                     "the kernel values are too large: rescale X and y.")
                if (r0 // _CHUNK) % 20 == 19:
                    progress("samples", int(st["istate"][1]), None, level=2,
                             n_atoms=int(st["istate"][0]), loss=float(st["fstate"][0]))
        except BaseException:
            if backup is not None:
                st.clear()
                st.update(backup[0])
                self._rs.set_state(backup[1])
            raise
        progress("pass", samples=n, n_seen=int(st["istate"][1]), n_atoms=int(st["istate"][0]),
                 cumulative_loss=float(st["fstate"][0]))
        self._sync()
        return pred

    def _decision(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        st = self._st
        m = int(st["istate"][0])
        out = np.zeros((X.shape[0], st["W"].shape[1]))
        if m:
            rows = 2048
            for r0 in range(0, X.shape[0], rows):
                K = self._op.block_host(X[r0:r0 + rows], st["atoms"][:m])
                Z = solve_triangular(st["L"][:m, :m], K.T, lower=True, check_finite=False)
                out[r0:r0 + rows] = Z.T @ st["W"][:m]
        if self.C is not None:
            np.clip(out, -self.C, self.C, out=out)
        return out

    def _fast_X(self, X):
        """``X`` as-is when it is a finite float64 ndarray of the fitted width, else None."""
        if (type(X) is np.ndarray and X.dtype == np.float64 and X.ndim == 2
                and X.shape[0] >= 1 and X.shape[1] == self.n_features_in_
                and not hasattr(self, "feature_names_in_") and np.isfinite(X).all()):
            return X
        return None

    def partial_fit_predict(self, X, y, **kwargs):
        """Learn from ``(X, y)`` in order and return the prequential decision values.

        Each sample is predicted by the model before it learns from that sample
        (progressive validation), so the returned values measure online performance.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        **kwargs : dict
            ``classes`` for the classifier's first call.

        Returns
        -------
        decision : ndarray of shape (n_samples,) or (n_samples, n_classes), float64
            What ``decision_function`` (classifier) or ``predict`` (regressor) returned
            for each sample just before learning from it.
        """
        pred = self._partial_fit(X, y, **kwargs)
        return pred[:, 0] if pred.shape[1] == 1 else pred

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags


_PARAMS_DOC = """
    method : {{"kons", "sketched", "pros-n-kons"}}, default="sketched"
        ``"kons"``: exact KONS (every sample outside the span of the stored ones
        becomes an atom; ``O(t^2)`` time and memory at step ``t``; the reference for
        short streams). ``"sketched"``: Sketched-KONS, atoms drawn by KORS (online
        ridge-leverage-score sampling) and the Newton step run in their span,
        continued when an atom arrives. ``"pros-n-kons"``: the same dictionary, with
        the learner restarted on the new embedding at each new atom (PROS-N-KONS).
    kernel : str, Kernel or callable, default="rbf"
        A kernelkit kernel name, a :class:`kernelkit.kernels.Kernel` or a callable
        ``f(X, Y)``; ``"precomputed"`` is not possible online.
    gamma : float, default=None
        Kernel scale (rbf, laplacian, matern, polynomial); None means ``1 / n_features``.
    degree, coef0 : float, default=3, 1
        Polynomial kernel parameters.
    kernel_params : dict, default=None
        Further parameters of the named kernel or of the callable.
    alpha : float > 0, default=1.0
        The paper's regulariser ``alpha``: the second-order matrix starts at
        ``alpha I`` (``A_0`` of Algorithm 1). Larger: smaller first steps, smoother fits.
    eta : "auto" or float > 0, default="auto"
        The paper's step sizes ``eta_t`` (``A_t = A_{{t-1}} + eta_t g_t g_t^T``).
        ``"auto"`` takes the loss's local curvature, ``eta_t g_t g_t^T = l''(f_t)
        z_t z_t^T``: for the squared loss this is the largest ``eta_t = sigma_t``
        the paper's curvature condition allows, and KONS becomes kernel recursive
        least squares (online ridge). A number: the fixed ``eta`` of the theorems.
    C : float > 0 or None, default=None
        The paper's feasible set ``|f(x_t)| <= C``: predictions beyond ``C`` are
        projected back in the ``A_{{t-1}}`` norm (Algorithm 1, line 7). None: no bound.
    gamma_reg : float > 0, default=1.0
        KORS's ridge regularisation ``gamma`` (in units of ``k(x, x)``): smaller keeps
        more atoms and a more accurate embedding. Ignored by ``method="kons"``.
    epsilon : float >= 0, default=0.5
        KORS's accuracy ``epsilon``: the sampling probabilities are inflated by
        ``(1 + epsilon)``-accurate leverage-score estimates.
    beta : float > 0, default=1.0
        KORS's oversampling ``beta``: ``p_t = min(beta tau_t, 1)``.
    max_atoms : int >= 1 or None, default=None
        Hard cap on the number of atoms (memory ``O(max_atoms^2)``); None: KORS alone
        bounds it (``O(d_eff(gamma_reg) log^2 t)`` with high probability).
    forgetting : {{None, "discount", "restart"}}, default=None
        For drifting streams. ``"discount"``: ``A_t = lam A_{{t-1}} + ...`` with
        ``lam = 1 - 1 / memory`` (exponentially weighted second-order information;
        directions the stream no longer visits lose certainty up to ``memory / alpha``
        and no further, against the classic wind-up): tracks drift, at the price of
        noisier steps on stationary data. ``"restart"``: reset ``A`` to ``alpha I``
        every ``memory`` samples, keeping the current function: cheaper, coarser.
    memory : int >= 1, default=1000
        Number of recent samples the forgetting keeps (effective window).
    random_state : int, RandomState instance or None, default=None
        Seeds KORS's Bernoulli draws.
    backend : {{"auto", "numpy", "numba", "cupy"}} or None, default=None
        Engine for the kernel blocks; ``"numba"`` (and ``"auto"`` when Numba is
        installed) also runs the per-sample loop compiled. Resolved into ``backend_``.
    verbose : int, default=0
        Progress lines every ~5000 samples of a long call when >= 1."""

_ATTRS_DOC = """
    n_atoms_ : int
        Number of stored atoms (the model's support; bounded by the sketch).
    atoms_ : ndarray of shape (`n_atoms_`, `n_features_in_`)
        The stored samples.
    cumulative_loss_ : float
        Sum of the losses of the prequential predictions (each sample predicted
        before the model learned from it), over all samples seen.
    n_seen_ : int
        Number of samples learned from since the last ``fit``.
    n_restarts_ : int
        Restarts of the learner (PROS-N-KONS's new atoms, ``forgetting="restart"``).
    backend_ : str
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Only when ``X`` has string column names."""

_NOTES_DOC = """
    The model is ``f(x) = w^T z(x)`` with ``z(x) = L^{{-1}} k_D(x)`` the coordinates of
    ``phi(x)`` in an orthonormal basis of the span of the atoms ``D`` (``K_DD = L L^T``).
    Per sample (predict, then update): the KORS draw, the prediction and its
    projection, then the Online Newton Step ``A_t = A_{{t-1}} + eta_t g_t g_t^T``,
    ``w <- w - A_t^{{-1}} g_t`` with ``A^{{-1}}`` kept by Sherman-Morrison. With all
    samples as atoms this is exactly KONS (Algorithm 1): its iterates lie in the span
    of the seen samples, where these coordinates are exact. Sketched-KONS keeps the
    iterate in the span of the KORS dictionary, so that memory is bounded by the
    sketch (the ICML paper's variant sketches ``A`` only and stores every gradient).
    Cost per sample ``O(m^2 + m d)`` time for ``m`` atoms, memory ``O(m^2)`` (times
    the number of classes for per-class second-order matrices)."""


class KONSRegressor(RegressorMixin, _KONSBase):
    __doc__ = f"""Second-order online kernel regression (KONS, Sketched-KONS, PROS-N-KONS).

    Squared loss ``l(f) = (f - y)^2 / 2``. ``partial_fit`` learns from each sample
    once, in order, as :class:`sklearn.linear_model.SGDRegressor`'s; ``fit`` is one
    pass from scratch. Regret ``O(d_eff log T)`` (Calandriello, Lazaric & Valko,
    ICML 2017, Theorem 1; NeurIPS 2017 for PROS-N-KONS).

    Parameters
    ----------{_PARAMS_DOC}

    Attributes
    ----------{_ATTRS_DOC}

    Raises
    ------
    ValueError
        NaN/inf or empty inputs, a changed feature count in ``partial_fit``, invalid
        parameters (non-positive ``alpha``, ``eta``, ``gamma_reg``, ...). A rejected
        call leaves the model exactly as it was.

    Notes
    -----{_NOTES_DOC}

    Examples
    --------
    >>> import numpy as np
    >>> from kernelkit.online import KONSRegressor
    >>> X = np.linspace(0, 1, 200)[:, None]; y = np.sin(6 * X[:, 0])
    >>> reg = KONSRegressor(gamma=20.0, alpha=0.1, random_state=0).fit(X, y)
    >>> bool(reg.n_atoms_ < 200)
    True
    """

    def __init__(self, *, method="sketched", kernel="rbf", gamma=None, degree=3, coef0=1,
                 kernel_params=None, alpha=1.0, eta="auto", C=None, gamma_reg=1.0,
                 epsilon=0.5, beta=1.0, max_atoms=None, forgetting=None, memory=1000,
                 random_state=None, backend=None, verbose=0):
        self.method = method
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.alpha = alpha
        self.eta = eta
        self.C = C
        self.gamma_reg = gamma_reg
        self.epsilon = epsilon
        self.beta = beta
        self.max_atoms = max_atoms
        self.forgetting = forgetting
        self.memory = memory
        self.random_state = random_state
        self.backend = backend
        self.verbose = verbose

    def _loss_name(self):
        return "squared"

    def _allowed_losses(self):
        return ["squared"]

    def _partial_fit(self, X, y, reset=False):
        iparams, fparams = self._check_params()
        first = reset or not hasattr(self, "_st")
        Xf = None if first else self._fast_X(X)
        if Xf is not None:
            y = np.asarray(y, dtype=np.float64).reshape(-1)
            if y.shape[0] != Xf.shape[0] or not np.isfinite(y).all():
                Xf = None  # let the full validation word the error
        if Xf is None:
            Xf, y = validate_data(self, X, y, reset=first, dtype=np.float64, y_numeric=True)
            if first:
                self._init_state(Xf.shape[1], 1, iparams)
        return self._learn(Xf, y.reshape(-1, 1), iparams, fparams)

    def partial_fit(self, X, y):
        """Learn from each sample of ``(X, y)`` once, in order.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : object
        """
        self._partial_fit(X, y)
        return self

    def fit(self, X, y):
        """One pass over ``(X, y)`` in order, from a fresh model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : object
        """
        self._partial_fit(X, y, reset=True)
        return self

    def predict(self, X):
        """Predict with the current function.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,), float64
        """
        return self._decision(X)[:, 0]


class KONSClassifier(OneVsAllClassifierMixin, _KONSBase):
    __doc__ = f"""Second-order online kernel classification (KONS, Sketched-KONS, PROS-N-KONS).

    Binary problems learn one function on ``{{-1, +1}}`` labels, multiclass ones one
    per class (one-vs-rest). ``partial_fit`` learns from each sample once, in order,
    as :class:`sklearn.linear_model.SGDClassifier`'s (``classes`` on the first
    call); ``fit`` is one pass from scratch (Calandriello, Lazaric & Valko, ICML 2017
    and NeurIPS 2017).

    Parameters
    ----------
    loss : {{"squared_hinge", "logistic", "squared"}}, default="squared_hinge"
        ``max(0, 1 - y f)^2 / 2``, ``log(1 + exp(-y f))`` (enables
        ``predict_proba``) or ``(f - y)^2 / 2`` on ``+-1`` targets (least-squares
        classification; with ``eta="auto"`` all classes share one second-order
        matrix, the cheapest multiclass choice).{_PARAMS_DOC}

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,){_ATTRS_DOC}

    Raises
    ------
    ValueError
        NaN/inf or empty inputs, labels not in ``classes``, a changed feature count,
        fewer than two classes, invalid parameters. A rejected call leaves the model
        exactly as it was.

    Notes
    -----{_NOTES_DOC}

    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> from kernelkit.online import KONSClassifier
    >>> X, y = make_moons(300, noise=0.1, random_state=0)
    >>> clf = KONSClassifier(gamma=2.0, gamma_reg=0.1, random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.9)
    True
    """

    def __init__(self, *, loss="squared_hinge", method="sketched", kernel="rbf", gamma=None,
                 degree=3, coef0=1, kernel_params=None, alpha=1.0, eta="auto", C=None,
                 gamma_reg=1.0, epsilon=0.5, beta=1.0, max_atoms=None, forgetting=None,
                 memory=1000, random_state=None, backend=None, verbose=0):
        self.loss = loss
        KONSRegressor.__init__(
            self, method=method, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0,
            kernel_params=kernel_params, alpha=alpha, eta=eta, C=C, gamma_reg=gamma_reg,
            epsilon=epsilon, beta=beta, max_atoms=max_atoms, forgetting=forgetting,
            memory=memory, random_state=random_state, backend=backend, verbose=verbose)

    def _loss_name(self):
        return self.loss

    def _allowed_losses(self):
        return sorted(_LOSSES)

    def _encode(self, y):
        """``(n, n_out)`` +-1 targets; ValueError naming ``y`` for unknown labels."""
        idx = np.searchsorted(self.classes_, y)
        idx = np.clip(idx, 0, len(self.classes_) - 1)
        bad = self.classes_[idx] != y
        if np.any(bad):
            raise ValueError(f"y contains labels {np.unique(np.asarray(y)[bad])!r} not in "
                             f"classes {self.classes_!r}; pass all labels in `classes` on "
                             "the first partial_fit call.")
        if len(self.classes_) == 2:
            return np.where(idx == 1, 1.0, -1.0)[:, None]
        Y = -np.ones((len(y), len(self.classes_)))
        Y[np.arange(len(y)), idx] = 1.0
        return Y

    def _partial_fit(self, X, y, classes=None, reset=False):
        iparams, fparams = self._check_params()
        first = reset or not hasattr(self, "_st")
        if first:
            if classes is None:
                raise ValueError("classes must be passed on the first call to partial_fit "
                                 "(all labels the stream may contain).")
            classes = np.unique(np.asarray(classes))
            if len(classes) < 2:
                raise ValueError("classes has fewer than two labels; the classifier needs "
                                 f"at least two, got {classes!r}.")
        elif classes is not None and not np.array_equal(np.unique(classes), self.classes_):
            raise ValueError(f"classes={classes!r} differs from classes_={self.classes_!r} "
                             "given on the first call.")
        Xf = None if first else self._fast_X(X)
        if Xf is not None:
            y = np.asarray(y).reshape(-1)
            if y.shape[0] != Xf.shape[0] or y.dtype.kind == "f":
                Xf = None  # let the full validation word the error
        if Xf is None:
            Xf, y = validate_data(self, X, y, reset=first, dtype=np.float64)
            check_classification_targets(y)
        if first:
            self.classes_ = classes
        try:
            Y = self._encode(y)
        except ValueError:
            if first:
                del self.classes_
            raise
        if first:
            self._init_state(Xf.shape[1], 1 if len(classes) == 2 else len(classes), iparams)
        return self._learn(Xf, Y, iparams, fparams)

    def partial_fit(self, X, y, classes=None):
        """Learn from each sample of ``(X, y)`` once, in order.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        classes : array-like of shape (n_classes,), default=None
            All labels of the stream; required on the first call, as in
            :meth:`sklearn.linear_model.SGDClassifier.partial_fit`.

        Returns
        -------
        self : object
        """
        self._partial_fit(X, y, classes=classes)
        return self

    def fit(self, X, y):
        """One pass over ``(X, y)`` in order, from a fresh model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : object
        """
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        classes = np.unique(y)
        if len(classes) < 2:
            raise ValueError(f"y has only 1 class ({classes[0]!r}); the classifier needs "
                             "at least two classes.")
        self._partial_fit(X, y, classes=classes, reset=True)
        return self

    def _has_proba(self):
        return self.loss == "logistic"

    @available_if(_has_proba)
    def predict_proba(self, X):
        """Class probabilities (``loss="logistic"``; one-vs-rest normalised for more
        than two classes, as :class:`sklearn.linear_model.SGDClassifier`).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes), float64
        """
        s = self._decision(X)
        p = 0.5 * (1.0 + np.tanh(0.5 * s))
        if s.shape[1] == 1:
            return np.hstack([1.0 - p, p])
        tot = p.sum(axis=1, keepdims=True)
        return np.divide(p, tot, out=np.full_like(p, 1.0 / p.shape[1]), where=tot > 0)

