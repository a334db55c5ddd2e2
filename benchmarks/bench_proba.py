"""Probabilities: log-loss, Brier score, calibration error and accuracy against scikit-learn.

Metrics on the test rows: log-loss, Brier score (mean over rows of the squared error of
the probability vector against the one-hot label, summed over classes), expected
calibration error (ECE: 15 equal-width bins of the top-class confidence, the mean of
``|accuracy - confidence|`` weighted by the bin's share of rows), accuracy, and fit time
(every estimator is fitted once on a small slice first, untimed, so that compiling the
engine's loops is not counted).

Parts:

(a) ``digits`` and ``breast_cancer`` (standardised features; stratified 75/25 split,
    ``n_seeds`` = 25 seeds, medians, and the log-loss differences paired by split: over
    5 splits the 143 test rows of breast_cancer moved the medians' ratios by up to 14%,
    more than the classifiers differ): every kernelkit classifier at its defaults (the
    parameters set are named in the table) against scikit-learn's
    ``CalibratedClassifierCV(<the same classifier>, method="sigmoid", cv=5,
    ensemble=False)`` on that classifier with ``calibration=None`` (Platt's sigmoid
    per class on 5-fold decision values, applied to the full-data fit), and, as
    context, ``CalibratedClassifierCV(SVC(), ensemble=False)``,
    ``GaussianProcessClassifier`` (defaults: on digits its optimiser leaves the length
    scale where the probabilities are near uniform; started at gamma 1/d instead, one
    fit took over two minutes on 2 busy cores, too long for a few seeds) and
    ``LogisticRegression`` on ``Nystroem`` features. Goal: every kernelkit
    classifier's log-loss at most that of ``CalibratedClassifierCV`` on the same
    classifier (accuracy difference shown beside it); the ratio to
    ``CalibratedClassifierCV(SVC())`` beside.
(b) Fashion-MNIST, ``n_b`` training images (20,000 and all 60,000), the 10,000 test
    images, Gaussian kernel ``gamma_b``: ``FalkonClassifier`` with the squared loss
    (calibrated by its default temperature) and with ``loss="logistic"`` (kernel logistic
    regression), ``centers_b`` centers, against ``CalibratedClassifierCV(LinearSVC())``
    on ``Nystroem(gamma_b, n_components=centers_b)`` features (``cv_b`` folds, default
    ``ensemble=True``). Goals at 60,000: logistic FALKON accuracy >= 0.90, its log-loss
    below the calibrated squared-loss FALKON's, and its fit time at most 3x the
    squared-loss fit. Logistic FALKON (ten classes) takes 10 Newton steps and 46 CG
    iterations at 20,000 images (one step per penalty of its path, then a few at
    ``alpha``), 11 and 78 at 60,000, where the squared loss needs 19 and 28
    (``--n-centers`` sets ``centers_b``).
(c) All 60,000 Fashion-MNIST images, the same two FALKON models with more centers
    (``centers_c``: 8,000 and 16,000; ``--centers-c``), the same goals, no peer: where
    the logistic loss preconditions each class by a sample of rows.

Wall time on 2 quiet cores (AMD EPYC): about 25 minutes in all, 7 of them part (a)'s 25
splits, 8 part (b) (most of it its ``LinearSVC`` peer: 1.5 minutes at 20,000 images, 5 at
60,000; the logistic FALKON fit about 18 s at 60,000), 10 part (c) (its logistic fit at
16,000 centers about 6 minutes). Run the parts separately, or lower
``--n-centers`` (the 0.90 accuracy goal then moves out of reach: the squared loss needed
16,000 centers for 0.9024).

Usage::

    python benchmarks/bench_proba.py            # full run; writes results_proba.json and
                                                # the section in RESULTS.md
    python benchmarks/bench_proba.py --quick    # small sizes, prints only
    python benchmarks/bench_proba.py --parts b --n-centers 3000
"""

import os

os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from _common import (  # noqa: E402 (benchmarks/ is on sys.path)
    fmt_met, git_state, load_average, load_fashion_mnist, machine_info, machine_line, publish)

