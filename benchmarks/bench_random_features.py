"""Random features side by side: kernel error, transform speed, ridge on the features.

Parts (Gaussian kernel ``exp(-gamma ||x - y||^2)``; kernelkit's ``gamma`` is checked to be
scikit-learn's before anything is timed, so the same number goes to both):

(a) Approximation error ``||Z Z^T - K||_F / ||K||_F`` of the exact kernel matrix ``K`` on
    ``n_a`` Fashion-MNIST images (pixels in [0, 1], gamma = 0.02) and on a synthetic
    20-D standard normal set (gamma = 1/40), against ``D``: scikit-learn ``RBFSampler``
    (random phase) and kernelkit ``RandomFourierFeatures`` i.i.d. sin/cos, ORF
    (``sampling="orthogonal"``) and SORF (``sampling="structured"``); median over seeds.
    Goal: at every D, ORF and SORF below RBFSampler's error.
(b) Transform speed at d = 784, D = 8,192 on 60,000 Fashion-MNIST rows: SORF against
    ``RBFSampler.transform`` (float64 in and out; float32 rows for information), median
    of repeats after a warm-up call. Goal: SORF >= 3x faster.
(c) All 60,000 training images, 10,000 test: ``RandomFeaturesClassifier`` on SORF
    features (D = 4,096, 8,192, 16,384) against ``FalkonClassifier`` at equal memory:
    its ``n_centers`` M solves ``n M b32 + M^2 b = D^2 b64`` (the float32 ``K_nM`` it
    holds plus its one ``M x M`` factor array, float32 from 8,192 centers, equal to the
    features' float64 ``D x D`` Gram). Accuracy, fit time and peak memory, each fit in a
    fresh subprocess (VmHWM after the data are loaded, data included). Goal: D = 16,384
    fits in < 3 GB.
(d) NTK random features (``NTKRandomFeatures``, half arc-cosine and half sketched
    tangent features) + ``RandomFeaturesClassifier`` against the exact
    ``NTKRidgeClassifier`` (depth 1, relu) on ``n_d`` training images: accuracy vs D.

Wall time on 2 quiet cores (estimated from the flop counts and the machine's GEMM rate in
bench_kernels.py): about 30 minutes, of which part (c) about 22 (its D = 16,384 fit alone
about 15: two passes of ``n D^2`` flops, the Gram matrix and the leave-one-out values);
parts a, b and d together about 8.

Usage::

    python benchmarks/bench_random_features.py            # full run; writes
        # results_random_features.json and the section in RESULTS.md
    python benchmarks/bench_random_features.py --quick    # small sizes, prints only
    python benchmarks/bench_random_features.py --parts a,b
"""

import os

os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")

import argparse  # noqa: E402
import datetime  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from _common import (  # noqa: E402 (benchmarks/ is on sys.path)
    fmt_met, git_state, load_average, load_fashion_mnist, machine_info, machine_line,
    proc_status_kib, publish, reset_peak)

HERE = Path(__file__).resolve().parent
JSON_PATH = HERE / "results_random_features.json"
MD_PATH = HERE / "RESULTS.md"
SECTION = "## Random features (bench_random_features.py)"
SEED = 0
GAMMA_FM, GAMMA_SYN, D_SYN = 0.02, 1.0 / 40, 20
ALPHA_FM = 0.01  # bench_ridge.py's alpha for this kernel on Fashion-MNIST
ALPHA_NTK = 0.1
FULL = {"n_a": 2000, "D_a": (256, 1024, 4096, 16_384), "seeds_a": 5,
        "n_b": 60_000, "D_b": 8192, "repeats_b": 3,
        "n_c": 60_000, "n_test": 10_000, "D_c": (4096, 8192, 16_384),
        "n_d": 10_000, "D_d": (1024, 4096, 8192)}
QUICK = {"n_a": 300, "D_a": (64, 256), "seeds_a": 2,
         "n_b": 3000, "D_b": 2048, "repeats_b": 2,
         "n_c": 3000, "n_test": 2000, "D_c": (256, 512, 1024),
         "n_d": 1000, "D_d": (256, 1024)}
METHODS_A = ("RBFSampler", "iid sin/cos", "ORF", "SORF")


def fm_subset(n, seed=SEED):
    Xa, ya, Xt, yt = load_fashion_mnist()
    if n < len(ya):
        idx = np.sort(np.random.RandomState(seed).choice(len(ya), n, replace=False))
        Xa, ya = Xa[idx], ya[idx]
    return Xa, ya, Xt, yt


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def median_time(fn, repeats):
    """Median of ``repeats`` calls after one warm-up call (Numba compiles lazily)."""
    fn()
    times = []
    for _ in range(repeats):
        gc.collect()
        times.append(timed(fn)[1])
    return float(np.median(times)), times


