"""SQUEAK / DISQUEAK: one-pass ridge leverage score sampling with a merge tree."""

import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from ..backend import resolve_backend
from ..kernels import check_kernel_scale
from ..utils._array_api import ArrayAPIMixin
from ..utils._dispatch import select_loops
from ..utils._state import atomic
from ..utils._validation import check_scalar_param
from ..utils._verbose import Progress, check_verbose
from ._common import (
    _MIN_BLOCK,
    _REPAIR_ROUNDS,
    _check_delta,
    _check_epsilon,
    _fill_doc,
    _make_eval,
    _resolve_gamma_reg,
    _resolve_qbar,
    _take,
)
from ._dictionary import _concat, _dict_update, _leaf, _query_scores


# ------------------------------------------------------------------ dictionary
def _squeak_sequential(idx, pts, kern, gamma_reg, eps, qbar, block_size, seed, backend,
                       progress=None):
    """SQUEAK over one partition: add blocks of points, Dict-Update after each."""
    loops = select_loops(__package__, backend)
    rng = np.random.default_rng(seed)
    d = None
    pos, n = 0, len(idx)
    while pos < n:
        b = block_size or max(_MIN_BLOCK, 0 if d is None else len(d))
        leaf = _leaf(idx[pos:pos + b], _take(pts, slice(pos, pos + b)), qbar, kern)
        d = _dict_update(_concat(d, leaf, kern), gamma_reg, eps, qbar, rng, loops)
        pos += b
        if progress is not None:
            progress("block", min(pos, n), n, level=2, dictionary=len(d))
    return d


def _squeak_merge(a, b, kern, gamma_reg, eps, qbar, seed, backend):
    """DISQUEAK's Dict-Merge: Dict-Update of the union of two dictionaries."""
    loops = select_loops(__package__, backend)
    return _dict_update(_concat(a, b, kern), gamma_reg, eps, qbar,
                        np.random.default_rng(seed), loops)


def _partition_scores(d, kern, pts, gamma_reg, qbar):
    """Final RLS estimates of one partition's points from the final dictionary."""
    return _query_scores(d, kern, pts, kern.diag(pts), gamma_reg, qbar)


def _repair(d, kern, pts, scores, gamma_reg, eps, qbar, seed, backend):
    """Return ``(d, scores)`` with the points the dictionary provably misses added back.

    An epsilon-accurate dictionary gives every point an estimate of at most
    ``tau / (1 - eps) <= 1 / (1 - eps)``; a larger one proves the dictionary lost that
    point's direction of feature space (with few copies, a group of repeated or nearly
    repeated points can lose all of its copies at once). Those points join the
    dictionary again, as new points do (Dict-Update of the union), and every estimate is
    recomputed; up to ``_REPAIR_ROUNDS`` rounds, a no-op on data the dictionary covers.
    """
    loops = select_loops(__package__, backend)
    rng = np.random.default_rng(seed)
    limit = (1.0 + 1e-9) / (1.0 - eps)
    groups = _copies(pts, rng)
    for _ in range(_REPAIR_ROUNDS):
        flagged = scores > limit
        if groups is not None:  # copies of one point share a direction: their RLS sum to
            inv, counts = groups  # at most 1, so a larger sum of estimates proves it lost
            flagged |= ((counts > 1) & (np.bincount(inv, weights=scores) > limit))[inv]
        missed = np.setdiff1d(np.flatnonzero(flagged), d.idx)
        if len(missed) == 0:
            break
        b = max(_MIN_BLOCK, len(d))
        for b0 in range(0, len(missed), b):
            part = missed[b0:b0 + b]
            leaf = _leaf(part, _take(pts, part), qbar, kern)
            d = _dict_update(_concat(d, leaf, kern), gamma_reg, eps, qbar, rng, loops)
        scores = _partition_scores(d, kern, pts, gamma_reg, qbar)
    return d, scores


def _copies(pts, rng):
    """``(group of each row, rows per group)`` for rows of ``pts`` that repeat one another
    (identical rows share a random projection; a collision only adds rows to the
    repair's check), or None where no row repeats or ``pts`` are indices (precomputed)."""
    if getattr(pts, "ndim", 0) != 2 or len(pts) < 2:
        return None
    with np.errstate(all="ignore"):
        h = np.asarray(pts, np.float64) @ rng.standard_normal(pts.shape[1])
    _, inv, counts = np.unique(h, return_inverse=True, return_counts=True)
    return (inv.ravel(), counts) if counts.max() > 1 else None


