"""The kernel matrix of kernel ridge's iterative solvers: held or recomputed, and what
its float32 rounding costs.

:class:`KernelProduct` holds ``k(X, X)`` in float32 when it fits ``cache_size`` (the
products of CG in float32, its vectors in float64), else recomputes it blockwise for
every product (float64). A float32 ``K`` perturbs the system CG solves by its
rounding ``dK``; :meth:`KernelProduct.storage_error` measures what that moves the
residual by, so that CG stops where the true residual meets ``tol`` and finishes on
float64 products only where it would not.
"""

import math
import time
import warnings

import numpy as np
from sklearn.exceptions import EfficiencyWarning

from .._config import get_config
from ..utils._threads import map_row_blocks

PANEL_ROWS = 1024  # rows per thread of a held float32 product (own pool, 1 BLAS thread)
ERROR_ROWS = 256   # rows whose exact values measure the held K's rounding (storage_error)
ERROR_MARGIN = 2.0  # ... times the estimate from them


def column_sq_norms(K):
    """``sum_i K_ij^2`` per column of a held matrix, float64.

    Each row panel in ``K``'s own precision (the callers need an estimate), panels on
    kernelkit's row-block pool, summed in float64. For the rounding estimates of a
    held float32 kernel matrix (PCG's ``K``, FALKON's ``K_nM``).
    """
    parts = {}

    def job(r0, r1):
        Kb = K[r0:r1]
        parts[r0] = np.einsum("ij,ij->j", Kb, Kb).astype(np.float64)

    map_row_blocks(job, K.shape[0], PANEL_ROWS)
    return sum(parts.values(), np.zeros(K.shape[1]))


def held_dtype(op, X, dtype, C=None):
    """``dtype``, or float64 where a psd kernel's values leave float32's normal range.

    ``|k(x, y)| <= sqrt(k(x, x) k(y, y))`` for a psd kernel, so the diagonal bounds
    every entry (of ``k(X, X)``, or of ``k(X, C)`` with ``C``): float32 holds them when
    it lies within ``[1e-30, 1e30]`` (rounding, not overflow or underflow, is then all
    float32 costs).
    """
    if np.dtype(dtype) != np.float32:
        return np.dtype(dtype)
    top = float(np.abs(op.diag(X)).max(initial=0.0))
    if C is not None:
        top = max(top, float(np.abs(op.diag(C)).max(initial=0.0)))
    return np.dtype(np.float32) if 1e-30 <= top <= 1e30 else np.dtype(np.float64)


