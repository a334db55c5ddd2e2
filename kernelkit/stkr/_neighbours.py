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
location within ``SLACK * R`` has ``a <= (SLACK * R + M) / (1 - RHO) = T``. A row is
finished when its buffer of the ``K`` smallest approximations holds every entry up to
``T``; the others are searched again with a larger ``K`` (ties at the ``k``-th
distance can make the neighbourhood large).

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

  In the fit (dense rows) the rows are first sorted by their projection ``p`` on
  the leading principal direction ``v`` of a sample (so neighbours sit close in the
  order), and a panel multiplies its columns only up to a *window*: since
  ``|x - y| >= |p_x - p_y| / |v|`` (less a rounding allowance), a pair whose gap
  exceeds what the panel's buffers say a candidate can reach is left out. Which rows
  are complete is decided from the final buffers: a row is finished only if every
  pair left out has ``d2 > T (1 + RHO) + M``, hence ``a > T`` (it could not have been
  a candidate); the others are searched again whole. The candidates are therefore
  the same as those of the full search, and the window only saves products: on
  10,000 Fashion-MNIST images (28% of the variance on the first component) 15% of the
  half Gram matrix, about 9% of the search's CPU time net of the sorting; windows
  from the exact radii would leave out about half of it.
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
REGROW = 2.0  # a row searched whole again, in units of its columns' products (windows)
SORT_MIN = 0  # sorted rows and windows (the fit's dense rows) above max(TILE, this) rows


def use_tree(n_features):
    """Whether the k-d tree search serves rows of ``n_features`` features.

    Measured (the search alone, 10 Gaussian clusters, k = 7, 2 shared cores, medians
    of 3 alternated runs), time of the tree over that of the Gram search: at 20,000
    rows 0.08 (d = 4), 0.3 (d = 8 to 16), 0.67 (d = 24), 1.0 (d = 32); at 60,000 rows
    0.07 (d = 4), 0.24 (d = 8), 0.48 (d = 12). The tree's lead shrinks with ``n`` as
    ``d`` grows, so the switch sits at 16, below the break-even of 20,000 rows.
    """
    return n_features <= TREE_MAX_D


