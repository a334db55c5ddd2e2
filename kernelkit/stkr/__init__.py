"""Spectrally transformed kernel regression (STKR) with unlabeled data.

Zhai, Pukdee, Jin, Balcan & Ravikumar, "Spectrally Transformed Kernel Regression",
ICLR 2024 (arXiv:2402.00645): :class:`STKRRegressor`, :class:`STKRClassifier` (fitted
by STKR-Prop: kernel matrix-vector products only), and the model-selection helpers
:class:`SemiSupervisedKFold` and :func:`labeled_scorer` for tuning on few labels.
"""

from ._estimators import STKRClassifier, STKRRegressor
from ._model_selection import SemiSupervisedKFold, labeled_scorer

__all__ = ["STKRRegressor", "STKRClassifier", "SemiSupervisedKFold", "labeled_scorer"]
