"""The k-nearest-neighbour graph base kernel of STKR (``kernel="knn"``).

Rows that are exactly equal are one *location* observed several times. The graph is
the symmetric kNN graph of label propagation over locations: with ``r_i`` the
distance from ``x_i`` to its ``k``-th nearest other location, ``w_ij = 1`` when
``x_i`` and ``x_j`` are at different locations and ``d_ij <= max(r_i, r_j)`` (ties at
the ``k``-th distance included). Counting locations rather than rows keeps a point
with many copies from spending its ``k`` neighbours on them (which cut the graph
into disconnected cliques).

The kernel is the lazy walk of the normalised adjacency ``S = D^-1/2 W D^-1/2``:
``K = (E + S) / 2`` with ``E_ij = 1[same location] / m`` (``m`` the copies of the
location; ``E = I`` without duplicates). Copies have equal rows in ``S``, so ``K =
E (I + S) E / 2``: positive semi-definite, eigenvalues in ``[0, 1]``, top eigenvalue 1
(when there is an edge), and a function of the locations, as a kernel must be.

A new point ``x`` stands in for the training point ``x_c`` at its nearest location
(its Voronoi cell): ``k(x, x_j) = (1[j at c] / m_c + w(x, x_j) / sqrt(deg(x) deg_j)) / 2``
with ``w(x, x_j) = 1`` for ``x_j`` not at ``c`` and either among the ``k`` nearest
locations of ``x`` (``d(x, x_j) <= r_x``) or with ``x_c`` among its own
(``d(x_c, x_j) <= r_j``). At a training point this is its row of ``K`` (inductive =
transductive); next to it, the same row (no jump: a training point that is another's
``k``-th neighbour sits exactly on that one's radius, so the reverse test is made
at ``x_c``, not at ``x``).

Rows are scaled by a power of two (exact) so that ``max |X| ~ 1`` before distances
are taken: the graph depends on the order of distances only, and this keeps it so
at any scale (``X * 1e-300``). Two rows closer than ``1e-5`` of their norms
(``d^2 <= SAME (|x|^2 + |y|^2)``) are not told apart (no edge, and they do not count
among the ``k``). Dense or CSR rows; ``W``, ``S`` and every query's row are sparse
(``O(n k)`` memory, no ``n x n`` block anywhere).

How it is computed (:mod:`._neighbours`): a k-d tree (few features) or blocked float32
Gram products with a fused selection (many features) find, with a rigorous bound on
their error, a superset of each row's neighbourhood; the squared distances of those
pairs are then computed exactly from differences, and the graph is decided on these
alone. It equals the brute-force graph of all pairwise distances
(:mod:`._graph_brute`) up to comparisons within rounding of the ``SLACK`` boundary.
"""
import numpy as np
from scipy import sparse

from ..utils._dispatch import select_loops
from ._neighbours import candidates, pair_sq_dists, sq_norms

SAME = 1e-10  # squared distance below SAME * (|x|^2 + |y|^2): the same point
# The k-th neighbour sits exactly on the radius; a distance computed twice (another
# summation order, another engine) may differ in the last bits, so radii are compared
# with this slack.
SLACK = 1.0 + 1e-9


def offset(X):
    """The mean row of a dense ``X`` where it lies farther from the origin than any row
    from it (``max |mean| > max |x - mean|``), else None (sparse: None).

    The graph depends on differences only, but :data:`SAME` compares squared distances
    with the rows' norms: features shifted far from the origin (coordinates, timestamps,
    ``+ 1e5``) would make most distinct rows one location. The fit therefore takes its
    distances between rows minus this offset (a copy), and queries the same.
    """
    if sparse.issparse(X) or X.shape[0] == 0:
        return None
    mean = X.mean(axis=0)
    spread = max(float(np.max(X.max(axis=0) - mean)), float(np.max(mean - X.min(axis=0))))
    return mean if float(np.max(np.abs(mean))) > spread else None


def max_exponent(X):
    """``e`` with ``max |X| < 2**e <= 2 max |X|`` (0 for an all-zero ``X``)."""
    a = X.data if sparse.issparse(X) else X
    amax = max(float(a.max()), -float(a.min())) if a.size else 0.0  # no |X| temporary
    return int(np.frexp(amax)[1]) if amax > 0 else 0


