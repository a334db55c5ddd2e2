"""A rejected call leaves an estimator exactly as it was (the reliability family
"rejected call"; see the index in test_reliability.py).

Every public estimator of kernelkit (``kernelkit.__all__`` and the public names of its
method packages, the river adapters included) meets every way a call can be rejected: a
bad parameter set before a fit on data of another width (parameters are validated before
data), bad X (NaN; NaN in a frame with other column names), bad y (NaN, inf, 1e200
overflow), bad sample_weight (negative, wrong length), a kernel that fails midway through
the fit (a callable kernel, or the engine's kernel passes, raising from half the calls a
good fit makes), and for incremental learners a bad chunk after good ones. The mechanism
under test is ``kernelkit.utils._state.atomic``.
"""

import copy
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics.pairwise import rbf_kernel

import kernelkit as kk
from kernelkit.leverage import SQUEAK, INKEstimate, RLSNystroem
from kernelkit.thinning import KernelThinning

_N0, _N1, _D = 32, 48, 3
_RNG = np.random.default_rng(7)
_X0, _X1 = _RNG.standard_normal((_N0, _D)), _RNG.standard_normal((_N1, _D + 1))


_FAULT = {"calls": 0, "at": None}  # kernel evaluations counted; failing from call "at" on


def _tick():
    _FAULT["calls"] += 1
    if _FAULT["at"] is not None and _FAULT["calls"] >= _FAULT["at"]:
        raise RuntimeError("injected kernel failure")


def _flaky_rbf(A, B):
    _tick()
    return rbf_kernel(np.atleast_2d(A), np.atleast_2d(B), gamma=0.5)


_G = {"gamma": 0.5, "random_state": 0}
# name: (factory, kind of y / read-back, a bad parameter, flags: w sample_weight, p partial_fit,
# n no kernel parameter, x no engine kernel blocks (random features: their own maps))
STATE_SPECS = {
    "KernelRidge": (lambda: kk.KernelRidge(kernel="rbf", gamma=0.5), "reg", ("alpha", -1.0),
                    "w"),
    "KernelRidgeClassifier": (lambda: kk.KernelRidgeClassifier(kernel="rbf", gamma=0.5), "clf",
                              ("alpha", -1.0), "w"),
    # the default linear kernel with n >= 2 d: the primal solve (no kernel blocks)
    "KernelRidge-primal": (kk.KernelRidge, "reg", ("alpha", -1.0), "wnx"),
    "KernelRidgeClassifier-primal": (kk.KernelRidgeClassifier, "clf", ("alpha", -1.0), "wnx"),
    "KernelRidgeCV": (lambda: kk.KernelRidgeCV(alphas=(0.01, 1.0), kernel="rbf", gamma=0.5),
                      "reg", ("alphas", (-1.0,)), "w"),
    "KernelRidgeClassifierCV": (lambda: kk.KernelRidgeClassifierCV(alphas=(0.01, 1.0),
                                                                   kernel="rbf", gamma=0.5),
                                "clf", ("alphas", (-1.0,)), "w"),
    "KernelRidge-intercept": (lambda: kk.KernelRidge(kernel="rbf", gamma=0.5, fit_intercept=True),
                              "reg",
                              ("fit_intercept", "yes"), "w"),
    "KernelRidgeClassifier-intercept": (lambda: kk.KernelRidgeClassifier(
        kernel="rbf", gamma=0.5, fit_intercept=True), "clf", ("fit_intercept", 1), "w"),
    "KernelRidgeCV-intercept": (lambda: kk.KernelRidgeCV(
        alphas=(0.01, 1.0), kernel="rbf", gamma=0.5, fit_intercept=True), "reg",
        ("fit_intercept", "no"), "w"),
    "NTKRidge": (kk.NTKRidge, "reg", ("alpha", -1.0), "wn"),
    "NTKRidgeClassifier": (kk.NTKRidgeClassifier, "clf", ("alpha", -1.0), "wn"),
    "InfiniteWidthRegressor": (kk.InfiniteWidthRegressor, "gp", ("depth", 0), "n"),
    "InfiniteWidthClassifier": (kk.InfiniteWidthClassifier, "clf", ("depth", 0), "n"),
    "FalkonRegressor": (lambda: kk.FalkonRegressor(n_centers=10, **_G), "reg", ("alpha", -1.0),
                        ""),
    "FalkonClassifier": (lambda: kk.FalkonClassifier(n_centers=10, **_G), "clf",
                         ("alpha", -1.0), ""),
    "EigenProRegressor": (lambda: kk.EigenProRegressor(max_iter=3, **_G), "reg",
                          ("gamma", -1.0), ""),
    "EigenProClassifier": (lambda: kk.EigenProClassifier(max_iter=3, **_G), "clf",
                           ("gamma", -1.0), ""),
    "SQUEAK": (lambda: SQUEAK(**_G), "unsup", ("gamma_reg", -1.0), ""),
    "INKEstimate": (lambda: INKEstimate(**_G), "unsup", ("gamma_reg", -1.0), "p"),
    "RLSNystroem": (lambda: RLSNystroem(n_components=8, **_G), "unsup", ("n_components", 0), ""),
    "KernelThinning": (lambda: KernelThinning(m=1, **_G), "unsup", ("m", -1), "w"),
    "KONSRegressor": (lambda: kk.KONSRegressor(**_G), "reg", ("gamma_reg", -1.0), "p"),
    "KONSClassifier": (lambda: kk.KONSClassifier(**_G), "clf", ("gamma_reg", -1.0), "p"),
    "STKRRegressor": (lambda: kk.STKRRegressor(kernel="rbf", gamma=0.5), "semi",
                      ("gamma", -1.0), ""),
    "STKRClassifier": (lambda: kk.STKRClassifier(kernel="rbf", gamma=0.5), "semiclf",
                       ("gamma", -1.0), ""),
    "RandomFourierFeatures": (lambda: kk.RandomFourierFeatures(n_components=16, **_G),
                              "unsup", ("n_components", 3), "nx"),
    "ArcCosineFeatures": (lambda: kk.ArcCosineFeatures(n_components=16, random_state=0),
                          "unsup", ("n_components", 0), "nx"),
    "NTKRandomFeatures": (lambda: kk.NTKRandomFeatures(n_components=16, random_state=0),
                          "unsup", ("n_components", 0), "nx"),
    "TensorSketch": (lambda: kk.TensorSketch(n_components=16, **_G), "unsup",
                     ("n_components", 0), "nx"),
    "RandomFeaturesRegressor": (lambda: kk.RandomFeaturesRegressor(random_state=0), "reg",
                                ("alpha", -1.0), "wpnx"),
    "RandomFeaturesClassifier": (lambda: kk.RandomFeaturesClassifier(random_state=0), "clf",
                                 ("alpha", -1.0), "wpnx"),
    "RiverKONS": (lambda: kk.online.RiverKONS(kk.KONSRegressor(**_G)), "river", None, ""),
    "RiverKONS-classifier": (lambda: kk.online.RiverKONS(kk.KONSClassifier(
        loss="logistic", **_G)), "riverclf", None, ""),
}
STATE_SPECS = {k: dict(make=f, kind=kind, bad=bad, weights="w" in fl, partial="p" in fl,
                       kernel="n" not in fl, engine="x" not in fl)
               for k, (f, kind, bad, fl) in STATE_SPECS.items()}


