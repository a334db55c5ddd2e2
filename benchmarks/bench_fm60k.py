"""Every iterative estimator's default fit on all 60,000 Fashion-MNIST images.

Each case is one estimator as a user writes it: every parameter at its default except
``gamma=0.02`` where the estimator has a ``gamma`` and ``random_state=0`` where it has a
``random_state``. Data: ``load_fashion_mnist()`` (pixels / 255), the 60,000 training
images in file order, scored on the 10,000 test images.

Cases (``--cases``, comma-separated; default all):

``kons``        ``KONSClassifier(gamma=0.02, random_state=0)`` fitted on the 60,000 in order.
``rf``          ``RandomFeaturesClassifier(random_state=0)`` (no ``gamma``: its default
                features are ``RandomFourierFeatures(n_components=1000)``, gamma 1/784).
``rls``         ``make_pipeline(RLSNystroem(gamma=0.02, random_state=0), RidgeClassifier())``.
``kt``          ``KernelThinning(gamma=0.02, random_state=0).fit(X)``: output size and time.
``krc``         ``KernelRidgeClassifier(gamma=0.02)``: the default kernel is ``"linear"``
                (``gamma`` is then unused), ``solver="auto"``.
``krc_rbf``     ``KernelRidgeClassifier(kernel="rbf", gamma=0.02)``: what ``solver="auto"``
                does at n = 60,000 with the kernel of the other rows.
``krccv``       ``KernelRidgeClassifierCV(gamma=0.02, random_state=0)`` (default kernel, linear).
``krccv_rbf``   ``KernelRidgeClassifierCV(kernel="rbf", gamma=0.02, random_state=0)``.
``ntk``         ``NTKRidgeClassifier(random_state=0)``.
``iw``          ``InfiniteWidthClassifier()``.

``EigenProRegressor`` is a regressor and is not run. Measured elsewhere and not rerun
here: ``FalkonClassifier(gamma=0.02)`` (bench_ridge.py part b), ``EigenProClassifier``
(bench_eigenpro.py part b), ``STKRClassifier()`` (bench_stkr.py speed), ``SQUEAK``
(bench_leverage.py / bench_defaults.py).

Every case runs in a fresh subprocess with a wall-clock limit (``--timeout``, 600 s): a
small warm-up fit on 300 rows first (Numba's cached machine code loaded, as a user's
second fit), then the peak resident memory (VmHWM) is reset and the timed fit starts on
the data already loaded. The outcome is one of: fitted; the error the fit raised (type
and message); timed out; killed by a signal. Each case's address space is limited to the
memory available when it starts (``MemAvailable``; ``--no-memory-limit`` lifts it):
without swap a fit that needs more cannot finish, and the limit makes its allocation fail
with a MemoryError in that process instead of waking the out-of-memory killer, which may
pick another process.

Usage::

    python benchmarks/bench_fm60k.py                 # full run: results_fm60k.json + RESULTS.md
    python benchmarks/bench_fm60k.py --quick         # 2,000 training rows, prints only
    python benchmarks/bench_fm60k.py --cases kons,rf
"""

import os

os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")  # SkylakeX DSYRK crashes on large inputs

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402 (benchmarks/ is on sys.path)
    MD_PATH, git_state, load_average, load_fashion_mnist, machine_info, machine_line,
    peak_rss_mib, publish, reset_peak)

HERE = Path(__file__).resolve().parent
JSON_PATH = HERE / "results_fm60k.json"
SECTION = "## Default fits on all 60,000 Fashion-MNIST images (bench_fm60k.py)"
GAMMA = 0.02
N_QUICK = 2000
WARM_N = 300

# case -> the call as a user writes it (also evaluated by ``_make``)
CASES = {
    "kons": "KONSClassifier(gamma=0.02, random_state=0)",
    "rf": "RandomFeaturesClassifier(random_state=0)",
    "rls": "make_pipeline(RLSNystroem(gamma=0.02, random_state=0), RidgeClassifier())",
    "kt": "KernelThinning(gamma=0.02, random_state=0)",
    "krc": "KernelRidgeClassifier(gamma=0.02)",
    "krc_rbf": "KernelRidgeClassifier(kernel='rbf', gamma=0.02)",
    "krccv": "KernelRidgeClassifierCV(gamma=0.02, random_state=0)",
    "krccv_rbf": "KernelRidgeClassifierCV(kernel='rbf', gamma=0.02, random_state=0)",
    "ntk": "NTKRidgeClassifier(random_state=0)",
    "iw": "InfiniteWidthClassifier()",
}


def _make(name):
    """A new estimator of case ``name``, built from the call text in ``CASES``."""
    from sklearn.linear_model import RidgeClassifier
    from sklearn.pipeline import make_pipeline

    import kernelkit

    names = {k: getattr(kernelkit, k) for k in kernelkit.__all__}
    names.update(make_pipeline=make_pipeline, RidgeClassifier=RidgeClassifier)
    return eval(CASES[name], {"__builtins__": {}}, names)  # the fixed texts above only


