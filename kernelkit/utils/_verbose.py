"""Progress reports of long fits: one convention for every estimator.

``verbose`` as scikit-learn uses it: 0 silent, 1 one line per outer step (epoch,
pass, round, restart), 2 also the inner steps. Lines go to stdout, flushed, prefixed
by the estimator's name.

A long fit's first line is printed before its first expensive step and says what the
fit will do and, where the code can estimate it, what it will cost (sizes, flops,
iteration bounds); each stage then reports when it is done and how long it took
(:meth:`Progress.done`).
"""

import math
import time
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
        self._lap = time.perf_counter()

    def __call__(self, what, step=None, total=None, level=1, **values):
        """Report one step at ``level`` (1: outer steps, 2: inner steps)."""
        if self.verbose < level:
            return
        head = what if step is None else (
            f"{what} {step}" + ("" if total is None else f"/{total}"))
        parts = [f"{k}={_fmt(v)}" for k, v in values.items()]
        print(f"[{self.prefix}] {head}" + (": " + ", ".join(parts) if parts else ""),
              flush=True)

    def lap(self):
        """Seconds since the previous :meth:`lap` (or :meth:`done`, or creation)."""
        now = time.perf_counter()
        out, self._lap = now - self._lap, now
        return out

    def done(self, stage, level=1, **values):
        """Report ``"<stage> done in X s"``, X the time since the previous stage."""
        seconds = self.lap()
        self(f"{stage} done in {seconds:.3g} s", level=level, **values)


def flops(x):
    """``x`` floating-point operations as a short string (``"2.1e+12 flops"``)."""
    return f"{float(x):.2g} flops"


def _fmt(v):
    if isinstance(v, float):
        return f"{v:.4g}" if math.isfinite(v) else str(v)
    return str(v)
