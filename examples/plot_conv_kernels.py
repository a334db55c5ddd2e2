"""
=====================================================
Convolutional kernels (CNTK) on handwritten digits
=====================================================

:class:`~kernelkit.kernels.ConvNTK` is the neural tangent kernel of an infinitely
wide convolutional network (Arora et al., NeurIPS 2019). Unlike the RBF kernel or
the fully connected :class:`~kernelkit.kernels.NTK`, it knows that the 64 features
of a digit are an 8x8 image: its convolutions compare neighbouring pixels, and a
global-average-pool read-out (``"gap"``) makes it nearly invariant to small shifts.

We train :class:`~kernelkit.KernelRidgeClassifier` on 300 digits with each kernel
and test it on 200 other digits, as they are and shifted by one pixel.
"""

# %%
# Data
# ----
# 300 training and 200 test digits (stratified), pixels scaled to [0, 1], and the
# test digits moved by one pixel up, down, left or right (zero filled). The
# estimators take the images flattened, as scikit-learn stores them (row-major, one
# channel), and the conv kernels are told ``image_shape=(8, 8, 1)``.
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from kernelkit import KernelRidgeClassifier
from kernelkit.kernels import NTK, RBF, ConvNTK

X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(
    X / 16.0, y, train_size=300, test_size=200, stratify=y, random_state=0
)


def shift_one_pixel(X, rng):
    """Each image moved by one pixel in a random direction, zero filled."""
    imgs, out = X.reshape(-1, 8, 8), np.zeros((len(X), 8, 8))
    for i, d in enumerate(rng.integers(0, 4, len(X))):
        if d == 0:
            out[i, 1:] = imgs[i, :-1]
        elif d == 1:
            out[i, :-1] = imgs[i, 1:]
        elif d == 2:
            out[i, :, 1:] = imgs[i, :, :-1]
        else:
            out[i, :, :-1] = imgs[i, :, 1:]
    return out.reshape(len(X), 64)


X_shifted = shift_one_pixel(X_test, np.random.default_rng(0))

# %%
# Kernels
# -------
# Relu networks with ``w_std = sqrt(2)`` (the variance-preserving choice for relu):
# a fully connected one on the 64 pixels, three 3x3 convolutions read out by a
# flatten (cost linear in the pixels), and two convolutions with a 2x2 average pool
# between them read out by a global average pool (cost quadratic in the pixels).
img = (8, 8, 1)
conv = [("conv", 3), "relu"]
kernels = {
    "RBF": RBF(gamma=1.0 / (64 * X_train.var())),
    "NTK, 3 dense layers": NTK(depth=3, w_std=2**0.5),
    "CNTK, 3 conv + flatten": ConvNTK(conv * 3 + ["flatten"], image_shape=img, w_std=2**0.5),
    "CNTK, conv, pool, conv + GAP": ConvNTK(conv + [("avgpool", 2)] + conv + ["gap"],
                                            image_shape=img, w_std=2**0.5),
}

# %%
# Fit and score
# -------------
# One ridge penalty for every kernel, relative to the kernel's scale (its mean
# diagonal on the training digits), so that nothing is tuned on the test digits.
results = {}
n_entries = 300 * 301 / 2 + 2 * 200 * 300  # kernel entries computed by fit + 2 scores
for name, k in kernels.items():
    k(X_train[:2])  # compile (or load from Numba's cache) outside the timing
    tic = time.perf_counter()
    scale = float(np.mean(k.diag(X_train)))
    clf = KernelRidgeClassifier(alpha=1e-3 * scale, kernel=k).fit(X_train, y_train)
    acc, acc_shifted = clf.score(X_test, y_test), clf.score(X_shifted, y_test)
    micro = 1e6 * (time.perf_counter() - tic) / n_entries
    results[name] = (acc, acc_shifted, micro)
    print(f"{name:30s} accuracy {acc:.3f}, shifted {acc_shifted:.3f}, "
          f"{micro:7.2f} us per kernel entry")

# %%
# Accuracy and cost
# -----------------
# On digits as they are, all kernels do about equally well. Shifted by one pixel,
# the digits defeat the kernels that compare pixels position by position (RBF,
# dense NTK, and the flatten read-out, which only pairs equal positions), while the
# global-average-pool CNTK, which compares every pixel with every pixel, keeps most
# of its accuracy. It costs more per entry: it carries all ``P**2 = 4096`` pixel
# pairs of the two images, the flatten read-out only the ``P = 64`` at equal positions.
names = list(results)
pos = np.arange(len(names))
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
ax1.barh(pos - 0.2, [results[n][0] for n in names], 0.4, label="test digits")
ax1.barh(pos + 0.2, [results[n][1] for n in names], 0.4, label="shifted by one pixel")
ax1.set_xlim(0, 1)
ax1.set_xlabel("test accuracy (300 training digits)")
ax1.set_yticks(pos, names)
ax1.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize=9)
ax2.barh(pos, [results[n][2] for n in names], 0.5, color="tab:gray")
ax2.set_xscale("log")
ax2.set_xlabel("time per kernel entry (microseconds, log scale)")
ax1.invert_yaxis()
fig.suptitle("Kernel ridge classification of digits: dense vs convolutional kernels")
fig.tight_layout()
plt.show()
