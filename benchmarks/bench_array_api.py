"""Results follow the input: the cost of the array-API path over plain NumPy, on the CPU.

Every kernelkit estimator family (the cases of ``_xp_cases.py``: exact kernel ridge and its
classifier, KernelRidgeClassifierCV on the Nystrom path, NTK ridge, the infinite-width GP,
FALKON, EigenPro 2 / 3 / 4, STKR, KONS, SQUEAK, RLSNystroem, kernel thinning, random
Fourier features) is fitted and then predicts (or transforms, or estimates scores) on

* NumPy arrays, plain (no dispatch): the reference;
* array-api-strict arrays and PyTorch CPU tensors under
  ``sklearn.config_context(array_api_dispatch=True)``: the estimator computes on the host
  engine and its results and fitted attributes come back in the input's namespace.

Data: ``n`` Fashion-MNIST training images (10,000, a seeded sample; pixels in [0, 1],
d = 784) and its first ``n_test`` test images (2,000); fewer of those training images for
the four exact O(n^3) fits, to keep each call to seconds on 2 cores (``BENCH_N`` in
``_xp_cases.py``: exact kernel ridge 5,000, its classifier with the leave-one-out
calibration and the NTK ridge classifier 3,000, the infinite-width GP 2,000). Labels for
the classifiers, a smooth function of the pixels for the regressors, 90% of the labels
hidden for STKR; EigenPro 2 runs one epoch, EigenPro 3 / 4 two. Time of ``fit`` + the
prediction call, median of ``repeats`` calls per namespace, the namespaces taking turns
within each repeat (their order rotated), after one untimed warm-up call per namespace on
300 rows with small models (compilation and first-call costs). The inputs are moved into
each namespace before the clock starts. Each result is checked to be in the input's namespace and
compared with NumPy's (largest difference over the largest NumPy value).

Goal: the array-API path costs <= 10% over plain NumPy at n = 10,000 (ratio <= 1.10;
the exact fits at the sizes above).

Usage::

    python benchmarks/bench_array_api.py              # full run (about 8 minutes on 2
                                                      # quiet cores); writes
                                                      # results_array_api.json and its
                                                      # section in RESULTS.md
    python benchmarks/bench_array_api.py --quick      # 1,500 images, small models, prints
    python benchmarks/bench_array_api.py --parts ridge,eigenpro --dtypes float64,float32
"""

import os

os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")
os.environ.setdefault("SCIPY_ARRAY_API", "1")  # before SciPy: sklearn's dispatch needs it

import argparse  # noqa: E402
import datetime  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import sklearn  # noqa: E402
from _common import fmt_met, git_state, machine_info, publish  # noqa: E402
from _xp_cases import (  # noqa: E402
    BENCH_N, CASES, compare, data, namespace, namespace_of, run_case, to_xp)

HERE = Path(__file__).resolve().parent
JSON_PATH = HERE / "results_array_api.json"
MD_PATH = HERE / "RESULTS.md"
SECTION = "## Array-API inputs on the CPU (bench_array_api.py)"
SEED = 0
GOAL = 1.10
NAMESPACES = ("numpy", "array_api_strict", "torch")
TITLES = {"numpy": "NumPy", "array_api_strict": "array-api-strict", "torch": "PyTorch CPU"}
FULL = {"n": 10_000, "n_test": 2000, "repeats": 3, "scale": "bench", "warm_n": 300}
QUICK = {"n": 1500, "n_test": 300, "repeats": 2, "scale": "tiny", "warm_n": 200}
GROUPS = sorted({g for g, _, _ in CASES.values()})


def available(names):
    """The namespaces of ``names`` that import here, and why the others do not."""
    ok, missing = [], {}
    for name in names:
        try:
            namespace(name)
            ok.append(name)
        except ImportError as exc:
            missing[name] = f"not installed ({exc})"
    return ok, missing


def case_n(case, cfg):
    """Training rows of a case: ``cfg["n"]``, fewer for the heavy exact cases."""
    return min(cfg["n"], BENCH_N.get(case, cfg["n"])) if cfg["scale"] == "bench" else cfg["n"]


