"""Preconditioners for the softmax Newton systems: a FALKON factor per class, and, past
a few thousand centers, a sample of rows per class (:class:`_SampledPreconditioner`).

The multinomial Newton system couples the classes through each row's softmax Hessian
``diag(p_i) - p_i p_i^T``, whose curvature lies in the one or two classes the row is
unsure about. One weight per row (the block's mean diagonal, what the shared
preconditioner of :mod:`._falkon_logistic` uses) cannot follow that: it overstates the
curvature of a confident class by the mean and understates the contested ones by a
factor up to ``k / 2``, and CG pays for the mismatch (measured on 3,000 Fashion-MNIST
images, 500 centers: 60-160 CG iterations per Newton step at the target penalty).

This preconditioner keeps the block diagonal of the Hessian over classes (block Jacobi)
and FALKON's Nyström approximation within each class::

    A_c^T A_c = T D_c T^T / n + lambda I,   D_c = diag(w_j p_jc (1 - p_jc)) over centers

(``T`` the shared Cholesky factor of ``K_MM``, ``B_c = T^-1 A_c^-1``). The softmax
block is weakly diagonally dominant (row ``c``'s off-diagonal sum is ``p_c (1 - p_c)``,
its diagonal), so the block-Jacobi weights bound it within a factor of 2 on every
direction but one: the all-classes shift ``z (x) 1``, where the loss is flat and only the
penalty curves. Newton directions never leave the shift-free subspace (the gradient and
the Hessian keep it), but ``A_c`` differing per class would leak Krylov vectors into the
flat direction; every product is therefore projected on it (``Pi``: subtract the mean
over classes, per center), which commutes with ``T`` and leaves CG on a consistent
positive semi-definite system. Cost: ``k`` factorizations (``2 M^3 / 3`` each) per
Newton step and ``k`` ``M x M`` factors in memory.

FALKON's ``T D_c T^T`` estimates ``T^-T K_Mn D_c K_nM T^-1 / n`` from the centers'
weights alone: uniform centers are a uniform sample of the rows, and late in the fit
the softmax weights ``p (1 - p)`` concentrate on the few rows the model is unsure of,
which such a sample hits rarely. CG then pays for the sample's variance: on 20,000
Fashion-MNIST images, 2,000 centers, the five steps at the target penalty took 80 CG
iterations, and 19 with the exact matrix (``n M^2`` per class: too dear to build).
So the rows that carry most of a class's weight (:func:`heavy_rows`: half of it, at
most ``M`` rows) enter exactly, ``phi_i = T^-T k(C, x_i)`` by a triangular solve of
their kernel rows (held in ``K_nM``), and the centers estimate only the rest (a
center among those rows drops out of the sample)::

    A_c^T A_c = sum_{i heavy} d_ic phi_i phi_i^T / n + T S_c^2 T^T + lambda I

(``S_c`` the light centers' weights; ``M^2 h`` more flops per class for ``h`` heavy
rows, a solve and a rank-``h`` update). Measured there: 28 CG iterations at the
target penalty. All 60,000 images: 78 CG iterations over the fit instead of 193,
three builds of 1.9 s instead of 0.7 s, the fit 17.3 s instead of 21.8-23.2 s (2-core
AMD EPYC; a heavy share of 0.7 or 0.3, or at most M/2 rows, took 1-2 s longer).
"""

import numpy as np
from scipy.linalg import blas, lapack


_HEAVY_MASS = 0.5  # per class, the rows holding this share of the weight enter exactly
_HEAVY_MAX = 1.0   # ... at most this many times M rows per class (the build stays O(M^3))


def heavy_rows(dk, m):
    """Per class (column of the row weights ``dk``), the sorted indices of the fewest
    rows holding ``_HEAVY_MASS`` of its weight, at most ``_HEAVY_MAX * m`` of them."""
    n = dk.shape[0]
    cap = max(1, min(n, int(_HEAVY_MAX * m)))
    out = []
    for d in dk.T:
        top = np.argpartition(d, n - cap)[n - cap:] if cap < n else np.arange(n)
        top = top[np.argsort(d[top])[::-1]]
        h = int(np.searchsorted(np.cumsum(d[top]), _HEAVY_MASS * float(d.sum()))) + 1
        out.append(np.sort(top[:min(h, cap)]))
    return out


