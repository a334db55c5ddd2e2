"""Convolutional kernels (ConvNTK): kernelkit against neural-tangents, speed, memory, accuracy.

Parts:

(a) Kernel blocks ``k(X, Y)`` of the NTK, float64, side by side: kernelkit's Numba
    engine and neural-tangents 0.6.5 (``stax`` in the NTK parameterization, its
    ``kernel_fn`` under ``jax.jit`` and ``nt.batch``). Myrtle-5 and a CNTK with global
    average pooling, on the 8x8 digits (Myrtle-5 400 x 400, the three-layer GAP
    CNTK 300 x 300) and on 28x28 Fashion-MNIST images (20 x 20: neural-tangents takes
    about a minute there; both sides get the same blocks). Each side of each case runs
    in a fresh process (``_conv_worker.py``): time of the block after a warm-up call
    that compiles (median of ``--repeats``, one call when the first takes over
    30 s), and the process's peak resident memory (``VmHWM``).
    The two blocks are checked equal (relative 1e-10) before any ratio is reported.
    The table gives the operations per image pair (the recursion's additions and
    multiplications: the input covariance, every filter window sum and per-element
    update of the NNGP and NTK states, pools and read-out; activation evaluations
    counted apart) and kernelkit's achieved rate against the machine's measured
    ceiling for the inner operation (a compiled ``out += in`` over a cache-resident
    row, times the worker threads). Goal: kernelkit at >= 3x neural-tangents' speed
    at <= its peak memory.
(b) Kernel ridge accuracy on all 1,797 digits (a fixed stratified split, 1,000 train /
    797 test): Myrtle-5 NTK against the fully connected NTK and an RBF, the ridge
    penalty (and the RBF's gamma) chosen by ``KernelRidgeClassifierCV``'s exact
    leave-one-out on the training images.
(c) Numba engine against the NumPy reference, time per image pair (small blocks).

neural-tangents needs its own environment (JAX 0.4: not installable beside
kernelkit's); its interpreter is ``--nt-python`` (default: ``$KERNELKIT_NT_PYTHON``
or ``/work/ntenv/bin/python``), made as ``tests/data/make_conv_reference.py`` says.
Without it part (a) runs kernelkit's side alone and says so.

Usage::

    python benchmarks/bench_conv_kernels.py            # full run: writes
                                                       # results_conv_kernels.json and
                                                       # the section in RESULTS.md
    python benchmarks/bench_conv_kernels.py --quick    # small sizes, prints only
    python benchmarks/bench_conv_kernels.py --parts a --nt-python ~/ntenv/bin/python
"""

import os

os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from _common import (  # noqa: E402 (benchmarks/ is on sys.path)
    MD_PATH, fmt_met, git_state, load_fashion_mnist, machine_info, machine_line, publish)

HERE = Path(__file__).resolve().parent
JSON_PATH = HERE / "results_conv_kernels.json"
SECTION = "## Convolutional kernels (bench_conv_kernels.py)"
WORKER = HERE / "_conv_worker.py"
R2 = 2.0**0.5
BLOCK = [["conv", 3], "relu"]
GAP3, GAP2 = BLOCK * 3 + ["gap"], BLOCK * 2 + ["gap"]
# name: (layers, images, rows of X, rows of Y, neural-tangents batch size)
FULL = {"cases": {"digits 8x8, Myrtle-5": ("myrtle5", "digits", 400, 400, 100),
                  "digits 8x8, CNTK-GAP (3 conv)": (GAP3, "digits", 300, 300, 100),
                  "Fashion-MNIST 28x28, Myrtle-5": ("myrtle5", "fmnist", 20, 20, 10),
                  "Fashion-MNIST 28x28, CNTK-GAP (2 conv)": (GAP2, "fmnist", 20, 20, 10)},
        "repeats": 3, "single_s": 30.0, "n_train": 1000, "n_test": 797, "engine_rows": 30}
