"""KernelRidgeCV / KernelRidgeClassifierCV beyond the exact grid: the unpenalised intercept
(bordered system), the Nystrom (FALKON) path and the bounded search over log(gamma).

Every value is checked against an independent computation: explicit refits (bordered, or
of the Nystrom estimator on the same centers) by dense solves, closed forms, scikit-learn's
RidgeCV and GridSearchCV(Ridge) with an intercept, and the exact path where the Nystrom
path must equal it.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.linear_model import RidgeCV
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.model_selection import GridSearchCV, KFold
from test_cv import ALPHAS, _data, _weights

from kernelkit import KernelRidgeClassifierCV, KernelRidgeCV
from kernelkit.ridge import FalkonClassifier, FalkonRegressor


# ----------------------------------------------------------------- fit_intercept
def _bordered_fit(K, y, alpha, w=None):
    """``(c, b)`` of ``min sum_i w_i (y_i - (K c)_i - b)^2 + alpha c^T K c``: the bordered
    system ``[[W K + alpha I, W 1], [1^T, 0]]`` solved densely."""
    n = K.shape[0]
    w = np.ones(n) if w is None else w
    A = np.zeros((n + 1, n + 1))
    A[:n, :n] = w[:, None] * K + alpha * np.eye(n)
    A[:n, n] = w
    A[n, :n] = 1.0
    sol = np.linalg.solve(A, np.concatenate([w[:, None] * y.reshape(n, -1),
                                             np.zeros((1, y.reshape(n, -1).shape[1]))]))
    return sol[:n], sol[n]


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("targets", [None, 2])
def test_intercept_loo_equals_explicit_bordered_refits(weighted, targets):
    X, y = _data(targets=targets)
    y = y + 3.0  # an offset the intercept takes (a penalised fit would shrink it)
    w = _weights(len(y)) if weighted else None
    K = rbf_kernel(X, gamma=0.4)
    cv = KernelRidgeCV(ALPHAS, kernel="rbf", gamma=0.4, fit_intercept=True,
                       scoring="neg_mean_squared_error", store_cv_results=True)
    cv.fit(X, y, sample_weight=w)
    for j, alpha in enumerate(ALPHAS):
        loo = []
        for i in range(len(y)):
            keep = np.arange(len(y)) != i
            c, b = _bordered_fit(K[np.ix_(keep, keep)], y[keep], alpha,
                                 None if w is None else w[keep])
            loo.append((K[i, keep] @ c + b).reshape(np.shape(y[i])))
        assert_allclose(cv.cv_results_[..., j], np.asarray(loo), rtol=0, atol=1e-8)
    c, b = _bordered_fit(K, y, cv.alpha_, w)
    assert_allclose(cv.intercept_, b.reshape(np.shape(cv.intercept_)), rtol=1e-9)
    X_new = _data(seed=4)[0]
    ref = rbf_kernel(X_new, X, gamma=0.4) @ c + b
    assert_allclose(cv.predict(X_new), ref.reshape(cv.predict(X_new).shape), atol=1e-9)


@pytest.mark.parametrize("weighted", [False, True])
def test_intercept_linear_kernel_equals_ridgecv(weighted):
    X, y = _data(n=40, d=5)
    y = y + 5.0
    w = _weights(len(y)) if weighted else None
    alphas = (1e-2, 0.3, 3.0, 30.0)
    ours = KernelRidgeCV(alphas, fit_intercept=True, store_cv_results=True).fit(X, y, w)
    peer = RidgeCV(alphas, fit_intercept=True, store_cv_results=True).fit(X, y, w)
    assert ours.alpha_ == peer.alpha_
    assert_allclose(ours.best_score_, peer.best_score_, rtol=1e-9)
    assert_allclose(ours.cv_results_, peer.cv_results_, rtol=1e-8, atol=1e-12)
    assert_allclose(ours.intercept_, peer.intercept_, rtol=1e-9)
    assert_allclose(ours.predict(X), peer.predict(X), atol=1e-9)
    mean, std = ours.predict(X[:3], return_std=True)
    assert_allclose(mean, peer.predict(X[:3]), atol=1e-9) and std.shape == (3,)


def test_intercept_kfold_equals_gridsearch_over_ridge():
    from sklearn.linear_model import Ridge

    X, y = _data(n=36, d=4)
    y = 2.0 - y
    w = _weights(len(y))
    folds = KFold(4, shuffle=True, random_state=0)
    ours = KernelRidgeCV(ALPHAS, fit_intercept=True, cv=folds).fit(X, y, w)
    peer = GridSearchCV(Ridge(), {"alpha": list(ALPHAS)}, cv=folds).fit(X, y, sample_weight=w)
    assert_allclose(ours.scores_[0], peer.cv_results_["mean_test_score"], rtol=1e-9)
    assert ours.alpha_ == peer.best_params_["alpha"]
    assert_allclose(ours.intercept_, peer.best_estimator_.intercept_, rtol=1e-9)
    assert_allclose(ours.predict(X), peer.predict(X), atol=1e-9)


def test_intercept_gcv_equals_its_closed_form():
    X, y = _data()
    y = y - 4.0
    n = len(y)
    cv = KernelRidgeCV(ALPHAS, kernel="rbf", gamma=0.5, cv="gcv", fit_intercept=True).fit(X, y)
    K = rbf_kernel(X, gamma=0.5)
    for j, alpha in enumerate(ALPHAS):
        c, b = _bordered_fit(K, np.eye(n), alpha)  # column j: the fit to y = e_j
        H = K @ c + b
        gcv = n * np.sum((y - H @ y) ** 2) / (n - np.trace(H)) ** 2
        assert_allclose(-cv.scores_[0, j], gcv, rtol=1e-9)


@pytest.mark.parametrize("cv", [None, "gcv"])
def test_intercept_nystrom_loo_equals_explicit_refits(cv):
    X, y = _data(n=40)
    y = y + 3.0
    model = KernelRidgeCV(ALPHAS, kernel="rbf", gamma=0.4, solver="nystrom", n_centers=15,
                          random_state=0, fit_intercept=True, cv=cv,
                          scoring="neg_mean_squared_error", store_cv_results=True).fit(X, y)
    Knm = rbf_kernel(X, model.centers_, gamma=0.4)
    D = np.column_stack([Knm, np.ones(len(y))])  # [K_nm, 1]: the intercept unpenalised
    P = np.zeros((16, 16))
    P[:15, :15] = rbf_kernel(model.centers_, gamma=0.4)
    for j, alpha in enumerate(ALPHAS):
        if cv is None:
            ref = [D[i] @ np.linalg.lstsq(D[k].T @ D[k] + alpha * P, D[k].T @ y[k],
                                          rcond=None)[0]
                   for i, k in ((i, np.arange(len(y)) != i) for i in range(len(y)))]
            assert_allclose(model.cv_results_[:, j], ref, rtol=0, atol=1e-8)
        else:
            H = D @ np.linalg.pinv(D.T @ D + alpha * P) @ D.T
            gcv = (y - H @ y) / (1 - np.trace(H) / len(y))
            assert_allclose(model.cv_results_[:, j], y - gcv, rtol=0, atol=1e-8)
    sol = np.linalg.lstsq(D.T @ D + model.alpha_ * P, D.T @ y, rcond=None)[0]
    assert_allclose(model.intercept_, sol[-1], rtol=1e-9)
    assert_allclose(model.predict(X), D @ sol, atol=1e-4 * np.abs(y).max())


@pytest.mark.parametrize("solver", ["exact", "nystrom"])
def test_intercept_makes_the_selection_shift_invariant(solver):
    X, y = _data()
    kw = dict(kernel="rbf", param_grid={"gamma": [0.1, 1.0]}, fit_intercept=True,
              solver=solver, n_centers=20, random_state=0)
    ref = KernelRidgeCV(ALPHAS, **kw).fit(X, y)
    moved = KernelRidgeCV(ALPHAS, **kw).fit(X, y + 100.0)
    assert (moved.alpha_, moved.best_params_) == (ref.alpha_, ref.best_params_)
    assert_allclose(moved.scores_, ref.scores_, rtol=1e-7)
    assert_allclose(moved.intercept_, ref.intercept_ + 100.0, rtol=1e-9)
    tol = 1e-8 if solver == "exact" else 1e-3
    assert_allclose(moved.predict(X), ref.predict(X) + 100.0, atol=tol)


# -------------------------------------------------------------- Nystrom (FALKON) path
def _nystrom_refit(Knm, Kmm, y, alpha):
    """The Nystrom estimator's coefficients by a dense solve (minimum norm)."""
    return np.linalg.lstsq(Knm.T @ Knm + alpha * Kmm, Knm.T @ y, rcond=None)[0]


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("targets", [None, 2])
def test_nystrom_loo_equals_explicit_refits_on_the_same_centers(targets, weighted):
    X, y = _data(n=40, targets=targets)
    w = _weights(len(y)) if weighted else np.ones(len(y))  # w[3] = 0 when weighted
    cv = KernelRidgeCV(ALPHAS, kernel="rbf", gamma=0.4, solver="nystrom", n_centers=15,
                       random_state=0, scoring="neg_mean_squared_error",
                       store_cv_results=True).fit(X, y, w if weighted else None)
    Z = cv.centers_
    assert_array_equal(Z, X[cv.center_indices_])
    Knm, Kmm = rbf_kernel(X, Z, gamma=0.4), rbf_kernel(Z, gamma=0.4)
    s = np.sqrt(w)[:, None]
    for j, alpha in enumerate(ALPHAS):
        loo = []
        for i in range(len(X)):  # the weighted refit without point i, centers unchanged
            keep = np.arange(len(X)) != i
            b = _nystrom_refit(Knm[keep] * s[keep], Kmm, (y.reshape(len(y), -1) * s)[keep],
                               alpha)
            loo.append((Knm[i] @ b).reshape(np.shape(y[i])))
        assert_allclose(cv.cv_results_[..., j], np.asarray(loo), rtol=0, atol=1e-8)
    b = _nystrom_refit(Knm * s, Kmm, y.reshape(len(y), -1) * s, cv.alpha_)
    fit = (Knm @ b).reshape(y.shape)  # the weighted FALKON refit reaches it to its tol
    assert_allclose(cv.predict(X), fit, atol=1e-4 * np.abs(fit).max())


