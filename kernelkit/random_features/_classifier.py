"""One-vs-all ridge classification on random features, calibrated by leave-one-out."""

import numpy as np
from sklearn.preprocessing import LabelBinarizer
from sklearn.utils.multiclass import check_classification_targets

from ..utils._calibration import fit_calibration
from ..utils._class_weight import check_class_weight, row_weights
from ..utils._classes import OneVsAllClassifierMixin, stream_classes
from ..utils._state import atomic
from ._ridge import _PARAMS, _blocks, _RandomFeaturesRidge

_CALIBRATION_ROWS = 10_000  # partial_fit: the most recent out-of-sample rows kept
_LEVERAGE_ONE = 1e-10  # 1 - h_ii below this: the row is interpolated, its LOO undefined


def loo_decisions(fmap, X, Y, w, factor, C, D):
    """Exact leave-one-out decision values of ridge on features, block by block.

    With ``A = Z^T W Z + alpha I``, ``h_i = w_i z_i^T A^-1 z_i`` and ``f_i = z_i^T C``, the
    fit without row ``i`` predicts ``(f_i - h_i y_i) / (1 - h_i)`` there (the weighted
    form of the classical identity); ``factor.quad`` gives ``z_i^T A^-1 z_i`` from the
    factorization of the solve (:func:`kernelkit.random_features._gram.factored`).

    Returns
    -------
    loo : ndarray of shape (n, n_outputs)
    usable : ndarray of shape (n,), bool
        False where ``1 - h_i`` is at round-off level (the row is interpolated).
    """
    loo, usable = np.empty(Y.shape), np.empty(len(Y), dtype=bool)
    for r0, r1, Z in _blocks(fmap, X, D):
        f = Z @ C
        h = w[r0:r1] * factor.quad(Z, overwrite_z=True)  # the block is ours: overwritten
        keep = 1.0 - h > _LEVERAGE_ONE
        loo[r0:r1] = (f - h[:, None] * Y[r0:r1]) / np.where(keep, 1.0 - h, 1.0)[:, None]
        usable[r0:r1] = keep
        del Z
    return loo, usable


