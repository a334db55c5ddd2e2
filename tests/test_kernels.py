"""Kernel values against closed forms, scikit-learn, neural-tangents and finite networks."""

import math
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF as SkRBF
from sklearn.gaussian_process.kernels import Matern as SkMatern
from sklearn.gaussian_process.kernels import WhiteKernel
from sklearn.metrics import pairwise
from sklearn.svm import SVC

import kernelkit
from kernelkit.kernels import NNGP, NTK, RBF, Cosine, Laplacian, Linear, Matern, Polynomial

NT_REFERENCE = Path(__file__).parent / "data" / "neural_tangents_reference.npz"
NT_ARCHS = {
    "relu_d1": dict(depth=1, activation="relu", w_std=1.0, b_std=None),
    "relu_d3_b": dict(depth=3, activation="relu", w_std=1.5, b_std=0.1),
    "relu_d2_b05": dict(depth=2, activation="relu", w_std=2.0**0.5, b_std=0.5),
    "erf_d1": dict(depth=1, activation="erf", w_std=1.0, b_std=None),
    "erf_d2_b": dict(depth=2, activation="erf", w_std=1.2, b_std=0.3),
}
BACKENDS = ["numpy", "numba"]


@pytest.fixture(params=BACKENDS)
def backend(request):
    with kernelkit.config_context(backend=request.param, working_memory=0.05):
        yield request.param


def _data(rng, n=40, m=30, d=6):
    return rng.standard_normal((n, d)), rng.standard_normal((m, d))


@pytest.mark.parametrize("kernel, reference", [
    (RBF(0.3), lambda X, Y: pairwise.rbf_kernel(X, Y, gamma=0.3)),
    (RBF(), lambda X, Y: pairwise.rbf_kernel(X, Y)),
    (Laplacian(0.2), lambda X, Y: pairwise.laplacian_kernel(X, Y, gamma=0.2)),
    (Polynomial(0.5, 3, 1.0), lambda X, Y: pairwise.polynomial_kernel(X, Y, 3, 0.5, 1.0)),
    (Polynomial(), lambda X, Y: pairwise.polynomial_kernel(X, Y)),
    (Linear(), pairwise.linear_kernel),
    (Cosine(), pairwise.cosine_similarity),
] + [(Matern(0.4, nu), lambda X, Y, nu=nu: SkMatern(length_scale=1 / math.sqrt(0.8), nu=nu)(X, Y))
     for nu in (0.5, 1.5, 2.5)])
def test_kernels_match_sklearn(kernel, reference, backend, rng):
    X, Y = _data(rng)
    assert_allclose(kernel(X, Y), reference(X, Y), rtol=1e-12, atol=1e-14)
    assert_allclose(kernel(X), reference(X, X), rtol=1e-12, atol=1e-14)
    assert_allclose(kernel.diag(X), np.diag(reference(X, X)), rtol=1e-12, atol=1e-14)


