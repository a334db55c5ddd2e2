"""NumPy reference of the sequential loops of the ridge-leverage-score samplers.

Two loops run on the host whatever the engine (the dictionaries are small):

* :func:`thin` — binomial thinning of the copies of dictionary points
  (SQUEAK's ``q_i ~ B(p_new / p_old, q_i)``), by inverse CDF from given uniforms
  so that every engine draws the same result from the same uniforms;
* :func:`ink_steps` — INK-ESTIMATE's per-point loop over a chunk of arriving
  points: add the point with ``p = 1`` and ``qbar`` copies, re-estimate every
  dictionary point's ridge leverage score from the sketch, shrink ``p`` and thin.

The Numba engine runs compiled versions of the same functions
(:mod:`kernelkit.leverage._loops_numba`); this module is their oracle.
"""

import numpy as np
from scipy.stats import binom

_MASK64 = (1 << 64) - 1
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_STEP = np.uint64(0xD1B54A32D192ED03)


def thin(q, ratio, u):
    """Binomial thinning ``B(ratio_i, q_i)`` by inverse CDF of the uniforms ``u``.

    Parameters
    ----------
    q : ndarray of shape (m,), int64
        Copies before thinning.
    ratio : ndarray of shape (m,), float64
        Survival probability of each copy; values >= 1 keep all copies, <= 0 none.
    u : ndarray of shape (m,), float64 in [0, 1)
        One uniform per entry.

    Returns
    -------
    q_new : ndarray of shape (m,), int64
        The smallest ``k`` with ``P(B(ratio_i, q_i) <= k) >= u_i``.
    """
    q = np.asarray(q, dtype=np.int64)
    r = np.clip(np.asarray(ratio, dtype=np.float64), 0.0, 1.0)
    out = binom.ppf(np.asarray(u, dtype=np.float64), q, r)
    out = np.where(np.isnan(out), 0, out)
    out = np.where(r >= 1.0, q, np.where(r <= 0.0, 0, out))
    return np.clip(out, 0, q).astype(np.int64)


def uniforms(seed, step, keys):
    """Counter-based uniforms in [0, 1): SplitMix64 of ``(seed, step, key)``.

    The draw for a dictionary point at a step depends only on the seed, the step
    and the point's global index, not on how the stream was cut into chunks.

    Parameters
    ----------
    seed : int
        64-bit seed.
    step : int
        Step (arrival time of the point being processed).
    keys : ndarray of int64
        Global indices of the dictionary points.

    Returns
    -------
    u : ndarray of float64, same shape as ``keys``
    """
    with np.errstate(over="ignore"):
        z = (np.uint64(seed & _MASK64) + np.uint64(step & _MASK64) * _GOLDEN
             + np.asarray(keys).astype(np.uint64) * _STEP)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def ink_steps(K, dict_local, p, q, m, keys, t0, gamma, eps, qbar, seed, arrival):
    """INK-ESTIMATE's per-point loop over one chunk of arriving points.

    Local indexing: ``K`` is the kernel matrix of the ``s`` local points, the first
    ``s - b`` of which hold the dictionary at the start of the chunk and the last
    ``b`` the arriving points, in order.

    Parameters
    ----------
    K : ndarray of shape (s, s), float64
        Kernel matrix of the local points.
    dict_local : ndarray of shape (s,), int64
        Local indices of the dictionary points in its first ``m`` entries (updated
        in place).
    p, q : ndarray of shape (s,)
        float64 probabilities ``p~`` and int64 copies of those points (in place).
    m : int
        Current dictionary size.
    keys : ndarray of shape (s,), int64
        Global index of each local point (keys of the uniforms).
    t0 : int
        Global step of the first arriving point.
    gamma, eps : float
        RLS regularisation and accuracy.
    qbar : int
        Copies given to an arriving point.
    seed : int
        Seed of :func:`uniforms`.
    arrival : ndarray of shape (b,), float64
        Receives each arriving point's RLS estimate at its own step.

    Returns
    -------
    m : int
        Dictionary size after the chunk.
    """
    s = K.shape[0]
    b = arrival.shape[0]
    for j in range(b):
        new = s - b + j
        dict_local[m], p[m], q[m] = new, 1.0, qbar
        m += 1
        sel = dict_local[:m]
        w = q[:m] / (qbar * p[:m])
        sw = np.sqrt(w)
        A = sw[:, None] * K[np.ix_(sel, sel)] * sw[None, :]
        A[np.diag_indices(m)] += gamma
        diag_inv = np.diag(np.linalg.inv(A))
        tau = np.maximum((1.0 - eps) * (1.0 - gamma * diag_inv) / w, 0.0)
        arrival[j] = tau[m - 1]
        p_new = np.minimum(tau, p[:m])
        u = uniforms(seed, t0 + j, keys[sel])
        q_new = thin(q[:m], p_new / p[:m], u)
        keep = q_new > 0
        k = int(keep.sum())
        dict_local[:k] = sel[keep]
        p[:k] = p_new[keep]
        q[:k] = q_new[keep]
        m = k
    return m
