"""EigenPro 2 / 3 against dense solutions, the papers' formulas, and scikit-learn's contract."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import linalg
from sklearn.datasets import load_digits, load_iris
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import kernelkit
from kernelkit import NTKRidge
from kernelkit.eigenpro import EigenProClassifier, EigenProRegressor
from kernelkit.kernels import NTK, RBF, Linear, Matern


def rel(a, b):
    return float(np.linalg.norm(np.asarray(a) - b) / np.linalg.norm(b))


@pytest.fixture(scope="module")
def interp_data():
    """Data on which the Matérn-1/2 kernel matrix is well conditioned (lambda_min ~ 0.28)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((800, 8))
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.standard_normal(800)
    return X, y, rng.standard_normal((200, 8))


@pytest.fixture(scope="module")
def ridge_data():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((1000, 10))
    Y = np.column_stack([np.sin(X[:, 0]) + X[:, 1] * X[:, 2], np.cos(X[:, 3])])
    return X, Y + 0.1 * rng.standard_normal(Y.shape), rng.standard_normal((200, 10))


# ----------------------------------------------------------------- convergence
def test_ep2_converges_to_the_kernel_interpolant(interp_data):
    X, y, Xt = interp_data
    k = Matern(0.2, 0.5)
    dense = k(Xt, X) @ linalg.solve(k(X), y, assume_a="pos")
    model = EigenProRegressor(kernel=k, dtype="float64", max_iter=12, tol=None,
                              random_state=0).fit(X, y)
    # stated: 12 epochs reach 1e-3 (the automatic batch is the whole data here, q ~ 200)
    assert rel(model.predict(Xt), dense) < 1e-3
    assert rel(model.predict(X), y) < 5e-3  # interpolates the training targets
    assert model.n_iter_ == 12 and len(model.loss_curve_) == 12
    assert np.all(np.diff(model.loss_curve_) < 0)


def test_ep2_converges_to_kernel_ridge_multioutput(ridge_data):
    X, Y, Xt = ridge_data
    dense = kernelkit.KernelRidge(alpha=1.0, kernel="rbf", gamma=0.1).fit(X, Y).predict(Xt)
    model = EigenProRegressor(gamma=0.1, alpha=1.0, dtype="float64", max_iter=12, tol=None,
                              random_state=0).fit(X, Y)
    assert model.dual_coef_.shape == (1000, 2)
    assert rel(model.predict(Xt), dense) < 1e-3


def test_ntk_beta_is_measured_and_ridge_solution_reached(ridge_data):
    X, Y, Xt = ridge_data
    y = Y[:, 0]
    ntk = NTK(depth=2)
    model = EigenProRegressor(kernel="ntk", kernel_params={"depth": 2}, alpha=1.0,
                              dtype="float64", max_iter=15, tol=None, random_state=0).fit(X, y)
    diag = np.diag(ntk(X))
    assert diag.max() > 1.5 and diag.min() < 1.0  # not a constant diagonal...
    assert model.beta_ == pytest.approx(diag.max(), rel=1e-12)  # ...and beta is its maximum
    dense = NTKRidge(alpha=1.0, depth=2).fit(X, y).predict(Xt)
    assert rel(model.predict(Xt), dense) < 1e-3


def test_preconditioning_beats_plain_kernel_sgd(interp_data):
    """Same batch, same epochs: EigenPro's training loss is far below plain kernel SGD's."""
    X, y, _ = interp_data
    common = dict(gamma=0.05, batch_size=200, max_iter=3, tol=None, dtype="float64",
                  random_state=0)
    ep = EigenProRegressor(**common).fit(X, y)
    sgd = EigenProRegressor(n_components=0, **common).fit(X, y)
    assert ep.n_components_ > 0 and sgd.n_components_ == 0
    # plain SGD: m = 200 >> m* = beta / lambda_1, so its step is capped by lambda_1
    assert sgd.critical_batch_size_ < 10 < 200 <= ep.critical_batch_size_
    assert ep.eta_ > 10 * sgd.eta_
    loss_ep = np.mean((ep.predict(X) - y) ** 2)
    loss_sgd = np.mean((sgd.predict(X) - y) ** 2)
    assert loss_ep < 0.3 * loss_sgd