HERE = Path(__file__).resolve().parent
JSON_PATH = HERE / "results_proba.json"
MD_PATH = HERE / "RESULTS.md"
SECTION = "## Probabilities (bench_proba.py)"
SEED = 0
FULL = {"datasets_a": ["digits", "breast_cancer"], "n_seeds": 25, "test_size": 0.25,
        "nystroem_a": 500, "n_b": [20_000, 60_000], "n_test_b": 10_000, "gamma_b": 0.02,
        "alpha_b": 0.01, "centers_b": 2000, "tol_b": 1e-3, "svc_cv": 5, "cv_b": 3,
        "same_cv": 5, "n_c": 60_000, "centers_c": [8000, 16000]}
QUICK = {"datasets_a": ["digits", "breast_cancer"], "n_seeds": 1, "test_size": 0.25,
         "nystroem_a": 200, "n_b": [3000], "n_test_b": 2000, "gamma_b": 0.02,
         "alpha_b": 0.01, "centers_b": 500, "tol_b": 1e-3, "svc_cv": 3, "cv_b": 3,
         "same_cv": 5, "n_c": 3000, "centers_c": [600]}
ECE_BINS = 15


# ----------------------------------------------------------------------- metrics
def brier(P, y_idx):
    """Mean over rows of ``||p_i - onehot(y_i)||^2`` (summed over the classes)."""
    onehot = np.zeros_like(P)
    onehot[np.arange(len(y_idx)), y_idx] = 1.0
    return float(np.mean(np.sum((P - onehot) ** 2, axis=1)))


def ece(P, y_idx, n_bins=ECE_BINS):
    """Expected calibration error of the top-class confidence, equal-width bins."""
    conf, hit = P.max(axis=1), (P.argmax(axis=1) == y_idx).astype(float)
    bins = np.clip(np.ceil(conf * n_bins).astype(int) - 1, 0, n_bins - 1)  # (k-1)/B < c <= k/B
    total = 0.0
    for b in np.unique(bins):
        sel = bins == b
        total += sel.sum() * abs(hit[sel].mean() - conf[sel].mean())
    return float(total / len(y_idx))


def scores(est, X, y, fit_time):
    """The metrics of a fitted classifier on ``(X, y)``."""
    from sklearn.metrics import log_loss

    P = np.clip(np.asarray(est.predict_proba(X), np.float64), 0.0, 1.0)
    P /= P.sum(axis=1, keepdims=True)
    y_idx = np.searchsorted(est.classes_, y)
    return {"log_loss": float(log_loss(y_idx, P, labels=np.arange(P.shape[1]))),
            "brier": brier(P, y_idx), "ece": ece(P, y_idx),
            "accuracy": float(np.mean(P.argmax(axis=1) == y_idx)), "fit_s": fit_time}


def timed_fit(make, X, y, warm_rows=None, make_warm=None):
    """Fit ``make()`` on ``(X, y)``; with ``warm_rows`` a first untimed fit (of
    ``make_warm()`` if given) on that many rows (a stratified slice) compiles whatever
    the first call compiles."""
    if warm_rows:
        from sklearn.model_selection import train_test_split

        Xw, _, yw, _ = train_test_split(X, y, train_size=warm_rows, stratify=y,
                                        random_state=SEED)
        (make_warm or make)().fit(Xw, yw)
    est = make()
    t0 = time.perf_counter()
    est.fit(X, y)
    return est, time.perf_counter() - t0


