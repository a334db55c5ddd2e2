"""Progress reports of long fits: one convention for every estimator.

``verbose`` as scikit-learn uses it: 0 silent, 1 one line per outer step (epoch,
pass, round, restart), 2 also the inner steps. Lines go to stdout, flushed, prefixed
by the estimator's name.
"""

import math
from numbers import Integral


def check_verbose(verbose):
    """Validate an estimator's ``verbose`` parameter; return it as int.

    Raises
    ------
    ValueError
        If ``verbose`` is not an integer >= 0 (``True``/``False`` count as 1/0).
    """
    if isinstance(verbose, bool):
        return int(verbose)
    if not isinstance(verbose, Integral) or verbose < 0:
        raise ValueError(f"verbose must be an integer >= 0, got {verbose!r}.")
    return int(verbose)


class Progress:
    """Prints ``[Name] what k/total: key=value ...`` lines when ``verbose >= level``.

    Parameters
    ----------
    owner : object or str
        The estimator (its class name is the prefix) or a prefix.
    verbose : int
        The estimator's validated ``verbose``.
    """

    def __init__(self, owner, verbose):
        self.prefix = owner if isinstance(owner, str) else type(owner).__name__
        self.verbose = int(verbose)

    def __call__(self, what, step=None, total=None, level=1, **values):
        """Report one step at ``level`` (1: outer steps, 2: inner steps)."""
        if self.verbose < level:
            return
        head = what if step is None else (
            f"{what} {step}" + ("" if total is None else f"/{total}"))
        parts = [f"{k}={_fmt(v)}" for k, v in values.items()]
        print(f"[{self.prefix}] {head}" + (": " + ", ".join(parts) if parts else ""),
              flush=True)


def _fmt(v):
    if isinstance(v, float):
        return f"{v:.4g}" if math.isfinite(v) else str(v)
    return str(v)
