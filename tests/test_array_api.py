"""The GPU path without a GPU: array API code, device-memory bounds, results follow the input.

* The CuPy engine's array code runs with ``array-api-strict`` as its namespace (a
  stand-in that rejects everything outside the array API standard) and gives the
  NumPy engine's values for every kernel: pairwise (k(X, Y) and k(X, X), float32
  and float64, several row blocks), row blocks, the fused product and the diagonal.
* Block sizes and memory checks of the CuPy engine, from a fake free-memory value.
* ``kernelkit.utils._array_api``: namespaces, moving results back, host pickling,
  with array-api-strict arrays on a non-CPU device standing in for CuPy arrays.
"""

import json
import math
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sklearn
from numpy.testing import assert_allclose

import kernelkit
from kernelkit import KernelRidge
from kernelkit.backend import available_backends
from kernelkit.backend._cupy import BLOCK_SHARE, HEADROOM_BYTES, CupyBackend
from kernelkit.backend._numpy import NumpyBackend
from kernelkit.kernels import NNGP, NTK, RBF, Cosine, Laplacian, Linear, Matern, Polynomial
from kernelkit.utils._array_api import (
    HostPickleMixin,
    array_namespace,
    follow_input,
    is_device_array,
    state_to_host,
    to_host,
    to_namespace,
)

KERNELS = [RBF(0.2), Laplacian(0.3), Matern(0.2, 0.5), Matern(0.2, 1.5), Matern(0.2, 2.5),
           Polynomial(0.3, 2, 1.0), Linear(), Cosine(), NTK(depth=3), NTK(depth=2, b_std=0.2),
           NNGP(depth=2, activation="erf", b_std=0.1), NTK(depth=1, activation="erf"),
           NNGP(depth=3, w_std=1.3, b_std=0.3)]
REFERENCE = NumpyBackend()
HAS_GPU = "cupy" in available_backends()


@pytest.fixture(scope="module")
def xps():
    return pytest.importorskip("array_api_strict")


@pytest.fixture(scope="module")
def device(xps):
    """A non-CPU array-api-strict device: NumPy cannot read its arrays implicitly."""
    return xps.Device("device1")


def _data(rng, dtype=np.float64):
    X = rng.standard_normal((41, 6))
    Y = rng.standard_normal((17, 6))
    X[3] = 0.0                                   # zero row (cosine, NTK self-pairs)
    X[5] = 2.0 * X[4]                            # parallel rows
    X[7] = X[6] + 1e-9 * rng.standard_normal(6)  # near-duplicates: recomputed distances
    Y[2] = X[8] + 1e-7 * rng.standard_normal(6)
    Y[4] = X[9]
    return X.astype(dtype), Y.astype(dtype)


def _np(a):
    assert not isinstance(a, np.ndarray), "the engine returned a NumPy array, not its namespace"
    return np.asarray(a)


@pytest.fixture
def strict_engine(xps):
    return CupyBackend(xp=xps)


# ---------------------------------------------------------------- engine values
def _check_engine(eng, _np, kernel, dtype, rtol, rng):
    """pairwise, row blocks, the fused product and the diagonal equal the NumPy engine's."""
    X, Y = _data(rng, dtype)
    spec = kernel.spec(X.shape[1])
    W = rng.standard_normal((Y.shape[0], 2))
    with kernelkit.config_context(working_memory=5 * 41 * 8 / 2**20):  # 5-row blocks
        for args in ((X, Y), (X, None)):
            ref = REFERENCE.pairwise(spec, *args)
            got = eng.pairwise(spec, *[None if a is None else eng.asarray(a) for a in args])
            got = _np(got)
            assert got.dtype == dtype
            assert_allclose(got, ref, rtol=rtol, atol=rtol * np.abs(ref).max())
            if args[1] is None:
                assert np.array_equal(got, got.T)  # mirrored exactly
            chunks = [(s, _np(b)) for s, b in eng.pairwise_chunked(
                spec, *[None if a is None else eng.asarray(a) for a in args])]
            step = chunks[0][1].shape[0]
            assert len(chunks) > 1 and [s for s, _ in chunks] == list(range(0, 41, step))
            ref64 = REFERENCE.pairwise(spec, *[None if a is None else a.astype(np.float64)
                                               for a in args])
            assert_allclose(np.vstack([b for _, b in chunks]), ref64, rtol=1e-12,
                            atol=1e-12 * np.abs(ref64).max())
        X64, Y64 = X.astype(np.float64), Y.astype(np.float64)
        K = REFERENCE.pairwise(spec, X64, Y64)
        for w in (W, W[:, 0]):
            got = _np(eng.matmul(spec, eng.asarray(X), eng.asarray(Y), eng.asarray(w)))
            assert got.shape == (41,) + w.shape[1:]
            assert_allclose(got, K @ w, rtol=1e-10, atol=1e-12 * np.abs(K).max())
        assert_allclose(_np(eng.diag(spec, eng.asarray(X))),
                        np.diag(REFERENCE.pairwise(spec, X64)), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-12), (np.float32, 1e-6)])