# ------------------------------------------------------------------------ part a
def models_a(n_features, cfg):
    """(name, parameters set, factory, role) of part (a); gamma 1/d throughout
    (kernelkit's default, scikit-learn's ``"scale"`` on standardised features). Role:
    ``"kernelkit"``, ``"peer"``, or ``("same", name, params)`` for the
    ``CalibratedClassifierCV`` on that kernelkit classifier."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.gaussian_process import GaussianProcessClassifier
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.svm import SVC

    import kernelkit as kk

    g, m = 1.0 / n_features, cfg["nystroem_a"]
    ours = [  # factories taking the calibration setting (None for the peer's base)
        ("KernelRidgeClassifier", "kernel='rbf'",
         lambda **kw: kk.KernelRidgeClassifier(kernel="rbf", **kw)),
        ("NTKRidgeClassifier", "defaults", lambda **kw: kk.NTKRidgeClassifier(**kw)),
        ("FalkonClassifier", "squared loss, random_state=0",
         lambda **kw: kk.FalkonClassifier(random_state=SEED, **kw)),
        ("FalkonClassifier", "loss='logistic', random_state=0",
         lambda **kw: kk.FalkonClassifier(loss="logistic", random_state=SEED, **kw)),
        ("EigenProClassifier", "random_state=0",
         lambda **kw: kk.EigenProClassifier(random_state=SEED, **kw)),
        ("KONSClassifier", "random_state=0",
         lambda **kw: kk.KONSClassifier(random_state=SEED, **kw)),
        ("InfiniteWidthClassifier", "defaults",  # no calibration: ensemble probabilities
         lambda **kw: kk.InfiniteWidthClassifier()),
        ("RandomFeaturesClassifier", "random_state=0",
         lambda **kw: kk.RandomFeaturesClassifier(random_state=SEED, **kw)),
    ]
    cv = cfg["same_cv"]
    return [(name, params, make, "kernelkit") for name, params, make in ours] + [
        (f"CalibratedClassifierCV({name})", f"{params}; sigmoid, cv={cv}, ensemble=False",
         lambda make=make: CalibratedClassifierCV(make(calibration=None), method="sigmoid",
                                                  cv=cv, ensemble=False),
         ("same", name, params)) for name, params, make in ours] + [
        (PEER_A, f"ensemble=False, cv={cfg['svc_cv']}",
         lambda: CalibratedClassifierCV(SVC(), ensemble=False, cv=cfg["svc_cv"]), "peer"),
        ("GaussianProcessClassifier", "defaults (1.0 * RBF(1.0), fitted)",
         lambda: GaussianProcessClassifier(random_state=SEED), "peer"),
        ("Nystroem + LogisticRegression", f"gamma=1/d, n_components={m}",
         lambda: make_pipeline(Nystroem(gamma=g, n_components=m, random_state=SEED),
                               LogisticRegression(max_iter=2000)), "peer"),
    ]


PEER_A = "CalibratedClassifierCV(SVC())"


def part_a(cfg):
    from sklearn import datasets
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    out = {}
    for ds in cfg["datasets_a"]:
        X, y = getattr(datasets, f"load_{ds}")(return_X_y=True)
        runs = {}
        for seed in range(cfg["n_seeds"]):
            Xa, Xt, ya, yt = train_test_split(X, y, test_size=cfg["test_size"], stratify=y,
                                              random_state=seed)
            sc = StandardScaler().fit(Xa)
            Xa, Xt = sc.transform(Xa), sc.transform(Xt)
            for name, params, make, role in models_a(X.shape[1], cfg):
                est, t = timed_fit(make, Xa, ya, warm_rows=100 if seed == 0 else None)
                key = (name, params, role if isinstance(role, str) else tuple(role))
                runs.setdefault(key, []).append(scores(est, Xt, yt, t))
        rows = []
        for (name, params, role), rs in runs.items():
            row = {"model": name, "params": params, "kernelkit": role == "kernelkit",
                   "seeds": len(rs)}
            if isinstance(role, tuple):
                row["same_base_of"] = [role[1], role[2]]
            row.update({k: float(np.median([r[k] for r in rs])) for k in rs[0]})
            row["log_losses"] = [r["log_loss"] for r in rs]
            rows.append(row)
            print(f"  {ds}: {dict(row, log_losses='...')}", flush=True)
        peer = next(r for r in rows if r["model"] == PEER_A)
        for r in rows:
            if r["kernelkit"]:
                same = next(q for q in rows
                            if q.get("same_base_of") == [r["model"], r["params"]])
                r["log_loss_ratio"] = r["log_loss"] / same["log_loss"]
                # paired over the splits: a median of 143 test rows moves by a few percent
                diff = np.subtract(r["log_losses"], same["log_losses"])
                r["log_loss_diff_mean"] = float(diff.mean())
                r["log_loss_diff_se"] = float(diff.std(ddof=1) / np.sqrt(diff.size)
                                              if diff.size > 1 else np.nan)
                r["splits_won"] = int(np.sum(diff <= 0))
                r["accuracy_diff"] = r["accuracy"] - same["accuracy"]
                r["goal_met"] = bool(r["log_loss"] <= same["log_loss"])
                r["log_loss_ratio_svc"] = r["log_loss"] / peer["log_loss"]
                r["accuracy_diff_svc"] = r["accuracy"] - peer["accuracy"]
        out[ds] = {"n": int(X.shape[0]), "d": int(X.shape[1]), "rows": rows}
    return out


# ------------------------------------------------------------------- parts b, c
def _makers(cfg, peer=True):
    """(name, make(m)) of part (b)'s models, each taking the number of centers."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.kernel_approximation import Nystroem
    from sklearn.pipeline import make_pipeline
    from sklearn.svm import LinearSVC

    from kernelkit import FalkonClassifier

    g, a, tol = cfg["gamma_b"], cfg["alpha_b"], cfg["tol_b"]
    makers = [
        ("FalkonClassifier (squared, calibrated)",
         lambda m: FalkonClassifier(gamma=g, alpha=a, n_centers=m, tol=tol,
                                    random_state=SEED)),
        ("FalkonClassifier(loss='logistic')",
         lambda m: FalkonClassifier(loss="logistic", gamma=g, alpha=a, n_centers=m, tol=tol,
                                    random_state=SEED)),
        (f"CalibratedClassifierCV(LinearSVC(), cv={cfg['cv_b']}) on Nystroem",
         lambda m: make_pipeline(Nystroem(gamma=g, n_components=m, random_state=SEED),
                                 CalibratedClassifierCV(LinearSVC(), cv=cfg["cv_b"]))),
    ]
    return makers if peer else makers[:2]


