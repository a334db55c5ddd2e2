"""
=====================================================================
Selecting alpha and gamma by exact leave-one-out (KernelRidgeCV)
=====================================================================

:class:`~kernelkit.KernelRidgeCV` scores every ridge penalty ``alpha`` of a grid,
for every kernel of ``param_grid``, by the exact leave-one-out error: one
eigendecomposition of each kernel matrix serves all the alphas, and the leave-one-out
residual of point ``i`` is what a refit without ``i`` would predict for it (the
unpenalised intercept, ``fit_intercept=True``, is refitted too). The selection is
refitted on all the data as a :class:`~kernelkit.KernelRidge`.

Here, on scikit-learn's diabetes data (442 patients, 10 centred and scaled features, a
disease-progression score), the leave-one-out curve over ``alpha`` for four rbf
``gamma`` values (left) is set beside the error on held-out patients of the same
models (right). The selected point is marked on both: the leave-one-out curve, which
only sees the training patients, picks a model whose test error is close to the
best of the grid.
"""

# %%
# Leave-one-out over (gamma, alpha): one search
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.metrics import mean_squared_error
from sklearn.model_selection import train_test_split

from kernelkit import KernelRidge, KernelRidgeCV

X, y = load_diabetes(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
alphas = np.geomspace(1e-4, 10, 26)
gammas = [0.3, 3.0, 10.0, 30.0]

KernelRidgeCV(alphas[:2], kernel="rbf").fit(X_train[:20], y_train[:20])  # compile first
t0 = time.perf_counter()
search = KernelRidgeCV(alphas, kernel="rbf", param_grid={"gamma": gammas},
                       fit_intercept=True).fit(X_train, y_train)
seconds = time.perf_counter() - t0
loo_mse = -search.scores_  # (4 gammas, 26 alphas): mean squared leave-one-out error
gi = gammas.index(search.best_params_["gamma"])
ai = int(np.flatnonzero(alphas == search.alpha_)[0])
print(f"selected gamma={gammas[gi]}, alpha={search.alpha_:.3g} in {seconds:.2f} s "
      f"({len(gammas)} kernels x {len(alphas)} alphas)")

# %%
# The test error of the same models: one KernelRidge fit per (gamma, alpha)
test_mse = np.array([[mean_squared_error(
    y_test, KernelRidge(a, kernel="rbf", gamma=g, fit_intercept=True)
    .fit(X_train, y_train).predict(X_test)) for a in alphas] for g in gammas])
best = np.unravel_index(np.argmin(test_mse), test_mse.shape)
print(f"test MSE of the selection: {test_mse[gi, ai]:.0f} "
      f"(best of the grid: {test_mse[best]:.0f} at gamma={gammas[best[0]]}, "
      f"alpha={alphas[best[1]]:.3g})")
print(f"test MSE of predict(): "
      f"{mean_squared_error(y_test, search.predict(X_test)):.0f}")

# %%
# The two curves, the selection marked
fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
for k, g in enumerate(gammas):
    for ax, err in zip(axes, (loo_mse, test_mse), strict=True):
        ax.semilogx(alphas, err[k], color=f"C{k}", label=f"gamma = {g:g}")
for ax, err, title in zip(axes, (loo_mse, test_mse),
                          ("leave-one-out (training patients)", "held-out patients")):
    ax.plot(alphas[ai], err[gi, ai], "k*", markersize=14, label="selected")
    ax.set_xlabel("alpha")
    ax.set_title(title)
axes[0].set_ylabel("mean squared error")
axes[0].set_ylim(top=float(np.median(test_mse)) * 1.6)
axes[1].legend()
fig.tight_layout()
plt.show()
