"""Convolutional NNGP / NTK (kernelkit.kernels.ConvNNGP, ConvNTK).

Values against neural-tangents 0.6.5 (stored by tests/data/make_conv_reference.py),
the fully connected kernels (filter size 1), the NumPy reference against the Numba
engine, tiled against untiled, the estimators against dense solves and scikit-learn's
GaussianProcessRegressor, and bad input.
"""

import json
import pickle
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import WhiteKernel
from sklearn.model_selection import GridSearchCV

import kernelkit
from kernelkit import KernelRidge
from kernelkit.kernels import NNGP, NTK, ConvNNGP, ConvNTK, KernelOperator, myrtle_layers
from kernelkit.kernels import _conv_numba, _conv_numpy

REF = Path(__file__).parent / "data" / "conv_reference.npz"
with np.load(REF) as _ref:
    ARCHS = json.loads(str(_ref["archs"]))
LARGE = {"myrtle5_28", "myrtle5_32nt"}  # 28x28 / 32x32 images: one to two seconds each


@pytest.fixture(params=["numpy", "numba"])
def engine(request):
    with kernelkit.config_context(backend=request.param):
        yield request.param


def _kernel(cls, arch, **kw):
    layers = arch["layers"]
    if not isinstance(layers, str):
        layers = [layer if isinstance(layer, str) else tuple(layer) for layer in layers]
    return cls(layers=layers, w_std=arch["w_std"], b_std=arch["b_std"], **kw)


def _images(rng, n, shape=(6, 6, 2)):
    return rng.standard_normal((n,) + shape)


@pytest.mark.parametrize("name", sorted(set(ARCHS) - LARGE))
@pytest.mark.parametrize("cls, key", [(ConvNTK, "ntk"), (ConvNNGP, "nngp")])
def test_equal_neural_tangents(name, cls, key, engine):
    """neural-tangents' stax (Conv + Relu / Erf, Flatten / GlobalAvgPool, AvgPool,
    Myrtle on 8x8) in the NTK parameterization; images include a zero image, a
    multiple of another and a near-duplicate."""
    _check_reference(name, cls, key)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(LARGE))
@pytest.mark.parametrize("cls, key", [(ConvNTK, "ntk"), (ConvNNGP, "nngp")])
def test_equal_neural_tangents_large(name, cls, key, engine):
    """Myrtle-5 on 28x28 and neural-tangents' own Myrtle-5 (three pools and a flatten
    at the end) on 32x32."""
    _check_reference(name, cls, key)


def _check_reference(name, cls, key):
    arch = ARCHS[name]
    with np.load(REF) as ref:
        X, Y = ref[f"X_{arch['images']}"], ref[f"Y_{arch['images']}"]
        xy, xx = ref[f"{key}_xy_{name}"], ref[f"{key}_xx_{name}"]
    k = _kernel(cls, arch)
    assert_allclose(k(X, Y), xy, rtol=1e-12, atol=1e-15 * np.abs(xy).max())
    K = k(X)
    # neural-tangents' self and near-parallel pairs carry its arccos rounding (~1e-9)
    assert_allclose(K, xx, rtol=1e-8, atol=1e-15 * np.abs(xx).max())
    assert_array_equal(np.diag(K), k.diag(X))
    assert_array_equal(K, K.T)


