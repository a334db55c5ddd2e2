"""INK-ESTIMATE: streaming ridge leverage score sampling with a fixed budget."""


import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import validate_data

from ..backend import resolve_backend
from ..kernels import check_kernel_scale
from ..utils._array_api import ArrayAPIMixin
from ..utils._dispatch import select_loops
from ..utils._state import atomic
from ._common import (
    _INK_CHUNK,
    _check_delta,
    _check_epsilon,
    _fill_doc,
    _make_eval,
    _resolve_gamma_reg,
    _resolve_qbar,
    _take,
)
from ._dictionary import _blas_for, _Dict, _factor
from ._squeak import SQUEAK, _estimate_new


# ---------------------------------------------------------------- INK-ESTIMATE
@_fill_doc
class INKEstimate(ArrayAPIMixin, BaseEstimator):
    """INK-ESTIMATE: sequential ridge leverage scores in one pass, point by point.

    Calandriello, Lazaric & Valko, "Analysis of Nyström method with sequential
    ridge leverage scores estimation", UAI 2016. Points arrive one at a time (a
    stream: ``partial_fit``); the algorithm keeps a small sketch, a dictionary of
    points with probabilities ``p~_i`` and copies ``q_i`` whose size is fixed by the
    space budget ``qbar`` (about ``qbar * d_eff`` copies, Theorem 1), and at
    *every* step ``t``:

    1. adds the arriving point with ``p~ = 1`` and ``qbar`` copies;
    2. estimates from the sketch only the RLS ``tau_{t,i}`` of the arriving point
       and of every dictionary point with respect to the ``t`` points seen so far,
       ``tau~_{t,i} = (1 - eps)(1 - gamma [(W K_S W + gamma I)^{-1}]_ii) / w_i``,
       ``w_i = q_i / (qbar p~_i)`` (the dictionary estimator, equal to
       ``(1 - eps)/gamma (k_ii - k_i' S (S'K_t S + gamma I)^{-1} S' k_i)``);
    3. shrinks ``p~_{t,i} = min(tau~_{t,i}, p~_{t-1,i})`` and thins the copies,
       ``q_{t,i} ~ B(p~_{t,i} / p~_{t-1,i}, q_{t-1,i})``; points without copies leave.

    The sketch never holds more than the dictionary's kernel matrix, and its
    Nyström approximation satisfies ``||K_t - K~_t|| <= gamma / (1 - eps)`` at every
    step. The per-step loop is compiled with the Numba engine. The uniforms of the
    thinning are a counter-based hash of ``(random_state, t, point)``, so the result
    does not depend on how the stream is cut into ``partial_fit`` calls.

    Parameters
    ----------
    {common}
        In ``partial_fit``, "auto" uses the size of the first batch as ``n``
        (the stream's length is unknown): pass an integer for streams.
    {kernel}
    random_state : int, RandomState instance or None, default=None
        Seeds the thinning; fix it for reproducible sketches.
    backend : {{"auto", "numpy", "numba", "cupy"}} or None, default=None
        Engine for the kernel blocks and the per-step loop (compiled with
        ``"numba"``); None follows :func:`kernelkit.set_config`.

    Attributes
    ----------
    leverage_scores_ : ndarray of shape (`n_samples_seen_`,)
        Each point's RLS ``tau_{t,t}`` with respect to the points seen up to its
        arrival (the prefix matrix ``K_t``), estimated at its own step from the
        sketch as ``tau~_{t,t} / (1 - eps)``: within ``[tau / (1 + eps), tau / (1 - eps)]``
        when the sketch is epsilon-accurate.
    dictionary_indices_ : ndarray of shape (m,), int64
        Stream positions of the sketch's points, ascending.
    dictionary_ : ndarray of shape (m, n_features) or None
        The sketch's points (None for a precomputed kernel).
    dictionary_probabilities_ : ndarray of shape (m,)
    dictionary_multiplicities_ : ndarray of shape (m,), int64
    dictionary_weights_ : ndarray of shape (m,)
        ``q_i / (qbar p~_i)``.
    effective_dim_ : float
        ``sum(q_i) / (qbar (1 - eps))`` over the sketch, from the sketch alone:
        ``sum(q_i) / qbar`` is an unbiased estimate of the sum of the sampling
        probabilities ``p~_i``, about ``(1 - eps)`` times the RLS. Since each ``p~_i``
        is a running minimum of estimates, this is a low estimate of ``d_eff(gamma)``
        of the points seen (0.6 to 1 times it in our tests);
        ``estimate_leverage_scores(X).sum()`` is the accurate one when ``X`` is at hand.
    n_samples_seen_ : int
    qbar_ : int
    gamma_reg_ : float
        The regularisation used: ``gamma_reg``, or for "auto" ``1e-3`` times the size of
        the first batch (all of ``X`` in ``fit``), then fixed for the rest of the stream.
    backend_ : str
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Only when ``X`` has string column names.

    Raises
    ------
    ValueError
        As :class:`SQUEAK`; also ``kernel="precomputed"`` in ``partial_fit``.

    See Also
    --------
    SQUEAK : blockwise and distributed; estimates every point at the end.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelkit.leverage import INKEstimate
    >>> X = np.random.default_rng(0).standard_normal((300, 3))
    >>> ink = INKEstimate(gamma_reg=5.0, qbar=3, gamma=0.5, random_state=0)
    >>> ink.partial_fit(X[:100]).partial_fit(X[100:]).n_samples_seen_
    300
    """

    def __init__(self, gamma_reg="auto", *, epsilon=0.5, qbar="auto", delta=0.1, kernel="rbf",
                 gamma=None, degree=3, coef0=1, kernel_params=None, random_state=None,
                 backend=None):
        self.gamma_reg = gamma_reg
        self.epsilon = epsilon
        self.qbar = qbar
        self.delta = delta
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.random_state = random_state
        self.backend = backend

    _precomputed = SQUEAK._precomputed

    @atomic
    def fit(self, X, y=None):
        """Run INK-ESTIMATE over ``X`` from an empty sketch.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The stream, in order (the kernel matrix when ``kernel="precomputed"``).
        y : None
            Ignored.

        Returns
        -------
        self : object
        """
        for attr in ("n_samples_seen_", "_dict"):
            if hasattr(self, attr):
                delattr(self, attr)
        return self._partial_fit(X, first=True, whole=True)

    @atomic(deep=True)
    def partial_fit(self, X, y=None):
        """Process the next points of the stream.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The next points, in order.
        y : None
            Ignored.

        Returns
        -------
        self : object
        """
        return self._partial_fit(X, first=not hasattr(self, "n_samples_seen_"), whole=False)

    def _partial_fit(self, X, first, whole):
        if self._precomputed() and not whole:
            raise ValueError("kernel='precomputed' is not supported by partial_fit (a stream "
                             "cannot provide kernel values with future points); use fit.")
        eps = _check_epsilon(self.epsilon)
        delta = _check_delta(self.delta)
        _resolve_gamma_reg(self.gamma_reg, 1)  # parameters before data
        _resolve_qbar(self.qbar, 2, eps, delta)
        # fit needs 2 rows (scikit-learn's convention); a stream may start with one
        X = validate_data(self, X, dtype=np.float64, reset=first,
                          ensure_min_samples=2 if whole else 1)
        if first:
            # "auto" scales with the first batch (all of X in fit); a stream keeps it fixed
            self.gamma_reg_ = _resolve_gamma_reg(self.gamma_reg, X.shape[0])
            self.backend_ = resolve_backend(self.backend, X)
            self.qbar_ = _resolve_qbar(self.qbar, X.shape[0], eps, delta)
            rs = check_random_state(self.random_state)
            self._seed = int(rs.randint(0, 2**32, dtype=np.uint64)) << 32 | int(
                rs.randint(0, 2**32, dtype=np.uint64))
            self.n_samples_seen_ = 0
            self.leverage_scores_ = np.empty(0)
            self._dict = None
        kern, pts = _make_eval(self, X)
        if self._dict is None:  # the first batch
            check_kernel_scale(kern.op, X, type(self).__name__)
        d, arrival = _ink_run(self._dict, kern, pts, self.n_samples_seen_, self.gamma_reg_, eps,
                              self.qbar_, self._seed, self.backend_)
        seen = self.n_samples_seen_ + X.shape[0]
        if len(d):  # a kernel that is not psd: SQUEAK's error, not a silent empty sketch;
            # a stream factors its sketch as its length passes each power of two (a
            # factor per one-row call cost a fifth of the stream's time at 244 atoms)
            if whole or seen.bit_length() != self.n_samples_seen_.bit_length():
                with _blas_for(len(d)):
                    _factor(d, self.gamma_reg_, self.qbar_)
        else:
            warnings.warn(f"INK-ESTIMATE's dictionary died out (qbar={self.qbar_} is too small "
                          "for this data: the estimates are then k(x, x) / gamma_reg). "
                          "Increase qbar (4 or more).", UserWarning, stacklevel=3)
        self._dict = d
        self.n_samples_seen_ = seen
        self.leverage_scores_ = np.concatenate([self.leverage_scores_, arrival / (1.0 - eps)])
        order = np.argsort(d.idx, kind="stable")
        self.dictionary_indices_ = d.idx[order]
        self.dictionary_ = None if self._precomputed() else d.pts[order]
        self.dictionary_probabilities_ = d.p[order]
        self.dictionary_multiplicities_ = d.q[order]
        self.dictionary_weights_ = d.q[order] / (self.qbar_ * d.p[order])
        self.effective_dim_ = float(d.q.sum()) / (self.qbar_ * (1.0 - eps))
        return self

    def estimate_leverage_scores(self, X):
        """RLS estimates of points with respect to the stream seen so far, from the sketch.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        tau : ndarray of shape (n_samples,), float64

        Raises
        ------
        ValueError
            For a precomputed kernel, or on invalid ``X``.
        """
        return _estimate_new(self, X)


