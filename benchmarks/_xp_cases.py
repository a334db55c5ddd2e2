"""The estimator cases that ``bench_array_api.py`` times and ``bench_gpu.py --check`` verifies.

One list, so that the timing benchmark and the device check cover the same estimators:
each case makes an estimator (parameters sized by a ``scale``: ``"bench"`` for
n = 10,000 Fashion-MNIST images, ``"tiny"`` for a check on a few hundred rows), fits it
on arrays of one namespace and returns what it computed (predictions, decision values,
transformed rows or a fitted attribute), so that two namespaces' results can be compared.

Namespaces: ``"numpy"`` (plain, no dispatch), ``"array_api_strict"``, ``"torch"`` (CPU
tensors) and ``"cupy"``; every non-NumPy call runs inside
``sklearn.config_context(array_api_dispatch=True)`` (which needs ``SCIPY_ARRAY_API=1`` in
the environment before SciPy is imported; the scripts set it).
"""

import importlib

import numpy as np

# name -> (group, task, factory(scale) -> estimator)
#   task "reg": fit(X, y_reg), predict(X_test)
#        "clf": fit(X, y), decision_function / predict_proba(X_test) (and predict)
#        "semi": fit(X, y with -1 for unlabelled rows), predict(X_test)
#        "transform": fit(X), transform(X_test)
#        "scores": fit(X), estimate_leverage_scores(X_test)
#        "coreset": fit(X), the coreset rows X[coreset_indices_]
GAMMA = {"bench": 0.02, "tiny": 0.05}  # Gaussian gamma for pixels in [0, 1] (d = 784 / 20)


def _kk():
    return importlib.import_module("kernelkit")


def _ridge(scale):
    return _kk().KernelRidge(alpha=1e-3, kernel="rbf", gamma=GAMMA[scale])


def _ridge_clf(scale):
    return _kk().KernelRidgeClassifier(alpha=1e-3, kernel="rbf", gamma=GAMMA[scale])


def _ridge_cv(scale):
    m = 1000 if scale == "bench" else 60
    return _kk().KernelRidgeClassifierCV((1e-3, 1e-2, 1e-1), kernel="rbf", gamma=GAMMA[scale],
                                         solver="nystrom", n_centers=m, random_state=0)


def _ntk(scale):
    return _kk().NTKRidgeClassifier(alpha=1e-2, depth=2)


def _gp(scale):
    return _kk().InfiniteWidthRegressor(depth=2)


def _falkon(scale):
    m = 2000 if scale == "bench" else 80
    return _kk().FalkonClassifier(n_centers=m, gamma=GAMMA[scale], random_state=0)


def _eigenpro(algorithm):
    def make(scale):
        kw = {} if algorithm == "ep2" else {"n_centers": 2000 if scale == "bench" else 100}
        epochs = 1 if algorithm == "ep2" and scale == "bench" else 2  # EP2: n^2 d per epoch
        return _kk().EigenProClassifier(gamma=GAMMA[scale], algorithm=algorithm,
                                        max_iter=epochs, tol=None, random_state=0, **kw)
    return make


def _stkr(scale):
    return _kk().STKRClassifier(n_neighbors=7, random_state=0)


def _kons(scale):
    return _kk().KONSRegressor(gamma=GAMMA[scale], random_state=0,
                               max_atoms=150 if scale == "bench" else 40)


def _squeak(scale):
    return _kk().SQUEAK(gamma=GAMMA[scale], random_state=0)


def _rls(scale):
    return _kk().RLSNystroem(gamma=GAMMA[scale], n_components=500 if scale == "bench" else 40,
                             random_state=0)


def _thinning(scale):
    return _kk().KernelThinning(gamma=GAMMA[scale], random_state=0, compress="compress++"
                                if scale == "bench" else None)


def _rff(scale):
    k = _kk()
    return k.RandomFeaturesClassifier(
        k.RandomFourierFeatures(1000 if scale == "bench" else 100, gamma=GAMMA[scale],
                                random_state=0), alpha=1e-2, random_state=0)


CASES = {
    "KernelRidge (exact)": ("ridge", "reg", _ridge),
    "KernelRidgeClassifier (exact)": ("ridge", "clf", _ridge_clf),
    "KernelRidgeClassifierCV (Nystrom)": ("ridge", "clf", _ridge_cv),
    "NTKRidgeClassifier (depth 2)": ("ntk", "clf", _ntk),
    "InfiniteWidthRegressor (GP)": ("gp", "reg", _gp),
    "FalkonClassifier": ("falkon", "clf", _falkon),
    "EigenProClassifier (EP2)": ("eigenpro", "clf", _eigenpro("ep2")),
    "EigenProClassifier (EP3)": ("eigenpro", "clf", _eigenpro("ep3")),
    "EigenProClassifier (EP4)": ("eigenpro", "clf", _eigenpro("ep4")),
    "STKRClassifier": ("stkr", "semi", _stkr),
    "KONSRegressor": ("kons", "reg", _kons),
    "SQUEAK": ("leverage", "scores", _squeak),
    "RLSNystroem": ("leverage", "transform", _rls),
    "KernelThinning": ("thinning", "coreset", _thinning),
    "RandomFeaturesClassifier (RFF)": ("random_features", "clf", _rff),
}

