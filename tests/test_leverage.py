"""Ridge leverage scores: exact RLS, SQUEAK / DISQUEAK, INK-ESTIMATE, RLS Nyström.

Values are checked against the exact scores and the papers' stated guarantees
(Calandriello, Lazaric & Valko, UAI 2016 and AISTATS 2017): estimates within the
(1 +- eps) band, dictionary size within 3 qbar d_eff, the Nyström approximation's
spectral bound checked by eigenvalues, epsilon-accuracy of the dictionary.
"""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.stats import binom
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import Ridge, SGDRegressor
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import kernelkit
from kernelkit.kernels import RBF, Laplacian, Linear, Polynomial
from kernelkit.leverage import (
    SQUEAK,
    INKEstimate,
    RLSNystroem,
    effective_dimension,
    ridge_leverage_scores,
    theory_qbar,
)
from kernelkit.leverage import _loops as ref_loops
from kernelkit.leverage import _loops_numba as nb_loops
from kernelkit.utils._dispatch import select_loops

EPS = 0.5
GAMMA_REG = 5.0


def _data(name):
    loader = {"breast_cancer": load_breast_cancer, "digits": load_digits}[name]
    X = StandardScaler().fit_transform(loader().data)
    return X[:, np.std(X, axis=0) > 0]


@pytest.fixture(scope="module")
def bc():
    """breast_cancer (569 x 30), rbf gamma = 1/d, its kernel matrix and exact RLS."""
    X = _data("breast_cancer")
    g = 1.0 / X.shape[1]
    K = RBF(g)(X)
    tau = ridge_leverage_scores(X, gamma_reg=GAMMA_REG, gamma=g)
    return X, g, K, tau


def _in_band(est, tau, eps=EPS):
    """Fraction of points with tau / (1 + eps) <= est <= tau / (1 - eps)."""
    tol = 1e-9
    return np.mean((est >= tau / (1 + eps) * (1 - tol)) & (est <= tau / (1 - eps) * (1 + tol)))


def _regularized_nystroem(K, idx, w, gamma_reg):
    """K S (S'KS + gamma I)^{-1} S'K with S S' = diag(w) on idx."""
    sw = np.sqrt(w)
    C = K[:, idx] * sw
    A = sw[:, None] * K[np.ix_(idx, idx)] * sw + gamma_reg * np.eye(len(idx))
    return C @ np.linalg.solve(A, C.T)


def _check_spectral_guarantee(K, Kt, gamma_reg, eps=EPS):
    """0 <= K - K~ <= gamma/(1 - eps) K (K + gamma I)^{-1} <= gamma/(1 - eps) I, by eigenvalues."""
    n = len(K)
    E = K - Kt
    scale = np.abs(K).max()
    lam_E = np.linalg.eigvalsh(E)
    assert lam_E[0] >= -1e-8 * scale
    assert lam_E[-1] <= gamma_reg / (1 - eps)
    bound = gamma_reg / (1 - eps) * K @ np.linalg.inv(K + gamma_reg * np.eye(n))
    bound = 0.5 * (bound + bound.T)
    assert np.linalg.eigvalsh(bound - E)[0] >= -1e-8 * scale


def _accuracy(K, idx, w, gamma_reg):
    """||P - P~||_2 of SQUEAK's epsilon-accuracy definition, with P~ from S S' = diag(w)."""
    lam, U = np.linalg.eigh(K)
    lam = np.clip(lam, 0, None)
    R = U * np.sqrt(lam)  # K = R R'
    D = 1.0 / np.sqrt(lam + gamma_reg)
    s = np.full(len(K), -1.0)
    s[idx] += w
    M = (D[:, None] * (R.T * s)) @ R * D[None, :]
    e = np.linalg.eigvalsh(M)
    return max(-e[0], e[-1])


# ------------------------------------------------------------------ exact RLS
@pytest.mark.parametrize("kernel", [RBF(0.3), Laplacian(0.2), Polynomial(0.2, 2, 1.0), Linear()],
                         ids=repr)
def test_exact_rls_equals_dense_formula(kernel, rng):
    X = rng.standard_normal((120, 4))
    K = kernel(X)
    dense = np.diag(K @ np.linalg.inv(K + 0.7 * np.eye(120)))
    with kernelkit.config_context(working_memory=0.01):  # several row blocks
        tau = ridge_leverage_scores(X, kernel=kernel, gamma_reg=0.7)
    assert_allclose(tau, dense, rtol=1e-9, atol=1e-12)
    assert_allclose(ridge_leverage_scores(K, kernel="precomputed", gamma_reg=0.7), dense,
                    rtol=1e-9, atol=1e-12)
    assert effective_dimension(X, kernel=kernel, gamma_reg=0.7) == pytest.approx(dense.sum(),
                                                                                 rel=1e-9)


def test_effective_dimension_array_and_gamma_reg_scaling(rng):
    X = rng.standard_normal((600, 3))
    d = effective_dimension(X, gamma=0.5, gamma_reg=[0.1, 1.0, 10.0])
    assert d.shape == (3,) and np.all(np.diff(d) < 0)
    tau = ridge_leverage_scores(X, gamma=0.5, gamma_reg=1.0)
    assert d[1] == pytest.approx(tau.sum(), rel=1e-9)
    # gamma_reg = n * lambda keeps d_eff about constant as n grows; a fixed gamma_reg does not
    lam = 0.01
    half = effective_dimension(X[:300], gamma=0.5, gamma_reg=300 * lam)
    full = effective_dimension(X, gamma=0.5, gamma_reg=600 * lam)
    assert full == pytest.approx(half, rel=0.15)
    assert effective_dimension(X, gamma=0.5, gamma_reg=3.0) > 1.2 * half


