"""The shared calibration: the temperature and the two-class slopes are log-loss
minimisers, and the arg-max is preserved."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize, minimize_scalar
from scipy.special import expit

from kernelkit.utils._calibration import (
    MIN_SIDE_ROWS,
    class_scores,
    fit_calibration,
    fit_temperature,
    predict_log_proba_from,
)


def _noisy_scores(rng, n, k):
    y = rng.integers(0, k, n)
    S = rng.standard_normal((n, k)) * 2.0
    S[np.arange(n), y] += 1.5  # informative but imperfect scores
    return S, y


def _platt_reference(y, k, w=None):
    """Smoothed targets row by row: (N + 1) / (N + 2) on the row's class (N the weighted
    number of rows), the rest shared by the other classes."""
    n = len(y) if w is None else np.sum(w)
    T = np.empty((len(y), k))
    for i, c in enumerate(y):
        T[i] = (1 - (n + 1) / (n + 2)) / (k - 1)
        T[i, c] = (n + 1) / (n + 2)
    return T


@pytest.mark.parametrize("k", [3, 10])
def test_temperature_is_the_log_loss_minimiser(k):
    rng = np.random.default_rng(k)
    S, y = _noisy_scores(rng, 400, k)
    beta = fit_temperature(S, y)

    T = _platt_reference(y, k)

    def direct(b):  # an independent cross-entropy against the smoothed targets
        Z = np.exp(b[0] * S - (b[0] * S).max(axis=1, keepdims=True))
        return -np.mean(np.sum(T * np.log(Z / Z.sum(axis=1, keepdims=True)), axis=1))

    ref = minimize(direct, x0=[1.0], method="Nelder-Mead",
                   options={"xatol": 1e-10, "fatol": 1e-14}).x[0]
    assert beta == pytest.approx(ref, rel=1e-5)


def test_weighted_temperature_equals_repeated_rows():
    rng = np.random.default_rng(0)
    S, y = _noisy_scores(rng, 120, 4)
    w = rng.integers(1, 4, len(y))
    assert fit_temperature(S, y, w) == pytest.approx(
        fit_temperature(np.repeat(S, w, axis=0), np.repeat(y, w)), rel=1e-7)


def test_two_classes_is_platt_without_intercept():
    rng = np.random.default_rng(1)
    d = rng.standard_normal(300)
    y = (d + 0.8 * rng.standard_normal(300) > 0).astype(int)
    beta = fit_temperature(d, y)
    p = np.exp(predict_log_proba_from(d, beta))
    np.testing.assert_allclose(p[:, 1], 1 / (1 + np.exp(-beta * d)), rtol=1e-12)
    # Platt's fit without an intercept, on targets (N + 1) / (N + 2) and 1 / (N + 2)
    t = np.where(y == 1, 301 / 302, 1 / 302)
    nll = lambda b: np.sum(t * np.logaddexp(0, -b[0] * d)  # noqa: E731
                           + (1 - t) * np.logaddexp(0, b[0] * d))
    ref = minimize(nll, x0=[1.0], method="Nelder-Mead", options={"xatol": 1e-10}).x[0]
    assert beta == pytest.approx(ref, rel=1e-5)


def test_scale_equivariance_and_constant_scores():
    rng = np.random.default_rng(2)
    S, y = _noisy_scores(rng, 200, 3)
    assert fit_temperature(1e-6 * S, y) == pytest.approx(1e6 * fit_temperature(S, y),
                                                         rel=1e-6)
    assert fit_temperature(np.ones((10, 3)), np.arange(10) % 3) == 1.0


def test_non_finite_decision_values_are_rejected():
    with pytest.raises(ValueError, match="NaN or infinity"):
        class_scores(np.array([0.0, np.nan]))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(2, 6), st.integers(1, 40), st.floats(1e-3, 1e3), st.integers(0, 2**31))
def test_argmax_is_preserved(k, n, beta, seed):
    S = np.random.default_rng(seed).standard_normal((n, k)) * 10.0
    logp = predict_log_proba_from(S, beta)
    p = np.exp(logp)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-12)
    assert np.all((p >= 0) & (p <= 1))
    np.testing.assert_array_equal(p.argmax(axis=1), S.argmax(axis=1))


def test_separated_scores_keep_a_finite_temperature():
    """Perfectly separated calibration rows: the unsmoothed log-loss falls without bound
    in beta; smoothed targets give the finite minimiser (stationarity of the
    cross-entropy)."""
    d = np.r_[np.linspace(0.5, 2.0, 20), -np.linspace(0.5, 2.0, 30)]
    y = np.r_[np.ones(20, int), np.zeros(30, int)]
    beta = fit_temperature(d, y)
    assert 1.0 < beta < 100.0
    p = np.exp(predict_log_proba_from(d, beta))[np.arange(50), y]
    assert np.all(p < 1 - 1e-4)
    # first-order condition of the smoothed objective at beta: sum (t - sigmoid(beta d)) d = 0
    t = np.where(y == 1, 51 / 52, 1 / 52)
    g = np.sum((t - 1 / (1 + np.exp(-beta * d))) * d)
    assert abs(g) < 1e-6


# ------------------------------------------------------------ two classes: two slopes
def _direct_slopes(d, y, w=None):
    """argmin over ``(a_minus, a_plus)`` of the weighted log-loss of ``P(y = 1) =
    sigmoid(a d)``, ``a = a_plus`` where ``d > 0``, else ``a_minus``, against the smoothed
    targets: scipy on each side (the loss is one term per side)."""
    d, y = np.asarray(d, float), np.asarray(y)
    w = np.ones(len(d)) if w is None else np.asarray(w, float)
    t = _platt_reference(y, 2, w)[:, 1]
    out = []
    for side in (d < 0, d > 0):
        side &= w > 0

        def nll(s, side=side):
            z = np.exp(s) * d[side]
            return np.dot(w[side], t[side] * np.logaddexp(0, -z)
                          + (1 - t[side]) * np.logaddexp(0, z))

        res = minimize_scalar(nll, bounds=(-20, 20), method="bounded",
                              options={"xatol": 1e-12})
        out.append(np.exp(res.x))
    return np.array(out)


def _skewed(rng, n):
    """Two-class decision values spread differently on the two sides of 0."""
    y = rng.integers(0, 2, n)
    d = np.where(y == 1, rng.gamma(2.0, 1.5, n), -rng.gamma(2.0, 0.3, n))
    d += 0.6 * rng.standard_normal(n)  # some rows on the wrong side
    return d, y


@pytest.mark.parametrize("weighted", [False, True])
def test_two_slopes_are_the_log_loss_minimisers(weighted):
    rng = np.random.default_rng(3)
    d, y = _skewed(rng, 300)
    w = rng.uniform(0.2, 3.0, 300) if weighted else None
    beta, slopes = fit_calibration(d, y, w)
    assert beta == fit_temperature(d, y, w)
    np.testing.assert_allclose(slopes, _direct_slopes(d, y, w), rtol=1e-6)
    assert slopes[1] < 0.8 * slopes[0]  # the wide side is flatter
    # the joint two-parameter objective is stationary there (the sides do separate)
    t = _platt_reference(y, 2, w)[:, 1]
    ww = np.ones(300) if w is None else w
    p = 1 / (1 + np.exp(-np.where(d > 0, slopes[1], slopes[0]) * d))
    g = [np.dot(ww[s], (p[s] - t[s]) * d[s]) / ww.sum() for s in (d <= 0, d > 0)]
    np.testing.assert_allclose(g, 0.0, atol=1e-9)


def test_two_slopes_closed_form():
    """All rows of a side at one |d|: the side's probability is its mean smoothed target."""
    d = np.r_[np.full(30, 1.0), np.full(40, -2.0)]
    y = np.r_[np.ones(24, int), np.zeros(6, int), np.ones(10, int), np.zeros(30, int)]
    hit = 71 / 72  # (N + 1) / (N + 2), N = 70
    t_plus = (24 * hit + 6 * (1 - hit)) / 30
    t_minus = (10 * hit + 30 * (1 - hit)) / 40
    logit = lambda p: np.log(p / (1 - p))  # noqa: E731
    _, slopes = fit_calibration(d, y)
    np.testing.assert_allclose(slopes, [-logit(t_minus) / 2, logit(t_plus)], rtol=1e-9)
    p = np.exp(predict_log_proba_from(d, 1.0, slopes))
    np.testing.assert_allclose(p[:30, 1], t_plus, rtol=1e-9)
    np.testing.assert_allclose(p[30:, 1], t_minus, rtol=1e-9)


