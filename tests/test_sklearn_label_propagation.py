"""scikit-learn's own label-propagation tests, run against STKRClassifier.

The module ``sklearn/semi_supervised/tests/test_label_propagation.py`` is imported from
the *installed* scikit-learn (not copied). Its tests are re-exported here with
:class:`kernelkit.stkr.STKRClassifier` in place of ``LabelSpreading`` and
``LabelPropagation``:

* the estimator lists the module parametrises over (``ESTIMATORS``, ``LP_ESTIMATORS``
  and the class lists) are swapped for STKR configurations of the same base kernels;
* an autouse fixture swaps the module's ``label_propagation`` namespace, so that the
  tests that build ``label_propagation.LabelSpreading(...)`` in their body build an
  STKRClassifier.

The test bodies are scikit-learn's, unchanged. Tests that cannot apply are marked
``xfail(strict=True)`` with the reason (so they must keep failing for that reason).
"""

import types

import numpy as np
import pytest

from kernelkit.stkr import STKRClassifier

sk = pytest.importorskip("sklearn.semi_supervised.tests.test_label_propagation")
_LP = sk.label_propagation.LabelPropagation
_LS = sk.label_propagation.LabelSpreading


def _stkr(transformation):
    """A class-like factory: ``STKRClassifier(transformation, **params)``."""
    def make(**params):
        return STKRClassifier(transformation, **params)
    make.__name__ = f"STKR_{transformation}"
    return make


# LabelSpreading -> STKR-Prop for the inverse Laplacian (Algorithm 2), LabelPropagation
# -> the polynomial transform (Algorithm 1); the base kernels as scikit-learn's rows give
# them, in STKR's spelling: LabelSpreading's default gamma=20 for "rbf", and for "knn"
# n_neighbors counted without the point itself (scikit-learn's k=2 includes it).
_SWAP = {_LS: _stkr("inverse_laplacian"), _LP: _stkr("polynomial")}


def _translate(params):
    out = dict(params)
    if out.get("kernel") == "rbf":
        out.setdefault("gamma", 20)
    if out.get("kernel") == "knn":
        out["n_neighbors"] = out.get("n_neighbors", 7) - 1
    return out


def _swap_value(v):
    if isinstance(v, tuple) and len(v) == 2 and v[0] in _SWAP:
        return (_SWAP[v[0]], _translate(v[1]))
    return _SWAP.get(v, v) if isinstance(v, type) else v


def _ids(v):
    if isinstance(v, dict):
        k = v.get("kernel")
        return k if isinstance(k, str) else "callable"
    return getattr(v, "__name__", None)


def _reexport(fn, xfail=None, xfail_knn=None):
    """``fn`` with its parametrisation over scikit-learn's estimators swapped for STKR's
    (``xfail_knn``: the reason why its ``kernel="knn"`` rows cannot apply)."""
    new = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                             fn.__closure__)
    marks = []
    for m in getattr(fn, "pytestmark", []):
        if m.name == "parametrize" and any(
                _swap_value(v) is not v for v in m.args[1]):
            values = [_swap_value(v) for v in m.args[1]]
            if xfail_knn:
                values = [pytest.param(*v, marks=pytest.mark.xfail(strict=True,
                                                                   reason=xfail_knn))
                          if isinstance(v, tuple) and v[1].get("kernel") == "knn" else v
                          for v in values]
            m = pytest.mark.parametrize(m.args[0], values, ids=_ids).mark
        marks.append(m)
    if xfail:
        marks.append(pytest.mark.xfail(strict=True, reason=xfail).mark)
    new.pytestmark = marks
    return new


@pytest.fixture(autouse=True)
def _stkr_namespace(monkeypatch):
    """The sklearn module's ``label_propagation`` name, with STKR for both estimators."""
    ns = types.SimpleNamespace(LabelSpreading=_SWAP[_LS], LabelPropagation=_SWAP[_LP])
    monkeypatch.setattr(sk, "label_propagation", ns)


@pytest.fixture(params=[np.float32, np.float64])
def global_dtype(request):
    """scikit-learn's fixture (float32 runs too: STKR computes in float64 from either)."""
    return request.param


# Not applicable, with the reason.
_NOT_APPLICABLE = {
    "test_label_spreading_closed_form": "checks LabelSpreading's closed form (I - alpha "
                                        "S)^-1 Y through _build_graph, alpha and "
                                        "label_distributions_, none of which STKR has",
    "test_label_propagation_closed_form": "checks LabelPropagation's harmonic closed form "
                                          "through _build_graph and label_distributions_",
    "test_label_propagation_build_graph_normalized": "checks the row normalisation of "
                                                     "LabelPropagation's _build_graph "
                                                     "(a private method STKR lacks)",

    "test_predict_sparse_callable_kernel": "its topk_rbf(X, Y) fits the neighbours on X, "
                                           "so it is no kernel function: topk_rbf(X, X) "
                                           "is not symmetric (STKR rejects it with a "
                                           "ValueError: its transforms need a symmetric "
                                           "positive semi-definite kernel), and "
                                           "topk_rbf(X_query, X_fit) is not LabelSpreading's "
                                           "topk_rbf(X_fit, X_query).T",
}

# Rows of a parametrised test whose kernel="knn" configuration cannot apply.
_NOT_APPLICABLE_KNN = {
    "test_predict_proba": "the query [1, 1] is exactly equidistant from the two labeled "
                          "points; STKR's kNN kernel lets a query stand in for its nearest "
                          "training point (the first of a tie: no jump between "
                          "transductive and inductive values), which breaks the tie, "
                          "where LabelSpreading averages the k nearest",
}

for _name in [n for n in dir(sk) if n.startswith("test_")]:
    globals()[_name] = _reexport(getattr(sk, _name), _NOT_APPLICABLE.get(_name),
                                 _NOT_APPLICABLE_KNN.get(_name))
del _name


def test_all_of_sklearn_module_collected():
    # the re-export above took every test function of the installed module
    names = {n for n in dir(sk) if n.startswith("test_") and callable(getattr(sk, n))}
    assert names and names <= set(globals())
    assert set(_NOT_APPLICABLE) <= names
