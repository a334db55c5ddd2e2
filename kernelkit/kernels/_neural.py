"""Infinite-width kernels of fully-connected networks: the NTK and the NNGP.

Both are scikit-learn GP kernels whose ``w_std`` and ``b_std`` are log-space
hyperparameters with exact gradients (:func:`nn_gradient`, forward-mode
differentiation of the layer recursion), so ``GaussianProcessRegressor`` can tune
them by marginal likelihood.
"""

import math

import numpy as np
from sklearn.gaussian_process.kernels import Hyperparameter

from .._config import get_config
from ..backend import KernelSpec, get_backend
from ..backend._array import CANCELLATION, affine_defect, erf_gap, relu_layer
from ..utils._validation import check_scalar_param
from ._base import Kernel, check_bounds

ACTIVATIONS = ("relu", "erf")


class _NeuralKernel(Kernel):
    _output = None

    def __init__(self, depth=1, activation="relu", w_std=1.0, b_std=None,
                 parameterization="ntk", w_std_bounds=(1e-1, 1e1), b_std_bounds=(1e-5, 1e2)):
        self.depth = depth
        self.activation = activation
        self.w_std = w_std
        self.b_std = b_std
        self.parameterization = parameterization
        self.w_std_bounds = w_std_bounds
        self.b_std_bounds = b_std_bounds

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

    @property
    def hyperparameters(self):
        """``w_std`` and ``b_std`` (log-space, within their bounds), in that order.

        ``b_std`` is fixed when it is None or 0 (no bias: its logarithm is undefined);
        ``depth`` is discrete and not a hyperparameter (as ``nu`` of scikit-learn's
        ``Matern``).
        """
        no_bias = self.b_std is None or (not isinstance(self.b_std, str) and self.b_std == 0)
        b_bounds = check_bounds(self.b_std_bounds, "b_std_bounds")
        return [Hyperparameter("w_std", "numeric", check_bounds(self.w_std_bounds,
                                                                 "w_std_bounds")),
                Hyperparameter("b_std", "numeric", "fixed" if no_bias else b_bounds)]

    def _gradient(self, Xh, K, free):
        """Exact ``dK/dlog(w_std)``, ``dK/dlog(b_std)`` (free ones) by differentiating the
        layer recursion (host NumPy or its Numba twin, row blocks within
        ``working_memory``)."""
        depth, act, w2, b2 = self.spec(Xh.shape[1]).params
        if act == "relu" and b2 == 0:
            # relu without bias is positively homogeneous: k scales as w2^(depth + 1),
            # so dk/dlog(w_std) = 2 (depth + 1) k exactly (Euler), at no extra cost
            return (2.0 * (depth + 1) * K)[..., None]
        G = nn_gradient(Xh, int(depth), act, w2, b2, self._output == "ntk",
                        engine=get_backend(None, Xh).name)
        # d/d log(s) = 2 s^2 d/d(s^2) for s = w_std, b_std
        cols = {"w_std": 2.0 * w2 * G[..., 0], "b_std": 2.0 * b2 * G[..., 1]}
        return np.stack([cols[name] for name in free], axis=-1)


def _safe_div(a, b):
    """``a / b`` where ``b != 0``, else 0 (the limits used below are all 0 there)."""
    nz = b != 0
    return np.where(nz, a / np.where(nz, b, 1.0), 0.0)


def _smtc(th):
    """``sin(t) - t cos(t)`` without cancellation for small ``t`` (series below 0.1)."""
    t2 = th * th
    series = th * t2 * (1 / 3 - t2 * (1 / 30 - t2 * (1 / 840 - t2 / 45360)))
    return np.where(th < 0.1, series, np.sin(th) - th * np.cos(th))


