"""Random feature maps against kernelkit's exact kernels, closed-form variances, and
scikit-learn's Ridge on the explicit features."""

import math
import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.linalg import hadamard
from sklearn.base import clone
from sklearn.gaussian_process.kernels import Matern as SkMatern
from sklearn.linear_model import Ridge
from sklearn.utils.estimator_checks import parametrize_with_checks

from test_calibration import _direct_slopes  # tests/ is on sys.path (rootdir)

import kernelkit
from kernelkit import (
    ArcCosineFeatures,
    NTKRandomFeatures,
    RandomFeaturesClassifier,
    RandomFeaturesRegressor,
    RandomFourierFeatures,
    TensorSketch,
)
from kernelkit.kernels import NNGP, NTK, RBF, Laplacian, Matern, Polynomial
from kernelkit.random_features import _loops
from kernelkit.utils._calibration import MIN_SIDE_ROWS, fit_temperature

_ODD = "n_components=1 is odd: the paired sin/cos map rejects it by design"
_LOO = ("predict_proba is calibrated on leave-one-out values: leaving out one copy of a "
        "duplicated row is not leaving out a row of weight 2")


def _rows(n=12, d=6, scale=0.6, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d)) * scale


def _err(Z, K):
    return float(np.sqrt(np.mean((Z @ Z.T - K) ** 2)))


# ---------------------------------------------------------------- sklearn compatibility

@parametrize_with_checks(
    [RandomFourierFeatures(), RandomFourierFeatures(7, variant="random_phase"),
     RandomFourierFeatures(8, kernel="matern", sampling="orthogonal", variant="random_phase"),
     RandomFourierFeatures(6, sampling="structured", variant="random_phase"),
     TensorSketch(), ArcCosineFeatures(b_std=0.1), NTKRandomFeatures(depth=2, b_std=0.1),
     RandomFeaturesRegressor(),
     RandomFeaturesClassifier(RandomFourierFeatures(gamma=1e-3))],
    expected_failed_checks=lambda est: (
        {c: _ODD for c in ("check_dont_overwrite_parameters", "check_fit2d_predict1d",
                           "check_methods_sample_order_invariance", "check_fit2d_1feature",
                           "check_methods_subset_invariance", "check_fit2d_1sample")}
        if isinstance(est, RandomFourierFeatures) and est.variant == "sincos" else
        {c: _LOO for c in ("check_sample_weight_equivalence_on_dense_data",
                           "check_sample_weight_equivalence_on_sparse_data")}
        if isinstance(est, RandomFeaturesClassifier) else {}))
def test_sklearn_compatible(estimator, check):
    check(estimator)


# ---------------------------------------------------------------- Fourier features

_STATIONARY = [("rbf", {}, RBF), ("laplacian", {}, Laplacian),
               ("matern", {"nu": 0.5}, Matern), ("matern", {"nu": 1.5}, Matern),
               ("matern", {"nu": 2.5}, Matern)]


@pytest.mark.parametrize("kernel,kw,exact", _STATIONARY)
@pytest.mark.parametrize("sampling", ["iid", "orthogonal", "structured"])
@pytest.mark.parametrize("variant", ["sincos", "random_phase"])
def test_fourier_error_falls_like_inverse_sqrt_D(kernel, kw, exact, sampling, variant):
    if kernel == "laplacian" and sampling != "iid":
        pytest.skip("the Laplacian's density is not radial (rejected: see test_bad_input)")
    X = _rows(n=10, d=8)
    K = exact(gamma=0.2, **kw)(X)
    errs = []
    for D in (64, 1024):
        errs.append(np.mean([_err(RandomFourierFeatures(
            D, kernel=kernel, gamma=0.2, sampling=sampling, variant=variant, random_state=s,
            **kw).fit_transform(X), K) for s in range(6)]))
    # 16 times the features: a quarter of the error (within sampling noise)
    assert 2.5 < errs[0] / errs[1] < 6.5, errs
    assert errs[1] < 0.06


def test_matern_any_nu_matches_scikit_learn():
    X = _rows(n=8, d=4)
    gamma, nu = 0.3, 3.5
    K = SkMatern(length_scale=1 / math.sqrt(2 * gamma), nu=nu)(X)
    Z = RandomFourierFeatures(40000, kernel="matern", gamma=gamma, nu=nu,
                              random_state=0).fit_transform(X)
    assert np.abs(Z @ Z.T - K).max() < 0.03
    # nu = inf is the RBF
    Z = RandomFourierFeatures(40000, kernel="matern", gamma=gamma, nu=np.inf,
                              random_state=0).fit_transform(X)
    assert np.abs(Z @ Z.T - RBF(gamma=gamma)(X)).max() < 0.03


