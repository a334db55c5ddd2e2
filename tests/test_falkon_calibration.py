"""FALKON's out-of-sample values for the classifier's calibration: the Nyström
leave-one-out values are taken at the rows that are not centers, equal explicit refits
without the row, and with every row a center equal exact kernel ridge's closed form."""

import numpy as np
import pytest
from scipy import linalg
from sklearn.datasets import load_digits

import kernelkit.ridge._falkon_loo as fk
from kernelkit.kernels import RBF
from kernelkit.ridge import FalkonClassifier, FalkonRegressor
from kernelkit.utils._calibration import fit_calibration
from test_ridge_proba import _data, _pm1  # tests/ is on sys.path (rootdir)

GAMMA = 0.5


def _oos(clf, X, y, w):
    """The ``(rows, values)`` that ``fit`` calibrated on, recomputed (same seed, same
    centers)."""
    clf._y_idx = np.searchsorted(clf.classes_, y)
    try:
        return clf._fit_targets(X, _pm1(y, clf.classes_), w, oos=True)
    finally:
        del clf._y_idx


@pytest.mark.parametrize("k", [2, 3])
def test_loo_values_skip_the_centers_and_equal_refits_without_the_row(k):
    X, y, w = _data(90, k, seed=k)
    w[:4] = 0.0  # zero-weight rows calibrate nothing: not evaluated
    alpha = 0.2
    clf = FalkonClassifier(alpha=alpha, n_centers=25, gamma=GAMMA, tol=1e-12,
                           random_state=0).fit(X, y, sample_weight=w)
    rows, loo = _oos(clf, X, y, w)
    live = w > 0
    live[clf.center_indices_] = False
    np.testing.assert_array_equal(rows, np.flatnonzero(live))
    Y = _pm1(y, clf.classes_)
    ref = np.empty_like(loo)
    for j, i in enumerate(rows):  # the same centers, row i's weight 0
        w0 = w.copy()
        w0[i] = 0.0
        ref[j] = FalkonRegressor(alpha=alpha, centers=clf.centers_, gamma=GAMMA,
                                 tol=1e-12).fit(X, Y, w0).predict(X[i:i + 1])
    np.testing.assert_allclose(loo, ref, rtol=1e-5, atol=1e-5)  # CG, K_MM on the data
    # ... and far from the full fit's own values there: they are out of sample
    inside = clf.decision_function(X[rows]).reshape(loo.shape)
    assert np.abs(loo - inside).max() > 1e-2
    dec = ref[:, 0] if k == 2 else ref
    beta, slopes = fit_calibration(dec, np.searchsorted(clf.classes_, y[rows]), w[rows])
    np.testing.assert_allclose(clf.calibration_temperature_, beta, rtol=1e-5)
    if k == 2:
        np.testing.assert_allclose(clf.calibration_slopes_, slopes, rtol=1e-5)


def test_every_row_a_center_gives_kernel_ridge_leave_one_out():
    # M = n: the Nyström estimator is kernel ridge, and each row's value (a center's
    # too) is kernel ridge's closed-form leave-one-out value y - (y - f) / (1 - h)
    X, y, _ = _data(40, 2, seed=5)
    alpha = 0.3
    clf = FalkonClassifier(alpha=alpha, n_centers=40, gamma=GAMMA, tol=1e-12,
                           random_state=0).fit(X, y)
    rows, loo = _oos(clf, X, y, None)
    np.testing.assert_array_equal(rows, np.arange(40))
    t = _pm1(y, clf.classes_)[:, 0]
    K = RBF(GAMMA)(X)
    H = K @ linalg.solve(K + alpha * np.eye(40), np.eye(40), assume_a="pos")
    f = H @ t
    np.testing.assert_allclose(loo[:, 0], t - (t - f) / (1.0 - np.diag(H)), rtol=1e-6,
                               atol=1e-8)


def test_too_few_rows_outside_the_centers_use_every_row():
    X, y, w = _data(60, 3, seed=1)
    clf = FalkonClassifier(alpha=0.2, n_centers=60 - fk._MIN_LOO_ROWS + 1, gamma=GAMMA,
                           random_state=0).fit(X, y, sample_weight=w)
    rows, _ = _oos(clf, X, y, w)
    np.testing.assert_array_equal(rows, np.arange(60))
    clf = FalkonClassifier(alpha=0.2, n_centers=60 - fk._MIN_LOO_ROWS, gamma=GAMMA,
                           random_state=0).fit(X, y, sample_weight=w)
    rows, _ = _oos(clf, X, y, w)
    assert len(rows) == fk._MIN_LOO_ROWS
    assert not np.isin(rows, clf.center_indices_).any()


def test_small_problems_take_the_leave_one_out_values():
    cheap = fk.exact_loo_is_cheap
    assert cheap(1347, 264, 64, 20, True)  # digits' training rows: ~5e8 flops
    assert not cheap(1347, 264, 784, 20, False)  # K_nM again (784 features): 1.1e9
    assert not cheap(3000, 439, 784, 20, True)  # 2.9e9 flops, 1x the fit: held out
    assert not cheap(10**6, 100, 20, 20, True)


