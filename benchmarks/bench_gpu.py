"""Benchmark: the CuPy engine on one GPU, against cuBLAS, PyTorch and the 2-core CPU engine.

One prepared run (under 5 minutes on an H200) that writes the ``GPU`` section of
``RESULTS.md`` (device name, CUDA and CuPy versions) and ``results_gpu.json``:

(a) **Ceiling**: the device's own cuBLAS GEMM throughput (CuPy ``@``; float32 and
    float64, 8192^3, and the kernel's shape n x 784 @ 784 x n), measured in this run.
(b) **Kernel matrices and fused products**: Gaussian (gamma = 1/d) and NTK depth 3
    (relu, no bias) on standard normal X, d = 784, n = 10^4, 3 x 10^4, 10^5, float32
    and float64: ``kernel(X)`` (the whole n x n matrix, on the device) and
    ``k(X, X) @ W`` (W of 10 columns; blockwise, never the whole matrix). Effective
    throughput counts ``2 n^2 d`` flops per kernel matrix. Peer: plain PyTorch
    (``torch.cdist`` + ``exp``; the NTK recursion layer by layer on whole n x n arrays),
    if torch is importable; an out-of-memory error is recorded, not fatal. CPU: the
    numba engine on 2 pinned cores of the same host, measured in a subprocess at
    n = 10^4 during the GPU run and scaled by ``(n / 10^4)^2`` above it (marked ~).
(c) **Solvers on all 60,000 Fashion-MNIST images** (gamma = 0.02, test: the 10,000
    test images), each in a subprocess with a time limit: EigenPro 2
    (``EigenProClassifier``, 2 epochs, automatic parameters), FALKON
    (``FalkonClassifier``) and exact kernel ridge by PCG (``KernelRidgeClassifier(
    solver="pcg")``) where they exist in this checkout (else "not available"); and
    Compress++ (g = 4) at n = 4^10, d = 2. CPU figures for these come from the CPU
    runs' JSON files (the 2-core machine's ``bench_eigenpro.py`` / ``bench_thinning.py``).

Goals: Gaussian products >= 50% of the float32 GEMM throughput and
>= 2x the PyTorch peer; NTK depth 3 at n = 10^5 without running out of memory;
EigenPro 2 and FALKON in <= 10 s at the CPU runs' accuracy.

Running it on the device (its image has CuPy, PyTorch, NumPy, SciPy, scikit-learn,
Numba; nothing is installed)::

    python benchmarks/gpu_data.py         # here, once: benchmarks/data/fashion_mnist.npz
    # on the device, carry=["benchmarks/data/fashion_mnist.npz"], one command (the check,
    # the GPU tests, then this script; about 7 minutes in all):
    export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
    python3 benchmarks/bench_gpu.py --check 2>&1 | tee $OUT/gpu_check.log   # about a minute
    python3 -m pytest -q -p no:cacheprovider -m "gpu or not slow" tests/test_array_api.py \
        tests/test_backends.py 2>&1 | tee $OUT/gpu_tests.log
    python3 benchmarks/bench_gpu.py 2>&1 | tee $OUT/bench_gpu.log
    cp benchmarks/RESULTS.md benchmarks/results_gpu.json $OUT/

Other modes::

    python benchmarks/bench_gpu.py --quick     # n = 10^4 only, no solvers, prints only
    python benchmarks/bench_gpu.py --dry-run   # the whole script's logic on tiny sizes on
                                               # the CPU (numba engine standing in for the
                                               # GPU): no CuPy needed, prints only unless
                                               # --md / --json name files

    python benchmarks/bench_gpu.py --check     # every CUDA kernel and every estimator once
                                               # on CuPy input against NumPy: a pass / fail
                                               # table (about a minute); exit status 1 if a
                                               # check fails
    python benchmarks/bench_gpu.py --check --xp array_api_strict   # the same table with a
                                               # host namespace in place of CuPy (no GPU)

Without CuPy or a usable GPU (and not ``--dry-run`` or ``--xp`` a host namespace) it exits
with status 2 and says why.
"""

import argparse
import datetime
import gc
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from _common import MD_HEADER, fmt_met, git_state, machine_info, write_section

