"""Benchmark: dense kernel matrices (Gaussian and NTK depth 3), kernelkit vs peers.

Compares, in one process on the same data (standard normal X, seed 0,
n = 4000, d = 50, gamma = 1/d), in float64 and float32:

* kernelkit ``RBF(gamma)(X)`` and ``NTK(depth=3)(X)`` with the ``numpy`` and the
  ``numba`` engine;
* :func:`sklearn.metrics.pairwise.rbf_kernel` (peer for the Gaussian kernel);
* a plain layer-by-layer NumPy NTK (full n x n arrays per layer, written the way
  the recursion is given in the papers; peer for the NTK), checked against
  kernelkit before timing.

Every timing is a warm-up call (Numba compiles lazily) followed by repeated
calls; the median is reported and ratios are ``peer median / kernelkit median``.
Also recorded: float32 accuracy against a float64 reference, the machine's
GEMM GFLOP/s, and the peak extra memory of an n = 20,000 Gaussian kernel matrix
(numba engine) measured in a fresh subprocess per dtype.

Goals: numba Gaussian >= 2x faster than ``rbf_kernel``
(float64 and float32, float32 keeping 1e-6 relative accuracy); numba NTK depth 3
>= 4x faster than the layer-by-layer NumPy NTK; the n = 20,000 kernel matrix
built with peak memory under 1.3x the size of its output.

Parts (``--parts``, default all): ``t`` the table above (n = 4000, d = 50) with the
GEMM rates and the accuracy table; ``m`` the memory case; ``g`` the Gaussian grid:
numba ``RBF(gamma)(X)`` vs ``rbf_kernel`` over n in {1000, 4000, 20000} x d in
{10, 50, 784} x float32 / float64 (gamma = 1/d), the two called alternately
(with NumPy's ``X @ X.T`` on the float64 data as a third), median of 7 rounds
(5 at n = 20,000, where the smaller sizes have warmed everything up and no warm-up
call is made), goal >= 2x in every cell; the ``X @ X.T`` time gives the product's
share of kernelkit's time and the ceiling ``rbf_kernel / (X @ X.T)``: the ratio a
kernel matrix costing no more than its (exact, float64) product would reach; ``n`` the
NTK against neural-tangents' jitted ``kernel_fn`` (depth 2 and 3, relu, no bias,
n = 4000, d = 50, float64), run by its own interpreter (``--nt-python``, default
``$KERNELKIT_NT_PYTHON`` or ``/work/ntenv/bin/python``) in a long-lived worker
(``_ntk_worker.py``) so that single calls of the two sides alternate; goal >= 4x.

Usage::

    python benchmarks/bench_kernels.py           # full run; writes results_kernels.json
                                                 # and the section in RESULTS.md
    python benchmarks/bench_kernels.py --parts g # one part (the others kept from the JSON)
    python benchmarks/bench_kernels.py --quick   # small sizes, no 20k memory case,
                                                 # prints only (writes nothing)
"""

import argparse
import datetime
import gc
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")  # as the other benchmarks

import numpy as np  # noqa: E402
from _common import (  # noqa: E402 (benchmarks/ is on sys.path)
    MD_HEADER,
    fmt_met,
    git_state,
    machine_info,
    proc_status_kib,
    write_section,
)

HERE = Path(__file__).resolve().parent
JSON_PATH = HERE / "results_kernels.json"
MD_PATH = HERE / "RESULTS.md"
SECTION = "## Kernel matrices (bench_kernels.py)"

SEED = 0
D = 50
DEPTH = 3
N_FULL = 4000
N_QUICK = 1000
N_MEMORY = 20_000
REPEATS = 7
SLOW_REPEATS = 3  # numpy-engine NTK only (informational, several seconds a call)
GAUSS_SPEEDUP = 2.0
NTK_SPEEDUP = 4.0
F32_ACCURACY = 1e-6
MEMORY_RATIO = 1.3
PEER_RTOL = 1e-10


# --------------------------------------------------------------------------- peers
def numpy_ntk(X, depth=DEPTH):
    """Plain layer-by-layer NumPy NTK: relu, no bias, w_std = 1, NTK parameterization.

    Full n x n arrays per layer. Per layer: ``K <- w2 K + b2``, ``q <- w2 q + b2``,
    ``T <- K + w2 T`` (T starts at 0), then relu:
    ``K <- sqrt(q_i q_j) (sin th + (pi - th) cos th) / (2 pi)``,
    ``T <- T (pi - th) / (2 pi)``, ``q <- q / 2``. Readout: ``T <- K + T``.
    Works in the dtype of ``X``.
    """
    w2, b2 = 1.0, 0.0
    K = X @ X.T / X.shape[1]
    q = np.diag(K).copy()
    T = np.zeros_like(K)
    for _ in range(depth):
        K = w2 * K + b2
        q = w2 * q + b2
        T = K + w2 * T
        p = np.sqrt(np.outer(q, q))
        c = np.clip(K / p, -1, 1)
        th = np.arccos(c)
        K = p * (np.sin(th) + (np.pi - th) * c) / (2 * np.pi)
        T = T * (np.pi - th) / (2 * np.pi)
        q = q / 2
    return w2 * K + b2 + w2 * T


