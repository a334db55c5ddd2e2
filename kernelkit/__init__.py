"""Scikit-learn compatible kernel machines that scale (kernelkit)."""

from ._config import config_context, get_config, set_config
from .kernel_ridge import KernelRidge, KernelRidgeClassifier, NTKRidge, NTKRidgeClassifier

__version__ = "0.1.0.dev0"

__all__ = ["set_config", "get_config", "config_context", "KernelRidge", "KernelRidgeClassifier",
           "NTKRidge", "NTKRidgeClassifier", "__version__"]
