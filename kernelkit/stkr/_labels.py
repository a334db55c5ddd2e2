"""Which rows carry a label: the one semi-supervised convention of :mod:`kernelkit.stkr`.

As scikit-learn's: a regression target marks an unlabeled row with NaN only (a target
of -1 is a value like any other); a class label marks it with -1 (the marker of
:mod:`sklearn.semi_supervised`) or NaN. The estimators, their ``score`` and the
model-selection helpers all decide with :func:`labeled_rows`.
"""

import numpy as np


def _is_nan(v):
    return isinstance(v, (float, np.floating)) and v != v


def _is_minus_one(v):
    return (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
            and v == -1)


def labeled_rows(y, classification):
    """Boolean mask of the labeled rows of ``y``.

    Parameters
    ----------
    y : array-like of shape (n_samples,) or (n_samples, n_targets)
        Targets with the unlabeled rows marked.
    classification : bool
        True for class labels (-1 or NaN marks an unlabeled row), False for regression
        targets (NaN only; a row with any NaN target is unlabeled).

    Returns
    -------
    mask : ndarray of bool, shape (n_samples,)
    """
    y = np.asarray(y)
    flat = y.reshape(y.shape[0], -1)
    kind = y.dtype.kind
    if kind == "f":
        unl = np.isnan(flat)
        if classification:
            unl |= flat == -1
    elif kind in "iu":
        unl = (flat == -1) if classification else np.zeros(flat.shape, dtype=bool)
    elif kind == "O":
        test = (lambda v: _is_nan(v) or _is_minus_one(v)) if classification else _is_nan
        unl = np.frompyfunc(test, 1, 1)(flat).astype(bool)
    else:  # strings, booleans: no marker value exists
        unl = np.zeros(flat.shape, dtype=bool)
    return ~unl.any(axis=1)
