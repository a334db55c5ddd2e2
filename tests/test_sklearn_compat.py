"""scikit-learn's estimator checks on every kernelkit estimator."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from kernelkit import KernelRidge, KernelRidgeClassifier, NTKRidge, NTKRidgeClassifier
from kernelkit.kernels import Matern


def _expected_failures(estimator):
    """scikit-learn's checks pass integer-rounded linear kernels, which are not PSD (the
    one rule for kernel matrices, shared with the leverage and thinning estimators)."""
    if getattr(estimator, "kernel", None) == "precomputed":
        why = "the check rounds a linear kernel matrix to integers: no longer PSD"
        return {"check_estimators_dtypes": why, "check_positive_only_tag_during_fit": why}
    if hasattr(estimator, "calibration"):  # the fit itself is weight-equivalent (tested)
        loo = ("predict_proba is calibrated on leave-one-out values: a repeated row is "
               "still seen when its copy is left out")
        return {"check_sample_weight_equivalence_on_dense_data": loo,
                "check_sample_weight_equivalence_on_sparse_data": loo,
                "check_class_weight_classifiers": (
                    "the check's blobs (std 20) under a linear kernel without intercept, or "
                    "the NTK at its default scale; class weights are tested in "
                    "test_ridge_proba.py")}
    return {}


@parametrize_with_checks([
    NTKRidge(), NTKRidgeClassifier(), NTKRidge(depth=2, activation="erf", b_std=0.1),
    KernelRidge(), KernelRidgeClassifier(), KernelRidge(kernel=Matern(nu=0.5)),
    KernelRidge(kernel="precomputed"), KernelRidge(backend="numpy"),
], expected_failed_checks=_expected_failures)
def test_sklearn_compatible(estimator, check):
    check(estimator)