def ntk_diag_exact(X, depth=DEPTH):
    """Exact NTK diagonal for relu/no bias/w_std=1: ``(depth + 1) |x|^2 / (d 2^depth)``."""
    return (depth + 1) * np.einsum("ij,ij->i", X, X) / X.shape[1] / 2.0**depth


# ------------------------------------------------------------------------ helpers
def timeit(f, repeats, warmup=True):
    """A warm-up call, then ``repeats`` timed calls.

    Returns ``(stats, result)``: timings in seconds and the last call's result.
    """
    first = None
    if warmup:
        t0 = time.perf_counter()
        f()
        first = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        result = None
        gc.collect()
        t0 = time.perf_counter()
        result = f()
        times.append(time.perf_counter() - t0)
    return {"median_s": float(np.median(times)), "min_s": float(np.min(times)),
            "max_s": float(np.max(times)), "first_call_s": first, "repeats": repeats,
            "warmup": warmup, "times_s": times}, result


def max_rel_err(A, ref):
    A = np.asarray(A, dtype=np.float64)
    return float(np.max(np.abs(A - ref) / np.abs(ref)))


# ------------------------------------------------------------------------ parts
def bench_gemm(repeats):
    rng = np.random.default_rng(SEED)
    out = {}
    for dt in (np.float32, np.float64):
        name = np.dtype(dt).name
        A = rng.standard_normal((2000, 2000)).astype(dt)
        B = rng.standard_normal((2000, 2000)).astype(dt)
        t, _ = timeit(lambda A=A, B=B: A @ B, repeats)
        out[f"square_2000_{name}"] = {"shape": "2000x2000 @ 2000x2000", **t,
                                      "gflops": 2 * 2000**3 / t["median_s"] / 1e9}
        X = rng.standard_normal((N_FULL, D)).astype(dt)
        Y = np.ascontiguousarray(X.T.copy())  # distinct operand: a true GEMM, not SYRK
        t, _ = timeit(lambda X=X, Y=Y: X @ Y, repeats)
        out[f"thin_{N_FULL}x{D}_{name}"] = {
            "shape": f"{N_FULL}x{D} @ {D}x{N_FULL}", **t,
            "gflops": 2 * N_FULL * N_FULL * D / t["median_s"] / 1e9}
    return out


def bench_matrices(n, repeats):
    from sklearn.metrics.pairwise import rbf_kernel

    import kernelkit
    from kernelkit.kernels import NTK, RBF

    gamma = 1.0 / D
    X64 = np.random.default_rng(SEED).standard_normal((n, D))
    timings, accuracy, checks = {}, {}, {}

    # Peer check before any timing: the plain NumPy NTK against kernelkit (float64;
    # the numpy engine, several times slower, on the first 1000 rows only).
    m = min(n, 1000)
    for engine, rows in (("numba", n), ("numpy", m)):
        Xc = X64[:rows]
        P = numpy_ntk(Xc)
        with kernelkit.config_context(backend=engine):
            R = NTK(depth=DEPTH)(Xc)
        rel = np.abs(P - R) / np.abs(R)
        np.fill_diagonal(rel, 0.0)
        exact_diag = ntk_diag_exact(Xc)
        c = checks[f"ntk_peer_vs_{engine}_float64"] = {
            "rows": rows,
            "offdiag_max_rel": float(rel.max()),
            "kernelkit_diag_vs_exact_max_rel": max_rel_err(R.diagonal(), exact_diag),
            "peer_diag_vs_exact_max_rel": max_rel_err(P.diagonal(), exact_diag),
        }
        # Off the diagonal the two agree to rounding. On the diagonal the peer's
        # arccos(clip(K/p)) turns a 1-ulp error in c = 1 into th ~ 1e-8, i.e. a
        # ~1e-8 relative error, so both diagonals are checked against the exact
        # closed form instead (kernelkit to PEER_RTOL, the peer to 1e-7).
        assert c["offdiag_max_rel"] <= PEER_RTOL, c
        assert c["kernelkit_diag_vs_exact_max_rel"] <= PEER_RTOL, c
        assert c["peer_diag_vs_exact_max_rel"] <= 1e-7, c
        del P, R, rel

    last = {}
    for dt in (np.float64, np.float32):
        name = np.dtype(dt).name
        X = X64.astype(dt)
        timings[f"gauss_sklearn_{name}"], last[f"gauss_sklearn_{name}"] = timeit(
            lambda X=X: rbf_kernel(X, gamma=gamma), repeats)
        timings[f"ntk_peer_{name}"], last[f"ntk_peer_{name}"] = timeit(
            lambda X=X: numpy_ntk(X), repeats)
        for engine in ("numpy", "numba"):
            with kernelkit.config_context(backend=engine):
                timings[f"gauss_{engine}_{name}"], last[f"gauss_{engine}_{name}"] = timeit(
                    lambda X=X: RBF(gamma)(X), repeats)
                if engine == "numba":
                    stats = timeit(lambda X=X: NTK(depth=DEPTH)(X), repeats)
                else:  # pure NumPy, nothing to compile: no warm-up, fewer calls
                    stats = timeit(lambda X=X: NTK(depth=DEPTH)(X), SLOW_REPEATS, warmup=False)
                timings[f"ntk_{engine}_{name}"], last[f"ntk_{engine}_{name}"] = stats
        for k in [k for k in last if k.endswith("float64") and k != "gauss_sklearn_float64"]:
            del last[k]

    # Accuracy of the float32 results (the last timed calls) against float64
    # references on the same (float32-valued) data.
    X32_64 = X64.astype(np.float32).astype(np.float64)
    ref = rbf_kernel(X32_64, gamma=gamma)
    for who in ("sklearn", "numpy", "numba"):
        accuracy[f"gauss_float32_{who}"] = max_rel_err(last.pop(f"gauss_{who}_float32"), ref)
    del ref
    with kernelkit.config_context(backend="numba"):
        ref64 = RBF(gamma)(X64)
    accuracy["gauss_float64_numba_vs_sklearn"] = max_rel_err(ref64, last.pop(
        "gauss_sklearn_float64"))
    del ref64
    with kernelkit.config_context(backend="numba"):
        ref = NTK(depth=DEPTH)(X32_64)
    for who in ("numpy", "numba", "peer"):
        accuracy[f"ntk_float32_{who}"] = max_rel_err(last.pop(f"ntk_{who}_float32"), ref)
    return timings, accuracy, checks


