"""Random feature maps of kernelkit's kernels and ridge models on them.

Fourier features (i.i.d., orthogonal, structured) of the RBF, Laplacian and Matérn
kernels, arc-cosine / NTK features of the infinite-width network kernels, TensorSketch of
the polynomial kernel, and the feature-space ridge that never holds the ``n x D`` matrix.
"""

from ._classifier import RandomFeaturesClassifier
from ._fourier import RandomFourierFeatures
from ._neural import ArcCosineFeatures, NTKRandomFeatures
from ._ridge import RandomFeaturesRegressor
from ._sketch import TensorSketch

__all__ = ["RandomFourierFeatures", "ArcCosineFeatures", "NTKRandomFeatures", "TensorSketch",
           "RandomFeaturesRegressor", "RandomFeaturesClassifier"]
