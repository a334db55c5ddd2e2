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
