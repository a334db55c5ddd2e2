"""One-vs-all scores to labels and probabilities: the classifiers' shared front.

A classifier provides ``_decision(X)`` and ``classes_``; for probabilities it also
calls :meth:`OneVsAllClassifierMixin._fit_calibration` in ``fit`` with out-of-sample
decision values (held-out, cross-validated or prequential: each estimator says which)
and exposes a ``calibration`` parameter. Everything else is here.
"""

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils._available_if import available_if
from sklearn.utils.validation import check_is_fitted

from ._calibration import MIN_SIDE_ROWS, fit_calibration, predict_log_proba_from

CALIBRATION_DOC = """calibration : {"auto"} or None, default="auto"
        How ``predict_proba`` is obtained: ``"auto"`` fits the probability map on
        out-of-sample decision values (see the Notes): with more than two classes
        ``softmax(calibration_temperature_ * decision_function)``; with two,
        ``p_1 = sigmoid(a * decision_function)`` with one slope ``a`` per side of
        the threshold, ``calibration_slopes_ = [a_minus, a_plus]`` (``a_plus`` where
        the decision is positive), so that the map can be steeper on one side than
        on the other while ``p_1 > 1/2`` stays exactly where ``predict`` gives
        ``classes_[1]``. None (or False) fits no calibration and removes
        ``predict_proba`` / ``predict_log_proba`` (``hasattr`` is False, as for
        :class:`sklearn.svm.SVC` with ``probability=False``)."""

CALIBRATION_ATTR_DOC = """calibration_temperature_ : float or None
        Inverse temperature ``beta > 0`` of ``predict_proba`` with more than two
        classes: the minimiser of the (weighted) log-loss of ``softmax(beta *
        decision)`` over the out-of-sample decision values, against Platt-smoothed
        targets ``(N + 1) / (N + 2)`` (finite when those values separate the
        classes); with two classes the same fit of ``sigmoid(beta * decision)``,
        which the slopes fall back to. None when ``calibration=None``.
    calibration_slopes_ : ndarray of shape (2,) or None
        Two classes: ``[a_minus, a_plus]``, both ``> 0``; ``predict_proba`` gives
        ``classes_[1]`` the probability ``sigmoid(a_plus * d)`` where the decision
        value ``d > 0`` and ``sigmoid(a_minus * d)`` elsewhere. Each slope minimises
        the same smoothed, weighted log-loss over the out-of-sample rows on its side;
        both equal ``calibration_temperature_`` when a side has fewer than
        """ + str(MIN_SIDE_ROWS) + """ positive-weight rows. None with more than two
        classes or ``calibration=None``."""


def stream_classes(classes, known):
    """``partial_fit``'s ``classes``: on the first call (``known`` None) required, at least
    two labels, returned sorted; later None or the same labels (as scikit-learn's
    ``SGDClassifier``), ``known`` returned."""
    if known is None:
        if classes is None:
            raise ValueError("classes must be passed to the first call of partial_fit (all "
                             "the labels the stream may contain).")
        classes = np.unique(np.asarray(classes))
        if classes.shape[0] < 2:
            raise ValueError(f"classes must hold at least two labels, got {classes.tolist()}.")
        return classes
    if classes is not None and not np.array_equal(np.unique(np.asarray(classes)), known):
        raise ValueError(f"classes {np.unique(np.asarray(classes)).tolist()!r} are not the "
                         f"classes of the first call of partial_fit, {known.tolist()!r}.")
    return known


def calibration_enabled(est):
    c = getattr(est, "calibration", None)  # a classifier without the parameter has none
    return not (c is None or c is False)


def _calibration_on(est):
    """True, or an AttributeError saying why there are no probabilities (scikit-learn's
    ``available_if`` chains it as the cause of its own "has no attribute", as SVC's
    ``probability=False``)."""
    if not calibration_enabled(est):
        c = getattr(est, "calibration", None)
        raise AttributeError(f"predict_proba is not available when calibration={c!r}; "
                             "fit with calibration='auto' for calibrated probabilities.")
    return True


