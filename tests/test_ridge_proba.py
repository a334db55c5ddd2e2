"""Probabilities and class weights of the ridge-type classifiers (kernel ridge, NTK ridge,
FALKON): out-of-sample values against explicit refits, the temperature and the two-class
slopes against a direct minimisation, and their place in scikit-learn's meta-estimators."""

import pickle
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar
from scipy.special import expit, log_softmax, softmax
from sklearn.calibration import CalibratedClassifierCV
from sklearn.ensemble import StackingClassifier, VotingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.semi_supervised import SelfTrainingClassifier
from sklearn.utils.class_weight import compute_sample_weight

from test_calibration import _direct_slopes, _platt_reference  # tests/ is on sys.path

from kernelkit import KernelRidge, KernelRidgeClassifier, NTKRidgeClassifier
from kernelkit.ridge import FalkonClassifier, FalkonRegressor
from kernelkit.utils._calibration import MIN_SIDE_ROWS

GAMMA = 0.5


def _data(n=30, k=3, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 2)
    y = np.digitize(X[:, 0] + 0.7 * rng.randn(n), np.linspace(-0.6, 0.6, k - 1))
    return X, y, rng.uniform(0.2, 3.0, n)


def _pm1(y, classes):
    Y = np.where(y[:, None] == classes[None, :], 1.0, -1.0)
    return Y[:, 1:] if len(classes) == 2 else Y


def _direct_temperature(dec, y_idx, w):
    """argmin_beta of the weighted log-loss of softmax(beta * scores) against the smoothed
    targets, by scipy directly."""
    S = np.column_stack([-dec / 2, dec / 2]) if dec.ndim == 1 else dec
    T = _platt_reference(y_idx, S.shape[1], w)
    w = w / w.sum()

    def loss(t):
        return -np.dot(w, np.sum(T * log_softmax(np.exp(t) * S, axis=1), axis=1))

    res = minimize_scalar(loss, bounds=(-20, 20), method="bounded",
                          options={"xatol": 1e-12})
    return np.exp(res.x)


def _refit_loo(make, X, Y, w):
    out = np.empty_like(Y)
    for i in range(len(X)):
        keep = np.arange(len(X)) != i
        out[i] = make().fit(X[keep], Y[keep], w[keep]).predict(X[i:i + 1])
    return out


@pytest.mark.parametrize("k", [2, 3])
def test_cholesky_loo_values_and_temperature_equal_explicit_refits(k):
    X, y, w = _data(k=k)
    w[3] = 0.0  # a zero-weight row: its value is the fit's own
    alpha = 0.3
    clf = KernelRidgeClassifier(alpha=alpha, kernel="rbf", gamma=GAMMA, solver="cholesky")
    clf._check_params()
    clf.fit(X, y, sample_weight=w)
    Y = _pm1(y, clf.classes_)
    rows, loo = clf._fit_targets(X, Y, w, oos=True)
    ref = _refit_loo(lambda: KernelRidge(alpha=alpha, kernel="rbf", gamma=GAMMA), X, Y, w)
    full = KernelRidge(alpha=alpha, kernel="rbf", gamma=GAMMA).fit(X, Y, w).predict(X[3:4])
    ref[3] = full[0]
    np.testing.assert_allclose(loo, ref, rtol=1e-9, atol=1e-11)
    dec = ref[:, 0] if k == 2 else ref
    beta = _direct_temperature(dec, np.searchsorted(clf.classes_, y), w)
    np.testing.assert_allclose(clf.calibration_temperature_, beta, rtol=1e-6)