def scale_factor(e):
    """``2**-e`` as a float, or None where it is not representable (then only
    :func:`scale`'s ``ldexp`` scales)."""
    with np.errstate(over="ignore"):
        f = float(np.ldexp(1.0, -e))
    return f if 0.0 < f < np.inf else None


def scale(X, e):
    """``X * 2**-e``, exact (no overflow or underflow of the factor itself).

    A product by a power of two is correctly rounded as ``ldexp`` is (they differ only
    where the result is subnormal, and both round it to nearest), and a product is several
    times faster; ``ldexp`` serves where ``2**-e`` itself is not representable. The fit
    does not copy dense rows: its passes read ``X * scale_factor(e)`` (the same values).
    """
    f = scale_factor(e)
    if sparse.issparse(X):
        X = X.copy()
        X.data = X.data * f if f is not None else np.ldexp(X.data, -e)
        return X
    return X * f if f is not None else np.ldexp(X, -e)


def locations(X, engine="numpy", factor=1.0):
    """Location index of each row (exactly equal rows share one) and each location's first row.

    Locations are numbered in the order of their first row (``first`` ascending).
    Dense rows are grouped by an exact integer hash of their bits (``-0.0`` as ``0.0``;
    ``engine`` computes it: :func:`._loops.row_hashes`) and every row of a group is
    compared with the group's first; sparse rows by their canonical CSR form. Dense rows
    are those of ``X * factor`` (:func:`scale_factor`; CSR rows come scaled).

    Returns
    -------
    loc : ndarray of int, shape (n_samples,)
    first : ndarray of int, shape (n_locations,)
    """
    if not sparse.issparse(X):
        X = np.ascontiguousarray(X, dtype=np.float64)
        hashes = np.empty(X.shape[0], dtype=np.uint64)
        select_loops(__package__, engine).row_hashes(X, factor, _hash_factors(X), hashes)
        _, first, loc = np.unique(hashes, return_index=True, return_inverse=True)
        loc = loc.reshape(-1)
        dup = np.flatnonzero(first[loc] != np.arange(X.shape[0]))
        if np.array_equal(X[dup] * factor, X[first[loc[dup]]] * factor):  # no collision
            rank = np.empty(first.size, dtype=np.intp)
            rank[np.argsort(first)] = np.arange(first.size)
            return rank[loc], np.sort(first)
        keys = [r.tobytes() for r in X * factor + 0.0]
    else:
        X = X.tocsr(copy=True)
        X.sum_duplicates()  # also sorts the indices: a canonical form of each row
        X.eliminate_zeros()
        ind, dat, ptr = X.indices, X.data, X.indptr
        keys = [(ind[a:b].tobytes(), dat[a:b].tobytes()) for a, b in zip(ptr[:-1], ptr[1:])]
    ids, loc, first = {}, np.empty(X.shape[0], dtype=np.intp), []
    for i, key in enumerate(keys):
        j = ids.setdefault(key, len(first))
        if j == len(first):
            first.append(i)
        loc[i] = j
    return loc, np.asarray(first, dtype=np.intp)


def _hash_factors(X):
    """Odd random factors of :func:`._loops.row_hashes`, one per feature (seeded: the same
    in every call)."""
    mult = np.random.default_rng(0x5EED).integers(1, 2**63, X.shape[1], dtype=np.uint64)
    return mult | np.uint64(1)


def _formats(Q, U):
    """Queries in the training rows' format: CSR, or C-ordered dense rows (the compiled
    loops read rows contiguously)."""
    if sparse.issparse(U):
        return sparse.csr_matrix(Q), sparse.csr_matrix(U)
    U = np.ascontiguousarray(U)
    return np.ascontiguousarray(Q.toarray() if sparse.issparse(Q) else Q), U