def memory_case(dtype_name, n):
    """Run in a fresh subprocess: peak extra RSS of RBF(gamma)(X), numba engine."""
    import kernelkit
    from kernelkit.kernels import RBF

    dt = np.dtype(dtype_name)
    gamma = 1.0 / D
    X = np.random.default_rng(SEED).standard_normal((n, D)).astype(dt)
    with kernelkit.config_context(backend="numba"):
        RBF(gamma)(X[:256])  # compile and start the thread pool first
        gc.collect()
        # Reset the kernel's peak-RSS counter (VmHWM) so the peak is this call's alone.
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")
            hwm_reset = True
        except OSError:
            hwm_reset = False
        rss0 = proc_status_kib("VmRSS") * 1024
        maxrss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        t0 = time.perf_counter()
        K = RBF(gamma)(X)
        elapsed = time.perf_counter() - t0
        hwm1 = proc_status_kib("VmHWM") * 1024
        maxrss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert K.shape == (n, n) and K.dtype == dt
    out = K.nbytes
    peak_extra = (hwm1 - rss0) if hwm_reset else (maxrss1 - maxrss0)
    return {"n": n, "d": D, "dtype": dtype_name, "output_bytes": out, "time_s": elapsed,
            "method": "VmHWM after clear_refs reset - VmRSS before" if hwm_reset
            else "ru_maxrss delta",
            "peak_extra_bytes": peak_extra, "ratio": peak_extra / out,
            # Cross-check: ru_maxrss after the call minus VmRSS before it (valid because
            # the call's peak dominates; ru_maxrss itself is never reset and starts at
            # the parent's RSS at fork, so a plain before/after delta is not usable).
            "ru_maxrss_after_bytes": maxrss1, "ru_maxrss_before_bytes": maxrss0,
            "ru_maxrss_peak_extra_bytes": maxrss1 - rss0,
            "ru_maxrss_ratio": (maxrss1 - rss0) / out,
            "rss_before_bytes": rss0}


def bench_memory(n):
    out = {}
    for name in ("float64", "float32"):
        proc = subprocess.run([sys.executable, __file__, "--_memory-case", name, str(n)],
                              capture_output=True, text=True, check=True)
        out[f"gauss_numba_{name}"] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


GRID_N, GRID_D, GRID_REPEATS = (1000, 4000, 20_000), (10, 50, 784), {20_000: 5}
QUICK_GRID_N = (1000, 4000)
NT_N, NT_D, NT_DEPTHS = 4000, 50, (2, 3)
NT_PYTHON = os.environ.get("KERNELKIT_NT_PYTHON", "/work/ntenv/bin/python")


def alternate(calls, repeats, warmup=True):
    """One warm-up call each (unless ``warmup`` is False), then ``repeats`` rounds calling
    each once, the order rotated every round. ``calls``: name -> function returning its
    own seconds. Returns name -> timing stats (median, min, max, every time)."""
    names = list(calls)
    for name in names if warmup else ():
        calls[name]()
    times = {name: [] for name in names}
    for r in range(repeats):
        for name in names[r % len(names):] + names[: r % len(names)]:
            gc.collect()
            times[name].append(calls[name]())
    return {name: {"median_s": float(np.median(t)), "min_s": float(np.min(t)),
                   "max_s": float(np.max(t)), "repeats": repeats, "times_s": t}
            for name, t in times.items()}


