"""KONS, Sketched-KONS and PROS-N-KONS: second-order online kernel learning.

Calandriello, Lazaric & Valko, "Second-Order Kernel Online Convex Optimization with
Adaptive Sketching", ICML 2017 (KONS, Algorithm 1; Sketched-KONS with the KORS
sampler, Algorithms 2-3), and "Efficient Second-Order Online Kernel Learning with
Adaptive Embedding", NeurIPS 2017 (PROS-N-KONS).
"""

import copy
import time

import numpy as np
import scipy.sparse as sp
from scipy.linalg import solve_triangular
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ..backend import resolve_backend
from ..kernels import check_kernel_scale, is_precomputed, resolve_kernel
from ..utils._array_api import ArrayAPIMixin
from ..utils._class_weight import check_class_weight, row_weights
from ..utils._classes import (CALIBRATION_ATTR_DOC, CALIBRATION_DOC, OneVsAllClassifierMixin,
                             stream_classes)
from ..utils._dispatch import select_loops
from ..utils._state import atomic
from ..utils._threads import single_blas_thread
from ..utils._validation import check_scalar_param
from ..utils._verbose import Progress, check_verbose
from ._budget import UNBOUNDED, check_max_atoms, cost_line, resolve_max_atoms
from ._capacity import grown, trimmed, working_copy
from ._doc import _ATTRS_DOC, _NOTES_DOC, _PARAMS_DOC

_METHODS = {"kons": 0, "sketched": 1, "pros-n-kons": 2}
_LOSSES = {"squared": 0, "logistic": 1, "squared_hinge": 2}
_FORGETTING = {None: 0, "discount": 1, "restart": 2}
_CHUNK = 256  # rows per kernel block: the chunk's own kernel matrix stays small
_PREDICT_ROWS = 2048  # rows per kernel block in predict
_TOL = 1e-10  # a point whose residual is below this fraction of k(x, x) is in the span
_CALIBRATION_WINDOW = 2000  # prequential scores kept for the temperature
_REFIT_FRACTION = 32  # refit once 1/32 of the window is new: a stream pays ~1/60 refit/row


def _dense_rows(X, r0, rows):
    """Rows ``r0:r0 + rows`` of ``X`` (ndarray or CSR) as a dense float64 block."""
    block = X[r0:r0 + rows]
    return block.toarray() if sp.issparse(block) else block


def _as_float64(a, name):
    """``a`` as a native-byte-order float64 array (the compiled loop's only dtype)."""
    try:
        return np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric, got {np.asarray(a).dtype}: {exc}") from None


def _member(value, table):
    """``value in table`` for a parameter of any type (a list is no key: False, not the
    TypeError of hashing it)."""
    try:
        return value in table
    except TypeError:
        return False