def test_kernel_object_supplies_its_parameters():
    X = _rows()
    a = RandomFourierFeatures(64, kernel=Matern(gamma=0.7, nu=2.5), random_state=3)
    b = RandomFourierFeatures(64, kernel="matern", gamma=0.7, nu=2.5, random_state=3)
    np.testing.assert_array_equal(a.fit_transform(X), b.fit_transform(X))


def _pair(delta, d=16):
    x = np.zeros(d)
    y = np.zeros(d)
    y[0] = delta
    return np.vstack([x, y])


@pytest.mark.parametrize("variant", ["sincos", "random_phase"])
def test_variance_matches_sutherland_schneider(variant):
    gamma, delta, D, seeds = 0.5, 1.1, 2, 1500
    k = lambda r: math.exp(-gamma * r * r)  # noqa: E731
    P = _pair(delta, d=3)
    est = np.array([(lambda Z: Z[0] @ Z[1])(RandomFourierFeatures(
        D, gamma=gamma, variant=variant, random_state=s).fit_transform(P))
        for s in range(seeds)])
    if variant == "sincos":
        var = (1 + k(2 * delta) - 2 * k(delta) ** 2) / D
    else:
        var = (1 + k(2 * delta) / 2 - k(delta) ** 2) / D
    dev = est - est.mean()
    se = math.sqrt((np.mean(dev**4) - np.var(est) ** 2) / seeds)  # of the sample variance
    assert abs(np.var(est) - var) < 4 * se
    assert abs(est.mean() - k(delta)) < 4 * math.sqrt(var / seeds)


def test_sincos_variance_below_random_phase_for_the_rbf():
    k = lambda r: math.exp(-r * r)  # noqa: E731
    for delta in np.linspace(0.1, 3, 30):  # the closed forms' difference: k(2d)/2 < k(d)^2
        assert (1 + k(2 * delta) - 2 * k(delta) ** 2) / 2 < 1 + k(2 * delta) / 2 - k(delta) ** 2


def test_orthogonal_variance_below_iid():
    d, gamma, seeds = 16, 0.5, 400
    k = lambda r: math.exp(-gamma * r * r)  # noqa: E731
    for delta in (0.5, 1.0, 1.5, 2.0):  # the gain shrinks with the distance (Yu et al.)
        P = _pair(delta, d)
        est = np.array([(lambda Z: Z[0] @ Z[1])(RandomFourierFeatures(
            2 * d, gamma=gamma, sampling="orthogonal", random_state=s).fit_transform(P))
            for s in range(seeds)])
        iid = (1 + k(2 * delta) - 2 * k(delta) ** 2) / (2 * d)
        se = iid * math.sqrt(2 / seeds)  # sampling error of a variance near iid's
        assert np.var(est) < iid - 3 * se, (delta, np.var(est), iid)
        # ORF stays unbiased: each frequency is still exactly Gaussian
        assert abs(est.mean() - k(delta)) < 4 * math.sqrt(iid / seeds)


def test_orthogonal_blocks_are_orthogonal_with_chi_norms():
    rff = RandomFourierFeatures(2 * 24, gamma=0.5, sampling="orthogonal",
                                random_state=0).fit(np.zeros((2, 8)))
    W = rff.random_weights_  # 24 frequencies: three blocks of 8
    for b in range(3):
        U = W[:, 8 * b:8 * (b + 1)] / np.linalg.norm(W[:, 8 * b:8 * (b + 1)], axis=0)
        np.testing.assert_allclose(U.T @ U, np.eye(8), atol=1e-12)


@pytest.mark.parametrize("d", [1, 5, 8, 13])
def test_structured_map_is_the_hadamard_product(d):
    X = _rows(n=5, d=d)
    rff = RandomFourierFeatures(2 * 20, gamma=0.3, sampling="structured",
                                backend="numpy", random_state=1).fit(X)
    n_blocks, _, pad = rff.signs_.shape
    H = hadamard(pad) / math.sqrt(pad)
    Xp = np.hstack([X, np.zeros((5, pad - d))])
    blocks = [H @ np.diag(s[0]) @ H @ np.diag(s[1]) @ H @ np.diag(s[2]) for s in rff.signs_]
    W = np.vstack(blocks)[:20] * rff.radii_[:, None]
    proj = Xp @ W.T
    expected = np.hstack([np.cos(proj), np.sin(proj)]) / math.sqrt(20)
    np.testing.assert_allclose(rff.transform(X), expected, atol=1e-12)


