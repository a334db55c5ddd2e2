"""river adapters: KONS estimators behind river's ``learn_one`` / ``predict_one``.

river (https://riverml.xyz) streams dict-shaped samples whose keys may appear and
disappear, and its classifiers meet labels as they come. :class:`RiverKONS` builds a
:class:`river.base.Regressor` or :class:`river.base.Classifier` around a KONS
estimator. river is imported only when an adapter is made, so that importing
kernelkit does not need it; the two concrete classes are created then and registered
in this module (they pickle by name).
"""

import numpy as np
from sklearn.base import clone, is_classifier

from . import _grow

_CONCRETE = ("RiverKONSRegressor", "RiverKONSClassifier")


def _scalar(v):
    return v.item() if hasattr(v, "item") else v


class RiverKONS:
    """river estimator around a :class:`KONSRegressor` or :class:`KONSClassifier`.

    ``RiverKONS(estimator, ...)`` returns a ``RiverKONSRegressor`` (a
    :class:`river.base.Regressor`) or a ``RiverKONSClassifier`` (a
    :class:`river.base.Classifier`), as ``estimator`` is a regressor or a classifier;
    both are subclasses of this class and importable from :mod:`kernelkit.online`
    (which then imports river).

    Features: the keys met so far, in order of arrival (within a sample, sorted by
    ``repr`` so that key order never matters). A key missing from a sample is 0
    (river's sparse convention); a new key becomes a new input dimension, zero in every
    stored atom (an exact continuation for kernels of distances and dot products;
    ``gamma=None`` is fixed to ``1 / n_features`` of the first sample so that the
    kernel does not change as features arrive); keys never learned are ignored by
    ``predict_one``. Classifiers learn labels as they come: a new label starts a
    one-vs-rest function at zero; until two labels were met, ``predict_one`` returns
    the one seen and the samples are kept to start the model with.

    Parameters
    ----------
    estimator : KONSRegressor or KONSClassifier, default=None
        Cloned at the first ``learn_one``; the clone is ``estimator_``. None: the
        default ``KONSRegressor()`` / ``KONSClassifier()`` of the concrete class.
    classes : sequence, default=None
        Classifiers only: labels known in advance (optional; others are learned as
        they come).
    seed : int or None, default=None
        river's seed convention: overrides the estimator's ``random_state`` when set.

    Attributes
    ----------
    estimator_ : estimator or None
        The model being learned (None before it starts).
    features_ : list
        Feature keys, in the model's column order.

    Raises
    ------
    TypeError
        If ``estimator`` is missing from ``RiverKONS(...)``.
    ValueError
        If a feature value or a regression target is not a number.

    Examples
    --------
    >>> from kernelkit.online import KONSRegressor, RiverKONS
    >>> model = RiverKONS(KONSRegressor(random_state=0))  # doctest: +SKIP
    >>> for x, y in [({"a": 0.0}, 0.0), ({"a": 1.0, "b": 2.0}, 1.0)]:  # doctest: +SKIP
    ...     _ = model.predict_one(x)
    ...     model.learn_one(x, y)
    """

    def __new__(cls, *args, **kwargs):
        if cls is RiverKONS:
            est = args[0] if args else kwargs.get("estimator")
            if est is None:
                raise TypeError("RiverKONS needs an estimator: a KONSRegressor or a "
                                "KONSClassifier.")
            cls = _concrete()[_CONCRETE[int(is_classifier(est))]]
        return super().__new__(cls)

    # ------------------------------------------------------------- shared helpers
    def _setup(self):
        self.estimator_ = None
        self.features_ = []
        self._index = {}

    def _new_estimator(self, n_features):
        est = clone(self.estimator) if self.estimator is not None else self._default()
        if self.seed is not None:
            est.set_params(random_state=self.seed)
        if isinstance(est.kernel, str) and est.gamma is None:
            est.set_params(gamma=1.0 / n_features)  # fixed as features arrive
        return est

    def _row(self, x, learn):
        """The dict ``x`` as a (1, n_features) row; ``learn`` adds its new keys."""
        if learn:
            new = sorted((k for k in x if k not in self._index), key=repr)
            if new:
                if self.estimator_ is not None:
                    _grow.add_features(self.estimator_, len(new))
                self.features_ = self.features_ + new
                self._index = {k: i for i, k in enumerate(self.features_)}
        row = np.zeros((1, len(self.features_)))
        for k, v in x.items():
            j = self._index.get(k)
            if j is not None:
                try:
                    row[0, j] = float(v)
                except (TypeError, ValueError):
                    raise ValueError(f"feature {k!r} has value {v!r}, not a number; encode "
                                     "it first (e.g. river.preprocessing.OneHotEncoder).") \
                        from None
        return row

    def _transaction(self):
        """What ``learn_one`` may change, to put back if it raises."""
        est = self.estimator_
        return (dict(vars(self)), est, None if est is None else dict(vars(est)))

    def _rollback(self, saved):
        mine, est, est_vars = saved
        vars(self).clear()
        vars(self).update(mine)
        if est is not None:
            vars(est).clear()
            vars(est).update(est_vars)