def test_nystrom_gcv_equals_its_closed_form_with_duplicate_centers():
    X, y = _data(n=40)
    X[5], X[6] = X[0], X[1]  # rank-deficient K_mm once these rows are centers
    cv = KernelRidgeCV(ALPHAS, kernel="rbf", gamma=0.4, solver="nystrom", n_centers=40,
                       cv="gcv", random_state=0).fit(X, y)
    Knm = rbf_kernel(X, X[cv.center_indices_], gamma=0.4)
    Kmm = Knm[cv.center_indices_]
    n = len(y)
    for j, alpha in enumerate(ALPHAS):
        H = Knm @ np.linalg.pinv(Knm.T @ Knm + alpha * Kmm, hermitian=True) @ Knm.T
        gcv = n * np.sum((y - H @ y) ** 2) / (n - np.trace(H)) ** 2
        assert_allclose(-cv.scores_[0, j], gcv, rtol=1e-8)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("cv", [None, "gcv"])
def test_nystrom_with_every_point_a_center_is_the_exact_path(cv, weighted):
    X, y = _data(n=30, targets=2)
    w = _weights(len(y)) if weighted else None
    grid = {"gamma": [0.2, 1.0]}
    exact = KernelRidgeCV(ALPHAS, kernel="rbf", param_grid=grid, cv=cv,
                          store_cv_results=True).fit(X, y, w)
    nys = KernelRidgeCV(ALPHAS, kernel="rbf", param_grid=grid, cv=cv, solver="nystrom",
                        n_centers=30, store_cv_results=True).fit(X, y, w)
    assert exact.solver_ == "exact" and nys.solver_ == "nystrom"
    assert_allclose(nys.cv_results_, exact.cv_results_, rtol=1e-7, atol=1e-12)
    assert_allclose(nys.scores_, exact.scores_, rtol=1e-8)
    assert (nys.alpha_, nys.best_params_) == (exact.alpha_, exact.best_params_)


