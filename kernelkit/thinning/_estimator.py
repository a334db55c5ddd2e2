"""KernelThinning and kernel_thinning: the estimator and the function."""

import math
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import _check_sample_weight, validate_data

from .._config import get_config
from ..backend import get_backend, resolve_backend
from ..kernels import check_kernel_scale, resolve_kernel
from ..utils._array_api import ArrayAPIMixin
from ..utils._state import atomic
from ..utils._validation import check_weights
from ..utils._verbose import Progress, check_verbose
from ._kernel import (_AUTO_KT_MAX_N, _AUTO_MMD_MAX_N, COMPRESS, VARIANTS, _Pool, _power_spec,
                      _ThinKernel)
from ._kt import _check_psd, _compress, _compress_plan, _kt, _systematic_resample


# ------------------------------------------------------------------ estimator
class KernelThinning(ArrayAPIMixin, BaseEstimator):
    """Kernel thinning: a coreset of about sqrt(n) points with a small MMD to the input.

    Kernel thinning (KT, [KT]_ Algorithm 1) halves the input ``m`` times with
    **KT-SPLIT** (Alg. 1a), a self-balancing Hilbert walk that assigns each pair of
    points to opposite halves by a coin biased against the kernel mean discrepancy
    accumulated so far, with thresholds set by the failure probability ``delta``;
    of the ``2^m`` candidate coresets and a standard-thinning baseline, **KT-SWAP**
    (Alg. 1b) keeps the one closest in MMD to the input and then greedily replaces
    each point by the input point that most decreases that MMD. The coreset has
    ``n / 2^m`` points; at the default size ``sqrt(n)`` its MMD to the input is
    ``O_d(n^-1/2 sqrt(log n))`` with high probability (for compactly supported inputs;
    polylog factors otherwise), against ``Theta(n^-1/4)`` for an i.i.d. subsample of the
    same size.

    ``variant`` chooses the KT-SPLIT kernel ([GKT]_): the target kernel itself
    (target KT), its square-root or fractional power kernel (root / power KT), or the
    sum of both (KT+). KT-SWAP always uses the target kernel. ``compress="compress++"``
    runs Compress++ ([CPP]_ Alg. 2): Compress (Alg. 1) with symmetrized KT halvings,
    then KT, in ``O(4^g n log n)`` kernel evaluations instead of ``O(n^2)``, with MMD
    within a small factor of KT's. The default ``compress="auto"`` runs KT on up to
    8,192 points and Compress++ (``g=4``) on more, so that a default fit stays
    near-linear in ``n``.

    Parameters
    ----------
    kernel : str, Kernel or callable, default="rbf"
        Target kernel: a name (rbf, laplacian, matern, polynomial, linear, cosine, ntk,
        nngp), a :class:`kernelkit.kernels.Kernel`, ``"precomputed"`` (``X`` is then the
        ``n x n`` kernel matrix), or a callable ``f(X, Y) -> (n_X, n_Y)`` evaluated on the
        host. Must be positive semidefinite (checked on a subsample and during KT-SPLIT).
    gamma : float, default=None
        Kernel scale for rbf, laplacian, matern and polynomial; None means ``1 / n_features``.
    degree : float, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1
        Constant term of the polynomial kernel.
    kernel_params : dict, default=None
        Further parameters of the named kernel (e.g. ``{"nu": 2.5}``) or of the callable.
    variant : {"target", "root", "power", "plus"}, default="target"
        KT-SPLIT kernel. ``"target"``: the target kernel (target KT, [GKT]_; any kernel,
        the default because its guarantees need no power kernel). ``"root"``: the
        square-root kernel (alpha = 1/2, [KT]_; rbf, and matern with nu > d/2).
        ``"power"``: the alpha-power kernel (power KT; rbf, laplacian, matern).
        ``"plus"``: KT+, the target plus the alpha-power kernel, each normalised to sup 1.
        Power kernels: rbf(gamma) -> rbf(gamma / alpha); matern(nu) -> Matérn of
        smoothness ``alpha (nu + d/2) - d/2``; laplacian -> product of one-dimensional
        Matérn kernels of smoothness ``alpha - 1/2``.
    alpha : float in (alpha_min, 1], default=None
        Power of the power kernel (``"power"``, ``"plus"``). None: 1/2 where the square
        root exists, else ``(1 + alpha_min) / 2`` (``alpha_min = d / (2 nu + d)`` for
        matern, 1/2 for laplacian), which gives the power kernel smoothness ``nu / 2``.
    m : int >= 0, default=None
        Number of halving rounds: the coreset has ``n_samples // 2^m`` points. None:
        ``floor(log2(n_samples) / 2)``, the largest ``m`` with ``4^m <= n_samples``, so the
        coreset has between ``sqrt(n)`` and ``2 sqrt(n)`` points (exactly ``sqrt(n)`` when
        ``n`` is a power of 4), as in the papers.
    delta : float in (0, 1), default=0.5
        Failure probability of KT-SPLIT's thresholds ([KT]_: ``delta_i = delta / n`` per
        pair, ``delta_i 2^(j-1) / m`` at round ``j``). The papers' default.
    compress : {"auto", None, "compress", "compress++"}, default="auto"
        ``"auto"``: KT (None) up to 8,192 points, Compress++ above, where KT's ``n^2``
        kernel evaluations become the cost (resolved in ``fit`` into ``compress_``).
        None: KT on all points (``O(n^2)`` kernel evaluations). ``"compress++"``:
        Compress++ ([CPP]_ Alg. 2) with oversampling ``g``: Compress (Alg. 1,
        ``beta = m - g`` levels of symmetrized KT halvings) builds ``2^g`` times the final
        size, then KT makes the final coreset; ``O(4^g n log n)`` kernel evaluations. As
        in the authors' implementation, the top level of Compress is folded into the
        final KT: the four quarters of the input are compressed separately
        (``beta - 1`` levels) and KT thins their union with ``g + 1`` rounds (same size
        and cost, lower MMD, as KT-SWAP then targets ``2^(g+1) sqrt(n)`` points).
        ``"compress"``: Compress alone, ``m`` levels, no final KT (at most
        ``floor(log4(n))`` levels, so that every leaf keeps a point: KT does the rest).
    g : int >= 0, default=4
        Oversampling parameter of Compress++; larger is closer to KT's quality and
        slower (``O(4^g n log n)``). 4 matches KT's MMD in [CPP]_'s experiments.
    compute_mmd : bool or "auto", default="auto"
        Compute ``mmd_``. KT gets it at no extra cost; Compress modes need ``n^2``
        kernel values, so ``"auto"`` computes it there only for ``n <= 8192`` (with
        ``compress="auto"``: always up to 8,192 points, never above).
    backend : {"auto", "numpy", "numba", "cupy"} or None, default=None
        Compute engine for the kernels and loops; None follows :func:`kernelkit.set_config`.
        Resolved in ``fit`` into ``backend_``.
    random_state : int, RandomState instance or None, default=None
        Seeds KT-SPLIT's coins, the leftover points and Compress's symmetrization.
    verbose : int, default=0
        0 silent; 1 a first line with the plan (what ``compress`` resolved to, the sizes
        and about how many kernel evaluations it takes), then one line per stage (KT's
        halving rounds with KT-SWAP, each of Compress++'s four compressed quarters, its
        final thinning) with the points kept.

    Attributes
    ----------
    coreset_indices_ : ndarray of shape (n_coreset,), int64
        Rows of ``X`` in the coreset, sorted. Unique without ``sample_weight``; with it, a
        row may repeat (multiplicity = weight in the equal-weight coreset).
    coreset_ : ndarray of shape (n_coreset, n_features), float64
        ``X[coreset_indices_]``.
    mmd_ : float
        MMD, under the target kernel, between the (weighted) input and the coreset with
        equal weights; NaN when not computed (see ``compute_mmd``).
    m_ : int
        Halving rounds used.
    alpha_ : float or None
        Power of the power kernel used by KT-SPLIT (None for target KT).
    compress_ : {None, "compress", "compress++"}
        What ``compress`` resolved to (None: KT on all points).
    backend_ : str
        The engine used.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Only when ``X`` has string column names.

    Raises
    ------
    ValueError
        In ``fit``: NaN/inf or empty ``X``; ``m`` beyond ``log2(n_samples)``; ``delta``
        outside (0, 1); ``g < 0``; an unknown ``variant``/``compress``/kernel; a variant
        whose power kernel does not exist for the kernel; a kernel that is not positive
        semidefinite; invalid ``sample_weight``.

    Notes
    -----
    Leftover rule, for ``n`` not divisible by ``2^m``: the ``r = n mod 2^m`` leftover
    points, drawn uniformly at random, are left out of KT-SPLIT only; KT-SWAP still
    targets all ``n`` points and may swap any of them into the coreset, which has
    ``n // 2^m`` points. Compress splits its input recursively into 4 consecutive parts
    as equal as possible (``numpy.array_split``) and halves the union of their outputs,
    keeping ``floor(l / 2)`` of ``l`` points (for odd ``l`` one point, drawn uniformly, is
    left out of that halving): the size is ``n / 2^m`` when ``n`` is ``4^m`` times an
    integer, and below ``n // 2^m`` otherwise, each level's odd parts losing a point
    (``compress="compress"`` on 1,359 points, ``m = 5``: 32 points, not 42; Compress++'s
    final KT restores the size). No input point is dropped up front (the authors'
    implementation first thins ``n`` down to a power of 4).

    Weights: with ``sample_weight``, KT-SPLIT halves ``n`` points drawn by systematic
    resampling from the weights (each point ``floor(n w_i)`` or ``ceil(n w_i)`` times,
    in input order) and KT-SWAP targets the weighted measure exactly (Compress targets
    the resampled points). Points of zero weight are left out entirely.

    Memory and speed: the kernel matrix of a halving is stored when it fits in
    ``working_memory`` (:func:`kernelkit.set_config`), else its lower triangle when that
    fits (a single halving, as in Compress); otherwise it is computed in row blocks of
    that size and KT-SWAP computes the row of each point it swaps in, so memory stays
    ``O(n d + working_memory)``. Power kernels
    without a closed form (Matérn of smoothness other than 1/2, 3/2, 5/2; powers of the
    Laplacian) are evaluated on the host with SciPy's Bessel functions, several times
    slower than the closed-form kernels.

    References
    ----------
    .. [KT] R. Dwivedi and L. Mackey, "Kernel Thinning", COLT 2021; JMLR 25(152), 2024.
    .. [GKT] R. Dwivedi and L. Mackey, "Generalized Kernel Thinning", ICLR 2022.
    .. [CPP] A. Shetty, R. Dwivedi and L. Mackey, "Distribution Compression in Near-linear
       Time", ICLR 2022.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelkit.thinning import KernelThinning
    >>> X = np.random.default_rng(0).standard_normal((4096, 2))
    >>> kt = KernelThinning(gamma=0.25, random_state=0).fit(X)
    >>> kt.coreset_.shape
    (64, 2)
    >>> bool(kt.mmd_ < 0.02)
    True
    """

    def __init__(self, kernel="rbf", *, gamma=None, degree=3, coef0=1, kernel_params=None,
                 variant="target", alpha=None, m=None, delta=0.5, compress="auto", g=4,
                 compute_mmd="auto", backend=None, random_state=None, verbose=0):
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.variant = variant
        self.alpha = alpha
        self.m = m
        self.delta = delta
        self.compress = compress
        self.g = g
        self.compute_mmd = compute_mmd
        self.backend = backend
        self.random_state = random_state
        self.verbose = verbose

    def _precomputed(self):
        return isinstance(self.kernel, str) and self.kernel == "precomputed"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self._precomputed()
        tags.target_tags.required = False
        return tags

    def _check_params(self, n=None):
        """``(m, delta, g)``; with ``n=None`` only what does not depend on the data."""
        if not isinstance(self.variant, str) or self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {self.variant!r}.")
        if not (self.compress is None or isinstance(self.compress, str)) or (
                self.compress not in COMPRESS):
            raise ValueError(f"compress must be one of {COMPRESS}, got {self.compress!r}.")
        delta = self.delta
        if (isinstance(delta, bool) or not isinstance(delta, Real) or not math.isfinite(delta)
                or not 0.0 < delta < 1.0):
            raise ValueError(f"delta must be a failure probability in (0, 1), got {delta!r}.")
        g = self.g
        if isinstance(g, bool) or not isinstance(g, Integral) or g < 0:
            raise ValueError(f"g must be an integer >= 0 (Compress++'s oversampling), got {g!r}.")
        if self.compute_mmd not in (True, False, "auto"):
            raise ValueError(f"compute_mmd must be True, False or 'auto', got "
                             f"{self.compute_mmd!r}.")
        m = self.m
        if m is not None and (isinstance(m, bool) or not isinstance(m, Integral) or m < 0):
            raise ValueError(f"m must be an integer >= 0 or None, got {m!r}.")
        if n is None:
            return None, float(delta), int(g)
        max_m = n.bit_length() - 1  # largest m with 2^m <= n
        if m is None:
            m = max_m // 2
        elif m > max_m:
            raise ValueError(
                f"m={m} halving rounds leave no point of n_samples={n}: m must be at most "
                f"log2(n_samples) = {math.log2(n):.3g}, i.e. m <= {max_m}.")
        return int(m), float(delta), int(g)

    def _kernels(self, engine, X, budget):
        """(split kernel, swap kernel, alpha) as _ThinKernel objects."""
        n, d = X.shape
        if self._precomputed():
            if n != d:
                raise ValueError(f"kernel='precomputed' needs a square X (the kernel matrix), "
                                 f"got shape {X.shape}.")
            if self.variant != "target":
                raise ValueError(f"variant={self.variant!r} needs a kernel with a power kernel; "
                                 "kernel='precomputed' supports variant='target' only.")
            kern = _ThinKernel(engine, None, budget, gram=X)
            _check_psd(kern, n)
            return kern, kern, None
        op = resolve_kernel(self.kernel, self.gamma, self.degree, self.coef0, self.kernel_params,
                            n_features=d, backend=engine.name)
        check_kernel_scale(op, X, type(self).__name__)
        kernel = op.kernel
        Xe = engine.asarray(X)
        if op.spec is None:
            if self.variant != "target":
                raise ValueError(f"variant={self.variant!r} needs a kernelkit kernel with a "
                                 "power kernel (rbf, laplacian, matern); a callable kernel "
                                 "supports variant='target' only.")
            kern = _ThinKernel(engine, X, budget, func=kernel, label=repr(kernel))
            _check_psd(kern, n)
            return kern, kern, None
        spec = op.spec
        swap = _ThinKernel(engine, Xe, budget, terms=((1.0, spec),), label=repr(kernel))
        if spec.name not in ("rbf", "laplacian", "matern"):
            _check_psd(swap, n)
        if self.variant == "target":
            return swap, swap, None
        power, alpha = _power_spec(spec, self.alpha, d, root=self.variant == "root")
        terms = ((1.0, power),) if self.variant in ("root", "power") else ((1.0, spec),
                                                                           (1.0, power))
        return (_ThinKernel(engine, Xe, budget, terms=terms, label=f"{kernel!r} ({self.variant})"),
                swap, alpha)

    @atomic
    def fit(self, X, y=None, sample_weight=None):
        """Select the coreset.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Points to thin (the kernel matrix when ``kernel="precomputed"``).
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the input points (the target measure); None: equal.

        Returns
        -------
        self : object
        """
        self._check_params()  # parameters before data
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=1)
        n = X.shape[0]
        m, delta, g = self._check_params(n)
        weights = None
        if sample_weight is not None:
            weights = _check_sample_weight(sample_weight, X, ensure_non_negative=True)
            weights = check_weights(weights, X.shape[0], "sample_weight")
            if np.all(weights == weights[0]):  # equal weights are no weights (scikit-learn's
                weights = None  # convention): the same coreset, not a resampled one
        self.backend_ = resolve_backend(self.backend, X)
        compress = _resolve_compress(self.compress, n)
        self._fit_progress = Progress(self, check_verbose(self.verbose))
        self._fit_progress(_plan_line(n, X.shape[1], m, g, compress, self.compress),
                           delta=delta)
        engine = get_backend(self.backend_)
        budget = int(get_config()["working_memory"] * 2**20)
        split_kern, swap_kern, alpha = self._kernels(engine, X, budget)
        rng = check_random_state(self.random_state)
        seq = np.arange(n) if weights is None else _systematic_resample(weights, n, rng)

        mmd = None
        if m == 0:  # no halving: the input itself (resampled, with weights)
            idx = seq
            mmd = 0.0 if weights is None else None
        elif compress is None:
            idx, mmd = self._kt_fit(split_kern, swap_kern, engine, seq, n, m, delta, rng,
                                    budget, weights, want_mmd=self.compute_mmd is not False)
        else:
            idx = self._compress_fit(compress, split_kern, swap_kern, engine, seq, n, m, delta,
                                     g, rng, budget, weights)
        idx = np.sort(np.asarray(idx, dtype=np.int64))
        if mmd is None:
            mmd = math.nan
            want = self.compute_mmd is True or (self.compute_mmd == "auto" and n <= _AUTO_MMD_MAX_N)
            if want:
                mmd = _mmd_to_input(swap_kern, n, idx, weights, budget)
        vars(self).pop("_fit_progress", None)
        self.coreset_indices_ = idx
        self.coreset_ = X[idx]
        self.mmd_ = float(mmd)
        self.m_ = m
        self.alpha_ = alpha
        self.compress_ = compress
        return self

    def _kt_fit(self, split_kern, swap_kern, engine, seq, n, m, delta, rng, budget, weights,
                want_mmd):
        """KT on all points of positive weight: (indices into X, MMD or None)."""
        everything = np.arange(n)
        support = everything if weights is None else np.flatnonzero(weights > 0)
        split = _Pool(split_kern, support, budget)
        swap = split if swap_kern is split_kern else _Pool(swap_kern, support, budget)
        local = seq if weights is None else np.searchsorted(support, seq)
        idx, mmd = _kt(split, swap, engine, local, m, delta, rng, budget,
                       weights=None if weights is None else weights[support],
                       unique=weights is None, want_mmd=want_mmd)
        self._progress("KT (split + swap)", rounds=m, points=len(local), kept=len(idx))
        return support[idx], mmd

    def _compress_fit(self, compress, split_kern, swap_kern, engine, seq, n, m, delta, g, rng,
                      budget, weights):
        """Compress (``m`` levels) or Compress++ (``m - g`` levels, then KT with the rest)."""
        max_beta = (n.bit_length() - 1) // 2  # 4^beta <= n: leaves keep >= 1 point
        if compress == "compress":  # beyond log4(n) levels, KT does the last rounds
            beta = min(m, max_beta)
            if beta == 0:
                return self._kt_fit(split_kern, swap_kern, engine, seq, n, m, delta, rng,
                                    budget, weights, want_mmd=False)[0]
            delta_per_sq = delta / _compress_plan(n, beta)[1]
            C = _compress(split_kern, swap_kern, engine, seq, beta, delta_per_sq, rng, budget)
            if beta == m:
                return C
            pool = _Pool(split_kern, C, budget)
            swap = pool if swap_kern is split_kern else _Pool(swap_kern, C, budget)
            Q, _ = _kt(pool, swap, engine, np.arange(len(C)), m - beta, delta, rng, budget,
                       unique=True, want_mmd=False)
            return C[Q]
        beta = min(max(m - g, 0), max_beta)
        if beta <= 1:  # no halving before the final KT: KT itself
            return self._kt_fit(split_kern, swap_kern, engine, seq, n, m, delta, rng, budget,
                                weights, want_mmd=False)[0]
        # Compress++ [CPP, Alg. 2] with the top level of Compress folded into Thin: the four
        # quarters are compressed separately (beta - 1 levels) and KT thins their union
        # with one more round; delta split as in [CPP]: Thin gets
        # m_t / (m_t + 2^m_t (beta - 1)) of it, the halvings the rest (each ~ ell^2)
        depth, m_thin = beta - 1, m - beta + 1
        parts = np.array_split(seq, 4)
        delta_t = delta * m_thin / (m_thin + 2.0 ** m_thin * depth)
        sq = sum(_compress_plan(len(p), depth)[1] for p in parts)
        quarters = []
        for i, p in enumerate(parts, 1):
            quarters.append(_compress(split_kern, swap_kern, engine, p, depth,
                                      (delta - delta_t) / sq, rng, budget))
            self._progress("Compress quarter", i, 4, levels=depth, points=len(p),
                           kept=len(quarters[-1]))
        C = np.concatenate(quarters)
        if len(C) < 2**m_thin:
            return C
        split = _Pool(split_kern, C, budget)
        swap = split if swap_kern is split_kern else _Pool(swap_kern, C, budget)
        Q, _ = _kt(split, swap, engine, np.arange(len(C)), m_thin, delta_t, rng, budget,
                   unique=True, want_mmd=False)
        self._progress("Thin (KT)", rounds=m_thin, points=len(C), kept=len(Q))
        return C[Q]

    def _progress(self, stage, step=None, total=None, **values):
        """``stage`` (``step``/``total``) done, with its time since the previous one."""
        progress = vars(self).get("_fit_progress") or Progress(self, check_verbose(self.verbose))
        progress.done(stage if step is None else f"{stage} {step}/{total}", **values)

    def fit_transform(self, X, y=None, sample_weight=None):
        """Select the coreset and return its points.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Points to thin.
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the input points.

        Returns
        -------
        coreset : ndarray of shape (n_coreset, n_features), float64
            ``X[coreset_indices_]`` (fewer rows than ``X``).
        """
        return self.fit(X, y, sample_weight=sample_weight).coreset_


