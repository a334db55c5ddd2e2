"""Tests of kernelkit.stkr: STKR-Prop against dense closed forms, and the estimator API."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import Ridge
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.model_selection import GridSearchCV
from sklearn.utils.estimator_checks import parametrize_with_checks

from kernelkit import KernelRidge
from kernelkit.stkr import (
    SemiSupervisedKFold,
    STKRClassifier,
    STKRRegressor,
    _operator,
    labeled_scorer,
)

TIGHT = dict(tol=1e-13, max_iter=20000)


def _data(n=60, d=3, n_lab=12, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] * X[:, -1]
    lab = np.sort(rng.choice(n, n_lab, replace=False))
    y_semi = np.full(n, np.nan)
    y_semi[lab] = y[lab]
    return X, y, y_semi, lab


def _closed_form(G, lab, y, beta, s, Kq=None):
    """Dense STKR: G_s = lam1 * U s(mu) U^T with mu = eig(G) / lam1, from eigh."""
    w, U = np.linalg.eigh(G)
    lam1 = w[-1]
    mu = np.clip(w / lam1, 0.0, None)
    Gs = lam1 * (U * s(mu)) @ U.T
    alpha = np.linalg.solve(Gs[np.ix_(lab, lab)] + lab.size * beta * np.eye(lab.size), y[lab])
    fitted = Gs[:, lab] @ alpha
    if Kq is None:
        return fitted
    # inductive: theta = U s(mu)/mu U^T E alpha, only where mu > 0 (the range of G)
    ratio = np.where(mu > 1e-12, s(mu) / np.where(mu > 1e-12, mu, 1.0), 0.0)
    Ea = np.zeros(G.shape[0])
    Ea[lab] = alpha
    theta = (U * ratio) @ (U.T @ Ea) / 1.0
    return fitted, Kq @ theta


def _close(a, b, rtol=1e-8):
    np.testing.assert_allclose(a, b, rtol=0, atol=rtol * max(1.0, np.abs(b).max()))


# ---------------------------------------------------------------- closed forms -----------
@pytest.mark.parametrize("solver", ["cg", "richardson"])
@pytest.mark.parametrize("transform, params, s", [
    ("polynomial", dict(power=3), lambda m: m**3),
    ("polynomial", dict(coefs=[0.5, 0.0, 2.0]), lambda m: 0.5 * m + 2.0 * m**3),
    ("inverse_laplacian", dict(eta=0.9), lambda m: m / (1 - 0.9 * m)),
    ("inverse_laplacian", dict(eta=0.0), lambda m: m),
])
def test_stkr_prop_equals_dense_closed_form(transform, params, s, solver):
    X, y, y_semi, lab = _data()
    Xq = np.random.default_rng(5).standard_normal((7, 3))
    beta = 0.05 if solver == "richardson" else 1e-3
    est = STKRRegressor(transform, kernel="rbf", gamma=0.5, beta=beta, solver=solver,
                        **params, **TIGHT).fit(X, y_semi)
    fitted, pred = _closed_form(rbf_kernel(X, gamma=0.5), lab, y, beta, s,
                                rbf_kernel(Xq, X, gamma=0.5))
    _close(est.transduction_, fitted)
    _close(est.predict(Xq), pred)
    assert est.n_iter_ > 0 and est.residuals_[-1] <= 1e-13


@pytest.mark.parametrize("cache_size", [0, 1024])
def test_blockwise_and_cached_kernel_agree_with_closed_form(cache_size):
    # cache_size=0: every product is recomputed blockwise by the engine (no N x N matrix)
    X, y, y_semi, lab = _data(n=80)
    est = STKRRegressor("polynomial", power=2, kernel="rbf", gamma=0.3, beta=1e-3,
                        cache_size=cache_size, **TIGHT).fit(X, y_semi)
    _close(est.transduction_, _closed_form(rbf_kernel(X, gamma=0.3), lab, y, 1e-3,
                                           lambda m: m**2))


def test_lanczos_top_eigenvalue_path():
    # above DENSE_EIG the top eigenvalue comes from Lanczos on products only
    n = _operator.DENSE_EIG + 50
    X, y, y_semi, lab = _data(n=n, n_lab=30, seed=3)
    est = STKRRegressor("inverse_laplacian", eta=0.8, kernel="rbf", gamma=0.5, beta=1e-3,
                        random_state=0, **TIGHT).fit(X, y_semi)
    G = rbf_kernel(X, gamma=0.5)
    assert est.lambda_max_ == pytest.approx(np.linalg.eigvalsh(G)[-1], rel=1e-11)
    _close(est.transduction_, _closed_form(G, lab, y, 1e-3, lambda m: m / (1 - 0.8 * m)))


def test_precomputed_equals_kernel_and_multioutput():
    X, y, y_semi, lab = _data()
    Y = np.c_[y, np.cos(X[:, 1])]
    Y_semi = np.where(np.isnan(y_semi)[:, None], np.nan, Y)
    G = rbf_kernel(X, gamma=0.5)
    a = STKRRegressor("polynomial", power=2, kernel="rbf", gamma=0.5, **TIGHT).fit(X, Y_semi)
    b = STKRRegressor("polynomial", power=2, kernel="precomputed", **TIGHT).fit(G, Y_semi)
    assert a.transduction_.shape == (60, 2)
    _close(a.transduction_, b.transduction_)
    for j in range(2):
        _close(a.transduction_[:, j], _closed_form(G, lab, Y[:, j], 1e-3, lambda m: m**2))
    _close(b.predict(G[:5]), a.predict(X[:5]))


# ---------------------------------------------------------------- special cases ----------
@pytest.mark.parametrize("transform, params", [
    ("identity", {}), ("polynomial", dict(power=1)), ("inverse_laplacian", dict(eta=0.0))])
def test_all_labeled_linear_transform_is_kernel_ridge(transform, params):
    X, y, _, _ = _data(n=50)
    beta = 2e-3
    est = STKRRegressor(transform, kernel="rbf", gamma=0.5, beta=beta, **params, **TIGHT).fit(X, y)
    krr = KernelRidge(alpha=50 * beta, kernel="rbf", gamma=0.5).fit(X, y)
    Xq = np.random.default_rng(1).standard_normal((9, 3))
    _close(est.predict(Xq), krr.predict(Xq))
    _close(est.transduction_, krr.predict(X))


def test_identity_is_kernel_ridge_on_labeled_rows_only():
    X, y, y_semi, lab = _data()
    est = STKRRegressor("identity", kernel="rbf", gamma=0.5, beta=0.01).fit(X, y_semi)
    krr = KernelRidge(alpha=lab.size * 0.01, kernel="rbf", gamma=0.5).fit(X[lab], y[lab])
    _close(est.predict(X), krr.predict(X))


def test_kpca_equals_ridge_on_explicit_eigenfunctions():
    X, y, y_semi, lab = _data(n=70)
    d, beta = 8, 1e-2
    est = STKRRegressor("kpca", n_components=d, kernel="rbf", gamma=0.5, beta=beta).fit(X, y_semi)
    G = rbf_kernel(X, gamma=0.5)
    w, U = np.linalg.eigh(G)
    U, w = U[:, ::-1][:, :d], w[::-1][:d]
    N = X.shape[0]
    Psi = np.sqrt(N) * U  # eigenfunctions at the points, unit norm in L2(empirical)
    ridge = Ridge(alpha=lab.size * beta, fit_intercept=False).fit(Psi[lab], y[lab])
    _close(est.transduction_, ridge.predict(Psi))
    Xq = np.random.default_rng(2).standard_normal((6, 3))
    Psi_q = np.sqrt(N) * rbf_kernel(Xq, X, gamma=0.5) @ U / w  # Nystroem extension
    _close(est.predict(Xq), ridge.predict(Psi_q))
    assert est.n_components_ == d


@pytest.mark.parametrize("kernel", ["rbf", "knn", "precomputed"])
@pytest.mark.parametrize("transform", ["inverse_laplacian", "polynomial", "kpca"])
def test_inductive_equals_transductive_at_training_points(kernel, transform):
    X, y, y_semi, lab = _data(n=90, n_lab=15, seed=4)
    Xin = rbf_kernel(X, gamma=0.5) if kernel == "precomputed" else X
    est = STKRRegressor(transform, kernel=kernel, gamma=0.5, n_neighbors=6, n_components=10,
                        **TIGHT).fit(Xin, y_semi)
    _close(est.predict(Xin), est.transduction_, rtol=1e-10)


# ---------------------------------------------------------------- kNN graph --------------
def _knn_kernel_reference(X, k, Xq=None):
    """Independent dense construction of the kNN kernel (and its rows at queries)."""
    D = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    np.fill_diagonal(D, np.inf)
    r = np.sort(D, axis=1)[:, k - 1]
    W = ((D <= r[:, None]) | (D <= r[None, :])) & np.isfinite(D)
    deg = W.sum(1)
    K = 0.5 * (np.eye(len(X)) + W / np.sqrt(np.outer(deg, deg)))
    if Xq is None:
        return K
    # a query stands in for the training point nearest to it (its Voronoi cell)
    Dq = np.sqrt(((Xq[:, None] - X[None]) ** 2).sum(-1))
    own = np.arange(len(X))[None, :] == Dq.argmin(1)[:, None]
    Dq = np.where(own, np.inf, Dq)
    rq = np.sort(Dq, axis=1)[:, k - 1]
    Wq = (Dq <= rq[:, None]) | (Dq <= r[None, :])
    return K, 0.5 * (own + Wq / np.sqrt(np.outer(Wq.sum(1), deg)))


@pytest.mark.parametrize("transform, s", [
    ("inverse_laplacian", lambda m: m / (1 - 0.99 * m)), ("polynomial", lambda m: m**4)])
def test_knn_kernel_matches_independent_construction(transform, s):
    X, y, y_semi, lab = _data(n=70, d=2, n_lab=10, seed=7)
    Xq = np.random.default_rng(8).standard_normal((5, 2))
    est = STKRRegressor(transform, kernel="knn", n_neighbors=5, eta=0.99, power=4,
                        **TIGHT).fit(X, y_semi)
    K, Kq = _knn_kernel_reference(X, 5, Xq)
    assert est.lambda_max_ == 1.0
    fitted, pred = _closed_form(K, lab, y, 1e-3, s, Kq)
    _close(est.transduction_, fitted)
    _close(est.predict(Xq), pred)


def test_karate_club_from_one_label_per_faction():
    nx = pytest.importorskip("networkx")
    g = nx.karate_club_graph()
    A = nx.to_numpy_array(g, nodelist=range(34), weight=None)
    truth = np.array([g.nodes[i]["club"] == "Officer" for i in range(34)], dtype=int)
    deg = A.sum(1)
    K = 0.5 * (np.eye(34) + A / np.sqrt(np.outer(deg, deg)))  # the kNN kernel's normalisation
    y = np.full(34, -1)
    y[0], y[33] = 0, 1  # Mr. Hi and the Officer
    for transform, params in [("inverse_laplacian", dict(eta=0.99)),
                              ("polynomial", dict(power=8))]:
        clf = STKRClassifier(transform, kernel="precomputed", beta=1e-4, **params).fit(K, y)
        acc = (clf.transduction_ == truth).mean()
        assert acc >= 32 / 34, (transform, acc)
    # the base kernel alone reaches only the labeled nodes' neighbours
    base = STKRClassifier("identity", kernel="precomputed", beta=1e-4).fit(K, y)
    assert (base.transduction_ == truth).mean() < acc


# ---------------------------------------------------------------- solvers ----------------
def test_cg_needs_fewer_products_than_richardson():
    X, y, y_semi, lab = _data(n=120, n_lab=20)
    kw = dict(kernel="rbf", gamma=0.5, beta=1e-3, tol=1e-8, max_iter=100000)
    for transform in ["polynomial", "inverse_laplacian"]:
        cg = STKRRegressor(transform, solver="cg", **kw).fit(X, y_semi)
        ri = STKRRegressor(transform, solver="richardson", **kw).fit(X, y_semi)
        _close(cg.transduction_, ri.transduction_, rtol=1e-5)
        assert cg.n_matvec_ < ri.n_matvec_


def test_convergence_warning_and_history():
    X, y, y_semi, lab = _data()
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        est = STKRRegressor(max_iter=2, tol=1e-14).fit(X, y_semi)
    assert est.n_iter_ == 2 and est.residuals_.shape == (3,)
    est = STKRRegressor(tol=1e-10).fit(X, y_semi)
    assert est.residuals_[0] == 1.0 and est.residuals_[-1] <= 1e-10


def test_verbose_reports_progress(capsys):
    X, y, y_semi, lab = _data()
    with pytest.warns(ConvergenceWarning, match="max_iter=3 was reached"):
        STKRRegressor(verbose=2, max_iter=3).fit(X, y_semi)
    out = capsys.readouterr().out
    assert "[STKRRegressor] inverse_laplacian/cg 1/3: residual=" in out
    assert "[STKRRegressor] fit (inverse_laplacian, cg): n_iter=" in out


# ---------------------------------------------------------------- classifier -------------
def test_classifier_one_hot_and_transduction():
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(-2, 0.5, (40, 2)), rng.normal(2, 0.5, (40, 2))]
    truth = np.repeat(["a", "b"], 40)
    y = np.array(truth, dtype=object)
    y[1:40], y[41:] = -1, -1
    clf = STKRClassifier().fit(X, y)
    assert list(clf.classes_) == ["a", "b"]
    assert np.array_equal(clf.transduction_, truth)
    assert np.array_equal(clf.predict(X), truth)
    assert np.array_equal(clf.decision_function(X) > 0, truth == "b")
    # one-vs-all on one-hot: the scores are the regressor's on the indicator columns
    Yoh = np.full((80, 2), np.nan)
    Yoh[[0, 40]] = [[1, 0], [0, 1]]
    reg = STKRRegressor().fit(X, Yoh)
    _close(clf.decision_function(X), reg.predict(X)[:, 1] - reg.predict(X)[:, 0])


def test_score_ignores_unlabeled_rows_and_grid_search():
    rng = np.random.default_rng(1)
    X = np.r_[rng.normal(-2, 0.7, (60, 2)), rng.normal(2, 0.7, (60, 2))]
    truth = np.repeat([0, 1], 60)
    y = np.full(120, -1)
    lab = np.r_[0:10, 60:70]
    y[lab] = truth[lab]
    clf = STKRClassifier().fit(X, y)
    assert clf.score(X, y) == pytest.approx((clf.predict(X[lab]) == truth[lab]).mean())
    cv = SemiSupervisedKFold(5, random_state=0)
    for train, test in cv.split(X, y):
        assert np.all(y[test] != -1) and np.all(np.isin(np.flatnonzero(y == -1), train))
        assert np.intersect1d(train, test).size == 0
    search = GridSearchCV(STKRClassifier(), {"n_neighbors": [5, 10], "eta": [0.5, 0.99]},
                          cv=cv, scoring=labeled_scorer()).fit(X, y)
    assert search.best_score_ > 0.9 and np.isfinite(search.cv_results_["mean_test_score"]).all()
    scorer = labeled_scorer("balanced_accuracy")
    assert scorer(clf, X, y) == pytest.approx(clf.score(X, y))
    yr = np.where(y == -1, np.nan, y.astype(float) + 0.3)
    reg = STKRRegressor().fit(X, yr)
    assert np.isfinite(reg.score(X, yr)) and np.isnan(reg.score(X[:3], yr[[20, 21, 22]]))


# ---------------------------------------------------------------- bad input ---------------
@pytest.mark.parametrize("params, match", [
    (dict(transformation="polynomial", power=0), "power must be an integer >= 1"),
    (dict(transformation="polynomial", power=0.5), "power must be an integer >= 1"),
    (dict(transformation="polynomial", coefs=[0, -1]), "coefs must be"),
    (dict(eta=1.0), r"eta must be a number in \[0, 1\)"),
    (dict(eta=-0.1), r"eta must be a number in \[0, 1\)"),
    (dict(beta=0.0), "beta must be > 0"),
    (dict(transformation="laplace"), "transformation must be one of"),
    (dict(solver="gmres"), "solver must be one of"),
    (dict(kernel="knn", n_neighbors=0), "n_neighbors must be"),
    (dict(kernel="nope"), "kernel must be one of"),
    (dict(max_iter=0), "max_iter must be"),
])
def test_bad_parameters(params, match):
    X, y, y_semi, _ = _data()
    with pytest.raises(ValueError, match=match):
        STKRRegressor(**params).fit(X, y_semi)


def test_bad_data():
    X, y, y_semi, _ = _data()
    with pytest.raises(ValueError, match="no labeled sample"):
        STKRRegressor().fit(X, np.full(60, np.nan))
    with pytest.raises(ValueError, match="no labeled sample"):
        STKRClassifier().fit(X, np.full(60, -1))
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        STKRRegressor().fit(Xn, y_semi)
    with pytest.raises(ValueError, match="Unknown label type .continuous. for y"):
        STKRClassifier().fit(X, y)
    with pytest.raises(ValueError, match="some targets NaN"):
        Y = np.c_[y_semi, y]
        STKRRegressor().fit(X, Y)
    with pytest.raises(ValueError, match="square X"):
        STKRRegressor(kernel="precomputed").fit(X, y_semi)
    with pytest.raises(ValueError, match="y must have shape"):
        STKRRegressor().fit(X, y_semi[:10])


def test_inputs_not_modified():
    X, y, y_semi, _ = _data()
    X0, y0 = X.copy(), y_semi.copy()
    STKRRegressor().fit(X, y_semi).predict(X)
    assert np.array_equal(X, X0) and np.array_equal(y_semi, y0, equal_nan=True)


# ---------------------------------------------------------------- scikit-learn API ------
def _expected_failures(est):
    if not isinstance(est, STKRClassifier):
        return {}
    # scikit-learn exempts its own semi-supervised classifiers from this label choice
    return {"check_classifiers_classes": (
        "semi-supervised convention of sklearn.semi_supervised: y = -1 marks an unlabeled "
        "row, so the check's binary labels [-1, 1] leave a single class")}


@parametrize_with_checks(
    [STKRRegressor(), STKRClassifier(), STKRRegressor(kernel="rbf"),
     STKRClassifier(transformation="polynomial", power=2)],
    expected_failed_checks=_expected_failures)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)


def test_classifier_rejects_a_single_labeled_class():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    for y in (np.zeros(60, int), np.r_[0, -np.ones(59, int)]):
        with pytest.raises(ValueError, match="number of classes"):
            STKRClassifier().fit(X, y)
