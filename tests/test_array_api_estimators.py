"""Results follow the input in every estimator (scikit-learn's array API dispatch).

* scikit-learn's own array API checks (same namespace with values compared to NumPy,
  mixed namespaces for ``y`` / ``sample_weight``, refusal of a predict namespace other
  than fit's) for every estimator, with PyTorch CPU tensors (float32, float64) and
  array-api-strict on its CPU device and on its non-CPU ``device1``.
* The methods those checks do not call (``fit_transform``, ``fit_predict``,
  ``partial_fit``, ``partial_fit_predict``, ``predict(..., return_std=True)``,
  ``estimate_leverage_scores``): namespace, device, NumPy's dtype and values.
* Pickling a model fitted on torch / array-api-strict and loading it where neither
  library can be imported; the documented rules across fit and predict; errors; a
  rejected fit leaves a device-fitted model as it was; without dispatch, scikit-learn's
  behaviour (torch in, NumPy out).

scikit-learn asks for ``SCIPY_ARRAY_API=1`` before it enables dispatch; kernelkit hands
SciPy NumPy arrays only, so the variable is set for these tests alone.
"""

import inspect
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest
import sklearn
from numpy.testing import assert_allclose
from sklearn.base import BaseEstimator, clone
from sklearn.datasets import make_classification
from sklearn.utils import get_tags
from sklearn.utils._array_api import NamespaceAndDevice
from sklearn.utils.estimator_checks import (
    check_array_api_input,
    check_array_api_mixed_inputs,
    check_array_api_same_namespace,
)

import kernelkit
from kernelkit import (FalkonClassifier, KernelRidge, KernelRidgeClassifier, KernelRidgeClassifierCV,
                       RandomFeaturesClassifier)
from kernelkit.backend import available_backends, resolve_backend
from kernelkit.utils import _array_api as aa

xps = pytest.importorskip("array_api_strict")

NAMES = [n for n in kernelkit.__all__
         if isinstance(getattr(kernelkit, n), type)
         and issubclass(getattr(kernelkit, n), BaseEstimator)]
COMBOS = [("array_api_strict", "CPU_DEVICE", "float64"), ("array_api_strict", "device1", "float32"),
          ("torch", "cpu", "float64"), ("torch", "cpu", "float32")]


@pytest.fixture(autouse=True)
def _scipy_flag(monkeypatch):
    monkeypatch.setenv("SCIPY_ARRAY_API", "1")


def _xp(name, device):
    """``(namespace, device)``; torch through array-api-compat; skips without torch."""
    if name == "torch":
        torch = pytest.importorskip("torch")
        return aa.array_namespace(torch.zeros(1)), torch.device(device)
    return xps, xps.Device(device)


def _estimator(name):
    est = getattr(kernelkit, name)()
    if "random_state" in est.get_params():
        est.set_params(random_state=0)
    return est


def _data(dtype="float64", n=30):
    X, y = make_classification(n_samples=n, n_features=6, random_state=0)
    return X.astype(dtype), y


def _host(a):
    return aa.to_host(a)


def _same_place(a, ref):
    """``a`` is an array of ``ref``'s namespace on ``ref``'s device."""
    assert aa.array_namespace(a) is aa.array_namespace(ref), type(a)
    assert str(aa._device_of(a)) == str(aa._device_of(ref))


@pytest.mark.parametrize("name", NAMES)
def test_tag_says_supported(name):
    assert get_tags(getattr(kernelkit, name)()).array_api_support


@pytest.mark.parametrize("ns, device, dtype", COMBOS)
@pytest.mark.parametrize("name", NAMES)
def test_sklearn_array_api_input(name, ns, device, dtype):
    if ns == "torch":
        pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_array_api_input(name, _estimator(name), ns, device, dtype, check_values=True,
                              check_sample_weight=True)


