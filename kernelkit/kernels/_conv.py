"""Infinite-width kernels of convolutional networks: the CNN-GP (NNGP) and the CNTK.

The kernels of ``[conv | activation | average pool] * L`` followed by a flatten or a
global-average-pool read-out and a dense layer, in neural-tangents' NTK
parameterization, evaluated in tiles of image pairs within ``working_memory``
(:mod:`._conv_numpy` is the reference, :mod:`._conv_numba` its compiled twin).
"""

import warnings

import numpy as np

from .._config import get_config
from ..backend import get_backend, is_cupy_array
from ..utils._array_api import follow_input
from ..utils._threads import map_row_blocks, n_workers
from ..utils._validation import check_input, check_scalar_param
from . import _conv_numpy
from ._base import Kernel
from ._conv_arch import check_image_shape, compile_layers

# float64 arrays of a pair's state size alive at once per pair (tracemalloc peaks of
# NumPy tiles: 8.2 for the NTK, 7.2 for the NNGP, besides the gathered images and
# variance trajectories); the Numba engine holds 4 (NTK) or 2 (NNGP) per running pair
_NUMPY_ARRAYS = {True: 10, False: 8}
_NUMBA_ARRAYS = {True: 4, False: 2}
_MAX_TILE = 1 << 14  # pairs per compiled call: fine enough to balance the pool