def nn_gradient(X, depth, act, w2, b2, want_ntk, engine="numpy"):
    """Exact gradient of the NTK / NNGP matrix ``k(X, X)`` w.r.t. ``(w_std^2, b_std^2)``.

    Forward-mode differentiation of the recursion of :class:`NTK` (every
    quantity carries its two partial derivatives), row block by row block within
    ``working_memory``. For relu, the defect ``D = sqrt(q_x q_y) - K`` and its
    derivative are carried as the engines carry the value, so nearly parallel
    pairs keep their accuracy: with ``u = D / p = 1 - cos(theta)``,
    ``dtheta = du / sin(theta)`` and ``dD_new = (pi dD - dp smtc - theta p du) / (2 pi)``
    (``smtc = sin(theta) - theta cos(theta)``). The arc-cosine kernel has
    ``dk/dK = (pi - theta) / (2 pi)`` and ``dk/dq_x = p sin(theta) / (4 pi q_x)``.

    Parameters
    ----------
    X : ndarray of shape (n, d), float64
    depth : int
    act : {"relu", "erf"}
    w2, b2 : float
        ``w_std**2`` and ``b_std**2``.
    want_ntk : bool
        NTK (True) or NNGP (False).
    engine : str, default="numpy"
        "numba" runs the fused scalar twin (:mod:`kernelkit.backend._nn_grad_numba`,
        about 20 times faster); anything else this NumPy reference.

    Returns
    -------
    G : ndarray of shape (n, n, 2)
        ``dk/d(w_std^2)`` and ``dk/d(b_std^2)`` (the latter 0 when ``b2 = 0``, where
        it does not exist for parallel pairs).
    """
    n, d = X.shape
    sq = np.einsum("ij,ij->i", X, X) / d
    if engine == "numba":
        from ..backend._nn_grad_numba import nn_gradient_numba

        gram = (X @ X.T) / d
        D0 = _input_defect(X, X, gram, sq, sq, 0) if act == "relu" else gram
        G = nn_gradient_numba(gram, sq, D0, depth, act == "relu", w2, b2, want_ntk)
    else:
        G = np.empty((n, n, 2))
        # ~40 float64 (rows, n) temporaries live at once
        rows = max(1, int(get_config()["working_memory"] * 2**20 // (40 * 8 * n)))
        for r0 in range(0, n, rows):
            r1 = min(n, r0 + rows)
            G[r0:r1] = _grad_block(X[r0:r1], X, sq[r0:r1], sq, depth, act, w2, b2, want_ntk,
                                   r0)
    if b2 == 0:
        # at b = 0 the angle of parallel pairs grows like sqrt(b^2): no derivative in b^2
        # (and d/dlog b = 2 b^2 d/db^2 = 0); report 0
        G[..., 1] = 0.0
    return G


def _input_defect(Xa, Xb, K, qa, qb, self_offset):
    """``sqrt(q_a q_b) - K`` of the inputs, from unit vectors where it cancels."""
    p = np.sqrt(np.outer(qa, qb))
    D = np.maximum(p - K, 0.0)
    i, j = np.nonzero((K > (1.0 - CANCELLATION) * p) & (p > 0))
    if i.size:
        ua = Xa[i] / np.sqrt(qa[i] * Xa.shape[1])[:, None]
        ub = Xb[j] / np.sqrt(qb[j] * Xb.shape[1])[:, None]
        D[i, j] = p[i, j] * 0.5 * np.sum((ua - ub) ** 2, axis=1)
    r = np.arange(Xa.shape[0])
    D[r, r + self_offset] = 0.0
    return D


def _grad_block(Xa, Xb, qa, qb, depth, act, w2, b2, want_ntk, self_offset):
    """Rows of the gradient: forward-mode recursion on a (rows, n) block."""
    e = np.array([1.0, 0.0]), np.array([0.0, 1.0])  # d(w2), d(b2) unit directions
    K = (Xa @ Xb.T) / Xa.shape[1]
    dK = np.zeros(K.shape + (2,))
    T, dT = np.zeros_like(K), np.zeros_like(dK)
    dqa, dqb = np.zeros((qa.size, 2)), np.zeros((qb.size, 2))
    relu = act == "relu"
    if relu:
        D, dD = _input_defect(Xa, Xb, K, qa, qb, self_offset), np.zeros_like(dK)
    for _ in range(depth):
        # affine layer: K <- w2 K + b2 (and the variances likewise)
        sa, sb = np.sqrt(qa), np.sqrt(qb)
        dsa, dsb = _safe_div(dqa, 2 * sa[:, None]), _safe_div(dqb, 2 * sb[:, None])
        K_old, dK_old = K, dK
        K = w2 * K_old + b2
        dK = w2 * dK_old + K_old[..., None] * e[0] + e[1]
        qa_old, qb_old = qa, qb
        qa, qb = w2 * qa + b2, w2 * qb + b2
        dqa = w2 * dqa + qa_old[:, None] * e[0] + e[1]
        dqb = w2 * dqb + qb_old[:, None] * e[0] + e[1]
        p = np.sqrt(np.outer(qa, qb))
        dlogp = 0.5 * (_safe_div(dqa, qa[:, None])[:, None, :]
                       + _safe_div(dqb, qb[:, None])[None, :, :])
        dp = p[..., None] * dlogp
        if relu:
            p_old = np.outer(sa, sb)
            D_new = affine_defect(np, K_old, D, sa[:, None], sb[None, :], w2, b2, p, K)
            gap = (sa[:, None] - sb[None, :]) ** 2 + 2.0 * D
            dgap = (2.0 * (sa[:, None] - sb[None, :]))[..., None] * (
                dsa[:, None, :] - dsb[None, :, :]) + 2.0 * dD
            dp_old = dsa[:, None, :] * sb[None, :, None] + sa[:, None, None] * dsb[None, :, :]
            dnum = (2.0 * w2 * (D * (p_old + K_old))[..., None] * e[0]
                    + w2 * w2 * (dD * (p_old + K_old)[..., None] + D[..., None] * (dp_old + dK_old))
                    + gap[..., None] * (b2 * e[0] + w2 * e[1]) + w2 * b2 * dgap)
            pos = (K > 0)[..., None]
            dD_pos = _safe_div(dnum - D_new[..., None] * (dp + dK), (p + K)[..., None])
            dD = np.where(pos, dD_pos, dp - dK)
            D = D_new
        T_old = T
        T = K + w2 * T
        dT = dK + T_old[..., None] * e[0] + w2 * dT
        if relu:
            K_new, D_new, factor = relu_layer(np, K, D, p)
            th = np.where(p > 0, math.pi - 2.0 * math.pi * factor, 0.0)
            sn = np.sin(th)
            du = _safe_div(dD - (D[..., None] * dp) / np.where(p > 0, p, 1.0)[..., None],
                           p[..., None])
            # nearly antiparallel pairs have no defect tracking: du there is rounding
            # (error eps / sin), while zeroing dtheta errs by O(sin); split at 1e-8
            anti = (th > 0.5 * math.pi) & (sn < 1e-8)
            dth = _safe_div(du, np.where(anti, 0.0, sn)[..., None])
            dK = factor[..., None] * dK + ((p * sn)[..., None] / (2.0 * math.pi)) * dlogp
            dD = (math.pi * dD - dp * _smtc(th)[..., None]
                  - (th * p)[..., None] * du) / (2.0 * math.pi)
            dT = factor[..., None] * dT - T[..., None] * dth / (2.0 * math.pi)
            T = T * factor
            K, D = K_new, D_new
            qa, qb, dqa, dqb = qa / 2, qb / 2, dqa / 2, dqb / 2
        else:
            a, b = 1.0 + 2.0 * qa, 1.0 + 2.0 * qb
            da_a, db_b = 2.0 * dqa / a[:, None], 2.0 * dqb / b[:, None]
            g = erf_gap(np, a[:, None], b[None, :], K)
            dg = (np.outer(a, b)[..., None] * (da_a[:, None, :] + db_b[None, :, :])
                  - 8.0 * K[..., None] * dK)
            rg = 1.0 / np.sqrt(g)
            dK_new = (2.0 / math.pi) * (2.0 * dK - K[..., None] * (da_a[:, None, :]
                                                                  + db_b[None, :, :]))
            dK_new = dK_new * rg[..., None]
            factor = (4.0 / math.pi) * rg
            dfactor = -(2.0 / math.pi) * (rg**3)[..., None] * dg
            dT = factor[..., None] * dT + T[..., None] * dfactor
            T = T * factor
            K = (2.0 / math.pi) * np.arcsin(np.clip(2.0 * K / np.sqrt(np.outer(a, b)), -1, 1))
            dK = dK_new
            dqa = (4.0 / math.pi) * dqa / (a * np.sqrt(1.0 + 4.0 * qa))[:, None]
            dqb = (4.0 / math.pi) * dqb / (b * np.sqrt(1.0 + 4.0 * qb))[:, None]
            qa = (2.0 / math.pi) * np.arcsin(2.0 * qa / a)
            qb = (2.0 / math.pi) * np.arcsin(2.0 * qb / b)
    # readout
    dK = w2 * dK + K[..., None] * e[0] + e[1]
    if not want_ntk:
        return dK
    return dK + T[..., None] * e[0] + w2 * dT


_DOC = """{title}

The network is ``[Dense(w_std, b_std), activation] * depth`` followed by a readout
``Dense(w_std, b_std)``, in the NTK parameterization, with input covariance
``x.y / d`` (``d = n_features``). Per layer, with ``q`` the pre-activation
covariances: ``q <- w_std^2 q + b_std^2``, ``Theta <- q + w_std^2 Theta``, then
the activation maps ``q`` to ``E[phi(u) phi(v)]`` and multiplies ``Theta`` by
``E[phi'(u) phi'(v)]`` (closed forms: the arc-cosine kernels of Cho & Saul 2009
for relu, Williams 1997 for erf). Values equal those of the ``neural-tangents``
library (``stax``, ``parameterization="ntk"``) for the same architecture.

As a scikit-learn GP kernel, ``w_std`` and ``b_std`` are hyperparameters in log
space (``theta = [log w_std, log b_std]``) with exact gradients
(``k(X, eval_gradient=True)``), so
``GaussianProcessRegressor(kernel={name}(...) + WhiteKernel())`` tunes them by
maximising the log marginal likelihood.

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
    Bias standard deviation; None means no bias (then ``b_std`` is not a free
    hyperparameter: a GP optimiser cannot switch the bias on).
parameterization : {{"ntk"}}, default="ntk"
    Only the NTK parameterization (weights scaled by ``1 / sqrt(fan_in)`` in the
    forward pass) has a width-independent infinite-width limit.
w_std_bounds : pair of floats > 0 or "fixed", default=(1e-1, 1e1)
    Range searched by a GP optimiser for ``w_std``; "fixed" freezes it. The kernel
    grows as ``w_std ** (2 (depth + 1))``: with ``w_std`` up to 100 the corner of
    the box that L-BFGS-B tries first holds numerically singular matrices
    (scikit-learn's GP then returns a log-likelihood of -inf and its optimiser
    stops, silently, at the starting point).
b_std_bounds : pair of floats > 0 or "fixed", default=(1e-5, 1e2)
    Range searched for ``b_std``; "fixed" freezes it.

Notes
-----
A zero input row gives the limit value (0 without bias). The diagonal is not
constant (``k(x, x)`` grows with ``||x||^2``). The gradient costs about ten
times a kernel evaluation on the NumPy engine (it is not fused in Numba yet).
"""


class NTK(_NeuralKernel):
    _output = "ntk"


class NNGP(_NeuralKernel):
    _output = "nngp"


NTK.__doc__ = _DOC.format(name="NTK", title="Infinite-width neural tangent kernel (NTK) of a "
                                            "fully-connected network.")
NNGP.__doc__ = _DOC.format(name="NNGP", title="Infinite-width NNGP kernel: the covariance of "
                                              "the Gaussian process a randomly initialised "
                                              "network converges to.")