@pytest.mark.slow
def test_myrtle_gap_equals_the_papers_pools():
    """kernelkit's Myrtle-5 (global average pool of the 8x8 map) equals neural-tangents'
    Myrtle-5 with three 2x2 pools and a flatten on 32x32 images."""
    with np.load(REF) as ref:
        X, Y, xy = ref["X_m32"], ref["Y_m32"], ref["ntk_xy_myrtle5_32nt"]
    with kernelkit.config_context(backend="numba"):
        k = ConvNTK(layers="myrtle5", w_std=2**0.5)
        assert_allclose(k(X, Y), xy, rtol=1e-12)
    assert list(k.get_params()["layers"]) == list("myrtle5")  # the parameter is kept as given
    assert myrtle_layers(5) == ((("conv", 3), "relu") * 2 + (("avgpool", 2),)
                                + (("conv", 3), "relu", ("avgpool", 2), ("conv", 3), "relu",
                                   "gap"))
    assert sum(layer == ("conv", 3) for layer in myrtle_layers(10)) == 9


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("activation", ["relu", "erf"])
@pytest.mark.parametrize("b_std", [None, 0.4])
def test_filter_one_is_the_fully_connected_kernel(depth, activation, b_std, engine):
    """On one-pixel images, filter size 1 with flatten is NTK / NNGP of the d features;
    on H x W images it is the mean over pixels of the FC kernel of the channel vectors."""
    rng = np.random.default_rng(depth)
    layers = [("conv", 1), activation] * depth + ["flatten"]
    arch = {"depth": depth, "activation": activation, "w_std": 1.3, "b_std": b_std}
    X, Y = rng.standard_normal((6, 7)), rng.standard_normal((4, 7))
    for conv, fc in ((ConvNTK, NTK), (ConvNNGP, NNGP)):
        k = conv(layers=layers, image_shape=(1, 1, 7), w_std=1.3, b_std=b_std)
        assert_allclose(k(X, Y), fc(**arch)(X, Y), rtol=1e-13)
        A, B = rng.standard_normal((5, 3, 2, 4)), rng.standard_normal((3, 3, 2, 4))
        per_pixel = np.mean([fc(**arch)(A[:, i, j], B[:, i, j]) for i in range(3)
                             for j in range(2)], axis=0)
        assert_allclose(conv(layers=layers, w_std=1.3, b_std=b_std)(A, B), per_pixel,
                        rtol=1e-13)


@pytest.mark.parametrize("layers", [
    [("conv", 2), "relu", ("conv", 3, "valid"), "erf", "flatten"],
    [("conv", 4), "erf", ("avgpool", 3), ("conv", 2, "valid"), "relu", "gap"],
    ["relu", ("avgpool", 2), ("conv", 3), "relu", "flatten"],
    [("avgpool", 2), "gap"],
])
def test_numba_equals_numpy(layers):
    rng = np.random.default_rng(5)
    X, Y = _images(rng, 5), _images(rng, 3)
    for cls in (ConvNTK, ConvNNGP):
        k = cls(layers=layers, w_std=1.4, b_std=0.2)
        with kernelkit.config_context(backend="numpy"):
            ref = k(X, Y), k(X), k.diag(Y)
        with kernelkit.config_context(backend="numba"):
            got = k(X, Y), k(X), k.diag(Y)
        for a, b in zip(got, ref, strict=True):
            assert_allclose(a, b, rtol=1e-13, atol=1e-16)



def test_numba_acos_within_an_ulp_of_libm():
    """The branch-free series arc-cosine of the relu rows, near the ends and in between."""
    import math

    import numba as nb

    @nb.njit
    def many(c):
        return np.array([_conv_numba._acos(v) for v in c])

    t = np.geomspace(1e-18, 1.0, 2000)
    c = np.concatenate([np.linspace(-1.0, 1.0, 20001), 1.0 - t, t - 1.0, 0.5 + 1e-3 * t,
                        0.5 - 1e-3 * t, -0.5 + 1e-3 * t, [0.0, -0.0, 0.5, -0.5]])
    ref = np.array([math.acos(v) for v in c])
    ulps = np.abs(many(c) - ref) / np.spacing(np.maximum(ref, 1e-300))
    assert ulps.max() <= 2.0
    assert many(np.array([1.0]))[0] == 0.0 and many(np.array([-1.0]))[0] == math.pi


@pytest.mark.parametrize("side, pb", [(1, 1), (2, 1), (3, 1), (3, 0), (5, 0), (7, 1), (9, 1)])
def test_numba_fused_3x3_convolution_equals_offset_passes(side, pb):
    """The fused 3x3 full-state convolution sums each output's terms in the same order."""
    rng = np.random.default_rng(side)
    ho = side + 2 * pb - 2  # "same" (pb = 1) or "valid" (pb = 0)
    S = rng.standard_normal(side**4) * 10.0 ** rng.integers(-8, 8, side**4)
    fused, passes = np.full(side**4, np.nan), np.full(side**4, np.nan)
    _conv_numba._conv3_full(S, fused, pb, side, side, ho, ho)
    for p1 in range(ho * ho):
        _conv_numba._conv_row(S, passes, p1, 3, pb, side, side, ho, ho)
    assert_array_equal(fused[:ho**4], passes[:ho**4])