def _tree_pairs(n_items):
    """The balanced merge tree: per level, pairs of positions and the carried item."""
    levels = []
    while n_items > 1:
        pairs = [(2 * i, 2 * i + 1) for i in range(n_items // 2)]
        levels.append((pairs, n_items % 2 == 1))
        n_items = len(pairs) + (n_items % 2)
    return levels


def _seeds(random_state, n_partitions):
    rs = check_random_state(random_state)
    ss = np.random.SeedSequence(rs.randint(0, 2**32, size=4, dtype=np.uint64).tolist())
    children = ss.spawn(2 * n_partitions)
    return children[:n_partitions], children[n_partitions:]


def _run_squeak(kern, pts, n, gamma_reg, eps, qbar, n_partitions, block_size, n_jobs,
                random_state, backend, progress=None):
    """SQUEAK (one partition) or DISQUEAK's merge tree; returns the root dictionary.

    ``progress`` (a :class:`~kernelkit.utils._verbose.Progress`) reports the pass
    (level 1) and its blocks (level 2), or DISQUEAK's leaves and merge levels.
    """
    from joblib import Parallel, delayed

    n_partitions = min(n_partitions, n)
    parts = np.array_split(np.arange(n), n_partitions)
    leaf_seeds, merge_seeds = _seeds(random_state, n_partitions)
    args = (kern, gamma_reg, eps, qbar)
    if n_partitions == 1:
        d = _squeak_sequential(parts[0], pts, *args, block_size, leaf_seeds[0], backend,
                               progress)
        if progress is not None:
            progress("pass", 1, 1, points=n, dictionary=len(d))
        return d
    items = Parallel(n_jobs=n_jobs)(
        delayed(_squeak_sequential)(part, _take(pts, part), *args, block_size, seed, backend)
        for part, seed in zip(parts, leaf_seeds, strict=True))
    if progress is not None:
        progress("leaves", len(items), level=1, dictionaries=[len(d) for d in items])
    node = 0
    for level, (pairs, carry) in enumerate(_tree_pairs(len(items)), 1):
        merged = Parallel(n_jobs=n_jobs)(
            delayed(_squeak_merge)(items[i], items[j], *args, merge_seeds[node + k], backend)
            for k, (i, j) in enumerate(pairs))
        node += len(pairs)
        items = merged + ([items[-1]] if carry else [])
        if progress is not None:
            progress("merge level", level, level=1, dictionaries=[len(d) for d in items])
    return items[0]



# ---------------------------------------------------------------------- SQUEAK
@_fill_doc
class SQUEAK(ArrayAPIMixin, BaseEstimator):
    """SQUEAK and DISQUEAK: ridge leverage score sampling in one pass over the data.

    Sequential RLS sampling (Calandriello, Lazaric & Valko, "Distributed adaptive
    sampling for kernel matrix approximation", AISTATS 2017, Algorithm 1, as
    in the authors' own script: blocks of points join the dictionary) keeps a
    dictionary of points with probabilities ``p~_i`` and multiplicities ``q_i``.
    Each new block enters with ``p~ = 1`` and ``qbar`` copies; then every
    dictionary point's RLS is re-estimated *from the dictionary alone* (never from
    ``K_n``) with the estimator

        tau~_i = (1 - eps) / gamma (k_ii - k_i' S (S' K S + gamma I)^{-1} S' k_i),

    where ``S S' = diag(q_i / (qbar p~_i))`` (Lemma 2: ``tau_i / alpha <= tau~_i <=
    tau_i`` when the dictionary is epsilon-accurate), the probabilities shrink to
    ``p~_i <- min(tau~_i, p~_i)`` and each copy survives with probability
    ``p~_new / p~_old`` (binomial thinning; points with no copy left leave).
    Theorem 1: with ``qbar`` as :func:`theory_qbar`, with probability
    ``1 - delta`` the final dictionary is epsilon-accurate and holds at most
    ``3 qbar d_eff(gamma)`` copies. Time ``O(n m^2)`` for a dictionary of
    ``m`` points, memory ``O(m^2 + n)``.

    With ``n_partitions > 1`` this is DISQUEAK (Algorithm 2): each partition is
    reduced by SQUEAK, then the partition dictionaries are merged pairwise up a
    balanced tree (merge = Dict-Update of the union), with the same guarantees
    (Theorem 2). Leaves and merges of a level run in parallel through joblib
    (``n_jobs``), so ``joblib.parallel_config(backend="dask")`` spreads them over
    a cluster; ``kernelkit.distributed`` runs the tree on ``dask.distributed``
    futures with the data left on the workers.

    Finally every point's RLS is estimated from the final dictionary
    (``leverage_scores_``), in one blockwise pass. An estimate above
    ``1 / (1 - eps)`` proves the dictionary lost that point's direction (an
    epsilon-accurate one cannot give it; with few copies, a group of repeated points
    can lose all of them at once), and so does a sum above it over the copies of one
    point (identical rows share a direction, so their RLS sum to at most 1: a lost
    group whose copies' estimates, ``k(x, x) / gamma_reg`` each, stay below the bound):
    such points rejoin the dictionary as new points do and the estimates are
    recomputed, up to three rounds, with a warning if some remain. Estimates are
    capped at 1, the largest leverage score.

    Parameters
    ----------
    {common}
    {kernel}
    n_partitions : int >= 1, default=1
        Number of data partitions (contiguous row blocks); more than 1 runs DISQUEAK.
    block_size : int >= 1 or None, default=None
        Points added to the dictionary per update; None adapts it to the current
        dictionary size (at least 256), which keeps the time linear in ``n``.
    n_jobs : int or None, default=None
        Parallel jobs for DISQUEAK's leaves and merges (joblib semantics).
    random_state : int, RandomState instance or None, default=None
        Seeds the binomial thinning; fix it for reproducible dictionaries.
    backend : {{"auto", "numpy", "numba", "cupy"}} or None, default=None
        Engine for the kernel evaluations and the thinning loop; None follows
        :func:`kernelkit.set_config`. Resolved in ``fit`` into ``backend_``.
    verbose : int, default=0
        0 silent; 1 one line when the pass (or each DISQUEAK merge level) ends, with
        the dictionary size; 2 also one line per block of points added.

    Attributes
    ----------
    dictionary_indices_ : ndarray of shape (m,), int64
        Training indices of the dictionary points, ascending.
    dictionary_ : ndarray of shape (m, n_features) or None
        The dictionary points (None for a precomputed kernel). Usable as Nyström or
        EigenPro centers.
    dictionary_probabilities_ : ndarray of shape (m,)
        Their probabilities ``p~_i`` (approximate RLS).
    dictionary_multiplicities_ : ndarray of shape (m,), int64
        Their copies ``q_i >= 1``.
    dictionary_weights_ : ndarray of shape (m,)
        ``q_i / (qbar p~_i)``, the diagonal of ``S S'``: ``sum_i w_i phi_i phi_i'``
        approximates the covariance ``sum_j phi_j phi_j'`` of all points.
    leverage_scores_ : ndarray of shape (n_samples,)
        Estimated RLS of every training point from the final dictionary, capped at 1,
        ``phi_i' (Phi S S' Phi' + gamma I)^{-1} phi_i = tau~_i / (1 - eps)``: within
        ``[tau_i / (1 + eps), tau_i / (1 - eps)]`` for an epsilon-accurate dictionary
        (Lemma 2's ``tau_i / alpha <= tau~_i <= tau_i`` for the sampling estimate
        ``tau~_i``, which the algorithm shrinks ``p~`` with).
    effective_dim_ : float
        ``sum(leverage_scores_)``, an estimate of ``d_eff(gamma_reg)`` within
        ``[d_eff / (1 + eps), d_eff / (1 - eps)]`` for an accurate dictionary.
    qbar_ : int
        The oversampling used (``qbar`` resolved).
    gamma_reg_ : float
        The regularisation used (``gamma_reg`` resolved).
    backend_ : str
        Engine used.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Only when ``X`` has string column names.

    Raises
    ------
    ValueError
        In ``fit``: NaN/inf, fewer than 2 samples, ``gamma_reg <= 0``, ``epsilon``
        or ``delta`` outside (0, 1), invalid ``qbar``, an unknown kernel or
        backend, a precomputed matrix that is not square symmetric PSD.

    Warns
    -----
    UserWarning
        When the dictionary dies out, or still misses points after its repair rounds
        (``qbar`` too small for the data).

    See Also
    --------
    INKEstimate : one point at a time, streaming (``partial_fit``).
    RLSNystroem : Nyström features from RLS-sampled columns.
    ridge_leverage_scores : the exact scores.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelkit.leverage import SQUEAK
    >>> X = np.random.default_rng(0).standard_normal((500, 3))
    >>> sq = SQUEAK(gamma_reg=5.0, qbar=4, gamma=0.5, random_state=0).fit(X)
    >>> len(sq.dictionary_indices_) < 500
    True
    """

    def __init__(self, gamma_reg="auto", *, epsilon=0.5, qbar="auto", delta=0.1, kernel="rbf",
                 gamma=None, degree=3, coef0=1, kernel_params=None, n_partitions=1,
                 block_size=None, n_jobs=None, random_state=None, backend=None, verbose=0):
        self.gamma_reg = gamma_reg
        self.epsilon = epsilon
        self.qbar = qbar
        self.delta = delta
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.n_partitions = n_partitions
        self.block_size = block_size
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.backend = backend
        self.verbose = verbose

    def _precomputed(self):
        return isinstance(self.kernel, str) and self.kernel == "precomputed"

    def _fit_setup(self, X):
        """Validate parameters, then data; return (X, kernel evaluator, points, parameters)."""
        eps = _check_epsilon(self.epsilon)
        delta = _check_delta(self.delta)
        _resolve_gamma_reg(self.gamma_reg, 1)  # parameters before data: n only scales "auto"
        _resolve_qbar(self.qbar, 2, eps, delta)
        n_partitions = check_scalar_param(self.n_partitions, "n_partitions", low=1,
                                          low_inclusive=True, integer=True)
        if self.block_size is not None:
            check_scalar_param(self.block_size, "block_size", low=1, low_inclusive=True,
                               integer=True)
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2)
        gamma_reg = self.gamma_reg_ = _resolve_gamma_reg(self.gamma_reg, X.shape[0])
        self.backend_ = resolve_backend(self.backend, X)
        self.qbar_ = _resolve_qbar(self.qbar, X.shape[0], eps, delta)
        kern, pts = _make_eval(self, X)
        return X, kern, pts, dict(gamma_reg=gamma_reg, eps=eps, qbar=self.qbar_,
                                  n_partitions=n_partitions)

    def _fit_finish(self, X, kern, d, scores):
        pts = np.arange(X.shape[0]) if self._precomputed() else X
        eps = _check_epsilon(self.epsilon)
        seed = int(check_random_state(self.random_state).randint(0, 2**31 - 1))
        d, scores = _repair(d, kern, pts, scores, self.gamma_reg_, eps, self.qbar_, seed,
                            self.backend_)
        missed = int(np.sum(scores > (1.0 + 1e-9) / (1.0 - eps)))
        if missed and len(d):
            warnings.warn(f"SQUEAK's dictionary misses {missed} of {len(scores)} points (their "
                          f"estimates exceed 1 / (1 - epsilon), which an epsilon-accurate "
                          f"dictionary cannot give) with qbar={self.qbar_}: increase qbar.",
                          UserWarning, stacklevel=3)
        scores = np.minimum(scores, 1.0)  # a leverage score is at most 1
        if len(d) == 0:
            warnings.warn(f"SQUEAK's dictionary died out (qbar={self.qbar_} is too small for "
                          "this data: the estimates are then k(x, x) / gamma_reg). Increase "
                          "qbar (4 or more).", UserWarning, stacklevel=3)
        order = np.argsort(d.idx, kind="stable")
        self.dictionary_indices_ = d.idx[order]
        self.dictionary_ = None if self._precomputed() else X[self.dictionary_indices_]
        self.dictionary_probabilities_ = d.p[order]
        self.dictionary_multiplicities_ = d.q[order]
        self.dictionary_weights_ = d.q[order] / (self.qbar_ * d.p[order])
        self.leverage_scores_ = scores
        self.effective_dim_ = float(scores.sum())
        self._dict = d
        return self

    @atomic
    def fit(self, X, y=None):
        """Sample the dictionary in one pass and estimate every point's RLS.

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
        progress = Progress(self, check_verbose(self.verbose))
        X, kern, pts, prm = self._fit_setup(X)
        n = X.shape[0]
        progress(f"n={n}: one pass in blocks (kernel of each block against the dictionary, "
                 "an O(|D|^3) update per block)"
                 + (f" over {prm['n_partitions']} partitions, then their merge tree"
                    if prm["n_partitions"] > 1 else ""),
                 gamma_reg=prm["gamma_reg"], qbar=prm["qbar"], block_size=self.block_size or "auto")
        check_kernel_scale(kern.op, X, type(self).__name__)
        d = _run_squeak(kern, pts, n, prm["gamma_reg"], prm["eps"], prm["qbar"],
                        prm["n_partitions"], self.block_size, self.n_jobs, self.random_state,
                        self.backend_, progress)
        progress.done("dictionary", size=len(d))
        scores = _partition_scores(d, kern, pts, prm["gamma_reg"], prm["qbar"])
        progress.done("leverage scores", effective_dim=float(np.sum(scores)))
        return self._fit_finish(X, kern, d, scores)

    def estimate_leverage_scores(self, X):
        """RLS estimates of new points from the dictionary alone (SQUEAK's estimator).

        For a point ``x`` this estimates ``phi(x)' (sum_j phi_j phi_j' + gamma I)^{-1}
        phi(x)`` over the training points ``j``: the training points' own RLS for rows
        of the training data, an outlier score for new points.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        tau : ndarray of shape (n_samples,), float64

        Raises
        ------
        ValueError
            For a precomputed kernel (the new points' self-similarities are unknown),
            or on invalid ``X``.
        """
        return _estimate_new(self, X)


def _estimate_new(est, X):
    check_is_fitted(est)
    if est._precomputed():
        raise ValueError("estimate_leverage_scores needs the points themselves; it is not "
                         "available with kernel='precomputed'.")
    X = validate_data(est, X, reset=False, dtype=np.float64)
    kern = _make_eval(est, X)[0]
    return _query_scores(est._dict, kern, X, kern.diag(X), est.gamma_reg_, est.qbar_)


