"""Growing a fitted KONS model's input and label spaces (for river's open-world streams).

river streams are dicts whose keys come and go and classifiers meet labels as they
come. Both growths are exact continuations of the model learned so far:

* a new feature was absent (0) in every earlier sample, so the atoms get a zero
  column; kernels that depend on inputs through distances and dot products (every
  named kernelkit kernel with a fixed ``gamma``) keep ``K_DD``, the factor ``L`` and
  every earlier prediction unchanged;
* a new label gets a one-vs-rest function that starts at zero with prior precision
  ``alpha`` (a learner started now, as the NeurIPS paper's restarts); a binary model's
  function ``f`` (positive for ``classes_[1]``) becomes the columns ``(-f, f)``, the
  one-vs-rest functions it is equivalent to (the losses are symmetric in ``y f``).

Both rebind new arrays and never write into the current ones, so a failure leaves the
model as it was.
"""

import numpy as np

from ..kernels import resolve_kernel


def add_features(est, k):
    """Append ``k`` features, zero in every stored atom, to a fitted estimator."""
    st = est._st
    d = est.n_features_in_ + k
    op = resolve_kernel(est.kernel, est.gamma, est.degree, est.coef0, est.kernel_params,
                        n_features=d, backend=est.backend_)
    atoms = np.hstack([st["atoms"], np.zeros((st["atoms"].shape[0], k))])
    est._st, est._op, est.n_features_in_ = dict(st, atoms=atoms), op, d


def add_classes(est, labels):
    """Add the labels of ``labels`` that a fitted classifier has not met yet."""
    new = np.union1d(est.classes_, np.asarray(labels))
    if len(new) == len(est.classes_):
        return
    st, old = est._st, est.classes_
    pos = np.searchsorted(new, old)
    W0, A0 = st["W"], st["Ainv"]
    cap, m = W0.shape[0], est.n_atoms_
    # (new column, sign, old column): a binary model's f scores classes_[1]
    cols = ([(pos[0], -1.0, 0), (pos[1], 1.0, 0)] if W0.shape[1] == 1
            else [(pos[j], 1.0, j) for j in range(W0.shape[1])])
    W = np.zeros((cap, len(new)))
    for c, sign, j in cols:
        W[:, c] = sign * W0[:, j]
    Ainv = A0
    if not est._check_params()[0][5]:  # per-class second-order matrices
        Ainv = np.zeros((len(new), cap, cap))
        Ainv[:, np.arange(m), np.arange(m)] = 1.0 / est.alpha
        for c, _, j in cols:
            Ainv[c] = A0[j]
    est._st = dict(st, W=W, Ainv=Ainv)
    est.classes_ = new
    # the calibration window's scores and labels are in the old classes' layout: start a
    # new window (the temperature is refitted on the first scores of the new layout)
    est._calib = None