def test_full_batch_iteration_matches_the_formula(interp_data):
    """With s = n the preconditioner is the exact top-q one: replay EigenPro by hand."""
    X, y, _ = interp_data
    X, y = X[:300], y[:300]
    n, q, epochs, damping = 300, 20, 4, 0.95
    k = RBF(0.05)
    model = EigenProRegressor(kernel=k, n_components=q, subsample_size=n, batch_size=n,
                              damping=damping, max_iter=epochs, tol=None, dtype="float64",
                              random_state=0).fit(X, y)
    K = k(X)
    lam, U = linalg.eigh(K)
    lam, U = lam[::-1] / n, U[:, ::-1]
    beta = 1.0
    top = lam[q] ** damping * lam[0] ** (1 - damping)
    assert model.top_eigenvalue_ == pytest.approx(top, rel=1e-10)
    # without replacement: m* solves m = c(m) beta / lambda_1, c(m) = (n - m) / (n - 1)
    m_star = n * beta / ((n - 1) * top + beta)
    assert model.critical_batch_size_ == pytest.approx(m_star, rel=1e-10)
    assert_allclose(model.eigenvalues_, lam[: q + 1], rtol=1e-10)
    # m = n > m*, c = 0: the saturation step 2 m / (c beta + (m - c) lambda_1(P)) is
    # gradient descent's 2 / lambda_1(P)
    eta = 2 / top
    assert model.eta_ == pytest.approx(eta, rel=1e-12)
    A = U[:, :q] / np.sqrt(n * lam[:q])
    c = 1 - (lam[q] / lam[:q]) ** damping
    w = np.zeros(n)
    for _ in range(epochs):
        r = K @ w - y
        w = w - eta / n * (r - A @ (c * (A.T @ (K @ r))))
    assert_allclose(model.dual_coef_, w, rtol=1e-8, atol=1e-10 * np.abs(w).max())


def test_ep3_on_all_training_points_matches_ep2(interp_data):
    X, y, Xt = interp_data
    X, y = X[:400], y[:400]
    common = dict(kernel=Matern(0.2, 0.5), dtype="float64", tol=None, random_state=0)
    ep2 = EigenProRegressor(max_iter=3, **common).fit(X, y)
    ep3 = EigenProRegressor(n_centers=len(X), max_iter=3, projection_max_iter=20,
                            **common).fit(X, y)
    assert_array_equal(ep3.centers_, X)
    assert ep3.batch_size_ == ep2.batch_size_ and ep3.eta_ == ep2.eta_
    # same subsample and batches; the projection is an inner solve, so nearly equal
    assert rel(ep3.predict(Xt), ep2.predict(Xt)) < 1e-3
    # and with the default (one-epoch) projection both reach the interpolant
    dense = Matern(0.2, 0.5)(Xt, X) @ linalg.solve(Matern(0.2, 0.5)(X), y, assume_a="pos")
    ep3d = EigenProRegressor(n_centers=len(X), max_iter=30, **common).fit(X, y)
    assert rel(ep3d.predict(Xt), dense) < 2e-3


def _nystrom_krr(X, Y, Z, k, alpha):
    Kxz, Kzz = k(X, Z), k(Z)
    return linalg.solve(Kxz.T @ Kxz + alpha * Kzz, Kxz.T @ Y, assume_a="pos")


def test_ep3_user_centers_reach_the_dense_center_solution(ridge_data):
    """Fixed point = argmin ||K(X, Z) a - y||^2 + alpha a^T K(Z, Z) a, centers used as given."""
    X, Y, Xt = ridge_data
    X, Y = X[:500], Y[:500]
    rng = np.random.default_rng(3)
    Z = X[:100] + 0.3 * rng.standard_normal((100, 10))  # not training points
    k = RBF(0.1)
    dense = k(Xt, Z) @ _nystrom_krr(X, Y, Z, k, 1.0)
    model = EigenProRegressor(n_centers=Z, gamma=0.1, alpha=1.0, batch_size=500, eta=50.0,
                              projection_max_iter=10, max_iter=60, tol=None, dtype="float64",
                              random_state=0).fit(X, Y)
    assert_array_equal(model.centers_, Z)
    assert rel(model.predict(Xt), dense) < 1e-2
    # the default stochastic run gets the training loss close to the optimum's
    opt = np.mean((k(X, Z) @ _nystrom_krr(X, Y, Z, k, 1.0) - Y) ** 2)
    sgd = EigenProRegressor(n_centers=Z, gamma=0.1, alpha=1.0, max_iter=20, tol=None,
                            dtype="float64", random_state=0).fit(X, Y)
    assert np.mean((sgd.predict(X) - Y) ** 2) < 1.15 * opt


def test_ep3_random_centers_are_training_points(ridge_data):
    X, Y, _ = ridge_data
    model = EigenProRegressor(n_centers=0.2, max_iter=2, tol=None, random_state=0).fit(X, Y)
    assert model.centers_.shape == (200, 10)
    rows = {r.tobytes() for r in X}  # exactly: float32 storage never rounds the inputs
    assert model.centers_.dtype == np.float64
    assert all(c.tobytes() in rows for c in model.centers_)
    assert model.projection_batch_size_ >= 1 and model.projection_eta_ > 0
    assert EigenProRegressor(n_centers=150, max_iter=1, tol=None).fit(X, Y).centers_.shape[0] \
        == 150


# -------------------------------------------------------------- properties
def test_predict_rows_independent_of_blocks(interp_data):
    X, y, Xt = interp_data
    for n_centers in (None, 300):
        model = EigenProRegressor(n_centers=n_centers, gamma=0.1, dtype="float64", max_iter=2,
                                  tol=None, random_state=0).fit(X, y)
        full = model.predict(Xt)
        for wm in (1e-3, 0.05, 10):
            with kernelkit.config_context(working_memory=wm):
                for k in (1, 7, 50):
                    assert_allclose(model.predict(Xt[:k]), full[:k], rtol=1e-10, atol=1e-12)
                    assert_allclose(model.predict(Xt)[:k], full[:k], rtol=1e-10, atol=1e-12)


