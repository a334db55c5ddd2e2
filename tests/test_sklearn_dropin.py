"""scikit-learn's own tests run against kernelkit's drop-ins, with only the import swapped.

At test time the modules are copied from the *installed* scikit-learn
(``sklearn/tests/test_kernel_ridge.py`` and the Nystroem tests of
``sklearn/tests/test_kernel_approximation.py``), the import of the estimator is
replaced by kernelkit's (``KernelRidge`` -> :class:`kernelkit.KernelRidge`, ``Nystroem``
-> :class:`kernelkit.leverage.RLSNystroem`), nothing else changed, and pytest runs them
in a subprocess. Tests that cannot apply are deselected here with their reason.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sklearn = pytest.importorskip("sklearn")
SK_TESTS = Path(sklearn.__file__).parent / "tests"

# Nystroem tests that cannot apply to RLSNystroem, with the reason.
NOT_APPLICABLE = {
    # RLSNystroem samples columns by ridge leverage scores, which exist only for a
    # positive semidefinite kernel; the test loops over every kernel_metrics() name,
    # including additive_chi2 (non-positive) and sigmoid (indefinite), which RLSNystroem
    # rejects with a ValueError naming the kernel ("not positive semi-definite").
    "test_nystroem_approximation": "iterates over non-PSD kernels (additive_chi2, sigmoid)",
    # Array-API dispatch (array_api_strict / torch namespaces): kernelkit follows its
    # own engines (numpy / numba / cupy), not scikit-learn's array API dispatch.
    "test_nystroem_approximation_array_api": "scikit-learn array-API dispatch",
    # Counts the calls of a logging row kernel: RLS sampling evaluates the kernel on all
    # n points (their leverage scores), not only on the components, so the count differs
    # by design; the callable convention itself is tested (the second half of this test,
    # the errors for gamma/coef0/degree, runs in test_reliability.py).
    "test_nystroem_callable": "counts kernel calls; RLS sampling evaluates every point",
}


def _kernel_ridge_module():
    src = (SK_TESTS / "test_kernel_ridge.py").read_text()
    old = "from sklearn.kernel_ridge import KernelRidge\n"
    assert src.count(old) == 1
    return src.replace(old, "from kernelkit import KernelRidge\n")


def _nystroem_module():
    src = (SK_TESTS / "test_kernel_approximation.py").read_text()
    old = "    Nystroem,\n"
    assert src.count(old) == 1
    src = src.replace(old, "")
    # the import swap: after the scikit-learn imports, Nystroem is kernelkit's
    anchor = "\n# generate data\n"
    assert src.count(anchor) == 1
    return src.replace(anchor, "\nfrom kernelkit.leverage import RLSNystroem as Nystroem\n"
                       + anchor)


@pytest.fixture(scope="module")
def sklearn_run(tmp_path_factory):
    """Both modules in one pytest subprocess (one interpreter start); its report."""
    tmp = tmp_path_factory.mktemp("sk")
    (tmp / "test_sk_kernel_ridge.py").write_text(_kernel_ridge_module())
    nys = _nystroem_module()
    (tmp / "test_sk_kernel_approximation.py").write_text(nys)
    names = re.findall(r"^def (test_\w*nystroem\w*)\(", nys, flags=re.M)
    keep = [t for t in names if t not in NOT_APPLICABLE] + ["test_get_feature_names_out"]
    select = " or ".join(keep + ["test_kernel_ridge"])
    cmd = [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
           "test_sk_kernel_ridge.py", "test_sk_kernel_approximation.py", "-k", select]
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=tmp)
    return res, keep


def test_sklearn_kernel_ridge_module(sklearn_run):
    res, _ = sklearn_run
    passed = re.findall(r"^PASSED test_sk_kernel_ridge\.py::(\w+)", res.stdout, flags=re.M)
    failed = re.findall(r"^(?:FAILED|ERROR) test_sk_kernel_ridge\.py::(\S+)", res.stdout,
                        flags=re.M)
    assert not failed, res.stdout[-4000:]
    # all ten: the 6 plain tests and the 4 sparse (csr/csc) parametrizations
    assert len(passed) >= 10, res.stdout[-4000:] + res.stderr[-2000:]


def test_sklearn_nystroem_tests(sklearn_run):
    res, keep = sklearn_run
    passed = set(re.findall(r"^PASSED test_sk_kernel_approximation\.py::(test_\w+)",
                            res.stdout, flags=re.M))
    failed = re.findall(r"^(?:FAILED|ERROR) test_sk_kernel_approximation\.py::(\S+)",
                        res.stdout, flags=re.M)
    assert not failed, res.stdout[-4000:]
    assert set(keep) <= passed, res.stdout[-4000:] + res.stderr[-2000:]
