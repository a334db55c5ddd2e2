"""Blockwise kernel products on a Dask cluster (``dask.distributed``).

kernelkit runs on one machine by default; this module spreads the operation that
dominates kernel machines on large data, the kernel matrix-vector product
``k(X, Z) @ W`` against many points ``Z``, over the workers of an existing Dask
cluster: ``Z`` is split into row chunks scattered once (one per worker), each
task computes its chunk's kernel block with the worker's own kernelkit engine, and
only the small products travel back.

* :func:`kernel_matmul` — one product ``k(X, Y) @ W`` on the cluster.
* :class:`DaskKernelOperator` — the centers kept on the workers across many
  products; what :class:`~kernelkit.eigenpro.EigenProRegressor` and
  :class:`~kernelkit.eigenpro.EigenProClassifier` use when given ``client``.
* :func:`fit_disqueak` — SQUEAK's merge-and-reduce tree (DISQUEAK) on futures.

Needs ``dask[distributed]`` (``pip install "kernelkit[dist]"``); importing
kernelkit does not.
"""

from ._disqueak import fit_disqueak
from ._operator import DaskKernelOperator, kernel_matmul

__all__ = ["kernel_matmul", "DaskKernelOperator", "fit_disqueak"]
