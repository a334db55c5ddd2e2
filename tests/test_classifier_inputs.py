"""Input contracts every classifier shares: two classes at least, valid class weights,
and the DataFrame column names kept from fit."""

import numpy as np
import pandas as pd
import pytest

import kernelkit as kk

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # 2 epochs

CLASSIFIERS = {
    "KernelRidgeClassifier": lambda: kk.KernelRidgeClassifier(kernel="rbf"),
    "KernelRidgeClassifierCV": lambda: kk.KernelRidgeClassifierCV(kernel="rbf"),
    "NTKRidgeClassifier": lambda: kk.NTKRidgeClassifier(),
    "FalkonClassifier": lambda: kk.FalkonClassifier(n_centers=20, random_state=0),
    "FalkonClassifier-logistic": lambda: kk.FalkonClassifier(loss="logistic", n_centers=20,
                                                             random_state=0),
    "EigenProClassifier": lambda: kk.EigenProClassifier(max_iter=2, random_state=0),
    "KONSClassifier": lambda: kk.KONSClassifier(random_state=0),
    "InfiniteWidthClassifier": lambda: kk.InfiniteWidthClassifier(),
    "STKRClassifier": lambda: kk.STKRClassifier(),
    "RandomFeaturesClassifier": lambda: kk.RandomFeaturesClassifier(random_state=0),
}
WEIGHTED = [name for name, make in CLASSIFIERS.items() if "class_weight" in make().get_params()]


def _data(n=80):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 3))
    return X, (X[:, 0] > 0).astype(int)


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_one_class_is_rejected(name):
    X, _ = _data()
    with pytest.raises(ValueError, match="class"):
        CLASSIFIERS[name]().fit(X, np.zeros(len(X), dtype=int))


def test_weighted_classifiers_are_the_expected_ones():
    # the infinite-width ensemble is trained on the squared loss of one-hot targets
    assert set(CLASSIFIERS) - set(WEIGHTED) == {"InfiniteWidthClassifier"}


@pytest.mark.parametrize("name", WEIGHTED)
@pytest.mark.parametrize("weight", [-1.0, np.nan, np.inf])
def test_bad_class_weight_is_rejected_by_name(name, weight):
    X, y = _data()
    with pytest.raises(ValueError, match=r"class_weight\[0\]"):
        CLASSIFIERS[name]().set_params(class_weight={0: weight}).fit(X, y)


@pytest.mark.parametrize("name", WEIGHTED)
def test_class_weight_for_an_unseen_class_is_rejected(name):
    X, y = _data()
    with pytest.raises(ValueError, match="class_weight"):
        CLASSIFIERS[name]().set_params(class_weight={0: 1.0, 7: 2.0}).fit(X, y)


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_dataframe_column_names_are_kept_and_checked(name):
    X, y = _data()
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    est = CLASSIFIERS[name]().fit(df, y)
    assert list(est.feature_names_in_) == ["a", "b", "c"]
    ref = CLASSIFIERS[name]().fit(X, y)  # the same model as from the array
    np.testing.assert_allclose(est.predict_proba(df), ref.predict_proba(X), rtol=1e-12)
    with pytest.raises(ValueError, match="feature names"):
        est.predict(df[["c", "b", "a"]])


@pytest.mark.parametrize("name", WEIGHTED)
def test_class_weight_dict_equals_its_sample_weight_with_digit_string_labels(name):
    """A dict weights row i by class_weight[y_i] (1 where it names no weight), whatever
    the labels' type: digit strings stay strings (scikit-learn 1.9's compute_class_weight
    turns them into numbers and then finds no key)."""
    X, y = _data()
    ys = np.where(y == 1, "10", "2")
    a = CLASSIFIERS[name]().set_params(class_weight={"10": 3.0}).fit(X, ys)
    b = CLASSIFIERS[name]().fit(X, ys, sample_weight=np.where(y == 1, 3.0, 1.0))
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X), rtol=1e-6,
                               atol=1e-8)


@pytest.mark.parametrize("name", [n for n in WEIGHTED
                                  if hasattr(CLASSIFIERS[n](), "partial_fit")])
def test_partial_fit_weighs_a_chunk_against_all_classes(name):
    """A chunk without the class the dict names (as scikit-learn's SGDClassifier): its
    rows weigh 1, and the stream equals one weighted by the matching sample_weight."""
    X, y = _data()
    weights = np.where(y == 1, 5.0, 1.0)
    first = y == 0  # the first chunk has no row of class 1
    a = CLASSIFIERS[name]().set_params(class_weight={1: 5.0})
    b = CLASSIFIERS[name]()
    a.partial_fit(X[first], y[first], classes=[0, 1]).partial_fit(X[~first], y[~first])
    b.partial_fit(X[first], y[first], classes=[0, 1], sample_weight=weights[first])
    b.partial_fit(X[~first], y[~first], sample_weight=weights[~first])
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X), rtol=1e-6,
                               atol=1e-8)


@pytest.mark.parametrize("name", ["KONSClassifier", "RandomFeaturesClassifier"])
def test_partial_fit_classes_follow_one_rule(name):
    """The streaming classifiers share partial_fit's classes rule: required with two
    labels or more on the first call, later None or the same labels (any order); a
    refused call keeps the model."""
    X, y = _data()
    with pytest.raises(ValueError, match="classes must be passed to the first call"):
        CLASSIFIERS[name]().partial_fit(X, y)
    with pytest.raises(ValueError, match="at least two labels"):
        CLASSIFIERS[name]().partial_fit(X, y, classes=[1])
    model = CLASSIFIERS[name]().partial_fit(X[:40], y[:40], classes=[0, 1])
    before = model.decision_function(X)
    with pytest.raises(ValueError, match=r"classes \[0, 1, 7\] are not the classes"):
        model.partial_fit(X[40:], y[40:], classes=[0, 1, 7])
    np.testing.assert_array_equal(model.decision_function(X), before)
    model.partial_fit(X[40:], y[40:], classes=[1, 0])
