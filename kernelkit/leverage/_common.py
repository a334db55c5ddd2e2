"""Shared parts of the ridge-leverage-score samplers: parameters, kernel access, docs."""

import math
from numbers import Integral

import numpy as np

from .._config import get_config
from ..backend import resolve_backend
from ..kernels import is_precomputed, resolve_kernel
from ..utils._validation import check_input, check_kernel_matrix, check_scalar_param

# Theorem 1 of Calandriello et al. (2017): qbar >= 39 alpha log(2n / delta) / eps^2.
THEORY_CONSTANT = 39.0
_MIN_BLOCK = 256  # smallest block SQUEAK adds to its dictionary at once
_REPAIR_ROUNDS = 3  # rounds that re-add the points a final dictionary provably misses
_INK_CHUNK = 256  # arriving points whose kernel block INK-ESTIMATE computes at once
# Below about 4 copies per point a SQUEAK / INK dictionary can die out on large data:
# a dictionary point's estimate counts its own weight q / (qbar p~), which grows as p~
# shrinks, so p~ <- (1 - eps) tau~ can spiral to 0 when q / qbar >= 1 - eps.
_MIN_SAMPLER_QBAR = 4
# Defaults for the data sizes the samplers exist for (1e4 - 1e6 points), not Theorem 1's
# worst case (whose qbar is in the hundreds and keeps nearly every point below ~1e6):
# qbar="auto" is the smallest safe oversampling, gamma_reg="auto" a normalised ridge
# penalty lambda = gamma_reg / n of 1e-3, so d_eff (hence the dictionary) stays fixed
# as n grows (the papers take gamma_reg = n lambda for the same reason).
PRACTICAL_QBAR = _MIN_SAMPLER_QBAR
AUTO_LAMBDA = 1e-3
_SAMPLERS = ("squeak", "ink", "exact", "uniform")
# The exact scores hold one dense n x n float64 matrix: refused beyond this many times
# working_memory (16 GiB at the default 256 MiB, n ~ 46,000), where it would fail
# slowly or swap; the one-pass samplers never hold it.
DENSE_LIMIT_FACTOR = 64


# ----------------------------------------------------------------- parameters
def _check_gamma_reg(value, name="gamma_reg"):
    return check_scalar_param(value, name, low=0.0)


def _check_epsilon(value, name="epsilon"):
    eps = check_scalar_param(value, name, low=0.0)
    if eps >= 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {value!r}.")
    return eps


def _check_delta(value):
    delta = check_scalar_param(value, "delta", low=0.0)
    if delta >= 1.0:
        raise ValueError(f"delta must be in (0, 1), got {value!r}.")
    return delta


def theory_qbar(n_samples, epsilon=0.5, delta=0.1):
    """Oversampling ``qbar`` that Theorem 1 of SQUEAK requires for its guarantee.

    ``qbar = ceil(39 alpha log(2 n / delta) / epsilon^2)`` with
    ``alpha = (1 + epsilon) / (1 - epsilon)`` (Calandriello, Lazaric & Valko,
    AISTATS 2017, Theorem 1; the same order as INK-ESTIMATE's space budget).

    Parameters
    ----------
    n_samples : int >= 1
        Number of points ``n``.
    epsilon : float in (0, 1), default=0.5
        Accuracy of the dictionary.
    delta : float in (0, 1), default=0.1
        Failure probability.

    Returns
    -------
    qbar : int
        Conservative: with it the dictionary keeps nearly every point unless
        ``n`` is much larger than ``qbar * d_eff``.

    Raises
    ------
    ValueError
        If an argument is out of range (the message names it).
    """
    n = check_scalar_param(n_samples, "n_samples", low=1, low_inclusive=True, integer=True)
    eps = _check_epsilon(epsilon)
    delta = _check_delta(delta)
    alpha = (1.0 + eps) / (1.0 - eps)
    return int(math.ceil(THEORY_CONSTANT * alpha * math.log(2.0 * n / delta) / eps**2))


def _resolve_qbar(qbar, n, eps, delta):
    """``"auto"``: the practical :data:`PRACTICAL_QBAR`; ``"theory"``: :func:`theory_qbar`."""
    if isinstance(qbar, str) and qbar == "auto":
        return PRACTICAL_QBAR
    if isinstance(qbar, str) and qbar == "theory":
        return theory_qbar(n, eps, delta)
    if isinstance(qbar, bool) or not isinstance(qbar, Integral) or qbar < 1:
        raise ValueError(f"qbar must be 'auto', 'theory' or an integer >= 1, got {qbar!r}.")
    return int(qbar)


def _resolve_gamma_reg(value, n):
    """``"auto"``: ``AUTO_LAMBDA * n`` (at least 1e-3); else a checked positive float."""
    if isinstance(value, str) and value == "auto":
        return max(AUTO_LAMBDA * n, 1e-3)
    if isinstance(value, str):
        raise ValueError(f"gamma_reg must be 'auto' or a float > 0, got {value!r}.")
    return _check_gamma_reg(value)


def _check_precomputed(K, name="X"):
    """A precomputed kernel matrix: the one rule of :func:`check_kernel_matrix`."""
    check_kernel_matrix(K, name)


def _check_dense_size(n, caller):
    """Raise a clear error before an ``n x n`` float64 matrix far over the memory budget."""
    budget = get_config()["working_memory"] * 2**20
    need = 8.0 * n * n
    if need > DENSE_LIMIT_FACTOR * budget:
        raise MemoryError(
            f"{caller} needs a dense {n} x {n} float64 kernel matrix ({need / 2**30:.3g} GiB), "
            f"more than {DENSE_LIMIT_FACTOR} times kernelkit's working_memory "
            f"({budget / 2**20:g} MiB). Estimate the leverage scores in one pass with SQUEAK "
            "or INKEstimate (memory of their small dictionary), or raise the budget with "
            "kernelkit.config_context(working_memory=...).")


