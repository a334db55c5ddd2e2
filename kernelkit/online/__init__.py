"""Second-order online kernel learning: KONS, Sketched-KONS and PROS-N-KONS.

:class:`KONSRegressor` and :class:`KONSClassifier` learn from a stream with
``partial_fit`` (one pass per call, as scikit-learn's SGD estimators), with
logarithmic regret at a per-sample cost bounded by the KORS sketch (Calandriello,
Lazaric & Valko, ICML 2017 and NeurIPS 2017). :class:`RiverKONS` adapts them to
river's ``learn_one`` / ``predict_one`` interface (``RiverKONSRegressor`` and
``RiverKONSClassifier``, river's own base classes, import river on first access).
"""

from ._kons import KONSClassifier, KONSRegressor
from ._river import RiverKONS

__all__ = ["KONSRegressor", "KONSClassifier", "RiverKONS"]


def __getattr__(name):
    if name in ("RiverKONSRegressor", "RiverKONSClassifier"):  # imports river
        from . import _river

        return getattr(_river, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
