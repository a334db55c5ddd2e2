"""``bench_gpu.py --check``: every device kernel and every estimator once, against NumPy.

One run on a GPU verifies the GPU path: for each row it computes a result from inputs in
the device namespace (CuPy) and the same result from NumPy inputs on the NumPy engine,
and prints a table (name, whether the result is in the input's namespace, max absolute
and relative difference, pass / fail). Rows:

* **engine**: the CuPy engine's kernel blocks ``k(X, Y)`` and ``k(X, X)``, the fused
  product ``k(X, Y) @ W`` and the diagonal, for every kernel, float32 and float64:
  the stationary CUDA kernel (Gaussian, Laplacian, Matern), the NTK / NNGP CUDA kernel
  (relu and erf, with and without bias) and the array-code kernels (polynomial, linear,
  cosine), against the NumPy engine;
* **conv**: the convolutional NTK and NNGP on device tiles;
* **metric**: :func:`kernelkit.metrics.mmd` on device input;
* **estimator**: every estimator case of ``_xp_cases.py`` fitted and predicting on device
  arrays under ``sklearn.config_context(array_api_dispatch=True)`` (``backend="auto"``),
  against the same estimator on NumPy arrays.

``--xp array_api_strict`` (or ``torch``) runs the same table with a host namespace in
place of CuPy (the engine rows then drive the engine's array code with that namespace),
so that everything but the device itself is exercised without a GPU.

Relative difference: the largest absolute difference over the largest absolute NumPy
value. Tolerances: float64 1e-9 (host namespace) / 1e-6 (device), float32 1e-5;
iterative estimators on a device 1e-4; labels and indices must agree in >= 99% of
entries on a device (all of them on the host).
"""

import importlib
import re
import sys
import time

import numpy as np

DEVICE_TOL = {"float64": 1e-6, "float32": 1e-5}
HOST_TOL = {"float64": 1e-9, "float32": 1e-5}
ITERATIVE = ("Falkon", "EigenPro", "STKR", "KONS", "SQUEAK", "RLSNystroem", "Thinning", "CV")


def _kernels():
    from kernelkit.kernels import NNGP, NTK, RBF, Cosine, Laplacian, Linear, Matern, Polynomial

    return [RBF(0.05), Laplacian(0.1), Matern(0.05, 0.5), Matern(0.05, 1.5), Matern(0.05, 2.5),
            Polynomial(0.05, 3, 1.0), Linear(), Cosine(), NTK(depth=3),
            NTK(depth=2, b_std=0.2), NNGP(depth=2, activation="erf", b_std=0.1),
            NTK(depth=1, activation="erf")]


class Namespace:
    """The namespace under test: its module, an engine on it, and moving arrays in."""

    def __init__(self, name):
        self.name = name
        if name == "cupy":
            from kernelkit.backend import resolve_backend

            resolve_backend("cupy")  # ValueError naming why when there is no usable GPU
            import cupy

            from kernelkit.backend._cupy import CupyBackend

            self.xp, self.engine, self.device = cupy, CupyBackend(), True
        else:
            from kernelkit.backend._cupy import CupyBackend

            self.xp = importlib.import_module(name)
            # PyTorch CPU tensors run on the host engines: no engine rows for them
            self.engine = None if name == "torch" else CupyBackend(xp=self.xp)
            self.device = False

    def put(self, a):
        if self.name == "torch":
            return self.xp.asarray(np.ascontiguousarray(a) if np.ndim(a) else np.asarray(a))
        return self.xp.asarray(a)

    def tol(self, dtype, iterative=False):
        if self.device and iterative:
            return 1e-4
        return (DEVICE_TOL if self.device else HOST_TOL)[np.dtype(dtype).name]


def _label(kern, dtype):
    """A kernel's short name: its repr without the hyperparameter bounds."""
    return re.sub(r",? ?\w+_bounds=\([^)]*\)", "", repr(kern)) + f" {dtype}"


