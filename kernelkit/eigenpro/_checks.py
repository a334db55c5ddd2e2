"""Parameter checks and target scaling of the EigenPro estimators."""

import math
import os
from numbers import Integral, Real

import numpy as np

_ALGORITHMS = ("auto", "ep2", "ep3", "ep4")
# default cache for k(X, centers) and k(centers, centers): at most this many MiB and
# half of the memory available when fit starts
CACHE_MAX_MIB = 4096


def _available_bytes():
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return CACHE_MAX_MIB * 2**20


def _check_choice_or_number(value, name, *, low, integer, auto="auto", low_inclusive=True,
                            high=None):
    """``value`` is ``auto`` (returned as None) or a number above ``low``."""
    if isinstance(value, str) and value == auto:
        return None
    kind = Integral if integer else Real
    if isinstance(value, bool) or not isinstance(value, kind) or not math.isfinite(value):
        what = "an integer" if integer else "a finite real number"
        raise ValueError(f"{name} must be {auto!r} or {what}, got {value!r}.")
    if value < low or (value == low and not low_inclusive):
        op = ">=" if low_inclusive else ">"
        raise ValueError(f"{name} must be {op} {low}, got {value!r}.")
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high}, got {value!r}.")
    return int(value) if integer else float(value)


def _check_number(value, name, *, low=None, low_inclusive=True, high=None, high_inclusive=True,
                  integer=False, allow_none=False):
    if value is None and allow_none:
        return None
    kind = Integral if integer else Real
    if isinstance(value, bool) or not isinstance(value, kind) or not math.isfinite(value):
        what = "an integer" if integer else "a finite real number"
        extra = " or None" if allow_none else ""
        raise ValueError(f"{name} must be {what}{extra}, got {value!r}.")
    if low is not None and (value < low or (value == low and not low_inclusive)):
        raise ValueError(f"{name} must be {'>=' if low_inclusive else '>'} {low}, got {value!r}.")
    if high is not None and (value > high or (value == high and not high_inclusive)):
        raise ValueError(f"{name} must be {'<=' if high_inclusive else '<'} {high}, "
                         f"got {value!r}.")
    return int(value) if integer else float(value)


def _normalise_targets(Y):
    """``(Y / scale, scale)`` with ``scale`` the RMS of ``Y`` (1 for zero targets)."""
    top = float(np.max(np.abs(Y))) if Y.size else 0.0
    if top == 0.0:
        return Y, 1.0
    scale = top * float(np.sqrt(np.mean((Y / top) ** 2)))  # no overflow for 1e300
    return Y / scale, scale


def _rescale(weights, scale):
    """Coefficients for the original targets, in the compute dtype, or a clear error."""
    w = np.asarray(weights, dtype=np.float64) * scale
    with np.errstate(over="ignore"):
        out = w.astype(weights.dtype)
    info = np.finfo(weights.dtype)
    top = float(np.max(np.abs(w))) if w.size else 0.0
    # coefficients three decades below the largest would already be subnormal
    if not np.all(np.isfinite(out)) or 0.0 < top < 1e3 * info.tiny:
        raise ValueError(f"the targets' scale ({scale:.3g}) puts the coefficients outside "
                         f"the normal range of dtype={weights.dtype.name} (about "
                         f"{info.tiny:.0e} to {info.max:.0e}); pass dtype='float64' or "
                         "rescale y.")
    return out


def _divergence_message(exc, P):
    """What diverged and what to do; never 'pass a smaller eta' when eta was automatic."""
    head = f"EigenPro diverged: {exc}, with step size eta={P.eta:.6g} (batch_size=" \
           f"{P.batch_size})."
    if P.user_eta:
        return head + f" The automatic step size is {P.auto_eta:.6g}; pass a smaller eta, " \
                      "or eta='auto'."
    return head + " The step size was automatic: the Nyström subsample misjudged the " \
                  "kernel's top eigenvalue. Increase subsample_size, pass a smaller " \
                  f"batch_size, or an explicit eta below {P.eta:.3g}."
