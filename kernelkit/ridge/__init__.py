"""Kernel ridge regression and classification: exact (Cholesky, Nyström-PCG), FALKON, NTK ridge,
and the Gaussian-process view (predictive moments, the trained infinite-width ensemble)."""

from ._cv import KernelRidgeClassifierCV, KernelRidgeCV
from ._falkon import FalkonClassifier, FalkonRegressor
from ._ensemble import InfiniteWidthClassifier, InfiniteWidthRegressor
from ._kernel_ridge import KernelRidge, KernelRidgeClassifier, NTKRidge, NTKRidgeClassifier

__all__ = ["KernelRidge", "KernelRidgeClassifier", "NTKRidge", "NTKRidgeClassifier",
           "FalkonRegressor", "FalkonClassifier", "InfiniteWidthRegressor",
           "InfiniteWidthClassifier", "KernelRidgeCV", "KernelRidgeClassifierCV"]