def _ink_run(d, kern, pts, t0, gamma_reg, eps, qbar, seed, backend):
    """INK-ESTIMATE over ``pts`` (stream positions ``t0, t0 + 1, ...``) from sketch ``d``.

    Chunks of arriving points get one kernel block with the current sketch from the
    engine; the per-point loop then runs on the engine's host loop module. For a
    precomputed kernel, the sketch's points are stream indices into the same matrix.
    """
    loops = select_loops(__package__, backend)
    n = len(pts)
    arrival = np.empty(n)
    if d is None:
        d = _Dict(np.empty(0, dtype=np.int64), pts[:0], np.empty(0),
                  np.empty(0, dtype=np.int64), np.empty((0, 0)))
    for c0 in range(0, n, _INK_CHUNK):
        c1 = min(n, c0 + _INK_CHUNK)
        new_pts = _take(pts, slice(c0, c1))
        m0 = len(d)
        local_pts = np.concatenate([d.pts, new_pts])
        keys = np.concatenate([d.idx, np.arange(t0 + c0, t0 + c1, dtype=np.int64)])
        s = len(keys)
        K = kern(new_pts)  # first: an overflowing batch is named X, as the caller's
        if np.any(np.diagonal(K) < 0):
            raise ValueError("the kernel matrix of the stream is not positive semi-definite "
                             "(a negative k(x, x)): check the kernel and its parameters.")
        if m0:
            cross = kern(d.pts, new_pts)
            K = np.block([[d.G, cross], [cross.T, K]])
        dict_local = np.zeros(s, dtype=np.int64)
        dict_local[:m0] = np.arange(m0)
        p = np.zeros(s)
        q = np.zeros(s, dtype=np.int64)
        p[:m0], q[:m0] = d.p, d.q
        with _blas_for(s):
            m = loops.ink_steps(K, dict_local, p, q, m0, keys, t0 + c0, gamma_reg, eps, qbar,
                                seed, arrival[c0:c1])
        sel = dict_local[:m].copy()
        d = _Dict(keys[sel], local_pts[sel], p[:m].copy(), q[:m].copy(), K[np.ix_(sel, sel)])
    return d, arrival