# ------------------------------------------------------------------ SQUEAK
@pytest.mark.parametrize("name", ["breast_cancer", "digits"])
def test_squeak_estimates_within_band_and_size_bound(name):
    X = _data(name)
    g = 1.0 / X.shape[1]
    tau = ridge_leverage_scores(X, gamma_reg=GAMMA_REG, gamma=g)
    d_eff = tau.sum()
    sq = SQUEAK(gamma_reg=GAMMA_REG, epsilon=EPS, qbar=8, gamma=g, random_state=0).fit(X)
    assert _in_band(sq.leverage_scores_, tau) >= 0.95
    # Theorem 1: at most 3 qbar d_eff copies (hence points) in the dictionary
    assert sq.dictionary_multiplicities_.sum() <= 3 * sq.qbar_ * d_eff
    assert len(sq.dictionary_indices_) < 0.5 * len(X)
    assert d_eff / (1 + EPS) <= sq.effective_dim_ <= d_eff / (1 - EPS)
    assert_allclose(sq.dictionary_weights_,
                    sq.dictionary_multiplicities_ / (8 * sq.dictionary_probabilities_))
    assert_array_equal(sq.dictionary_, X[sq.dictionary_indices_])
    assert np.all(np.diff(sq.dictionary_indices_) > 0)
    # out-of-sample estimator on the training rows gives the same scores
    assert_allclose(sq.estimate_leverage_scores(X[:50]), sq.leverage_scores_[:50], rtol=1e-10)


def test_squeak_spectral_guarantee_and_accuracy(bc):
    X, g, K, tau = bc
    sq = SQUEAK(gamma_reg=GAMMA_REG, epsilon=EPS, qbar=16, gamma=g, random_state=0).fit(X)
    Kt = _regularized_nystroem(K, sq.dictionary_indices_, sq.dictionary_weights_, GAMMA_REG)
    _check_spectral_guarantee(K, Kt, GAMMA_REG)
    # the plain Nyström projection of the same columns is at least as accurate
    idx = sq.dictionary_indices_
    Kp = K[:, idx] @ np.linalg.pinv(K[np.ix_(idx, idx)], rtol=1e-12) @ K[idx]
    assert np.linalg.eigvalsh(K - Kp)[-1] <= GAMMA_REG / (1 - EPS)
    # epsilon-accuracy (Definition 1) with Theorem 1's qbar, and it improves with qbar
    sq_auto = SQUEAK(gamma_reg=GAMMA_REG, epsilon=EPS, qbar="theory", gamma=g,
                     random_state=0).fit(X)
    assert sq_auto.qbar_ == theory_qbar(len(X), EPS, 0.1)
    assert sq_auto.dictionary_multiplicities_.sum() <= 3 * sq_auto.qbar_ * tau.sum()
    acc_auto = _accuracy(K, sq_auto.dictionary_indices_, sq_auto.dictionary_weights_,
                         GAMMA_REG)
    assert acc_auto <= EPS
    assert _in_band(sq_auto.leverage_scores_, tau) == 1.0
    sq4 = SQUEAK(gamma_reg=GAMMA_REG, epsilon=EPS, qbar=4, gamma=g, random_state=0).fit(X)
    assert acc_auto < _accuracy(K, sq.dictionary_indices_, sq.dictionary_weights_, GAMMA_REG) \
        < _accuracy(K, sq4.dictionary_indices_, sq4.dictionary_weights_, GAMMA_REG)


def test_disqueak_four_partitions_same_guarantees(bc):
    X, g, K, tau = bc
    params = dict(gamma_reg=GAMMA_REG, epsilon=EPS, qbar=16, gamma=g, random_state=0,
                  n_partitions=4)
    sq = SQUEAK(**params).fit(X)
    assert _in_band(sq.leverage_scores_, tau) >= 0.95
    assert sq.dictionary_multiplicities_.sum() <= 3 * 16 * tau.sum()
    Kt = _regularized_nystroem(K, sq.dictionary_indices_, sq.dictionary_weights_, GAMMA_REG)
    _check_spectral_guarantee(K, Kt, GAMMA_REG)
    # the tree and its seeds do not depend on how the jobs are run
    from joblib import parallel_config

    with parallel_config(backend="threading"):
        par = SQUEAK(**params, n_jobs=2).fit(X)
    assert_array_equal(par.dictionary_indices_, sq.dictionary_indices_)
    assert_allclose(par.leverage_scores_, sq.leverage_scores_, rtol=1e-10)


