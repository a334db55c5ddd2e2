"""Calibrated probabilities and class weights of the one-vs-all classifiers.

EigenProClassifier, STKRClassifier and KONSClassifier share the mixin of
kernelkit.utils._classes: softmax(beta * decision_function) (two classes: one slope per
side of the threshold), fitted on out-of-sample decision values. The values are checked
against an independent scipy minimisation on decision values recomputed here.
"""

import pickle
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar
from scipy.special import expit
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import load_digits, make_classification
from sklearn.ensemble import StackingClassifier, VotingClassifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import GridSearchCV, StratifiedKFold, train_test_split
from sklearn.semi_supervised import SelfTrainingClassifier
from sklearn.utils.class_weight import compute_sample_weight

from test_calibration import _direct_slopes, _platt_reference  # tests/ is on sys.path

from kernelkit.eigenpro import EigenProClassifier
from kernelkit.online import KONSClassifier
from kernelkit.random_features import RandomFeaturesClassifier, RandomFourierFeatures
from kernelkit.stkr import STKRClassifier
from kernelkit.utils._calibration import MIN_SIDE_ROWS

FACTORIES = {
    "eigenpro": lambda **kw: EigenProClassifier(gamma=0.5, max_iter=5, random_state=0, **kw),
    "stkr": lambda **kw: STKRClassifier(kernel="rbf", gamma=0.5, **kw),
    "kons": lambda **kw: KONSClassifier(gamma=0.5, gamma_reg=0.1, random_state=0, **kw),
    "random_features": lambda **kw: RandomFeaturesClassifier(
        RandomFourierFeatures(64, gamma=0.5, random_state=0), alpha=0.1, **kw),
}


def _data(seed=0, n=120, k=3):
    X, y = make_classification(n, 4, n_informative=3, n_redundant=0, n_classes=k,
                               n_clusters_per_class=1, flip_y=0.05, random_state=seed)
    return X, y


def _direct_temperature(d, y):
    """An independent minimiser: the cross-entropy of an explicit softmax against the smoothed
    targets."""
    S = np.column_stack([-d / 2, d / 2]) if d.ndim == 1 else d
    T = _platt_reference(np.asarray(y), S.shape[1])

    def loss(t):
        Z = np.exp(np.exp(t) * S - (np.exp(t) * S).max(1, keepdims=True))
        return -np.mean(np.sum(T * np.log(Z / Z.sum(1, keepdims=True)), axis=1))

    return float(np.exp(minimize_scalar(loss, bounds=(-15, 15), method="bounded",
                                        options={"xatol": 1e-10}).x))


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # few epochs on purpose
        yield


