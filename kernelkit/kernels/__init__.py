"""Kernel functions: classical kernels and the infinite-width NTK/NNGP.

Every kernel is a callable ``k(X, Y=None)`` and a scikit-learn GP kernel; see
:class:`Kernel`. Estimators also accept the names of :data:`KERNELS`.
"""

from ._base import Kernel, _CallableKernel
from ._library import RBF, Cosine, Laplacian, Linear, Matern, Polynomial
from ._neural import NNGP, NTK

__all__ = ["Kernel", "RBF", "Laplacian", "Matern", "Polynomial", "Linear", "Cosine", "NTK",
           "NNGP", "KERNELS", "make_kernel"]

KERNELS = {"rbf": RBF, "gaussian": RBF, "laplacian": Laplacian, "matern": Matern,
           "polynomial": Polynomial, "poly": Polynomial, "linear": Linear, "cosine": Cosine,
           "ntk": NTK, "nngp": NNGP}
_SKLEARN_STYLE = {"gamma", "degree", "coef0"}


def make_kernel(kernel, gamma=None, degree=3, coef0=1, kernel_params=None):
    """Turn an estimator's kernel parameters into something evaluable.

    Parameters
    ----------
    kernel : str, Kernel or callable
        A name in :data:`KERNELS`, a :class:`Kernel`, or a callable
        ``f(X, Y, **kernel_params) -> (n_X, n_Y) array`` (including scikit-learn
        GP kernels). ``"precomputed"`` is handled by the estimators, not here.
    gamma, degree, coef0 : float
        Used by the named kernels that take them (as scikit-learn's ``KernelRidge``).
    kernel_params : dict, default=None
        Further keyword arguments of the named kernel (e.g. ``nu``, ``depth``) or
        of the callable.

    Returns
    -------
    kernel : Kernel or _CallableKernel

    Raises
    ------
    ValueError
        If ``kernel`` is an unknown name or ``kernel_params`` do not fit it.
    """
    params = dict(kernel_params or {})
    if isinstance(kernel, Kernel):
        if params:
            return kernel.clone_with_theta(kernel.theta).set_params(**params)
        return kernel
    if isinstance(kernel, str):
        if kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {sorted(KERNELS)}, 'precomputed', a "
                             f"kernelkit Kernel or a callable, got {kernel!r}.")
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
