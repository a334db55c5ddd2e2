"""``KernelRidge(solver="auto")`` against the solvers it chooses between, and scikit-learn.

Fashion-MNIST (784 features, 10 one-hot targets scored by argmax on the 10,000 test
images), Gaussian kernel, every cell of n x alpha x gamma: fit time and test error of
kernelkit ``solver="cholesky"``, ``"pcg"``, ``"auto"`` and of
:class:`sklearn.kernel_ridge.KernelRidge` (where its two ``n x n`` float64 matrices
fit in memory). Each fit runs in a fresh subprocess (so ``"auto"`` pays its
once-per-process probes, as a user's first fit does; peak = VmHWM after the data
are loaded), after a 50-row warm-up fit that loads kernelkit's Numba kernels. Up to
n = 10,000 every cell is fitted ``REPEATS`` times (four with scikit-learn's fit
among them), the kinds taking turns in orders that balance which kind runs before
which (:func:`orders`), and its median time is compared (one fit of a few seconds
varied by up to 1.6x between runs on a quiet 2-core machine); at n = 20,000 once.

Goals per cell: auto <= 1.1 x min(cholesky, pcg) and <= scikit-learn's time; test
error of pcg and auto equal to Cholesky's within 0.001. At n = 20,000: pcg at least
3x scikit-learn's speed in at least half of the cells. Each cell's verdicts are stored
with it in the JSON file.

From n = 10,000 on, scikit-learn is fitted once per (n, gamma), at the first alpha:
its time is a dense Cholesky of the same size whatever alpha (the table marks the
reused time), which saves six fits of a minute or more at n = 20,000.

Usage::

    python benchmarks/bench_auto.py            # full grid (about 50 min on 2 quiet cores);
                                               # writes results_auto.json and its section
                                               # of RESULTS.md
    python benchmarks/bench_auto.py --sizes 2000,5000,10000   # the grid in parts (about
    python benchmarks/bench_auto.py --sizes 20000             # 30 and 20 min): each run
                                               # keeps the stored cells of other sizes
    python benchmarks/bench_auto.py --quick    # n in {1000, 2000}, fewer cells; prints only
"""

import os

os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")

import argparse  # noqa: E402
import datetime  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from _common import (  # noqa: E402 (benchmarks/ is on sys.path)
    fmt_met, git_state, load_fashion_mnist, machine_info, machine_line, proc_status_kib,
    publish, reset_peak)

HERE = Path(__file__).resolve().parent
JSON_PATH = HERE / "results_auto.json"
MD_PATH = HERE / "RESULTS.md"
SECTION = "## solver='auto' (bench_auto.py)"
SEED = 0
FULL = {"n": (2000, 5000, 10_000, 20_000), "alpha": (1e-1, 1e-2, 1e-3, 1e-4),
        "gamma": (0.01, 0.05)}
QUICK = {"n": (1000, 2000), "alpha": (1e-1, 1e-3), "gamma": (0.05,)}
KINDS = ("cholesky", "pcg", "auto", "sklearn")
SKLEARN_MAX_GIB = 0.8  # of physical memory for scikit-learn's K and its copy
SKLEARN_ONCE_FROM = 10_000  # from this n on, one scikit-learn fit per (n, gamma)
REPEATS, REPEAT_MAX_N = 3, 10_000  # fits per cell and kind (median) up to this n
WILLIAMS4 = ((0, 1, 3, 2), (1, 2, 0, 3), (2, 3, 1, 0), (3, 0, 2, 1))  # see orders()


def case(spec):
    """In a fresh subprocess: load the data, reset the peak, fit, score."""
    from sklearn.kernel_ridge import KernelRidge as SKR

    from kernelkit import KernelRidge

    n, kind = spec["n"], spec["kind"]
    Xa, ya, Xt, yt = load_fashion_mnist()
    idx = np.sort(np.random.RandomState(SEED).choice(len(ya), n, replace=False))
    X, Y = Xa[idx], np.eye(10)[ya[idx]]
    kw = dict(alpha=spec["alpha"], kernel="rbf", gamma=spec["gamma"])
    est = SKR(**kw) if kind == "sklearn" else KernelRidge(solver=kind, random_state=SEED, **kw)
    if kind != "sklearn":  # load the Numba kernels (compiled or cached) outside the timing;
        # 50 rows are below auto's model, so its probes stay in the timed fit
        KernelRidge(solver="cholesky", **kw).fit(X[:50], Y[:50]).predict(Xt[:5])
    gc.collect()
    reset = reset_peak()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        est.fit(X, Y)
        fit_s = time.perf_counter() - t0
        err = float(np.mean(est.predict(Xt).argmax(1) != yt))
    out = {**spec, "fit_s": fit_s, "error": err, "peak_gb": proc_status_kib("VmHWM") / 2**20,
           "peak_reset": reset}
    for attr in ("solver_", "n_iter_", "preconditioner_rank_"):
        if hasattr(est, attr):
            out[attr.rstrip("_")] = getattr(est, attr)
    return out