QUICK = {"cases": {"digits 8x8, Myrtle-5": ("myrtle5", "digits", 100, 100, 50),
                   "digits 8x8, CNTK-GAP (3 conv)": (GAP3, "digits", 100, 100, 50),
                   "Fashion-MNIST 28x28, Myrtle-5": ("myrtle5", "fmnist", 10, 10, 5),
                   "Fashion-MNIST 28x28, CNTK-GAP (2 conv)": (GAP2, "fmnist", 10, 10, 5)},
         "repeats": 1, "single_s": 60.0, "n_train": 150, "n_test": 200, "engine_rows": 8}
GOAL_SPEED = 3.0
ALPHAS = list(np.geomspace(1e-10, 10.0, 12))


# ------------------------------------------------------------------------- data
def digits():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return X.reshape(-1, 8, 8, 1) / 16.0, y


def images(kind, n, m):
    """(X, Y) of ``kind``: digits (the first n, the last m) or Fashion-MNIST (train, test)."""
    if kind == "digits":
        D = digits()[0]
        return D[:n], D[-m:]
    Xa, _, Xt, _ = load_fashion_mnist()
    return Xa[:n].reshape(-1, 28, 28, 1), Xt[:m].reshape(-1, 28, 28, 1)


# ------------------------------------------------------------------ operations
def pair_ops(layers, shape):
    """(additions and multiplications, activation evaluations) of one image pair's NTK."""
    from kernelkit.kernels._conv_arch import CONV, POOL, compile_layers

    prog, readout, _, _, pooled = compile_layers(layers, shape)
    full = pooled or readout == 1
    sq = (lambda v: v * v) if full else (lambda v: v)
    h, w, c = shape
    flops, acts = 2 * sq(h * w) * c, 0
    for code, f, pb, hi, wi, ho, wo, _ in prog:
        if code == CONV:  # in-range window terms (both images share the offset), both
            # states, then the affine updates
            th = sum(sq(min(ho, hi + pb - u) - max(0, pb - u)) for u in range(f))
            tw = sum(sq(min(wo, wi + pb - v) - max(0, pb - v)) for v in range(f))
            flops += 2 * th * tw + 4 * sq(ho * wo)
        elif code == POOL:
            flops += 2 * sq(ho * wo) * (f**4 + 1)
        else:  # activation: one evaluation per state element, the NTK's product apart
            acts += sq(hi * wi)
            flops += sq(hi * wi)
        h, w = ho, wo
    return int(flops + 2 * sq(h * w) + 4), int(acts)


def add_ceiling(threads):
    """Additions per second of a compiled ``out += in`` on a cache-resident row (x threads)."""
    import numba as nb

    @nb.njit(cache=False)
    def loop(out, src, reps):
        for _ in range(reps):
            for j in range(out.shape[0]):
                out[j] += src[j]

    out, src = np.zeros(1024), np.ones(1024)
    loop(out, src, 1)
    best = 0.0
    for _ in range(3):
        t = time.perf_counter()
        loop(out, src, 20000)
        best = max(best, 1024 * 20000 / (time.perf_counter() - t))
    return best * threads


# ------------------------------------------------------------------------ part a
def nt_python(path):
    """The neural-tangents interpreter, or (None, why)."""
    if not Path(path).exists():
        return None, f"{path} not found"
    r = subprocess.run([path, "-c", "import neural_tangents, jax; print(jax.__version__)"],
                       capture_output=True, text=True)
    if r.returncode:
        return None, f"{path} cannot import neural_tangents: {r.stderr.strip()[-300:]}"
    return path, None


