"""Benchmark: kernel thinning (KT, Compress++), kernelkit vs goodpoints.

Compares, in one process on the same inputs and seeds, kernelkit's
:func:`kernelkit.thinning.kernel_thinning` (numba engine) with the authors'
reference implementation, the ``goodpoints`` package (Cython):

* target KT: kernelkit ``kernel_thinning(X, gamma=g)`` vs ``goodpoints.kt.thin(X, m,
  k, k, delta=0.5, seed=s)`` (split and swap with the target kernel ``k``);
* Compress++ with oversampling ``g = 4`` and KT halving: kernelkit
  ``kernel_thinning(X, compress="compress++", g=4)`` vs
  ``goodpoints.compress.compresspp_kt(X, b"gaussian", k_params=[1/g], g=4, seed=s)``.

Data: standard normal ``X`` in d = 2 and d = 10 (seed ``s`` for replicate ``s``), the
Gaussian kernel ``exp(-gamma ||x - y||^2)`` with ``gamma = 1 / (4 d)`` (bandwidth
``sigma^2 = 2 d`` as in the papers), ``sqrt(n)`` output points (``m = log4 n``
halving rounds), ``delta = 0.5``. Quality: the MMD of each coreset to the input
(``kernelkit.metrics.mmd``, exact, n <= 4^7) and to the distribution ``P = N(0, I_d)``
(closed form: ``PPk = (1 + 4 gamma)^(-d/2)``, ``Pk(x) = (1 + 2 gamma)^(-d/2)
exp(-gamma |x|^2 / (1 + 2 gamma))``), mean +- sd over the seeds, next to an i.i.d.
subsample of the same size. Timing: wall time of each call (kernelkit's first,
compiling call on a small input is excluded), the two libraries alternating call by
call on the same inputs; medians and ratios ``goodpoints / kernelkit``.

Goals: MMD equal to goodpoints' or better within noise
(``mean_kk <= mean_gp + 2 se``); KT >= 5x faster than ``kt.thin`` at n = 4^7 (d = 2
and 10); Compress++ >= 2x faster than ``compresspp_kt`` at n = 4^9; Compress++ at
n = 4^10 in under 2 minutes (goodpoints' ``compresspp_kt`` takes about 390 s there,
quoted from an earlier measurement; ``--gp-4-10`` runs it).

Also a real data set: Fashion-MNIST (Debian package ``dataset-fashion-mnist``; the
scikit-learn digits when absent), 784 pixels scaled to [0, 1] and reduced to 50
principal components, n = 4^7 training images: KT and Compress++ coresets against
an i.i.d. subsample and k-means centres of the same count (equal weights, and
weighted by cluster size), Gaussian kernel with the median-distance bandwidth.

Usage::

    python benchmarks/bench_thinning.py           # full run (about 15 minutes on 2 cores);
                                                  # writes results_thinning.json and the
                                                  # section in RESULTS.md
    python benchmarks/bench_thinning.py --quick   # small sizes, prints only
"""

import argparse
import datetime
import gc
import json
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")  # SkylakeX DSYRK crashes on large inputs

import numpy as np
from _common import (  # noqa: E402
    FMNIST_DIR,
    MD_HEADER,
    fmt_met,
    load_fashion_mnist,
    machine_info,
    write_section,
)

HERE = Path(__file__).resolve().parent
JSON_PATH = HERE / "results_thinning.json"
MD_PATH = HERE / "RESULTS.md"
SECTION = "## Kernel thinning (bench_thinning.py)"
DELTA = 0.5
G = 4
KT_SPEEDUP, CPP_SPEEDUP, CPP_4_10_SECONDS = 5.0, 2.0, 120.0

# (case, log4 n, d, seeds for kernelkit, seeds for goodpoints) of the full run; goodpoints'
# KT at 4^8 (~3 min a call) and Compress++ at 4^10 (~6.5 min) are left out to keep the
# run near 15 minutes (--gp-large adds KT at 4^8 for d = 2, --gp-4-10 Compress++ at 4^10).
FULL = [("kt", 6, 2, 10, 10), ("kt", 6, 10, 10, 10), ("kt", 7, 2, 3, 3), ("kt", 7, 10, 2, 2),
        ("kt", 8, 2, 1, 0), ("kt", 8, 10, 1, 0),
        ("cpp", 7, 2, 10, 10), ("cpp", 7, 10, 10, 10), ("cpp", 8, 2, 3, 3), ("cpp", 8, 10, 2, 2),
        ("cpp", 9, 2, 2, 2), ("cpp", 9, 10, 1, 0), ("cpp", 10, 2, 2, 0), ("cpp", 10, 10, 1, 0)]