class _ConvPlan:
    """A validated architecture on one image shape (what every evaluation needs)."""

    def __init__(self, kernel, image_shape):
        w_std = check_scalar_param(kernel.w_std, "w_std", low=0.0)
        b_std = check_scalar_param(kernel.b_std, "b_std", low=0.0, low_inclusive=True,
                                   allow_none=True)
        program, readout, traj, max_p, pooled = compile_layers(kernel.layers, image_shape,
                                                               kernel.padding)
        self.image_shape = image_shape
        self.prog = (program, readout)
        self.traj_len = traj
        self.w2, self.b2 = w_std**2, 0.0 if b_std is None else b_std**2
        self.want_ntk = kernel._output == "ntk"
        # a flatten read-out without pooling only needs the pixel pairs at equal positions
        self.full = pooled or readout == 1
        self.state_size = max_p * max_p if self.full else max_p

    def _run(self, engine, A, B, QA, QB, ii, jj, self_mode):
        if engine == "numba":
            from . import _conv_numba

            return _conv_numba.run_pairs(A, B, QA, QB, ii, jj, self.prog, self.w2, self.b2,
                                         self.want_ntk, self.full, self_mode, self.state_size)
        device = None
        if engine == "cupy":  # the reference program on device tiles
            import cupy as device
        return _conv_numpy.run_pairs(A, B, QA, QB, ii, jj, self.prog, self.w2, self.b2,
                                     self.want_ntk, self.full, self_mode, device)

    def pair_bytes(self, engine):
        """Bytes a pair of a NumPy / CuPy tile (or a running pair on Numba) holds at
        once."""
        if engine in ("numpy", "cupy"):
            extra = 2 * (int(np.prod(self.image_shape)) + self.traj_len)  # gathered inputs
            return 8.0 * (_NUMPY_ARRAYS[self.want_ntk] * self.state_size + extra)
        return 8.0 * _NUMBA_ARRAYS[self.want_ntk] * self.state_size

    def _tiling(self, engine, total):
        """(pairs per tile, tiles run at once) within ``working_memory``."""
        budget = float(get_config()["working_memory"]) * 2**20
        per_pair = self.pair_bytes(engine)
        if per_pair > budget:
            warnings.warn(f"one image pair's state needs {per_pair / 2**20:.1f} MiB, more than "
                          f"working_memory={budget / 2**20:g} MiB; computing one pair at a "
                          "time (raise working_memory or use a flatten read-out without "
                          "pooling, whose state is linear in the pixels).", RuntimeWarning,
                          stacklevel=4)
        if engine in ("numpy", "cupy"):  # one tile at a time (on the device for CuPy)
            return max(1, min(total, int(budget // per_pair))), 1
        workers = max(1, min(n_workers(), int(budget // per_pair)))
        return max(1, min(_MAX_TILE, -(-total // (4 * workers)))), workers

    def _map(self, engine, total, pairs_of, job):
        """``job(ii, jj)`` over the tiles of ``total`` pairs (in parallel on Numba)."""
        tile, workers = self._tiling(engine, total)
        n_tiles = -(-total // tile)

        def run(t0, t1):
            for t in range(t0, t1):
                job(*pairs_of(t * tile, min(total, (t + 1) * tile)))

        if workers == 1:
            run(0, n_tiles)
        else:  # at most `workers` blocks of tiles at once
            map_row_blocks(run, n_tiles, -(-n_tiles // workers) if workers < n_workers()
                           else 1)

    def selves(self, engine, A):
        """``k(a, a)`` for every image and the variance trajectories ``(n, traj_len)``."""
        n = A.shape[0]
        Q, vals = np.empty((n, self.traj_len)), np.empty(n)

        def job(ii, _):
            vals[ii] = self._run(engine, A, A, Q, Q, ii, ii, True)

        self._map(engine, n, lambda f0, f1: (np.arange(f0, f1), None), job)
        return vals, Q

    def matrix(self, engine, A, B):
        """``k(A, B)`` (``B`` None: ``k(A, A)``, its lower triangle mirrored)."""
        dA, QA = self.selves(engine, A)
        tri = B is None
        if tri:
            B, QB = A, QA
        else:
            QB = self.selves(engine, B)[1]
        n, m = A.shape[0], B.shape[0]
        out = np.empty((n, m))
        total = n * (n - 1) // 2 if tri else n * m

        def job(ii, jj):
            vals = self._run(engine, A, B, QA, QB, ii, jj, False)
            out[ii, jj] = vals
            if tri:
                out[jj, ii] = vals

        self._map(engine, total, lambda f0, f1: _flat_pairs(f0, f1, m, tri), job)
        if tri:  # self pairs from the self runs: equal to diag() exactly
            out[np.arange(n), np.arange(n)] = dA
        return out


def _flat_pairs(f0, f1, m, tri):
    """Pairs ``f0:f1`` of the row-major ``n x m`` grid, or of the strict lower triangle."""
    f = np.arange(f0, f1, dtype=np.int64)
    if not tri:
        return f // m, f % m
    i = ((1.0 + np.sqrt(1.0 + 8.0 * f)) // 2).astype(np.int64)
    i -= i * (i - 1) // 2 > f  # correct the float root by one either way
    i += (i + 1) * i // 2 <= f
    return i, f - i * (i - 1) // 2


class _ConvKernel(Kernel):
    _output = None

    def __init__(self, layers=(("conv", 3), "relu", "gap"), image_shape=None, padding="same",
                 w_std=1.0, b_std=None):
        self.layers = layers
        self.image_shape = image_shape
        self.padding = padding
        self.w_std = w_std
        self.b_std = b_std

    def _plan(self, n_features, image_shape=None):
        shape = self.image_shape if image_shape is None else image_shape
        if shape is None:
            raise ValueError(f"image_shape=(H, W, C) is needed for flattened images (X has "
                             f"{n_features} features); or pass X as an (n, H, W, C) array "
                             "to the kernel itself.")
        if self.image_shape is not None and image_shape is not None \
                and check_image_shape(self.image_shape) != tuple(image_shape):
            raise ValueError(f"image_shape={tuple(self.image_shape)} but X holds images of "
                             f"shape {tuple(image_shape)}.")
        return _ConvPlan(self, check_image_shape(shape, n_features))

    def spec(self, n_features):
        """Validate the parameters for ``n_features`` inputs; returns None.

        These kernels evaluate themselves (no engine-level
        :class:`~kernelkit.backend.KernelSpec`): a :class:`~kernelkit.kernels.KernelOperator`
        calls them on host blocks.

        Parameters
        ----------
        n_features : int
            Columns of the flattened images, ``H * W * C``.

        Returns
        -------
        None
            Nothing: a valid kernel needs no engine-level description.

        Raises
        ------
        ValueError
            If a parameter is invalid or ``image_shape`` does not match ``n_features``.
        """
        self._plan(int(n_features))

    def _images(self, X, name):
        """``X`` validated as 2-D (4-D input flattened) and its image shape (None for
        2-D input)."""
        shape = None
        X = np.asarray(X.get()) if is_cupy_array(X) else X
        if np.ndim(X) == 4:
            X = np.asarray(X)
            shape = X.shape[1:]
            X = X.reshape(X.shape[0], -1)
        X = check_input(X, name)
        return X, shape

    def _evaluate(self, X, Y):
        """Host float64 ``k(X, Y)`` and the output dtype."""
        engine = get_backend(None, X).name  # CuPy for device input (or backend="cupy")
        X, sx = self._images(X, "X")
        if Y is not None:
            Y, sy = self._images(Y, "Y")
            if X.shape[1] != Y.shape[1] or (sx and sy and sx != sy):
                raise ValueError(f"Y has {Y.shape[1]} features (images {sy}) but X has "
                                 f"{X.shape[1]} (images {sx}); they must be the same.")
            sx = sx or sy
        plan = self._plan(X.shape[1], sx)
        dtype = np.float32 if X.dtype == np.float32 and (Y is None or Y.dtype == np.float32) \
            else np.float64
        A = np.ascontiguousarray(X, dtype=np.float64).reshape((-1,) + plan.image_shape)
        B = None if Y is None else np.ascontiguousarray(Y, dtype=np.float64).reshape(
            (-1,) + plan.image_shape)
        return plan, engine, A, B, dtype

    def __call__(self, X, Y=None, eval_gradient=False, same=False):
        """Kernel matrix ``k(X, Y)``.

        Parameters
        ----------
        X : array-like of shape (n_X, H * W * C) or (n_X, H, W, C)
            Images, flattened row-major with channels last (then ``image_shape`` is
            needed), or as an array of images.
        Y : array-like of the same layout, default=None
            None means ``Y = X`` (computed as a lower triangle: exactly symmetric).
        eval_gradient : bool, default=False
            For the GP interface: these kernels have no free hyperparameters, so the
            gradient is an empty ``(n_X, n_X, 0)`` array. Only with ``Y=None``.
        same : bool, default=False
            Whether ``Y`` is ``X`` (the blockwise evaluators pass it); then ``Y`` is
            ignored.

        Returns
        -------
        K : ndarray of shape (n_X, n_Y)
            The kernel matrix: float32 for float32 inputs, else float64; NumPy, or CuPy
            for CuPy input (computed on the device, tile by tile).
        K_gradient : ndarray of shape (n_X, n_X, 0)
            Only when ``eval_gradient`` is True.

        Raises
        ------
        ValueError
            On NaN/inf, empty input, an invalid parameter (named), images that do not
            match ``image_shape``, or values that overflow (rescale X).
        """
        X_in, Y_in = X, (None if same else Y)
        if eval_gradient and Y_in is not None:
            raise ValueError("eval_gradient=True requires Y=None (as in scikit-learn GP kernels).")
        plan, engine, A, B, dtype = self._evaluate(X, Y_in)
        K = _finite(plan.matrix(engine, A, B), self).astype(dtype, copy=False)
        K = follow_input(K, *(a for a in (X_in, Y_in) if a is not None))
        return (K, np.empty((A.shape[0], A.shape[0], 0))) if eval_gradient else K

    def diag(self, X):
        """The diagonal ``k(x_i, x_i)`` in O(n) pair evaluations.

        Parameters
        ----------
        X : array-like of shape (n_samples, H * W * C) or (n_samples, H, W, C)
            Images, as for :meth:`__call__`.

        Returns
        -------
        K_diag : ndarray of shape (n_samples,)
            ``k(x_i, x_i)``, float64, equal to the diagonal of ``k(X)``.
        """
        plan, engine, A, _, _ = self._evaluate(X, None)
        return follow_input(_finite(plan.selves(engine, A)[0], self), X)


def _finite(K, kernel):
    if not np.all(np.isfinite(K)):
        raise ValueError(f"the kernel {kernel!r} produced NaN or infinite values on these "
                         "inputs (the pixel products overflow); rescale X.")
    return K


_DOC = """{title}

The network is the ``layers`` list followed by a dense read-out
``Dense(w_std, b_std)``, in the NTK parameterization of neural-tangents' ``stax``
(``parameterization="ntk"``): every convolution has weight variance
``w_std^2 / (C f^2)`` for ``C`` input channels and an ``f x f`` filter, stride 1 and
bias variance ``b_std^2``. The input covariance of pixels ``i`` of ``x`` and ``j``
of ``y`` is ``x_i . y_j / C``. Per layer, with ``K`` the covariance of every pixel
pair and ``Theta`` the tangent kernel: a convolution maps ``K`` to
``w_std^2 mean_o K[i + o, j + o] + b_std^2`` (mean over the ``f^2`` filter offsets
``o``, zero outside the map) and ``Theta`` to ``K_new + w_std^2 mean_o Theta[i + o,
j + o]``; an activation maps ``K`` to ``E[phi(u) phi(v)]`` and multiplies ``Theta``
by ``E[phi'(u) phi'(v)]`` (the closed forms of :class:`~kernelkit.kernels.NTK`); an
average pool averages both over the windows of ``i`` and ``j``. The read-out
averages ``K`` and ``Theta`` over equal positions (``"flatten"``) or over all pixel
pairs (``"gap"``); the dense layer gives ``w_std^2 K + b_std^2`` and, for the NTK,
``Theta`` plus ``w_std^2`` times the averaged ``Theta``.

Cost per image pair: a flatten read-out without pooling carries only the ``P``
pixel pairs at equal positions (``P = H W``): ``O(L f^2 P)`` operations and
``4 P`` floats of state; a global-average pool or any average pooling carries all
``P^2`` pixel pairs: ``O(L f^2 P^2)`` operations and ``4 P^2`` floats (Numba) per
running pair. Pairs are computed in tiles sized by ``working_memory``
(:func:`kernelkit.set_config`), in parallel on the Numba engine; the CuPy engine
runs the NumPy reference program on device tiles of the same size (not yet run on a
GPU). Internal arithmetic is float64.

References: Novak et al., "Bayesian deep convolutional networks with many channels
are Gaussian processes", ICLR 2019 (CNN-GP); Arora et al., "On exact computation
with an infinitely wide neural net", NeurIPS 2019 (CNTK); Shankar et al., "Neural
kernels without tangents", ICML 2020 (Myrtle, :func:`myrtle_layers`).

Parameters
----------
layers : list or str, default=(("conv", 3), "relu", "gap")
    The network before the dense read-out, one entry per layer:
    ``("conv", f)`` or ``("conv", f, padding)`` (an ``f x f`` convolution, stride 1),
    ``"relu"``, ``"erf"``, ``("avgpool", s)`` (``s x s`` windows, stride ``s``,
    no padding), and last exactly one read-out, ``"flatten"`` or ``"gap"``.
    ``"myrtle5"``, ``"myrtle7"``, ``"myrtle10"`` name :func:`myrtle_layers`.
image_shape : tuple (H, W, C) or None, default=None
    Shape of one image. Needed when images come flattened as ``(n, H * W * C)``
    rows (row-major, channels last: ``X.reshape(n, H, W, C)`` gives the images), as
    the estimators pass them; None takes it from ``(n, H, W, C)`` input.
padding : {{"same", "valid"}}, default="same"
    Padding of the convolutions that do not name theirs ("same": zero padding,
    output of the input's size, the extra row of an even filter after, as XLA).
w_std : float > 0, default=1.0
    Weight standard deviation of every convolution and of the read-out (Myrtle:
    ``sqrt(2)``).
b_std : float >= 0 or None, default=None
    Bias standard deviation; None means no bias.

Raises
------
ValueError
    When called (or resolved by an estimator): an unknown layer, a read-out that
    is missing or not last, a "valid" filter larger than its map, a pooling window
    that does not divide its map, ``image_shape`` missing or not matching the
    number of features, non-positive ``w_std`` or negative ``b_std``.

Notes
-----
With filter size 1 the convolutions act on each pixel's channel vector alone: the
flatten kernel is the mean over pixels of :class:`~kernelkit.kernels.{fc}` of the
pixels' channel vectors, and on images of one pixel (``image_shape=(1, 1, d)``)
exactly :class:`~kernelkit.kernels.{fc}` on the ``d`` features. Nearly parallel
pixel pairs carry the ``sqrt(eps)`` rounding of the arc-cosine angle (values to
about ``1e-8`` relative, as neural-tangents); equal images give exact self pairs.
``w_std`` and ``b_std`` are not GP hyperparameters here (no gradient is provided).
A rejected call changes nothing: the kernel holds no state.

Examples
--------
>>> import numpy as np
>>> from kernelkit.kernels import {name}
>>> X = np.random.default_rng(0).standard_normal((5, 8 * 8 * 3))
>>> k = {name}(layers=[("conv", 3), "relu", ("avgpool", 2), ("conv", 3), "relu", "gap"],
...        image_shape=(8, 8, 3))
>>> k(X).shape
(5, 5)
"""


class ConvNTK(_ConvKernel):
    _output = "ntk"


class ConvNNGP(_ConvKernel):
    _output = "nngp"


ConvNTK.__doc__ = _DOC.format(name="ConvNTK", fc="NTK",
                              title="Convolutional neural tangent kernel (CNTK) of an "
                                    "infinitely wide convolutional network.")
ConvNNGP.__doc__ = _DOC.format(name="ConvNNGP", fc="NNGP",
                               title="Convolutional NNGP kernel (CNN-GP): the covariance of "
                                     "the Gaussian process an infinitely wide random "
                                     "convolutional network converges to.")
