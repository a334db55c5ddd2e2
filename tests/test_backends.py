"""Every engine against the NumPy reference, blockwise driver, config and backend resolution."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from numpy.testing import assert_allclose

import kernelkit
from kernelkit.backend import KernelSpec, available_backends, get_backend, resolve_backend
from kernelkit.backend._numpy import NumpyBackend
from kernelkit.kernels import NNGP, NTK, RBF, Cosine, Laplacian, Linear, Matern, Polynomial

KERNELS = [RBF(0.2), Laplacian(0.3), Matern(0.2, 0.5), Matern(0.2, 1.5), Matern(0.2, 2.5),
           Polynomial(0.3, 2, 1.0), Linear(), Cosine(), NTK(depth=3), NTK(depth=2, b_std=0.2),
           NNGP(depth=2, activation="erf", b_std=0.1), NTK(depth=1, activation="erf")]
REFERENCE = NumpyBackend()


def _spec(k, X):
    return k.spec(X.shape[1])


def _host(engine, a):
    return np.asarray(engine.to_host(a))


@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-10), (np.float32, 1e-5)])
def test_engines_agree_with_reference(engine, kernel, dtype, rtol, rng):
    X = rng.standard_normal((53, 7)).astype(dtype)
    Y = rng.standard_normal((31, 7)).astype(dtype)
    X[3] = 0.0
    X[5] = 2 * X[4]  # parallel rows
    spec = _spec(kernel, X)
    with kernelkit.config_context(working_memory=0.01):  # several row blocks
        for args in ((X, Y), (X, None)):
            ref = REFERENCE.pairwise(spec, *args)
            got = _host(engine, engine.pairwise(spec, *[None if a is None else engine.asarray(a)
                                                        for a in args]))
            assert got.dtype == dtype
            scale = np.abs(ref).max()
            assert_allclose(got, ref, rtol=rtol, atol=rtol * scale)
        W = rng.standard_normal((31, 3))
        assert_allclose(_host(engine, engine.matmul(spec, engine.asarray(X), engine.asarray(Y),
                                                    engine.asarray(W))),
                        REFERENCE.pairwise(spec, X.astype(np.float64), Y.astype(np.float64)) @ W,
                        rtol=1e-9, atol=1e-9 * scale)
        assert_allclose(_host(engine, engine.diag(spec, engine.asarray(X))),
                        np.diag(REFERENCE.pairwise(spec, X.astype(np.float64))),
                        rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
@pytest.mark.parametrize("d", [3, 7])  # 3: the numba engine's direct path of few features
def test_pairwise_columns_equal_pairwise_at_the_pivots(engine, kernel, d, rng):
    # X prepared once (copy, centering, row statistics) for every set of columns S
    X = rng.standard_normal((53, d)) + 3.0
    spec = _spec(kernel, X)
    with kernelkit.config_context(working_memory=0.01):  # several row blocks
        cols = engine.pairwise_columns(spec, engine.asarray(X))
        for S in (np.array([0, 7, 52]), np.arange(10, 40)):
            ref = REFERENCE.pairwise(spec, X, X[S])
            got = _host(engine, cols(S))
            assert got.shape == (53, len(S)) and got.dtype == np.float64
            assert_allclose(got, ref, rtol=1e-10, atol=1e-10 * np.abs(ref).max())


@pytest.mark.parametrize("working_memory", [1e-4, 0.01, 256])
def test_blocks_do_not_change_values(working_memory, rng):
    X = rng.standard_normal((97, 4))
    engine = get_backend("numba")
    spec = NTK(depth=2).spec(4)
    full = REFERENCE.pairwise(spec, X)
    with kernelkit.config_context(working_memory=working_memory):
        assert_allclose(engine.pairwise(spec, X), full, rtol=1e-12)
        blocks = list(engine.pairwise_chunked(spec, X))
        assert_allclose(np.vstack([b for _, b in blocks]), full, rtol=1e-12)
        assert [s for s, _ in blocks] == list(np.cumsum([0] + [len(b) for _, b in blocks])[:-1])
        if working_memory == 1e-4:
            assert len(blocks) == len(X)  # one row per block at the smallest budget


def test_symmetric_output_is_exactly_symmetric(rng):
    X = rng.standard_normal((300, 5))
    with kernelkit.config_context(backend="numba"):
        for k in (RBF(), NTK(depth=3), Cosine()):
            K = k(X)
            assert np.array_equal(K, K.T)


def test_pairwise_with_large_block_matches_sklearn_rbf(rng):
    from sklearn.metrics.pairwise import rbf_kernel

    X = rng.standard_normal((1500, 20)).astype(np.float32)
    ref = rbf_kernel(X.astype(np.float64), gamma=0.05)
    with kernelkit.config_context(backend="numba"):
        K = RBF(0.05)(X)
    assert K.dtype == np.float32
    assert np.max(np.abs(K - ref) / ref) < 1e-6


finite = st.floats(-10, 10, allow_nan=False, width=64)


@settings(max_examples=40, deadline=None)
@given(X=arrays(np.float64, st.tuples(st.integers(1, 12), st.integers(1, 4)), elements=finite),
       which=st.sampled_from(range(len(KERNELS))))
def test_property_symmetric_psd_and_engines_agree(X, which):
    kernel = KERNELS[which]
    spec = _spec(kernel, X)
    K = REFERENCE.pairwise(spec, X)
    assert np.all(np.isfinite(K))
    assert_allclose(K, K.T, rtol=1e-12, atol=1e-12)
    scale = max(1.0, np.abs(K).max())
    assert np.linalg.eigvalsh((K + K.T) / 2).min() >= -1e-9 * scale * len(X)
    for name in available_backends():
        if name != "numpy":
            assert_allclose(get_backend(name).pairwise(spec, X), K, rtol=1e-10,
                            atol=1e-10 * scale)


def test_config_and_resolution():
    assert kernelkit.get_config()["backend"] == "auto"
    assert resolve_backend("auto") == "numba"
    assert resolve_backend(None) == "numba"
    with kernelkit.config_context(backend="numpy", working_memory=8):
        assert resolve_backend(None) == "numpy"
        assert kernelkit.get_config() == {"backend": "numpy", "working_memory": 8}
    assert kernelkit.get_config()["backend"] == "auto"
    with pytest.raises(ValueError, match="backend"):
        kernelkit.set_config(backend="torch")
    with pytest.raises(ValueError, match="working_memory"):
        kernelkit.set_config(working_memory=0)
    with pytest.raises(ValueError, match="backend"):
        resolve_backend("gpu")


@pytest.mark.skipif("cupy" in available_backends(), reason="a GPU is present")
def test_cupy_without_gpu_is_a_clear_error():
    with pytest.raises(ValueError, match="backend='cupy' is not usable"):
        resolve_backend("cupy")
    with pytest.raises(ValueError, match="cupy"):
        kernelkit.NTKRidge(backend="cupy").fit(np.eye(3), np.ones(3))


def test_config_context_is_thread_local_and_set_config_global():
    import threading

    seen = []

    def look():
        seen.append(kernelkit.get_config()["backend"])

    with kernelkit.config_context(backend="numpy"):
        t = threading.Thread(target=look)
        t.start()
        t.join()
    kernelkit.set_config(backend="numpy")
    try:
        t = threading.Thread(target=look)
        t.start()
        t.join()
        with kernelkit.config_context(working_memory=4):
            assert kernelkit.get_config() == {"backend": "numpy", "working_memory": 4}
    finally:
        kernelkit.set_config(backend="auto")
    assert seen == ["auto", "numpy"]


def test_environment_defaults(monkeypatch):
    from kernelkit import _config

    monkeypatch.setenv("KERNELKIT_BACKEND", "numpy")
    monkeypatch.setenv("KERNELKIT_WORKING_MEMORY", "64")
    assert _config._defaults_from_environment() == {"backend": "numpy", "working_memory": 64.0}
    monkeypatch.setenv("KERNELKIT_BACKEND", "tpu")
    with pytest.raises(ValueError, match="KERNELKIT_BACKEND"):
        _config._defaults_from_environment()


def test_kernel_spec_is_plain_data():
    s = RBF(0.5).spec(3)
    assert s == KernelSpec("rbf", (0.5,))
    assert RBF().spec(4) == KernelSpec("rbf", (0.25,))


def test_forked_child_can_use_the_thread_pool(rng):
    import multiprocessing as mp

    X = rng.standard_normal((3000, 5))
    with kernelkit.config_context(backend="numba"):
        K = RBF()(X)  # the parent's pool is running now
        with mp.get_context("fork").Pool(1) as pool:
            child = pool.apply_async(_rbf_sum, (X,)).get(timeout=120)
    assert_allclose(child, K.sum(), rtol=1e-12)


def _rbf_sum(X):
    with kernelkit.config_context(backend="numba"):
        return RBF()(X).sum()


def test_concurrent_calls_restore_blas_threads(rng):
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_info

    before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    X = rng.standard_normal((200, 5))
    with ThreadPoolExecutor(4) as ex:
        results = list(ex.map(lambda _: RBF()(X), range(200)))
    assert all(np.array_equal(r, results[0]) for r in results)
    after = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    assert after == before


def test_reference_engine_symmetric_across_blocks(rng):
    X = rng.standard_normal((50, 10))
    with kernelkit.config_context(backend="numpy", working_memory=7 * 50 * 8 / 2**20):
        for k in (Linear(), RBF(), NTK(depth=2), Cosine(), Polynomial()):
            K = k(X)
            assert np.array_equal(K, K.T)


def test_extreme_parameters_stay_finite(rng):
    X = rng.standard_normal((5, 3))
    assert_allclose(np.diag(Matern(1e308, 0.5)(X)), 1.0)
    big = np.array([[1e8], [2e8], [-1e8]])
    for cls in (NTK, NNGP):
        k = cls(activation="erf")
        K = k(big)
        assert np.all(np.isfinite(K))
        assert_allclose(np.diag(K), k.diag(big), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_numba_symmetric_path_equals_general_path(dtype, rng):
    """k(X) (lower triangle, SYRK on the diagonal squares, mirrored) equals k(X, copy of
    X) (plain GEMM, every entry), and the Gaussian equals its closed form, duplicates
    and near-duplicates included, over many row blocks run largest first."""
    X = rng.standard_normal((301, 40))
    X[7] = X[3]  # duplicate
    X[11] = X[5] + 1e-9  # near-duplicate: the cancellation fix-up
    X = X.astype(dtype)
    engine = get_backend("numba")
    for kernel in (RBF(0.05), Matern(0.05, 1.5), Polynomial(0.02, 3, 1.0), Cosine(),
                   NTK(depth=3), NNGP(depth=2, activation="erf", b_std=0.1)):
        spec = _spec(kernel, X)
        for wm in (0.05, 256):  # 0.05 MiB: ~20 blocks; 256: the default
            with kernelkit.config_context(working_memory=wm):
                sym = engine.pairwise(spec, X)
                gen = engine.pairwise(spec, X, X.copy())
            assert sym.dtype == dtype and np.array_equal(sym, sym.T)
            assert_allclose(sym, gen, rtol=1e-12 if dtype == np.float64 else 1e-6,
                            atol=1e-13 * np.abs(gen).max())
    X64 = X.astype(np.float64)
    exact = np.exp(-0.05 * ((X64[:, None, :] - X64[None, :, :]) ** 2).sum(axis=2))
    with kernelkit.config_context(working_memory=0.05):
        K = engine.pairwise(RBF(0.05).spec(40), X)
    assert_allclose(K, exact, rtol=1e-12 if dtype == np.float64 else 1e-7, atol=0)
    assert K[7, 3] == 1.0 and K[3, 7] == 1.0


@pytest.mark.parametrize("simd_exp", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numba_exponentials_equal_the_closed_form_on_both_exp_paths(simd_exp, dtype, rng,
                                                                    monkeypatch):
    """Gaussian and Laplacian through NumPy's exp (processors with AVX-512) and through the
    compiled vexp pass (the others), on the Gram-block and direct paths, k(X) and k(X, Y):
    every entry equals the closed form."""
    from kernelkit.backend import _numba

    monkeypatch.setattr(_numba, "NUMPY_SIMD_EXP", simd_exp)
    engine = get_backend("numba")
    for d in (5, 40):  # the direct path (few features), the Gram blocks
        X, Y = rng.standard_normal((203, d)), rng.standard_normal((61, d))
        for kernel, dist, p in ((RBF(0.7 / d), 2, 2), (Laplacian(0.3 / d), 1, 1)):
            spec = _spec(kernel, X)
            for args in ((X, None), (X, Y)):
                A, B = args[0], args[0] if args[1] is None else args[1]
                exact = np.exp(-spec.params[0] * (np.abs(A[:, None] - B[None]) ** p).sum(2))
                with kernelkit.config_context(working_memory=0.05):  # many blocks
                    got = engine.pairwise(spec, *[None if a is None else a.astype(dtype)
                                                  for a in args])
                    into = engine.pairwise_into(spec, *args)
                ref = exact if dtype == np.float64 else np.exp(-spec.params[0] * (np.abs(
                    A.astype(dtype).astype(float)[:, None] - B.astype(dtype).astype(float)[None])
                    ** p).sum(2))
                assert got.dtype == dtype
                assert_allclose(got, ref, rtol=1e-12 if dtype == np.float64 else 1e-7, atol=0)
                assert_allclose(into, exact, rtol=1e-12, atol=0)


def test_wide_gives_a_column_prefix_its_whole_rows():
    from kernelkit.backend._numba import _wide

    base = np.arange(60.0).reshape(6, 10)
    v = base[1:4, :7]
    w = _wide(v)
    assert w.flags.c_contiguous and w.shape == (3, 10)
    assert np.shares_memory(w, base) and np.array_equal(w[:, :7], v)
    assert _wide(base) is base and _wide(base[:, ::2]) is not None
    assert not _wide(base[:, ::2]).flags.c_contiguous  # other layouts: as they are


def test_numba_gemm_uses_syrk_only_for_rows_of_the_same_matrix(rng):
    from kernelkit.backend._numba import _rows_of

    C = rng.standard_normal((50, 6))
    assert _rows_of(C[5:9], C) == 5 and _rows_of(C, C) == 0
    assert _rows_of(C[5:9].copy(), C) == -1  # other memory
    assert _rows_of(C[5:9], C[:7]) == -1  # past its end
    assert _rows_of(C[5:9, :3], C) == -1 and _rows_of(C[::2][1:3], C) == -1  # other layout
    engine = get_backend("numba")
    for r0, r1 in ((0, 50), (0, 20), (20, 50), (10, 30)):
        out = np.full((r1 - r0, 50), np.nan)
        engine._gemm(C[r0:r1], C.T, out)  # rectangle left, SYRK square, rectangle right
        assert_allclose(out, C[r0:r1] @ C.T.copy(), rtol=1e-13, atol=1e-13)
        assert np.array_equal(out[:, r0:r1], out[:, r0:r1].T)


def test_numba_blocks_cover_every_row_once():
    engine = get_backend("numba")
    seen = []
    with kernelkit.config_context(working_memory=0.5):
        engine._map_blocks(lambda r0, r1, buf: seen.append((r0, r1)), 2001, 3000, scratch=True)
    rows = np.concatenate([np.arange(r0, r1) for r0, r1 in seen])
    assert np.array_equal(np.sort(rows), np.arange(2001))


def test_numba_direct_path_over_many_blocks_matches_reference(rng):
    X, Y = rng.standard_normal((301, 5)), rng.standard_normal((77, 5))
    engine = get_backend("numba")
    for kernel in (RBF(0.3), Matern(0.3, 1.5), Laplacian(0.2)):
        spec = _spec(kernel, X)
        for wm in (0.01, 256):  # ~40 blocks run largest first; the default
            with kernelkit.config_context(working_memory=wm):
                for args in ((X, None), (X, Y)):
                    got = engine.pairwise_into(spec, *args)
                    assert_allclose(got, REFERENCE.pairwise(spec, *args), rtol=1e-12, atol=0)
                    if args[1] is None:
                        assert np.array_equal(got, got.T)


@pytest.mark.parametrize("degree", [1, 2, 3, 5, 16, 17, 2.5])
def test_numba_polynomial_integer_powers_match_closed_form(degree, rng):
    """Integer degrees up to 16 take repeated products, the others ``pow``: both equal
    ``(gamma x.y + coef0) ** degree`` to a few ulps, in float64 and float32 output."""
    X, Y = rng.random((97, 6)), rng.random((41, 6))
    engine = get_backend("numba")
    spec = Polynomial(0.3, degree, 0.5).spec(6)
    for A, B in ((X, Y), (X, None)):
        exact = (0.3 * (A @ (A if B is None else B).T) + 0.5) ** degree
        with kernelkit.config_context(working_memory=0.01):
            got = engine.pairwise(spec, A, B)
            got32 = engine.pairwise(spec, A.astype(np.float32),
                                    None if B is None else B.astype(np.float32))
        assert_allclose(got, exact, rtol=4e-15 * max(degree, 1), atol=0)
        exact32 = (0.3 * (A.astype(np.float32).astype(np.float64)
                          @ (A if B is None else B).astype(np.float32).astype(np.float64).T)
                   + 0.5) ** degree
        assert got32.dtype == np.float32
        assert_allclose(got32, exact32, rtol=2e-7, atol=0)


def _ulps(got, ref):
    """Error in units of the reference's last place (subnormal spacing near zero)."""
    return np.abs(got - ref) / np.spacing(np.maximum(np.abs(ref), np.finfo(np.float64).tiny))


