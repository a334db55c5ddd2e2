"""scikit-learn's estimator checks on every kernelkit estimator."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from kernelkit import KernelRidge, KernelRidgeClassifier, NTKRidge, NTKRidgeClassifier
from kernelkit.kernels import Matern


@parametrize_with_checks([
    NTKRidge(), NTKRidgeClassifier(), NTKRidge(depth=2, activation="erf", b_std=0.1),
    KernelRidge(), KernelRidgeClassifier(), KernelRidge(kernel=Matern(nu=0.5)),
    KernelRidge(kernel="precomputed"), KernelRidge(backend="numpy"),
])
def test_sklearn_compatible(estimator, check):
    check(estimator)