HERE = Path(__file__).resolve().parent
JSON_PATH = HERE / "results_gpu.json"
MD_PATH = HERE / "RESULTS.md"
SECTION = "## GPU (bench_gpu.py)"
SEED = 0
DEPTH = 3
N_COLS_W = 10
WORKING_MEMORY = 2048  # MiB per row block on the device
PLANS = {
    "full": {"sizes": (10_000, 30_000, 100_000), "d": 784, "repeats": 3, "cpu_n": 10_000,
             "gemm_n": 8192, "fmnist": None, "cpp_log4": 10, "timeout": 45, "solvers": True},
    "quick": {"sizes": (10_000,), "d": 784, "repeats": 3, "cpu_n": 10_000, "gemm_n": 4096,
              "fmnist": None, "cpp_log4": 10, "timeout": 50, "solvers": False},
    "dry": {"sizes": (200, 400), "d": 20, "repeats": 1, "cpu_n": 200, "gemm_n": 128,
            "fmnist": 500, "cpp_log4": 5, "timeout": 300, "solvers": True},
}
TARGETS = {"gemm_fraction": 0.5, "torch_ratio": 2.0, "solver_s": 10.0, "accuracy_slack": 0.005}


# ------------------------------------------------------------------------- device
class Device:
    """The array namespace, engine name, synchronisation and memory of the run."""

    def __init__(self, dry):
        self.dry = dry
        if dry:
            self.xp, self.backend = np, "numba"
        else:
            import cupy

            self.xp, self.backend = cupy, "cupy"

    def sync(self):
        if not self.dry:
            self.xp.cuda.get_current_stream().synchronize()

    def release(self):
        """Hand cached blocks back to the driver (before a peer or a large case)."""
        gc.collect()
        if not self.dry:
            self.xp.get_default_memory_pool().free_all_blocks()
        torch = _torch()
        if torch is not None and torch.cuda.is_available():
            torch.cuda.empty_cache()

    def held_gib(self):
        """Bytes CuPy's pool holds: its high-water mark since the last :meth:`release`."""
        return None if self.dry else self.xp.get_default_memory_pool().total_bytes() / 2**30

    def info(self):
        if self.dry:
            return {"name": "CPU (dry run: numba engine stands in for the GPU)", "dry_run": True}
        cp = self.xp
        props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
        name = props["name"]
        return {"name": name.decode() if isinstance(name, bytes) else str(name),
                "memory_gib": props["totalGlobalMem"] / 2**30,
                "compute_capability": f"{props['major']}.{props['minor']}",
                "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(),
                "cuda_driver": cp.cuda.runtime.driverGetVersion(),
                "cupy": cp.__version__, "dry_run": False,
                "tf32": os.environ.get("CUPY_TF32", "0")}


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def timed(dev, f, repeats):
    """Median wall time of ``repeats`` synchronised calls (the result dropped in between)."""
    times = []
    for _ in range(repeats):
        dev.sync()
        t0 = time.perf_counter()
        r = f()
        dev.sync()
        times.append(time.perf_counter() - t0)
        del r
    return float(np.median(times)), times


def is_oom(exc):
    return isinstance(exc, MemoryError) or "out of memory" in str(exc).lower()


# ---------------------------------------------------------------------- (a) GEMM
def bench_gemm(dev, plan):
    xp, n, d = dev.xp, plan["gemm_n"], plan["d"]
    rng = xp.random.default_rng(SEED)
    out = {}
    for dt in ("float32", "float64"):
        for shape in ((n, n, n), (plan["sizes"][0], d, plan["sizes"][0])):
            a = rng.standard_normal(shape[:2]).astype(dt)
            b = rng.standard_normal(shape[1:]).astype(dt)
            a @ b
            t, _ = timed(dev, lambda a=a, b=b: a @ b, max(3, plan["repeats"]))
            out[f"{dt} {shape[0]}x{shape[1]} @ {shape[1]}x{shape[2]}"] = {
                "dtype": dt, "shape": list(shape), "s": t,
                "tflops": 2 * math.prod(shape) / t / 1e12}
            del a, b
    dev.release()
    return out


# ------------------------------------------------------- (b) kernels: peers and CPU
def torch_gauss(X, gamma):
    D = _torch().cdist(X, X, compute_mode="use_mm_for_euclid_dist")
    return D.square_().mul_(-gamma).exp_()