def test_nystrom_selection_is_refitted_by_falkon_on_the_same_centers():
    X, y = _data(n=120, targets=2)
    cv = KernelRidgeCV(ALPHAS, kernel="rbf", param_grid={"gamma": [0.1, 0.5]},
                       solver="nystrom", n_centers=25, random_state=3).fit(X, y)
    est = cv.best_estimator_
    assert isinstance(est, FalkonRegressor)
    assert_array_equal(est.centers_, cv.centers_)
    assert (est.alpha, est.gamma) == (cv.alpha_, cv.best_params_["gamma"])
    # the estimator the search scored, by a dense solve: FALKON reaches it to its tol
    Knm = rbf_kernel(X, cv.centers_, gamma=est.gamma)
    b = _nystrom_refit(Knm, Knm[cv.center_indices_], y, cv.alpha_)
    X_new = _data(n=50, seed=7)[0]
    ref = rbf_kernel(X_new, cv.centers_, gamma=est.gamma) @ b
    assert_allclose(cv.predict(X_new), ref, atol=1e-4 * np.abs(ref).max())
    # the same draw of centers as FALKON itself makes with that random_state
    own = FalkonRegressor(alpha=cv.alpha_, gamma=est.gamma, n_centers=25, random_state=3)
    assert_array_equal(own.fit(X, y).center_indices_, cv.center_indices_)