def test_direct_recursion_without_layers_is_linear():
    """No hidden layer: a flatten read-out is w^2 x.y / (P C) + b^2 (the linear kernel
    of the flattened images), a GAP read-out w^2 sum(x) . sum(y) / (P^2 C); the NTK of
    a read-out alone is its NNGP."""
    rng = np.random.default_rng(2)
    X, Y = _images(rng, 4), _images(rng, 3)
    P, C = 36, 2
    flat = ConvNNGP(layers=["flatten"], w_std=1.5, b_std=0.5)
    assert_allclose(flat(X, Y), 2.25 * X.reshape(4, -1) @ Y.reshape(3, -1).T / (P * C) + 0.25,
                    rtol=1e-13)
    sx, sy = X.sum(axis=(1, 2)), Y.sum(axis=(1, 2))
    assert_allclose(ConvNTK(layers=["gap"])(X, Y), sx @ sy.T / (P * P * C), rtol=1e-13)


@pytest.mark.parametrize("name", ["pool_flat_b", "f3_relu_d2_flat_b", "f3v_relu_d2_gap_b"])
def test_tiled_equals_untiled(name, engine, monkeypatch):
    """A working_memory of a few pairs gives tiles of a few pairs and the same values as
    one big tile; below one pair it warns and computes one pair at a time."""
    arch = ARCHS[name]
    with np.load(REF) as ref:
        X, Y = ref[f"X_{arch['images']}"], ref[f"Y_{arch['images']}"]
    k = _kernel(ConvNTK, arch)
    whole = k(X, Y), k(X)
    per_pair = k._plan(X[0].size, X.shape[1:]).pair_bytes(engine)
    sizes = []
    mod = _conv_numpy if engine == "numpy" else _conv_numba
    real = mod.run_pairs
    monkeypatch.setattr(mod, "run_pairs", lambda *a, **kw: sizes.append(len(a[4])) or real(
        *a, **kw))
    with kernelkit.config_context(working_memory=3.5 * per_pair / 2**20):
        tiled = k(X, Y), k(X)
    for a, b in zip(tiled, whole, strict=True):
        assert_allclose(a, b, rtol=1e-15, atol=0)
    if engine == "numpy":
        assert max(sizes) == 3 and len(sizes) > 5
    with kernelkit.config_context(working_memory=0.5 * per_pair / 2**20):
        with pytest.warns(RuntimeWarning, match="one pair at a time"):
            assert_allclose(k(X, Y), whole[0], rtol=1e-15, atol=0)


@pytest.mark.parametrize("cls", [ConvNTK, ConvNNGP])
@pytest.mark.parametrize("readout", ["gap", "flatten"])
def test_numpy_tiles_stay_within_working_memory(cls, readout):
    """Peak of the allocations (tracemalloc) while computing k(X, Y) on the NumPy
    reference, besides the output, stays within working_memory."""
    rng = np.random.default_rng(7)
    X, Y = rng.standard_normal((7, 12, 12, 3)), rng.standard_normal((5, 12, 12, 3))
    k = cls(layers=[("conv", 3), "relu", ("conv", 3), "erf", readout])
    budget = 8.0  # MiB: a few pairs of 144 pixels with a GAP read-out (1.6 MiB each)
    with kernelkit.config_context(backend="numpy", working_memory=budget):
        k(X[:2], Y[:1])  # warm up (imports, caches)
        tracemalloc.start()
        try:
            K = k(X, Y)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    # besides the tiles: the output and the images' variance trajectories (12 x 288)
    assert peak <= budget * 2**20 + K.nbytes + 8 * 12 * 288 + 2**12, peak / 2**20


def test_flattened_equals_images_and_float32(engine):
    rng = np.random.default_rng(3)
    X, Y = _images(rng, 4), _images(rng, 2)
    k = ConvNTK(layers=[("conv", 3), "relu", ("avgpool", 3), "flatten"], b_std=0.1)
    kf = clone(k).set_params(image_shape=(6, 6, 2))
    K = k(X, Y)
    assert_array_equal(kf(X.reshape(4, -1), Y.reshape(2, -1)), K)
    assert_array_equal(kf(X.reshape(4, -1)), k(X))
    assert_array_equal(kf(X, Y.reshape(2, -1)), K)  # images beside flattened rows
    assert_array_equal(k(X.reshape(4, -1), Y), K)
    with pytest.raises(ValueError, match="images \\(6, 6, 2\\)"):
        k(X, Y.reshape(2, 6, 12, 1))
    K32 = kf(X.reshape(4, -1).astype(np.float32), Y.reshape(2, -1).astype(np.float32))
    assert K32.dtype == np.float32
    # float32 inputs are taken as given and computed in float64: one rounding at the end
    K64 = k(X.astype(np.float32).astype(np.float64), Y.astype(np.float32).astype(np.float64))
    assert_array_equal(K32, K64.astype(np.float32))


