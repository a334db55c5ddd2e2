"""EigenPro 2, 3 and 4: preconditioned-SGD kernel machines for large data.

:class:`EigenProRegressor` and :class:`EigenProClassifier` fit a kernel model
``f(x) = sum_j dual_coef_[j] k(x, centers_[j])`` to the squared loss by
stochastic gradient descent preconditioned with the top eigen-directions of the
kernel, computed on a small Nyström subsample:

* **EigenPro 2** (``n_centers=None``; Ma & Belkin, "Kernel machines that adapt to
  GPUs for effective large batch training", MLSys 2019): the centers are the
  training points, and the fit converges to the kernel interpolant (or, with
  ``alpha > 0``, to the kernel ridge solution) without ever forming the
  ``n x n`` kernel matrix.
* **EigenPro 3** (``algorithm="ep3"``, with ``n_centers`` an int, a fraction or centers;
  Abedsoltan, Belkin & Pandit, "Toward large kernel models", ICML 2023): the model
  lives on ``n_centers`` centers and is trained on all the data with the projected
  preconditioned step: the preconditioned stochastic gradient of a data batch is
  projected back onto the span of the centers' kernel functions by an inner
  EigenPro 2 solve of ``K(Z, Z) theta = h`` on the centers.
* **EigenPro 4** (the default with ``n_centers``; Abedsoltan, Ma, Pandit & Belkin,
  "Fast training of large kernel models with delayed projections", NeurIPS 2025):
  the batches join the model as auxiliary centers and the projection runs only
  every ``projection_period`` steps, so an epoch costs ``O(n n_centers)`` kernel
  evaluations instead of EigenPro 3's ``O(n n_centers^2 / batch_size)``.

The batch size, the step size and the number of eigen-directions are set
automatically from the kernel as in the papers (and reported as fitted
attributes); see :class:`EigenProRegressor` for the formulas.
"""

from ._classifier import EigenProClassifier
from ._estimators import EigenProRegressor

__all__ = ["EigenProRegressor", "EigenProClassifier"]
