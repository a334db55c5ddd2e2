"""Default ``SQUEAK().fit`` and ``RLSNystroem().fit`` on 1e4, 1e5 and 1e6 points.

A default fit must be practical for the data sizes the methods
exist for. Data: standard-normal points in 5-D (a typical example). Every fit runs
in a fresh subprocess (so that its peak resident memory is its own), with all
defaults except ``random_state``; the peer on the same data in the same run is
scikit-learn's default ``Nystroem().fit`` (uniform columns, 100 components), and the
previous SQUEAK defaults (``qbar`` of Theorem 1, ``gamma_reg=1``) at 1e4 points,
for the "before". Medians over ``--repeats`` runs (1 at 1e6).

Usage::

    python benchmarks/bench_defaults.py            # full: writes JSON + RESULTS.md section
    python benchmarks/bench_defaults.py --quick    # 2,000 points, prints only
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")  # SkylakeX DSYRK crashes on large inputs

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402 (benchmarks/ is on sys.path)
    MD_HEADER,
    MD_PATH,
    git_state,
    load_average,
    machine_info,
    machine_line,
    peak_rss_mib,
    reset_peak,
    write_section,
)

HERE = Path(__file__).resolve().parent
JSON_PATH = HERE / "results_defaults.json"
SECTION = "## Default SQUEAK / RLSNystroem fits (bench_defaults.py)"
D = 5


def case(name, n, seed):
    """One fit in this (fresh) process: dict of time, dictionary size, peak memory."""
    from sklearn.kernel_approximation import Nystroem

    from kernelkit.leverage import SQUEAK, RLSNystroem

    # warm-up on a few points: Numba's cached machine code is loaded once per process
    warm = np.random.default_rng(1).standard_normal((300, D))
    SQUEAK(random_state=0).fit(warm)
    RLSNystroem(n_components=10, random_state=0).fit(warm)
    X = np.random.default_rng(seed).standard_normal((n, D))
    base_mib = peak_rss_mib() if reset_peak() else None
    t0 = time.perf_counter()
    if name == "squeak":
        est = SQUEAK(random_state=seed).fit(X)
        extra = {"dictionary": len(est.dictionary_indices_), "qbar": est.qbar_,
                 "gamma_reg": est.gamma_reg_, "d_eff": est.effective_dim_}
    elif name == "squeak_old_defaults":
        est = SQUEAK(gamma_reg=1.0, qbar="theory", random_state=seed).fit(X)
        extra = {"dictionary": len(est.dictionary_indices_), "qbar": est.qbar_,
                 "gamma_reg": 1.0, "d_eff": est.effective_dim_}
    elif name == "rls_nystroem":
        est = RLSNystroem(random_state=seed).fit(X)
        extra = {"dictionary": int(est.components_.shape[0]), "gamma_reg": est.gamma_reg_,
                 "d_eff": est.effective_dim_}
    else:
        est = Nystroem(random_state=seed).fit(X)
        extra = {"dictionary": int(est.components_.shape[0])}
    fit_s = time.perf_counter() - t0
    peak = peak_rss_mib()
    return {"case": name, "n": n, "fit_s": fit_s,
            "peak_rss_bytes": None if peak is None else peak * 2**20,
            "rss_before_fit_bytes": None if base_mib is None else base_mib * 2**20,
            "data_bytes": X.nbytes, **extra}


def run_case(name, n, seed, timeout):
    cmd = [sys.executable, __file__, "--_case", name, "--_n", str(n), "--_seed", str(seed)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True)
    except subprocess.TimeoutExpired:
        return {"case": name, "n": n, "timeout_s": timeout}
    return json.loads(out.stdout.strip().splitlines()[-1])


def median_of(runs):
    ok = [r for r in runs if "fit_s" in r]
    if not ok:
        return runs[0]
    med = dict(sorted(ok, key=lambda r: r["fit_s"])[len(ok) // 2])
    med["fit_s_all"] = [r["fit_s"] for r in runs if "fit_s" in r]
    return med


def render(res):
    loads = (res["loadavg_before"], res.get("loadavg_after", res["loadavg_before"]))
    lines = [SECTION, "",
             machine_line(res["machine"], loads, res["timestamp"],
                          (res.get("git") or {}).get("commit")),
             "The machine is shared: times scale with its load, the dictionary sizes do not. "
             "Standard-normal points in 5-D; all defaults (rbf, gamma = 1/5) but "
             "`random_state`; each fit in a fresh process after a 300-point warm-up (Numba's "
             "cached code loaded); median of the repeats at 1e4, one run above. Thread "
             f"settings of the run: {res.get('run_env', {})}.", "",
             "| estimator | n | fit time (s) | dictionary / components | gamma_reg | "
             "d_eff estimate | peak memory (MiB) | data (MiB) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    label = {"squeak": "SQUEAK() (qbar=auto=4, gamma_reg=auto=1e-3 n)",
             "squeak_old_defaults": "SQUEAK(qbar='theory', gamma_reg=1) (old defaults)",
             "rls_nystroem": "RLSNystroem()", "sk_nystroem": "sklearn Nystroem() (peer)"}
    for r in res["rows"]:
        if "fit_s" not in r:
            lines.append(f"| {label[r['case']]} | {r['n']:,} | > {r['timeout_s']} (stopped) "
                         "| | | | | |")
            continue
        g = f"{r['gamma_reg']:.4g}" if r.get("gamma_reg") is not None else ""
        de = f"{r['d_eff']:.1f}" if r.get("d_eff") is not None else ""
        peak = "" if r.get("peak_rss_bytes") is None else f"{r['peak_rss_bytes'] / 2**20:.0f}"
        lines.append(f"| {label[r['case']]} | {r['n']:,} | {r['fit_s']:.2f} | "
                     f"{r['dictionary']:,} | {g} | {de} | {peak} | "
                     f"{r['data_bytes'] / 2**20:.1f} |")
    lines += ["", "Peak memory is the fitting process's maximum resident set during the fit "
              "(Python, NumPy, Numba and the data included). A row marked stopped did not "
              "finish within its time limit. Raw numbers: `benchmarks/results_defaults.json`.",
              ""]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2,000 points; write no files")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--render", action="store_true",
                        help="rewrite the RESULTS.md section from results_defaults.json")
    parser.add_argument("--_case", help=argparse.SUPPRESS)
    parser.add_argument("--_n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--_seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._case:
        print(json.dumps(case(args._case, args._n, args._seed), default=float))
        return
    if args.render:
        res = json.loads(JSON_PATH.read_text())
        if "blas_summary" not in res.get("machine", {}):  # written by an older version
            res["machine"] = machine_info(peers=("scikit-learn",))
        write_section(MD_PATH, SECTION, MD_HEADER, render(res))
        print(render(res))
        return
    sizes = [2000] if args.quick else [10**4, 10**5, 10**6]
    res = {"timestamp": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
           "quick": args.quick, "loadavg_before": [round(x, 2) for x in load_average()],
           "machine": machine_info(peers=("scikit-learn",)), "git": git_state(), "rows": [],
           "run_env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}}
    for n in sizes:
        cases = ["squeak", "rls_nystroem", "sk_nystroem"]
        if n == sizes[0]:
            cases.insert(1, "squeak_old_defaults")
        for name in cases:
            reps = 1 if (n >= 10**5 or name == "squeak_old_defaults") else args.repeats
            runs = [run_case(name, n, seed, timeout=1800) for seed in range(reps)]
            res["rows"].append(median_of(runs))
            print(res["rows"][-1], flush=True)
            if not args.quick:  # partial results survive an interrupted run
                JSON_PATH.write_text(json.dumps(res, indent=2, default=float) + "\n")
    res["loadavg_after"] = [round(x, 2) for x in load_average()]
    section = render(res)
    print("\n" + section)
    if args.quick:
        return
    JSON_PATH.write_text(json.dumps(res, indent=2, default=float) + "\n")
    write_section(MD_PATH, SECTION, MD_HEADER, section)
    print(f"wrote {JSON_PATH.name} and {MD_PATH.name}")


if __name__ == "__main__":
    main()