def test_fwht_twins_agree_with_the_hadamard_matrix():
    pytest.importorskip("numba")
    from kernelkit.random_features import _loops_numba

    A = np.random.default_rng(0).normal(size=(7, 32))
    expected = A @ hadamard(32)
    np.testing.assert_allclose(_loops.fwht(A.copy()), expected, atol=1e-12)
    np.testing.assert_allclose(_loops_numba.fwht(A.copy()), expected, atol=1e-12)
    X = _rows(d=13)
    a = RandomFourierFeatures(40, sampling="structured", backend="numba", random_state=0)
    b = RandomFourierFeatures(40, sampling="structured", backend="numpy", random_state=0)
    np.testing.assert_allclose(a.fit_transform(X), b.fit_transform(X), atol=1e-12)


@pytest.mark.parametrize("variant", ["sincos", "random_phase"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fused_structured_map_equals_the_reference(variant, dtype):
    """The compiled SORF map (fused transforms + own sin/cos) equals the NumPy path."""
    pytest.importorskip("numba")
    from kernelkit.random_features import _loops_numba

    X = _rows(n=40, d=27, scale=3.0).astype(dtype)
    kw = dict(gamma=2.0, variant=variant, sampling="structured", random_state=3)
    a = RandomFourierFeatures(130, backend="numba", **kw).fit(X)
    b = RandomFourierFeatures(130, backend="numpy", **kw).fit(X)
    Za, Zb = a.transform(X), b.transform(X)
    assert Za.dtype == Zb.dtype == dtype
    np.testing.assert_allclose(Za, Zb, rtol=0, atol=1e-14 if dtype == np.float64 else 1e-7)
    # huge projections (far beyond the three-part reduction) fall back to libm
    Xbig = X[:3].astype(np.float64) * 1e7
    offset = getattr(b, "random_offset_", np.empty(0))
    out_a = np.empty((3, b.n_features_out_))
    out_b = np.empty((3, b.n_features_out_))
    _loops_numba.sorf_features(Xbig, b.signs_, b.radii_, offset, out_a)
    _loops.sorf_features(Xbig, b.signs_, b.radii_, offset, out_b)
    np.testing.assert_allclose(out_a, out_b, rtol=0, atol=1e-12)


def test_compiled_sincos_matches_libm():
    pytest.importorskip("numba")
    import numba as nb

    from kernelkit.random_features._loops_numba import _sincos

    @nb.njit
    def both(x):
        s, c = np.empty_like(x), np.empty_like(x)
        for i in range(x.shape[0]):
            s[i], c[i] = _sincos(x[i])
        return s, c

    x = np.concatenate([np.linspace(-20, 20, 10_001), np.array([0.0, np.pi / 4, np.pi / 2,
                        -np.pi, 3 * np.pi / 4, 1e3 + 0.5, -5e5 - 0.25, 9.9e5])])
    s, c = both(x)
    tol = 4e-16 * np.maximum(1.0, np.abs(x))  # the reduction's rounding grows with |x|
    assert np.all(np.abs(s - np.sin(x)) <= tol)
    assert np.all(np.abs(c - np.cos(x)) <= tol)


# ---------------------------------------------------------------- network features

@pytest.mark.parametrize("depth", [1, 2])
@pytest.mark.parametrize("activation", ["relu", "erf"])
@pytest.mark.parametrize("b_std", [None, 0.4])
@pytest.mark.parametrize("cls,exact", [(ArcCosineFeatures, NNGP), (NTKRandomFeatures, NTK)])
def test_network_features_converge(cls, exact, depth, activation, b_std):
    X = _rows(n=8, d=5, scale=1.0)
    kw = dict(depth=depth, activation=activation, w_std=1.3, b_std=b_std)
    K = exact(**kw)(X)
    errs = [np.mean([_err(cls(m, random_state=s, **kw).fit_transform(X), K)
                     for s in range(4)]) / np.abs(K).max() for m in (64, 1024)]
    assert 2.3 < errs[0] / errs[1] < 7, errs
    assert errs[1] < 0.05


def test_one_layer_network_features_are_unbiased():
    X = _rows(n=4, d=3, scale=1.0)
    kw = dict(depth=1, w_std=0.9, b_std=0.5)
    for cls, exact in ((ArcCosineFeatures, NNGP), (NTKRandomFeatures, NTK)):
        G = np.array([(lambda Z: Z @ Z.T)(cls(8, random_state=s, **kw).fit_transform(X))
                      for s in range(1500)])
        se = G.std(axis=0) / math.sqrt(len(G))
        assert np.all(np.abs(G.mean(axis=0) - exact(**kw)(X)) < 4.5 * se + 1e-12)


def test_network_output_layout():
    X = _rows(d=4)
    assert ArcCosineFeatures(10).fit_transform(X).shape == (12, 10)
    assert ArcCosineFeatures(10, b_std=0.2).fit_transform(X).shape == (12, 11)
    assert NTKRandomFeatures(10, n_sketch=7, b_std=0.2).fit_transform(X).shape == (12, 18)


# ---------------------------------------------------------------- TensorSketch

@pytest.mark.parametrize("degree,coef0", [(1, 0.0), (2, 1.0), (3, 0.5)])
def test_tensorsketch_is_unbiased(degree, coef0):
    X = _rows(n=5, d=4, scale=1.0)
    K = Polynomial(gamma=0.4, degree=degree, coef0=coef0)(X)
    G = np.array([(lambda Z: Z @ Z.T)(TensorSketch(16, degree=degree, gamma=0.4, coef0=coef0,
                                                   random_state=s).fit_transform(X))
                  for s in range(1500)])
    se = G.std(axis=0) / math.sqrt(len(G))
    assert np.all(np.abs(G.mean(axis=0) - K) < 4.5 * se + 1e-12)


def test_tensorsketch_error_falls_like_inverse_sqrt_D():
    # D below the tensor's dimension (31^2): beyond it collisions vanish faster than 1/D
    X = _rows(n=10, d=30, scale=1.0)
    K = Polynomial(gamma=1 / 30, degree=2, coef0=1)(X)
    errs = [np.mean([_err(TensorSketch(D, degree=2, random_state=s).fit_transform(X), K)
                     for s in range(12)]) for D in (64, 1024)]
    assert 2.5 < errs[0] / errs[1] < 6.5, errs


# ---------------------------------------------------------------- common transformer API

_MAPS = [RandomFourierFeatures(32, random_state=0),
         RandomFourierFeatures(33, variant="random_phase", random_state=0),
         RandomFourierFeatures(32, sampling="structured", random_state=0),
         TensorSketch(32, degree=2, random_state=0),
         ArcCosineFeatures(16, depth=2, b_std=0.3, random_state=0),
         NTKRandomFeatures(16, depth=2, b_std=0.3, random_state=0)]


@pytest.mark.parametrize("fmap", _MAPS, ids=lambda m: type(m).__name__)
def test_dtype_sparse_blocks_names(fmap):
    X = _rows(n=30, d=5)
    Z = clone(fmap).fit_transform(X)
    Z32 = clone(fmap).fit(X).transform(X.astype(np.float32))
    assert Z32.dtype == np.float32
    np.testing.assert_allclose(Z32, Z, atol=1e-5)
    np.testing.assert_allclose(clone(fmap).fit(X).transform(sp.csr_matrix(X)), Z, atol=1e-12)
    with kernelkit.config_context(working_memory=1e-4):  # one row per block
        np.testing.assert_allclose(clone(fmap).fit(X).transform(X), Z, rtol=1e-12, atol=1e-14)
    fitted = clone(fmap).fit(X)
    names = fitted.get_feature_names_out()
    assert len(names) == Z.shape[1] and names[0] == type(fmap).__name__.lower() + "0"
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(fitted)).transform(X), Z)
    pd = pytest.importorskip("pandas")
    out = clone(fmap).set_output(transform="pandas").fit_transform(pd.DataFrame(X))
    assert list(out.columns) == list(names)