def test_pcg_holdout_values_are_those_of_a_fit_without_them(monkeypatch):
    import kernelkit.ridge._ridge_proba as rp

    monkeypatch.setattr(rp, "LOO_MAX_ROWS", 0)  # the held-out split, whatever the size
    X, y, w = _data(n=60)
    clf = KernelRidgeClassifier(alpha=0.5, kernel="rbf", gamma=GAMMA, solver="pcg", tol=1e-12,
                                random_state=0).fit(X, y, sample_weight=w)
    Y = _pm1(y, clf.classes_)
    clf._y_idx = np.searchsorted(clf.classes_, y)
    rows, dec = clf._fit_targets(X, Y, w, oos=True)
    assert 6 <= len(rows) <= 9  # a tenth of each class
    for k in np.unique(y):  # stratified
        assert np.sum(y[rows] == k) == np.ceil(0.1 * np.sum(y == k))
    train = np.setdiff1d(np.arange(len(y)), rows)
    ref = KernelRidge(alpha=0.5, kernel="rbf", gamma=GAMMA).fit(X[train], Y[train], w[train])
    np.testing.assert_allclose(dec, ref.predict(X[rows]), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("k, intercept", [(2, False), (3, False), (3, True)])
def test_small_pcg_fit_calibrates_on_exact_loo_values(k, intercept):
    # up to LOO_MAX_ROWS a pcg fit takes the exact leave-one-out values (from a Cholesky
    # factor of the same system): those of explicit refits, the temperature of the
    # cholesky solver's fit, and no random draw (random_state=None refits agree)
    X, y, w = _data(n=50, k=k, seed=4)
    alpha = 0.3
    make = lambda solver: KernelRidgeClassifier(  # noqa: E731
        alpha=alpha, kernel="rbf", gamma=GAMMA, solver=solver, tol=1e-12,
        fit_intercept=intercept)
    clf = make("pcg").fit(X, y, sample_weight=w)
    assert clf.solver_ == "pcg"
    Y = _pm1(y, clf.classes_)
    clf._y_idx = np.searchsorted(clf.classes_, y)
    rows, loo = clf._fit_targets(X, Y, w, oos=True)
    np.testing.assert_array_equal(rows, np.arange(len(y)))
    ref = _refit_loo(lambda: KernelRidge(alpha=alpha, kernel="rbf", gamma=GAMMA,
                                         fit_intercept=intercept), X, Y, w)
    np.testing.assert_allclose(loo, ref, rtol=1e-8, atol=1e-10)
    chol = make("cholesky").fit(X, y, sample_weight=w)
    np.testing.assert_allclose(clf.calibration_temperature_, chol.calibration_temperature_,
                               rtol=1e-10)
    again = make("pcg").fit(X, y, sample_weight=w)
    assert again.calibration_temperature_ == clf.calibration_temperature_


@pytest.mark.usefixtures("auto_model_from_1024")
def test_auto_solver_of_a_calibrated_classifier_factors_once(monkeypatch):
    # above AUTO_MIN_SAMPLES "auto" weighs pcg against Cholesky; with the calibration on
    # and n <= LOO_MAX_ROWS one factorization gives the fit and its leave-one-out values
    import kernelkit.ridge._ridge_proba as rp
    from kernelkit.ridge._auto import AUTO_MIN_SAMPLES

    rng = np.random.RandomState(5)
    n = AUTO_MIN_SAMPLES + 100
    assert n <= rp.LOO_MAX_ROWS
    X = rng.randn(n, 5)
    y = (X[:, 0] + 0.5 * rng.randn(n) > 0).astype(int)
    clf = KernelRidgeClassifier(alpha=1.0, kernel="rbf", gamma=0.2).fit(X, y)
    assert clf.solver_ == "cholesky"
    ref = KernelRidgeClassifier(alpha=1.0, kernel="rbf", gamma=0.2, solver="cholesky").fit(X, y)
    assert clf.calibration_temperature_ == ref.calibration_temperature_
    np.testing.assert_array_equal(clf.dual_coef_, ref.dual_coef_)


def test_pcg_holdout_split_is_fixed_when_random_state_is_none(monkeypatch):
    # beyond LOO_MAX_ROWS: the split of random_state=None is drawn with SPLIT_SEED, so
    # refits hold out the same rows and agree on the temperature (to the solver's tol)
    import kernelkit.ridge._ridge_proba as rp

    monkeypatch.setattr(rp, "LOO_MAX_ROWS", 0)
    X, y, w = _data(n=80, seed=6)
    fits = [KernelRidgeClassifier(alpha=0.5, kernel="rbf", gamma=GAMMA, solver="pcg",
                                  tol=1e-12).fit(X, y, sample_weight=w) for _ in range(3)]
    held = []
    for clf in fits:
        clf._y_idx = np.searchsorted(clf.classes_, y)
        held.append(clf._fit_targets(X, _pm1(y, clf.classes_), w, oos=True)[0])
    expect = np.flatnonzero(rp.calibration_split(np.searchsorted(fits[0].classes_, y), w,
                                                 np.random.RandomState(rp.SPLIT_SEED)))
    for rows, clf in zip(held, fits):
        np.testing.assert_array_equal(rows, expect)
        np.testing.assert_allclose(clf.calibration_temperature_,
                                   fits[0].calibration_temperature_, rtol=1e-8)


@pytest.mark.parametrize("k", [2, 3])
def test_falkon_loo_values_and_temperature_equal_explicit_refits(k):
    X, y, w = _data(n=40, k=k)
    C = X[::3] + 0.05  # centers off the data: the Nystrom estimator, not exact ridge
    alpha = 0.2
    clf = FalkonClassifier(alpha=alpha, centers=C, gamma=GAMMA, tol=1e-12)
    clf.fit(X, y, sample_weight=w)
    Y = _pm1(y, clf.classes_)
    rows, loo = clf._fit_targets(X, Y, w, oos=True)
    ref = _refit_loo(lambda: FalkonRegressor(alpha=alpha, centers=C, gamma=GAMMA, tol=1e-12),
                     X, Y, w)
    np.testing.assert_allclose(loo, ref, rtol=1e-7, atol=1e-8)
    beta = _direct_temperature(ref[:, 0] if k == 2 else ref, np.searchsorted(clf.classes_, y), w)
    np.testing.assert_allclose(clf.calibration_temperature_, beta, rtol=1e-5)


_MODELS = {
    "krr": lambda **kw: KernelRidgeClassifier(alpha=0.1, kernel="rbf", gamma=GAMMA, **kw),
    "krr-pcg": lambda **kw: KernelRidgeClassifier(alpha=0.1, kernel="rbf", gamma=GAMMA,
                                                  solver="pcg", random_state=0, **kw),
    "ntk": lambda **kw: NTKRidgeClassifier(alpha=0.1, **kw),
    "falkon": lambda **kw: FalkonClassifier(alpha=0.1, n_centers=15, gamma=GAMMA,
                                            random_state=0, **kw),
}


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), k=st.integers(2, 4), n=st.integers(16, 40),
       name=st.sampled_from(sorted(_MODELS)))