# ------------------------------------------------------------ the shared contract
@pytest.mark.parametrize("name", FACTORIES)
@settings(max_examples=8, deadline=None, derandomize=True)
@given(k=st.integers(2, 4), n=st.integers(30, 60), seed=st.integers(0, 2**16))
def test_argmax_is_predict_and_rows_sum_to_one(name, k, n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = np.r_[np.arange(k), rng.integers(0, k, n - k)]  # every class present
    X[np.arange(n), y % 3] += 2.0
    clf = FACTORIES[name]().fit(X, y)
    P = clf.predict_proba(X)
    assert P.shape == (n, k) and np.all((P >= 0) & (P <= 1))
    np.testing.assert_allclose(P.sum(1), 1.0, rtol=1e-12)
    D = clf.decision_function(X)
    S = np.column_stack([-D, D]) if D.ndim == 1 else D
    top = np.sort(S, 1)
    clear = top[:, -1] - top[:, -2] > 1e-9
    np.testing.assert_array_equal(clf.classes_[P.argmax(1)], clf.predict(X))  # every row
    np.testing.assert_array_equal(clf.classes_[S.argmax(1)][clear], clf.predict(X)[clear])
    np.testing.assert_allclose(np.exp(clf.predict_log_proba(X)), P, rtol=1e-12)


def test_eigenpro_temperature_on_its_out_of_fold_values():
    # up to OOF_MAX_ROWS: 5-fold out-of-fold values of models fitted with calibration=None,
    # the model itself fitted as with calibration=None
    X, y = _data(1)
    clf = FACTORIES["eigenpro"]().fit(X, y)
    d = np.empty((len(y), 3))
    for tr, te in StratifiedKFold(5, shuffle=True, random_state=0).split(X, y):
        d[te] = FACTORIES["eigenpro"](calibration=None).fit(X[tr], y[tr]).decision_function(X[te])
    assert clf.calibration_temperature_ == pytest.approx(_direct_temperature(d, y), rel=1e-5)
    ref = FACTORIES["eigenpro"](calibration=None).fit(X, y)
    np.testing.assert_array_equal(clf.decision_function(X), ref.decision_function(X))
    # tol=None (no early stopping): the model trains on every row
    assert FACTORIES["eigenpro"](tol=None).fit(X, y).centers_.shape[0] == len(y)
    # a class with fewer rows than folds: the held-out split instead
    y4 = y.copy()
    y4[:4] = 3
    few = FACTORIES["eigenpro"](tol=None).fit(X, y4)
    assert few.centers_.shape[0] == len(y) - int(np.ceil(0.1 * len(y)))


def test_eigenpro_temperature_on_its_held_out_rows(monkeypatch):
    from kernelkit.eigenpro import _classifier

    monkeypatch.setattr(_classifier, "OOF_MAX_ROWS", 0)  # the large-n rule at n = 120
    X, y = _data(1)
    clf = FACTORIES["eigenpro"]().fit(X, y)
    # EigenPro 2: centers_ are the training rows; the others were held out
    held = ~np.any(np.all(X[:, None, :] == clf.centers_[None], axis=2), axis=1)
    assert held.sum() == int(np.ceil(0.1 * len(y)))
    beta = _direct_temperature(clf.decision_function(X[held]), y[held])
    assert clf.calibration_temperature_ == pytest.approx(beta, rel=1e-5)
    # tol=None: the same fraction is still held out for the calibration
    nt = FACTORIES["eigenpro"](tol=None).fit(X, y)
    assert nt.centers_.shape[0] == len(y) - held.sum()
    assert EigenProClassifier(tol=None, calibration=None, max_iter=2).fit(X, y) \
        .centers_.shape[0] == len(y)


def test_stkr_temperature_on_its_fold_values():
    X, y = _data(2)
    y_semi = y.copy()
    y_semi[60:] = -1
    clf = FACTORIES["stkr"](random_state=0).fit(X, y_semi)
    lab = np.arange(60)
    d = np.empty((60, 3))
    for tr, te in StratifiedKFold(5, shuffle=True, random_state=0).split(lab, y[lab]):
        yf = y_semi.copy()
        yf[te] = -1  # the fold's labels hidden: the same base kernel on all rows
        d[te] = FACTORIES["stkr"](calibration=None).fit(X, yf).decision_function(X[te])
    beta = _direct_temperature(d, y[lab])
    assert clf.calibration_temperature_ == pytest.approx(beta, rel=1e-5)


def test_kons_temperature_on_prequential_values():
    X, y = _data(3)
    clf = FACTORIES["kons"]().fit(X, y)
    d = FACTORIES["kons"]().partial_fit_decision_function(X, y, classes=np.unique(y))
    assert clf.calibration_temperature_ == pytest.approx(_direct_temperature(d, y), rel=1e-5)
    # partial_fit refits beta on the window of every prequential value so far
    X2, y2 = _data(4)
    clf.partial_fit(X2, y2)
    stream = FACTORIES["kons"]()
    d_all = np.r_[stream.partial_fit_decision_function(X, y, classes=np.unique(y)),
                  stream.partial_fit_decision_function(X2, y2)]
    assert clf.calibration_temperature_ == pytest.approx(
        _direct_temperature(d_all, np.r_[y, y2]), rel=1e-5)


def _two_class_oos(name, X, y):
    """A binary fit and the out-of-sample decision values (with their labels) that it
    calibrated on, recomputed as the tests above do."""
    if name == "eigenpro":  # 5-fold out-of-fold values (n <= OOF_MAX_ROWS)
        clf = FACTORIES[name]().fit(X, y)
        d = np.empty(len(y))
        for tr, te in StratifiedKFold(5, shuffle=True, random_state=0).split(X, y):
            d[te] = FACTORIES[name](calibration=None).fit(X[tr], y[tr]).decision_function(X[te])
        return clf, d, y
    if name == "stkr":
        y_semi = y.copy()
        y_semi[len(y) // 2:] = -1
        clf = FACTORIES[name](random_state=0, tol=1e-10).fit(X, y_semi)  # refits agree
        lab = np.arange(len(y) // 2)
        d = np.empty(len(lab))
        for tr, te in StratifiedKFold(5, shuffle=True, random_state=0).split(lab, y[lab]):
            yf = y_semi.copy()
            yf[te] = -1
            d[te] = FACTORIES[name](calibration=None, tol=1e-10).fit(X, yf).decision_function(
                X[te])
        return clf, d, y[lab]
    clf = FACTORIES[name]().fit(X, y)
    return clf, FACTORIES[name]().partial_fit_decision_function(X, y, classes=[0, 1]), y


@pytest.mark.parametrize("name", ["eigenpro", "stkr", "kons"])
def test_two_class_slopes_on_the_out_of_sample_values(name):
    X, y = _data(12, n=300, k=2)
    clf, d, y_oos = _two_class_oos(name, X, y)
    assert min(np.sum(d < 0), np.sum(d > 0)) >= MIN_SIDE_ROWS
    np.testing.assert_allclose(clf.calibration_slopes_, _direct_slopes(d, y_oos), rtol=1e-6)
    assert clf.calibration_temperature_ == pytest.approx(_direct_temperature(d, y_oos),
                                                         rel=1e-5)
    dq = clf.decision_function(X)
    a = np.where(dq > 0, clf.calibration_slopes_[1], clf.calibration_slopes_[0])
    P = clf.predict_proba(X)
    np.testing.assert_allclose(P[:, 1], expit(a * dq), rtol=1e-12)
    np.testing.assert_array_equal(clf.classes_[P.argmax(1)], clf.predict(X))
    back = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(back.calibration_slopes_, clf.calibration_slopes_)
    np.testing.assert_array_equal(back.predict_proba(X), P)


def test_kons_slopes_follow_the_classes():
    # a two-class stream has slopes, a three-class fit the temperature alone
    X, y = _data(13, n=150, k=3)
    two = y < 2
    clf = FACTORIES["kons"]().partial_fit(X[two], y[two], classes=[0, 1])
    assert clf.calibration_slopes_.shape == (2,)
    clf = FACTORIES["kons"]().fit(X, y)
    assert clf.calibration_slopes_ is None


@pytest.mark.slow
def test_kons_logistic_beats_calibrated_classifier_cv_on_digits():
    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X / 16, y, random_state=0, stratify=y)
    ours = KONSClassifier(loss="logistic", random_state=0).fit(Xtr, ytr)
    peer = CalibratedClassifierCV(KONSClassifier(loss="logistic", random_state=0), cv=3,
                                  ensemble=False).fit(Xtr, ytr)
    assert ours.predict_proba(Xte).max(1).mean() > 0.8  # no longer topping out at 0.66
    assert log_loss(yte, ours.predict_proba(Xte)) <= log_loss(yte, peer.predict_proba(Xte))


# ------------------------------------------------------------ class weights
@pytest.mark.parametrize("name", FACTORIES)
def test_balanced_class_weight_equals_its_sample_weight(name):
    X, y = _data(5)
    keep = (y != 2) | (np.arange(len(y)) % 3 == 0)  # imbalanced
    X, y = X[keep], y[keep]
    a = FACTORIES[name](class_weight="balanced").fit(X, y)
    b = FACTORIES[name]().fit(X, y, sample_weight=compute_sample_weight("balanced", y))
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X), rtol=1e-10,
                               atol=1e-12)
    assert a.calibration_temperature_ == pytest.approx(b.calibration_temperature_, rel=1e-10)
    # sample_weight and class_weight multiply
    sw = np.linspace(0.5, 2.0, len(y))
    c = FACTORIES[name](class_weight={0: 2.0}).fit(X, y, sample_weight=sw)
    d = FACTORIES[name]().fit(X, y, sample_weight=sw * np.where(y == 0, 2.0, 1.0))
    np.testing.assert_allclose(c.decision_function(X), d.decision_function(X), rtol=1e-10,
                               atol=1e-12)