def test_digits_3_vs_8_log_loss_near_the_same_classifier_with_platt():
    # the regression that centers' values caused: 0.11 where CalibratedClassifierCV on
    # the same classifier has 0.016 (both classify every test row right)
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.datasets import load_digits
    from sklearn.metrics import log_loss
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    X, y = load_digits(return_X_y=True)
    keep = (y == 3) | (y == 8)
    Xa, Xt, ya, yt = train_test_split(X[keep], y[keep], test_size=0.25, stratify=y[keep],
                                      random_state=0)
    sc = StandardScaler().fit(Xa)
    Xa, Xt = sc.transform(Xa), sc.transform(Xt)
    ours = FalkonClassifier(random_state=0).fit(Xa, ya)
    ccv = CalibratedClassifierCV(FalkonClassifier(random_state=0, calibration=None),
                                 method="sigmoid", cv=5, ensemble=False).fit(Xa, ya)
    a, b = log_loss(yt, ours.predict_proba(Xt)), log_loss(yt, ccv.predict_proba(Xt))
    assert a < 1.25 * b, (a, b)


# ------------------------------------------------ logistic loss: approximate leave-one-out
@pytest.mark.parametrize("weighted", [False, True])
def test_logistic_loo_values_are_one_newton_step_from_refits_without_the_row(weighted):
    X, y, w = _data(80, 2, seed=7)
    w = w if weighted else None
    alpha = 0.3
    clf = FalkonClassifier(loss="logistic", alpha=alpha, n_centers=25, gamma=GAMMA,
                           tol=1e-10, random_state=0).fit(X, y, sample_weight=w)
    rows, alo = _oos(clf, X, y, w)
    live = np.ones(80, bool) if w is None else w > 0
    live[clf.center_indices_] = False
    np.testing.assert_array_equal(rows, np.flatnonzero(live))
    alo = alo[:, 0]
    inside = clf.decision_function(X[rows])
    exact = np.empty(len(rows))
    for j, i in enumerate(rows):
        w0 = np.ones(80) if w is None else w.copy()
        w0[i] = 0.0
        exact[j] = FalkonClassifier(loss="logistic", alpha=alpha, centers=clf.centers_,
                                    gamma=GAMMA, tol=1e-10, calibration=None).fit(
            X, y, sample_weight=w0).decision_function(X[i:i + 1])[0]
    shift = np.abs(exact - inside)
    assert shift.max() > 0.05  # leaving a row out moves its value ...
    # ... and one Newton step from the fit follows the refit to within a tenth of the
    # move (measured up to 6%, the heaviest rows; median under 1%)
    err = np.abs(alo - exact) / shift
    assert err.max() < 0.1 and np.median(err) < 0.02, (err.max(), np.median(err))
    beta, slopes = fit_calibration(alo, np.searchsorted(clf.classes_, y[rows]),
                                   None if w is None else w[rows])
    np.testing.assert_allclose(clf.calibration_slopes_, slopes, rtol=1e-10)
    d = clf.decision_function(X)
    a = np.where(d > 0, slopes[1], slopes[0])
    np.testing.assert_allclose(clf.predict_proba(X)[:, 1], 1.0 / (1.0 + np.exp(-a * d)),
                               rtol=1e-12)


def test_logistic_squared_loss_branch_is_the_exact_identity():
    # grad = w (f - y) with curvature w: the one-Newton-step value is the squared loss's
    # exact leave-one-out value (the two branches of nystrom_loo_decision agree)
    rng = np.random.RandomState(3)
    X, Y, w = rng.randn(50, 2), rng.randn(50, 2), rng.uniform(0.5, 2.0, 50)
    C = X[::4]
    K_nm, K_mm = RBF(GAMMA)(X, C), RBF(GAMMA)(C)
    coef = linalg.solve(K_nm.T @ (w[:, None] * K_nm) + 0.1 * K_mm, K_nm.T @ (w[:, None] * Y))
    rows = np.arange(50)

    def block(a, b=None):
        return K_nm[slice(a, b) if b is not None else a]

    a = fk.nystrom_loo_decision(block, 50, K_mm, coef, Y, w, 0.1, rows, 7)
    g = w[:, None] * (K_nm @ coef - Y)
    b = fk.nystrom_loo_decision(block, 50, K_mm, coef, Y, w, 0.1, rows, 7, grad=g)
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)


def test_logistic_multiclass_or_costly_keeps_its_own_probabilities(monkeypatch):
    X, y, _ = _data(80, 2, seed=7)
    monkeypatch.setattr(fk, "_LOO_SHARE", -1.0)  # not cheap: the model's own sigmoid
    clf = FalkonClassifier(loss="logistic", n_centers=25, gamma=GAMMA, random_state=0)
    clf.fit(X, y)
    assert clf.calibration_slopes_ is None and clf.calibration_temperature_ == 1.0
    d = clf.decision_function(X)
    np.testing.assert_allclose(clf.predict_proba(X)[:, 1], 1.0 / (1.0 + np.exp(-d)),
                               rtol=1e-12)


def test_array_centers_that_are_rows_calibrate_as_drawn_ones():
    # the same model from centers given as an array (a search's refit, a user's rows):
    # its calibration leaves the same center rows out, so the probabilities are equal
    X, y = load_digits(return_X_y=True)
    keep = np.isin(y, [3, 8])
    X, y = X[keep][::2], y[keep][::2]
    f = FalkonClassifier(alpha=1e-3, n_centers=60, random_state=0).fit(X, y)
    g = FalkonClassifier(alpha=1e-3, centers=f.centers_, random_state=0).fit(X, y)
    assert g.center_indices_ is None
    np.testing.assert_allclose(g.decision_function(X), f.decision_function(X), rtol=1e-8,
                               atol=1e-10)
    np.testing.assert_allclose(g.calibration_slopes_, f.calibration_slopes_, rtol=1e-8)
