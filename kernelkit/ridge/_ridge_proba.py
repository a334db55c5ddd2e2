"""Out-of-sample decision values of the ridge-type classifiers, for their calibration.

The shared calibration (:mod:`kernelkit.utils._calibration`) fits one inverse
temperature (two classes: one slope per side of the threshold) on decision values the
model did not see. Here is where they come from:

* exact kernel ridge (Cholesky): the exact leave-one-out values of the same fit. With
  ``G = K + alpha W^-1`` (``W`` the row weights, class weights included) the fit is
  ``c = G^-1 y`` and ``y - K c = alpha W^-1 c``; the hat matrix ``H = K G^-1`` has
  ``I - H = alpha W^-1 G^-1``, so the leave-one-out residual
  ``(y_i - f_i) / (1 - H_ii)`` (Allen 1974; it holds for weighted least squares,
  leaving a row out being ``w_i = 0``) is ``c_i / (G^-1)_ii``. The solver factors
  ``M = S K S + alpha I`` (``S = W^1/2``), whose solution is ``z = S^-1 c`` and
  ``G^-1 = S M^-1 S``: ``f_loo_i = y_i - z_i / (s_i (M^-1)_ii)``; a zero-weight row
  does not move the fit, so its value is the fit's own.
* kernel ridge by PCG, up to ``LOO_MAX_ROWS`` rows (and a float64 ``K`` within
  ``cache_size``): the same exact leave-one-out values, from a Cholesky factor of the
  same system (``solver="auto"`` then takes Cholesky for the fit too: one
  factorization gives both). A tenth held out of 1,347 digits (135 rows) gave
  temperatures from 6.4 to 31.2 over five draws; leave-one-out values of every row
  leave no draw at all.
* kernel ridge by PCG beyond: :func:`calibration_split` holds out a stratified tenth
  of the rows, and a second PCG solve with their
  weights set to 0 (the same system, so the same solver) is the model those rows are
  out of. With ``random_state=None`` the split is drawn with a fixed seed
  (:func:`split_rng`), as scikit-learn's ``CalibratedClassifierCV`` uses fixed folds:
  the same data give the same split at every fit.
* FALKON: the Nyström leave-one-out values (:mod:`kernelkit.ridge._falkon_loo`).
"""

import copy

import numpy as np
import scipy.sparse as sp

from ..utils._classes import CALIBRATION_DOC
from ..utils._linalg import solve_ridge, weighted_kernel
from ._auto import cholesky_fits
from ._intercept import bordered_inv_diag, joint_rhs, split_joint

HOLDOUT_FRACTION = 0.1  # of each class, for the calibration of iterative solvers
# kernel ridge: exact leave-one-out values up to here, whatever the solver (at 3,000
# Fashion-MNIST rows the factorization with its inversion took 1.3-2.5x PCG and its
# held-out solve on a busy machine, where a tenth held out is 300 rows: enough)
LOO_MAX_ROWS = 2000
SPLIT_SEED = 0  # the held-out split's seed when random_state is None


def loo_by_cholesky(n, cache_mib):
    """Whether a kernel ridge classifier of ``n`` rows calibrates on exact leave-one-out
    values from a Cholesky factor (else on a held-out split): ``n <= LOO_MAX_ROWS`` and
    the float64 ``K`` within ``cache_size``. Deterministic: the rows decide."""
    return n <= LOO_MAX_ROWS and cholesky_fits(n, cache_mib)


def split_rng(random_state, rng):
    """The held-out split's generator: the fit's own ``rng`` when ``random_state`` is
    given, else one seeded with ``SPLIT_SEED``, so that refitting the same data gives the
    same split (and temperature) rather than a new draw each time."""
    return np.random.RandomState(SPLIT_SEED) if random_state is None else rng


def cholesky_fit(est, X, Y, Y0, sw, rhs, rhs_alpha, u, oos, psd):
    """Kernel ridge's Cholesky solve of ``(S K S + alpha I) Z = rhs`` (joint, with the
    intercept's column ``u``): ``(dual, b, out)``, ``dual`` the unweighted solution
    ``z``, ``b`` the intercept (or None) and, with ``oos``, ``out = (rows, values)`` the
    exact leave-one-out decision values of every row (:func:`loo_decision`), else None.
    ``Y`` is the weighted target matrix, ``Y0`` the unweighted one, ``psd`` whether the
    kernel is positive definite (the condition estimate is then skipped)."""
    K = est._kernel_matrix(X, None)
    n = K.shape[0]
    # a matrix computed here is the factorization's workspace (no copy), unless the
    # calibration reads K again (zero-weight rows' fitted values)
    Kw, own = weighted_kernel(K, sw, owned=est._owns_kernel_matrix()
                              and not (oos and sw is not None))
    info = {}
    res = solve_ridge(Kw, rhs, rhs_alpha, return_inv_diag=oos, overwrite_k=own, psd=psd,
                      info=info)
    Z = res[0] if oos else res
    dual, b = split_joint(Z, Y, u, info.get("residual"))
    if not oos:
        return dual, b, None
    z = dual.reshape(n, -1)
    c = z if sw is None else z * sw[:, None]
    d = res[1] if u is None else bordered_inv_diag(res[1], Z, Y, u)
    b0 = 0.0 if b is None else b
    out = (np.arange(n), loo_decision(Y0.reshape(n, -1), z, d, sw,
                                      lambda rows: K[rows] @ c + b0))
    return dual, b, out


