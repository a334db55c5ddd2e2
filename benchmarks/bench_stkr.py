"""Benchmark: STKR against LabelSpreading and labeled-only kernel ridge, on few labels.

Parts, run side by side in one invocation (same data, same label draws per seed):

(a) digits: all 1,797 images scaled to [0, 1]; 1% / 5% / 10% of them labeled (a random
    draw per seed), transductive accuracy on all rows. Methods, each tuned by 3-fold
    cross-validation on the labeled rows only (``SemiSupervisedKFold``: every unlabeled
    row stays in every training fold; scores on held-out labeled rows):
      - STKR: ``STKRClassifier(kernel="knn", transformation="inverse_laplacian")`` over
        ``n_neighbors`` x ``eta``;
      - ``sklearn.semi_supervised.LabelSpreading(kernel="rbf")`` over ``gamma``, plus its
        best gamma in hindsight (max over the grid of the transductive accuracy);
      - kernel ridge on the labeled rows only (``kernelkit.KernelRidgeClassifier``, rbf)
        over ``gamma`` x ``alpha`` (folds of the labeled rows).
(b) Fashion-MNIST: the first 10,000 training images as the training rows, 1% / 5% / 10%
    labeled, accuracy on the 10,000 official test images (inductive predictions).
    STKR with an rbf base kernel (gamma 0.02, precomputed once) and ``s = mu^2``,
    ``beta`` tuned as in (a); STKR on the kNN graph at fixed ``n_neighbors=10``,
    ``eta=0.99`` (a cross-validation would rebuild the graph per fold); labeled-only
    kernel ridge tuned as in (a); LabelSpreading (rbf, gamma 0.02, untuned, one fit
    per rate) for its fit time beside STKR's.
(c) CG against Richardson (the paper's iteration) at the same tolerance, for the
    polynomial (``s = mu^8``) and inverse-Laplacian transforms: steps, kernel products,
    time (digits 5%, kNN; Fashion-MNIST 10k 5%, kNN).
(d) Time per solver step and peak memory against n = 10^4 ... 10^5 (synthetic: 10
    Gaussian clusters in 10 dimensions): kNN graph (sparse products, linear in n) and
    a dense rbf kernel evaluated blockwise on the fly (``cache_size=0``: quadratic in n,
    memory bounded by ``working_memory``).

(e) Speed (the default fit): ``STKRClassifier()`` (kNN graph, k=7, inverse Laplacian,
    5-fold calibration) against ``LabelSpreading(kernel="knn", n_neighbors=8)`` (the
    same graph: scikit-learn counts the point itself) on the first 10,000 and all
    60,000 Fashion-MNIST training rows, 5% labeled, accuracy on the 10,000 test
    images beside; the two fits alternate, repeated, medians and the median of the
    per-repeat time ratios. Also the graph alone, fast search against the former
    brute force (``kernelkit.stkr._graph_brute``), on 20,000 points in 5-D and on
    10,000 Fashion-MNIST rows.

The machine is shared: the 1-minute load average is recorded next to each part.

Usage::

    python benchmarks/bench_stkr.py            # full run; writes results_stkr.json and
                                               # the STKR section of RESULTS.md
    python benchmarks/bench_stkr.py --quick    # small sizes, 1 seed, prints only
    python benchmarks/bench_stkr.py --parts speed --speed-sizes 10000,60000
    python benchmarks/bench_stkr.py --seeds 5 --fashion-seeds 2   # reduced
"""

import argparse
import json
import os
import time
import tracemalloc
import warnings
from pathlib import Path

os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")  # SkylakeX DSYRK crashes on large inputs

import numpy as np
from _common import (  # benchmarks/ is on sys.path
    FMNIST_DIR,
    MD_HEADER,
    git_state,
    load_average,
    load_fashion_mnist,
    machine_info,
    machine_line,
    write_section,
)
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold
from sklearn.semi_supervised import LabelSpreading

from kernelkit import KernelRidgeClassifier
from kernelkit.stkr import SemiSupervisedKFold, STKRClassifier, labeled_scorer
from kernelkit.stkr._operator import dense_operator, graph_operator