def call(case, scale, arrays, ns):
    """One fit + prediction on ``arrays`` (already in ``ns``): ``(outputs, seconds)``."""
    gc.collect()
    with sklearn.config_context(array_api_dispatch=ns != "numpy"):
        t0 = time.perf_counter()
        out = run_case(case, scale, *arrays)
        return out, time.perf_counter() - t0


def bench_case(case, cfg, base, namespaces, dtype):
    """Alternating timed calls of one case in each namespace; medians, ratios, checks."""
    n = case_n(case, cfg)
    base = (base[0][:n], base[1][:n], base[2][:n], base[3])
    X, y, y_reg, X_test = base
    warm = (X[:cfg["warm_n"]], y[:cfg["warm_n"]], y_reg[:cfg["warm_n"]], X_test[:50])
    inputs, rows = {}, {}
    for ns in namespaces:
        rows[ns] = {"times": []}
        try:
            inputs[ns] = tuple(to_xp(a, ns, dtype) for a in base)
            call(case, "tiny", tuple(to_xp(a, ns, dtype) for a in warm), ns)  # small models
        except Exception as exc:  # noqa: BLE001 (recorded: a namespace the path refuses)
            rows[ns]["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            inputs.pop(ns, None)
    ref = None
    for rep in range(cfg["repeats"]):
        order = namespaces[rep % len(namespaces):] + namespaces[:rep % len(namespaces)]
        for ns in order:
            if ns not in inputs:
                continue
            try:
                out, t = call(case, cfg["scale"], inputs[ns], ns)
            except Exception as exc:  # noqa: BLE001
                rows[ns]["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
                inputs.pop(ns)
                continue
            rows[ns]["times"].append(t)
            if ns == "numpy":
                ref = out if ref is None else ref
            elif "outputs" not in rows[ns]:
                rows[ns]["outputs"] = out
    for ns in namespaces:
        r = rows[ns]
        if r["times"]:
            r["median_s"] = float(np.median(r["times"]))
        out = r.pop("outputs", None)
        if ns == "numpy" or out is None:
            continue
        r["follows_input"] = all(namespace_of(v) == ns for v in out.values())
        if ref is not None:
            diffs = [compare(ref[k], v) for k, v in out.items()]
            r["max_rel_diff"] = max(d[1] for d in diffs)
            r["label_agreement"] = min((d[2] for d in diffs if d[2] is not None), default=None)
    base_s = rows["numpy"].get("median_s") if "numpy" in rows else None
    for ns in namespaces:
        r = rows[ns]
        if ns != "numpy" and base_s and "median_s" in r:
            r["ratio"] = r["median_s"] / base_s
            r["met"] = r["ratio"] <= GOAL and r.get("follows_input", False)
    return rows


# ------------------------------------------------------------------------ report
def _cell(r, key, fmt):
    if "error" in r and key == "median_s":
        return f"**failed**: {r['error'][:60]}"
    return "—" if r.get(key) is None else fmt.format(r[key])


def render(res):
    cfg, m = res["config"], res["machine"]
    nss = [ns for ns in res["namespaces"] if ns != "numpy"]
    L = [SECTION, "",
         f"Run {res['timestamp']} ({(res['git']['commit'] or '')[:10]}) on "
         f"{m['cpu_count']} CPUs ({m['cpu_model']}); OpenBLAS core type "
         f"{m['env'].get('OPENBLAS_CORETYPE') or 'default'}; load average before/after "
         f"{res['loadavg_before']} / {res.get('loadavg_after')}. "
         f"Fashion-MNIST: n training images (column n), {cfg['n_test']:,} test images; time of "
         f"fit + prediction, median of {cfg['repeats']} calls per namespace taking turns; "
         "ratio = namespace / NumPy. Versions: "
         + ", ".join(f"{k} {v}" for k, v in res["versions"].items() if v) + ".", ""]
    for name, why in res.get("missing", {}).items():
        L += [f"{TITLES.get(name, name)}: {why}.", ""]
    head = "| estimator | n | dtype | NumPy (s) |" + "".join(
        f" {TITLES[ns]} (s) | ratio | follows input | max rel. diff |" for ns in nss) + " met? |"
    L += [head, "|---|---:|---|---:|" + "---:|---:|---|---:|" * len(nss) + "---|"]
    mets, ratios = [], []
    for case, per_dtype in res["cases"].items():
        for dt, rows in per_dtype.items():
            line = (f"| {case} | {case_n(case, cfg):,} | {dt} | "
                    f"{_cell(rows.get('numpy', {}), 'median_s', '{:.3f}')} |")
            met = None
            for ns in nss:
                r = rows.get(ns, {})
                fol = r.get("follows_input")
                line += (f" {_cell(r, 'median_s', '{:.3f}')} | {_cell(r, 'ratio', '{:.3f}')} | "
                         f"{'—' if fol is None else ('yes' if fol else '**no**')} | "
                         f"{_cell(r, 'max_rel_diff', '{:.1e}')} |")
                if "ratio" in r:
                    ratios.append((r["ratio"], case, ns, dt))
                if ns in rows:  # a namespace that failed or did not follow: not met
                    ok = bool(r.get("met"))
                    met = ok if met is None else (met and ok)
            mets.append(met)
            L.append(line + f" {fmt_met(met)} |")
    worst = max(ratios, default=None)
    n_met = sum(1 for x in mets if x)
    L += ["", f"Goal: the array-API path (results in the input's namespace) <= "
          f"{(GOAL - 1):.0%} over plain NumPy at n = {cfg['n']:,}: met in {n_met} of "
          f"{len(mets)} rows"
          + (f"; largest ratio {worst[0]:.3f} ({worst[1]}, {TITLES[worst[2]]}, {worst[3]})"
             if worst else "") + f": {fmt_met(bool(mets) and n_met == len(mets))}.", ""]
    return "\n".join(L)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes; write no files")
    parser.add_argument("--parts", default=",".join(GROUPS),
                        help=f"comma-separated estimator groups ({', '.join(GROUPS)})")
    parser.add_argument("--namespaces", default=",".join(NAMESPACES),
                        help="comma-separated namespaces (numpy is always timed)")
    parser.add_argument("--dtypes", default="float64", help="comma-separated: float64,float32")
    parser.add_argument("--repeats", type=int, help="timed calls per namespace")
    args = parser.parse_args(argv)
    cfg = dict(QUICK if args.quick else FULL)
    if args.repeats:
        cfg["repeats"] = args.repeats
    parts = args.parts.split(",")
    unknown = sorted(set(parts) - set(GROUPS))
    if unknown:
        parser.error(f"--parts: unknown groups {unknown}; choose from {GROUPS}")
    wanted = ["numpy"] + [ns for ns in args.namespaces.split(",") if ns and ns != "numpy"]
    namespaces, missing = available(wanted)
    res = {"timestamp": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
           "quick": args.quick, "config": cfg, "seed": SEED, "namespaces": namespaces,
           "missing": missing, "loadavg_before": [round(x, 2) for x in os.getloadavg()],
           "machine": machine_info(peers=("torch", "array-api-strict")), "git": git_state(),
           "cases": {}}
    res["versions"] = {k: res["machine"]["versions"].get(k) for k in (
        "kernelkit", "numpy", "scikit-learn", "torch", "array-api-strict")}
    if JSON_PATH.exists() and not args.quick:  # keep the cases not rerun
        res["cases"].update(json.loads(JSON_PATH.read_text()).get("cases", {}))
    base = data(cfg["n"], cfg["n_test"], seed=SEED)
    t_start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence notes of the short solver runs
        for case, (group, _, _) in CASES.items():
            if group not in parts:
                continue
            res["cases"][case] = {}
            for dt in args.dtypes.split(","):
                rows = bench_case(case, cfg, base, namespaces, np.dtype(dt))
                res["cases"][case][dt] = rows
                print(f"{case} [{dt}]: " + "; ".join(
                    f"{ns} {r['median_s']:.3f} s" + (f" ({r['ratio']:.3f}x)" if "ratio" in r
                                                     else "")
                    if "median_s" in r else f"{ns} failed: {r.get('error', '')[:80]}"
                    for ns, r in rows.items()), flush=True)
            res["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
            if not args.quick:
                JSON_PATH.write_text(json.dumps(res, indent=2, default=float) + "\n")
    res["wall_s"] = time.perf_counter() - t_start
    print(f"total wall time {res['wall_s']:.0f} s")
    publish(render(res), args.quick, MD_PATH, SECTION, JSON_PATH)


if __name__ == "__main__":
    main()
