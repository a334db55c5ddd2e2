"""Kernel ridge regression and classification: Cholesky, Nyström-PCG and FALKON solvers."""

from ._falkon import FalkonClassifier, FalkonRegressor
from ._kernel_ridge import KernelRidge, KernelRidgeClassifier, NTKRidge, NTKRidgeClassifier

__all__ = ["KernelRidge", "KernelRidgeClassifier", "NTKRidge", "NTKRidgeClassifier",
           "FalkonRegressor", "FalkonClassifier"]