def test_kernel_ridge_and_gp_moments(engine):
    """KernelRidge with a conv kernel solves (K + alpha I) c = y with the kernel's own
    matrix; its return_std equals scikit-learn's GaussianProcessRegressor."""
    rng = np.random.default_rng(4)
    X, Xt = _images(rng, 12).reshape(12, -1), _images(rng, 5).reshape(5, -1)
    y = rng.standard_normal(12)
    k = ConvNNGP(layers=[("conv", 3), "relu", ("avgpool", 2), "gap"], image_shape=(6, 6, 2),
                 w_std=1.4)
    model = KernelRidge(alpha=0.1, kernel=k).fit(X, y)
    K, Kt = k(X), k(Xt, X)
    mean, std = model.predict(Xt, return_std=True)
    assert_allclose(mean, Kt @ np.linalg.solve(K + 0.1 * np.eye(12), y), rtol=1e-10)
    var = k.diag(Xt) - np.einsum("ij,ji->i", Kt, np.linalg.solve(K + 0.1 * np.eye(12), Kt.T))
    assert_allclose(std, np.sqrt(var), rtol=1e-9)
    gp = GaussianProcessRegressor(kernel=k, alpha=0.1, optimizer=None).fit(X, y)
    gm, gs = gp.predict(Xt, return_std=True)
    assert_allclose(mean, gm, rtol=1e-9)
    assert_allclose(std, gs, rtol=1e-8)
    op = KernelOperator(k, X.shape[1], engine)
    assert_array_equal(op.diag(Xt), k.diag(Xt))
    assert_allclose(op.matmul(Xt, X, y), Kt @ y, rtol=1e-13)


def test_grid_search_clone_pickle():
    rng = np.random.default_rng(6)
    X, y = _images(rng, 12).reshape(12, -1), rng.standard_normal(12)
    k = ConvNTK(layers=[("conv", 3), "relu", "flatten"], image_shape=(6, 6, 2))
    grid = GridSearchCV(KernelRidge(alpha=0.1, kernel=k), {
        "kernel__layers": [[("conv", 3), "relu", "flatten"], [("conv", 1), "erf", "gap"]],
        "kernel__b_std": [None, 0.5]}, cv=3).fit(X, y)
    best = grid.best_estimator_.kernel
    assert_allclose(grid.predict(X[:3]), KernelRidge(alpha=0.1, kernel=clone(best)).fit(
        X, y).predict(X[:3]), rtol=1e-12)
    again = pickle.loads(pickle.dumps(grid.best_estimator_))
    assert_array_equal(again.predict(X[:3]), grid.predict(X[:3]))


@pytest.mark.parametrize("params, X_shape, match", [
    ({"image_shape": (6, 6, 3)}, (3, 72), "image_shape=.*72 features"),
    ({}, (3, 72), "image_shape=\\(H, W, C\\) is needed"),
    ({"image_shape": (6, 6)}, (3, 72), "image_shape must be a tuple"),
    ({"layers": [("conv", 7, "valid"), "relu", "gap"]}, (3, 6, 6, 2), "does not fit"),
    ({"layers": [("conv", 3), ("avgpool", 4), "gap"]}, (3, 6, 6, 2), "does not divide"),
    ({"layers": [("conv", 3), "tanh", "gap"]}, (3, 6, 6, 2), "layers\\[1\\]"),
    ({"layers": [("conv", 3), "relu"]}, (3, 6, 6, 2), "read-out"),
    ({"layers": ["gap", "relu", "flatten"]}, (3, 6, 6, 2), "read-out"),
    ({"layers": [("conv", 0), "gap"]}, (3, 6, 6, 2), "positive integer"),
    ({"layers": [("conv", 3, "full"), "gap"]}, (3, 6, 6, 2), "padding"),
    ({"layers": "myrtle6"}, (3, 8, 8, 1), "myrtle5"),
    ({"layers": []}, (3, 6, 6, 2), "non-empty"),
    ({"padding": "SAME"}, (3, 6, 6, 2), "padding"),
    ({"w_std": 0.0}, (3, 6, 6, 2), "w_std"),
    ({"b_std": -1.0}, (3, 6, 6, 2), "b_std"),
    ({"image_shape": (6, 3, 4)}, (3, 6, 6, 2), "image_shape=\\(6, 3, 4\\) but X holds"),
])
def test_bad_input_is_rejected(params, X_shape, match):
    X = np.random.default_rng(0).standard_normal(X_shape)
    X0 = X.copy()
    k = ConvNTK(**params)
    with pytest.raises(ValueError, match=match):
        k(X)
    with pytest.raises(ValueError, match=match):
        k.diag(X)
    assert_array_equal(X, X0)
    if X.ndim == 2:  # through an estimator: rejected at fit, a fitted model unchanged
        good = KernelRidge(kernel=ConvNTK(image_shape=(6, 6, 2))).fit(X, np.arange(3.0))
        before = good.predict(X)
        with pytest.raises(ValueError, match=match):
            good.set_params(kernel=k).fit(X, np.arange(3.0))
        assert_array_equal(good.set_params(kernel=ConvNTK(image_shape=(6, 6, 2))).predict(X),
                           before)


