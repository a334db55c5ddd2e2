"""Ridge leverage scores: exact, INK-ESTIMATE, SQUEAK / DISQUEAK, and RLS Nyström.

The ridge leverage score (RLS) of point ``i`` of a data set with ``n x n`` kernel
matrix ``K`` is

    tau_i(gamma) = [K (K + gamma I)^{-1}]_ii,   0 <= tau_i <= 1,

and their sum is the effective dimension ``d_eff(gamma) = tr(K (K + gamma I)^{-1})``.
Sampling Nyström columns with probabilities proportional to the RLS keeps a
dictionary of about ``d_eff(gamma) log n`` points with a spectral guarantee on the
approximation, instead of the ``n`` columns uniform sampling may need on
coherent data (Alaoui & Mahoney, NeurIPS 2015).

**The regulariser gamma_reg.** The papers call it gamma and apply it to the
*unnormalised* kernel matrix, as scikit-learn's ``KernelRidge(alpha=...)`` does:
kernel ridge regression solving ``(K + alpha I) c = y`` has RLS
``tau_i(gamma_reg=alpha)``. With the normalised objective
``(1/n) sum (y_i - f(x_i))^2 + lambda ||f||^2`` the same system reads
``(K + n lambda I) c = y``, so ``gamma_reg = n * lambda``. The eigenvalues of ``K``
grow like ``n``: a fixed ``gamma_reg`` lets ``d_eff`` grow with ``n``, while
``gamma_reg = n * lambda`` with a fixed ``lambda`` keeps it (nearly) constant.
kernelkit already uses ``gamma`` for the kernel scale, hence the name.

References
----------
- D. Calandriello, A. Lazaric, M. Valko. Analysis of Nyström method with
  sequential ridge leverage scores estimation. UAI 2016 (INK-ESTIMATE).
- D. Calandriello, A. Lazaric, M. Valko. Distributed adaptive sampling for kernel
  matrix approximation. AISTATS 2017 (SQUEAK, DISQUEAK).
- A. Alaoui, M. W. Mahoney. Fast randomized kernel ridge regression with
  statistical guarantees. NeurIPS 2015 (RLS sampling for Nyström).
"""

import math
import warnings
from contextlib import nullcontext
from numbers import Integral

import numpy as np
from scipy import linalg
from scipy.linalg import lapack
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from ._config import get_config
from .backend import get_backend, resolve_backend
from .kernels import Kernel, make_kernel
from .utils._linalg import SMALL_SOLVE
from .utils._threads import single_blas_thread
from .utils._validation import check_input, check_scalar_param

__all__ = ["ridge_leverage_scores", "effective_dimension", "SQUEAK", "INKEstimate",
           "RLSNystroem"]

# Theorem 1 of Calandriello et al. (2017): qbar >= 39 alpha log(2n / delta) / eps^2.
THEORY_CONSTANT = 39.0
_MIN_BLOCK = 256  # smallest block SQUEAK adds to its dictionary at once
_INK_CHUNK = 256  # arriving points whose kernel block INK-ESTIMATE computes at once
# Below about 4 copies per point a SQUEAK / INK dictionary can die out on large data:
# a dictionary point's estimate counts its own weight q / (qbar p~), which grows as p~
# shrinks, so p~ <- (1 - eps) tau~ can spiral to 0 when q / qbar >= 1 - eps.
_MIN_SAMPLER_QBAR = 4
_SAMPLERS = ("squeak", "ink", "exact", "uniform")


# ----------------------------------------------------------------- parameters
def _check_gamma_reg(value, name="gamma_reg"):
    return check_scalar_param(value, name, low=0.0)


def _check_epsilon(value, name="epsilon"):
    eps = check_scalar_param(value, name, low=0.0)
    if eps >= 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {value!r}.")
    return eps


def _check_delta(value):
    delta = check_scalar_param(value, "delta", low=0.0)
    if delta >= 1.0:
        raise ValueError(f"delta must be in (0, 1), got {value!r}.")
    return delta


def theory_qbar(n_samples, epsilon=0.5, delta=0.1):
    """Oversampling ``qbar`` that Theorem 1 of SQUEAK requires for its guarantee.

    ``qbar = ceil(39 alpha log(2 n / delta) / epsilon^2)`` with
    ``alpha = (1 + epsilon) / (1 - epsilon)`` (Calandriello, Lazaric & Valko,
    AISTATS 2017, Theorem 1; the same order as INK-ESTIMATE's space budget).

    Parameters
    ----------
    n_samples : int >= 1
        Number of points ``n``.
    epsilon : float in (0, 1), default=0.5
        Accuracy of the dictionary.
    delta : float in (0, 1), default=0.1
        Failure probability.

    Returns
    -------
    qbar : int
        Conservative: with it the dictionary keeps nearly every point unless
        ``n`` is much larger than ``qbar * d_eff``.

    Raises
    ------
    ValueError
        If an argument is out of range (the message names it).
    """
    n = check_scalar_param(n_samples, "n_samples", low=1, low_inclusive=True, integer=True)
    eps = _check_epsilon(epsilon)
    delta = _check_delta(delta)
    alpha = (1.0 + eps) / (1.0 - eps)
    return int(math.ceil(THEORY_CONSTANT * alpha * math.log(2.0 * n / delta) / eps**2))


