"""The blocked Cholesky / rank-k update that replace LAPACK's where OpenBLAS's threaded
DSYRK crashes (kernelkit/utils/_potrf.py): the same factor, the same triangle written,
the other one untouched, LAPACK's ``info`` on a matrix that is not positive definite."""

import numpy as np
import pytest
from scipy import linalg

from kernelkit import FalkonRegressor, KernelRidge
from kernelkit.utils import _potrf
from kernelkit.utils._linalg import solve_ridge


@pytest.fixture
def blocked(monkeypatch):
    """The blocked paths at small sizes: blocks of 48 rows from 100 rows on."""
    monkeypatch.setattr(_potrf, "dsyrk_unsafe", lambda: True)
    monkeypatch.setattr(_potrf, "SAFE_N", 100)
    monkeypatch.setattr(_potrf, "BLOCK", 48)


def _spd(n, seed=0):
    A = np.random.default_rng(seed).standard_normal((n, n + 5))
    return A @ A.T / n + 0.1 * np.eye(n)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("order", ["F", "C"])
@pytest.mark.parametrize("n", [130, 144, 97])
def test_blocked_factor_equals_lapack(blocked, lower, order, n):
    S = _spd(n)
    A = np.array(S, order=order)
    stale = np.triu(S, 1) if lower else np.tril(S, -1)  # the other triangle, as given
    assert _potrf.potrf(A, lower=lower) == 0
    ref = linalg.cholesky(S, lower=lower)
    got = np.tril(A) if lower else np.triu(A)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(A - got, stale)
    B = np.array(S, order=order)
    assert _potrf.potrf(B, lower=lower, clean=True) == 0
    np.testing.assert_array_equal(B, got)


def test_blocked_info_is_lapacks(blocked):
    S = _spd(150)
    S[120, 120] = -1.0  # the leading minor of order 121 is the first not positive definite
    assert _potrf.potrf(np.asfortranarray(S), lower=True) == 121
    assert linalg.lapack.dpotrf(S, lower=1)[1] == 121


def test_small_or_safe_calls_go_to_lapack(monkeypatch):
    calls = []
    monkeypatch.setattr(_potrf, "_blocked_lower", lambda L: calls.append(L) or 0)
    monkeypatch.setattr(_potrf, "dsyrk_unsafe", lambda: False)
    _potrf.potrf(np.asfortranarray(_spd(20)))
    monkeypatch.setattr(_potrf, "dsyrk_unsafe", lambda: True)
    monkeypatch.setattr(_potrf, "SAFE_N", 10)
    _potrf.potrf(np.asfortranarray(_spd(20), dtype=np.float32))  # float32: SSYRK is sound
    assert calls == []
    _potrf.potrf(np.asfortranarray(_spd(20)))
    assert len(calls) == 1


@pytest.mark.parametrize("order", ["F", "C"])
def test_syrk_upper_blocked_and_direct(monkeypatch, order):
    rng = np.random.default_rng(1)
    G0 = rng.standard_normal((120, 120))
    Z = rng.standard_normal((37, 120))
    for unsafe in (False, True):
        monkeypatch.setattr(_potrf, "dsyrk_unsafe", lambda u=unsafe: u)
        monkeypatch.setattr(_potrf, "SAFE_N", 100)
        monkeypatch.setattr(_potrf, "BLOCK", 48)
        G = np.array(G0, order=order)
        _potrf.syrk_upper(G, Z)
        np.testing.assert_allclose(np.triu(G), np.triu(G0 + Z.T @ Z), rtol=0, atol=1e-12)
        np.testing.assert_array_equal(np.tril(G, -1), np.tril(G0, -1))


def test_dsyrk_guard_runs_one_blas_thread(monkeypatch):
    from threadpoolctl import threadpool_info

    monkeypatch.setattr(_potrf, "dsyrk_unsafe", lambda: True)
    with _potrf.dsyrk_guard(_potrf.SAFE_N + 1, np.float64):
        assert {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"} == {1}


def test_solvers_equal_with_the_blocked_factor(blocked, monkeypatch):
    rng = np.random.default_rng(2)
    X, y = rng.standard_normal((260, 4)), rng.standard_normal(260)
    K = np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1))
    c, d = solve_ridge(K, y, 1e-2, return_inv_diag=True)
    ref = linalg.solve(K + 1e-2 * np.eye(260), y, assume_a="pos")
    np.testing.assert_allclose(c, ref, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(d, np.diag(linalg.inv(K + 1e-2 * np.eye(260))), rtol=1e-9)
    m = KernelRidge(alpha=1e-2, kernel="rbf", gamma=0.5, solver="cholesky").fit(X, y)
    np.testing.assert_allclose(m.dual_coef_, ref, rtol=1e-9, atol=1e-9)
    _, std = m.predict(X[:5], return_std=True)  # the GP factor of the same matrix
    Ks = K[:5]
    var = 1.0 - np.einsum("ij,ji->i", Ks, linalg.solve(K + 1e-2 * np.eye(260), Ks.T))
    np.testing.assert_allclose(std, np.sqrt(np.maximum(var, 0)), rtol=1e-7, atol=1e-9)
    # FALKON's preconditioner (float64 factors at tol 1e-8) on 120 centers
    f = FalkonRegressor(alpha=1e-3, gamma=0.5, n_centers=120, tol=1e-8, random_state=0)
    f64 = f.fit(X, y).predict(X)
    monkeypatch.setattr(_potrf, "dsyrk_unsafe", lambda: False)  # LAPACK's own factors
    np.testing.assert_allclose(f.fit(X, y).predict(X), f64, rtol=1e-5, atol=1e-8)  # CG to 1e-8