def test_reproducible_under_random_state(ridge_data):
    X, Y, _ = ridge_data
    X, Y = X[:400], Y[:400]
    for n_centers in (None, 100):
        a = EigenProRegressor(n_centers=n_centers, max_iter=2, tol=None, random_state=7)
        b = EigenProRegressor(n_centers=n_centers, max_iter=2, tol=None, random_state=7)
        c = EigenProRegressor(n_centers=n_centers, max_iter=2, tol=None, random_state=8)
        wa, wb, wc = (m.fit(X, Y).dual_coef_ for m in (a, b, c))
        assert_array_equal(wa, wb)
        assert not np.array_equal(wa, wc)


def test_blockwise_batches_equal_in_memory_batches(ridge_data):
    """A batch larger than working_memory is computed in blocks: same iterates."""
    X, Y, _ = ridge_data
    kw = dict(n_components=30, batch_size=250, eta=100.0, max_iter=2, tol=None,
              dtype="float64", random_state=0)
    ref = EigenProRegressor(**kw).fit(X, Y)
    with kernelkit.config_context(working_memory=0.05):  # < 250 x 1000 x 8 bytes
        small = EigenProRegressor(**kw).fit(X, Y)
    assert_allclose(small.dual_coef_, ref.dual_coef_, rtol=1e-9, atol=1e-12)
    # every product of the operator, in memory and blockwise
    from kernelkit.eigenpro._solver import LocalOperator
    from kernelkit.kernels import KernelOperator

    op = LocalOperator(KernelOperator(RBF(0.1), 10, "numba"), X[:300], np.float64)
    XB, W, R, J = X[500:620], Y[:300], Y[:120], np.array([3, 50, 299])
    K = RBF(0.1)(XB, X[:300])
    for wm in (10, 0.05):
        with kernelkit.config_context(working_memory=wm):
            h = op.prepare(XB)
            assert_allclose(op.matmul(h, W), K @ W, rtol=1e-12)
            assert_allclose(op.columns(h, J), K[:, J], rtol=1e-12)
            assert_allclose(op.rmatmul(h, R), K.T @ R, rtol=1e-12)
            assert_allclose(op.forward(XB, W), K @ W, rtol=1e-12)


def test_automatic_values_follow_the_papers_and_are_overridable(ridge_data):
    X, Y, _ = ridge_data
    with kernelkit.config_context(working_memory=1.0):
        m = EigenProRegressor(gamma=0.1, alpha=0.5, max_iter=1, tol=None,
                              random_state=0).fit(X, Y)
    n, s = 1000, m.subsample_size_
    assert s == 1000 and m.beta_ == 1.0
    mu = 0.5 / n
    nystrom = ((m.eigenvalues_[-1] + mu) ** 0.95 * (m.eigenvalues_[0] + mu) ** 0.05)
    # lambda_1(P) is also measured on a data sample (here all of it: s = n, exact
    # eigenpairs), which bounds the ridge part by mu instead of (1 - c_1) mu
    assert nystrom <= m.top_eigenvalue_ <= nystrom + mu
    top = m.top_eigenvalue_
    assert m.critical_batch_size_ == pytest.approx(n * 1.5 / ((n - 1) * top + 1.5), rel=1e-12)
    # batch sized to working_memory: (n_centers + s) * batch * 4 bytes <= 1 MiB
    limit = 2**20 // ((1000 + s) * 4)
    assert m.batch_size_ == min(limit, int(m.critical_batch_size_))
    b = m.batch_size_
    c = (n - b) / (n - 1)  # without-replacement correction of the gradient noise
    assert m.eta_ == pytest.approx(b / (c * 1.5 + (b - c) * mu), rel=1e-12)
    # n_components = smallest q whose critical batch reaches the batch (target <= s)
    assert m.critical_batch_size_ >= limit
    o = EigenProRegressor(gamma=0.1, n_components=7, subsample_size=300, batch_size=64,
                          eta=3.0, max_iter=1, tol=None, random_state=0).fit(X, Y)
    assert (o.n_components_, o.subsample_size_, o.batch_size_, o.eta_) == (7, 300, 64, 3.0)
    assert o.eigenvalues_.shape == (8,)


def test_float32_by_default_float64_on_request(ridge_data):
    X, Y, Xt = ridge_data
    m32 = EigenProRegressor(gamma=0.1, alpha=1.0, max_iter=3, tol=None, random_state=0)
    m64 = EigenProRegressor(gamma=0.1, alpha=1.0, max_iter=3, tol=None, random_state=0,
                            dtype=np.float64)
    m32.fit(X, Y)
    m64.fit(X, Y)
    # the iteration runs in float32; the inputs keep their precision and the
    # coefficients are float64 (their scale follows the targets')
    assert m32.dual_coef_.dtype == np.float64 and m32.centers_.dtype == np.float64
    assert m64.dual_coef_.dtype == np.float64
    p32, p64 = m32.predict(Xt), m64.predict(Xt)
    assert p32.dtype == np.float64
    assert 1e-9 < rel(p32, p64) < 1e-4
    m = EigenProRegressor(gamma=0.1, alpha=1.0, max_iter=3, tol=None, random_state=0)
    assert m.fit(X.astype(np.float32), Y).centers_.dtype == np.float32  # as given


