"""The linear kernel in the primal (``n >= 2 d``): KernelRidge[Classifier] and
KernelRidge[Classifier]CV against the dual path (Cholesky of ``K + alpha I``, or the
``n x n`` eigendecomposition through ``kernel="precomputed"``), scikit-learn's Ridge /
RidgeClassifier / RidgeCV (closed forms of the same models) and explicit refits."""

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from scipy.linalg import LinAlgWarning
from sklearn.linear_model import Ridge, RidgeClassifier, RidgeCV

from kernelkit import KernelRidge, KernelRidgeClassifier, KernelRidgeClassifierCV, KernelRidgeCV
from kernelkit.kernels import Linear
from kernelkit.ridge._primal import LinearEigen, primal_solve

ALPHAS = (1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0)


def _data(n=200, d=20, targets=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) + 0.3
    Y = X @ rng.normal(size=(d, targets)) + 2.0 + rng.normal(size=(n, targets))
    w = rng.uniform(0.2, 3.0, n)
    w[[3, 17]] = 0.0  # zero weights: their leave-one-out values are the full fit's
    return X, Y, w


def _rel(a, b):
    return float(np.max(np.abs(np.asarray(a) - b)) / np.max(np.abs(b)))


# ------------------------------------------------------------------ KernelRidge
@pytest.mark.parametrize("fit_intercept", [False, True])
@pytest.mark.parametrize("alpha", [1.0, np.array([1e-2, 1.0, 30.0])])
@pytest.mark.parametrize("weighted", [False, True])
def test_kernel_ridge_primal_equals_dual_and_ridge(fit_intercept, alpha, weighted):
    X, Y, w = _data()
    w = w if weighted else None
    kw = dict(alpha=alpha, fit_intercept=fit_intercept)
    primal = KernelRidge(**kw).fit(X, Y, sample_weight=w)
    dual = KernelRidge(solver="cholesky", **kw).fit(X, Y, sample_weight=w)
    assert primal.solver_ == "primal" and dual.solver_ == "cholesky"
    assert primal.n_iter_ == 1 and primal.preconditioner_rank_ is None
    assert _rel(primal.dual_coef_, dual.dual_coef_) < 1e-10
    assert_allclose(primal.intercept_, dual.intercept_, rtol=1e-10, atol=1e-12)
    assert_allclose(primal.predict(X), dual.predict(X), rtol=1e-10, atol=1e-10)
    peer = Ridge(alpha=alpha, fit_intercept=fit_intercept).fit(X, Y, sample_weight=w)
    assert_allclose(primal.predict(X[:50]), peer.predict(X[:50]), rtol=1e-10, atol=1e-10)
    # X^T c cancels (c ~ residual / alpha): the tolerance of that product
    assert_allclose(X.T @ primal.dual_coef_, peer.coef_.T, rtol=1e-8, atol=1e-8)


def test_kernel_ridge_primal_single_target_sparse_and_linear_object():
    X, Y, w = _data(targets=1)
    y = Y[:, 0]
    X[np.abs(X) < 0.8] = 0.0  # about half the entries zero
    dense = KernelRidge(alpha=0.5, fit_intercept=True).fit(X, y, sample_weight=w)
    sparse = KernelRidge(alpha=0.5, fit_intercept=True).fit(sp.csr_matrix(X), y,
                                                            sample_weight=w)
    obj = KernelRidge(alpha=0.5, kernel=Linear(), fit_intercept=True).fit(X, y, w)
    assert sparse.solver_ == obj.solver_ == "primal"
    assert dense.dual_coef_.shape == (200,) and isinstance(dense.intercept_, float)
    assert _rel(sparse.dual_coef_, dense.dual_coef_) < 1e-11
    assert _rel(obj.dual_coef_, dense.dual_coef_) < 1e-13
    assert_allclose(sparse.predict(sp.csr_matrix(X[:9])), dense.predict(X[:9]), rtol=1e-11)
    peer = Ridge(alpha=0.5).fit(X, y, sample_weight=w)
    assert_allclose(dense.intercept_, peer.intercept_, rtol=1e-10)


