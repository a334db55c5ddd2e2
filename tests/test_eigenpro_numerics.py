"""EigenPro: rejected calls, float32 storage, constant targets, reproducibility."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import ConvergenceWarning

from kernelkit.eigenpro import EigenProClassifier, EigenProRegressor


@pytest.fixture(scope="module")
def ridge_data():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((400, 10))
    Y = np.column_stack([np.sin(X[:, 0]) + X[:, 1] * X[:, 2], np.cos(X[:, 3])])
    return X, Y + 0.1 * rng.standard_normal(Y.shape), rng.standard_normal((200, 10))


# ------------------------------------------------------- rejected calls, state
def _state(model):
    """Everything fit sets, as comparable values."""
    return {k: (np.array(v, copy=True) if isinstance(v, np.ndarray) else v)
            for k, v in vars(model).items() if k.endswith("_") or k.startswith("_")}


def _assert_same_state(model, before):
    after = _state(model)
    assert after.keys() == before.keys()
    for k, v in before.items():
        if isinstance(v, np.ndarray):
            assert_array_equal(after[k], v, err_msg=k)
        elif k != "_label_binarizer":
            assert after[k] == v, k


class _RaisesOnSecondCall:
    """A callable kernel that fails midway through fit (after the data checks)."""

    def __init__(self):
        self.calls = 0

    def __call__(self, A, B):
        self.calls += 1
        if self.calls == 2:
            raise RuntimeError("kernel failed")
        return np.exp(-0.5 * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))


@pytest.mark.parametrize("cls", [EigenProRegressor, EigenProClassifier])
@pytest.mark.parametrize("n_centers", [None, 20])
def test_a_rejected_fit_leaves_the_model_as_it_was(cls, n_centers):
    rng = np.random.default_rng(3)
    X3 = rng.standard_normal((60, 3))
    y = (X3[:, 0] > 0).astype(int) if cls is EigenProClassifier else np.sin(X3[:, 0])
    m = cls(n_centers=n_centers, max_iter=2, tol=None, random_state=0).fit(X3, y)
    before, pred = _state(m), m.predict(X3)
    X5 = rng.standard_normal((60, 5))
    bad_X, bad_y = X5.copy(), y.astype(float)
    bad_X[0, 0], bad_y[1] = np.nan, np.nan
    rejections = [
        ({"damping": 2.0}, (X5, y), {}, ValueError, "damping"),          # bad parameter
        ({"dtype": "float16"}, (X5, y), {}, ValueError, "dtype"),
        ({"n_centers": 0}, (X5, y), {}, ValueError, "n_centers"),
        ({}, (bad_X, y), {}, ValueError, "NaN"),                         # bad X
        ({}, (X5, bad_y), {}, ValueError, "NaN"),                        # bad y
        ({}, (X5, y[:10]), {}, ValueError, "inconsistent"),
        ({}, (X5, y), {"sample_weight": -np.ones(len(y))}, ValueError, "sample_weight"),
        ({"kernel": _RaisesOnSecondCall()}, (X5, y), {}, RuntimeError, "kernel failed"),
        ({"eta": 1e6}, (X5, y), {}, ValueError, "diverged"),             # fails midway
    ]
    params = m.get_params()
    for change, args, kwargs, exc, match in rejections:
        m.set_params(**change)
        with pytest.raises(exc, match=match):
            m.fit(*args, **kwargs)
        _assert_same_state(m, before)
        m.set_params(**params)  # predict reads the parameters (the kernel) too
        assert_array_equal(m.predict(X3), pred)
    m.fit(X5, y)  # and the model still refits
    assert m.n_features_in_ == 5


def test_parameters_are_checked_before_the_data():
    """A bad parameter is named even when the data are bad too (sklearn's order)."""
    with pytest.raises(ValueError, match="damping"):
        EigenProRegressor(damping=0.0).fit([[np.nan]], [1.0])
    with pytest.raises(ValueError, match="n_centers as a float"):
        EigenProClassifier(n_centers=1.5).fit([[1.0, 2.0]], ["a"])
    with pytest.raises(ValueError, match="backend"):
        EigenProRegressor(backend="torch").fit([[np.nan]], [1.0])


# ----------------------------------------------------------- float32 storage
@pytest.mark.parametrize("kw", [{}, {"n_centers": 100}, {"n_centers": 100, "algorithm": "ep3"}])
def test_float32_storage_never_rounds_the_inputs(kw):
    """Translating the data, or scaling it with gamma / s^2, leaves the rbf kernel (hence
    every iterate) unchanged: the float32 fit must follow (it stored X + 1e6 rounded to
    0.06, off by 0.09 from the fit on X, and X * 1e-50 as zeros: constant predictions)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (500, 2))
    y = np.sin(3 * X[:, 0]) * X[:, 1]
    Xt = rng.uniform(-1, 1, (100, 2))
    base = dict(max_iter=3, tol=None, early_stopping=False, random_state=0, **kw)
    ref = EigenProRegressor(gamma=10.0, **base).fit(X, y)
    p = ref.predict(Xt)
    assert np.ptp(p) > 1.0
    shifted = EigenProRegressor(gamma=10.0, **base).fit(X + 1e6, y)
    assert_allclose(shifted.predict(Xt + 1e6), p, atol=1e-5)
    tiny = EigenProRegressor(gamma=10.0 * 1e100, **base).fit(X * 1e-50, y)
    assert_allclose(tiny.predict(Xt * 1e-50), p, atol=1e-5)
    assert_array_equal(shifted.centers_[:3], (X + 1e6)[:3] if "n_centers" not in kw
                       else shifted.centers_[:3])
    assert shifted.centers_.dtype == np.float64


# ----------------------------------------------------------- constant target
def test_validation_score_is_r2_and_defined_for_a_constant_target():
    from sklearn.metrics import r2_score

    from kernelkit.eigenpro._stopping import regression_score

    rng = np.random.default_rng(0)
    Y, P = rng.standard_normal((20, 3)), rng.standard_normal((20, 3))
    assert regression_score(Y, P) == pytest.approx(r2_score(Y, P))
    c = np.full((20, 1), 2.0)
    assert regression_score(c, c + 0.1) == pytest.approx(1 - 0.01 / 4)
    assert regression_score(np.zeros((5, 1)), np.full((5, 1), 0.1)) == pytest.approx(0.99)
    assert regression_score(Y[:1], P[:1]) == regression_score(Y[:1], P[:1])  # one sample


@pytest.mark.parametrize("kw", [{}, {"n_centers": 100}])
def test_default_fit_on_a_constant_target_meets_the_rule(kw):
    """R^2 of a constant validation set is 0 for every model: the rule stopped after 3
    epochs whatever the fit. Measured against the target's scale, it follows the fit."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (500, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        m = EigenProRegressor(random_state=0, **kw).fit(X, np.full(500, 2.0))
    scores = np.array(m.validation_scores_)
    assert scores[0] > 0.9 and m.best_validation_score_ == scores.max()
    # the score is the held-out MSE relative to the target's square: tol=1e-3 on it
    # leaves an RMS error of a few percent of the target at most
    Xt = rng.uniform(-0.9, 0.9, (200, 2))
    rms = np.sqrt(np.mean((m.predict(Xt) - 2.0) ** 2))
    assert rms < 0.05 * 2.0
    assert 1 - rms ** 2 / 4 > scores[0] - 0.05


def test_same_random_state_same_fit_whatever_ran_before(ridge_data):
    """The Lanczos start of lambda_1(P)'s measurement comes from random_state: ARPACK's
    own start follows a process-wide seed that every eigsh call advances."""
    from scipy.sparse.linalg import eigsh

    X, Y, Xt = ridge_data
    X, Y = X[:400], Y[:400]
    kw = dict(n_centers=100, max_iter=1, tol=None, random_state=0)
    a = EigenProRegressor(**kw).fit(X, Y)
    eigsh(np.diag(np.arange(1.0, 30.0)), k=1)  # advances ARPACK's seed
    b = EigenProRegressor(**kw).fit(X, Y)
    assert a.n_components_ > 0  # lambda_1(P) was measured
    assert a.top_eigenvalue_ == b.top_eigenvalue_ and a.eta_ == b.eta_
    assert_array_equal(a.dual_coef_, b.dual_coef_)
