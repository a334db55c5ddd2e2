"""KernelRidgeCV's default ``alphas="auto"``: the decade grid times each kernel's mean
diagonal, its round-off points left out without a warning, and the explicit grids that
keep their meaning (and their warning).

Every expected value is computed independently: the same search on the explicitly scaled
grid, the kernel's diagonal from scikit-learn's pairwise kernels, repeated rows for
integer weights.
"""

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.metrics.pairwise import polynomial_kernel
from sklearn.model_selection import GridSearchCV

from kernelkit import KernelRidgeClassifierCV, KernelRidgeCV
from kernelkit.ridge._cv_scoring import DEFAULT_ALPHAS

GRID = np.array(DEFAULT_ALPHAS)


def _data(n=60, d=4, seed=0, shift=0.0, scale=1.0):
    rng = np.random.default_rng(seed)
    X = (rng.normal(size=(n, d)) + shift) * scale
    y = np.sin(X[:, 0] / scale) + 0.3 * X[:, 1] / scale + 0.2 * rng.normal(size=n)
    return X, y


def _sqnorms(X):
    return np.einsum("ij,ij->i", X, X)


def _strict_fit(est, X, y, **fit):
    """Fit with every warning an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return est.fit(X, y, **fit)


# ------------------------------------------------------ unit diagonal: today's results
@pytest.mark.parametrize("kw", [
    {},
    {"cv": "gcv"},
    {"cv": 3, "store_cv_results": False},
    {"param_grid": {"gamma": [0.1, 1.0]}},
    {"kernel": "laplacian", "fit_intercept": True},
    {"solver": "nystrom", "n_centers": 20, "random_state": 0},
])
@pytest.mark.parametrize("weighted", [False, True])
def test_auto_is_the_old_tuple_for_unit_diagonal_kernels(kw, weighted):
    X, y = _data()
    w = np.random.default_rng(1).uniform(0.2, 3.0, len(y)) if weighted else None
    kw = {"kernel": "rbf", "store_cv_results": "cv" not in kw, **kw}
    auto = KernelRidgeCV(**kw).fit(X, y, sample_weight=w)
    old = KernelRidgeCV(DEFAULT_ALPHAS, **kw).fit(X, y, sample_weight=w)
    assert auto.alpha_ == old.alpha_
    assert_array_equal(auto.alphas_, np.tile(GRID, (len(auto.candidate_params_), 1)))
    assert_array_equal(auto.scores_, old.scores_)
    if kw["store_cv_results"]:
        assert_array_equal(auto.cv_results_, old.cv_results_)
    assert_array_equal(auto.predict(X), old.predict(X))


def test_auto_rbf_classifier_is_the_old_tuple():
    X, y = _data()
    labels = np.digitize(y, [-0.5, 0.5])
    auto = KernelRidgeClassifierCV(kernel="rbf", gamma=0.5).fit(X, labels)
    old = KernelRidgeClassifierCV(DEFAULT_ALPHAS, kernel="rbf", gamma=0.5).fit(X, labels)
    assert auto.alpha_ == old.alpha_
    assert_array_equal(auto.scores_, old.scores_)


# ------------------------------------------------------- kernels of another scale
@pytest.mark.parametrize("cv", [None, "gcv", 3])
def test_linear_kernel_selects_as_the_explicitly_scaled_grid(cv):
    X, y = _data(scale=30.0)  # k(x, x) = ||x||^2 ~ 4 * 900
    scale = _sqnorms(X).mean()
    auto = _strict_fit(KernelRidgeCV(cv=cv), X, y)
    ref = KernelRidgeCV(GRID * scale, cv=cv).fit(X, y)
    assert_allclose(auto.alphas_, (GRID * scale)[None, :], rtol=1e-12)
    assert auto.alpha_ == ref.alpha_
    assert_allclose(auto.scores_, ref.scores_, rtol=1e-12)
    # the old grid sits far below this kernel's eigenvalues: it picks its top value
    assert KernelRidgeCV(DEFAULT_ALPHAS, cv=cv).fit(X, y).alpha_ == 10.0
    assert 10.0 < auto.alpha_ < GRID[-1] * scale


def test_weighted_scale_is_the_weighted_mean_diagonal_as_repeated_rows():
    X, y = _data(scale=10.0)
    w = np.random.default_rng(2).integers(1, 4, len(y))
    fit = KernelRidgeCV(kernel="polynomial", degree=2, gamma=0.1)
    weighted = clone(fit).fit(X, y, sample_weight=w)
    diag = (0.1 * _sqnorms(X) + 1.0) ** 2
    assert_allclose(weighted.alphas_[0], GRID * np.sum(w * diag) / np.sum(w), rtol=1e-12)
    repeated = clone(fit).fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    assert_allclose(weighted.alphas_, repeated.alphas_, rtol=1e-12)  # (their LOO differ)
    unit = clone(fit).fit(X, y, sample_weight=np.full(len(y), 7.0))  # uniform weights:
    assert_allclose(unit.alphas_, clone(fit).fit(X, y).alphas_, rtol=1e-14)  # unweighted


def test_precomputed_sparse_and_primal_paths_share_the_scale():
    X, y = _data(scale=5.0)
    dense = KernelRidgeCV().fit(X, y)  # linear kernel, n >= 2 d: the primal path
    pre = KernelRidgeCV(kernel="precomputed").fit(X @ X.T, y)  # the dual eigh
    sparse = KernelRidgeCV().fit(sp.csr_matrix(X), y)
    for other in (pre, sparse):
        assert_allclose(other.alphas_, dense.alphas_, rtol=1e-12)
        assert other.alpha_ == pytest.approx(dense.alpha_, rel=1e-12)
        assert_allclose(other.scores_, dense.scores_, rtol=1e-7)


@pytest.mark.parametrize("solver", ["exact", "nystrom"])
def test_each_candidate_gets_its_own_scale(solver):
    X, y = _data(n=80, d=3)
    degrees = [1, 2, 3]
    cv = KernelRidgeCV(kernel="polynomial", gamma=0.5, coef0=1.0, solver=solver,
                       n_centers=30, random_state=0, param_grid={"degree": degrees},
                       store_cv_results=True).fit(X, y)
    for row, params in zip(cv.alphas_, cv.candidate_params_):
        K = polynomial_kernel(X, degree=params["degree"], gamma=0.5, coef0=1.0)
        assert_allclose(row, GRID * np.diag(K).mean(), rtol=1e-12)
    ci = cv.candidate_params_.index(cv.best_params_)
    ref = KernelRidgeCV(cv.alphas_[ci], kernel="polynomial", gamma=0.5, coef0=1.0,
                        solver=solver, n_centers=30, random_state=0,
                        store_cv_results=True, **cv.best_params_).fit(X, y)
    assert cv.alpha_ == ref.alpha_
    assert_allclose(cv.scores_[ci], ref.scores_[0], rtol=1e-10)
    assert_allclose(cv.cv_results_[ci], ref.cv_results_, rtol=1e-10)
    assert cv.best_estimator_.alpha == cv.alpha_  # the refit uses the value scored


def test_gamma_search_reports_the_alphas_of_every_gamma():
    X, y = _data()
    cv = KernelRidgeCV(kernel="polynomial", degree=2, gamma_search=(0.01, 1.0)).fit(X, y)
    assert cv.alphas_.shape == (cv.n_kernel_evaluations_, len(GRID))
    for row, params in zip(cv.alphas_, cv.candidate_params_):
        diag = (params["gamma"] * _sqnorms(X) + 1.0) ** 2
        assert_allclose(row, GRID * diag.mean(), rtol=1e-12)


# ------------------------------------------------------------------ round-off level
def _near_rank_one(n=60000):
    """Rows near a constant: ``K``'s top eigenvalue ~ ``n`` times its mean diagonal, so
    its round-off level ``10 n eps max(s)`` lies above ``1e-6`` times the diagonal."""
    rng = np.random.default_rng(3)
    X = 1.0 + 0.01 * rng.normal(size=(n, 2))
    y = X[:, 0] - 1.0 + 0.001 * rng.normal(size=n)
    return X, y


def test_default_grid_leaves_round_off_points_out_without_a_warning():
    X, y = _near_rank_one()
    with pytest.warns(RuntimeWarning, match="round-off"):  # what the old default did
        KernelRidgeCV(DEFAULT_ALPHAS).fit(X, y)
    cv = _strict_fit(KernelRidgeCV(), X, y)
    scale = _sqnorms(X).mean()
    floor = 10 * len(y) * np.finfo(np.float64).eps * np.linalg.eigvalsh(X.T @ X).max()
    low = GRID * scale < floor
    assert low[0] and not low.all()
    assert np.all(np.isnan(cv.scores_[0, low])) and np.all(np.isfinite(cv.scores_[0, ~low]))
    assert_allclose(cv.alphas_[0], GRID * scale, rtol=1e-12)
    with pytest.warns(RuntimeWarning, match="round-off"):  # the same values, given: warns
        ref = KernelRidgeCV(GRID * scale).fit(X, y)
    assert cv.alpha_ == ref.alpha_
    assert_allclose(cv.scores_[0, ~low], ref.scores_[0, ~low], rtol=1e-12)
    labels = y > np.median(y)
    clf = _strict_fit(KernelRidgeClassifierCV(cv=2), X, labels)  # K-fold: no warning
    assert np.isnan(clf.scores_[0, 0]) and np.isfinite(clf.alpha_)


@pytest.mark.parametrize("solver", ["exact", "nystrom"])
def test_explicit_grid_below_round_off_still_warns(solver):
    X, y = _data(scale=30.0)
    with pytest.warns(RuntimeWarning, match="round-off"):
        KernelRidgeCV((1e-14, 1.0), kernel="polynomial", degree=2, solver=solver,
                      n_centers=20, random_state=0).fit(X, y)
    with pytest.warns(RuntimeWarning, match="round-off"):
        KernelRidgeCV((1e-12, 1.0)).fit(X, y)  # the linear kernel's primal path


# ------------------------------------------------------------ parameters and sklearn
def test_auto_is_the_default_clones_and_pickles():
    X, y = _data(scale=3.0)
    for cls in (KernelRidgeCV, KernelRidgeClassifierCV):
        assert cls().get_params()["alphas"] == "auto"
        assert clone(cls()).alphas == "auto"
    cv = KernelRidgeCV().fit(X, y)
    back = pickle.loads(pickle.dumps(cv))
    assert back.alphas == "auto" and back.alpha_ == cv.alpha_
    assert_array_equal(back.alphas_, cv.alphas_)
    assert_array_equal(back.predict(X), cv.predict(X))
    assert clone(cv).alphas == "auto" and not hasattr(clone(cv), "alphas_")


def test_auto_inside_grid_search_cv():
    X, y = _data(scale=3.0)
    search = GridSearchCV(KernelRidgeCV(alphas="auto"),
                          {"kernel": ["linear", "rbf"], "fit_intercept": [False, True]},
                          cv=3).fit(X, y)
    best = search.best_estimator_
    alone = KernelRidgeCV(**search.best_params_).fit(X, y)
    assert best.alpha_ == alone.alpha_
    assert_array_equal(best.alphas_, alone.alphas_)


@pytest.mark.parametrize("alphas", ["foo", "Auto", "", b"auto"])
def test_bad_alphas_string_is_rejected_and_the_fit_kept(alphas):
    X, y = _data()
    cv = KernelRidgeCV(kernel="rbf").fit(X, y)
    before = (cv.alpha_, cv.alphas_.copy(), cv.predict(X))
    with pytest.raises(ValueError, match="alphas"):
        cv.set_params(alphas=alphas).fit(X, y)
    assert cv.alpha_ == before[0]
    assert_array_equal(cv.alphas_, before[1])
    assert_array_equal(cv.predict(X), before[2])
