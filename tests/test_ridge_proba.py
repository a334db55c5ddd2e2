"""Probabilities and class weights of the ridge-type classifiers (kernel ridge, NTK ridge,
FALKON): out-of-sample values against explicit refits, the temperature against a direct
minimisation, and their place in scikit-learn's meta-estimators."""

import pickle
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax
from sklearn.calibration import CalibratedClassifierCV
from sklearn.ensemble import StackingClassifier, VotingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.semi_supervised import SelfTrainingClassifier
from sklearn.utils.class_weight import compute_sample_weight

from kernelkit import KernelRidge, KernelRidgeClassifier, NTKRidgeClassifier
from kernelkit.ridge import FalkonClassifier, FalkonRegressor

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
    """argmin_beta of the weighted log-loss of softmax(beta * scores), by scipy directly."""
    S = np.column_stack([-dec / 2, dec / 2]) if dec.ndim == 1 else dec
    w = w / w.sum()

    def loss(t):
        return -np.dot(w, log_softmax(np.exp(t) * S, axis=1)[np.arange(len(S)), y_idx])

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


def test_pcg_holdout_values_are_those_of_a_fit_without_them():
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
    d = clf.decision_function(X)
    clear = (np.abs(d) > 1e-9) if d.ndim == 1 else (np.sort(d, 1)[:, -1] - np.sort(d, 1)[:, -2]
                                                     > 1e-9)
    np.testing.assert_array_equal(clf.classes_[P.argmax(1)][clear], clf.predict(X)[clear])


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
    np.testing.assert_array_equal(again.predict_proba(X), clf.predict_proba(X))


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