def exact_rows(solve_tt, rows, H, d, dtype):
    """``P`` (M x h, Fortran order) with ``P P^T = sum_{i in H} d_i phi_i phi_i^T``,
    ``phi_i = T^-T k(C, x_i)``: the heavy rows' exact part of a preconditioner
    (``solve_tt(V) = T^-T V``, ``rows(I)`` the kernel rows, ``d`` the rows' weights)."""
    P = np.asfortranarray(solve_tt(np.asfortranarray(rows(H).T, dtype=dtype)), dtype=dtype)
    P *= np.sqrt(d[H]).astype(dtype)
    return P


def _project(V):
    """``Pi V``: the shift-free part (rows: centers, columns: classes; one column, the
    binary model's, has no shift to remove)."""
    return V if V.shape[1] == 1 else V - V.mean(axis=1, keepdims=True)


class _BlockPreconditioner:
    """``B = Pi T^-1 diag_c(A_c^-1)`` over FALKON's shared ``T`` (``pre``): the products
    CG needs, given ``_solve_A`` (``A_c^-1``, or ``A_c^-T`` with ``trans``)."""

    def apply(self, V, product, lam, n):
        """``B^T H B V``, ``H = product / n + lam K_MM`` (``K_MM = T^T T - eps I``)."""
        W = _project(self._solve_A(V, False))
        U = self.pre.solve_T(W)
        H = product(U) / n
        if self.eps:
            H -= (lam * self.eps) * U
        H = _project(self.pre.solve_T(H, trans=True))
        H += lam * W
        return self._solve_A(H, True)

    def Bt(self, R):
        """``B^T R = diag_c(A_c^-T) T^-T Pi R``."""
        return self._solve_A(self.pre.solve_T(_project(R), trans=True), True)

    def B(self, G):
        """``B G = Pi T^-1 diag_c(A_c^-1) G``."""
        return _project(self.pre.solve_T(self._solve_A(G, False)))


class _ClassPreconditioner(_BlockPreconditioner):
    """``B = Pi T^-1 diag_c(A_c^-1)``: one ``A_c`` per class over the shared ``T``.

    Parameters
    ----------
    pre : _FalkonPreconditioner
        Holds ``T`` (``K_MM + eps I = T^T T``); its ``A`` is not used.
    k : int
        The number of classes.
    dtype : float64 or float32
        Of the ``A_c`` factors (float32 beside a float32 ``K_nM``: half the memory
        and memory traffic of the ``k`` triangular solves per CG step, and a
        preconditioner only needs to be a fixed positive definite operator).
    """

    def __init__(self, pre, k, dtype=np.float64):
        self.pre, self.m, self.k, self.eps = pre, pre.m, k, pre.eps
        pre._use("T")
        # upper, its own copy (pre.F's lower triangle holds A)
        self.T = np.triu(pre.F).astype(dtype, copy=False)
        dt = self.T.dtype
        self.lauum, self.potrf = lapack.get_lapack_funcs(("lauum", "potrf"), (self.T,))
        self.trsv = blas.get_blas_funcs("trsv", (self.T,))
        self.R = [np.empty((self.m, self.m), dt, order="F") for _ in range(k)]

    def set_weights(self, scales, lam, heavy=None, dk=None, idx=None, rows=None):
        """Factor ``R_c^T R_c = T S_c^2 T^T + lam I`` (``scales`` (M, k): ``S_c``).

        With ``heavy`` (:func:`heavy_rows`), ``dk`` (n, k) the rows' weights (those of
        ``scales``, over ``n``), ``idx`` the centers' rows and ``rows(I)`` the kernel
        rows ``k(C, x_i)``: each class's heavy rows enter exactly and the centers among
        them leave ``S_c`` (see the module notes)."""
        dt = self.T.dtype
        trsm, syrk = blas.get_blas_funcs(("trsm", "syrk"), (self.T,))
        for c in range(self.k):
            s = scales[:, c].astype(dt)
            P = None
            if heavy is not None:  # M x (at most M)
                s = s * ~np.isin(idx, heavy[c])
                P = exact_rows(lambda V: trsm(1.0, self.T, V, lower=0, trans_a=1,
                                              overwrite_b=1), rows, heavy[c], dk[:, c], dt)
            jitter = 0.0
            for _ in range(12):
                R = np.multiply(self.T, s[None, :], out=self.R[c])
                R, info = self.lauum(R, lower=0, overwrite_c=1)
                if info != 0:
                    raise ValueError(f"LAPACK lauum failed (info={info}).")
                if P is not None:
                    R = syrk(1.0, P, beta=1.0, c=R, lower=0, overwrite_c=1)
                base = np.diag(R).copy()
                R.flat[:: self.m + 1] = base + (lam + jitter)
                R, info = self.potrf(R, lower=0, clean=1, overwrite_a=1)
                if info == 0:
                    break
                jitter = (np.finfo(dt).eps * self.m * max(float(base.max()), lam, 1e-30)
                          if jitter == 0.0 else 100.0 * jitter)
            else:
                raise ValueError("the FALKON preconditioner is not positive definite; "
                                 "increase alpha.")
            self.R[c] = R

    def _solve_A(self, V, trans):
        """``A_c^-1`` (``trans``: ``A_c^-T``) on column ``c`` of ``V``: one triangular
        solve of one vector per class, by ``trsv`` (``trsm`` with one right-hand side took
        7-10x longer: 2.6-3.3 ms against 0.3-0.5 ms at 2,000 centers, float32)."""
        out = np.empty((self.m, self.k))
        for c in range(self.k):
            R = self.R[c]
            out[:, c] = self.trsv(R, V[:, c].astype(R.dtype), lower=0, trans=int(trans))
        return out


