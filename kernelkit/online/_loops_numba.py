"""Compiled twin of :mod:`kernelkit.online._loops` (same signature, Numba).

Each sample costs two triangular solves and one rank-one update of ``A^{-1}``
(``O(m^2)`` for ``m`` atoms), fused into loops without temporaries; the NumPy
module is the oracle it is tested against.
"""

import math

import numba as nb
import numpy as np

# Reassociation lets the dot products vectorise (SIMD); no NaN/inf assumptions, so
# non-finite values still propagate to the finiteness check of the caller.
_FAST = {"reassoc", "contract"}


@nb.njit(cache=True, inline="always")
def _loss_terms(code, f, y):
    if code == 0:
        r = f - y
        return 0.5 * r * r, r, 1.0
    if code == 1:
        yf = y * f
        s = 0.5 * (1.0 - math.tanh(0.5 * yf))
        lv = -yf + math.log1p(math.exp(yf)) if yf < 0 else math.log1p(math.exp(-yf))
        return lv, -y * s, s * (1.0 - s)
    mg = 1.0 - y * f
    if mg <= 0.0:
        return 0.0, 0.0, 0.0
    return 0.5 * mg * mg, -y * mg, 1.0


@nb.njit(cache=True, fastmath=_FAST)
def _forward(Lm, b, out, m):
    """Solve ``Lm[:m, :m] out = b`` (lower triangular), row-oriented."""
    for i in range(m):
        s = b[i]
        for j in range(i):
            s -= Lm[i, j] * out[j]
        out[i] = s / Lm[i, i]


@nb.njit(cache=True)
def _reset(A, m, alpha):
    for i in range(m):
        for j in range(m):
            A[i, j] = 0.0
        A[i, i] = 1.0 / alpha


@nb.njit(cache=True, fastmath=_FAST)
def _ons_update(A, z, v, m, cv, forget, lam, alpha):
    """Discount (optional) and Sherman-Morrison ``A^{-1}`` for ``+ cv z z^T``.

    Leaves ``v = A_t^{-1} z`` (the new inverse applied to ``z``).
    """
    if forget == 1:
        dmax = 0.0
        for i in range(m):
            dmax = max(dmax, A[i, i])
        if dmax * (1.0 - lam) / lam <= 1.0 / alpha:
            for i in range(m):
                for j in range(m):
                    A[i, j] /= lam
    q = 0.0
    for i in range(m):
        s = 0.0
        for j in range(m):
            s += A[i, j] * z[j]
        v[i] = s
        q += z[i] * s
    coef = cv / (1.0 + cv * q)
    for i in range(m):
        vi = coef * v[i]
        for j in range(m):
            A[i, j] -= vi * v[j]
    scale = 1.0 / (1.0 + cv * q)
    for i in range(m):
        v[i] *= scale


@nb.njit(cache=True, fastmath=_FAST)
def _fused_update(A, z, v, pv, pc, m, cv):
    """Sherman-Morrison for ``+ cv z z^T`` in one pass over ``A`` (``A^{-1}``).

    ``A`` is behind by one rank-one update, ``A -= pc pv pv^T`` (``pc[0] = 0``: none):
    it is applied row by row while ``v = A z`` is formed, and the new update is left
    pending in ``(pv, pc)``; one read-and-write of ``A`` per sample instead of a read
    and a read-and-write, the time of a large dictionary's step being memory traffic.
    Leaves ``v = A_t^{-1} z`` as :func:`_ons_update` does.
    """
    c0 = pc[0]
    q = 0.0
    for i in range(m):
        ci = c0 * pv[i]
        s = 0.0
        for j in range(m):
            x = A[i, j] - ci * pv[j]
            A[i, j] = x
            s += x * z[j]
        v[i] = s
        q += z[i] * s
    pc[0] = cv / (1.0 + cv * q)
    scale = 1.0 / (1.0 + cv * q)
    for i in range(m):
        pv[i] = v[i]
        v[i] *= scale


@nb.njit(cache=True, fastmath=_FAST)
def _flush(Ainv, pv, pc, m):
    """Apply the pending rank-one updates of :func:`_fused_update` to ``Ainv``."""
    for b in range(Ainv.shape[0]):
        c0 = pc[b]
        if c0 != 0.0:
            for i in range(m):
                ci = c0 * pv[b, i]
                for j in range(m):
                    Ainv[b, i, j] -= ci * pv[b, j]
            pc[b] = 0.0


