"""EigenProClassifier: one-vs-all EigenPro on one-hot targets, calibrated probabilities."""

import warnings

import numpy as np
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import accuracy_score
from sklearn.preprocessing import LabelBinarizer
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

from ..backend import resolve_backend
from ..exceptions import DegenerateKernelWarning
from ..utils._calibration import calibration_folds
from ..utils._class_weight import check_class_weight, row_weights
from ..utils._classes import CALIBRATION_ATTR_DOC, CALIBRATION_DOC, OneVsAllClassifierMixin
from ..utils._state import atomic
from ..utils._verbose import Progress
from ._estimators import _BaseEigenPro, fill_doc

__all__ = ["EigenProClassifier"]

# Up to this many rows the calibration reads 5-fold out-of-fold decision values: the
# held-out tenth leaves too few values for the map (57 on breast_cancer, whose
# log-loss came out 3% above scikit-learn's 5-fold CalibratedClassifierCV of the same
# classifier), and five more fits cost little there
OOF_MAX_ROWS = 2000
_OOF_FOLDS = 5

_CLASS_PARAMS = """
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes in the squared loss, as scikit-learn's classifiers take
        them (``"balanced"``: ``n_samples / (n_classes * bincount(y))``), multiplied
        with ``sample_weight``. A class that is not in ``y`` is a ValueError.
        Without a ridge term (``alpha=0``, the default) the iterations approach the
        interpolant of the labels, which no weighting changes: the weights then act
        only on the path, so on the model that early stopping keeps; give ``alpha > 0``
        for a model the weights shape.
    """ + CALIBRATION_DOC + """
        Out-of-sample values: up to 2,000 rows (when every class has at least 5),
        the 5-fold out-of-fold decision values of models fitted as this one (same
        parameters and row weights, ``calibration=None``; stratified folds shuffled by
        ``random_state``, in the rows' order when it is None), the model itself then
        fitted as with ``calibration=None``; above that, the decision values of the
        held-out ``validation_fraction`` of the rows (the early-stopping split).
        Without that split (``tol=None`` or ``early_stopping=False``) the same
        fraction is still held out (stratified) for the calibration and the model
        trains on the other rows; ``calibration=None`` trains on all of them."""

_CLASS_ATTRS = """
    """ + CALIBRATION_ATTR_DOC