def test_search_on_a_subset_of_the_centers_then_falkon_on_all_of_them():
    X, y = _data(n=40)
    cv = KernelRidgeCV(ALPHAS, kernel="rbf", gamma=0.4, solver="nystrom", n_centers=20,
                       search_centers=8, random_state=2, scoring="neg_mean_squared_error",
                       store_cv_results=True).fit(X, y)
    sub = cv.search_center_indices_
    assert len(sub) == 8 and set(sub) <= set(cv.center_indices_)
    # the search scored the Nystrom estimator on those 8 centers: explicit refits
    Z = X[sub]
    Knm, Kmm = rbf_kernel(X, Z, gamma=0.4), rbf_kernel(Z, gamma=0.4)
    for j, alpha in enumerate(ALPHAS):
        keep = [np.arange(len(X)) != i for i in range(len(X))]
        loo = [Knm[i] @ _nystrom_refit(Knm[k], Kmm, y[k], alpha) for i, k in enumerate(keep)]
        assert_allclose(cv.cv_results_[:, j], loo, rtol=0, atol=1e-8)
    # the final fit is FALKON's own on all 20 centers (FALKON's draw for this seed)
    own = FalkonRegressor(alpha=cv.alpha_, gamma=0.4, n_centers=20, random_state=2).fit(X, y)
    assert_array_equal(cv.best_estimator_.centers_, own.centers_)
    assert_allclose(cv.predict(X), own.predict(X), rtol=1e-10, atol=1e-12)
    # search_centers >= n_centers: the search uses every center, as before
    full = KernelRidgeCV(ALPHAS, kernel="rbf", gamma=0.4, solver="nystrom", n_centers=20,
                         search_centers=20, random_state=2).fit(X, y)
    assert_array_equal(full.search_center_indices_, full.center_indices_)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "all"])