def test_backends_and_callable_kernels_agree(ridge_data):
    X, Y, Xt = ridge_data
    X, Y = X[:400], Y[:400]
    kw = dict(alpha=1.0, max_iter=2, tol=None, dtype="float64", random_state=0)
    ref = EigenProRegressor(gamma=0.1, backend="numpy", **kw).fit(X, Y)
    assert ref.backend_ == "numpy"
    for model in (EigenProRegressor(gamma=0.1, backend="numba", **kw),
                  EigenProRegressor(kernel=lambda A, B: RBF(0.1)(A, B), **kw),
                  EigenProRegressor(kernel=RBF(0.1), **kw)):
        model.fit(X, Y)
        assert_allclose(model.dual_coef_, ref.dual_coef_, rtol=1e-7, atol=1e-9)
        assert_allclose(model.predict(Xt), ref.predict(Xt), rtol=1e-7, atol=1e-9)


def test_rank_deficient_kernel_warns_and_clips_components():
    X = np.random.default_rng(0).standard_normal((200, 3))
    y = X @ [1.0, -2.0, 0.5]
    with pytest.warns(UserWarning, match="numerical rank"):
        m = EigenProRegressor(kernel=Linear(), n_components=10, max_iter=3, tol=None,
                              dtype="float64", random_state=0).fit(X, y)
    assert m.n_components_ == 2
    assert rel(m.predict(X), y) < 1e-3


# ---------------------------------------------------------- classification
def test_classifier_one_hot_targets_and_scores():
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    labels = np.array(["zero", "one", "two", "three", "four", "five", "six", "seven",
                       "eight", "nine"])[y]
    # calibration=None: tol=None then trains on every row (no calibration split)
    clf = EigenProClassifier(gamma=0.05, max_iter=5, tol=None, random_state=0,
                             calibration=None)
    clf.fit(X[:1200], labels[:1200])
    assert set(clf.classes_) == set(labels)
    scores = clf.decision_function(X[1200:])
    assert scores.shape == (597, 10)
    assert_array_equal(clf.predict(X[1200:]), clf.classes_[scores.argmax(axis=1)])
    assert clf.score(X[1200:], labels[1200:]) > 0.95
    # the training fit regresses the one-hot targets: scores of the training points
    onehot = (labels[:1200, None] == clf.classes_[None, :]).astype(float)
    assert np.abs(clf.decision_function(X[:1200]) - onehot).mean() < 0.05
    # two classes: one output for classes_[1], decision = output - 1/2
    binary = y[:1200] < 5
    b = EigenProClassifier(gamma=0.05, max_iter=5, tol=None, random_state=0,
                           calibration=None)
    b.fit(X[:1200], binary)
    assert b.dual_coef_.shape == (1200, 1)
    d = b.decision_function(X[1200:])
    assert d.shape == (597,)
    assert_array_equal(b.predict(X[1200:]), d > 0)
    assert b.score(X[1200:], y[1200:] < 5) > 0.95


def test_early_stopping_keeps_the_best_epoch():
    X, y = load_digits(return_X_y=True)
    clf = EigenProClassifier(gamma=0.02, early_stopping=True, validation_fraction=0.2,
                             n_iter_no_change=2, tol=0.05, max_iter=20, random_state=0)
    clf.fit(X / 16.0, y)
    assert clf.n_iter_ < 20  # a 5-point accuracy gain per epoch does not last
    assert len(clf.validation_scores_) == clf.n_iter_
    assert clf.best_validation_score_ == max(clf.validation_scores_)
    assert clf.centers_.shape[0] == 1437  # the validation fifth is held out
    reg = EigenProRegressor(max_iter=3, tol=None, random_state=0).fit(X[:300], y[:300])
    assert reg.validation_scores_ is None and reg.best_validation_score_ is None


def test_convergence_warning_and_verbose(capsys):
    X, y = load_iris(return_X_y=True)
    with pytest.warns(ConvergenceWarning, match="max_iter=1"):
        EigenProClassifier(max_iter=1, random_state=0, verbose=1).fit(X, y)
    out = capsys.readouterr().out
    # the first line comes before the calibration's out-of-fold fits (n <= 2,000), the
    # model's before the split's and the centers' copies (seconds at 60,000)
    assert out.startswith("[EigenProClassifier] n=150: 5 fits for the calibration's out-of-")
    assert "\n[EigenProClassifier] n=150, d=4, 3 target(s): the validation split" in out
    assert out.count("epoch 1/1") == 1  # the folds' fits are quiet
    assert "[EigenProClassifier] epoch 1/1: training_loss=" in out
    assert "validation_score=" in out
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        EigenProClassifier(max_iter=2, tol=None, random_state=0).fit(X, y)
    # without early stopping the rule is the relative change of the predictions
    m = EigenProRegressor(max_iter=50, tol=0.5, n_iter_no_change=1, early_stopping=False,
                          random_state=0)
    m.fit(X, y.astype(float))
    assert m.n_iter_ < 50 and m.validation_scores_ is None
    assert m.prediction_changes_[0] == np.inf and m.prediction_changes_[-1] < 0.5


