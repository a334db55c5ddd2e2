"""Model selection with few labels: folds over the labeled rows, scores that skip the rest."""

import numpy as np
from sklearn.metrics import get_scorer
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.model_selection._split import BaseCrossValidator

from ._estimators import _unlabeled


def _labeled_mask(y):
    """Labeled rows: not NaN and not -1 (for float y, -1 counts only in class-like vectors)."""
    y = np.asarray(y)
    if y.dtype.kind != "f":
        return ~_unlabeled(y)
    nan = np.isnan(y.reshape(y.shape[0], -1)).any(axis=1)
    class_like = y.ndim == 1 and bool(np.all(nan | (y == np.round(y))))
    return ~nan & ~((y == -1) if class_like else False)


class SemiSupervisedKFold(BaseCrossValidator):
    """K folds over the labeled rows; every unlabeled row stays in every training set.

    For tuning semi-supervised estimators by cross-validation on the labeled rows only:
    in split ``k`` the test set is the ``k``-th fold of the labeled rows, the training
    set all other rows (the other labeled folds and all unlabeled rows), so each fit
    keeps (almost) all the unlabeled data and each score uses labels it did not see.
    Unlabeled rows are ``y = -1`` (class labels) or ``y = NaN``. With class labels the
    folds are stratified (each class in each fold when it has ``n_splits`` labels).

    Parameters
    ----------
    n_splits : int >= 2, default=5
        Number of folds of the labeled rows.
    shuffle : bool, default=True
        Shuffle the labeled rows before splitting.
    random_state : int, RandomState instance or None, default=None
        Used when ``shuffle``.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelkit.stkr import SemiSupervisedKFold
    >>> y = np.array([0, 1, -1, 0, 1, -1, 0, 1])
    >>> [test.tolist() for _, test in SemiSupervisedKFold(2, random_state=0).split(y, y)]
    [[3, 4, 6], [0, 1, 7]]
    """

    def __init__(self, n_splits=5, *, shuffle=True, random_state=None):
        self.n_splits = n_splits
        self.shuffle = shuffle
        self.random_state = random_state

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
            Targets with the unlabeled rows marked (-1 or NaN).
        groups : object
            Ignored.

        Yields
        ------
        train, test : ndarray of int

        Raises
        ------
        ValueError
            If ``y`` is None or fewer rows than ``n_splits`` are labeled.
        """
        if y is None:
            raise ValueError("SemiSupervisedKFold needs y (with unlabeled rows marked -1 or "
                             "NaN) to find the labeled rows.")
        y = np.asarray(y)
        lab = np.flatnonzero(_labeled_mask(y))
        if lab.size < self.n_splits:
            raise ValueError(f"only {lab.size} labeled rows for n_splits={self.n_splits}; "
                             "need at least one labeled row per fold.")
        rs = self.random_state if self.shuffle else None
        yl = y[lab]
        classes = yl.ndim == 1 and (yl.dtype.kind in "iuOUS" or np.all(yl == np.round(yl)))
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
    """A scorer that evaluates on the labeled rows only (unlabeled: -1 or NaN).

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
        keep = _labeled_mask(y)
        if not keep.any():
            return float("nan")
        Xk = X.iloc[keep] if hasattr(X, "iloc") else np.asarray(X)[keep]
        yk = np.asarray(y)[keep]
        return estimator.score(Xk, yk) if base is None else base(estimator, Xk, yk)

    return scorer