def test_primal_keeps_return_std_and_pickle():
    X, Y, _ = _data(targets=1)
    y = Y[:, 0]
    primal = KernelRidge(alpha=3.0).fit(X, y)
    dual = KernelRidge(alpha=3.0, solver="cholesky").fit(X, y)
    mean_p, std_p = primal.predict(X[:5], return_std=True)
    mean_d, std_d = dual.predict(X[:5], return_std=True)
    assert_allclose(mean_p, mean_d, rtol=1e-10)
    assert_allclose(std_p, std_d, rtol=1e-8)
    again = pickle.loads(pickle.dumps(primal))
    assert_array_equal(again.predict(X[:5]), primal.predict(X[:5]))


def test_primal_only_where_it_applies():
    X, Y, _ = _data(n=60, d=40, targets=1)  # n < 2 d: the dual's rules
    assert KernelRidge().fit(X, Y[:, 0]).solver_ == "cholesky"
    X, Y, _ = _data(targets=1)
    y = Y[:, 0]
    assert KernelRidge(kernel="poly", degree=1).fit(X, y).solver_ == "cholesky"
    assert KernelRidge(solver="cholesky").fit(X, y).solver_ == "cholesky"
    assert KernelRidge(cache_size=1e-4).fit(X, y).solver_ == "cholesky"  # d x d too large
    K = X @ X.T
    assert KernelRidge(kernel="precomputed").fit(K, y).solver_ == "cholesky"
    with warnings.catch_warnings():  # alpha = 0: singular in the dual, its path kept
        warnings.simplefilter("ignore", LinAlgWarning)
        zero = KernelRidge(alpha=0.0).fit(X, y)
        per = KernelRidge(alpha=np.array([0.0, 1.0])).fit(X, Y[:, :1].repeat(2, 1))
    assert zero.solver_ == per.solver_ == "cholesky"
    assert_allclose(zero.predict(X), X @ np.linalg.lstsq(X, y, rcond=None)[0], atol=1e-7)


def test_primal_small_alpha():
    X, Y, _ = _data(targets=1)
    y = Y[:, 0]
    for alpha in (1e-6, 1e-10):
        primal = KernelRidge(alpha=alpha).fit(X, y)
        peer = Ridge(alpha=alpha, fit_intercept=False, solver="svd").fit(X, y)
        # predictions from the d x d solve: eps cond(X^T X + alpha I), not cond(K + alpha I)
        assert_allclose(primal.predict(X), peer.predict(X), rtol=1e-10, atol=1e-10)
        c = primal.dual_coef_  # backward error of the dual system: a stable solve's eps
        K = X @ X.T
        res = np.linalg.norm(y - K @ c - alpha * c)
        assert res / (np.linalg.norm(K, 2) * np.linalg.norm(c) + np.linalg.norm(y)) < 1e-14


@pytest.mark.parametrize("fit_intercept", [False, True])
def test_primal_loo_values_equal_refits(fit_intercept):
    # the classifier's out-of-sample values: exact leave-one-out of the weighted fit
    X, Y, w = _data(n=120, d=10)
    est = KernelRidgeClassifier(alpha=0.7, fit_intercept=fit_intercept)
    rows, values = est._fit_targets(X, Y, w, oos=True)
    assert est.solver_ == "primal"
    assert_array_equal(rows, np.arange(120))
    for i in (0, 3, 17, 50, 119):  # 3 and 17 have zero weight: the full fit's values
        w_i = w.copy()
        w_i[i] = 0.0
        refit = Ridge(alpha=0.7, fit_intercept=fit_intercept).fit(X, Y, sample_weight=w_i)
        assert_allclose(values[i], refit.predict(X[i:i + 1])[0], rtol=1e-9, atol=1e-10)


def test_primal_solve_inv_diag_equals_dense():
    X, Y, w = _data(n=80, d=8)
    Xs = X * np.sqrt(w)[:, None]
    for alpha in (0.3, np.array([0.1, 1.0, 10.0])):
        Z, d = primal_solve(Xs, Y, alpha, return_inv_diag=True)
        for j in range(3):
            a = float(np.broadcast_to(alpha, 3)[j])
            G = np.linalg.inv(Xs @ Xs.T + a * np.eye(80))
            assert_allclose(Z[:, j], G @ Y[:, j], rtol=1e-10, atol=1e-12)
            dj = d if d.ndim == 1 else d[:, j]
            assert_allclose(dj, np.diag(G), rtol=1e-10)


