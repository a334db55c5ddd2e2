"""The shared temperature calibration: log-loss minimiser, arg-max preserved."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from kernelkit.utils._calibration import (
    class_scores,
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
