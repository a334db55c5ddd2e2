"""FALKON internals: the one-array preconditioner and the mixed-precision solve.

The end-to-end FALKON tests (closed-form Nyström, exact KRR, Dask) are in
test_ridge_solvers.py; here the factors are checked against dense LAPACK and the
float32 paths against the float64 solve.
"""

import numpy as np
import pytest
from scipy import linalg
from sklearn.exceptions import ConvergenceWarning
from test_ridge_solvers import GAMMA, _data, _rel  # tests/ is on sys.path (rootdir)

import kernelkit.ridge._falkon as fk
from kernelkit.kernels import RBF, resolve_kernel
from kernelkit.ridge import FalkonClassifier, FalkonRegressor
from kernelkit.utils._verbose import Progress


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_preconditioner_holds_T_and_A_in_one_array(dtype):
    rng = np.random.RandomState(0)
    C = rng.randn(60, 3)
    K = RBF(GAMMA)(C)
    n, lam = 500, 1e-3
    w = rng.uniform(1.0, 20.0, 60)  # non-uniform weights, as leverage-score centers
    F = np.array(K, dtype=dtype, order="F")
    pre = fk._FalkonPreconditioner(F, w, n)
    pre.set_lambda(lam)
    assert pre.F is F and F.dtype == dtype  # factorised in place: one M x M array
    T = np.triu(F.astype(np.float64), 1) + np.diag(pre.tdiag.astype(np.float64))
    LA = np.tril(F.astype(np.float64), -1) + np.diag(pre.adiag.astype(np.float64))
    rtol = 1e-12 if dtype == np.float64 else 1e-5
    assert _rel(T.T @ T, K + pre.eps * np.eye(60)) < rtol  # T^T T = K_MM + eps I
    ref = T @ np.diag(w / n) @ T.T + lam * np.eye(60)  # A^T A = T W T^T / n + lam I
    assert _rel(LA @ LA.T, ref) < rtol
    A = LA.T
    V = rng.randn(60, 4)
    tol = 1e-10 if dtype == np.float64 else 1e-3
    assert _rel(pre.solve_T(V), linalg.solve_triangular(T, V)) < tol
    assert _rel(pre.solve_T(V, trans=True), linalg.solve_triangular(T, V, trans="T")) < tol
    assert _rel(pre.solve_A(V), linalg.solve_triangular(A, V)) < tol
    assert _rel(pre.solve_A(V, trans=True), linalg.solve_triangular(A, V, trans="T")) < tol
    if dtype == np.float64:
        # B^T H B with H = G / n + lam K_MM, K_MM exactly as given (the jitter removed)
        G = rng.randn(60, 60)
        G = G @ G.T
        B = linalg.solve_triangular(T, linalg.inv(A))
        expect = B.T @ (G / n + lam * K) @ B @ V
        got = pre.apply(V, lambda U: G @ U, lam, n)
        assert _rel(got, expect) < 1e-8
        assert _rel(pre.kmm(V), K @ V) < 1e-12


def test_preconditioner_jitter_restores_singular_gram():
    # duplicated centers: K_MM singular, potrf needs a jitter; the retry restores K_MM
    # from the triangle potrf did not touch
    C = np.repeat(np.random.RandomState(1).randn(20, 2), 2, axis=0)
    K = RBF(0.5)(C)
    F = np.array(K, order="F")
    pre = fk._FalkonPreconditioner(F, np.full(40, 10.0), 400)
    T = np.triu(F, 1) + np.diag(pre.tdiag)
    assert pre.eps > 0
    assert _rel(T.T @ T, K + pre.eps * np.eye(40)) < 1e-12


def test_float32_products_blockwise_with_float64_accumulation():
    X, _ = _data(3000, d=5)
    C = X[:200]
    op = resolve_kernel("rbf", GAMMA, 3, 1, None, n_features=5, backend="numpy")
    normal = fk._NystromNormalOperator(op, X, C, np.float32, 4096)
    assert normal.mixed and normal.KnM.dtype == np.float32
    K64 = normal.KnM.astype(np.float64)
    V = np.random.RandomState(0).randn(200, 3)
    ref = K64.T @ (K64 @ V)
    assert _rel(normal.exact(V), ref) < 1e-13  # float64 arithmetic on the held values
    assert _rel(normal(V), ref) < 1e-6  # float32 GEMMs: float32 rounding, no more
    U = np.random.RandomState(1).randn(3000, 2)
    assert _rel(normal.kmn(U), K64.T @ U) < 1e-13
    assert _rel(normal.kmm(V, np.arange(200)), K64[:200] @ V) < 1e-13
    # K_nM V on the row-block pool (two row chunks here): float64 arithmetic, every row
    assert _rel(normal.knm(V), K64 @ V) < 1e-13
    # the rounding check: eps32 / sqrt(12) max column norm |b| against |K_nM b| per column
    est = (np.finfo(np.float32).eps / np.sqrt(12) * np.sqrt((K64 ** 2).sum(0).max())
           * np.linalg.norm(V, axis=0) / np.linalg.norm(K64 @ V, axis=0))
    assert _rel(normal.rounding_error(V), est) < 1e-5