def _fashion_block(X, y, Xt, yt, n, m, makers, warm):
    """Fit each maker's model with ``m`` centers on ``(X, y)``, scored on the test rows;
    the logistic loss's goals against the squared loss's (rows 0 and 1)."""
    rows = []
    for name, make in makers:
        t_wall = time.perf_counter()
        est, t = timed_fit(lambda make=make: make(m), X, y,
                           warm_rows=300 if warm else None, make_warm=lambda make=make: make(50))
        row = {"model": name, "n": n, "centers": m, **scores(est, Xt, yt, t),
               "wall_s": time.perf_counter() - t_wall}
        if hasattr(est, "n_iter_"):
            row["n_iter"] = int(np.max(est.n_iter_))
        rows.append(row)
        print(f"  n={n}, centers={m}: {row}", flush=True)
        del est
        warm = False
    sq, lg = rows[0], rows[1]
    lg["fit_ratio_vs_squared"] = lg["fit_s"] / sq["fit_s"]
    lg["goals"] = {"accuracy_0.90": lg["accuracy"] >= 0.90,
                   "log_loss_below_squared": lg["log_loss"] < sq["log_loss"],
                   "fit_at_most_3x_squared": lg["fit_ratio_vs_squared"] <= 3.0}
    return {"n": n, "centers": m, "rows": rows}


def part_b(cfg):
    X_all, y_all, Xt, yt = load_fashion_mnist()
    Xt, yt = Xt[:cfg["n_test_b"]], yt[:cfg["n_test_b"]]
    out, makers = [], _makers(cfg)
    for i, n in enumerate(cfg["n_b"]):
        rng = np.random.RandomState(SEED)
        idx = np.sort(rng.choice(len(y_all), n, replace=False)) if n < len(y_all) else None
        X, y = (X_all, y_all) if idx is None else (X_all[idx], y_all[idx])
        out.append(_fashion_block(X, y, Xt, yt, n, cfg["centers_b"], makers, warm=i == 0))
    return out