def test_disqueak_on_dask_localcluster(bc):
    distributed = pytest.importorskip("distributed")
    from joblib import parallel_config

    from kernelkit.distributed import fit_disqueak

    X, g, K, tau = bc
    params = dict(gamma_reg=GAMMA_REG, epsilon=EPS, qbar=8, gamma=g, random_state=3)
    local = SQUEAK(**params, n_partitions=4).fit(X)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        dist = fit_disqueak(SQUEAK(**params), X, client=client, n_partitions=4)
        # a rejected call on a fitted estimator leaves it as it was
        before = {k: v for k, v in vars(dist).items()}
        with pytest.raises(ValueError, match="kernel_params"):
            fit_disqueak(dist.set_params(kernel_params={"x": 1}), X[:100, :2], client=client)
        dist.set_params(kernel_params=None)
        assert vars(dist).keys() == before.keys()
        assert all(vars(dist)[k] is before[k] for k in before if k != "kernel_params")
        with parallel_config(backend="dask"):
            via_joblib = SQUEAK(**params, n_partitions=4, n_jobs=2).fit(X)
    for other in (dist, via_joblib):
        assert_array_equal(other.dictionary_indices_, local.dictionary_indices_)
        assert_array_equal(other.dictionary_multiplicities_, local.dictionary_multiplicities_)
        assert_allclose(other.leverage_scores_, local.leverage_scores_, rtol=1e-10)
    assert _in_band(dist.leverage_scores_, tau) >= 0.95
    with pytest.raises(TypeError, match="client"):
        fit_disqueak(SQUEAK(), X, client=None)


def test_squeak_engines_agree_and_random_state_reproduces(bc):
    X, g, _, _ = bc
    fits = [SQUEAK(gamma_reg=GAMMA_REG, qbar=6, gamma=g, random_state=7, backend=b).fit(X)
            for b in ("numpy", "numba", "numba")]
    for f in fits[1:]:
        assert_array_equal(f.dictionary_indices_, fits[0].dictionary_indices_)
        assert_allclose(f.leverage_scores_, fits[0].leverage_scores_, rtol=1e-9)
    other = SQUEAK(gamma_reg=GAMMA_REG, qbar=6, gamma=g, random_state=8).fit(X)
    assert not np.array_equal(other.dictionary_indices_, fits[0].dictionary_indices_)


# ------------------------------------------------------------------ INK-ESTIMATE
def test_ink_estimates_at_every_step_within_band(bc):
    X, g, K, tau = bc
    n = len(X)
    # tau_{t,t} of the prefix matrices K_t, all at once: Cholesky of K + gamma I
    L = np.linalg.cholesky(K + GAMMA_REG * np.eye(n))
    prefix = 1.0 - GAMMA_REG / np.diag(L) ** 2
    ink = INKEstimate(gamma_reg=GAMMA_REG, epsilon=EPS, qbar=8, gamma=g, random_state=0).fit(X)
    assert ink.leverage_scores_.shape == (n,)
    assert _in_band(ink.leverage_scores_, prefix) >= 0.95
    assert ink.dictionary_multiplicities_.sum() <= 3 * 8 * tau.sum()
    assert tau.sum() / 2 <= ink.effective_dim_ <= 2 * tau.sum()
    assert _in_band(ink.estimate_leverage_scores(X), tau) >= 0.95
    # the stream cut differently gives the same sketch; the sketch after 300 points
    # satisfies the spectral bound for K_300
    part = INKEstimate(gamma_reg=GAMMA_REG, epsilon=EPS, qbar=8, gamma=g, random_state=0)
    part.partial_fit(X[:37]).partial_fit(X[37:300])
    K300 = K[:300, :300]
    Kt = _regularized_nystroem(K300, part.dictionary_indices_, part.dictionary_weights_,
                               GAMMA_REG)
    assert np.linalg.eigvalsh(K300 - Kt)[-1] <= GAMMA_REG / (1 - EPS)
    part.partial_fit(X[300:])
    assert_array_equal(part.dictionary_indices_, ink.dictionary_indices_)
    assert_allclose(part.leverage_scores_, ink.leverage_scores_, rtol=1e-9)


def test_ink_numba_loop_equals_numpy_reference(bc):
    X, g, _, _ = bc
    a = INKEstimate(gamma_reg=GAMMA_REG, qbar=5, gamma=g, random_state=1, backend="numpy").fit(X)
    b = INKEstimate(gamma_reg=GAMMA_REG, qbar=5, gamma=g, random_state=1, backend="numba").fit(X)
    assert_array_equal(a.dictionary_indices_, b.dictionary_indices_)
    assert_array_equal(a.dictionary_multiplicities_, b.dictionary_multiplicities_)
    assert_allclose(a.leverage_scores_, b.leverage_scores_, rtol=1e-8)


# ------------------------------------------------------------------ loops and engine hook
def test_loops_follow_the_engine_name():
    assert select_loops("kernelkit.leverage", "numpy") is ref_loops
    assert select_loops("kernelkit.leverage", "cupy") is ref_loops
    assert select_loops("kernelkit.leverage", "numba") is nb_loops


def test_binomial_thinning_matches_scipy(rng):
    q = rng.integers(0, 6000, 4000)
    q[:500] = rng.integers(0, 5, 500)
    r = rng.uniform(0, 1, 4000)
    r[:300] = rng.uniform(0.999, 1.0, 300)
    r[300:600] = rng.uniform(0, 1e-4, 300)
    r[600:610], r[610:620] = 0.0, 1.0
    u = rng.uniform(0, 1, 4000)
    got = nb_loops.thin(q, r, u)
    ref = ref_loops.thin(q, r, u)
    # equal except where u is within rounding of a CDF step
    lo = np.clip(binom.ppf(np.maximum(u - 1e-10, 0), q, r), 0, None)
    hi = binom.ppf(np.minimum(u + 1e-10, 1 - 1e-16), q, r)
    hi = np.where(np.isnan(hi), q, hi)
    ok = (got >= np.where(r <= 0, 0, np.where(r >= 1, q, lo))) & \
         (got <= np.where(r <= 0, 0, np.where(r >= 1, q, hi)))
    assert ok.all()
    assert np.mean(got == ref) > 0.999
    assert np.all((got >= 0) & (got <= q))