# ---------------------------------------------------------------- bad input
def test_divergence_raises_naming_the_step_size(ridge_data):
    X, Y, _ = ridge_data
    for n_centers in (None, 100):
        with pytest.raises(ValueError, match=r"diverged.*eta=1e\+06"):
            EigenProRegressor(n_centers=n_centers, eta=1e6, max_iter=5, tol=None,
                              random_state=0).fit(X, Y)


@pytest.mark.parametrize("params, match", [
    ({"n_centers": 2000}, "n_centers=2000 exceeds the number of training samples"),
    ({"n_centers": 0}, "n_centers must be >= 1"),
    ({"n_centers": 1.5}, r"n_centers as a float .* \(0, 1\]"),
    ({"n_centers": "all"}, "n_centers must be None"),
    ({"n_centers": np.ones((5, 3))}, "n_centers has 3 features"),
    ({"n_centers": np.full((5, 10), np.nan)}, "NaN"),
    ({"subsample_size": 10, "n_components": 20}, "n_components=20 must be < subsample_size"),
    ({"subsample_size": 10, "n_components": 10}, "n_components=10 must be < subsample_size"),
    ({"n_centers": 50, "subsample_size": 60}, "subsample_size=60 exceeds the number of centers"),
    ({"subsample_size": 0}, "subsample_size must be >= 1"),
    ({"n_components": -1}, "n_components must be >= 0"),
    ({"batch_size": 0}, "batch_size must be 'auto' or a positive integer"),
    ({"batch_size": -5}, "batch_size must be 'auto' or a positive integer"),
    ({"batch_size": 2.5}, "batch_size must be 'auto' or an integer"),
    ({"eta": 0.0}, "eta must be > 0"),
    ({"eta": "big"}, "eta must be 'auto'"),
    ({"alpha": -1.0}, "alpha must be >= 0"),
    ({"damping": 0.0}, "damping must be > 0"),
    ({"damping": 1.5}, "damping must be <= 1"),
    ({"max_iter": 0}, "max_iter must be >= 1"),
    ({"tol": -1.0}, "tol must be >= 0"),
    ({"early_stopping": "yes"}, "early_stopping must be 'auto' or a bool"),
    ({"algorithm": "ep5"}, "algorithm must be one of"),
    ({"algorithm": "ep2", "n_centers": 10}, "algorithm='ep2' trains the model whose centers"),
    ({"projection_period": 0}, "projection_period must be >= 1"),
    ({"cache_size": -1.0}, "cache_size must be >= 0"),
    ({"early_stopping": True, "validation_fraction": 1.0}, "validation_fraction must be < 1"),
    ({"n_iter_no_change": 0}, "n_iter_no_change must be >= 1"),
    ({"projection_max_iter": 0}, "projection_max_iter must be >= 1"),
    ({"dtype": "float16"}, "dtype must be 'float32' or 'float64'"),
    ({"dtype": "banana"}, "dtype must be 'float32' or 'float64'"),
    ({"kernel": "precomputed"}, "precomputed"),
    ({"kernel": "sinc"}, "kernel must be one of"),
    ({"gamma": -1.0}, "gamma"),
    ({"kernel": "ntk", "kernel_params": {"depth": 0}}, "depth"),
    ({"backend": "jax"}, "backend"),
    ({"client": 3}, "client must be None"),
])
def test_bad_parameters_name_the_argument(ridge_data, params, match):
    X, Y, _ = ridge_data
    with pytest.raises(ValueError, match=match):
        EigenProRegressor(**{"max_iter": 1, **params}).fit(X, Y)


def test_bad_arrays_are_rejected_and_never_modified(ridge_data):
    X, Y, Xt = ridge_data
    y = Y[:, 0].copy()
    y[3] = np.nan
    with pytest.raises(ValueError, match="y contains NaN"):
        EigenProRegressor(max_iter=1).fit(X, y)
    Xn = X.copy()
    Xn[0, 0] = np.inf
    with pytest.raises(ValueError, match="X contains"):
        EigenProRegressor(max_iter=1).fit(Xn, Y)
    with pytest.raises(ValueError, match="1 sample"):
        EigenProRegressor(max_iter=1).fit(X[:1], Y[:1])
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        EigenProRegressor(max_iter=1).fit(X, Y[:10])
    with pytest.raises(ValueError, match="at least 2 classes"):
        EigenProClassifier(max_iter=1).fit(X, np.zeros(len(X)))
    with pytest.raises(ValueError, match="Unknown label type"):
        EigenProClassifier(max_iter=1).fit(X, Y[:, 0])
    Xc, Yc, Xtc = X.copy(), Y.copy(), Xt.copy()
    Z = X[:50].copy()
    m = EigenProRegressor(n_centers=Z, max_iter=1, tol=None).fit(X, Y)
    m.predict(Xt)
    EigenProRegressor(max_iter=1, tol=None, dtype="float64").fit(X, Y).predict(Xt)
    for a, b in ((X, Xc), (Y, Yc), (Xt, Xtc), (Z, X[:50])):
        assert_array_equal(a, b)
    with pytest.raises(ValueError, match="10 features"):
        m.predict(X[:, :3])


