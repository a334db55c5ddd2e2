"""NumPy reference of the per-sample loop of KONS, Sketched-KONS and PROS-N-KONS.

One function, :func:`run_chunk`, processes a chunk of samples in order
(predict, then update) on arrays it updates in place. The compiled twin
:mod:`kernelkit.online._loops_numba` has the same signature; this module is its
oracle in the tests.

The iterate lives in the coordinates of an orthonormal basis of the span of the
stored atoms: ``z(x) = L^{-1} k_D(x)`` with ``K_DD = L L^T`` (the Nystrom
embedding of the atoms, exact for points in their span). A new atom borders ``L``
by one row, so earlier coordinates never change, and the Online Newton Step state
``(W, A^{-1})`` extends by a zero coordinate with prior precision ``alpha``.

Array arguments (all updated in place where marked):

Kc : (n, m0) kernel rows of the chunk against the atoms stored before it.
Kss : (n, n) kernel matrix of the chunk itself (its diagonal is ``k(x, x)``).
Y : (n, n_out) targets (+-1 per class for classification).
wt : (n,) row weights >= 0 of the loss (its value, gradient and curvature scale).
u : (n,) uniforms in [0, 1) for KORS's Bernoulli draws.
L, Lw : (cap, cap) lower factors of ``K_DD`` and ``S K_DD S + (1 + eps) gamma_reg I``.
sw : (cap,) ``1 / sqrt(p_j)`` of each atom (KORS weights).
W : (cap, n_out) coefficients in embedded coordinates.
Ainv : (n_A, cap, cap) inverse second-order matrices (n_A = 1 when shared).
istate : int64 [m, n_seen, since_restart, n_restarts].
fstate : float64 [cumulative_loss].
new_atoms : (n,) int64 out: chunk rows that became atoms, in order.
pred : (n, n_out) out: the prequential decision values (before each update).
iparams : int64 [method (0 kons, 1 sketched, 2 pros-n-kons), loss (0 squared,
    1 logistic, 2 squared hinge), forgetting (0 none, 1 discount, 2 restart),
    memory, max_atoms, shared].
fparams : float64 [eta (< 0: curvature), alpha, gamma_reg, epsilon, beta, C, lam, tol].

Returns the number of atoms added in the chunk.
"""

import numpy as np
from scipy.linalg import solve_triangular


def loss_terms(code, f, y):
    """Loss, first and second derivative in the prediction ``f`` (vectorised)."""
    f = np.asarray(f, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if code == 0:
        r = f - y
        return 0.5 * r * r, r, np.ones_like(r)
    if code == 1:
        yf = y * f
        s = 0.5 * (1.0 - np.tanh(0.5 * yf))  # sigmoid(-yf) without overflow
        return np.logaddexp(0.0, -yf), -y * s, s * (1.0 - s)
    mg = np.maximum(1.0 - y * f, 0.0)
    return 0.5 * mg * mg, -y * mg, (mg > 0).astype(np.float64)


def run_chunk(Kc, Kss, Y, wt, u, L, Lw, sw, W, Ainv, istate, fstate, new_atoms, pred,
              iparams, fparams):
    method, loss, forget, memory, max_atoms, shared = (int(v) for v in iparams)
    eta, alpha, gamma_reg, eps, beta, C, lam, tol = (float(v) for v in fparams)
    big = (1.0 + eps) * gamma_reg
    n, m0 = Kc.shape
    n_add = 0
    for i in range(n):
        m = int(istate[0])
        kr = np.concatenate([Kc[i, :m0], Kss[i, new_atoms[:n_add]]])
        kt = Kss[i, i]
        z = np.zeros(m + 1)
        if m:
            z[:m] = solve_triangular(L[:m, :m], kr, lower=True, check_finite=False)
        res = kt - z[:m] @ z[:m]
        add, p = False, 1.0
        if m < max_atoms and res > tol * kt:
            if method == 0:
                add = True
            else:
                v = (solve_triangular(Lw[:m, :m], sw[:m] * kr, lower=True, check_finite=False)
                     if m else np.zeros(0))
                r = max(kt - v @ v, 0.0)
                p = min(beta * (1.0 + eps) ** 2 * r / (r + big), 1.0)
                add = u[i] < p
        if add:
            s = 1.0 / np.sqrt(p)
            L[m, :m] = z[:m]
            L[m, m] = z[m] = np.sqrt(res)
            if method:
                sw[m] = s
                Lw[m, :m] = s * v
                Lw[m, m] = np.sqrt(s * s * r + big)
            W[m] = 0.0
            Ainv[:, m, :m + 1] = 0.0
            Ainv[:, :m + 1, m] = 0.0
            Ainv[:, m, m] = 1.0 / alpha
            if method == 2:  # PROS-N-KONS: restart the learner on the new embedding
                W[:m + 1] = 0.0
                Ainv[:, :m + 1, :m + 1] = np.eye(m + 1) / alpha
                istate[3] += 1
            new_atoms[n_add] = i
            n_add += 1
            m += 1
            istate[0] = m
        z = z[:m]
        if forget == 2 and istate[2] >= memory:
            Ainv[:, :m, :m] = np.eye(m) / alpha
            istate[2] = 0
            istate[3] += 1
        f = W[:m].T @ z
        if np.isfinite(C):
            for c in np.flatnonzero(np.abs(f) > C):
                a = Ainv[0 if shared else c, :m, :m] @ z
                target = np.sign(f[c]) * C
                W[:m, c] -= (f[c] - target) / (z @ a) * a
                f[c] = target
        pred[i] = f
        lv, g, h = loss_terms(loss, f, Y[i])
        # the row's weight scales its loss, so its gradient and curvature
        lv, g, h = wt[i] * lv, wt[i] * g, wt[i] * h
        fstate[0] += lv.sum()
        curv = h if eta < 0 else eta * g * g
        for a_i in range(Ainv.shape[0]):
            A = Ainv[a_i, :m, :m]
            if forget == 1 and np.max(np.diag(A)) * (1.0 - lam) / lam <= 1.0 / alpha:
                A /= lam  # discounted past; wind-up capped at memory / alpha
            v = A @ z
            cols = slice(None) if shared else slice(a_i, a_i + 1)
            cv = curv[0] if shared else curv[a_i]
            q = z @ v
            A -= (cv / (1.0 + cv * q)) * np.outer(v, v)
            W[:m, cols] -= np.outer(v / (1.0 + cv * q), g[cols])
        istate[1] += 1
        istate[2] += 1
    return n_add
