r"""
===========================================================
Infinite-width kernels as limits of wide random networks
===========================================================

:class:`~kernelkit.kernels.NNGP` and :class:`~kernelkit.kernels.NTK` are the
infinite-width limits of two random kernels of a fully-connected network.
Here we check this numerically: we draw random ReLU networks of growing width
in plain NumPy and compare their *empirical* kernels with kernelkit's
closed forms.

The network is the one the kernels describe, ``depth`` hidden layers and a
linear readout, in the NTK parameterization (every weight and bias is a
standard normal draw; the scales sit in the forward pass):

.. math::

    h^{(1)} = \frac{\sigma_w}{\sqrt{d}} W^{(1)} x + \sigma_b b^{(1)}, \qquad
    h^{(l+1)} = \frac{\sigma_w}{\sqrt{n}} W^{(l+1)} \phi(h^{(l)}) + \sigma_b b^{(l+1)},

with :math:`\phi` = ReLU, hidden width :math:`n` and output
:math:`f(x) = h^{(\mathrm{depth}+1)}(x)`.

* The **empirical NNGP** is the covariance of the output over the readout
  layer's draw, given the hidden layers:
  :math:`\sigma_w^2\, \phi(h^{(L)}(x)) \cdot \phi(h^{(L)}(y)) / n + \sigma_b^2`.
* The **empirical NTK** is the inner product of the parameter gradients:
  :math:`\sum_\theta \partial_\theta f(x)\, \partial_\theta f(y)`.

Both are random for finite :math:`n` and converge to the deterministic
kernels as :math:`n \to \infty`, with fluctuations of order
:math:`1/\sqrt{n}` (Neal 1996; Lee et al. 2018; Jacot et al. 2018).
"""

# %%
# A random network and its two empirical kernels
# ----------------------------------------------
# The NTK sums, over layers, the product of two Gram matrices: of the
# backpropagated gradients ``delta`` (d f / d h) and of the layer inputs
# (plus ``b_std**2`` for the biases).
import time

import matplotlib.pyplot as plt
import numpy as np

from kernelkit.kernels import NNGP, NTK

DEPTH, W_STD, B_STD = 2, 1.0, 0.1


def empirical_kernels(X, width, rng):
    """Empirical NNGP and NTK of one random ReLU network on the rows of X."""
    acts, pre, weights = [X.T], [], []
    a = X.T
    for _ in range(DEPTH):
        W = rng.standard_normal((width, a.shape[0]))
        b = rng.standard_normal((width, 1))
        h = W_STD * W @ a / np.sqrt(a.shape[0]) + B_STD * b
        pre.append(h)
        weights.append(W)
        a = np.maximum(h, 0.0)
        acts.append(a)
    w_out = rng.standard_normal((width, 1))

    # Readout layer: its inputs' Gram matrix is also the empirical NNGP.
    nngp = W_STD**2 * a.T @ a / width + B_STD**2
    ntk = nngp.copy()
    # Backpropagate delta = d f / d h^(l) for every input at once.
    delta = W_STD * w_out / np.sqrt(width) * (pre[-1] > 0)
    for layer in range(DEPTH - 1, -1, -1):
        inputs = acts[layer]
        fan_in = inputs.shape[0]
        ntk += (delta.T @ delta) * (W_STD**2 * inputs.T @ inputs / fan_in + B_STD**2)
        if layer > 0:
            delta = W_STD * weights[layer].T @ delta / np.sqrt(fan_in) * (pre[layer - 1] > 0)
    return nngp, ntk


# %%
# Inputs and the infinite-width kernels
# -------------------------------------
# Eight points in 10 dimensions. kernelkit's kernels take the same
# ``depth``, ``w_std`` and ``b_std``.
rng = np.random.default_rng(0)
X = rng.standard_normal((8, 10))
nngp_inf = NNGP(depth=DEPTH, w_std=W_STD, b_std=B_STD)(X)
ntk_inf = NTK(depth=DEPTH, w_std=W_STD, b_std=B_STD)(X)
print("NNGP(depth=2) diagonal:", np.round(np.diag(nngp_inf), 3))
print("NTK(depth=2) diagonal: ", np.round(np.diag(ntk_inf), 3))

