"""A thin adapter giving KONS estimators river's one-sample interface.

river (https://riverml.xyz) streams dict-shaped samples through ``learn_one`` and
``predict_one``. The adapter needs no river import: it only fixes the feature order
(the keys of the first sample) and forwards each sample to ``partial_fit``, whose
single-sample path validates minimally.
"""

import numpy as np
from sklearn.base import clone


class RiverKONS:
    """river-style ``learn_one`` / ``predict_one`` around a KONS estimator.

    Parameters
    ----------
    estimator : KONSRegressor or KONSClassifier
        Cloned; the clone is learned and exposed as ``estimator_``.
    classes : array-like of shape (n_classes,), default=None
        All labels of the stream (classifiers only; required for them).

    Attributes
    ----------
    estimator_ : estimator
        The model being learned (None before the first sample).
    features_ : list
        Feature names in the order used (keys of the first sample).

    Raises
    ------
    ValueError
        If a classifier is given no ``classes``, or a sample lacks a feature.

    Examples
    --------
    >>> from kernelkit.online import KONSRegressor, RiverKONS
    >>> model = RiverKONS(KONSRegressor(random_state=0))
    >>> for x, y in [({"a": 0.0}, 0.0), ({"a": 1.0}, 1.0)]:
    ...     _ = model.predict_one(x)
    ...     model.learn_one(x, y)
    >>> isinstance(model.predict_one({"a": 0.5}), float)
    True
    """

    def __init__(self, estimator, classes=None):
        self.estimator = estimator
        self.classes = classes
        self._is_clf = hasattr(estimator, "predict_proba") or hasattr(estimator, "loss")
        if self._is_clf and classes is None:
            raise ValueError("classes is required for a classifier: pass every label the "
                             "stream may contain.")
        self.estimator_ = None
        self.features_ = None

    def _row(self, x):
        if self.features_ is None:
            self.features_ = list(x)
        try:
            return np.array([[float(x[k]) for k in self.features_]])
        except KeyError as exc:
            raise ValueError(f"x lacks feature {exc.args[0]!r} seen in the first sample.") \
                from None

    def learn_one(self, x, y):
        """Learn from one sample ``x`` (a dict of feature -> number) with target ``y``."""
        row = self._row(x)
        if self.estimator_ is None:
            self.estimator_ = clone(self.estimator)
            if self._is_clf:
                self.estimator_.partial_fit(row, [y], classes=self.classes)
                return
        self.estimator_.partial_fit(row, [y])

    def predict_one(self, x):
        """Prediction for one sample (None for a classifier, 0.0 for a regressor, before
        the first ``learn_one``)."""
        if self.estimator_ is None:
            return None if self._is_clf else 0.0
        out = self.estimator_.predict(self._row(x))[0]
        return out.item() if hasattr(out, "item") else out

    def predict_proba_one(self, x):
        """Class probabilities as a dict (classifiers with ``loss="logistic"``)."""
        if self.estimator_ is None:
            return {c: 1.0 / len(self.classes) for c in self.classes}
        p = self.estimator_.predict_proba(self._row(x))[0]
        return {c.item() if hasattr(c, "item") else c: float(v)
                for c, v in zip(self.estimator_.classes_, p, strict=False)}