def _row(kind, name, ns, ref, got, tol, seconds):
    from _xp_cases import compare, namespace_of

    outs = got if isinstance(got, dict) else {"": got}
    refs = ref if isinstance(ref, dict) else {"": ref}
    follows = all(namespace_of(v) == ns.name for v in outs.values())
    diffs = [compare(refs[k], v) for k, v in outs.items()]
    abs_d, rel_d = max(d[0] for d in diffs), max(d[1] for d in diffs)
    agree = min((d[2] for d in diffs if d[2] is not None), default=None)
    ok = follows and all((d[1] <= tol) if d[2] is None else
                         (d[2] >= (0.99 if ns.device else 1.0)) for d in diffs)
    return {"kind": kind, "name": name, "follows_input": follows, "max_abs": abs_d,
            "max_rel": rel_d, "agreement": agree, "tol": tol, "seconds": seconds, "ok": ok}


def _guard(kind, name, fn):
    t0 = time.perf_counter()
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 (a failed row, reported, not fatal)
        return {"kind": kind, "name": name, "ok": False, "seconds": time.perf_counter() - t0,
                "error": f"{type(exc).__name__}: {str(exc)[:160]}"}


def engine_rows(ns, rng, n=300, m=120, d=20):
    from kernelkit.backend._numpy import NumpyBackend

    ref_eng, rows = NumpyBackend(), []
    if ns.engine is None:
        return rows
    X0, Y0 = rng.standard_normal((n, d)) / 2, rng.standard_normal((m, d)) / 2
    X0[3] = 0.0       # a zero row (cosine, NTK self-pairs)
    Y0[4] = X0[9]     # an exact duplicate across X and Y
    W = rng.standard_normal((m, 3))
    for kern in _kernels():
        spec = kern.spec(d)
        for dt in ("float64", "float32"):
            X, Y = X0.astype(dt), Y0.astype(dt)

            def one(kern=kern, spec=spec, X=X, Y=Y, dt=dt):
                t0 = time.perf_counter()
                e = ns.engine
                got = {"k(X, Y)": e.pairwise(spec, ns.put(X), ns.put(Y)),
                       "k(X, X)": e.pairwise(spec, ns.put(X)),
                       "k(X, Y) @ W": e.matmul(spec, ns.put(X), ns.put(Y), ns.put(W)),
                       "diag": e.diag(spec, ns.put(X))}
                ref = {"k(X, Y)": ref_eng.pairwise(spec, X, Y),
                       "k(X, X)": ref_eng.pairwise(spec, X),
                       "k(X, Y) @ W": ref_eng.matmul(spec, X, Y, W),
                       "diag": ref_eng.diag(spec, X)}
                return _row("engine", _label(kern, dt), ns, ref, got, ns.tol(dt),
                            time.perf_counter() - t0)
            rows.append(_guard("engine", _label(kern, dt), one))
    return rows


def conv_rows(ns, rng):
    from kernelkit.kernels import ConvNNGP, ConvNTK

    rows = []
    X = rng.random((12, 8 * 8 * 2))
    Y = rng.random((7, 8 * 8 * 2))
    for cls in (ConvNTK, ConvNNGP):
        kern = cls(layers=(("conv", 3), "relu", ("conv", 3), "relu", "gap"), image_shape=(8, 8, 2))

        def one(kern=kern):
            t0 = time.perf_counter()
            got = {"k(X, Y)": kern(ns.put(X), ns.put(Y)), "k(X, X)": kern(ns.put(X))}
            ref = {"k(X, Y)": kern(X, Y), "k(X, X)": kern(X)}
            return _row("conv", cls.__name__, ns, ref, got, ns.tol("float64"),
                        time.perf_counter() - t0)
        rows.append(_guard("conv", cls.__name__, one))
    return rows


def metric_rows(ns, rng):
    from kernelkit.metrics import mmd

    X, Y = rng.standard_normal((200, 5)), rng.standard_normal((150, 5)) + 0.3

    def one():
        t0 = time.perf_counter()
        got, ref = mmd(ns.put(X), ns.put(Y), gamma=0.2), mmd(X, Y, gamma=0.2)
        row = _row("metric", "mmd", ns, np.asarray(ref), ns.put(np.asarray(float(got))),
                   ns.tol("float64"), time.perf_counter() - t0)
        return row  # a scalar: compared by value (a Python float is fine for any input)
    return [_guard("metric", "mmd", one)]