HERE = Path(__file__).resolve().parent
JSON_PATH = HERE / "results_stkr.json"
MD_PATH = HERE / "RESULTS.md"
SECTION = "## STKR (bench_stkr.py)"
RATES = (0.01, 0.05, 0.10)
STKR_GRID = {"n_neighbors": [5, 10], "eta": [0.99, 0.999]}
LS_GRID = {"gamma": [0.1, 0.2, 0.5, 1.0, 2.0, 5.0]}
KRR_GRID = {"gamma": [0.01, 0.03, 0.1], "alpha": [1e-3, 1e-2, 1e-1, 1.0]}
FASHION_KRR_GRID = {"gamma": [0.01, 0.02, 0.05], "alpha": [1e-2, 1e-1, 1.0]}
FASHION_GAMMA = 0.02
DIGITS_TARGET = {0.01: 88.0, 0.05: 96.0, 0.10: 97.0}
SPEED_GOAL_RATIO, SPEED_GOAL_60K_S = 0.5, 60.0  # at 10,000 rows / all 60,000 rows


def _graph_seconds(X, k=7):
    """Wall time of the default fit's kNN graph alone (scaling, locations, search, W)."""
    from kernelkit.stkr import _graph

    t = time.perf_counter()
    Xs = _graph.scale(X, _graph.max_exponent(X))
    loc, first = _graph.locations(Xs, "numba")
    _graph.normalised_adjacency(_graph.knn_graph(Xs, k, loc, first, "numba")[0])
    return time.perf_counter() - t


def load():
    return load_average()[0]


def draw_labels(y, rate, seed):
    """Labeled row indices: ``rate * n`` rows at random, at least one per class."""
    rng = np.random.default_rng(seed)
    n_lab = max(int(round(rate * len(y))), len(np.unique(y)))
    while True:
        lab = np.sort(rng.choice(len(y), n_lab, replace=False))
        if np.unique(y[lab]).size == np.unique(y).size:
            return lab


def semi(y, lab):
    ys = np.full_like(y, -1)
    ys[lab] = y[lab]
    return ys