def part_c(cfg):
    """All training images, the two losses at more centers (no peer: its Nystroem
    features would not fit in memory twice over)."""
    X, y, Xt, yt = load_fashion_mnist()
    X, y, Xt, yt = X[:cfg["n_c"]], y[:cfg["n_c"]], Xt[:cfg["n_test_b"]], yt[:cfg["n_test_b"]]
    makers = _makers(cfg, peer=False)
    return [_fashion_block(X, y, Xt, yt, len(y), m, makers, warm=i == 0)
            for i, m in enumerate(cfg["centers_c"])]


# ------------------------------------------------------------------------ report
def _metrics(r):
    return (f"{r['log_loss']:.4f} | {r['brier']:.4f} | {r['ece']:.4f} | {r['accuracy']:.4f} "
            f"| {r['fit_s']:.2f}")


def _loss_rows(blocks, head, first):
    """The table of parts (b) and (c): column ``head`` first, ``first(block)`` in it."""
    L = [f"| {head} | model | log-loss | Brier | ECE | accuracy | fit (s) | iterations (CG; "
         "Newton steps for logistic) | fit / squared | goals: acc >= 0.90, log-loss < "
         "squared, fit <= 3x |", "|---|---|---|---|---|---|---|---|---|---|"]
    for block in blocks:
        for r in block["rows"]:
            goals = r.get("goals")
            gtxt = ", ".join(fmt_met(v) for v in goals.values()) if goals else "—"
            ratio = (f"{r['fit_ratio_vs_squared']:.2f}x" if "fit_ratio_vs_squared" in r
                     else "—")
            L.append(f"| {first(block)} | {r['model']} | {_metrics(r)} | "
                     f"{r.get('n_iter', '—')} | {ratio} | {gtxt} |")
    return L


def _run_line(res, part):
    """The run that produced ``part``: machine, versions, load and wall time."""
    r = res.get("runs", {}).get(part)
    if r is None:
        return []
    return [machine_line(r["machine"], r["loads"], r["timestamp"], r["commit"])
            + f" Wall time of this part: {r['wall_s']:.0f} s.", ""]