def test_random_state_as_scikit_learn():
    X = _rows()
    a = RandomFourierFeatures(16, random_state=5).fit_transform(X)
    np.testing.assert_array_equal(a, RandomFourierFeatures(16, random_state=5).fit_transform(X))
    rs = np.random.RandomState(5)
    b = RandomFourierFeatures(16, random_state=rs).fit_transform(X)
    c = RandomFourierFeatures(16, random_state=rs).fit_transform(X)
    assert not np.array_equal(b, c)  # a RandomState instance advances


def test_input_is_not_modified():
    X = _rows()
    X0 = X.copy()
    for fmap in _MAPS:
        clone(fmap).fit(X).transform(X)
    np.testing.assert_array_equal(X, X0)


# ---------------------------------------------------------------- ridge on features

def test_regressor_equals_sklearn_ridge_on_the_features():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    Y = np.column_stack([np.sin(X[:, 0]), X[:, 1] ** 2])
    w = rng.uniform(0.1, 3.0, 60)
    fmap = RandomFourierFeatures(40, gamma=0.3, random_state=2)
    with kernelkit.config_context(working_memory=0.005):  # several row blocks
        model = RandomFeaturesRegressor(fmap, alpha=0.1).fit(X, Y, sample_weight=w)
    Z = clone(fmap).fit(X).transform(X)
    ref = Ridge(alpha=0.1, fit_intercept=False, solver="cholesky").fit(Z, Y, sample_weight=w)
    np.testing.assert_allclose(model.coef_, ref.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(model.predict(X), ref.predict(Z), rtol=1e-8, atol=1e-10)
    one = RandomFeaturesRegressor(fmap, alpha=0.1).fit(X, Y[:, 0])
    ref1 = Ridge(alpha=0.1, fit_intercept=False).fit(Z, Y[:, 0])
    assert one.coef_.shape == (40,)
    np.testing.assert_allclose(one.coef_, ref1.coef_, rtol=1e-8, atol=1e-10)


def test_partial_fit_equals_fit():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(50, 3))
    y = np.cos(X).sum(axis=1)
    w = rng.uniform(0.5, 2, 50)
    fmap = ArcCosineFeatures(30, b_std=0.2, random_state=0)
    full = RandomFeaturesRegressor(fmap, alpha=0.3).fit(X, y, sample_weight=w)
    stream = RandomFeaturesRegressor(fmap, alpha=0.3)
    for a, b in ((0, 7), (7, 30), (30, 50)):
        stream.partial_fit(X[a:b], y[a:b], sample_weight=w[a:b])
    np.testing.assert_allclose(stream.coef_, full.coef_, rtol=1e-9, atol=1e-12)


