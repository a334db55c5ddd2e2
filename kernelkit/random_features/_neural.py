"""Random features of the infinite-width NNGP and NTK of fully-connected networks."""

import math

import numpy as np
from scipy.special import erf

from ..kernels import NTK
from ..utils._validation import check_scalar_param
from ._base import RandomFeatureMap, check_n_components, dense_block
from ._sketch import count_sketch_matrix, draw_count_sketches, sketch_product


def _activation(name, u):
    """``phi(u)`` and ``phi'(u)`` of a hidden layer."""
    if name == "relu":
        return np.maximum(u, 0.0), (u > 0).astype(np.float64)
    return erf(u), (2.0 / math.sqrt(math.pi)) * np.exp(-u * u)


_PARAMS_DOC = """
    n_components : int >= 1, default=256
        Width ``m`` of every random hidden layer.
    depth : int >= 1, default=1
        Number of hidden layers, as kernelkit's :class:`~kernelkit.kernels.{kernel}`.
    activation : {{"relu", "erf"}}, default="relu"
        Nonlinearity of every hidden layer.
    w_std : float > 0, default=1.0
        Weight standard deviation of every Dense layer (NTK parameterization, input
        covariance ``x.y / n_features``), as :class:`~kernelkit.kernels.{kernel}`.
    b_std : float >= 0 or None, default=None
        Bias standard deviation; None means no bias."""


class _NeuralFeatures(RandomFeatureMap):
    _sparse_ok = True

    def _check_params(self):
        m = check_n_components(self.n_components)
        # kernelkit's own NTK validates depth / activation / w_std / b_std
        depth, act, w2, b2 = NTK(depth=self.depth, activation=self.activation,
                                 w_std=self.w_std, b_std=self.b_std).spec(1).params
        return dict(m=m, depth=depth, act=act, w=math.sqrt(w2), b=math.sqrt(b2),
                    bias=self.b_std is not None and b2 > 0)

    def _draw_layers(self, p, d, rng):
        m, bias = p["m"], int(p["bias"])
        weights = [rng.standard_normal(((d if i == 0 else m) + bias, m))
                   for i in range(p["depth"])]
        return {"weights_": weights, "_act": p["act"], "_w": p["w"], "_b": p["b"],
                "_bias": bias, "_m": m}

    def _layers(self, X):
        """Yield, per hidden layer, the pre-layer features ``h`` (scaled so that
        ``h.h'`` estimates the previous covariance) and the layer's ``phi(u)``,
        ``phi'(u)``, each over ``sqrt(m)``."""
        h = dense_block(X) / math.sqrt(X.shape[1])  # input covariance x.y / d
        for W in self.weights_:
            u = self._w * (h @ W[: h.shape[1]])
            if self._bias:
                u += self._b * W[h.shape[1]]
            phi, dphi = _activation(self._act, u)
            del u
            scale = 1.0 / math.sqrt(self._m)
            yield h, phi * scale, dphi * scale
            h = phi * scale

    def _readout(self, h, out):
        """``[w_std h, b_std]``: inner products ``w_std^2 h.h' + b_std^2``."""
        m = h.shape[1]
        np.multiply(h, self._w, out=out[:, :m], casting="same_kind")
        if self._bias:
            out[:, m] = self._b


class ArcCosineFeatures(_NeuralFeatures):
    """Random features of kernelkit's NNGP: a random network's last hidden layer.

    Layer by layer (Cho & Saul 2009), ``h_0 = x / sqrt(d)`` and
    ``h_l = phi(W_l [w_std h_{{l-1}}, b_std]) / sqrt(m)`` with ``W_l`` standard Gaussian
    (``m`` rows); the output ``[w_std h_L, b_std]`` has inner products that converge, as
    ``m`` grows, to :class:`~kernelkit.kernels.NNGP` with the same ``depth``,
    ``activation``, ``w_std`` and ``b_std`` (for one layer they are unbiased: the
    arc-cosine kernel of order 1 for relu, Williams' kernel for erf; deeper, the error is
    ``O(1 / sqrt(m))``). This is a randomly initialised finite network of width ``m`` in
    the NTK parameterization.

    Parameters
    ----------{params}
    random_state : int, RandomState instance or None, default=None
        Draws the weights in ``fit``.

    Attributes
    ----------
    weights_ : list of ``depth`` ndarrays
        Layer ``l`` has shape (fan_in + bias, n_components), standard normal.
    n_features_out_ : int
        ``n_components + 1`` with a bias, else ``n_components``.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)

    Raises
    ------
    ValueError
        In ``fit``: ``n_components < 1``, ``depth < 1``, unknown ``activation``,
        ``w_std <= 0``, ``b_std < 0``, NaN/inf in ``X``; in ``transform``: a different
        number of features.

    References
    ----------
    Cho & Saul, "Kernel methods for deep learning", NeurIPS 2009.
    Lee et al., "Deep neural networks as Gaussian processes", ICLR 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelkit import ArcCosineFeatures
    >>> X = np.random.default_rng(0).normal(size=(4, 3))
    >>> ArcCosineFeatures(n_components=50, b_std=0.1, random_state=0).fit_transform(X).shape
    (4, 51)
    """

    def __init__(self, n_components=256, *, depth=1, activation="relu", w_std=1.0,
                 b_std=None, random_state=None):
        self.n_components = n_components
        self.depth = depth
        self.activation = activation
        self.w_std = w_std
        self.b_std = b_std
        self.random_state = random_state

    def _draw(self, p, d, rng):
        fitted = self._draw_layers(p, d, rng)
        fitted["_n_features_out"] = p["m"] + int(p["bias"])
        return fitted

    def _width(self):
        return 5 * self._m + self.weights_[0].shape[0]

    def _transform_block(self, X, out):
        for _, h, _ in self._layers(X):
            pass
        self._readout(h, out)