class _RegressorAdapter(RiverKONS):
    def __init__(self, estimator=None, seed=None):
        self.estimator = estimator
        self.seed = seed
        self._setup()

    def _default(self):
        from ._kons import KONSRegressor

        return KONSRegressor()

    def learn_one(self, x, y, **kwargs):
        """Learn from one sample (``x`` a dict of feature -> number, ``y`` a number)."""
        try:
            y = float(y)
        except (TypeError, ValueError):
            raise ValueError(f"y must be a number, got {y!r}.") from None
        saved = self._transaction()
        try:
            row = self._row(x, learn=True)
            if self.estimator_ is None:
                self.estimator_ = self._new_estimator(row.shape[1])
            self.estimator_.partial_fit(row, [y])
        except BaseException:
            self._rollback(saved)
            raise

    def predict_one(self, x, **kwargs):
        """The current prediction for ``x`` (0.0 before the first ``learn_one``)."""
        if self.estimator_ is None:
            return 0.0
        return float(self.estimator_.predict(self._row(x, learn=False))[0])


class _ClassifierAdapter(RiverKONS):
    def __init__(self, estimator=None, classes=None, seed=None):
        self.estimator = estimator
        self.classes = classes
        self.seed = seed
        self._setup()
        self._pending = []  # (x, y) learned before two labels were known

    def _default(self):
        from ._kons import KONSClassifier

        return KONSClassifier()

    @property
    def _multiclass(self):
        return True

    def learn_one(self, x, y, **kwargs):
        """Learn from one sample (``x`` a dict of feature -> number, ``y`` a label)."""
        saved = self._transaction()
        try:
            if self.estimator_ is None:
                self._start(dict(x), y)
                return
            row = self._row(x, learn=True)
            if y not in self.estimator_.classes_:
                _grow.add_classes(self.estimator_, [y])
            self.estimator_.partial_fit(row, [y])
        except BaseException:
            self._rollback(saved)
            raise

    def _start(self, x, y):
        pending = self._pending + [(x, y)]
        labels = list(self.classes or ()) + [label for _, label in pending]
        self._pending = pending
        if len(np.unique(labels)) < 2:
            self._row(x, learn=True)
            return
        for xi, _ in pending:  # every key first, so that all rows have the final width
            self._row(xi, learn=True)
        rows = np.vstack([self._row(xi, learn=False) for xi, _ in pending])
        est = self._new_estimator(rows.shape[1])
        est.partial_fit(rows, [label for _, label in pending], classes=np.unique(labels))
        self.estimator_, self._pending = est, []

    def predict_one(self, x, **kwargs):
        """The predicted label (None before any ``learn_one``)."""
        if self.estimator_ is None:
            return _scalar(self._pending[0][1]) if self._pending else None
        return _scalar(self.estimator_.predict(self._row(x, learn=False))[0])

    def predict_proba_one(self, x, **kwargs):
        """Label probabilities as a dict (the estimator's calibrated ``predict_proba``).

        Raises
        ------
        NotImplementedError
            When the estimator has no ``predict_proba`` (``calibration=None``; river's
            convention: ``predict_one`` is then used).
        """
        if self.estimator_ is None:
            if self._pending:
                return {_scalar(self._pending[0][1]): 1.0}
            return {}
        if not hasattr(self.estimator_, "predict_proba"):
            raise NotImplementedError("predict_proba_one needs the estimator's "
                                      "calibration='auto' (it has calibration=None).")
        p = self.estimator_.predict_proba(self._row(x, learn=False))[0]
        return {_scalar(c): float(v) for c, v in zip(self.estimator_.classes_, p, strict=True)}

    @classmethod
    def _unit_test_params(cls):
        from ._kons import KONSClassifier

        yield {}
        yield {"estimator": KONSClassifier(loss="logistic")}


def _concrete():
    """The river classes (built on first use, then module attributes)."""
    if _CONCRETE[0] not in globals():
        from river import base

        for name, adapter, river_base in ((_CONCRETE[0], _RegressorAdapter, base.Regressor),
                                          (_CONCRETE[1], _ClassifierAdapter, base.Classifier)):
            cls = type(name, (adapter, river_base), {
                "__module__": __name__, "__qualname__": name,
                "__doc__": RiverKONS.__doc__,
                "__init__": adapter.__init__})
            globals()[name] = cls
    return {name: globals()[name] for name in _CONCRETE}


def __getattr__(name):
    if name in _CONCRETE:
        return _concrete()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