def test_search_centers_is_validated(bad):
    X, y = _data(n=30)
    with pytest.raises(ValueError, match="search_centers"):
        KernelRidgeCV(solver="nystrom", search_centers=bad).fit(X, y)
    # a fitted model refused the new setting is left exactly as it was
    cv = KernelRidgeCV(ALPHAS, kernel="rbf", solver="nystrom", n_centers=10,
                       search_centers=5, random_state=0).fit(X, y)
    before, idx = cv.predict(X), cv.search_center_indices_.copy()
    with pytest.raises(ValueError, match="search_centers"):
        cv.set_params(search_centers=bad).fit(X[:20], y[:20])
    assert_array_equal(cv.predict(X), before)
    assert_array_equal(cv.search_center_indices_, idx)


@pytest.mark.parametrize("weighted", [False, True])
def test_nystrom_classifier_selection_and_falkon_refit(weighted):
    X, y = _data(n=90)
    labels = np.digitize(y, [-0.5, 0.5])
    w = _weights(len(y)) if weighted else np.ones(len(y))
    cv = KernelRidgeClassifierCV(ALPHAS, kernel="rbf", gamma=0.5, solver="nystrom",
                                 n_centers=20, random_state=0, scoring="accuracy",
                                 store_cv_results=True).fit(X, labels, w)
    assert isinstance(cv.best_estimator_, FalkonClassifier)
    Y = np.where(labels[:, None] == np.arange(3), 1.0, -1.0)
    Knm = rbf_kernel(X, cv.centers_, gamma=0.5)
    Kmm = Knm[cv.center_indices_]
    s = np.sqrt(w)[:, None]
    for i in (3, 4):  # w[3] = 0 when weighted: its value is the full fit's
        keep = np.arange(len(X)) != i
        loo = Knm[i] @ _nystrom_refit(Knm[keep] * s[keep], Kmm, (Y * s)[keep], ALPHAS[1])
        assert_allclose(cv.cv_results_[i, :, 1], loo, atol=1e-8)
    assert_array_equal(cv.predict(X), cv.best_estimator_.predict(X))


@pytest.mark.parametrize("backend", ["numba"])
def test_nystrom_kernel_blocks_agree_across_engines_and_callables(backend):
    X, y = _data(n=50)
    kw = dict(solver="nystrom", n_centers=20, random_state=1)
    ref = KernelRidgeCV(ALPHAS, kernel="rbf", param_grid={"gamma": [0.2, 1.0]},
                        backend="numpy", **kw).fit(X, y)
    eng = KernelRidgeCV(ALPHAS, kernel="rbf", param_grid={"gamma": [0.2, 1.0]},
                        backend=backend, **kw).fit(X, y)

    def scaled_rbf(A, B, scale=1.0):
        return rbf_kernel(A, B, gamma=scale)

    host = KernelRidgeCV(ALPHAS, kernel=scaled_rbf, param_grid={"scale": [0.2, 1.0]},
                         **kw).fit(X, y)
    assert_array_equal(eng.center_indices_, ref.center_indices_)
    assert_allclose(eng.scores_, ref.scores_, rtol=1e-10)
    assert_allclose(host.scores_, ref.scores_, rtol=1e-10)


@pytest.mark.parametrize("intercept", [False, True])
def test_nystrom_kfold_scores_equal_explicit_fold_refits(intercept):
    from sklearn.metrics import r2_score

    X, y = _data(n=45)
    y = y + 2.0
    w = _weights(len(y))
    folds = list(KFold(3, shuffle=True, random_state=0).split(X))
    cv = KernelRidgeCV(ALPHAS, kernel="rbf", gamma=0.4, solver="nystrom", n_centers=15,
                       random_state=0, cv=folds, fit_intercept=intercept).fit(X, y, w)
    Knm = rbf_kernel(X, cv.centers_, gamma=0.4)
    D = np.column_stack([Knm, np.ones(len(y))]) if intercept else Knm
    P = np.zeros((D.shape[1],) * 2)
    P[:15, :15] = rbf_kernel(cv.centers_, gamma=0.4)
    for j, alpha in enumerate(ALPHAS):
        per_fold = []
        for tr, te in folds:  # weighted Nystrom fit on the training rows, same centers
            Dw = D[tr] * w[tr, None]
            sol = np.linalg.lstsq(Dw.T @ D[tr] + alpha * P, Dw.T @ y[tr], rcond=None)[0]
            per_fold.append(r2_score(y[te], D[te] @ sol, sample_weight=w[te]))
        assert_allclose(cv.scores_[0, j], np.mean(per_fold), rtol=1e-9)
    if intercept:
        Dw = D * w[:, None]
        sol = np.linalg.lstsq(Dw.T @ D + cv.alpha_ * P, Dw.T @ y, rcond=None)[0]
        assert_allclose(cv.intercept_, sol[-1], rtol=1e-9)