def _details(est):
    """What the fitted model says about itself: solver, iterations, sizes."""
    step = est.steps[0][1] if hasattr(est, "steps") else est
    out = {}
    for attr in ("solver_", "n_iter_", "preconditioner_rank_", "n_centers_", "alpha_",
                 "gamma_", "m_", "mmd_", "gamma_reg_", "effective_dim_", "n_atoms_"):
        v = getattr(step, attr, None)
        if isinstance(v, (int, float, str, np.integer, np.floating)):
            out[attr.rstrip("_")] = v.item() if hasattr(v, "item") else v
    comps = getattr(step, "components_", None)
    if comps is not None and getattr(comps, "ndim", 0) == 2:
        out["n_components"] = int(comps.shape[0])
    if hasattr(step, "coreset_indices_"):
        out["output_size"] = int(len(step.coreset_indices_))
    best = getattr(step, "best_estimator_", None)
    if best is not None and hasattr(best, "n_centers_"):
        out["n_centers"] = int(best.n_centers_)
    if hasattr(step, "dictionary_indices_"):
        out["dictionary"] = int(len(step.dictionary_indices_))
    return out


def case(name, quick):
    """One fit in this (fresh) process: time, score, peak memory, or the error raised."""
    X, y, Xt, yt = load_fashion_mnist()
    if quick:
        X, y, Xt, yt = X[:N_QUICK], y[:N_QUICK], Xt[:N_QUICK], yt[:N_QUICK]
    out = {"case": name, "call": CASES[name], "n": len(y), "n_test": len(yt)}
    w = None
    try:  # the warm-up: compiled code loaded, imports done
        t0 = time.perf_counter()
        w = _make(name)
        w.fit(X[:WARM_N]) if name == "kt" else w.fit(X[:WARM_N], y[:WARM_N])
        out["warmup_s"] = time.perf_counter() - t0
    except Exception as exc:  # noqa: BLE001 (recorded, not hidden)
        out["warmup_error"] = f"{type(exc).__name__}: {exc}"
    del w
    base = peak_rss_mib() if reset_peak() else None
    est = _make(name)
    t0 = time.perf_counter()
    try:
        est.fit(X) if name == "kt" else est.fit(X, y)
    except Exception as exc:  # noqa: BLE001 (a refusal is a result here)
        out.update(outcome="error", error=f"{type(exc).__name__}: {exc}",
                   fit_s=time.perf_counter() - t0)
    else:
        out.update(outcome="fitted", fit_s=time.perf_counter() - t0, **_details(est))
        if name != "kt":
            t0 = time.perf_counter()
            try:
                out["accuracy"] = float(np.mean(est.predict(Xt) == yt))
                out["predict_s"] = time.perf_counter() - t0
            except Exception as exc:  # noqa: BLE001
                out["predict_error"] = f"{type(exc).__name__}: {exc}"
    peak = peak_rss_mib()
    out["peak_gb"] = None if peak is None else peak * 2**20 / 1e9
    out["rss_before_fit_gb"] = None if base is None else base * 2**20 / 1e9
    out["data_gb"] = (X.nbytes + Xt.nbytes) / 1e9
    return out


def memory_limit_bytes():
    """The memory available now (``MemAvailable``), bytes: the address-space limit of a case."""
    try:
        with open("/proc/meminfo") as fh:
            kib = next(int(ln.split()[1]) for ln in fh if ln.startswith("MemAvailable:"))
        return kib * 1024
    except (OSError, StopIteration):
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def run_case(name, quick, timeout, mem_limit=None):
    """``case`` in a fresh subprocess under a wall-clock limit (and ``mem_limit`` bytes of
    address space, None: no limit); the outcome whatever happens."""
    cmd = [sys.executable, __file__, "--_case", name] + (["--quick"] if quick else [])

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (mem_limit, mem_limit))

    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              preexec_fn=None if mem_limit is None else limit)
    except subprocess.TimeoutExpired:
        return {"case": name, "call": CASES[name], "outcome": "timed out", "timeout_s": timeout,
                "memory_limit_bytes": mem_limit}
    wall = time.perf_counter() - t0
    if proc.returncode < 0:
        sig = signal.Signals(-proc.returncode).name
        return {"case": name, "call": CASES[name], "outcome": f"killed ({sig})", "wall_s": wall,
                "stderr": proc.stderr[-1000:]}
    try:
        out = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {"case": name, "call": CASES[name], "outcome": f"failed (exit {proc.returncode})",
                "wall_s": wall, "stderr": proc.stderr[-1000:]}
    out.update(wall_s=wall, memory_limit_bytes=mem_limit)
    return out