@pytest.fixture
def float32_factors(monkeypatch):
    """Force the float32 preconditioner at any M; record the factors' dtypes."""
    seen = []
    init = fk._FalkonPreconditioner.__init__

    def spy(self, F, w, n):
        seen.append(F.dtype)
        init(self, F, w, n)

    monkeypatch.setattr(fk, "_F32_PRECOND_MIN", 1)
    monkeypatch.setattr(fk._FalkonPreconditioner, "__init__", spy)
    return seen


@pytest.mark.parametrize("centers", ["uniform", "rls", "array"])
def test_float32_factors_reach_the_float64_solve(float32_factors, centers):
    X, Y = _data(700, k=2)
    C = np.random.RandomState(3).randn(60, 3) if centers == "array" else centers
    kw = dict(alpha=1e-2, n_centers=80, centers=C, gamma=GAMMA, random_state=0)
    f32 = FalkonRegressor(tol=1e-6, **kw).fit(X, Y)
    assert float32_factors == [np.float32]
    fk._F32_PRECOND_MIN = 10**9  # float64 factors and products for the reference
    f64 = FalkonRegressor(tol=1e-12, **kw).fit(X, Y)
    assert float32_factors[-1] == np.float64 and f64.kernel_nbytes_ == 700 * f64.n_centers_ * 8
    assert f32.kernel_nbytes_ == 700 * f32.n_centers_ * 4
    # float32 K_nM (and K_MM) storage, float32 factors and products: the float64 solve
    # of the same system to 1e-4
    assert _rel(f32.predict(X), f64.predict(X)) < 1e-4


def test_mixed_solve_falls_back_to_float64_products(capsys):
    # blobs, all-class targets, alpha / n ~ 3e-6: T^-1 amplifies float32 rounding past
    # 1, the float32 rounds diverge and float64 products finish the solve
    from sklearn.datasets import make_blobs

    X, lab = make_blobs(n_samples=300, random_state=0, n_features=2)
    X = (X - X.mean(0)) / X.std(0)
    Y = np.eye(3)[lab]
    kw = dict(n_centers=100, gamma=0.5, random_state=0)
    mixed = FalkonRegressor(tol=1e-6, verbose=1, **kw).fit(X, Y)
    out = capsys.readouterr().out
    assert "products=float64" in out
    # this system is ill-conditioned enough that float32 storage of K_nM itself moves the
    # predictions by 4%: the fit sees it (rounding estimate) and solves again in float64,
    # so the result is the float64 Nyström estimator, to the tolerance
    assert "float32 K_nM rounding" in out
    # tol=1e-10 is below this system's float64 rounding floor: CG breaks down (and says
    # so, not blaming max_iter) after refinement from the true residual
    with pytest.warns(ConvergenceWarning, match="broke down .*max_iter=3000 not reached"):
        ref = FalkonRegressor(tol=1e-10, max_iter=3000, **kw).fit(X, Y)
    assert ref.kernel_nbytes_ == 300 * 100 * 8
    assert _rel(mixed.predict(X), ref.predict(X)) < 1e-4
    assert mixed.kernel_nbytes_ == 300 * 100 * 8  # the float64 attempt was kept


def test_classifier_float32_factors(float32_factors):
    X, y = _data(400)
    lab = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    kw = dict(alpha=0.1, n_centers=60, gamma=GAMMA, random_state=0)
    f32 = FalkonClassifier(tol=1e-6, **kw).fit(X, lab)
    fk._F32_PRECOND_MIN = 10**9
    f64 = FalkonClassifier(tol=1e-12, **kw).fit(X, lab)
    assert float32_factors == [np.float32, np.float64]
    assert _rel(f32.decision_function(X), f64.decision_function(X)) < 2e-4
    np.testing.assert_array_equal(f32.predict(X), f64.predict(X))


