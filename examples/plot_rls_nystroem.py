"""
========================================================
Nyström columns chosen by ridge leverage scores (SQUEAK)
========================================================

A Nyström approximation is only as good as the columns it keeps. Uniform
sampling spends its columns where the data are dense; points in sparse regions
(here: outliers around a dense cluster) are rarely picked, so a model built on
those features cannot fit there. The ridge leverage score (RLS)
``tau_i = [K (K + gamma I)^{-1}]_ii`` measures how much of the kernel's
"effective dimension" each point carries: high for isolated points, low inside
the cluster. :class:`~kernelkit.leverage.RLSNystroem` estimates the RLS with
SQUEAK (Calandriello, Lazaric & Valko, AISTATS 2017), in one pass and without
forming the ``n x n`` kernel matrix, then samples exactly ``n_components``
columns with probabilities following the scores and weights them as the theory
requires. It has the interface of :class:`sklearn.kernel_approximation.Nystroem`
and goes in a :class:`~sklearn.pipeline.Pipeline` before a linear model.
"""

# %%
# Data: a dense cluster and sparse outliers
# -----------------------------------------
import matplotlib.pyplot as plt
import numpy as np
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline

from kernelkit.leverage import RLSNystroem, ridge_leverage_scores

rng = np.random.default_rng(0)
X = np.vstack([rng.normal(0.0, 0.3, (2800, 2)), rng.uniform(-6, 6, (200, 2))])


def f(Z):
    return np.sin(1.5 * Z[:, 0]) * np.cos(Z[:, 1])


y = f(X)
GAMMA = 2.0  # rbf kernel scale

# %%
# Exact ridge leverage scores vs SQUEAK's estimates
# -------------------------------------------------
# ``gamma_reg`` is the papers' regulariser on the unnormalised kernel matrix
# (``KernelRidge``'s ``alpha``, ``n * lambda`` for a normalised penalty).
rls = RLSNystroem(gamma=GAMMA, n_components=100, random_state=0).fit(X)
tau = ridge_leverage_scores(X, gamma=GAMMA, gamma_reg=rls.gamma_reg_)
print(f"gamma_reg matched to 100 columns: {rls.gamma_reg_:.3g}, exact d_eff = {tau.sum():.1f}")
print(f"median SQUEAK estimate / exact RLS = {np.median(rls.leverage_scores_ / tau):.2f}")

uni = Nystroem(gamma=GAMMA, n_components=100, random_state=0).fit(X)

fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
sc = axes[0].scatter(X[:, 0], X[:, 1], c=tau, s=6, cmap="viridis")
fig.colorbar(sc, ax=axes[0], label="exact RLS")
axes[0].set_title("ridge leverage scores")
for ax, idx, title in ((axes[1], rls.component_indices_, "RLS (SQUEAK) columns"),
                       (axes[2], uni.component_indices_, "uniform columns")):
    ax.scatter(X[:, 0], X[:, 1], s=3, c="0.8")
    ax.scatter(X[idx, 0], X[idx, 1], s=14, c="C3")
    ax.set_title(title)
fig.tight_layout()

# %%
# Test error where the outliers live, at equal number of columns
# --------------------------------------------------------------
# Test points within 0.3 of a training outlier: the function is learnable there
# from the data, but only if some columns cover that region.
test = np.random.default_rng(1).uniform(-6, 6, (3000, 2))
outl = X[2800:]
near = np.min(((test[:, None] - outl[None]) ** 2).sum(-1), axis=1) < 0.3**2
test = test[near]
ms = [25, 50, 100, 200]
errors = {"RLS (SQUEAK)": [], "uniform": []}
for m in ms:
    for name, tr in (("RLS (SQUEAK)", RLSNystroem(gamma=GAMMA, n_components=m, random_state=0)),
                     ("uniform", Nystroem(gamma=GAMMA, n_components=m, random_state=0))):
        model = make_pipeline(tr, Ridge(alpha=1e-4)).fit(X, y)
        errors[name].append(np.sqrt(np.mean((model.predict(test) - f(test)) ** 2)))
    print(f"m = {m:3d}: RMSE RLS {errors['RLS (SQUEAK)'][-1]:.3f}, "
          f"uniform {errors['uniform'][-1]:.3f}")

fig, ax = plt.subplots(figsize=(5, 3.5))
for name, err in errors.items():
    ax.plot(ms, err, "o-", label=name)
ax.set_xscale("log")
ax.set_xticks(ms, [str(m) for m in ms])
ax.xaxis.set_minor_locator(plt.NullLocator())
ax.set_xlabel("number of columns m")
ax.set_ylabel("test RMSE near outliers")
ax.legend()
fig.tight_layout()
plt.show()
