"""Neighbourhoods of the kNN graph: a fast search for candidates, then exact distances.

The graph of :mod:`._graph` needs, for each query row ``q`` and the training locations
``U``, the squared distances to its nearest location and to every location within
``SLACK * r_q`` (``r_q`` the distance to the ``k``-th nearest other location). A search
finds a *superset* of these from approximate distances whose error is bounded
rigorously, and the distances of the candidate pairs are then computed exactly
(:func:`pair_sq_dists`: differences, not Gram products). The graph therefore does not
depend on which search ran, nor on its blocking or its engine.

The bound: every approximate squared distance ``a`` satisfies ``a (1 - RHO) - M <= d2 <=
a (1 + RHO) + M`` (``M`` per query row). Sorting a row's approximations ascending, the
first ``m`` of them hold ``k + 1`` locations that cannot be the same point as the query
(their lower bound exceeds the threshold of :data:`._graph.SAME`), so at least ``k`` of
them lie outside the query's own cell and ``r_q <= a_m (1 + RHO) + M = R``; every
location within ``SLACK * R`` has ``a <= (SLACK * R + M) / (1 - RHO) = T``. A row is finished when its buffer of the ``K``
smallest approximations holds every entry up to ``T``; the others are searched again
with a larger ``K`` (ties at the ``k``-th distance can make the neighbourhood large).

Two searches, chosen by the dimension (:func:`use_tree`):

* a k-d tree (scikit-learn's ``KDTree``, as ``LabelSpreading`` uses) for few features:
  its distances are direct, ``M`` is rounding only;
* blocked Gram products for many features: float32 products of the rows centred on
  the training mean (dense; twice the speed of float64 BLAS, ``M`` is float32's bound
  ``(2 d + 24) u32 (|q - mu|^2 + max |u - mu|^2)``), float64 sparse products (CSR). The
  query rows are cut into panels of ``PANEL_ROWS`` rows, each multiplied against
  ``TILE`` columns at a time; on the training rows only the columns from the panel's
  diagonal block on are multiplied (half of the Gram matrix, plus half of each
  diagonal block), each product serving its rows and, transposed, its columns right of
  the diagonal block. Each product is merged into the buffers by
  :func:`._loops.keep_smallest` and :func:`._loops.keep_smallest_columns` (Numba: one
  fused pass each). The panels run on kernelkit's thread pool with one BLAS thread
  each, so that a worker's product and its selection follow each other on one core
  (no hand-over between BLAS's threads and Numba's, the product still in cache);
  each worker keeps its own buffers, merged at the end.
"""

import threading

import numpy as np
from scipy import sparse
from sklearn.neighbors import KDTree

from .._config import get_config
from ..utils._dispatch import select_loops
from ..utils._threads import map_row_blocks, n_workers

RHO = 1e-10  # relative error allowed for: tree rounding and the exact pairs' own
_U32, _U64 = 2.0**-24, 2.0**-53
TILE = 2048  # columns of a Gram panel
PANEL_ROWS = 512  # rows of a Gram panel (the fit's diagonal blocks, half wasted, stay small)
TREE_MAX_D = 16  # k-d tree up to here: measured crossover, see use_tree


def use_tree(n_features):
    """Whether the k-d tree search serves rows of ``n_features`` features.

    Measured (the search alone, 10 Gaussian clusters, k = 7, 2 shared cores, medians
    of 3 alternated runs), time of the tree over that of the Gram search: at 20,000
    rows 0.08 (d = 4), 0.3 (d = 8 to 16), 0.67 (d = 24), 1.0 (d = 32); at 60,000 rows
    0.07 (d = 4), 0.24 (d = 8), 0.48 (d = 12). The tree's lead shrinks with ``n`` as
    ``d`` grows, so the switch sits at 16, below the break-even of 20,000 rows.
    """
    return n_features <= TREE_MAX_D


def sq_norms(A):
    """Squared Euclidean norms of the rows of a dense or CSR matrix."""
    if sparse.issparse(A):
        return np.asarray(A.multiply(A).sum(axis=1)).ravel()
    return np.einsum("ij,ij->i", A, A)