def _resolve_qbar(qbar, n, eps, delta):
    if isinstance(qbar, str) and qbar == "auto":
        return theory_qbar(n, eps, delta)
    if isinstance(qbar, bool) or not isinstance(qbar, Integral) or qbar < 1:
        raise ValueError(f"qbar must be 'auto' or an integer >= 1, got {qbar!r}.")
    return int(qbar)


def _check_precomputed(K, name="X"):
    """A precomputed kernel matrix must be square, symmetric and PSD."""
    n = K.shape[0]
    if K.ndim != 2 or K.shape[1] != n:
        raise ValueError(f"kernel='precomputed' needs a square {name} (the n x n kernel "
                         f"matrix), got shape {K.shape}.")
    scale = max(float(np.abs(K).max()), np.finfo(np.float64).tiny)
    if not np.allclose(K, K.T, rtol=1e-7, atol=1e-10 * scale):
        raise ValueError(f"{name} is not symmetric: a precomputed kernel matrix must be "
                         "symmetric positive semi-definite.")
    diag = np.diagonal(K)
    # PSD check on (a regular sample of) principal submatrices, which are PSD when K is
    rows = np.unique(np.linspace(0, n - 1, min(n, 1000)).astype(np.int64))
    sub = K[np.ix_(rows, rows)]
    lam_min = float(linalg.eigvalsh(sub, subset_by_index=[0, 0], check_finite=False)[0])
    if np.any(diag < -1e-12 * scale) or lam_min < -1e-6 * scale * len(rows):
        raise ValueError(f"{name} is not positive semi-definite (smallest eigenvalue "
                         f"{min(lam_min, float(diag.min())):.3g}): a precomputed kernel "
                         "matrix must be symmetric positive semi-definite.")