def run_side(python, side, spec, X, Y):
    """One side of one case in a fresh process: dict of K, times, memory (or an error)."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(tmp) / n for n in ("spec.json", "in.npz", "out.npz")]
        paths[0].write_text(json.dumps(spec))
        np.savez(paths[1], X=X, Y=Y)
        r = subprocess.run([python, str(WORKER), side, *map(str, paths)], capture_output=True,
                           text=True, cwd=HERE)
        if r.returncode:
            return {"error": r.stderr.strip()[-600:]}
        out = np.load(paths[2])
        return {"K": out["K"], "times": out["times"].tolist(),
                "time_s": float(statistics.median(out["times"])),
                "base_mib": float(out["base_mib"]), "peak_mib": float(out["peak_mib"])}


def part_a(cfg, nt_py):
    from kernelkit.utils._threads import n_workers

    threads = n_workers()
    ceiling = add_ceiling(threads)
    print(f"  add ceiling: {ceiling / 1e9:.2f} G/s on {threads} threads", flush=True)
    rows = []
    for name, (layers, kind, n, m, bs) in cfg["cases"].items():
        X, Y = images(kind, n, m)
        spec = {"layers": layers, "w_std": R2, "b_std": None, "repeats": cfg["repeats"],
                "single_s": cfg["single_s"], "batch_size": bs}
        flops, acts = pair_ops(layers, X.shape[1:])
        evals = n * m + n + m  # the block and each image with itself
        row = {"case": name, "n": n, "m": m, "image": list(X.shape[1:]), "layers": layers,
               "flops_per_pair": flops, "activations_per_pair": acts, "pair_evaluations": evals,
               "nt_batch_size": bs, "threads": threads, "add_ceiling_per_s": ceiling}
        kk = run_side(sys.executable, "kernelkit", spec, X, Y)
        nt = run_side(nt_py, "nt", spec, X, Y) if nt_py else {"error": "skipped"}
        for tag, res in (("kernelkit", kk), ("nt", nt)):
            row.update({f"{tag}_{k}": v for k, v in res.items() if k != "K"})
        if "K" in kk:
            row["kernelkit_flops_per_s"] = flops * evals / kk["time_s"]
            row["kernelkit_of_ceiling"] = row["kernelkit_flops_per_s"] / ceiling
        if "K" in kk and "K" in nt:
            diff = float(np.max(np.abs(kk["K"] - nt["K"]) / np.abs(nt["K"])))
            row.update(max_rel_diff=diff, equal=diff <= 1e-10)
            if row["equal"]:
                row["speed_ratio"] = nt["time_s"] / kk["time_s"]
                row["memory_ratio"] = kk["peak_mib"] / nt["peak_mib"]
                row["goal_met"] = bool(row["speed_ratio"] >= GOAL_SPEED
                                       and row["memory_ratio"] <= 1.0)
        rows.append(row)
        print(f"  {_a_line(row)}", flush=True)
    return rows


def _a_line(r):
    def side(tag):
        if f"{tag}_time_s" not in r:
            return f"{tag}: {r.get(f'{tag}_error', '')[-200:]}"
        return f"{tag} {r[f'{tag}_time_s']:.2f} s, peak {r[f'{tag}_peak_mib']:.0f} MiB"
    ratio = f", {r['speed_ratio']:.2f}x" if "speed_ratio" in r else ""
    return f"{r['case']} ({r['n']} x {r['m']}): {side('kernelkit')}; {side('nt')}{ratio}"


# ------------------------------------------------------------------------ part b
def part_b(cfg):
    from sklearn.model_selection import train_test_split

    from kernelkit import KernelRidgeClassifierCV
    from kernelkit.kernels import NTK, ConvNTK

    D, y = digits()
    Xa, Xt, ya, yt = train_test_split(D, y, train_size=cfg["n_train"], test_size=cfg["n_test"],
                                      stratify=y, random_state=0)
    flat = (Xa.reshape(len(Xa), -1), Xt.reshape(len(Xt), -1))
    models = {
        "Myrtle-5 NTK (kernelkit ConvNTK)":
            (dict(kernel=ConvNTK("myrtle5", image_shape=(8, 8, 1), w_std=R2)), flat),
        "fully connected NTK, depth 3 (kernelkit NTK)":
            (dict(kernel=NTK(depth=3, w_std=R2)), flat),
        "RBF (gamma by leave-one-out too)":
            (dict(kernel="rbf", param_grid={"gamma": list(np.geomspace(1e-3, 1.0, 10))}),
             flat)}
    rows = []
    for name, (kw, (A, T)) in models.items():
        t = time.perf_counter()
        clf = KernelRidgeClassifierCV(ALPHAS, solver="exact", scoring="accuracy",
                                      calibration=None, **kw).fit(A, ya)
        acc = float(np.mean(clf.predict(T) == yt))
        rows.append({"model": name, "accuracy": acc, "alpha": float(clf.alpha_),
                     "params": {k: float(v) for k, v in clf.best_params_.items()
                                if k != "alpha" and isinstance(v, float)},
                     "time_s": time.perf_counter() - t, "n_train": len(ya), "n_test": len(yt)})
        print(f"  {rows[-1]}", flush=True)
    return rows


# ------------------------------------------------------------------------ part c
def part_c(cfg):
    import kernelkit
    from kernelkit.kernels import ConvNTK

    rng = np.random.default_rng(0)
    n, rows = cfg["engine_rows"], []
    for name, layers, side in (("8x8, 3 conv + flatten", BLOCK * 3 + ["flatten"], 8),
                               ("8x8, Myrtle-5", "myrtle5", 8)):
        X, Y = rng.random((n, side, side, 1)), rng.random((n, side, side, 1))
        k = ConvNTK(layers=layers, w_std=R2)
        out, med = {}, {}
        for engine in ("numba", "numpy"):
            with kernelkit.config_context(backend=engine):
                out[engine] = k(X, Y)
                ts = []
                for _ in range(3):
                    t = time.perf_counter()
                    k(X, Y)
                    ts.append(time.perf_counter() - t)
            med[engine] = statistics.median(ts) / (n * n + 2 * n)
        np.testing.assert_allclose(out["numba"], out["numpy"], rtol=1e-12)
        rows.append({"case": name, "numba_us": 1e6 * med["numba"],
                     "numpy_us": 1e6 * med["numpy"], "ratio": med["numpy"] / med["numba"]})
        print(f"  {rows[-1]}", flush=True)
    return rows


# ------------------------------------------------------------------------ report
def render(res):
    cfg, m = res["config"], res["machine"]
    L = [SECTION, "", machine_line(m, loads=(res["loadavg_before"], res["loadavg_after"]),
                                   timestamp=res["timestamp"], commit=res["git"]["commit"]),
         ""]
    if res.get("part_a"):
        a = res["part_a"]
        L += ["### (a) NTK blocks: kernelkit (Numba) vs neural-tangents 0.6.5 (jit + batch)", "",
              f"float64, w_std = sqrt(2), no bias; each side in a fresh process, median of "
              f"{cfg['repeats']} timed calls after a compiling warm-up (one call where the "
              f"first took over {cfg['single_s']:g} s); peak = the process's "
              "VmHWM (interpreter and libraries included; 'base' = resident after imports "
              "and warm-up). Operations per pair: additions and multiplications of the "
              "recursion (window sums, state updates, pools, read-out), activation "
              "evaluations apart; pair evaluations = n m + n + m (each image also runs "
              f"with itself). Ceiling: a compiled cache-resident `out += in` loop, "
              f"{a[0]['add_ceiling_per_s'] / 1e9:.2f} G additions/s on {a[0]['threads']} "
              f"threads. Goal: kernelkit >= {GOAL_SPEED:g}x neural-tangents' speed at <= its "
              "peak memory.", "",
              "| case | n x m | ops / pair (act.) | kernelkit s (peak / base MiB) | "
              "neural-tangents s (peak / base MiB, batch) | speed ratio | memory ratio | "
              "kernelkit G ops/s (of ceiling) | max rel. diff | goal met |",
              "|---|---|---|---|---|---|---|---|---|---|"]
        for r in a:
            def side(tag, extra=""):
                if f"{tag}_time_s" not in r:
                    return "skipped" if r.get(f"{tag}_error") == "skipped" else "failed"
                return (f"{r[f'{tag}_time_s']:.2f} ({r[f'{tag}_peak_mib']:.0f} / "
                        f"{r[f'{tag}_base_mib']:.0f}{extra})")
            rate = (f"{r['kernelkit_flops_per_s'] / 1e9:.2f} "
                    f"({100 * r['kernelkit_of_ceiling']:.0f}%)"
                    if "kernelkit_flops_per_s" in r else "—")
            sp = f"{r['speed_ratio']:.2f}x" if "speed_ratio" in r else "—"
            mr = f"{r['memory_ratio']:.2f}" if "memory_ratio" in r else "—"
            df = f"{r['max_rel_diff']:.1e}" if "max_rel_diff" in r else "—"
            L.append(f"| {r['case']} | {r['n']:,} x {r['m']:,} | "
                     f"{r['flops_per_pair'] / 1e6:.3g} M ({r['activations_per_pair']:,}) | "
                     f"{side('kernelkit')} | {side('nt', ', ' + str(r['nt_batch_size']))} | "
                     f"{sp} | {mr} | {rate} | {df} | {fmt_met(r.get('goal_met'))} |")
        if res.get("nt_skipped"):
            L += ["", f"neural-tangents side skipped: {res['nt_skipped']}."]
        for r in a:
            L += [f"\n{tag} failed on {r['case']}: `{r[f'{tag}_error'][-300:]}`"
                  for tag in ("kernelkit", "nt") if r.get(f"{tag}_error") not in (None, "skipped")]
            if r.get("equal") is False:
                L.append(f"\n{r['case']}: the two blocks differ (max relative difference "
                         f"{r['max_rel_diff']:.1e}); no ratio reported.")
        L.append("")
    if res.get("part_b"):
        b = res["part_b"]
        L += [f"### (b) Kernel ridge on the digits: {b[0]['n_train']:,} train / "
              f"{b[0]['n_test']:,} test (stratified, seed 0)", "",
              "KernelRidgeClassifierCV, exact leave-one-out over "
              f"{len(ALPHAS)} alphas in [1e-10, 10]; pixels / 16.", "",
              "| model | test accuracy | alpha | other | time (s) |", "|---|---|---|---|---|"]
        for r in b:
            other = ", ".join(f"{k} {v:.3g}" for k, v in r["params"].items()) or "—"
            edge = " (grid edge)" if r["alpha"] in (min(ALPHAS), max(ALPHAS)) else ""
            L.append(f"| {r['model']} | {r['accuracy']:.4f} | {r['alpha']:.3g}{edge} | {other} | "
                     f"{r['time_s']:.1f} |")
        L.append("")
    if res.get("part_c"):
        L += ["### (c) Numba engine vs NumPy reference", "",
              f"{cfg['engine_rows']} x {cfg['engine_rows']} random images, median of 3.", "",
              "| case | numba us / pair | numpy us / pair | numpy / numba |", "|---|---|---|---|"]
        L += [f"| {r['case']} | {r['numba_us']:.1f} | {r['numpy_us']:.1f} | {r['ratio']:.2f} |"
              for r in res["part_c"]]
        L.append("")
    return "\n".join(L)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes; write no files")
    parser.add_argument("--parts", default="a,b,c", help="comma-separated parts to run")
    parser.add_argument("--nt-python", default=os.environ.get("KERNELKIT_NT_PYTHON",
                                                              "/work/ntenv/bin/python"),
                        help="interpreter of an environment with neural-tangents 0.6.5")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per side")
    args = parser.parse_args(argv)
    cfg = dict(QUICK if args.quick else FULL)
    if args.repeats:
        cfg["repeats"] = args.repeats
    res = {"timestamp": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
           "quick": args.quick, "config": cfg, "loadavg_before": list(os.getloadavg()),
           "machine": machine_info(peers=()), "git": git_state()}
    if JSON_PATH.exists() and not args.quick:  # keep parts not rerun
        old = json.loads(JSON_PATH.read_text())
        res.update({k: v for k, v in old.items() if k.startswith("part_") or k == "nt"})
    parts = {"a": part_a, "b": part_b, "c": part_c}
    for p in args.parts.split(","):
        print(f"part ({p})", flush=True)
        if p == "a":
            nt_py, why = nt_python(args.nt_python)
            if why:
                print(f"  neural-tangents side skipped: {why}", flush=True)
            res["nt_skipped"] = why
            res["part_a"] = part_a(cfg, nt_py)
        else:
            res[f"part_{p}"] = parts[p](cfg)
        res["loadavg_after"] = list(os.getloadavg())
        if not args.quick:
            JSON_PATH.write_text(json.dumps(res, indent=1, default=str) + "\n")
    section = render(res)
    publish(section, args.quick, MD_PATH, SECTION, JSON_PATH)


if __name__ == "__main__":
    main()
