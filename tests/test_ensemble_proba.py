"""InfiniteWidthClassifier.predict_proba: the fraction of the trained ensemble per class.

References: the probit of the mean difference over its spread, computed here from the
regressor's moments (two classes); Monte Carlo over the Gaussian posterior of the
outputs (more classes); adaptive quadrature (the Gauss-Hermite helper).
"""

import pickle

import numpy as np
import pytest
from scipy import integrate
from scipy.special import ndtr
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import load_iris, make_blobs, make_classification
from sklearn.metrics import log_loss
from sklearn.exceptions import NotFittedError
from sklearn.semi_supervised import SelfTrainingClassifier

from kernelkit.ridge import InfiniteWidthClassifier, InfiniteWidthRegressor
from kernelkit.ridge._gp import argmax_log_proba

TIMES = [0.0, 0.5, 5.0, 50.0, np.inf]


@pytest.fixture
def iris():
    X, y = load_iris(return_X_y=True)
    return (X - X.mean(0)) / X.std(0), y


def _latent(params, X, Y, Xt, time, include_noise=False):
    """Mean and latent (or noisy) std of the one-hot regression the classifier is."""
    reg = InfiniteWidthRegressor(**params).fit(X, Y)
    return reg.predict(Xt, return_std=True, include_noise=include_noise, time=time)


@pytest.mark.parametrize("params", [{"depth": 2, "b_std": 0.1},
                                    {"depth": 1, "posterior": "nngp", "diag_reg": 1e-2},
                                    {"depth": 3, "activation": "erf", "diag_reg": 0.0}])