# ------------------------------------------------------------------------ report
def _score(r):
    if r["case"] == "kt" and "output_size" in r:
        mmd = r.get("mmd")
        return (f"{r['output_size']:,} points"
                + ("" if mmd is None or mmd != mmd else f", MMD {mmd:.3g}"))
    return f"{r['accuracy']:.4f}" if "accuracy" in r else ""


def _outcome(r, timeout):
    o = r["outcome"]
    if o == "timed out":
        return f"**timed out** (> {r.get('timeout_s', timeout):g} s)"
    if o == "error":
        msg = r["error"].replace("|", "/").replace("\n", " ")
        return f"refused: `{msg[:300]}`"
    if o != "fitted":
        return f"**{o}**"
    notes = [f"{k} {v}" for k, v in r.items() if k in ("solver", "n_iter", "n_centers", "n_atoms",
                                                        "n_components", "m", "alpha", "gamma")]
    return "fitted" + (f" ({', '.join(notes)})" if notes else "")


def render(res):
    loads = (res["loadavg_before"], res.get("loadavg_after", res["loadavg_before"]))
    sized = [r for r in res["rows"] if "n" in r]
    n, n_test = (sized[0]["n"], sized[0]["n_test"]) if sized else (60_000, 10_000)
    lims = [r["memory_limit_bytes"] for r in res["rows"] if r.get("memory_limit_bytes")]
    L = [SECTION, "",
         machine_line(res["machine"], loads, res["timestamp"], (res.get("git") or {}).get("commit")),
         "", f"Fashion-MNIST (pixels / 255), the first {n:,} training images in file order, "
         f"accuracy on the {n_test:,} test images. Each estimator as a user writes it: every "
         f"parameter at its default except gamma = {GAMMA} where it has one and "
         "random_state = 0; each fit in a fresh process after a 300-row warm-up, limited to "
         f"{res['timeout_s']:g} s of wall-clock time"
         + (f" and an address space of the memory available when it started "
            f"({min(lims) / 2**30:.1f}-{max(lims) / 2**30:.1f} GiB: beyond it an allocation "
            "fails with a MemoryError rather than waking the out-of-memory killer)"
            if lims else "")
         + "; peak = the process's maximum resident memory during the fit (data included), "
         "reset after loading the data.", "",
         "| estimator | fit (s) | test accuracy (or what applies) | peak (GB) | outcome |",
         "|---|---:|---|---:|---|"]
    for r in res["rows"]:
        fit = f"{r['fit_s']:.2f}" if "fit_s" in r else ""
        peak = f"{r['peak_gb']:.2f}" if r.get("peak_gb") is not None else ""
        L.append(f"| `{r['call']}` | {fit} | {_score(r)} | {peak} | "
                 f"{_outcome(r, res['timeout_s'])} |")
    L += ["", "KernelRidgeClassifier and KernelRidgeClassifierCV default to the linear kernel "
          "(their gamma is then unused); their `kernel='rbf'` rows use the kernel of the other "
          "rows. Measured in other sections and not rerun here: FalkonClassifier(gamma=0.02) "
          "(\"Kernel ridge solvers\", part b), EigenProClassifier(gamma=0.02) (\"EigenPro\", "
          "part b), STKRClassifier() (\"STKR\", speed), SQUEAK (\"Ridge leverage scores\"). "
          "EigenProRegressor is a regressor: not run. Raw numbers: "
          "`benchmarks/results_fm60k.json`.", ""]
    return "\n".join(L)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"{N_QUICK:,} training and test rows; write no files")
    parser.add_argument("--cases", default=",".join(CASES),
                        help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="wall-clock seconds per case (default 600)")
    parser.add_argument("--no-memory-limit", action="store_true",
                        help="no address-space limit on a case (default: physical memory)")
    parser.add_argument("--_case", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._case:
        print(json.dumps(case(args._case, args.quick), default=float))
        return
    names = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in names if c not in CASES]
    if unknown or not names:
        parser.error(f"--cases: unknown {unknown}; choose from {', '.join(CASES)}")
    res = {"timestamp": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
           "quick": args.quick, "timeout_s": args.timeout,
           "memory_limit": not args.no_memory_limit,
           "loadavg_before": [round(x, 2) for x in load_average()],
           "machine": machine_info(), "git": git_state(), "rows": []}
    for name in names:
        print(f"{name}: {CASES[name]}", flush=True)
        row = run_case(name, args.quick, args.timeout,
                       memory_limit_bytes() if res["memory_limit"] else None)
        row["load_after"] = [round(x, 2) for x in load_average()]
        res["rows"].append(row)
        print(f"  {row}", flush=True)
        res["loadavg_after"] = [round(x, 2) for x in load_average()]
        if not args.quick:  # partial results survive an interrupted run
            JSON_PATH.write_text(json.dumps(res, indent=2, default=float) + "\n")
    publish(render(res), args.quick, MD_PATH, SECTION, JSON_PATH)


if __name__ == "__main__":
    main()