@pytest.mark.parametrize("name", FACTORIES)
def test_class_weight_for_an_unseen_class_is_rejected(name):
    X, y = _data(6)
    clf = FACTORIES[name]().fit(X, y)
    before = clf.decision_function(X)
    with pytest.raises(ValueError, match="class_weight"):
        clf.set_params(class_weight={0: 1.0, 7: 2.0}).fit(X, y)
    with pytest.raises(ValueError, match="class_weight"):
        clf.set_params(class_weight="heavy").fit(X, y)
    np.testing.assert_array_equal(clf.decision_function(X), before)  # left as it was


def test_kons_balanced_needs_the_whole_y():
    X, y = _data(7)
    with pytest.raises(ValueError, match="balanced"):
        KONSClassifier(class_weight="balanced").partial_fit(X, y, classes=[0, 1, 2])


def test_stkr_weights_solve_the_weighted_ridge_system():
    """identity transform: (K[L, L] + sum(w) beta W^-1) alpha = y (dense solve)."""
    X, y = _data(8, n=50, k=2)
    w = np.linspace(0.2, 3.0, 50)
    clf = STKRClassifier("identity", kernel="rbf", gamma=0.5, beta=1e-2,
                         calibration=None).fit(X, y, sample_weight=w)
    K = np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1))
    Y = np.eye(2)[y]
    alpha = np.linalg.solve(K + w.sum() * 1e-2 * np.diag(1 / w), Y)
    np.testing.assert_allclose(clf.dual_coef_, alpha, rtol=1e-8, atol=1e-10)