def torch_ntk(X, depth=DEPTH):
    """Layer by layer on whole n x n arrays (relu, no bias, w_std = 1, NTK parameterization)."""
    torch = _torch()
    K = X @ X.T / X.shape[1]
    q = torch.diagonal(K).clone()
    T = torch.zeros_like(K)
    for _ in range(depth):
        T += K
        p = torch.sqrt(torch.outer(q, q))
        c = (K / p).clamp_(-1, 1)
        th = torch.acos(c)
        K = p * (torch.sin(th) + (math.pi - th) * c) / (2 * math.pi)
        T *= (math.pi - th) / (2 * math.pi)
        q = q / 2
    return K + T


def kernels():
    from kernelkit.kernels import NTK, RBF

    return {"gaussian": lambda d: RBF(gamma=1.0 / d), f"ntk{DEPTH}": lambda d: NTK(depth=DEPTH)}


def cpu_case(n, d, repeats):
    """In a subprocess pinned to 2 cores: the numba engine's times at one size."""
    from kernelkit.backend import get_backend

    eng = get_backend("numba")
    rng = np.random.default_rng(SEED)
    out = {}
    for name, make in kernels().items():
        spec = make(d).spec(d)
        eng.pairwise(spec, rng.standard_normal((50, d)))  # compile
        for dt in ("float32", "float64"):
            X = rng.standard_normal((n, d)).astype(dt)
            W = rng.standard_normal((n, N_COLS_W))
            for op, f in (("matrix", lambda X=X, s=spec: eng.pairwise(s, X)),
                          ("product", lambda X=X, W=W, s=spec: eng.matmul(s, X, X, W))):
                out[f"{name} {op} {dt}"] = timed(Device(dry=True), f, repeats)[0]
    return {"n": n, "d": d, "cores": sorted(os.sched_getaffinity(0)), "times": out}


