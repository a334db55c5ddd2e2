"""EigenPro's one-pass products over held kernel rows: the Numba twin against the
reference and both against dense formulas; fits through them against fits that
compute every block afresh."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from kernelkit.eigenpro import EigenProRegressor
from kernelkit.eigenpro import _loops, _loops_numba


def _case(rng, N, p, b, k, dtype, f0, weighted):
    M = rng.standard_normal((N, p)).astype(dtype)
    idx = rng.choice(N, b, replace=False)
    W = rng.standard_normal((p, k)).astype(dtype)
    F0 = rng.standard_normal((b, k)).astype(dtype) if f0 else None
    Y = rng.standard_normal((b, k)).astype(dtype)
    wrow = rng.uniform(0.0, 1.0, b).astype(dtype) if weighted else None
    return M, idx, W, F0, Y, wrow


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("b", [1, 7, 100, 301])      # one block and several
@pytest.mark.parametrize("k,f0,weighted", [(1, False, False), (3, True, True),
                                           (2, True, False)])
def test_residual_gradient_twin_matches_dense_formulas(dtype, b, k, f0, weighted):
    rng = np.random.default_rng(b + 10 * k)
    M, idx, W, F0, Y, wrow = _case(rng, 400, 250, b, k, dtype, f0, weighted)
    # dense float64 formulas
    Mb = M[idx].astype(np.float64)
    R64 = Mb @ W.astype(np.float64) - Y
    if F0 is not None:
        R64 += F0
    G64 = Mb.T @ (R64 * (1.0 if wrow is None else wrow[:, None]))
    tol = 1e-4 if dtype == np.float32 else 1e-11
    for mod in (_loops, _loops_numba):
        R, G = mod.residual_gradient(M, idx, W, F0, Y, wrow)
        assert R.shape == (b, k) and G.shape == (250, k)
        assert R.dtype == dtype and G.dtype == dtype
        assert_allclose(R, R64, rtol=tol, atol=tol * np.abs(R64).max())
        assert_allclose(G, G64, rtol=tol, atol=tol * np.abs(G64).max())


def test_residual_gradient_twin_reads_rows_in_place():
    """Rows of a held matrix, in any order and repeated, without a gathered copy."""
    rng = np.random.default_rng(0)
    M, _, W, _, Y, _ = _case(rng, 50, 30, 6, 2, np.float64, False, False)
    idx = np.array([49, 0, 7, 7, 3, 0])
    R, G = _loops_numba.residual_gradient(M, idx, W, None, Y, None)
    R_ref, G_ref = _loops.residual_gradient(M, idx, W, None, Y, None)
    assert_allclose(R, R_ref, rtol=1e-13)
    assert_allclose(G, G_ref, rtol=1e-12, atol=1e-13 * np.abs(G_ref).max())


@pytest.mark.parametrize("kw", [{"algorithm": "ep4", "projection_period": 2},
                                {"algorithm": "ep4", "projection_period": 3, "alpha": 0.5},
                                {"algorithm": "ep3"}])
@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_held_rows_give_the_iterates_of_fresh_blocks(kw, backend):
    """With k(X, Z) and k(Z, Z) held, each step and each projection batch runs one pass
    over the held rows; without a cache, each computes its kernel block and multiplies
    it both ways. The iterates agree to rounding (sample weights and two outputs)."""
    rng = np.random.default_rng(5)
    X = rng.standard_normal((600, 6))
    Y = np.column_stack([np.sin(X[:, 0]) + X[:, 1] * X[:, 2], np.cos(X[:, 3])])
    w = rng.uniform(0.2, 1.0, 600)
    common = dict(n_centers=150, gamma=0.2, max_iter=2, tol=None, dtype="float64",
                  batch_size=64, random_state=0, backend=backend, **kw)
    held = EigenProRegressor(**common).fit(X, Y, sample_weight=w)
    fresh = EigenProRegressor(cache_size=0, **common).fit(X, Y, sample_weight=w)
    assert held.kernel_cached_ and not fresh.kernel_cached_
    assert held.n_components_ > 0
    assert_allclose(held.dual_coef_, fresh.dual_coef_, rtol=1e-9,
                    atol=1e-11 * np.abs(fresh.dual_coef_).max())
    # float32: the same fit to float32 rounding
    held32 = EigenProRegressor(**{**common, "dtype": "float32"}).fit(X, Y, sample_weight=w)
    assert_allclose(held32.dual_coef_, held.dual_coef_, rtol=2e-3,
                    atol=2e-3 * np.abs(held.dual_coef_).max())