def test_strict_engine_equals_numpy_engine(strict_engine, kernel, dtype, rtol, rng):
    _check_engine(strict_engine, _np, kernel, dtype, rtol, rng)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-11), (np.float32, 1e-6)])
def test_gpu_engine_equals_numpy_engine(kernel, dtype, rtol, rng):
    """On a GPU: the CUDA kernels and cuBLAS against the NumPy engine (special pairs too)."""
    eng = CupyBackend()
    assert eng._on_gpu
    _check_engine(eng, lambda a: a.get(), kernel, dtype, rtol, rng)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs CuPy and a CUDA GPU")
def test_gpu_matrix_larger_than_the_device(rng):
    """A kernel matrix larger than the device: a clear MemoryError, and the product in blocks."""
    import cupy as cp

    eng = CupyBackend()
    free = eng.device_free_bytes()
    n = int(math.sqrt(1.2 * free / 8)) + 1  # its float64 matrix exceeds the free memory
    X = cp.asarray(rng.standard_normal((n, 3)))
    spec = RBF(0.5).spec(3)
    with pytest.raises(MemoryError, match="pairwise_chunked"):
        eng.pairwise(spec, X)
    W = cp.ones(n)
    rows = cp.asarray(rng.integers(0, n, 5))
    got = eng.matmul(spec, X[rows], X, W).get()  # 5 rows: checked against the host
    ref = REFERENCE.matmul(spec, X[rows].get(), X.get(), np.ones(n))
    assert_allclose(got, ref, rtol=1e-9)
    with kernelkit.config_context(working_memory=2**20):  # device-bound blocks, no OOM
        assert eng._budget_bytes() <= BLOCK_SHARE * eng.device_free_bytes()
        full = eng.matmul(spec, X[: n // 4], X, W)
    assert full.shape == (n // 4,) and bool(cp.all(full > 0))


def test_strict_engine_names_and_host_copies(strict_engine, xps, device):
    eng = strict_engine
    assert not eng._on_gpu and not eng._numpy_like
    a = xps.asarray([[1.0, 2.0]])
    assert eng.is_native(a) and not eng.is_native(np.ones(2))
    assert not NumpyBackend().is_native(a) and NumpyBackend().is_native(np.ones(2))
    host = eng.to_host(xps.asarray([1.0, 2.0], device=device))  # np.asarray refuses this one
    assert isinstance(host, np.ndarray) and host.tolist() == [1.0, 2.0]


# ---------------------------------------------------------------- device memory
def _recording(eng):
    """Record the row counts of the blocks the engine fills."""
    rows = []
    fill = eng._fill

    def spy(spec, ctx, r0, r1, block, **kw):
        rows.append(r1 - r0)
        return fill(spec, ctx, r0, r1, block, **kw)

    eng._fill = spy
    return rows


def test_blocks_sized_from_free_device_memory(rng):
    X = rng.standard_normal((300, 5))
    spec = RBF(0.3).spec(5)
    W = rng.standard_normal(300)
    free = HEADROOM_BYTES + 64 * 300 * 8 / BLOCK_SHARE  # room for 64-row blocks of k(X, X)
    eng = CupyBackend(xp=np, free_memory=free)
    assert eng.device_free_bytes() == free
    with kernelkit.config_context(working_memory=1024):  # the device is the tighter bound
        assert eng._budget_bytes() == pytest.approx(BLOCK_SHARE * (free - HEADROOM_BYTES))
        rows = _recording(eng)
        out = eng.matmul(spec, X, X, W)
    assert_allclose(out, REFERENCE.pairwise(spec, X) @ W, rtol=1e-12)
    assert max(rows) == 64 and sum(rows) == 300
    with kernelkit.config_context(working_memory=0.05):  # now working_memory is
        assert eng._budget_rows(300) == int(0.05 * 2**20 // (8 * 300))
    roomy = CupyBackend(xp=np, free_memory=2.0**50)
    with kernelkit.config_context(working_memory=3):
        assert roomy._budget_bytes() == 3 * 2**20
    assert CupyBackend(xp=np).device_free_bytes() == np.inf  # no device: no device bound


def test_kernel_matrix_larger_than_device_is_a_clear_error(rng):
    X = rng.standard_normal((400, 5))
    spec = NTK(depth=3).spec(5)
    eng = CupyBackend(xp=np, free_memory=HEADROOM_BYTES + 400 * 400 * 8 - 1)
    with pytest.raises(MemoryError, match=r"k\(X, Y\) of shape \(400, 400\) needs 0\.00 GiB"
                                          r".*pairwise_chunked.*matmul"):
        eng.pairwise(spec, X)
    # float32 needs half: it fits, and so does the blockwise product in float64
    K32 = eng.pairwise(spec, X.astype(np.float32))
    assert K32.dtype == np.float32
    assert_allclose(K32, REFERENCE.pairwise(spec, X), rtol=1e-6)
    W = rng.standard_normal((400, 3))
    assert_allclose(eng.matmul(spec, X, X, W), REFERENCE.pairwise(spec, X) @ W, rtol=1e-10)
    tiny = CupyBackend(xp=np, free_memory=HEADROOM_BYTES + 1000)
    with pytest.raises(MemoryError, match="float64 copies of the inputs"):
        tiny.matmul(RBF(0.3).spec(5), X, X, W)  # RBF centers copies of X
    narrow = CupyBackend(xp=np, free_memory=HEADROOM_BYTES + 4 * 8 * 400 - 1)
    with pytest.raises(MemoryError, match=r"one row of a kernel block \(400 float64 columns"):
        narrow._budget_rows(400)


class _FakeCupy:
    """Just the memory queries of the ``cupy`` module."""

    __name__ = "fakecupy"

    class cuda:  # noqa: N801
        class runtime:  # noqa: N801
            @staticmethod
            def memGetInfo():  # noqa: N802
                return 3 * 2**30, 80 * 2**30

    class _Pool:
        def free_bytes(self):
            return 2**29

    def get_default_memory_pool(self):
        return self._Pool()

    def __getattr__(self, name):
        return getattr(np, name)


def test_free_memory_counts_the_pools_unused_blocks():
    eng = CupyBackend(xp=_FakeCupy())
    assert eng.device_free_bytes() == 3 * 2**30 + 2**29
    with kernelkit.config_context(working_memory=10_000):
        assert eng._budget_bytes() == BLOCK_SHARE * (3 * 2**30 + 2**29 - HEADROOM_BYTES)


# ------------------------------------------------------ results follow the input
def test_namespaces_and_moves(xps, device):
    a = xps.asarray([1.0, 2.0], device=device)
    assert array_namespace(np.ones(2), [1, 2], None) is np
    assert array_namespace(np.ones(2), a, None) is xps and is_device_array(a)
    assert not is_device_array(np.ones(1)) and not is_device_array(np.float64(1.0))

    class Other:
        __name__ = "other"

    class OtherArray:
        def __array_namespace__(self):
            return Other

    with pytest.raises(TypeError, match="different array namespaces"):
        array_namespace(a, OtherArray())
    h = to_host(a)
    assert isinstance(h, np.ndarray) and h.tolist() == [1.0, 2.0]
    x = np.arange(3.0)
    assert to_host(x) is x and to_namespace(x, np) is x and to_namespace(a, xps) is a
    moved = to_namespace(x, xps)
    assert is_device_array(moved) and np.asarray(moved).tolist() == [0.0, 1.0, 2.0]
    r1, r2 = follow_input((x, 2 * x), a)
    assert array_namespace(r1, r2) is xps
    assert isinstance(follow_input(moved, x), np.ndarray)
    state = {"coef_": a, "parts_": [a, (a, 1)], "d_": {"k": a}, "n_": 3}
    host = state_to_host(state)
    assert isinstance(host["coef_"], np.ndarray) and is_device_array(state["coef_"])
    assert isinstance(host["parts_"][1], tuple) and isinstance(host["parts_"][1][0], np.ndarray)
    assert isinstance(host["d_"]["k"], np.ndarray) and host["n_"] == 3


@pytest.mark.parametrize("kernel", [RBF(0.4), NTK(depth=2), Matern(0.3, 1.5)], ids=repr)
def test_kernel_call_results_follow_the_input(kernel, rng, xps):
    X, Y = _data(rng)
    ref = kernel(X, Y)
    assert isinstance(ref, np.ndarray)
    got = kernel(xps.asarray(X), xps.asarray(Y))
    assert is_device_array(got) and array_namespace(got) is xps
    assert_allclose(np.asarray(got), ref, rtol=1e-12)
    d = kernel.diag(xps.asarray(X))
    assert is_device_array(d)
    assert_allclose(np.asarray(d), np.diag(kernel(X)), rtol=1e-12)


def test_mmd_accepts_namespace_input(rng, xps):
    from kernelkit.metrics import mmd

    X, Y = _data(rng)
    ref = mmd(X, Y, gamma=0.3, unbiased=True, squared=True)
    got = mmd(xps.asarray(X), xps.asarray(Y), gamma=0.3, unbiased=True, squared=True,
              weights_X=xps.asarray(np.full(41, 1 / 41)))
    assert isinstance(got, float)
    assert got == pytest.approx(ref, rel=1e-12)


def _dispatch(monkeypatch):
    """scikit-learn's array API dispatch: KernelRidge's fitted arrays live in the input's
    namespace (as after a GPU fit); ``HostPickleMixin`` is in its bases."""
    monkeypatch.setenv("SCIPY_ARRAY_API", "1")
    return sklearn.config_context(array_api_dispatch=True)


def test_device_fitted_estimator_pickles_to_host_arrays(rng, xps, device, monkeypatch):
    X, _ = _data(rng)
    y = np.sin(X[:, 0]) + X[:, 1]
    Xd = xps.asarray(X, device=device)
    assert issubclass(KernelRidge, HostPickleMixin)
    with _dispatch(monkeypatch):
        model = KernelRidge(kernel="rbf", gamma=0.3, alpha=0.1).fit(
            Xd, xps.asarray(y, device=device))
    assert is_device_array(model.dual_coef_) and model.dual_coef_.device == device
    with pytest.raises(RuntimeError):  # NumPy cannot read the device arrays by itself
        np.asarray(model.X_fit_)
    loaded = pickle.loads(pickle.dumps(model))
    assert isinstance(loaded.dual_coef_, np.ndarray) and isinstance(loaded.X_fit_, np.ndarray)
    assert is_device_array(model.dual_coef_)  # pickling left the live model on its device
    ref = KernelRidge(kernel="rbf", gamma=0.3, alpha=0.1).fit(X, y)
    assert_allclose(loaded.dual_coef_, ref.dual_coef_, rtol=1e-12)
    assert_allclose(loaded.predict(X), ref.predict(X), rtol=1e-12)
    with _dispatch(monkeypatch):
        pred = model.predict(xps.asarray(X, device=device))
    assert is_device_array(pred)
    assert_allclose(to_host(pred), ref.predict(X), rtol=1e-12)
    # with NumPy standing in for the device, everything stays NumPy
    with _dispatch(monkeypatch):
        host_model = KernelRidge(kernel="rbf", gamma=0.3, alpha=0.1).fit(X, y)
    again = pickle.loads(pickle.dumps(host_model))
    assert isinstance(again.dual_coef_, np.ndarray)
    assert_allclose(again.predict(X), ref.predict(X), rtol=1e-12)


# ------------------------------------------------------------- the GPU benchmark
BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.mark.skipif(HAS_GPU, reason="checks the message given without a GPU")
def test_gpu_benchmark_fails_cleanly_without_a_gpu():
    out = subprocess.run([sys.executable, str(BENCH / "bench_gpu.py")], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 2
    assert "needs CuPy and a CUDA GPU" in out.stderr and "--dry-run" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_gpu_benchmark_dry_run(tmp_path):
    """The whole script on tiny sizes with the numba engine: every part runs and is reported."""
    md, js = tmp_path / "R.md", tmp_path / "r.json"
    md.write_text("# header\n\n## Other (x.py)\n\nkept\n")
    out = subprocess.run([sys.executable, str(BENCH / "bench_gpu.py"), "--dry-run", "--md",
                          str(md), "--json", str(js)], capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    text = md.read_text()
    assert "## Other (x.py)\n\nkept" in text and "## GPU (bench_gpu.py)" in text
    assert "DRY RUN" in text
    res = json.loads(js.read_text())
    rows = res["kernels"]
    assert {(r["kernel"], r["op"], r["dtype"]) for r in rows} == {
        (k, op, dt) for k in ("gaussian", "ntk3") for op in ("matrix", "product")
        for dt in ("float32", "float64")}
    assert all(r["s"] > 0 and r["cpu_s"] > 0 for r in rows), rows
    assert set(res["gemm"]) and all(g["tflops"] > 0 for g in res["gemm"].values())
    solvers = res["solvers"]
    assert solvers["ep2"]["score"] > 0.4 and solvers["cpp"]["coreset"] == 32
    for name in ("falkon", "pcg"):  # run when they exist, else said so
        assert "fit_s" in solvers[name] or "not available" in solvers[name]["status"]


@pytest.mark.parametrize("dispatch", [False, True])
def test_kernel_calls_keep_namespace_and_float32_with_or_without_dispatch(dispatch, rng, xps,
                                                                         monkeypatch):
    import contextlib

    from kernelkit.metrics import mmd

    X, Y = _data(rng)
    with _dispatch(monkeypatch) if dispatch else contextlib.nullcontext():
        K = RBF(0.4)(xps.asarray(X.astype(np.float32)))
        assert array_namespace(K) is xps and K.dtype == xps.float32
        assert_allclose(np.asarray(K), RBF(0.4)(X.astype(np.float32)), rtol=1e-6)
        assert mmd(xps.asarray(X), xps.asarray(Y), gamma=0.3) == pytest.approx(
            mmd(X, Y, gamma=0.3), rel=1e-12)