def test_bad_data_is_rejected():
    rng = np.random.default_rng(0)
    k = ConvNTK(image_shape=(4, 4, 1))
    X = rng.standard_normal((3, 16))
    bad = X.copy()
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        k(bad)
    with pytest.raises(ValueError, match="Y has 9 features"):
        k(X, rng.standard_normal((2, 9)))
    with pytest.raises(ValueError, match="Y=None"):
        k(X, X, eval_gradient=True)
    with pytest.raises(ValueError, match="overflow|NaN or infinite"):
        k(X * 1e200)
    layers = [("conv", 3), "relu", "gap"]
    ConvNTK(layers=layers)(rng.standard_normal((2, 4, 4, 1)))
    assert layers == [("conv", 3), "relu", "gap"]
    K, G = k(X, eval_gradient=True)
    assert G.shape == (3, 3, 0) and k.n_dims == 0


def test_zero_and_constant_images():
    """A zero image: 0 without bias; relu without bias is positively homogeneous of
    degree 1 in each argument: k(x, c y) = c k(x, y)."""
    rng = np.random.default_rng(8)
    X = _images(rng, 3)
    Z = np.concatenate([X, np.zeros((1, 6, 6, 2))])
    k = ConvNTK(layers=[("conv", 3), "relu", ("avgpool", 2), ("conv", 3), "relu", "gap"])
    K = k(Z)
    assert_array_equal(K[3], 0.0)
    K, K_scaled = 2.5 * k(X), k(X, 2.5 * X)
    off = ~np.eye(3, dtype=bool)
    assert_allclose(K_scaled[off], K[off], rtol=1e-13)
    # x with 2.5 x: every pixel pair at equal positions is parallel, and the arc-cosine
    # angle carries sqrt(eps) rounding (documented: about 1e-9 relative, as neural-tangents)
    assert_allclose(np.diag(K_scaled), np.diag(K), rtol=1e-8)
    eig = np.linalg.eigvalsh(k(_images(rng, 8)))
    assert eig.min() > -1e-12 * eig.max()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ConvNNGP(layers=[("conv", 3), "erf", "gap"])(Z)


def test_gp_tunes_a_white_noise_beside_a_conv_kernel():
    """The conv kernel has no free hyperparameter (empty gradient); a WhiteKernel beside it
    is tuned by scikit-learn's optimiser to the maximum of the log marginal likelihood."""
    rng = np.random.default_rng(9)
    X = _images(rng, 15, (4, 4, 1)).reshape(15, -1)
    y = X[:, 5] + 0.3 * rng.standard_normal(15)
    k = ConvNNGP(layers=[("conv", 3), "relu", "gap"], image_shape=(4, 4, 1), w_std=1.5)
    gp = GaussianProcessRegressor(kernel=k + WhiteKernel(), random_state=0).fit(X, y)
    theta = gp.kernel_.theta
    assert theta.shape == (1,)
    K = k(X)

    def lml(log_noise):
        C = K + np.exp(log_noise) * np.eye(15)
        L = np.linalg.cholesky(C)
        a = np.linalg.solve(C, y)
        return -0.5 * y @ a - np.log(np.diag(L)).sum() - 7.5 * np.log(2 * np.pi)

    assert_allclose(gp.log_marginal_likelihood_value_, lml(theta[0]), rtol=1e-10)
    assert lml(theta[0]) >= max(lml(theta[0] - 0.05), lml(theta[0] + 0.05))


@settings(max_examples=25, deadline=None)
@given(f=st.integers(1, 3), pad=st.sampled_from(["same", "valid"]),
       act=st.sampled_from(["relu", "erf"]), pool=st.booleans(),
       readout=st.sampled_from(["flatten", "gap"]), b_std=st.sampled_from([None, 0.3]),
       seed=st.integers(0, 2**16))