def start_cpu_reference(plan, cores):
    env = dict(os.environ, NUMBA_NUM_THREADS="2", OMP_NUM_THREADS="2",
               OPENBLAS_NUM_THREADS="2", MKL_NUM_THREADS="2")
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), env.get("PYTHONPATH", "")])
    return subprocess.Popen(
        [sys.executable, __file__, "--_cpu", str(plan["cpu_n"]), str(plan["d"]),
         ",".join(map(str, cores))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def bench_kernels(dev, plan):
    xp, d, repeats = dev.xp, plan["d"], plan["repeats"]
    torch = _torch()
    use_torch = torch is not None and (dev.dry or torch.cuda.is_available())
    tdev = "cpu" if dev.dry else "cuda"
    rows = []
    with kernelkit.config_context(working_memory=WORKING_MEMORY):
        for name, make in kernels().items():
            kern = make(d)
            for dt in ("float32", "float64"):
                warm = xp.asarray(np.random.default_rng(1).standard_normal((64, d)), dtype=dt)
                kern(warm)  # compile the element-wise kernels once
                for n in plan["sizes"]:
                    X = xp.random.default_rng(SEED).standard_normal((n, d)).astype(dt)
                    W = xp.random.default_rng(SEED + 1).standard_normal((n, N_COLS_W))
                    eng = kernelkit.backend.get_backend(dev.backend)
                    spec = kern.spec(d)
                    for op in ("matrix", "product"):
                        row = {"kernel": name, "op": op, "n": n, "d": d, "dtype": dt}
                        f = ((lambda k=kern, X=X: k(X)) if op == "matrix"
                             else (lambda e=eng, s=spec, X=X, W=W: e.matmul(s, X, X, W)))
                        dev.release()
                        try:
                            row["s"], row["times"] = timed(dev, f, 2 if n >= 50_000 else repeats)
                            row["held_gib"] = dev.held_gib()
                        except Exception as exc:  # noqa: BLE001 (recorded, not fatal)
                            row["error"] = ("OOM: " if is_oom(exc) else "") + str(exc)[:300]
                        dev.release()
                        if use_torch:
                            row.update(torch_peer(dev, torch, tdev, name, op, X, W, repeats))
                        rows.append(row)
                        print(_row_line(row), flush=True)
                    del X, W
                    dev.release()
    return rows


def torch_peer(dev, torch, tdev, name, op, X, W, repeats):
    out = {}
    try:
        Xt = torch.as_tensor(np.asarray(X) if dev.dry else X, device=tdev)
        Wt = torch.as_tensor(np.asarray(W) if dev.dry else W, device=tdev).to(Xt.dtype)
        if name == "gaussian":
            g = 1.0 / X.shape[1]
            f = (lambda: torch_gauss(Xt, g)) if op == "matrix" else (
                lambda: torch_gauss(Xt, g) @ Wt)
        else:
            f = (lambda: torch_ntk(Xt)) if op == "matrix" else (lambda: torch_ntk(Xt) @ Wt)
        f()
        if tdev == "cuda":
            torch.cuda.reset_peak_memory_stats()

        class _Sync:
            dry = tdev == "cpu"

            def sync(self):
                if tdev == "cuda":
                    torch.cuda.synchronize()

        out["torch_s"], _ = timed(_Sync(), f, 2 if X.shape[0] >= 50_000 else repeats)
        if tdev == "cuda":
            out["torch_peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    except Exception as exc:  # noqa: BLE001
        out["torch_error"] = ("OOM" if is_oom(exc) else str(exc)[:200])
    finally:
        Xt = Wt = f = None  # noqa: F841
        dev.release()
    return out


def _row_line(r):
    kk = f"{r['s']:.4f} s" if "s" in r else r.get("error", "")[:60]
    pt = f"{r['torch_s']:.4f} s" if "torch_s" in r else r.get("torch_error", "—")[:40]
    return f"  {r['kernel']:<9} {r['op']:<8} n={r['n']:<7} {r['dtype']}: kernelkit {kk}; torch {pt}"


# ---------------------------------------------------------------------- (c) solvers
def fmnist(plan):
    if plan["fmnist"] is not None:  # dry run: synthetic images with a learnable label
        rng = np.random.default_rng(SEED)
        n, t = plan["fmnist"], 500
        X = rng.random((n + t, 784), dtype=np.float32)
        y = (X[:, :392].mean(1) > X[:, 392:].mean(1)).astype(np.int64) + 2 * (X[:, 0] > 0.5)
        return X[:n], y[:n], X[n:], y[n:]
    from gpu_data import load

    return load()


def solver_case(name, plan_name):
    """In a subprocess: one fit on the GPU (or, dry, numba), its time and score."""
    plan = PLANS[plan_name]
    backend = "numba" if plan_name == "dry" else "cupy"
    out = {"case": name, "backend": backend}
    if name == "cpp":
        from kernelkit.metrics import mmd
        from kernelkit.thinning import kernel_thinning

        X = np.random.default_rng(SEED).standard_normal((4 ** plan["cpp_log4"], 2))
        kernel_thinning(X[:4096], compress="compress++", g=4, backend=backend, random_state=0)
        t0 = time.perf_counter()
        idx = kernel_thinning(X, gamma=0.125, compress="compress++", g=4, backend=backend,
                              random_state=SEED)
        out.update(fit_s=time.perf_counter() - t0, n=len(X), coreset=int(len(idx)),
                   score=mmd(X, X[idx], gamma=0.125, backend=backend), score_name="MMD")
        return out
    Xa, ya, Xt, yt = fmnist(plan)
    if name == "ep2":
        from kernelkit.eigenpro import EigenProClassifier

        est = EigenProClassifier(gamma=0.02, max_iter=2, tol=None, random_state=SEED,
                                 backend=backend)
    elif name == "falkon":
        try:
            from kernelkit.ridge import FalkonClassifier
        except ImportError:
            return {**out, "status": "not available (FalkonClassifier is not in this checkout)"}
        est = FalkonClassifier(n_centers=min(20_000, len(ya)), gamma=0.02, backend=backend,
                               random_state=SEED)
    else:
        from kernelkit.ridge import KernelRidgeClassifier

        if "solver" not in KernelRidgeClassifier().get_params():
            return {**out, "status": "not available (no solver='pcg' in this checkout)"}
        est = KernelRidgeClassifier(kernel="rbf", gamma=0.02, alpha=0.01, solver="pcg",
                                    backend=backend)
    t0 = time.perf_counter()
    est.fit(Xa, ya)
    out["fit_s"] = time.perf_counter() - t0
    out.update(n=len(ya), score=float(est.score(Xt, yt)), score_name="accuracy",
               params={k: repr(v) for k, v in est.get_params().items()})
    return out


def run_solver(name, plan_name, timeout):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), str(HERE), env.get("PYTHONPATH", "")])
    try:
        proc = subprocess.run([sys.executable, __file__, "--_case", name, plan_name],
                              capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"case": name, "status": f"timed out after {timeout} s"}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"case": name, "status": "failed: " + proc.stderr.strip()[-400:]}
    return json.loads(lines[-1])