def orders(kinds, repeats):
    """The kinds' order in each repeat. A fit's time depends on the process before it
    (n = 5,000, the same Cholesky fit: 0.72-0.75 s after scikit-learn's, 0.89-0.92 s
    after PCG's), so with four kinds and several repeats a Williams square: four
    orders in which each kind follows each other kind once. Else a rotation."""
    if len(kinds) == 4 and repeats > 1:
        return [[kinds[i] for i in row] for row in WILLIAMS4]
    return [kinds[r % len(kinds):] + kinds[:r % len(kinds)] for r in range(repeats)]


def run(spec):
    proc = subprocess.run([sys.executable, __file__, "--_case", json.dumps(spec)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"  case {spec} failed:\n{proc.stderr[-2000:]}", flush=True)
        return {**spec, "failed": proc.stderr[-500:]}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"  {out}", flush=True)
    return out


def median_run(rs):
    """One kind's fits of a cell: the first fit's record with the median time, every
    time and (for auto) every choice; None if any fit failed."""
    if any("failed" in r for r in rs):
        return None
    out = {**rs[0], "fit_s": float(np.median([r["fit_s"] for r in rs]))}
    if len(rs) > 1:
        out["fit_s_runs"] = [r["fit_s"] for r in rs]
        out["solvers"] = [r.get("solver") for r in rs]
    return out


def sklearn_fits(n, info):
    mem = info.get("memory_gib") or 0
    return 2 * 8 * n * n / 2**30 <= SKLEARN_MAX_GIB * mem


def cells(cfg, sizes=None):
    return [(n, g, a) for n in cfg["n"] if sizes is None or n in sizes
            for g in cfg["gamma"] for a in cfg["alpha"]]


def goals(row):
    """Per cell: (auto within 1.1x of the faster solver, auto <= sklearn, errors within
    0.001 of Cholesky's); None where a side is missing."""
    c, p, a, s = (row.get(k) for k in KINDS)
    t = {k: (v or {}).get("fit_s") for k, v in zip(KINDS, (c, p, a, s))}
    fast = None if None in (t["auto"], t["cholesky"], t["pcg"]) else \
        t["auto"] <= 1.1 * min(t["cholesky"], t["pcg"])
    vs_sk = None if None in (t["auto"], t["sklearn"]) else t["auto"] <= t["sklearn"]
    err = None if not (c and p and a) else \
        max(abs(p["error"] - c["error"]), abs(a["error"] - c["error"])) <= 0.001
    return fast, vs_sk, err