def estimator_rows(ns, n=400, n_test=100, d=20):
    import sklearn
    from _xp_cases import CASES, data, run_case, to_xp

    base = data(n, n_test, d=d, seed=0)
    rows = []
    for case in CASES:
        def one(case=case):
            ref = run_case(case, "tiny", *base)
            t0 = time.perf_counter()
            with sklearn.config_context(array_api_dispatch=True):
                got = run_case(case, "tiny", *(to_xp(a, ns.name) for a in base))
            iterative = any(k in case for k in ITERATIVE)
            return _row("estimator", case, ns, ref, got, ns.tol("float64", iterative),
                        time.perf_counter() - t0)
        rows.append(_guard("estimator", case, one))
    return rows


def render(rows, ns_name):
    head = (f"| kind | name | in {ns_name}? | max abs diff | max rel diff | agreement | tol | "
            "s | result |")
    L = [head, "|---|---|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        if "error" in r:
            L.append(f"| {r['kind']} | {r['name']} | — | — | — | — | — | {r['seconds']:.2f} | "
                     f"**FAIL** {r['error']} |")
            continue
        agree = "—" if r["agreement"] is None else f"{r['agreement']:.3f}"
        L.append(f"| {r['kind']} | {r['name']} | {'yes' if r['follows_input'] else '**no**'} | "
                 f"{r['max_abs']:.2e} | {r['max_rel']:.2e} | {agree} | {r['tol']:.0e} | "
                 f"{r['seconds']:.2f} | {'pass' if r['ok'] else '**FAIL**'} |")
    n_ok = sum(r["ok"] for r in rows)
    L += ["", f"{n_ok} of {len(rows)} checks passed ({ns_name} against NumPy)."]
    return "\n".join(L)


def run_check(ns_name="cupy", kinds=("engine", "conv", "metric", "estimator")):
    """Build the check table for namespace ``ns_name``; ``(rows, markdown)``.

    Raises
    ------
    ValueError
        If ``ns_name`` is ``"cupy"`` and CuPy or a usable GPU is missing.
    ImportError
        If a host namespace is not installed.
    """
    ns = Namespace(ns_name)
    where = "the host"
    if ns.device:
        where = ns.xp.cuda.runtime.getDeviceProperties(ns.xp.cuda.Device().id)["name"]
        where = where.decode() if isinstance(where, bytes) else where
    print(f"check: {ns_name} on {where!s} against NumPy", flush=True)
    rng = np.random.default_rng(0)
    rows = []
    makers = {"engine": lambda: engine_rows(ns, rng), "conv": lambda: conv_rows(ns, rng),
              "metric": lambda: metric_rows(ns, rng), "estimator": lambda: estimator_rows(ns)}
    for kind in kinds:
        for r in makers[kind]():
            rows.append(r)
            state = "pass" if r["ok"] else "FAIL " + r.get("error", "")
            print(f"  {r['kind']:<9} {r['name']:<44} {state}"[:160], flush=True)
    return rows, render(rows, ns_name)


def main_check(ns_name, kinds=None):
    """The ``--check`` entry point: exit status 0 all passed, 1 a check failed, 2 no device."""
    import os

    os.environ.setdefault("SCIPY_ARRAY_API", "1")
    if "scipy" in sys.modules and os.environ["SCIPY_ARRAY_API"] != "1":
        print("set SCIPY_ARRAY_API=1 before running the check", file=sys.stderr)
    try:
        rows, md = run_check(ns_name, **({"kinds": kinds} if kinds else {}))
    except ValueError as exc:
        print(f"bench_gpu.py --check needs CuPy and a CUDA GPU: {exc}\n(use --check --xp "
              "array_api_strict to run the same checks with a host namespace)", file=sys.stderr)
        return 2
    except ImportError as exc:
        print(f"bench_gpu.py --check: namespace {ns_name!r} is not installed ({exc})",
              file=sys.stderr)
        return 2
    print("\n" + md)
    return 0 if all(r["ok"] for r in rows) else 1
