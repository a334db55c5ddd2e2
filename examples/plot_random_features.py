"""
=====================================================
Random Fourier features: error and accuracy against D
=====================================================

Random features replace a kernel by an explicit map ``z`` with
``E[z(x).z(y)] = k(x, y)``, drawn without looking at the data. The left panel
measures how far ``Z Z^T`` is from kernelkit's exact RBF kernel on the digits
data as the number of features ``D`` grows: every map's error falls like
``1/sqrt(D)``; the paired sin/cos map beats scikit-learn's random-phase map
(:class:`~sklearn.kernel_approximation.RBFSampler`, Sutherland & Schneider 2015),
and orthogonal (ORF) and structured (SORF) frequencies lower it again (Yu et al.
2016). The right panel fits :class:`~kernelkit.RandomFeaturesClassifier`, ridge
on the features in ``O(D^2)`` memory, and compares its test accuracy and fit time
with the exact :class:`~kernelkit.KernelRidgeClassifier`.
"""

# %%
# Data and the exact kernel
# -------------------------
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.kernel_approximation import RBFSampler
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from kernelkit import (
    KernelRidgeClassifier,
    RandomFeaturesClassifier,
    RandomFourierFeatures,
)
from kernelkit.kernels import RBF

X, y = load_digits(return_X_y=True)
X = StandardScaler().fit_transform(X)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)
GAMMA = 1.0 / X.shape[1]
sub = X_train[:300]
K = RBF(gamma=GAMMA)(sub)
sizes = [64, 128, 256, 512, 1024, 2048]


def rms_error(Z):
    return np.sqrt(np.mean((Z @ Z.T - K) ** 2))


maps = {
    "RBFSampler (random phase)": lambda D, s: RBFSampler(gamma=GAMMA, n_components=D,
                                                         random_state=s),
    "sin/cos, iid": lambda D, s: RandomFourierFeatures(D, gamma=GAMMA, random_state=s),
    "sin/cos, orthogonal": lambda D, s: RandomFourierFeatures(
        D, gamma=GAMMA, sampling="orthogonal", random_state=s),
    "sin/cos, structured": lambda D, s: RandomFourierFeatures(
        D, gamma=GAMMA, sampling="structured", random_state=s),
}
errors = {name: [np.mean([rms_error(make(D, s).fit_transform(sub)) for s in range(3)])
                 for D in sizes] for name, make in maps.items()}

# %%
# Ridge on the features against exact kernel ridge
# ------------------------------------------------
# Each model is fitted once before it is timed (imports, compilation, caches).


def timed_fit(model):
    model.fit(X_train[:50], y_train[:50])  # warm-up
    t0 = time.perf_counter()
    model.fit(X_train, y_train)
    return time.perf_counter() - t0, model.score(X_test, y_test)


exact_time, exact_acc = timed_fit(KernelRidgeClassifier(alpha=1e-2, kernel="rbf",
                                                        gamma=GAMMA))
rf = [timed_fit(RandomFeaturesClassifier(RandomFourierFeatures(D, gamma=GAMMA,
                                                               sampling="orthogonal"),
                                         alpha=1e-2, random_state=0)) for D in sizes]

# %%
# Figure
# ------
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
for name, err in errors.items():
    ax1.loglog(sizes, err, "o-", label=name)
ax1.loglog(sizes, errors["sin/cos, iid"][0] * np.sqrt(sizes[0] / np.array(sizes)), "k:",
           label=r"$\propto 1/\sqrt{D}$")
ax1.set_xlabel("number of features D")
ax1.set_ylabel(r"RMS error of $ZZ^\top$ against the exact RBF")
ax1.set_title("Kernel approximation (digits)")
ax1.legend(fontsize=8)

ax2.semilogx(sizes, [a for _, a in rf], "o-", label="RandomFeaturesClassifier (ORF)")
ax2.axhline(exact_acc, color="k", ls="--", label="KernelRidgeClassifier (exact)")
ax2.set_xlabel("number of features D")
ax2.set_ylabel("test accuracy")
ax2.set_title("One-vs-all ridge on the features")
for D, (t, a) in zip(sizes, rf):
    ax2.annotate(f"{t * 1e3:.0f} ms", (D, a), textcoords="offset points", xytext=(0, -14),
                 ha="center", fontsize=7)
ax2.annotate(f"exact: {exact_time * 1e3:.0f} ms", (sizes[2], exact_acc),
             textcoords="offset points", xytext=(0, -12), fontsize=7)
ax2.legend(fontsize=8, loc="lower right")
fig.tight_layout()
plt.show()