# training rows of the "bench" scale where not the default 10,000: the exact O(n^3) fits
# (Cholesky, leave-one-out calibration, the GP's eigendecompositions), kept to seconds on
# 2 cores
BENCH_N = {"KernelRidge (exact)": 5000, "KernelRidgeClassifier (exact)": 3000,
           "NTKRidgeClassifier (depth 2)": 3000, "InfiniteWidthRegressor (GP)": 2000}


# ------------------------------------------------------------------------ namespaces
def namespace(name):
    """``(xp, device)`` of a namespace name; ImportError if it is not installed."""
    if name == "numpy":
        return np, None
    if name == "torch":
        import torch

        return torch, "cpu"
    mod = importlib.import_module(name)
    return mod, None


def to_xp(a, name, dtype=None):
    """A NumPy array ``a`` moved to namespace ``name`` (floats cast to ``dtype``)."""
    if dtype is not None and a.dtype.kind == "f":
        a = a.astype(dtype)
    if name == "numpy":
        return a
    xp, device = namespace(name)
    if name == "torch":
        return xp.asarray(np.ascontiguousarray(a) if a.ndim else a, device=device)
    return xp.asarray(a)


def to_numpy(a):
    """Any namespace's array (or a scalar) as a NumPy array."""
    if isinstance(a, np.ndarray):
        return a
    if hasattr(a, "get") and type(a).__module__.startswith("cupy"):
        return a.get()
    if type(a).__module__.startswith("torch"):
        return a.detach().cpu().numpy()
    try:
        return np.asarray(a)
    except (TypeError, RuntimeError, ValueError):  # array-api-strict on a non-CPU device
        xp = a.__array_namespace__()
        return np.asarray(xp.asarray(a, device=xp.Device("CPU_DEVICE")))


def namespace_of(a):
    """The top-level module name of an array's type (``numpy``, ``torch``, ...)."""
    return type(a).__module__.split(".")[0]


def data(n, n_test, d=None, seed=0):
    """``(X, y, y_reg, X_test)``: Fashion-MNIST when ``d`` is None, else synthetic images.

    Synthetic: uniform pixels in [0, 1], ``d`` of them, four classes from two pixel
    averages (learnable), regression target a smooth function of the pixels.
    """
    if d is None:
        from _common import load_fashion_mnist

        Xa, ya, Xt, _ = load_fashion_mnist()
        idx = np.sort(np.random.RandomState(seed).choice(len(ya), n, replace=False))
        X, y, X_test = Xa[idx], ya[idx].astype(np.int64), Xt[:n_test]
    else:
        rng = np.random.default_rng(seed)
        Z = rng.random((n + n_test, d))
        X, X_test = Z[:n], Z[n:]
        h = d // 2
        y = ((X[:, :h].mean(1) > X[:, h:].mean(1)).astype(np.int64)
             + 2 * (X[:, 0] > 0.5).astype(np.int64))
    y_reg = np.sin(3 * X[:, : X.shape[1] // 2].mean(1)) + X[:, -1]
    return X, y, y_reg, X_test


def run_case(name, scale, X, y, y_reg, X_test):
    """Fit case ``name`` on these arrays (all of one namespace); its outputs, by name."""
    group, task, make = CASES[name]
    est = make(scale)
    if task == "reg":
        est.fit(X, y_reg)
        return {"predict": est.predict(X_test)}
    if task == "semi":
        yn = to_numpy(y).copy()
        yn[np.arange(yn.shape[0]) % 10 != 0] = -1  # 90% of the rows unlabelled
        est.fit(X, to_xp(yn, namespace_of(y)))
        return {"predict": est.predict(X_test)}
    if task == "clf":
        est.fit(X, y)
        out = {"predict": est.predict(X_test)}
        for m in ("decision_function", "predict_proba"):
            if hasattr(est, m):
                out[m] = getattr(est, m)(X_test)
                break
        return out
    if task == "transform":
        est.fit(X)
        return {"transform": est.transform(X_test)}
    if task == "scores":
        est.fit(X)
        return {"estimate_leverage_scores": est.estimate_leverage_scores(X_test)}
    est.fit(X)  # coreset
    return {"coreset_indices_": est.coreset_indices_}


def compare(ref, got):
    """``(max abs difference, max relative difference, agreement)`` of two outputs.

    Relative: the largest absolute difference over the largest absolute reference value.
    Integer outputs (labels, indices) also report the fraction of equal entries.
    """
    r, g = to_numpy(ref), to_numpy(got)
    if r.shape != g.shape:
        return float("inf"), float("inf"), 0.0
    if r.dtype.kind in "iub" or g.dtype.kind in "iub":
        same = float(np.mean(r == g)) if r.size else 1.0
        diff = float(np.max(np.abs(r.astype(np.float64) - g.astype(np.float64)), initial=0))
        return diff, diff / max(float(np.max(np.abs(r), initial=0)), 1.0), same
    diff = float(np.max(np.abs(r.astype(np.float64) - g.astype(np.float64)), initial=0))
    return diff, diff / max(float(np.max(np.abs(r), initial=0)), 1e-300), None
