"""
==========================================================
Training an infinitely wide network: the ensemble in time
==========================================================

An infinitely wide network trained by gradient descent on the squared loss is,
over its random initialisations, a Gaussian process at every training time ``t``
(Lee et al., "Wide Neural Networks of Any Depth Evolve as Linear Models Under
Gradient Descent", NeurIPS 2019). :class:`~kernelkit.ridge.InfiniteWidthRegressor`
gives its mean and standard deviation at any ``t`` from one eigendecomposition.

Below: a 1-D regression problem, the ensemble's mean and 95% band at four
training times, and four finite networks (one hidden layer of 1,024 relu units,
NTK parameterization, full-batch gradient descent with the same learning rate)
trained for the same number of steps from independent initialisations. At
``t = 0`` the networks are draws from the NNGP prior; as ``t`` grows they move
together towards the data, and the band shrinks where there are training points
(``time=np.inf`` would give the converged ensemble, which gradient descent reaches
only along the kernel's large eigen-directions in this many steps).
"""

import matplotlib.pyplot as plt
import numpy as np

from kernelkit.ridge import InfiniteWidthRegressor

W_STD, B_STD, LR = 1.5, 0.5, 0.15  # LR below 2 n / lambda_max(NTK) = 0.23
rng = np.random.default_rng(0)
X = np.sort(rng.uniform(-2.5, 2.5, 16))[:, None]
y = np.sin(2.0 * X[:, 0]) + 0.3 * X[:, 0]
grid = np.linspace(-4, 4, 300)[:, None]
times = np.array([0.0, 30.0, 300.0, 3000.0])  # gradient descent steps

# diag_reg=0: exact gradient flow on the targets, as the finite networks below are
# trained (the default, "auto", would add an estimated observation noise)
model = InfiniteWidthRegressor(depth=1, w_std=W_STD, b_std=B_STD, learning_rate=LR,
                               diag_reg=0.0)
model.fit(X, y)
mean, std = model.predict(grid, return_std=True, time=times)


# %%
# A finite network in the NTK parameterization: ``f(x) = W2 relu(W1 x w_std / sqrt(d)
# + b1 b_std) w_std / sqrt(width) + b2 b_std`` with standard normal parameters,
# trained on ``||f(X) - y||^2 / (2 n)`` by gradient descent: ``s`` steps at learning
# rate ``LR`` are the ensemble's ``time=s`` with ``learning_rate=LR``.
STEPS = times.astype(int)


def train_network(seed, width=1024, steps=STEPS):
    r = np.random.default_rng(seed)
    W1, b1 = r.standard_normal((1, width)), r.standard_normal(width)
    W2, b2 = r.standard_normal(width), r.standard_normal()
    n, s = len(y), W_STD / np.sqrt(width)

    def forward(A):
        H = A @ W1 * W_STD + b1 * B_STD
        return H, np.maximum(H, 0.0) @ W2 * s + b2 * B_STD

    out, done = [], 0
    for target in steps:
        for _ in range(target - done):
            H, f = forward(X)
            g = (f - y) / n  # dL/df
            act = np.maximum(H, 0.0)
            dpre = np.outer(g, W2 * s) * (H > 0)
            W2 -= LR * (act.T @ g) * s
            b2 -= LR * g.sum() * B_STD
            W1 -= LR * (X.T @ dpre) * W_STD
            b1 -= LR * dpre.sum(axis=0) * B_STD
        done = target
        out.append(forward(grid)[1])
    return np.array(out)


nets = np.array([train_network(seed) for seed in range(4)])  # (nets, times, grid)

fig, axes = plt.subplots(1, 4, figsize=(14, 3.6), sharey=True)
for i, (ax, t) in enumerate(zip(axes, times, strict=True)):
    ax.fill_between(grid[:, 0], mean[i] - 1.96 * std[i], mean[i] + 1.96 * std[i],
                    color="tab:blue", alpha=0.2, label="ensemble 95% band")
    ax.plot(grid[:, 0], mean[i], color="tab:blue", lw=2, label="ensemble mean")
    for j, net in enumerate(nets):
        ax.plot(grid[:, 0], net[i], color="tab:orange", lw=0.8, alpha=0.8,
                label="finite networks (width 1,024)" if j == 0 else None)
    ax.scatter(X[:, 0], y, color="k", s=14, zorder=3, label="training data")
    ax.set_title(f"t = {t:g} steps")
    ax.set_xlabel("x")
axes[0].set_ylim(-4, 4)
axes[0].legend(loc="lower left", fontsize=7)
fig.suptitle("Infinite-width ensemble trained by gradient descent vs finite networks")
fig.tight_layout()
plt.show()
