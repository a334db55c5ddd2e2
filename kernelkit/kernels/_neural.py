"""Infinite-width kernels of fully-connected networks: the NTK and the NNGP."""

from ..backend import KernelSpec
from ..utils._validation import check_scalar_param
from ._base import Kernel

ACTIVATIONS = ("relu", "erf")


class _NeuralKernel(Kernel):
    _output = None

    def __init__(self, depth=1, activation="relu", w_std=1.0, b_std=None,
                 parameterization="ntk"):
        self.depth = depth
        self.activation = activation
        self.w_std = w_std
        self.b_std = b_std
        self.parameterization = parameterization

    def _spec(self, n_features):
        depth = check_scalar_param(self.depth, "depth", low=1, low_inclusive=True, integer=True)
        if not isinstance(self.activation, str) or self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {self.activation!r}.")
        w_std = check_scalar_param(self.w_std, "w_std", low=0.0)
        b_std = check_scalar_param(self.b_std, "b_std", low=0.0, low_inclusive=True,
                                   allow_none=True)
        if self.parameterization != "ntk":
            raise ValueError(
                f"parameterization must be 'ntk', got {self.parameterization!r}; the "
                "infinite-width limit of the 'standard' parameterization depends on the "
                "layer widths and is not provided.")
        b2 = 0.0 if b_std is None else b_std**2
        return KernelSpec(self._output, (depth, self.activation, w_std**2, b2))


_DOC = """{title}

The network is ``[Dense(w_std, b_std), activation] * depth`` followed by a readout
``Dense(w_std, b_std)``, in the NTK parameterization, with input covariance
``x.y / d`` (``d = n_features``). Per layer, with ``q`` the pre-activation
covariances: ``q <- w_std^2 q + b_std^2``, ``Theta <- q + w_std^2 Theta``, then
the activation maps ``q`` to ``E[phi(u) phi(v)]`` and multiplies ``Theta`` by
``E[phi'(u) phi'(v)]`` (closed forms: the arc-cosine kernels of Cho & Saul 2009
for relu, Williams 1997 for erf). Values equal those of the ``neural-tangents``
library (``stax``, ``parameterization="ntk"``) for the same architecture.

References: Jacot, Gabriel & Hongler, "Neural Tangent Kernel", NeurIPS 2018;
Lee et al., "Wide neural networks of any depth evolve as linear models under
gradient descent", NeurIPS 2019; Arora et al., "On exact computation with an
infinitely wide neural net", NeurIPS 2019.

Parameters
----------
depth : int >= 1, default=1
    Number of hidden layers.
activation : {{"relu", "erf"}}, default="relu"
    Nonlinearity of every hidden layer.
w_std : float > 0, default=1.0
    Weight standard deviation of every Dense layer.
b_std : float >= 0 or None, default=None
    Bias standard deviation; None means no bias.
parameterization : {{"ntk"}}, default="ntk"
    Only the NTK parameterization (weights scaled by ``1 / sqrt(fan_in)`` in the
    forward pass) has a width-independent infinite-width limit.

Notes
-----
A zero input row gives the limit value (0 without bias). The diagonal is not
constant (``k(x, x)`` grows with ``||x||^2``).
"""


class NTK(_NeuralKernel):
    _output = "ntk"


class NNGP(_NeuralKernel):
    _output = "nngp"


NTK.__doc__ = _DOC.format(title="Infinite-width neural tangent kernel (NTK) of a fully-connected "
                                "network.")
NNGP.__doc__ = _DOC.format(title="Infinite-width NNGP kernel: the covariance of the Gaussian "
                                 "process a randomly initialised network converges to.")
