"""Model selection with few labels: folds over the labeled rows, scores that skip the rest."""

import numpy as np
from sklearn.base import is_classifier
from sklearn.metrics import get_scorer
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.model_selection._split import BaseCrossValidator

from ._labels import labeled_rows

TARGET_TYPES = ("auto", "classification", "regression")


class SemiSupervisedKFold(BaseCrossValidator):
    """K folds over the labeled rows; every unlabeled row stays in every training set.

    For tuning semi-supervised estimators by cross-validation on the labeled rows only:
    in split ``k`` the test set is the ``k``-th fold of the labeled rows, the training
    set all other rows (the other labeled folds and all unlabeled rows), so each fit
    keeps (almost) all the unlabeled data and each score uses labels it did not see.
    Unlabeled rows follow scikit-learn's convention: NaN for regression targets (a
    target of -1.0 is a value), -1 or NaN for class labels. With class labels the folds
    are stratified (each class in each fold when it has ``n_splits`` labels).

    Parameters
    ----------
    n_splits : int >= 2, default=5
        Number of folds of the labeled rows.
    shuffle : bool, default=True
        Shuffle the labeled rows before splitting.
    random_state : int, RandomState instance or None, default=None
        Used when ``shuffle``.
    target_type : {"auto", "classification", "regression"}, default="auto"
        How ``y`` marks its unlabeled rows. ``"auto"``: float ``y`` holds regression
        targets (whole numbers included: they are values, not classes), any other
        dtype (integers, strings, objects) class labels. Float class labels that mark
        unlabeled rows with -1.0 need ``"classification"``.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelkit.stkr import SemiSupervisedKFold
    >>> y = np.array([0, 1, -1, 0, 1, -1, 0, 1])
    >>> [test.tolist() for _, test in SemiSupervisedKFold(2, random_state=0).split(y, y)]
    [[3, 4, 6], [0, 1, 7]]
    """

    def __init__(self, n_splits=5, *, shuffle=True, random_state=None, target_type="auto"):
        self.n_splits = n_splits
        self.shuffle = shuffle
        self.random_state = random_state
        self.target_type = target_type

    def _classification(self, y):
        if not isinstance(self.target_type, str) or self.target_type not in TARGET_TYPES:
            raise ValueError(f"target_type must be one of {TARGET_TYPES}, got "
                             f"{self.target_type!r}.")
        if self.target_type == "auto":
            return y.dtype.kind != "f"
        return self.target_type == "classification"

    def get_n_splits(self, X=None, y=None, groups=None):
        """Number of splits.

        Parameters
        ----------
        X, y, groups : object
            Ignored.

        Returns
        -------
        n_splits : int
            ``n_splits``.
        """
        return int(self.n_splits)

    def split(self, X, y, groups=None):
        """Generate (train, test) indices.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
            Only its length is used.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets with the unlabeled rows marked (NaN; class labels also -1).
        groups : object
            Ignored.

        Yields
        ------
        train, test : ndarray of int

        Raises
        ------
        ValueError
            If ``y`` is None, ``target_type`` is unknown, or fewer rows than
            ``n_splits`` are labeled.
        """
        if y is None:
            raise ValueError("SemiSupervisedKFold needs y (with unlabeled rows marked -1 or "
                             "NaN) to find the labeled rows.")
        y = np.asarray(y)
        classes = self._classification(y)
        lab = np.flatnonzero(labeled_rows(y, classes))
        if lab.size < self.n_splits:
            raise ValueError(f"only {lab.size} labeled rows for n_splits={self.n_splits}; "
                             "need at least one labeled row per fold.")
        rs = self.random_state if self.shuffle else None
        yl = y[lab]
        classes = classes and yl.ndim == 1
        counts = np.unique(yl, return_counts=True)[1] if classes else None
        if classes and counts.min() >= self.n_splits:
            cv = StratifiedKFold(self.n_splits, shuffle=self.shuffle, random_state=rs)
        else:
            cv = KFold(self.n_splits, shuffle=self.shuffle, random_state=rs)
        n = y.shape[0]
        for _, test in cv.split(lab, yl if classes else None):
            mask = np.ones(n, dtype=bool)
            mask[lab[test]] = False
            yield np.flatnonzero(mask), lab[test]

    def _iter_test_indices(self, X=None, y=None, groups=None):  # pragma: no cover
        for _, test in self.split(X, y, groups):
            yield test


def labeled_scorer(scoring=None):
    """A scorer that evaluates on the labeled rows only.

    Unlabeled rows as scikit-learn marks them: for a classifier ``y = -1`` or NaN, for
    a regressor NaN only (a regression target of -1 is scored like any other).

    Parameters
    ----------
    scoring : str or callable, default=None
        A scikit-learn scoring name or scorer (e.g. ``"balanced_accuracy"``); None means
        the estimator's own ``score`` (which already ignores unlabeled rows).

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y) -> float`` for ``GridSearchCV(scoring=...)``.

    Examples
    --------
    >>> from kernelkit.stkr import labeled_scorer
    >>> scorer = labeled_scorer("balanced_accuracy")
    """
    base = None if scoring is None else get_scorer(scoring)

    def scorer(estimator, X, y):
        keep = labeled_rows(y, classification=is_classifier(estimator))
        if not keep.any():
            return float("nan")
        Xk = X.iloc[keep] if hasattr(X, "iloc") else np.asarray(X)[keep]
        yk = np.asarray(y)[keep]
        return estimator.score(Xk, yk) if base is None else base(estimator, Xk, yk)

    return scorer
