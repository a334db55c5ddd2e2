"""The warning for a kernel that is nearly the identity on the training rows."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.preprocessing import StandardScaler

import kernelkit as kk
from kernelkit.exceptions import DegenerateKernelWarning
from kernelkit.kernels import RBF, KernelOperator, Laplacian
from kernelkit.kernels._scale import SCALE_FLOOR, check_kernel_scale, nearest_kernel_value


def _raw():
    X, y = load_breast_cancer(return_X_y=True)  # features up to ~4,000: raw scale
    return X, y


def _degenerate(fit):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit()
    return [w for w in caught if issubclass(w.category, DegenerateKernelWarning)]


def test_nearest_kernel_value_is_the_median_nearest_neighbour_kernel():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3))
    X = np.vstack([X, X[:5]])  # exact copies are not neighbours
    gamma = 0.7
    same = (X[:, None, :] == X[None, :, :]).all(-1)
    d2 = np.where(same, np.inf, ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    op = KernelOperator(RBF(gamma), 3, "numpy")
    expected = np.median(np.exp(-gamma * d2.min(axis=1)))
    assert nearest_kernel_value(op, X) == pytest.approx(expected, rel=1e-12)
    # Laplacian: exp(-gamma ||x - y||_1)
    d1 = np.where(same, np.inf, np.abs(X[:, None, :] - X[None, :, :]).sum(-1))
    op = KernelOperator(Laplacian(gamma), 3, "numpy")
    assert nearest_kernel_value(op, X) == pytest.approx(
        np.median(np.exp(-gamma * d1.min(axis=1))), rel=1e-12)


def test_neighbours_come_from_more_rows_than_the_sample():
    # 2,000 sorted points on a line, 1e-3 apart: the 128 sampled rows are ~16e-3 apart,
    # all 2,000 are neighbours' candidates (kernel value exp(-gamma 1e-6) = 0.95)
    X = np.arange(2000.0)[:, None] * 1e-3
    op = KernelOperator(RBF(5e4), 1, "numpy")
    assert nearest_kernel_value(op, X) == pytest.approx(np.exp(-5e4 * 1e-6), rel=1e-9)
    assert _degenerate(lambda: kk.KernelRidge(kernel="rbf", gamma=5e4).fit(X, X[:, 0])) == []


def test_few_rows_and_overflowing_rows_are_not_read():
    op = KernelOperator(RBF(100.0), 2, "numpy")
    X = np.arange(18.0).reshape(9, 2)  # nine distinct rows: too few to judge
    assert nearest_kernel_value(op, X) is None
    assert nearest_kernel_value(op, np.vstack([X, X])) is None  # copies do not count
    X = np.arange(40.0).reshape(20, 2)
    assert nearest_kernel_value(op, X) < SCALE_FLOOR
    X[3] = 1e160  # the kernel's own check would raise: the warning never fails a fit
    assert nearest_kernel_value(op, X) is None
    kk.RandomFourierFeatures(random_state=0).fit(X)


def test_only_decaying_stationary_kernels_on_dense_rows_are_checked():
    X, _ = _raw()
    for kernel in (kk.kernels.NTK(), kk.kernels.Polynomial(), kk.kernels.Linear()):
        assert nearest_kernel_value(KernelOperator(kernel, X.shape[1], "numpy"), X) is None
    op = KernelOperator(RBF(), X.shape[1], "numpy")
    assert nearest_kernel_value(op, np.repeat(X[:1], 20, axis=0)) is None  # one distinct row
    assert nearest_kernel_value(op, X[:1]) is None


def test_warning_below_the_floor_only():
    # two clusters of points 1 apart along a line: the nearest neighbour is at squared
    # distance 1, so its kernel value is exp(-gamma)
    X = np.arange(50.0)[:, None]
    for gamma, warns in ((-np.log(0.5 * SCALE_FLOOR), True), (-np.log(2 * SCALE_FLOOR), False)):
        op = KernelOperator(RBF(gamma), 1, "numpy")
        got = _degenerate(lambda op=op: check_kernel_scale(op, X, "Owner"))
        assert len(got) == int(warns)
    op = KernelOperator(RBF(10.0), 1, "numpy")
    (w,) = _degenerate(lambda: check_kernel_scale(op, X, "Owner"))
    assert "Owner: with gamma=10" in str(w.message)
    assert "StandardScaler" in str(w.message)
    assert w.filename == __file__  # the caller outside kernelkit


FACTORIES = [
    lambda: kk.KernelRidgeClassifier(kernel="rbf"),
    lambda: kk.KernelRidge(kernel="laplacian", gamma=0.3),
    lambda: kk.FalkonClassifier(random_state=0),
    lambda: kk.FalkonClassifier(loss="logistic", random_state=0),
    lambda: kk.FalkonRegressor(random_state=0),
    lambda: kk.EigenProClassifier(random_state=0, max_iter=2),
    lambda: kk.KONSClassifier(random_state=0),
    lambda: kk.STKRClassifier(kernel="rbf"),
    lambda: kk.RandomFeaturesClassifier(random_state=0),
    lambda: kk.RLSNystroem(random_state=0, n_components=20),
    lambda: kk.SQUEAK(random_state=0),
    lambda: kk.INKEstimate(random_state=0),
    lambda: kk.KernelThinning(random_state=0),
]


@pytest.mark.parametrize("factory", FACTORIES)
def test_estimators_warn_once_on_raw_features_and_not_when_standardised(factory):
    X, y = _raw()
    est = factory()
    fit = (lambda Z: est.fit(Z)) if isinstance(est, (kk.SQUEAK, kk.INKEstimate,
                                                        kk.KernelThinning)) else \
        (lambda Z: est.fit(Z, y))
    # the EigenPro classifier's out-of-fold calibration fits do not repeat it
    assert len(_degenerate(lambda: fit(X))) == 1
    assert _degenerate(lambda: fit(StandardScaler().fit_transform(X))) == []


def test_warning_names_the_outer_estimator_and_the_users_line():
    X, y = _raw()
    cases = {"KernelRidgeCV": lambda: kk.KernelRidgeCV(kernel="rbf").fit(X, y),
             "RandomFeaturesRegressor": lambda: kk.RandomFeaturesRegressor(
                 random_state=0).fit(X, y),
             "RandomFourierFeatures": lambda: kk.RandomFourierFeatures(
                 random_state=0).fit_transform(X)}
    for name, fit in cases.items():
        (w,) = _degenerate(fit)
        assert str(w.message).startswith(f"{name}: with gamma=")
        assert w.filename == __file__


def test_a_stream_is_checked_on_its_first_batch_of_ten_rows():
    X, y = _raw()
    est = kk.KONSRegressor(random_state=0)
    assert _degenerate(lambda: [est.partial_fit(X[i:i + 1], y[i:i + 1]) for i in range(5)]) == []
    assert len(_degenerate(lambda: est.partial_fit(X[5:40], y[5:40]))) == 1
    assert _degenerate(lambda: est.partial_fit(X[40:80], y[40:80])) == []


def test_random_features_floor_follows_n_components():
    # nearest neighbour at kernel value 0.05: above the exact kernels' floor and above
    # 1 / sqrt(2 D) for D = 1,000 (0.022), below it for D = 100 (0.071)
    X = np.arange(60.0)[:, None]
    gamma = -np.log(0.05)
    few = kk.RandomFourierFeatures(n_components=100, gamma=gamma, random_state=0)
    many = kk.RandomFourierFeatures(n_components=1000, gamma=gamma, random_state=0)
    (w,) = _degenerate(lambda: few.fit(X))
    assert "1 / sqrt(2 n_components) = 0.0707" in str(w.message)
    assert _degenerate(lambda: many.fit(X)) == []
    assert _degenerate(lambda: kk.KernelRidge(kernel="rbf", gamma=gamma).fit(X, X[:, 0])) == []


def test_farthest_value_is_the_median_farthest_row_kernel():
    from kernelkit.kernels._scale import kernel_value_range

    X = np.random.default_rng(0).standard_normal((40, 3))
    gamma = 0.7
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    near, far = kernel_value_range(KernelOperator(RBF(gamma), 3, "numpy"), X)
    assert far == pytest.approx(np.median(np.exp(-gamma * d2.max(axis=1))), rel=1e-12)
    assert near == nearest_kernel_value(KernelOperator(RBF(gamma), 3, "numpy"), X)


def test_a_nearly_constant_kernel_warns_and_standardised_data_does_not():
    """Features of scale 1e-20 at gamma = 1 / n_features: every kernel value rounds to 1,
    the model predicts one class; standardised features stay far from that."""
    X, y = _raw()
    Xs = StandardScaler().fit_transform(X)
    caught = _degenerate(lambda: kk.KernelRidgeClassifier(kernel="rbf").fit(Xs * 1e-20, y))
    assert len(caught) == 1 and "nearly constant" in str(caught[0].message)
    assert "KernelRidgeClassifier" in str(caught[0].message)
    assert not _degenerate(lambda: kk.KernelRidgeClassifier(kernel="rbf").fit(Xs, y))
    assert not _degenerate(lambda: kk.FalkonClassifier(random_state=0).fit(Xs, y))