QUICK = [("kt", 5, 2, 3, 3), ("kt", 6, 10, 2, 2), ("cpp", 6, 2, 3, 3), ("cpp", 7, 10, 2, 2)]


# ------------------------------------------------------------------- helpers

def gauss_mmd_to_p(X, idx, gamma):
    """MMD between P = N(0, I_d) and the equal-weight coreset X[idx], in closed form."""
    C = X[idx]
    d = X.shape[1]
    sq = np.sum(C * C, axis=1)
    pk = (1 + 2 * gamma) ** (-d / 2) * np.exp(-gamma * sq / (1 + 2 * gamma))
    d2 = sq[:, None] + sq[None, :] - 2 * C @ C.T
    kqq = np.exp(-gamma * np.maximum(d2, 0.0)).mean()
    return math.sqrt(max((1 + 4 * gamma) ** (-d / 2) - 2 * pk.mean() + kqq, 0.0))


def mmd_to_input(X, idx, gamma):
    from kernelkit.metrics import mmd

    return mmd(X, X[idx], gamma=gamma, backend="numba")


def stats(values):
    v = np.asarray([x for x in values if x is not None and not math.isnan(x)], dtype=float)
    if v.size == 0:
        return None
    return {"mean": float(v.mean()), "sd": float(v.std(ddof=1)) if v.size > 1 else 0.0,
            "median": float(np.median(v)), "n": int(v.size), "values": v.tolist()}


def within_noise(kk, gp):
    """kernelkit's mean MMD is at most goodpoints' plus twice the standard error."""
    if kk is None or gp is None:
        return None
    se = math.sqrt(kk["sd"] ** 2 / kk["n"] + gp["sd"] ** 2 / gp["n"])
    return kk["mean"] <= gp["mean"] + 2 * se


def run_kk(case, X, gamma, seed):
    from kernelkit.thinning import kernel_thinning

    # KT pinned: the default compress="auto" runs Compress++ above 8,192 points
    kw = {"compress": "compress++", "g": G} if case == "cpp" else {"compress": None}
    gc.collect()
    t0 = time.perf_counter()
    idx = kernel_thinning(X, gamma=gamma, delta=DELTA, backend="numba", random_state=seed, **kw)
    return time.perf_counter() - t0, idx


def run_gp(case, X, gamma, seed, m):
    from goodpoints import compress, kt

    def k(y, Z):
        return np.exp(-gamma * np.sum((y - Z) ** 2, axis=1))

    gc.collect()
    t0 = time.perf_counter()
    if case == "kt":
        idx = kt.thin(X, m, k, k, delta=DELTA, seed=seed)
    else:
        idx = compress.compresspp_kt(X, b"gaussian", k_params=np.array([1.0 / gamma]), g=G,
                                     delta=DELTA, seed=seed)
    return time.perf_counter() - t0, np.asarray(idx)