def test_proba_argmax_is_predict_and_rows_sum_to_one(seed, k, n, name):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 2) * rng.uniform(0.1, 5)
    y = rng.randint(0, k, n)
    y[:2] = [0, 1]  # at least two classes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tiny random problems may warn on convergence
        clf = _MODELS[name]().fit(X, y)
    P = clf.predict_proba(X)
    np.testing.assert_allclose(P.sum(1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(np.exp(clf.predict_log_proba(X)), P, rtol=1e-12)
    np.testing.assert_array_equal(clf.classes_[P.argmax(1)], clf.predict(X))  # every row
    d = clf.decision_function(X)  # ... and it is the decision's class where they differ
    clear = (np.abs(d) > 1e-9) if d.ndim == 1 else (np.sort(d, 1)[:, -1] - np.sort(d, 1)[:, -2]
                                                     > 1e-9)
    top = (d > 0).astype(int) if d.ndim == 1 else d.argmax(1)
    np.testing.assert_array_equal(clf.classes_[top][clear], clf.predict(X)[clear])


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("name", ["krr", "falkon"])
def test_underflowing_rows_predict_the_probabilities_arg_max(name, k):
    # queries far from every training row: the Gaussian kernel underflows (e^-78 and
    # below), the decision values differ at that scale, the probabilities are uniform;
    # predict resolves the tie as argmax(predict_proba) does (the first class)
    X, y, _ = _data(n=40, k=k, seed=7)
    clf = _MODELS[name]().fit(X, y)
    t = np.linspace(0, 2 * np.pi, 36, endpoint=False)  # a circle around the data, radius
    cand = X.mean(0) + np.sqrt(240.0) * np.column_stack([np.cos(t), np.sin(t)])  # ~15.5
    d = clf.decision_function(cand)  # k to the nearest row ~e^-78, to the farthest ~e^-171
    assert np.all(np.abs(d) < 1e-25) and np.all(np.abs(d) > 0)
    S = np.column_stack([-d, d]) if d.ndim == 1 else d
    assert np.any(S.argmax(1) != 0)  # the decision alone would pick another class
    P = clf.predict_proba(cand)
    assert np.all(P == P[:, :1])  # uniform to the last bit
    np.testing.assert_allclose(P, 1.0 / k, rtol=1e-15)
    np.testing.assert_array_equal(clf.predict(cand), np.full(len(cand), clf.classes_[0]))
    # a clear row keeps the decision's class
    np.testing.assert_array_equal(clf.predict(X[:5]), clf.classes_[
        (clf.decision_function(X[:5]) > 0).astype(int) if k == 2
        else clf.decision_function(X[:5]).argmax(1)])


@pytest.mark.parametrize("name", sorted(_MODELS))
def test_class_weight_balanced_equals_matching_sample_weight(name):
    X, y, w = _data(n=40)
    y[:15] = 0
    a = _MODELS[name](class_weight="balanced").fit(X, y, sample_weight=w)
    b = _MODELS[name]().fit(X, y, sample_weight=w * compute_sample_weight("balanced", y))
    np.testing.assert_allclose(a.dual_coef_, b.dual_coef_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(a.calibration_temperature_, b.calibration_temperature_,
                               rtol=1e-10)
    cw = {0: 2.0, 2: 0.5}  # a dict: the missing class weighs 1
    c = _MODELS[name](class_weight=cw).fit(X, y)
    d = _MODELS[name]().fit(X, y, sample_weight=np.vectorize(lambda v: cw.get(v, 1.0))(y))
    np.testing.assert_allclose(c.dual_coef_, d.dual_coef_, rtol=1e-10, atol=1e-12)


def test_class_weight_moves_the_decision():
    """scikit-learn's class-weight check at a kernel scale that fits its blobs."""
    from sklearn.datasets import make_blobs
    from sklearn.model_selection import train_test_split

    X, y = make_blobs(centers=3, random_state=0, cluster_std=20)
    Xa, Xb, ya, _ = train_test_split(X, y, test_size=0.5, random_state=0)
    cw = {0: 1000, 1: 1e-4, 2: 1e-4}
    for est in (KernelRidgeClassifier(kernel="rbf", gamma=1e-3, class_weight=cw),
                FalkonClassifier(gamma=1e-3, class_weight=cw, random_state=0),
                FalkonClassifier(gamma=1e-3, class_weight=cw, random_state=0, loss="logistic")):
        assert np.mean(est.fit(Xa, ya).predict(Xb) == 0) > 0.87


@pytest.mark.parametrize("name", sorted(_MODELS))
def test_pickle_keeps_the_calibration(name):
    X, y, _ = _data()
    clf = _MODELS[name]().fit(X, y)
    again = pickle.loads(pickle.dumps(clf))
    assert again.calibration_temperature_ == clf.calibration_temperature_
    # caches of the fit are not pickled and are rebuilt on load: equal up to rounding
    np.testing.assert_allclose(again.predict_proba(X), clf.predict_proba(X), rtol=1e-12,
                               atol=1e-15)


def test_meta_estimators_use_the_probabilities():
    X, y, _ = _data(n=80, k=2, seed=4)
    base = KernelRidgeClassifier(alpha=0.1, kernel="rbf", gamma=GAMMA)
    semi = y.copy()
    semi[::3] = -1
    st_clf = SelfTrainingClassifier(base, threshold=0.8).fit(X, semi)
    assert st_clf.predict_proba(X).shape == (80, 2)
    cal = CalibratedClassifierCV(base, cv=3).fit(X, y)
    np.testing.assert_allclose(cal.predict_proba(X).sum(1), 1.0)
    fk = FalkonClassifier(alpha=0.1, n_centers=20, gamma=GAMMA, random_state=0)
    vote = VotingClassifier([("krr", base), ("falkon", fk)], voting="soft").fit(X, y)
    want = (base.fit(X, y).predict_proba(X) + fk.fit(X, y).predict_proba(X)) / 2
    np.testing.assert_allclose(vote.predict_proba(X), want, rtol=1e-10)
    stack = StackingClassifier([("krr", base), ("ntk", NTKRidgeClassifier())],
                               final_estimator=LogisticRegression(), cv=3,
                               stack_method="predict_proba").fit(X, y)
    assert stack.score(X, y) > 0.7


@pytest.mark.parametrize("scoring", ["neg_log_loss", "neg_brier_score"])
def test_probability_scorers_in_grid_search(scoring):
    X, y, _ = _data(n=60, k=2, seed=5)
    grid = GridSearchCV(KernelRidgeClassifier(kernel="rbf", gamma=GAMMA),
                        {"alpha": [0.01, 1.0]}, scoring=scoring, cv=3).fit(X, y)
    assert np.all(np.isfinite(grid.cv_results_["mean_test_score"]))
    assert np.all(grid.cv_results_["mean_test_score"] < 0)


@pytest.mark.parametrize("name", sorted(_MODELS))
def test_bad_input_clear_errors_and_state_kept(name):
    X, y, _ = _data()
    clf = _MODELS[name]().fit(X, y)
    before = pickle.dumps(clf.__dict__)
    with pytest.raises(ValueError, match="class_weight.*not among the classes"):
        clf.set_params(class_weight={0: 1.0, 9: 2.0}).fit(X, y)
    with pytest.raises(ValueError, match="class_weight"):
        clf.set_params(class_weight="fair").fit(np.full((3, 2), np.nan), [0, 1, 0])
    with pytest.raises(ValueError, match="calibration"):
        clf.set_params(class_weight=None, calibration="isotonic").fit(
            np.full((3, 2), np.nan), [0, 1, 0])
    with pytest.raises(ValueError, match="sample_weight"):
        clf.set_params(calibration="auto").fit(X, y, sample_weight=-np.ones(len(y)))
    assert pickle.dumps(clf.__dict__) == before
    off = _MODELS[name](calibration=None).fit(X, y)
    assert not hasattr(off, "predict_proba") and not hasattr(off, "predict_log_proba")
    with pytest.raises(AttributeError):
        off.predict_proba(X)
    np.testing.assert_array_equal(off.predict(X), clf.predict(X))


# ------------------------------------------------- two classes: one slope per side
@pytest.mark.parametrize("name", ["krr", "ntk", "falkon"])
def test_two_class_slopes_minimise_the_log_loss_of_the_oos_values(name):
    X, y, w = _data(n=80, k=2, seed=8)
    w[5] = 0.0  # a zero-weight row counts on no side
    clf = _MODELS[name]().fit(X, y, sample_weight=w)
    probe = _MODELS[name]().fit(X, y, sample_weight=w)
    rows, dec = _falkon_oos(probe, X, y, w)  # the values fit calibrated on, recomputed
    d, y_idx, wr = dec[:, 0] - clf._binary_offset, np.searchsorted(clf.classes_, y[rows]), \
        w[rows]
    assert min(np.sum((d < 0) & (wr > 0)), np.sum((d > 0) & (wr > 0))) >= MIN_SIDE_ROWS
    slopes = clf.calibration_slopes_
    np.testing.assert_allclose(slopes, _direct_slopes(d, y_idx, wr), rtol=1e-6)
    np.testing.assert_allclose(clf.calibration_temperature_,
                               _direct_temperature(d, y_idx, wr), rtol=1e-6)
    assert abs(slopes[1] / slopes[0] - 1) > 1e-3  # not the symmetric map
    dq = clf.decision_function(X)
    P = clf.predict_proba(X)
    np.testing.assert_allclose(P[:, 1], expit(np.where(dq > 0, slopes[1], slopes[0]) * dq),
                               rtol=1e-12)
    np.testing.assert_allclose(P.sum(1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(clf.classes_[P.argmax(1)], clf.predict(X))
    back = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(back.calibration_slopes_, slopes)
    np.testing.assert_allclose(back.predict_proba(X), P, rtol=1e-12, atol=1e-15)
    off = _MODELS[name](calibration=None).fit(X, y)
    assert off.calibration_slopes_ is None and not hasattr(off, "predict_proba")
    y3 = y.copy()
    y3[::4] = 2
    assert _MODELS[name]().fit(X, y3).calibration_slopes_ is None  # the temperature alone


def test_mirrored_problem_has_equal_slopes():
    # x -> -x with the labels swapped: the Gaussian kernel's fit is odd, f(-x) = -f(x), and
    # so are its leave-one-out values; both sides then have the temperature's slope
    X0, y0, _ = _data(n=40, k=2, seed=9)
    X, y = np.r_[X0, -X0], np.r_[y0, 1 - y0]
    clf = KernelRidgeClassifier(alpha=0.1, kernel="rbf", gamma=GAMMA, solver="cholesky")
    clf.fit(X, y)
    np.testing.assert_allclose(clf.decision_function(-X0), -clf.decision_function(X0),
                               rtol=1e-9, atol=1e-12)
    beta = clf.calibration_temperature_
    np.testing.assert_allclose(clf.calibration_slopes_, [beta, beta], rtol=1e-8)
    lopsided = KernelRidgeClassifier(alpha=0.1, kernel="rbf", gamma=GAMMA).fit(X0, y0)
    assert abs(lopsided.calibration_slopes_[1] / lopsided.calibration_slopes_[0] - 1) > 1e-3


def test_multiclass_logistic_falkon_has_no_temperature():
    # (two classes: slopes on approximate leave-one-out values, test_falkon_calibration.py)
    X, y, _ = _data(n=60, k=3, seed=10)
    clf = FalkonClassifier(loss="logistic", n_centers=20, gamma=GAMMA, random_state=0)
    clf.fit(X, y)
    assert clf.calibration_slopes_ is None and clf.calibration_temperature_ == 1.0
    np.testing.assert_allclose(clf.predict_proba(X), softmax(clf.decision_function(X), axis=1),
                               rtol=1e-12)


# ------------------------------------------------- FALKON: exact LOO or a held-out split
def _falkon_oos(clf, X, y, w):
    """The out-of-sample ``(rows, values)`` that ``fit`` calibrated on, recomputed (the
    same random_state draws the same centers and split)."""
    clf._y_idx = np.searchsorted(clf.classes_, y)
    try:
        return clf._fit_targets(X, _pm1(y, clf.classes_), w, oos=True)
    finally:
        del clf._y_idx


@pytest.mark.parametrize("k, alpha, n_centers, tol, exact, ref_tol", [
    (3, 0.05, 30, 1e-10, True, 1e-10),  # float64 K_nM, the held-out solve to 1e-10
    (2, 0.05, 30, 1e-10, False, 1e-10),  # ... to its default floor _HOLDOUT_TOL
    (3, [0.02, 0.1, 0.5], 30, 1e-10, True, 1e-10),  # a penalty per class: A per group
    (3, 0.05, 30, 1e-5, False, 1e-10),  # float32 K_nM, mixed-precision rounds
    (3, 0.5, 120, 1e-8, True, 1e-8),  # every row a center: centers are held out too
])
def test_falkon_holdout_values_are_those_of_a_fit_without_them(monkeypatch, k, alpha,
                                                               n_centers, tol, exact,
                                                               ref_tol):
    import kernelkit.ridge._falkon_loo as fk

    monkeypatch.setattr(fk, "_LOO_SHARE", -1.0)  # the held-out split, whatever the cost
    if exact:
        monkeypatch.setattr(fk, "_HOLDOUT_TOL", 0.0)
    X, y, w = _data(n=120, k=k, seed=1)
    w[:6] = 0.0  # zero-weight rows are never held out (they calibrate nothing)
    clf = FalkonClassifier(alpha=alpha, n_centers=n_centers, gamma=GAMMA, tol=tol,
                           random_state=0).fit(X, y, sample_weight=w)
    rows, dec = _falkon_oos(clf, X, y, w)
    centers = clf.center_indices_
    live = (w > 0) & ~np.isin(np.arange(len(y)), centers if n_centers < len(y) else [])
    for c in np.unique(y):  # a stratified tenth of each class's live non-center rows
        assert np.sum(y[rows] == c) == np.ceil(0.1 * np.sum(live & (y == c)))
    assert np.all(live[rows])
    w0 = w.copy()
    w0[rows] = 0.0
    Y = _pm1(y, clf.classes_)
    ref = FalkonRegressor(alpha=alpha, centers=clf.centers_, gamma=GAMMA, tol=ref_tol).fit(
        X, Y, w0).predict(X[rows])
    err = np.abs(dec - ref).max() / np.abs(ref).max()
    assert err < (1e-6 if exact else 5 * fk._HOLDOUT_TOL), err
    # ... and far from the full fit's own values: the rows are out of this model
    inside = clf.decision_function(X[rows]).reshape(dec.shape)
    assert np.abs(dec - inside).max() / np.abs(ref).max() > max(5 * err, 1e-2)


@pytest.mark.parametrize("k", [2, 3])
def test_falkon_holdout_temperature_equals_direct_minimisation(monkeypatch, k):
    import kernelkit.ridge._falkon_loo as fk

    monkeypatch.setattr(fk, "_LOO_SHARE", -1.0)
    X, y, w = _data(n=150, k=k, seed=2)
    clf = FalkonClassifier(alpha=0.05, n_centers=30, gamma=GAMMA, random_state=3).fit(
        X, y, sample_weight=w)
    rows, dec = _falkon_oos(clf, X, y, w)
    assert 0 < len(rows) < 0.15 * len(y)
    beta = _direct_temperature(dec[:, 0] if k == 2 else dec,
                               np.searchsorted(clf.classes_, y[rows]), w[rows])
    np.testing.assert_allclose(clf.calibration_temperature_, beta, rtol=1e-6)


def test_falkon_auto_calibration_switches_on_cost(monkeypatch):
    import kernelkit.ridge._falkon_loo as fk

    cheap = fk.exact_loo_is_cheap
    assert cheap(200, 100, 2, 10, True)  # tiny: exact leave-one-out
    # the measured cases that made LOO 2-3x the fit, and the documented 60,000 x 16,000
    assert not cheap(20000, 1401, 20, 41, True)
    assert not cheap(30000, 1786, 784, 40, True)
    assert not cheap(60000, 16000, 784, 17, True)
    assert not cheap(10**6, 100, 20, 20, True)  # few centers, many rows: LOO ~ the CG
    X, y, w = _data(n=60, k=3, seed=3)
    make = lambda: FalkonClassifier(alpha=0.1, n_centers=20, gamma=GAMMA,  # noqa: E731
                                    random_state=0, tol=1e-10)
    a = make().fit(X, y, sample_weight=w)
    rows, _ = _falkon_oos(a, X, y, w)
    np.testing.assert_array_equal(  # leave-one-out at every row that is not a center
        rows, np.setdiff1d(np.arange(len(y)), a.center_indices_))
    monkeypatch.setattr(fk, "_LOO_SHARE", -1.0)
    b = make().fit(X, y, sample_weight=w)
    rows, _ = _falkon_oos(b, X, y, w)
    assert 0 < len(rows) <= 9  # a tenth of each class
    np.testing.assert_array_equal(a.dual_coef_, b.dual_coef_)  # the model is the full fit
    assert a.calibration_temperature_ != b.calibration_temperature_
    monkeypatch.setattr(fk, "_HOLDOUT_ROWS", 3)  # capped: ceil(3 / 60 n_k) of each class
    rows, _ = _falkon_oos(b, X, y, w)
    assert len(rows) == len(np.unique(y))


@pytest.mark.parametrize("tol", [1e-5, 1e-3])  # float64 K_nM; float32 with float64 rounds
def test_falkon_holdout_log_reports_the_systems_residual(monkeypatch, capsys, tol):
    # the held-out solve is a correction from the full fit: its CG lines are relative to
    # the correction's own right-hand side, its summary to the system's, within
    # max(tol, _HOLDOUT_TOL) as documented
    import re

    import kernelkit.ridge._falkon_loo as fk

    monkeypatch.setattr(fk, "_LOO_SHARE", -1.0)
    X, y, _ = _data(n=300, k=3, seed=8)
    FalkonClassifier(alpha=0.05, n_centers=30, gamma=GAMMA, tol=tol, random_state=0,
                     verbose=1).fit(X, y)
    lines = capsys.readouterr().out.splitlines()
    head = next(x for x in lines if "held-out rows: the correction" in x)
    line = next(x for x in lines if "held-out solve" in x)
    assert lines.index(head) < lines.index(line)
    res = float(re.search(r"max_rel_residual=([0-9.eE+-]+)", line).group(1))
    stop = float(re.search(r"tol=([0-9.eE+-]+)", line).group(1))
    assert stop == max(tol, fk._HOLDOUT_TOL) and 0 < res <= stop