def pcg_oos(est, X, Y, Y0, sw, product, solve, rng, joint, psd):
    """Out-of-sample values of a PCG fit: the exact leave-one-out values of the same
    system from a Cholesky factor (:func:`cholesky_fit`) while :func:`loo_by_cholesky`,
    else :func:`holdout_decision` on a split drawn by :func:`split_rng`. ``joint`` is
    ``(rhs, rhs_alpha, u)`` of the fit. Returns ``(rows, values)`` or None."""
    if loo_by_cholesky(len(Y0), est._cache_mib()):
        product.K = None  # the held float32 matrix: freed before the float64 one
        return cholesky_fit(est, X, Y, Y0, sw, *joint, oos=True, psd=psd)[2]
    return holdout_decision(est, X, Y0, sw, product, solve,
                            split_rng(est.random_state, rng))


def loo_decision(Y, z, inv_diag, sw, fitted):
    """Exact leave-one-out decision values of a (weighted) Cholesky kernel ridge fit.

    Parameters
    ----------
    Y : ndarray of shape (n, k)
        Unweighted targets.
    z : ndarray of shape (n, k)
        Solution of ``(S K S + alpha I) z = S Y``.
    inv_diag : ndarray of shape (n,) or (n, k)
        ``diag((S K S + alpha I)^-1)``.
    sw : ndarray of shape (n,) or None
        ``S``'s diagonal (square roots of the row weights).
    fitted : callable
        ``fitted(rows)``: the full fit's values at those rows (read for zero-weight rows).

    Returns
    -------
    f_loo : ndarray of shape (n, k)
    """
    n = Y.shape[0]
    d = inv_diag.reshape(n, -1)
    if sw is None:
        return Y - z / d
    pos = sw > 0
    out = np.empty_like(Y)
    out[pos] = Y[pos] - z[pos] / (sw[pos, None] * d[pos])
    if not np.all(pos):
        out[~pos] = fitted(np.flatnonzero(~pos))
    return out


def calibration_split(y_idx, weights, rng, fraction=HOLDOUT_FRACTION):
    """Rows held out for the calibration: ``ceil(fraction n_k)`` of each class's
    positive-weight rows, leaving at least one of them in training.

    Parameters
    ----------
    y_idx : ndarray of shape (n,), int
    weights : ndarray of shape (n,) or None
    rng : numpy.random.RandomState

    Returns
    -------
    held : ndarray of shape (n,), bool
        All False when no class has two positive-weight rows.
    """
    held = np.zeros(len(y_idx), bool)
    live = np.ones(len(y_idx), bool) if weights is None else weights > 0
    for k in np.unique(y_idx):
        rows = np.flatnonzero((y_idx == k) & live)
        if len(rows) >= 2:
            take = min(len(rows) - 1, int(np.ceil(fraction * len(rows))))
            held[rng.choice(rows, take, replace=False)] = True
    return held


def holdout_decision(est, X, Y0, sw, product, solve, rng):
    """PCG: the decision values of a held-out tenth of the rows (stratified, positive
    weights) from a second solve of the same system with their weights set to 0 (with
    ``fit_intercept``, the bordered system's, its intercept refitted too).

    ``est`` is the kernel ridge classifier being fitted (its ``_y_idx``, kernel and
    ``fit_intercept``), ``product`` the fit's :class:`~kernelkit.ridge._kernel_product.KernelProduct`,
    ``solve`` its ``pcg_ridge`` with the fit's settings. Returns ``(rows, values)`` or
    None when no row can be held out.
    """
    held = calibration_split(est._y_idx, None if sw is None else sw, rng)
    if not held.any():
        return None
    sw2 = np.where(held, 0.0, 1.0) if sw is None else np.where(held, 0.0, sw)
    p2 = copy.copy(product)  # the held kernel matrix is shared, not copied
    p2.sw = sw2
    Y2 = Y0.reshape(len(sw2), -1) * sw2[:, None]
    u2 = sw2 if est._intercept_on() else None
    rhs, rhs_alpha = joint_rhs(Y2, u2, solve.keywords["alpha"])
    Z, _, _ = solve(p2, rhs, alpha=rhs_alpha, owner=f"{type(est).__name__} (calibration split)")
    z, b = split_joint(Z, Y2, u2)
    c = z * sw2[:, None]
    b = 0.0 if b is None else b
    rows = np.flatnonzero(held)
    if est._precomputed():
        return rows, X[rows] @ c + b
    op = est._operator(sp.issparse(X))
    dec = op.matmul(X[rows], X, c)
    return rows, np.asarray(dec if sp.issparse(X) else op.engine.to_host(dec)) + b


CLASSES_DOC = """
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes in the squared loss, as scikit-learn's classifiers take
        them (``"balanced"``: ``n_samples / (n_classes * bincount(y))``), multiplied
        with ``sample_weight``. A class that is not in ``y`` is a ValueError.
    """ + CALIBRATION_DOC + """
        Out-of-sample values: up to 2,000 rows (and a float64 ``K`` within
        ``cache_size``), whatever the solver, the exact leave-one-out decision values
        of the fit (the diagonal of ``(K + alpha W^-1)^-1`` from a Cholesky factor:
        one triangular inversion, as many flops as the factorization; ``solver="auto"``
        then fits by that factorization too); beyond, with solver ``"pcg"``, a
        stratified tenth of the rows held out (drawn with ``random_state``; with None,
        a fixed seed, so that refits agree) and a second pcg solve without them (about
        doubling the solve). The primal solver (linear kernel) gives the exact
        leave-one-out values at every ``n``, from the eigendecomposition of the
        ``d x d`` matrix ``X^T W X``. See the user guide, "Probabilities and class
        weights"."""
