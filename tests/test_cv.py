"""KernelRidgeCV / KernelRidgeClassifierCV: exact leave-one-out, GCV and K-fold selection.

Every value is checked against an independent computation: explicit refits with one point
left out, the GCV closed form from a dense solve, scikit-learn's RidgeCV / RidgeClassifierCV
(the linear kernel) and GridSearchCV over KernelRidge.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.linear_model import RidgeClassifierCV, RidgeCV
from sklearn.metrics.pairwise import laplacian_kernel, rbf_kernel
from sklearn.model_selection import GridSearchCV, KFold, LeaveOneOut, cross_val_score
from sklearn.utils.estimator_checks import parametrize_with_checks

from kernelkit import KernelRidge, KernelRidgeClassifier, KernelRidgeClassifierCV, KernelRidgeCV
from kernelkit.kernels import NTK, Matern
from kernelkit.ridge import _cv_grid, _loo

ALPHAS = (1e-3, 1e-2, 1e-1, 1.0)


def _data(n=30, d=3, seed=0, targets=None):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.2 * rng.normal(size=n)
    if targets:
        y = np.column_stack([y] + [np.cos(k * X[:, 2]) + 0.3 * rng.normal(size=n)
                                   for k in range(1, targets)])
    return X, y


def _weights(n, seed=1):
    w = np.random.default_rng(seed).uniform(0.2, 3.0, n)
    w[3] = 0.0  # a zero weight: its leave-one-out prediction is the full fit's
    return w


def _explicit_loo(make, X, y, w=None):
    """n refits, each without one point: the definition of leave-one-out."""
    out = []
    for i in range(X.shape[0]):
        keep = np.arange(X.shape[0]) != i
        fit = make().fit(X[keep], y[keep], None if w is None else w[keep])
        f = fit.decision_function if hasattr(fit, "decision_function") else fit.predict
        out.append(f(X[i:i + 1])[0])
    return np.asarray(out)


# ----------------------------------------------------------------- exact leave-one-out
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("targets", [None, 2])
def test_loo_predictions_equal_explicit_refits(weighted, targets):
    X, y = _data(targets=targets)
    w = _weights(len(y)) if weighted else None
    cv = KernelRidgeCV(ALPHAS, kernel="rbf", gamma=0.4, scoring="neg_mean_squared_error",
                       store_cv_results=True).fit(X, y, sample_weight=w)
    for j, alpha in enumerate(ALPHAS):
        loo = _explicit_loo(lambda: KernelRidge(alpha=alpha, kernel="rbf", gamma=0.4,
                                                solver="cholesky"), X, y, w)
        assert_allclose(cv.cv_results_[..., j], loo, rtol=0, atol=1e-8)


@pytest.mark.parametrize("weighted", [False, True])
def test_loo_squared_errors_and_score_are_ridgecv_s(weighted):
    X, y = _data()
    w = _weights(len(y)) if weighted else None
    cv = KernelRidgeCV(ALPHAS, kernel="rbf", gamma=0.4, store_cv_results=True).fit(X, y, w)
    for j, alpha in enumerate(ALPHAS):
        loo = _explicit_loo(lambda: KernelRidge(alpha=alpha, kernel="rbf", gamma=0.4,
                                                solver="cholesky"), X, y, w)
        sq = (y - loo) ** 2 * (1.0 if w is None else w)  # RidgeCV's weighted LOO error
        assert_allclose(cv.cv_results_[:, j], sq, rtol=0, atol=1e-8)
        assert_allclose(cv.scores_[0, j], -sq.mean(), rtol=1e-8)
    assert cv.best_score_ == cv.scores_.max()
    assert cv.alpha_ == ALPHAS[int(np.argmax(cv.scores_[0]))]


@pytest.mark.parametrize("kernel, grid", [
    ("laplacian", {"gamma": [0.2, 0.7]}),
    ("matern", {"gamma": [0.3], "nu": [0.5, 1.5, 2.5]}),
    (Matern(nu=2.5), {"gamma": [0.2, 1.0]}),
])
def test_loo_of_shared_distance_kernels_equal_engine_refits(kernel, grid):
    X, y = _data(n=20)
    cv = KernelRidgeCV((1e-2, 1.0), kernel=kernel, param_grid=grid, scoring="r2",
                       store_cv_results=True).fit(X, y)
    for c, cand in enumerate(cv.candidate_params_):
        for j, alpha in enumerate((1e-2, 1.0)):
            kw = _cv_grid.ridge_params(cv, cand)
            loo = _explicit_loo(lambda: KernelRidge(alpha=alpha, solver="cholesky", **kw), X, y)
            assert_allclose(cv.cv_results_[c, :, j], loo, rtol=0, atol=1e-8)


def test_one_distance_matrix_and_one_eigh_per_kernel(monkeypatch):
    X, y = _data()
    calls = {"cdist": 0, "eigh": 0}
    cdist, eigh = _cv_grid.cdist, _loo.linalg.eigh

    def count_cdist(*a, **k):
        calls["cdist"] += 1
        return cdist(*a, **k)

    def count_eigh(*a, **k):
        calls["eigh"] += 1
        return eigh(*a, **k)

    monkeypatch.setattr(_cv_grid, "cdist", count_cdist)
    monkeypatch.setattr(_loo.linalg, "eigh", count_eigh)
    KernelRidgeCV(ALPHAS, kernel="rbf", param_grid={"gamma": [0.1, 0.3, 1.0, 3.0]}).fit(X, y)
    assert calls == {"cdist": 1, "eigh": 4}
    calls.update(cdist=0, eigh=0)
    KernelRidgeCV(ALPHAS, kernel="rbf", param_grid={"gamma": [0.1, 1.0]}, cv=3).fit(X, y)
    assert calls == {"cdist": 1, "eigh": 6}  # one per (kernel, fold), none per alpha


# ------------------------------------------------------------------------------- GCV
@pytest.mark.parametrize("weighted", [False, True])
def test_gcv_equals_its_closed_form(weighted):
    X, y = _data(targets=2)
    n = len(y)
    w = _weights(n) if weighted else np.ones(n)
    cv = KernelRidgeCV(ALPHAS, kernel="rbf", gamma=0.5, cv="gcv", alpha_per_target=True)
    cv.fit(X, y, sample_weight=w if weighted else None)
    s = np.sqrt(w)
    Kw = rbf_kernel(X, gamma=0.5) * np.outer(s, s)
    Yw = y * s[:, None]
    for j, alpha in enumerate(ALPHAS):
        H = np.linalg.solve(Kw + alpha * np.eye(n), Kw).T  # K (K + alpha I)^-1
        gcv = n * np.sum((Yw - H @ Yw) ** 2, axis=0) / (n - np.trace(H)) ** 2
        assert_allclose(-cv.scores_[0, j], gcv, rtol=1e-9)


# ----------------------------------------------------------- peers: RidgeCV, GridSearchCV
@pytest.mark.parametrize("weighted", [False, True])
def test_linear_kernel_equals_ridgecv_without_intercept(weighted):
    X, y = _data(n=40, d=5)
    w = _weights(len(y)) if weighted else None
    alphas = (1e-2, 0.3, 3.0, 30.0)
    ours = KernelRidgeCV(alphas, store_cv_results=True).fit(X, y, w)
    peer = RidgeCV(alphas, fit_intercept=False, store_cv_results=True).fit(X, y, w)
    assert ours.alpha_ == peer.alpha_
    assert_allclose(ours.best_score_, peer.best_score_, rtol=1e-9)
    assert_allclose(ours.cv_results_, peer.cv_results_, rtol=1e-8, atol=1e-12)
    assert_allclose(ours.predict(X), X @ peer.coef_, atol=1e-9)


def test_linear_classifier_equals_ridgeclassifiercv_without_intercept():
    X, y = _data(n=60, d=4)
    labels = np.digitize(y, [-0.5, 0.5])  # three classes
    alphas = (1e-2, 1.0, 30.0)
    for scoring in (None, "accuracy"):
        ours = KernelRidgeClassifierCV(alphas, scoring=scoring).fit(X, labels)
        peer = RidgeClassifierCV(alphas, fit_intercept=False, scoring=scoring).fit(X, labels)
        assert ours.alpha_ == peer.alpha_
        assert_allclose(ours.best_score_, peer.best_score_, rtol=1e-9)
        assert_array_equal(ours.predict(X), peer.predict(X))


def test_selection_equals_gridsearch_leave_one_out():
    X, y = _data(n=18)
    gammas = [0.05, 0.3, 2.0]
    ours = KernelRidgeCV(ALPHAS, kernel="rbf", param_grid={"gamma": gammas}).fit(X, y)
    peer = GridSearchCV(KernelRidge(kernel="rbf", solver="cholesky"),
                        {"alpha": list(ALPHAS), "gamma": gammas}, cv=LeaveOneOut(),
                        scoring="neg_mean_squared_error").fit(X, y)
    assert ours.best_params_ == {"gamma": peer.best_params_["gamma"]}
    assert ours.alpha_ == peer.best_params_["alpha"]
    assert_allclose(ours.best_score_, peer.best_score_, rtol=1e-8)
    table = peer.cv_results_["mean_test_score"].reshape(len(ALPHAS), len(gammas)).T
    assert_allclose(ours.scores_, table, rtol=1e-8)


def test_kernel_object_grid_equals_gridsearch_over_kernel_params():
    X, y = _data(n=12)
    grid = {"depth": [1, 2], "b_std": [0.0, 0.5]}
    alphas = (1e-2, 1.0)
    ours = KernelRidgeCV(alphas, kernel=NTK(), param_grid=grid).fit(X, y)
    peer = GridSearchCV(KernelRidge(kernel=NTK(), solver="cholesky"),
                        {"alpha": list(alphas), "kernel__depth": grid["depth"],
                         "kernel__b_std": grid["b_std"]}, cv=LeaveOneOut(),
                        scoring="neg_mean_squared_error").fit(X, y)
    assert ours.alpha_ == peer.best_params_["alpha"]
    assert ours.best_params_ == {"b_std": peer.best_params_["kernel__b_std"],
                                 "depth": peer.best_params_["kernel__depth"]}
    assert_allclose(ours.best_score_, peer.best_score_, rtol=1e-8)
    assert ours.best_estimator_.kernel.get_params()["depth"] == ours.best_params_["depth"]


@pytest.mark.parametrize("weighted", [False, True])
def test_kfold_scores_equal_gridsearch(weighted):
    X, y = _data(n=36)
    w = _weights(len(y)) if weighted else None
    folds = KFold(4, shuffle=True, random_state=0)
    gammas = [0.1, 1.0]
    ours = KernelRidgeCV(ALPHAS, kernel="rbf", param_grid={"gamma": gammas}, cv=folds)
    ours.fit(X, y, sample_weight=w)
    peer = GridSearchCV(KernelRidge(kernel="rbf", solver="cholesky"),
                        {"alpha": list(ALPHAS), "gamma": gammas}, cv=folds)
    peer.fit(X, y, **({} if w is None else {"sample_weight": w}))
    table = peer.cv_results_["mean_test_score"].reshape(len(ALPHAS), len(gammas)).T
    assert_allclose(ours.scores_, table, rtol=1e-9)  # R^2 per fold, averaged
    assert ours.alpha_ == peer.best_params_["alpha"]
    assert ours.best_params_["gamma"] == peer.best_params_["gamma"]


def test_kfold_classifier_scores_equal_gridsearch():
    X, y = _data(n=48)
    labels = np.where(y > 0, "pos", "neg")
    ours = KernelRidgeClassifierCV(ALPHAS, kernel="rbf", gamma=0.5, cv=4,
                                   scoring="roc_auc").fit(X, labels)
    peer = GridSearchCV(KernelRidgeClassifier(kernel="rbf", gamma=0.5, solver="cholesky"),
                        {"alpha": list(ALPHAS)}, cv=4, scoring="roc_auc").fit(X, labels)
    assert_allclose(ours.scores_[0], peer.cv_results_["mean_test_score"], rtol=1e-9)


def test_classifier_loo_decision_values_equal_explicit_refits():
    X, y = _data(n=24)
    labels = np.digitize(y, [-0.5, 0.5])
    w = _weights(len(y))
    cv = KernelRidgeClassifierCV(ALPHAS, kernel="rbf", gamma=0.5, scoring="accuracy",
                                 store_cv_results=True).fit(X, labels, w)
    loo = _explicit_loo(lambda: KernelRidgeClassifier(alpha=ALPHAS[1], kernel="rbf",
                                                      gamma=0.5, solver="cholesky"),
                        X, labels, w)
    assert_allclose(cv.cv_results_[:, :, 1], loo, atol=1e-8)


# --------------------------------------------------------- per-target alphas and the refit
@pytest.mark.parametrize("cv, solver, intercept", [
    (None, "exact", False), ("gcv", "exact", False), (3, "exact", False),
    (None, "nystrom", False), (None, "exact", True), (3, "exact", True),
    ("gcv", "nystrom", True)])
def test_alpha_per_target_equals_separate_fits(cv, solver, intercept):
    X, Y = _data(targets=3)
    kw = dict(kernel="rbf", gamma=0.4, cv=cv, solver=solver, n_centers=30,
              fit_intercept=intercept)
    joint = KernelRidgeCV(ALPHAS, alpha_per_target=True, **kw).fit(X, Y)
    single = [KernelRidgeCV(ALPHAS, **kw).fit(X, Y[:, j]) for j in range(3)]
    assert_array_equal(joint.alpha_, [s.alpha_ for s in single])
    assert_allclose(joint.best_score_, [s.best_score_ for s in single], rtol=1e-9)
    assert_allclose(joint.predict(X), np.column_stack([s.predict(X) for s in single]),
                    atol=1e-9 if solver == "exact" else 1e-5)
    assert_allclose(joint.intercept_, [s.intercept_ for s in single], rtol=1e-9, atol=1e-12)


def test_refit_equals_kernel_ridge_at_the_selection():
    X, y = _data()
    cv = KernelRidgeCV(ALPHAS, kernel="rbf", param_grid={"gamma": [0.1, 1.0]}).fit(X, y)
    ref = KernelRidge(alpha=cv.alpha_, kernel="rbf", gamma=cv.best_params_["gamma"],
                      solver="cholesky").fit(X, y)
    assert isinstance(cv.best_estimator_, KernelRidge)
    assert_allclose(cv.best_estimator_.dual_coef_, ref.dual_coef_, rtol=1e-12)
    X_new = _data(seed=5)[0]
    assert_allclose(cv.predict(X_new), ref.predict(X_new), rtol=1e-12)


def test_precomputed_equals_the_kernel_it_holds():
    X, y = _data()
    K = laplacian_kernel(X, gamma=0.3)
    for cv in (None, "gcv", 3):
        pre = KernelRidgeCV(ALPHAS, kernel="precomputed", cv=cv).fit(K, y)
        lap = KernelRidgeCV(ALPHAS, kernel="laplacian", gamma=0.3, cv=cv).fit(X, y)
        assert pre.alpha_ == lap.alpha_
        assert_allclose(pre.scores_, lap.scores_, rtol=1e-9)
        assert_allclose(pre.predict(K[:5]), lap.predict(X[:5]), atol=1e-9)


def test_sparse_input_equals_dense():
    X, y = _data()
    grid = {"gamma": [0.2, 1.0]}
    dense = KernelRidgeCV(ALPHAS, kernel="rbf", param_grid=grid).fit(X, y)
    sparse = KernelRidgeCV(ALPHAS, kernel="rbf", param_grid=grid).fit(sp.csr_matrix(X), y)
    assert_allclose(sparse.scores_, dense.scores_, rtol=1e-9)
    assert sparse.best_params_ == dense.best_params_


def test_gridsearch_over_a_cv_estimators_other_parameters():
    X, y = _data(n=40)
    base = KernelRidgeCV(ALPHAS, gamma=0.5)
    search = GridSearchCV(base, {"kernel": ["rbf", "laplacian"]}, cv=3).fit(X, y)
    manual = {k: cross_val_score(clone(base).set_params(kernel=k), X, y, cv=3).mean()
              for k in ("rbf", "laplacian")}
    assert search.best_params_["kernel"] == max(manual, key=manual.get)
    assert_allclose(search.best_score_, max(manual.values()), rtol=1e-12)


def test_binary_classifier_cv_results_keep_the_column_axis():
    X, y = _data()
    cv = KernelRidgeClassifierCV(ALPHAS, store_cv_results=True).fit(X, y > 0)
    peer = RidgeClassifierCV(ALPHAS, fit_intercept=False, store_cv_results=True).fit(X, y > 0)
    assert cv.cv_results_.shape == peer.cv_results_.shape == (len(y), 1, len(ALPHAS))
    assert_allclose(cv.cv_results_, peer.cv_results_, rtol=1e-8, atol=1e-12)


def test_nan_scores_rank_last_and_all_nan_raises():
    X, y = _data(n=12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # R^2 of one point is undefined
        with pytest.raises(ValueError, match="NaN"):
            KernelRidgeCV(ALPHAS, cv=LeaveOneOut()).fit(X, y)

    def scorer(est, P, y_true):  # NaN for the first alpha only
        return np.nan if scorer.calls % len(ALPHAS) == 0 else -np.mean((P - y_true) ** 2)

    scorer.calls = 0

    def counted(est, P, y_true):
        out = scorer(est, P, y_true)
        scorer.calls += 1
        return out

    cv = KernelRidgeCV(ALPHAS, kernel="rbf", gamma=0.3, scoring=counted).fit(X, y)
    ref = KernelRidgeCV(ALPHAS[1:], kernel="rbf", gamma=0.3,
                        scoring="neg_mean_squared_error").fit(X, y)
    assert np.isnan(cv.scores_[0, 0]) and cv.alpha_ == ref.alpha_


def test_callable_kernel_grid_over_its_keyword_arguments():
    X, y = _data(n=20)

    def scaled_rbf(A, B, scale=1.0):
        return rbf_kernel(A, B, gamma=scale)

    ours = KernelRidgeCV(ALPHAS, kernel=scaled_rbf, param_grid={"scale": [0.1, 1.0]}).fit(X, y)
    peer = KernelRidgeCV(ALPHAS, kernel="rbf", param_grid={"gamma": [0.1, 1.0]}).fit(X, y)
    assert_allclose(ours.scores_, peer.scores_, rtol=1e-9)
    assert ours.best_estimator_.kernel_params == {"scale": peer.best_params_["gamma"]}
    with pytest.raises(ValueError, match="param_grid key 'gamma'"):
        KernelRidgeCV(kernel=scaled_rbf, param_grid={"gamma": [1.0]}).fit(X, y)


@pytest.mark.parametrize("scale", [1e-200, 1e-30, 1e30, 1e150])
@pytest.mark.parametrize("cv, solver", [(None, "exact"), ("gcv", "exact"), (3, "exact"),
                                        (None, "nystrom"), ("gcv", "nystrom")])
def test_selection_is_scale_free_in_the_targets(scale, cv, solver):
    X, y = _data()
    kw = dict(kernel="rbf", param_grid={"gamma": [0.1, 1.0]}, cv=cv, solver=solver,
              n_centers=12, random_state=0)
    ref = KernelRidgeCV(ALPHAS, **kw).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        big = KernelRidgeCV(ALPHAS, **kw).fit(X, y * scale)
    assert (big.alpha_, big.best_params_) == (ref.alpha_, ref.best_params_)
    # the refit is FALKON's CG, each solve to its default relative tol 1e-5: two solves
    # agree to a few times that
    tol = 1e-9 if solver == "exact" else 1e-4
    assert_allclose(big.predict(X) / scale, ref.predict(X), rtol=tol, atol=tol * 1e-3)
    if scale >= 1e-30:  # squared scores stay in float64's range: they scale with y^2
        unit = scale**2 if cv in (None, "gcv") else 1.0
        assert_allclose(big.scores_ / unit, ref.scores_, rtol=1e-9)


@pytest.mark.parametrize("cv, solver", [(None, "exact"), ("gcv", "exact"), (3, "exact"),
                                        (None, "nystrom")])
def test_targets_whose_squares_overflow_select_as_scaled(cv, solver):
    X, y = _data()
    kw = dict(kernel="rbf", param_grid={"gamma": [0.1, 1.0]}, cv=cv, solver=solver,
              n_centers=12, random_state=0)
    ref = KernelRidgeCV(ALPHAS, **kw).fit(X, y)
    big = KernelRidgeCV(ALPHAS, **kw)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        big.fit(X, y * 1e200)  # squared errors ~1e400: beyond float64
    said = [w for w in caught if "overflow float64" in str(w.message)]
    assert [w.category for w in caught] == [RuntimeWarning] * len(said)
    assert (big.alpha_, big.best_params_) == (ref.alpha_, ref.best_params_)
    tol = 1e-9 if solver == "exact" else 1e-5
    assert_allclose(big.predict(X) / 1e200, ref.predict(X), rtol=tol, atol=tol * 1e-3)
    if cv == 3:  # R^2 is scale free: finite and equal, nothing to warn about
        assert not said
        assert_allclose(big.scores_, ref.scores_, rtol=1e-9)
    else:
        assert len(said) == 1 and np.all(np.isneginf(big.scores_))


@pytest.mark.parametrize("solver", ["exact", "nystrom"])
def test_round_off_alphas_warn(solver):
    X, y = _data()
    with pytest.warns(RuntimeWarning, match="round-off"):
        KernelRidgeCV((1e-18, 1.0), kernel="rbf", solver=solver, n_centers=20).fit(X, y)


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("params, match", [
    ({"alphas": []}, "alphas"),
    ({"alphas": [1.0, 0.0]}, "alphas"),
    ({"alphas": [-1.0]}, "alphas"),
    ({"alphas": [np.nan, 1.0]}, "alphas"),
    ({"alphas": [np.inf]}, "alphas"),
    ({"alphas": ["a"]}, "alphas"),
    ({"kernel": "rbf", "param_grid": {"depth": [1]}}, "param_grid key 'depth'"),
    ({"kernel": "linear", "param_grid": {"gamma": [1.0]}}, "param_grid key 'gamma'"),
    ({"kernel": NTK(), "param_grid": {"gamma": [1.0]}}, "param_grid key 'gamma'"),
    ({"kernel": "rbf", "param_grid": {"alpha": [1.0]}}, "alphas"),
    ({"kernel": "rbf", "param_grid": {"gamma": []}}, "param_grid"),
    ({"kernel": "rbf", "param_grid": "gamma"}, "param_grid"),
    ({"kernel": "precomputed", "param_grid": {"gamma": [1.0]}}, "precomputed"),
    ({"cv": "loo"}, "cv"),
    ({"cv": 1}, "cv"),
    ({"cv": 3, "store_cv_results": True}, "store_cv_results"),
    ({"scoring": "not_a_scorer"}, "scoring"),
    ({"solver": "eigen"}, "solver"),
    ({"solver": "nystrom", "n_centers": 0}, "n_centers"),
    ({"solver": "nystrom", "n_centers": 31}, "n_centers"),
    ({"solver": "nystrom", "n_centers": 2.5}, "n_centers"),
    ({"solver": "nystrom", "kernel": "precomputed"}, "precomputed"),
    ({"gamma_search": (1.0, 0.1)}, "gamma_search"),
    ({"gamma_search": (0.0, 1.0)}, "gamma_search"),
    ({"gamma_search": (0.1, np.inf)}, "gamma_search"),
    ({"gamma_search": (0.1,)}, "gamma_search"),
    ({"gamma_search": "wide"}, "gamma_search"),
    ({"gamma_search": (0.1, 1.0), "kernel": "linear"}, "gamma_search"),
    ({"gamma_search": (0.1, 1.0), "param_grid": {"gamma": [1.0]}}, "gamma_search"),
    ({"kernel": "rbf", "param_grid": {"gamma": [-1.0]}}, "gamma"),
])
def test_bad_parameters_raise_and_leave_the_model_unchanged(params, match):
    X, y = _data()
    model = KernelRidgeCV(ALPHAS, kernel="rbf", gamma=0.5).fit(X, y)
    before = model.predict(X)
    state = dict(vars(model))
    model.set_params(**params)
    with pytest.raises(ValueError, match=match):
        model.fit(np.abs(X) @ np.abs(X).T if params.get("kernel") == "precomputed" else X, y)
    assert set(vars(model)) == set(state)
    assert model.best_estimator_ is state["best_estimator_"]
    assert_array_equal(model.predict(X), before)


def test_non_bool_fit_intercept_is_a_type_error():
    with pytest.raises(TypeError, match="fit_intercept"):
        KernelRidgeCV(fit_intercept="yes").fit([[np.nan]], [1.0])


def test_parameters_are_checked_before_data():
    with pytest.raises(ValueError, match="alphas"):
        KernelRidgeCV(alphas=[]).fit([[np.nan]], [1.0])
    for params in ({"solver": "eigen"}, {"n_centers": -1}, {"gamma_search": (2, 1)}):
        with pytest.raises(ValueError, match=next(iter(params))):
            KernelRidgeCV(kernel="rbf", **params).fit([[np.nan]], [1.0])


def test_bad_sample_weight_and_labels():
    X, y = _data()
    with pytest.raises(ValueError, match="[Ss]ample weight"):
        KernelRidgeCV(ALPHAS).fit(X, y, sample_weight=np.zeros(len(y)))
    with pytest.raises(ValueError, match="sample_weight"):
        KernelRidgeCV(ALPHAS).fit(X, y, sample_weight=np.ones(3))
    with pytest.raises(ValueError, match="[Nn]egative"):
        KernelRidgeCV(ALPHAS).fit(X, y, sample_weight=-np.ones(len(y)))
    with pytest.raises(ValueError, match="classes"):
        KernelRidgeClassifierCV(ALPHAS).fit(X, np.ones(len(y)))


def test_inputs_are_not_modified():
    X, y = _data()
    w = _weights(len(y))
    copies = X.copy(), y.copy(), w.copy()
    KernelRidgeCV(ALPHAS, kernel="rbf", param_grid={"gamma": [0.5]}).fit(X, y, w)
    for a, b in zip((X, y, w), copies):
        assert_array_equal(a, b)


def _expected_failures(est):
    out = {}
    if hasattr(est, "class_weight"):  # as KernelRidgeClassifier's (test_sklearn_compat.py)
        out["check_class_weight_classifiers"] = (
            "at the default kernel scale (linear without intercept, or gamma = 1/n_features "
            "on the check's blobs of std 20) a one-vs-all ridge fit is free off each class's "
            "own rows and cannot reach the check's 0.87; class_weight is tested in "
            "test_cv_proba.py")
    if hasattr(est, "calibration"):  # as KernelRidgeClassifier's (test_sklearn_compat.py)
        loo = ("predict_proba is calibrated on leave-one-out values: a repeated row is still "
               "seen when its copy is left out")
        out |= {"check_sample_weight_equivalence_on_dense_data": loo,
                "check_sample_weight_equivalence_on_sparse_data": loo}
    if est.solver != "nystrom":
        return out
    why = ("the Nystrom centers are rows of X whatever their weight (a zero-weight row is "
           "still a center, a repeated row is one center), and FALKON solves to its tol")
    return out | {"check_sample_weight_equivalence_on_dense_data": why,
                  "check_sample_weight_equivalence_on_sparse_data": "dense X only (FALKON)"}


@parametrize_with_checks([KernelRidgeCV(), KernelRidgeClassifierCV(),
                          KernelRidgeCV(kernel="rbf", solver="nystrom", random_state=0),
                          KernelRidgeClassifierCV(kernel="rbf", gamma_search=(0.1, 10.0),
                                                  solver="nystrom", random_state=0),
                          KernelRidgeCV(kernel="rbf", param_grid={"gamma": [0.1, 1.0]}, cv=3),
                          KernelRidgeCV(kernel="rbf", fit_intercept=True),
                          KernelRidgeClassifierCV(kernel="rbf", cv="gcv")],
                         expected_failed_checks=_expected_failures)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        check(estimator)


@pytest.mark.filterwarnings("ignore:squared errors of targets:RuntimeWarning")  # 1e200 ** 2
@pytest.mark.parametrize("cv", [None, "gcv", 5])
@pytest.mark.parametrize("big", [1e200, 1e-200])
def test_alpha_per_target_scales_each_target_alone(cv, big):
    """A target of magnitude 1e200 beside a normal one: each target's selection is its
    own (one common scale made the normal one's squared residuals underflow to a tie)."""
    rng = np.random.RandomState(0)
    X = rng.randn(80, 3)
    y = np.sin(X[:, 0]) + 0.1 * rng.randn(80)
    alone = KernelRidgeCV(kernel="rbf", cv=cv).fit(X, y)
    both = KernelRidgeCV(kernel="rbf", cv=cv, alpha_per_target=True).fit(X, np.c_[y, big * y])
    np.testing.assert_array_equal(both.alpha_, [alone.alpha_, alone.alpha_])
    np.testing.assert_allclose(both.best_score_[0], alone.best_score_, rtol=1e-9)
