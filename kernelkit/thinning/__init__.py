"""Kernel thinning: KT, target KT, root / power KT, KT+, Compress and Compress++.

Kernel thinning compresses ``n`` points into about ``sqrt(n)`` points whose empirical
distribution is much closer, in maximum mean discrepancy (MMD), to the input than an
i.i.d. subsample of the same size: ``O(n^-1/2 sqrt(log n))`` against ``n^-1/4``.

References
----------
.. [KT] R. Dwivedi and L. Mackey, "Kernel Thinning", COLT 2021; JMLR 25(152), 2024.
   Algorithm 1 (KT) = 1a (KT-SPLIT) + 1b (KT-SWAP).
.. [GKT] R. Dwivedi and L. Mackey, "Generalized Kernel Thinning", ICLR 2022: target KT,
   power KT with the alpha-power kernel, KT+ with ``k/||k||_inf + k_alpha/||k_alpha||_inf``.
.. [CPP] A. Shetty, R. Dwivedi and L. Mackey, "Distribution Compression in Near-linear
   Time", ICLR 2022: Compress (Alg. 1) and Compress++ (Alg. 2).

The sequential loops (``_loops.py``, the NumPy reference, and its compiled twin
``_loops_numba.py``, picked by the resolved engine name) run on
kernel blocks that the engine computes with its ``pairwise`` / ``matmul`` (BLAS and
fused element-wise passes), a whole kernel matrix when it fits in ``working_memory``,
else row blocks of that size (memory O(n d + working_memory)).
"""

from ._estimator import KernelThinning, kernel_thinning

__all__ = ["KernelThinning", "kernel_thinning"]
