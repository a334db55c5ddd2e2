"""Kernel functions: classical kernels, the infinite-width NTK/NNGP and their
convolutional versions (ConvNTK / ConvNNGP).

Every kernel is a callable ``k(X, Y=None)`` and a scikit-learn GP kernel; see
:class:`Kernel`. Estimators also accept the names of :data:`KERNELS`.
"""

from ._base import Kernel
from ._conv import ConvNNGP, ConvNTK
from ._conv_arch import myrtle_layers
from ._library import RBF, Cosine, Laplacian, Linear, Matern, Polynomial
from ._neural import NNGP, NTK
from ._resolve import KernelOperator, is_precomputed, make_kernel, resolve_kernel
from ._scale import check_kernel_scale  # for the estimators (not public)

__all__ = ["Kernel", "RBF", "Laplacian", "Matern", "Polynomial", "Linear", "Cosine", "NTK",
           "NNGP", "ConvNTK", "ConvNNGP", "myrtle_layers", "KERNELS", "make_kernel",
           "resolve_kernel", "KernelOperator", "is_precomputed"]

KERNELS = {"rbf": RBF, "gaussian": RBF, "laplacian": Laplacian, "matern": Matern,
           "polynomial": Polynomial, "poly": Polynomial, "linear": Linear, "cosine": Cosine,
           "ntk": NTK, "nngp": NNGP}