# ---------------------------------------------------------------------- parts
def bench_synthetic(plan, with_gp):
    from kernelkit.thinning import kernel_thinning

    # compile the Numba loops and kernels first (cached on disk afterwards)
    Xw = np.random.default_rng(0).standard_normal((4096, 2))
    kernel_thinning(Xw, random_state=0)
    kernel_thinning(Xw, compress="compress++", g=1, random_state=0)
    rows = []
    for case, k, d, seeds_kk, seeds_gp in plan:
        n, m, gamma = 4**k, k, 1.0 / (4 * d)
        seeds_gp = seeds_gp if with_gp else 0
        res = {"case": case, "log4_n": k, "n": n, "d": d, "gamma": gamma, "m": m,
               "kk": {"time": [], "mmd_p": [], "mmd_in": [], "size": []},
               "gp": {"time": [], "mmd_p": [], "mmd_in": [], "size": []},
               "iid": {"mmd_p": [], "mmd_in": []}, "load_before": os.getloadavg()[0]}
        t_case = time.perf_counter()
        for seed in range(max(seeds_kk, seeds_gp)):
            X = np.random.default_rng(seed).standard_normal((n, d))
            order = [("kk", seed < seeds_kk), ("gp", seed < seeds_gp)]
            if seed % 2:
                order.reverse()  # alternate who goes first
            for who, run in order:
                if not run:
                    continue
                if who == "kk":
                    t, idx = run_kk(case, X, gamma, seed)
                else:
                    t, idx = run_gp(case, X, gamma, seed, m)
                r = res[who]
                r["time"].append(t)
                r["size"].append(int(len(idx)))
                r["mmd_p"].append(gauss_mmd_to_p(X, idx, gamma))
                r["mmd_in"].append(mmd_to_input(X, idx, gamma) if k <= 7 else None)
            iid = np.random.default_rng(10_000 + seed).choice(n, 2**k, replace=False)
            res["iid"]["mmd_p"].append(gauss_mmd_to_p(X, iid, gamma))
            res["iid"]["mmd_in"].append(mmd_to_input(X, iid, gamma) if k <= 7 else None)
        res["wall_s"] = time.perf_counter() - t_case
        res["load_after"] = os.getloadavg()[0]
        for who in ("kk", "gp"):
            r = res[who]
            r["time_median"] = float(np.median(r["time"])) if r["time"] else None
            for key in ("mmd_p", "mmd_in"):
                r[key + "_stats"] = stats(r[key])
        for key in ("mmd_p", "mmd_in"):
            res["iid"][key + "_stats"] = stats(res["iid"][key])
        kk_t, gp_t = res["kk"]["time_median"], res["gp"]["time_median"]
        res["ratio"] = gp_t / kk_t if kk_t and gp_t else None
        key = "mmd_in" if k <= 7 else "mmd_p"
        res["quality_metric"] = key
        res["mmd_within_noise"] = within_noise(res["kk"][key + "_stats"],
                                               res["gp"][key + "_stats"])
        target, met = None, None
        if case == "kt" and k == 7 and res["ratio"] is not None:
            target, met = f">= {KT_SPEEDUP:g}x", res["ratio"] >= KT_SPEEDUP
        elif case == "cpp" and k == 9 and res["ratio"] is not None:
            target, met = f">= {CPP_SPEEDUP:g}x", res["ratio"] >= CPP_SPEEDUP
        elif case == "cpp" and k == 10:
            target, met = f"< {CPP_4_10_SECONDS:g} s", kk_t < CPP_4_10_SECONDS
        res["target"], res["met"] = target, met
        rows.append(res)
        print(format_row(res), flush=True)
    return rows


def load_real(n, rng):
    """n rows of Fashion-MNIST (50 principal components), or of the digits as a fallback."""
    from sklearn.decomposition import PCA

    if (FMNIST_DIR / "train-images-idx3-ubyte.gz").exists():
        X = load_fashion_mnist()[0]
        name = f"Fashion-MNIST train ({X.shape[0]} images, 28x28)"
    else:
        from sklearn.datasets import load_digits

        X = load_digits().data
        name = "scikit-learn digits (dataset-fashion-mnist not installed)"
    X = X.astype(np.float64) / X.max()
    Z = PCA(n_components=50, svd_solver="randomized", random_state=0).fit_transform(X)
    take = rng.choice(len(Z), min(n, len(Z)), replace=False)
    return name, Z[take]