def test_two_class_probability_is_probit_of_mean_difference(params, iris):
    X, y = iris
    X, y = X[50:], np.where(y[50:] == 2, "virginica", "versicolor")  # the overlapping two
    clf = InfiniteWidthClassifier(**params).fit(X[::2], y[::2])
    Y = np.eye(2)[(y[::2] == "virginica").astype(int)]
    latent = _latent(params, X[::2], Y, X[1::2], TIMES)[1]
    np.testing.assert_array_equal(latent[..., 0], latent[..., 1])  # one variance per point
    # the regressor's default predictive: the noise too where "auto" estimated it
    mean, std = _latent(params, X[::2], Y, X[1::2], TIMES, include_noise=None)
    expected = ndtr((mean[..., 1] - mean[..., 0]) / np.hypot(std[..., 0], std[..., 1]))
    P = clf.predict_proba(X[1::2], time=TIMES)
    assert P.shape == (len(TIMES), 50, 2)
    np.testing.assert_allclose(P[..., 1], expected, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(P.sum(-1), 1.0, rtol=0, atol=1e-15)
    # the rule: predict (mean difference > 0) is the majority class
    pred = clf.predict(X[1::2], time=TIMES)
    np.testing.assert_array_equal(clf.classes_[P.argmax(-1)], pred)
    assert np.mean((P[2, :, 1] > 0.05) & (P[2, :, 1] < 0.95)) > 0.5  # not saturated


def test_multiclass_probabilities_match_monte_carlo(iris):
    X, y = iris
    params = {"depth": 2, "b_std": 0.1}
    clf = InfiniteWidthClassifier(**params).fit(X[::2], y[::2])
    Xt = X[1::10]
    mean, std = _latent(params, X[::2], np.eye(3)[y[::2]], Xt, 5.0)
    std = np.sqrt(std**2 + np.mean(clf.noise_variance_))  # the noise shared by the columns
    P = clf.predict_proba(Xt, time=5.0)
    assert 0.01 < P.min() and P.max() < 0.99  # the spread matters at these points
    n = 200_000
    draws = np.random.default_rng(7).standard_normal((n, *mean.shape))
    freq = np.stack([np.bincount(np.argmax(mean[i] + std[i] * draws[:, i], axis=-1),
                                 minlength=3) for i in range(len(Xt))]) / n
    se = np.sqrt(P * (1 - P) / n)
    assert np.all(np.abs(freq - P) <= 3 * se), np.max(np.abs(freq - P) / se)
    np.testing.assert_array_equal(P.argmax(1), clf.predict(Xt, time=5.0))


def test_gauss_hermite_helper_against_adaptive_quadrature_and_sampling():
    rng = np.random.default_rng(3)
    M = rng.standard_normal((40, 5)) * rng.choice([0.1, 1.0, 5.0], (40, 1))
    S = rng.choice([0.05, 0.5, 2.0], 40)
    P = np.exp(argmax_log_proba(M, S))
    for m, s, p in zip(M[:8], S[:8], P[:8], strict=True):
        for j in range(5):
            def f(z, m=m, s=s, j=j):
                return (np.exp(-z * z / 2) / np.sqrt(2 * np.pi)
                        * np.prod(ndtr(z + (m[j] - np.delete(m, j)) / s)))
            ref = integrate.quad(f, -40, 40, epsabs=1e-15, limit=400,
                                 points=(m - m[j]) / s)[0]
            assert abs(p[j] - ref) < 1e-12
    np.testing.assert_allclose(P.sum(1), 1.0, atol=1e-15)
    np.testing.assert_array_equal(P.argmax(1), M.argmax(1))
    # zero spread: the largest mean, ties shared
    P0 = np.exp(argmax_log_proba(np.array([[1.0, 2.0, 0.0], [1.0, 1.0, 0.0]]), [0.0, 0.0]))
    np.testing.assert_array_equal(P0, [[0.0, 1.0, 0.0], [0.5, 0.5, 0.0]])


def test_rows_sum_to_one_and_argmax_is_predict():
    X, y = make_blobs(300, n_features=4, centers=5, cluster_std=2.5, random_state=0)
    clf = InfiniteWidthClassifier(depth=2, activation="erf", b_std=0.2).fit(X[:150], y[:150])
    P = clf.predict_proba(X[150:], time=TIMES)
    assert P.shape == (len(TIMES), 150, 5) and P.dtype == np.float64
    assert np.all((P >= 0) & (P <= 1))
    np.testing.assert_allclose(P.sum(-1), 1.0, rtol=0, atol=1e-13)
    np.testing.assert_array_equal(P.argmax(-1), clf.predict(X[150:], time=TIMES))
    for i, t in enumerate(TIMES):  # one time alone is the slice of the curve
        np.testing.assert_allclose(clf.predict_proba(X[150:], time=t), P[i], atol=1e-14)
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(clf.predict_log_proba(X[150:], time=TIMES), np.log(P))
    clf.set_params(time=5.0)  # the fitted time parameter is the default; fit-free
    np.testing.assert_allclose(clf.predict_proba(X[150:]), P[2], atol=1e-14)
    assert clf.score(X[150:], y[150:]) > 0.7


def test_prior_and_uncorrelated_points_give_the_prior_probabilities():
    rng = np.random.default_rng(1)
    X = np.hstack([rng.standard_normal((60, 3)), np.zeros((60, 1))])
    y = np.argmax(X[:, :3], axis=1)
    relu = InfiniteWidthClassifier(depth=2, b_std=0.3).fit(X, y)
    np.testing.assert_allclose(relu.predict_proba(X, time=0.0), 1 / 3, atol=1e-14)
    # erf without bias: a point orthogonal to every training row is uncorrelated with
    # them (both kernels vanish), so the trained ensemble there is still the prior
    erf = InfiniteWidthClassifier(depth=3, activation="erf").fit(X, y)
    far = np.array([[0.0, 0.0, 0.0, r] for r in (1.0, 10.0, 1e3)])
    for t in (1.0, np.inf):
        np.testing.assert_allclose(erf.predict_proba(far, time=t), 1 / 3, atol=1e-12)
        assert np.abs(erf.predict_proba(X[:5], time=t) - 1 / 3).max() > 0.02  # data rows


def test_zero_spread_is_the_networks_common_answer(iris):
    X, y = iris
    clf = InfiniteWidthClassifier(depth=2, b_std=0.1, diag_reg=0.0).fit(X[::3], y[::3])
    P = clf.predict_proba(X[::3])  # interpolated training rows: every network agrees
    np.testing.assert_allclose(P, np.eye(3)[y[::3]], atol=1e-12)


def test_pickle_keeps_probabilities(iris):
    X, y = iris
    clf = InfiniteWidthClassifier(depth=2, b_std=0.1, time=5.0).fit(X[::2], y[::2])
    back = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(back.predict_proba(X[1::2]), clf.predict_proba(X[1::2]))
    np.testing.assert_array_equal(back.predict_log_proba(X[1::2], time=[1.0, np.inf]),
                                  clf.predict_log_proba(X[1::2], time=[1.0, np.inf]))


def test_meta_estimators_use_the_probabilities(iris):
    X, y = iris
    y_semi = y.copy()
    y_semi[np.random.default_rng(0).random(len(y)) < 0.7] = -1
    st = SelfTrainingClassifier(InfiniteWidthClassifier(depth=2, b_std=0.1),
                                threshold=0.9).fit(X, y_semi)
    assert np.sum(st.labeled_iter_ > 0) > 50  # pseudo-labels were added
    assert st.score(X, y) > 0.9
    np.testing.assert_allclose(st.predict_proba(X).sum(1), 1.0, atol=1e-13)
    cal = CalibratedClassifierCV(InfiniteWidthClassifier(depth=2, b_std=0.1), cv=3).fit(X, y)
    Pc = cal.predict_proba(X)
    assert Pc.shape == (150, 3) and cal.score(X, y) > 0.85
    np.testing.assert_allclose(Pc.sum(1), 1.0, atol=1e-12)


def test_predict_proba_before_fit_raises():
    X = np.zeros((3, 2))
    for method in ("predict_proba", "predict_log_proba"):
        with pytest.raises(NotFittedError):
            getattr(InfiniteWidthClassifier(), method)(X)


def test_estimated_noise_is_in_the_probabilities():
    """diag_reg="auto": the spread is hypot(latent, sigma), sigma^2 the mean of the class
    columns' noise variances; a given diag_reg leaves it out unless asked. On overlapping
    classes with flipped labels the latent spread alone is overconfident."""
    X, y = make_classification(400, 6, n_informative=4, n_redundant=0, flip_y=0.1,
                               random_state=3)
    X = (X - X.mean(0)) / X.std(0)
    Xa, ya, Xt, yt = X[:200], y[:200], X[200:], y[200:]
    clf = InfiniteWidthClassifier().fit(Xa, ya)
    mean, lat = _latent({"diag_reg": clf.diag_reg_}, Xa, np.eye(2)[ya], Xt, np.inf)
    sigma2 = np.mean(clf.noise_variance_)
    assert sigma2 > 0.1 * np.median(lat[:, 0]) ** 2  # not negligible here
    for include, s2 in ((None, sigma2), (True, sigma2), (False, 0.0)):
        P = clf.predict_proba(Xt, include_noise=include)
        ref = ndtr((mean[:, 1] - mean[:, 0]) / np.sqrt(2 * (lat[:, 0] ** 2 + s2)))
        np.testing.assert_allclose(P[:, 1], ref, rtol=1e-12, atol=1e-15)
        with np.errstate(divide="ignore"):
            np.testing.assert_array_equal(
                clf.predict_log_proba(Xt, include_noise=include), np.log(P))
    noisy, latent = clf.predict_proba(Xt), clf.predict_proba(Xt, include_noise=False)
    np.testing.assert_array_equal(noisy.argmax(1), clf.predict(Xt) == clf.classes_[1])
    assert log_loss(yt, noisy) < 0.8 * log_loss(yt, latent), (log_loss(yt, noisy),
                                                              log_loss(yt, latent))
    fixed = InfiniteWidthClassifier(diag_reg=clf.diag_reg_).fit(Xa, ya)
    np.testing.assert_array_equal(fixed.predict_proba(Xt),
                                  fixed.predict_proba(Xt, include_noise=False))
    np.testing.assert_allclose(  # asked for: the given diag_reg is the noise
        fixed.predict_proba(Xt, include_noise=True)[:, 1],
        ndtr((mean[:, 1] - mean[:, 0]) / np.sqrt(2 * (lat[:, 0] ** 2 + clf.diag_reg_))),
        rtol=1e-9, atol=1e-12)
    with pytest.raises(TypeError, match="include_noise"):
        clf.predict_proba(Xt, include_noise="yes")
