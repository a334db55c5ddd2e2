"""Kernel metrics: the maximum mean discrepancy (MMD) between two (weighted) samples."""

import math

import numpy as np

from .backend import resolve_backend
from .kernels import resolve_kernel
from .utils._validation import check_bool, check_pair, check_weights

__all__ = ["mmd"]


def mmd(X, Y, *, kernel="rbf", gamma=None, degree=3, coef0=1, kernel_params=None,
        weights_X=None, weights_Y=None, unbiased=False, squared=False, backend=None):
    """Maximum mean discrepancy between the (weighted) empirical distributions of X and Y.

    With ``P = sum_i a_i delta_{x_i}`` and ``Q = sum_j b_j delta_{y_j}`` (weights
    normalised to sum 1; equal weights by default),

    ``MMD^2(P, Q) = sum_ii' a_i a_i' k(x_i, x_i') - 2 sum_ij a_i b_j k(x_i, y_j)
    + sum_jj' b_j b_j' k(y_j, y_j')``

    (Gretton et al., "A Kernel Two-Sample Test", JMLR 13, 2012, eq. 5 for equal weights).
    The unbiased estimate drops the ``i = i'`` and ``j = j'`` terms and renormalises
    the remaining ones by ``1 - sum_i a_i^2`` (resp. ``b``): for equal weights it is the
    U-statistic of Gretton et al. (eq. 3). The three sums are kernel matrix-vector
    products computed blockwise by the engine, never holding more than
    ``working_memory`` (:func:`kernelkit.set_config`) of a kernel matrix.

    Parameters
    ----------
    X : array-like of shape (n_X, n_features)
        First sample.
    Y : array-like of shape (n_Y, n_features)
        Second sample.
    kernel : str, Kernel or callable, default="rbf"
        A kernel name (rbf, laplacian, matern, polynomial, linear, cosine, ntk, nngp), a
        :class:`kernelkit.kernels.Kernel`, or a callable ``f(A, B) -> (n_A, n_B)``.
    gamma : float, default=None
        Kernel scale for rbf, laplacian, matern and polynomial; None means ``1 / n_features``.
    degree : float, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1
        Constant term of the polynomial kernel.
    kernel_params : dict, default=None
        Further parameters of the named kernel or of the callable.
    weights_X : array-like of shape (n_X,), default=None
        Non-negative weights of the rows of ``X`` (normalised to sum 1); None: equal.
    weights_Y : array-like of shape (n_Y,), default=None
        Weights of the rows of ``Y``.
    unbiased : bool, default=False
        Return the unbiased estimate of ``MMD^2`` between the underlying distributions
        instead of the (biased) MMD between the two empirical distributions.
    squared : bool, default=False
        Return ``MMD^2``. Otherwise the square root; an unbiased ``MMD^2`` estimate may be
        negative, and its square root is then reported as 0 (use ``squared=True`` to see it).
    backend : {"auto", "numpy", "numba", "cupy"} or None, default=None
        Compute engine; None follows :func:`kernelkit.set_config`.

    Returns
    -------
    mmd : float
        ``MMD`` (or ``MMD^2`` when ``squared``), in the kernel's units (``sqrt(k)``).

    Raises
    ------
    ValueError
        On NaN/inf, empty or non-2-D samples, different feature counts, an unknown kernel
        or an invalid kernel parameter, invalid weights, ``unbiased=True`` with a
        sample whose weight sits on a single point, or a kernel that is not positive
        semi-definite on the samples (a negative ``MMD^2`` of the empirical
        distributions).
    TypeError
        If ``unbiased`` or ``squared`` is not a bool.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelkit.metrics import mmd
    >>> X = np.random.default_rng(0).standard_normal((500, 2))
    >>> round(mmd(X, X[:250], gamma=0.5), 3) < 0.1
    True
    """
    if isinstance(kernel, str) and kernel == "precomputed":
        raise ValueError("kernel='precomputed' is not supported by mmd: pass the samples X, Y "
                         "and the kernel that compares them.")
    if Y is None:
        raise ValueError("Y must be an array of samples, got None.")
    unbiased = check_bool(unbiased, "unbiased")
    squared = check_bool(squared, "squared")
    X, Y = check_pair(X, Y, "X", "Y")
    n, m = X.shape[0], Y.shape[0]
    a = check_weights(weights_X, n, "weights_X")
    b = check_weights(weights_Y, m, "weights_Y")
    a = np.full(n, 1.0 / n) if a is None else a
    b = np.full(m, 1.0 / m) if b is None else b
    op = resolve_kernel(kernel, gamma, degree, coef0, kernel_params, n_features=X.shape[1],
                        backend=resolve_backend(backend, X, Y))
    Xe, Ye = op.engine.asarray(X), op.engine.asarray(Y)

    def product(A, B, w):
        return np.asarray(op.engine.to_host(op.matmul(A, B, w)), dtype=np.float64)

    diag = op.diag

    xy = float(a @ product(Xe, Ye, b))  # first: an overflow names the sample that causes it
    xx = float(a @ product(Xe, Xe, a))
    yy = float(b @ product(Ye, Ye, b))
    # the biased MMD^2 is ||mu_P - mu_Q||^2 in the kernel's feature space: negative beyond
    # its rounding only where the kernel is not positive semi-definite
    if xx - 2.0 * xy + yy < -1e-9 * (abs(xx) + 2.0 * abs(xy) + abs(yy)):
        raise ValueError("the kernel is not positive semi-definite on these samples (their "
                         "MMD^2 is negative): check the kernel and its parameters.")
    if unbiased:
        for w, name in ((a, "X"), (b, "Y")):
            rest = 1.0 - float(w @ w)
            if not rest > 1e-12:
                raise ValueError(f"unbiased=True needs the weight of {name} spread over at least "
                                 "2 points (off-diagonal terms); it sits on a single point.")
        xx = (xx - float((a * a) @ diag(Xe))) / (1.0 - float(a @ a))
        yy = (yy - float((b * b) @ diag(Ye))) / (1.0 - float(b @ b))
    mmd2 = xx - 2.0 * xy + yy
    if squared:
        return float(mmd2)
    return math.sqrt(max(mmd2, 0.0))
