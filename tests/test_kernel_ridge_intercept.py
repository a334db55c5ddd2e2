"""``fit_intercept`` of KernelRidge / KernelRidgeClassifier (and the CV estimators' refit):
the exact bordered system ``[[K + alpha W^-1, 1], [1^T, 0]] [c; b] = [y; 0]`` solved
densely by numpy, for every solver; constant-shift invariance; the exact leave-one-out
values of the bordered fit against explicit refits; the Gaussian-process moments with a
vague prior on ``b`` against their dense closed form (Rasmussen & Williams 2006, 2.42)."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.utils.estimator_checks import parametrize_with_checks

from kernelkit import KernelRidge, KernelRidgeClassifier, KernelRidgeClassifierCV, KernelRidgeCV

GAMMA = 0.3


def _data(n=240, targets=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    f = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2
    Y = np.column_stack([f + 4.0 + j + 0.1 * rng.normal(size=n) for j in range(targets)])
    w = rng.uniform(0.2, 3.0, n)
    return X, (Y[:, 0] if targets == 1 else Y), w


def _bordered(K, y, w, alpha):
    """Dense numpy solve of the bordered system (w > 0): ``(c, b)``."""
    n = len(y)
    A = np.zeros((n + 1, n + 1))
    A[:n, :n] = K + alpha * np.diag(1.0 / w)
    A[:n, n] = A[n, :n] = 1.0
    sol = np.linalg.solve(A, np.r_[y, 0.0])
    return sol[:n], sol[n]


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("solver, tol, rtol", [("cholesky", 1e-4, 1e-8), ("auto", 1e-4, 1e-8),
                                               ("pcg", 1e-12, 1e-8)])
def test_equals_dense_bordered_system(weighted, solver, tol, rtol):
    X, y, w = _data()
    w = w if weighted else None
    alpha = 0.05
    c, b = _bordered(rbf_kernel(X, gamma=GAMMA), y, np.ones(len(y)) if w is None else w, alpha)
    m = KernelRidge(alpha, kernel="rbf", gamma=GAMMA, fit_intercept=True, solver=solver,
                    tol=tol, random_state=0).fit(X, y, sample_weight=w)
    assert isinstance(m.intercept_, float)
    assert_allclose(m.intercept_, b, rtol=rtol)
    assert_allclose(m.dual_coef_, c, rtol=0, atol=rtol * np.abs(c).max())
    Xt = _data(50, seed=1)[0]
    assert_allclose(m.predict(Xt), rbf_kernel(Xt, X, gamma=GAMMA) @ c + b, rtol=rtol)


@pytest.mark.parametrize("solver, tol", [("cholesky", 1e-4), ("pcg", 1e-12)])
def test_per_target_alpha_and_zero_weights(solver, tol):
    X, Y, w = _data(targets=2)
    w[:7] = 0.0  # zero-weight rows: c_i = 0, the rest is the bordered system without them
    alphas = np.array([0.02, 0.3])
    m = KernelRidge(alphas, kernel="rbf", gamma=GAMMA, fit_intercept=True, solver=solver,
                    tol=tol, random_state=0).fit(X, Y, sample_weight=w)
    K = rbf_kernel(X[7:], gamma=GAMMA)
    for j in range(2):
        c, b = _bordered(K, Y[7:, j], w[7:], alphas[j])
        assert_allclose(m.intercept_[j], b, rtol=1e-8)
        assert_allclose(m.dual_coef_[7:, j], c, atol=1e-8 * np.abs(c).max())
        assert_allclose(m.dual_coef_[:7, j], 0.0, atol=1e-12)


def test_precomputed_equals_kernel():
    X, y, w = _data()
    K = rbf_kernel(X, gamma=GAMMA)
    a = KernelRidge(0.1, kernel="precomputed", fit_intercept=True).fit(K, y, sample_weight=w)
    b = KernelRidge(0.1, kernel="rbf", gamma=GAMMA, fit_intercept=True).fit(X, y, sample_weight=w)
    assert_allclose(a.intercept_, b.intercept_, rtol=1e-10)
    assert_allclose(a.predict(K[:20]), b.predict(X[:20]), rtol=1e-10)


@pytest.mark.parametrize("solver, tol", [("cholesky", 1e-4), ("pcg", 1e-10)])
def test_constant_shift_moves_only_the_intercept(solver, tol):
    X, y, w = _data()
    kw = dict(kernel="rbf", gamma=GAMMA, fit_intercept=True, solver=solver, tol=tol,
              random_state=0)
    a = KernelRidge(0.05, **kw).fit(X, y, sample_weight=w)
    b = KernelRidge(0.05, **kw).fit(X, y + 1e3, sample_weight=w)
    assert_allclose(b.predict(X), a.predict(X) + 1e3, rtol=1e-9)
    assert_allclose(b.intercept_, a.intercept_ + 1e3, rtol=1e-9)
    # without the intercept a shift is penalised: the predictions do not follow it
    c = KernelRidge(0.05, kernel="rbf", gamma=GAMMA).fit(X, y + 1e3)
    assert np.abs(c.predict(X) - a.predict(X) - 1e3).max() > 1.0


def test_default_is_sklearn_kernel_ridge():
    from sklearn.kernel_ridge import KernelRidge as SkKernelRidge

    X, y, w = _data()
    ours = KernelRidge(0.1, kernel="rbf", gamma=GAMMA).fit(X, y, sample_weight=w)
    peer = SkKernelRidge(alpha=0.1, kernel="rbf", gamma=GAMMA).fit(X, y, sample_weight=w)
    assert ours.intercept_ == 0.0
    assert_allclose(ours.predict(X), peer.predict(X), rtol=1e-9)


@pytest.mark.parametrize("weighted", [False, True])
def test_classifier_decision_and_exact_loo(weighted):
    X, y, w = _data()
    labels = np.digitize(y, np.quantile(y, [0.3, 0.7]))  # three classes
    if weighted:
        w[5] = 0.0  # a zero-weight row: out of the fit, its value is the fit's own
    w = w if weighted else None
    ww = np.ones(len(y)) if w is None else w
    live = ww > 0
    K = rbf_kernel(X, gamma=GAMMA)
    clf = KernelRidgeClassifier(0.1, kernel="precomputed", fit_intercept=True,
                                solver="cholesky")
    clf.fit(K, labels, sample_weight=w)
    Y = np.where(labels[:, None] == np.arange(3), 1.0, -1.0)
    rows, dec = clf._fit_targets(K.copy(), Y, w, oos=True)
    for j in range(3):
        c, b = _bordered(K[np.ix_(live, live)], Y[live, j], ww[live], 0.1)
        assert_allclose(clf.intercept_[j], b, rtol=1e-8)
        assert_allclose(clf.decision_function(K[:9])[:, j], K[:9, live] @ c + b, rtol=1e-8)
        if weighted:
            assert_allclose(dec[5, j], K[5, live] @ c + b, rtol=1e-8)
    # the calibration's leave-one-out values: explicit bordered refits without row i
    for i in (0, 17, 101):
        keep = (np.arange(len(y)) != i) & live
        for j in range(3):
            c, b = _bordered(K[np.ix_(keep, keep)], Y[keep, j], ww[keep], 0.1)
            assert_allclose(dec[i, j], K[i, keep] @ c + b, rtol=1e-8, atol=1e-10)


def test_classifier_pcg_holdout_calibration_uses_the_intercept():
    X, y, _ = _data(400)
    labels = y > np.median(y)
    kw = dict(kernel="rbf", gamma=GAMMA, fit_intercept=True, random_state=0)
    pcg = KernelRidgeClassifier(0.1, solver="pcg", tol=1e-10, **kw).fit(X, labels)
    chol = KernelRidgeClassifier(0.1, solver="cholesky", **kw).fit(X, labels)
    assert_allclose(pcg.intercept_, chol.intercept_, rtol=1e-7)
    assert_allclose(pcg.decision_function(X), chol.decision_function(X), atol=1e-7)
    assert (pcg.predict_proba(X).argmax(1) == pcg.predict(X).astype(int)).all()


def test_gp_moments_with_a_vague_prior_on_the_intercept():
    X, y, w = _data(120)
    Xt = _data(15, seed=3)[0]
    alpha = 0.2
    m = KernelRidge(alpha, kernel="rbf", gamma=GAMMA, fit_intercept=True).fit(X, y, w)
    mean, std = m.predict(Xt, return_std=True)
    _, cov = m.predict(Xt, return_cov=True)
    Ky = rbf_kernel(X, gamma=GAMMA) + alpha * np.diag(1.0 / w)
    Ks = rbf_kernel(X, Xt, gamma=GAMMA)
    one = np.ones(len(y))
    Ki1, KiKs = np.linalg.solve(Ky, one), np.linalg.solve(Ky, Ks)
    b = Ki1 @ y / (one @ Ki1)
    R = 1.0 - one @ KiKs
    cov_ref = rbf_kernel(Xt, gamma=GAMMA) - Ks.T @ KiKs + np.outer(R, R) / (one @ Ki1)
    assert_allclose(mean, Ks.T @ np.linalg.solve(Ky, y - b) + b, rtol=1e-9)
    assert_allclose(cov, cov_ref, atol=1e-9)
    assert_allclose(std, np.sqrt(np.diag(cov_ref)), rtol=1e-7)


def test_cv_refit_is_kernel_ridge_with_intercept():
    X, y, w = _data()
    cv = KernelRidgeCV((0.01, 0.1, 1.0), kernel="rbf", param_grid={"gamma": [0.1, GAMMA]},
                       fit_intercept=True).fit(X, y, sample_weight=w)
    est = cv.best_estimator_
    assert isinstance(est, KernelRidge) and est.fit_intercept
    K = rbf_kernel(X, gamma=cv.best_params_["gamma"])
    c, b = _bordered(K, y, w, cv.alpha_)
    assert_allclose(cv.intercept_, b, rtol=1e-9)
    assert_allclose(cv.predict(X[:10]), K[:10] @ c + b, rtol=1e-9)
    mean, std = cv.predict(X[:10], return_std=True)
    assert_allclose((mean, std), est.predict(X[:10], return_std=True), rtol=1e-12)


def test_classifier_cv_intercept():
    X, y, _ = _data()
    labels = y > np.quantile(y, 0.85)  # unbalanced: the intercept is far from 0
    cv = KernelRidgeClassifierCV((0.01, 0.1, 1.0), kernel="rbf", gamma=GAMMA,
                                 fit_intercept=True).fit(X, labels)
    est = cv.best_estimator_
    c, b = _bordered(rbf_kernel(X, gamma=GAMMA), np.where(labels, 1.0, -1.0),
                     np.ones(len(y)), cv.alpha_)
    assert est.fit_intercept and abs(b) > 0.1
    assert_allclose(est.intercept_, [b], rtol=1e-9)
    with pytest.raises(ValueError, match="fit_intercept=True needs solver='exact'"):
        KernelRidgeClassifierCV(kernel="rbf", solver="nystrom", n_centers=20,
                                fit_intercept=True).fit(X, labels)


def test_bad_fit_intercept_is_a_type_error_before_the_data():
    with pytest.raises(TypeError, match="fit_intercept"):
        KernelRidge(fit_intercept="yes").fit([[np.nan]], [1.0])
    with pytest.raises(TypeError, match="fit_intercept"):
        KernelRidgeClassifier(fit_intercept=1).fit([[np.nan]], [1.0])


@parametrize_with_checks([KernelRidge(fit_intercept=True),
                          KernelRidge(kernel="rbf", fit_intercept=True, solver="pcg", tol=1e-8),
                          KernelRidgeClassifier(kernel="rbf", fit_intercept=True)],
                         expected_failed_checks=lambda est: (
                             {"check_sample_weight_equivalence_on_dense_data": "calibration "
                              "on leave-one-out values (see test_sklearn_compat.py)",
                              "check_sample_weight_equivalence_on_sparse_data": "idem"}
                             if hasattr(est, "calibration") else {}))
def test_sklearn_compatible_with_intercept(estimator, check):
    check(estimator)


@pytest.mark.usefixtures("auto_model_from_1024")
def test_auto_pcg_and_its_bail_out_keep_the_intercept(monkeypatch):
    from kernelkit.ridge import _auto

    X, Y, w = _data(1200, targets=2)
    kw = dict(alpha=1e-2, kernel="rbf", gamma=GAMMA, fit_intercept=True, random_state=0)
    monkeypatch.setattr(_auto, "cholesky_seconds", lambda *a, **k: 1e9)  # PCG chosen
    m = KernelRidge(**kw).fit(X, Y, sample_weight=w)
    ref = KernelRidge(solver="pcg", **kw).fit(X, Y, sample_weight=w)
    assert m.solver_ == "pcg"
    np.testing.assert_array_equal(m.intercept_, ref.intercept_)
    np.testing.assert_array_equal(m.dual_coef_, ref.dual_coef_)
    monkeypatch.undo()
    # predicted cheap PCG, no patience at the first check: the exact Cholesky solution
    monkeypatch.setattr(_auto, "estimated_iterations", lambda *a: 1.0)
    monkeypatch.setattr(_auto, "_BAIL_MARGIN", 0.0)
    kw["alpha"] = 1e-6
    m = KernelRidge(**kw).fit(X, Y, sample_weight=w)
    ref = KernelRidge(solver="cholesky", **kw).fit(X, Y, sample_weight=w)
    assert m.solver_ == "cholesky"
    np.testing.assert_array_equal(m.intercept_, ref.intercept_)
    np.testing.assert_array_equal(m.dual_coef_, ref.dual_coef_)


@pytest.mark.filterwarnings("ignore::scipy.linalg.LinAlgWarning")  # the announced fallback
@pytest.mark.parametrize("alpha", [0.0, 1e-14])
@pytest.mark.parametrize("weighted", [False, True])
def test_singular_system_gives_the_least_squares_intercept(alpha, weighted):
    """alpha = 0 with a linear kernel of rank d < n: 1 lies outside K's range, and the
    minimum-norm solution's intercept must fit the targets' part there (the limit alpha
    -> 0+): ordinary least squares (was -29.7 against 5.05 here)."""
    from sklearn.linear_model import LinearRegression

    rng = np.random.RandomState(0)
    X = rng.randn(40, 2)
    y = X @ [1.0, 2.0] + 5.0 + 0.1 * rng.randn(40)
    w = rng.rand(40) + 0.1 if weighted else None
    ols = LinearRegression().fit(X, y, sample_weight=w)
    model = KernelRidge(alpha=alpha, kernel="linear", fit_intercept=True,
                        solver="cholesky").fit(X, y, sample_weight=w)
    assert_allclose(model.intercept_, ols.intercept_, rtol=1e-10)
    assert_allclose(model.predict(X), ols.predict(X), rtol=1e-10, atol=1e-10)
    Y = np.column_stack([y, 2.0 * y - 1.0])  # per-target alphas: the eigen path
    multi = KernelRidge(alpha=[alpha, alpha], kernel="linear", fit_intercept=True,
                        solver="cholesky").fit(X, Y, sample_weight=w)
    assert_allclose(multi.intercept_, [ols.intercept_, 2.0 * ols.intercept_ - 1.0],
                    rtol=1e-10)
    one_alpha = KernelRidge(alpha=alpha, kernel="linear", fit_intercept=True,  # one u column
                            solver="cholesky").fit(X, Y, sample_weight=w)
    assert_allclose(one_alpha.intercept_, multi.intercept_, rtol=1e-10)
