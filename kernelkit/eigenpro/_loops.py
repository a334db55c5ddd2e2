"""Array reference of the EigenPro step's one pass over held kernel rows.

An EigenPro 3 / 4 step (and each batch of the projection's inner EigenPro 2 solve)
reads the kernel rows of its batch twice: once for the predictions, once for the
gradient on all centers. When those rows are held in memory (``k(X, Z)`` or
``k(Z, Z)`` cached for the fit), :func:`residual_gradient` does both from the held
matrix and the batch's row indices. Here with array operations (NumPy or CuPy: the
rows are gathered, then two products); the Numba engine runs the compiled twin
(:mod:`kernelkit.eigenpro._loops_numba`), which reads each row once, straight from
the held matrix, and does both products while the row is in cache. This module is
its oracle in the tests.
"""


def residual_gradient(M, idx, W, F0, Y, wrow):
    """Residuals of a batch and their gradient on all columns, from held rows.

    Parameters
    ----------
    M : array of shape (N, p)
        Held kernel rows (``k(X, Z)`` or ``k(Z, Z)``), compute dtype.
    idx : integer array of shape (b,)
        The batch's rows of ``M``.
    W : array of shape (p, k)
        Coefficients on the ``p`` columns.
    F0 : array of shape (b, k) or None
        Further predictions added to ``M[idx] @ W`` (e.g. the auxiliary centers').
    Y : array of shape (b, k)
        Targets.
    wrow : array of shape (b,) or None
        Per-row factors of the residuals in the gradient (weights over the batch
        size); None: 1.

    Returns
    -------
    R : array of shape (b, k), dtype of ``M``
        ``M[idx] @ W + F0 - Y``.
    G : array of shape (p, k), dtype of ``M``
        ``M[idx].T @ (wrow * R)``.
    """
    Mb = M[idx]
    R = Mb @ W
    if F0 is not None:
        R = R + F0
    R = R - Y
    Rw = R if wrow is None else R * wrow[:, None]
    return R, Mb.T @ Rw
