"""``class_weight`` and ``sample_weight`` as one per-row weight, scikit-learn's way.

scikit-learn's classifiers weight row ``i`` by ``sample_weight[i] *
class_weight[y[i]]`` (``"balanced"``: ``n_samples / (n_classes * bincount(y))``); this
is that product, with the checks kernelkit's estimators share: a ``class_weight`` that
is not None, ``"balanced"`` or a dict, or a dict naming a class that is not in the
data, is a ValueError naming ``class_weight``.
"""

from numbers import Real

import numpy as np
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.validation import _check_sample_weight


def check_class_weight(class_weight):
    """Validate the parameter alone (before the data): None, ``"balanced"`` or a dict."""
    if class_weight is None or (isinstance(class_weight, str) and class_weight == "balanced"):
        return class_weight
    if not isinstance(class_weight, dict):
        raise ValueError(f"class_weight must be None, 'balanced' or a dict {{label: weight}}, "
                         f"got {class_weight!r}.")
    for k, v in class_weight.items():
        if isinstance(v, bool) or not isinstance(v, Real) or not np.isfinite(v) or v < 0:
            raise ValueError(f"class_weight[{k!r}] must be a finite number >= 0, got {v!r}.")
    return class_weight


def row_weights(class_weight, y, sample_weight, classes, X=None):
    """Per-row weights ``sample_weight * class_weight[y]``, or None when both are None.

    Parameters
    ----------
    class_weight : None, "balanced" or dict
        Checked by :func:`check_class_weight`. ``"balanced"`` counts the rows of ``y``.
    y : ndarray of shape (n,)
        Labels (all in ``classes``).
    sample_weight : array-like of shape (n,) or None
        Validated here: finite, non-negative, of ``y``'s length (a float64 copy: the
        caller's array is never modified).
    classes : ndarray
        The estimator's ``classes_``: a dict key outside it is a ValueError.

    Returns
    -------
    weights : ndarray of shape (n,), float64, or None
    """
    class_weight = check_class_weight(class_weight)
    if isinstance(class_weight, dict):
        known = set(np.asarray(classes).tolist())
        unseen = [k for k in class_weight if k not in known]
        if unseen:
            raise ValueError(f"class_weight has weights for classes {unseen!r} that are not "
                             f"among the classes {np.asarray(classes).tolist()!r} of y.")
    w = None
    if sample_weight is not None:
        w = _check_sample_weight(sample_weight, np.empty((len(y), 0)) if X is None else X,
                                 dtype=np.float64, ensure_non_negative=True, copy=True)
    if isinstance(class_weight, dict) and class_weight:
        cw = _dict_weights(class_weight, y, classes)
        w = cw if w is None else w * cw
    elif class_weight is not None:
        cw = compute_sample_weight(class_weight, y)
        w = cw if w is None else w * cw
    if w is not None and not np.sum(w) > 0:
        raise ValueError("sample_weight (times class_weight) is zero on every row; at least "
                         "one row needs a positive weight.")
    return w


def _dict_weights(class_weight, y, classes):
    """``class_weight[y_i]`` (1 for a class the dict leaves out) against all of ``classes``:
    a ``partial_fit`` chunk may lack a class the dict names, which scikit-learn's
    ``compute_sample_weight`` (weighting against the chunk's own labels) rejects; the
    labels are looked up as they are (no conversion of digit strings to numbers)."""
    classes = np.asarray(classes)
    per_class = np.array([float(class_weight.get(c, 1.0)) for c in classes.tolist()])
    order = np.argsort(classes, kind="stable")
    pos = order[np.clip(np.searchsorted(classes, y, sorter=order), 0, len(classes) - 1)]
    if not np.array_equal(classes[pos], y):
        raise ValueError(f"y has labels outside the classes {classes.tolist()!r}.")
    return per_class[pos]