def test_vectorised_exp_asin_acos_match_numpy():
    """The compiled loops' exp / asin / acos (no libm call, so the loops vectorise)
    against NumPy over their domains: within 2 ulps (exp) and 3 (asin, acos), 0 below
    exp's range, exact where the kernels rely on it (exp(0) = 1, acos(-1) = pi)."""
    import numba as nb

    from kernelkit.backend._vmath import vacos, vasin, vexp

    @nb.njit
    def apply(f, x):
        out = np.empty_like(x)
        for i in range(x.size):
            out[i] = f(x[i])
        return out

    r = np.random.default_rng(5)
    x = np.concatenate([np.linspace(-745.0, 709.0, 200_001), r.uniform(-30, 1, 100_000),
                        r.uniform(-1e-3, 1e-3, 1000), [0.0, -708.3, -708.5, -744.0]])
    with np.errstate(under="ignore"):
        assert _ulps(apply(vexp, x), np.exp(x)).max() <= 2
    edge = np.array([0.0, -746.0, -800.0, -np.inf, -1e308])
    assert np.array_equal(apply(vexp, edge), [1.0, 0.0, 0.0, 0.0, 0.0])
    c = np.concatenate([np.linspace(-1.0, 1.0, 400_001), r.uniform(-1, 1, 100_000),
                        0.5 + np.linspace(-1e-12, 1e-12, 101), 1 - np.logspace(-16, -1, 300),
                        -1 + np.logspace(-16, -1, 300), np.logspace(-300, -1, 300)])
    assert _ulps(apply(vasin, c), np.arcsin(c)).max() <= 3
    assert _ulps(apply(vacos, c), np.arccos(c)).max() <= 3
    assert np.array_equal(apply(vacos, np.array([-1.0, 1.0])), [np.pi, 0.0])
    assert np.array_equal(apply(vasin, np.array([-1.0, 0.0, 1.0])), [-np.pi / 2, 0.0, np.pi / 2])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_numba_direct_path_of_pairwise_equals_gemm_path_and_sklearn(dtype, rng):
    """Few features (d <= 8): k(X) and k(X, Y) come from the coordinates, not from the Gram
    product; the values equal the reference's GEMM path and scikit-learn's, in float64
    and float32 output, over many row blocks."""
    from sklearn.metrics.pairwise import laplacian_kernel, rbf_kernel

    X = (rng.standard_normal((403, 6)) + 50.0).astype(dtype)  # off the origin
    X[17] = X[4]
    X[30] = X[8] + 1e-5  # near-duplicate
    Y = (rng.standard_normal((55, 6)) + 50.0).astype(dtype)
    engine = get_backend("numba")
    X64, Y64 = X.astype(np.float64), Y.astype(np.float64)
    shift = X64.mean(axis=0)  # scikit-learn's |x|^2 + |y|^2 - 2 x.y cancels off the origin
    tol = 1e-13 if dtype == np.float64 else 6e-8
    for kernel, peer in ((RBF(0.1), lambda A, B: rbf_kernel(A, B, gamma=0.1)),
                         (Laplacian(0.05), lambda A, B: laplacian_kernel(A, B, gamma=0.05)),
                         (Matern(0.1, 2.5), None)):
        spec = _spec(kernel, X)
        assert engine._direct_pairwise(spec, X[:3], None, dtype) is not None  # direct path
        for wm in (0.05, 256):
            with kernelkit.config_context(working_memory=wm):
                for A, B in ((X, None), (X, Y)):
                    got = engine.pairwise(spec, A, B)
                    assert got.dtype == dtype
                    ref = REFERENCE.pairwise(spec, X64, None if B is None else Y64)
                    assert_allclose(got, ref, rtol=tol, atol=0)
                    if peer is not None:
                        assert_allclose(got, peer(X64 - shift, (X64 if B is None else Y64)
                                                  - shift), rtol=tol, atol=0)
                    if B is None:
                        assert np.array_equal(got, got.T) and got[17, 4] == 1.0