def test_regressor_random_state_reaches_the_map():
    X = _rows()
    y = X[:, 0]
    a = RandomFeaturesRegressor(random_state=3).fit(X, y)
    assert a.features_.random_state == 3
    np.testing.assert_array_equal(a.predict(X), RandomFeaturesRegressor(random_state=3)
                                  .fit(X, y).predict(X))


def _brute_loo(Z, Y, w, alpha):
    out = np.empty_like(Y)
    for i in range(len(Y)):
        keep = np.arange(len(Y)) != i
        ref = Ridge(alpha=alpha, fit_intercept=False).fit(Z[keep], Y[keep],
                                                          sample_weight=w[keep])
        out[i] = ref.predict(Z[i:i + 1])
    return out


@pytest.mark.parametrize("n_classes", [2, 3])
def test_classifier_loo_calibration_matches_explicit_refits(n_classes):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 3))
    y = np.digitize(X[:, 0] + 0.5 * rng.normal(size=40), [-0.3, 0.3][: n_classes - 1])
    w = rng.uniform(0.5, 2, 40)
    fmap = RandomFourierFeatures(20, gamma=0.4, random_state=0)
    clf = RandomFeaturesClassifier(fmap, alpha=0.5).fit(X, y, sample_weight=w)
    Z = clone(fmap).fit(X).transform(X)
    Y = np.where(y[:, None] == np.unique(y)[None, :], 1.0, -1.0)
    Y = Y[:, 1:] if n_classes == 2 else Y
    ref = Ridge(alpha=0.5, fit_intercept=False).fit(Z, Y, sample_weight=w)
    np.testing.assert_allclose(clf.coef_, ref.coef_.reshape(clf.coef_.shape), rtol=1e-8)
    loo = _brute_loo(Z, Y, w, 0.5)
    beta = fit_temperature(loo[:, 0] if n_classes == 2 else loo, y, w)
    assert clf.calibration_temperature_ == pytest.approx(beta, rel=1e-6)
    if n_classes == 2:  # one slope per side of the threshold, on the same values
        d = loo[:, 0]
        assert min(np.sum(d < 0), np.sum(d > 0)) >= MIN_SIDE_ROWS
        np.testing.assert_allclose(clf.calibration_slopes_, _direct_slopes(d, y, w),
                                   rtol=1e-6)
    else:
        assert clf.calibration_slopes_ is None
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(clf.classes_[proba.argmax(axis=1)], clf.predict(X))