# ------------------------------------------------------------ kernel evaluation
class _KernelEval:
    """Host float64 kernel blocks between 'points' for the samplers.

    Points are feature rows (kernelkit Kernel through an engine, or a callable on
    the host) or, for ``kernel="precomputed"``, integer indices into ``K``.
    Picklable, so that joblib / dask workers can evaluate blocks.
    """

    def __init__(self, kernel, n_features, backend, K=None):
        self.K = K
        self.kernel = kernel
        self.spec = kernel.spec(n_features) if isinstance(kernel, Kernel) else None
        self.backend = backend

    def __call__(self, A, B=None):
        if self.K is not None:
            return np.array(self.K[np.ix_(A, A if B is None else B)], dtype=np.float64)
        if self.spec is not None:
            eng = get_backend(self.backend)
            out = eng.pairwise(self.spec, eng.asarray(A), None if B is None else eng.asarray(B))
            return np.asarray(eng.to_host(out), dtype=np.float64)
        return self.kernel(A, A if B is None else B)

    def diag(self, A):
        if self.K is not None:
            return np.array(self.K[A, A], dtype=np.float64)
        if self.spec is not None:
            eng = get_backend(self.backend)
            return np.asarray(eng.to_host(eng.diag(self.spec, eng.asarray(A))), dtype=np.float64)
        out = np.empty(len(A))
        for s in range(0, len(A), 64):
            out[s:s + 64] = np.diagonal(self.kernel(A[s:s + 64], A[s:s + 64]))
        return out

    def rows_per_block(self, ncols):
        budget = get_config()["working_memory"] * 2**20
        return max(1, int(budget // (8 * 3 * max(1, ncols))))


def _make_eval(estimator, X, kernel_params_default=(3, 1)):
    """The estimator's kernel as a :class:`_KernelEval` and the points of ``X``."""
    if isinstance(estimator.kernel, str) and estimator.kernel == "precomputed":
        _check_precomputed(X)
        return _KernelEval(None, X.shape[1], estimator.backend_, K=X), np.arange(X.shape[0])
    degree = kernel_params_default[0] if estimator.degree is None else estimator.degree
    coef0 = kernel_params_default[1] if estimator.coef0 is None else estimator.coef0
    kernel = make_kernel(estimator.kernel, estimator.gamma, degree, coef0,
                         estimator.kernel_params)
    return _KernelEval(kernel, X.shape[1], estimator.backend_), X


def _take(pts, idx):
    return pts[idx]


# ------------------------------------------------------------------ exact RLS
def _kernel_eval_from_args(X, kernel, gamma, degree, coef0, kernel_params, backend):
    if isinstance(kernel, str) and kernel == "precomputed":
        X = check_input(X)
        X = np.asarray(X, dtype=np.float64)
        _check_precomputed(X)
        return _KernelEval(None, X.shape[1], "numpy", K=X), np.arange(X.shape[0])
    X = np.asarray(check_input(X, min_samples=1), dtype=np.float64)
    name = resolve_backend(backend, X)
    k = make_kernel(kernel, gamma, degree, coef0, kernel_params)
    return _KernelEval(k, X.shape[1], name), X


def ridge_leverage_scores(X, kernel="rbf", gamma_reg=1.0, *, gamma=None, degree=3, coef0=1,
                          kernel_params=None, backend=None):
    """Exact ridge leverage scores ``tau_i = [K (K + gamma_reg I)^{-1}]_ii``.

    The reference the sequential estimators are tested against, and a tool in its
    own right for data sets whose ``n x n`` kernel matrix fits in memory. The kernel
    matrix is built blockwise by the engine directly into one float64 buffer, which
    is then factored and inverted in place (Cholesky, triangular inverse), so the
    peak memory is one ``n x n`` float64 matrix; time ``O(n^2 d + n^3)``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Data, or the ``(n_samples, n_samples)`` kernel matrix when
        ``kernel="precomputed"``. Not modified.
    kernel : str, Kernel or callable, default="rbf"
        As :class:`kernelkit.KernelRidge`'s ``kernel``, or ``"precomputed"``.
    gamma_reg : float > 0, default=1.0
        Ridge regularisation gamma of the papers, on the unnormalised kernel matrix:
        equal to ``KernelRidge``'s ``alpha`` and to ``n * lambda`` for the normalised
        ridge penalty ``lambda`` (see the module docstring for how it scales with ``n``).
    gamma, degree, coef0, kernel_params
        Kernel parameters, as in :class:`kernelkit.KernelRidge`.
    backend : {"auto", "numpy", "numba", "cupy"} or None, default=None
        Engine that evaluates the kernel; None follows :func:`kernelkit.set_config`.

    Returns
    -------
    tau : ndarray of shape (n_samples,), float64
        Values in [0, 1]; their sum is :func:`effective_dimension`.

    Raises
    ------
    ValueError
        On NaN/inf, empty input, ``gamma_reg <= 0``, an unknown kernel or backend,
        or a precomputed matrix that is not square symmetric PSD.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelkit.leverage import ridge_leverage_scores
    >>> X = np.random.default_rng(0).standard_normal((50, 3))
    >>> tau = ridge_leverage_scores(X, gamma_reg=1.0, gamma=0.5)
    >>> bool(np.all((tau >= 0) & (tau <= 1)))
    True
    """
    gamma_reg = _check_gamma_reg(gamma_reg)
    kern, pts = _kernel_eval_from_args(X, kernel, gamma, degree, coef0, kernel_params, backend)
    return _exact_scores(kern, pts, gamma_reg)


def _exact_scores(kern, pts, gamma_reg):
    A = kern(pts)  # a fresh float64 buffer (a copy for precomputed input)
    n = A.shape[0]
    with _blas_for(n):
        return _exact_from_matrix(A, n, gamma_reg, kern)


def _exact_from_matrix(A, n, gamma_reg, kern):
    A = np.ascontiguousarray(A)
    A.flat[:: n + 1] += gamma_reg
    # A is symmetric: factor its C-ordered buffer as the Fortran transpose (same matrix)
    F = A.T if A.flags.c_contiguous else A
    L, info = lapack.dpotrf(F, lower=1, overwrite_a=1, clean=1)
    if info != 0:
        raise ValueError("the kernel matrix plus gamma_reg * I is not positive definite: the "
                         "kernel is not positive semi-definite; check the kernel and its "
                         "parameters.")
    Linv, info = lapack.dtrtri(L, lower=1, overwrite_c=1)
    if info != 0:
        raise ValueError("triangular inversion failed; increase gamma_reg.")
    # diag((K + gamma I)^{-1}) = column sums of squares of L^{-1}, blockwise
    diag_inv = np.zeros(n)
    rows = max(1, kern.rows_per_block(n))
    for r0 in range(0, n, rows):
        blk = Linv[r0:r0 + rows]
        diag_inv += np.einsum("ij,ij->j", blk, blk)
    return np.clip(1.0 - gamma_reg * diag_inv, 0.0, 1.0)


def effective_dimension(X, kernel="rbf", gamma_reg=1.0, *, gamma=None, degree=3, coef0=1,
                        kernel_params=None, backend=None):
    """Effective dimension ``d_eff(gamma) = tr(K (K + gamma I)^{-1}) = sum_i tau_i``.

    Computed exactly from the eigenvalues ``lambda_j`` of the kernel matrix as
    ``sum_j lambda_j / (lambda_j + gamma)``, so many regularisations cost one
    eigendecomposition (``O(n^3)`` time, one ``n x n`` matrix in memory).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Data, or the kernel matrix when ``kernel="precomputed"``. Not modified.
    kernel : str, Kernel or callable, default="rbf"
        As :func:`ridge_leverage_scores`.
    gamma_reg : float > 0 or array-like of floats > 0, default=1.0
        Regularisation(s) gamma (see :func:`ridge_leverage_scores`).
    gamma, degree, coef0, kernel_params
        Kernel parameters, as in :class:`kernelkit.KernelRidge`.
    backend : {"auto", "numpy", "numba", "cupy"} or None, default=None
        Engine that evaluates the kernel.

    Returns
    -------
    d_eff : float or ndarray
        A float for a scalar ``gamma_reg``, else an array of its shape. Between 0 and
        the rank of ``K``, decreasing in ``gamma_reg``.

    Raises
    ------
    ValueError
        As :func:`ridge_leverage_scores`.
    """
    g = np.asarray(gamma_reg, dtype=np.float64) if not isinstance(gamma_reg, str) else None
    if g is None or g.size == 0 or not np.all(np.isfinite(g)) or np.any(g <= 0):
        raise ValueError(f"gamma_reg must be a positive finite number or an array of them, "
                         f"got {gamma_reg!r}.")
    kern, pts = _kernel_eval_from_args(X, kernel, gamma, degree, coef0, kernel_params, backend)
    lam = np.clip(linalg.eigvalsh(kern(pts), overwrite_a=True, check_finite=False), 0.0, None)
    out = (lam[None, :] / (lam[None, :] + g.reshape(-1, 1))).sum(axis=1)
    return float(out[0]) if g.ndim == 0 else out.reshape(g.shape)


# ------------------------------------------------------------------ dictionary
class _Dict:
    """A SQUEAK dictionary: global indices, points, probabilities p~, copies q, Gram."""

    __slots__ = ("idx", "pts", "p", "q", "G")

    def __init__(self, idx, pts, p, q, G):
        self.idx, self.pts, self.p, self.q, self.G = idx, pts, p, q, G

    def __len__(self):
        return len(self.idx)

    def subset(self, keep):
        return _Dict(self.idx[keep], _take(self.pts, keep), self.p[keep], self.q[keep],
                     self.G[np.ix_(keep, keep)])


def _leaf(idx, pts, qbar, kern):
    """All points with p~ = 1 and qbar copies (an exact, trivially accurate dictionary)."""
    n = len(idx)
    return _Dict(np.asarray(idx, dtype=np.int64), pts, np.ones(n),
                 np.full(n, qbar, dtype=np.int64), kern(pts))


def _concat(a, b, kern):
    if a is None or len(a) == 0:
        return b
    if len(b) == 0:
        return a
    cross = kern(a.pts, b.pts)
    G = np.block([[a.G, cross], [cross.T, b.G]])
    return _Dict(np.concatenate([a.idx, b.idx]), np.concatenate([a.pts, b.pts]),
                 np.concatenate([a.p, b.p]), np.concatenate([a.q, b.q]), G)


def _blas_for(m):
    """One BLAS thread for small dense factorizations (as ``solve_ridge``): two
    OpenBLAS threads gain little there and stall badly whenever a core is busy."""
    return single_blas_thread() if m < SMALL_SOLVE else nullcontext()


def _factor(d, gamma_reg, qbar):
    """Cholesky factor of ``W K_DD W + gamma I`` and the weights ``w = q / (qbar p~)``."""
    w = d.q / (qbar * d.p)
    sw = np.sqrt(w)
    A = sw[:, None] * d.G * sw[None, :]
    A.flat[:: len(d) + 1] += gamma_reg
    try:
        L = linalg.cholesky(A, lower=True, overwrite_a=True, check_finite=False)
    except linalg.LinAlgError:
        raise ValueError("the kernel matrix of the dictionary is not positive semi-definite: "
                         "check the kernel and its parameters.") from None
    return L, sw, w


def _dictionary_scores(d, gamma_reg, eps, qbar):
    """The RLS estimator of SQUEAK for the dictionary's own points.

    For ``j`` in the dictionary, ``(1 - eps)/gamma (k_jj - k_j' S (S'KS + gamma I)^{-1} S' k_j)``
    equals ``(1 - eps)(1 - gamma [(W K W + gamma I)^{-1}]_jj) / w_j``.
    """
    if len(d) == 0:
        return np.empty(0)
    L, _, w = _factor(d, gamma_reg, qbar)
    Linv, info = lapack.dtrtri(L, lower=1, overwrite_c=1)
    diag_inv = np.einsum("ij,ij->j", Linv, Linv)
    return np.maximum((1.0 - eps) * (1.0 - gamma_reg * diag_inv) / w, 0.0)


def _dict_update(d, gamma_reg, eps, qbar, rng, loops):
    """SQUEAK's Dict-Update: re-estimate, shrink ``p~ = min(tau~, p~)``, thin the copies."""
    if len(d) == 0:
        return d
    with _blas_for(len(d)):
        tau = _dictionary_scores(d, gamma_reg, eps, qbar)
    p_new = np.minimum(tau, d.p)
    q_new = loops.thin(d.q, p_new / d.p, rng.random(len(d)))
    keep = np.flatnonzero(q_new > 0)
    out = d.subset(keep)
    out.p, out.q = p_new[keep], np.asarray(q_new[keep], dtype=np.int64)
    return out


def _query_scores(d, kern, pts, kdiag, gamma_reg, qbar):
    """``phi(x)' (Phi S S' Phi' + gamma I)^{-1} phi(x)`` for arbitrary points, from the
    dictionary alone: SQUEAK's estimator without its ``(1 - eps)`` factor, so in
    ``[tau / (1 + eps), tau / (1 - eps)]`` for an epsilon-accurate dictionary."""
    n = len(kdiag)
    if len(d) == 0:
        return np.maximum(kdiag, 0.0) / gamma_reg
    with _blas_for(len(d)):
        L, sw, _ = _factor(d, gamma_reg, qbar)
    out = np.empty(n)
    rows = kern.rows_per_block(len(d))
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        C = kern(d.pts, _take(pts, slice(r0, r1)))
        C *= sw[:, None]
        with _blas_for(len(d) if r1 - r0 < SMALL_SOLVE else SMALL_SOLVE):
            Z = linalg.solve_triangular(L, C, lower=True, check_finite=False, overwrite_b=True)
        out[r0:r1] = kdiag[r0:r1] - np.einsum("ij,ij->j", Z, Z)
    return np.maximum(out / gamma_reg, 0.0)


def _squeak_sequential(idx, pts, kern, gamma_reg, eps, qbar, block_size, seed, backend):
    """SQUEAK over one partition: add blocks of points, Dict-Update after each."""
    loops = get_backend(backend).leverage_loops()
    rng = np.random.default_rng(seed)
    d = None
    pos, n = 0, len(idx)
    while pos < n:
        b = block_size or max(_MIN_BLOCK, 0 if d is None else len(d))
        leaf = _leaf(idx[pos:pos + b], _take(pts, slice(pos, pos + b)), qbar, kern)
        d = _dict_update(_concat(d, leaf, kern), gamma_reg, eps, qbar, rng, loops)
        pos += b
    return d


def _squeak_merge(a, b, kern, gamma_reg, eps, qbar, seed, backend):
    """DISQUEAK's Dict-Merge: Dict-Update of the union of two dictionaries."""
    loops = get_backend(backend).leverage_loops()
    return _dict_update(_concat(a, b, kern), gamma_reg, eps, qbar,
                        np.random.default_rng(seed), loops)


def _partition_scores(d, kern, pts, gamma_reg, qbar):
    """Final RLS estimates of one partition's points from the final dictionary."""
    return _query_scores(d, kern, pts, kern.diag(pts), gamma_reg, qbar)


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
                random_state, backend):
    """SQUEAK (one partition) or DISQUEAK's merge tree; returns the root dictionary."""
    from joblib import Parallel, delayed

    n_partitions = min(n_partitions, n)
    parts = np.array_split(np.arange(n), n_partitions)
    leaf_seeds, merge_seeds = _seeds(random_state, n_partitions)
    args = (kern, gamma_reg, eps, qbar)
    if n_partitions == 1:
        return _squeak_sequential(parts[0], pts, *args, block_size, leaf_seeds[0], backend)
    items = Parallel(n_jobs=n_jobs)(
        delayed(_squeak_sequential)(part, _take(pts, part), *args, block_size, seed, backend)
        for part, seed in zip(parts, leaf_seeds, strict=True))
    node = 0
    for pairs, carry in _tree_pairs(len(items)):
        merged = Parallel(n_jobs=n_jobs)(
            delayed(_squeak_merge)(items[i], items[j], *args, merge_seeds[node + k], backend)
            for k, (i, j) in enumerate(pairs))
        node += len(pairs)
        items = merged + ([items[-1]] if carry else [])
    return items[0]


_KERNEL_DOC = """kernel : str, Kernel or callable, default="rbf"
        A kernelkit kernel name (rbf, laplacian, matern, polynomial, linear, cosine,
        ntk, nngp), a :class:`kernelkit.kernels.Kernel`, a callable
        ``f(X, Y) -> (n_X, n_Y)`` evaluated on the host, or ``"precomputed"`` (``X``
        is then the symmetric PSD ``n x n`` kernel matrix).
    gamma : float, default=None
        Kernel scale for rbf, laplacian, matern and polynomial; None means
        ``1 / n_features``.
    degree : float, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1
        Constant term of the polynomial kernel.
    kernel_params : dict, default=None
        Further parameters of the named kernel or of the callable."""

_COMMON_DOC = """gamma_reg : float > 0, default=1.0
        The papers' ridge regularisation gamma, applied to the unnormalised kernel
        matrix: the RLS are ``tau_i = [K (K + gamma_reg I)^{-1}]_ii``. It equals
        ``KernelRidge``'s ``alpha`` and ``n * lambda`` for a normalised ridge penalty
        ``lambda``; since ``K``'s eigenvalues grow like ``n``, keep ``d_eff`` fixed as
        ``n`` grows with ``gamma_reg = n * lambda``. Larger values give smaller
        dictionaries.
    epsilon : float in (0, 1), default=0.5
        Accuracy epsilon of the papers: with an epsilon-accurate dictionary the
        estimates satisfy ``tau_i / alpha <= tau~_i <= tau_i`` with
        ``alpha = (1 + epsilon) / (1 - epsilon)``, and the Nyström approximation
        ``K~`` of the dictionary satisfies ``0 <= K - K~ <= gamma_reg / (1 - epsilon) I``.
        0.5 is the value the papers' guarantees are usually instantiated with.
    qbar : int >= 1 or "auto", default="auto"
        Oversampling q-bar: copies given to every point when it enters the
        dictionary; the dictionary holds about ``qbar * d_eff`` copies. "auto" is
        Theorem 1's value ``ceil(39 alpha log(2 n / delta) / epsilon^2)``
        (:func:`theory_qbar`), which carries the guarantee with probability
        ``1 - delta`` but is conservative: it keeps nearly all points unless ``n``
        is much larger than ``qbar * d_eff``. Integers of 4 to 20 are the practical
        range (smaller, faster dictionaries whose accuracy the tests measure); below 4
        the dictionary can die out on large data (a warning says so), because a
        dictionary point's estimate counts its own weight ``q / (qbar p~)``.
    delta : float in (0, 1), default=0.1
        Failure probability used by ``qbar="auto"``."""


# ---------------------------------------------------------------------- SQUEAK
class SQUEAK(BaseEstimator):
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
    (``leverage_scores_``), in one blockwise pass.

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
        Estimated RLS of every training point from the final dictionary,
        ``phi_i' (Phi S S' Phi' + gamma I)^{-1} phi_i = tau~_i / (1 - eps)``: within
        ``[tau_i / (1 + eps), tau_i / (1 - eps)]`` for an epsilon-accurate dictionary
        (Lemma 2's ``tau_i / alpha <= tau~_i <= tau_i`` for the sampling estimate
        ``tau~_i``, which the algorithm shrinks ``p~`` with).
    effective_dim_ : float
        ``sum(leverage_scores_)``, an estimate of ``d_eff(gamma_reg)`` within
        ``[d_eff / (1 + eps), d_eff / (1 - eps)]`` for an accurate dictionary.
    qbar_ : int
        The oversampling used (``qbar`` resolved).
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

    def __init__(self, gamma_reg=1.0, *, epsilon=0.5, qbar="auto", delta=0.1, kernel="rbf",
                 gamma=None, degree=3, coef0=1, kernel_params=None, n_partitions=1,
                 block_size=None, n_jobs=None, random_state=None, backend=None):
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

    def _precomputed(self):
        return isinstance(self.kernel, str) and self.kernel == "precomputed"

    def _fit_setup(self, X):
        """Validate; return (X, kernel evaluator, points, resolved parameters)."""
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2)
        gamma_reg = _check_gamma_reg(self.gamma_reg)
        eps = _check_epsilon(self.epsilon)
        delta = _check_delta(self.delta)
        n_partitions = check_scalar_param(self.n_partitions, "n_partitions", low=1,
                                          low_inclusive=True, integer=True)
        if self.block_size is not None:
            check_scalar_param(self.block_size, "block_size", low=1, low_inclusive=True,
                               integer=True)
        self.backend_ = resolve_backend(self.backend, X)
        self.qbar_ = _resolve_qbar(self.qbar, X.shape[0], eps, delta)
        kern, pts = _make_eval(self, X)
        return X, kern, pts, dict(gamma_reg=gamma_reg, eps=eps, qbar=self.qbar_,
                                  n_partitions=n_partitions)

    def _fit_finish(self, X, kern, d, scores):
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
        X, kern, pts, prm = self._fit_setup(X)
        n = X.shape[0]
        d = _run_squeak(kern, pts, n, prm["gamma_reg"], prm["eps"], prm["qbar"],
                        prm["n_partitions"], self.block_size, self.n_jobs, self.random_state,
                        self.backend_)
        scores = _partition_scores(d, kern, pts, prm["gamma_reg"], prm["qbar"])
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
    return _query_scores(est._dict, kern, X, kern.diag(X), float(est.gamma_reg), est.qbar_)