@pytest.mark.parametrize("name", NAMES)
def test_sklearn_mixed_inputs_and_same_namespace(name):
    pytest.importorskip("torch")
    est = _estimator(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_array_api_mixed_inputs(name, est, NamespaceAndDevice("array_api_strict", "device1"),
                                     NamespaceAndDevice("torch", "cpu"))
        check_array_api_mixed_inputs(name, est, NamespaceAndDevice("torch", "cpu"),
                                     NamespaceAndDevice("numpy", None))
        check_array_api_same_namespace(name, est, "array_api_strict")


def _other_calls(est, X, y):
    """Outputs of the methods scikit-learn's checks leave out, by name."""
    out = {}
    kw = {}
    if "Classifier" in type(est).__name__:  # the labels, in y's namespace
        kw["classes"] = aa.to_namespace(np.unique(_host(y)), aa.array_namespace(y),
                                        getattr(y, "device", None))
    for m in ("fit_transform", "fit_predict", "partial_fit_predict"):
        if hasattr(est, m):
            out[m] = getattr(clone(est), m)(X, y, **(kw if m.startswith("partial") else {}))
    if hasattr(est, "estimate_leverage_scores"):
        out["estimate_leverage_scores"] = clone(est).fit(X, y).estimate_leverage_scores(X)
    if hasattr(est, "partial_fit"):
        part = clone(est).partial_fit(X, y, **kw)
        read = getattr(part, "predict", getattr(part, "estimate_leverage_scores", None))
        out["partial_fit"] = read(X)
    if "return_std" in inspect.signature(getattr(est, "predict", lambda X: None)).parameters:
        out["predict_std"] = clone(est).fit(X, y).predict(X, return_std=True)
    return out


@pytest.mark.parametrize("ns, device, dtype", COMBOS[1:3])
@pytest.mark.parametrize("name", NAMES)
def test_other_methods_follow_the_input(name, ns, device, dtype):
    xp, dev = _xp(ns, device)
    X, y = _data(dtype)
    est = _estimator(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = _other_calls(est, X, y)
        Xd, yd = xp.asarray(X, device=dev), xp.asarray(y, device=dev)
        with sklearn.config_context(array_api_dispatch=True):
            got = _other_calls(est, Xd, yd)
    assert got.keys() == ref.keys()
    for key, r in ref.items():
        g = got[key]
        for gi, ri in zip(g if isinstance(r, tuple) else (g,), r if isinstance(r, tuple) else (r,)):
            if ri is None:
                continue
            _same_place(gi, Xd)
            assert _host(gi).dtype == ri.dtype, key
            assert_allclose(_host(gi), ri, rtol=1e-6, atol=1e-9, err_msg=f"{name}.{key}")


def _fit(est, xp, dev, X, y):
    with sklearn.config_context(array_api_dispatch=True):
        return est.fit(xp.asarray(X, device=dev), xp.asarray(y, device=dev))


@pytest.mark.parametrize("ns, device", [("torch", "cpu"), ("array_api_strict", "device1")])
def test_pickled_device_model_loads_and_predicts_with_numpy_only(ns, device, tmp_path):
    xp, dev = _xp(ns, device)
    X, y = _data()
    models = [_fit(KernelRidgeClassifier(alpha=0.1), xp, dev, X, y),
              _fit(kernelkit.RandomFeaturesRegressor(random_state=0), xp, dev,
                   X, y.astype(float)),
              _fit(kernelkit.KernelRidgeCV(), xp, dev, X, y.astype(float))]
    ref = [clone(m).fit(X, y if i == 0 else y.astype(float)).predict(X)
           for i, m in enumerate(models)]
    blob = pickle.dumps(models)
    assert aa.is_device_array(models[0].dual_coef_)  # the live models keep their arrays
    (tmp_path / "m.pkl").write_bytes(blob)
    np.save(tmp_path / "X.npy", X)
    code = ("import sys\n"
            "class Block:  # neither library can be imported\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('torch', 'array_api_strict'):\n"
            "            raise ImportError(name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "import pickle, numpy as np\n"
            f"ms = pickle.loads(open({str(tmp_path / 'm.pkl')!r}, 'rb').read())\n"
            f"X = np.load({str(tmp_path / 'X.npy')!r})\n"
            "for m in ms:\n"
            "    assert all(not hasattr(v, '__array_namespace__') or isinstance(v, np.ndarray)\n"
            "               for v in vars(m).values()), m\n"
            f"    np.save({str(tmp_path)!r} + '/' + type(m).__name__ + '.npy', m.predict(X))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    for m, r in zip(models, ref):
        assert_allclose(np.load(tmp_path / f"{type(m).__name__}.npy"), r)


def test_fit_and_predict_namespaces():
    """Under dispatch a model is used in the namespace and device it was fitted on (as
    scikit-learn's estimators); outside dispatch a device model predicts on NumPy input."""
    X, y = _data()
    ref = KernelRidge(alpha=0.1).fit(X, y).predict(X)
    m = _fit(KernelRidge(alpha=0.1), xps, xps.Device("device1"), X, y)
    with sklearn.config_context(array_api_dispatch=True):
        with pytest.raises(ValueError, match=r"KernelRidge.predict\(\) must use the same name"):
            m.predict(X)
        with pytest.raises(ValueError, match="same device"):
            m.predict(xps.asarray(X))  # CPU_DEVICE, not device1
        host_model = KernelRidge(alpha=0.1).fit(X, y)
        with pytest.raises(ValueError, match=r"KernelRidge.predict\(\) must use the same"):
            host_model.predict(xps.asarray(X))
    out = m.predict(X)  # outside dispatch: NumPy in, NumPy out
    assert type(out) is np.ndarray
    assert_allclose(out, ref)
    assert aa.is_device_array(m.X_fit_)


def test_y_and_weights_follow_x():
    torch = pytest.importorskip("torch")
    X, y = _data()
    w = np.linspace(0.5, 2, len(y))
    ref = KernelRidge(alpha=0.1).fit(X, y, sample_weight=w)
    Xd = xps.asarray(X, device=xps.Device("device1"))
    with sklearn.config_context(array_api_dispatch=True):
        m = KernelRidge(alpha=0.1).fit(Xd, torch.asarray(y), sample_weight=w)
        _same_place(m.dual_coef_, Xd)
        assert_allclose(_host(m.dual_coef_), ref.dual_coef_)
        assert_allclose(_host(m.predict(Xd)), ref.predict(X))


def test_without_dispatch_torch_in_numpy_out():
    torch = pytest.importorskip("torch")
    X, y = _data()
    m = KernelRidgeClassifier(alpha=0.1).fit(torch.asarray(X), torch.asarray(y))
    ref = KernelRidgeClassifier(alpha=0.1).fit(X, y)
    assert type(m.dual_coef_) is np.ndarray
    for meth in ("predict", "predict_proba", "decision_function"):
        out = getattr(m, meth)(torch.asarray(X))
        assert type(out) is np.ndarray
        assert_allclose(out, getattr(ref, meth)(X))


def test_rejected_fit_leaves_device_model_unchanged():
    X, y = _data()
    dev = xps.Device("device1")
    m = _fit(KernelRidge(alpha=0.1), xps, dev, X, y)
    before = dict(vars(m))
    with sklearn.config_context(array_api_dispatch=True):
        with pytest.raises(ValueError):
            m.fit(xps.asarray(X, device=dev), xps.asarray(y[:-1], device=dev))
        with pytest.raises(ValueError, match="alpha"):
            m.set_params(alpha=-1.0).fit(xps.asarray(X, device=dev), xps.asarray(y, device=dev))
        m.set_params(alpha=0.1)
        m.predict(xps.asarray(X, device=dev))  # a read leaves the state as it was, too
    assert vars(m).keys() == before.keys()
    assert all(vars(m)[k] is v for k, v in before.items() if k != "alpha")


class _Bare:
    """An array whose namespace lacks ``asarray``, or that cannot be read on the host."""

    __name__ = "bare_namespace"

    def __init__(self, a, readable=True):
        self.a, self.readable, self.device = a, readable, "cpu"
        self.shape, self.ndim = a.shape, a.ndim

    def __array_namespace__(self, api_version=None):
        return self if not self.readable else type("bare_namespace", (), {})

    def __array__(self, dtype=None, copy=None):
        if not self.readable:
            raise TypeError("no host view")
        return self.a


def test_namespace_and_host_errors():
    X, y = _data()
    with sklearn.config_context(array_api_dispatch=True):
        with pytest.raises(TypeError, match="X is an array of namespace bare_namespace, "
                                            "which lacks asarray"):
            KernelRidge().fit(_Bare(X), y)
        with pytest.raises(TypeError, match=r"sample_weight \(.*_Bare\) cannot be read on"):
            KernelRidge().fit(xps.asarray(X), y, sample_weight=_Bare(np.ones(len(y)), False))


def test_cupy_input_resolves_auto_to_cupy():
    """CuPy input runs the estimator's calls with this flag set: ``backend="auto"`` then
    names the CuPy engine (the GPU run itself is in the gpu-marked tests)."""
    assert resolve_backend("auto") in ("numba", "numpy")
    token = aa._CUPY_INPUT.set(True)
    try:
        assert resolve_backend("auto") == "cupy"
        assert resolve_backend("numpy") == "numpy"
    finally:
        aa._CUPY_INPUT.reset(token)


def test_numpy_calls_go_straight_through(monkeypatch):
    """NumPy in (with or without dispatch): the class's own method runs, no host copies."""
    def refuse(*args, **kwargs):
        raise AssertionError("NumPy input took the conversion path")

    monkeypatch.setattr(aa, "_call_host", refuse)
    X, y = _data()
    m = KernelRidgeClassifier(alpha=0.1)
    assert m.fit(X, y) is m
    ref = KernelRidgeClassifier.predict_proba.__wrapped__(m, X)
    with sklearn.config_context(array_api_dispatch=True):
        assert_allclose(m.fit(X, y).predict_proba(X), ref)
        assert m.score(X, y) == KernelRidgeClassifier.score.__wrapped__(m, X, y)


@pytest.mark.gpu
@pytest.mark.skipif("cupy" not in available_backends(), reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("name", ["KernelRidgeClassifier", "FalkonRegressor", "EigenProRegressor",
                                  "RandomFourierFeatures", "KernelThinning"])
def test_cupy_input_runs_on_the_cupy_engine(name):
    """CuPy in (no dispatch needed): backend_ 'cupy', fitted arrays and results CuPy arrays,
    values those of the NumPy fit."""
    import cupy

    X, y = _data(n=200)
    ref = _estimator(name).fit(X, y)
    est = _estimator(name).fit(cupy.asarray(X), cupy.asarray(y))
    assert getattr(est, "backend_", "cupy") == "cupy"
    assert any(isinstance(v, cupy.ndarray) for v in vars(est).values())
    read = next(m for m in ("predict", "transform") if hasattr(est, m)) \
        if not isinstance(est, kernelkit.KernelThinning) else None
    if read is not None:
        out = getattr(est, read)(cupy.asarray(X))
        assert isinstance(out, cupy.ndarray)
        assert_allclose(out.get(), getattr(ref, read)(X), rtol=1e-5, atol=1e-6)
    loaded = pickle.loads(pickle.dumps(est))
    assert not any(isinstance(v, cupy.ndarray) for v in vars(loaded).values())


def test_rejected_partial_fit_leaves_device_arrays_and_values():
    X, y = _data()
    dev = xps.Device("device1")
    with sklearn.config_context(array_api_dispatch=True):
        m = kernelkit.RandomFeaturesRegressor(random_state=0).partial_fit(
            xps.asarray(X[:15], device=dev),
            xps.asarray(y[:15] * 1.0, device=dev))
        before = {k: (v, _host(v).copy()) for k, v in vars(m).items() if aa.is_device_array(v)}
        assert before
        with pytest.raises(ValueError):
            m.partial_fit(xps.asarray(X[15:, :3], device=dev),
                          xps.asarray(y[15:] * 1.0, device=dev))
    for k, (v, values) in before.items():
        assert vars(m)[k] is v
        assert_allclose(_host(v), values)


class _RowSums(aa.ArrayAPIMixin, BaseEstimator):
    """The mixin on its own: a model with no fitted arrays, whose methods see NumPy only."""

    def fit(self, X, y=None):
        assert type(X) is np.ndarray
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X):
        assert type(X) is np.ndarray
        return X.sum(axis=1)


def test_mixin_on_a_model_without_fitted_arrays():
    X, _ = _data("float32")
    Xd = xps.asarray(X, device=xps.Device("device1"))
    with sklearn.config_context(array_api_dispatch=True):
        m = _RowSums().fit(Xd)
        assert isinstance(m, _RowSums)
        out = m.predict(Xd)  # nothing tells where it was fitted: any namespace is taken
        _same_place(out, Xd)
        assert out.dtype == xps.float32
        assert_allclose(_host(out), X.sum(axis=1))
        assert type(m.predict(X)) is np.ndarray


@pytest.mark.parametrize("Est", [KernelRidgeClassifier, FalkonClassifier, RandomFeaturesClassifier,
                                 KernelRidgeClassifierCV])
def test_wrapped_probabilities_keep_hasattr_protocol(Est):
    """The wrapper keeps available_if: without calibration the model has no predict_proba
    (hasattr False, as scikit-learn's meta-estimators expect); with it, hasattr is True."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3))
    y = (X[:, 0] > 0).astype(int)
    off = Est(calibration=None).fit(X, y)
    assert not hasattr(off, "predict_proba") and not hasattr(off, "predict_log_proba")
    on = Est().fit(X, y)
    assert hasattr(on, "predict_proba")
    np.testing.assert_allclose(on.predict_proba(X).sum(axis=1), 1.0)