def test_numba_fused_neural_kernels_equal_reference_at_every_angle(rng):
    """The one-pass NTK / NNGP (every layer per row in cache, vectorised arc-cosine)
    equals the layer-by-layer NumPy reference at angles over the whole range: nearly
    parallel (the defect branch), around cos = +-1/2 (where acos switches its
    reduction), antiparallel, and zero rows; float64 to 1e-13 (3e-14 of the largest entry
    near antiparallel pairs), float32 output rounded once."""
    d = 6
    base = rng.standard_normal(d)
    other = rng.standard_normal(d)
    other -= other @ base / (base @ base) * base  # orthogonal to base
    other *= np.linalg.norm(base) / np.linalg.norm(other)
    angles = np.concatenate([np.linspace(0, np.pi, 181), np.arccos([0.5, -0.5]) + 1e-9,
                             [1e-9, 1e-5, 0.05, np.pi - 1e-7]])
    X = np.array([np.cos(t) * base + np.sin(t) * other for t in angles])
    X *= rng.uniform(0.5, 3.0, (len(X), 1))
    X = np.vstack([X, np.zeros((2, d)), -X[:20], rng.standard_normal((60, d))])
    engine = get_backend("numba")
    for kernel in (NTK(depth=3), NTK(depth=2, b_std=0.3, w_std=1.3), NNGP(depth=3),
                   NTK(depth=2, activation="erf", b_std=0.2), NNGP(depth=1, activation="erf")):
        spec = _spec(kernel, X)
        ref = REFERENCE.pairwise(spec, X)
        scale = np.abs(ref).max()
        with kernelkit.config_context(working_memory=0.05):
            got = engine.pairwise(spec, X)
            gen = engine.pairwise(spec, X, X[::-1].copy())[:, ::-1]
            got32 = engine.pairwise(spec, X.astype(np.float32))
        # atol: near-antiparallel pairs are ill-conditioned (sin t + (pi - t) cos t cancels
        # to ~(pi - t)^3 / 3), so any two evaluations differ there by ~1e-14 of the scale
        # (the previous engine too, with NumPy's arccos)
        assert_allclose(got, ref, rtol=1e-13, atol=3e-14 * scale)
        assert_allclose(gen, ref, rtol=1e-13, atol=3e-14 * scale)
        ref32 = REFERENCE.pairwise(spec, X.astype(np.float32).astype(np.float64))
        assert got32.dtype == np.float32
        assert_allclose(got32, ref32, rtol=6e-8, atol=6e-8 * scale)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_all_finite_finds_every_nan_and_inf_as_the_reference(dtype, rng):
    """The numba engine's one-pass check (several panels on the pool) against NumPy's
    isfinite: each non-finite value anywhere, in every panel position, is found; finite
    extremes (the largest float, -0.0) are not flagged; other layouts take the reference."""
    import kernelkit.backend._numba as numba_engine

    numba, ref = get_backend("numba"), NumpyBackend()
    A = rng.standard_normal((300, 7000)).astype(dtype)  # 3 panels of 2**20 entries
    assert A.shape[0] > 2 * (numba_engine._FINITE_PANEL // A.shape[1])
    assert numba.all_finite(A) and ref.all_finite(A)
    for bad in (np.nan, np.inf, -np.inf):
        for i, j in ((0, 0), (149, 3500), (299, 6999)):
            B = A.copy()
            B[i, j] = bad
            assert not numba.all_finite(B) and not ref.all_finite(B)
            assert not numba.all_finite(np.asfortranarray(B))  # the reference's path
    big = np.full((4, 5), np.finfo(dtype).max, dtype)
    big[0, 0] = -0.0
    assert numba.all_finite(big) and numba.all_finite(np.empty((0, 3), dtype))
    assert np.isfinite(A).all() == numba.all_finite(A)
