"""RiverKONS under river's own conventions: its estimator checks and progressive validation."""

import subprocess
import sys

import numpy as np
import pytest

from kernelkit.online import KONSClassifier, KONSRegressor, RiverKONS

river = pytest.importorskip("river")
from river import checks, datasets, evaluate, linear_model, metrics, preprocessing  # noqa: E402

MODELS = {"regressor": lambda: RiverKONS(KONSRegressor()),
          "classifier": lambda: RiverKONS(KONSClassifier()),
          "logistic": lambda: RiverKONS(KONSClassifier(loss="logistic"))}
# the ten-times-longer streams of the memory check take seconds
_SLOW = {"check_bounded_memory_growth", "check_shuffle_features_no_impact",
         "check_seeding_is_idempotent"}


def _river_checks():
    for name, make in MODELS.items():
        model = make()
        for i, check in enumerate(checks.yield_checks(model)):
            marks = [pytest.mark.slow] if check.__name__ in _SLOW else []
            yield pytest.param(name, i, id=f"{name}-{check.__name__}-{i}", marks=marks)


@pytest.mark.parametrize("name,index", list(_river_checks()))
def test_river_check_estimator(name, index):
    """Each of river's checks (``river.checks.check_estimator`` runs them all) passes."""
    model = MODELS[name]()
    check = list(checks.yield_checks(model))[index]
    check(model.clone())


def test_river_classes_are_river_estimators():
    from river import base

    assert isinstance(RiverKONS(KONSRegressor()), base.Regressor)
    assert isinstance(RiverKONS(KONSClassifier()), base.Classifier)
    assert isinstance(RiverKONS(KONSClassifier()), RiverKONS)
    with pytest.raises(TypeError, match="estimator"):
        RiverKONS()


@pytest.mark.slow  # a fresh interpreter importing numba and scikit-learn
def test_importing_kernelkit_does_not_import_river():
    code = ("import sys, kernelkit, kernelkit.online; "
            "from kernelkit.online import RiverKONS; assert 'river' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def _phishing():
    rows = list(datasets.Phishing().take(400))
    keys = sorted(rows[0][0], key=repr)  # the adapter's column order
    X = np.array([[x[k] for k in keys] for x, _ in rows], dtype=float)
    return rows, X, np.array([y for _, y in rows])


def test_progressive_val_score_phishing_matches_prequential_estimator():
    """river's progressive validation of the adapter equals the estimator's own prequential
    labels (``partial_fit_predict``) on the same stream, and beats river's online
    logistic regression there."""
    rows, X, y = _phishing()
    kw = dict(random_state=0)
    acc = evaluate.progressive_val_score(rows, RiverKONS(KONSClassifier(**kw)),
                                         metrics.Accuracy()).get()
    # the adapter starts the model when the second label arrives, on the samples so far
    t0 = int(np.flatnonzero(y != y[0])[0])
    est = KONSClassifier(gamma=1.0 / X.shape[1], **kw)
    pred = np.concatenate([[None], np.full(t0, y[0], dtype=object),
                           est.partial_fit_predict(X, y, classes=[False, True])[t0 + 1:]])
    # river's Accuracy skips the first prediction (None: nothing learned yet)
    assert acc == pytest.approx(np.mean(pred[1:] == y[1:]), abs=1e-12)
    peer = preprocessing.StandardScaler() | linear_model.LogisticRegression()
    peer_acc = evaluate.progressive_val_score(rows, peer, metrics.Accuracy()).get()
    assert acc > 0.85 and acc > peer_acc


def test_new_label_and_features_continue_the_model():
    """The issue's stream: a label outside ``classes`` is learned instead of killing the
    stream; a new feature is an exact continuation (old predictions unchanged)."""
    model = RiverKONS(KONSClassifier(loss="logistic", random_state=0), classes=[0, 1])
    rng = np.random.default_rng(0)
    for _ in range(30):
        a = rng.normal()
        model.learn_one({"a": a}, int(a > 0))
    before = model.predict_proba_one({"a": 0.3})
    model.learn_one({"a": 0.1}, 2)
    assert set(model.predict_proba_one({"a": 0.3})) == {0, 1, 2}
    assert model.predict_one({"a": 0.1}) in (0, 1, 2)
    # binary -> three one-vs-rest columns (-f, f, 0) before the update: classes 0, 1 keep
    # their order
    reg = RiverKONS(KONSRegressor(random_state=0))
    for _ in range(20):
        a = rng.normal()
        reg.learn_one({"a": a}, np.sin(a))
    p = reg.predict_one({"a": 0.4})
    est = reg.estimator_
    reg._row({"b": 1.0}, learn=True)  # grows the feature space only
    assert reg.features_ == ["a", "b"] and est.n_features_in_ == 2
    assert reg.predict_one({"a": 0.4}) == pytest.approx(p, abs=1e-12)
    assert before[1] > before[0]  # learned a > 0 -> 1


def test_rejected_learn_one_leaves_adapter_unchanged():
    import pickle

    model = RiverKONS(KONSClassifier(random_state=0), classes=[0, 1])
    for i in range(10):
        model.learn_one({"a": i / 10}, i % 2)
    snap = pickle.dumps(model)
    with pytest.raises(ValueError, match="feature 'b'"):
        model.learn_one({"a": 0.5, "b": "text"}, 1)
    assert pickle.dumps(model) == snap
    reg = RiverKONS(KONSRegressor(random_state=0))
    reg.learn_one({"a": 1.0}, 1.0)
    snap = pickle.dumps(reg)
    with pytest.raises(ValueError):
        reg.learn_one({"a": 1.0, "c": 2.0}, 1e200)  # loss overflows after the new feature
    assert pickle.dumps(reg) == snap
    reg.learn_one({"a": 0.5}, 0.5)
    assert np.isfinite(reg.predict_one({"a": 0.5}))