def timed(f):
    """A call of ``f`` returning its seconds (its result dropped at once)."""
    def call():
        t0 = time.perf_counter()
        f()
        return time.perf_counter() - t0
    return call


def bench_grid(sizes, dims, repeats):
    """Part g: numba Gaussian vs ``rbf_kernel`` (and ``X @ X.T``), alternated per cell."""
    from sklearn.metrics.pairwise import rbf_kernel

    import kernelkit
    from kernelkit.kernels import RBF

    cells, gemm = [], None
    for n in sizes:
        for d in dims:
            X64 = np.random.default_rng(SEED).standard_normal((n, d))
            for dt in (np.float64, np.float32):
                X, gamma = X64.astype(dt), 1.0 / d
                calls = {"kernelkit": timed(lambda X=X: RBF(gamma)(X)),
                         "sklearn": timed(lambda X=X: rbf_kernel(X, gamma=gamma))}
                if dt == np.float64:  # the float32 cell reuses the same float64 product
                    calls["gemm"] = timed(lambda: X64 @ X64.T)
                with kernelkit.config_context(backend="numba"):
                    # the largest n: compiled and warmed by the smaller ones, no warm-up
                    t = alternate(calls, GRID_REPEATS.get(n, repeats), warmup=n not in GRID_REPEATS)
                if gemm is not None and "gemm" not in t:
                    t["gemm"] = gemm
                gemm = t["gemm"]
                kk, sk, gm = (t[k]["median_s"] for k in ("kernelkit", "sklearn", "gemm"))
                cell = {"n": n, "d": d, "dtype": np.dtype(dt).name, "timings": t,
                        "ratio": sk / kk, "gemm_share": gm / kk, "ceiling": sk / gm,
                        "met": sk / kk >= GAUSS_SPEEDUP}
                cells.append(cell)
                print(f"  n={n:>6} d={d:>4} {cell['dtype']}: kernelkit {kk:.4f} s, "
                      f"rbf_kernel {sk:.4f} s, {cell['ratio']:.2f}x (X @ X.T {gm:.4f} s, "
                      f"ceiling {cell['ceiling']:.2f}x)", flush=True)
    return {"cells": cells, "load_after": [round(x, 2) for x in os.getloadavg()]}


