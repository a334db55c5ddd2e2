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
    # with the reverse test (x_j's k nearest) made at that training point
    Dq = np.sqrt(((Xq[:, None] - X[None]) ** 2).sum(-1))
    near = Dq.argmin(1)
    own = np.arange(len(X))[None, :] == near[:, None]
    Dq = np.where(own, np.inf, Dq)
    rq = np.sort(Dq, axis=1)[:, k - 1]
    Wq = (Dq <= rq[:, None]) | (D[near] <= r[None, :])
    return K, 0.5 * (own + Wq / np.sqrt(np.outer(Wq.sum(1), deg)))


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("transform, s", [
    ("inverse_laplacian", lambda m: m / (1 - 0.99 * m)), ("polynomial", lambda m: m**4)])
def test_knn_kernel_matches_independent_construction(transform, s, backend):
    # both engines: the graph product and (inverse Laplacian) CG's vector passes
    if backend == "numba":
        pytest.importorskip("numba")
    X, y, y_semi, lab = _data(n=70, d=2, n_lab=10, seed=7)
    Xq = np.random.default_rng(8).standard_normal((5, 2))
    est = STKRRegressor(transform, kernel="knn", n_neighbors=5, eta=0.99, power=4,
                        backend=backend, **TIGHT).fit(X, y_semi)
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


@pytest.mark.parametrize("kernel", ["knn", "rbf"])
def test_bad_backend_is_rejected_before_the_data(kernel):
    # the kNN graph now runs on an engine too: its backend is checked with the
    # parameters, before X (here with NaN) is looked at
    X, y, y_semi, _ = _data()
    X[0, 0] = np.nan
    with pytest.raises(ValueError, match="backend"):
        STKRRegressor(kernel=kernel, backend="fortran").fit(X, y_semi)


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
_WEIGHTS_ARE_NOT_COPIES = (
    "sample_weight weights the labeled rows' loss only; a repeated row also changes the "
    "data distribution that every row (labeled or not) estimates, so the transformed "
    "kernel differs (its spectrum, the kNN graph)")


def _expected_failures(est):
    out = {f"check_sample_weight_equivalence_on_{kind}_data": _WEIGHTS_ARE_NOT_COPIES
           for kind in ("dense", "sparse")}
    if isinstance(est, STKRClassifier):
        # scikit-learn exempts its own semi-supervised classifiers from this label choice
        out["check_classifiers_classes"] = (
            "semi-supervised convention of sklearn.semi_supervised: y = -1 marks an "
            "unlabeled row, so the check's binary labels [-1, 1] leave a single class")
    return out


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


# ---------------------------------------------------------------- rejected calls --------
def _state(est):
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in vars(est).items()}


def _same_state(a, b):
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], np.ndarray):
            assert np.array_equal(a[k], b[k], equal_nan=a[k].dtype.kind == "f"), k
        else:
            assert a[k] is b[k] or a[k] == b[k], k


@pytest.mark.parametrize("Est", [STKRRegressor, STKRClassifier])
def test_rejected_fit_leaves_the_model_as_it_was(Est):
    X, y, y_semi, lab = _data(n=40, d=3)
    y_fit = y_semi if Est is STKRRegressor else np.where(np.isnan(y_semi), -1, y > 0)
    est = Est().fit(X, y_fit)
    before, pred = _state(est), est.predict(X[:7])
    X5 = np.random.default_rng(1).standard_normal((40, 5))
    G0 = np.zeros((40, 40))
    attempts = [
        (dict(beta=-1.0), X5, y_fit, "beta must be > 0"),           # bad parameter, new X
        (dict(transformation="nope"), X5, y_fit, "transformation"),  # checked before data
        ({}, np.full((40, 3), np.nan), y_fit, "NaN"),                # bad X
        ({}, X5, y_fit[:10], "y must"),                              # bad y
        (dict(kernel="precomputed"), G0, y_fit, "no positive eigenvalue"),  # midway
    ]
    for params, Xb, yb, match in attempts:
        saved = est.get_params()
        est.set_params(**params)
        with pytest.raises(ValueError, match=match):
            est.fit(Xb, yb)
        est.set_params(**saved)
        _same_state(before, _state(est))
        np.testing.assert_array_equal(est.predict(X[:7]), pred)


