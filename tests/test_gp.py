"""GP predictive moments, the trained infinite-width ensemble, and NTK/NNGP gradients.

References: scikit-learn's GaussianProcessRegressor (ridge moments); neural-tangents'
``gradient_descent_mse_ensemble`` (values stored in ``tests/data`` with the script
that made them); a dense matrix-exponential implementation of Lee et al. (2019)
eqs. (15)-(16) written here; central finite differences (kernel gradients).
"""

import functools
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import linalg
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF as SkRBF
from sklearn.gaussian_process.kernels import WhiteKernel
from sklearn.utils.estimator_checks import parametrize_with_checks

import kernelkit
from kernelkit import KernelRidge, NTKRidge
from kernelkit.kernels import NNGP, NTK, RBF
from kernelkit.kernels._neural import nn_gradient
from kernelkit.ridge import InfiniteWidthClassifier, InfiniteWidthRegressor

REF = Path(__file__).parent / "data" / "gp_ensemble_reference.npz"
ARCHS = [(act, depth, b) for act in ("relu", "erf") for depth in (1, 2, 3) for b in (None, 0.4)]


@pytest.fixture
def data(rng):
    X = rng.standard_normal((30, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.standard_normal(30)
    return X, y, rng.standard_normal((9, 3))


# ------------------------------------------------------------ ridge GP moments
@pytest.mark.parametrize("kernel", [NTK(depth=2, b_std=0.3), NNGP(depth=3, activation="erf"),
                                    RBF(gamma=0.5)])
def test_ridge_moments_equal_gaussian_process(data, kernel):
    X, y, Xt = data
    gp = GaussianProcessRegressor(kernel=kernel, alpha=0.05, optimizer=None).fit(X, y)
    gm, gs = gp.predict(Xt, return_std=True)
    _, gc = gp.predict(Xt, return_cov=True)
    kr = KernelRidge(alpha=0.05, kernel=kernel).fit(X, y)
    m, s = kr.predict(Xt, return_std=True)
    m2, c = kr.predict(Xt, return_cov=True)
    np.testing.assert_allclose(m, gm, rtol=0, atol=1e-10)
    np.testing.assert_allclose(s, gs, rtol=0, atol=1e-10)
    np.testing.assert_allclose(c, gc, rtol=0, atol=1e-10)
    np.testing.assert_array_equal(m2, m)
    np.testing.assert_array_equal(kr.predict(Xt), m)


def test_ntkridge_moments_and_blockwise_std(data):
    X, y, Xt = data
    gp = GaussianProcessRegressor(kernel=NTK(depth=2, b_std=0.3), alpha=0.1,
                                  optimizer=None).fit(X, y)
    gs = gp.predict(Xt, return_std=True)[1]
    model = NTKRidge(alpha=0.1, depth=2, b_std=0.3).fit(X, y)
    np.testing.assert_allclose(model.predict(Xt, return_std=True)[1], gs, atol=1e-10)
    # a budget of a few rows per block gives the same values
    with kernelkit.config_context(working_memory=0.001):
        np.testing.assert_allclose(model.predict(Xt, return_std=True)[1], gs, atol=1e-10)


def test_ridge_moments_multi_target_weights_and_alphas(data):
    X, y, Xt = data
    Y = np.stack([y, np.cos(X[:, 0])], axis=1)
    w = np.linspace(0.5, 2.0, X.shape[0])
    k = NTK(depth=1, b_std=0.2)
    kr = KernelRidge(alpha=0.1, kernel=k).fit(X, Y, sample_weight=w)
    gp = GaussianProcessRegressor(kernel=k, alpha=0.1 / w, optimizer=None).fit(X, Y)
    m, s = kr.predict(Xt, return_std=True)
    gm, gs = gp.predict(Xt, return_std=True)
    np.testing.assert_allclose(m, gm, atol=1e-10)
    np.testing.assert_allclose(s, gs, atol=1e-10)
    assert s.shape == (9, 2)
    _, c = kr.predict(Xt, return_cov=True)
    np.testing.assert_allclose(c, gp.predict(Xt, return_cov=True)[1], atol=1e-10)
    # one alpha per target: each column is its own GP
    kr = KernelRidge(alpha=[0.1, 1.0], kernel=k).fit(X, Y)
    s = kr.predict(Xt, return_std=True)[1]
    for j, a in enumerate((0.1, 1.0)):
        gs = GaussianProcessRegressor(kernel=k, alpha=a, optimizer=None).fit(X, Y[:, j])
        np.testing.assert_allclose(s[:, j], gs.predict(Xt, return_std=True)[1], atol=1e-10)


def test_variances_non_negative_near_duplicates(rng):
    X = rng.standard_normal((20, 4))
    X = np.vstack([X, X + 1e-9, X[:5] * (1 + 1e-12)])
    y = rng.standard_normal(X.shape[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kr = KernelRidge(alpha=1e-14, kernel=NTK(depth=3, b_std=0.1)).fit(X, y)
        s = kr.predict(X, return_std=True)[1]
        c = kr.predict(X, return_cov=True)[1]
        e = InfiniteWidthRegressor(depth=3, b_std=0.1, diag_reg=0.0).fit(X, y)
        es = e.predict(X, return_std=True, time=[1.0, 1e3, np.inf])[1]
    for v in (s, np.diag(c), es):
        assert np.all(np.isfinite(v)) and np.all(v >= 0)
    assert s.max() < 1e-3 * np.sqrt(kr._operator().diag(X).max())  # fits its training rows


# ------------------------------------------------------ infinite-width ensemble
@pytest.mark.parametrize("posterior", ["ntk", "nngp"])
@pytest.mark.parametrize("act,depth,b_std", ARCHS)
def test_ensemble_equals_neural_tangents(act, depth, b_std, posterior):
    ref = np.load(REF)
    name = f"{act}_d{depth}" + ("_b" if b_std else "")
    model = InfiniteWidthRegressor(depth=depth, activation=act, w_std=1.3, b_std=b_std,
                                   learning_rate=float(ref["learning_rate"]),
                                   diag_reg=float(ref["diag_reg"]), posterior=posterior)
    model.fit(ref["X"], ref["Y"])
    mean, cov = model.predict(ref["X_test"], return_cov=True, time=ref["times"])
    rm, rc = ref[f"{posterior}_mean_{name}"], ref[f"{posterior}_cov_{name}"]
    # neural-tangents' relu NTK carries ~1e-9 relative rounding (see test_kernels)
    tol = 1e-8 if act == "relu" else 1e-12
    np.testing.assert_allclose(mean, rm, rtol=0, atol=tol * np.abs(rm).max())
    np.testing.assert_allclose(cov, rc, rtol=0, atol=tol * np.abs(rc).max())
    std = model.predict(ref["X_test"], return_std=True, time=ref["times"])[1]
    np.testing.assert_allclose(std[..., 0], np.sqrt(np.einsum("tii->ti", cov)), rtol=1e-10)


def _dense_ensemble(X, Y, Xt, t, lr, reg, depth, b_std):
    """Lee et al. (2019) eqs. (15)-(16) with scipy's matrix exponential (no eigh)."""
    ntk, nngp = NTK(depth=depth, b_std=b_std), NNGP(depth=depth, b_std=b_std)
    n, k = Y.shape
    Th = ntk(X) + reg * np.eye(n)
    A = linalg.solve(Th, np.eye(n) - linalg.expm(-lr * t * Th / (n * k)), assume_a="sym")
    Tt = ntk(Xt, X)
    mean = Tt @ A @ Y
    cross = Tt @ A @ nngp(X, Xt)
    cov = nngp(Xt) + Tt @ A @ nngp(X) @ A @ Tt.T - cross - cross.T
    return mean, cov


def test_ensemble_equals_dense_matrix_exponential(data):
    X, y, Xt = data
    Y = np.stack([y, y**2], axis=1)
    model = InfiniteWidthRegressor(depth=2, b_std=0.2, learning_rate=0.5, diag_reg=1e-3)
    model.fit(X, Y)
    for t in (0.3, 7.0, 250.0):
        m, c = model.predict(Xt, return_cov=True, time=t)
        dm, dc = _dense_ensemble(X, Y, Xt, t, 0.5, 1e-3, 2, 0.2)
        np.testing.assert_allclose(m, dm, atol=1e-9 * np.abs(dm).max())
        np.testing.assert_allclose(c, dc, atol=1e-9 * np.abs(dc).max())


def test_ensemble_limits(data):
    X, y, Xt = data
    model = InfiniteWidthRegressor(depth=3, activation="erf", b_std=0.1, diag_reg=0.05)
    model.fit(X, y)
    ridge = NTKRidge(alpha=0.05, depth=3, activation="erf", b_std=0.1).fit(X, y)
    np.testing.assert_allclose(model.predict(Xt), ridge.predict(Xt), atol=1e-10)
    # t = 0: the NNGP prior of the initial networks
    m0, c0 = model.predict(Xt, return_cov=True, time=0.0)
    np.testing.assert_array_equal(m0, 0.0)
    np.testing.assert_allclose(c0, NNGP(depth=3, activation="erf", b_std=0.1)(Xt), atol=1e-12)
    # an array of times equals one call per time; time=None uses self.time
    ts = np.array([0.5, 20.0, np.inf])
    ms, ss = model.predict(Xt, return_std=True, time=ts)
    for i, t in enumerate(ts):
        mi, si = model.set_params(time=t).predict(Xt, return_std=True)
        np.testing.assert_allclose(ms[i], mi, atol=1e-12)
        np.testing.assert_allclose(ss[i], si, atol=1e-12)
    # nngp posterior at t = inf is the NNGP Gaussian process posterior
    nn = InfiniteWidthRegressor(depth=3, activation="erf", b_std=0.1, diag_reg=0.05,
                                posterior="nngp").fit(X, y)
    gp = GaussianProcessRegressor(kernel=NNGP(depth=3, activation="erf", b_std=0.1),
                                  alpha=0.05, optimizer=None).fit(X, y)
    for a, b in zip(nn.predict(Xt, return_std=True), gp.predict(Xt, return_std=True),
                    strict=True):
        np.testing.assert_allclose(a, b, atol=1e-10)


def test_ensemble_singular_kernel_is_pseudo_inverse(rng):
    X = rng.standard_normal((10, 2))
    X = np.vstack([X, X])  # duplicate rows: the NTK is singular
    y = np.concatenate([np.sin(X[:10, 0])] * 2)
    model = InfiniteWidthRegressor(depth=1, b_std=0.5, diag_reg=0.0).fit(X, y)
    ridge = NTKRidge(alpha=1e-10, depth=1, b_std=0.5).fit(X[:10], y[:10])
    np.testing.assert_allclose(model.predict(X[:10]), y[:10], atol=1e-6)
    np.testing.assert_allclose(model.predict(X[:3] + 0.1), ridge.predict(X[:3] + 0.1),
                               atol=1e-6)


def test_classifier_is_one_hot_regression():
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    clf = InfiniteWidthClassifier(depth=2, b_std=0.1, diag_reg=1e-2).fit(X[::2], y[::2])
    reg = InfiniteWidthRegressor(depth=2, b_std=0.1, diag_reg=1e-2)
    reg.fit(X[::2], np.eye(3)[y[::2]])
    np.testing.assert_allclose(clf.decision_function(X[1::2]), reg.predict(X[1::2]), atol=1e-12)
    assert clf.score(X[1::2], y[1::2]) > 0.9
    curve = clf.predict(X[1::2], time=[0.0, 10.0, np.inf])
    assert curve.shape == (3, 75)
    # two classes: one column each (symmetric one-hot), decision = their difference
    two = InfiniteWidthClassifier().fit(X[:100], y[:100])
    out = InfiniteWidthRegressor().fit(X[:100], np.eye(2)[y[:100]]).predict(X[:3])
    np.testing.assert_allclose(two.decision_function(X[:3]), out[:, 1] - out[:, 0], atol=1e-12)


# ------------------------------------------------------------ kernel gradients
@pytest.mark.parametrize("cls", [NTK, NNGP])
@pytest.mark.parametrize("act,depth,b_std", ARCHS)
def test_kernel_gradient_equals_finite_differences(cls, act, depth, b_std, rng):
    X = rng.standard_normal((8, 5))
    X = np.vstack([X, np.zeros((1, 5)), 3.0 * X[:1], X[1:2] + 1e-9, -X[2:3]])
    k = cls(depth=depth, activation=act, w_std=1.3, b_std=b_std)
    K, G = k(X, eval_gradient=True)
    np.testing.assert_array_equal(K, k(X))
    assert G.shape == (12, 12, 1 if b_std is None else 2)
    h = 1e-5
    for i in range(k.theta.size):
        tp, tm = k.theta.copy(), k.theta.copy()
        tp[i] += h
        tm[i] -= h
        fd = (k.clone_with_theta(tp)(X) - k.clone_with_theta(tm)(X)) / (2 * h)
        np.testing.assert_allclose(G[..., i], fd, rtol=0, atol=1e-6 * np.abs(fd).max())
    # the Numba twin equals the NumPy reference
    w2, b2 = 1.69, 0.0 if b_std is None else b_std**2
    ref = nn_gradient(X, depth, act, w2, b2, cls is NTK, engine="numpy")
    fused = nn_gradient(X, depth, act, w2, b2, cls is NTK, engine="numba")
    np.testing.assert_allclose(fused, ref, rtol=0, atol=1e-12 * np.abs(ref).max())


def test_hyperparameters_and_bounds():
    k = NTK(depth=2, w_std=2.0, b_std=0.5)
    np.testing.assert_allclose(k.theta, np.log([2.0, 0.5]))
    np.testing.assert_allclose(k.bounds, np.log([[1e-1, 1e1], [1e-5, 1e2]]))
    assert k.clone_with_theta(np.log([3.0, 0.1])).get_params()["w_std"] == pytest.approx(3.0)
    assert NTK(b_std=None).theta.shape == (1,)
    assert NNGP(b_std=0.0).n_dims == 1
    assert NTK(w_std_bounds="fixed", b_std=0.3).n_dims == 1


# the NTK fits these 30 rows closely: the white noise level runs to its lower bound
@pytest.mark.filterwarnings("ignore:The optimal value found:sklearn.exceptions.ConvergenceWarning")
def test_gp_fit_raises_log_marginal_likelihood(data):
    X, y, _ = data
    kernel = NTK(depth=2, w_std=0.5, b_std=2.0) + WhiteKernel(1.0)
    gp = GaussianProcessRegressor(kernel=kernel, random_state=0).fit(X, y)
    initial = gp.log_marginal_likelihood(kernel.theta)
    assert gp.log_marginal_likelihood_value_ > initial + 1.0
    assert not np.allclose(gp.kernel_.theta, kernel.theta)
    # sklearn's LML gradient (through our kernel gradient) matches finite differences
    lml, grad = gp.log_marginal_likelihood(kernel.theta, eval_gradient=True)
    h = 1e-6
    for i in range(kernel.theta.size):
        e = np.zeros_like(kernel.theta)
        e[i] = h
        fd = (gp.log_marginal_likelihood(kernel.theta + e)
              - gp.log_marginal_likelihood(kernel.theta - e)) / (2 * h)
        assert grad[i] == pytest.approx(fd, rel=1e-6, abs=1e-6)
    # a kernelkit kernel without free hyperparameters is left alone by the optimiser
    frozen = RBF(gamma=1.0, gamma_bounds="fixed")
    fixed = GaussianProcessRegressor(kernel=frozen + WhiteKernel()).fit(X, y)
    assert fixed.kernel_.k1 == frozen
    assert isinstance(SkRBF(), SkRBF)  # the sklearn kernel keeps its name


# ----------------------------------------------------------------- bad input
def test_bad_input(data):
    X, y, Xt = data
    with pytest.raises(ValueError, match="time"):
        InfiniteWidthRegressor(time=-1.0).fit(X, y)
    with pytest.raises(ValueError, match="time must be a scalar"):
        InfiniteWidthRegressor(time=[1.0, 2.0]).fit(X, y)
    with pytest.raises(ValueError, match="learning_rate"):
        InfiniteWidthRegressor(learning_rate=0.0).fit(X, y)
    with pytest.raises(ValueError, match="diag_reg"):
        InfiniteWidthRegressor(diag_reg=-1.0).fit(X, y)
    with pytest.raises(ValueError, match="posterior"):
        InfiniteWidthRegressor(posterior="gp").fit(X, y)
    model = InfiniteWidthRegressor().fit(X, y)
    for bad in (-0.5, [1.0, -1.0], np.nan, "inf"):
        with pytest.raises(ValueError, match="time"):
            model.predict(Xt, time=bad)
    for est in (model, KernelRidge(kernel="rbf").fit(X, y)):
        with pytest.raises(ValueError, match="return_std and return_cov"):
            est.predict(Xt, return_std=True, return_cov=True)
        with pytest.raises(TypeError, match="return_std"):
            est.predict(Xt, return_std="yes")
        with kernelkit.config_context(working_memory=0.001):
            with pytest.raises(ValueError, match="return_cov=True on 9 rows"):
                est.predict(Xt, return_cov=True)
            est.predict(Xt, return_std=True)  # blockwise: fits any budget
    K = NTK()(X)
    pre = KernelRidge(kernel="precomputed").fit(K, y)
    with pytest.raises(ValueError, match="precomputed"):
        pre.predict(K[:3], return_std=True)
    with pytest.raises(ValueError, match="eval_gradient"):
        NTK(b_std=0.1)(X, Xt, eval_gradient=True)


def _expected_failures(estimator):
    if isinstance(estimator, InfiniteWidthClassifier):  # tested in test_ensemble_proba.py
        return {"check_decision_proba_consistency": (
            "predict_proba is the ensemble's P(f_1 > f_0) = Phi(decision / spread): the "
            "spread varies with x, so it is not a monotone function of the mean difference")}
    return {}


@parametrize_with_checks([InfiniteWidthRegressor(), InfiniteWidthClassifier()],
                         expected_failed_checks=_expected_failures)
def test_sklearn_compatible(estimator, check):
    check(estimator)


# ------------------------------------------------- rejected fits change nothing
def _snapshot(model):
    return dict(vars(model))


def _outputs(model, Xt):
    if isinstance(model, InfiniteWidthClassifier):
        return (model.decision_function(Xt, time=np.inf),)
    return model.predict(Xt, return_std=True, time=np.inf)


@pytest.mark.parametrize("cls", [InfiniteWidthRegressor, InfiniteWidthClassifier])
def test_rejected_fit_leaves_model_as_it_was(cls, rng, monkeypatch):
    X3, X5, Xt = (rng.standard_normal((20, 3)), rng.standard_normal((20, 5)),
                  rng.standard_normal((4, 3)))
    y = (X3[:, 0] > 0).astype(int) if cls is InfiniteWidthClassifier else np.sin(X3[:, 0])
    model = cls(depth=2, b_std=0.1, diag_reg=1e-3).fit(X3, y)
    before, state = _outputs(model, Xt), _snapshot(model)

    def unchanged():
        assert vars(model).keys() == state.keys()
        for k, v in state.items():
            assert vars(model)[k] is v or k in model.get_params(), k
        for a, b in zip(_outputs(model, Xt), before, strict=True):
            np.testing.assert_array_equal(a, b)

    good = model.get_params()
    bad_params = [{"posterior": "gp"}, {"depth": 0}, {"activation": "tanh"}, {"w_std": -1.0},
                  {"time": -1.0}, {"learning_rate": 0.0}, {"diag_reg": -1.0},
                  {"cache_size": -1.0}, {"backend": "tpu"}]
    for bad in bad_params:  # parameters are checked before the (5-feature) data
        model.set_params(**bad)
        with pytest.raises(ValueError, match=next(iter(bad))):
            model.fit(X5, y)
        unchanged()  # the fitted parameters, not the rejected ones, make the predictions
        model.set_params(**good)
    X_nan = X5.copy()
    X_nan[0, 0] = np.nan
    y_bad = np.full(20, 0.5) if cls is InfiniteWidthClassifier else np.full(20, np.inf)
    for Xb, yb in ((X_nan, y), (X5, y_bad), (X5[:1], y[:1])):
        with pytest.raises(ValueError):
            model.fit(Xb, yb)
        unchanged()
    with pytest.raises(ValueError, match=f"{cls.__name__}: fit on 20 rows.*cache_size"):
        model.set_params(cache_size=1e-3).fit(X5, y)  # the memory guard, after the data
    model.set_params(**good)
    unchanged()

    def broken(*args, **kwargs):
        raise linalg.LinAlgError("injected failure midway")

    monkeypatch.setattr("kernelkit.ridge._ensemble.linalg.eigh", broken)
    with pytest.raises(linalg.LinAlgError, match="injected"):
        model.fit(X5, y)
    unchanged()


# ------------------------------------------- eigenvalue floors relative to scale
def _converged_ensemble(Th, Kn, Tt, Kt, Ktt, Y):
    """Lee et al. (2019) at t = inf, diag_reg = 0, from a well-conditioned NTK."""
    A = np.linalg.inv(Th)
    cross = Tt @ A @ Kt.T
    return Tt @ A @ Y, Ktt + Tt @ A @ Kn @ A @ Tt.T - cross - cross.T


def test_ensemble_deep_relu_is_scale_equivariant(data):
    """relu without bias: w_std**2 -> c w_std**2 multiplies NTK and NNGP by s = c**(depth+1),
    leaving the converged mean unchanged and multiplying the covariance by s. depth=60 at
    w_std=1 (kernel ~1e-16) once fell below an absolute eigenvalue floor: ~100% off."""
    X, y, Xt = data
    depth, w = 60, np.sqrt(2.0)
    k = dict(depth=depth, w_std=w)
    ntk, nngp = NTK(**k), NNGP(**k)
    mean, cov = _converged_ensemble(ntk(X), nngp(X), ntk(Xt, X), nngp(Xt, X), nngp(Xt), y)
    s = (w * w) ** (depth + 1)
    model = InfiniteWidthRegressor(depth=depth, diag_reg=0.0).fit(X, y)
    m, c = model.predict(Xt, return_cov=True)
    np.testing.assert_allclose(m, mean, rtol=0, atol=1e-9 * np.abs(mean).max())
    np.testing.assert_allclose(c * s, cov, rtol=0, atol=1e-8 * np.abs(cov).max())
    # finite time: the w_std=1 network at time s t is the rescaled one at time t
    t = 0.05
    Th = ntk(X)
    A = linalg.solve(Th, np.eye(len(y)) - linalg.expm(-t * Th / len(y)), assume_a="sym")
    np.testing.assert_allclose(model.predict(Xt, time=s * t), ntk(Xt, X) @ A @ y, rtol=0,
                               atol=1e-9 * np.abs(mean).max())


def test_ensemble_depth_1000_is_not_zero(data):
    """depth=1000, w_std=1: kernel values ~1e-298. The reference is the closed form on the
    same kernel matrices multiplied by 2**1001 (exact), which brings them to O(1e3)."""
    X, y, Xt = data
    ntk, nngp, s = NTK(depth=1000), NNGP(depth=1000), 2.0**1001
    mats = [f * s for f in (ntk(X), nngp(X), ntk(Xt, X), nngp(Xt, X), nngp(Xt))]
    mean, cov = _converged_ensemble(*mats, y)
    m, c = InfiniteWidthRegressor(depth=1000, diag_reg=0.0).fit(X, y).predict(
        Xt, return_cov=True)
    assert np.abs(mean).max() > 0.05
    np.testing.assert_allclose(m, mean, rtol=0, atol=1e-7 * np.abs(mean).max())
    np.testing.assert_allclose(c * s, cov, rtol=0, atol=1e-7 * np.abs(cov).max())


def test_ridge_pseudo_inverse_floor_is_relative(rng):
    """alpha=0 on duplicate rows takes the pseudo-inverse path; the relu NTK without bias is
    homogeneous (k(cx, cy) = c^2 k(x, y)), so the std at scale 1e-9 is 1e-9 times the std
    at scale 1, which is k(x,x) - k_x K^+ k_x with NumPy's pinv (an absolute floor made
    every direction null at 1e-9: the prior std)."""
    X = rng.standard_normal((10, 3))
    X, Xt = np.vstack([X, X]), rng.standard_normal((4, 3))
    y = np.sin(X[:, 0])
    k = NTK(depth=1)
    K, Kt = k(X), k(Xt, X)
    ref = np.sqrt(k.diag(Xt) - np.einsum("ij,jk,ik->i", Kt, np.linalg.pinv(K, hermitian=True),
                                         Kt))
    for c in (1.0, 1e-9):
        with pytest.warns(linalg.LinAlgWarning):
            model = KernelRidge(alpha=0.0, kernel=k).fit(c * X, y)
            sd = model.predict(c * Xt, return_std=True)[1]
        np.testing.assert_allclose(sd / c, ref, rtol=1e-6)


# ------------------------------------------------------------ memory guards
def test_ridge_std_factor_is_cached_and_guarded(data, monkeypatch):
    from kernelkit.ridge import _gp

    X, y, Xt = data
    calls = []
    real = _gp.potrf
    monkeypatch.setattr(_gp, "potrf", lambda *a, **k: calls.append(1) or real(*a, **k))
    model = KernelRidge(alpha=0.1, kernel=RBF(gamma=0.5)).fit(X, y)
    gp = GaussianProcessRegressor(kernel=RBF(gamma=0.5), alpha=0.1, optimizer=None).fit(X, y)
    gs = gp.predict(Xt, return_std=True)[1]
    for _ in range(3):
        np.testing.assert_allclose(model.predict(Xt, return_std=True)[1], gs, atol=1e-10)
    np.testing.assert_allclose(model.predict(Xt, return_cov=True)[1],
                               gp.predict(Xt, return_cov=True)[1], atol=1e-10)
    assert len(calls) == 1  # factored once, not per call
    model.set_params(alpha=1.0)  # new parameters: a new factor, with the new alpha
    gp1 = GaussianProcessRegressor(kernel=RBF(gamma=0.5), alpha=1.0, optimizer=None).fit(X, y)
    model.fit(X, y)
    np.testing.assert_allclose(model.predict(Xt, return_std=True)[1],
                               gp1.predict(Xt, return_std=True)[1], atol=1e-10)
    assert len(calls) == 2
    state = dict(vars(model))
    # the factor must fit cache_size: refused before anything (n, n) is allocated
    model.set_params(cache_size=1e-3)
    with pytest.raises(ValueError, match="KernelRidge: predict.*30 training rows.*RLSNystroem"):
        model.predict(Xt[:1], return_std=True)  # the cached factor belongs to other params
    assert vars(model).keys() == state.keys()
    np.testing.assert_array_equal(model.predict(Xt), model.set_params(cache_size=4096)
                                  .predict(Xt))


def test_ensemble_fit_guard_at_100k_rows():
    """10^5 rows would need ~370 GiB: refused at once (only X is validated)."""
    X = np.random.default_rng(0).standard_normal((100_000, 2))
    with pytest.raises(ValueError, match=r"InfiniteWidthRegressor: fit on 100,000 rows needs "
                                         r"373 GiB.*cache_size=4096 MiB.*RLSNystroem"):
        InfiniteWidthRegressor().fit(X, X[:, 0])


def test_ridge_moments_on_sparse_X(rng):
    import scipy.sparse as sp

    X = sp.random(40, 6, density=0.3, format="csr", random_state=0)
    Xt = sp.random(7, 6, density=0.3, format="csc", random_state=1)
    y = rng.standard_normal(40)
    sparse = KernelRidge(kernel="rbf", gamma=0.3, alpha=0.1).fit(X, y)
    gp = GaussianProcessRegressor(kernel=SkRBF(length_scale=np.sqrt(0.5 / 0.3)), alpha=0.1,
                                  optimizer=None).fit(X.toarray(), y)
    gm, gs = gp.predict(Xt.toarray(), return_std=True)
    with kernelkit.config_context(working_memory=0.001):  # a few rows per block
        m, s = sparse.predict(Xt, return_std=True)
    np.testing.assert_allclose(m, gm, atol=1e-10)
    np.testing.assert_allclose(s, gs, atol=1e-10)
    np.testing.assert_allclose(sparse.predict(Xt, return_cov=True)[1],
                               gp.predict(Xt.toarray(), return_cov=True)[1], atol=1e-10)


# ------------------------------------------- diag_reg="auto" and the noisy predictive
@functools.lru_cache(maxsize=1)
def _diabetes():
    """Standardised diabetes split, and the test R^2 of NTKRidge with alpha tuned by exact
    leave-one-out (a dense NumPy eigendecomposition) on the training rows."""
    from sklearn.datasets import load_diabetes
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    X, y = load_diabetes(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0)
    sx = StandardScaler().fit(Xtr)
    mu, sd = ytr.mean(), ytr.std()
    Xtr, Xte, ytr, yte = sx.transform(Xtr), sx.transform(Xte), (ytr - mu) / sd, (yte - mu) / sd
    lam, V = np.linalg.eigh(NTK()(Xtr))
    z, V2 = V.T @ ytr, V**2
    alphas = 10.0 ** np.arange(-3, 3.01, 0.25)
    loo = [np.mean(((V @ (z / (lam + a))) / (V2 @ (1 / (lam + a))))**2) for a in alphas]
    best = alphas[int(np.argmin(loo))]
    return Xtr, Xte, ytr, yte, NTKRidge(alpha=best).fit(Xtr, ytr).score(Xte, yte)


@pytest.mark.parametrize("posterior", ["ntk", "nngp"])
def test_default_does_not_interpolate_noisy_diabetes(posterior):
    """The default diag_reg scores within 0.05 of kernel ridge with a tuned alpha, and its
    95% noisy-predictive intervals cover 0.90-0.99 of the test targets (diag_reg=0 once
    scored R^2 0.09 with intervals covering 15%)."""
    Xtr, Xte, ytr, yte, ridge = _diabetes()
    model = InfiniteWidthRegressor(posterior=posterior).fit(Xtr, ytr)
    assert model.score(Xte, yte) > ridge - 0.05
    mean, std = model.predict(Xte, return_std=True)
    cover = np.mean(np.abs(yte - mean) <= 1.96 * std)
    assert 0.90 <= cover <= 0.99, cover
    # the latent band alone covers far less: the noise is what a new target adds
    latent = model.predict(Xte, return_std=True, include_noise=False)[1]
    assert np.mean(np.abs(yte - mean) <= 1.96 * latent) < 0.6
    interp = InfiniteWidthRegressor(posterior=posterior, diag_reg=0.0).fit(Xtr, ytr)
    assert interp.score(Xte, yte) < ridge - 0.2


def _nll(params, K, y):
    """-log N(y | 0, c K + s I) for log (c, s), dense."""
    c, s = np.exp(params)
    C = c * K + s * np.eye(len(y))
    return 0.5 * (np.linalg.slogdet(C)[1] + y @ np.linalg.solve(C, y))


def test_auto_noise_is_the_maximum_likelihood_noise(data):
    """diag_reg_ and noise_variance_ are the evidence maximisers of y ~ N(0, c Theta + s I)
    found by a dense scipy minimisation: diag_reg_ = s / c to the grid's step (10**0.1),
    noise_variance_ = s to the same precision."""
    from scipy.optimize import minimize

    X, y, _ = data
    y = y + 0.5 * np.random.default_rng(3).standard_normal(len(y))
    K = NTK(depth=2, b_std=0.3)(X)
    res = minimize(_nll, np.log([1.0, 0.1]), args=(K, y), method="Nelder-Mead",
                   options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 4000})
    c, s = np.exp(res.x)
    model = InfiniteWidthRegressor(depth=2, b_std=0.3).fit(X, y)
    assert abs(np.log10(model.diag_reg_ / (s / c))) <= 0.05 + 1e-9
    assert model.noise_variance_ == pytest.approx(s, rel=0.15)
    # given its ratio, the noise is the closed-form ML noise r y^T (K + r I)^{-1} y / n
    r = model.diag_reg_
    ml = r * y @ np.linalg.solve(K + r * np.eye(len(y)), y) / len(y)
    assert model.noise_variance_ == pytest.approx(ml, rel=1e-10)
    # the mean is NTK kernel regression with that alpha
    np.testing.assert_allclose(model.predict(X), NTKRidge(alpha=r, depth=2, b_std=0.3)
                               .fit(X, y).predict(X), rtol=0, atol=1e-10)


def test_noisy_predictive_is_latent_plus_noise(data):
    """var(y*) = var(f*) + noise_variance_ exactly, per output; covariances gain noise on
    the diagonal only; include_noise=None includes it only for an estimated noise."""
    X, y, Xt = data
    Y = np.stack([y, 1e3 * np.cos(X[:, 0])], axis=1)  # two outputs, two noise levels
    model = InfiniteWidthRegressor(depth=2, b_std=0.2).fit(X, Y)
    times = [3.0, np.inf]
    m, s_lat = model.predict(Xt, return_std=True, include_noise=False, time=times)
    m2, s_all = model.predict(Xt, return_std=True, time=times)
    np.testing.assert_array_equal(m, m2)
    noise = model.noise_variance_
    assert noise.shape == (2,) and noise[1] > 1e4 * noise[0]
    np.testing.assert_allclose(s_all**2, s_lat**2 + noise, rtol=1e-13)
    _, c_lat = model.predict(Xt, return_cov=True, include_noise=False)
    _, c_all = model.predict(Xt, return_cov=True)
    assert c_lat.shape == (9, 9) and c_all.shape == (9, 9, 2)
    for j in range(2):
        np.testing.assert_allclose(c_all[..., j], c_lat + noise[j] * np.eye(9), rtol=1e-13)
    np.testing.assert_allclose(np.sqrt(np.diag(c_lat)), s_lat[1, :, 0], rtol=1e-10)
    # a given diag_reg: latent by default (as GaussianProcessRegressor's alpha), noise on ask
    fixed = InfiniteWidthRegressor(depth=2, b_std=0.2, diag_reg=0.05).fit(X, y)
    assert fixed.noise_variance_ == fixed.diag_reg_ == 0.05
    lat = fixed.predict(Xt, return_std=True)[1]
    noisy = fixed.predict(Xt, return_std=True, include_noise=True)[1]
    np.testing.assert_allclose(noisy**2, lat**2 + 0.05, rtol=1e-13)
    _, c1 = fixed.predict(Xt, return_cov=True, include_noise=True)
    np.testing.assert_allclose(c1, fixed.predict(Xt, return_cov=True)[1] + 0.05 * np.eye(9),
                               rtol=1e-13)
    with pytest.raises(TypeError, match="include_noise"):
        fixed.predict(Xt, return_std=True, include_noise="yes")


def test_auto_noise_is_scale_invariant(data):
    """y * c: the same ratio, the mean times c, the noise times c^2; relu without bias,
    X * 2**k: the ratio (kernel units) times 4**k, the same mean."""
    X, y, Xt = data
    base = InfiniteWidthRegressor(depth=2).fit(X, y)
    big = InfiniteWidthRegressor(depth=2).fit(X, 1e6 * y)
    assert big.diag_reg_ == pytest.approx(base.diag_reg_, rel=1e-12)
    assert big.noise_variance_ == pytest.approx(1e12 * base.noise_variance_, rel=1e-10)
    np.testing.assert_allclose(big.predict(Xt), 1e6 * base.predict(Xt), rtol=1e-10)
    wide = InfiniteWidthRegressor(depth=2).fit(8.0 * X, y)
    assert wide.diag_reg_ == pytest.approx(64.0 * base.diag_reg_, rel=1e-12)
    np.testing.assert_allclose(wide.predict(8.0 * Xt), base.predict(Xt), rtol=1e-10)
    bad = InfiniteWidthRegressor(diag_reg="mle")
    with pytest.raises(ValueError, match="diag_reg must be 'auto'"):
        bad.fit(X, y)


# --------------------------------------------- extreme scales of X, y and the kernel
@pytest.mark.parametrize("ex", [-380, -150, 0, 150, 289, 480])
@pytest.mark.parametrize("ey", [-900, 0, 266, 900])
def test_ensemble_at_extreme_scales_is_exactly_rescaled(rng, ex, ey):
    """relu without bias is homogeneous: on (2**ex X, 2**ey y) the converged ensemble's mean
    is 2**ey times, its latent std 2**ex times the unit-scale one (the closed form, dense,
    at unit scale), and the noisy std is hypot of latent and noise. X ~ 1e-114 with
    y ~ 1e80 once predicted an inf mean, X ~ 1e87 a NaN std."""
    X, Xt = rng.standard_normal((8, 2)), rng.standard_normal((3, 2))
    y = rng.standard_normal(8)
    ntk, nngp = NTK(depth=1), NNGP(depth=1)
    mean, cov = _converged_ensemble(ntk(X), nngp(X), ntk(Xt, X), nngp(Xt, X), nngp(Xt), y)
    sx, sy = 2.0**ex, 2.0**ey
    model = InfiniteWidthRegressor(diag_reg=0.0).fit(X * sx, y * sy)
    m, s = model.predict(Xt * sx, return_std=True)
    np.testing.assert_allclose(m / sy, mean, rtol=1e-9, atol=1e-9 * np.abs(mean).max())
    np.testing.assert_allclose(s / sx, np.sqrt(np.diag(cov)), rtol=1e-7)
    auto = InfiniteWidthRegressor().fit(X * sx, y * sy)
    unit = InfiniteWidthRegressor().fit(X, y)
    np.testing.assert_allclose(auto.predict(Xt * sx) / sy, unit.predict(Xt), rtol=1e-10)
    s_lat = auto.predict(Xt * sx, return_std=True, include_noise=False)[1]
    s_all = auto.predict(Xt * sx, return_std=True)[1]
    u_lat, u_all = (unit.predict(Xt, return_std=True, include_noise=f)[1] for f in (False, True))
    np.testing.assert_allclose(s_lat / sx, u_lat, rtol=1e-9)
    noise_std = sy * np.sqrt(unit.noise_variance_)
    np.testing.assert_allclose(s_all, np.hypot(s_lat, noise_std), rtol=1e-12)
    assert np.all(np.isfinite(s_all))
    nngp_big = InfiniteWidthRegressor(posterior="nngp").fit(X * sx, y * sy)
    nngp_unit = InfiniteWidthRegressor(posterior="nngp").fit(X, y)
    m1, s1 = nngp_big.predict(Xt * sx, return_std=True, include_noise=False)
    m0, s0 = nngp_unit.predict(Xt, return_std=True, include_noise=False)
    np.testing.assert_allclose(m1 / sy, m0, rtol=1e-10)
    np.testing.assert_allclose(s1 / sx, s0, rtol=1e-9)
    if abs(2 * ex) < 1000 and abs(2 * ey) < 1000:
        c = auto.predict(Xt * sx, return_cov=True)[1]
        np.testing.assert_allclose(np.diag(c), s_all**2, rtol=1e-9)
    elif 2 * max(ex, ey) > 1020:
        with pytest.raises(ValueError, match="X and y: the predictive covariance"):
            auto.predict(Xt * sx, return_cov=True)


def test_fuzz_cases_have_their_closed_forms():
    """The two fuzz failures, with diag_reg=0: two rows of opposite sign have a diagonal
    NTK (relu, angle pi), so the mean interpolates y and the latent covariance is 0; two
    identical rows: the mean is their targets' average, the latent std 0."""
    X = np.array([[1.2573e-114], [-1.3210e-114]])
    y = np.array([6.404e80, 1.049e80])
    model = InfiniteWidthRegressor(diag_reg=0.0).fit(X, y)
    m, c = model.predict(X, return_cov=True)
    np.testing.assert_allclose(m, y, rtol=1e-12)
    assert np.all(np.abs(c) <= 1e-12 * NNGP()(X).max())
    X = np.array([[1.2573e87], [1.2573e87]])
    y = np.array([0.64, 0.10])
    m, s = InfiniteWidthRegressor(diag_reg=0.0).fit(X, y).predict(X, return_std=True)
    np.testing.assert_allclose(m, 0.37, rtol=1e-12)
    assert np.all(s <= 1e-7 * 1.2573e87)


def test_kernel_underflow_names_X(rng):
    """erf is not homogeneous: at X ~ 1e-160 its kernel values are subnormal (1e-320, a
    few significant bits), at 1e-300 zero; a ValueError names X instead of a silent 0."""
    X = rng.standard_normal((6, 2))
    for scale in (1e-160, 1e-300):
        with pytest.raises(ValueError, match="X: the kernel's values .* underflow"):
            InfiniteWidthRegressor(activation="erf").fit(X * scale, X[:, 0])
    zero = InfiniteWidthRegressor(diag_reg=0.0).fit(np.zeros((4, 2)), np.arange(4.0))
    np.testing.assert_array_equal(zero.predict(np.ones((2, 2))), 0.0)  # a true zero kernel


@pytest.mark.parametrize("cls", [NTK, NNGP])
def test_default_box_corner_has_finite_likelihood(cls):
    # L-BFGS-B's first step goes to the corner of the box (largest w_std and b_std,
    # smallest noise); a -inf log-likelihood there stopped scikit-learn's optimiser at
    # its start without a warning (w_std up to 100: kernel entries ~1e20 over 1e-5 noise).
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(25, noise=1.0, random_state=0)
    X, y = np.repeat(3 * X, 4, axis=0), np.repeat(y, 4)  # repeated rows, as in diamonds
    kernel = cls(depth=3, w_std=1.0, b_std=0.1) + WhiteKernel(0.1)
    gp = GaussianProcessRegressor(kernel, optimizer=None).fit(X, (y - y.mean()) / y.std())
    corner = kernel.bounds[:, 1].copy()
    corner[-1] = kernel.bounds[-1, 0]
    assert np.isfinite(gp.log_marginal_likelihood(corner))
