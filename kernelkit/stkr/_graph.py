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
at any scale (``X * 1e-300``). Distances come blockwise (``working_memory``) from Gram
products; two rows closer than ``1e-5`` of their norms are not told apart (no edge).
Dense or CSR rows.
"""

import numpy as np
from scipy import sparse

from .._config import get_config

_SAME = 1e-10  # squared distance below _SAME * (|x|^2 + |y|^2): the same point
# The k-th neighbour sits exactly on the radius; Gram-product distances of the same pair
# differ in the last bits between blocks, so radii are compared with this slack.
_SLACK = 1.0 + 1e-9


def _row_blocks(n_rows, n_cols):
    budget = float(get_config()["working_memory"]) * 2**20
    step = max(1, int(budget // (8 * 6 * max(1, n_cols))))  # D, masks and temporaries
    return range(0, n_rows, step), step


def max_exponent(X):
    """``e`` with ``max |X| < 2**e <= 2 max |X|`` (0 for an all-zero ``X``)."""
    a = X.data if sparse.issparse(X) else X
    amax = float(np.abs(a).max()) if a.size else 0.0
    return int(np.frexp(amax)[1]) if amax > 0 else 0


def scale(X, e):
    """``X * 2**-e``, exact (no overflow or underflow of the factor itself)."""
    if sparse.issparse(X):
        X = X.copy()
        X.data = np.ldexp(X.data, -e)
        return X
    return np.ldexp(X, -e)


def _sq_norms(A):
    if sparse.issparse(A):
        return np.asarray(A.multiply(A).sum(axis=1)).ravel()
    return np.einsum("ij,ij->i", A, A)


def _sq_dists(A, B, nb):
    na = _sq_norms(A)
    P = A @ B.T
    P = P.toarray() if sparse.issparse(P) else np.asarray(P)
    d2 = na[:, None] + nb[None, :] - 2.0 * P
    same = d2 <= _SAME * (na[:, None] + nb[None, :])
    np.maximum(d2, 0.0, out=d2)
    d2[same] = 0.0
    return d2, same


def _kth(d2, excluded, k):
    """Squared distance to the k-th nearest non-excluded column (inf: fewer exist)."""
    d = np.where(excluded, np.inf, d2)
    k_eff = min(k, d.shape[1]) - 1
    return np.partition(d, k_eff, axis=1)[:, k_eff]


def locations(X):
    """Location index of each row (exactly equal rows share one) and each location's first row.

    Returns
    -------
    loc : ndarray of int, shape (n_samples,)
    first : ndarray of int, shape (n_locations,)
    """
    if not sparse.issparse(X):
        _, first, loc = np.unique(X, axis=0, return_index=True, return_inverse=True)
        return loc.reshape(-1), first
    X = X.tocsr(copy=True)
    X.sum_duplicates()  # also sorts the indices: a canonical form of each row
    X.eliminate_zeros()
    ids, loc, first = {}, np.empty(X.shape[0], dtype=np.intp), []
    for i in range(X.shape[0]):
        a, b = X.indptr[i], X.indptr[i + 1]
        key = (X.indices[a:b].tobytes(), X.data[a:b].tobytes())
        if key not in ids:
            ids[key] = len(first)
            first.append(i)
        loc[i] = ids[key]
    return loc, np.asarray(first, dtype=np.intp)


def knn_graph(X, n_neighbors, loc, first):
    """Symmetric kNN adjacency over the locations, with each point's radius.

    Parameters
    ----------
    X : ndarray or scipy.sparse.csr_matrix of shape (n_samples, n_features), float64
        Already scaled (:func:`scale`).
    n_neighbors : int
        ``k``, counted in distinct locations.
    loc, first : ndarray of int
        As returned by :func:`locations`.

    Returns
    -------
    W : scipy.sparse.csr_matrix of shape (n_samples, n_samples), float64
        0/1 weights, none between rows at one location.
    radius2 : ndarray of shape (n_samples,)
        Squared distance from each point to its ``k``-th nearest other location.
    """
    n = X.shape[0]
    nb = _sq_norms(X)
    not_first = np.ones(n, dtype=bool)
    not_first[first] = False
    rows, cols, radius2 = [], [], np.empty(n)
    blocks, step = _row_blocks(n, n)
    for r0 in blocks:
        d2, same = _sq_dists(X[r0:r0 + step], X, nb)
        own = same | (loc[r0:r0 + step, None] == loc[None, :])
        r = _kth(d2, own | not_first[None, :], n_neighbors)
        radius2[r0:r0 + step] = r
        i, j = np.nonzero(~own & (d2 <= _SLACK * r[:, None]))
        rows.append(i + r0)
        cols.append(j)
    i, j = np.concatenate(rows), np.concatenate(cols)
    B = sparse.csr_matrix((np.ones(i.size), (i, j)), shape=(n, n))
    return B.maximum(B.T).tocsr(), radius2


def normalised_adjacency(W):
    """``S = D^-1/2 W D^-1/2`` and the degrees (at least 1: isolated points do not divide by 0)."""
    degree = np.maximum(np.asarray(W.sum(axis=1)).ravel(), 1.0)
    inv = 1.0 / np.sqrt(degree)
    return (sparse.diags(inv) @ W @ sparse.diags(inv)).tocsr(), degree


def location_means(V, loc, counts):
    """``E V``: each row replaced by the mean of the rows at its location."""
    sums = np.zeros((counts.size,) + V.shape[1:])
    np.add.at(sums, loc, V)
    return (sums / counts.reshape((-1,) + (1,) * (V.ndim - 1)))[loc]


def knn_cross_matmul(Xq, X_fit, fit, n_neighbors, theta):
    """``K(Xq, X_fit) @ theta`` for the kNN kernel, blockwise over the rows of ``Xq``.

    Parameters
    ----------
    Xq : ndarray or csr_matrix of shape (n_queries, n_features)
    X_fit : ndarray or csr_matrix of shape (n_samples, n_features)
        Both scaled by the fit's power of two.
    fit : dict
        ``radius2``, ``degree``, ``loc`` (training rows' locations), ``first``.
    n_neighbors : int
    theta : ndarray of shape (n_samples, n_targets)

    Returns
    -------
    out : ndarray of shape (n_queries, n_targets)
    """
    loc, radius2 = fit["loc"], fit["radius2"]
    counts = np.bincount(loc).astype(np.float64)
    not_first = np.ones(X_fit.shape[0], dtype=bool)
    not_first[fit["first"]] = False
    nb = _sq_norms(X_fit)
    scaled = theta / np.sqrt(fit["degree"])[:, None]
    loc_sum = np.zeros((counts.size, theta.shape[1]))
    np.add.at(loc_sum, loc, theta)
    out = np.empty((Xq.shape[0], theta.shape[1]))
    blocks, step = _row_blocks(Xq.shape[0], X_fit.shape[0])
    for r0 in blocks:
        d2, same = _sq_dists(Xq[r0:r0 + step], X_fit, nb)
        near = d2.argmin(axis=1)  # the nearest training point stands for the query itself
        cell = loc[near]
        own = same | (cell[:, None] == loc[None, :])
        r = _kth(d2, own | not_first[None, :], n_neighbors)
        d2c = _sq_dists(X_fit[near], X_fit, nb)[0]
        w = (~own & ((d2 <= _SLACK * r[:, None]) | (d2c <= _SLACK * radius2[None, :])))
        w = w.astype(np.float64)
        deg = np.maximum(w.sum(axis=1), 1.0)
        ident = loc_sum[cell] / counts[cell][:, None]
        out[r0:r0 + step] = 0.5 * (ident + (w @ scaled) / np.sqrt(deg)[:, None])
    return out
