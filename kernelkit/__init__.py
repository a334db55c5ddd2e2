"""Scikit-learn compatible kernel machines that scale (kernelkit)."""

from ._config import config_context, get_config, set_config
from .eigenpro import EigenProClassifier, EigenProRegressor
from .leverage import SQUEAK, INKEstimate, RLSNystroem, effective_dimension, ridge_leverage_scores
from .online import KONSClassifier, KONSRegressor
from .random_features import (
    ArcCosineFeatures,
    NTKRandomFeatures,
    RandomFeaturesClassifier,
    RandomFeaturesRegressor,
    RandomFourierFeatures,
    TensorSketch,
)
from .ridge import (
    FalkonClassifier,
    FalkonRegressor,
    InfiniteWidthClassifier,
    InfiniteWidthRegressor,
    KernelRidge,
    KernelRidgeClassifier,
    KernelRidgeClassifierCV,
    KernelRidgeCV,
    NTKRidge,
    NTKRidgeClassifier,
)
from .stkr import STKRClassifier, STKRRegressor
from .thinning import KernelThinning, kernel_thinning

__version__ = "0.1.0.dev0"

__all__ = [
    "set_config", "get_config", "config_context",
    "KernelRidge", "KernelRidgeClassifier", "NTKRidge", "NTKRidgeClassifier",
    "KernelRidgeCV", "KernelRidgeClassifierCV",
    "InfiniteWidthRegressor", "InfiniteWidthClassifier", "FalkonRegressor", "FalkonClassifier",
    "EigenProRegressor", "EigenProClassifier",
    "ridge_leverage_scores", "effective_dimension", "SQUEAK", "INKEstimate", "RLSNystroem",
    "KernelThinning", "kernel_thinning",
    "KONSRegressor", "KONSClassifier",
    "STKRRegressor", "STKRClassifier",
    "RandomFourierFeatures", "ArcCosineFeatures", "NTKRandomFeatures", "TensorSketch",
    "RandomFeaturesRegressor", "RandomFeaturesClassifier",
    "__version__",
]
