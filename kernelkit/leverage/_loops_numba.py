"""Compiled sequential loops of the ridge-leverage-score samplers (Numba).

Same functions and signatures as the NumPy reference
:mod:`kernelkit.leverage._loops`, which is their oracle in the tests:
binomial thinning by inverse CDF (:func:`thin`), the counter-based uniforms
(:func:`uniforms`) and INK-ESTIMATE's per-point loop (:func:`ink_steps`), whose
per-step dictionary bookkeeping runs without Python overhead (the inverse of the
sketch's ``m x m`` system goes to LAPACK).
"""

import math

import numba as nb
import numpy as np

_TINY_TERM = 1e-18  # tail terms below this fraction of the running sum are dropped


@nb.njit(cache=True)
def _log_pmf(k, n, p):
    return (math.lgamma(n + 1.0) - math.lgamma(k + 1.0) - math.lgamma(n - k + 1.0)
            + k * math.log(p) + (n - k) * math.log1p(-p))


@nb.njit(cache=True)
def binom_ppf(u, n, p):
    """Smallest ``k`` with ``P(B(p, n) <= k) >= u``, summed outwards from the mode.

    Starting at the mode (whose probability never underflows) keeps the sums
    accurate for any ``n``; the lower tail is summed until its terms are negligible.
    """
    # written so that NaN p or u fall into a returning branch: every loop below is
    # bounded by n, and a NaN p would otherwise make the mode (and the walk) undefined
    if n <= 0 or not p > 0.0:
        return 0
    if not p < 1.0:
        return n
    if not u > 0.0:
        return 0
    if not u < 1.0:
        return n
    mode = int(math.floor((n + 1.0) * p))
    if mode > n:
        mode = n
    f_mode = math.exp(_log_pmf(mode, n, p))
    odds = p / (1.0 - p)
    # cdf(mode - 1): sum the pmf downwards from the mode
    low = 0.0
    f = f_mode
    k = mode
    while k > 0:
        f = f * k / ((n - k + 1.0) * odds)  # pmf(k - 1) from pmf(k)
        k -= 1
        low += f
        if f < _TINY_TERM * (low + f_mode):
            break
    if u > low:  # answer >= mode: walk up
        c = low
        f = f_mode
        k = mode
        while True:
            c += f
            if c >= u or k >= n:
                return k
            f = f * (n - k) / (k + 1.0) * odds
            k += 1
            if f == 0.0:
                return k
    # answer < mode: walk down, c = cdf(k) at the top of each iteration
    c = low
    f = f_mode
    k = mode
    while k > 0:
        f = f * k / ((n - k + 1.0) * odds)  # pmf(k - 1)
        k -= 1
        if c - f < u:  # cdf(k - 1) < u <= cdf(k)
            return k
        c -= f
    return 0


@nb.njit(cache=True)
def thin(q, ratio, u):
    """Binomial thinning ``B(ratio_i, q_i)`` by inverse CDF (see the reference)."""
    out = np.empty(q.shape[0], dtype=np.int64)
    for i in range(q.shape[0]):
        r = ratio[i]
        if r >= 1.0:
            out[i] = q[i]
        elif not r > 0.0:  # also NaN: no copy survives an undefined ratio
            out[i] = 0
        else:
            out[i] = binom_ppf(u[i], q[i], r)
    return out


@nb.njit(cache=True)
def _splitmix(seed, step, key):
    z = np.uint64(seed) + np.uint64(step) * np.uint64(0x9E3779B97F4A7C15) \
        + np.uint64(key) * np.uint64(0xD1B54A32D192ED03)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return np.float64(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@nb.njit(cache=True)
def _uniforms(seed, step, keys):
    out = np.empty(keys.shape[0])
    for i in range(keys.shape[0]):
        out[i] = _splitmix(seed, step, keys[i])
    return out


def uniforms(seed, step, keys):
    """Counter-based uniforms in [0, 1): SplitMix64 of ``(seed, step, key)``."""
    mask = (1 << 64) - 1
    return _uniforms(np.uint64(seed & mask), np.uint64(step & mask),
                     np.ascontiguousarray(keys, dtype=np.int64))


@nb.njit(cache=True)
def _ink_steps(K, dict_local, p, q, m, keys, t0, gamma, eps, qbar, seed, arrival):
    s = K.shape[0]
    b = arrival.shape[0]
    A = np.empty((s, s))
    tau = np.empty(s)
    sw = np.empty(s)
    for j in range(b):
        new = s - b + j
        dict_local[m] = new
        p[m] = 1.0
        q[m] = qbar
        m += 1
        for a in range(m):
            sw[a] = math.sqrt(q[a] / (qbar * p[a]))
        for a in range(m):
            ia = dict_local[a]
            for c in range(a + 1):
                v = sw[a] * K[ia, dict_local[c]] * sw[c]
                A[a, c] = v
                A[c, a] = v
            A[a, a] += gamma
        inv = np.linalg.inv(A[:m, :m])
        step = np.uint64(t0 + j)
        k = 0
        for a in range(m):
            w = q[a] / (qbar * p[a])
            t = (1.0 - eps) * (1.0 - gamma * inv[a, a]) / w
            if t < 0.0:
                t = 0.0
            tau[a] = t
        arrival[j] = tau[m - 1]
        for a in range(m):
            p_old = p[a]
            p_new = min(tau[a], p_old)
            r = p_new / p_old
            if r >= 1.0:
                qn = q[a]
            elif not r > 0.0:  # also NaN
                qn = 0
            else:
                qn = binom_ppf(_splitmix(seed, step, keys[dict_local[a]]), q[a], r)
            if qn > 0:
                dict_local[k] = dict_local[a]
                p[k] = p_new
                q[k] = qn
                k += 1
        m = k
    return m


def ink_steps(K, dict_local, p, q, m, keys, t0, gamma, eps, qbar, seed, arrival):
    """INK-ESTIMATE's per-point loop over one chunk (see the NumPy reference)."""
    mask = (1 << 64) - 1
    return int(_ink_steps(np.ascontiguousarray(K, dtype=np.float64), dict_local, p, q, int(m),
                          np.ascontiguousarray(keys, dtype=np.int64), int(t0), float(gamma),
                          float(eps), int(qbar), np.uint64(seed & mask), arrival))