def _neighbourhoods(Q, U, k, engine, symmetric, factor=1.0):
    """Candidate pairs ``(rows, cols)`` in row order with their exact ``d2`` and ``same``
    (dense rows read as ``Q * factor``, ``U * factor``)."""
    norm_q = sq_norms(Q, factor)
    norm_u = norm_q if symmetric else sq_norms(U, factor)
    indptr, cols = candidates(Q, U, k, SAME, SLACK, engine, symmetric, (norm_q, norm_u),
                              factor)
    rows = np.repeat(np.arange(Q.shape[0]), np.diff(indptr))
    d2 = pair_sq_dists(Q, U, rows, cols, engine, factor)
    same = d2 <= SAME * (norm_q[rows] + norm_u[cols])
    d2[same] = 0.0
    return rows, cols, d2, same


def _kth_valid(rows, d2, valid, k, n_rows):
    """Per row: the k-th smallest ``d2`` among its valid pairs (inf: fewer exist)."""
    order = np.lexsort((d2, rows))
    v = valid[order]
    count = np.cumsum(v)
    start = np.zeros(n_rows + 1, dtype=np.intp)
    start[1:] = np.cumsum(np.bincount(rows, minlength=n_rows))
    before = np.r_[0, count][start[:-1]]
    hit = v & (count - before[rows[order]] == k)
    r = np.full(n_rows, np.inf)
    r[rows[order][hit]] = d2[order][hit]
    return r


def _expand(Wl, loc, first):
    """Location adjacency -> row adjacency (copies share their location's row and column)."""
    if first.size == loc.size:
        return Wl
    P = sparse.csr_matrix((np.ones(loc.size), (np.arange(loc.size), loc)),
                          shape=(loc.size, first.size))
    return (P @ Wl @ P.T).tocsr()


def knn_graph(X, n_neighbors, loc, first, engine="numpy", factor=1.0):
    """Symmetric kNN adjacency over the locations, with each point's radius.

    Parameters
    ----------
    X : ndarray or scipy.sparse.csr_matrix of shape (n_samples, n_features), float64
        Already scaled (:func:`scale`), or dense rows scaled by ``factor`` as they are read.
    n_neighbors : int
        ``k``, counted in distinct locations.
    loc, first : ndarray of int
        As returned by :func:`locations`.
    engine : {"numpy", "numba"}, default="numpy"
        Engine of the Gram search's selection pass (same graph either way).
    factor : float, default=1.0
        Dense rows are ``X * factor`` (:func:`scale_factor`): the graph of the scaled
        rows without a scaled copy of ``X``.

    Returns
    -------
    W : scipy.sparse.csr_matrix of shape (n_samples, n_samples), float64
        0/1 weights, none between rows at one location.
    radius2 : ndarray of shape (n_samples,)
        Squared distance from each point to its ``k``-th nearest other location.
    reverse : scipy.sparse.csr_matrix of shape (n_locations, n_locations), bool
        ``reverse[c, b]``: ``b != c`` and ``d(x_c, x_b)^2 <= SLACK r_b^2`` (the reverse
        test of a query in the cell of ``c``).
    """
    if first.size == X.shape[0]:
        U = _formats(X, X)[1]
    else:  # the locations' rows: a gather, scaled as it is copied
        U, factor = _formats(X, X[first] * factor if factor != 1.0 else X[first])[1], 1.0
    n_loc = first.size
    rows, cols, d2, same = _neighbourhoods(U, U, n_neighbors, engine, True, factor)
    other = rows != cols
    r = _kth_valid(rows, d2, other & ~same, n_neighbors, n_loc)
    within = other & (d2 <= SLACK * r[rows])
    edge = within & ~same
    B = sparse.csr_matrix((np.ones(int(edge.sum())), (rows[edge], cols[edge])),
                          shape=(n_loc, n_loc))
    reverse = sparse.csr_matrix((np.ones(int(within.sum()), dtype=bool),
                                 (cols[within], rows[within])), shape=(n_loc, n_loc))
    return _expand(B.maximum(B.T).tocsr(), loc, first), r[loc], reverse


def normalised_adjacency(W):
    """``S = D^-1/2 W D^-1/2`` and the degrees (at least 1: isolated points do not divide by 0)."""
    degree = np.maximum(np.asarray(W.sum(axis=1)).ravel(), 1.0)
    inv = 1.0 / np.sqrt(degree)
    return (sparse.diags(inv) @ W @ sparse.diags(inv)).tocsr(), degree


