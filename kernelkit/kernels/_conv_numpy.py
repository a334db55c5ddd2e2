"""NumPy reference of the convolutional NNGP / NTK recursion, on a tile of image pairs.

The state of a pair ``(x, y)`` is the covariance of the pre-activations of every
pixel of ``x`` with every pixel of ``y``: an ``(h, w, h, w)`` array (``full``), or
only its entries at equal positions, ``(h, w)``, when the network has no pooling
and ends with a flatten read-out (a stride-1 convolution maps the covariance of
pixels ``i, j`` to sums over ``i + o, j + o``: entries at equal positions only
depend on entries at equal positions). A tile is a stack of ``t`` pairs. The
Numba engine (:mod:`._conv_numba`) runs the same program pair by pair; the CuPy
engine runs this very program on device tiles (every call below takes its array
module from its input: NumPy or CuPy).
"""

import math

import numpy as np

from ..backend import is_cupy_array
from ._conv_arch import CONV, ERF, POOL, RELU


def _xp(a):
    """The array module of ``a``: CuPy for device arrays, else NumPy."""
    if is_cupy_array(a):
        import cupy

        return cupy
    return np


def relu_step(K, qa, qb):
    """Arc-cosine kernel of degree 1 (Cho & Saul 2009) and ``E[relu'(u) relu'(v)]``.

    ``p = 0`` (a pixel with zero variance) gives 0 and the factor 1/4 (angle pi/2),
    as neural-tangents.
    """
    xp = _xp(K)
    p = xp.sqrt(qa * qb)
    pos = p > 0
    c = xp.clip(xp.where(pos, K / xp.where(pos, p, 1.0), 0.0), -1.0, 1.0)
    th = xp.arccos(c)
    K_new = p * (xp.sqrt((1.0 - c) * (1.0 + c)) + (math.pi - th) * c) / (2 * math.pi)
    return K_new, (math.pi - th) / (2 * math.pi)


def erf_step(K, qa, qb):
    """``E[erf(u) erf(v)]`` (Williams 1997) and ``E[erf'(u) erf'(v)]``.

    The gap ``(1 + 2 q_a)(1 + 2 q_b) - 4 K^2`` is formed as
    ``a + b - 1 + 4 (p - K)(p + K)`` so that large variances do not cancel it.
    """
    xp = _xp(K)
    a, b = 1.0 + 2.0 * qa, 1.0 + 2.0 * qb
    p = xp.sqrt(qa * qb)
    gap = a + b - 1.0 + 4.0 * xp.maximum((p - K) * (p + K), 0.0)
    K_new = (2.0 / math.pi) * xp.arcsin(xp.clip(2.0 * K / xp.sqrt(a * b), -1.0, 1.0))
    return K_new, (4.0 / math.pi) / xp.sqrt(gap)


def _conv_sum(S, f, before, ho, wo, full):
    """Sum over the ``f x f`` filter offsets, zero outside the map, of a state stack."""
    t, h, w = S.shape[:3]
    after_h, after_w = ho + f - 1 - before - h, wo + f - 1 - before - w
    pad = ((0, 0), (before, after_h), (before, after_w))
    xp = _xp(S)
    Sp = xp.pad(S, pad + pad[1:] if full else pad)
    acc = xp.zeros((t, ho, wo, ho, wo) if full else (t, ho, wo))
    for u in range(f):
        for v in range(f):
            if full:
                acc += Sp[:, u:u + ho, v:v + wo, u:u + ho, v:v + wo]
            else:
                acc += Sp[:, u:u + ho, v:v + wo]
    return acc


def _pool(S, s):
    t, h, w, ho, wo = S.shape[0], S.shape[1], S.shape[2], S.shape[1] // s, S.shape[2] // s
    S = S.reshape(t, ho, s, wo, s, ho, s, wo, s)
    return S.mean(axis=(2, 4, 6, 8))


def _diag(S, full):
    """Entries at equal positions, ``(t, h * w)``."""
    t, h, w = S.shape[:3]
    if not full:
        return S.reshape(t, h * w)
    return _xp(S).diagonal(S.reshape(t, h * w, h * w), axis1=1, axis2=2)


def run_tile(program, readout, Xa, Xb, qa, qb, w2, b2, want_ntk, full, self_mode):
    """The recursion on a tile of pairs ``(Xa[k], Xb[k])``.

    Parameters
    ----------
    program, readout
        From :func:`._conv_arch.compile_layers`.
    Xa, Xb : ndarray of shape (t, H, W, C), float64
    qa, qb : ndarray of shape (t, traj_len)
        Variance trajectories of the two sides; with ``self_mode`` (``Xa is Xb``),
        ``qa`` is written instead, from the state's own entries at equal positions.
    w2, b2 : float
        ``w_std**2`` and ``b_std**2`` of every conv and of the dense read-out.
    want_ntk, full : bool

    Returns
    -------
    nngp, ntk : ndarrays of shape (t,) (``ntk`` None unless ``want_ntk``)
    """
    xp, C = _xp(Xa), Xa.shape[3]
    if full:
        K = xp.einsum("thwc,tijc->thwij", Xa, Xb) / C
    else:
        K = xp.einsum("thwc,thwc->thw", Xa, Xb) / C
    T = xp.zeros_like(K) if want_ntk else None
    t = K.shape[0]
    for code, size, before, h, w, ho, wo, off in program:
        if code == CONV:
            scale = w2 / (size * size)
            K = scale * _conv_sum(K, size, before, ho, wo, full) + b2
            if want_ntk:
                T = K + scale * _conv_sum(T, size, before, ho, wo, full)
        elif code == POOL:
            K = _pool(K, size)
            T = _pool(T, size) if want_ntk else None
        else:
            if self_mode:
                qa[:, off:off + h * w] = _diag(K, full)
            a = qa[:, off:off + h * w].reshape(t, h, w)
            b = (qa if self_mode else qb)[:, off:off + h * w].reshape(t, h, w)
            if full:
                a, b = a[:, :, :, None, None], b[:, None, None, :, :]
            K, factor = (relu_step if code == RELU else erf_step)(K, a, b)
            T = T * factor if want_ntk else None
    axes = tuple(range(1, K.ndim))
    if readout == 0 and full:  # flatten: mean over equal positions
        reduce = lambda S: _diag(S, True).mean(axis=1)  # noqa: E731
    else:  # gap (full), or flatten of the equal-position state
        reduce = lambda S: S.mean(axis=axes)  # noqa: E731
    nngp = w2 * reduce(K) + b2
    return nngp, (nngp + w2 * reduce(T)) if want_ntk else None


def run_pairs(A, B, QA, QB, ii, jj, prog, w2, b2, want_ntk, full, self_mode, device=None):
    """Values of the pairs ``(A[ii[k]], B[jj[k]])`` as one tile (the Numba twin's
    interface); with ``self_mode`` the trajectories of ``A[ii]`` are written into ``QA``.

    ``device``: a module with ``asarray`` / ``asnumpy`` (CuPy): the tile's inputs are
    copied to it, computed there, and the values copied back (host in, host out).
    """
    put = (lambda a: a) if device is None else device.asarray
    get = (lambda a: a) if device is None else device.asnumpy
    qa = put(QA[ii])
    nngp, ntk = run_tile(prog[0], prog[1], put(A[ii]), put(B[jj]), qa,
                         None if self_mode else put(QB[jj]), w2, b2, want_ntk, full,
                         self_mode)
    if self_mode:
        QA[ii] = get(qa)
    return get(ntk if want_ntk else nngp)