def test_symmetric_problem_has_equal_slopes():
    rng = np.random.default_rng(4)
    d0, y0 = _skewed(rng, 150)
    w0 = rng.uniform(0.5, 2.0, 150)
    d, y, w = np.r_[d0, -d0], np.r_[y0, 1 - y0], np.r_[w0, w0]  # d -> -d, labels swapped
    beta, slopes = fit_calibration(d, y, w)
    np.testing.assert_allclose(slopes, [beta, beta], rtol=1e-9)


def test_weighted_slopes_equal_repeated_rows():
    rng = np.random.default_rng(5)
    d, y = _skewed(rng, 120)
    w = rng.integers(1, 4, 120)
    np.testing.assert_allclose(fit_calibration(d, y, w)[1],
                               fit_calibration(np.repeat(d, w), np.repeat(y, w))[1], rtol=1e-7)


def test_few_rows_on_a_side_keep_the_temperature():
    rng = np.random.default_rng(6)
    d, y = _skewed(rng, 200)
    few = np.r_[d[d < 0][:MIN_SIDE_ROWS - 1], d[d > 0]]
    yf = np.r_[y[d < 0][:MIN_SIDE_ROWS - 1], y[d > 0]]
    beta, slopes = fit_calibration(few, yf)
    np.testing.assert_array_equal(slopes, [beta, beta])
    # zero-weight rows do not count towards a side; rows at d == 0 on neither
    w = np.r_[np.ones(MIN_SIDE_ROWS - 1), np.zeros(50), np.ones(np.sum(d > 0))]
    dz = np.r_[d[d < 0][:MIN_SIDE_ROWS - 1], np.full(50, -1.0), d[d > 0]]
    yz = np.r_[yf[:MIN_SIDE_ROWS - 1], np.zeros(50, int), y[d > 0]]
    beta, slopes = fit_calibration(np.r_[dz, np.zeros(5)], np.r_[yz, np.ones(5, int)],
                                   np.r_[w, np.ones(5)])
    np.testing.assert_array_equal(slopes, [beta, beta])
    beta, slopes = fit_calibration(np.zeros(30), np.arange(30) % 2)  # constant values
    assert beta == 1.0 and np.array_equal(slopes, [1.0, 1.0])
    assert fit_calibration(rng.standard_normal((30, 3)), np.arange(30) % 3)[1] is None


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(1, 40), st.floats(1e-3, 1e3), st.floats(1e-3, 1e3), st.integers(0, 2**31))
def test_two_slopes_keep_the_sign(n, a_minus, a_plus, seed):
    d = np.random.default_rng(seed).standard_normal(n) * 10.0
    d[: n // 4] = 0.0
    p = np.exp(predict_log_proba_from(d, 1.0, np.array([a_minus, a_plus])))
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-12)
    assert np.all((p >= 0) & (p <= 1))
    np.testing.assert_array_equal(p.argmax(axis=1), (d > 0).astype(int))
    a = np.where(d > 0, a_plus, a_minus)
    np.testing.assert_allclose(p[:, 1], expit(a * d), rtol=1e-12, atol=1e-300)
