"""Ridge regression and classification on random features, in bounded memory.

The fit needs only the ``D x D`` Gram matrix ``Z^T W Z`` and ``Z^T W Y`` of the
features ``Z = z(X)``; both are sums over rows, accumulated block by block (blocks of
rows within kernelkit's ``working_memory``), so the ``n x D`` feature matrix is never
held and ``partial_fit`` adds a chunk of a stream to the same sums.
"""

import numpy as np
from sklearn.base import BaseEstimator, MultiOutputMixin, RegressorMixin, clone
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from ..utils._array_api import ArrayAPIMixin
from ..utils._state import atomic
from ..utils._validation import check_scalar_param
from ._base import RandomFeatureMap, block_rows
from ._fourier import RandomFourierFeatures
from ._gram import add_rows, factored, new_gram, symmetrize


def _blocks(fmap, X, D):
    """Feature blocks ``(r0, r1, Z)`` of ``X``, float64, within ``working_memory``.

    Each ``Z`` is the caller's to overwrite: kernelkit's maps write a new array; what
    another transformer returns (perhaps a view of ``X``, or an array it keeps) is copied.
    """
    n = X.shape[0]
    step = block_rows(3 * D, n)
    ours = isinstance(fmap, RandomFeatureMap)
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        Z = fmap.transform(X[r0:r1])
        fresh = ours and isinstance(Z, np.ndarray) and Z.dtype == np.float64 and Z.flags.owndata
        yield r0, r1, Z if fresh else np.array(Z, dtype=np.float64, order="C")
        Z = None  # with the caller's ``del``: one block alive while the next is made


def _accumulate(fmap, X, Y, w, D):
    """``Z^T W Z`` (symmetric rank-k updates, Fortran order) and ``Z^T W Y`` over row
    blocks."""
    G, B = new_gram(D), np.zeros((D, Y.shape[1]))
    for r0, r1, Z in _blocks(fmap, X, D):
        B += Z.T @ (w[r0:r1, None] * Y[r0:r1])
        add_rows(G, Z, w[r0:r1], overwrite_z=True)  # the block is ours: scaled in place
        del Z
    symmetrize(G)
    return G, B

# the estimators' own default map size (the transformer keeps RBFSampler's 100)
DEFAULT_FEATURES = 1000


class _RandomFeaturesRidge(ArrayAPIMixin, BaseEstimator):
    _calibrated = False

    def __init__(self, features=None, *, alpha=1.0, random_state=None):
        self.features = features
        self.alpha = alpha
        self.random_state = random_state

    def _check_params(self):
        alpha = check_scalar_param(self.alpha, "alpha", low=0.0, low_inclusive=True)
        f = self.features
        if f is not None and not (hasattr(f, "fit") and hasattr(f, "transform")):
            raise TypeError(f"features must be a transformer (with fit and transform) or "
                            f"None, got {f!r}.")
        return alpha

    def _new_map(self, X):
        fmap = (RandomFourierFeatures(n_components=DEFAULT_FEATURES) if self.features is None
                else clone(self.features))
        if self.random_state is not None and "random_state" in fmap.get_params():
            fmap.set_params(random_state=self.random_state)
        fmap.fit(X)
        return fmap, fmap.transform(X[:1]).shape[1]

    def _validate(self, X, y, sample_weight, reset):
        X, y = validate_data(self, X, y, reset=reset, accept_sparse="csr", dtype=np.float64,
                             multi_output=not self._calibrated, y_numeric=not self._calibrated)
        w = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
        return X, y, w

    def _fit_sums(self, X, Y, w, alpha, fmap, D, G=None, B=None, then=None):
        """Add the sums of ``(X, Y, w)`` to ``(G, B)`` and solve; returns locals only.

        ``then(factor, C)``, when given, runs while ``G + alpha I`` is factored (see
        :func:`kernelkit.random_features._gram.factored`); its result is returned too.
        """
        dG, dB = _accumulate(fmap, X, Y, w, D)
        if G is not None:  # the new sums are ours: the earlier ones are added into them
            dG += G
            dB += B
        G, B = dG, dB
        with factored(G, alpha) as factor:
            C = factor.solve(B)
            extra = None if then is None else then(factor, C)
        return G, B, C, extra

    def _scores(self, X):
        check_is_fitted(self, "features_")
        X = validate_data(self, X, reset=False, accept_sparse="csr", dtype=np.float64)
        out = np.empty((X.shape[0], self._coef.shape[1]))
        for r0, r1, Z in _blocks(self.features_, X, self._coef.shape[0]):
            out[r0:r1] = Z @ self._coef
            del Z
        return out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