class RandomFeaturesClassifier(OneVsAllClassifierMixin, _RandomFeaturesRidge):
    """One-vs-all ridge classifier on random features, with calibrated probabilities.

    Each class is a ridge regression on {{-1, +1}} targets (two classes: one regression
    whose positive side is ``classes_[1]``), as :class:`~kernelkit.KernelRidgeClassifier`
    and :class:`sklearn.linear_model.RidgeClassifier` encode them, fitted as
    :class:`RandomFeaturesRegressor` in ``O(D^2)`` memory. ``predict_proba`` is a softmax
    of the decision values at one inverse temperature ``calibration_temperature_``
    (two classes: a sigmoid with one slope per side of the threshold,
    ``calibration_slopes_``) fitted on their exact leave-one-out values (kernelkit's
    shared calibration; ``argmax(predict_proba) == predict``); with
    ``h_i = w_i z_i^T (Z^T W Z + alpha I)^-1 z_i`` these come from the ``D x D`` system in
    one more pass over the rows. ``partial_fit`` calibrates on the
    leave-one-out values of the most recent 10 000 rows, each computed when its chunk
    arrived (against the model fitted on everything seen up to that chunk).

    Parameters
    ----------{params}
    class_weight : dict, "balanced" or None, default=None
        Multiplies the sample weights per class, as in scikit-learn; "balanced" is not
        available in ``partial_fit`` (the class frequencies of a stream are unknown).
    calibration : {{"auto", None}}, default="auto"
        ``"auto"``: fit ``calibration_temperature_`` (and for two classes
        ``calibration_slopes_``) on the leave-one-out decision values (one more pass
        over the rows while the system is factored). None: skip that pass; then
        ``predict_proba`` is unavailable (``hasattr`` is False), as for
        scikit-learn's classifiers without probabilities.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    features_ : transformer
    coef_ : ndarray of shape (1, n_features_out) for two classes, else (n_classes, ...)
    calibration_temperature_ : float or None
        Inverse temperature of ``predict_proba`` with more than two classes (with two,
        the value both slopes fall back to); None with ``calibration=None``.
    calibration_slopes_ : ndarray of shape (2,) or None
        Two classes: ``[a_minus, a_plus]``, ``predict_proba``'s ``p_1 = sigmoid(a d)``
        with ``a = a_plus`` where the decision value ``d > 0``, else ``a_minus``
        (:class:`~kernelkit.KernelRidgeClassifier` describes the fit). None with more
        classes or ``calibration=None``.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)

    Raises
    ------
    ValueError
        As :class:`RandomFeaturesRegressor`; fewer than two classes in ``fit``; in
        ``partial_fit``, no ``classes`` on the first call or labels outside them.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from kernelkit import RandomFeaturesClassifier, RandomFourierFeatures
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = RandomFeaturesClassifier(RandomFourierFeatures(200), alpha=1e-2,
    ...                                random_state=0).fit(X, y)
    >>> clf.score(X, y) > 0.9
    True
    """

    _calibrated = True

    def __init__(self, features=None, *, alpha=1.0, class_weight=None, random_state=None,
                 calibration="auto"):
        super().__init__(features, alpha=alpha, random_state=random_state)
        self.class_weight = class_weight
        self.calibration = calibration

    def _loo(self, fmap, X, Y, w, D):
        """The leave-one-out pass that calibrates, or None with ``calibration=None``."""
        if not self._check_calibration():
            return None
        return lambda f, C: loo_decisions(fmap, X, Y, w, f, C, D)

    def _encode(self, y, w, binarizer, streaming):
        check_classification_targets(y)
        unseen = np.setdiff1d(np.unique(y), binarizer.classes_)
        if unseen.size:
            raise ValueError(f"y has labels {unseen.tolist()} not in classes "
                             f"{binarizer.classes_.tolist()}.")
        if self.class_weight is not None:
            if streaming and isinstance(self.class_weight, str):
                raise ValueError("class_weight='balanced' needs all labels at once; pass a "
                                 "dict to partial_fit, or use fit.")
            cw = row_weights(self.class_weight, y, None, binarizer.classes_)
            w = w if cw is None else w * cw
        Y = binarizer.transform(y).astype(np.float64)
        return Y, w, np.searchsorted(binarizer.classes_, y)

    @atomic
    def fit(self, X, y, sample_weight=None):
        """Fit on all rows and calibrate on their leave-one-out decision values.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self : object
        """
        alpha = self._check_params()
        self._check_calibration()
        check_class_weight(self.class_weight)
        X, y, w = self._validate(X, y, sample_weight, reset=True)
        check_classification_targets(y)
        if np.unique(y).shape[0] < 2:
            raise ValueError("The number of classes has to be greater than one; got 1 class "
                             "in y.")
        binarizer = LabelBinarizer(neg_label=-1, pos_label=1).fit(y)
        Y, w, idx = self._encode(y, w, binarizer, streaming=False)
        fmap, D = self._new_map(X)
        G, B, C, loo = self._fit_sums(X, Y, w, alpha, fmap, D,
                                      then=self._loo(fmap, X, Y, w, D))
        self._commit(binarizer, fmap, G, B, C, loo and (*loo, idx, w))
        return self

    @atomic(deep=True)
    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Add a chunk of labelled rows, re-solve and re-calibrate.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        classes : array-like of shape (n_classes,), default=None
            All the labels of the stream: required on the first call; on later calls
            None or the same labels (others are a ValueError, as scikit-learn's
            ``SGDClassifier``).
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self : object
        """
        alpha = self._check_params()
        self._check_calibration()
        check_class_weight(self.class_weight)
        first = not hasattr(self, "features_")
        classes = stream_classes(classes, None if first else self._label_binarizer.classes_)
        X, y, w = self._validate(X, y, sample_weight, reset=first)
        if first:
            binarizer = LabelBinarizer(neg_label=-1, pos_label=1).fit(classes)
            fmap, D = self._new_map(X)
            G = B = None
        else:
            binarizer, fmap = self._label_binarizer, self.features_
            D, G, B = self._coef.shape[0], self._gram, self._zty
        Y, w, idx = self._encode(y, w, binarizer, streaming=True)
        G, B, C, loo = self._fit_sums(X, Y, w, alpha, fmap, D, G, B,
                                      then=self._loo(fmap, X, Y, w, D))
        new = loo and (*loo, idx, w)
        old = None if first else getattr(self, "_calibration", None)
        if new is not None and old is not None:  # keep the recent rows' out-of-sample values
            new = tuple(np.concatenate([a, b])[-_CALIBRATION_ROWS:] for a, b in zip(old, new))
        self._commit(binarizer, fmap, G, B, C, new)
        return self

    def _commit(self, binarizer, fmap, G, B, C, calibration):
        """Assign the fit; ``calibration`` is ``(loo, usable, idx, w)`` or None (off)."""
        beta = slopes = None
        if calibration is not None:
            loo, usable, idx, w = calibration
            cw = np.where(usable, w, 0.0)
            scores = loo[:, 0] if loo.shape[1] == 1 else loo
            beta, slopes = fit_calibration(scores, idx, cw) if cw.sum() > 0 else (1.0, None)
        self._label_binarizer, self.classes_ = binarizer, binarizer.classes_
        self.features_, self._gram, self._zty, self._coef = fmap, G, B, C
        self._calibration, self.calibration_temperature_ = calibration, beta
        self.calibration_slopes_ = slopes
        self.coef_ = C.T.copy()

    def _decision(self, X):
        return self._scores(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


RandomFeaturesClassifier.__doc__ = RandomFeaturesClassifier.__doc__.format(params=_PARAMS)
