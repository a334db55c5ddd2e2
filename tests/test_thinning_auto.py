"""KernelThinning's default ``compress="auto"``: what it resolves to, what it computes, and
the kernel access paths a large default fit takes (blocks, wide inputs)."""

import math

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import kernelkit
from kernelkit.metrics import mmd
from kernelkit.thinning import KernelThinning, kernel_thinning
from kernelkit.thinning._kernel import _AUTO_KT_MAX_N

ENGINES = ["numpy", "numba"]


def test_auto_is_kt_up_to_8192_points_and_compress_pp_above():
    assert _AUTO_KT_MAX_N == 8192
    rng = np.random.default_rng(0)
    for n, want in ((8192, None), (8193, "compress++")):
        X = rng.standard_normal((n, 2))
        est = KernelThinning(gamma=0.25, random_state=0).fit(X)
        assert est.compress_ == want
        # the same coreset as the explicit choice it resolved to
        ref = KernelThinning(gamma=0.25, random_state=0, compress=want).fit(X)
        assert_array_equal(est.coreset_indices_, ref.coreset_indices_)
    # KT's MMD comes for free up to 8,192 points; Compress++'s above costs n^2: not by default
    assert not math.isnan(KernelThinning(gamma=0.25, random_state=0).fit(X[:8192]).mmd_)
    assert math.isnan(est.mmd_)
    for compress in (None, "compress", "compress++"):  # explicit choices are kept
        assert KernelThinning(compress=compress, random_state=0).fit(X[:300]).compress_ == compress


def test_default_unchanged_at_small_n():
    """Below the switch the default is KT, value for value: coreset and MMD equal to
    ``compress=None``'s, and the function form follows the estimator."""
    X = np.random.default_rng(1).standard_normal((1000, 3))
    a = KernelThinning(gamma=0.3, random_state=5).fit(X)
    b = KernelThinning(gamma=0.3, random_state=5, compress=None).fit(X)
    assert_array_equal(a.coreset_indices_, b.coreset_indices_)
    assert a.mmd_ == b.mmd_
    assert a.compress_ is None and len(a.coreset_indices_) == 1000 >> 4
    assert_array_equal(kernel_thinning(X, gamma=0.3, random_state=5), a.coreset_indices_)


def test_default_above_the_switch_beats_iid_subsampling():
    """[CPP]: Compress++ (g = 4) keeps KT's ``n / 2^m`` points and an MMD far below an
    i.i.d. subsample of the same size (seeded, n = 4^7 Gaussian points)."""
    n = 4**7
    rng = np.random.default_rng(2)
    X = rng.standard_normal((n, 2))
    est = KernelThinning(gamma=0.25, random_state=0, compute_mmd=True).fit(X)
    assert est.compress_ == "compress++" and est.m_ == 7
    assert len(est.coreset_indices_) == n >> 7 == 128
    assert len(np.unique(est.coreset_indices_)) == 128
    assert_allclose(est.mmd_, mmd(X, est.coreset_, gamma=0.25), rtol=1e-8)
    iid = [mmd(X, X[rng.choice(n, 128, replace=False)], gamma=0.25) for _ in range(10)]
    assert est.mmd_ < min(iid)
    assert est.mmd_ < 0.25 * np.median(iid)


def test_verbose_first_line_states_the_plan(capsys):
    X = np.random.default_rng(3).standard_normal((9000, 2))
    KernelThinning(gamma=0.25, random_state=0, verbose=1).fit(X)
    first = capsys.readouterr().out.splitlines()[0]
    assert "n=9000, d=2: Compress++ (compress='auto'), g=4" in first
    assert "then KT with 5 rounds" in first and "to ~140 points" in first
    assert "kernel evaluations" in first
    KernelThinning(gamma=0.25, random_state=0, verbose=1).fit(X[:500])
    first = capsys.readouterr().out.splitlines()[0]
    assert "KT (compress='auto'): 4 halving rounds on all 500 points" in first
    assert "about 2.5e+05 kernel evaluations" in first


@pytest.mark.parametrize("bad", ["compress+", "Auto", ["auto"], 1, True])
def test_bad_compress_is_a_value_error_and_leaves_the_fit(bad):
    X = np.random.default_rng(4).standard_normal((64, 2))
    est = KernelThinning(random_state=0).fit(X)
    before = est.coreset_indices_.copy()
    est.set_params(compress=bad)
    with pytest.raises(ValueError, match="compress must be one of"):
        est.fit(X[:40])
    assert_array_equal(est.coreset_indices_, before) and est.compress_ is None


@pytest.mark.parametrize("params", [{"compress": None}, {"compress": "compress++", "g": 1}])
def test_wide_inputs_blockwise_equal_stored(params):
    """24 features (beyond the engines' few-feature direct blocks): with the kernel matrix
    computed in row blocks, per-halving blocks and KT-SWAP's rows of swapped-in points
    computed one by one, the coreset equals the stored-matrix one, on both engines."""
    X = np.random.default_rng(5).standard_normal((600, 24))
    ref = KernelThinning(gamma=0.02, random_state=1, backend="numpy", **params).fit(X)
    for backend in ENGINES:
        for wm in (256, 0.3, 0.02):  # stored; halvings of <= 198 points stored; rows only
            with kernelkit.config_context(working_memory=wm):
                got = KernelThinning(gamma=0.02, random_state=1, backend=backend,
                                     **params).fit(X)
            assert_array_equal(got.coreset_indices_, ref.coreset_indices_)
            if not math.isnan(ref.mmd_):
                assert_allclose(got.mmd_, ref.mmd_, rtol=1e-9)


@pytest.mark.parametrize("d", [2, 24])
@pytest.mark.parametrize("engine_name", ENGINES)
def test_halving_keeping_its_triangle_equals_stored(d, engine_name, monkeypatch):
    """A halving whose kernel matrix exceeds working_memory but whose lower triangle fits
    keeps the triangle KT-SPLIT computes and KT-SWAP reads its rows: the same coreset and
    MMD as with the stored matrix."""
    from kernelkit.thinning import _loops, _loops_numba

    module = _loops_numba if engine_name == "numba" else _loops
    calls = []
    real = module.refine_packed
    monkeypatch.setattr(module, "refine_packed", lambda *a: calls.append(1) or real(*a))
    X = np.random.default_rng(6).standard_normal((400, d))
    kw = dict(gamma=0.5 / d, m=1, random_state=3, backend=engine_name)
    ref = KernelThinning(**kw).fit(X)
    assert not calls
    with kernelkit.config_context(working_memory=0.7):  # 1.28 MB matrix, 0.64 MB triangle
        got = KernelThinning(**kw).fit(X)
    assert calls == [1]
    assert_array_equal(got.coreset_indices_, ref.coreset_indices_)
    assert_allclose(got.mmd_, ref.mmd_, rtol=1e-9)
    if d > 2:
        return
    # and in Compress++'s halvings (g = 4, quarters of 1,024 points, each one halving)
    X = np.random.default_rng(7).standard_normal((4096, 2))
    kw = dict(gamma=0.25, compress="compress++", random_state=0, backend=engine_name)
    ref = KernelThinning(**kw).fit(X).coreset_indices_
    assert len(calls) == 1
    with kernelkit.config_context(working_memory=6):  # 8.4 MB matrix, 4.2 MB triangle
        got = KernelThinning(**kw).fit(X).coreset_indices_
    assert len(calls) == 5
    assert_array_equal(got, ref)
