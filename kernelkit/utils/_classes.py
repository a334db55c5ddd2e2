"""One-vs-all scores to labels: the decision function and predict of the classifiers."""

from sklearn.base import ClassifierMixin


class OneVsAllClassifierMixin(ClassifierMixin):
    """``decision_function`` and ``predict`` from per-class regression outputs.

    The estimator provides ``_decision(X) -> (n_samples, n_outputs)`` and ``classes_``.
    Two classes are fitted as one output (positive for ``classes_[1]``, shifted by
    ``_binary_offset``), more classes as one output per class.
    """

    _binary_offset = 0.0  # the output's decision threshold for two classes

    def decision_function(self, X):
        """Per-class scores; positive (two classes) or the largest (more) is predicted.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray of shape (n_samples,) for two classes, else (n_samples, n_classes)
        """
        scores = self._decision(X)
        return scores[:, 0] - self._binary_offset if scores.shape[1] == 1 else scores

    def predict(self, X):
        """Predicted class labels.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        scores = self.decision_function(X)
        idx = (scores > 0).astype(int) if scores.ndim == 1 else scores.argmax(axis=1)
        return self.classes_[idx]