def tune(est, grid, X, y, cv, scoring=None):
    search = GridSearchCV(est, grid, cv=cv, scoring=scoring, error_score="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        search.fit(X, y)
    return search.best_estimator_, search.best_params_


def krr_labeled(X, y, lab, grid, seed):
    """Kernel ridge on the labeled rows only, tuned by folds of the labeled rows."""
    counts = np.bincount(y[lab])
    cv = StratifiedKFold(3, shuffle=True, random_state=seed) if counts[counts > 0].min() >= 3 \
        else KFold(3, shuffle=True, random_state=seed)
    return tune(KernelRidgeClassifier(kernel="rbf"), grid, X[lab], y[lab], cv)


def part_digits(seeds, rates):
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    out = {"n": len(y), "seeds": seeds, "load_start": load(), "runs": []}
    for rate in rates:
        for seed in range(seeds):
            lab = draw_labels(y, rate, seed)
            ys = semi(y, lab)
            cv = SemiSupervisedKFold(3, random_state=seed)
            row = {"rate": rate, "seed": seed, "n_labeled": int(lab.size)}
            t = time.perf_counter()
            stkr, p = tune(STKRClassifier(), STKR_GRID, X, ys, cv, labeled_scorer())
            row["stkr"] = float((stkr.transduction_ == y).mean())
            row["stkr_params"] = p
            row["stkr_tune_s"] = time.perf_counter() - t
            t = time.perf_counter()
            ls, p = tune(LabelSpreading(kernel="rbf", max_iter=100), LS_GRID, X, ys, cv,
                         labeled_scorer("accuracy"))
            row["labelspreading"] = float((ls.transduction_ == y).mean())
            row["labelspreading_params"] = p
            row["labelspreading_tune_s"] = time.perf_counter() - t
            hind = []
            for g in LS_GRID["gamma"]:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    m = LabelSpreading(kernel="rbf", gamma=g, max_iter=100).fit(X, ys)
                hind.append(float((m.transduction_ == y).mean()))
            row["labelspreading_hindsight"] = max(hind)
            krr, p = krr_labeled(X, y, lab, KRR_GRID, seed)
            row["krr_labeled"] = float((krr.predict(X) == y).mean())
            row["krr_params"] = p
            out["runs"].append(row)
            print(f"digits {rate:.0%} seed {seed}: STKR {row['stkr']:.4f} LS "
                  f"{row['labelspreading']:.4f} (hindsight {row['labelspreading_hindsight']:.4f})"
                  f" KRR {row['krr_labeled']:.4f}  load {load():.1f}", flush=True)
    out["load_end"] = load()
    return out


def load_fashion(n):
    """The first ``n`` training images and the first ``n`` test images (labels as int64)."""
    Xtr, ytr, Xte, yte = load_fashion_mnist()
    return Xtr[:n], ytr[:n].astype(np.int64), Xte[:n], yte[:n].astype(np.int64)


def part_fashion(seeds, rates, n, labelspreading=True):
    from kernelkit.kernels import resolve_kernel

    X, y, Xte, yte = load_fashion(n)
    out = {"n_train": len(y), "n_test": len(yte), "seeds": seeds, "load_start": load(),
           "runs": [], "labelspreading": []}
    # the rbf base kernel once (train x train, test x train), then kernel="precomputed"
    t = time.perf_counter()
    op = resolve_kernel("rbf", FASHION_GAMMA, n_features=X.shape[1], backend="numba")
    K, Kte = op.block_host(X), op.block_host(Xte, X)
    out["rbf_kernel_s"] = time.perf_counter() - t
    for rate in rates:
        for seed in range(seeds):
            lab = draw_labels(y, rate, seed)
            ys = semi(y, lab)
            cv = SemiSupervisedKFold(3, random_state=seed)
            row = {"rate": rate, "seed": seed, "n_labeled": int(lab.size)}
            # kNN STKR at fixed n_neighbors=10, eta=0.99 (the values CV picks on digits):
            # a CV over them rebuilds the 10k graph per fold, too slow on a shared machine
            stkr = STKRClassifier(n_neighbors=10, eta=0.99)
            t = time.perf_counter()
            stkr.fit(X, ys)
            row["stkr_fit_s"] = time.perf_counter() - t
            row["stkr"] = float((stkr.predict(Xte) == yte).mean())
            row["stkr_params"] = {"n_neighbors": 10, "eta": 0.99, "tuned": False}
            poly, p = tune(STKRClassifier("polynomial", power=2, kernel="precomputed"),
                           {"beta": [1e-3, 1e-4]}, K, ys, cv, labeled_scorer())
            row["stkr_rbf_poly"] = float((poly.predict(Kte) == yte).mean())
            row["stkr_rbf_poly_params"] = p
            krr, p = krr_labeled(X, y, lab, FASHION_KRR_GRID, seed)
            row["krr_labeled"] = float((krr.predict(Xte) == yte).mean())
            row["krr_params"] = p
            out["runs"].append(row)
            print(f"fashion {rate:.0%} seed {seed}: STKR kNN {row['stkr']:.4f} STKR rbf mu^2 "
                  f"{row['stkr_rbf_poly']:.4f} KRR {row['krr_labeled']:.4f} (STKR kNN fit "
                  f"{row['stkr_fit_s']:.1f} s) load {load():.1f}", flush=True)
        if not labelspreading:
            continue
        lab = draw_labels(y, rate, 0)
        t = time.perf_counter()
        ls = LabelSpreading(kernel="rbf", gamma=FASHION_GAMMA, max_iter=100).fit(X, semi(y, lab))
        fit_s = time.perf_counter() - t
        out["labelspreading"].append({"rate": rate, "gamma": FASHION_GAMMA, "fit_s": fit_s,
                                      "accuracy": float((ls.predict(Xte) == yte).mean())})
        print(f"fashion {rate:.0%}: LabelSpreading fit {fit_s:.1f} s acc "
              f"{out['labelspreading'][-1]['accuracy']:.4f}", flush=True)
        del ls
    out["load_end"] = load()
    return out


def part_solvers(fashion_n):
    """CG vs Richardson, same tolerance, same systems."""
    X, y = load_digits(return_X_y=True)
    sets = [("digits", X / 16.0, y)]
    if fashion_n:
        Xf, yf, _, _ = load_fashion(fashion_n)
        sets.append((f"fashion{fashion_n // 1000}k", Xf, yf))
    out = {"load_start": load(), "runs": []}
    for name, Xs, ys_full in sets:
        ys = semi(ys_full, draw_labels(ys_full, 0.05, 0))
        for params in [dict(transformation="inverse_laplacian", eta=0.99),
                       dict(transformation="polynomial", power=8)]:
            for solver in ["cg", "richardson"]:
                est = STKRClassifier(n_neighbors=10, solver=solver, tol=1e-6, max_iter=50_000,
                                     **params)
                t = time.perf_counter()
                est.fit(Xs, ys)
                total = time.perf_counter() - t
                row = {"data": name, **params, "solver": solver, "n_iter": est.n_iter_,
                       "n_matvec": est.n_matvec_, "fit_s": total,
                       "accuracy": float((est.transduction_ == ys_full).mean())}
                out["runs"].append(row)
                print(f"solvers {name} {params} {solver}: {est.n_iter_} steps, "
                      f"{est.n_matvec_} products, {total:.2f} s", flush=True)
    out["load_end"] = load()
    return out


def _clusters(n, d=10, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(0, 3, (10, d))
    return centers[rng.integers(0, 10, n)] + rng.normal(size=(n, d))


def _timed(fn, repeat=3):
    tracemalloc.start()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return float(np.median(times)), peak / 2**20


def _knn_operator(X, k):
    from kernelkit.stkr import _graph

    Xs = _graph.scale(X, _graph.max_exponent(X))
    loc, first = _graph.locations(Xs, "numba")
    S = _graph.normalised_adjacency(_graph.knn_graph(Xs, k, loc, first, "numba")[0])[0]
    return graph_operator(S, loc, "numba"), S


def part_scaling(sizes_knn, sizes_dense):
    from kernelkit.kernels import resolve_kernel

    out = {"load_start": load(), "knn": [], "dense": []}
    for n in sizes_knn:
        X = _clusters(n)
        tracemalloc.start()
        t = time.perf_counter()
        G, K = _knn_operator(X, 10)
        build = time.perf_counter() - t
        build_peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        V = np.random.default_rng(0).standard_normal((n, 10))
        step, peak = _timed(lambda G=G, V=V: G(V), repeat=5)
        out["knn"].append({"n": n, "graph_build_s": build, "graph_build_peak_mib": build_peak,
                           "step_s": step, "step_peak_mib": peak, "nnz": int(K.nnz)})
        print(f"scaling knn n={n}: build {build:.1f} s, step {step * 1e3:.1f} ms, "
              f"peak {peak:.0f} MiB (build {build_peak:.0f} MiB)", flush=True)
    for n in sizes_dense:
        X = _clusters(n)
        op = resolve_kernel("rbf", 0.1, n_features=X.shape[1], backend="numba")
        G = dense_operator(op, X, cache_bytes=0)
        V = np.random.default_rng(0).standard_normal((n, 10))
        step, peak = _timed(lambda G=G, V=V: G(V), repeat=1 if n > 20_000 else 2)
        out["dense"].append({"n": n, "step_s": step, "step_peak_mib": peak})
        print(f"scaling dense n={n}: step {step:.2f} s, peak {peak:.0f} MiB", flush=True)
    out["load_end"] = load()
    return out


def _alternate(fns, repeats):
    """Wall times of the functions run in turn, ``repeats`` rounds (after one warm-up)."""
    for f in fns.values():
        f()
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, f in fns.items():
            t = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t)
    return times


def part_speed(sizes, repeats, graph_sizes):
    """(e): the default fit against LabelSpreading(kernel="knn"), and the graph alone."""
    from kernelkit.stkr import _graph, _graph_brute

    out = {"load_start": load(), "fits": [], "graphs": []}
    Xtr, ytr, Xte, yte = load_fashion_mnist()
    yte = yte.astype(np.int64)
    for n in sizes:
        X, y = Xtr[:n], ytr[:n].astype(np.int64)
        ys = semi(y, draw_labels(y, 0.05, 0))
        models = {}

        def stkr():
            models["stkr"] = STKRClassifier().fit(X, ys)

        def ls():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                models["ls"] = LabelSpreading(kernel="knn", n_neighbors=8).fit(X, ys)

        rep = repeats if n <= 20_000 else 1
        times = _alternate({"stkr": stkr, "labelspreading": ls}, rep)
        ratios = np.array(times["stkr"]) / np.array(times["labelspreading"])
        row = {"n": n, "repeats": rep, "stkr_s": float(np.median(times["stkr"])),
               "labelspreading_s": float(np.median(times["labelspreading"])),
               "ratio": float(np.median(ratios)), "times": times,
               "stkr_acc": float((models["stkr"].predict(Xte) == yte).mean()),
               "labelspreading_acc": float((models["ls"].predict(Xte) == yte).mean()),
               "graph_s": _graph_seconds(X), "load": load()}
        out["fits"].append(row)
        print(f"speed n={n}: STKR {row['stkr_s']:.2f} s (acc {row['stkr_acc']:.4f}), "
              f"LabelSpreading {row['labelspreading_s']:.2f} s (acc "
              f"{row['labelspreading_acc']:.4f}), ratio {row['ratio']:.2f}, graph alone "
              f"{row['graph_s']:.2f} s, load "
              f"{row['load']:.1f}", flush=True)
    for name, n in graph_sizes:
        X = (np.random.default_rng(0).standard_normal((n, 5)) if name == "gauss5d"
             else Xtr[:n])
        Xs = _graph.scale(X, _graph.max_exponent(X))
        loc, first = _graph.locations(Xs)
        times = _alternate({"fast": lambda: _graph.knn_graph(Xs, 7, loc, first, "numba"),
                            "brute": lambda: _graph_brute.knn_graph(Xs, 7, loc, first)}, 1)
        out["graphs"].append({"data": name, "n": n, "fast_s": times["fast"][0],
                              "brute_s": times["brute"][0]})
        print(f"graph {name} n={n}: fast {times['fast'][0]:.2f} s, brute "
              f"{times['brute'][0]:.2f} s", flush=True)
    out["load_end"] = load()
    return out


def _on(part):
    """A part's processor in its heading: parts run separately may run on different ones."""
    return f"; {part['processor']}" if part.get("processor") else ""


def summarize(res):
    lines = []
    if "digits" in res:
        d = res["digits"]
        lines += [f"### digits (n = {d['n']}, transductive accuracy, %, median over "
                  f"{d['seeds']} seeds; load {d['load_start']:.1f} -> {d['load_end']:.1f}"
                  f"{_on(d)})", "",
                  "| labels | STKR (kNN, inverse Laplacian) | LabelSpreading (rbf, CV) | "
                  "LabelSpreading (best gamma in hindsight) | kernel ridge, labeled only | "
                  "goal | met |", "|---|---|---|---|---|---|---|"]
        for rate in sorted({r["rate"] for r in d["runs"]}):
            rs = [r for r in d["runs"] if r["rate"] == rate]
            med = {k: 100 * np.median([r[k] for r in rs]) for k in
                   ("stkr", "labelspreading", "labelspreading_hindsight", "krr_labeled")}
            target = DIGITS_TARGET.get(rate)
            met = "-" if target is None else ("yes" if med["stkr"] >= target else "**no**")
            lines.append(f"| {rate:.0%} | {med['stkr']:.1f} | {med['labelspreading']:.1f} | "
                         f"{med['labelspreading_hindsight']:.1f} | {med['krr_labeled']:.1f} | "
                         f"{target} | {met} |")
        lines.append("")
    if "fashion" in res:
        f = res["fashion"]
        lines += [f"### Fashion-MNIST ({f['n_train']} training rows, accuracy on "
                  f"{f['n_test']} test images, %, median over {f['seeds']} seeds; load "
                  f"{f['load_start']:.1f} -> {f['load_end']:.1f}{_on(f)})", "",
                  "| labels | STKR kNN, inverse Laplacian (k=10, eta=0.99) | STKR rbf, mu^2 (CV) | "
                  "kernel ridge (CV), "
                  "labeled only | STKR beats it | STKR kNN fit (s) | LabelSpreading rbf "
                  "gamma=0.02 (acc, fit s) |", "|---|---|---|---|---|---|---|"]
        for rate in sorted({r["rate"] for r in f["runs"]}):
            rs = [r for r in f["runs"] if r["rate"] == rate]
            s, sp, k = (100 * np.median([r[key] for r in rs])
                        for key in ("stkr", "stkr_rbf_poly", "krr_labeled"))
            fit = np.median([r["stkr_fit_s"] for r in rs])
            ls = next((x for x in f["labelspreading"] if x["rate"] == rate), None)
            lss = f"{100 * ls['accuracy']:.1f}, {ls['fit_s']:.1f}" if ls else "-"
            met = "yes" if max(s, sp) > k else "**no**"
            lines.append(f"| {rate:.0%} | {s:.1f} | {sp:.1f} | {k:.1f} | {met} | {fit:.1f} | "
                         f"{lss} |")
        lines.append("")
    if "solvers" in res:
        s = res["solvers"]
        lines += [f"### CG vs Richardson (tol 1e-6, 5% labels; load {s['load_start']:.1f}"
                  f"{_on(s)})", "",
                  "| data | transform | solver | steps | kernel products | fit (s) |",
                  "|---|---|---|---|---|---|"]
        for r in s["runs"]:
            lines.append(f"| {r['data']} | {r['transformation']} | {r['solver']} | "
                         f"{r['n_iter']} | {r['n_matvec']} | {r['fit_s']:.2f} |")
        lines.append("")
    if "scaling" in res:
        s = res["scaling"]
        lines += [f"### Time per solver step vs n (10 right-hand sides; load "
                  f"{s['load_start']:.1f} -> {s['load_end']:.1f}{_on(s)})", "",
                  "| base kernel | n | step (s) | peak memory of a step (MiB) | graph build (s) |",
                  "|---|---|---|---|---|"]
        for r in s["knn"]:
            lines.append(f"| kNN (k=10) | {r['n']} | {r['step_s']:.4f} | "
                         f"{r['step_peak_mib']:.0f} | {r['graph_build_s']:.1f} |")
        for r in s["dense"]:
            lines.append(f"| rbf, blockwise | {r['n']} | {r['step_s']:.2f} | "
                         f"{r['step_peak_mib']:.0f} | - |")
        lines.append("")
    if "speed" in res:
        s = res["speed"]
        lines += [f"### Speed of the default fit (Fashion-MNIST, 5% labels; load "
                  f"{s['load_start']:.1f} -> {s['load_end']:.1f}{_on(s)})", "",
                  "| rows | STKR fit (s) | of which the kNN graph (s) | LabelSpreading knn fit "
                  "(s) | ratio (median) | STKR acc | LabelSpreading acc | repeats | goal | "
                  "met |", "|---|---|---|---|---|---|---|---|---|---|"]
        for r in s["fits"]:
            goal, met = "-", "-"
            if r["n"] == 10_000:
                goal = f"ratio <= {SPEED_GOAL_RATIO}"
                met = "yes" if r["ratio"] <= SPEED_GOAL_RATIO else "**no**"
            elif r["n"] == 60_000:
                goal = f"<= {SPEED_GOAL_60K_S:.0f} s"
                met = "yes" if r["stkr_s"] <= SPEED_GOAL_60K_S else "**no**"
            graph = f"{r['graph_s']:.2f}" if "graph_s" in r else "-"
            lines.append(f"| {r['n']} | {r['stkr_s']:.2f} | {graph} | "
                         f"{r['labelspreading_s']:.2f} | {r['ratio']:.2f} | "
                         f"{100 * r['stkr_acc']:.1f} | {100 * r['labelspreading_acc']:.1f} | "
                         f"{r['repeats']} | {goal} | {met} |")
        lines += ["", "| graph data | n | fast search (s) | brute force (s) |", "|---|---|---|---|"]
        for r in s["graphs"]:
            lines.append(f"| {r['data']} | {r['n']} | {r['fast_s']:.2f} | {r['brute_s']:.2f} |")
        lines.append("")
    d, f = res.get("digits") or {}, res.get("fashion") or {}
    lines += ["Notes on the recorded run: "
              f"digits with {d.get('seeds', '?')} label draws, Fashion-MNIST with "
              f"{f.get('seeds', '?')}; the kNN variant untuned; the first dense solver "
              "step includes Numba's compilation.", ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, one seed, no files")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--fashion-seeds", type=int, default=3)
    ap.add_argument("--parts", default="digits,fashion,solvers,scaling,speed")
    ap.add_argument("--fashion-rates", default="0.01,0.05,0.1",
                    help="label rates of the Fashion-MNIST part (runs merge by rate)")
    ap.add_argument("--no-labelspreading-fashion", action="store_true",
                    help="skip the LabelSpreading timing fit in the Fashion-MNIST part")
    ap.add_argument("--knn-sizes", default="10000,30000,100000",
                    help="n for the kNN time-per-step measurements (part scaling)")
    ap.add_argument("--dense-sizes", default="10000,20000,40000",
                    help="n for the dense blockwise time-per-step measurements")
    ap.add_argument("--speed-sizes", default="10000,60000",
                    help="Fashion-MNIST rows for the speed part (e)")
    ap.add_argument("--speed-repeats", type=int, default=5,
                    help="alternated repeats of the speed part's fits up to 20,000 rows")
    ap.add_argument("--report", action="store_true",
                    help="only rewrite the RESULTS.md section from results_stkr.json")
    args = ap.parse_args()
    parts = [] if args.report else args.parts.split(",")
    res = json.loads(JSON_PATH.read_text()) if JSON_PATH.exists() and not args.quick else {}
    fashion_ok = any((FMNIST_DIR / f).exists() for f in
                     ("train-images-idx3-ubyte", "train-images-idx3-ubyte.gz"))
    if args.quick:
        res = {}
        if "digits" in parts:
            res["digits"] = part_digits(1, (0.05,))
        if "fashion" in parts and fashion_ok:
            res["fashion"] = part_fashion(1, (0.05,), 2000)
        if "solvers" in parts:
            res["solvers"] = part_solvers(0)
        if "scaling" in parts:
            res["scaling"] = part_scaling([2000, 4000], [2000, 4000])
        if "speed" in parts and fashion_ok:
            res["speed"] = part_speed([2000, 4000], 2, [("gauss5d", 4000), ("fashion", 2000)])
        print(summarize(res))
        return
    if "digits" in parts:
        res["digits"] = part_digits(args.seeds, RATES)
    if "fashion" in parts:
        res["fashion"] = part_fashion(args.fashion_seeds,
                                      [float(r) for r in args.fashion_rates.split(",")], 10_000,
                                      not args.no_labelspreading_fashion)
    if "solvers" in parts:
        res["solvers"] = part_solvers(10_000 if fashion_ok else 0)
    if "scaling" in parts:
        res["scaling"] = part_scaling([int(v) for v in args.knn_sizes.split(",")],
                                      [int(v) for v in args.dense_sizes.split(",")])
    if "speed" in parts and fashion_ok:
        res["speed"] = part_speed([int(v) for v in args.speed_sizes.split(",")],
                                  args.speed_repeats, [("gauss5d", 20_000), ("fashion", 10_000)])
    cpu = machine_info()["cpu_model"]
    for k in parts:
        if k in res:
            res[k]["processor"] = cpu
    if JSON_PATH.exists():  # parts may run in separate invocations: merge, newest wins
        old = json.loads(JSON_PATH.read_text())
        for k in ("digits", "fashion", "solvers", "scaling", "speed"):  # runs before the tag
            if k in old and "processor" not in old[k]:
                old[k]["processor"] = old.get("machine", {}).get("cpu_model", "")
        if "fashion" in res and "fashion" in old:  # Fashion-MNIST rates may run separately
            rates = {r["rate"] for r in res["fashion"]["runs"]}
            for key in ("runs", "labelspreading"):
                res["fashion"][key] = sorted(
                    [r for r in old["fashion"].get(key, []) if r["rate"] not in rates]
                    + res["fashion"][key], key=lambda r: r["rate"])
        res = {**old, **{k: res[k] for k in parts if k in res}}
    if not args.report:  # a re-render keeps the machine and commit of the runs
        res["machine"] = machine_info()
        res["git"] = git_state()
    JSON_PATH.write_text(json.dumps(res, indent=1, default=float))
    intro = machine_line(res["machine"], commit=res["git"].get("commit")) + (
        " Each part gives the 1-minute load average at its start and end (2 cores: the "
        "part's own two threads raise it to about 1.5); accuracies and step counts do not "
        "depend on the load.")
    write_section(MD_PATH, SECTION, MD_HEADER,
                  SECTION + "\n\n" + intro + "\n\n" + summarize(res) + "\n")
    print(summarize(res))


if __name__ == "__main__":
    main()