def bench_real(n, seeds):
    from sklearn.cluster import KMeans

    from kernelkit.metrics import mmd
    from kernelkit.thinning import kernel_thinning

    name, X = load_real(n, np.random.default_rng(0))
    n = len(X)
    sub = X[np.random.default_rng(1).choice(n, min(n, 2000), replace=False)]
    d2 = np.sum((sub[:, None, :] - sub[None, :, :]) ** 2, axis=-1)
    med = float(np.sqrt(np.median(d2[np.triu_indices(len(sub), 1)])))
    gamma = 1.0 / (2.0 * med**2)
    out = {"data": name, "n": n, "d": X.shape[1], "gamma": gamma, "median_distance": med,
           "methods": {}}
    methods = {"KT (kernelkit)": {"compress": None}, "Compress++ g=4 (kernelkit)": {"compress": "compress++",
                                                                    "g": G}}
    for label, kw in methods.items():
        vals, times, size = [], [], None
        for seed in range(seeds):
            t0 = time.perf_counter()
            idx = kernel_thinning(X, gamma=gamma, random_state=seed, **kw)
            times.append(time.perf_counter() - t0)
            vals.append(mmd(X, X[idx], gamma=gamma))
            size = len(idx)
        out["methods"][label] = {"mmd": stats(vals), "time_median": float(np.median(times)),
                                 "size": size}
    q = out["methods"]["KT (kernelkit)"]["size"]
    vals = [mmd(X, X[np.random.default_rng(seed).choice(n, q, replace=False)], gamma=gamma)
            for seed in range(max(seeds, 10))]
    out["methods"]["i.i.d. subsample"] = {"mmd": stats(vals), "size": q}
    for weighted in (False, True):
        vals, times = [], []
        for seed in range(seeds):
            t0 = time.perf_counter()
            km = KMeans(n_clusters=q, n_init=1, random_state=seed).fit(X)
            times.append(time.perf_counter() - t0)
            w = np.bincount(km.labels_, minlength=q) if weighted else None
            vals.append(mmd(X, km.cluster_centers_, gamma=gamma, weights_Y=w))
        label = "k-means centres, weighted by cluster size" if weighted else "k-means centres"
        out["methods"][label] = {"mmd": stats(vals), "time_median": float(np.median(times)),
                                 "size": q}
    return out


# --------------------------------------------------------------------- report
def fmt_stat(s, digits=2):
    if s is None:
        return "—"
    return f"{s['mean']:.{digits}e} ± {s['sd']:.1e}"


def fmt_ratio(r):
    return "—" if r is None else f"{r:.1f}x"



def format_row(r):
    kk, gp = r["kk"]["time_median"], r["gp"]["time_median"]
    key = r["quality_metric"]
    return (f"{r['case']:>3} n=4^{r['log4_n']} d={r['d']:<2} kk {kk:8.2f}s "
            f"gp {gp if gp is None else round(gp, 2)!s:>8}s ratio "
            f"{fmt_ratio(r['ratio']):>6} | {key}: kk "
            f"{fmt_stat(r['kk'][key + '_stats'])} gp {fmt_stat(r['gp'][key + '_stats'])} iid "
            f"{fmt_stat(r['iid'][key + '_stats'])} | within noise "
            f"{fmt_met(r['mmd_within_noise'])} | target {r['target']} {fmt_met(r['met'])}")