def render(res):
    info = res["machine"]
    L = [SECTION, "",
         machine_line(info, (res["loadavg_before"], res["loadavg_after"]), res["timestamp"],
                      res["git"]["commit"]), "",
         "Fashion-MNIST subsets, Gaussian kernel, 10 one-hot targets, 10,000 test images; "
         "kernelkit defaults otherwise (tol 1e-4). Every fit in a fresh subprocess (auto's "
         f"probes included). Times in seconds: up to n = {REPEAT_MAX_N:,} the median of "
         f"{REPEATS} fits per cell and solver (4 where scikit-learn is fitted too: each "
         "solver once after each other, a fit's time depending on the process before it), "
         "at n = 20,000 one fit; test error in brackets; auto's choice after its time "
         "(each fit's, where they differed).", "",
         "| n | gamma | alpha | cholesky | pcg (iter.) | auto (choice) | sklearn | "
         "auto <= 1.1 min | auto <= sklearn | errors within 0.001 |",
         "|---|---|---|---|---|---|---|---|---|---|"]

    def cell(r, extra=""):
        if r and r.get("reused"):
            return f"{r['fit_s']:.2f} (same fit, alpha {r['reused']:g})"
        return "—" if not r else f"{r['fit_s']:.2f} ({r['error']:.4f}){extra}"

    big = []
    for row in res["cells"]:
        c, p, a, s = (row.get(k) for k in KINDS)
        f = [fmt_met(x) for x in goals(row)]
        it = f" [{p.get('n_iter')}]" if p else ""
        choice = "" if not a else " " + "/".join(dict.fromkeys(a.get("solvers") or
                                                              [a.get("solver")]))
        L.append(f"| {row['n']:,} | {row['gamma']} | {row['alpha']:g} | {cell(c)} | "
                 f"{cell(p, it)} | {cell(a, choice)} | {cell(s)} | {f[0]} | {f[1]} | {f[2]} |")
        if row["n"] == 20_000 and p and s:
            big.append(s["fit_s"] / p["fit_s"] >= 3)
    runs = sorted({r["run"] for r in res["cells"] if r.get("run")})
    if len(runs) > 1:
        L += ["", "Cells from runs (by size) started at " + ", ".join(runs) + "; the machine "
              "line is the last run's."]
    if big:
        L += ["", f"n = 20,000: pcg >= 3x scikit-learn's speed in {sum(big)} of {len(big)} "
              f"cells (goal: at least half): "
              f"**{'met' if 2 * sum(big) >= len(big) else 'not met'}**."]
    return "\n".join(L) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes; write no files")
    parser.add_argument("--sizes", "--parts", dest="sizes", default=None,
                        help="comma-separated sizes n of the grid to run (default: all); "
                             "the stored cells of the other sizes are kept")
    parser.add_argument("--_case", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._case:
        print(json.dumps(case(json.loads(args._case)), default=float))
        return
    cfg = QUICK if args.quick else FULL
    sizes = None if args.sizes is None else {int(v) for v in args.sizes.split(",")}
    if sizes is not None and not sizes <= set(cfg["n"]):
        parser.error(f"--sizes must be among {cfg['n']}, got {sorted(sizes)}")
    info = machine_info()
    res = {"timestamp": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
           "quick": args.quick, "config": cfg, "seed": SEED, "machine": info,
           "git": git_state(), "loadavg_before": list(os.getloadavg()), "cells": []}
    kept = []
    if JSON_PATH.exists() and sizes is not None and not args.quick:  # the other parts
        kept = [r for r in json.loads(JSON_PATH.read_text())["cells"] if r["n"] not in sizes]
    for n, g, a in cells(cfg, sizes):
        print(f"n={n} gamma={g} alpha={a}", flush=True)
        row = {"n": n, "gamma": g, "alpha": a, "run": res["timestamp"]}
        first = next((r for r in res["cells"] if r["n"] == n and r["gamma"] == g), None)
        kinds = [k for k in KINDS if k != "sklearn" or sklearn_fits(n, info)]
        if "sklearn" in kinds and n >= SKLEARN_ONCE_FROM and first and first.get("sklearn"):
            row["sklearn"] = {**first["sklearn"], "reused": first["alpha"]}
            kinds.remove("sklearn")
        runs = {k: [] for k in kinds}
        for order in orders(kinds, REPEATS if n <= REPEAT_MAX_N else 1):
            for kind in order:
                runs[kind].append(run({"kind": kind, "n": n, "gamma": g, "alpha": a}))
        for kind, rs in runs.items():
            row[kind] = median_run(rs)
        row["goals"] = dict(zip(("auto_within_1.1x_best", "auto_le_sklearn", "errors_within_0.001"),
                                goals(row)))
        res["cells"].append(row)
        if not args.quick:  # save as we go: the full grid takes a while
            save(res, kept)
    res["loadavg_after"] = list(os.getloadavg())
    if not args.quick:
        save(res, kept)
    res["cells"] = sorted(kept + res["cells"], key=lambda r: (r["n"], r["gamma"], -r["alpha"]))
    publish(render(res), args.quick, MD_PATH, SECTION, JSON_PATH)


def save(res, kept):
    out = {**res, "cells": sorted(kept + res["cells"],
                                  key=lambda r: (r["n"], r["gamma"], -r["alpha"]))}
    JSON_PATH.write_text(json.dumps(out, indent=2, default=float) + "\n")


if __name__ == "__main__":
    main()
