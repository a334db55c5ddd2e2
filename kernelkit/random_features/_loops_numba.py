"""Compiled twin of :mod:`kernelkit.random_features._loops` (Numba, same signatures)."""

import numba as nb


@nb.njit(cache=True, nogil=True)
def fwht(a):
    """Unnormalised Walsh-Hadamard transform of every row of ``a``, in place.

    See :func:`kernelkit.random_features._loops.fwht`: the same butterflies, one row at a
    time (the row stays in cache through its ``log2 m`` passes).
    """
    n, m = a.shape
    for r in range(n):
        h = 1
        while h < m:
            for s in range(0, m, 2 * h):
                for j in range(s, s + h):
                    x = a[r, j]
                    y = a[r, j + h]
                    a[r, j] = x + y
                    a[r, j + h] = x - y
            h *= 2
    return a