def render_markdown(res):
    info = res["machine"]
    v = info["versions"]
    lines = [SECTION, "",
             f"Run {res['timestamp']} on {info['cpu_model']}, {info['cpu_count']} cores, "
             f"{info['memory_gib']:.0f} GiB; numpy {v['numpy']}, scipy {v['scipy']}, "
             f"scikit-learn {v['scikit-learn']}, numba {v['numba']}, goodpoints "
             f"{v['goodpoints']}; BLAS: {', '.join(info['blas_summary'])}; working_memory "
             f"{info['working_memory_mib']} MiB. Load average (1 min) before/after: "
             f"{res['loadavg_before']} / {res['loadavg_after']}; total {res['wall_s']:.0f} s.",
             ""]
    if max(res["loadavg_before"][0], res["loadavg_after"][0]) > 0.5 * info["cpu_count"]:
        lines += ["**Note:** other processes were running on the machine during this run (see "
                  "the load average): absolute times are noisy; the two libraries alternate "
                  "call by call on the same inputs, so their ratios are comparable.", ""]
    lines += [
             "Standard normal X (seed s for replicate s), Gaussian kernel exp(-gamma |x-y|^2) "
             "with gamma = 1/(4d), sqrt(n) output points, delta = 0.5; kernelkit's numba "
             "engine against goodpoints (`kt.thin` with the target kernel for split and "
             "swap; `compresspp_kt` with g = 4), the two alternating call by call on the "
             "same inputs. Time: median wall time of a call (kernelkit's compile excluded); "
             "ratio = goodpoints / kernelkit. MMD: mean ± sd over the seeds, to the input "
             "(exact, n <= 4^7) or, for larger n, to P = N(0, I) in closed form; i.i.d. = "
             "a uniform subsample of the same size. 'Within noise': kernelkit's mean MMD "
             "<= goodpoints' + 2 standard errors. Goodpoints' KT at 4^8 (about 4x its 4^7 "
             "time) and Compress++ at 4^10 (about 390 s in an earlier measurement) are not run by default "
             "(`--gp-large`, `--gp-4-10`).", "",
             "| method | n | d | seeds kk/gp | kernelkit (s) | goodpoints (s) | ratio | "
             "MMD kernelkit | MMD goodpoints | MMD i.i.d. | MMD within noise | goal | met? |",
             "|---|---|---:|---|---:|---:|---:|---|---|---|---|---|---|"]
    for r in res["synthetic"]:
        key = r["quality_metric"]
        gp_t = r["gp"]["time_median"]
        name = "KT (target)" if r["case"] == "kt" else f"Compress++ g={G}"
        lines.append(
            f"| {name} | 4^{r['log4_n']} | {r['d']} | {len(r['kk']['time'])}/"
            f"{len(r['gp']['time'])} | {r['kk']['time_median']:.2f} | "
            f"{'—' if gp_t is None else f'{gp_t:.2f}'} | "
            f"{fmt_ratio(r['ratio'])} | "
            f"{fmt_stat(r['kk'][key + '_stats'])} | {fmt_stat(r['gp'][key + '_stats'])} | "
            f"{fmt_stat(r['iid'][key + '_stats'])} | {fmt_met(r['mmd_within_noise'])} | "
            f"{r['target'] or '—'} | {fmt_met(r['met'])} |")
    lines += ["", "MMD in the table: to the input for n <= 4^7, to P beyond. Both, for every "
              "row, are in the JSON file."]
    real = res.get("real")
    if real:
        lines += ["", f"Real data: {real['data']}, 50 principal components of the pixels "
                  f"scaled to [0, 1], n = {real['n']} images drawn at random; Gaussian kernel "
                  f"with the median-distance bandwidth (median {real['median_distance']:.3g}, "
                  f"gamma = {real['gamma']:.3g}). MMD to the n images, mean ± sd over seeds:",
                  "", "| method | points | MMD | time (s) |", "|---|---:|---|---:|"]
        for label, m in real["methods"].items():
            t = m.get("time_median")
            lines.append(f"| {label} | {m['size']} | {fmt_stat(m['mmd'])} | "
                         f"{'—' if t is None else f'{t:.2f}'} |")
    lines += ["", "Raw numbers: `benchmarks/results_thinning.json`.", ""]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and few seeds, no real data; prints only")
    parser.add_argument("--no-goodpoints", action="store_true",
                        help="kernelkit only (goodpoints not installed or not wanted)")
    parser.add_argument("--gp-large", action="store_true",
                        help="also goodpoints' KT at n = 4^8, d = 2 (about 3 minutes a call)")
    parser.add_argument("--gp-4-10", action="store_true",
                        help="also goodpoints' Compress++ at n = 4^10, d = 2 (about 6.5 minutes)")
    args = parser.parse_args(argv)
    with_gp = not args.no_goodpoints
    if with_gp:
        try:
            import goodpoints  # noqa: F401
        except ImportError:
            sys.exit("goodpoints is not installed: pip install goodpoints, or --no-goodpoints")
    plan = list(QUICK if args.quick else FULL)
    if args.gp_large:
        plan = [(c, k, d, s, 1 if (c, k, d) == ("kt", 8, 2) else g) for c, k, d, s, g in plan]
    if args.gp_4_10:
        plan = [(c, k, d, s, 1 if (c, k, d) == ("cpp", 10, 2) else g) for c, k, d, s, g in plan]
    t0 = time.perf_counter()
    res = {"timestamp": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
           "quick": args.quick, "delta": DELTA, "g": G,
           "loadavg_before": [round(x, 2) for x in os.getloadavg()],
           "machine": machine_info(peers=("goodpoints",))}
    res["synthetic"] = bench_synthetic(plan, with_gp)
    if not args.quick:
        res["real"] = bench_real(4**7, 3)
        for label, m in res["real"]["methods"].items():
            print(f"real: {label:<45} {m['size']:>5} points MMD {fmt_stat(m['mmd'])}")
    res["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    res["wall_s"] = time.perf_counter() - t0
    print(f"\ntotal wall time {res['wall_s']:.0f} s")
    if args.quick:
        return
    JSON_PATH.write_text(json.dumps(res, indent=1, default=float) + "\n")
    write_section(MD_PATH, SECTION, MD_HEADER, render_markdown(res))
    print(f"wrote {JSON_PATH.relative_to(HERE.parent)} and {MD_PATH.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