def cpu_solver_reference():
    """CPU figures of the same tasks from the CPU benchmarks' JSON files (or None)."""
    ref = {}
    try:
        for c in json.loads((HERE / "results_eigenpro.json").read_text())["part_b"]:
            if c["case"] == "ep2":
                ref["ep2"] = {"fit_s": c["fit_s"], "score": c["score"],
                              "source": "results_eigenpro.json"}
    except (OSError, KeyError, ValueError):
        pass
    try:
        t = [x for x in json.loads((HERE / "results_thinning.json").read_text())["synthetic"]
             if x["case"] == "cpp" and x["log4_n"] == 10 and x["d"] == 2]
        if t:
            mmd_in = [v for v in t[0]["kk"].get("mmd_in", []) if v is not None]
            ref["cpp"] = {"fit_s": float(np.median(t[0]["kk"]["time"])),
                          "score": float(np.median(mmd_in)) if mmd_in else None,
                          "source": "results_thinning.json"}
    except (OSError, KeyError, ValueError):
        pass
    return ref


# ------------------------------------------------------------------------ report
def summarise(res):
    gemm32 = max((g["tflops"] for g in res["gemm"].values() if g["dtype"] == "float32"),
                 default=None)
    cpu = res.get("cpu") or {}
    for r in res["kernels"]:
        r["eff_tflops"] = 2 * r["n"] ** 2 * r["d"] / r["s"] / 1e12 if "s" in r else None
        r["gemm_fraction"] = r["eff_tflops"] / gemm32 if r["eff_tflops"] and gemm32 else None
        r["torch_ratio"] = r["torch_s"] / r["s"] if "s" in r and "torch_s" in r else None
        t = (cpu.get("times") or {}).get(f"{r['kernel']} {r['op']} {r['dtype']}")
        if t is not None:
            r["cpu_s"] = t * (r["n"] / cpu["n"]) ** 2
            r["cpu_extrapolated"] = r["n"] != cpu["n"]
            r["gpu_speedup"] = r["cpu_s"] / r["s"] if "s" in r else None
        if r["kernel"] == "gaussian" and r["op"] == "product":
            ratio = r["torch_ratio"]
            r["met"] = (None if r["gemm_fraction"] is None else
                        r["gemm_fraction"] >= TARGETS["gemm_fraction"]
                        and (ratio is None or ratio >= TARGETS["torch_ratio"]))
        elif r["kernel"].startswith("ntk") and r["n"] == max(res["plan"]["sizes"]):
            r["met"] = "s" in r  # computed without running out of memory
    for name, s in res.get("solvers", {}).items():
        ref = res["cpu_solvers"].get(name)
        if ref and "fit_s" in s:
            s["cpu"] = ref
            s["speedup"] = ref["fit_s"] / s["fit_s"]
        if name in ("ep2", "falkon") and "fit_s" in s:
            ok_acc = ref is None or s["score"] >= ref["score"] - TARGETS["accuracy_slack"]
            s["met"] = s["fit_s"] <= TARGETS["solver_s"] and ok_acc


def _f(x, fmt="{:.3f}", none="—"):
    return none if x is None else fmt.format(x)