def test_counter_uniforms_agree(rng):
    keys = rng.integers(0, 10**9, 1000)
    a = ref_loops.uniforms(2**63 + 12345, 77, keys)
    b = nb_loops.uniforms(2**63 + 12345, 77, keys)
    assert_array_equal(a, b)
    assert 0 <= a.min() and a.max() < 1 and abs(a.mean() - 0.5) < 0.05


# ------------------------------------------------------------------ RLSNystroem
def test_uniform_sampler_reproduces_sklearn_nystroem(bc):
    X, g, _, _ = bc
    ours = RLSNystroem(gamma=g, n_components=60, sampler="uniform", random_state=4).fit(X)
    ref = Nystroem(gamma=g, n_components=60, random_state=4).fit(X)
    assert_array_equal(ours.component_indices_, np.sort(ref.component_indices_))
    F, R = ours.transform(X[:100]), ref.transform(X[:100])
    assert_allclose(F @ F.T, R @ R.T, rtol=1e-8, atol=1e-10)


def test_rls_nystroem_interface_and_pipelines(bc):
    X, g, K, _ = bc
    y = np.sin(X[:, 0]) + X[:, 1] ** 2
    ny = RLSNystroem(gamma=g, n_components=80, random_state=0).fit(X)
    assert ny.components_.shape == (80, X.shape[1])
    assert ny.normalization_.shape == (80, 80)
    assert ny.component_indices_.shape == (80,) and ny.component_weights_.shape == (80,)
    assert_array_equal(ny.components_, X[ny.component_indices_])
    # gamma_reg matched to the budget: d_eff(gamma_reg_) ~ n_components / qbar
    assert effective_dimension(X, gamma=g, gamma_reg=ny.gamma_reg_) == pytest.approx(40, rel=0.05)
    F = ny.transform(X)
    assert np.linalg.eigvalsh(K - F @ F.T)[-1] <= ny.gamma_reg_ / (1 - EPS)
    out = ny.set_output(transform="pandas").transform(X[:5])
    assert list(out.columns[:2]) == ["rlsnystroem0", "rlsnystroem1"]
    for reg in (Ridge(alpha=1e-3), SGDRegressor(random_state=0, max_iter=2000, tol=1e-6)):
        pipe = make_pipeline(RLSNystroem(gamma=g, n_components=80, random_state=0), reg)
        with warnings.catch_warnings():  # SGD's own stopping on these features, not ours
            warnings.simplefilter("ignore", ConvergenceWarning)
            assert pipe.fit(X[:400], y[:400]).score(X[400:], y[400:]) > 0.5
    grid = GridSearchCV(make_pipeline(RLSNystroem(random_state=0), Ridge(alpha=1e-3)),
                        {"rlsnystroem__n_components": [20, 60],
                         "rlsnystroem__gamma": [g, 3 * g]}, cv=3).fit(X, y)
    assert grid.best_params_["rlsnystroem__n_components"] == 60


@pytest.mark.parametrize("sampler", ["squeak", "ink", "exact"])
def test_rls_samplers_spectral_bound(bc, sampler):
    X, g, K, _ = bc
    ny = RLSNystroem(gamma=g, n_components=120, sampler=sampler, random_state=0).fit(X)
    F = ny.transform(X)
    assert np.all(np.isfinite(F))
    assert np.linalg.eigvalsh(K - F @ F.T)[-1] <= ny.gamma_reg_ / (1 - EPS)


def test_precomputed_kernel_with_fewer_components(bc):
    X, g, K, _ = bc
    ny = RLSNystroem(kernel="precomputed", n_components=50, random_state=0).fit(K)
    F = ny.transform(K[:20])
    assert F.shape == (20, 50) and np.all(np.isfinite(F))
    idx = ny.component_indices_
    nys = K[:20][:, idx] @ np.linalg.pinv(K[np.ix_(idx, idx)], rtol=1e-12) @ K[idx][:, :20]
    assert_allclose(F @ F.T, nys, atol=1e-6)
    sq = SQUEAK(kernel="precomputed", gamma_reg=GAMMA_REG, qbar=8, random_state=0).fit(K)
    tau = ridge_leverage_scores(K, kernel="precomputed", gamma_reg=GAMMA_REG)
    assert _in_band(sq.leverage_scores_, tau) >= 0.95 and sq.dictionary_ is None


def test_duplicates_and_rank_deficient_kernels(rng):
    base = rng.standard_normal((40, 3))
    X = np.vstack([base, base])  # every point twice
    ny = RLSNystroem(gamma=0.5, n_components=80, random_state=0).fit(X)
    F = ny.transform(X)
    assert np.all(np.isfinite(F))
    assert_allclose(F @ F.T, RBF(0.5)(X), atol=1e-7)
    low = rng.standard_normal((200, 3)) @ rng.standard_normal((3, 10))  # rank 3, linear kernel
    for sampler in ("squeak", "exact", "uniform"):
        lin = RLSNystroem(kernel="linear", n_components=30, sampler=sampler,
                          random_state=0).fit(low)
        F = lin.transform(low)
        assert np.all(np.isfinite(F))
        assert_allclose(F @ F.T, low @ low.T, atol=1e-7 * np.abs(low @ low.T).max())


def _cluster_and_outliers(seed, n_dense=1000, n_sparse=60):
    r = np.random.default_rng(seed)
    dense = r.normal(0.0, 0.3, (n_dense, 2))
    sparse = r.uniform(-6, 6, (n_sparse, 2))
    return dense, sparse