# ---------------------------------------------------------------- INK-ESTIMATE
class INKEstimate(BaseEstimator):
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
    leverage_scores_ : ndarray of shape (n_samples_seen_,)
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

    def __init__(self, gamma_reg=1.0, *, epsilon=0.5, qbar="auto", delta=0.1, kernel="rbf",
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
        X = validate_data(self, X, dtype=np.float64, reset=first,
                          ensure_min_samples=2 if first else 1)
        gamma_reg = _check_gamma_reg(self.gamma_reg)
        eps = _check_epsilon(self.epsilon)
        delta = _check_delta(self.delta)
        if first:
            self.backend_ = resolve_backend(self.backend, X)
            self.qbar_ = _resolve_qbar(self.qbar, X.shape[0], eps, delta)
            rs = check_random_state(self.random_state)
            self._seed = int(rs.randint(0, 2**32, dtype=np.uint64)) << 32 | int(
                rs.randint(0, 2**32, dtype=np.uint64))
            self.n_samples_seen_ = 0
            self.leverage_scores_ = np.empty(0)
            self._dict = None
        kern, pts = _make_eval(self, X)
        d, arrival = _ink_run(self._dict, kern, pts, self.n_samples_seen_, gamma_reg, eps,
                              self.qbar_, self._seed, self.backend_)
        self._dict = d
        self.n_samples_seen_ += X.shape[0]
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
    loops = get_backend(backend).leverage_loops()
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
        if m0:
            cross = kern(d.pts, new_pts)
            K = np.block([[d.G, cross], [cross.T, kern(new_pts)]])
        else:
            K = kern(new_pts)
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


# ------------------------------------------------------------------ RLS Nyström
def _inclusion_probabilities(scores, m):
    """``pi_i = min(1, c s_i)`` with ``sum(pi) = m`` (capping at 1 by water-filling)."""
    n = len(scores)
    if m >= n:
        return np.ones(n)
    s = np.maximum(scores, max(float(scores.max()), 1.0) * 1e-12)
    order = np.argsort(-s, kind="stable")
    ss = s[order]
    suffix = np.cumsum(ss[::-1])[::-1]
    k = np.arange(m)  # k entries capped at 1
    c = (m - k) / suffix[:m]
    ok = np.flatnonzero(c * ss[:m] <= 1.0)
    k0 = int(ok[0])
    pi = np.minimum(1.0, c[k0] * s)
    pi[order[:k0]] = 1.0
    return pi


def _systematic_sample(pi, m, rs):
    """Exactly ``m`` distinct units with inclusion probabilities ``pi`` (sum m), in random order.

    Madow's systematic sampling: cumulate ``pi`` over a random permutation and take
    the units hit by ``u, u + 1, ..., u + m - 1`` for one uniform ``u``.
    """
    n = len(pi)
    perm = rs.permutation(n)
    cs = np.cumsum(pi[perm])
    cs *= m / cs[-1]
    hits = np.searchsorted(cs, rs.uniform() + np.arange(m), side="right")
    hits = np.minimum(hits, n - 1)
    chosen = np.unique(perm[hits])
    if len(chosen) < m:  # only through rounding at pi = 1: top up with the largest pi
        rest = np.setdiff1d(np.arange(n), chosen)
        extra = rest[np.argsort(-pi[rest], kind="stable")[: m - len(chosen)]]
        chosen = np.sort(np.concatenate([chosen, extra]))
    return chosen


def _match_gamma_reg(kern, pts, n, target, rs):
    """gamma such that d_eff(gamma) ~= target, estimated from a uniform pilot dictionary.

    A uniform pilot of ``s`` points weighted ``n / s`` gives, through SQUEAK's
    estimator, RLS estimates ``tau^_i(gamma)`` of (a uniform sample of) all points
    for every gamma at once from one eigendecomposition; ``d_eff`` is estimated as
    ``sum_i min(1, tau^_i)`` and gamma found by bisection on ``log gamma``. Isolated
    points far from the pilot count fully, as they do in the true ``d_eff``.
    """
    s = min(n, max(500, int(2 * target)))
    P = np.sort(rs.choice(n, s, replace=False)) if s < n else np.arange(n)
    nq = min(n, 5000)
    Q = np.sort(rs.choice(n, nq, replace=False)) if nq < n else np.arange(n)
    w = n / s
    with _blas_for(s):
        lam, V = linalg.eigh(w * kern(_take(pts, P)), check_finite=False)
    lam = np.clip(lam, 0.0, None)
    kd = kern.diag(_take(pts, Q))
    Z2 = np.empty((s, nq))
    rows = kern.rows_per_block(s)
    for r0 in range(0, nq, rows):
        C = kern(_take(pts, P), _take(pts, Q[r0:r0 + rows]))
        Z2[:, r0:r0 + rows] = (V.T @ C) ** 2 * w

    def d_eff(g):
        tau = (kd - (Z2 / (lam + g)[:, None]).sum(axis=0)) / g
        return (n / nq) * float(np.clip(tau, 0.0, 1.0).sum())

    top = max(float(lam.max()), float(kd.max()), 1e-300)
    lo, hi = np.log(top * 1e-12), np.log(top * 1e3)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if d_eff(np.exp(mid)) > target:
            lo = mid
        else:
            hi = mid
    return float(np.exp(0.5 * (lo + hi)))


class RLSNystroem(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Nyström features from columns sampled by ridge leverage scores.

    The interface of :class:`sklearn.kernel_approximation.Nystroem` (``kernel``,
    ``gamma``, ``n_components``, ``random_state``, ``components_``,
    ``component_indices_``, ``normalization_``, ``set_output``), with columns chosen
    by their ridge leverage scores instead of uniformly:

    1. the regulariser is matched to the budget as the papers do: with
       ``gamma_reg="auto"``, ``gamma_reg_`` makes the effective dimension about
       ``n_components / qbar`` (so the expected RLS dictionary, ``qbar * d_eff``
       copies, has the budget's size), estimated through a uniform pilot dictionary;
    2. the sampler estimates every point's RLS ``tau~_i(gamma_reg_)``: SQUEAK
       (default; one pass, never the ``n x n`` matrix), INK-ESTIMATE, or the exact
       scores; ``"uniform"`` reproduces scikit-learn's ``Nystroem`` sampling;
    3. exactly ``n_components`` distinct columns are drawn with inclusion
       probabilities ``pi_i = min(1, c tau~_i)``, ``sum pi = n_components``
       (systematic sampling in random order), and weighted as the theory requires,
       ``w_i = 1 / pi_i`` (so ``sum_i w_i phi_i phi_i'`` is unbiased for the
       covariance); the features are
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

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        The sampled training points (rows of the kernel matrix when precomputed).
    component_indices_ : ndarray of shape (n_components,), int64
        Their training indices, ascending.
    component_weights_ : ndarray of shape (n_components,)
        The column weights ``1 / pi_i`` (``n / n_components`` for "uniform").
    normalization_ : ndarray of shape (n_components, n_components)
        ``(W K_CC W)^{+1/2} W``: features are ``k(X, components_) @ normalization_.T``.
    gamma_reg_ : float or None
        The regulariser used (None for "uniform").
    leverage_scores_ : ndarray of shape (n_samples,) or None
        The sampler's RLS estimates (None for "uniform").
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
        ``qbar < 1``, a precomputed matrix that is not square symmetric PSD.

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
                 random_state=None, n_jobs=None, backend=None):
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

    _precomputed = SQUEAK._precomputed

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
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2)
        n = X.shape[0]
        if not isinstance(self.sampler, str) or self.sampler not in _SAMPLERS:
            raise ValueError(f"sampler must be one of {_SAMPLERS}, got {self.sampler!r}.")
        m = check_scalar_param(self.n_components, "n_components", low=1, low_inclusive=True,
                               integer=True)
        if m > n:
            warnings.warn("n_components > n_samples. This is not possible.\nn_components was "
                          "set to n_samples, which results in inefficient evaluation of the "
                          "full kernel.", stacklevel=2)
            m = n
        eps = _check_epsilon(self.epsilon)
        qbar = _resolve_qbar(self.qbar, n, eps, 0.1)
        auto = isinstance(self.gamma_reg, str) and self.gamma_reg == "auto"
        gamma_reg = None if auto else _check_gamma_reg(self.gamma_reg)
        self.backend_ = resolve_backend(self.backend, X)
        kern, pts = _make_eval(self, X, kernel_params_default=(3, 1))
        rs = check_random_state(self.random_state)

        if self.sampler == "uniform":
            idx = np.sort(rs.permutation(n)[:m])
            weights = np.full(m, n / m)
            self.gamma_reg_ = self.leverage_scores_ = self.effective_dim_ = None
        else:
            if auto:
                gamma_reg = _match_gamma_reg(kern, pts, n, m / qbar, rs)
            seed = int(rs.randint(0, 2**31 - 1))
            qs = max(qbar, _MIN_SAMPLER_QBAR)
            if self.sampler == "exact":
                scores = _exact_scores(kern, pts, gamma_reg)
            elif self.sampler == "squeak":
                d = _run_squeak(kern, pts, n, gamma_reg, eps, qs, 1, None, self.n_jobs, seed,
                                self.backend_)
                scores = _partition_scores(d, kern, pts, gamma_reg, qs)
            else:
                d, _ = _ink_run(None, kern, pts, 0, gamma_reg, eps, qs, seed, self.backend_)
                scores = _partition_scores(d, kern, pts, gamma_reg, qs)
            pi = _inclusion_probabilities(scores, m)
            idx = _systematic_sample(pi, m, rs)
            weights = 1.0 / pi[idx]
            self.gamma_reg_ = float(gamma_reg)
            self.leverage_scores_ = scores
            self.effective_dim_ = float(scores.sum())

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
        self.component_indices_ = idx
        self.component_weights_ = weights
        self.components_ = X[idx]
        self._n_features_out = m
        return self

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
        kern = _make_eval(self, X, kernel_params_default=(3, 1))[0]
        if kern.spec is not None:
            eng = get_backend(self.backend_)
            out = eng.matmul(kern.spec, eng.asarray(X), eng.asarray(self.components_),
                             eng.asarray(self.normalization_.T))
            return np.asarray(eng.to_host(out), dtype=np.float64)
        return kern(X, self.components_) @ self.normalization_.T

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self._precomputed()
        return tags


for _cls in (SQUEAK, INKEstimate):
    _cls.__doc__ = (_cls.__doc__.replace("{common}", _COMMON_DOC)
                    .replace("{kernel}", _KERNEL_DOC).replace("{{", "{").replace("}}", "}"))
del _cls
