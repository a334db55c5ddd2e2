"""Sequential loops of the random feature maps: the NumPy reference.

:func:`fwht` is the fast Walsh-Hadamard transform behind the structured (SORF) map and
:func:`sorf_features` the whole structured map (transforms, scaling, cos/sin); their
compiled twins with the same signatures are :mod:`kernelkit.random_features._loops_numba`
(picked by :func:`kernelkit.utils._dispatch.select_loops`), tested against these.
"""

import math

import numpy as np


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


def sorf_features(X, signs, radii, offset, out):
    """Structured (SORF) Fourier features of the rows of ``X``, written into ``out``.

    Parameters
    ----------
    X : ndarray of shape (n, d), float64
    signs : ndarray of shape (n_blocks, 3, p)
        ``D1, D2, D3`` of each block; ``p >= d`` a power of two.
    radii : ndarray of shape (m,)
        Frequency norms, ``m <= n_blocks * p``.
    offset : ndarray of shape (m,) or (0,)
        Phases of the random-phase map ``sqrt(2 / m) cos(w.x + b)``; empty for the
        paired map ``[cos(w.x), sin(w.x)] / sqrt(m)``.
    out : ndarray of shape (n, 2 m) (paired) or (n, m), float64 or float32
        Overwritten.

    Returns
    -------
    out : ndarray
    """
    n_blocks, _, pad = signs.shape
    m = radii.shape[0]
    P = np.zeros((X.shape[0], pad))
    P[:, : X.shape[1]] = X
    proj = np.empty((X.shape[0], n_blocks * pad))
    for k in range(n_blocks):
        Y = P * signs[k, 2]  # x -> H D1 H D2 H D3 x, one transform per H
        fwht(Y)
        Y *= signs[k, 1]
        fwht(Y)
        Y *= signs[k, 0]
        proj[:, k * pad:(k + 1) * pad] = fwht(Y)
    proj = proj[:, :m]
    proj *= radii / pad**1.5  # three unnormalised transforms: H = H_p / sqrt(p)
    if offset.shape[0] == 0:
        np.cos(proj, out=out[:, :m], casting="same_kind")
        np.sin(proj, out=out[:, m:], casting="same_kind")
        out *= 1.0 / math.sqrt(m)
    else:
        proj += offset
        np.cos(proj, out=out, casting="same_kind")
        out *= math.sqrt(2.0 / m)
    return out
