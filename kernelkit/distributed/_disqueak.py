"""DISQUEAK on ``dask.distributed`` futures; public as ``kernelkit.distributed.fit_disqueak``.

:func:`fit_disqueak` runs the merge tree of a :class:`kernelkit.leverage.SQUEAK`
estimator on a ``dask.distributed`` cluster: each data partition is scattered to a
worker once, reduced there to a dictionary by sequential SQUEAK, and the
dictionaries, a few hundred points each, are merged pairwise up a balanced tree,
each merge running as soon as its two children are done. The final leverage
scores are computed where the partitions live; only dictionaries and the
``n`` scores travel. With the same ``random_state`` the result is the one of
``SQUEAK(n_partitions=k).fit(X)`` run locally (same tree, same seeds).
"""

import numpy as np

__all__ = ["fit_disqueak"]


def fit_disqueak(estimator, X, *, client, n_partitions=None):
    """Fit a SQUEAK estimator with DISQUEAK's merge tree on dask.distributed futures.

    Calandriello, Lazaric & Valko, "Distributed adaptive sampling for kernel
    matrix approximation", AISTATS 2017, Algorithm 2 (DISQUEAK): any merge tree
    gives an epsilon-accurate dictionary of at most ``3 qbar d_eff`` copies with
    the same ``qbar`` as sequential SQUEAK (Theorem 2); a balanced tree over
    ``k`` partitions has depth ``log2 k``.

    Parameters
    ----------
    estimator : kernelkit.leverage.SQUEAK
        The (unfitted or fitted) estimator; its parameters are used and its fitted
        attributes set, as ``estimator.fit(X)`` would.
    X : array-like of shape (n_samples, n_features)
        Training data on the client (validated there, then scattered by partition).
        ``kernel="precomputed"`` is not supported.
    client : distributed.Client
        The cluster client; the tasks run on its workers.
    n_partitions : int >= 1 or None, default=None
        Number of partitions (tree leaves); None uses ``estimator.n_partitions`` when
        it is above 1, else the number of workers (at least 2).

    Returns
    -------
    estimator : kernelkit.leverage.SQUEAK
        The fitted estimator.

    Raises
    ------
    ValueError
        As ``SQUEAK.fit``; also for a precomputed kernel, an invalid ``n_partitions`` or
        a closed client.
    TypeError
        If ``client`` is not a ``distributed.Client``.

    Examples
    --------
    >>> from distributed import Client, LocalCluster  # doctest: +SKIP
    >>> with LocalCluster(n_workers=2, processes=False) as cluster, \\
    ...         Client(cluster) as client:  # doctest: +SKIP
    ...     sq = fit_disqueak(SQUEAK(gamma_reg=10.0, qbar=4), X, client=client)
    """
    from ..utils._state import rollback

    with rollback(estimator):  # a rejected call leaves the estimator as it was
        return _fit_disqueak(estimator, X, client, n_partitions)


def _fit_disqueak(estimator, X, client, n_partitions):
    from distributed import Client

    from ..leverage._common import _take
    from ..leverage._squeak import (
        SQUEAK,
        _partition_scores,
        _seeds,
        _squeak_merge,
        _squeak_sequential,
        _tree_pairs,
    )
    from ..utils._validation import check_scalar_param
    from ._operator import _resolve_client

    if not isinstance(client, Client):
        raise TypeError(f"client must be a distributed.Client, got {type(client).__name__}.")
    _resolve_client(client)  # a closed one is a clear ValueError
    if not isinstance(estimator, SQUEAK):
        raise TypeError(f"estimator must be a kernelkit SQUEAK, got {type(estimator).__name__}.")
    if estimator._precomputed():
        raise ValueError("fit_disqueak does not support kernel='precomputed'; use "
                         "SQUEAK(n_partitions=k, n_jobs=...).fit(K) instead.")
    if n_partitions is None:
        n_partitions = estimator.n_partitions
        if n_partitions == 1:
            n_partitions = max(2, len(client.scheduler_info().get("workers", {})))
    n_partitions = check_scalar_param(n_partitions, "n_partitions", low=1, low_inclusive=True,
                                      integer=True)
    saved = estimator.n_partitions
    try:
        estimator.n_partitions = n_partitions  # validated as the local path validates it
        X, kern, pts, prm = estimator._fit_setup(X)
    finally:
        estimator.n_partitions = saved
    n = X.shape[0]
    k = min(n_partitions, n)
    gamma_reg, eps, qbar = prm["gamma_reg"], prm["eps"], prm["qbar"]
    parts = np.array_split(np.arange(n), k)
    leaf_seeds, merge_seeds = _seeds(estimator.random_state, k)
    backend = estimator.backend_

    # hash=False: content-hashed keys of a repeated call collide with the released futures
    # of the previous call ("lost dependencies")
    data = client.scatter([_take(pts, part) for part in parts], hash=False)
    futures = [client.submit(_squeak_sequential, part, fut, kern, gamma_reg, eps, qbar,
                             estimator.block_size, seed, backend, pure=False)
               for part, fut, seed in zip(parts, data, leaf_seeds, strict=True)]
    node = 0
    for pairs, carry in _tree_pairs(len(futures)):
        merged = [client.submit(_squeak_merge, futures[i], futures[j], kern, gamma_reg, eps,
                                qbar, merge_seeds[node + t], backend, pure=False)
                  for t, (i, j) in enumerate(pairs)]
        node += len(pairs)
        futures = merged + ([futures[-1]] if carry else [])
    root = futures[0]
    score_futures = [client.submit(_partition_scores, root, kern, fut, gamma_reg, qbar,
                                   pure=False) for fut in data]
    d = root.result()
    scores = np.concatenate(client.gather(score_futures))
    return estimator._fit_finish(X, kern, d, scores)