def held_kernel(op, X, Y, dtype):
    """``k(X, Y)`` as a host array of ``dtype``, from float64 arithmetic on ``X`` as given
    (never rounded to ``dtype`` first: an offset of 1e5 in float32 loses every digit
    of a distance); host callables row block by row block, within ``working_memory``."""
    if op.spec is not None:
        return np.asarray(op.engine.to_host(op.block(X, Y, dtype=dtype)))
    n = X.shape[0]
    out = np.empty((n, (X if Y is None else Y).shape[0]), dtype)
    rows = max(1, int(get_config()["working_memory"] * 2**20 // (8 * out.shape[1])))
    for r0 in range(0, n, rows):
        out[r0:r0 + rows] = op.block_host(X[r0:r0 + rows], X if Y is None else Y)
    return out


class KernelProduct:
    """``v -> S K S v`` for ``S = diag(sqrt(sample_weight))`` (identity when None).

    ``K`` is held (the precomputed matrix, or ``k(X, X)`` cast to ``dtype`` when
    ``n^2`` entries fit ``cache_size`` MiB) or recomputed blockwise on each call.

    Parameters
    ----------
    op : KernelOperator or None
        The resolved kernel (None when ``K`` is given).
    X : ndarray of shape (n, d) or None
    K : ndarray of shape (n, n) or None
        A precomputed kernel matrix, used as given (never modified).
    sw : ndarray of shape (n,) or None
        Square roots of the sample weights.
    dtype : numpy dtype
        Storage and product precision of a held ``K``.
    cache_size : float
        MiB allowed for a held ``K``.
    """

    def __init__(self, op, X, K=None, sw=None, dtype=np.float32, cache_size=4096.0,
                 defer=False):
        self.op, self.X, self.sw, self.cache_size = op, X, sw, cache_size
        self._colnorm = None  # max column norm of the held K, for storage_error
        self._rows_error = None  # (dK on storage_error's rows, n / rows)
        self._columns = None  # columns(): k(X, X[S]) with X prepared once
        self.dtype = np.dtype(dtype)
        self.build_s = 0.0  # seconds the held matrix took to compute (solver="auto")
        if K is not None:
            self.K, self.stored = K, True
            self.dtype = K.dtype
            return
        n = X.shape[0]
        self.stored = n * n * self.dtype.itemsize <= cache_size * 2**20
        self.K = None
        if self.stored:
            self.dtype = held_dtype(op, X, self.dtype)
            self.stored = n * n * self.dtype.itemsize <= cache_size * 2**20
        if not defer:
            self.hold()

    def hold(self):
        """Compute the held ``K`` now (a no-op when it is held or recomputed per product).

        :func:`pcg_ridge` draws its preconditioner first, from float64 columns computed
        from ``X``, so that ``solver="auto"`` can weigh the solve before paying for ``K``.
        """
        if self.stored and self.K is None:
            t0 = time.perf_counter()
            self.K = held_kernel(self.op, self.X, None, self.dtype)
            self.build_s = time.perf_counter() - t0
        return self

    def check_recomputed(self, owner, refuse):
        """When ``K`` would be recomputed for every product (it does not fit
        ``cache_size``), each CG step costs a whole kernel evaluation and FALKON is the
        solver for that size: ``refuse`` (``solver="auto"``) raises a ValueError saying
        what to do instead, else an ``EfficiencyWarning`` (an explicit ``"pcg"`` runs)."""
        if self.stored:  # a given K is stored too
            return
        n, d = self.X.shape
        need = n * n * self.dtype.itemsize
        what = (f"{owner}: the {n:,} x {n:,} kernel matrix ({need / 2**30:.3g} GiB in "
                f"{self.dtype}) does not fit cache_size={self.cache_size:g} MiB, so every CG "
                f"step would recompute it (~{2.0 * n * n * d:.1e} flops each, tens of steps)")
        instead = "FalkonRegressor / FalkonClassifier (O(n m) memory for m centers)"
        if refuse:
            raise ValueError(
                f"{what}. solver='auto' does not start a fit that slow: use {instead}, which "
                f"fits this size much faster; or raise cache_size to at least "
                f"{math.ceil(need / 2**20):,} (MiB) if the memory is there; or pass "
                "solver='pcg' to recompute the matrix at every step anyway.")
        warnings.warn(f"{what}. {instead} fit this size much faster; raise cache_size if the memory is there.",
                      EfficiencyWarning, stacklevel=3)

    def held_nbytes(self):
        """Bytes the held kernel matrix takes (or will take once held; 0 if never)."""
        return self.n * self.n * self.dtype.itemsize if self.stored else 0

    @property
    def n(self):
        return self.X.shape[0] if self.K is None else self.K.shape[0]

    def __call__(self, V):
        V = V if self.sw is None else V * self.sw.reshape((-1,) + (1,) * (V.ndim - 1))
        if self.stored:
            self.hold()
            Vc = np.ascontiguousarray(V, dtype=self.dtype)
            out = np.empty(V.shape)

            def job(r0, r1):
                out[r0:r1] = self.K[r0:r1] @ Vc

            map_row_blocks(job, self.n, PANEL_ROWS)
        else:
            out = np.asarray(self.op.engine.to_host(self.op.matmul(self.X, self.X, V)),
                             dtype=np.float64)
        return out if self.sw is None else out * self.sw.reshape((-1,) + (1,) * (V.ndim - 1))

    def columns(self, S):
        """``(S K S)[:, S]`` as an ``(n, len(S))`` float64 array."""
        if self.K is not None:  # rows of the symmetric K: contiguous, unlike its columns
            G = np.ascontiguousarray(self.K[S].T, dtype=np.float64)
        else:  # X prepared once for all the sketch's calls (see drop_columns)
            if self._columns is None:
                self._columns = self.op.columns(self.X)
            G = self._columns(S)
        if self.sw is not None:
            G *= self.sw[:, None] * self.sw[S][None, :]
        return G

    def diagonal(self):
        """The diagonal of ``S K S`` (from the held matrix when there is one), float64."""
        d = (np.diagonal(self.K).astype(np.float64) if self.K is not None
             else self.op.diag(self.X))
        return d if self.sw is None else d * self.sw**2

    def drop_columns(self):
        """Free what :meth:`columns` prepared from ``X`` (a float64 copy of it)."""
        self._columns = None

    @property
    def rounded(self):
        """Whether products use a float32-held ``k(X, X)`` that float64 can refine."""
        return self.K is not None and self.op is not None and self.K.dtype == np.float32

    def storage_error(self, C):
        """Estimated ``||dK S c||`` per column of ``C`` for the rounding ``dK`` of a held K.

        Measured, not bounded: the exact float64 rows of ``ERROR_ROWS`` evenly spaced
        rows (at most ``n / 16``: their cost is that share of a product) give ``dK`` on
        those rows, and ``||dK c||^2`` is ``n / s`` times their sum of squares (the rows'
        errors are sums of ``n`` independent roundings each), times ``ERROR_MARGIN``.
        Never above the bound ``eps ||c|| max_j ||K_:j||`` (rounding errors of at most
        ``eps |K_ij| / 2`` each, statistically ``eps / sqrt(12)``; the worst case,
        ``eps ||K||_F ||c||``, is ``sqrt(n)`` times larger and never seen), which on
        Fashion-MNIST overstated the true error 5-16 times and sent CG solves that
        had met ``tol`` to a float64 finish (a second kernel evaluation). With sample
        weights, the error of ``S K S c`` measured as the weighted solve measures
        residuals (rows divided by ``S``).
        """
        n = self.n
        if self._rows_error is None:
            self._colnorm = float(np.sqrt(column_sq_norms(self.K).max(initial=0.0)))
            S = np.unique(np.linspace(0, n - 1, min(ERROR_ROWS, max(1, n // 16)))
                          .astype(np.intp))
            exact = self.op.columns(self.X)(S).T  # k(X[S], X), any engine's X
            self._rows_error = ((exact - self.K[S]).astype(np.float32), n / S.size)
        C = C.reshape(n, -1)
        SC = C if self.sw is None else C * self.sw[:, None]
        dK, share = self._rows_error
        measured = ERROR_MARGIN * np.sqrt(share) * np.linalg.norm(
            dK @ SC.astype(np.float32), axis=0)
        bound = float(np.finfo(self.K.dtype).eps) * self._colnorm * np.linalg.norm(SC, axis=0)
        return np.minimum(measured.astype(np.float64), bound)

    @property
    def eps(self):
        """Relative accuracy of the held (or computed) kernel entries."""
        return float(np.finfo(self.dtype if self.K is not None else np.float64).eps)

    def nbytes(self):
        """Bytes of the held kernel matrix (0 when recomputed on every product)."""
        return 0 if self.K is None else self.K.nbytes
