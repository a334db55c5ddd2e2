"""The one kernel resolver: estimator parameters -> a kernel evaluated on an engine.

Every estimator turns its ``kernel``, ``gamma``, ``degree``, ``coef0`` and
``kernel_params`` into a :class:`KernelOperator` through :func:`resolve_kernel`, so
that the error messages, the finiteness check of produced kernel values and the
blockwise fallback for host callables exist once.
"""

import math
from collections.abc import Mapping
from numbers import Real

import numpy as np

from .._config import get_config
from ..backend import get_backend
from ._base import Kernel, _CallableKernel, _host, _PairwiseKernel, checked_values

__all__ = ["KernelOperator", "resolve_kernel", "is_precomputed", "make_kernel"]


def is_precomputed(kernel):
    """Whether an estimator's ``kernel`` parameter is ``"precomputed"``."""
    return isinstance(kernel, str) and kernel == "precomputed"


def _budget_bytes():
    return float(get_config()["working_memory"]) * 2**20


class KernelOperator:
    """A resolved kernel on one engine: blocks, fused products and the diagonal.

    Picklable (it holds the engine *name*), so joblib and dask workers can evaluate
    blocks. Kernelkit kernels are computed by the engine; host callables (user
    functions, scikit-learn kernels) on the host in row blocks of ``working_memory``.
    Every value produced is checked once for finiteness: a kernel that yields NaN or
    inf raises a ``ValueError`` naming the kernel and its parameters.

    Parameters
    ----------
    kernel : Kernel or callable
        As returned by :func:`make_kernel`.
    n_features : int
        Number of input features.
    backend : {"numpy", "numba", "cupy"}
        Resolved engine name (host callables always compute with ``"numpy"``).
    """

    def __init__(self, kernel, n_features, backend):
        self.kernel = kernel
        self.n_features = int(n_features)
        if isinstance(kernel, Kernel):
            self.spec = kernel.spec(self.n_features)
            self.backend = backend
        else:
            self.spec = None
            self.backend = "numpy"

    @property
    def engine(self):
        """The engine object (looked up by name, never stored)."""
        return get_backend(self.backend)

    @property
    def xp(self):
        """The engine's array namespace."""
        return self.engine.xp

    def _checked(self, K):
        return checked_values(K, self.kernel, self.engine)

    def block(self, X, Y=None, dtype=None):
        """``k(X, Y)`` as an engine array (``Y`` None: ``k(X, X)``, exactly symmetric).

        ``dtype`` None keeps the engine's choice (float32 for float32 inputs); a
        kernelkit kernel with ``dtype`` float32 is computed in float64 from the inputs as
        given and rounded once (no float64 ``n x m`` temporary).
        """
        if self.spec is not None:
            eng = self.engine
            K = eng.pairwise(self.spec, eng.asarray(X), None if Y is None else eng.asarray(Y),
                             out_dtype=None if dtype is None else getattr(eng.xp, np.dtype(
                                 dtype).name))
        else:
            X = _host(X)
            K = self.kernel(X, X if Y is None else _host(Y), same=Y is None)
        K = self._checked(K)
        return K if dtype is None else K.astype(dtype, copy=False)

    def block_host(self, X, Y=None):
        """``k(X, Y)`` as a host float64 NumPy array."""
        return np.asarray(self.engine.to_host(self.block(X, Y)), dtype=np.float64)

    def columns(self, X):
        """``S -> k(X, X[S])`` as host float64 arrays, for many small index sets ``S``
        (what is prepared from ``X`` is kept between calls)."""
        if self.spec is None:
            return lambda S: self.block_host(X, X[S])
        eng = self.engine
        cols = eng.pairwise_columns(self.spec, eng.asarray(X))
        return lambda S: np.asarray(eng.to_host(self._checked(cols(S))), dtype=np.float64)

    def matmul(self, X, Y, W):
        """``k(X, Y) @ W`` in float64 without holding ``k(X, Y)`` (blockwise)."""
        if self.spec is not None:
            eng = self.engine
            out = eng.matmul(self.spec, eng.asarray(X), eng.asarray(Y), eng.asarray(W))
            return self._checked(out)
        X, Y = _host(X), _host(Y)
        W = np.asarray(W, np.float64)
        out = np.empty((X.shape[0],) + W.shape[1:])
        rows = max(1, int(_budget_bytes() // (8 * max(1, Y.shape[0]))))
        for r0 in range(0, X.shape[0], rows):
            out[r0:r0 + rows] = self.block(X[r0:r0 + rows], Y) @ W
        return out

    def diag(self, X):
        """``k(x_i, x_i)`` as a host float64 vector."""
        if self.spec is not None:
            eng = self.engine
            d = np.asarray(eng.to_host(eng.diag(self.spec, eng.asarray(X))), np.float64)
            return self._checked(d)
        X = _host(X)
        if isinstance(self.kernel, Kernel):  # evaluates itself (spec None): its own diag
            return self._checked(np.asarray(self.kernel.diag(X), np.float64))
        out = np.empty(X.shape[0])
        for r0 in range(0, X.shape[0], 256):
            out[r0:r0 + 256] = np.diagonal(self.block(X[r0:r0 + 256]))
        return out


_DENSE_ONLY = ("additive_chi2", "chi2")  # kernel_metrics() names scikit-learn computes densely


def _sklearn_kernel(kernel, gamma, degree, coef0, params):
    """A kernel name of scikit-learn's ``kernel_metrics()`` evaluated by scikit-learn, with
    the parameters that kernel takes (None ones left to scikit-learn's defaults)."""
    from sklearn.metrics.pairwise import KERNEL_PARAMS

    names = KERNEL_PARAMS[kernel]
    given = {"gamma": gamma, "degree": degree, "coef0": coef0}
    args = {k: v for k, v in given.items() if k in names and v is not None}
    unknown = set(params) - set(names)
    if unknown:
        raise ValueError(f"kernel_params {sorted(unknown)} are not parameters of kernel "
                         f"{kernel!r} (it takes {sorted(names)}).")
    args.update(params)
    for name, value in args.items():  # scikit-learn passes them on unchecked
        if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
            raise ValueError(f"{name} of kernel {kernel!r} must be a finite number, got "
                             f"{value!r}.")
    return _PairwiseKernel(kernel, args)


def make_kernel(kernel, gamma=None, degree=3, coef0=1, kernel_params=None, *, sparse=False):
    """Turn an estimator's kernel parameters into a kernel object.

    Parameters
    ----------
    kernel : str, Kernel or callable
        A name in :data:`kernelkit.kernels.KERNELS`, a :class:`Kernel`, or a callable
        ``f(X, Y, **kernel_params) -> (n_X, n_Y) array`` (including scikit-learn GP
        kernels). ``"precomputed"`` is handled by the estimators, not here.
    gamma, degree, coef0 : float
        Used by the named kernels that take them (as scikit-learn's ``KernelRidge``).
    kernel_params : dict, default=None
        Further keyword arguments of the named kernel (e.g. ``nu``, ``depth``) or
        of the callable.
    sparse : bool, default=False
        Whether the inputs are SciPy sparse matrices: a name of scikit-learn's
        :func:`~sklearn.metrics.pairwise.kernel_metrics` is then evaluated by
        scikit-learn, which accepts sparse input for all but ``chi2`` and
        ``additive_chi2``; those and other kernels raise a TypeError.

    Names of :func:`sklearn.metrics.pairwise.kernel_metrics` that kernelkit does not
    compute itself (``additive_chi2``, ``chi2``, ``sigmoid``) are evaluated by
    scikit-learn on the host, with the parameters scikit-learn gives them.

    Returns
    -------
    kernel : Kernel or callable

    Raises
    ------
    ValueError
        If ``kernel`` is an unknown name or ``kernel_params`` do not fit it.
    """
    from . import KERNELS

    if kernel_params is not None and not isinstance(kernel_params, Mapping):
        raise ValueError(f"kernel_params must be None or a dict of the kernel's parameters, "
                         f"got {kernel_params!r}.")
    params = dict(kernel_params or {})
    if isinstance(kernel, Kernel):
        if sparse:
            raise TypeError("a kernelkit Kernel object needs dense X; pass X.toarray().")
        if params:
            from sklearn.base import clone

            # clone, not clone_with_theta: exp(log(gamma)) is not always gamma
            return clone(kernel).set_params(**params)
        return kernel
    if isinstance(kernel, str):
        from sklearn.metrics.pairwise import kernel_metrics

        if sparse and kernel in _DENSE_ONLY:
            raise TypeError(f"kernel={kernel!r} needs dense X (scikit-learn's {kernel}_kernel "
                            "takes no sparse input); pass X.toarray().")
        if kernel in kernel_metrics() and (sparse or kernel not in KERNELS):
            return _sklearn_kernel(kernel, gamma, degree, coef0, params)
        if kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {sorted(set(KERNELS) | set(kernel_metrics()))}"
                             f", 'precomputed', a kernelkit Kernel or a callable, got {kernel!r}.")
        if sparse:
            raise TypeError(f"kernel={kernel!r} needs dense X; sparse X works with the kernels "
                            f"of scikit-learn's kernel_metrics() "
                            f"{sorted(set(kernel_metrics()) - set(_DENSE_ONLY))}, a "
                            "callable, or 'precomputed'. Pass X.toarray().")
        cls = KERNELS[kernel]
        names = set(cls().get_params())
        given = {"gamma": gamma, "degree": degree, "coef0": coef0}
        args = {k: v for k, v in given.items() if k in names}
        unknown = set(params) - names
        if unknown:
            raise ValueError(f"kernel_params {sorted(unknown)} are not parameters of kernel "
                             f"{kernel!r} (it takes {sorted(names)}).")
        args.update(params)
        return cls(**args)
    if callable(kernel):
        return _CallableKernel(kernel, params)
    raise ValueError(f"kernel must be a string, a kernelkit Kernel or a callable, got {kernel!r}.")


def resolve_kernel(kernel, gamma=None, degree=3, coef0=1, kernel_params=None, *, n_features,
                   backend, sparse=False):
    """The one resolver: an estimator's kernel parameters -> :class:`KernelOperator`.

    Parameters
    ----------
    kernel : str, Kernel or callable
        As :func:`make_kernel`; ``"precomputed"`` is rejected here (check
        :func:`is_precomputed` first: the kernel matrix is then the input itself).
    gamma, degree, coef0, kernel_params, sparse
        As :func:`make_kernel`.
    n_features : int
        Number of input features (validates parameters that depend on it).
    backend : {"numpy", "numba", "cupy"}
        Resolved engine name (:func:`kernelkit.backend.resolve_backend`).

    Returns
    -------
    operator : KernelOperator

    Raises
    ------
    ValueError
        For an unknown kernel name, parameters that do not fit the kernel, an invalid
        parameter value, or ``kernel="precomputed"``.
    """
    if is_precomputed(kernel):
        raise ValueError("kernel='precomputed' has no kernel to evaluate: pass the kernel "
                         "matrix as X.")
    return KernelOperator(make_kernel(kernel, gamma, degree, coef0, kernel_params, sparse=sparse),
                          n_features, backend)