def sq_norms(A, factor=1.0):
    """Squared Euclidean norms of the rows of a dense or CSR matrix (dense: of the rows
    ``A * factor``, scaled a block at a time, each row's sum as on a scaled copy)."""
    if sparse.issparse(A):
        return np.asarray(A.multiply(A).sum(axis=1)).ravel()
    if factor == 1.0:
        return np.einsum("ij,ij->i", A, A)
    out = np.empty(A.shape[0])
    step = max(1, 2**20 // max(1, A.shape[1]))
    for s in range(0, A.shape[0], step):
        B = A[s:s + step] * factor
        out[s:s + step] = np.einsum("ij,ij->i", B, B)
    return out


def _budget_rows(n_cols, bytes_per=8, copies=4):
    budget = float(get_config()["working_memory"]) * 2**20
    return max(1, int(budget // (bytes_per * copies * max(1, n_cols))))


def pair_sq_dists(Q, U, rows, cols, engine="numpy", factor=1.0):
    """``|Q[rows] - U[cols]|^2`` pair by pair, computed from differences (exact to
    rounding); dense rows are read as ``Q * factor`` and ``U * factor``."""
    out = np.empty(rows.size)
    if not sparse.issparse(Q):
        select_loops(__package__, engine).pair_sq_dists(Q, U, rows, cols, out, factor)
        return out
    step = _budget_rows(Q.shape[1], copies=3)
    for s in range(0, rows.size, step):
        D = Q[rows[s:s + step]] - U[cols[s:s + step]]
        out[s:s + step] = sq_norms(D)
    return out


class _Tree:
    """k-d tree over the locations: exact distances up to rounding."""

    def __init__(self, Q, U, factor=1.0):
        self.Q = Q.toarray() if sparse.issparse(Q) else Q if factor == 1.0 else Q * factor
        Ud = U.toarray() if sparse.issparse(U) else U if factor == 1.0 else U * factor
        self.tree = KDTree(Ud)
        self.margin = np.zeros(Q.shape[0])

    def smallest(self, K, rows=None):
        Q = self.Q if rows is None else self.Q[rows]
        d, i = self.tree.query(Q, k=K)
        return d * d, i


class _Gemm:
    """Blocked Gram products; on the training rows the upper panels only.

    With ``bound`` (the fit's dense rows, more than a tile of them) the rows are first
    sorted by their projection on the leading principal direction of a sample, and
    each panel multiplies only the columns up to its *window*: the projection gap
    bounds the distance from below, so the columns past it cannot be candidates of
    the panel's rows (see :meth:`_ends` and :meth:`_skipped_bounds`).
    """

    def __init__(self, Q, U, symmetric, engine, nq, nu, bound=None, factor=1.0):
        self.loops, self.factor = select_loops(__package__, engine), factor
        d = U.shape[1]
        uncentred = (2 * d + 16) * _U64 * (nq + nu.max())
        self.order = self.pos = None
        self.bound, self.skip_lb2 = None, None
        if sparse.issparse(U):
            self.Qc, self.Uc, self.nq, self.nu = Q, U, nq, nu
            self.margin = uncentred
        else:
            # centred: float32's error is relative to the norms, and the mean is far
            # from the rows' spread in typical data (pixels, counts); the norms of the
            # float64 centred rows stand for those of their float32 roundings (the
            # difference, 2 u32 |c|^2, is within the margin)
            mu = U.mean(axis=0) * factor
            v = (_direction(U, mu, factor) if symmetric and bound is not None
                 and U.shape[0] > max(TILE, SORT_MIN) else None)
            if v is None:
                self.Uc, self.nu = self._centred32(U, mu)
            else:
                self._sorted32(U, mu, v)
                self.bound = bound
            self.Qc, self.nq = (self.Uc, self.nu) if symmetric else self._centred32(Q, mu)
            self.margin = (2 * d + 24) * _U32 * (self.nq + self.nu.max()) + uncentred
        # the selection pass works in the tiles' precision (float32: twice the lanes)
        nu_cols = self.nu if self.order is None else self.nu[self.order]
        self.nu_tile = nu_cols.astype(self.Uc.dtype)
        self.symmetric = symmetric

    def _centred32(self, A, mu):
        """``A - mu`` rounded to float32, and the squared norms of ``A - mu`` (float64)."""
        out, norms = np.empty(A.shape, dtype=np.float32), np.empty(A.shape[0])
        self.loops.centre32(A, mu, out, norms, self.factor)
        return out, norms

    def _sorted32(self, A, mu, v):
        """The centred float32 rows in the order of ``proj = (A - mu) . v`` (ascending),
        with what the windows need: ``proj`` sorted, the rows' positions, and the
        rounding bounds of the projections."""
        n, d = A.shape
        self.nu, proj = np.empty(n), np.empty(n)
        self.loops.project(A, mu, v, self.nu, proj, self.factor)
        self.order = np.argsort(proj, kind="stable")
        self.pos = np.empty(n, dtype=np.intp)
        self.pos[self.order] = np.arange(n)
        self.Uc = np.empty(A.shape, dtype=np.float32)
        self.loops.centre32_rows(A, self.order, mu, self.Uc, self.factor)
        self.proj = proj[self.order]
        # |proj_i - (x_i - mu) . v| <= gamma_(d+2) |x_i - mu| |v| (the differences'
        # rounding and the dot product's, any summation order), so
        # |x_i - x_j| >= (|proj_i - proj_j| - 2 err) / |v|
        self.vnorm = float(np.sqrt(v @ v)) * (1.0 + 1e-12)
        self.err = (d + 8) * _U64 * float(np.sqrt(self.nu.max())) * self.vnorm * 1.01

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

        def panel(i0, i1, j0, end):
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
            while j0 < end:
                j1 = min(j0 + width, end)
                P = self._product(self.Qc[i0:i1], self.Uc[j0:j1])
                loops.keep_smallest(P, self.nu_tile, j0, val[i0:i1], idx[i0:i1])
                s = max(j0, i1) - j0
                if symmetric and s < j1 - j0:
                    loops.keep_smallest_columns(P, self.nu_tile, i0, val[j0 + s:j1],
                                                idx[j0 + s:j1], s)
                j0 = j1

        # row panels on kernelkit's pool, one BLAS thread each: a worker's product and
        # its selection run back to back on one core, the panel still in its cache
        if self.bound is None:
            map_row_blocks(lambda i0, i1: panel(i0, i1, i0 if symmetric else 0, nu), nq,
                           PANEL_ROWS)
        else:  # sorted rows: the diagonal tiles, then each panel up to its window
            def diagonal(i0, i1):
                return min(nu, i0 + width * -(-(i1 - i0) // width))

            map_row_blocks(lambda i0, i1: panel(i0, i1, i0, diagonal(i0, i1)), nq, PANEL_ROWS)
            need = np.full(nq, np.inf)
            rows, margin = self.order, self.margin[self.order]
            for val, _ in buffers.values():  # any buffer bounds its rows
                np.minimum(need, self.bound(val + self.nq[rows, None], rows, margin),
                           out=need)
            ends = self._ends(need, diagonal)
            map_row_blocks(lambda i0, i1: panel(i0, i1, diagonal(i0, i1), ends[i0][1]), nq,
                           PANEL_ROWS)
        vals, idxs = zip(*buffers.values())
        val, idx = (vals[0], idxs[0]) if len(vals) == 1 else _k_smallest(
            np.concatenate(vals, axis=1), K, np.concatenate(idxs, axis=1))
        if self.order is not None:  # back to the rows' own order and indices
            val[self.order], idx[self.order] = val.copy(), np.where(
                idx >= 0, self.order[np.maximum(idx, 0)], -1)
            self.skip_lb2 = self._skipped_bounds(ends)
        return val + self.nq[:, None], idx

    def _ends(self, need, diagonal):
        """Per panel ``i0``: ``(i1, end)``, the columns (sorted positions) it multiplies.

        ``need`` bounds, per position, the squared distance past which no pair can be
        a candidate (from the buffers of the diagonal tiles); the projection gap turns
        it into the positions each row reaches, to its right (its panel's columns)
        and to its left (the columns of the panels before it). A panel's end
        minimises its products plus a whole-row search of each row left short of its
        reach (:meth:`_smallest_rows`). Which rows are complete is decided afterwards
        from the final buffers (:meth:`_skipped_bounds`): this choice affects the time
        only.
        """
        n, p = self.Uc.shape[0], self.proj
        with np.errstate(invalid="ignore"):
            half = np.sqrt(need) * self.vnorm * 1.001 + 2.0 * self.err
        half = np.nan_to_num(half, nan=np.inf)
        right = np.searchsorted(p, p + half, side="right")  # first position out of reach
        left = np.searchsorted(p, p - half, side="left")  # first position within reach
        ends = {}
        for i0 in range(0, n, PANEL_ROWS):
            i1 = min(i0 + PANEL_ROWS, n)
            # the panel's rows, and the rows past it that reach back into it
            reach = np.sort(np.r_[right[i0:i1], np.flatnonzero(left[i1:] < i1) + i1 + 1])
            cand = np.unique(np.clip(np.r_[reach, n], diagonal(i0, i1), n))
            short = reach.size - np.searchsorted(reach, cand, side="right")
            cost = (i1 - i0) * (cand - i0) + REGROW * n * short
            ends[i0] = (i1, int(cand[np.argmin(cost)]))
        return ends

    def _skipped_bounds(self, ends):
        """Per row (own order): a lower bound of the squared distance of every pair
        that no product covered (``inf``: none was left out).

        Panel ``i0:i1`` with window end ``e`` left out the pairs ``(i, j)``, ``i`` in
        the panel and ``j >= e``: for its rows the nearest left out is ``e``, for a
        row ``j >= e`` the panel's last row ``i1 - 1`` (the projections are sorted).
        """
        n, p = self.Uc.shape[0], self.proj
        gap, last = np.full(n, np.inf), np.full(n, -1, dtype=np.intp)
        for i0, (i1, e) in ends.items():
            if e < n:
                gap[i0:i1] = p[e] - p[i0:i1]
                last[e] = max(last[e], i1 - 1)
        last = np.maximum.accumulate(last)
        left = last >= 0
        gap[left] = np.minimum(gap[left], p[left] - p[last[left]])
        lb = np.maximum(gap * (1.0 - 1e-15) - 2.0 * self.err, 0.0) / self.vnorm
        out = np.empty(n)
        out[self.order] = lb * lb * (1.0 - 1e-12)
        return out

    def _rows_values(self, rows):
        q = rows if self.pos is None else self.pos[rows]
        nu = self.nu if self.order is None else self.nu[self.order]
        return self.nq[rows, None] + nu[None, :] - 2.0 * self._product(self.Qc[q], self.Uc)

    def _smallest_rows(self, rows, K):
        """The ``K`` smallest of whole rows (the rows a panel buffer did not finish)."""
        vals, idxs = [], []
        step = _budget_rows(self.Uc.shape[0])
        for s in range(0, rows.size, step):
            v, i = _k_smallest(self._rows_values(rows[s:s + step]), K)
            vals.append(v)
            idxs.append(i if self.order is None else self.order[i])
        return np.concatenate(vals), np.concatenate(idxs)


def _direction(U, mu, factor, rows=512, steps=12):
    """Leading principal direction of a sample of the rows ``U * factor`` (power
    iteration; None when the sample does not spread). Any direction is correct; this
    one orders the rows so that neighbours sit close in the projection."""
    S = U[::max(1, U.shape[0] // rows)] * factor - mu
    v = S[np.argmax(np.einsum("ij,ij->i", S, S))]
    for _ in range(steps):
        w = S.T @ (S @ v)
        norm = float(np.sqrt(w @ w))
        if not 0.0 < norm < np.inf:
            return None
        v = w / norm
    return v


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


def _beyond(T, margin):
    """Squared distance past which every pair has ``a > T`` (``d2 <= a (1 + RHO) + M``)."""
    return (T * (1.0 + RHO) + margin) * (1.0 + 1e-12)


def candidates(Q, U, k, same_rel, slack, engine="numpy", symmetric=False, norms=None,
               factor=1.0):
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
    factor : float, default=1.0
        Dense rows are read as ``Q * factor`` and ``U * factor`` (a power of two: the
        values of a scaled copy, without the copy).

    Returns
    -------
    indptr : ndarray of int, shape (n_queries + 1,)
    indices : ndarray of int
        Candidate locations of query ``i`` in ``indices[indptr[i]:indptr[i + 1]]``.
    """
    nq, nu = Q.shape[0], U.shape[0]
    K = int(min(nu, 2 * k + 10))
    norm_q, norm_u = (sq_norms(Q, factor), sq_norms(U, factor)) if norms is None else norms
    same_thr = same_rel * (norm_q + norm_u.max())
    tree = use_tree(U.shape[1])

    def bound(a, rows, margin):  # the sorted panels' windows (see _Gemm._ends)
        return _beyond(_thresholds(a, margin, same_thr[rows], k, slack, False)[0], margin)

    search = (_Tree(Q, U, factor) if tree
              else _Gemm(Q, U, symmetric, engine, norm_q, norm_u, bound, factor))
    a, idx = search.smallest(K)
    skipped = getattr(search, "skip_lb2", None)  # pairs no product covered (sorted rows)
    got_rows, got_cols = [], []
    rows = np.arange(nq)
    while rows.size:
        T, done = _thresholds(a, search.margin[rows], same_thr[rows], k, slack, K >= nu)
        if skipped is not None:  # complete: every left-out pair has a > T
            lb2 = skipped[rows]
            done &= np.isinf(lb2) | (lb2 > _beyond(T, search.margin[rows]))
            skipped = None
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