def test_classifier_partial_fit_coefficients_equal_fit():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(45, 3))
    y = np.array(["a", "b", "c"])[np.digitize(X[:, 1], [-0.4, 0.4])]
    fmap = RandomFourierFeatures(24, random_state=1)
    full = RandomFeaturesClassifier(fmap, alpha=0.2, class_weight={"a": 2.0}).fit(X, y)
    stream = RandomFeaturesClassifier(fmap, alpha=0.2, class_weight={"a": 2.0})
    for a, b in ((0, 15), (15, 45)):
        stream.partial_fit(X[a:b], y[a:b], classes=["a", "b", "c"])
    np.testing.assert_allclose(stream.coef_, full.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(stream.predict(X), full.predict(X))
    assert stream.calibration_temperature_ > 0


# ---------------------------------------------------------------- bad input, rejected calls

@pytest.mark.parametrize("est,match", [
    (RandomFourierFeatures(0), "n_components"),
    (RandomFourierFeatures(5), "n_components must be even"),
    (RandomFourierFeatures(kernel="polynomial"), "kernel='polynomial'"),
    (RandomFourierFeatures(kernel="nope"), "kernel must be"),
    (RandomFourierFeatures(kernel="matern", nu=0), "nu must be"),
    (RandomFourierFeatures(kernel="matern", nu="1.5"), "nu must be"),
    (RandomFourierFeatures(gamma=-1), "gamma"),
    (RandomFourierFeatures(kernel="laplacian", sampling="orthogonal"), "sampling='orthogonal'"),
    (RandomFourierFeatures(sampling="fast"), "sampling must be"),
    (RandomFourierFeatures(variant="cos"), "variant must be"),
    (RandomFourierFeatures(backend="gpu"), "backend"),
    (TensorSketch(degree=0), "degree"),
    (TensorSketch(degree=2.5), "degree"),
    (TensorSketch(coef0=-1), "coef0"),
    (ArcCosineFeatures(depth=0), "depth"),
    (ArcCosineFeatures(activation="tanh"), "activation"),
    (NTKRandomFeatures(w_std=0), "w_std"),
    (NTKRandomFeatures(n_sketch=0), "n_sketch"),
])
def test_bad_parameters_name_the_argument(est, match):
    with pytest.raises(ValueError, match=match):
        est.fit(_rows())


@pytest.mark.parametrize("fmap", _MAPS, ids=lambda m: type(m).__name__)
def test_unseen_feature_count_at_transform(fmap):
    est = clone(fmap).fit(_rows(d=5))
    with pytest.raises(ValueError, match="X has 4 features"):
        est.transform(_rows(d=4))


def test_rejected_fit_leaves_the_model_unchanged():
    X = _rows()
    est = RandomFourierFeatures(16, random_state=0).fit(X)
    before = est.transform(X)
    est.set_params(n_components=3)
    with pytest.raises(ValueError, match="n_components"):
        est.fit(X)
    est.set_params(n_components=16)  # the parameters are the user's; the fit is untouched
    np.testing.assert_array_equal(est.transform(X), before)
    reg = RandomFeaturesRegressor(alpha=1.0, random_state=0).partial_fit(X, X[:, 0])
    coef = reg.coef_.copy()
    with pytest.raises(ValueError, match="features"):
        reg.partial_fit(X[:, :3], X[:, 0])
    with pytest.raises(ValueError):
        reg.partial_fit(X, np.column_stack([X[:, 0], X[:, 1]]))
    with pytest.raises(ValueError, match="sample_weight"):
        reg.partial_fit(X, X[:, 0], sample_weight=-np.ones(len(X)))
    np.testing.assert_array_equal(reg.coef_, coef)
    reg.partial_fit(X, X[:, 0])  # still usable, as if the bad chunks never came
    ref = RandomFeaturesRegressor(alpha=1.0, random_state=0).fit(np.vstack([X, X]),
                                                                 np.r_[X[:, 0], X[:, 0]])
    np.testing.assert_allclose(reg.coef_, ref.coef_, rtol=1e-10)


def test_ridge_bad_input():
    X = _rows()
    y = X[:, 0]
    with pytest.raises(ValueError, match="alpha"):
        RandomFeaturesRegressor(alpha=-1).fit(X, y)
    with pytest.raises(TypeError, match="features"):
        RandomFeaturesRegressor(features="rbf").fit(X, y)
    with pytest.raises(ValueError, match="classes"):
        RandomFeaturesClassifier().partial_fit(X, y > 0)
    clf = RandomFeaturesClassifier().partial_fit(X, y > 0, classes=[False, True])
    with pytest.raises(ValueError, match="not in classes"):
        clf.partial_fit(X, np.where(y > 0, 2, 3))
    with pytest.raises(ValueError, match="balanced"):
        RandomFeaturesClassifier(class_weight="balanced").partial_fit(X, y > 0,
                                                                      classes=[False, True])


# ---------------------------------------------------------- Gram factored in place

@pytest.mark.parametrize("D", [5, 700])  # 700: more than one column block of the passes
def test_gram_factored_in_place_solves_and_restores(D):
    from kernelkit.random_features import _gram

    rng = np.random.default_rng(0)
    Z = rng.normal(size=(D + 30, D)) * rng.uniform(0.1, 10.0, D)  # unequal diagonal
    w = rng.uniform(0.0, 3.0, D + 30)
    G = _gram.new_gram(D)
    _gram.add_rows(G, Z[:20], w[:20])
    _gram.add_rows(G, Z[20:], w[20:])
    _gram.symmetrize(G)
    exact = Z.T @ (w[:, None] * Z)
    np.testing.assert_allclose(G, exact, rtol=1e-12, atol=1e-10 * np.abs(exact).max())
    kept = G.copy()
    B = rng.normal(size=(D, 3))
    A = exact + 0.7 * np.eye(D)
    with _gram.factored(G, 0.7) as f:
        assert isinstance(f, _gram._Cholesky)
        C = f.solve(B)
        q = f.quad(Z[:9])
    np.testing.assert_array_equal(G, kept)  # rebuilt exactly from the untouched triangle
    np.testing.assert_allclose(C, np.linalg.solve(A, B), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(q, np.einsum("ij,ij->i", Z[:9] @ np.linalg.inv(A), Z[:9]),
                               rtol=1e-8)


@pytest.mark.parametrize("G", [np.diag([4.0, 1.0, -3.0]) + 0.1,  # negative diagonal
                               np.array([[1.0, 3.0, 0.0], [3.0, 1.0, 0.0], [0.0, 0.0, 2.0]])])
def test_gram_factored_falls_back_on_an_indefinite_matrix_and_restores_it(G):
    from scipy.linalg import LinAlgWarning

    from kernelkit.random_features import _gram

    G = np.asfortranarray(G)  # the second one fails in the Cholesky factorization itself
    kept = G.copy()
    B = np.array([[1.0], [2.0], [3.0]])
    with pytest.warns(LinAlgWarning), _gram.factored(G, 0.5) as f:
        assert isinstance(f, _gram._Fallback)
        C = f.solve(B)
        q = f.quad(np.eye(3))
    np.testing.assert_array_equal(G, kept)
    np.testing.assert_allclose(C, np.linalg.solve(kept + 0.5 * np.eye(3), B), rtol=1e-10,
                               atol=1e-12)
    np.testing.assert_allclose(q, np.diag(np.linalg.inv(kept + 0.5 * np.eye(3))), rtol=1e-10,
                               atol=1e-12)


def test_foreign_transformer_blocks_are_copied_not_overwritten():
    """An identity transformer hands back views of X: the in-place fit must not touch X."""
    from sklearn.preprocessing import FunctionTransformer

    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(60, 4)), rng.integers(0, 3, 60)
    X0 = X.copy()
    w = rng.uniform(0.5, 2.0, 60)
    clf = RandomFeaturesClassifier(FunctionTransformer(), alpha=0.3).fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(X, X0)
    Y = np.where(y[:, None] == np.arange(3), 1.0, -1.0)
    ref = Ridge(alpha=0.3, fit_intercept=False).fit(X0, Y, sample_weight=w)
    np.testing.assert_allclose(clf.coef_, ref.coef_, rtol=1e-9, atol=1e-12)


def test_classifier_without_calibration_skips_it_and_has_no_proba():
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((120, 4)), rng.integers(0, 3, 120)
    feats = RandomFourierFeatures(64, gamma=0.5, random_state=0)
    on = RandomFeaturesClassifier(feats, alpha=0.1).fit(X, y)
    off = RandomFeaturesClassifier(feats, alpha=0.1, calibration=None).fit(X, y)
    np.testing.assert_allclose(off.decision_function(X), on.decision_function(X), rtol=1e-12)
    assert off.calibration_temperature_ is None and not hasattr(off, "predict_proba")
    assert not hasattr(off, "predict_log_proba")
    # partial_fit without calibration, then switched on: calibrates on the new chunk
    stream = RandomFeaturesClassifier(feats, alpha=0.1, calibration=None)
    stream.partial_fit(X[:60], y[:60], classes=[0, 1, 2])
    stream.set_params(calibration="auto").partial_fit(X[60:], y[60:])
    assert stream.calibration_temperature_ > 0 and stream.predict_proba(X).shape == (120, 3)
    with pytest.raises(ValueError, match="calibration"):
        RandomFeaturesClassifier(feats, calibration="platt").fit(X, y)
    # refused on a fitted model (fit and partial_fit): the model is left as it was
    proba = on.predict_proba(X)
    for call in (lambda m: m.fit(X, y), lambda m: m.partial_fit(X, y)):
        with pytest.raises(ValueError, match="calibration"):
            call(on.set_params(calibration="platt"))
        on.set_params(calibration="auto")
        np.testing.assert_array_equal(on.predict_proba(X), proba)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's overflow inside the map
def test_overflowing_features_raise_and_fit_transform_rolls_back():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((100, 3))
    ts = TensorSketch(random_state=0).fit(X)
    Z = ts.transform(X)
    Xq = X[:5].copy()
    Xq[2] *= 1e105  # the sketch's degree-3 products overflow float64
    with pytest.raises(ValueError, match="TensorSketch: X has values too large"):
        ts.transform(Xq)
    state = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in vars(ts).items()}
    with pytest.raises(ValueError, match="too large"):
        ts.set_params(random_state=1).fit_transform(X * 1e110)
    ts.set_params(random_state=0)
    assert vars(ts).keys() == state.keys()
    for k, v in state.items():
        np.testing.assert_array_equal(vars(ts)[k], v)
    np.testing.assert_array_equal(ts.transform(X), Z)