def test_property_symmetric_psd_engines_agree(f, pad, act, pool, readout, b_std, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((6, 4, 4, 2))
    side = 4 if pad == "same" else 5 - f  # the map after the convolution
    layers = [("conv", f, pad), act] + [("avgpool", 2)] * (pool and side % 2 == 0) + [readout]
    k = ConvNTK(layers=layers, b_std=b_std)
    with kernelkit.config_context(backend="numpy"):
        ref = k(X)
    with kernelkit.config_context(backend="numba"):
        K = k(X)
    assert_allclose(K, ref, rtol=1e-12, atol=1e-16)
    assert_array_equal(K, K.T)
    eig = np.linalg.eigvalsh(K)
    assert eig.min() >= -1e-12 * eig.max()


def test_nngp_is_the_covariance_of_wide_random_conv_nets():
    """Monte-Carlo: a random conv layer with 8,000 channels (weights N(0, w^2 / (C f^2)),
    biases N(0, b^2)), relu, global average pool and a dense read-out; the empirical
    covariance over channels is the NNGP up to the O(1 / sqrt(channels)) sampling error."""
    rng = np.random.default_rng(11)
    X = _images(rng, 4)
    w_std, b_std, f, width = 1.4, 0.3, 3, 8_000
    W = rng.standard_normal((f * f * 2, width)) * w_std / np.sqrt(f * f * 2)
    b = rng.standard_normal(width) * b_std
    pad = np.pad(X, ((0, 0), (1, 1), (1, 1), (0, 0)))
    patches = np.concatenate([pad[:, u:u + 6, v:v + 6] for u in range(f) for v in range(f)],
                             axis=3).reshape(4, 36, -1)
    pooled = np.maximum(patches @ W + b, 0.0).mean(axis=1)  # (4, width)
    empirical = w_std**2 * pooled @ pooled.T / width + b_std**2
    k = ConvNNGP(layers=[("conv", f), "relu", "gap"], w_std=w_std, b_std=b_std)
    assert_allclose(empirical, k(X), rtol=0.05)


class _CopyingDevice:
    """A stand-in for CuPy's transfers: every array crossing is a fresh copy, so the
    device path may not write into the caller's arrays except through ``asnumpy``."""

    @staticmethod
    def asarray(a):
        return np.array(a, copy=True)

    @staticmethod
    def asnumpy(a):
        return np.array(a, copy=True)


@pytest.mark.parametrize("layers", [myrtle_layers(5), [("conv", 3), "erf", "flatten"]],
                         ids=["myrtle5-gap", "erf-flatten"])
def test_device_tiles_equal_host_tiles(layers, monkeypatch):
    """The CuPy engine's path (tiles copied in, the reference program, values and the
    self runs' trajectories copied back) gives the host reference's values."""
    rng = np.random.default_rng(3)
    X, Y = rng.random((5, 8, 8, 1)), rng.random((4, 8, 8, 1))
    k = ConvNTK(layers=layers, w_std=2**0.5)
    with kernelkit.config_context(backend="numpy"):
        ref, dref = k(X, Y), k.diag(X)
    real, calls = _conv_numpy.run_pairs, []

    def via_device(*args):
        calls.append(len(args[4]))
        return real(*args[:12], _CopyingDevice)

    monkeypatch.setattr(_conv_numpy, "run_pairs", via_device)
    with kernelkit.config_context(backend="numpy"):
        assert_allclose(k(X, Y), ref, rtol=1e-14, atol=0)
        assert_allclose(k.diag(X), dref, rtol=1e-14, atol=0)
    assert sum(calls) >= 5 + 4 + 5 * 4  # every self run and pair went through it


@pytest.mark.gpu
@pytest.mark.skipif("cupy" not in kernelkit.backend.available_backends(),
                    reason="needs CuPy and a CUDA GPU")
def test_cupy_input_runs_on_the_device_and_equals_numpy():
    import cupy as cp

    rng = np.random.default_rng(4)
    X = rng.random((6, 8, 8, 1))
    k = ConvNTK(layers=myrtle_layers(5), w_std=2**0.5)
    with kernelkit.config_context(backend="numpy"):
        ref = k(X)
    out = k(cp.asarray(X))
    assert isinstance(out, cp.ndarray)
    assert_allclose(out.get(), ref, rtol=1e-12)