# ------------------------------------------------------------ kernel evaluation
class _KernelEval:
    """Host float64 kernel blocks between 'points' for the samplers.

    Points are feature rows (evaluated by the estimator's :class:`KernelOperator`)
    or, for ``kernel="precomputed"``, integer indices into ``K``. Picklable, so
    that joblib / dask workers can evaluate blocks.
    """

    def __init__(self, operator=None, K=None):
        self.op, self.K = operator, K

    def __call__(self, A, B=None):
        if self.K is not None:
            return np.array(self.K[np.ix_(A, A if B is None else B)], dtype=np.float64)
        return self.op.block_host(A, B)

    def diag(self, A):
        if self.K is not None:
            return np.array(self.K[A, A], dtype=np.float64)
        return self.op.diag(A)

    def rows_per_block(self, ncols):
        budget = get_config()["working_memory"] * 2**20
        return max(1, int(budget // (8 * 3 * max(1, ncols))))


def _make_eval(estimator, X, kernel_params_default=(3, 1)):
    """The estimator's kernel as a :class:`_KernelEval` and the points of ``X``."""
    if is_precomputed(estimator.kernel):
        _check_precomputed(X)
        return _KernelEval(K=X), np.arange(X.shape[0])
    degree = kernel_params_default[0] if estimator.degree is None else estimator.degree
    coef0 = kernel_params_default[1] if estimator.coef0 is None else estimator.coef0
    op = resolve_kernel(estimator.kernel, estimator.gamma, degree, coef0,
                        estimator.kernel_params, n_features=X.shape[1],
                        backend=estimator.backend_)
    return _KernelEval(op), X


def _take(pts, idx):
    return pts[idx]


# ------------------------------------------------------------------ exact RLS
def _kernel_eval_from_args(X, kernel, gamma, degree, coef0, kernel_params, backend):
    if is_precomputed(kernel):
        X = check_input(X)
        X = np.asarray(X, dtype=np.float64)
        _check_precomputed(X)
        return _KernelEval(K=X), np.arange(X.shape[0])
    X = np.asarray(check_input(X, min_samples=1), dtype=np.float64)
    op = resolve_kernel(kernel, gamma, degree, coef0, kernel_params, n_features=X.shape[1],
                        backend=resolve_backend(backend, X))
    return _KernelEval(op), X



_KERNEL_DOC = """kernel : str, Kernel or callable, default="rbf"
        A kernelkit kernel name (rbf, laplacian, matern, polynomial, linear, cosine,
        ntk, nngp), a :class:`kernelkit.kernels.Kernel`, a callable
        ``f(X, Y) -> (n_X, n_Y)`` evaluated on the host, or ``"precomputed"`` (``X``
        is then the symmetric PSD ``n x n`` kernel matrix).
    gamma : float, default=None
        Kernel scale for rbf, laplacian, matern and polynomial; None means
        ``1 / n_features``.
    degree : float, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1
        Constant term of the polynomial kernel.
    kernel_params : dict, default=None
        Further parameters of the named kernel or of the callable."""

_COMMON_DOC = """gamma_reg : float > 0 or "auto", default="auto"
        The papers' ridge regularisation gamma, applied to the unnormalised kernel
        matrix: the RLS are ``tau_i = [K (K + gamma_reg I)^{-1}]_ii``. It equals
        ``KernelRidge``'s ``alpha`` and ``n * lambda`` for a normalised ridge penalty
        ``lambda``; since ``K``'s eigenvalues grow like ``n``, keep ``d_eff`` fixed as
        ``n`` grows with ``gamma_reg = n * lambda``. "auto" is ``1e-3 * n`` (``lambda =
        1e-3``), resolved in ``fit`` into ``gamma_reg_``. Larger values give smaller
        dictionaries.
    epsilon : float in (0, 1), default=0.5
        Accuracy epsilon of the papers: with an epsilon-accurate dictionary the
        estimates satisfy ``tau_i / alpha <= tau~_i <= tau_i`` with
        ``alpha = (1 + epsilon) / (1 - epsilon)``, and the Nyström approximation
        ``K~`` of the dictionary satisfies ``0 <= K - K~ <= gamma_reg / (1 - epsilon) I``.
        0.5 is the value the papers' guarantees are usually instantiated with.
    qbar : int >= 1, "auto" or "theory", default="auto"
        Oversampling q-bar: copies given to every point when it enters the
        dictionary; the dictionary holds about ``qbar * d_eff`` copies. "auto" is 4,
        the smallest practical value (fast, compact dictionaries whose accuracy the
        tests measure; integers of 4 to 20 are the practical range, below 4 the
        dictionary can die out on large data, a warning says so, because a
        dictionary point's estimate counts its own weight ``q / (qbar p~)``).
        "theory" is Theorem 1's value ``ceil(39 alpha log(2 n / delta) / epsilon^2)``
        (:func:`theory_qbar`), which carries the guarantee with probability
        ``1 - delta`` but is conservative: it keeps nearly all points unless ``n``
        is much larger than ``qbar * d_eff``.
    delta : float in (0, 1), default=0.1
        Failure probability used by ``qbar="theory"``."""



def _fill_doc(cls):
    """Class decorator: put the shared parameter docs into ``cls.__doc__``."""
    cls.__doc__ = (cls.__doc__.replace("{common}", _COMMON_DOC).replace("{kernel}", _KERNEL_DOC)
                   .replace("{{", "{").replace("}}", "}"))
    return cls
