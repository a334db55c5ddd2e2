"""Kernel thinning: published properties, a streaming KT-SPLIT, dense MMDs, engines, bad input."""

import math

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import integrate
from sklearn.metrics.pairwise import laplacian_kernel, rbf_kernel
from sklearn.utils.estimator_checks import parametrize_with_checks

import kernelkit
from kernelkit.backend import KernelSpec, get_backend
from kernelkit.backend._numpy import NumpyBackend
from kernelkit.kernels import RBF, Laplacian, Matern
from kernelkit.metrics import mmd
from kernelkit.thinning import KernelThinning, kernel_thinning
from kernelkit.thinning._kernel import _Pool, _power_spec, _ThinKernel
from kernelkit.thinning._kt import _kt, _kt_split, _loops, _refine
from kernelkit.thinning._loops import SPLIT_NOT_PSD, SPLIT_OK
from kernelkit.thinning._power import matern_profile

ENGINES = ["numpy", "numba"]


def _dense_mmd(K, idx, w=None):
    """MMD between sum_i w_i delta_{x_i} and the equal-weight coreset idx, from the matrix K."""
    w = np.full(len(K), 1.0 / len(K)) if w is None else w / w.sum()
    c = np.bincount(idx, minlength=len(K)) / len(idx)
    d = w - c
    return math.sqrt(max(d @ K @ d, 0.0))


# ------------------------------------------------------------- published properties
def test_kt_beats_iid_over_many_seeds():
    """[KT]: at n = 4^6 the KT coreset's MMD to the input is far below an i.i.d.
    subsample's of the same size (O(n^-1/2 sqrt(log n)) vs Theta(n^-1/4))."""
    n, seeds = 4**6, 16
    kt, iid = [], []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        X = rng.standard_normal((n, 2))
        est = KernelThinning(gamma=0.25, random_state=seed).fit(X)
        assert len(est.coreset_indices_) == 64
        kt.append(est.mmd_)
        iid.append(mmd(X, X[rng.choice(n, 64, replace=False)], gamma=0.25))
    kt, iid = np.array(kt), np.array(iid)
    assert np.mean(kt < iid) >= 0.9
    assert np.median(iid) / np.median(kt) >= 5.0


def test_mmd_rate_is_steeper_than_iid():
    """Log-log slope of the median MMD over n = 4^3 .. 4^6: KT's is close to the papers'
    -1/2 (up to log factors), an i.i.d. subsample's is -1/4."""
    ks = np.arange(3, 7)
    med_kt, med_iid = [], []
    for k in ks:
        n = 4**k
        kt, iid = [], []
        for seed in range(8):
            rng = np.random.default_rng(100 + seed)
            X = rng.standard_normal((n, 2))
            est = KernelThinning(gamma=0.25, random_state=seed).fit(X)
            kt.append(est.mmd_)
            iid.append(mmd(X, X[rng.choice(n, 2**k, replace=False)], gamma=0.25))
        med_kt.append(np.median(kt))
        med_iid.append(np.median(iid))
    slope_kt = np.polyfit(np.log(4.0**ks), np.log(med_kt), 1)[0]
    slope_iid = np.polyfit(np.log(4.0**ks), np.log(med_iid), 1)[0]
    assert slope_kt < -0.4, slope_kt
    assert -0.35 < slope_iid < -0.15, slope_iid
    assert slope_kt < slope_iid - 0.15