class NTKRandomFeatures(_NeuralFeatures):
    """Random features of kernelkit's NTK (Zandieh et al., NeurIPS 2021, "NTKRF").

    The NTK of :class:`~kernelkit.kernels.NTK` follows ``Theta_l = (w_std^2 K_{{l-1}} +
    b_std^2 + w_std^2 Theta_{{l-1}}) Kdot_l`` with ``Kdot_l = E[phi'(u) phi'(v)]``. This map
    carries features of both factors layer by layer: the NNGP features ``h_l`` of
    :class:`ArcCosineFeatures`, the derivative features ``phi'(W_l a) / sqrt(m)`` of
    ``Kdot_l`` (the step function for relu, the arc-cosine kernel of order 0), and
    tangent features ``t_l = TS([w_std h_{{l-1}}, b_std, w_std t_{{l-1}}] (x)
    phi'(W_l a) / sqrt(m))``, the tensor product compressed to ``n_sketch`` coordinates by
    a degree-2 TensorSketch (independent count sketches of the two factors, FFT product;
    Pham & Pagh 2013). The output ``[w_std h_L, b_std, w_std t_L]`` has inner products
    that converge to the NTK as ``n_components`` and ``n_sketch`` grow (unbiased for one
    layer). This is the NTKRF construction of Zandieh et al. with TensorSketch where the
    paper uses TensorSRHT, and without its final Gaussian projection; the paper's
    polynomial-sketch variant (NTKSketch) is not provided.

    Parameters
    ----------{params}
    n_sketch : int >= 1, default=None
        Dimension of the tangent features; None means ``n_components``.
    random_state : int, RandomState instance or None, default=None
        Draws the weights and the sketches in ``fit``.

    Attributes
    ----------
    weights_ : list of ``depth`` ndarrays
        Layer ``l`` has shape (fan_in + bias, n_components), standard normal.
    sketch_index_, sketch_sign_ : list of ``depth`` ndarrays of shape (2, ...)
        Hash buckets and signs of the two count sketches of each layer (over the layer's
        input features and over its derivative features).
    n_features_out_ : int
        ``n_components + n_sketch`` (+ 1 with a bias).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)

    Raises
    ------
    ValueError
        As :class:`ArcCosineFeatures`, and for ``n_sketch < 1``.

    References
    ----------
    Zandieh, Han, Avron, Shoham, Kim & Shin, "Scaling neural tangent kernels via
    sketching and random features", NeurIPS 2021.
    Jacot, Gabriel & Hongler, "Neural tangent kernel", NeurIPS 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelkit import NTKRandomFeatures
    >>> X = np.random.default_rng(0).normal(size=(4, 3))
    >>> NTKRandomFeatures(n_components=50, n_sketch=30, random_state=0).fit_transform(X).shape
    (4, 80)
    """

    def __init__(self, n_components=256, *, depth=1, activation="relu", w_std=1.0,
                 b_std=None, n_sketch=None, random_state=None):
        self.n_components = n_components
        self.depth = depth
        self.activation = activation
        self.w_std = w_std
        self.b_std = b_std
        self.n_sketch = n_sketch
        self.random_state = random_state

    def _check_params(self):
        p = super()._check_params()
        p["s"] = p["m"] if self.n_sketch is None else check_n_components(self.n_sketch,
                                                                         "n_sketch")
        return p

    def _draw(self, p, d, rng):
        fitted = self._draw_layers(p, d, rng)
        m, s, bias = p["m"], p["s"], int(p["bias"])
        index, sign = [], []
        for i in range(p["depth"]):
            n_in = (d if i == 0 else m) + bias + (0 if i == 0 else s)
            a = draw_count_sketches(1, n_in, s, rng)
            b = draw_count_sketches(1, m, s, rng)
            index.append([a[0][0], b[0][0]])
            sign.append([a[1][0], b[1][0]])
        fitted.update({"sketch_index_": index, "sketch_sign_": sign, "_s": s,
                       "_n_features_out": m + bias + s})
        return fitted

    def _width(self):
        return 5 * self._m + 8 * self._s + self.weights_[0].shape[0]

    def _transform_block(self, X, out):
        t = np.zeros((X.shape[0], 0))
        for i, (h_prev, h, dphi) in enumerate(self._layers(X)):
            cols = [self._w * h_prev] + ([np.full((X.shape[0], 1), self._b)]
                                         if self._bias else []) + [self._w * t]
            pre = np.hstack(cols)  # features of w2 K + b2 + w2 Theta before the layer
            S = [count_sketch_matrix(self.sketch_index_[i][j], self.sketch_sign_[i][j],
                                     self._s) for j in (0, 1)]
            t = sketch_product([pre, dphi], S, self._s)
        m = h.shape[1]
        self._readout(h, out)
        np.multiply(t, self._w, out=out[:, m + self._bias:], casting="same_kind")


for _cls, _kernel in ((ArcCosineFeatures, "NNGP"), (NTKRandomFeatures, "NTK")):
    _cls.__doc__ = _cls.__doc__.format(params=_PARAMS_DOC.format(kernel=_kernel))
del _cls, _kernel