def _f(X):
    return np.sin(1.5 * X[:, 0]) * np.cos(X[:, 1])


def test_rls_beats_uniform_where_the_outliers_live():
    errs = {"squeak": [], "uniform": []}
    for seed in range(3):
        dense, sparse = _cluster_and_outliers(seed)
        X = np.vstack([dense, sparse])
        y = _f(X)
        test = np.random.default_rng(100 + seed).uniform(-6, 6, (400, 2))
        # only test points near a training outlier (where the function is learnable)
        near = np.min(((test[:, None] - sparse[None]) ** 2).sum(-1), axis=1) < 0.3**2
        for sampler in errs:
            pipe = make_pipeline(RLSNystroem(gamma=2.0, n_components=100, sampler=sampler,
                                             random_state=seed), Ridge(alpha=1e-4))
            pred = pipe.fit(X, y).predict(test[near])
            errs[sampler].append(np.mean((pred - _f(test[near])) ** 2))
    assert np.mean(errs["squeak"]) < 0.5 * np.mean(errs["uniform"])


# ------------------------------------------------------------------ bad input
def test_bad_input_errors(bc):
    X = bc[0][:100]
    with pytest.warns(UserWarning, match="n_components > n_samples"):
        ny = RLSNystroem(n_components=150, random_state=0).fit(X)
    assert ny.transform(X).shape == (100, 100)
    for est in (SQUEAK(gamma_reg=0.0), INKEstimate(gamma_reg=-1.0),
                RLSNystroem(gamma_reg=0.0)):
        with pytest.raises(ValueError, match="gamma_reg"):
            est.fit(X)
    with pytest.raises(ValueError, match="gamma_reg"):
        ridge_leverage_scores(X, gamma_reg=-1)
    with pytest.raises(ValueError, match="gamma_reg"):
        effective_dimension(X, gamma_reg=[1.0, 0.0])
    for eps in (0.0, 1.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="epsilon"):
            SQUEAK(epsilon=eps).fit(X)
    for qbar in (0, 2.5, "theorem", True):
        with pytest.raises(ValueError, match="qbar"):
            SQUEAK(qbar=qbar).fit(X)
    with pytest.raises(ValueError, match="sampler"):
        RLSNystroem(sampler="leverage").fit(X)
    with pytest.raises(ValueError, match="n_components"):
        RLSNystroem(n_components=0).fit(X)
    with pytest.raises(ValueError, match="n_partitions"):
        SQUEAK(n_partitions=0).fit(X)
    bad = X.copy()
    bad[3, 2] = np.nan
    for est in (SQUEAK(), INKEstimate(), RLSNystroem()):
        with pytest.raises(ValueError, match="NaN"):
            est.fit(bad)
        with pytest.raises(ValueError, match="1 sample"):
            est.fit(X[:1])
        with pytest.raises(ValueError, match="0 sample"):
            est.fit(X[:0])
    bad[3, 2] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        ridge_leverage_scores(bad)
    K = RBF(0.1)(X)
    nonpsd = K - 0.5 * np.eye(100)
    for est in (SQUEAK(kernel="precomputed"), RLSNystroem(kernel="precomputed")):
        with pytest.raises(ValueError, match="positive semi-definite"):
            est.fit(nonpsd)
        with pytest.raises(ValueError, match="square"):
            est.fit(K[:, :50])
    with pytest.raises(ValueError, match="symmetric"):
        ridge_leverage_scores(K + np.triu(np.ones_like(K), 1) * 0.1, kernel="precomputed")
    with pytest.raises(ValueError, match="partial_fit"):
        INKEstimate(kernel="precomputed").partial_fit(K)


def test_inputs_not_modified(bc):
    X = bc[0][:150].copy()
    Xc = X.copy()
    K = RBF(0.1)(X)
    Kc = K.copy()
    RLSNystroem(n_components=30, random_state=0).fit(X).transform(X)
    SQUEAK(qbar=4, random_state=0, n_partitions=2).fit(X).estimate_leverage_scores(X)
    INKEstimate(qbar=4, random_state=0).fit(X)
    RLSNystroem(kernel="precomputed", n_components=30, random_state=0).fit(K).transform(K)
    ridge_leverage_scores(K, kernel="precomputed")
    assert_array_equal(X, Xc)
    assert_array_equal(K, Kc)


def _expected_failures(estimator):
    """scikit-learn's checks pass integer-rounded linear kernels, which are not PSD."""
    if getattr(estimator, "kernel", None) == "precomputed":
        why = "the check rounds a linear kernel matrix to integers: no longer PSD"
        return {"check_estimators_dtypes": why, "check_positive_only_tag_during_fit": why}
    return {}


@parametrize_with_checks([
    SQUEAK(), SQUEAK(qbar=3, n_partitions=2), INKEstimate(qbar=3),
    RLSNystroem(n_components=10), RLSNystroem(n_components=10, sampler="exact"),
    RLSNystroem(n_components=10, sampler="ink"), RLSNystroem(n_components=10, sampler="uniform"),
    RLSNystroem(kernel="precomputed", n_components=5),
], expected_failed_checks=_expected_failures)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # n_components capped on tiny data
        check(estimator)


# ------------------------------------------------------------------ degenerate data
def _repeated(seed=0, copies=30):
    """10 distinct points, each repeated ``copies`` times (rbf gamma 5: nearly orthogonal)."""
    base = np.random.default_rng(seed).standard_normal((10, 2))
    return np.repeat(base, copies, axis=0)