def check_gamma_convention(X, gamma):
    """kernelkit's RBF(gamma) and scikit-learn's rbf_kernel(gamma) (RBFSampler's kernel)."""
    from sklearn.metrics.pairwise import rbf_kernel

    from kernelkit.kernels import RBF

    diff = float(np.abs(RBF(gamma=gamma)(X) - rbf_kernel(X, gamma=gamma)).max())
    if diff > 1e-10:
        raise SystemExit(f"kernelkit's gamma is not scikit-learn's (max diff {diff:.2e}): "
                         "convert before comparing.")
    return diff


def feature_map(method, D, gamma, seed):
    from sklearn.kernel_approximation import RBFSampler

    from kernelkit import RandomFourierFeatures

    if method == "RBFSampler":
        return RBFSampler(gamma=gamma, n_components=D, random_state=seed)
    sampling = {"iid sin/cos": "iid", "ORF": "orthogonal", "SORF": "structured"}[method]
    return RandomFourierFeatures(D, gamma=gamma, sampling=sampling, random_state=seed)


# ------------------------------------------------------------------------ parts
def part_a(cfg):
    from kernelkit.kernels import RBF

    n = cfg["n_a"]
    X_fm = fm_subset(n)[0]
    X_syn = np.random.default_rng(SEED).standard_normal((n, D_SYN))
    rows = []
    for data, X, gamma in (("Fashion-MNIST", X_fm, GAMMA_FM), ("synthetic 20-D", X_syn,
                                                                 GAMMA_SYN)):
        diff = check_gamma_convention(X[:200], gamma)
        K = RBF(gamma=gamma)(X)
        K_norm = np.linalg.norm(K)
        for D in cfg["D_a"]:
            for method in METHODS_A:
                errs = []
                for seed in range(cfg["seeds_a"]):
                    Z = feature_map(method, D, gamma, seed).fit_transform(X)
                    G = Z @ Z.T
                    G -= K
                    errs.append(float(np.linalg.norm(G) / K_norm))
                    del Z, G
                rows.append({"data": data, "d": X.shape[1], "gamma": gamma, "D": D,
                             "method": method, "error": float(np.median(errs)),
                             "errors": errs, "gamma_check_max_diff": diff})
                print(f"  {rows[-1]}", flush=True)
    return rows


def part_b(cfg):
    from sklearn.kernel_approximation import RBFSampler

    from kernelkit import RandomFourierFeatures

    X = fm_subset(cfg["n_b"])[0]
    D, reps = cfg["D_b"], cfg["repeats_b"]
    rows = []
    for dtype in (np.float64, np.float32):
        Xd = X.astype(dtype)
        for name, est in (("RBFSampler.transform", RBFSampler(gamma=GAMMA_FM, n_components=D,
                                                               random_state=SEED)),
                          ("kernelkit SORF transform", RandomFourierFeatures(
                              D, gamma=GAMMA_FM, sampling="structured", random_state=SEED))):
            est.fit(Xd)
            t, times = median_time(lambda: est.transform(Xd), reps)
            rows.append({"model": name, "dtype": np.dtype(dtype).name, "n": len(Xd),
                         "d": Xd.shape[1], "D": D, "time_s": t, "times": times})
            print(f"  {rows[-1]}", flush=True)
            gc.collect()
    return rows


def falkon_centers(D, n):
    """``M`` with ``n M 4 + M^2 b = 8 D^2`` (b = 4 bytes from 8,192 centers, else 8)."""
    target = 8.0 * D * D
    for b in (4.0, 8.0):
        m = (-4.0 * n + math.sqrt(16.0 * n * n + 4 * b * target)) / (2 * b)
        if (b == 4.0) == (m >= 8192):
            return int(round(m))
    return int(round(m))


def case(spec):
    """Run in a fresh subprocess: load data, reset the peak, fit, score."""
    from kernelkit import RandomFeaturesClassifier, RandomFourierFeatures
    from kernelkit.ridge import FalkonClassifier

    X, y, Xt, yt = fm_subset(spec["n"])
    Xt, yt = Xt[:spec["n_test"]], yt[:spec["n_test"]]
    if spec["kind"] == "features":
        est = RandomFeaturesClassifier(RandomFourierFeatures(
            spec["D"], gamma=GAMMA_FM, sampling="structured"), alpha=ALPHA_FM,
            random_state=SEED, calibration=None)
    else:
        est = FalkonClassifier(alpha=ALPHA_FM, gamma=GAMMA_FM, n_centers=spec["m"],
                               tol=1e-3, random_state=SEED, calibration=None)
    gc.collect()
    reset = reset_peak()
    rss0 = proc_status_kib("VmRSS") * 1024
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, fit_s = timed(lambda: est.fit(X, y))
        acc = float(np.mean(est.predict(Xt) == yt))
    return {**spec, "fit_s": fit_s, "accuracy": acc,
            "peak_gb": proc_status_kib("VmHWM") / 2**20, "rss_before_fit_gb": rss0 / 2**30,
            "peak_reset": reset, "data_gb": (X.nbytes + Xt.nbytes) / 2**30}