def test_eigenpro_weights_reach_the_weighted_kernel_ridge_solution():
    from sklearn.kernel_ridge import KernelRidge

    from kernelkit.eigenpro import EigenProRegressor
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (150, 2))
    y = np.sin(3 * X[:, 0]) * X[:, 1]
    w = rng.uniform(0.5, 2.0, 150)
    ep = EigenProRegressor(gamma=2.0, alpha=0.5, dtype="float64", max_iter=60, tol=None,
                           random_state=0).fit(X, y, sample_weight=w)
    ref = KernelRidge(alpha=0.5, kernel="rbf", gamma=2.0).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(ep.dual_coef_, ref.dual_coef_, atol=2e-3)


# ------------------------------------------------------------ switches and pickling
@pytest.mark.parametrize("name", FACTORIES)
def test_calibration_none_removes_predict_proba(name):
    clf = FACTORIES[name](calibration=None)
    assert not hasattr(clf, "predict_proba") and not hasattr(clf, "predict_log_proba")
    X, y = _data(9)
    clf.fit(X, y)
    assert clf.calibration_temperature_ is None and clf.calibration_slopes_ is None
    with pytest.raises(AttributeError) as err:
        clf.predict_proba(X)
    # the cause names the switch, as SVC's names probability=False
    assert "not available when calibration=None" in str(err.value.__cause__)
    with pytest.raises(ValueError, match="calibration"):
        FACTORIES[name](calibration="isotonic").fit(X, y)


@pytest.mark.parametrize("name", FACTORIES)
def test_pickle_keeps_the_calibration(name):
    X, y = _data(10)
    clf = FACTORIES[name]().fit(X, y)
    back = pickle.loads(pickle.dumps(clf))
    assert back.calibration_temperature_ == clf.calibration_temperature_
    np.testing.assert_array_equal(back.predict_proba(X), clf.predict_proba(X))


# ------------------------------------------------------------ scikit-learn meta-estimators
@pytest.mark.parametrize("name", FACTORIES)
def test_meta_estimators_take_every_classifier(name):
    X, y = _data(11, n=90)
    y_semi = y.copy()
    y_semi[45:] = -1
    st_ = SelfTrainingClassifier(FACTORIES[name](), threshold=0.8, max_iter=3).fit(X, y_semi)
    assert st_.predict_proba(X).shape == (90, 3)
    cal = CalibratedClassifierCV(FACTORIES[name](), cv=3).fit(X, y)
    np.testing.assert_allclose(cal.predict_proba(X).sum(1), 1.0)
    vote = VotingClassifier([("a", FACTORIES[name]()), ("lr", LogisticRegression())],
                            voting="soft").fit(X, y)
    assert vote.score(X, y) > 0.7
    stack = StackingClassifier([("a", FACTORIES[name]())], LogisticRegression(), cv=3,
                               stack_method="predict_proba").fit(X, y)
    assert stack.score(X, y) > 0.7


@pytest.mark.parametrize("name", FACTORIES)
@pytest.mark.parametrize("scoring", ["neg_log_loss", "neg_brier_score"])
def test_probability_scorers_in_grid_search(name, scoring):
    X, y = _data(12, n=90, k=2)
    key = "features__gamma" if name == "random_features" else "gamma"
    grid = GridSearchCV(FACTORIES[name](), {key: [0.1, 0.5]}, scoring=scoring, cv=3)
    grid.fit(X, y)
    assert np.all(np.isfinite(grid.cv_results_["mean_test_score"]))
    assert np.all(grid.cv_results_["mean_test_score"] <= 0)