def test_non_symmetric_callable_kernel_is_rejected():
    X, y, y_semi, lab = _data(n=30)

    def skew(A, B):
        return rbf_kernel(A, B) + 0.1 * (A[:, :1] - B[:, :1].T)

    with pytest.raises(ValueError, match="non-symmetric matrix"):
        STKRRegressor(kernel=skew).fit(X, y_semi)


# ---------------------------------------------------------------- sparse input ----------
@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
@pytest.mark.parametrize("kernel", ["knn", "rbf", "precomputed"])
def test_sparse_input_equals_dense(kernel, fmt):
    from scipy import sparse

    X, y, y_semi, lab = _data(n=50, d=4, n_lab=10, seed=2)
    X[np.abs(X) < 0.6] = 0.0  # a sparse design
    Xq = X[:6] + 0.05
    if kernel == "precomputed":
        X, Xq = rbf_kernel(X, gamma=0.5), rbf_kernel(Xq, X, gamma=0.5)
    cls = np.where(np.isnan(y_semi), -1, (y > 0).astype(int))
    for Est, target in [(STKRRegressor, y_semi), (STKRClassifier, cls)]:
        dense = Est(kernel=kernel, gamma=0.5, **TIGHT).fit(X, target)
        sp = Est(kernel=kernel, gamma=0.5, **TIGHT).fit(getattr(sparse, f"{fmt}_matrix")(X),
                                                        target)
        a, b = dense._decision(Xq), sp._decision(sparse.csr_matrix(Xq))
        _close(b, a, rtol=1e-10)
        _close(sp._decision(Xq), a, rtol=1e-10)  # dense queries against sparse rows


# ---------------------------------------------------------------- labeled rows ----------
def test_whole_number_regression_targets_minus_one_is_a_value():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((40, 2))
    y = rng.integers(-2, 3, 40).astype(float)  # whole numbers, -1 among them
    y[rng.choice(40, 15, replace=False)] = np.nan
    labeled = np.flatnonzero(~np.isnan(y))
    assert np.any(y[labeled] == -1)
    folds = list(SemiSupervisedKFold(3, random_state=0).split(X, y))
    tested = np.sort(np.concatenate([t for _, t in folds]))
    np.testing.assert_array_equal(tested, labeled)  # every labeled row scored once, -1 too
    reg = STKRRegressor().fit(X, y)
    from sklearn.metrics import r2_score
    expected = r2_score(y[labeled], reg.predict(X[labeled]))
    assert reg.score(X, y) == pytest.approx(expected)
    assert labeled_scorer()(reg, X, y) == pytest.approx(expected)
    assert labeled_scorer("r2")(reg, X, y) == pytest.approx(expected)
    # float class labels with -1.0 as the marker: classification
    yc = np.where(np.isnan(y), -1.0, (y > 0).astype(float))
    lab_c = np.flatnonzero(yc != -1)
    folds = SemiSupervisedKFold(3, random_state=0, target_type="classification").split(X, yc)
    np.testing.assert_array_equal(np.sort(np.concatenate([t for _, t in folds])), lab_c)
    clf = STKRClassifier().fit(X, yc)
    acc = (clf.predict(X[lab_c]) == yc[lab_c]).mean()
    assert clf.score(X, yc) == pytest.approx(acc) == pytest.approx(labeled_scorer()(clf, X, yc))
    # NaN marks unlabeled rows for the classifier too: the same fit as -1
    clf_nan = STKRClassifier().fit(X, np.where(yc == -1, np.nan, yc))
    np.testing.assert_array_equal(clf_nan.transduction_, clf.transduction_)
    with pytest.raises(ValueError, match="target_type must be one of"):
        next(SemiSupervisedKFold(target_type="ordinal").split(X, y))


# ---------------------------------------------------------------- kNN graph: duplicates, scale
def _knn_locations_reference(X, k):
    """Dense kNN kernel over distinct locations: K = (E + S) / 2, built independently."""
    U, inv = np.unique(X, axis=0, return_inverse=True)
    inv = inv.ravel()
    Du = np.sqrt(((U[:, None] - U[None]) ** 2).sum(-1))
    np.fill_diagonal(Du, np.inf)
    ru = np.sort(Du, axis=1)[:, min(k, len(U) - 1) - 1]
    Wu = (Du <= ru[:, None]) | (Du <= ru[None, :])
    np.fill_diagonal(Wu, False)
    W = Wu[np.ix_(inv, inv)].astype(float)
    deg = W.sum(1)
    m = np.bincount(inv)[inv]
    E = (inv[:, None] == inv[None, :]) / m[None, :]
    return 0.5 * (E + W / np.sqrt(np.outer(deg, deg)))


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("transform, params, s", [
    ("polynomial", dict(power=3), lambda m: m**3),
    ("inverse_laplacian", dict(eta=0.9), lambda m: m / (1 - 0.9 * m))])
