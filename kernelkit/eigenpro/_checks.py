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
    """``(Y / scale, scale)`` with ``scale`` the RMS of each column of ``Y`` (1 for zeros).

    Per column, so that the iteration sees every output at unit scale whatever the
    others' scale: the compute dtype then never under- or overflows (float32 loses
    targets near 1e-45 and overflows near 1e39), and one output of scale 1e-300 next
    to one of scale 1 is fitted as exactly as alone (the iteration is linear in each
    column).
    """
    top = np.max(np.abs(Y), axis=0) if Y.shape[0] else np.zeros(Y.shape[1])
    safe = np.where(top > 0, top, 1.0)
    scale = safe * np.sqrt(np.mean((Y / safe) ** 2, axis=0))  # no overflow for 1e300
    scale = np.where(top > 0, scale, 1.0)
    return Y / scale, scale


def _rescale(weights, scale):
    """Coefficients for the original targets, in float64, or a clear error.

    float64 whatever the compute dtype: the coefficients of targets of scale 1e-300
    (or 1e30) are outside float32's range, and the ``n_centers x n_outputs`` array
    is small next to the data.
    """
    with np.errstate(over="ignore"):
        out = np.asarray(weights, dtype=np.float64) * scale
    if not np.all(np.isfinite(out)):
        raise ValueError(f"the targets' scale (up to {float(np.max(scale)):.3g}) puts the "
                         "coefficients beyond the float64 range; rescale y.")
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
