"""Sequential loops of the random feature maps: the NumPy reference.

:func:`fwht` is the fast Walsh-Hadamard transform behind the structured (SORF) map; its
compiled twin with the same signature is :mod:`kernelkit.random_features._loops_numba`
(picked by :func:`kernelkit.utils._dispatch.select_loops`), tested against this one.
"""


def fwht(a):
    """Unnormalised Walsh-Hadamard transform of every row of ``a``, in place.

    Parameters
    ----------
    a : ndarray of shape (n, m), float64, C-contiguous
        ``m`` a power of two. Overwritten by ``a @ H_m`` (``H_m`` the Sylvester Hadamard
        matrix with entries +-1, symmetric), at ``O(n m log m)`` cost.

    Returns
    -------
    a : ndarray
        The same array.
    """
    n, m = a.shape
    h = 1
    while h < m:
        v = a.reshape(n, m // (2 * h), 2, h)  # a view: pairs (x, y) at distance h
        x = v[:, :, 0, :].copy()
        v[:, :, 0, :] += v[:, :, 1, :]
        v[:, :, 1, :] *= -1.0
        v[:, :, 1, :] += x
        h *= 2
    return a
