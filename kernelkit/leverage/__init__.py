"""Ridge leverage scores: exact, INK-ESTIMATE, SQUEAK / DISQUEAK, and RLS Nyström.

The ridge leverage score (RLS) of point ``i`` of a data set with ``n x n`` kernel
matrix ``K`` is

    tau_i(gamma) = [K (K + gamma I)^{-1}]_ii,   0 <= tau_i <= 1,

and their sum is the effective dimension ``d_eff(gamma) = tr(K (K + gamma I)^{-1})``.
Sampling Nyström columns with probabilities proportional to the RLS keeps a
dictionary of about ``d_eff(gamma) log n`` points with a spectral guarantee on the
approximation, instead of the ``n`` columns uniform sampling may need on
coherent data (Alaoui & Mahoney, NeurIPS 2015).

**The regulariser gamma_reg.** The papers call it gamma and apply it to the
*unnormalised* kernel matrix, as scikit-learn's ``KernelRidge(alpha=...)`` does:
kernel ridge regression solving ``(K + alpha I) c = y`` has RLS
``tau_i(gamma_reg=alpha)``. With the normalised objective
``(1/n) sum (y_i - f(x_i))^2 + lambda ||f||^2`` the same system reads
``(K + n lambda I) c = y``, so ``gamma_reg = n * lambda``. The eigenvalues of ``K``
grow like ``n``: a fixed ``gamma_reg`` lets ``d_eff`` grow with ``n``, while
``gamma_reg = n * lambda`` with a fixed ``lambda`` keeps it (nearly) constant.
kernelkit already uses ``gamma`` for the kernel scale, hence the name.

References
----------
- D. Calandriello, A. Lazaric, M. Valko. Analysis of Nyström method with
  sequential ridge leverage scores estimation. UAI 2016 (INK-ESTIMATE).
- D. Calandriello, A. Lazaric, M. Valko. Distributed adaptive sampling for kernel
  matrix approximation. AISTATS 2017 (SQUEAK, DISQUEAK).
- A. Alaoui, M. W. Mahoney. Fast randomized kernel ridge regression with
  statistical guarantees. NeurIPS 2015 (RLS sampling for Nyström).
"""

from ._common import theory_qbar
from ._exact import effective_dimension, ridge_leverage_scores
from ._ink import INKEstimate
from ._nystroem import RLSNystroem
from ._squeak import SQUEAK

__all__ = ["ridge_leverage_scores", "effective_dimension", "SQUEAK", "INKEstimate", "RLSNystroem",
           "theory_qbar"]