class OneVsAllClassifierMixin(ClassifierMixin):
    """``decision_function``, ``predict`` and calibrated ``predict_proba``.

    The estimator provides ``_decision(X) -> (n_samples, n_outputs)`` and ``classes_``.
    Two classes are fitted as one output (positive for ``classes_[1]``, shifted by
    ``_binary_offset``), more classes as one output per class; an estimator with
    another layout overrides ``decision_function`` (1-D for two classes, positive
    for ``classes_[1]``; else one column per class, the largest predicted).

    Probabilities are a softmax of the decision values at one inverse temperature
    fitted on out-of-sample values (:mod:`kernelkit.utils._calibration`), for two
    classes a sigmoid with one positive slope per side of the threshold: either keeps
    the arg-max, so ``argmax(predict_proba) == predict``.
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
            Labels from ``classes_``: the largest decision value (two classes: the
            second when positive); with probabilities, ``argmax(predict_proba)``:
            the same class, except where the probabilities tie to rounding while
            the decision values do not (far from the data, where a kernel
            underflows), which then gives the first tied class, as ``argmax`` does.
        """
        idx = self._label_index(self.decision_function(X))  # NotFittedError first
        return self.classes_[idx]

    def _label_index(self, scores):
        """Index in ``classes_`` of each row's class, from ``decision_function``'s
        ``scores``. A calibrated model takes the arg-max of the probability row that
        :meth:`predict_proba` computes from the same scores: the decision's arg-max
        (a positive scale, or two positive slopes that keep the sign, preserve it),
        except where probabilities tie in float64 while the scores do not (a kernel
        underflowing leaves scores of +-1e-36 and uniform probabilities); both then
        resolve to the first tied class, so ``argmax(predict_proba) == predict``
        holds on every row."""
        beta, slopes = self._calibration_map()
        if beta is not None and calibration_enabled(self) and np.all(np.isfinite(scores)):
            return np.exp(predict_log_proba_from(scores, beta, slopes)).argmax(axis=1)
        return (scores > 0).astype(int) if scores.ndim == 1 else scores.argmax(axis=1)

    # ------------------------------------------------------------ calibration
    def _check_calibration(self):
        """The ``calibration`` parameter as a bool (checked before the data in ``fit``)."""
        c = self.calibration
        if c is None or c is False:
            return False
        if c is True or (isinstance(c, str) and c == "auto"):
            return True
        raise ValueError(f"calibration must be 'auto' or None, got {c!r}.")

    def _calibration_map(self):
        """``(calibration_temperature_, calibration_slopes_)``: None where not fitted
        (the slopes also for a model pickled before they existed: its temperature
        then maps both sides)."""
        return (getattr(self, "calibration_temperature_", None),
                getattr(self, "calibration_slopes_", None))

    def _calibrate(self, decision, y_idx, sample_weight=None):
        """The temperature and the two-class slopes for out-of-sample ``decision``
        values (:func:`~kernelkit.utils._calibration.fit_calibration`); ``(None,
        None)`` when off.

        ``decision`` has ``decision_function``'s layout, ``y_idx`` the true class index
        of each row in ``classes_``; rows with zero weight do not count.
        """
        if not self._check_calibration():
            return None, None
        decision = np.asarray(decision, dtype=np.float64)
        if decision.ndim == 2 and decision.shape[1] == 1:
            decision = decision[:, 0]
        if sample_weight is not None and not np.sum(sample_weight) > 0:
            sample_weight = None  # no weighted row among them: all count alike
        return fit_calibration(decision, y_idx, sample_weight)

    def _fit_calibration(self, decision, y_idx, sample_weight=None):
        """Set ``calibration_temperature_`` and ``calibration_slopes_`` from
        out-of-sample decision values."""
        self.calibration_temperature_, self.calibration_slopes_ = self._calibrate(
            decision, y_idx, sample_weight)
        return self

    @available_if(_calibration_on)
    def predict_log_proba(self, X):
        """``log(predict_proba(X))`` (``-inf`` where a probability underflows to 0,
        as scikit-learn's classifiers).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes), float64
        """
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    @available_if(_calibration_on)
    def predict_proba(self, X):
        """Class probabilities ``softmax(calibration_temperature_ * decision_function(X))``.

        For two classes ``p_1 = sigmoid(a * d)`` with ``d = decision_function(X)`` and
        ``a = calibration_slopes_[1]`` where ``d > 0``, ``calibration_slopes_[0]``
        elsewhere. ``argmax(predict_proba(X)) == predict(X)`` on every row
        (:meth:`predict` resolves probabilities tied to rounding as ``argmax`` does).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes), float64
            Rows sum to 1; columns in the order of ``classes_``.

        Raises
        ------
        AttributeError
            With ``calibration=None`` (``hasattr(est, "predict_proba")`` is False).
        """
        check_is_fitted(self)
        beta, slopes = self._calibration_map()
        if beta is None:
            raise NotFittedError(f"This {type(self).__name__} was fitted with "
                                 "calibration=None; refit it with calibration='auto' to "
                                 "use predict_proba.")
        return np.exp(predict_log_proba_from(self.decision_function(X), beta, slopes))
