"""TensorSketch: random features of the polynomial kernel (Pham & Pagh, KDD 2013)."""

import math

import numpy as np
from scipy import sparse

from ..utils._validation import check_scalar_param
from ._base import RandomFeatureMap, check_n_components


def draw_count_sketches(n_sketches, n_in, n_out, rng):
    """Hash indices in ``[0, n_out)`` and signs +-1 of ``n_sketches`` independent count
    sketches of ``n_in`` coordinates: two arrays of shape (n_sketches, n_in)."""
    return (rng.randint(0, n_out, size=(n_sketches, n_in)),
            rng.choice(np.array([-1.0, 1.0]), size=(n_sketches, n_in)))


def count_sketch_matrix(index, sign, n_out):
    """The ``(n_in, n_out)`` sparse matrix ``S`` with ``X @ S`` the count sketch of ``X``."""
    n_in = index.shape[0]
    return sparse.csr_matrix((sign, (np.arange(n_in), index)), shape=(n_in, n_out))


def sketch_product(blocks, matrices, n_out):
    """TensorSketch of the row-wise tensor product of ``blocks`` (one count sketch each):
    the circular convolution of their count sketches, by FFT.

    ``E[<TS(x1 (x) .. (x) xp), TS(y1 (x) .. (x) yp)>] = prod_i <xi, yi>`` for independent
    sketches; returns float64 of shape (rows, n_out).
    """
    spectrum = None
    for X, S in zip(blocks, matrices):
        C = X @ S
        C = C.toarray() if sparse.issparse(C) else np.asarray(C, dtype=np.float64)
        F = np.fft.rfft(C, axis=1)
        if spectrum is None:
            spectrum = F
        else:
            spectrum *= F
    return np.fft.irfft(spectrum, n=n_out, axis=1)


class TensorSketch(RandomFeatureMap):
    """TensorSketch features of the polynomial kernel ``(gamma <x, y> + coef0)^degree``.

    With ``x~ = [sqrt(gamma) x, sqrt(coef0)]`` the kernel is ``<x~, y~>^degree =
    <x~^(x)degree, y~^(x)degree>``; the map is the count sketch of that tensor power,
    computed without forming it as the circular convolution of ``degree`` independent
    count sketches of ``x~`` (an FFT product), at ``O(degree (nnz(x) + D log D))`` per
    row. ``E[z(x) . z(y)] = k(x, y)`` exactly (unbiased; Pham & Pagh 2013).

    The parameters follow kernelkit's (and :func:`sklearn.metrics.pairwise.polynomial_kernel`'s)
    polynomial kernel, ``coef0=1`` by default; scikit-learn's
    :class:`~sklearn.kernel_approximation.PolynomialCountSketch` defaults to ``coef0=0``
    (and ``gamma=1``, ``degree=2``) although its ``polynomial_kernel`` uses ``coef0=1``:
    pass those values explicitly to compare the two.

    Parameters
    ----------
    n_components : int >= 1, default=100
        Output dimension ``D``.
    degree : int >= 1, default=3
        Polynomial degree, as kernelkit's :class:`~kernelkit.kernels.Polynomial`.
    gamma : float > 0, default=None
        None means ``1 / n_features``.
    coef0 : float >= 0, default=1
        Additive constant (a negative one has no real feature map).
    random_state : int, RandomState instance or None, default=None
        Draws the hash functions in ``fit``.

    Attributes
    ----------
    gamma_ : float
    index_hash_ : ndarray of shape (degree, n_features + 1), int
        Hash buckets of each count sketch (the last column: the ``sqrt(coef0)`` coordinate).
    bit_hash_ : ndarray of shape (degree, n_features + 1)
        Signs +-1 of each count sketch.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)

    Raises
    ------
    ValueError
        In ``fit``: ``n_components < 1``, ``degree`` not an integer >= 1, ``gamma <= 0``,
        ``coef0 < 0``, NaN/inf in ``X``; in ``transform``: a different number of features.

    References
    ----------
    Pham & Pagh, "Fast and scalable polynomial kernels via explicit feature maps",
    KDD 2013.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelkit import TensorSketch
    >>> X = np.random.default_rng(0).normal(size=(4, 3))
    >>> TensorSketch(n_components=64, degree=2, random_state=0).fit_transform(X).shape
    (4, 64)
    """

    def __init__(self, n_components=100, *, degree=3, gamma=None, coef0=1, random_state=None):
        self.n_components = n_components
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.random_state = random_state

    def _check_params(self):
        D = check_n_components(self.n_components)
        degree = check_scalar_param(self.degree, "degree", low=1, low_inclusive=True,
                                    integer=True)
        gamma = check_scalar_param(self.gamma, "gamma", low=0.0, allow_none=True)
        coef0 = check_scalar_param(self.coef0, "coef0", low=0.0, low_inclusive=True)
        return dict(D=D, degree=degree, gamma=gamma, coef0=coef0)

    def _draw(self, p, d, rng):
        index, sign = draw_count_sketches(p["degree"], d + 1, p["D"], rng)
        return {"gamma_": 1.0 / d if p["gamma"] is None else p["gamma"], "index_hash_": index,
                "bit_hash_": sign, "_coef0": p["coef0"], "_n_features_out": p["D"]}

    def _width(self):
        return 4 * self._n_features_out  # a count sketch and two complex spectra

    def _transform_block(self, X, out):
        d = X.shape[1]
        scale = np.full(d + 1, math.sqrt(self.gamma_))
        scale[d] = math.sqrt(self._coef0)  # the constant coordinate carries coef0
        ones = np.ones((X.shape[0], 1))
        Xt = sparse.hstack([X, ones], format="csr") if sparse.issparse(X) else np.hstack(
            [np.asarray(X, dtype=np.float64), ones])
        mats = [count_sketch_matrix(self.index_hash_[i], scale * self.bit_hash_[i],
                                    self._n_features_out)
                for i in range(self.index_hash_.shape[0])]
        out[:] = sketch_product([Xt] * len(mats), mats, self._n_features_out)