def render(res):
    from kernelkit.ridge._falkon_logistic import _SAMPLED_FROM

    cfg = res["config"]
    L = [SECTION, "",
         f"Log-loss, Brier score (squared error of the probability vector, summed over the "
         f"classes), expected calibration error ({ECE_BINS} equal-width bins of the top-class "
         "confidence), accuracy on the test rows; fit time after an untimed warm-up fit. "
         "Each part names the run that produced it.", ""]
    if res.get("part_a"):
        L += [f"### (a) digits and breast_cancer: median of {cfg['n_seeds']} stratified "
              f"splits ({1 - cfg['test_size']:.0%} / {cfg['test_size']:.0%})", "",
              *_run_line(res, "a"),
              "Standardised features; gamma = 1/d wherever a Gaussian kernel is used. Goal: "
              "each kernelkit classifier's log-loss at most that of scikit-learn's "
              f"CalibratedClassifierCV (sigmoid, cv={cfg.get('same_cv', 5)}, "
              "ensemble=False) on the same classifier with calibration=None (\"same "
              "classifier + CCV\"), judged on the medians; the ratio and the accuracy "
              "difference to it beside, then the paired difference of log-losses split by "
              "split (kernelkit minus CCV: mean +- standard error, and the splits where "
              f"kernelkit's is at most CCV's), and the ratio to {PEER_A} as context.", ""]
        for ds, d in res["part_a"].items():
            L += [f"**{ds}** (n = {d['n']:,}, d = {d['d']})", "",
                  "| model | parameters set | log-loss | Brier | ECE | accuracy | fit (s) | "
                  "log-loss / same classifier + CCV | accuracy - same classifier + CCV | "
                  "goal met | paired difference (splits won) | log-loss / SVC+CCV |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
            for r in d["rows"]:
                if r["kernelkit"] and "log_loss_ratio_svc" in r:
                    se = r.get("log_loss_diff_se", float("nan"))
                    paired = (f"{r['log_loss_diff_mean']:+.4f}"
                              + (f" +- {se:.4f}" if np.isfinite(se) else "")
                              + f" ({r['splits_won']}/{r['seeds']})"
                              if "log_loss_diff_mean" in r else "—")
                    extra = (f"{r['log_loss_ratio']:.2f} | {r['accuracy_diff']:+.4f} | "
                             f"{fmt_met(r['goal_met'])} | {paired} | "
                             f"{r['log_loss_ratio_svc']:.2f}")
                else:
                    extra = "— | — | — | — | —"
                who = "kernelkit" if r["kernelkit"] else "scikit-learn"
                L.append(f"| {who} {r['model']} | {r['params']} | {_metrics(r)} | {extra} |")
            L.append("")
    if res.get("part_b"):
        L += [f"### (b) Fashion-MNIST: FALKON squared loss vs logistic loss, "
              f"{cfg['centers_b']:,} centers", "", *_run_line(res, "b"),
              f"Gaussian kernel gamma {cfg['gamma_b']:g}, alpha {cfg['alpha_b']:g}, tol "
              f"{cfg['tol_b']:g}, {cfg['n_test_b']:,} test images; the peer uses the same "
              f"gamma and {cfg['centers_b']:,} Nystroem components. Goals (logistic loss, "
              "at 60,000, shown at every n): accuracy >= 0.90, log-loss below the squared "
              "loss's, fit at most 3x the squared loss's.", ""]
        L += _loss_rows(res["part_b"], "n", lambda b: f"{b['n']:,}")
        L.append("")
    if res.get("part_c"):
        c = res["part_c"]
        L += [f"### (c) all {c[0]['n']:,} Fashion-MNIST images: the two losses at more "
              "centers", "", *_run_line(res, "c"),
              f"Same kernel, alpha and tol as (b), no peer. From {_SAMPLED_FROM:,} centers "
              "on, logistic FALKON preconditions each class by a sample of rows (its "
              "heaviest exactly, centers for the rest), not by a factor of its own.", ""]
        L += _loss_rows(c, "centers", lambda b: f"{b['centers']:,}")
        L.append("")
    return "\n".join(L)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes; write no files")
    parser.add_argument("--parts", default="a,b,c", help="comma-separated parts to run")
    parser.add_argument("--n-centers", type=int, default=None,
                        help="centers / Nystroem components of part (b)")
    parser.add_argument("--sizes-b", type=int, nargs="+", default=None,
                        help="training sizes of part (b) (default: 20,000 and 60,000)")
    parser.add_argument("--centers-c", type=int, nargs="+", default=None,
                        help="center counts of part (c) (default: 8,000 and 16,000)")
    args = parser.parse_args(argv)
    cfg = dict(QUICK if args.quick else FULL)
    if args.n_centers is not None:
        cfg["centers_b"] = args.n_centers
    if args.sizes_b is not None:
        cfg["n_b"] = args.sizes_b
    if args.centers_c is not None:
        cfg["centers_c"] = args.centers_c
    t_run = time.perf_counter()
    res = {"timestamp": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
           "quick": args.quick, "config": cfg, "seed": SEED, "loadavg_before": load_average(),
           "machine": machine_info(), "git": git_state()}
    if JSON_PATH.exists() and not args.quick:  # keep parts not rerun, with their runs
        old = json.loads(JSON_PATH.read_text())
        res.update({k: v for k, v in old.items() if k.startswith("part_")})
        res["runs"] = old.get("runs", {})
    res.setdefault("runs", {})
    parts = {"a": part_a, "b": part_b, "c": part_c}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence notes of the peers' fits
        for p in args.parts.split(","):
            print(f"part ({p})", flush=True)
            t_part, load0 = time.perf_counter(), load_average()
            res[f"part_{p}"] = parts[p](cfg)
            res["loadavg_after"] = load_average()
            res["wall_s"] = time.perf_counter() - t_run
            res["runs"][p] = {"timestamp": res["timestamp"], "commit": res["git"]["commit"],
                              "machine": res["machine"], "loads": [load0, res["loadavg_after"]],
                              "wall_s": time.perf_counter() - t_part}
            if not args.quick:
                JSON_PATH.write_text(json.dumps(res, indent=2, default=float) + "\n")
    section = render(res)
    publish(section, args.quick, MD_PATH, SECTION, JSON_PATH)


if __name__ == "__main__":
    main()