def run(spec):
    proc = subprocess.run([sys.executable, __file__, "--_case", json.dumps(spec)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"  case {spec} failed:\n{proc.stderr[-2000:]}", flush=True)
        return {**spec, "failed": proc.stderr[-500:]}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"  {out}", flush=True)
    return out


def part_c(cfg):
    base = {"n": cfg["n_c"], "n_test": cfg["n_test"]}
    rows = []
    for D in cfg["D_c"]:
        rows.append(run({**base, "kind": "features", "D": D}))
        rows.append(run({**base, "kind": "falkon", "D": D,
                         "m": min(cfg["n_c"], falkon_centers(D, cfg["n_c"]))}))
    return rows


def part_d(cfg):
    from kernelkit import NTKRandomFeatures, NTKRidgeClassifier, RandomFeaturesClassifier

    X, y, Xt, yt = fm_subset(cfg["n_d"])
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exact, t = timed(lambda: NTKRidgeClassifier(alpha=ALPHA_NTK, depth=1,
                                                    random_state=SEED).fit(X, y))
        rows.append({"model": "NTKRidgeClassifier (exact NTK)", "D": None, "fit_s": t,
                     "accuracy": float(np.mean(exact.predict(Xt) == yt))})
        print(f"  {rows[-1]}", flush=True)
        for D in cfg["D_d"]:
            est = RandomFeaturesClassifier(NTKRandomFeatures(D // 2, n_sketch=D // 2, depth=1),
                                           alpha=ALPHA_NTK, random_state=SEED)
            est, t = timed(lambda: est.fit(X, y))
            rows.append({"model": "NTKRandomFeatures + RandomFeaturesClassifier", "D": D,
                         "fit_s": t, "accuracy": float(np.mean(est.predict(Xt) == yt))})
            print(f"  {rows[-1]}", flush=True)
    return rows


# ------------------------------------------------------------------------ report
def goals(res):
    out = {}
    if res.get("part_a"):
        ok = True
        for r in res["part_a"]:
            if r["method"] in ("ORF", "SORF"):
                peer = next(p for p in res["part_a"] if p["method"] == "RBFSampler"
                            and p["data"] == r["data"] and p["D"] == r["D"])
                ok &= r["error"] < peer["error"]
        out["a"] = ok
    if res.get("part_b"):
        sk = next(r for r in res["part_b"] if r["dtype"] == "float64"
                  and r["model"].startswith("RBF"))
        us = next(r for r in res["part_b"] if r["dtype"] == "float64"
                  and r["model"].startswith("kernelkit"))
        out["b_ratio"] = sk["time_s"] / us["time_s"]
        out["b"] = out["b_ratio"] >= 3.0
    if res.get("part_c"):
        big = [r for r in res["part_c"] if r["kind"] == "features" and r["D"] == 16_384]
        out["c"] = None if not big or "failed" in big[0] else big[0]["peak_gb"] < 3.0
    return out


def render(res):
    cfg, g = res["config"], goals(res)
    L = [SECTION, "",
         machine_line(res["machine"], (res["loadavg_before"], res["loadavg_after"]),
                      res["timestamp"], res["git"]["commit"]),
         "Gaussian kernel exp(-gamma ||x - y||^2): kernelkit's gamma equals scikit-learn's "
         "(checked on the data: max difference of the two kernel matrices below 1e-10), "
         "so no conversion.", ""]
    if res.get("part_a"):
        L += [f"### (a) Kernel approximation error ||ZZ^T - K||_F / ||K||_F "
              f"(n = {cfg['n_a']:,}, median of {cfg['seeds_a']} seeds)", ""]
        for data in dict.fromkeys(r["data"] for r in res["part_a"]):
            rr = [r for r in res["part_a"] if r["data"] == data]
            L += [f"{data} (d = {rr[0]['d']}, gamma = {rr[0]['gamma']:.4g}):", "",
                  "| D | " + " | ".join(METHODS_A) + " |", "|---:|" + "---:|" * len(METHODS_A)]
            for D in cfg["D_a"]:
                err = {r["method"]: r["error"] for r in rr if r["D"] == D}
                L.append(f"| {D:,} | " + " | ".join(f"{err[m]:.4f}" for m in METHODS_A)
                         + " |")
            L.append("")
        L += [f"Goal (ORF and SORF below RBFSampler at every D): {fmt_met(g['a'])}.", ""]
    if res.get("part_b"):
        L += [f"### (b) Transform time, n = {cfg['n_b']:,}, d = 784, D = {cfg['D_b']:,} "
              f"(median of {cfg['repeats_b']} after a warm-up)", "",
              "| transform | dtype | time (s) |", "|---|---|---:|"]
        L += [f"| {r['model']} | {r['dtype']} | {r['time_s']:.2f} |" for r in res["part_b"]]
        L += ["", f"RBFSampler / SORF (float64): {g['b_ratio']:.2f}x; goal (>= 3x): "
              f"{fmt_met(g['b'])}.", ""]
    if res.get("part_c"):
        L += [f"### (c) Fashion-MNIST, n = {cfg['n_c']:,}, {cfg['n_test']:,} test: "
              "random features vs FALKON at equal memory", "",
              f"gamma = {GAMMA_FM}, alpha = {ALPHA_FM} for both; RandomFeaturesClassifier "
              "on SORF features; FalkonClassifier (uniform centers, tol 1e-3); both with "
              "`calibration=None` (accuracy only: the probability calibration adds a "
              "leave-one-out pass over the features, a held-out solve to FALKON), FALKON "
              "with M centers such that its "
              "float32 K_nM plus its M x M factor array (float32 from 8,192 centers) take "
              "the bytes of the features' float64 D x D Gram. Each fit in a fresh "
              "subprocess; peak = VmHWM after loading the data (data included), in GB of "
              "2^30 bytes as in the other sections.", "",
              "| model | D | centers | accuracy | fit (s) | peak (GB) |",
              "|---|---:|---:|---:|---:|---:|"]
        for r in res["part_c"]:
            name = ("RandomFeaturesClassifier (SORF)" if r["kind"] == "features"
                    else "FalkonClassifier")
            if "failed" in r:
                L.append(f"| {name} | {r['D']:,} | {r.get('m', '')} | failed | | |")
                continue
            L.append(f"| {name} | {r['D']:,} | {r.get('m', '')} | {r['accuracy']:.4f} | "
                     f"{r['fit_s']:.1f} | {r['peak_gb']:.2f} |")
        L += ["", f"Goal (D = 16,384 fits in < 3 GB): {fmt_met(g.get('c'))}.", ""]
    if res.get("part_d"):
        L += [f"### (d) NTK random features vs exact NTK ridge (n = {cfg['n_d']:,}, depth 1, "
              f"relu, alpha = {ALPHA_NTK})", "",
              "| model | D | accuracy | fit (s) |", "|---|---:|---:|---:|"]
        for r in res["part_d"]:
            D = "exact" if r["D"] is None else f"{r['D']:,}"
            L.append(f"| {r['model']} | {D} | {r['accuracy']:.4f} | {r['fit_s']:.1f} |")
        L.append("")
    L += [f"Raw numbers: `benchmarks/{JSON_PATH.name}`.", ""]
    return "\n".join(L)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes; write no files")
    parser.add_argument("--parts", default="a,b,c,d", help="comma-separated parts to run")
    parser.add_argument("--_case", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._case:
        print(json.dumps(case(json.loads(args._case))))
        return
    cfg = QUICK if args.quick else FULL
    t_start = time.perf_counter()
    res = {"timestamp": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
           "quick": args.quick, "config": cfg, "seed": SEED,
           "loadavg_before": load_average(), "machine": machine_info(), "git": git_state()}
    if JSON_PATH.exists() and not args.quick:  # keep parts not rerun
        old = json.loads(JSON_PATH.read_text())
        res.update({k: v for k, v in old.items() if k.startswith("part_")})
    parts = {"a": part_a, "b": part_b, "c": part_c, "d": part_d}
    for p in args.parts.split(","):
        print(f"part ({p})", flush=True)
        res[f"part_{p}"], res[f"wall_{p}_s"] = timed(lambda: parts[p](cfg))
        print(f"  part ({p}): {res[f'wall_{p}_s']:.1f} s", flush=True)
        res["loadavg_after"] = load_average()
        if not args.quick:
            JSON_PATH.write_text(json.dumps(res, indent=2, default=float) + "\n")
    res["wall_s"] = time.perf_counter() - t_start
    section = render(res)
    publish(section, args.quick, MD_PATH, SECTION, JSON_PATH)
    print(f"wall time {res['wall_s']:.1f} s")


if __name__ == "__main__":
    main()