def _budget_rows(n_cols, bytes_per=8, copies=4):
    budget = float(get_config()["working_memory"]) * 2**20
    return max(1, int(budget // (bytes_per * copies * max(1, n_cols))))


def pair_sq_dists(Q, U, rows, cols, engine="numpy"):
    """``|Q[rows] - U[cols]|^2`` pair by pair, computed from differences (exact to rounding)."""
    out = np.empty(rows.size)
    if not sparse.issparse(Q):
        select_loops(__package__, engine).pair_sq_dists(Q, U, rows, cols, out)
        return out
    step = _budget_rows(Q.shape[1], copies=3)
    for s in range(0, rows.size, step):
        D = Q[rows[s:s + step]] - U[cols[s:s + step]]
        out[s:s + step] = sq_norms(D)
    return out


class _Tree:
    """k-d tree over the locations: exact distances up to rounding."""

    def __init__(self, Q, U):
        self.Q = Q.toarray() if sparse.issparse(Q) else Q
        Ud = U.toarray() if sparse.issparse(U) else U
        self.tree = KDTree(Ud)
        self.margin = np.zeros(Q.shape[0])

    def smallest(self, K, rows=None):
        Q = self.Q if rows is None else self.Q[rows]
        d, i = self.tree.query(Q, k=K)
        return d * d, i


class _Gemm:
    """Blocked Gram products; on the training rows the upper panels only."""

    def __init__(self, Q, U, symmetric, engine, nq, nu):
        self.loops = select_loops(__package__, engine)
        d = U.shape[1]
        uncentred = (2 * d + 16) * _U64 * (nq + nu.max())
        if sparse.issparse(U):
            self.Qc, self.Uc, self.nq, self.nu = Q, U, nq, nu
            self.margin = uncentred
        else:
            # centred: float32's error is relative to the norms, and the mean is far
            # from the rows' spread in typical data (pixels, counts); the norms of the
            # float64 centred rows stand for those of their float32 roundings (the
            # difference, 2 u32 |c|^2, is within the margin)
            mu = U.mean(axis=0)
            self.Uc, self.nu = self._centred32(U, mu)
            self.Qc, self.nq = (self.Uc, self.nu) if symmetric else self._centred32(Q, mu)
            self.margin = (2 * d + 24) * _U32 * (self.nq + self.nu.max()) + uncentred
        # the selection pass works in the tiles' precision (float32: twice the lanes)
        self.nu_tile = self.nu.astype(self.Uc.dtype)
        self.symmetric = symmetric

    def _centred32(self, A, mu):
        """``A - mu`` rounded to float32, and the squared norms of ``A - mu`` (float64)."""
        out, norms = np.empty(A.shape, dtype=np.float32), np.empty(A.shape[0])
        self.loops.centre32(A, mu, out, norms)
        return out, norms

    def _product(self, A, B):
        P = A @ B.T
        return P.toarray() if sparse.issparse(P) else np.asarray(P)

    def smallest(self, K, rows=None):
        if rows is not None:
            return self._smallest_rows(rows, K)
        nq, nu = self.Qc.shape[0], self.Uc.shape[0]
        width = int(min(TILE, max(64, _budget_rows(PANEL_ROWS * n_workers(), 8, 4))))
        loops, symmetric = self.loops, self.symmetric
        buffers, lock = {}, threading.Lock()

        def job(i0, i1):
            # each worker merges into buffers of its own (a panel's columns may be rows of
            # another worker's panel): no two threads write one buffer, merged at the end
            key = threading.get_ident()
            with lock:
                if key not in buffers:
                    buffers[key] = (np.full((nq, K), np.inf),
                                    np.full((nq, K), -1, dtype=np.intp))
                val, idx = buffers[key]
            # the fit: columns from the diagonal on; the columns right of the diagonal
            # block take the panel's rows too (transposed, not copied)
            for j0 in range(i0 if symmetric else 0, nu, width):
                j1 = min(j0 + width, nu)
                P = self._product(self.Qc[i0:i1], self.Uc[j0:j1])
                loops.keep_smallest(P, self.nu_tile, j0, val[i0:i1], idx[i0:i1])
                s = max(j0, i1) - j0
                if symmetric and s < j1 - j0:
                    loops.keep_smallest_columns(P, self.nu_tile, i0, val[j0 + s:j1],
                                                idx[j0 + s:j1], s)

        # row panels on kernelkit's pool, one BLAS thread each: a worker's product and
        # its selection run back to back on one core, the panel still in its cache
        map_row_blocks(job, nq, PANEL_ROWS)
        vals, idxs = zip(*buffers.values())
        val, idx = (vals[0], idxs[0]) if len(vals) == 1 else _k_smallest(
            np.concatenate(vals, axis=1), K, np.concatenate(idxs, axis=1))
        return val + self.nq[:, None], idx

    def _rows_values(self, rows):
        return self.nq[rows, None] + self.nu[None, :] - 2.0 * self._product(self.Qc[rows],
                                                                          self.Uc)

    def _smallest_rows(self, rows, K):
        """The ``K`` smallest of whole rows (the rows a panel buffer did not finish)."""
        vals, idxs = [], []
        step = _budget_rows(self.Uc.shape[0])
        for s in range(0, rows.size, step):
            v, i = _k_smallest(self._rows_values(rows[s:s + step]), K)
            vals.append(v)
            idxs.append(i)
        return np.concatenate(vals), np.concatenate(idxs)


def _k_smallest(V, K, index=None):
    """Per row, the ``K`` smallest of ``V`` ascending and their ``index`` (default: columns)."""
    if K < V.shape[1]:
        part = np.argpartition(V, K - 1, axis=1)[:, :K]
    else:
        part = np.broadcast_to(np.arange(V.shape[1]), V.shape)
    v = np.take_along_axis(V, part, axis=1)
    order = np.argsort(v, axis=1, kind="stable")
    part = np.take_along_axis(part, order, axis=1)
    i = part if index is None else np.take_along_axis(index, part, axis=1)
    return np.take_along_axis(v, order, axis=1), i


def _thresholds(a, margin, same_thr, k, slack, full):
    """Per row: ``T`` (candidates have ``a <= T``) and whether the buffer ``a`` has them all."""
    lower = a * (1.0 - RHO) - margin[:, None]
    count = np.cumsum(lower > same_thr[:, None], axis=1)
    found = count[:, -1] >= k + 1
    m = np.argmax(count >= k + 1, axis=1)
    a_m = a[np.arange(a.shape[0]), m]
    with np.errstate(invalid="ignore"):
        R = np.where(found, a_m * (1.0 + RHO) + margin, np.inf)
        T = (slack * R + margin) / (1.0 - RHO)
    done = full | (a[:, -1] > T)
    return T, done


def candidates(Q, U, k, same_rel, slack, engine="numpy", symmetric=False, norms=None):
    """Candidate locations of every query row (a superset of what the graph needs).

    Parameters
    ----------
    Q : ndarray or csr_matrix of shape (n_queries, n_features)
    U : ndarray or csr_matrix of shape (n_locations, n_features)
        Distinct training locations (``symmetric``: ``Q is U``).
    k : int
    same_rel : float
        Rows with ``d2 <= same_rel * (|q|^2 + |u|^2)`` count as one point.
    slack : float
        Radii are compared with this factor (see :mod:`._graph`).
    engine : {"numpy", "numba"}
        Engine of the Gram search's block selection.
    symmetric : bool
        ``Q`` is ``U`` (the fit): half the Gram products.
    norms : tuple of two ndarrays, optional
        ``(sq_norms(Q), sq_norms(U))`` when the caller has them.

    Returns
    -------
    indptr : ndarray of int, shape (n_queries + 1,)
    indices : ndarray of int
        Candidate locations of query ``i`` in ``indices[indptr[i]:indptr[i + 1]]``.
    """
    nq, nu = Q.shape[0], U.shape[0]
    K = int(min(nu, 2 * k + 10))
    norm_q, norm_u = (sq_norms(Q), sq_norms(U)) if norms is None else norms
    same_thr = same_rel * (norm_q + norm_u.max())
    tree = use_tree(U.shape[1])
    search = _Tree(Q, U) if tree else _Gemm(Q, U, symmetric, engine, norm_q, norm_u)
    a, idx = search.smallest(K)
    got_rows, got_cols = [], []
    rows = np.arange(nq)
    while rows.size:
        T, done = _thresholds(a, search.margin[rows], same_thr[rows], k, slack, K >= nu)
        take = (a <= T[:, None]) & done[:, None]
        got_rows.append(np.broadcast_to(rows[:, None], a.shape)[take])
        got_cols.append(idx[take])
        rows, K = rows[~done], int(min(nu, 4 * K))
        if rows.size:
            a, idx = search.smallest(K, rows)
    r, c = np.concatenate(got_rows), np.concatenate(got_cols).astype(np.intp)
    order = np.argsort(r, kind="stable")
    indptr = np.zeros(nq + 1, dtype=np.intp)
    indptr[1:] = np.cumsum(np.bincount(r, minlength=nq))
    return indptr, c[order]
