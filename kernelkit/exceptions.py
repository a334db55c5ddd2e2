"""Warnings kernelkit's estimators raise beyond scikit-learn's
(:mod:`sklearn.exceptions`: ``ConvergenceWarning``, ``EfficiencyWarning``, ...)."""

__all__ = ["DegenerateKernelWarning"]


class DegenerateKernelWarning(UserWarning):
    """The kernel is nearly the identity matrix on the training rows (its length scale
    does not fit the features' scale): the model cannot generalise beyond them."""
