"""Kernel ridge regression and classification (exact solvers; NTK ridge)."""

from ._gp import InfiniteWidthClassifier, InfiniteWidthRegressor
from ._kernel_ridge import KernelRidge, KernelRidgeClassifier, NTKRidge, NTKRidgeClassifier

__all__ = ["KernelRidge", "KernelRidgeClassifier", "NTKRidge", "NTKRidgeClassifier",
           "InfiniteWidthRegressor", "InfiniteWidthClassifier"]
