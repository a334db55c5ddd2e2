"""
=====================================================
Kernel thinning: small coresets for kernel regression
=====================================================

Kernel thinning (Dwivedi & Mackey, COLT 2021 / JMLR 2024) compresses ``n`` sample
points into ``sqrt(n)`` points whose empirical distribution is much closer, in
maximum mean discrepancy (MMD), to the input than an i.i.d. subsample of the same
size: its MMD shrinks like ``n^-1/2`` (up to logarithms) instead of ``n^-1/4``.
:class:`~kernelkit.thinning.KernelThinning` implements KT with its KT-SPLIT and
KT-SWAP steps, the target / power / KT+ variants of Generalized Kernel Thinning and
Compress++ (Shetty, Dwivedi & Mackey, ICLR 2022) for near-linear time.

We look at a coreset, measure the MMD decay with ``n``, and use thinning for what it
is for downstream: fitting a kernel ridge regression on a thinned training set
instead of a random subset of the same size.
"""

# %%
# A coreset of a Gaussian mixture
# -------------------------------
# 4096 points from a mixture of three Gaussians, thinned to 64 points with target
# KT (Gaussian kernel), next to an i.i.d. subsample of 64 points.
import time

import matplotlib.pyplot as plt
import numpy as np

from kernelkit import KernelRidge
from kernelkit.metrics import mmd
from kernelkit.thinning import KernelThinning, kernel_thinning

rng = np.random.default_rng(0)
centers = np.array([[-2.0, 0.0], [2.0, 1.0], [0.0, -2.5]])
X = centers[rng.integers(0, 3, 4096)] + 0.7 * rng.standard_normal((4096, 2))
gamma = 0.5

kt = KernelThinning(gamma=gamma, random_state=0).fit(X)
iid = rng.choice(len(X), len(kt.coreset_indices_), replace=False)
mmd_iid = mmd(X, X[iid], gamma=gamma)
print(f"KT: {len(kt.coreset_indices_)} points, MMD to the input {kt.mmd_:.4f}")
print(f"i.i.d.: MMD to the input {mmd_iid:.4f} ({mmd_iid / kt.mmd_:.1f}x larger)")

fig, axes = plt.subplots(1, 2, figsize=(9, 4), sharex=True, sharey=True)
for ax, pts, title in ((axes[0], kt.coreset_, f"kernel thinning, MMD {kt.mmd_:.4f}"),
                       (axes[1], X[iid], f"i.i.d. subsample, MMD {mmd_iid:.4f}")):
    ax.scatter(X[:, 0], X[:, 1], s=2, c="0.85")
    ax.scatter(pts[:, 0], pts[:, 1], s=18, c="C3")
    ax.set_title(title)
fig.tight_layout()

# %%
# MMD against the sample size
# ---------------------------
# For n = 4^3 .. 4^6 points of the mixture, the MMD to the input of KT, of
# Compress++ (g = 4, O(n log n) time) and of an i.i.d. subsample, all of sqrt(n)
# points (median of 5 seeds). The fitted log-log slopes are close to -1/2 for the
# thinned coresets and to -1/4 for i.i.d. sampling.
ns = 4 ** np.arange(3, 7)
curves = {"KT": [], "Compress++ (g=4)": [], "i.i.d.": []}
for n in ns:
    vals = {key: [] for key in curves}
    for seed in range(5):
        r = np.random.default_rng(seed)
        Xn = centers[r.integers(0, 3, n)] + 0.7 * r.standard_normal((n, 2))
        vals["KT"].append(KernelThinning(gamma=gamma, random_state=seed).fit(Xn).mmd_)
        cpp = kernel_thinning(Xn, gamma=gamma, compress="compress++", random_state=seed)
        vals["Compress++ (g=4)"].append(mmd(Xn, Xn[cpp], gamma=gamma))
        sub = r.choice(n, int(np.sqrt(n)), replace=False)
        vals["i.i.d."].append(mmd(Xn, Xn[sub], gamma=gamma))
    for key in curves:
        curves[key].append(np.median(vals[key]))

fig, ax = plt.subplots(figsize=(6, 4.5))
for key, values in curves.items():
    slope = np.polyfit(np.log(ns), np.log(values), 1)[0]
    ax.loglog(ns, values, "o-", label=f"{key} (slope {slope:.2f})")
    print(f"{key:<18} log-log slope {slope:.2f}")
ax.set_xticks(ns, [str(v) for v in ns])
ax.xaxis.set_minor_locator(plt.NullLocator())
ax.set_xlabel("input size n (coreset of sqrt(n) points)")
ax.set_ylabel("MMD to the input")
ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.17), ncol=2, fontsize="small")
fig.tight_layout()

# %%
# Thinning a training set before kernel ridge regression
# ------------------------------------------------------
# A kernel ridge regression costs O(n^3) to fit and O(n) per prediction, so large
# training sets are often subsampled. We thin the inputs of 4096 noisy observations
# of a smooth function on the cube [-2, 2]^3 to 64 - 256 points and fit the same
# kernel ridge model on the coreset (with its labels) and on i.i.d. subsets of the
# same size; the test error is measured on 5000 fresh points (median of 5 seeds).
# The coreset covers the input distribution evenly, without the clumps and holes of
# a random subset, and the fit is correspondingly better.


def f(Z):
    return np.sin(2 * Z[:, 0]) + np.cos(Z[:, 1] * Z[:, 2]) + 0.5 * Z[:, 0] * Z[:, 1]


n, d = 4096, 3
X_train = rng.uniform(-2, 2, (n, d))
y_train = f(X_train) + 0.1 * rng.standard_normal(n)
X_test = rng.uniform(-2, 2, (5000, d))
y_test = f(X_test)

sizes, err_kt, err_iid = [], [], []
# untimed: the first KernelRidge fit compiles its Numba loops
KernelRidge(alpha=1e-3, kernel="rbf", gamma=0.5).fit(X_train[:50], y_train[:50]).predict(X_test)
tic = time.perf_counter()
for m in (6, 5, 4):  # 64, 128, 256 points
    e_kt, e_iid = [], []
    for seed in range(5):
        idx = kernel_thinning(X_train, gamma=0.5, m=m, random_state=seed)
        sub = np.random.default_rng(seed).choice(n, len(idx), replace=False)
        for rows, errs in ((idx, e_kt), (sub, e_iid)):
            model = KernelRidge(alpha=1e-3, kernel="rbf", gamma=0.5)
            model.fit(X_train[rows], y_train[rows])
            errs.append(np.mean((model.predict(X_test) - y_test) ** 2))
    sizes.append(len(idx))
    err_kt.append(np.median(e_kt))
    err_iid.append(np.median(e_iid))
    print(f"{len(idx):4d} training points: test MSE {err_kt[-1]:.4f} (kernel thinning) vs "
          f"{err_iid[-1]:.4f} (i.i.d.), {err_iid[-1] / err_kt[-1]:.1f}x lower")
print(f"thinning and fitting took {time.perf_counter() - tic:.1f} s")

fig, ax = plt.subplots(figsize=(5.5, 4))
ax.loglog(sizes, err_kt, "o-", label="kernel ridge on a KT coreset")
ax.loglog(sizes, err_iid, "s--", label="kernel ridge on an i.i.d. subset")
ax.set_xticks(sizes, [str(v) for v in sizes])
ax.xaxis.set_minor_locator(plt.NullLocator())
ax.set_xlabel("training points kept (of 4096)")
ax.set_ylabel("test mean squared error")
ax.legend(loc="lower left")
fig.tight_layout()
plt.show()
