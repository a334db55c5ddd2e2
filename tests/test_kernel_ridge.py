"""Kernel ridge estimators against exact dense solutions and scikit-learn."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy.linalg import LinAlgWarning
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.kernel_ridge import KernelRidge as SkKernelRidge
from sklearn.linear_model import RidgeClassifier
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from kernelkit import KernelRidge, KernelRidgeClassifier, NTKRidge, NTKRidgeClassifier
from kernelkit.kernels import NTK, RBF, Matern


@pytest.fixture
def reg_data():
    X, y = load_diabetes(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    return X[:200], (y[:200] - y[:200].mean()) / y.std(), X[200:260]


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_ntk_ridge_equals_dense_solution(reg_data, backend):
    X, y, X_test = reg_data
    alpha = 0.3
    K = NTK(depth=2, b_std=0.1)(X)
    dual = np.linalg.solve(K + alpha * np.eye(len(X)), y)
    model = NTKRidge(alpha=alpha, depth=2, b_std=0.1, backend=backend).fit(X, y)
    assert model.backend_ == backend
    assert_allclose(model.dual_coef_, dual, rtol=1e-8)
    assert_allclose(model.predict(X_test), NTK(depth=2, b_std=0.1)(X_test, X) @ dual, rtol=1e-8)


@pytest.mark.parametrize("kernel, params", [("rbf", {}), ("laplacian", {}),
                                            ("polynomial", {"degree": 2}), ("linear", {})])
def test_kernel_ridge_equals_sklearn(reg_data, kernel, params):
    X, y, X_test = reg_data
    ours = KernelRidge(alpha=0.5, kernel=kernel, gamma=0.05, **params).fit(X, y)
    ref = SkKernelRidge(alpha=0.5, kernel=kernel, gamma=0.05, **params).fit(X, y)
    assert_allclose(ours.predict(X_test), ref.predict(X_test), rtol=1e-7, atol=1e-10)


def test_multi_output_alpha_per_target_and_sample_weight(reg_data):
    X, y, X_test = reg_data
    Y = np.column_stack([y, y**2])
    sw = np.random.default_rng(0).uniform(0.5, 2.0, len(y))
    ours = KernelRidge(alpha=[0.1, 1.0], kernel="rbf", gamma=0.05).fit(X, Y, sample_weight=sw)
    ref = SkKernelRidge(alpha=[0.1, 1.0], kernel="rbf", gamma=0.05).fit(X, Y, sample_weight=sw)
    assert ours.predict(X_test).shape == (60, 2)
    assert_allclose(ours.predict(X_test), ref.predict(X_test), rtol=1e-7, atol=1e-10)
    # integer weights act as repeated samples
    w = np.ones(len(y))
    w[:10] = 3
    rep = np.concatenate([np.arange(len(y)), np.repeat(np.arange(10), 2)])
    a = NTKRidge(alpha=0.2).fit(X, y, sample_weight=w).predict(X_test)
    b = NTKRidge(alpha=0.2).fit(X[rep], y[rep]).predict(X_test)
    assert_allclose(a, b, rtol=1e-6, atol=1e-9)


def test_interpolation_and_singular_fallback():
    X = np.random.default_rng(1).standard_normal((30, 3))
    y = np.sin(X[:, 0])
    model = NTKRidge(alpha=0.0, depth=2).fit(X, y)
    assert_allclose(model.predict(X), y, atol=1e-8)  # alpha=0 interpolates
    Xd = np.vstack([X, X[:5]])  # duplicates: K is singular
    yd = np.concatenate([y, y[:5]])
    with pytest.warns(LinAlgWarning, match="minimum-norm"):
        dup = NTKRidge(alpha=0.0, depth=2).fit(Xd, yd)
    assert np.all(np.isfinite(dup.dual_coef_))
    assert_allclose(dup.predict(X), y, atol=1e-6)


def test_classifier_matches_ridge_classifier_encoding():
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    labels = np.where(y == 1, "benign", "malignant")
    clf = NTKRidgeClassifier(alpha=1.0, depth=2).fit(X[:300], labels[:300])
    assert list(clf.classes_) == ["benign", "malignant"]
    K = NTK(depth=2)(X[:300])
    target = np.where(labels[:300] == "malignant", 1.0, -1.0)
    scores = NTK(depth=2)(X[300:], X[:300]) @ np.linalg.solve(K + np.eye(300), target)
    assert_allclose(clf.decision_function(X[300:]), scores, rtol=1e-8)
    assert clf.score(X[300:], labels[300:]) > 0.9
    # the linear kernel reproduces RidgeClassifier without intercept
    lin = KernelRidgeClassifier(alpha=1.0, kernel="linear").fit(X[:300], y[:300])
    ref = RidgeClassifier(alpha=1.0, fit_intercept=False).fit(X[:300], y[:300])
    assert_allclose(lin.decision_function(X[300:]), ref.decision_function(X[300:]), rtol=1e-7)


def test_multiclass_decision_shape():
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    clf = KernelRidgeClassifier(alpha=0.1, kernel="rbf", gamma=0.5).fit(X, y)
    assert clf.decision_function(X).shape == (150, 3)
    assert clf.score(X, y) > 0.9


def test_pipeline_and_grid_search_over_depth_and_alpha(reg_data):
    X, y, _ = reg_data
    pipe = make_pipeline(StandardScaler(), NTKRidge())
    grid = GridSearchCV(pipe, {"ntkridge__depth": [1, 3], "ntkridge__alpha": [0.1, 10.0]}, cv=3)
    grid.fit(X, y)
    assert grid.best_params_["ntkridge__depth"] in (1, 3)
    assert len(grid.cv_results_["mean_test_score"]) == 4
    assert np.all(np.isfinite(grid.cv_results_["mean_test_score"]))


def test_grid_search_tunes_kernel_object_params(reg_data):
    X, y, _ = reg_data
    grid = GridSearchCV(KernelRidge(kernel=Matern(nu=1.5)),
                        {"kernel__gamma": [0.001, 0.05], "kernel__nu": [0.5, 2.5]}, cv=3).fit(X, y)
    assert set(grid.best_params_) == {"kernel__gamma", "kernel__nu"}
    best = grid.best_estimator_.kernel
    assert isinstance(best, Matern) and best.gamma == grid.best_params_["kernel__gamma"]


def test_precomputed_and_callable_kernels(reg_data):
    X, y, X_test = reg_data
    K = RBF(0.05)(X)
    pre = KernelRidge(alpha=0.5, kernel="precomputed").fit(K, y)
    call = KernelRidge(alpha=0.5, kernel=lambda A, B: RBF(0.05)(A, B)).fit(X, y)
    named = KernelRidge(alpha=0.5, kernel="rbf", gamma=0.05).fit(X, y)
    assert_allclose(pre.predict(RBF(0.05)(X_test, X)), named.predict(X_test), rtol=1e-10)
    assert_allclose(call.predict(X_test), named.predict(X_test), rtol=1e-10)
    mat = KernelRidge(alpha=0.5, kernel="matern", gamma=0.05, kernel_params={"nu": 0.5}).fit(X, y)
    assert_allclose(mat.predict(X_test),
                    KernelRidge(alpha=0.5, kernel=Matern(0.05, 0.5)).fit(X, y).predict(X_test))


def test_predict_is_blockwise_consistent(reg_data):
    import kernelkit

    X, y, X_test = reg_data
    model = NTKRidge(alpha=0.1, depth=3).fit(X, y)
    full = model.predict(X_test)
    tol = dict(rtol=1e-10, atol=1e-13 * np.abs(full).max())  # summation order differs
    with kernelkit.config_context(working_memory=1e-3):
        assert_allclose(model.predict(X_test), full, **tol)
    assert_allclose(model.predict(X_test[:7]), full[:7], **tol)


def test_inputs_not_modified(reg_data):
    X, y, X_test = reg_data
    Xc, yc, Xtc = X.copy(), y.copy(), X_test.copy()
    sw = np.ones(len(y))
    NTKRidge().fit(X, y, sample_weight=sw).predict(X_test)
    np.testing.assert_array_equal(X, Xc)
    np.testing.assert_array_equal(y, yc)
    np.testing.assert_array_equal(X_test, Xtc)
    np.testing.assert_array_equal(sw, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        KernelRidge(kernel=RBF(0.1)).fit(X, y)


# ------------------------------------------------- a rejected call changes nothing
def _state(model):
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in vars(model).items()}


def _assert_same_state(model, before):
    after = vars(model)
    assert after.keys() == before.keys()
    for k, v in before.items():
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(after[k], v)
        else:
            assert after[k] is v or after[k] == v, k


class _FailingKernel:
    """A matrix callable that raises on its n-th evaluation (a failure midway)."""

    def __init__(self, fail_at):
        self.calls, self.fail_at = 0, fail_at

    def __call__(self, A, B):
        self.calls += 1
        if self.calls >= self.fail_at:
            raise RuntimeError("kernel failed midway")
        return RBF(0.5)(A, B)


@pytest.mark.parametrize("est", [
    KernelRidge(kernel="rbf", gamma=0.5), KernelRidge(kernel="rbf", gamma=0.5, solver="pcg"),
    KernelRidgeClassifier(kernel="rbf", gamma=0.5), NTKRidge(), NTKRidgeClassifier()],
    ids=["kr", "kr-pcg", "krc", "ntk", "ntkc"])
@pytest.mark.parametrize("bad", ["param", "X", "y", "sample_weight", "kernel"])
def test_rejected_fit_leaves_the_model_as_it_was(est, bad):
    rng = np.random.RandomState(0)
    X3, X5 = rng.rand(40, 3), rng.rand(40, 5)
    y = rng.rand(40) > 0.5 if "Classifier" in type(est).__name__ else rng.rand(40)
    model = est.fit(X3, y)
    pred, before, params = model.predict(X3), _state(model), model.get_params()
    if bad == "param":
        model.set_params(alpha=-1.0)
        args, err = (X5, y), ValueError
    elif bad == "X":
        args, err = (np.full((40, 5), np.nan), y), ValueError
    elif bad == "y":
        args, err = (X5, y[:10]), ValueError
    elif bad == "sample_weight":
        args, err = (X5, y, -np.ones(40)), ValueError
    else:
        if isinstance(model, (NTKRidge, NTKRidgeClassifier)):
            pytest.skip("the NTK ridge estimators take no kernel parameter")
        model.set_params(kernel=_FailingKernel(fail_at=1))  # after validate_data reset
        args, err = (X5, y), RuntimeError
    with pytest.raises(err):
        model.fit(*args)
    model.set_params(**params)
    _assert_same_state(model, before)
    np.testing.assert_array_equal(model.predict(X3), pred)
    with pytest.raises(ValueError, match="features"):
        model.predict(X5)


def test_parameters_are_validated_before_the_data():
    # a bad parameter is reported as such even when the data are bad too
    with pytest.raises(ValueError, match="alpha must be"):
        KernelRidge(alpha=-1.0).fit(np.full((5, 2), np.nan), np.ones(5))
    with pytest.raises(ValueError, match="solver must be"):
        KernelRidgeClassifier(solver="lsqr").fit([[1.0]], [0])
    with pytest.raises(ValueError, match="kernel must be one of"):
        KernelRidge(kernel="nope").fit([[np.inf]], [1.0])


# ------------------------------------------------------ ill-conditioned solves
@pytest.mark.parametrize("w_big", [1e14, 1e20, 1e-14])
def test_extreme_sample_weight_is_solved_exactly(w_big):
    # (K + alpha W^-1) c = y is well conditioned whatever W: the dense reference; the
    # weighted system (S K S + alpha I) has condition ~1e14 and was sent to the eigen
    # fallback (off by 1.05, with a wrong "singular" warning)
    rng = np.random.RandomState(0)
    X, y = rng.uniform(size=(50, 3)), rng.randn(50)
    w = np.ones(50)
    w[7] = w_big
    K = RBF(2.0)(X)
    ref = K @ np.linalg.solve(K + 0.1 * np.diag(1.0 / w), y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no singular-matrix warning either
        ours = KernelRidge(alpha=0.1, kernel="rbf", gamma=2.0).fit(X, y, sample_weight=w)
    assert_allclose(ours.predict(X), ref, rtol=1e-9, atol=1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LinAlgWarning)  # scikit-learn warns, and is exact
        sk = SkKernelRidge(alpha=0.1, kernel="rbf", gamma=2.0).fit(X, y, sample_weight=w)
    assert_allclose(ours.predict(X), sk.predict(X), rtol=1e-7, atol=1e-7)


def _rank_deficient(kind, scale):
    rng = np.random.RandomState(3)
    X = rng.randn(30, 3)
    if kind == "rbf":  # duplicated rows: rank 25 of 30
        X = np.vstack([X[:25], X[:5]])
        return X, RBF(0.5)(X) * scale, dict(kernel="rbf", gamma=0.5)
    if kind == "poly":  # degree 2 in 2 features: rank <= 6; gamma, coef0 scale K by scale
        X, g = X[:, :2], np.sqrt(scale)
        return X, (g * X @ X.T + g) ** 2, dict(kernel="poly", degree=2, gamma=g, coef0=g)
    X = X * np.sqrt(scale)
    return X, X @ X.T, dict(kernel="linear")  # rank 3


@pytest.mark.parametrize("kind", ["linear", "poly", "rbf", "precomputed"])
@pytest.mark.parametrize("scale", [1e-12, 1.0, 1e8])
def test_minimum_norm_fallback_is_numpy_pinv(kind, scale):
    # alpha = 0 on a singular K: the fallback announces the minimum-norm least-squares
    # solution; its cutoff is relative (an absolute floor zeroed kernels of scale 1e-12)
    X, K, kw = _rank_deficient(kind, scale)
    y = np.random.RandomState(4).randn(len(X))
    if kind == "precomputed" or (kind == "rbf" and scale != 1.0):
        X, kw = K, dict(kernel="precomputed")
    with pytest.warns(LinAlgWarning, match="minimum-norm"):
        model = KernelRidge(alpha=0.0, **kw).fit(X, y)
    ref = np.linalg.pinv(K, rtol=None, hermitian=True) @ y
    assert np.abs(ref).max() > 0
    assert_allclose(model.dual_coef_, ref, rtol=1e-6, atol=1e-6 * np.abs(ref).max())


# ------------------------------------------------------------ sparse, callables
@pytest.mark.parametrize("test_sparse", [False, True])
def test_sparse_fit_gives_gp_std_of_the_dense_fit(reg_data, test_sparse):
    import scipy.sparse as sp

    X, y, X_test = reg_data
    dense = KernelRidge(alpha=0.5, kernel="rbf", gamma=0.05).fit(X, y)
    sparse = KernelRidge(alpha=0.5, kernel="rbf", gamma=0.05).fit(sp.csr_matrix(X), y)
    Xt = sp.csr_matrix(X_test) if test_sparse else X_test
    mean, std = sparse.predict(Xt, return_std=True)
    mean_d, std_d = dense.predict(X_test, return_std=True)
    assert_allclose(mean, mean_d, rtol=1e-8, atol=1e-10)
    assert_allclose(std, std_d, rtol=1e-7, atol=1e-10)


def test_callable_kernel_returning_sparse_matrix_is_a_matrix_callable(reg_data):
    import scipy.sparse as sp

    X, y, X_test = reg_data
    calls = []

    def kern(A, B):
        calls.append(A.shape)
        return sp.csr_matrix(A @ B.T)

    ours = KernelRidge(alpha=0.5, kernel=kern).fit(X, y)
    assert all(len(s) == 2 for s in calls)  # never called row by row
    ref = SkKernelRidge(alpha=0.5, kernel="linear").fit(X, y)
    assert_allclose(ours.predict(X_test), ref.predict(X_test), rtol=1e-8, atol=1e-10)


def test_matrix_callable_error_is_not_retried_pair_by_pair(reg_data):
    X, y, _ = reg_data
    kern = _FailingKernel(fail_at=2)
    model = KernelRidge(kernel=kern).fit(X, y)  # first call: the matrix
    with pytest.raises(RuntimeError, match="kernel failed midway"):
        model.predict(X[:3])
    assert kern.calls == 2  # the error is the user's, not one per row pair


# ------------------------------------------------------------------ dtypes
@pytest.mark.parametrize("dt", [">f8", "<f4", np.float16])
@pytest.mark.parametrize("solver", ["cholesky", "pcg"])
def test_non_native_and_low_precision_inputs(dt, solver):
    rng = np.random.RandomState(0)
    X, y, w = rng.uniform(size=(60, 3)), rng.randn(60), rng.uniform(0.5, 2.0, 60)
    Xd, yd, wd = X.astype(dt), y.astype(dt), w.astype(dt)
    # the reference sees exactly the values the estimator was given, in float64
    X64, y64, w64 = (np.asarray(a, np.float64) for a in (Xd, yd, wd))
    K = RBF(1.0)(X64)
    ref = K @ np.linalg.solve(K + 0.5 * np.diag(1.0 / w64), y64)
    model = KernelRidge(alpha=0.5, kernel="rbf", gamma=1.0, solver=solver, tol=1e-10)
    assert_allclose(model.fit(Xd, yd, sample_weight=wd).predict(Xd), ref, rtol=1e-7,
                    atol=1e-8)
    assert model.dual_coef_.dtype == np.float64 and model.dual_coef_.dtype.isnative
    ref1 = K @ np.linalg.solve(K + 0.5 * np.eye(60), y64)  # no weights: y alone as given
    assert_allclose(model.fit(Xd, yd).predict(Xd), ref1, rtol=1e-7, atol=1e-8)
    Kd = RBF(1.0)(X64).astype(">f8")
    pre = KernelRidge(alpha=0.5, kernel="precomputed").fit(Kd, y64, sample_weight=w64)
    assert_allclose(pre.predict(Kd), ref, rtol=1e-9, atol=1e-10)