def test_classifier_probabilities_follow_the_shared_rules():
    """As every calibrated classifier: a model fitted with calibration=None and switched
    on by set_params has no calibration yet (NotFittedError, not a TypeError), and
    predict_log_proba is log(predict_proba) (-inf where a probability underflows)."""
    from sklearn.exceptions import NotFittedError
    from sklearn.preprocessing import FunctionTransformer

    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((120, 4)), rng.integers(0, 3, 120)
    off = RandomFeaturesClassifier(FunctionTransformer(), calibration=None).fit(X, y)
    with pytest.raises(NotFittedError, match="calibration=None"):
        off.set_params(calibration="auto").predict_proba(X)
    linear = RandomFeaturesClassifier(FunctionTransformer()).fit(X, y)
    P, L = linear.predict_proba(1e4 * X), linear.predict_log_proba(1e4 * X)  # far out
    assert np.any(P == 0)  # some probabilities underflow
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(L, np.log(P))


def test_classifier_partial_fit_refuses_other_classes_and_keeps_the_model():
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((120, 4)), rng.integers(0, 3, 120)
    feats = RandomFourierFeatures(64, gamma=0.5, random_state=0)
    stream = RandomFeaturesClassifier(feats).partial_fit(X[:60], y[:60], classes=[0, 1, 2])
    before = stream.decision_function(X)
    with pytest.raises(ValueError, match=r"classes \[0, 1, 7\] are not the classes"):
        stream.partial_fit(X[60:], y[60:], classes=[0, 1, 7])
    np.testing.assert_array_equal(stream.decision_function(X), before)
    stream.partial_fit(X[60:], y[60:], classes=[2, 0, 1])  # the same labels, any order
    np.testing.assert_allclose(stream.decision_function(X),
                               RandomFeaturesClassifier(feats).fit(X, y).decision_function(X),
                               rtol=1e-9, atol=1e-12)
