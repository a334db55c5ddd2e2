"""Blockwise kernel products on a Dask cluster: ``kernel_matmul`` and ``DaskKernelOperator``."""

import numpy as np

from .._config import config_context, get_config
from ..backend import resolve_backend
from ..kernels import resolve_kernel
from ..utils._validation import check_pair

# How long to wait for a scheduler given by its address.
CONNECT_TIMEOUT = "20s"


def _import_distributed(what="client"):
    try:
        import distributed
    except ImportError as exc:  # pragma: no cover - exercised only without dask
        raise ValueError(f"{what} needs dask.distributed; install it with "
                         "pip install 'kernelkit[dist]'.") from exc
    return distributed


def _resolve_client(client):
    """``(Client, owned)`` for a Client or a scheduler address (owned: close it after use).

    Raises
    ------
    ValueError
        If ``client`` is neither, or the scheduler cannot be reached.
    """
    distributed = _import_distributed()
    if isinstance(client, distributed.Client):
        if client.status not in ("running", "connecting", "newly-created"):
            raise ValueError(f"client={client!r} is not usable (status {client.status!r}): "
                             "pass an open dask.distributed.Client or a scheduler address.")
        return client, False
    if isinstance(client, str):
        try:
            return distributed.Client(client, set_as_default=False,
                                      timeout=CONNECT_TIMEOUT), True
        except (OSError, TimeoutError, ValueError) as exc:
            raise ValueError(f"could not connect to the Dask scheduler at client={client!r}: "
                             f"{exc}") from exc
    raise ValueError(f"client must be None, a dask.distributed.Client or a scheduler address "
                     f"string, got {client!r}.")


# ------------------------------------------------------------------ worker tasks
def _host(engine, a):
    return np.asarray(engine.to_host(a))


def _inputs(X):
    """Host inputs at their own float precision (never rounded to the blocks' dtype)."""
    X = np.asarray(X)
    return np.ascontiguousarray(X, dtype=X.dtype if X.dtype.kind == "f" else np.float64)


def _block_task(evaluator, X, Z, dtype, working_memory):
    with config_context(working_memory=working_memory):
        eng = evaluator.engine
        return _host(eng, evaluator.block(eng.asarray(X), eng.asarray(Z), np.dtype(dtype)))


def _matmul_task(evaluator, X, Z, W, working_memory):
    with config_context(working_memory=working_memory):
        eng = evaluator.engine
        out = evaluator.matmul(eng.asarray(X), eng.asarray(Z), eng.asarray(W))
        return _host(eng, out)


def _dot(block, W):
    return block @ W


def _rdot(block, R):
    return block.T @ R


def _cols(block, idx):
    return block[:, idx]


