"""
=================================================
Gaussian process regression with the NTK kernel
=================================================

Every kernelkit kernel is also a scikit-learn Gaussian-process kernel, so it
composes with :class:`~sklearn.gaussian_process.kernels.WhiteKernel`,
:class:`~sklearn.gaussian_process.kernels.ConstantKernel` and friends and
plugs into :class:`~sklearn.gaussian_process.GaussianProcessRegressor`.

A GP with the neural tangent kernel :class:`~kernelkit.kernels.NTK` gives the
predictive mean of an infinitely wide network trained by gradient descent
(plus the ridge from the noise term) together with a predictive standard
deviation. We fit ``NTK(depth=2, b_std=0.1) + WhiteKernel()`` on the diabetes
data and compare it with the usual ``ConstantKernel() * RBF() + WhiteKernel()``.

The NTK's ``w_std`` and ``b_std`` are GP hyperparameters with exact gradients,
so the optimiser tunes them with the noise level. No
:class:`~sklearn.gaussian_process.kernels.ConstantKernel` goes in front of the
relu NTK: the kernel is homogeneous of degree ``depth + 1`` in ``(w_std**2,
b_std**2)`` jointly, so an amplitude is already a change of ``w_std`` and
``b_std``, and a redundant one only runs to a bound of its range.
"""

# %%
# Data
# ----
# 442 patients, 10 standardised features, a disease-progression target.
# ``normalize_y=True`` below scales the target to unit variance, the scale of
# the kernels.
import time

import matplotlib.pyplot as plt
import numpy as np
from scipy.stats import norm
from sklearn.datasets import load_diabetes
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF as SkRBF
from sklearn.gaussian_process.kernels import ConstantKernel, WhiteKernel
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from kernelkit.kernels import NTK

X, y = load_diabetes(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)
scaler = StandardScaler().fit(X_train)
X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)

# %%
# Two Gaussian processes
# ----------------------
kernels = {
    "NTK + White": NTK(depth=2, b_std=0.1) + WhiteKernel(),
    "Constant * RBF + White": ConstantKernel() * SkRBF(length_scale=3.0) + WhiteKernel(),
}
fits = {}
print(f"{'kernel':<24}{'test R2':>8}{'NLPD':>7}{'95% cover':>10}{'log ML':>9}{'time (s)':>9}")
for name, kernel in kernels.items():
    # untimed first fit on a slice: the NTK's first call compiles its Numba loops
    GaussianProcessRegressor(kernel, normalize_y=True).fit(X_train[:30], y_train[:30])
    tic = time.perf_counter()
    gp = GaussianProcessRegressor(kernel, normalize_y=True, n_restarts_optimizer=2,
                                  random_state=0).fit(X_train, y_train)
    mean, std = gp.predict(X_test, return_std=True)
    elapsed = time.perf_counter() - tic
    fits[name] = gp, mean, std
    nlpd = -norm.logpdf(y_test, mean, std).mean()  # mean negative log predictive density
    cover = np.mean(np.abs(y_test - mean) <= 1.96 * std)
    print(f"{name:<24}{gp.score(X_test, y_test):>8.3f}{nlpd:>7.3f}{cover:>10.2f}"
          f"{gp.log_marginal_likelihood_value_:>9.1f}{elapsed:>9.1f}")
for name, (gp, _, _) in fits.items():
    print(f"{name}: learned kernel {gp.kernel_}")

# %%
# Predictive mean and uncertainty
# -------------------------------
# The test patients, sorted by predicted progression: the line is the
# predictive mean, the band mean +- 1.96 standard deviations (the
# predictive distribution of a new observation, noise included), the dots are
# the observed targets.
shown = ["NTK + White", "Constant * RBF + White"]
fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
for ax, name in zip(axes, shown, strict=True):
    _, mean, std = fits[name]
    order = np.argsort(mean)
    idx = np.arange(len(order))
    ax.fill_between(idx, mean[order] - 1.96 * std[order], mean[order] + 1.96 * std[order],
                    alpha=0.3, label="95% predictive interval")
    ax.plot(idx, mean[order], lw=2, label="predictive mean")
    ax.plot(idx, y_test[order], "k.", ms=4, label="observed")
    ax.set_title(name)
    ax.set_xlabel("test patient (sorted by predicted mean)")
axes[0].set_ylabel("disease progression")
handles, labels = axes[0].get_legend_handles_labels()
fig.legend(handles, labels, loc="lower center", ncol=3)
fig.tight_layout(rect=(0, 0.08, 1, 1))
plt.show()

# %%
# On this small, noisy data set the NTK process comes close to the RBF
# process, a little behind in accuracy and marginal likelihood, with similar
# calibration of its intervals, and without a length scale to tune: the
# architecture (``depth``, ``w_std``, ``b_std``) fixes the kernel, and its two
# variances are fitted with the noise level by marginal likelihood.