def test_knn_graph_on_duplicated_rows(transform, params, s, backend):
    from scipy.sparse.csgraph import connected_components

    if backend == "numba":
        pytest.importorskip("numba")
    rng = np.random.default_rng(0)
    base = rng.standard_normal((6, 2))
    X = np.repeat(base, 10, axis=0)[rng.permutation(60)]  # 6 locations, 10 copies each
    y = np.sin(X[:, 0])
    y_semi = np.full(60, np.nan)
    y_semi[[0, 1, 2]] = y[[0, 1, 2]]
    est = STKRRegressor(transform, **params, kernel="knn", n_neighbors=3, backend=backend,
                        **TIGHT).fit(X, y_semi)
    K = _knn_locations_reference(X, 3)
    assert connected_components(K > 0)[0] == 1  # k counts locations: no clique of copies
    lab = np.array([0, 1, 2])
    fitted, pred = _closed_form(K, lab, y, 1e-3, s, K)
    _close(est.transduction_, fitted)
    _close(est.predict(X), est.transduction_, rtol=1e-10)  # inductive = transductive
    # copies of a location get one value
    for loc in range(6):
        rows = np.flatnonzero((X == base[loc]).all(1))
        assert np.ptp(est.transduction_[rows]) < 1e-12


@pytest.mark.parametrize("transform", ["inverse_laplacian", "polynomial"])
def test_knn_inductive_has_no_jump_next_to_training_rows(transform):
    X, y, y_semi, lab = _data(n=80, d=2, n_lab=12, seed=5)
    est = STKRRegressor(transform, kernel="knn", n_neighbors=5, **TIGHT).fit(X, y_semi)
    offset = 1e-7 * np.random.default_rng(0).standard_normal(X.shape)
    _close(est.predict(X + offset), est.transduction_, rtol=1e-10)


@pytest.mark.parametrize("factor", [1e-300, 1e300, 3.0])
def test_knn_is_scale_free(factor):
    X, y, y_semi, lab = _data(n=60, d=3, seed=6)
    Xq = np.random.default_rng(7).standard_normal((5, 3))
    ref = STKRRegressor(**TIGHT).fit(X, y_semi)
    est = STKRRegressor(**TIGHT).fit(X * factor, y_semi)
    _close(est.transduction_, ref.transduction_, rtol=1e-10)
    _close(est.predict(Xq * factor), ref.predict(Xq), rtol=1e-10)


def test_rbf_scale_with_gamma_scaled():
    X, y, y_semi, lab = _data(n=50, d=2, seed=8)
    ref = STKRRegressor(kernel="rbf", gamma=0.5, **TIGHT).fit(X, y_semi)
    est = STKRRegressor(kernel="rbf", gamma=0.5e300, **TIGHT).fit(X * 1e-150, y_semi)
    _close(est.transduction_, ref.transduction_, rtol=1e-7)
    _close(est.predict(X[:5] * 1e-150), ref.predict(X[:5]), rtol=1e-7)


@pytest.mark.parametrize("kernel", ["knn", "rbf"])
@pytest.mark.parametrize("transform", ["inverse_laplacian", "polynomial", "kpca", "identity"])
def test_target_scale_is_per_column(transform, kernel):
    X, y, y_semi, lab = _data(n=50, seed=9)
    Y = np.c_[y_semi, 2.0 * y_semi]
    kw = dict(kernel=kernel, gamma=0.5, n_components=8, **TIGHT)
    ref = STKRRegressor(transform, **kw).fit(X, Y)
    for s in (np.array([1e-300, 1e300]), np.array([1e300, 1.0])):
        est = STKRRegressor(transform, **kw).fit(X, Y * s)
        for j in range(2):
            _close(est.transduction_[:, j] / s[j], ref.transduction_[:, j], rtol=1e-9)
            _close(est.predict(X[:4])[:, j] / s[j], ref.predict(X[:4])[:, j], rtol=1e-9)