@pytest.mark.parametrize("centers", ["uniform", "rls"])
def test_near_duplicate_centers_converge_to_the_nystrom_solution(centers):
    # a dense 2-D cluster, a wide kernel and a tiny lambda: K_MM is singular to rounding.
    # With the smallest jitter that factors it, B = T^-1 A^-1 amplified the rounding of
    # every product and CG stalled near 1e-3; the jitter floor makes it converge
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    rng = np.random.RandomState(0)
    X = np.vstack([rng.randn(1900, 2) * 0.5, rng.randn(100, 2) * 0.3 + 6.0])
    y = np.sin(2 * X[:, 0]) + X[:, 1] + 0.05 * rng.randn(len(X))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        f = FalkonRegressor(alpha=1e-3, gamma=1.0, n_centers=300, centers=centers, tol=1e-5,
                            random_state=0).fit(X, y)
    # the Nyström estimator by a stacked least squares (no K_MM inverse); K_MM is singular
    # to rounding, so the reference itself (gelsd's rank cutoff) is good to ~1e-2 only
    Knm, Kmm = RBF(1.0)(X, f.centers_), RBF(1.0)(f.centers_)
    w, V = linalg.eigh(Kmm)
    R = np.sqrt(np.clip(w, 0, None))[:, None] * V.T
    A = np.vstack([Knm, np.sqrt(1e-3) * R])
    b = linalg.lstsq(A, np.concatenate([y, np.zeros(len(R))]), lapack_driver="gelsd")[0]
    assert _rel(f.predict(X), Knm @ b) < 2e-2


