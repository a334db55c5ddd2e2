"""Per-class FALKON preconditioner for the softmax Newton systems.

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
    """``Pi V``: the shift-free part (rows: centers, columns: classes)."""
    return V - V.mean(axis=1, keepdims=True)


class _ClassPreconditioner:
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