# %%
# Deviation against width
# -----------------------
# For each width we draw ``N_NETS`` independent networks and record the
# largest entrywise deviation of each network's kernels from the limits,
# and the deviation of their average.
widths = [64, 256, 1024, 4096]
N_NETS = 16
dev_nngp, dev_ntk, dev_nngp_avg, dev_ntk_avg = [], [], [], []
tic = time.perf_counter()
for width in widths:
    draws = [empirical_kernels(X, width, rng) for _ in range(N_NETS)]
    dev_nngp.append([np.abs(nngp - nngp_inf).max() for nngp, _ in draws])
    dev_ntk.append([np.abs(ntk - ntk_inf).max() for _, ntk in draws])
    dev_nngp_avg.append(np.abs(np.mean([d[0] for d in draws], axis=0) - nngp_inf).max())
    dev_ntk_avg.append(np.abs(np.mean([d[1] for d in draws], axis=0) - ntk_inf).max())
    print(f"width {width:5d}: max |NNGP_n - NNGP| = {np.mean(dev_nngp[-1]):.4f}, "
          f"max |NTK_n - NTK| = {np.mean(dev_ntk[-1]):.4f} (mean over {N_NETS} networks)")
print(f"{len(widths) * N_NETS} networks in {time.perf_counter() - tic:.1f} s")

# %%
# Plot on log-log axes
# --------------------
# Single networks (mean and spread over draws) follow the ``1/sqrt(width)``
# reference line; averaging ``N_NETS`` networks divides the error by about
# ``sqrt(N_NETS)`` more, as for any Monte Carlo average.
widths_arr = np.array(widths, dtype=float)
fig, ax = plt.subplots(figsize=(6.5, 5.5))
for devs, label, color in [(dev_nngp, "NNGP, one network", "C0"),
                           (dev_ntk, "NTK, one network", "C1")]:
    devs = np.array(devs)
    ax.errorbar(widths_arr, devs.mean(axis=1), yerr=devs.std(axis=1), marker="o",
                capsize=3, color=color, label=label)
ax.plot(widths_arr, dev_nngp_avg, "o--", color="C0", alpha=0.6,
        label=f"NNGP, average of {N_NETS} networks")
ax.plot(widths_arr, dev_ntk_avg, "s--", color="C1", alpha=0.6,
        label=f"NTK, average of {N_NETS} networks")
# Reference c / sqrt(width), c fitted (in log space) to the NTK points.
c = np.exp(np.mean(np.log(np.mean(dev_ntk, axis=1)) + 0.5 * np.log(widths_arr)))
ax.plot(widths_arr, c / np.sqrt(widths_arr), "k:", label=r"$\propto 1/\sqrt{\mathrm{width}}$")
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("hidden width n")
ax.set_ylabel("max abs deviation from the limit kernel")
ax.set_title(f"ReLU network, depth={DEPTH}, b_std={B_STD}")
ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2, fontsize="small")
fig.tight_layout()
plt.show()

# %%
# The finite-width kernels scatter around the closed forms with the
# ``1/sqrt(width)`` rate of a central limit theorem, and the average over
# networks approaches them further: the infinite-width kernels are the
# expected kernels of wide random networks (up to an ``O(1/width)`` bias).
# kernelkit evaluates these limits exactly, at the cost of one kernel matrix
# instead of a wide network.
#
# References: R. M. Neal, *Bayesian Learning for Neural Networks*, 1996;
# J. Lee et al., "Deep neural networks as Gaussian processes", ICLR 2018;
# A. Jacot, F. Gabriel and C. Hongler, "Neural tangent kernel", NeurIPS 2018.
