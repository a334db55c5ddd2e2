"""solve_ridge's workspace and condition shortcuts give the dense solution and leave
the caller's matrix as documented."""

import numpy as np
import pytest
from scipy import linalg
from sklearn.metrics.pairwise import rbf_kernel

from kernelkit.utils import _linalg
from kernelkit.utils._linalg import solve_ridge, weighted_kernel

rng = np.random.default_rng(0)
X = rng.standard_normal((120, 4))
K = rbf_kernel(X, gamma=0.3)
Y = rng.standard_normal((120, 3))


def _dense(K, Y, alpha):
    return np.linalg.solve(K + alpha * np.eye(len(K)), Y)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("overwrite", [False, True])
def test_workspace_orders_match_dense_solve(order, overwrite):
    w = rng.uniform(0.1, 10.0, len(K))
    Kw = np.array(K * np.outer(w, w), order=order)  # non-constant diagonal: equilibrated
    for A in (np.array(K, order=order), Kw):
        expect = _dense(A, Y, 0.5)
        work = A.copy(order=order)
        C, d = solve_ridge(work, Y, 0.5, return_inv_diag=True, overwrite_k=overwrite, psd=True)
        np.testing.assert_allclose(C, expect, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(d, np.diag(np.linalg.inv(A + 0.5 * np.eye(len(A)))),
                                   rtol=1e-9)
        if not overwrite:
            np.testing.assert_array_equal(work, A)


def test_overwritten_matrix_restored_for_the_fallback():
    Xd = np.vstack([X[:40], X[:40]])  # duplicate rows, alpha 0: singular
    Kd = rbf_kernel(Xd, gamma=0.3)
    Yd = rng.standard_normal(80)
    w = np.linspace(0.5, 2.0, 80)
    Kdw = Kd * np.outer(w, w)
    expect = np.linalg.pinv(Kdw) @ Yd
    work = Kdw.copy()
    with pytest.warns(linalg.LinAlgWarning):
        C = solve_ridge(work, Yd, 0.0, overwrite_k=True, psd=True)
    np.testing.assert_allclose(work, Kdw, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(C, expect, rtol=1e-6, atol=1e-8)


def test_condition_bound_skips_pocon_only_when_it_suffices(monkeypatch):
    calls = []
    real = _linalg.lapack.dpocon
    monkeypatch.setattr(_linalg.lapack, "dpocon", lambda *a, **k: calls.append(1) or real(*a, **k))
    solve_ridge(K.copy(), Y, 0.5, psd=True)
    assert calls == []  # alpha bounds the condition of a PSD K
    solve_ridge(K.copy(), Y, 0.5)  # not known PSD: estimated
    assert calls == [1]
    solve_ridge(K.copy(), Y, 1e-14, psd=True)  # alpha too small for the bound
    assert calls == [1, 1]


def test_indefinite_matrix_near_singular_still_detected():
    # K + alpha I with an eigenvalue cancelling alpha to round-off: the factorization
    # may succeed, the condition estimate (psd=False) must send it to the fallback
    Q, _ = np.linalg.qr(rng.standard_normal((50, 50)))
    lam = np.linspace(1.0, 2.0, 50)
    lam[0] = -1.0 + 1e-15
    A = (Q * lam) @ Q.T
    A = (A + A.T) / 2
    with pytest.warns(linalg.LinAlgWarning):
        solve_ridge(A, np.ones(50), 1.0)


def test_weighted_kernel_in_place_and_copy():
    w = rng.uniform(0.0, 2.0, len(K))
    expect = K * np.outer(w, w)
    Kc = K.copy()
    out, own = weighted_kernel(Kc, w, owned=False)
    assert own and out is not Kc
    np.testing.assert_array_equal(Kc, K)
    np.testing.assert_allclose(out, expect, rtol=1e-15)
    out, own = weighted_kernel(Kc, w, owned=True)
    assert own and out is Kc
    np.testing.assert_allclose(Kc, expect, rtol=1e-15)
    out, own = weighted_kernel(K, None, owned=False)
    assert out is K and not own