@pytest.mark.parametrize("sampler", ["squeak", "ink", "exact"])
def test_rls_columns_cover_every_distinct_point(sampler):
    # d_eff can never reach n_components / qbar = 25 (rank 10): the regulariser used to
    # sink to the rounding noise of K and the draw covered as few as 2 of the 10 points
    X = _repeated()
    K = RBF(5.0)(X)
    lam_max = np.linalg.eigvalsh(K)[-1]
    for seed in range(2):
        ny = RLSNystroem(gamma=5.0, n_components=50, sampler=sampler, random_state=seed).fit(X)
        assert_array_equal(np.unique(ny.component_indices_ // 30), np.arange(10))
        assert len(np.unique(ny.component_indices_)) == 50
        assert ny.gamma_reg_ >= 1e-9 * lam_max  # never below the kernel's scale floor
        assert np.all(ny.leverage_scores_ <= 1.0)
        # every distinct point drawn with probability 1: Horvitz-Thompson weights sum to n
        assert ny.component_weights_.sum() == pytest.approx(300, rel=1e-12)
        F = ny.transform(X)
        assert_allclose(F @ F.T, K, atol=1e-8)


def test_falkon_rls_centers_on_repeated_points_match_exact_kernel_ridge():
    from sklearn.kernel_ridge import KernelRidge as SkKernelRidge

    X = _repeated()
    y = np.sin(X[:, 0]) + X[:, 1]
    test = np.random.default_rng(1).standard_normal((40, 2))
    exact = SkKernelRidge(kernel="rbf", gamma=5.0, alpha=1e-3).fit(X, y)
    for seed in range(3):
        f = kernelkit.FalkonRegressor(centers="rls", n_centers=50, gamma=5.0, alpha=1e-3,
                                      random_state=seed).fit(X, y)
        assert_array_equal(np.unique(f.center_indices_ // 30), np.arange(10))
        assert_allclose(f.predict(X), exact.predict(X), atol=1e-4)
        assert_allclose(f.predict(test), exact.predict(test), atol=1e-4)


@pytest.mark.parametrize("sampler", ["squeak", "ink", "exact"])
def test_nystroem_error_on_low_rank_smooth_data_near_uniform(sampler):
    # rbf with a small gamma on 1-D data: numerical rank ~10 for 40 requested columns
    x = np.sort(np.random.default_rng(0).uniform(-1, 1, (300, 1)), axis=0)
    K = RBF(0.5)(x)
    lam_max = np.linalg.eigvalsh(K)[-1]

    def err(sampler, seed):
        ny = RLSNystroem(gamma=0.5, n_components=40, sampler=sampler, random_state=seed).fit(x)
        F = ny.transform(x)
        return np.linalg.eigvalsh(K - F @ F.T)[[0, -1]], ny

    for seed in range(2):
        (_, uni), _ = err("uniform", seed)
        (lo, hi), ny = err(sampler, seed)
        assert ny.gamma_reg_ >= 1e-9 * lam_max
        assert lo >= -1e-9 * lam_max  # K~ <= K: a projection
        assert hi <= max(10 * uni, 1e-10 * lam_max)


def test_squeak_on_repeated_points_estimates_in_band():
    # with few copies a dictionary can lose every copy of a repeated point at once; the
    # estimates of those points were k(x, x) / gamma_reg (effective_dim_ ~ 1e4 for 10)
    X = _repeated()
    tau = ridge_leverage_scores(X, gamma=5.0, gamma_reg=0.1)
    for seed in range(3):
        sq = SQUEAK(gamma_reg=0.1, qbar=8, gamma=5.0, random_state=seed).fit(X)
        assert np.all(sq.leverage_scores_ <= 1.0)
        assert tau.sum() / (1 + EPS) <= sq.effective_dim_ <= tau.sum() / (1 - EPS)
        assert len(np.unique(sq.dictionary_indices_ // 30)) == 10
        default = SQUEAK(gamma_reg=0.1, gamma=5.0, random_state=seed).fit(X)
        assert tau.sum() / 2 <= default.effective_dim_ <= 2 * tau.sum()


# ------------------------------------------------------------------ memory guard
def test_dense_paths_refuse_matrices_far_over_the_budget(rng):
    calls = []

    def kernel(A, B):
        calls.append(1)
        return np.exp(-0.5 * ((A[:, None] - B[None]) ** 2).sum(-1))

    X = rng.standard_normal((300, 2))
    # 64 x 0.01 MiB holds a 289 x 289 float64 matrix, not 300 x 300
    with kernelkit.config_context(working_memory=0.01):
        for call in (lambda: ridge_leverage_scores(X, kernel=kernel),
                     lambda: effective_dimension(X, kernel=kernel),
                     lambda: RLSNystroem(kernel, sampler="exact", n_components=10).fit(X)):
            with pytest.raises(MemoryError, match="SQUEAK or INKEstimate"):
                call()
        assert not calls  # refused before any kernel evaluation
        small = X[:280]
        K = RBF(0.5)(small)
        dense = np.diag(K @ np.linalg.inv(K + np.eye(280)))
        assert_allclose(ridge_leverage_scores(small, kernel=kernel), dense, rtol=1e-9)
        assert effective_dimension(small, kernel=kernel) == pytest.approx(dense.sum(), rel=1e-9)


# ------------------------------------------------------------------ rejected calls
def _state(est):
    import copy

    return {k: copy.deepcopy(v) for k, v in vars(est).items()
            if k.endswith("_") or k.startswith("_")}


def _assert_state(est, before):
    after = _state(est)
    assert after.keys() == before.keys()
    for k, v in before.items():
        if isinstance(v, np.ndarray):
            assert_array_equal(after[k], v)
        elif k == "_dict":
            for f in ("idx", "p", "q", "G"):
                assert_array_equal(getattr(after[k], f), getattr(v, f))
        else:
            assert after[k] == v or (v != v and after[k] != after[k]), k


class _Failing:
    """A callable rbf kernel that raises from its ``k``-th call on (a failure midway)."""

    def __init__(self, k):
        self.k, self.calls = k, 0

    def __call__(self, A, B):
        self.calls += 1
        if self.calls >= self.k:
            raise RuntimeError("kernel failed midway")
        return np.exp(-0.1 * ((A[:, None] - B[None]) ** 2).sum(-1))


@pytest.mark.parametrize("make, k", [
    (lambda: SQUEAK(gamma_reg=GAMMA_REG, qbar=4, random_state=0), 3),
    (lambda: INKEstimate(gamma_reg=GAMMA_REG, qbar=4, random_state=0), 1),  # fit resets first
    (lambda: RLSNystroem(n_components=20, random_state=0), 3),
], ids=["SQUEAK", "INKEstimate", "RLSNystroem"])
def test_rejected_fit_leaves_the_model_as_it_was(bc, make, k):
    X = bc[0][:120]
    est = make().fit(X)
    before = _state(est)
    bad = X.copy()
    bad[5, 1] = np.nan
    rejections = [
        (dict(epsilon=1.5), X, "epsilon"),  # a bad parameter
        (dict(qbar=0), X, "qbar"),
        (dict(gamma_reg=-1.0), X, "gamma_reg"),
        (dict(epsilon=1.5), bad, "epsilon"),  # parameters are checked before data
        ({}, bad, "NaN"),  # bad data
        ({}, X[:1], "1 sample"),
        (dict(kernel=_Failing(k), qbar=7), X[:, :10], "midway"),  # a failure midway
    ]
    for params, data, match in rejections:
        est.set_params(**params)
        with pytest.raises((ValueError, RuntimeError), match=match):
            est.fit(data)
        est.set_params(**{k: make().get_params()[k] for k in params})
        _assert_state(est, before)
    assert_allclose(est.fit(X).leverage_scores_, before["leverage_scores_"])


def test_rejected_partial_fit_leaves_the_stream_as_it_was(bc):
    X = bc[0][:150]
    ink = INKEstimate(gamma_reg=GAMMA_REG, qbar=4, random_state=0).partial_fit(X[:60])
    before = _state(ink)
    bad = X[60:90].copy()
    bad[2, 0] = np.inf
    for params, data, match in [(dict(epsilon=0.0), X[60:90], "epsilon"),
                                (dict(epsilon=0.0), bad, "epsilon"),
                                ({}, bad, "infinity"),
                                ({}, X[60:90, :5], "features"),
                                (dict(kernel=_Failing(1)), X[60:90], "midway")]:
        ink.set_params(**params)
        with pytest.raises((ValueError, RuntimeError), match=match):
            ink.partial_fit(data)
        ink.set_params(epsilon=EPS, kernel="rbf")
        _assert_state(ink, before)
    # the stream goes on as if the rejected chunks never came
    ref = INKEstimate(gamma_reg=GAMMA_REG, qbar=4, random_state=0).fit(X[:90])
    ink.partial_fit(X[60:90])
    assert_array_equal(ink.dictionary_indices_, ref.dictionary_indices_)
    assert_allclose(ink.leverage_scores_, ref.leverage_scores_, rtol=1e-10)


# ------------------------------------------------------------------ dtypes and sparse
def test_big_endian_input_equals_native_and_sparse_is_refused(bc):
    import scipy.sparse as sp

    X = bc[0][:150]
    Xb = X.astype(">f8")
    K = RBF(0.1)(X)
    Kb = K.astype(">f8")
    assert_allclose(ridge_leverage_scores(Xb, gamma=0.1), ridge_leverage_scores(X, gamma=0.1),
                    rtol=1e-12)
    assert effective_dimension(Kb, kernel="precomputed") == pytest.approx(
        effective_dimension(K, kernel="precomputed"), rel=1e-12)
    for backend in ("numpy", "numba"):
        for make in (lambda: SQUEAK(gamma_reg=GAMMA_REG, gamma=0.1, random_state=0,
                                    backend=backend),
                     lambda: INKEstimate(gamma_reg=GAMMA_REG, gamma=0.1, random_state=0,
                                         backend=backend)):
            a, b = make().fit(X), make().fit(Xb)
            assert_array_equal(a.dictionary_indices_, b.dictionary_indices_)
            assert_allclose(a.leverage_scores_, b.leverage_scores_, rtol=1e-12)
            assert_allclose(a.estimate_leverage_scores(Xb), a.estimate_leverage_scores(X),
                            rtol=1e-12)
        a = RLSNystroem(gamma=0.1, n_components=30, random_state=0, backend=backend).fit(X)
        b = RLSNystroem(gamma=0.1, n_components=30, random_state=0, backend=backend).fit(Xb)
        assert_array_equal(a.component_indices_, b.component_indices_)
        assert_allclose(b.transform(Xb), a.transform(X), rtol=1e-10, atol=1e-12)
        p = RLSNystroem(kernel="precomputed", n_components=30, random_state=0).fit(Kb)
        assert_allclose(p.transform(Kb[:10]), p.transform(K[:10]), rtol=1e-12)
    S = sp.csr_matrix(X)
    for call in (lambda: ridge_leverage_scores(S), lambda: effective_dimension(S),
                 lambda: SQUEAK().fit(S), lambda: INKEstimate().fit(S),
                 lambda: RLSNystroem(n_components=10).fit(S)):
        with pytest.raises(TypeError, match="dense data is required"):
            call()


def test_ink_names_an_overflowing_batch_x():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 3))
    ink = INKEstimate(random_state=0).fit(X)
    batch = X[:10].copy()
    batch[3] = 1e200
    with pytest.raises(ValueError, match="^X has values too large"):
        ink.partial_fit(batch)


def test_ink_estimate_refuses_a_kernel_that_is_not_psd_and_warns_when_its_sketch_dies():
    """As SQUEAK: a kernel with negative k(x, x) is a ValueError (the sketch was silently
    empty, every score 0), and a dictionary that dies out (qbar too small) warns (the
    estimates are then k(x, x) / gamma_reg)."""
    from sklearn.metrics.pairwise import rbf_kernel

    X = np.random.default_rng(0).standard_normal((600, 3))
    with pytest.raises(ValueError, match="not positive semi-definite"):
        INKEstimate(gamma_reg=5.0, kernel=lambda a, b: -rbf_kernel(a, b)).fit(X)
    with pytest.warns(UserWarning, match="dictionary died out"):
        ink = INKEstimate(gamma_reg=5.0, qbar=1, random_state=0).fit(X)
    assert ink.dictionary_indices_.size == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        INKEstimate(gamma_reg=5.0, random_state=0).fit(X)


def test_effective_dimension_counts_no_rounding_and_checks_its_gamma_reg():
    """Two distinct points repeated 500 times: K has rank 2, and at gamma_reg 1e-13 the
    effective dimension is 2 (its eigenvalues' rounding, ~1e-13, counted 31); a boolean
    or string gamma_reg is refused as ridge_leverage_scores refuses it."""
    from kernelkit.leverage import effective_dimension

    X = np.repeat(np.random.default_rng(0).standard_normal((2, 3)), 500, axis=0)
    assert effective_dimension(X, gamma_reg=1e-13) == pytest.approx(2.0, abs=1e-9)
    Y = np.random.default_rng(1).standard_normal((300, 3))
    assert effective_dimension(Y, gamma_reg=1.0) == pytest.approx(
        ridge_leverage_scores(Y, gamma_reg=1.0).sum(), rel=1e-9)
    for bad in (True, ["1"], "1"):
        with pytest.raises(ValueError, match="gamma_reg"):
            effective_dimension(Y, gamma_reg=bad)


def test_ink_estimate_stream_may_start_with_one_row():
    """A stream fed one point at a time (the first batch of one row was refused) gives
    the scores and the sketch of fit on the whole stream."""
    X = np.random.default_rng(0).standard_normal((50, 3))
    whole = INKEstimate(gamma_reg=1.0, random_state=0).fit(X)
    stream = INKEstimate(gamma_reg=1.0, random_state=0)
    for i in range(len(X)):
        stream.partial_fit(X[i:i + 1])
    assert_allclose(stream.leverage_scores_, whole.leverage_scores_, rtol=1e-12)
    assert_array_equal(stream.dictionary_indices_, whole.dictionary_indices_)
    with pytest.raises(ValueError, match="minimum of 2"):
        INKEstimate(gamma_reg=1.0).fit(X[:1])  # fit keeps scikit-learn's two rows


@pytest.mark.parametrize("random_state", range(5))
def test_squeak_repairs_a_group_of_copies_it_lost(random_state):
    """Three points repeated 300 times each: the copies of one point share a direction,
    their RLS sum to at most 1, so estimates summing above 1 / (1 - eps) prove the
    dictionary lost the group (each copy's estimate alone, k(x, x) / gamma_reg = 1, stays
    below the per-point bound). The effective dimension was 47-285 against 2.95; now
    within SQUEAK's [d / (1 + eps), d / (1 - eps)] (eps 0.5, with a little slack)."""
    X = np.repeat(np.random.default_rng(0).standard_normal((3, 3)), 300, axis=0)
    exact = effective_dimension(X, gamma_reg=1.0)
    est = SQUEAK(gamma_reg=1.0, random_state=random_state).fit(X).effective_dim_
    assert exact / 1.6 <= est <= exact / 0.5


@pytest.mark.parametrize("stream", [False, True])
def test_ink_estimate_refuses_an_indefinite_kernel_with_a_positive_diagonal(stream):
    """k = 1 on a point, -0.9 between distinct points: every k(x, x) is positive (the
    diagonal check passes) but three points already make it indefinite; the factor of
    the sketch refuses it, in fit and, as its length passes a power of two, in a stream
    fed one row at a time."""
    def kernel(a, b):
        return np.where(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1) == 0, 1.0, -0.9)

    X = np.random.default_rng(0).standard_normal((200, 3))
    ink = INKEstimate(gamma_reg=1e-3, kernel=kernel, random_state=0)
    with pytest.raises(ValueError, match="not positive semi-definite"):
        if stream:
            for i in range(len(X)):
                ink.partial_fit(X[i:i + 1])
        else:
            ink.fit(X)