# ------------------------------------------------------------- sklearn API
def test_grid_search_and_pipeline_clone(ridge_data):
    X, Y, _ = ridge_data
    pipe = make_pipeline(StandardScaler(), EigenProRegressor(max_iter=2, tol=None,
                                                             random_state=0))
    grid = GridSearchCV(pipe, {"eigenproregressor__gamma": [0.02, 0.1],
                               "eigenproregressor__n_centers": [None, 0.5]}, cv=2)
    grid.fit(X[:400], Y[:400, 0])
    assert len(grid.cv_results_["mean_test_score"]) == 4
    assert np.all(np.isfinite(grid.cv_results_["mean_test_score"]))


@parametrize_with_checks([
    EigenProRegressor(), EigenProClassifier(),
    EigenProRegressor(n_centers=0.5, max_iter=5, tol=None),
    EigenProClassifier(n_centers=0.6, max_iter=5, tol=None), EigenProClassifier(kernel="ntk"),
    EigenProRegressor(dtype="float64", max_iter=5, tol=None),
], expected_failed_checks=lambda est: {
    "check_sample_weight_equivalence_on_dense_data": (
        "a stochastic iteration over rows: a repeated row changes the batches and the "
        "held-out split; the weighted fixed point is tested against KernelRidge"),
    "check_class_weight_classifiers": (
        "weights 1000 : 1e-4 leave one-vs-all 0/1 regression free off each class's own "
        "rows, where class 0's interpolant may dip below the others' ~0 scores")})
def test_sklearn_compatible(estimator, check):
    check(estimator)