@pytest.mark.parametrize("fit_intercept", [False, True])
def test_classifier_primal_calibration_equals_dual(fit_intercept):
    X, Y, w = _data(n=150, d=6)
    labels = np.digitize(Y[:, 0] - Y[:, 1], [-2.0, 2.0])  # three classes
    kw = dict(alpha=2.0, fit_intercept=fit_intercept, class_weight="balanced")
    primal = KernelRidgeClassifier(**kw).fit(X, labels, sample_weight=w)
    dual = KernelRidgeClassifier(solver="cholesky", **kw).fit(X, labels, sample_weight=w)
    assert primal.solver_ == "primal"
    assert_allclose(primal.predict_proba(X), dual.predict_proba(X), rtol=1e-8, atol=1e-10)
    assert_allclose(primal.decision_function(X), dual.decision_function(X), atol=1e-10)
    peer = RidgeClassifier(alpha=2.0, fit_intercept=fit_intercept,
                           class_weight="balanced").fit(X, labels, sample_weight=w)
    assert_array_equal(primal.predict(X), peer.predict(X))
    assert_allclose(primal.decision_function(X), peer.decision_function(X), atol=1e-9)


# -------------------------------------------------------------------- KernelRidgeCV
@pytest.mark.parametrize("fit_intercept", [False, True])
@pytest.mark.parametrize("cv", [None, "gcv", 4])
@pytest.mark.parametrize("per_target", [False, True])
def test_cv_primal_equals_dual(fit_intercept, cv, per_target):
    X, Y, w = _data()
    store = cv in (None, "gcv")
    kw = dict(alphas=ALPHAS, fit_intercept=fit_intercept, cv=cv, alpha_per_target=per_target,
              store_cv_results=store)
    for scoring in (None, "r2"):
        primal = KernelRidgeCV(scoring=scoring, **kw).fit(X, Y, sample_weight=w)
        dual = KernelRidgeCV(kernel="precomputed", scoring=scoring,
                             **kw).fit(X @ X.T, Y, sample_weight=w)
        assert primal.solver_ == "exact" and primal.best_estimator_.solver_ == "primal"
        assert_array_equal(primal.alpha_, dual.alpha_)
        assert_allclose(primal.scores_, dual.scores_, rtol=1e-8, atol=1e-12)
        if store:
            assert_allclose(primal.cv_results_, dual.cv_results_, rtol=1e-8,
                            atol=1e-8 * np.abs(dual.cv_results_).max())
        assert _rel(primal.best_estimator_.dual_coef_, dual.best_estimator_.dual_coef_) < 1e-8
        assert_allclose(primal.intercept_, dual.intercept_, rtol=1e-8, atol=1e-10)
        assert_allclose(primal.predict(X), dual.predict(X @ X.T), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("weighted", [False, True])
def test_cv_primal_equals_ridgecv_with_intercept(weighted):
    X, Y, w = _data(targets=1)
    y = Y[:, 0]
    w = w if weighted else None
    ours = KernelRidgeCV(ALPHAS, fit_intercept=True, store_cv_results=True).fit(X, y, w)
    peer = RidgeCV(ALPHAS, fit_intercept=True, store_cv_results=True).fit(X, y, w)
    assert ours.alpha_ == peer.alpha_
    assert_allclose(ours.best_score_, peer.best_score_, rtol=1e-8)
    assert_allclose(ours.cv_results_, peer.cv_results_, rtol=1e-7, atol=1e-10)
    assert_allclose(ours.predict(X), peer.predict(X), rtol=1e-9, atol=1e-9)


def test_cv_primal_sparse_equals_dense():
    X, Y, w = _data()
    X[np.abs(X) < 0.8] = 0.0
    kw = dict(alphas=ALPHAS, fit_intercept=True, store_cv_results=True)
    dense = KernelRidgeCV(**kw).fit(X, Y, sample_weight=w)
    sparse = KernelRidgeCV(**kw).fit(sp.csr_matrix(X), Y, sample_weight=w)
    assert_allclose(sparse.cv_results_, dense.cv_results_, rtol=1e-9, atol=1e-12)
    assert_allclose(sparse.predict(sp.csr_matrix(X)), dense.predict(X), rtol=1e-10)


def test_cv_auto_picks_primal_at_large_n():
    # beyond the exact path's n x n size, solver="auto" would take the Nystrom path
    rng = np.random.default_rng(3)
    X = rng.normal(size=(6000, 5))
    labels = (X[:, 0] + 0.5 * rng.normal(size=6000) > 0).astype(int)
    clf = KernelRidgeClassifierCV(alphas=(1e-2, 10.0, 1e4)).fit(X, labels)
    assert clf.solver_ == "exact" and clf.best_estimator_.solver_ == "primal"
    peer = RidgeClassifier(alpha=clf.alpha_, fit_intercept=False).fit(X, labels)
    assert_array_equal(clf.predict(X), peer.predict(X))
    assert np.all(np.isfinite(clf.predict_proba(X[:10])))


def test_linear_eigen_gcv_and_kfold_closed_form():
    X, Y, w = _data(n=60, d=5, targets=2)
    sw = np.sqrt(w)
    u = sw.copy()
    ridge = LinearEigen(X, Y * sw[:, None], sw, u)
    Xs = X * sw[:, None]
    for alpha in (0.05, 5.0):
        G = Xs @ Xs.T + alpha * np.eye(60)
        Gi = np.linalg.inv(G)
        M = Gi - np.outer(Gi @ u, Gi @ u) / (u @ Gi @ u)
        b = (u @ Gi @ (Y * sw[:, None])) / (u @ Gi @ u)
        c = M @ (Y * sw[:, None])
        assert_allclose(ridge.intercept(alpha), b, rtol=1e-10)
        assert_allclose(ridge.dual(alpha), c, rtol=1e-9, atol=1e-12)
        assert_allclose(ridge.gcv_residuals(alpha), c * 60 / np.trace(M), rtol=1e-9,
                        atol=1e-12)
        Xq = X[:7] + 1.0
        assert_allclose(ridge.predict_from(ridge.projected(Xq), alpha),
                        Xq @ Xs.T @ c + b, rtol=1e-9, atol=1e-10)


def test_cv_primal_tiny_alpha_rank_deficient_equals_refits():
    # duplicated and zero columns, alpha far below the dual eigendecomposition's
    # round-off (it warns there): the primal's null space is exact, its leave-one-out
    # values are those of explicit refits
    rng = np.random.default_rng(1)
    X = rng.normal(size=(100, 6))
    X = np.column_stack([X, X[:, :2], np.zeros((100, 3))])
    y = rng.normal(size=100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        cv = KernelRidgeCV((1e-12, 1.0), fit_intercept=True, store_cv_results=True).fit(X, y)
    refit = np.empty(100)
    for i in range(100):
        keep = np.arange(100) != i
        peer = Ridge(alpha=1e-12, solver="svd").fit(X[keep], y[keep])
        refit[i] = (y[i] - peer.predict(X[i:i + 1])[0]) ** 2
    assert_allclose(cv.cv_results_[:, 0], refit, rtol=1e-7, atol=1e-12)
    fit = KernelRidge(alpha=1e-8, fit_intercept=True).fit(X, y)
    assert_allclose(fit.predict(X), Ridge(alpha=1e-8, solver="svd").fit(X, y).predict(X),
                    rtol=1e-10, atol=1e-12)


def test_primal_refuses_an_overflowing_gram_as_the_dual_does():
    # |x| ~ 1e154: X^T X overflows float64; the primal path must not predict zeros
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(50, 3)) * 1e154, rng.normal(size=50)
    for est, target in ((KernelRidge(alpha=1.0), y), (KernelRidgeClassifier(), y > 0),
                        (KernelRidgeCV(), y)):
        with pytest.raises(ValueError, match="too large in magnitude"):
            est.fit(X, target)
        assert not hasattr(est, "dual_coef_")
    with pytest.raises(ValueError, match="too large in magnitude"):
        KernelRidge(alpha=1.0, solver="cholesky").fit(X, y)


def test_auto_grid_refuses_a_kernel_scale_that_underflows():
    # |x| ~ 1e-160: the linear kernel's diagonal is subnormal and the scaled grid would
    # reach 0 (its scores NaN); the error must name the scale, not scoring or cv
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(50, 3)) * 1e-160, rng.normal(size=50)
    for est, target in ((KernelRidgeCV(), y), (KernelRidgeClassifierCV(), y > 0)):
        with pytest.raises(ValueError, match="below float64's normal range; rescale X"):
            est.fit(X, target)
        assert not hasattr(est, "alpha_")
    cv = KernelRidgeCV(alphas=[1e-3, 1.0]).fit(X, y)  # an explicit grid is the user's
    assert cv.alpha_ in (1e-3, 1.0)