class _KONSBase(ArrayAPIMixin, BaseEstimator):
    """Shared state and per-sample loop; subclasses encode the targets."""

    # ---------------------------------------------------------------- parameters
    def _check_params(self):
        if not _member(self.method, _METHODS):
            raise ValueError(f"method must be one of {sorted(_METHODS)}, got {self.method!r}.")
        if not _member(self._loss_name(), _LOSSES):
            raise ValueError(f"loss must be one of {self._allowed_losses()}, got "
                             f"{self._loss_name()!r}.")
        if not _member(self.forgetting, _FORGETTING):
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
        max_atoms = check_max_atoms(self.max_atoms)  # "auto" is resolved in _learn
        check_verbose(self.verbose)
        loss = _LOSSES[self._loss_name()]
        iparams = np.array([_METHODS[self.method], loss, _FORGETTING[self.forgetting], memory,
                            max_atoms if isinstance(max_atoms, int) else UNBOUNDED,
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

    def __getstate__(self):  # the state's free room is not pickled (_capacity.trimmed)
        state = super().__getstate__()
        if "_st" in state:
            state["_st"] = trimmed(state["_st"])
        return state

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
    def _learn(self, X, Y, iparams, fparams, weights=None):
        """One pass over ``X`` in order; returns the prequential decision values.

        ``weights`` (n,) scale each row's loss (None: all 1).

        All-or-nothing: the pass runs on a working copy of the state and of the random
        generator, committed only when every chunk succeeded (the public methods are
        also :func:`~kernelkit.utils._state.atomic`, which restores the attributes).
        """
        n = X.shape[0]
        base = self._st
        n_mat = base["Ainv"].shape[0]
        cap = resolve_max_atoms(check_max_atoms(self.max_atoms), self.method, n_mat)
        iparams = iparams.copy()
        iparams[4] = UNBOUNDED if cap is None else cap
        st = working_copy(base)
        # the free rows the pass may write in the shared arrays, put back on failure so
        # that the old state stays byte-for-byte as it was (O(n cap), not O(cap^2))
        m0 = int(base["istate"][0])
        free = slice(m0, min(m0 + n, base["L"].shape[0]))
        saved = {k: base[k][free].copy() for k in ("atoms", "L", "Lw", "sw")}
        rs = copy.deepcopy(self._rs)
        pred = np.empty((n, st["W"].shape[1]))
        wt = np.ones(n) if weights is None else np.ascontiguousarray(weights, np.float64)
        loops = select_loops(__package__, self.backend_)
        progress = Progress(self, self.verbose)
        t0 = time.perf_counter()
        progress(f"pass over {n} samples, d={X.shape[1]}, in blocks of {_CHUNK} (each: its "
                 "kernel against the dictionary, then an O(m^2) update per sample)",
                 method=self.method, n_atoms=int(st["istate"][0]),
                 **cost_line(cap, n, X.shape[1], n_mat))
        if st["istate"][1] < 10:  # the first batch of ten rows: a length scale that fits
            check_kernel_scale(self._op, X, type(self).__name__)
        try:
            for r0 in range(0, n, _CHUNK):
                Xs = _dense_rows(X, r0, _CHUNK)
                m = int(st["istate"][0])
                st = grown(st, min(m + Xs.shape[0], int(iparams[4])))
                if Xs.shape[0] == 1 and m < st["L"].shape[0]:
                    # one kernel call: the sample sits in the free slot (none at the cap)
                    st["atoms"][m] = Xs[0]
                    row = self._op.block_host(Xs, st["atoms"][:m + 1])
                    Kc, Kss = row[:, :m], row[:, m:]
                else:
                    Kc = (self._op.block_host(Xs, st["atoms"][:m]) if m
                          else np.empty((Xs.shape[0], 0)))
                    Kss = self._op.block_host(Xs)
                u = rs.random_sample(Xs.shape[0])
                new = np.empty(Xs.shape[0], dtype=np.int64)
                # an overflow is reported below as a ValueError, the pass rolled back
                with single_blas_thread(), np.errstate(over="ignore", invalid="ignore"):
                    n_add = loops.run_chunk(
                        np.ascontiguousarray(Kc, dtype=np.float64),
                        np.ascontiguousarray(Kss, dtype=np.float64), Y[r0:r0 + _CHUNK],
                        wt[r0:r0 + _CHUNK], u,
                        st["L"], st["Lw"], st["sw"], st["W"], st["Ainv"], st["istate"],
                        st["fstate"], new, pred[r0:r0 + _CHUNK], iparams, fparams)
                if n_add:
                    st["atoms"][m:m + n_add] = Xs[new[:n_add]]
                if not np.isfinite(st["fstate"][0]):
                    raise ValueError("the cumulative loss became non-finite; the targets or "
                                     "the kernel values are too large: rescale X and y.")
                if (r0 // _CHUNK) % 20 == 19:
                    progress("samples", r0 + Xs.shape[0], n, n_atoms=int(st["istate"][0]),
                             loss=float(st["fstate"][0]),
                             seconds=round(time.perf_counter() - t0, 2))
        except BaseException:
            for k, rows in saved.items():
                base[k][free] = rows
            raise
        self._st, self._rs, self.max_atoms_ = st, rs, cap  # commit
        progress.done("pass", samples=n, n_seen=int(st["istate"][1]), n_atoms=int(st["istate"][0]),
                 cumulative_loss=float(st["fstate"][0]))
        self._sync()
        return pred

    def _validate_X(self, X, reset):
        """``X`` as a native float64 ndarray or CSR matrix (CSC converted; a copy)."""
        X = validate_data(self, X, reset=reset, dtype=np.float64, accept_sparse=("csr", "csc"))
        return X.tocsr() if sp.issparse(X) else X

    def _decision(self, X):
        check_is_fitted(self)
        Xf = self._fast_X(X)  # a one-row stream call skips the full validation
        X = self._validate_X(X, reset=False) if Xf is None else Xf
        st = self._st
        m = int(st["istate"][0])
        out = np.zeros((X.shape[0], st["W"].shape[1]))
        if m:
            for r0 in range(0, X.shape[0], _PREDICT_ROWS):
                K = self._op.block_host(_dense_rows(X, r0, _PREDICT_ROWS), st["atoms"][:m])
                Z = solve_triangular(st["L"][:m, :m], K.T, lower=True, check_finite=False)
                out[r0:r0 + _PREDICT_ROWS] = Z.T @ st["W"][:m]
        if self.C is not None:
            np.clip(out, -self.C, self.C, out=out)
        return out

    def _fast_X(self, X):
        """``X`` as-is when it is a finite native float64 ndarray of the fitted width."""
        if (type(X) is np.ndarray and X.dtype == np.float64 and X.ndim == 2
                and X.shape[0] >= 1 and X.shape[1] == self.n_features_in_
                and not hasattr(self, "feature_names_in_") and np.isfinite(X).all()):
            return X
        return None

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        tags.input_tags.sparse = True
        return tags


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
                 kernel_params=None, alpha=0.1, eta="auto", C=None, gamma_reg=0.3,
                 epsilon=0.5, beta=1.0, max_atoms="auto", forgetting=None, memory=1000,
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

    def _partial_fit(self, X, y, reset=False, sample_weight=None):
        iparams, fparams = self._check_params()
        first = reset or not hasattr(self, "_st")
        Xf = None if first else self._fast_X(X)
        if Xf is not None:
            yf = _as_float64(y, "y").reshape(-1)
            if yf.shape[0] != Xf.shape[0] or not np.isfinite(yf).all():
                Xf = None  # let the full validation word the error
        if Xf is None:
            Xf, yf = validate_data(self, X, y, reset=first, dtype=np.float64, y_numeric=True,
                                   accept_sparse=("csr", "csc"))
            Xf = Xf.tocsr() if sp.issparse(Xf) else Xf
            # big-endian or float16 targets pass validation as they are; the loop needs
            # native float64
            yf = _as_float64(yf, "y")
        w = None if sample_weight is None else row_weights(None, yf, sample_weight, (), Xf)
        if first:
            self._init_state(Xf.shape[1], 1, iparams)
        return self._learn(Xf, yf.reshape(-1, 1), iparams, fparams, w)

    @atomic
    def partial_fit_predict(self, X, y, sample_weight=None):
        """Learn from ``(X, y)`` in order and return the prequential predictions.

        Each sample is predicted by the model before it learns from that sample
        (progressive validation), so the returned values measure online performance.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the samples' losses (value, gradient and
            curvature scale with the weight; a zero weight is predicted, not learned).

        Returns
        -------
        y_pred : ndarray of shape (n_samples,), float64
            What ``predict`` returned for each sample just before learning from it.
        """
        return self._partial_fit(X, y, sample_weight=sample_weight)[:, 0]

    @atomic
    def partial_fit(self, X, y, sample_weight=None):
        """Learn from each sample of ``(X, y)`` once, in order.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the samples' losses (value, gradient and
            curvature scale with the weight; a zero weight is predicted, not learned).

        Returns
        -------
        self : object
        """
        self._partial_fit(X, y, sample_weight=sample_weight)
        return self

    @atomic
    def fit(self, X, y, sample_weight=None):
        """One pass over ``(X, y)`` in order, from a fresh model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the samples' losses (value, gradient and
            curvature scale with the weight; a zero weight is predicted, not learned).

        Returns
        -------
        self : object
        """
        self._partial_fit(X, y, reset=True, sample_weight=sample_weight)
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
    loss : {{"squared", "squared_hinge", "logistic"}}, default="squared"
        ``(f - y)^2 / 2`` on ``+-1`` targets (least-squares classification; with
        ``eta="auto"`` all classes share one second-order matrix: the default because
        it is the cheapest multiclass choice, ``c`` times cheaper per sample than the
        per-class matrices of the other losses, and as accurate on the documented
        streams), ``max(0, 1 - y f)^2 / 2`` or ``log(1 + exp(-y f))``. Every loss
        has ``predict_proba`` (see ``calibration``).{_PARAMS_DOC}
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes in the loss, as scikit-learn's classifiers take them,
        multiplied with ``sample_weight``; ``"balanced"`` (``n_samples / (n_classes *
        bincount(y))``) needs the whole ``y`` and is for ``fit`` only, as in
        :class:`sklearn.linear_model.SGDClassifier`. A class not in ``classes_`` is
        a ValueError.
    {CALIBRATION_DOC}
        Out-of-sample values: the prequential decision values (each sample is scored
        before it is learned) of the last {_CALIBRATION_WINDOW} samples of ``fit`` /
        ``partial_fit``, with their labels and weights; the temperature (two classes:
        also the slopes) is refitted at the end of ``fit`` and of every ``partial_fit``
        that renews at least 1/{_REFIT_FRACTION} of that window (cheap on a stream of
        one-sample calls).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,){_ATTRS_DOC}
    {CALIBRATION_ATTR_DOC}

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

    def __init__(self, *, loss="squared", method="sketched", kernel="rbf", gamma=None,
                 degree=3, coef0=1, kernel_params=None, alpha=0.1, eta="auto", C=None,
                 gamma_reg=0.3, epsilon=0.5, beta=1.0, max_atoms="auto", forgetting=None,
                 memory=1000, random_state=None, backend=None, verbose=0, class_weight=None,
                 calibration="auto"):
        self.loss = loss
        self.class_weight = class_weight
        self.calibration = calibration
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

    def _partial_fit(self, X, y, classes=None, reset=False, sample_weight=None,
                     class_weight=None):
        iparams, fparams = self._check_params()
        calibrate = self._check_calibration()
        if class_weight is None:  # partial_fit: the stream's weights are given, not counted
            class_weight = check_class_weight(self.class_weight)
            if isinstance(class_weight, str):
                raise ValueError("class_weight='balanced' is not supported by partial_fit "
                                 "(it needs the whole y); pass a dict, e.g. computed by "
                                 "sklearn.utils.class_weight.compute_class_weight.")
        first = reset or not hasattr(self, "_st")
        classes = stream_classes(classes, None if first else self.classes_)
        Xf = None if first else self._fast_X(X)
        if Xf is not None:
            y = np.asarray(y).reshape(-1)
            if y.shape[0] != Xf.shape[0] or y.dtype.kind == "f":
                Xf = None  # let the full validation word the error
        if Xf is None:
            Xf, y = validate_data(self, X, y, reset=first, dtype=np.float64,
                                  accept_sparse=("csr", "csc"))
            Xf = Xf.tocsr() if sp.issparse(Xf) else Xf
            check_classification_targets(y)
        if first:  # rolled back by @atomic if anything below raises
            self.classes_ = classes
        Y = self._encode(y)
        w = row_weights(class_weight, np.asarray(y), sample_weight, self.classes_, Xf)
        if first:
            self._init_state(Xf.shape[1], 1 if len(classes) == 2 else len(classes), iparams)
        scores = self._learn(Xf, Y, iparams, fparams, w)
        self._update_calibration(scores, np.searchsorted(self.classes_, y), w,
                                 first, calibrate)
        return scores

    def _update_calibration(self, scores, y_idx, w, reset, calibrate):
        """Append the prequential scores to the window; refit the temperature (and
        two-class slopes) when due."""
        if not calibrate:
            self.calibration_temperature_, self.calibration_slopes_ = None, None
            self._calib = None
            return
        d = scores[:, 0] - self._binary_offset if scores.shape[1] == 1 else scores
        w = np.ones(len(y_idx)) if w is None else w
        old = None if reset else getattr(self, "_calib", None)
        if old is not None:
            d, y_idx, w = (np.concatenate([a, b])[-_CALIBRATION_WINDOW:] for a, b in
                           ((old["d"], d), (old["y"], y_idx), (old["w"], w)))
            fresh = old["fresh"] + len(scores)
        else:
            d, y_idx, w = d[-_CALIBRATION_WINDOW:], y_idx[-_CALIBRATION_WINDOW:], \
                w[-_CALIBRATION_WINDOW:]
            fresh = len(y_idx)
        fitted = self._calibration_map()
        if reset or fitted[0] is None or fresh * _REFIT_FRACTION >= len(y_idx):
            fitted, fresh = self._calibrate(d, y_idx, w), 0
        self._calib = {"d": d, "y": y_idx, "w": w, "fresh": fresh}
        self.calibration_temperature_, self.calibration_slopes_ = fitted

    def _labels(self, scores):
        """Labels from ``_decision``-shaped scores (the rule of ``predict``)."""
        if scores.shape[1] == 1:
            return self.classes_[(scores[:, 0] > self._binary_offset).astype(int)]
        return self.classes_[scores.argmax(axis=1)]

    @atomic
    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Learn from each sample of ``(X, y)`` once, in order.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        classes : array-like of shape (n_classes,), default=None
            All labels of the stream; required on the first call, as in
            :meth:`sklearn.linear_model.SGDClassifier.partial_fit`.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the samples' losses, multiplied by
            ``class_weight``.

        Returns
        -------
        self : object
        """
        self._partial_fit(X, y, classes=classes, sample_weight=sample_weight)
        return self

    @atomic
    def partial_fit_predict(self, X, y, classes=None, sample_weight=None):
        """Learn from ``(X, y)`` in order and return the prequential predicted labels.

        Each sample is classified by the model before it learns from that sample
        (progressive validation): ``mean(partial_fit_predict(X, y) != y)`` is the
        online mistake rate.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        classes : array-like of shape (n_classes,), default=None
            As in :meth:`partial_fit`.
        sample_weight : array-like of shape (n_samples,), default=None
            As in :meth:`partial_fit`.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            What ``predict`` returned for each sample just before learning from it
            (labels from ``classes_``).
        """
        return self._labels(self._partial_fit(X, y, classes=classes,
                                              sample_weight=sample_weight))

    @atomic
    def partial_fit_decision_function(self, X, y, classes=None, sample_weight=None):
        """Learn from ``(X, y)`` in order and return the prequential decision values.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        classes : array-like of shape (n_classes,), default=None
            As in :meth:`partial_fit`.
        sample_weight : array-like of shape (n_samples,), default=None
            As in :meth:`partial_fit`.

        Returns
        -------
        scores : ndarray of shape (n_samples,) for two classes, else (n_samples, n_classes)
            What ``decision_function`` returned for each sample just before learning
            from it.
        """
        scores = self._partial_fit(X, y, classes=classes, sample_weight=sample_weight)
        return scores[:, 0] - self._binary_offset if scores.shape[1] == 1 else scores

    @atomic
    def fit(self, X, y, sample_weight=None):
        """One pass over ``(X, y)`` in order, from a fresh model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the samples' losses, multiplied by
            ``class_weight``.

        Returns
        -------
        self : object
        """
        self._check_params()  # parameters before data
        self._check_calibration()
        class_weight = check_class_weight(self.class_weight)
        # _partial_fit validates X again with reset=True: it keeps the DataFrame's names
        _, y_checked = validate_data(self, X, y, dtype=np.float64, accept_sparse=("csr", "csc"))
        check_classification_targets(y_checked)
        classes = np.unique(y_checked)
        if len(classes) < 2:
            raise ValueError(f"y has only 1 class ({classes[0]!r}); the classifier needs "
                             "at least two classes.")
        # "balanced" counts this y; {} (no class weights) stands for None below
        self._partial_fit(X, y, classes=classes, reset=True, sample_weight=sample_weight,
                          class_weight={} if class_weight is None else class_weight)
        return self
