"""What every random feature map shares: validation, tags, blockwise transform."""

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from .._config import get_config
from ..utils._array_api import ArrayAPIMixin
from ..utils._state import atomic
from ..utils._validation import check_scalar_param

_DTYPES = [np.float64, np.float32]


def block_rows(floats_per_row, n_rows):
    """Rows per block so that ``floats_per_row`` float64 temporaries per row fit in
    kernelkit's ``working_memory`` (at least one row, at most ``n_rows``)."""
    budget = get_config()["working_memory"] * 2**20
    return int(max(1, min(max(n_rows, 1), budget // (8 * max(floats_per_row, 1)))))


def check_n_components(value, name="n_components", even=False):
    n = check_scalar_param(value, name, low=1, low_inclusive=True, integer=True)
    if even and n % 2:
        raise ValueError(f"{name} must be even for the paired sin/cos map (one cosine and one "
                         f"sine per frequency), got {value!r}; use an even number or "
                         "variant='random_phase'.")
    return n


def check_choice(value, name, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}.")
    return value


class RandomFeatureMap(ClassNamePrefixFeaturesOutMixin, TransformerMixin, ArrayAPIMixin, BaseEstimator):
    """Base of the random feature transformers.

    Subclasses implement ``_check_params() -> dict`` (validated parameters, checked before
    the data), ``_draw(params, n_features, rng) -> dict`` (the fitted attributes, without
    touching ``self``), ``_width()`` (float64 temporaries per row of a block) and
    ``_transform_block(X, out)`` (features of a row block written into ``out``).
    """

    _sparse_ok = True

    def _check_scale(self, X, params):
        """Warn where the map's kernel is nearly the identity on ``X`` (maps of decaying
        stationary kernels; :func:`~kernelkit.kernels._scale.check_kernel_scale`)."""

    @atomic
    def fit(self, X, y=None):
        """Draw the random map for data with ``X``'s number of features.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Only its number of features (and, for ``gamma=None``, that number) is used.
        y : None
            Ignored.

        Returns
        -------
        self : object

        Raises
        ------
        ValueError
            On an invalid parameter (named in the message) or NaN/inf/empty ``X``.
        """
        params = self._check_params()
        X = validate_data(self, X, accept_sparse="csr" if self._sparse_ok else False,
                          dtype=_DTYPES)
        fitted = self._draw(params, X.shape[1], check_random_state(self.random_state))
        self._check_scale(X, params)
        for name, value in fitted.items():
            setattr(self, name, value)
        return self

    def transform(self, X):
        """Map ``X`` to its random features.

        The output is written row block by row block (blocks within kernelkit's
        ``working_memory``): no temporary of the output's size is ever allocated.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        Z : ndarray of shape (n_samples, `n_features_out_`)
            float32 for float32 input, else float64.

        Raises
        ------
        ValueError
            If ``X`` has a different number of features than at ``fit``, or NaN/inf, or
            values so large that the features overflow.
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=_DTYPES,
                          accept_sparse="csr" if self._sparse_ok else False)
        n = X.shape[0]
        out = np.empty((n, self._n_features_out), dtype=X.dtype)
        step = block_rows(self._width(), n)
        for r0 in range(0, n, step):
            r1 = min(n, r0 + step)
            block = out[r0:r1]
            self._transform_block(X[r0:r1], block)
            # two reductions, no temporary: NaN propagates through min and max
            if block.size and not (np.isfinite(block.min()) and np.isfinite(block.max())):
                raise ValueError(f"{type(self).__name__}: X has values too large in magnitude "
                                 "for the map's arithmetic (its features overflow); rescale it.")
        return out

    @atomic
    def fit_transform(self, X, y=None, **fit_params):
        """``fit(X).transform(X)``; a ``transform`` that raises leaves the map as it was
        before the call (not refitted)."""
        return super().fit_transform(X, y, **fit_params)

    @property
    def n_features_out_(self):
        """Number of output features."""
        return self._n_features_out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = self._sparse_ok
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


def dense_block(X):
    """A row block as a dense float64 array (sparse blocks are densified: one block only)."""
    if hasattr(X, "toarray"):
        X = X.toarray()
    return np.asarray(X, dtype=np.float64)
