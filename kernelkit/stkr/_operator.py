"""The base kernel on the training points, seen only through products ``G @ W``.

Three kinds, one interface (:class:`GramOperator`): a kernelkit kernel evaluated
blockwise by its engine through :func:`kernelkit.kernels.resolve_kernel` (and cached
as a dense matrix when it fits in ``cache_size``), a precomputed kernel matrix, and
the sparse kNN graph kernel. STKR-Prop needs nothing else: products with ``G``, the
small labeled block ``G[L, L]``, and a few extreme eigenpairs.
"""

import warnings

import numpy as np
from scipy import linalg, sparse
from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh

from ..utils._dispatch import select_loops
from . import _graph

DENSE_EIG = 400  # up to this size eigenpairs come from a dense eigendecomposition


class GramOperator:
    """``G`` (n_samples x n_samples, symmetric PSD) through products.

    Parameters
    ----------
    matmul : callable
        ``W (n, k) -> G @ W`` as a host float64 array.
    n : int
    block : callable
        ``idx -> G[idx][:, idx]`` as a host float64 array.
    top_eigenvalue : float or None
        Known largest eigenvalue (the kNN kernel's is 1), else estimated on demand.
    """

    def __init__(self, matmul, n, block, top_eigenvalue=None):
        self._matmul = matmul
        self.n = n
        self.block = block
        self._top = top_eigenvalue
        self.n_matvec = 0

    def __call__(self, W):
        """``G @ W`` for ``W`` of shape (n,) or (n, k)."""
        self.n_matvec += 1 if W.ndim == 1 else W.shape[1]
        return self._matmul(W)

    def eigh(self, k, random_state):
        """Top ``k`` eigenpairs (descending): dense for small ``n``, else Lanczos."""
        if self.n <= DENSE_EIG or k >= self.n - 1:
            w, V = linalg.eigh(self.block(np.arange(self.n)), check_finite=False)
            return w[::-1][:k], V[:, ::-1][:, :k]
        rng = np.random.default_rng(random_state)
        op = LinearOperator((self.n, self.n), matvec=lambda v: self(np.ravel(v)),
                            matmat=self, dtype=np.float64)
        try:
            w, V = eigsh(op, k=k, which="LA", tol=1e-12, v0=rng.standard_normal(self.n),
                         ncv=min(self.n, max(2 * k + 1, 20)), maxiter=50 * self.n)
        except ArpackNoConvergence as exc:  # keep what converged; only a scale is at stake
            if len(exc.eigenvalues) < k:
                raise
            w, V = exc.eigenvalues, exc.eigenvectors
            warnings.warn("the Lanczos eigen-solver did not fully converge; using its "
                          "best estimates.", RuntimeWarning, stacklevel=4)
        order = np.argsort(w)[::-1]
        return w[order], V[:, order]

    def top_eigenvalue(self, random_state):
        """Largest eigenvalue of ``G`` (the unit of the spectral transform)."""
        if self._top is None:
            self._top = float(self.eigh(1, random_state)[0][0])
        return self._top


def dense_operator(op, X, cache_bytes):
    """A kernelkit kernel on the training points ``X`` (``op``: a ``KernelOperator``)."""
    n = X.shape[0]

    def block(idx):
        return op.block_host(X[idx])

    if 8.0 * n * n <= cache_bytes:  # the dense matrix fits: compute it once, by row blocks
        G = np.empty((n, n))
        step = max(1, int(2**27 // (8 * n)))
        for r0 in range(0, n, step):
            G[r0:r0 + step] = op.block_host(X[r0:r0 + step], X)
        if not is_symmetric(G):  # a callable that is no kernel function: say so, not diverge
            raise ValueError(f"the kernel {op.kernel!r} gave a non-symmetric matrix k(X, X) "
                             "on the training rows; STKR needs a symmetric positive "
                             "semi-definite kernel.")
        return precomputed_operator(G)

    def matmul(W):
        return np.asarray(op.engine.to_host(op.matmul(X, X, W)), dtype=np.float64)

    return GramOperator(matmul, n, block)


def is_symmetric(G):
    """Whether a kernel matrix (dense or sparse) is symmetric to rounding."""
    D = G - G.T
    if sparse.issparse(G):
        dmax = float(abs(D).max()) if D.nnz else 0.0
        gmax = float(abs(G).max()) if G.nnz else 0.0
    else:
        dmax, gmax = float(np.abs(D).max()), float(np.abs(G).max())
    return dmax <= 1e-8 * gmax


def precomputed_operator(G):
    """A kernel matrix given in full (dense or scipy.sparse)."""
    if sparse.issparse(G):
        def block(idx):
            return G[idx][:, idx].toarray()
    else:
        def block(idx):
            return G[np.ix_(idx, idx)]
    return GramOperator(lambda W: np.asarray(G @ W, dtype=np.float64), G.shape[0], block)


def graph_operator(S, loc, engine="numpy"):
    """The kNN kernel ``K = (E + S) / 2`` (see :mod:`._graph`); top eigenvalue exactly 1.

    ``S`` is the sparse normalised adjacency, ``loc`` the location of each row: ``E``
    averages over the rows at one location and is applied without forming it.
    ``engine`` picks the product's loop (:func:`._loops.lazy_walk`: scipy's sparse
    product, or its compiled twin, parallel over rows).
    """
    n = S.shape[0]
    counts = np.bincount(loc).astype(np.float64)
    S = S.tocsr()
    walk = select_loops(__package__, engine).lazy_walk
    # E's sums over the copies of each location: built once, not at every product
    P = None if counts.size == n else _graph.location_sum_matrix(loc, counts.size)

    def matmul(W):
        V = np.ascontiguousarray(W, dtype=np.float64)
        V2 = V.reshape(n, -1)
        out = np.empty(V2.shape)
        M = np.ascontiguousarray(_graph.location_means(V2, loc, counts, P))
        walk(S.indptr, S.indices, S.data, V2, M, out)
        return out.reshape(V.shape)

    def block(idx):
        li = loc[idx]
        E = (li[:, None] == li[None, :]) / counts[li][None, :]
        return 0.5 * (E + S[idx][:, idx].toarray())

    # without an edge K = E / 2; with one, S has the eigenvector D^1/2 1 (per component)
    return GramOperator(matmul, n, block, top_eigenvalue=1.0 if S.nnz else 0.5)