class NTWorker:
    """neural-tangents' NTK of ``X`` in its own interpreter (``_ntk_worker.py``)."""

    def __init__(self, python, X, depth, tmp):
        self.tmp = Path(tmp)
        np.savez(self.tmp / "X.npz", X=X)
        self.proc = subprocess.Popen(
            [python, str(HERE / "_ntk_worker.py"), str(self.tmp / "X.npz"), str(depth)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True)
        self._ask(None, "ready")

    def _ask(self, cmd, expect=None):
        if cmd is not None:
            self.proc.stdin.write(cmd + "\n")
            self.proc.stdin.flush()
        line = self.proc.stdout.readline().strip()
        if not line or (expect is not None and line != expect):
            raise RuntimeError(f"neural-tangents worker failed (answered {line!r})")
        return line

    def time(self):
        return float(self._ask("time"))

    def result(self):
        self._ask(f"save {self.tmp / 'K.npy'}", "saved")
        return np.load(self.tmp / "K.npy")

    def close(self):
        self.proc.communicate("quit\n", timeout=60)


def bench_nt(n, repeats, python):
    """Part n: numba NTK vs neural-tangents (jitted), float64, alternated single calls."""
    import tempfile

    import kernelkit
    from kernelkit.kernels import NTK

    X = np.random.default_rng(SEED).standard_normal((n, NT_D))
    out = {"n": n, "d": NT_D, "python": python, "rows": []}
    if not Path(python).exists():
        out["skipped"] = f"no neural-tangents interpreter at {python}"
        print("  " + out["skipped"])
        return out
    ver = subprocess.run([python, "-c", "import neural_tangents as nt, jax; "
                          "print(f'neural-tangents {nt.__version__}, JAX {jax.__version__}')"],
                         capture_output=True, text=True)
    out["versions"] = ver.stdout.strip().splitlines()[-1] if ver.stdout.strip() else "?"
    for depth in NT_DEPTHS:
        with tempfile.TemporaryDirectory() as tmp, kernelkit.config_context(backend="numba"):
            worker = NTWorker(python, X, depth, tmp)
            try:
                t = alternate({"kernelkit": timed(lambda: NTK(depth=depth)(X)),
                               "neural_tangents": worker.time}, repeats)
                P, R = worker.result(), NTK(depth=depth)(X)
            finally:
                worker.close()
        rel = np.abs(P - R) / np.abs(R)
        np.fill_diagonal(rel, 0.0)
        exact = ntk_diag_exact(X, depth)
        row = {"depth": depth, "timings": t, "offdiag_max_rel": float(rel.max()),
               "kernelkit_diag_vs_exact": max_rel_err(R.diagonal(), exact),
               "peer_diag_vs_exact": max_rel_err(P.diagonal(), exact)}
        assert row["offdiag_max_rel"] <= 1e-7 and row["kernelkit_diag_vs_exact"] <= PEER_RTOL, row
        row["ratio"] = t["neural_tangents"]["median_s"] / t["kernelkit"]["median_s"]
        row["met"] = row["ratio"] >= NTK_SPEEDUP
        out["rows"].append(row)
        print(f"  NTK depth {depth}, n={n}: kernelkit {t['kernelkit']['median_s']:.4f} s, "
              f"neural-tangents {t['neural_tangents']['median_s']:.4f} s, "
              f"{row['ratio']:.2f}x", flush=True)
    return out


def render_grid(g, nt):
    L = []
    if g:
        L += ["", "Gaussian kernel matrix over the grid (numba engine, `RBF(gamma)(X)`, "
              "gamma = 1/d, standard normal X): kernelkit, `rbf_kernel` and NumPy's "
              "`X @ X.T` (float64 data, timed with the float64 cell) called alternately, one "
              "warm-up each (none at n = 20,000), median of "
              f"{g['cells'][0]['timings']['kernelkit']['repeats']} rounds"
              + "".join(f" (n = {k:,}: {v})" for k, v in GRID_REPEATS.items()
                        if any(c["n"] == k for c in g["cells"]))
              + ". GEMM share = `X @ X.T` / kernelkit; ceiling = "
              "`rbf_kernel` / `X @ X.T`, the ratio of a kernel matrix that cost no more "
              "than its exact float64 product (the float32 paths also multiply in float64 "
              "to keep their accuracy). kernelkit's `k(X, X)` multiplies only the lower "
              "triangle's row blocks (the diagonal squares by SYRK, as NumPy's `X @ X.T`), so "
              "where the product is most of the time (d = 784) the ratio stays near the "
              "ceiling.", "",
              "| n | d | dtype | kernelkit (s) | `rbf_kernel` (s) | ratio | `X @ X.T` (s) | "
              "GEMM share | ceiling | goal | met? |", "|---:|---:|---|---:|---:|---:|---:|"
              "---:|---:|---|---|"]
        for c in g["cells"]:
            t = c["timings"]
            L.append(f"| {c['n']:,} | {c['d']} | {c['dtype']} | {t['kernelkit']['median_s']:.4f}"
                     f" | {t['sklearn']['median_s']:.4f} | {c['ratio']:.2f}x | "
                     f"{t['gemm']['median_s']:.4f} | {c['gemm_share']:.0%} | "
                     f"{c['ceiling']:.2f}x | >= {GAUSS_SPEEDUP:g}x | {fmt_met(c['met'])} |")
    if nt and nt.get("rows"):
        L += ["", f"NTK against neural-tangents ({nt.get('versions', '')}, CPU): its `stax` "
              "network (Dense, Relu) x depth + Dense, NTK parameterization, "
              f"no bias, jitted `kernel_fn(X, None, 'ntk')`; n = {nt['n']:,}, d = {nt['d']}, "
              "float64; the two called alternately (neural-tangents in its own interpreter, "
              f"compiled first), median of {nt['rows'][0]['timings']['kernelkit']['repeats']}.",
              "", "| depth | kernelkit (s) | neural-tangents (s) | ratio | off-diagonal max rel. "
              "difference | goal | met? |", "|---:|---:|---:|---:|---:|---|---|"]
        for r in nt["rows"]:
            t = r["timings"]
            L.append(f"| {r['depth']} | {t['kernelkit']['median_s']:.4f} | "
                     f"{t['neural_tangents']['median_s']:.4f} | {r['ratio']:.2f}x | "
                     f"{r['offdiag_max_rel']:.1e} | >= {NTK_SPEEDUP:g}x | {fmt_met(r['met'])} |")
    elif nt:
        L += ["", f"NTK against neural-tangents: not run ({nt.get('skipped')})."]
    return L


# ------------------------------------------------------------------------ report
def processor_summary(res):
    """What a run on one processor keeps once another processor's run replaces its tables:
    the Gaussian grid's verdicts and ratios, the NTK ratios to neural-tangents."""
    cells = (res.get("part_g") or {}).get("cells", [])
    ratios = [c["ratio"] for c in cells]
    return {"cpu_model": res["machine"]["cpu_model"], "timestamp": res["timestamp"],
            "commit": (res["git"].get("commit") or "")[:10],
            "coretype": res["machine"]["env"].get("OPENBLAS_CORETYPE") or "unset",
            "grid_met": sum(bool(c["met"]) for c in cells), "grid_cells": len(cells),
            "grid_ratio_range": [min(ratios), max(ratios)] if ratios else None,
            "ntk": {str(r["depth"]): r["ratio"]
                    for r in (res.get("part_n") or {}).get("rows", [])}}


def render_others(others):
    if not others:
        return []
    L = ["", "Earlier runs on other processors (each processor's last run, as summarised "
         "when a run on another processor replaced the tables above):", "",
         "| processor | run (commit) | OpenBLAS core type | Gaussian grid cells >= 2x | "
         "grid ratios | NTK / neural-tangents (depth 2, 3) |", "|---|---|---|---|---|---|"]
    for o in others:
        r = o["grid_ratio_range"]
        ntk = ", ".join(f"{o['ntk'][k]:.2f}x" for k in sorted(o["ntk"])) or "—"
        L.append(f"| {o['cpu_model']} | {o['timestamp'][:10]} ({o['commit']}) | {o['coretype']}"
                 f" | {o['grid_met']} of {o['grid_cells']} | "
                 f"{'—' if r is None else f'{r[0]:.2f}-{r[1]:.2f}x'} | {ntk} |")
    return L


def build_rows(t, acc):
    rows = []
    for name in ("float64", "float32"):
        kk, peer = t[f"gauss_numba_{name}"]["median_s"], t[f"gauss_sklearn_{name}"]["median_s"]
        ratio = peer / kk
        met = ratio >= GAUSS_SPEEDUP
        target = f">= {GAUSS_SPEEDUP:g}x"
        if name == "float32":
            met = met and acc["gauss_float32_numba"] <= F32_ACCURACY
            target += f", rel. err <= {F32_ACCURACY:g}"
        rows.append((f"Gaussian {name}: numba vs `rbf_kernel`", kk, peer, ratio, target, met))
    for name in ("float64", "float32"):
        kk, peer = t[f"ntk_numba_{name}"]["median_s"], t[f"ntk_peer_{name}"]["median_s"]
        rows.append((f"NTK depth {DEPTH} {name}: numba vs layer-by-layer NumPy", kk, peer,
                     peer / kk, f">= {NTK_SPEEDUP:g}x", peer / kk >= NTK_SPEEDUP))
    for name in ("float64", "float32"):
        kk, peer = t[f"gauss_numpy_{name}"]["median_s"], t[f"gauss_sklearn_{name}"]["median_s"]
        rows.append((f"Gaussian {name}: numpy engine vs `rbf_kernel`", kk, peer, peer / kk,
                     "—", None))
    for name in ("float64", "float32"):
        kk, peer = t[f"ntk_numpy_{name}"]["median_s"], t[f"ntk_peer_{name}"]["median_s"]
        rows.append((f"NTK depth {DEPTH} {name}: numpy engine vs layer-by-layer NumPy", kk,
                     peer, peer / kk, "—", None))
    return rows



def render_markdown(res):
    info = res["machine"]
    blas = ", ".join(f"{b.get('internal_api')} {b.get('version')} ({b.get('architecture')}, "
                     f"{b.get('num_threads')} threads)" for b in info["blas"]
                     if b.get("user_api") == "blas")
    v = info["versions"]
    g = res["git"]
    commit = (f"commit {g['commit'][:10]}" + (" + uncommitted changes in kernelkit/"
                                              if g["kernelkit_dirty"] else "")
              if g["commit"] else "unknown commit")
    lines = [SECTION, "",
             f"Run {res['timestamp']} ({commit}) on {info['cpu_model']}, "
             f"{info['cpu_count']} cores, "
             f"{info['memory_gib']:.0f} GiB; numpy {v['numpy']}, scipy {v['scipy']}, "
             f"scikit-learn {v['scikit-learn']}, numba {v['numba']}; BLAS: {blas}; "
             f"OPENBLAS_CORETYPE={info['env']['OPENBLAS_CORETYPE'] or 'unset'}. "
             f"Load average before/after: {res['loadavg_before']} / {res['loadavg_after']}.",
             ""]
    if not res.get("part_t"):  # parts run on their own
        lines += render_grid(res.get("part_g"), res.get("part_n"))
        lines += render_others(res.get("other_processors"))
        return "\n".join(lines + ["", "Raw numbers: `benchmarks/results_kernels.json`.", ""])
    pt = res["part_t"]
    n = pt["n"]
    busy = max(res["loadavg_before"][0], res["loadavg_after"][0]) > 0.5 * info["cpu_count"] + 1
    if busy:
        lines += ["**Note:** other processes were running on the machine during this run "
                  "(see the load average), so the timings are noisy; per-call times are in "
                  "the JSON file.", ""]
    lines += [f"Data: standard normal X (seed {SEED}), n = {n}, d = {D}, gamma = 1/d; "
             f"NTK depth {DEPTH} (relu, no bias). Median of {REPEATS} calls after a warm-up "
             f"call (numpy-engine NTK: median of {SLOW_REPEATS} calls, no warm-up); "
             "ratio = peer / kernelkit.",
             "",
             "| case | kernelkit median (s) | peer median (s) | ratio | goal | met? |",
             "|---|---:|---:|---:|---|---|"]
    for case, kk, peer, ratio, target, met in (tuple(r.values()) if isinstance(r, dict) else r
                                              for r in pt["rows"]):  # dicts: from the JSON
        lines.append(f"| {case} | {kk:.4f} | {peer:.4f} | {ratio:.2f}x | {target} | "
                     f"{fmt_met(met)} |")
    lines += render_grid(res.get("part_g"), res.get("part_n"))
    mem = res.get("part_m")
    if mem:
        lines += ["", f"Peak memory, n = {N_MEMORY:,}, d = {D}, Gaussian, numba engine "
                  "(fresh subprocess per case; peak extra RSS during the call, from VmHWM "
                  "reset via /proc/self/clear_refs, over the output's size; cross-check: "
                  "ru_maxrss after minus VmRSS before):", "",
                  "| case | output (GiB) | peak extra (GiB) | ratio | ru_maxrss check | "
                  "time (s) | goal | met? |",
                  "|---|---:|---:|---:|---:|---:|---|---|"]
        for m in mem.values():
            lines.append(f"| {m['dtype']} | {m['output_bytes'] / 2**30:.3f} | "
                         f"{m['peak_extra_bytes'] / 2**30:.3f} | {m['ratio']:.3f} | "
                         f"{m['ru_maxrss_ratio']:.3f} | "
                         f"{m['time_s']:.2f} | < {MEMORY_RATIO:g}x | "
                         f"{fmt_met(m['ratio'] < MEMORY_RATIO)} |")
    a = pt["accuracy"]
    lines += ["", "Accuracy, max over entries of |K - K_ref| / K_ref (float32 data; reference = "
              "the float64 result on the same float32-valued data: `rbf_kernel` for the "
              "Gaussian, kernelkit numba float64 for the NTK):", "",
              "| result | max rel. error |", "|---|---:|",
              f"| Gaussian float32, numba | {a['gauss_float32_numba']:.2e} |",
              f"| Gaussian float32, numpy engine | {a['gauss_float32_numpy']:.2e} |",
              f"| Gaussian float32, `rbf_kernel` | {a['gauss_float32_sklearn']:.2e} |",
              f"| Gaussian float64, numba vs `rbf_kernel` float64 | "
              f"{a['gauss_float64_numba_vs_sklearn']:.2e} |",
              f"| NTK float32, numba | {a['ntk_float32_numba']:.2e} |",
              f"| NTK float32, numpy engine | {a['ntk_float32_numpy']:.2e} |",
              f"| NTK float32, layer-by-layer NumPy | {a['ntk_float32_peer']:.2e} |"]
    c = pt["checks"]["ntk_peer_vs_numba_float64"]
    lines += ["", f"Peer check (float64, asserted before timing): layer-by-layer NumPy NTK vs "
              f"kernelkit numba, off-diagonal max rel. difference {c['offdiag_max_rel']:.1e}; "
              f"on the diagonal the peer is off the exact value (depth+1)|x|^2/(d 2^depth) by "
              f"{c['peer_diag_vs_exact_max_rel']:.1e} (arccos of a rounded 1), kernelkit by "
              f"{c['kernelkit_diag_vs_exact_max_rel']:.1e}."]
    g = pt["gemm"]
    lines += ["", "Machine GEMM (NumPy `@`, median):", "",
              "| product | float32 GFLOP/s | float64 GFLOP/s |", "|---|---:|---:|",
              f"| 2000x2000 @ 2000x2000 | {g['square_2000_float32']['gflops']:.1f} | "
              f"{g['square_2000_float64']['gflops']:.1f} |",
              f"| {N_FULL}x{D} @ {D}x{N_FULL} | {g[f'thin_{N_FULL}x{D}_float32']['gflops']:.1f} | "
              f"{g[f'thin_{N_FULL}x{D}_float64']['gflops']:.1f} |"]
    lines += render_others(res.get("other_processors"))
    lines += ["", "Raw numbers: `benchmarks/results_kernels.json`.", ""]
    return "\n".join(lines)


def print_table(res):
    pt = res.get("part_t")
    if pt:
        print(f"\nn = {pt['n']}, d = {D}; median of {REPEATS} after a warm-up "
              f"(numpy-engine NTK: {SLOW_REPEATS}, no warm-up)")
        w = max(len(r[0]) for r in pt["rows"])
        print(f"{'case':<{w}}  {'kk (s)':>8}  {'peer (s)':>8}  {'ratio':>7}  {'target':<26} met")
        for case, kk, peer, ratio, target, met in pt["rows"]:
            print(f"{case:<{w}}  {kk:8.4f}  {peer:8.4f}  {ratio:6.2f}x  {target:<26} "
                  f"{fmt_met(met).strip('*')}")
        print("\naccuracy (max rel. error):")
        for k, v in pt["accuracy"].items():
            print(f"  {k:<36} {v:.2e}")
        for k, g in pt["gemm"].items():
            print(f"GEMM {k:<24} {g['gflops']:7.1f} GFLOP/s")
    for m in (res.get("part_m") or {}).values():
        print(f"memory n={m['n']} {m['dtype']}: output {m['output_bytes'] / 2**30:.3f} GiB, "
              f"peak extra {m['peak_extra_bytes'] / 2**30:.3f} GiB, ratio {m['ratio']:.3f} "
              f"(ru_maxrss cross-check {m['ru_maxrss_ratio']:.3f}), {m['time_s']:.2f} s")
    grid = render_grid(res.get("part_g"), res.get("part_n"))
    if grid:
        print("\n".join(grid))


def part_t(args):
    gemm = bench_gemm(REPEATS)
    n = 200 if args.smoke else N_QUICK if args.quick else N_FULL
    timings, accuracy, checks = bench_matrices(n, REPEATS)
    return {"n": n, "gemm": gemm, "timings": timings, "accuracy": accuracy, "checks": checks,
            "rows": build_rows(timings, accuracy)}


def part_g(args):
    if args.smoke:
        return bench_grid((200,), (10, 50), 1)
    return bench_grid(QUICK_GRID_N if args.quick else GRID_N, GRID_D, 3 if args.quick else 7)


def part_n(args):
    return bench_nt(1000 if args.smoke else 2000 if args.quick else NT_N,
                    1 if args.smoke else 3 if args.quick else 7, args.nt_python)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="small sizes, skip the n = 20,000 memory case, write no files")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes, one repeat, write no files (exercised by the tests)")
    parser.add_argument("--parts", default="t,m,g,n",
                        help="comma-separated parts: t (n = 4000 table), m (memory), "
                             "g (Gaussian grid), n (NTK vs neural-tangents)")
    parser.add_argument("--nt-python", default=NT_PYTHON,
                        help="interpreter with neural-tangents (part n)")
    parser.add_argument("--_memory-case", nargs=2, metavar=("DTYPE", "N"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._memory_case:
        print(json.dumps(memory_case(args._memory_case[0], int(args._memory_case[1]))))
        return

    global REPEATS, SLOW_REPEATS
    if args.smoke:
        args.quick, REPEATS, SLOW_REPEATS = True, 1, 1
        args.parts = "t,g"
    t_start = time.perf_counter()
    res = {"timestamp": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
           "quick": args.quick, "d": D, "depth": DEPTH, "seed": SEED, "gamma": 1.0 / D,
           "repeats": REPEATS, "slow_repeats": SLOW_REPEATS,
           "loadavg_before": [round(x, 2) for x in os.getloadavg()],
           "git": git_state(), "machine": machine_info()}
    if JSON_PATH.exists() and not args.quick:  # keep parts not rerun on this processor
        old = json.loads(JSON_PATH.read_text())
        others = {o["cpu_model"]: o for o in old.get("other_processors", [])}
        if old["machine"]["cpu_model"] == res["machine"]["cpu_model"]:
            res.update({k: v for k, v in old.items() if k.startswith("part_")})
        else:  # another processor's tables: keep their summary, not their parts
            others[old["machine"]["cpu_model"]] = processor_summary(old)
        others.pop(res["machine"]["cpu_model"], None)
        res["other_processors"] = list(others.values())
        if res.get("part_t"):  # the JSON holds the table's rows as dicts: back to tuples
            res["part_t"] = dict(res["part_t"], rows=[
                tuple(r.values()) if isinstance(r, dict) else tuple(r)
                for r in res["part_t"]["rows"]])
    # Memory subprocesses first, while this process is small (a child's ru_maxrss
    # starts at the parent's RSS at fork).
    parts = {"m": lambda a: None if a.quick else bench_memory(N_MEMORY), "t": part_t,
             "g": part_g, "n": part_n}
    for p in sorted(args.parts.split(","), key="mtgn".index):
        print(f"part ({p})", flush=True)
        res[f"part_{p}"] = parts[p](args)
    res["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    res["targets"] = {
        "gauss_speedup": GAUSS_SPEEDUP, "ntk_speedup": NTK_SPEEDUP,
        "float32_accuracy": F32_ACCURACY, "memory_ratio": MEMORY_RATIO}
    res["wall_s"] = time.perf_counter() - t_start
    print_table(res)
    print(f"\ntotal wall time {res['wall_s']:.1f} s")
    if args.quick:
        return
    out = dict(res)
    if res.get("part_t"):
        out["part_t"] = dict(res["part_t"], rows=[
            dict(zip(("case", "kernelkit_median_s", "peer_median_s", "ratio", "target", "met"),
                     r, strict=True)) for r in res["part_t"]["rows"]])
    JSON_PATH.write_text(json.dumps(out, indent=2) + "\n")
    write_section(MD_PATH, SECTION, MD_HEADER, render_markdown(res))
    print(f"wrote {JSON_PATH.relative_to(HERE.parent)} and {MD_PATH.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