class DaskKernelOperator:
    """Kernel products against centers ``Z`` held on the workers of a Dask cluster.

    ``Z`` is split into ``n_chunks`` contiguous row chunks, each scattered to one
    worker once. For a batch ``X``, :meth:`prepare` has every worker compute its
    block ``k(X, Z_chunk)`` and keep it; :meth:`matmul`, :meth:`columns` and
    :meth:`rmatmul` then run next to those blocks and return only their small
    results; :meth:`release` frees them. :meth:`forward` computes ``k(X, Z) @ W``
    for any number of rows (prediction) blockwise on each worker.

    Parameters
    ----------
    client : distributed.Client
        A connected client.
    evaluator : kernelkit.kernels.KernelOperator
        The kernel and the engine name the workers use.
    Z : ndarray of shape (p, n_features)
        Centers (host float array), kept at their own precision: the kernel is
        evaluated in float64 from them, only its values are rounded to ``dtype``.
    dtype : numpy dtype
        dtype of the blocks and products.
    n_chunks : int, default=None
        Number of chunks; None means one per worker (at most ``p``).

    Notes
    -----
    The workers' memory per chunk is the chunk of ``Z`` plus, during a step, one
    ``len(X) x chunk`` block; ``working_memory`` (the client's setting, sent with
    every task) bounds the scratch memory of the workers' engines.
    """

    def __init__(self, client, evaluator, Z, dtype, n_chunks=None):
        self.client = client
        self.evaluator = evaluator
        self.dtype = np.dtype(dtype)
        self.Z = _inputs(Z)
        self.n_centers = self.Z.shape[0]
        self.xp = np
        self.working_memory = float(get_config()["working_memory"])
        workers = sorted(client.scheduler_info()["workers"])
        if not workers:
            raise ValueError("the Dask cluster of `client` has no workers.")
        n_chunks = len(workers) if n_chunks is None else int(n_chunks)
        n_chunks = max(1, min(n_chunks, self.n_centers))
        bounds = np.linspace(0, self.n_centers, n_chunks + 1).round().astype(int)
        self._chunks = []
        for c in range(n_chunks):
            b0, b1 = int(bounds[c]), int(bounds[c + 1])
            w = workers[c % len(workers)]
            fut = client.scatter(self.Z[b0:b1], workers=[w], hash=False)
            self._chunks.append((b0, b1, w, fut))

    def _submit(self, func, *args, worker):
        return self.client.submit(func, *args, workers=[worker], allow_other_workers=False,
                                  pure=False)

    def prepare(self, X):
        """Compute and keep ``k(X, Z_chunk)`` on every worker.

        Parameters
        ----------
        X : ndarray of shape (m, n_features)
            A batch, sent to every worker.

        Returns
        -------
        handle : list of distributed.Future
            One block future per chunk, for :meth:`matmul`, :meth:`columns`,
            :meth:`rmatmul`; free it with :meth:`release`.
        """
        X = _inputs(X)
        xf = self.client.scatter(X, broadcast=True, hash=False)
        return [self._submit(_block_task, self.evaluator, xf, zf, self.dtype.name,
                             self.working_memory, worker=w) for (_, _, w, zf) in self._chunks]

    def matmul(self, handle, W):
        """``k(X, Z) @ W`` for the prepared batch.

        Parameters
        ----------
        handle : list of distributed.Future
            From :meth:`prepare`.
        W : ndarray of shape (p, k)
            Coefficients of the centers; each worker receives its chunk's rows.

        Returns
        -------
        KW : ndarray of shape (m, k), ``dtype``
        """
        W = np.asarray(W, dtype=self.dtype)
        futs = [self._submit(_dot, bf, W[b0:b1], worker=w)
                for bf, (b0, b1, w, _) in zip(handle, self._chunks, strict=True)]
        parts = self.client.gather(futs)
        out = parts[0].copy()
        for part in parts[1:]:
            out += part
        return out

    def columns(self, handle, J):
        """``k(X, Z[J])`` for the prepared batch.

        Parameters
        ----------
        handle : list of distributed.Future
            From :meth:`prepare`.
        J : ndarray of int, sorted
            Center indices.

        Returns
        -------
        KJ : ndarray of shape (m, len(J)), ``dtype``
        """
        J = np.asarray(J)
        futs = []
        for bf, (b0, b1, w, _) in zip(handle, self._chunks, strict=True):
            idx = J[(J >= b0) & (J < b1)] - b0
            if idx.size:
                futs.append(self._submit(_cols, bf, idx, worker=w))
        return np.hstack(self.client.gather(futs))

    def rmatmul(self, handle, R):
        """``k(Z, X) @ R`` for the prepared batch.

        Parameters
        ----------
        handle : list of distributed.Future
            From :meth:`prepare`.
        R : ndarray of shape (m, k)
            Sent to every worker.

        Returns
        -------
        KR : ndarray of shape (p, k), ``dtype``
        """
        R = np.asarray(R, dtype=self.dtype)
        futs = [self._submit(_rdot, bf, R, worker=w)
                for bf, (_, _, w, _) in zip(handle, self._chunks, strict=True)]
        return np.vstack(self.client.gather(futs))

    def release(self, handle):
        """Free the blocks of a prepared batch on the workers.

        Parameters
        ----------
        handle : list of distributed.Future
            From :meth:`prepare`.
        """
        for f in handle:
            f.release()

    def forward(self, X, W):
        """``k(X, Z) @ W`` in float64 for any number of rows of ``X`` (prediction).

        Each worker computes its chunk's product blockwise within ``working_memory``.

        Parameters
        ----------
        X : ndarray of shape (n_X, n_features)
        W : ndarray of shape (p,) or (p, k)

        Returns
        -------
        KW : ndarray of shape (n_X,) or (n_X, k), float64
        """
        X = _inputs(X)
        W = np.asarray(W)
        xf = self.client.scatter(X, broadcast=True, hash=False)
        futs = [self._submit(_matmul_task, self.evaluator, xf, zf, W[b0:b1],
                             self.working_memory, worker=w)
                for (b0, b1, w, zf) in self._chunks]
        parts = self.client.gather(futs)
        out = np.array(parts[0], dtype=np.float64)
        for part in parts[1:]:
            out += part
        return out

    def close(self):
        """Release the centers scattered on the workers; the operator is unusable after."""
        for (_, _, _, zf) in self._chunks:
            zf.release()
        self._chunks = []