def threshold_sample(w, r, rng):
    """An unbiased sample of about ``r`` of the weights ``w >= 0`` (Poisson sampling):
    ``j`` is kept with probability ``p_j = min(1, c w_j)``, ``sum p = r``, and weighs
    ``w_j / p_j``; all nonzero ones when there are at most ``r``. Returns (indices,
    weights)."""
    nz = np.flatnonzero(w > 0)
    if r <= 0:
        return nz[:0], w[:0]
    if nz.size <= r:
        return nz, w[nz]
    ws = np.sort(w[nz])[::-1]
    tail = np.cumsum(ws[::-1])[::-1]  # tail[t] = sum(ws[t:])
    t = np.arange(r)
    c = (r - t) / tail[:r]
    first = int(np.flatnonzero(c * ws[:r] <= 1.0)[0])  # the largest t rows are certain
    p = np.minimum(1.0, c[first] * w[nz])
    keep = rng.random_sample(nz.size) < p
    return nz[keep], w[nz][keep] / p[keep]


class _SampledPreconditioner(_BlockPreconditioner):
    """PCG preconditioner in ``T``'s coordinates from a weighted sample of rows.

    Past a few thousand centers FALKON's factor ``A`` (per class: ``k`` of them) costs
    ``2 M^3 / 3`` per build, ten or more per fit, which outgrows the whole fit (16,000
    centers: a shared build 25 s, ten per-class ones over 100 s). Here each group of
    classes (one for all, or one per class) approximates its Hessian block in ``T``'s
    coordinates, ``T^-T K_Mn D_c K_nM T^-1 / n``, by a sample of ``r`` rows, ``Phi Phi^T``
    (``Phi``'s columns ``sqrt(d_i / n) phi_i``, ``phi_i = T^-T k(C, x_i)``: for a center,
    a column of ``T``), and CG is preconditioned by ``P = lam I + Phi Phi^T``, inverted by
    Woodbury through ``chol(I + Phi^T Phi / lam)`` (``r x r``; build ``M r^2``, apply
    ``4 M r``). The sample (Nyström's, Williams & Seeger 2001, on the Hessian's rows):
    the heaviest rows of the group exactly (half its weight, at most ``r / 2`` rows,
    :mod:`._falkon_logistic_pre`'s notes on why), the rest of the weight by a threshold
    sample of the centers, weighted to be unbiased. ``Phi`` is held in float64:
    the Woodbury form subtracts nearly equal terms along the strong directions (at
    ``||Phi||^2 / lam`` ~ 1e6), which float32's rounding would turn indefinite.
    """

    def __init__(self, pre, k, r, rng):
        self.pre, self.m, self.k, self.r, self.rng = pre, pre.m, k, r, rng
        self.eps = pre.eps
        self.phi_rows, self.phi = np.empty(0, np.intp), np.empty((self.m, 0))
        self.T32 = None  # T in float32 for the heavy rows' solves

    def _heavy_phi(self, I, rows):
        """``phi_i`` of the rows ``I`` (sorted), from a cache kept across builds."""
        new = np.setdiff1d(I, self.phi_rows, assume_unique=True)
        if new.size:  # float32 (half the time): the Gram is taken from what is held
            if self.T32 is None:
                self.pre._use("T")
                self.T32 = np.asfortranarray(self.pre.F, dtype=np.float32)
            P = blas.strsm(1.0, self.T32, np.asfortranarray(rows(new).T, dtype=np.float32),
                           lower=0, trans_a=1).astype(np.float64)
            keep = np.isin(self.phi_rows, I)  # drop rows no group needs now
            rows_ = np.concatenate([self.phi_rows[keep], new])
            order = np.argsort(rows_)
            self.phi = np.asfortranarray(np.hstack([self.phi[:, keep], P])[:, order])
            self.phi_rows = rows_[order]

    def _t_columns(self, S):
        """``T[:, S]`` (``pre.F``'s upper triangle; its lower one may hold ``A``)."""
        self.pre._use("T")
        out = self.pre.F[:, S]  # a copy
        for j, s in enumerate(S):  # (a boolean mask took 20x longer)
            out[s + 1:, j] = 0.0
        return out

    def set_weights(self, center_weights, lam, dk=None, idx=None, rows=None):
        """Sample and factor each group's ``P_g``: ``center_weights`` (M, groups) the
        centers' weights (``w_j d_j / n``); with ``dk`` (n, groups, the rows' ``d / n``),
        ``idx`` (the centers' rows) and ``rows(I)`` (kernel rows) the heavy rows exactly."""
        self.lam, groups = lam, center_weights.shape[1]
        heavy = [np.empty(0, np.intp)] * groups
        if dk is not None and idx is not None:
            heavy = heavy_rows(dk, self.r // 2)
            self._heavy_phi(np.unique(np.concatenate(heavy)), rows)
        self.Phi, self.R = [], []
        for g in range(groups):
            H, w = heavy[g], center_weights[:, g]
            if H.size:
                w = w * ~np.isin(idx, H)
            S, ws = threshold_sample(w, self.r - H.size, self.rng)
            parts = [self._t_columns(S) * np.sqrt(ws)]
            if H.size:
                parts.append(self.phi[:, np.searchsorted(self.phi_rows, H)]
                             * np.sqrt(dk[H, g]))
            Phi = np.asfortranarray(np.hstack(parts))
            if Phi.shape[1] == 0:  # nothing sampled (all weights 0): P = lam I
                self.Phi.append(None)
                self.R.append(None)
                continue
            G = blas.dsyrk(1.0 / lam, Phi, trans=1, lower=0)  # I + Phi^T Phi / lam
            G.flat[:: G.shape[0] + 1] += 1.0
            R, info = lapack.dpotrf(G, lower=0, clean=1, overwrite_a=1)
            if info != 0:
                raise ValueError("the FALKON preconditioner is not positive definite; "
                                 "increase alpha.")
            self.Phi.append(Phi)
            self.R.append(R)

    def precond(self, V):
        """``Pi diag_g(P_g^-1) Pi V`` (``V`` (M, k))."""
        V = _project(V)
        if len(self.Phi) == 1 and self.Phi[0] is None:
            out = V / self.lam
        elif len(self.Phi) == 1:  # one group: all classes in one product each way
            Phi, R = self.Phi[0], self.R[0]
            A = blas.dtrsm(1.0, R, Phi.T @ V, lower=0, trans_a=1)
            out = (V - Phi @ blas.dtrsm(1.0, R, A, lower=0) / self.lam) / self.lam
        else:
            out = np.empty_like(V)
            for c in range(self.k):
                Phi, R = self.Phi[c], self.R[c]
                if Phi is None:
                    out[:, c] = V[:, c] / self.lam
                    continue
                a = blas.dtrsv(R, blas.dtrsv(R, Phi.T @ V[:, c], lower=0, trans=1), lower=0)
                out[:, c] = (V[:, c] - Phi @ a / self.lam) / self.lam
        return _project(out)

    def _solve_A(self, V, trans):
        """No ``A_c``: CG runs in ``T``'s coordinates, :meth:`precond` preconditions."""
        return V
