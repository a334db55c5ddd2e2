"""The k-nearest-neighbour graph base kernel of STKR (``kernel="knn"``).

The graph is the symmetric kNN graph of label propagation: ``w_ij = 1`` when ``x_j``
is among the ``k`` nearest neighbours of ``x_i`` or ``x_i`` among those of ``x_j``.
Written with the distance ``r_i`` from ``x_i`` to its ``k``-th nearest other point,
``w_ij = 1[0 < d_ij <= max(r_i, r_j)]`` (ties at the ``k``-th distance included), a
rule that extends unchanged to a new point ``x``: its row of weights to the training
points is computed exactly as a training row is, so inductive predictions at the
training points equal the transductive ones.

The kernel is the normalised adjacency of label propagation ``S = D^-1/2 W D^-1/2``
averaged with the identity (the lazy walk), ``K = (I + S) / 2``: its eigenvalues lie
in ``[0, 1]`` with top eigenvalue exactly 1, so every spectral transform of it is a
positive semi-definite kernel. Distances are computed blockwise (``working_memory``)
from Gram products; two points closer than ``1e-5`` of their norms count as the same
point (no edge; the identity term instead).
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
    step = max(1, int(budget // (8 * 4 * max(1, n_cols))))  # D, masks and temporaries
    return range(0, n_rows, step), step


def _sq_dists(A, B, nb):
    na = np.einsum("ij,ij->i", A, A)
    d2 = na[:, None] + nb[None, :] - 2.0 * (A @ B.T)
    same = d2 <= _SAME * (na[:, None] + nb[None, :])
    np.maximum(d2, 0.0, out=d2)
    d2[same] = 0.0
    return d2, same


def _kth_positive(d2, same, k):
    """Squared distance to the k-th nearest other point of each row (inf: fewer exist)."""
    d = np.where(same, np.inf, d2)
    k_eff = min(k, d.shape[1]) - 1
    return np.partition(d, k_eff, axis=1)[:, k_eff]


def knn_graph(X, n_neighbors):
    """Symmetric kNN adjacency of the training points, with each point's radius.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), float64
    n_neighbors : int
        ``k``; at most ``n_samples - 1`` is used.

    Returns
    -------
    W : scipy.sparse.csr_matrix of shape (n_samples, n_samples), float64
        0/1 weights, zero diagonal.
    radius2 : ndarray of shape (n_samples,)
        Squared distance from each point to its ``k``-th nearest other point.
    """
    n = X.shape[0]
    nb = np.einsum("ij,ij->i", X, X)
    rows, cols, radius2 = [], [], np.empty(n)
    blocks, step = _row_blocks(n, n)
    for r0 in blocks:
        d2, same = _sq_dists(X[r0:r0 + step], X, nb)
        r = _kth_positive(d2, same, n_neighbors)
        radius2[r0:r0 + step] = r
        i, j = np.nonzero(~same & (d2 <= _SLACK * r[:, None]))
        rows.append(i + r0)
        cols.append(j)
    i, j = np.concatenate(rows), np.concatenate(cols)
    B = sparse.csr_matrix((np.ones(i.size), (i, j)), shape=(n, n))
    W = B.maximum(B.T).tocsr()
    return W, radius2


def knn_kernel(W):
    """``K = (I + D^-1/2 W D^-1/2) / 2`` for a symmetric adjacency ``W``.

    Returns
    -------
    K : scipy.sparse.csr_matrix
    degree : ndarray of shape (n_samples,)
        Row sums of ``W`` (at least 1, so that isolated points do not divide by 0).
    """
    degree = np.maximum(np.asarray(W.sum(axis=1)).ravel(), 1.0)
    inv = 1.0 / np.sqrt(degree)
    S = sparse.diags(inv) @ W @ sparse.diags(inv)
    K = 0.5 * (sparse.identity(W.shape[0], format="csr") + S)
    return K.tocsr(), degree


def knn_cross_matmul(Xq, X_fit, radius2, degree, n_neighbors, theta):
    """``K(Xq, X_fit) @ theta`` for the kNN kernel, blockwise over the rows of ``Xq``.

    A query's weights follow the training rule ``w = 1[0 < d <= max(r_q, r_j)]``, its
    degree is the sum of its weights, and a training point at distance 0 contributes
    the identity term 1/2.

    Parameters
    ----------
    Xq : ndarray of shape (n_queries, n_features)
    X_fit : ndarray of shape (n_samples, n_features)
    radius2, degree : ndarray of shape (n_samples,)
        As returned by :func:`knn_graph` and :func:`knn_kernel`.
    n_neighbors : int
    theta : ndarray of shape (n_samples, n_targets)

    Returns
    -------
    out : ndarray of shape (n_queries, n_targets)
    """
    nb = np.einsum("ij,ij->i", X_fit, X_fit)
    scaled = theta / np.sqrt(degree)[:, None]
    out = np.empty((Xq.shape[0], theta.shape[1]))
    blocks, step = _row_blocks(Xq.shape[0], X_fit.shape[0])
    for r0 in blocks:
        d2, same = _sq_dists(Xq[r0:r0 + step], X_fit, nb)
        r = _kth_positive(d2, same, n_neighbors)
        w = (~same & (d2 <= _SLACK * np.maximum(r[:, None], radius2[None, :]))).astype(np.float64)
        deg = np.maximum(w.sum(axis=1), 1.0)
        out[r0:r0 + step] = 0.5 * (same @ theta + (w @ scaled) / np.sqrt(deg)[:, None])
    return out
