"""Stopping rules of the EigenPro epoch loop.

The training loss of an interpolating solver keeps shrinking for as many epochs as
one allows, so it makes a poor stopping signal: a tolerance on it is essentially
never met. Two rules that are:

* ``early_stopping=True``: the score (:func:`regression_score` / accuracy) of a
  held-out fraction, as the EigenPro papers select their epoch; stop when it has not
  improved by ``tol`` for ``n_iter_no_change`` epochs and keep the best epoch's
  coefficients.
* otherwise the relative change of the model's predictions on a fixed sample of
  training points between consecutive epochs, ``||F_t - F_{t-1}|| / ||F_t||``: stop
  when it stays below ``tol`` for ``n_iter_no_change`` epochs. It is scale-free
  (the same for ``y`` and ``c y``) and measures what the user sees, the model.
"""

import numpy as np

# Training points whose predictions the change rule follows (one k(X_m, Z) product
# per epoch).
MONITOR_SIZE = 1000
# A validation column whose variance is below this fraction of its mean square is
# constant up to rounding: its R^2 denominator is noise.
CONSTANT_RTOL = 1e-12


def regression_score(Y_val, pred, sample_weight=None):
    """R^2 averaged over outputs, with a constant output measured against its scale.

    ``1 - MSE_j / D_j`` per output ``j``, ``D_j`` the variance of the validation
    targets: R^2, as :func:`sklearn.metrics.r2_score` computes it. A constant
    validation column has no variance (R^2 is 0 for every model, so the rule would stop
    after ``n_iter_no_change + 1`` epochs whatever the fit); its ``D_j`` is its mean
    square instead, the MSE relative to the target's scale (1 for a zero target). Also
    defined for one validation sample.

    Parameters
    ----------
    Y_val, pred : ndarray of shape (m, k), float64
    sample_weight : ndarray of shape (m,) or None
        Row weights of the means (None or all zero: unweighted).

    Returns
    -------
    score : float
        1 for a perfect fit; higher is better.
    """
    w = None if sample_weight is None or not np.sum(sample_weight) > 0 else sample_weight
    mse = np.average((pred - Y_val) ** 2, axis=0, weights=w)
    msq = np.average(Y_val ** 2, axis=0, weights=w)
    var = np.average((Y_val - np.average(Y_val, axis=0, weights=w)) ** 2, axis=0, weights=w)
    denom = np.where(var > CONSTANT_RTOL * msq, var, np.where(msq > 0, msq, 1.0))
    return float(np.mean(1.0 - mse / denom))


class StoppingRule:
    """Decides after each epoch whether to stop.

    Parameters
    ----------
    tol : float or None
        None: never stop before ``max_iter`` (and never warn).
    n_iter_no_change : int
    forward : callable ``weights -> ndarray (m, k)``
        Predictions on the monitored points (validation set or training sample).
    score : callable ``predictions -> float`` or None
        Validation score (higher is better); None selects the change rule.
    """

    def __init__(self, tol, n_iter_no_change, forward, score=None):
        self.tol, self.n_iter_no_change = tol, n_iter_no_change
        self.forward, self.score = forward, score
        self.best_score, self.best_weights = -np.inf, None
        self.scores, self.changes = [], []
        self.previous = None
        self.streak = 0
        self.converged = tol is None

    def update(self, weights):
        """Record the epoch ending with ``weights``; True to stop."""
        pred = np.asarray(self.forward(weights), dtype=np.float64)
        if self.score is not None:
            s = float(self.score(pred))
            self.scores.append(s)
            improved = self.tol is None or s >= self.best_score + self.tol
            if s > self.best_score:
                self.best_score, self.best_weights = s, weights.copy()
        else:
            if self.previous is None:
                change = np.inf
            else:
                norm = np.linalg.norm(pred)
                diff = np.linalg.norm(pred - self.previous)
                change = diff / norm if norm > 0 else (0.0 if diff == 0 else np.inf)
            self.changes.append(float(change))
            self.previous = pred
            improved = self.tol is None or not change < self.tol
        self.streak = 0 if improved else self.streak + 1
        if self.tol is not None and self.streak >= self.n_iter_no_change:
            self.converged = True
            return True
        return False

    def report(self):
        """Values for the epoch's progress line."""
        if self.score is not None:
            return {"validation_score": self.scores[-1]}
        return {"prediction_change": self.changes[-1]}

    def reason(self):
        if self.score is not None:
            return (f"validation score did not improve by more than tol={self.tol:g} for "
                    f"{self.n_iter_no_change} epochs; stopping")
        return (f"predictions changed by less than tol={self.tol:g} (relative) for "
                f"{self.n_iter_no_change} epochs; stopping")

    def final(self, weights):
        """The coefficients to keep: the best epoch's under early stopping."""
        if self.score is not None and self.best_weights is not None:
            return self.best_weights
        return weights