_PARAMS = """
    features : transformer, default=None
        The random feature map, cloned and fitted in ``fit`` (any transformer works;
        kernelkit's maps never hold more than a row block). None means
        ``RandomFourierFeatures(n_components=1000)`` (its other parameters at their
        defaults: Gaussian kernel, ``gamma = 1 / n_features``): the transformer keeps
        scikit-learn's ``RBFSampler`` default of 100 features, too few for a model of
        its own (on the digits 0.9267 accuracy with 100 features, 0.97 with 1,000);
        1,000 features cost a 1,000 x 1,000 Gram matrix, ``O(n 10^6)`` flops.
    alpha : float >= 0, default=1.0
        Ridge penalty: minimises ``sum_i w_i ||y_i - c^T z(x_i)||^2 + alpha ||c||^2``
        (no intercept, as ``Ridge(fit_intercept=False)`` on the features).
    random_state : int, RandomState instance or None, default=None
        When not None, replaces the ``random_state`` of the feature map (so that
        scikit-learn's ``random_state`` handling reaches it); None keeps the map's own."""


class RandomFeaturesRegressor(MultiOutputMixin, RegressorMixin, _RandomFeaturesRidge):
    """Ridge regression on random features, in ``O(D^2)`` memory.

    Accumulates ``Z^T W Z`` and ``Z^T W y`` over row blocks of ``Z = features(X)`` and
    solves ``(Z^T W Z + alpha I) c = Z^T W y`` (kernelkit's stable ridge solve, which
    falls back to the minimum-norm solution with a warning when the system is singular).
    The result equals ``sklearn.linear_model.Ridge(fit_intercept=False)`` fitted on the
    explicit features; ``partial_fit`` adds chunks to the same sums, so fitting chunk by
    chunk equals one ``fit`` on their concatenation.

    Parameters
    ----------{params}

    Attributes
    ----------
    features_ : transformer
        The fitted feature map.
    coef_ : ndarray of shape (n_features_out,) or (n_targets, n_features_out)
        Weights of the features (1-D for 1-D ``y``), as ``Ridge.coef_``.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)

    Raises
    ------
    ValueError
        ``alpha < 0``, NaN/inf, negative sample weights, mismatched lengths; in
        ``partial_fit``, a number of features or of targets other than before.
    TypeError
        ``features`` that is not a transformer.

    See Also
    --------
    RandomFeaturesClassifier, RandomFourierFeatures

    Examples
    --------
    >>> from sklearn.datasets import make_friedman1
    >>> from kernelkit import RandomFeaturesRegressor, RandomFourierFeatures
    >>> X, y = make_friedman1(n_samples=500, random_state=0)
    >>> model = RandomFeaturesRegressor(RandomFourierFeatures(300, gamma=0.1), alpha=1e-3,
    ...                                 random_state=0).fit(X[:400], y[:400])
    >>> model.score(X[400:], y[400:]) > 0.8
    True
    """

    @atomic
    def fit(self, X, y, sample_weight=None):
        """Fit on all rows (earlier ``partial_fit`` sums are discarded).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self : object
        """
        alpha = self._check_params()
        X, y, w = self._validate(X, y, sample_weight, reset=True)
        fmap, D = self._new_map(X)
        G, B, C, _ = self._fit_sums(X, y.reshape(len(y), -1), w, alpha, fmap, D)
        self._commit(fmap, G, B, C, y.ndim)
        return self

    @atomic(deep=True)
    def partial_fit(self, X, y, sample_weight=None):
        """Add a chunk of rows to the sums and re-solve.

        The first call (or the first after ``fit``'s absence) fits the feature map on
        ``X``'s number of features; later chunks must have the same features and targets.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self : object
        """
        alpha = self._check_params()
        first = not hasattr(self, "features_")
        X, y, w = self._validate(X, y, sample_weight, reset=first)
        Y = y.reshape(len(y), -1)
        if first:
            fmap, D = self._new_map(X)
            G = B = None
        else:
            fmap, D, G, B = self.features_, self._coef.shape[0], self._gram, self._zty
            if Y.shape[1] != B.shape[1] or (y.ndim == 1) != self._y_1d:
                raise ValueError(f"y has {Y.shape[1]} target(s) of ndim {y.ndim}; the model "
                                 f"was fitted with {B.shape[1]} of ndim "
                                 f"{1 if self._y_1d else 2}.")
        G, B, C, _ = self._fit_sums(X, Y, w, alpha, fmap, D, G, B)
        self._commit(fmap, G, B, C, y.ndim)
        return self

    def _commit(self, fmap, G, B, C, ndim):
        self.features_, self._gram, self._zty, self._coef = fmap, G, B, C
        self._y_1d = ndim == 1
        self.coef_ = C[:, 0].copy() if self._y_1d else C.T.copy()

    def predict(self, X):
        """Predict ``features(X) @ coef_.T``, block by block.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
        """
        out = self._scores(X)
        return out[:, 0] if self._y_1d else out


RandomFeaturesRegressor.__doc__ = RandomFeaturesRegressor.__doc__.format(params=_PARAMS)
