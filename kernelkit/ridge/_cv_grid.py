"""The kernel side of the CV estimators: ``param_grid`` candidates and their kernel matrices.

A candidate is a dict of kernel parameters. It is spelled for :class:`KernelRidge` as that
estimator spells kernels (``gamma`` / ``degree`` / ``coef0`` as arguments, the rest in
``kernel_params``; a Kernel object gets them set on a clone), so the refit is exactly
``KernelRidge`` at the selected parameters. Stationary kernels (rbf, laplacian, matern)
share one distance matrix over the whole grid.
"""

import inspect
from collections.abc import Mapping, Sequence

import numpy as np
import scipy.sparse as sp
from scipy.spatial.distance import cdist
from sklearn.base import clone
from sklearn.model_selection import ParameterGrid

from ..backend._array import STATIONARY_CODES, stationary_from_sqdist
from ..kernels import KERNELS, Kernel, is_precomputed, make_kernel
from ..kernels._library import RBF, Laplacian, Matern
from ..kernels._resolve import KernelOperator

_ESTIMATOR_LEVEL = ("gamma", "degree", "coef0")  # KernelRidge arguments, not kernel_params


def _allowed_names(kernel):
    """Parameter names a ``param_grid`` may vary for this ``kernel``; None: any name."""
    if isinstance(kernel, Kernel):
        return set(kernel.get_params(deep=True))
    if isinstance(kernel, str):
        if kernel in KERNELS:
            return set(KERNELS[kernel]().get_params())
        from sklearn.metrics.pairwise import KERNEL_PARAMS

        return set(KERNEL_PARAMS.get(kernel, ()))
    try:  # a callable gets the grid's values as keyword arguments
        sig = inspect.signature(kernel)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params[2:] if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def check_param_grid(param_grid, kernel):
    """Validated list of candidate dicts (``[{}]`` when there is no grid).

    Raises
    ------
    ValueError
        A grid that is not a dict (or list of dicts) of non-empty value lists, a key the
        kernel does not have, ``alpha`` as a key, or any grid with ``kernel="precomputed"``.
    TypeError
        A grid value that is not a list or array.
    """
    if param_grid is None:
        return [{}]
    grids = [param_grid] if isinstance(param_grid, Mapping) else param_grid
    if (isinstance(grids, (str, bytes)) or not isinstance(grids, Sequence) or not grids
            or not all(isinstance(g, Mapping) for g in grids)):
        raise ValueError(f"param_grid must be a dict of kernel parameter names to lists of "
                         f"values, or a non-empty list of such dicts; got {param_grid!r}.")
    if any(grids) and is_precomputed(kernel):
        raise ValueError("param_grid cannot apply with kernel='precomputed': the kernel matrix "
                         "is given, it has no parameters to search. Pass param_grid=None.")
    allowed = None if is_precomputed(kernel) else _allowed_names(kernel)
    for grid in grids:
        for key in grid:
            if key == "alpha":
                raise ValueError("param_grid must not contain 'alpha': the ridge penalties go "
                                 "in alphas.")
            if allowed is not None and key not in allowed:
                raise ValueError(f"param_grid key {key!r} is not a parameter of kernel "
                                 f"{kernel!r} (it takes {sorted(allowed)}).")
    try:
        return list(ParameterGrid(list(grids)))
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"param_grid: {exc}") from None


def ridge_params(est, candidate):
    """``KernelRidge`` keyword arguments for ``candidate`` on top of ``est``'s kernel."""
    out = {"kernel": est.kernel, "gamma": est.gamma, "degree": est.degree,
           "coef0": est.coef0, "kernel_params": est.kernel_params}
    if not candidate:
        return out
    if isinstance(est.kernel, Kernel):
        out["kernel"] = clone(est.kernel, safe=False).set_params(**candidate)
        return out
    named = isinstance(est.kernel, str)
    extra = dict(est.kernel_params or {})
    for key, value in candidate.items():
        if named and key in _ESTIMATOR_LEVEL:
            out[key] = value
            extra.pop(key, None)  # kernel_params would override the argument in make_kernel
        else:
            extra[key] = value
    out["kernel_params"] = extra
    return out


class KernelGrid:
    """Host float64 kernel matrices of the candidates on ``X``.

    Kernels of exactly :class:`RBF`, :class:`Matern` or :class:`Laplacian` type are
    evaluated from one squared-Euclidean (or L1) distance matrix computed pair by pair
    (no ``|x|^2 + |y|^2 - 2 x.y`` cancellation), shared by the whole grid; the others by
    the kernel's engine (:class:`KernelOperator`), once per candidate.
    """

    def __init__(self, X, backend):
        self.X = X
        self.backend = backend
        self._dist = {}

    def _distances(self, metric):
        if metric not in self._dist:
            self._dist[metric] = cdist(self.X, self.X, metric)
        return self._dist[metric]

    def matrix(self, kwargs):
        """``k(X, X)`` for ``KernelRidge`` keyword arguments ``kwargs``."""
        X, sparse = self.X, sp.issparse(self.X)
        kernel = make_kernel(kwargs["kernel"], kwargs["gamma"], kwargs["degree"],
                             kwargs["coef0"], kwargs["kernel_params"], sparse=sparse)
        kind = type(kernel)
        if not sparse and kind in (RBF, Matern, Laplacian):
            spec = kernel.spec(X.shape[1])  # validates the values (gamma > 0, nu)
            gamma = spec.params[0]
            if kind is Laplacian:
                return np.exp(-gamma * self._distances("cityblock"))
            code = STATIONARY_CODES[(spec.name, None if kind is RBF else spec.params[1])]
            return stationary_from_sqdist(np, code, self._distances("sqeuclidean"), gamma)
        return KernelOperator(kernel, X.shape[1], self.backend).block_host(X)

    def diag(self, kwargs):
        """``k(x_i, x_i)`` on ``X`` (host float64), for the scale of ``alphas="auto"`` where
        no kernel matrix is formed: sparse ``X`` only reaches here on the linear kernel's
        primal path (squared row norms); dense ``X`` through the kernel's engine."""
        if sp.issparse(self.X):
            return np.asarray(self.X.multiply(self.X).sum(axis=1), dtype=np.float64).ravel()
        return self.operator(kwargs).diag(self.X)

    def operator(self, kwargs):
        """The :class:`KernelOperator` of ``KernelRidge`` keyword arguments ``kwargs``."""
        kernel = make_kernel(kwargs["kernel"], kwargs["gamma"], kwargs["degree"],
                             kwargs["coef0"], kwargs["kernel_params"])
        return KernelOperator(kernel, self.X.shape[1], self.backend)

    def cross(self, kwargs, Z):
        """``(cross, K_ZZ)``: ``cross(rows)`` is ``k(X[rows], Z)`` (``rows`` a slice or
        indices) on the engine (as FALKON evaluates it), ``K_ZZ = k(Z, Z)``, host float64."""
        op = self.operator(kwargs)
        X = self.X
        return (lambda rows: op.block_host(X[rows], Z)), op.block_host(Z)