def test_float32_products_fall_back_to_float64_where_their_rounding_matters():
    # near-singular K_MM and tiny lambda: the float32-held K_nM is a different problem
    # whose coefficients grow until its rounding moves the predictions by ~0.1; the fit
    # notices (eps32 |b| max_j ||K_:j|| against ||K_nM b||) and solves in float64
    rng = np.random.RandomState(0)
    X = np.vstack([rng.randn(1900, 2) * 0.5, rng.randn(100, 2) * 0.3 + 6.0])
    y = np.sin(2 * X[:, 0]) + X[:, 1] + 0.05 * rng.randn(len(X))
    kw = dict(alpha=1e-3, gamma=1.0, n_centers=300, centers="rls", random_state=0)
    mixed = FalkonRegressor(tol=1e-5, **kw).fit(X, y)       # float32 products allowed
    with pytest.warns(ConvergenceWarning, match="broke down"):  # below its rounding floor
        exact = FalkonRegressor(tol=1e-9, max_iter=5000, **kw).fit(X, y)  # float64 throughout
    np.testing.assert_array_equal(mixed.centers_, exact.centers_)
    # (tol 1e-5 itself allows ~1e-4 here; the float32-held system was off by ~1e-2)
    assert _rel(mixed.predict(X), exact.predict(X)) < 1e-3


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_failed_float32_rounds_fall_back_to_float64(seed):
    # raw diabetes (target mean ~150, flat default kernel): the float32 rounds diverged
    # from the first step and the fit kept b = 0 (all predictions 0) with a warning
    # whose advice did not help; now a non-converged float32 solve is redone in float64
    import warnings

    from sklearn.datasets import load_diabetes
    from sklearn.exceptions import ConvergenceWarning

    X, y = load_diabetes(return_X_y=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        f = FalkonRegressor(alpha=0.1, random_state=seed).fit(X, y)
    ref = FalkonRegressor(alpha=0.1, random_state=seed, tol=1e-9, max_iter=3000).fit(X, y)
    assert _rel(f.predict(X), ref.predict(X)) < 1e-3
    assert 1 - np.mean((f.predict(X) - y) ** 2) / np.var(y) > 0.45


@pytest.mark.parametrize("tol, cache", [(1e-10, 4096), (1e-5, 4096), (1e-10, 0)])
def test_sample_weight_solves_the_weighted_normal_equations(tol, cache):
    """(K_Mn W K_nM + alpha K_MM) b = K_Mn W y, dense, with weights over 1e4 and zeros;
    held float64, mixed float32 and blockwise K_nM alike."""
    X, y = _data(400, seed=3)
    rng = np.random.RandomState(3)
    w = 10.0 ** rng.uniform(-2, 2, len(y))
    w[:30] = 0.0
    alpha = 1e-2
    m = FalkonRegressor(alpha=alpha, n_centers=50, gamma=GAMMA, tol=tol, cache_size=cache,
                        random_state=0).fit(X, y, sample_weight=w)
    Knm, Kmm = RBF(GAMMA)(X, m.centers_), RBF(GAMMA)(m.centers_)
    b = linalg.solve(Knm.T @ (w[:, None] * Knm) + alpha * Kmm, Knm.T @ (w * y), assume_a="pos")
    err = _rel(m.predict(X), Knm @ b)
    assert err < (1e-8 if tol < 1e-6 else 1e-4), err
    w_copy = w.copy()
    m.fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(w, w_copy)  # the caller's weights are not modified


def test_integer_sample_weight_equals_repeated_rows_on_fixed_centers():
    X, y = _data(120, seed=4)
    C = X[::6]
    reps = np.random.RandomState(4).randint(1, 4, len(y))
    a = FalkonRegressor(alpha=0.1, centers=C, gamma=GAMMA, tol=1e-12).fit(X, y, reps)
    b = FalkonRegressor(alpha=0.1, centers=C, gamma=GAMMA, tol=1e-12).fit(
        np.repeat(X, reps, 0), np.repeat(y, reps))
    np.testing.assert_allclose(a.dual_coef_, b.dual_coef_, rtol=1e-7, atol=1e-9)


def test_bad_sample_weight_is_rejected_with_state_kept():
    X, y = _data(100, seed=5)
    m = FalkonRegressor(n_centers=20, random_state=0).fit(X, y)
    before = m.dual_coef_.copy()
    for bad in (-np.ones(len(y)), np.ones(len(y) - 1), np.zeros(len(y))):
        with pytest.raises(ValueError, match="sample_weight|Sample weights|weight"):
            m.fit(X, y, sample_weight=bad)
        np.testing.assert_array_equal(m.dual_coef_, before)


@pytest.mark.parametrize("tol", [1e-10, 1e-5])
def test_warm_start_at_the_solution_takes_no_step(tol):
    """``_solve(start=...)`` (the held-out calibration solve) starts from the true
    residual at ``coef0`` in the targets' units: at the system's own solution there is
    nothing left to do, float64 and mixed-precision alike, whatever the columns' scales."""
    X, y = _data(300, seed=6, k=2)
    y = y * np.array([1.0, 1e3])  # per-column target scales
    est = FalkonRegressor(alpha=1e-2, n_centers=40, gamma=GAMMA, tol=tol,
                          random_state=0).fit(X, y)
    n, m = X.shape[0], 40
    C, idx = est.centers_, est.center_indices_
    lam = np.array([1e-2 / n])
    quiet = Progress(est, 0)
    coef, _, normal, pre = est._solve_with(est._operator(), X, C, idx, np.full(m, n / m),
                                           lam, y, n, m, fk.product_dtype(tol), tol, 500,
                                           4096, quiet, keep=True)
    assert pre is not None
    again, it = est._solve(normal, pre, idx, lam, y, n, m, tol, 500, quiet, start=coef)
    normal.close()
    assert it == 0
    np.testing.assert_allclose(again, coef, rtol=1e-14, atol=0)


def test_classifier_default_tol_follows_the_loss():
    """tol=None is 1e-3 for the squared loss and 1e-5 for the logistic loss: the same fit
    as passing those values; the regressor has no None default."""
    from kernelkit import FalkonClassifier, FalkonRegressor

    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 4))
    y = (X[:, 0] + 0.3 * rng.standard_normal(300) > 0).astype(int)
    for loss, tol in (("squared", 1e-3), ("logistic", 1e-5)):
        kw = dict(loss=loss, n_centers=60, random_state=0, calibration=None)
        a = FalkonClassifier(**kw).fit(X, y)
        b = FalkonClassifier(tol=tol, **kw).fit(X, y)
        np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
        assert a.n_iter_ == b.n_iter_
    tight = FalkonClassifier(tol=1e-5, n_centers=60, random_state=0, calibration=None).fit(X, y)
    assert FalkonClassifier(n_centers=60, random_state=0, calibration=None).fit(X, y).n_iter_ \
        <= tight.n_iter_
    with pytest.raises(ValueError, match="tol must be a finite number > 0"):
        FalkonRegressor(tol=None).fit(X, y)