def test_nystrom_model_has_no_gaussian_process_moments():
    X, y = _data()
    cv = KernelRidgeCV(ALPHAS, kernel="rbf", solver="nystrom", n_centers=10).fit(X, y)
    with pytest.raises(ValueError, match="return_std"):
        cv.predict(X, return_std=True)


def test_auto_solver_is_exact_up_to_the_crossover(monkeypatch):
    from kernelkit.ridge import _cv_search

    X, y = _data(n=40)
    assert KernelRidgeCV(ALPHAS, kernel="rbf").fit(X, y).solver_ == "exact"
    monkeypatch.setattr(_cv_search, "AUTO_NYSTROM_MIN_SAMPLES", 30)
    big = KernelRidgeCV(ALPHAS, kernel="rbf", n_centers=40, random_state=0).fit(X, y)
    exact = KernelRidgeCV(ALPHAS, kernel="rbf", solver="exact").fit(X, y)
    assert big.solver_ == "nystrom"
    assert_allclose(big.scores_, exact.scores_, rtol=1e-8)
    # where Nystrom does not apply: sparse X, a precomputed kernel
    assert KernelRidgeCV(ALPHAS, kernel="rbf").fit(sp.csr_matrix(X), y).solver_ == "exact"
    K = rbf_kernel(X)
    assert KernelRidgeCV(ALPHAS, kernel="precomputed").fit(K, y).solver_ == "exact"


# ------------------------------------------------------------------- log(gamma) search
@pytest.mark.parametrize("solver, cv", [("exact", None), ("nystrom", "gcv")])
def test_gamma_search_lands_within_a_fine_grids_resolution(solver, cv):
    X, y = _data(n=60)
    # alphas fine enough that the best score over them is one smooth curve in gamma
    # (over decades of alpha it has a kink, and a local optimum, at each switch)
    alphas = np.geomspace(1e-4, 10.0, 21)
    kw = dict(kernel="rbf", cv=cv, solver=solver, n_centers=30, random_state=0)
    grid = np.geomspace(0.01, 10.0, 31)
    step = np.log(grid[1] / grid[0])
    fine = KernelRidgeCV(alphas, param_grid={"gamma": grid}, **kw).fit(X, y)
    found = KernelRidgeCV(alphas, gamma_search=(0.01, 10.0), **kw).fit(X, y)
    g_fine, g = fine.best_params_["gamma"], found.best_params_["gamma"]
    assert abs(np.log(g / g_fine)) <= step
    assert found.best_score_ >= fine.best_score_ - 1e-3 * abs(fine.best_score_)
    assert found.n_kernel_evaluations_ == len(found.candidate_params_) < len(grid)
    # every evaluated gamma is scored as the grid scores it
    again = KernelRidgeCV(alphas, param_grid={"gamma": [c["gamma"] for c in
                                                        found.candidate_params_]}, **kw)
    assert_allclose(again.fit(X, y).scores_, found.scores_, rtol=1e-10)


def test_gamma_search_with_a_grid_over_other_parameters():
    X, y = _data(n=40)
    cv = KernelRidgeCV(ALPHAS, kernel="matern", param_grid={"nu": [0.5, 2.5]},
                       gamma_search=(0.05, 5.0)).fit(X, y)
    nus = {c["nu"] for c in cv.candidate_params_}
    assert nus == {0.5, 2.5} and set(cv.best_params_) == {"nu", "gamma"}
    assert cv.best_score_ == cv.scores_.max()