def _public_estimators():
    mods = (kk, kk.leverage, kk.thinning, kk.online, kk.stkr, kk.ridge, kk.eigenpro,
            kk.random_features)
    return {n for m in mods for n in m.__all__  # every public class but CV splitters
            if isinstance(getattr(m, n), type) and not hasattr(getattr(m, n), "split")}


def test_state_specs_cover_every_public_estimator():
    assert _public_estimators() <= set(STATE_SPECS)


def _targets(kind, n, bad=None, rng=None):
    """y for ``kind`` with n rows; ``bad`` puts NaN / inf / 1e200 in it."""
    rng = rng or np.random.default_rng(n)
    y = rng.standard_normal(n)
    if kind in ("clf", "semiclf", "riverclf"):
        y = (y > 0).astype(float)
        y[:2] = [0.0, 1.0]
    if kind in ("semi", "semiclf"):
        y[-n // 4:] = np.nan if kind == "semi" else -1  # unlabeled rows
    if bad == "nan":
        y[:] = np.nan  # no label at all (semi-supervised) or NaN targets
    elif bad == "inf":
        y[3] = np.inf
    elif bad == "overflow":
        y = y * 1e200
    return y


def _read(est, kind, X):
    """What a user reads off the model on X (None: its fitted arrays only)."""
    if kind == "river":
        return np.array([est.predict_one(dict(enumerate(r))) for r in X])
    if kind == "riverclf":
        return np.array([list(est.predict_proba_one(dict(enumerate(r))).values()) for r in X])
    if kind == "gp":
        return np.column_stack(est.predict(X, return_std=True))
    if hasattr(est, "decision_function"):
        out = [est.decision_function(X)]
        if hasattr(est, "predict_proba"):
            out.append(est.predict_proba(X))
        return np.column_stack(out)
    if hasattr(est, "predict"):
        return est.predict(X)
    if hasattr(est, "transform"):
        return est.transform(X)
    return None


def _same(a, b, public=False, depth=0):
    """Exact equality of two attribute values (arrays element- and dtype-wise); ``public``
    skips the private attributes of the objects met."""
    def rec(x, y):
        return _same(x, y, public, depth + 1)

    if a is b or type(a) is not type(b):
        return a is b
    if isinstance(a, np.ndarray):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.dtype == object:
            return all(rec(x, y) for x, y in zip(a.ravel(), b.ravel()))
        return np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
    if sp.issparse(a):
        return a.shape == b.shape and (a != b).nnz == 0
    if hasattr(a, "columns") and hasattr(a, "to_numpy"):  # a pandas frame
        return list(a.columns) == list(b.columns) and rec(a.to_numpy(), b.to_numpy())
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(rec(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(rec(a[k], b[k]) for k in a)
    if isinstance(a, (np.random.Generator, np.random.RandomState)):
        return rec(*[r.get_state() if hasattr(r, "get_state") else r.bit_generator.state
                     for r in (a, b)])
    if isinstance(a, (float, np.floating)):
        return bool(a == b or (a != a and b != b))
    if depth < 6 and (hasattr(a, "__dict__") or hasattr(a, "__slots__")):
        def fields(o):
            out = dict(vars(o)) if hasattr(o, "__dict__") else {}
            out |= {n: getattr(o, n) for n in getattr(o, "__slots__", ()) if hasattr(o, n)}
            return {k: v for k, v in out.items() if not (public and k.startswith("_"))}
        return rec(fields(a), fields(b))
    try:
        return bool(a == b)
    except Exception:
        return False


def _learn(est, spec, X, y, **kw):
    """One good incremental step (a chunk, or samples one by one for river)."""
    if spec["kind"].startswith("river"):
        for r, t in zip(X, y):
            est.learn_one(dict(enumerate(r)), t)
    else:
        est.partial_fit(X, *([] if spec["kind"] == "unsup" else [y]), **kw)


def _first_fit(name, flaky):
    spec = STATE_SPECS[name]
    est = spec["make"]()
    if flaky:
        (est.estimator if spec["kind"][:5] == "river" else est).set_params(kernel=_flaky_rbf,
                                                                          gamma=None)
    y0 = _targets(spec["kind"], _N0, rng=np.random.default_rng(0))
    if spec["partial"] or spec["kind"][:5] == "river":
        _learn(est, spec, _X0[:16], y0[:16],
               **({"classes": [0.0, 1.0]} if spec["kind"] == "clf" else {}))
        _learn(est, spec, _X0[16:], y0[16:])
    else:
        est.fit(_X0, *([] if spec["kind"] == "unsup" else [y0]))
    return est


def _rejected_calls(name):
    """{case: (method, args, kwargs)}: every way a call to ``name`` can be rejected."""
    spec = STATE_SPECS[name]
    kind = spec["kind"]
    Xnan = _X1.copy()
    Xnan[5, 1] = np.nan
    y1 = _targets(kind, _N1)

    def fit(X, y=y1, **kw):
        return ("fit", (X,) if kind == "unsup" else (X, y), kw)

    if kind.startswith("river"):
        d, t = dict(enumerate(_X1[0, :_D])), 1.0
        calls = {"x-nan": (d | {1: np.nan}, t), "x-not-a-number": (d | {1: "a"}, t),
                 "kernel-engine": (d, t), "kernel-callable": (d, t)}
        if kind == "river":
            calls |= {"y-nan": (d, np.nan), "y-inf": (d, np.inf)}
        return {c: ("learn_one", a, {}) for c, a in calls.items()}
    cases = {"X-nan": fit(Xnan), "param": fit(_X1)}
    if spec["engine"]:
        cases["kernel-engine"] = fit(_X1)
    if spec["kernel"]:
        cases["kernel-callable"] = fit(_X1[:, :_D])
    try:
        import pandas as pd

        # feature names of a different frame must not survive the rejected fit
        cases["X-nan-frame"] = fit(pd.DataFrame(Xnan, columns=[f"c{j}" for j in range(_D + 1)]))
    except ImportError:
        pass
    if kind != "unsup":
        for b in ("nan", "inf") + (("overflow",) if kind in ("reg", "gp", "semi") else ()):
            cases[f"y-{b}"] = fit(_X1, _targets(kind, _N1, bad=b))
    if spec["weights"]:
        w = np.ones(_N1)
        w[3] = -1.0
        cases["sw-negative"] = fit(_X1, sample_weight=w)
        cases["sw-length"] = fit(_X1, sample_weight=np.ones(_N1 - 1))
    if spec["partial"]:
        yb = _targets(kind, 12, rng=np.random.default_rng(3))

        def chunk(X, y=yb):
            return ("partial_fit", (X,) if kind == "unsup" else (X, y), {})

        good = _X1[:12, :_D]
        cases |= {"chunk-X-nan": chunk(Xnan[:12, :_D]), "chunk-X-features": chunk(_X1[:12]),
                  "chunk-param": chunk(good)}
        if spec["engine"]:
            cases["chunk-kernel-engine"] = chunk(good)
        if spec["kernel"]:
            cases["chunk-kernel-callable"] = chunk(good)
        if kind != "unsup":
            cases["chunk-y-nan"] = chunk(good, np.full(12, np.nan))
            cases["chunk-y-inf"] = chunk(good, np.r_[yb[:11], np.inf])
        if kind == "clf":
            cases["chunk-y-unseen-label"] = chunk(good, np.r_[yb[:11], 7.0])
    return cases


_XFAIL = {}
_STATE_CASES = [pytest.param(n, c, marks=pytest.mark.xfail(strict=True, reason=_XFAIL[n, c]))
                if (n, c) in _XFAIL else (n, c)
                for n in sorted(STATE_SPECS) for c in _rejected_calls(n)]


def _count_kernel_calls(monkeypatch):
    """Route every kernel block / product / diagonal an engine computes through the fault
    counter (the NTK-family estimators take no callable kernel)."""
    from kernelkit.backend import get_backend

    for cls in {type(get_backend(b)) for b in ("numpy", "numba")}:
        for meth in ("pairwise", "pairwise_into", "matmul", "diag"):
            def wrapped(self, *a, _orig=getattr(cls, meth), **k):
                _tick()
                return _orig(self, *a, **k)

            monkeypatch.setattr(cls, meth, wrapped)


@pytest.mark.parametrize(("name", "case"), _STATE_CASES)
def test_rejected_call_leaves_the_model_as_it_was(name, case, monkeypatch):
    """A call that raises (bad parameter, bad X / y / sample_weight, a kernel failing
    midway, a bad chunk after good ones) leaves ``vars(est)`` exactly as before: same
    keys, every value equal (arrays with np.array_equal), same outputs on the first data;
    the arrays passed in are untouched. Incremental learners may keep scratch rows past
    their live state (copy-on-write buffers): their private attributes are checked by
    the next good chunk, which must give exactly what it gives on an untouched copy."""
    spec = STATE_SPECS[name]
    meth, args, kwargs = _rejected_calls(name)[case]
    given = copy.deepcopy((args, kwargs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the models' own warnings are not the point here
        _FAULT.update(calls=0, at=None)
        est = _first_fit(name, flaky=case.endswith("kernel-callable"))
        before, out = copy.deepcopy(vars(est)), _read(est, spec["kind"], _X0)
        pristine, online = copy.deepcopy(est), spec["partial"] or spec["kind"][:5] == "river"
        params = est.get_params(deep=False) if hasattr(est, "get_params") else None
        if case.endswith("param"):
            est.set_params(**{spec["bad"][0]: spec["bad"][1]})
        if case.endswith("kernel-engine"):
            _count_kernel_calls(monkeypatch)
        if "kernel" in case:  # fail midway: from half the calls a good run makes
            _FAULT.update(calls=0)
            getattr(copy.deepcopy(est), meth)(*args, **kwargs)
            _FAULT.update(at=max(1, _FAULT["calls"] // 2 + 1), calls=0)
        try:
            getattr(est, meth)(*args, **kwargs)
            raised = None
        except Exception as exc:  # noqa: BLE001 - the type is asserted below
            raised = exc
        _FAULT.update(at=None)
        assert _same((args, kwargs), given), "the call modified its arguments"
        if case == "y-overflow" and raised is None:  # accepted: must then be finite
            assert np.all(np.isfinite(_read(est, spec["kind"], _X1))), name
            return
        assert raised is not None, f"{name}.{meth} accepted {case}"
        if "kernel" in case:
            assert isinstance(raised, RuntimeError) and "injected" in str(raised), repr(raised)
        else:
            assert isinstance(raised, (ValueError, TypeError)), repr(raised)
            if case.endswith("param"):
                assert spec["bad"][0] in str(raised), raised
        if params is not None:
            est.set_params(**params)
        assert set(vars(est)) == set(before)
        diff = [k for k in before if not (online and k[0] == "_")
                and not _same(vars(est)[k], before[k], public=online)]
        assert not diff, f"{name} changed {diff} on a rejected {case}"
        if out is not None:
            np.testing.assert_array_equal(_read(est, spec["kind"], _X0), out)
        if online:  # the next good chunk: as on the untouched model
            for model in (est, pristine):
                _learn(model, spec, _X0[:8], _targets(spec["kind"], 8))
            np.testing.assert_array_equal(_read(est, spec["kind"], _X0),
                                          _read(pristine, spec["kind"], _X0))
