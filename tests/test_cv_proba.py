"""KernelRidgeClassifierCV's probabilities and class weights: its refitted model's."""

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.utils.class_weight import compute_sample_weight

from kernelkit import KernelRidgeClassifier, KernelRidgeClassifierCV

X, y = load_digits(return_X_y=True)
X = X[:400] / 16.0
y = y[:400]


def test_probabilities_are_the_refitted_models():
    cv = KernelRidgeClassifierCV(kernel="rbf", param_grid={"gamma": [0.01, 0.03]}).fit(X, y)
    ref = KernelRidgeClassifier(kernel="rbf", alpha=cv.alpha_, solver="cholesky",
                                **cv.best_params_).fit(X, y)
    p = cv.predict_proba(X[:50])
    np.testing.assert_allclose(p, ref.predict_proba(X[:50]), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    assert np.array_equal(cv.classes_[p.argmax(axis=1)], cv.predict(X[:50]))
    np.testing.assert_allclose(cv.predict_log_proba(X[:5]), np.log(p[:5]))


def test_balanced_class_weight_is_its_sample_weight():
    yb = np.where(y < 3, y, 3)  # unbalanced: class 3 holds most rows
    a = KernelRidgeClassifierCV(kernel="rbf", gamma=0.02, class_weight="balanced").fit(X, yb)
    b = KernelRidgeClassifierCV(kernel="rbf", gamma=0.02).fit(
        X, yb, sample_weight=compute_sample_weight("balanced", yb))
    assert a.alpha_ == b.alpha_
    np.testing.assert_allclose(a.predict_proba(X[:40]), b.predict_proba(X[:40]), rtol=1e-9)


def test_calibration_none_and_bad_parameters():
    cv = KernelRidgeClassifierCV(kernel="rbf", gamma=0.02, calibration=None).fit(X, y)
    assert not hasattr(cv, "predict_proba")
    for bad, match in (({"class_weight": "even"}, "class_weight"),
                       ({"calibration": "platt"}, "calibration")):
        est = KernelRidgeClassifierCV(kernel="rbf", gamma=0.02).fit(X, y)
        before = est.predict_proba(X[:5])
        with pytest.raises(ValueError, match=match):
            est.set_params(**bad).fit(X[:, :10], y)
        np.testing.assert_array_equal(est.predict_proba(X[:5]), before)


@pytest.mark.parametrize("binary", [False, True])
def test_probability_scorers_score_the_calibrated_leave_one_out_probabilities(binary):
    """scoring='neg_log_loss' (and any probability scorer): each candidate's exact
    leave-one-out decision values through the calibration map fitted on them, which for
    the selected one is the refitted model's own map (it calibrates on the same values)."""
    from sklearn.metrics import log_loss

    from kernelkit.utils._calibration import predict_log_proba_from

    yy = (y >= 5).astype(int) if binary else y
    cv = KernelRidgeClassifierCV(kernel="rbf", gamma=0.03, scoring="neg_log_loss",
                                 store_cv_results=True).fit(X, yy)
    ref = KernelRidgeClassifier(kernel="rbf", gamma=0.03, alpha=cv.alpha_,
                                solver="cholesky").fit(X, yy)
    j = int(np.flatnonzero(cv.alphas_ == cv.alpha_)[0])
    loo = cv.cv_results_[..., j]
    loo = loo[:, 0] if binary else loo
    P = np.exp(predict_log_proba_from(loo, ref.calibration_temperature_,
                                      ref.calibration_slopes_))
    np.testing.assert_allclose(cv.best_score_, -log_loss(yy, P), rtol=1e-9)
    for scoring in ("neg_brier_score", "roc_auc_ovr"):
        KernelRidgeClassifierCV(kernel="rbf", gamma=0.03, scoring=scoring).fit(X, yy)