def kernel_matmul(client, kernel, X, Y, W, *, kernel_params=None, backend=None, n_chunks=None):
    """``k(X, Y) @ W`` computed on a Dask cluster, ``Y`` split over the workers.

    Each worker computes ``k(X, Y_chunk) @ W_chunk`` blockwise (within the
    ``working_memory`` of :func:`kernelkit.get_config`) with its kernelkit engine;
    the partial products are summed here. Equal to the local
    ``kernel(X, Y) @ W`` up to rounding (the sum over chunks is reassociated).

    Parameters
    ----------
    client : distributed.Client or str
        A connected client or a scheduler address.
    kernel : str, Kernel or callable
        As the estimators' ``kernel`` (a name, a :class:`kernelkit.kernels.Kernel`,
        or a callable ``f(X, Y)``).
    X : array-like of shape (n_X, n_features)
    Y : array-like of shape (n_Y, n_features)
    W : array-like of shape (n_Y,) or (n_Y, k)
    kernel_params : dict, default=None
        Parameters of a named kernel (e.g. ``{"gamma": 0.5}``) or of the callable.
    backend : {"auto", "numpy", "numba", "cupy"} or None, default=None
        Engine name used on the workers (resolved here; None follows the config).
    n_chunks : int, default=None
        Number of chunks of ``Y``; None means one per worker.

    Returns
    -------
    KW : ndarray of shape (n_X,) or (n_X, k), float64

    Raises
    ------
    ValueError
        On invalid arrays (NaN/inf, wrong dimensions, mismatched features or
        lengths), an unknown kernel, or a client that is not usable.

    Examples
    --------
    >>> import numpy as np
    >>> from distributed import Client, LocalCluster
    >>> from kernelkit.distributed import kernel_matmul
    >>> from kernelkit.kernels import RBF
    >>> with LocalCluster(n_workers=2, processes=False, dashboard_address=None) as cluster, \\
    ...         Client(cluster) as client:
    ...     X = np.random.default_rng(0).normal(size=(50, 3))
    ...     bool(np.allclose(kernel_matmul(client, RBF(0.5), X, X, np.ones(50)),
    ...                      RBF(0.5)(X).sum(axis=1)))
    True
    """
    X, Y = check_pair(X, Y, "X", "Y")
    W = np.asarray(W, dtype=np.float64)
    if W.ndim not in (1, 2) or W.shape[0] != Y.shape[0]:
        raise ValueError(f"W must have shape (n_Y,) or (n_Y, k) with n_Y={Y.shape[0]}, got "
                         f"{W.shape}.")
    if not np.all(np.isfinite(W)):
        raise ValueError("Input W contains NaN or infinity.")
    if isinstance(kernel, str) and kernel == "precomputed":
        raise ValueError("kernel='precomputed' has nothing to compute; use K @ W.")
    evaluator = resolve_kernel(kernel, kernel_params=kernel_params, n_features=X.shape[1],
                               backend=resolve_backend(backend, X))
    cl, owned = _resolve_client(client)
    try:
        op = DaskKernelOperator(cl, evaluator, np.asarray(Y, np.float64), np.float64, n_chunks)
        try:
            return op.forward(np.asarray(X, np.float64), W)
        finally:
            op.close()
    finally:
        if owned:
            cl.close()
