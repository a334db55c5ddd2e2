"""
=====================================================
Calibration curves: kernelkit classifiers against SVC
=====================================================

A classifier's probabilities are *calibrated* when, among the test points to which it
gives a top-class confidence of about ``p``, a fraction of about ``p`` is classified
correctly. A reliability diagram plots that fraction against the confidence, bin by bin:
a calibrated model lies on the diagonal, an over-confident one below it.

Here three kernelkit classifiers, each with its own route to probabilities, face
scikit-learn's usual recipe, an :class:`~sklearn.svm.SVC` wrapped in
:class:`~sklearn.calibration.CalibratedClassifierCV` (Platt scaling on internal folds):

* :class:`~kernelkit.KernelRidgeClassifier` (Gaussian kernel): a softmax of the decision
  values at one temperature, fitted on the exact leave-one-out values of the fit itself;
* :class:`~kernelkit.ridge.FalkonClassifier` with ``loss="logistic"``: Nyström kernel
  logistic regression, whose probabilities are the model's own;
* :class:`~kernelkit.InfiniteWidthClassifier`: the fraction of the trained infinite-width
  network ensemble that predicts each class.

The data are the handwritten digits bundled with scikit-learn (10 classes), 15% of them
(270 images) for training, so that the models are unsure often enough to fill the bins.
The diagram uses the top-class confidence, as the expected calibration error (ECE) does.
"""

# %%
# Fit the four classifiers
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.base import clone
from sklearn.calibration import CalibratedClassifierCV, calibration_curve
from sklearn.datasets import load_digits
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from kernelkit import FalkonClassifier, InfiniteWidthClassifier, KernelRidgeClassifier

X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, train_size=0.15, stratify=y,
                                                    random_state=0)
scaler = StandardScaler().fit(X_train)
X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)

models = {
    "KernelRidgeClassifier(kernel='rbf')": KernelRidgeClassifier(kernel="rbf"),
    "FalkonClassifier(loss='logistic')": FalkonClassifier(loss="logistic", random_state=0),
    "InfiniteWidthClassifier()": InfiniteWidthClassifier(),
    "CalibratedClassifierCV(SVC())": CalibratedClassifierCV(SVC(), ensemble=False),
}
results = {}
for name, model in models.items():
    # an untimed first fit on a slice: it compiles the engine's loops (Numba)
    clone(model).fit(X_train[:100], y_train[:100]).predict_proba(X_test[:5])
    t0 = time.perf_counter()
    model.fit(X_train, y_train)
    fit_s = time.perf_counter() - t0
    proba = model.predict_proba(X_test)
    confidence = proba.max(axis=1)
    correct = model.classes_[proba.argmax(axis=1)] == y_test
    results[name] = (confidence, correct, log_loss(y_test, proba, labels=model.classes_),
                     fit_s)
    print(f"{name:38s} accuracy {correct.mean():.4f}  log-loss {results[name][2]:.4f}  "
          f"fit {fit_s:.2f} s")

# %%
# Reliability diagram and the spread of the confidences
#
# Eight bins of equal width in confidence; a marker sits at its bin's mean confidence
# (empty bins are skipped). A model below the diagonal promises more than it delivers,
# one above it less. The right panel shows how many test points each bin holds: the
# curves are noisier where it is low.


def ece(confidence, correct, n_bins=15):
    """Expected calibration error: bin-share weighted mean of |accuracy - confidence|."""
    bins = np.clip(np.ceil(confidence * n_bins).astype(int) - 1, 0, n_bins - 1)
    return sum(np.sum(bins == b) * abs(correct[bins == b].mean() - confidence[bins == b].mean())
               for b in np.unique(bins)) / len(confidence)


fig, (ax_curve, ax_hist) = plt.subplots(1, 2, figsize=(12, 5.2))
ax_curve.plot([0, 1], [0, 1], color="0.6", linestyle=":", label="perfectly calibrated")
for (name, (confidence, correct, loss, fit_s)), marker in zip(results.items(), "osD^", strict=True):
    frac, mean_conf = calibration_curve(correct, confidence, n_bins=8, strategy="uniform")
    ax_curve.plot(mean_conf, frac, marker=marker,
                  label=f"{name}\nlog-loss {loss:.3f}, ECE {ece(confidence, correct):.3f}")
    ax_hist.hist(confidence, bins=np.linspace(0, 1, 21), histtype="step", linewidth=1.8,
                 label=f"{name} (fit {fit_s:.2f} s)")
ax_curve.set(xlabel="mean top-class confidence in the bin",
             ylabel="fraction classified correctly", xlim=(0, 1.02), ylim=(0, 1.02))
ax_curve.set_title("Reliability diagram (digits, top-class confidence)", fontsize=12)
ax_curve.legend(loc="lower right", fontsize=8)
ax_hist.set_yscale("log")
ax_hist.set(xlabel="top-class confidence", ylabel="test points (log scale)")
ax_hist.set_title("How confident each model is", fontsize=12)
ax_hist.legend(loc="upper left", fontsize=8)
fig.tight_layout()
plt.show()