# ------------------------------------------------------------------ EigenPro 4
def test_ep4_reaches_the_dense_center_solution(ridge_data):
    """The target of EigenPro 3's test, with projections delayed over several steps."""
    X, Y, Xt = ridge_data
    X, Y = X[:500], Y[:500]
    rng = np.random.default_rng(3)
    Z = X[:100] + 0.3 * rng.standard_normal((100, 10))
    k = RBF(0.1)
    dense = k(Xt, Z) @ _nystrom_krr(X, Y, Z, k, 1.0)
    # four stochastic steps per projection, one projection per epoch: the iterates
    # hover around the fixed point with a spread proportional to eta (about 0.05 at
    # eta=12.5, the full-batch test's step per point; 0.006 at an eighth of it)
    model = EigenProRegressor(n_centers=Z, gamma=0.1, alpha=1.0, batch_size=125,
                              eta=1.5625, algorithm="ep4", projection_period=4,
                              projection_max_iter=10, max_iter=300, tol=None,
                              dtype="float64", random_state=0).fit(X, Y)
    assert model.algorithm_ == "ep4" and model.projection_period_ == 4
    assert model.n_auxiliary_centers_ == 500 and model.n_projections_ == 300
    assert rel(model.predict(Xt), dense) < 1e-2
    opt = np.mean((k(X, Z) @ _nystrom_krr(X, Y, Z, k, 1.0) - Y) ** 2)
    sgd = EigenProRegressor(n_centers=Z, gamma=0.1, alpha=1.0, max_iter=20, tol=None,
                            dtype="float64", random_state=0).fit(X, Y)
    assert sgd.algorithm_ == "ep4"  # the default for centers other than the data
    # k(Z, Z) is held in the cache: half the authors' period from 4 up; without a cache,
    # theirs
    t = max(1, 100 // sgd.batch_size_)
    assert sgd.projection_period_ == (t // 2 if t >= 4 else t)
    uncached = EigenProRegressor(n_centers=Z, gamma=0.1, alpha=1.0, max_iter=1, tol=None,
                                 dtype="float64", random_state=0, cache_size=0).fit(X, Y)
    assert uncached.projection_period_ == max(1, 100 // uncached.batch_size_)
    assert np.mean((sgd.predict(X) - Y) ** 2) < 1.15 * opt


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_ep4_with_period_one_is_ep3(ridge_data, alpha):
    X, Y, _ = ridge_data
    common = dict(n_centers=150, gamma=0.1, alpha=alpha, max_iter=3, tol=None,
                  dtype="float64", random_state=0, batch_size=100)
    ep3 = EigenProRegressor(algorithm="ep3", **common).fit(X, Y)
    ep4 = EigenProRegressor(algorithm="ep4", projection_period=1, **common).fit(X, Y)
    assert ep3.projection_period_ == 1 and ep4.n_projections_ == 30
    assert_allclose(ep4.dual_coef_, ep3.dual_coef_, rtol=1e-9,
                    atol=1e-12 * np.abs(ep3.dual_coef_).max())
    # a longer period is a different iteration
    ep4b = EigenProRegressor(algorithm="ep4", projection_period=5, **common).fit(X, Y)
    assert ep4b.n_projections_ == 6
    assert not np.allclose(ep4b.dual_coef_, ep3.dual_coef_)


# EigenPro 4 at a set period: the automatic one is shorter when k(Z, Z) is cached
@pytest.mark.parametrize("kw", [{}, {"n_centers": 200, "algorithm": "ep3"},
                                {"n_centers": 200, "projection_period": 3},
                                {"n_centers": 200, "alpha": 1.0, "projection_period": 3}])
def test_cached_kernel_gives_the_recomputed_iterates(ridge_data, kw):
    X, Y, _ = ridge_data
    common = dict(max_iter=2, tol=None, dtype="float64", random_state=0, **kw)
    cached = EigenProRegressor(**common).fit(X, Y)
    fresh = EigenProRegressor(cache_size=0, **common).fit(X, Y)
    assert cached.kernel_cached_ and not fresh.kernel_cached_
    assert_allclose(cached.dual_coef_, fresh.dual_coef_, rtol=1e-10,
                    atol=1e-12 * np.abs(fresh.dual_coef_).max())


def _default_fits_warn_nothing(X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        for est in (EigenProClassifier(random_state=0), EigenProRegressor(random_state=0),
                    EigenProClassifier(n_centers=300, random_state=0)):
            est.fit(X, y)
            assert est.n_iter_ < est.max_iter
            assert est.validation_scores_ is not None


def test_default_fits_meet_the_stopping_rule():
    from sklearn.datasets import load_breast_cancer

    X, y = load_digits(return_X_y=True)
    _default_fits_warn_nothing(X / 16.0, y)
    Xb, yb = load_breast_cancer(return_X_y=True)
    _default_fits_warn_nothing(StandardScaler().fit_transform(Xb), yb)
    _default_fits_warn_nothing(Xb, yb)  # unscaled features too


@pytest.mark.slow
def test_default_fit_on_fashion_mnist_subset_meets_the_stopping_rule():
    import gzip
    import os

    root = "/usr/share/datasets/fashion-mnist"
    path = os.path.join(root, "train-images-idx3-ubyte.gz")
    if not os.path.exists(path):
        pytest.skip("Fashion-MNIST not installed")
    with gzip.open(path) as f:
        X = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)[:20000] / 255.0
    with gzip.open(os.path.join(root, "train-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)[:20000]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        clf = EigenProClassifier(n_centers=2000, random_state=0).fit(X, y)
    assert clf.best_validation_score_ > 0.8


# -------------------------------------------------------- degenerate data, scale
@pytest.mark.parametrize("kw", [{}, {"n_centers": 5}, {"n_centers": 1},
                                {"n_centers": np.zeros((1, 3))}, {"algorithm": "ep3"},
                                {"n_centers": 7, "algorithm": "ep3"}])
def test_identical_rows_give_the_mean(kw):
    rng = np.random.default_rng(0)
    y = 3 + 0.1 * rng.standard_normal(100)
    X = np.ones((100, 3))
    if isinstance(kw.get("n_centers"), np.ndarray):
        X = np.zeros((100, 3))
    # the warnings the fit may give, as errors: not "error" for all, a process-wide filter
    # that also turned warnings of other threads and of garbage collected objects left
    # by earlier tests into failures of this one
    with warnings.catch_warnings():
        for category in (ConvergenceWarning, UserWarning, RuntimeWarning):
            warnings.simplefilter("error", category)
        m = EigenProRegressor(random_state=0, **kw).fit(X, y)
    # the mean of the training part (10% held out by the default early stopping): within
    # 0.1 |mean(train) - mean(held out)| of the mean of all, 1.9e-3 at most over 30 seeds
    assert_allclose(m.predict(X[:2]), y.mean(), rtol=5e-3)
    m = EigenProRegressor(random_state=0, tol=None, early_stopping=False, max_iter=3,
                          **kw).fit(X, y)
    assert_allclose(m.predict(X[:2]), y.mean(), rtol=1e-6)


def test_rank_one_kernel_gives_the_least_squares_fit():
    """Collinear rows, linear kernel: K = t t^T |v|^2; the fit is y's projection on t."""
    rng = np.random.default_rng(1)
    t = rng.uniform(-1, 1, 200)
    X = np.outer(t, [1.0, -2.0, 0.5])
    y = 2 * t + 0.1 * rng.standard_normal(200)
    expected = t * (t @ y) / (t @ t)
    for kw in ({}, {"n_centers": 10}, {"n_centers": 1}):
        m = EigenProRegressor(kernel="linear", tol=None, early_stopping=False, max_iter=3,
                              random_state=0, **kw).fit(X, y)
        assert_allclose(m.predict(X), expected, rtol=1e-4, atol=1e-5)  # float32


@pytest.mark.parametrize("n_centers", [None, 150])
def test_targets_scale_freely(ridge_data, n_centers):
    X, Y, Xt = ridge_data
    X, Y = X[:400], Y[:400]
    y = Y[:, 0]
    kw = dict(n_centers=n_centers, max_iter=2, tol=None, random_state=0)
    ref = EigenProRegressor(**kw).fit(X, y).predict(Xt)
    # each output is normalised by its own RMS and the coefficients are float64: the
    # float32 iteration serves any scale float64 holds, 1e-300 as 1e300
    for c in (1e-300, 1e-45, 1e-12, 1e12, 1e39, 1e300):
        m = EigenProRegressor(**kw).fit(X, c * y)
        assert_allclose(m.predict(Xt) / c, ref, rtol=1e-5, atol=1e-6 * np.abs(ref).max())


@pytest.mark.parametrize("n_centers", [None, 150])
def test_outputs_of_any_scales_are_each_fitted_as_alone(ridge_data, n_centers):
    """One output of scale 1e-300 beside one of scale 1: both exact (not 0, no error)."""
    X, Y, Xt = ridge_data
    X, Y = X[:400], Y[:400]
    for dtype, tol in (("float64", 1e-9), ("float32", 2e-5)):  # float32: rounding only
        kw = dict(n_centers=n_centers, max_iter=2, tol=None, random_state=0, dtype=dtype)
        alone = [EigenProRegressor(**kw).fit(X, Y[:, j]).predict(Xt) for j in (0, 1)]
        for c in (1e-300, 1e300):
            both = EigenProRegressor(**kw).fit(X, np.column_stack([Y[:, 0], c * Y[:, 1]]))
            pred = both.predict(Xt)
            assert_allclose(pred[:, 0], alone[0], rtol=tol, atol=tol)
            assert_allclose(pred[:, 1] / c, alone[1], rtol=tol, atol=tol)
    # the default (early-stopped) fit as well: its held-out score is scale-free, so it
    # stops at the same epoch with the same model as at scale 1
    ref = EigenProRegressor(n_centers=n_centers, random_state=0).fit(X, Y)
    m = EigenProRegressor(n_centers=n_centers, random_state=0).fit(
        X, np.column_stack([Y[:, 0], 1e-300 * Y[:, 1]]))
    assert m.n_iter_ == ref.n_iter_
    assert_allclose(m.validation_scores_, ref.validation_scores_, rtol=1e-6)
    # (float32 iterates: the normalised targets differ in their last bits)
    assert_allclose(m.predict(Xt) / [1.0, 1e-300], ref.predict(Xt), rtol=1e-4, atol=2e-5)


def test_one_center_is_the_one_center_least_squares_fit():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((80, 3))
    y = rng.standard_normal(80)
    z = np.array([[0.1, -0.2, 0.3]])
    kxz = RBF(0.2)(X, z)[:, 0]
    a = (kxz @ y) / (kxz @ kxz)
    m = EigenProRegressor(n_centers=z, gamma=0.2, tol=None, early_stopping=False,
                          max_iter=40, dtype="float64", random_state=0).fit(X, y)
    assert_allclose(m.dual_coef_, [a], rtol=2e-2)


def test_divergence_message_with_automatic_eta_never_says_pass_a_smaller_eta():
    from types import SimpleNamespace

    from kernelkit.eigenpro._checks import _divergence_message

    P = SimpleNamespace(eta=2.0, batch_size=10, auto_eta=2.0, user_eta=False)
    msg = _divergence_message(ArithmeticError("the training loss became inf"), P)
    assert "smaller eta" not in msg and "subsample_size" in msg
    P.user_eta = True
    assert "pass a smaller eta" in _divergence_message(ArithmeticError("x"), P)


def test_auto_projection_period_halves_when_the_centers_kernel_is_held():
    from kernelkit.eigenpro._solver import auto_period

    MiB = 2**20
    # 20,000 points, 4,000 centers, float32: k(X, Z) 305 MiB, k(Z, Z) 61 MiB
    assert auto_period(4000, 436, 20_000, 4, 4096 * MiB) == 4  # both held
    assert auto_period(4000, 436, 20_000, 4, 100 * MiB) == 4  # k(Z, Z) only
    assert auto_period(4000, 436, 20_000, 4, 32 * MiB) == 9  # neither
    assert auto_period(4000, 436, 20_000, 4, 330 * MiB) == 9  # k(X, Z) leaves too little
    assert auto_period(4000, 436, 20_000, 8, 200 * MiB) == 4  # float64: k(Z, Z) 122 MiB
    assert auto_period(100, 80, 1000, 8, 4096 * MiB) == 1
    assert auto_period(2000, 681, 100_000, 4, 4096 * MiB) == 2  # short periods are kept
    assert auto_period(2000, 500, 10_000, 4, 4096 * MiB) == 2  # 4 halved