# ---------------------------------------------------------------- dtypes ----------------
def test_non_native_and_half_precision_inputs():
    X, y, y_semi, lab = _data(n=40, seed=10)
    ref = STKRRegressor(**TIGHT).fit(X, y_semi)
    big = STKRRegressor(**TIGHT).fit(X.astype(">f8"), y_semi.astype(">f8"))
    _close(big.transduction_, ref.transduction_, rtol=1e-12)
    _close(big.predict(X[:5].astype(">f8")), ref.predict(X[:5]), rtol=1e-12)
    y16 = y_semi.astype(np.float16)
    half = STKRRegressor(**TIGHT).fit(X, y16)
    _close(half.transduction_, STKRRegressor(**TIGHT).fit(X, y16.astype(float)).transduction_,
           rtol=1e-12)
    yc = np.where(np.isnan(y_semi), -1, (y > 0).astype(int))
    clf = STKRClassifier().fit(X.astype(">f8"), yc.astype(">f8"))
    assert clf.classes_.dtype.isnative
    np.testing.assert_array_equal(clf.transduction_, STKRClassifier().fit(X, yc).transduction_)


# ---------------------------------------------------------------- predict_proba ---------
def test_predict_proba_is_the_calibrated_softmax_and_label_distributions():
    rng = np.random.default_rng(11)
    X = np.r_[rng.normal(-2, 0.6, (30, 2)), rng.normal(2, 0.6, (30, 2)),
              rng.normal((2, -3), 0.6, (30, 2))]
    y = np.full(90, -1)
    y[[0, 1, 2, 30, 31, 32, 60, 61, 62]] = [0, 0, 0, 1, 1, 1, 2, 2, 2]
    clf = STKRClassifier(kernel="rbf", gamma=0.5).fit(X, y)
    Xq = rng.uniform(-5, 5, (40, 2))
    S, P = clf.decision_function(Xq), clf.predict_proba(Xq)
    beta = clf.calibration_temperature_
    Z = np.exp(beta * S - (beta * S).max(1, keepdims=True))
    np.testing.assert_allclose(P, Z / Z.sum(1, keepdims=True), rtol=1e-12)
    np.testing.assert_array_equal(clf.classes_[P.argmax(1)], clf.predict(Xq))
    # the transductive probabilities: predict_proba at the training rows, normalised
    np.testing.assert_allclose(clf.label_distributions_, clf.predict_proba(X), atol=1e-12)
    np.testing.assert_array_equal(clf.classes_[clf.label_distributions_.argmax(1)],
                                  clf.transduction_)
    # two classes: p_1 = sigmoid(a d), a the slope of d's side (few labeled rows: both
    # sides take the temperature)
    clf2 = STKRClassifier(kernel="rbf", gamma=0.5).fit(X[:60], y[:60])
    d = clf2.decision_function(Xq)
    a = np.where(d > 0, clf2.calibration_slopes_[1], clf2.calibration_slopes_[0])
    np.testing.assert_allclose(clf2.predict_proba(Xq)[:, 1], 1 / (1 + np.exp(-a * d)),
                               rtol=1e-12)
    np.testing.assert_array_equal(clf2.calibration_slopes_, clf2.calibration_temperature_)
    assert clf.calibration_slopes_ is None  # three classes
    assert STKRClassifier(calibration=None).fit(X, y).label_distributions_ is None


@pytest.mark.parametrize("scale", [1e155, 1e-160, 7.0])
def test_a_common_factor_of_the_weights_changes_nothing(scale):
    """The objective (weighted squared loss, ridge beta times the weights' sum) is
    invariant to a common factor: weights of 1e155 or 1e-160 fit as weights of 1 (they
    overflowed to NaN coefficients, or underflowed to a constant model)."""
    X, _, y_semi, _ = _data()
    ref = STKRRegressor().fit(X, y_semi)
    got = STKRRegressor().fit(X, y_semi, sample_weight=np.full(len(X), scale))
    np.testing.assert_allclose(got.dual_coef_, ref.dual_coef_, rtol=1e-9, atol=1e-12)


@pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("kw, scale", [(dict(kernel="linear"), 1e150),
                                       (dict(kernel="poly", degree=40), 100.0)])
def test_overflowing_kernel_is_an_error_that_keeps_the_model(kw, scale):
    X, _, y_semi, lab = _data()
    y = np.full(len(X), -1)
    y[lab] = (y_semi[lab] > 0).astype(int)
    model = STKRClassifier(calibration=None, **kw).fit(X, y)
    before = model.decision_function(X)
    with pytest.raises(ValueError, match="non-finite coefficients"):
        model.fit(X * scale, y)
    np.testing.assert_array_equal(model.decision_function(X), before)