def test_matern_closed_form_by_hand(rng):
    X, Y = _data(rng, 5, 4, 3)
    gamma = 0.7
    r = np.sqrt(((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1)) * np.sqrt(2 * gamma)
    assert_allclose(Matern(gamma, 0.5)(X, Y), np.exp(-r), rtol=1e-13)
    t = np.sqrt(5) * r
    assert_allclose(Matern(gamma, 2.5)(X, Y), (1 + t + t**2 / 3) * np.exp(-t), rtol=1e-13)


def _arccos_ntk_depth1(X, Y):
    """Depth-1 relu NTK, no bias, written out from the arc-cosine kernel (Cho & Saul 2009)."""
    d = X.shape[1]
    nx, ny = np.linalg.norm(X, axis=1), np.linalg.norm(Y, axis=1)
    cos = np.clip((X @ Y.T) / np.outer(nx, ny), -1, 1)
    theta = np.arccos(cos)
    k0 = X @ Y.T / d
    k1 = np.outer(nx, ny) / d / (2 * np.pi) * (np.sin(theta) + (np.pi - theta) * cos)
    return k1 + k0 * (np.pi - theta) / (2 * np.pi), k1


def test_ntk_depth1_arccos_formula(backend, rng):
    X, Y = _data(rng)
    ntk, nngp = _arccos_ntk_depth1(X, Y)
    assert_allclose(NTK(depth=1)(X, Y), ntk, rtol=1e-12)
    assert_allclose(NNGP(depth=1)(X, Y), nngp, rtol=1e-12)


@pytest.mark.parametrize("arch", sorted(NT_ARCHS))
@pytest.mark.parametrize("cls, key", [(NTK, "ntk"), (NNGP, "nngp")])
def test_neural_kernels_equal_neural_tangents(arch, cls, key, backend):
    """Values of neural-tangents 0.6.5 (stax, NTK parameterization), stored by
    tests/data/make_neural_tangents_reference.py; rows include a zero row, a row
    parallel to another and a near-duplicate."""
    ref = np.load(NT_REFERENCE)
    k = cls(**NT_ARCHS[arch])
    assert_allclose(k(ref["X"], ref["Y"]), ref[f"{key}_xy_{arch}"], rtol=1e-12, atol=1e-15)
    K, K_ref = k(ref["X"]), ref[f"{key}_xx_{arch}"]
    off = ~np.eye(len(K), dtype=bool)
    assert_allclose(K[off], K_ref[off], rtol=1e-9, atol=1e-15)
    # self-pairs: kernelkit's are exact (angle 0); neural-tangents' carry arccos rounding
    assert_allclose(np.diag(K), k.diag(ref["X"]), rtol=1e-14, atol=0)
    assert_allclose(np.diag(K), np.diag(K_ref), rtol=1e-8, atol=1e-15)


def test_relu_ntk_self_pair_is_exact():
    X = np.random.default_rng(3).standard_normal((6, 5))
    # depth 1, no bias: NTK(x, x) = |x|^2 / d exactly, NNGP(x, x) = |x|^2 / (2 d)
    assert_allclose(np.diag(NTK()(X)), (X**2).sum(1) / 5, rtol=1e-15)
    assert_allclose(NNGP().diag(X), (X**2).sum(1) / 10, rtol=1e-15)


@pytest.mark.parametrize("b_std", [None, 0.3])
def test_relu_nearly_parallel_pairs_are_accurate(b_std, backend):
    """Pairs at tiny angles: K/p rounds to 1 and arccos would amplify the rounding to
    sqrt(eps) ~ 1e-8; the defect recursion keeps them at ~1e-14 of the exact limit."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal(4)
    for scale in (1.0, 3.0):
        for eps in (1e-7, 1e-9, 1e-12):
            y = scale * x + eps * rng.standard_normal(4)
            for cls in (NTK, NNGP):
                k = cls(depth=3, b_std=b_std)
                v = k(x[None], y[None])[0, 0]
                # Lipschitz in y: the exact value moves by O(eps) from k(x, scale * x)
                at = k(x[None], scale * x[None])[0, 0]
                assert abs(v - at) < 50 * eps * abs(at), (cls, scale, eps, v, at)
    # parallel rows: relu without bias is homogeneous, so k(x, 3x) = 3 k(x, x)
    assert_allclose(NTK(depth=3)(x[None], 3 * x[None])[0], 3 * NTK(depth=3).diag(x[None]),
                    rtol=1e-14)


def _finite_network_kernels(X, depth, activation, w_std, b_std, width, seed):
    """Empirical NNGP (last-layer covariance) and NTK (sum of parameter-gradient
    inner products) of one random finite network in the NTK parameterization."""
    rng = np.random.default_rng(seed)
    phi = np.maximum if activation == "relu" else None
    b_std = b_std or 0.0
    act = (lambda h: np.maximum(h, 0)) if phi else (lambda h: np.vectorize(math.erf)(h))
    dact = (lambda h: (h > 0).astype(float)) if phi else (
        lambda h: 2 / np.sqrt(np.pi) * np.exp(-h * h))
    a, hs, acts, Ws = X.T, [], [X.T], []
    for _ in range(depth):
        W = rng.standard_normal((width, a.shape[0]))
        h = w_std * W @ a / np.sqrt(a.shape[0]) + b_std * rng.standard_normal((width, 1))
        a = act(h)
        Ws.append(W)
        hs.append(h)
        acts.append(a)
    v = rng.standard_normal((1, width))
    nngp = w_std**2 * (a.T @ a) / width + b_std**2
    # backprop delta_l = df/dh_l for every input (columns)
    ntk = w_std**2 * (a.T @ a) / width + b_std**2  # readout weights and bias
    delta = dact(hs[-1]) * (w_std * v.T / np.sqrt(width))
    for layer in range(depth - 1, -1, -1):
        inp = acts[layer]
        ntk += (w_std**2 / inp.shape[0]) * (inp.T @ inp) * (delta.T @ delta)
        ntk += b_std**2 * (delta.T @ delta)
        if layer > 0:
            delta = dact(hs[layer - 1]) * (w_std * Ws[layer].T @ delta / np.sqrt(width))
    return nngp, ntk


@pytest.mark.parametrize("depth, activation, w_std, b_std",
                         [(1, "relu", 1.0, None), (2, "relu", 1.4, 0.2), (2, "erf", 1.0, 0.1)])
def test_neural_kernels_match_wide_finite_networks(depth, activation, w_std, b_std, rng):
    """Jacot et al. 2018: the empirical NTK/NNGP of a wide network concentrate on the
    limit, with fluctuations O(1/sqrt(width))."""
    X = rng.standard_normal((5, 4))
    width, seeds = 2048, 4
    runs = [_finite_network_kernels(X, depth, activation, w_std, b_std, width, s)
            for s in range(seeds)]
    nngp_mc = np.mean([r[0] for r in runs], axis=0)
    ntk_mc = np.mean([r[1] for r in runs], axis=0)
    kw = dict(depth=depth, activation=activation, w_std=w_std, b_std=b_std)
    ntk, nngp = NTK(**kw)(X), NNGP(**kw)(X)
    scale_ntk, scale_nngp = np.abs(ntk).max(), np.abs(nngp).max()
    # sampling error ~ 1/sqrt(width * seeds) ~ 1% of the scale; 5% leaves no flake room.
    assert np.abs(ntk_mc - ntk).max() < 0.05 * scale_ntk
    assert np.abs(nngp_mc - nngp).max() < 0.05 * scale_nngp
    # and the estimate is informative: a wrong depth is far outside that band
    wrong = NTK(**{**kw, "depth": depth + 1})(X)
    assert np.abs(ntk_mc - wrong).max() > 0.05 * scale_ntk


def test_zero_and_parallel_rows(backend):
    X = np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [-1.0, -2.0, -3.0]])
    for k in (NTK(depth=3), NNGP(depth=2), Cosine(), NTK(depth=2, activation="erf")):
        K = k(X)
        assert np.all(np.isfinite(K))
    K = NTK(depth=2)(X)
    assert_allclose(K[0], 0.0, atol=0)  # no bias: the zero input maps to zero
    # relu without bias is positively homogeneous of degree 1 in each argument
    assert_allclose(K[2, 2], 4 * K[1, 1], rtol=1e-14)
    assert_allclose(K[1, 2], 2 * K[1, 1], rtol=1e-14)
    cos = Cosine()(X)
    assert_allclose(cos[1:, 1:], [[1, 1, -1], [1, 1, -1], [-1, -1, 1]], atol=0)
    assert_allclose(cos[0], 0.0, atol=0)
    # the parallel pair sits exactly at angle 0: relu NNGP = q/2 per layer
    nngp = NNGP(depth=1)(X)
    assert_allclose(nngp[1, 2], np.sqrt(14 / 3 * 56 / 3) / 2, rtol=1e-14)


@pytest.mark.parametrize("kernel", [RBF(0.5), Matern(0.5, 0.5), Laplacian(0.5)])
def test_float32_far_from_origin_keeps_distances(kernel, backend):
    X = (1e4 + np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]])).astype(np.float32)
    K = kernel(X)
    assert K.dtype == np.float32
    ref = kernel(X.astype(np.float64) - 1e4)
    assert_allclose(K, ref, rtol=1e-6)
    assert K[0, 1] < 0.99  # no cancellation to distance zero


def test_float64_offset_near_duplicates_are_exact(backend):
    X = 1e8 + np.array([[0.0, 0.0], [1e-3, 0.0]])
    K = Matern(0.5, 0.5)(X, X[::-1].copy())
    gap = X[1, 0] - X[0, 0]  # exact in float64 (Sterbenz); about 1e-3
    assert_allclose(K[0, 0], math.exp(-gap), rtol=1e-14)


def test_gp_kernel_interface(rng):
    X = rng.standard_normal((30, 3))
    y = np.sin(X[:, 0])
    k = RBF(0.5, gamma_bounds="fixed")
    assert k.is_stationary() and not NTK().is_stationary()
    assert k.n_dims == 0 and k.hyperparameters[0].fixed
    assert RBF().n_dims == 0 and RBF(0.5).n_dims == 1  # gamma=None is resolved from d: fixed
    fixed = NTK(depth=2, w_std_bounds="fixed")  # NTK hyperparameters: see test_gp.py
    gp = GaussianProcessRegressor(fixed + WhiteKernel(0.1), random_state=0).fit(X, y)
    assert gp.kernel_.k2.noise_level != 0.1  # the white noise was optimised, NTK kept fixed
    assert gp.kernel_.k1 == fixed
    ref = GaussianProcessRegressor(fixed + WhiteKernel(gp.kernel_.k2.noise_level,
                                   "fixed"), optimizer=None).fit(X, y)
    assert_allclose(gp.predict(X), ref.predict(X), rtol=1e-10)
    mean, std = gp.predict(X[:3], return_std=True)
    assert np.all(std > 0)


def test_svc_with_kernel_object(rng):
    X = rng.standard_normal((60, 3))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    a = SVC(kernel=RBF(0.5)).fit(X, y).decision_function(X)
    b = SVC(kernel="rbf", gamma=0.5).fit(X, y).decision_function(X)
    assert_allclose(a, b, rtol=1e-6, atol=1e-8)


def test_callable_returns_input_dtype_and_does_not_modify(rng):
    X = rng.standard_normal((10, 3))
    X32 = X.astype(np.float32)
    before = X32.copy()
    assert RBF()(X32).dtype == np.float32
    assert RBF()(X).dtype == np.float64
    assert NTK()(X32, X).dtype == np.float64
    assert NTK()(rng.integers(0, 5, (4, 2))).dtype == np.float64
    np.testing.assert_array_equal(X32, before)


@pytest.mark.parametrize("w_std", [2.0**0.5, 1.0, 0.7])
def test_relu_antiparallel_pairs_are_exact(w_std, backend):
    """y = -c x, no bias: the first relu layer sees theta = pi exactly, so its output
    covariance and derivative factor vanish; the second sees orthogonal inputs."""
    x = np.random.default_rng(2).standard_normal((1, 6))
    A, B = 7 * x, -1.3 * x
    w2 = w_std**2
    root = np.sqrt((A**2).sum() * (B**2).sum()) / 6  # sqrt(q0(a) q0(b))
    for cls in (NTK, NNGP):
        assert_allclose(cls(depth=1, w_std=w_std)(A, B), 0.0, atol=1e-14 * root)
        # depth 2: relu of orthogonal inputs gives p / (2 pi); the NTK's gradient
        # terms all carry the zero factor, leaving only the readout's
        assert_allclose(cls(depth=2, w_std=w_std)(A, B), w2**3 * root / (4 * np.pi),
                        rtol=1e-13)
        assert np.all(np.isfinite(cls(depth=3, w_std=w_std, b_std=0.3)(A, B)))


# ------------------------------------------- scikit-learn's own GP kernel tests
# scikit-learn's test functions, run on kernelkit kernels. test_kernel_theta assumes every
# hyperparameter free (theta[i] is the i-th one), so it skips NTK(b_std=None) and RBF(),
# whose b_std / gamma are fixed (no bias; gamma resolved from n_features).
# Not applicable, and why: test_kernel_operator_commutative, test_kernel_anisotropic,
# test_compound_kernel_input_type, test_matern_kernel and test_rational_quadratic_kernel
# take no kernel argument and test scikit-learn's own classes (ARD length scales, nu=inf
# and general nu, which kernelkit's isotropic kernels do not have).
sk_gp_tests = pytest.importorskip("sklearn.gaussian_process.tests.test_kernels")
GP_KERNELS = [RBF(0.7), Laplacian(0.4), Matern(0.3, 0.5), Matern(0.3, 1.5), Matern(0.3, 2.5),
              Polynomial(0.5, 2, 1.0), Polynomial(0.2, 3.5, 2.0), NTK(depth=3, w_std=1.3),
              NTK(depth=2, w_std=1.3, b_std=0.4), NNGP(depth=2, activation="erf", w_std=1.2,
                                                        b_std=0.3)]
SK_GP_CHECKS = ["test_kernel_gradient", "test_kernel_theta", "test_auto_vs_cross",
                "test_kernel_diag", "test_kernel_stationary", "test_kernel_input_type",
                "test_kernel_clone", "test_kernel_clone_after_set_params",
                "test_kernel_versus_pairwise", "test_set_get_params", "test_repr_kernels"]


def _applicable(kernel, check):
    if check == "test_kernel_stationary":  # scikit-learn runs it on stationary kernels
        return kernel.is_stationary()
    if check == "test_kernel_theta":  # it assumes no hyperparameter is fixed
        return not any(h.fixed for h in kernel.hyperparameters)
    return True


@pytest.mark.parametrize("kernel, check", [
    (k, c) for k in GP_KERNELS + [Linear(), Cosine(), RBF()] for c in SK_GP_CHECKS
    if _applicable(k, c)], ids=repr)
def test_sklearn_gp_kernel_tests(kernel, check):
    with kernelkit.config_context(backend="numpy"):
        getattr(sk_gp_tests, check)(kernel)


@pytest.mark.parametrize("kernel", GP_KERNELS[:6], ids=repr)
def test_gamma_gradient_equals_finite_differences(kernel, rng):
    X = np.vstack([rng.standard_normal((7, 3)), np.zeros((1, 3))])
    X = np.vstack([X, X[:1] + 1e-9])  # a near-duplicate pair
    K, G = kernel(X, eval_gradient=True)
    h = 1e-6
    fd = (kernel.clone_with_theta(kernel.theta + h)(X)
          - kernel.clone_with_theta(kernel.theta - h)(X)) / (2 * h)
    assert_allclose(G[..., 0], fd, rtol=0, atol=1e-7 * np.abs(fd).max())
    assert np.abs(fd).max() > 1e-2  # the gradient is not trivially zero


def test_gp_tunes_gamma_as_sklearn_tunes_length_scale(rng):
    """RBF(gamma) is scikit-learn's RBF(length_scale) with gamma = 1 / (2 l^2): the GP
    optimum of the log marginal likelihood is the same."""
    X = rng.standard_normal((40, 2))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(40)
    ours = GaussianProcessRegressor(RBF(0.5) + WhiteKernel(0.1), random_state=0).fit(X, y)
    ref = GaussianProcessRegressor(SkRBF(1.0) + WhiteKernel(0.1), random_state=0).fit(X, y)
    assert_allclose(ours.log_marginal_likelihood_value_, ref.log_marginal_likelihood_value_,
                    rtol=1e-6)
    assert_allclose(ours.kernel_.k1.gamma, 0.5 / ref.kernel_.k1.length_scale**2, rtol=1e-3)
    assert ours.kernel_.k1.gamma != 0.5


@pytest.mark.parametrize("bad", [(0.0, 1.0), (2.0, 1.0), (1.0,), "free", (1.0, np.inf)])
def test_bad_bounds(bad, rng):
    X = rng.standard_normal((4, 2))
    for k in (RBF(0.5, gamma_bounds=bad), NTK(w_std_bounds=bad)):
        with pytest.raises(ValueError, match="_bounds must be 'fixed' or a pair"):
            k(X, eval_gradient=True)


def test_kernel_params_keep_hyperparameter_values_exact(rng):
    """kernel_params on a Kernel object copy it without a theta round trip: exp(log(g)) != g
    for some g (here 0.3 + a few ulp)."""
    from kernelkit.kernels import make_kernel

    g = next(v for v in np.linspace(0.01, 3, 3000) if np.exp(np.log(v)) != v)
    k = make_kernel(NTK(w_std=g, b_std=g), kernel_params={"depth": 2})
    assert (k.w_std, k.b_std, k.depth) == (g, g, 2)
    assert make_kernel(RBF(g), kernel_params={"gamma_bounds": "fixed"}).gamma == g


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's own overflow on the way
def test_kernel_objects_raise_on_non_finite_values():
    # estimators and direct calls alike: no silent NaN or inf
    X = np.random.default_rng(0).standard_normal((20, 3))
    from kernelkit.kernels import Polynomial
    for kernel, Z in ((Polynomial(degree=2.5), X), (Polynomial(degree=3), 1e120 * X)):
        with pytest.raises(ValueError, match="produced NaN or infinite values"):
            kernel(Z)
    with pytest.raises(ValueError, match="produced NaN or infinite values"):
        Polynomial(degree=3).diag(1e120 * X)


def test_fractional_polynomial_gradient_is_zero_where_rows_are_orthogonal():
    """degree in (0, 1), coef0 = 0: K = (gamma x.y)^d and dK/dlog(gamma) = d K, 0 where
    x.y = 0 (one-hot rows), not the NaN of 0 * 0^(d - 1)."""
    from kernelkit.kernels import Polynomial

    X = np.vstack([np.eye(3), [[1.0, 2.0, 0.5]]])
    kernel = Polynomial(gamma=1.0, degree=0.5, coef0=0.0)
    K, G = kernel(X, eval_gradient=True)
    assert_allclose(G[..., 0], 0.5 * K, rtol=1e-12, atol=0)
    assert np.all(G[:3, :3][~np.eye(3, dtype=bool)] == 0)
