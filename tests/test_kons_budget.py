"""The default dictionary budget of KONS (max_atoms="auto", kernelkit/online/_budget.py)."""

import math

import numpy as np
import pytest

from kernelkit.online import KONSClassifier, KONSRegressor, _budget


def _wide_stream(n, d=30, seed=0):
    """Samples far apart for an rbf of gamma=1: KORS keeps almost every one."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, np.sin(X[:, 0]) + 0.1 * rng.normal(size=n)


def _classes_stream(n, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    return X, np.digitize(X[:, 0] + 0.3 * X[:, 1], [-1.0, -0.3, 0.3, 1.0])  # 5 classes


@pytest.mark.parametrize("make, kw, n_mat", [
    (KONSRegressor, {}, 1),
    (KONSClassifier, {}, 1),                       # squared loss: one shared matrix
    (KONSClassifier, {"loss": "logistic"}, 5),     # one matrix per class
    (KONSClassifier, {"loss": "squared", "eta": 0.5}, 5),
    (KONSClassifier, {"method": "pros-n-kons", "loss": "squared_hinge"}, 5),
])
def test_auto_cap_equals_its_formula(make, kw, n_mat):
    X, y = _classes_stream(60)
    est = make(gamma=0.5, random_state=0, **kw).fit(X, y if make is KONSClassifier else X[:, 0])
    assert est.get_params()["max_atoms"] == "auto"
    assert est._st["Ainv"].shape[0] == n_mat
    assert est.max_atoms_ == int(1000 / math.sqrt(n_mat))
    assert _budget.auto_max_atoms(est.method, n_mat) == est.max_atoms_


def test_auto_leaves_exact_kons_exact_and_explicit_values_alone():
    X, y = _classes_stream(60)
    assert KONSClassifier(method="kons", gamma=0.5).fit(X, y).max_atoms_ is None
    assert KONSClassifier(max_atoms=None, gamma=0.5).fit(X, y).max_atoms_ is None
    assert KONSClassifier(max_atoms=np.int64(12), gamma=0.5).fit(X, y).max_atoms_ == 12
    with pytest.raises(ValueError, match="max_atoms"):
        KONSClassifier(max_atoms="Auto").fit(X, y)
    with pytest.raises(ValueError, match="max_atoms"):
        KONSRegressor(max_atoms=2.5).fit(X, y)


@pytest.mark.slow  # a dictionary of 1000 atoms (about a second)
def test_default_cap_is_honoured():
    X, y = _wide_stream(1150)
    est = KONSRegressor(gamma=1.0, random_state=0)
    unb = KONSRegressor(gamma=1.0, random_state=0, max_atoms=None)
    p = est.partial_fit_predict(X, y)
    q = unb.partial_fit_predict(X, y)
    assert est.n_atoms_ == est.max_atoms_ == 1000 < unb.n_atoms_
    # the same dictionary until the cap is reached, then a different learner
    np.testing.assert_array_equal(est.atoms_, unb.atoms_[:1000])
    t_cap = int(np.flatnonzero(np.all(X[:, None] == est.atoms_[-1], axis=2).any(1))[0])
    np.testing.assert_allclose(p[:t_cap + 1], q[:t_cap + 1], rtol=0, atol=1e-12)
    assert not np.allclose(p[t_cap + 1:], q[t_cap + 1:])


@pytest.mark.parametrize("method", ["sketched", "pros-n-kons"])
def test_small_budget_caps_and_the_prefix_equals_max_atoms_none(monkeypatch, method):
    """With the budget at 25, "auto" is max_atoms=None until 25 atoms are kept, and
    max_atoms=None is what it always was (= no cap, an int larger than the stream)."""
    monkeypatch.setattr(_budget, "AUTO_BUDGET", 25)
    X, y = _wide_stream(200, d=8)
    kw = dict(method=method, gamma=1.0, random_state=3)
    auto = KONSRegressor(**kw)
    none = KONSRegressor(max_atoms=None, **kw)
    huge = KONSRegressor(max_atoms=10**9, **kw)
    p_auto, p_none, p_huge = (e.partial_fit_predict(X, y) for e in (auto, none, huge))
    assert auto.n_atoms_ == auto.max_atoms_ == 25 < none.n_atoms_
    np.testing.assert_array_equal(p_none, p_huge)
    np.testing.assert_array_equal(none.atoms_, huge.atoms_)
    np.testing.assert_array_equal(auto.atoms_, none.atoms_[:25])
    first_after = np.flatnonzero((X[:, None] == none.atoms_[25]).all(axis=2).any(1))[0]
    np.testing.assert_allclose(p_auto[:first_after], p_none[:first_after], atol=1e-12, rtol=0)
    # blocks of a stream keep the cap: a second call adds no atom
    auto.partial_fit(X[:50], y[:50])
    assert auto.n_atoms_ == 25


def test_budget_scales_with_the_number_of_matrices(monkeypatch):
    """A cost per sample of about 3 n_matrices m^2 flops stays near 3 AUTO_BUDGET^2."""
    for n_mat in (1, 2, 5, 10, 100):
        cap = _budget.auto_max_atoms("sketched", n_mat)
        assert cap == int(1000 / math.sqrt(n_mat))
        assert 0.98 * 1000 ** 2 <= n_mat * cap ** 2 <= 1000 ** 2
    monkeypatch.setattr(_budget, "AUTO_BUDGET", 3)
    assert _budget.auto_max_atoms("pros-n-kons", 100) == 1  # never zero


def test_verbose_first_line_names_the_cap_and_the_cost(capsys):
    X, y = _classes_stream(40)
    KONSClassifier(gamma=0.5, loss="logistic", verbose=1, random_state=0).fit(X, y)
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("[KONSClassifier] pass over 40 samples, d=6")
    assert "max_atoms=447" in first  # int(1000 / sqrt(5))
    # 40 * (3 * 5 * 447^2 + 2 * 447 * 6) flops
    assert f"cost_at_most={40 * (3 * 5 * 447 ** 2 + 2 * 447 * 6):.2g} flops" in first
    KONSClassifier(gamma=0.5, method="kons", verbose=1).fit(X, y)
    assert "max_atoms=unbounded" in capsys.readouterr().out.splitlines()[0]


def test_rejected_max_atoms_leaves_a_fitted_model_unchanged():
    X, y = _classes_stream(80)
    est = KONSClassifier(gamma=0.5, random_state=0).fit(X, y)
    before = (est.max_atoms_, est.n_atoms_, est.predict_proba(X).copy())
    est.set_params(max_atoms="many")
    with pytest.raises(ValueError, match="max_atoms"):
        est.partial_fit(X, y)
    assert (est.max_atoms_, est.n_atoms_) == before[:2]
    np.testing.assert_array_equal(est.predict_proba(X), before[2])


@pytest.mark.parametrize("method, loss, eta, forget, C", [
    ("sketched", "squared", "auto", None, None),          # one shared matrix
    ("sketched", "logistic", "auto", None, None),         # one matrix per class
    ("pros-n-kons", "squared_hinge", 0.5, "restart", None),
    ("sketched", "squared", "auto", "restart", 0.4),      # projections now and then
    ("kons", "logistic", "auto", "discount", None),
])
def test_numba_twin_matches_numpy_past_the_cap(method, loss, eta, forget, C):
    """The compiled loop defers each rank-one update of A^{-1} to the next sample's
    pass over A; the NumPy reference does not: both give the same stream, before and
    after the cap, across chunks and calls."""
    X, y = _classes_stream(700, seed=7)
    kw = dict(method=method, loss=loss, eta=eta, forgetting=forget, memory=90, C=C,
              gamma=0.5, gamma_reg=0.05, max_atoms=30, random_state=0)
    a = KONSClassifier(backend="numpy", **kw)
    b = KONSClassifier(backend="numba", **kw)
    classes = np.unique(y)
    pa = np.vstack([a.partial_fit_decision_function(X[s], y[s], classes=classes)
                    for s in (slice(0, 300), slice(300, 301), slice(301, 700))])
    pb = np.vstack([b.partial_fit_decision_function(X[s], y[s], classes=classes)
                    for s in (slice(0, 300), slice(300, 301), slice(301, 700))])
    assert a.n_atoms_ == b.n_atoms_ == 30
    np.testing.assert_allclose(pa, pb, atol=1e-9)
    np.testing.assert_allclose(a._st["Ainv"], b._st["Ainv"], atol=1e-9)
    np.testing.assert_allclose(a.cumulative_loss_, b.cumulative_loss_, rtol=1e-10)


def test_new_labels_lower_the_cap_and_keep_the_atoms(monkeypatch):
    """A river classifier meeting new labels gets one matrix per class: the cap is
    recomputed for them; atoms already kept stay, none is added above the cap."""
    from kernelkit.online._grow import add_classes

    monkeypatch.setattr(_budget, "AUTO_BUDGET", 40)
    X, y = _classes_stream(400, seed=3)
    est = KONSClassifier(loss="logistic", gamma=2.0, random_state=0)
    est.partial_fit(X[:200], (y[:200] > 2).astype(int), classes=[0, 1])
    assert est.max_atoms_ == 40 == est.n_atoms_
    add_classes(est, [0, 1, 2, 3])
    est.partial_fit(X[200:], np.minimum(y[200:], 3))
    assert est.max_atoms_ == int(40 / math.sqrt(4)) == 20
    assert est.n_atoms_ == 40
    assert np.isfinite(est.decision_function(X)).all()