def render_markdown(res):
    dv, info, g = res["device"], res["machine"], res["git"]
    commit = (g["commit"][:10] + (" + uncommitted changes" if g["kernelkit_dirty"] else "")
              if g["commit"] else "unknown commit")
    lines = [SECTION, ""]
    if dv.get("dry_run"):
        lines += ["**DRY RUN** (`--dry-run`): tiny sizes on the CPU with the numba engine standing "
                  "in for the GPU. These are not GPU figures.", ""]
    else:
        lines += [f"Run {res['timestamp']} ({commit}) on **{dv['name']}** "
                  f"({dv['memory_gib']:.0f} GiB, compute capability "
                  f"{dv['compute_capability']}), CUDA runtime {dv['cuda_runtime']}, driver "
                  f"{dv['cuda_driver']}, CuPy {dv['cupy']} (CUPY_TF32={dv['tf32']}), PyTorch "
                  f"{res.get('torch') or 'not installed'}; host "
                  f"{info['cpu_model']}, {info['cpu_count']} cores. Load average before/after: "
                  f"{res['loadavg_before'][0]:.2f} / {res['loadavg_after'][0]:.2f}.", ""]
    lines += ["cuBLAS GEMM (the ceiling, this run):", "", "| product | TFLOP/s |", "|---|---:|"]
    lines += [f"| {k} | {v['tflops']:.2f} |" for k, v in res["gemm"].items()]
    cpu = res.get("cpu") or {}
    lines += ["", f"Kernel matrices (`kernel(X)`, the whole n x n matrix on the device) and fused "
              f"products (`k(X, X) @ W`, W with {N_COLS_W} columns, blockwise), "
              f"d = {res['plan']['d']}; "
              f"median of {res['plan']['repeats']} calls (2 at n >= 50,000) after a warm-up; "
              f"effective TFLOP/s = 2 n^2 d / time; CPU = numba engine on 2 pinned cores of the "
              f"host at n = {cpu.get('n', '—')} (~: scaled by (n / {cpu.get('n', '—')})^2). "
              "Goals: Gaussian product >= 50% of float32 GEMM and >= 2x PyTorch; NTK at the "
              "largest n without running out of memory.", "",
              "| kernel | op | n | dtype | kernelkit (s) | eff. TFLOP/s | of f32 GEMM | "
              "pool (GiB) | PyTorch (s) | PyTorch / kernelkit | CPU 2-core (s) | GPU speed-up | "
              "met? |", "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in res["kernels"]:
        kk = _f(r.get("s"), "{:.4f}", none=f"**{r.get('error', 'failed')[:40]}**")
        pt = _f(r.get("torch_s"), "{:.4f}", none=r.get("torch_error", "—")[:40])
        cs = _f(r.get("cpu_s"), ("~{:.1f}" if r.get("cpu_extrapolated") else "{:.2f}"))
        lines.append(f"| {r['kernel']} | {r['op']} | {r['n']:,} | {r['dtype']} | {kk} | "
                     f"{_f(r.get('eff_tflops'), '{:.2f}')} | "
                     f"{_f(r.get('gemm_fraction'), '{:.0%}')} | "
                     f"{_f(r.get('held_gib'), '{:.1f}')} | {pt} | "
                     f"{_f(r.get('torch_ratio'), '{:.2f}x')} | {cs} | "
                     f"{_f(r.get('gpu_speedup'), '{:.0f}x')} | {fmt_met(r.get('met'))} |")
    if res.get("solvers"):
        lines += ["", "Solvers (each in a subprocess; time = `fit`, data moved from the host "
                  "included; CPU columns from the CPU runs' JSON files on the 2-core machine). "
                  "Goal: EigenPro 2 and FALKON <= 10 s at the CPU run's accuracy.", "",
                  "| task | n | GPU fit (s) | score | CPU fit (s) | CPU score | GPU speed-up "
                  "| met? |",
                  "|---|---:|---:|---:|---:|---:|---:|---|"]
        titles = {"ep2": "EigenPro 2, Fashion-MNIST", "falkon": "FALKON, Fashion-MNIST",
                  "pcg": "KernelRidge PCG, Fashion-MNIST", "cpp": "Compress++ g=4, d=2"}
        for name, s in res["solvers"].items():
            c = s.get("cpu") or {}
            score = (f"{s['score']:.4g} ({s['score_name']})" if "score" in s else "—")
            lines.append(f"| {titles[name]} | {_f(s.get('n'), '{:,}')} | "
                         f"{_f(s.get('fit_s'), '{:.2f}', none=s.get('status', '—'))} | {score} | "
                         f"{_f(c.get('fit_s'), '{:.1f}')} | {_f(c.get('score'), '{:.4g}')} | "
                         f"{_f(s.get('speedup'), '{:.1f}x')} | {fmt_met(s.get('met'))} |")
    lines += ["", f"Raw numbers: `benchmarks/{res['json_name']}`. Total wall time "
              f"{res['wall_s']:.0f} s.", ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------- main
def _pin(cores):
    try:
        os.sched_setaffinity(0, cores)
    except (OSError, AttributeError):  # not Linux, or a sandbox that refuses: unpinned
        pass


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="n = 10^4 only, no solvers, "
                        "write nothing")
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes on the CPU (numba "
                        "engine in place of the GPU); writes only the files --md/--json name")
    parser.add_argument("--md", type=Path, help="RESULTS.md path to write the section into")
    parser.add_argument("--json", type=Path, help="JSON results path")
    parser.add_argument("--check", action="store_true", help="run every CUDA kernel and "
                        "estimator once against NumPy; print a pass / fail table")
    parser.add_argument("--xp", default="cupy", choices=("cupy", "array_api_strict", "torch"),
                        help="--check's namespace (a host one runs it without a GPU)")
    parser.add_argument("--_cpu", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--_case", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    global kernelkit
    if args.check:  # SciPy reads SCIPY_ARRAY_API on import: sklearn's dispatch needs it
        os.environ.setdefault("SCIPY_ARRAY_API", "1")
        from gpu_check import main_check

        sys.exit(main_check(args.xp))
    if args._cpu:
        _pin({int(c) for c in args._cpu[2].split(",")})
        import kernelkit
        print(json.dumps(cpu_case(int(args._cpu[0]), int(args._cpu[1]), 1)))
        return
    if args._case:
        import kernelkit
        print(json.dumps(solver_case(*args._case)))
        return

    plan_name = "dry" if args.dry_run else "quick" if args.quick else "full"
    plan = PLANS[plan_name]
    import kernelkit
    from kernelkit.backend import resolve_backend

    if not args.dry_run:
        try:
            resolve_backend("cupy")
        except ValueError as exc:
            print(f"bench_gpu.py needs CuPy and a CUDA GPU: {exc}\n(use --dry-run to exercise "
                  "the script on the CPU)", file=sys.stderr)
            sys.exit(2)
        if plan["solvers"]:
            from gpu_data import DATA_PATH

            if not DATA_PATH.exists():
                print(f"{DATA_PATH} is missing: run `python benchmarks/gpu_data.py` where the "
                      "Fashion-MNIST package is installed and carry the file.", file=sys.stderr)
                sys.exit(2)
    t_start = time.perf_counter()
    dev = Device(args.dry_run)
    torch = _torch()
    res = {"timestamp": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
           "plan_name": plan_name, "plan": plan, "working_memory_mib": WORKING_MEMORY,
           "loadavg_before": list(os.getloadavg()), "git": git_state(),
           "machine": machine_info(peers=("cupy-cuda13x", "cupy-cuda12x", "torch")),
           "device": dev.info(), "torch": None if torch is None else torch.__version__,
           "json_name": (args.json or JSON_PATH).name}
    print(f"device: {res['device']['name']}", flush=True)
    cores = sorted(os.sched_getaffinity(0))
    cpu_cores = cores[-2:]
    if len(cores) > 4:  # keep the GPU driver's host threads off the CPU reference's cores
        _pin(set(cores[:-2]))
    cpu_proc = start_cpu_reference(plan, cpu_cores)
    res["gemm"] = bench_gemm(dev, plan)
    for k, v in res["gemm"].items():
        print(f"  GEMM {k}: {v['tflops']:.2f} TFLOP/s", flush=True)
    res["kernels"] = bench_kernels(dev, plan)
    if plan["solvers"]:
        res["solvers"] = {}
        for name in ("ep2", "falkon", "pcg", "cpp"):
            dev.release()
            res["solvers"][name] = run_solver(name, plan_name, plan["timeout"])
            print(f"  solver {name}: {res['solvers'][name]}"[:300], flush=True)
        # a dry run's tiny fits are not comparable with the CPU runs' full ones
        res["cpu_solvers"] = {} if args.dry_run else cpu_solver_reference()
    try:
        out, err = cpu_proc.communicate(timeout=240)
        res["cpu"] = json.loads(out.strip().splitlines()[-1]) if cpu_proc.returncode == 0 else {
            "error": err[-400:]}
    except (subprocess.TimeoutExpired, IndexError, ValueError) as exc:
        cpu_proc.kill()
        res["cpu"] = {"error": f"CPU reference failed: {exc!r}"}
    res["loadavg_after"] = list(os.getloadavg())
    res["wall_s"] = time.perf_counter() - t_start
    summarise(res)
    md = render_markdown(res)
    print("\n" + md)
    md_path, json_path = args.md, args.json
    if plan_name == "full":
        md_path, json_path = md_path or MD_PATH, json_path or JSON_PATH
    if json_path:
        json_path.write_text(json.dumps(res, indent=2, default=str) + "\n")
    if md_path:
        write_section(md_path, SECTION, MD_HEADER, md)
        print(f"wrote {md_path}" + (f" and {json_path}" if json_path else ""))


kernelkit = None  # imported in main(), after the CPU reference's thread settings

if __name__ == "__main__":
    main()
