"""The brute-force kNN graph: the reference that the fast path of :mod:`._graph` equals.

All pairwise squared distances, blockwise from Gram products (``O(n^2 d)`` time), for
the same graph and the same inductive rows as :func:`._graph.knn_graph` and
:func:`._graph.knn_cross_matmul` (the implementation before the fast search); kept for
the tests and the benchmark that check the fast path against it.
"""

import numpy as np
from scipy import sparse

from .._config import get_config
from ._graph import SAME, SLACK
from ._neighbours import sq_norms


def _row_blocks(n_rows, n_cols):
    budget = float(get_config()["working_memory"]) * 2**20
    step = max(1, int(budget // (8 * 6 * max(1, n_cols))))  # D, masks and temporaries
    return range(0, n_rows, step), step


def _sq_dists(A, B, nb):
    na = sq_norms(A)
    P = A @ B.T
    P = P.toarray() if sparse.issparse(P) else np.asarray(P)
    d2 = na[:, None] + nb[None, :] - 2.0 * P
    same = d2 <= SAME * (na[:, None] + nb[None, :])
    np.maximum(d2, 0.0, out=d2)
    d2[same] = 0.0
    return d2, same


def _kth(d2, excluded, k):
    """Squared distance to the k-th nearest non-excluded column (inf: fewer exist)."""
    d = np.where(excluded, np.inf, d2)
    k_eff = min(k, d.shape[1]) - 1
    return np.partition(d, k_eff, axis=1)[:, k_eff]


def knn_graph(X, n_neighbors, loc, first):
    """``(W, radius2)`` as :func:`._graph.knn_graph`, from all pairwise distances."""
    n = X.shape[0]
    nb = sq_norms(X)
    not_first = np.ones(n, dtype=bool)
    not_first[first] = False
    rows, cols, radius2 = [], [], np.empty(n)
    blocks, step = _row_blocks(n, n)
    for r0 in blocks:
        d2, same = _sq_dists(X[r0:r0 + step], X, nb)
        own = same | (loc[r0:r0 + step, None] == loc[None, :])
        r = _kth(d2, own | not_first[None, :], n_neighbors)
        radius2[r0:r0 + step] = r
        i, j = np.nonzero(~own & (d2 <= SLACK * r[:, None]))
        rows.append(i + r0)
        cols.append(j)
    i, j = np.concatenate(rows), np.concatenate(cols)
    B = sparse.csr_matrix((np.ones(i.size), (i, j)), shape=(n, n))
    return B.maximum(B.T).tocsr(), radius2


def knn_cross_matmul(Xq, X_fit, fit, n_neighbors, theta):
    """``K(Xq, X_fit) @ theta`` as :func:`._graph.knn_cross_matmul`, from all distances."""
    loc, radius2 = fit["loc"], fit["radius2"]
    counts = np.bincount(loc).astype(np.float64)
    not_first = np.ones(X_fit.shape[0], dtype=bool)
    not_first[fit["first"]] = False
    nb = sq_norms(X_fit)
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
        w = (~own & ((d2 <= SLACK * r[:, None]) | (d2c <= SLACK * radius2[None, :])))
        w = w.astype(np.float64)
        deg = np.maximum(w.sum(axis=1), 1.0)
        ident = loc_sum[cell] / counts[cell][:, None]
        out[r0:r0 + step] = 0.5 * (ident + (w @ scaled) / np.sqrt(deg)[:, None])
    return out
