"""Random Fourier features of the stationary kernels: i.i.d., orthogonal, structured."""

import math

import numpy as np

from ..backend import resolve_backend
from ..kernels import RBF, Laplacian, Matern
from ..kernels._library import MATERN_NU
from ..kernels._scale import SCALE_FLOOR, check_kernel_scale
from ..utils._dispatch import select_loops
from ..utils._validation import check_scalar_param
from ._base import RandomFeatureMap, check_choice, check_n_components, dense_block
from ._spectral import RADIAL, check_nu, iid_frequencies, orthogonal_frequencies, radii

_NAMES = {"rbf": "rbf", "gaussian": "rbf", "laplacian": "laplacian", "matern": "matern"}
_OTHERS = {"polynomial": "TensorSketch", "poly": "TensorSketch", "ntk": "NTKRandomFeatures",
           "nngp": "ArcCosineFeatures", "linear": "no map: use X itself",
           "cosine": "no map: normalise the rows of X"}
VARIANTS = ("sincos", "random_phase")
SAMPLINGS = ("iid", "orthogonal", "structured")


def _resolve_kernel(kernel, gamma, nu):
    """``(name, gamma, nu)`` from a kernel name or a kernelkit RBF/Laplacian/Matern."""
    if isinstance(kernel, (RBF, Laplacian, Matern)):
        name = {RBF: "rbf", Laplacian: "laplacian", Matern: "matern"}[type(kernel)]
        return name, kernel.gamma, getattr(kernel, "nu", nu)
    if isinstance(kernel, str) and kernel in _NAMES:
        return _NAMES[kernel], gamma, nu
    if isinstance(kernel, str) and kernel in _OTHERS:
        raise ValueError(f"kernel={kernel!r} is not a stationary kernel and has no spectral "
                         f"density for random Fourier features ({_OTHERS[kernel]}).")
    raise ValueError(f"kernel must be one of {sorted(_NAMES)} or a kernelkit RBF, Laplacian "
                     f"or Matern kernel, got {kernel!r}.")