def test_kt_split_halves_beat_random_halves():
    """[KT, Alg. 1a]: a KT-SPLIT half has a smaller MMD to its parent than a uniformly
    random half, O(sqrt(log n) / n) against O(n^-1/2): about 3x smaller at n = 2048."""
    n = 2048
    rng = np.random.default_rng(5)
    X = rng.standard_normal((n, 2))
    K = rbf_kernel(X, gamma=0.25)
    engine = get_backend("numba")
    pool = _Pool(_ThinKernel(engine, None, 2**32, gram=K), np.arange(n), 2**32)
    ratios = []
    for seed in range(20):
        u = np.random.RandomState(seed).random_sample((1, n // 2))
        halves = _kt_split(pool, engine, np.arange(n), 1, 0.5, u, np.zeros((0, n)),
                           np.zeros(n), 2**32)
        assert sorted(np.concatenate(halves)) == list(range(n))
        random_half = np.random.default_rng(seed).permutation(n)[:n // 2]
        ratios.append(_dense_mmd(K, random_half) / _dense_mmd(K, halves[0]))
    assert np.median(ratios) > 2.5 and np.mean(np.array(ratios) > 1) >= 0.95


@pytest.mark.slow
def test_quality_matches_goodpoints_over_seeds():
    """Mean MMD to the input over 10 seeds at n = 4^6 (d = 2, 10): at most goodpoints' plus
    two standard errors, for KT (``kt.thin``) and Compress++ g = 4 (``compresspp_kt``)."""
    gp_kt = pytest.importorskip("goodpoints.kt")
    gp_compress = pytest.importorskip("goodpoints.compress")
    n = 4**6
    for d in (2, 10):
        gamma = 1 / (4 * d)

        def k(y, Z, gamma=gamma):
            return np.exp(-gamma * np.sum((y - Z) ** 2, axis=1))

        for compress in (None, "compress++"):
            ours, theirs = [], []
            for seed in range(10):
                X = np.random.default_rng(seed).standard_normal((n, d))
                idx = kernel_thinning(X, gamma=gamma, compress=compress, random_state=seed)
                if compress is None:
                    ref = gp_kt.thin(X, 6, k, k, delta=0.5, seed=seed)
                else:
                    ref = gp_compress.compresspp_kt(X, b"gaussian", k_params=np.array([1 / gamma]),
                                                    g=4, seed=seed)
                ours.append(mmd(X, X[idx], gamma=gamma))
                theirs.append(mmd(X, X[np.asarray(ref)], gamma=gamma))
            se = math.sqrt((np.var(ours, ddof=1) + np.var(theirs, ddof=1)) / 10)
            assert np.mean(ours) <= np.mean(theirs) + 2 * se, (d, compress)


@pytest.mark.slow
def test_mmd_rate_up_to_4_7():
    ks = np.arange(3, 8)
    med = []
    for k in ks:
        vals = [KernelThinning(gamma=0.25, compress=None, random_state=s).fit(
            np.random.default_rng(s).standard_normal((4**k, 2))).mmd_ for s in range(8)]
        med.append(np.median(vals))
    assert np.polyfit(np.log(4.0**ks), np.log(med), 1)[0] < -0.45


# ----------------------------------------------------- KT-SPLIT as Alg. 1a writes it
def _online_kt_split(K, m, delta, uniforms):
    """KT-SPLIT transcribed from [KT, Alg. 1a], in its streaming order: points arrive one
    at a time; a coreset whose size becomes even halves its last two points into its two
    children with the self-balancing walk; thresholds from get_swap_params."""
    n = K.shape[0]
    cores = {(j, ell): [] for j in range(m + 1) for ell in range(2**j)}
    sigma2 = dict.fromkeys(cores, 0.0)
    pairs_done = dict.fromkeys(cores, 0)

    def halve(j, ell):
        parent = cores[(j, ell)]
        x, y = parent[-2], parent[-1]
        c1, c2 = cores[(j + 1, 2 * ell)], cores[(j + 1, 2 * ell + 1)]
        alpha = sum(K[z, x] - K[z, y] for z in c1) - sum(K[z, x] - K[z, y] for z in c2)
        b2 = K[x, x] + K[y, y] - 2 * K[x, y]
        dlt = delta * 2**j / (n * m)  # delta_i 2^(j-1) / m with 1-based levels
        a = max(math.sqrt(b2 * sigma2[(j, ell)]) * math.sqrt(2 * math.log(2 / dlt)), b2)
        s2 = sigma2[(j, ell)]
        sigma2[(j, ell)] = s2 + b2 * max(0.0, 1 + (b2 - 2 * a) * s2 / a**2)
        i = pairs_done[(j, ell)]
        pairs_done[(j, ell)] += 1
        u = uniforms[j, ell * (n >> (j + 1)) + i]
        if u < 0.5 * (1 - alpha / a):
            c1.append(x), c2.append(y)
        else:
            c1.append(y), c2.append(x)
        for child in (2 * ell, 2 * ell + 1):
            if j + 1 < m and len(cores[(j + 1, child)]) % 2 == 0:
                halve(j + 1, child)

    for i in range(n):
        cores[(0, 0)].append(i)
        if i % 2 == 1:
            halve(0, 0)
    return [cores[(m, ell)] for ell in range(2**m)]


@pytest.mark.parametrize("engine_name", ENGINES)
@pytest.mark.parametrize("working_memory", [256, 0.01])
def test_split_matches_streaming_algorithm(engine_name, working_memory):
    """Level-by-level KT-SPLIT (stored matrix or row blocks) = Alg. 1a's streaming order."""
    rng = np.random.default_rng(3)
    n, m = 128, 3
    X = rng.standard_normal((n, 2))
    K = rbf_kernel(X, gamma=0.5)
    uniforms = rng.random((m, n // 2))
    ref = _online_kt_split(K, m, 0.5, uniforms)
    engine = get_backend(engine_name)
    budget = int(working_memory * 2**20)
    kern = _ThinKernel(engine, X, budget, terms=((1.0, KernelSpec("rbf", (0.5,))),))
    pool = _Pool(kern, np.arange(n), budget)
    assert (pool.K is None) == (working_memory < 1)
    got = _kt_split(pool, engine, np.arange(n), m, 0.5, uniforms, np.zeros((1, n)), np.zeros(n),
                    budget)
    assert [list(c) for c in got] == ref


def test_halving_and_refinement_match_goodpoints():
    """The authors' reference implementation (goodpoints, Cython) on the same matrix and
    coins: identical KT-SPLIT halves and identical KT-SWAP refinements."""
    ktc = pytest.importorskip("goodpoints.ktc")
    rng = np.random.default_rng(9)
    n = 256
    K = rbf_kernel(rng.standard_normal((n, 2)), gamma=0.5)
    engine = get_backend("numba")
    pool = _Pool(_ThinKernel(engine, None, 2**30, gram=K), np.arange(n), 2**30)
    for seed in range(5):
        u = np.random.RandomState(seed).random_sample((1, n // 2))
        halves = _kt_split(pool, engine, np.arange(n), 1, 0.5, u, np.zeros((0, n)), np.zeros(n),
                           2**30)
        theirs = np.empty((2, n // 2), dtype=np.int64)
        ktc.halve_K(K, 0.5, u[0], theirs)
        assert_array_equal(halves[0], theirs[1])  # their coreset 1 gets x when u < p
        assert_array_equal(halves[1], theirs[0])
        for unique in (False, True):
            Q = halves[0].copy()
            ref = Q.copy()
            non_core = np.setdiff1d(np.arange(n), Q).astype(np.int64)
            ktc.refine_K(K, ref, K.mean(1), np.empty(n), unique, non_core)
            stat = np.diag(K) / len(Q) + (2 / len(Q)) * K[:, Q].sum(1) - 2 * K.mean(1)
            counts = np.bincount(Q, minlength=n).astype(np.int64)
            _refine(engine, stat, K, Q.copy(), 0, True, Q, 0, len(Q), counts, unique,
                                   2 / len(Q), 0.0)
            assert_array_equal(Q, ref)


# ------------------------------------------------------------------ engine loops
@pytest.mark.parametrize("nacc", [0, 1, 3])
def test_split_chunk_engines_and_accumulators(nacc):
    rng = np.random.default_rng(0)
    s = 96
    X = rng.standard_normal((s, 3))
    K = rbf_kernel(X, gamma=0.3)
    P = rng.permutation(s).astype(np.int64)
    wb = (rng.random(s) < 0.4).astype(float)
    uniforms = rng.random(s // 2)
    out = {}
    for name in ENGINES:
        engine = get_backend(name)
        sign, state, acc = np.zeros(s), np.zeros(1), np.zeros((nacc, s))
        # two chunks: rows 0..39 from the stored matrix, then the rest
        for i0, i1 in ((0, 20), (20, s // 2)):
            st = _loops(engine).split_chunk(K, P[2 * i0:2 * i1], P, i0, i1, sign, uniforms, state,
                                       math.log(1e4), acc, wb)
            assert st == SPLIT_OK
        out[name] = sign, state, acc
    assert_array_equal(out["numpy"][0], out["numba"][0])
    assert_allclose(out["numpy"][1], out["numba"][1], rtol=1e-12)
    assert_allclose(out["numpy"][2], out["numba"][2], rtol=1e-12)
    sign, _, acc = out["numba"]
    Kp = K[np.ix_(P, P)]
    for row, w in enumerate([np.ones(s), (sign > 0).astype(float), wb][:nacc]):
        assert_allclose(acc[row], Kp @ w, rtol=1e-12)
    assert np.all(np.abs(sign) == 1) and sign.sum() == 0


@pytest.mark.parametrize("name", ENGINES)
def test_split_chunk_detects_non_psd(name):
    K = np.array([[1.0, 2.0], [2.0, 1.0]])  # b^2 = 1 + 1 - 4 < 0
    idx = np.arange(2, dtype=np.int64)
    st = _loops(get_backend(name)).split_chunk(K, idx, idx, 0, 1, np.zeros(2), np.zeros(1),
                                          np.zeros(1), 1.0, np.zeros((0, 2)), np.zeros(2))
    assert st == SPLIT_NOT_PSD


@pytest.mark.parametrize("unique", [True, False])
def test_refine_engines_agree_and_never_increase_mmd(unique):
    rng = np.random.default_rng(1)
    n, q = 200, 16
    X = rng.standard_normal((n, 2))
    K = rbf_kernel(X, gamma=0.5)
    Q0 = rng.choice(n, q, replace=False).astype(np.int64)
    meanK = K.mean(1)
    results = {}
    for name in ENGINES:
        Q = Q0.copy()
        stat = np.diag(K) / q + (2 / q) * K[:, Q].sum(1) - 2 * meanK
        counts = np.bincount(Q, minlength=n).astype(np.int64)
        t, y = _refine(get_backend(name), stat, K, Q0.copy(), 0, True, Q, 0, q, counts,
                                                 unique, 2 / q, 0.0)
        assert (t, y) == (q, -1)
        results[name] = Q, stat
        assert_array_equal(counts, np.bincount(Q, minlength=n))
    assert_array_equal(results["numpy"][0], results["numba"][0])
    Q = results["numba"][0]
    assert _dense_mmd(K, Q) < 0.7 * _dense_mmd(K, Q0)
    if unique:
        assert len(np.unique(Q)) == q
    # the statistic tracks the final coreset: k(y, y)/q + 2/q sum_c k(y, c) - 2 Pk(y)
    assert_allclose(results["numba"][1], np.diag(K) / q + (2 / q) * K[:, Q].sum(1) - 2 * meanK,
                    atol=1e-12)


@pytest.mark.parametrize("name", ENGINES)
def test_refine_keeps_the_point_on_ties(name):
    n, q = 8, 2
    K = np.eye(n)  # every replacement gives the same MMD
    Q = np.array([3, 5], dtype=np.int64)
    stat = np.diag(K) / q + (2 / q) * K[:, Q].sum(1) - 2 * K.mean(1)
    counts = np.bincount(Q, minlength=n).astype(np.int64)
    _refine(get_backend(name), stat, K, Q.copy(), 0, True, Q, 0, q, counts, True, 2 / q,
                                      1e-12)
    assert_array_equal(Q, [3, 5])


def test_pairwise_into_matches_pairwise():
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((70, 3)), rng.standard_normal((50, 3))
    X[5] = X[6] + 1e-9  # near-duplicates
    ref, fast = NumpyBackend(), get_backend("numba")
    for spec in (RBF(0.3).spec(3), Laplacian(0.4).spec(3), Matern(0.2, 0.5).spec(3),
                 Matern(0.2, 1.5).spec(3), Matern(0.2, 2.5).spec(3)):
        for args in ((X, Y), (X, None)):
            assert_allclose(fast.pairwise_into(spec, *args), ref.pairwise(spec, *args),
                            rtol=1e-12, atol=1e-15)


# --------------------------------------------------------------- power kernels
def test_matern_profile_closed_forms():
    u = np.array([0.0, 1e-300, 1e-9, 0.3, 1.0, 4.0, 40.0, 800.0])
    assert_allclose(matern_profile(0.5, u), np.exp(-u), rtol=1e-12, atol=1e-300)
    assert_allclose(matern_profile(1.5, u), (1 + u) * np.exp(-u), rtol=1e-12, atol=1e-300)
    assert_allclose(matern_profile(2.5, u), (1 + u + u * u / 3) * np.exp(-u), rtol=1e-12,
                    atol=1e-300)
    v = matern_profile(0.25, u)
    assert v[0] == 1.0 and np.all(np.diff(v) <= 0) and np.all(v >= 0)


def _fourier_1d(f, w):
    """2 int_0^inf f(t) cos(w t) dt for an even function f."""
    if w == 0:
        return 2 * integrate.quad(f, 0, np.inf, limit=400)[0]
    return 2 * integrate.quad(f, 0, np.inf, weight="cos", wvar=w, limlst=200)[0]


@pytest.mark.parametrize("kernel, alpha", [(Matern(0.7, 1.5), 0.5), (Matern(0.7, 0.5), 0.75),
                                           (Laplacian(0.9), 0.75), (RBF(0.6), 0.5),
                                           (RBF(0.6), 0.8)])
def test_power_kernel_is_the_fourier_power(kernel, alpha):
    """[GKT]: the alpha-power kernel's Fourier transform is the target's raised to alpha
    (up to a constant), checked numerically in one dimension."""
    spec = kernel.spec(1)
    power, used = _power_spec(spec, alpha, 1, root=False)
    assert used == alpha
    engine = NumpyBackend()
    kp = _ThinKernel(engine, None, 2**20, terms=((1.0, power),))

    def values(k, t):
        pts = np.concatenate([[0.0], np.atleast_1d(t)])[:, None]
        if isinstance(k, _ThinKernel):
            k.X = pts
            return k.block(np.array([0]), np.arange(1, len(pts)))[0]
        return k(pts[:1], pts[1:])[0]

    ws = [0.0, 0.5, 1.3, 3.0]
    target = np.array([_fourier_1d(lambda t: values(kernel, t)[0], w) for w in ws])
    powered = np.array([_fourier_1d(lambda t: values(kp, t)[0], w) for w in ws])
    ratio = powered / target**alpha
    assert_allclose(ratio, ratio[0], rtol=2e-4)


def test_power_spec_rules():
    assert _power_spec(KernelSpec("rbf", (0.3,)), None, 5, root=True) == (
        KernelSpec("rbf", (0.6,)), 0.5)
    # Matérn 2.5 in d = 2: root smoothness 2.5/2 - 2/4 = 0.75 (Bessel form), same kappa
    spec, a = _power_spec(KernelSpec("matern", (0.2, 2.5)), None, 2, root=True)
    assert a == 0.5 and spec.name == "matern_power"
    assert_allclose(spec.params, (2 * math.sqrt(2.5 * 0.2), 0.75))
    # Matérn 1.5 in d = 1: root smoothness 0.5, an engine kernel with the same kappa
    spec, _ = _power_spec(KernelSpec("matern", (0.2, 1.5)), None, 1, root=True)
    assert spec.name == "matern" and spec.params[1] == 0.5
    assert_allclose(math.sqrt(2 * spec.params[0]), 2 * math.sqrt(1.5 * 0.2))
    # no square root: Laplacian (alpha > 1/2) and Matérn 1/2 in d = 2 (alpha > 2/3)
    assert _power_spec(KernelSpec("laplacian", (0.4,)), None, 3, root=False)[1] == 0.75
    assert_allclose(_power_spec(KernelSpec("matern", (0.2, 0.5)), None, 2, root=False)[1], 5 / 6)
    with pytest.raises(ValueError, match="square-root kernel"):
        _power_spec(KernelSpec("laplacian", (0.4,)), None, 3, root=True)
    with pytest.raises(ValueError, match="alpha"):
        _power_spec(KernelSpec("matern", (0.2, 0.5)), 0.6, 2, root=False)


@pytest.mark.parametrize("kernel, kp, variant, alpha", [
    ("rbf", {}, "root", 0.5), ("rbf", {}, "power", 0.5), ("rbf", {}, "plus", 0.5),
    ("laplacian", {}, "power", 0.75), ("laplacian", {}, "plus", 0.75),
    ("matern", {"nu": 2.5}, "root", 0.5), ("matern", {"nu": 0.5}, "plus", 5 / 6),
])
def test_variants_beat_iid(kernel, kp, variant, alpha):
    n = 1024
    ratios = []
    for seed in range(3):
        rng = np.random.default_rng(seed)
        X = rng.standard_normal((n, 2))
        est = KernelThinning(kernel, gamma=0.25, kernel_params=kp, variant=variant,
                             random_state=seed).fit(X)
        assert est.alpha_ == pytest.approx(alpha)
        iid = mmd(X, X[rng.choice(n, 32, replace=False)], kernel=kernel, gamma=0.25,
                  kernel_params=kp)
        ratios.append(iid / est.mmd_)
    assert np.median(ratios) > 2.0


# ----------------------------------------------------------------- estimator
@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 66, 127, 300])
def test_coreset_size_validity_and_uniqueness(n):
    X = np.random.default_rng(n).standard_normal((n, 3))
    default_m = (n.bit_length() - 1) // 2
    for m in sorted({0, default_m, n.bit_length() - 1}):
        est = KernelThinning(m=None if m == default_m else m, random_state=0).fit(X)
        idx = est.coreset_indices_
        assert est.m_ == m
        assert len(idx) == n // 2**m
        assert idx.dtype == np.int64 and np.all((idx >= 0) & (idx < n))
        assert len(np.unique(idx)) == len(idx) and np.all(np.diff(idx) > 0)
        assert_array_equal(est.coreset_, X[idx])
        if m == 0:
            assert est.mmd_ == 0.0


def test_degenerate_inputs():
    """Identical points (b = 0: fair coins, exact ties in KT-SWAP) and heavy duplication."""
    est = KernelThinning(random_state=0).fit(np.zeros((100, 3)))
    assert len(est.coreset_indices_) == 12 and est.mmd_ == 0.0
    X = np.repeat(np.random.default_rng(0).standard_normal((10, 2)), 30, axis=0)
    K = rbf_kernel(X, gamma=0.5)
    for params in ({}, {"compress": "compress++", "g": 1}):
        got = [KernelThinning(gamma=0.5, backend=b, random_state=1, compute_mmd=True,
                              **params).fit(X) for b in ENGINES]
        assert_array_equal(got[0].coreset_indices_, got[1].coreset_indices_)
        idx = got[0].coreset_indices_
        assert len(idx) == 18 and len(np.unique(idx)) == 18
        assert_allclose(got[0].mmd_, _dense_mmd(K, idx), rtol=1e-7, atol=1e-9)


def _compress_size(n, beta):
    if beta == 0:
        return n
    total = sum(_compress_size(len(p), beta - 1) for p in np.array_split(np.arange(n), 4))
    return total // 2


@pytest.mark.parametrize("n, g", [(64, 0), (100, 1), (1000, 2), (1024, 1), (4**5 + 37, 0)])
def test_compress_sizes(n, g):
    X = np.random.default_rng(0).standard_normal((n, 2))
    m = (n.bit_length() - 1) // 2
    beta = min(max(m - g, 0), m)
    if beta <= 1:  # plain KT
        expected = n >> m
    else:  # the quarters compressed with beta - 1 levels, then KT with m - beta + 1 rounds
        size = sum(_compress_size(len(p), beta - 1) for p in np.array_split(np.arange(n), 4))
        expected = size >> (m - beta + 1)
    idx = KernelThinning(compress="compress++", g=g, random_state=0).fit(X).coreset_indices_
    assert len(idx) == expected and len(np.unique(idx)) == len(idx)
    assert abs(len(idx) - n / 2**m) <= 2 ** (beta + 1)  # about n / 2^m
    idx = KernelThinning(compress="compress", random_state=0).fit(X).coreset_indices_
    assert len(idx) == _compress_size(n, m) and len(np.unique(idx)) == len(idx)


@pytest.mark.parametrize("n", [2, 3, 5, 17, 66])
@pytest.mark.parametrize("compress", ["compress", "compress++"])
def test_compress_small_inputs_every_m(n, compress):
    X = np.random.default_rng(n).standard_normal((n, 2))
    for m in range(n.bit_length()):
        idx = KernelThinning(m=m, compress=compress, g=1, random_state=0).fit(X).coreset_indices_
        assert len(np.unique(idx)) == len(idx) and np.all((idx >= 0) & (idx < n))
        assert n / 2**m - 2 <= len(idx) <= n / 2**m


def test_compress_pp_quality_close_to_kt():
    """[CPP]: Compress++ with g = 4 keeps KT's MMD (within a small factor) and beats i.i.d."""
    n = 4**6
    r_kt, r_iid = [], []
    for seed in range(6):
        rng = np.random.default_rng(seed)
        X = rng.standard_normal((n, 2))
        cpp = KernelThinning(gamma=0.25, compress="compress++", g=4, random_state=seed).fit(X)
        kt = KernelThinning(gamma=0.25, random_state=seed).fit(X)
        assert len(cpp.coreset_indices_) == 64
        K_mmd = mmd(X, cpp.coreset_, gamma=0.25)
        assert_allclose(cpp.mmd_, K_mmd, rtol=1e-8)
        r_kt.append(cpp.mmd_ / kt.mmd_)
        r_iid.append(mmd(X, X[rng.choice(n, 64, replace=False)], gamma=0.25) / cpp.mmd_)
    assert np.median(r_kt) < 1.6
    assert np.median(r_iid) > 4.0


def test_mmd_attribute_equals_dense_computation():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 4))
    K = rbf_kernel(X, gamma=0.2)
    est = KernelThinning(gamma=0.2, random_state=0).fit(X)
    assert_allclose(est.mmd_, _dense_mmd(K, est.coreset_indices_), rtol=1e-9)
    w = rng.random(300)
    est = KernelThinning(gamma=0.2, random_state=0).fit(X, sample_weight=w)
    assert_allclose(est.mmd_, _dense_mmd(K, est.coreset_indices_, w), rtol=1e-9)
    est = KernelThinning(gamma=0.2, compress="compress++", g=1, compute_mmd=True,
                         random_state=0).fit(X)
    assert_allclose(est.mmd_, _dense_mmd(K, est.coreset_indices_), rtol=1e-9)
    big = KernelThinning(gamma=0.2, compress="compress++", compute_mmd=False).fit(X)
    assert math.isnan(big.mmd_)


@pytest.mark.parametrize("params", [
    {}, {"variant": "plus"}, {"compress": "compress++", "g": 1}, {"kernel": "laplacian"},
    {"compress": "compress"},
])
def test_numba_and_numpy_engines_give_the_same_coreset(params):
    X = np.random.default_rng(7).standard_normal((300, 3))
    got = [KernelThinning(gamma=0.3, backend=b, random_state=11, **params).fit(X)
           for b in ENGINES]
    assert_array_equal(got[0].coreset_indices_, got[1].coreset_indices_)
    if not math.isnan(got[0].mmd_):
        assert_allclose(got[0].mmd_, got[1].mmd_, rtol=1e-8)


def test_cupy_engine_array_code_on_numpy():
    """The CuPy engine's array code (run on NumPy, as on a machine without a GPU) thins
    exactly as the NumPy engine: blocks from its pairwise, the reference loops."""
    from kernelkit.backend._cupy import CupyBackend

    X = np.random.default_rng(4).standard_normal((300, 2))
    spec = RBF(0.4).spec(2)
    out = []
    for engine in (NumpyBackend(), CupyBackend(xp=np)):
        for wm in (256, 0.02):  # stored matrix, then row blocks
            budget = int(wm * 2**20)
            pool = _Pool(_ThinKernel(engine, X, budget, terms=((1.0, spec),)), np.arange(300),
                         budget)
            Q, mmd_ = _kt(pool, pool, engine, np.arange(300), 4, 0.5,
                          np.random.RandomState(0), budget)
            out.append((np.sort(Q), mmd_))
    for Q, v in out[1:]:
        assert_array_equal(Q, out[0][0])
        assert_allclose(v, out[0][1], rtol=1e-9)


def test_stored_and_blockwise_kernels_give_the_same_coreset():
    X = np.random.default_rng(8).standard_normal((400, 2))
    for params in ({}, {"variant": "plus", "kernel": "laplacian"},
                   {"compress": "compress++", "g": 1}):
        ref = KernelThinning(gamma=0.3, random_state=2, **params).fit(X)
        for backend in ENGINES:
            with kernelkit.config_context(working_memory=0.02):  # row blocks, not the matrix
                got = KernelThinning(gamma=0.3, random_state=2, backend=backend,
                                     **params).fit(X)
            assert_array_equal(got.coreset_indices_, ref.coreset_indices_)


def test_deterministic_under_random_state():
    X = np.random.default_rng(0).standard_normal((500, 2))
    a = KernelThinning(random_state=3).fit(X).coreset_indices_
    b = KernelThinning(random_state=3).fit(X).coreset_indices_
    c = KernelThinning(random_state=np.random.RandomState(3)).fit(X).coreset_indices_
    d = KernelThinning(random_state=4).fit(X).coreset_indices_
    assert_array_equal(a, b)
    assert_array_equal(a, c)
    assert not np.array_equal(a, d)
    assert_array_equal(kernel_thinning(X, random_state=3), a)


def test_precomputed_and_callable_kernels_match_the_named_kernel():
    X = np.random.default_rng(1).standard_normal((200, 2))
    ref = KernelThinning(gamma=0.5, random_state=0).fit(X)
    pre = KernelThinning(kernel="precomputed", random_state=0).fit(rbf_kernel(X, gamma=0.5))
    fun = KernelThinning(kernel=lambda A, B: rbf_kernel(A, B, gamma=0.5), random_state=0).fit(X)
    assert_array_equal(pre.coreset_indices_, ref.coreset_indices_)
    assert_array_equal(fun.coreset_indices_, ref.coreset_indices_)
    assert_allclose([pre.mmd_, fun.mmd_], ref.mmd_, rtol=1e-9)


def test_weighted_input_targets_the_weighted_measure():
    rng = np.random.default_rng(0)
    n = 1024
    X = np.vstack([rng.standard_normal((n // 2, 2)) - 3, rng.standard_normal((n // 2, 2)) + 3])
    K = rbf_kernel(X, gamma=0.25)
    w = np.r_[np.full(n // 2, 3.0), np.full(n // 2, 1.0)]
    wins = 0
    for seed in range(5):
        est = KernelThinning(gamma=0.25, random_state=seed).fit(X, sample_weight=w)
        plain = KernelThinning(gamma=0.25, random_state=seed).fit(X)
        assert len(est.coreset_indices_) == 32
        assert_allclose(est.mmd_, _dense_mmd(K, est.coreset_indices_, w), rtol=1e-9)
        assert est.mmd_ < 0.5 * _dense_mmd(K, plain.coreset_indices_, w)
        iid = rng.choice(n, 32, p=w / w.sum())
        wins += est.mmd_ < _dense_mmd(K, iid, w)
        assert 20 <= np.sum(est.coreset_indices_ < n // 2) <= 28  # about 3/4 of 32
    assert wins == 5
    # zero weight: the coreset stays on the weighted cluster
    w0 = np.r_[np.ones(n // 2), np.zeros(n // 2)]
    idx = KernelThinning(gamma=0.25, random_state=0).fit(X, sample_weight=w0).coreset_indices_
    assert np.all(idx < n // 2)
    # integer weights: repeats allowed, indices valid
    wi = rng.integers(0, 5, n)
    idx = KernelThinning(random_state=0).fit(X, sample_weight=wi).coreset_indices_
    assert len(idx) == 32 and np.all(wi[idx] > 0)


def test_leftover_points_stay_candidates():
    """n = 66, m = 3: two leftovers sit out KT-SPLIT, but KT-SWAP targets all 66 points."""
    X = np.random.default_rng(2).standard_normal((66, 2))
    K = rbf_kernel(X, gamma=0.5)
    est = KernelThinning(gamma=0.5, m=3, random_state=0).fit(X)
    assert len(est.coreset_indices_) == 8
    assert_allclose(est.mmd_, _dense_mmd(K, est.coreset_indices_), rtol=1e-9)


def test_input_is_not_modified_and_fit_transform():
    X = np.random.default_rng(0).standard_normal((100, 2))
    X0 = X.copy()
    X.setflags(write=False)
    w = np.ones(100)
    est = KernelThinning(random_state=0)
    out = est.fit_transform(X, sample_weight=w)
    assert_array_equal(X, X0)
    assert_array_equal(w, 1.0)
    assert_array_equal(out, X[est.coreset_indices_])


def test_downstream_kernel_ridge_on_the_coreset():
    """Kernel ridge fit on a KT coreset of the (x, y) sample predicts better than one fit on
    an i.i.d. subset of the same size (the coreset covers the input space more evenly)."""
    rng = np.random.default_rng(0)
    n = 4096
    X = rng.uniform(-3, 3, (n, 2))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1])
    Xt = rng.uniform(-3, 3, (2000, 2))
    yt = np.sin(Xt[:, 0]) * np.cos(Xt[:, 1])
    err_kt, err_iid = [], []
    for seed in range(5):
        XY = np.column_stack([X, y])  # thin the joint (x, y) sample
        idx = kernel_thinning(XY, gamma=0.5, random_state=seed)
        iid = np.random.default_rng(seed).choice(n, len(idx), replace=False)
        for sub, errs in ((idx, err_kt), (iid, err_iid)):
            model = kernelkit.KernelRidge(alpha=1e-3, kernel="rbf", gamma=0.5)
            model.fit(X[sub], y[sub])
            errs.append(np.mean((model.predict(Xt) - yt) ** 2))
    assert np.median(err_kt) < 0.6 * np.median(err_iid)


# ----------------------------------------------------------------- bad input
X_OK = np.random.default_rng(0).standard_normal((66, 2))


@pytest.mark.parametrize("X, params, match", [
    (np.array([[np.nan, 1.0], [0.0, 1.0]]), {}, "NaN"),
    (np.array([[np.inf, 1.0], [0.0, 1.0]]), {}, "infinity"),
    (np.empty((0, 2)), {}, "0 sample"),
    (np.ones(4), {}, "2D array"),
    (X_OK, {"m": 7}, "m=7"),
    (X_OK, {"m": -1}, "m must"),
    (X_OK, {"m": 1.5}, "m must"),
    (X_OK, {"delta": 0.0}, "delta"),
    (X_OK, {"delta": 1.0}, "delta"),
    (X_OK, {"delta": float("nan")}, "delta"),
    (X_OK, {"g": -1, "compress": "compress++"}, "g must"),
    (X_OK, {"g": 1.5}, "g must"),
    (X_OK, {"variant": "sqrt"}, "variant"),
    (X_OK, {"compress": "compress+"}, "compress"),
    (X_OK, {"compute_mmd": "yes"}, "compute_mmd"),
    (X_OK, {"kernel": "sigmoid"}, "kernel"),
    (X_OK, {"kernel": lambda A, B: -rbf_kernel(A, B)}, "positive semidefinite"),
    (X_OK, {"kernel": lambda A, B: rbf_kernel(A, B) + A[:, :1] * 0 + B[:, 0] * 0.1},
     "symmetric"),
    (X_OK, {"kernel": "polynomial", "degree": 3, "coef0": -4.0}, "positive semidefinite"),
    (X_OK, {"kernel": "laplacian", "variant": "root"}, "variant='root'"),
    (X_OK, {"kernel": "ntk", "variant": "plus"}, "power kernel"),
    (X_OK, {"kernel": lambda A, B: rbf_kernel(A, B), "variant": "plus"}, "variant"),
    (X_OK, {"kernel": "matern", "kernel_params": {"nu": 0.5}, "variant": "power",
            "alpha": 0.6}, "alpha"),
    (X_OK, {"variant": "root", "alpha": 0.7}, "alpha"),
    (X_OK, {"kernel": "precomputed"}, "square"),
    (X_OK, {"gamma": -1.0}, "gamma"),
    (X_OK, {"backend": "gpu"}, "backend"),
])
def test_bad_input(X, params, match):
    with pytest.raises(ValueError, match=match):
        KernelThinning(**params).fit(X)


@pytest.mark.parametrize("w, match", [
    (-np.ones(66), "(?i)negative"), (np.zeros(66), "(?i)sample weight"),
    (np.ones(5), "sample_weight"),
])
def test_bad_sample_weight(w, match):
    with pytest.raises(ValueError, match=match):
        KernelThinning().fit(X_OK, sample_weight=w)
    with pytest.raises(ValueError, match=match):
        kernel_thinning(X_OK, sample_weight=w)


def test_non_psd_precomputed_matrix():
    K = laplacian_kernel(X_OK) - 0.5 * np.eye(66)
    with pytest.raises(ValueError, match="positive semidefinite"):
        KernelThinning(kernel="precomputed").fit(K)


def _expected_failures(estimator):
    if estimator.kernel == "precomputed":  # these checks pass matrices that are not PSD
        reason = "kernel thinning rejects a precomputed kernel matrix that is not PSD"
        return {"check_positive_only_tag_during_fit": reason,
                "check_estimators_dtypes": reason}
    return {}


@parametrize_with_checks([KernelThinning(), KernelThinning(compress="compress++", g=1),
                          KernelThinning(kernel="precomputed"), KernelThinning(variant="plus")],
                         expected_failed_checks=_expected_failures)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_rejected_fit_leaves_kernel_thinning_as_it_was():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((256, 2))
    kt = KernelThinning(gamma=0.5, random_state=0).fit(X)
    before = {k: v for k, v in vars(kt).items() if k.endswith("_")}
    bad = X.copy()
    bad[3, 1] = np.nan
    calls = []

    def failing(A, B):  # a failure midway: after the PSD check
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("kernel failed midway")
        return rbf_kernel(A, B, gamma=0.5)

    for params, data, kwargs, match in [
        (dict(variant="nope"), X, {}, "variant"),  # a bad parameter
        (dict(delta=2.0), bad, {}, "delta"),  # parameters before data
        ({}, bad, {}, "NaN"),  # bad data
        (dict(m=9), X[:, :1], {}, "halving rounds"),  # a parameter that does not fit n
        ({}, X, dict(sample_weight=-np.ones(256)), "sample_weight|negative"),
        (dict(kernel=failing, gamma=None, m=2), X[:, :1], {}, "midway"),
    ]:
        kt.set_params(**params)
        with pytest.raises((ValueError, RuntimeError), match=match):
            kt.fit(data, **kwargs)
        kt.set_params(variant="target", delta=0.5, m=None, kernel="rbf", gamma=0.5)
        after = {k: v for k, v in vars(kt).items() if k.endswith("_")}
        assert after.keys() == before.keys()
        for k, v in before.items():
            assert_array_equal(after[k], v)
    assert_array_equal(kt.fit(X).coreset_indices_, before["coreset_indices_"])


def test_kernel_thinning_big_endian_input_and_sparse_refused():
    import scipy.sparse as sp

    rng = np.random.default_rng(1)
    X = rng.standard_normal((256, 2))
    w = rng.uniform(0.5, 1.5, 256)
    K = rbf_kernel(X, gamma=0.5)
    for backend in ("numpy", "numba"):
        for kernel, A in (("rbf", X), ("precomputed", K)):
            def fit(A, w, kernel=kernel):
                return KernelThinning(kernel, gamma=0.5 if kernel == "rbf" else None,
                                      random_state=0, backend=backend).fit(A, sample_weight=w)
            a, b = fit(A, w), fit(A.astype(">f8"), w.astype(">f8"))
            assert_array_equal(a.coreset_indices_, b.coreset_indices_)
            assert a.mmd_ == pytest.approx(b.mmd_, rel=1e-12, nan_ok=True)
    with pytest.raises(TypeError, match="dense data is required"):
        KernelThinning().fit(sp.csr_matrix(X))


@pytest.mark.parametrize("random_state", [0, 2])
def test_equal_sample_weights_are_no_weights(random_state):
    """scikit-learn's convention: unit (or any equal) weights give the unweighted fit,
    not a coreset of the resampled points (it differed, with a repeated row for seed 2)."""
    X = np.random.default_rng(0).standard_normal((500, 2))
    ref = KernelThinning(random_state=random_state).fit(X)
    for w in (np.ones(500), np.full(500, 3.0)):
        got = KernelThinning(random_state=random_state).fit(X, sample_weight=w)
        np.testing.assert_array_equal(got.coreset_indices_, ref.coreset_indices_)
        assert got.mmd_ == ref.mmd_