class EigenProClassifier(OneVsAllClassifierMixin, _BaseEigenPro):
    """Kernel classification by EigenPro 2 / 3 / 4 preconditioned SGD.

    One-vs-all regression on one-hot targets, as in the EigenPro papers: class
    ``c`` gets the target 1 on its samples and 0 elsewhere (for two classes, one
    output for ``classes_[1]``), the regression is fitted by the EigenPro iteration
    and the predicted class is the largest output.

    Parameters
    ----------
    {params}

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    {attrs}

    Raises
    ------
    ValueError
        In ``fit``: as :class:`EigenProRegressor`, plus targets that are not
        class labels or a single class.

    See Also
    --------
    EigenProRegressor : The regressor.
    kernelkit.KernelRidgeClassifier : Dense kernel ridge classification.

    Notes
    -----
    {notes}

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from kernelkit.eigenpro import EigenProClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> clf = EigenProClassifier(gamma=0.05, tol=None, random_state=0)
    >>> bool(clf.fit(X[:1200] / 16, y[:1200]).score(X[1200:] / 16, y[1200:]) > 0.95)
    True
    """

    _binary_offset = 0.5  # two classes: the 0/1 target of classes_[1] is thresholded at 1/2

    def __init__(self, *, n_centers=None, kernel="rbf", gamma=None, degree=3, coef0=1,
                 kernel_params=None, alpha=0.0, n_components="auto", subsample_size="auto",
                 batch_size="auto", eta="auto", damping=0.95, max_iter=30, tol=1e-3,
                 early_stopping="auto", validation_fraction=0.1, n_iter_no_change=2,
                 algorithm="auto", projection_period="auto", projection_max_iter=1,
                 cache_size="auto", dtype="float32", client=None, backend=None,
                 random_state=None, verbose=0, class_weight=None, calibration="auto"):
        super().__init__(
            n_centers=n_centers, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0,
            kernel_params=kernel_params, alpha=alpha, n_components=n_components,
            subsample_size=subsample_size, batch_size=batch_size, eta=eta, damping=damping,
            max_iter=max_iter, tol=tol, early_stopping=early_stopping,
            validation_fraction=validation_fraction, n_iter_no_change=n_iter_no_change,
            algorithm=algorithm, projection_period=projection_period,
            projection_max_iter=projection_max_iter, cache_size=cache_size, dtype=dtype,
            client=client, backend=backend, random_state=random_state, verbose=verbose)
        self.class_weight = class_weight
        self.calibration = calibration

    @atomic
    def fit(self, X, y, sample_weight=None):
        """Fit one-vs-all regressions on one-hot targets by EigenPro iterations.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs.
        y : array-like of shape (n_samples,)
            Class labels of any type.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative row weights of the squared loss, multiplied by
            ``class_weight`` (see :class:`EigenProRegressor`'s ``fit``); they also
            weight the held-out accuracy and the calibration's log-loss.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        params, backend = self._check_params(), resolve_backend(self.backend, X)
        calibrate = self._check_calibration()
        check_class_weight(self.class_weight)
        X, y = validate_data(self, X, y, dtype=[np.float64, np.float32], ensure_min_samples=2)
        check_classification_targets(y)
        binarizer = LabelBinarizer(neg_label=0, pos_label=1)
        Y = binarizer.fit_transform(y).astype(np.float64)
        classes = binarizer.classes_
        if classes.shape[0] < 2:
            raise ValueError(f"EigenProClassifier needs samples of at least 2 classes; got "
                             f"only class {classes[0]!r}.")
        w = row_weights(self.class_weight, y, sample_weight, classes, X)
        y_idx = np.searchsorted(classes, y)
        folds = self._calibration_folds(y_idx) if calibrate else None
        if folds is not None:  # before the model itself: a failing fold changes nothing
            Progress(self, params["verbose"])(
                f"n={len(y)}: {_OOF_FOLDS} fits for the calibration's out-of-fold values, "
                "then the model on every row", level=1)
            oof = self._out_of_fold(X, y, w, folds)
        self._label_binarizer, self.classes_ = binarizer, classes
        held_out = self._fit(X, Y, y, params, backend, w, hold_out=calibrate and folds is None)
        if folds is not None:
            rows, dec = np.arange(len(y)), oof
        elif held_out is None:  # fewer than 3 rows: none can be held out
            rows, dec = np.arange(len(y)), self.decision_function(X)
        else:
            rows, pred = held_out
            dec = pred[:, 0] - self._binary_offset if pred.shape[1] == 1 else pred
        return self._fit_calibration(dec, y_idx[rows], None if w is None else w[rows])

    def _calibration_folds(self, y_idx):
        """Stratified ``(train, test)`` folds for the out-of-fold calibration, or None
        (more than ``OOF_MAX_ROWS`` rows, or a class with fewer rows than folds)."""
        if y_idx.shape[0] > OOF_MAX_ROWS or np.bincount(y_idx).min() < _OOF_FOLDS:
            return None
        return calibration_folds(y_idx, self.random_state, _OOF_FOLDS)

    def _out_of_fold(self, X, y, w, folds):
        """Decision values of each fold's rows by a model fitted, as this one with
        ``calibration=None``, on the other folds (``decision_function``'s layout). The
        folds take their rows' weights ``w`` (class and sample weights, computed on all
        of ``y``, as the model itself), so ``class_weight="balanced"`` and its sample
        weights calibrate alike."""
        # the Dask client is shared, not deep-copied as clone copies the other parameters
        base = type(self)(**{**self.get_params(deep=False), "calibration": None,
                             "class_weight": None, "verbose": 0, "client": None})
        out = None
        for train, test in folds:
            sw = None if w is None else w[train]
            with warnings.catch_warnings():  # one warning, the model's own, not one per fold
                warnings.simplefilter("ignore", ConvergenceWarning)
                warnings.simplefilter("ignore", DegenerateKernelWarning)
                model = clone(base).set_params(client=self.client)
                model.fit(X[train], y[train], sample_weight=sw)
            dec = model.decision_function(X[test])
            if out is None:
                out = np.empty((X.shape[0],) + dec.shape[1:])
            out[test] = dec
        return out

    def _validation_score(self, Y_val, pred, scale, weights):
        Y_val, pred = Y_val * scale, pred * scale  # the 0/1 targets: 1/2 thresholds
        if weights is not None and not np.sum(weights) > 0:
            weights = None
        if Y_val.shape[1] == 1:
            return accuracy_score(Y_val[:, 0] > 0.5, pred[:, 0] > 0.5, sample_weight=weights)
        return accuracy_score(Y_val.argmax(axis=1), pred.argmax(axis=1), sample_weight=weights)


EigenProClassifier.__doc__ = fill_doc(EigenProClassifier.__doc__, _CLASS_PARAMS, _CLASS_ATTRS)