@nb.njit(cache=True, fastmath=_FAST)
def run_chunk(Kc, Kss, Y, wt, u, L, Lw, sw, W, Ainv, istate, fstate, new_atoms, pred,
              iparams, fparams):
    method, loss, forget = iparams[0], iparams[1], iparams[2]
    memory, max_atoms, shared = iparams[3], iparams[4], iparams[5]
    eta, alpha, gamma_reg, eps = fparams[0], fparams[1], fparams[2], fparams[3]
    beta, C, lam, tol = fparams[4], fparams[5], fparams[6], fparams[7]
    big = (1.0 + eps) * gamma_reg
    n, m0 = Kc.shape
    n_out = W.shape[1]
    cap = L.shape[0]
    kr = np.empty(cap)
    z = np.empty(cap)
    v = np.empty(cap)
    a = np.empty(cap)
    f = np.empty(n_out)
    g = np.empty(n_out)
    curv = np.empty(n_out)
    # pending rank-one updates of Ainv (see _fused_update): applied before anything
    # else reads or resizes Ainv, and at the end of the chunk
    lazy = forget != 1  # the discount reads the diagonal first
    pv = np.zeros((Ainv.shape[0], cap))
    pc = np.zeros(Ainv.shape[0])
    n_add = 0
    for i in range(n):
        m = istate[0]
        for j in range(m0):
            kr[j] = Kc[i, j]
        for j in range(n_add):
            kr[m0 + j] = Kss[i, new_atoms[j]]
        kt = Kss[i, i]
        _forward(L, kr, z, m)
        res = kt
        for j in range(m):
            res -= z[j] * z[j]
        add = False
        p = 1.0
        r = 0.0
        if m < max_atoms and res > tol * kt:
            if method == 0:
                add = True
            else:
                for j in range(m):
                    a[j] = sw[j] * kr[j]
                _forward(Lw, a, v, m)
                r = kt
                for j in range(m):
                    r -= v[j] * v[j]
                r = max(r, 0.0)
                p = min(beta * (1.0 + eps) ** 2 * r / (r + big), 1.0)
                add = u[i] < p
        if add:
            _flush(Ainv, pv, pc, m)
            s = 1.0 / math.sqrt(p)
            for j in range(m):
                L[m, j] = z[j]
            L[m, m] = math.sqrt(res)
            z[m] = L[m, m]
            if method != 0:
                sw[m] = s
                for j in range(m):
                    Lw[m, j] = s * v[j]
                Lw[m, m] = math.sqrt(s * s * r + big)
            for c in range(n_out):
                W[m, c] = 0.0
            for b in range(Ainv.shape[0]):
                for j in range(m + 1):
                    Ainv[b, m, j] = 0.0
                    Ainv[b, j, m] = 0.0
                Ainv[b, m, m] = 1.0 / alpha
            if method == 2:  # PROS-N-KONS: restart the learner on the new embedding
                for j in range(m + 1):
                    for c in range(n_out):
                        W[j, c] = 0.0
                for b in range(Ainv.shape[0]):
                    _reset(Ainv[b], m + 1, alpha)
                istate[3] += 1
            new_atoms[n_add] = i
            n_add += 1
            m += 1
            istate[0] = m
        if forget == 2 and istate[2] >= memory:
            pc[:] = 0.0  # the reset discards the pending updates
            for b in range(Ainv.shape[0]):
                _reset(Ainv[b], m, alpha)
            istate[2] = 0
            istate[3] += 1
        for c in range(n_out):
            s = 0.0
            for j in range(m):
                s += W[j, c] * z[j]
            f[c] = s
        if C < np.inf:
            for c in range(n_out):
                if abs(f[c]) > C:
                    _flush(Ainv, pv, pc, m)
                    A = Ainv[0 if shared else c]
                    q = 0.0
                    for j in range(m):
                        s = 0.0
                        for k in range(m):
                            s += A[j, k] * z[k]
                        a[j] = s
                        q += z[j] * s
                    target = C if f[c] > 0 else -C
                    step = (f[c] - target) / q
                    for j in range(m):
                        W[j, c] -= step * a[j]
                    f[c] = target
        for c in range(n_out):
            pred[i, c] = f[c]
            lv, gc, hc = _loss_terms(loss, f[c], Y[i, c])
            lv, gc, hc = wt[i] * lv, wt[i] * gc, wt[i] * hc
            fstate[0] += lv
            g[c] = gc
            curv[c] = hc if eta < 0 else eta * gc * gc
        if shared:
            if lazy:
                _fused_update(Ainv[0], z, v, pv[0], pc[0:1], m, curv[0])
            else:
                _ons_update(Ainv[0], z, v, m, curv[0], forget, lam, alpha)
            for j in range(m):
                for c in range(n_out):
                    W[j, c] -= v[j] * g[c]
        else:
            for c in range(n_out):
                if lazy:
                    _fused_update(Ainv[c], z, v, pv[c], pc[c:c + 1], m, curv[c])
                else:
                    _ons_update(Ainv[c], z, v, m, curv[c], forget, lam, alpha)
                for j in range(m):
                    W[j, c] -= v[j] * g[c]
        istate[1] += 1
        istate[2] += 1
    _flush(Ainv, pv, pc, istate[0])
    return n_add