def _resolve_compress(compress, n):
    """``compress="auto"``: KT up to ``_AUTO_KT_MAX_N`` points, Compress++ above."""
    if compress != "auto":
        return compress
    return None if n <= _AUTO_KT_MAX_N else "compress++"


def _plan_line(n, d, m, g, compress, asked):
    """The first verbose line: what the fit does and about how many kernel values it needs."""
    out = max(1, n >> m)
    via = f" (compress={asked!r})" if asked == "auto" else ""
    beta = min(max(m - g, 0), (n.bit_length() - 1) // 2)
    if compress == "compress++" and beta > 1 and m:
        depth, m_thin = beta - 1, m - beta + 1
        parts = [n // 4 + (i < n % 4) for i in range(4)]
        plans = [_compress_plan(p, depth) for p in parts]
        kept = sum(p[0] for p in plans)
        evals = sum(p[1] for p in plans) + kept * kept
        top = max(p // 2 ** (depth - 1) for p in parts)
        what = (f"Compress++{via}, g={g}: 4 quarters of ~{parts[0]} points, each {depth} "
                f"level(s) of KT halvings (the largest of ~{top} points), then KT with {m_thin} "
                f"rounds on their ~{kept} points")
    elif compress == "compress" and m:
        what = f"Compress{via}, {min(m, (n.bit_length() - 1) // 2)} level(s) of KT halvings"
        evals = _compress_plan(n, min(m, (n.bit_length() - 1) // 2))[1]
    else:
        what = f"KT{via}: {m} halving rounds on all {n} points, then the swap pass"
        evals = n * n if m else 0
    return (f"n={n}, d={d}: {what}, to ~{out} points; about {float(evals):.2g} kernel "
            "evaluations")


def _mmd_to_input(kern, n, idx, weights, budget):
    """Exact MMD between the (weighted) input and the equal-weight coreset ``idx``."""
    everything = np.arange(n)
    w = np.full(n, 1.0 / n) if weights is None else weights
    meanK = kern.matvec(everything, everything, w)
    q = len(idx)
    quad = kern.matvec(idx, idx, np.ones(q)).sum()
    mmd2 = float(w @ meanK) - 2.0 * meanK[idx].mean() + quad / (q * q)
    return math.sqrt(max(mmd2, 0.0))


def kernel_thinning(X, *, kernel="rbf", gamma=None, degree=3, coef0=1, kernel_params=None,
                    variant="target", alpha=None, m=None, delta=0.5, compress="auto", g=4,
                    sample_weight=None, backend=None, random_state=None):
    """Indices of a kernel thinning coreset of ``X`` (function form of :class:`KernelThinning`).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Points to thin (the kernel matrix when ``kernel="precomputed"``).
    kernel : str, Kernel or callable, default="rbf"
        The target kernel, as in :class:`KernelThinning`.
    gamma : float, default=None
        Kernel scale for rbf, laplacian, matern and polynomial; None means ``1 / n_features``.
    degree : float, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1
        Constant term of the polynomial kernel.
    kernel_params : dict, default=None
        Further parameters of the named kernel or of the callable.
    variant : {"target", "root", "power", "plus"}, default="target"
        KT-SPLIT kernel; see :class:`KernelThinning`.
    alpha : float, default=None
        Power of the power kernel; see :class:`KernelThinning`.
    m : int, default=None
        Halving rounds (coreset of ``n_samples // 2^m`` points); None: about ``sqrt(n)``.
    delta : float in (0, 1), default=0.5
        KT-SPLIT's failure probability.
    compress : {"auto", None, "compress", "compress++"}, default="auto"
        Near-linear-time Compress / Compress++ instead of KT on all points; ``"auto"``:
        KT up to 8,192 points, Compress++ above.
    g : int >= 0, default=4
        Compress++'s oversampling parameter.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weights of the input points.
    backend : {"auto", "numpy", "numba", "cupy"} or None, default=None
        Compute engine.
    random_state : int, RandomState instance or None, default=None
        Seed.

    Returns
    -------
    indices : ndarray of shape (n_coreset,), int64
        Sorted rows of ``X`` in the coreset (unique unless ``sample_weight`` is given).

    Raises
    ------
    ValueError
        As :meth:`KernelThinning.fit`.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelkit.thinning import kernel_thinning
    >>> X = np.random.default_rng(0).standard_normal((1000, 3))
    >>> kernel_thinning(X, random_state=0).shape
    (62,)
    """
    est = KernelThinning(kernel=kernel, gamma=gamma, degree=degree, coef0=coef0,
                         kernel_params=kernel_params, variant=variant, alpha=alpha, m=m,
                         delta=delta, compress=compress, g=g, compute_mmd=False,
                         backend=backend, random_state=random_state)
    return est.fit(X, sample_weight=sample_weight).coreset_indices_