def location_sum_matrix(loc, n_loc):
    """The sparse ``(n_loc, n_samples)`` 0/1 matrix that sums the rows of each location."""
    return sparse.csr_matrix((np.ones(loc.size), (loc, np.arange(loc.size))),
                             shape=(n_loc, loc.size))


def _location_sums(V, loc, n_loc, P=None):
    if n_loc == loc.size:
        out = np.empty_like(V)
        out[loc] = V
        return out
    return np.asarray((location_sum_matrix(loc, n_loc) if P is None else P) @ V)


def location_means(V, loc, counts, P=None):
    """``E V``: each row replaced by the mean of the rows at its location (``P``: the
    :func:`location_sum_matrix`, when the caller holds it)."""
    if counts.size == loc.size:  # every row its own location: E = I
        return V
    sums = _location_sums(V, loc, counts.size, P)
    return (sums / counts.reshape((-1,) + (1,) * (V.ndim - 1)))[loc]


def knn_cross_matmul(Xq, X_fit, fit, n_neighbors, theta, engine="numpy"):
    """``K(Xq, X_fit) @ theta`` for the kNN kernel, sparse rows.

    Parameters
    ----------
    Xq : ndarray or csr_matrix of shape (n_queries, n_features)
    X_fit : ndarray or csr_matrix of shape (n_samples, n_features)
        Both scaled by the fit's power of two.
    fit : dict
        ``degree``, ``loc`` (training rows' locations), ``first``, ``reverse``
        (as :func:`knn_graph` returns them).
    n_neighbors : int
    theta : ndarray of shape (n_samples, n_targets)
    engine : {"numpy", "numba"}, default="numpy"

    Returns
    -------
    out : ndarray of shape (n_queries, n_targets)
    """
    loc, first, reverse = fit["loc"], fit["first"], fit["reverse"]
    n_loc, nq = first.size, Xq.shape[0]
    counts = np.bincount(loc, minlength=n_loc).astype(np.float64)
    Xq, U = _formats(Xq, X_fit if n_loc == X_fit.shape[0] else X_fit[first])
    rows, cols, d2, same = _neighbourhoods(Xq, U, n_neighbors, engine, symmetric=False)
    # the query's cell: its nearest location, ties to the location seen first (as argmin)
    order = np.lexsort((first[cols], d2, rows))
    starts = np.searchsorted(rows[order], np.arange(nq))
    cell = cols[order[starts]]
    # the reverse test at the cell's point: pairs it adds to the candidates
    R = reverse[cell]
    r_rows = np.repeat(np.arange(nq), np.diff(R.indptr))
    keys, r_keys = rows * n_loc + cols, r_rows * n_loc + R.indices
    new = ~np.isin(r_keys, keys)
    nr, nc = r_rows[new], R.indices[new]
    nd2 = pair_sq_dists(Xq, U, nr, nc, engine)
    nsame = nd2 <= SAME * (sq_norms(Xq)[nr] + sq_norms(U)[nc])
    rows, cols = np.r_[rows, nr], np.r_[cols, nc]
    d2, same = np.r_[d2, nd2], np.r_[same, nsame]
    in_reverse = np.r_[np.isin(keys, r_keys), np.ones(nr.size, dtype=bool)]
    valid = (cols != cell[rows]) & ~same
    r = _kth_valid(rows, d2, valid, n_neighbors, nq)
    w = valid & ((d2 <= SLACK * r[rows]) | in_reverse)
    Wq = sparse.csr_matrix((np.ones(int(w.sum())), (rows[w], cols[w])), shape=(nq, n_loc))
    deg = np.maximum(Wq @ counts, 1.0)
    sums = _location_sums(theta, loc, n_loc)
    scaled = _location_sums(theta / np.sqrt(fit["degree"])[:, None], loc, n_loc)
    ident = sums[cell] / counts[cell][:, None]
    return 0.5 * (ident + np.asarray(Wq @ scaled) / np.sqrt(deg)[:, None])