class RandomFourierFeatures(RandomFeatureMap):
    """Random Fourier features of the RBF, Laplacian and Matérn kernels.

    A map ``z`` with ``E[z(x) . z(y)] = k(x, y)`` for kernelkit's own kernels
    (:class:`~kernelkit.kernels.RBF`, :class:`~kernelkit.kernels.Laplacian`,
    :class:`~kernelkit.kernels.Matern`, same ``gamma``), so that a linear model on
    ``z(X)`` approximates the kernel machine at ``O(n D)`` cost (Rahimi & Recht 2007).
    With frequencies ``w_1 .. w_m`` drawn from the kernel's spectral density:

    * ``variant="sincos"`` (default): ``z(x) = [cos(W x), sin(W x)] / sqrt(m)``,
      ``m = n_components / 2``; the estimate of ``k(x, y)`` has variance
      ``(1 + k(2 delta) - 2 k(delta)^2) / D`` (``D = n_components``);
    * ``variant="random_phase"``: ``z(x) = sqrt(2 / D) cos(W x + b)``, ``b ~ U[0, 2 pi)``,
      ``m = D``, the map of scikit-learn's ``RBFSampler``, variance
      ``(1 + k(2 delta) / 2 - k(delta)^2) / D``: larger than the sin/cos map's wherever
      ``k(2 delta) < 2 k(delta)^2`` (always for the RBF; Sutherland & Schneider 2015).

    Parameters
    ----------
    n_components : int >= 1, default=100
        Output dimension ``D`` (even for ``variant="sincos"``).
    kernel : {"rbf", "laplacian", "matern"} or kernelkit kernel, default="rbf"
        ``"rbf"``: ``exp(-gamma ||x - y||^2)``, Gaussian frequencies;
        ``"laplacian"``: ``exp(-gamma ||x - y||_1)`` (L1, as
        :func:`sklearn.metrics.pairwise.laplacian_kernel`), product-Cauchy frequencies;
        ``"matern"``: length scale ``1 / sqrt(2 gamma)``, multivariate t frequencies with
        ``2 nu`` degrees of freedom. A kernelkit ``RBF`` / ``Laplacian`` / ``Matern``
        object supplies its own ``gamma`` (and ``nu``).
    gamma : float > 0, default=None
        Kernel scale as kernelkit defines it; None means ``1 / n_features`` (scikit-learn's
        ``RBFSampler`` defaults to ``gamma=1``: pass ``gamma=1.0`` to match it).
    nu : float > 0, default=1.5
        Matérn smoothness (any ``nu > 0``, ``inf`` for the RBF limit; kernelkit's exact
        Matérn has 0.5, 1.5, 2.5). Ignored by the other kernels.
    variant : {"sincos", "random_phase"}, default="sincos"
        The paired map (lower variance) or scikit-learn's random-phase map.
    sampling : {"iid", "orthogonal", "structured"}, default="iid"
        ``"iid"``: independent frequencies. ``"orthogonal"`` (ORF, Yu et al., NeurIPS
        2016): blocks of ``n_features`` orthogonal directions (a uniformly random
        orthogonal matrix, sign-corrected QR) times independent radii of the kernel's
        radial law (chi for the RBF); still unbiased, lower variance for the RBF.
        ``"structured"`` (SORF, same paper): directions from rows of
        ``H D1 H D2 H D3`` (``H`` the normalised Hadamard matrix, ``Di`` random signs;
        ``n_features`` padded to a power of two ``p``), applied by fast Walsh-Hadamard
        transforms at ``O(D log p)`` per row and ``O(D)`` memory; a small bias of order
        ``1 / sqrt(p)``. Radial kernels only (RBF, Matérn).
    random_state : int, RandomState instance or None, default=None
        Draws the frequencies in ``fit``.
    backend : {"auto", "numpy", "numba", "cupy"}, default=None
        Engine of the structured map's Walsh-Hadamard transforms (NumPy reference or its
        Numba twin; "cupy" runs the reference on the host). None defers to
        :func:`kernelkit.get_config`.

    Attributes
    ----------
    gamma_ : float
        The ``gamma`` used.
    random_weights_ : ndarray of shape (n_features, m)
        The frequencies (``"iid"`` / ``"orthogonal"``), as ``RBFSampler`` stores them.
    random_offset_ : ndarray of shape (m,)
        The phases (``variant="random_phase"`` only).
    signs_ : ndarray of shape (n_blocks, 3, p)
        ``D1, D2, D3`` of each SORF block (``"structured"`` only).
    radii_ : ndarray of shape (m,)
        Frequency norms (``"structured"`` only).
    backend_ : str
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)

    Raises
    ------
    ValueError
        In ``fit``: ``n_components < 1`` or odd with ``variant="sincos"``, a kernel without
        a spectral density here (e.g. ``"polynomial"``), ``nu <= 0``, ``gamma <= 0``,
        ``sampling`` other than ``"iid"`` for the Laplacian, NaN/inf in ``X``. In
        ``transform``: a number of features other than at ``fit``.

    See Also
    --------
    TensorSketch, ArcCosineFeatures, NTKRandomFeatures, RandomFeaturesRegressor

    References
    ----------
    Rahimi & Recht, "Random features for large-scale kernel machines", NeurIPS 2007.
    Sutherland & Schneider, "On the error of random Fourier features", UAI 2015.
    Yu, Suresh, Choromanski, Holtmann-Rice & Kumar, "Orthogonal random features",
    NeurIPS 2016.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelkit import RandomFourierFeatures
    >>> from kernelkit.kernels import RBF
    >>> X = np.random.default_rng(0).normal(size=(5, 3))
    >>> Z = RandomFourierFeatures(n_components=20000, gamma=0.5, random_state=0).fit_transform(X)
    >>> bool(np.abs(Z @ Z.T - RBF(gamma=0.5)(X)).max() < 0.05)
    True
    """

    def __init__(self, n_components=100, *, kernel="rbf", gamma=None, nu=1.5,
                 variant="sincos", sampling="iid", random_state=None, backend=None):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.nu = nu
        self.variant = variant
        self.sampling = sampling
        self.random_state = random_state
        self.backend = backend

    def _check_params(self):
        variant = check_choice(self.variant, "variant", VARIANTS)
        D = check_n_components(self.n_components, even=variant == "sincos")
        name, gamma, nu = _resolve_kernel(self.kernel, self.gamma, self.nu)
        gamma = check_scalar_param(gamma, "gamma", low=0.0, allow_none=True)
        nu = check_nu(nu) if name == "matern" else math.inf
        sampling = check_choice(self.sampling, "sampling", SAMPLINGS)
        if sampling != "iid" and name not in RADIAL:
            raise ValueError(f"sampling={sampling!r} needs a radial spectral density (rbf, "
                             f"matern); the {name} kernel's is not radial: use sampling='iid'.")
        return dict(D=D, kernel=name, gamma=gamma, nu=nu, variant=variant, sampling=sampling,
                    backend=resolve_backend(self.backend))

    def _check_scale(self, X, p):
        # the features' Monte Carlo error, ~1 / sqrt(2 D), hides smaller kernel values
        kernel = {"rbf": RBF, "laplacian": Laplacian}.get(p["kernel"])
        if kernel is None and p["nu"] not in MATERN_NU:  # no exact Matern kernel to read
            return
        kernel = Matern(p["gamma"], nu=p["nu"]) if kernel is None else kernel(p["gamma"])
        floor = 1.0 / math.sqrt(2.0 * p["D"])
        check_kernel_scale(kernel, X, type(self).__name__,
                           max(SCALE_FLOOR, floor), resolution="random features resolve kernel "
                           f"values down to about 1 / sqrt(2 n_components) = {floor:.3g}",
                           advice=", raise n_components")

    def _draw(self, p, d, rng):
        gamma = 1.0 / d if p["gamma"] is None else p["gamma"]
        m = p["D"] // 2 if p["variant"] == "sincos" else p["D"]
        fitted = {"gamma_": gamma, "backend_": p["backend"], "_n_features_out": p["D"],
                  "_n_freq": m, "_sampling": p["sampling"], "_variant": p["variant"]}
        if p["sampling"] == "structured":
            pad = 1 << max(0, (d - 1).bit_length())
            fitted["signs_"] = rng.choice(np.array([-1.0, 1.0]), size=(-(-m // pad), 3, pad))
            fitted["radii_"] = radii(p["kernel"], gamma, p["nu"], pad, m, rng)
        else:
            draw = orthogonal_frequencies if p["sampling"] == "orthogonal" else iid_frequencies
            fitted["random_weights_"] = draw(p["kernel"], gamma, p["nu"], d, m, rng)
        if p["variant"] == "random_phase":
            fitted["random_offset_"] = rng.uniform(0.0, 2.0 * math.pi, m)
        return fitted

    def _width(self):
        if self._sampling != "structured":
            return self._n_freq
        n_blocks, _, pad = self.signs_.shape
        return (n_blocks + 2) * pad  # the projections, the padded block and one transform

    def _transform_block(self, X, out):
        if self._sampling == "structured":  # fused: transforms, scaling and cos/sin
            offset = getattr(self, "random_offset_", np.empty(0))
            select_loops(__package__, self.backend_).sorf_features(
                dense_block(X), self.signs_, self.radii_, offset, out)
            return
        proj = np.asarray(X @ self.random_weights_, dtype=np.float64)
        m = self._n_freq
        if self._variant == "sincos":
            np.cos(proj, out=out[:, :m], casting="same_kind")
            np.sin(proj, out=out[:, m:], casting="same_kind")
            out *= 1.0 / math.sqrt(m)
        else:
            proj += self.random_offset_
            np.cos(proj, out=out, casting="same_kind")
            out *= math.sqrt(2.0 / m)
