"""The Kernel base class: a scikit-learn GP kernel evaluated by kernelkit engines."""

import inspect
from numbers import Real

import weakref

import numpy as np
from sklearn.gaussian_process.kernels import Hyperparameter
from sklearn.gaussian_process.kernels import Kernel as _GPKernel

from ..backend import get_backend
from ..utils._array_api import follow_input
from ..utils._validation import check_input, check_pair


def checked_values(K, kernel, engine):
    """``K``, or a ValueError naming ``kernel`` where it holds NaN or inf
    (:meth:`~kernelkit.backend._array.ArrayBackend.all_finite` of ``engine``)."""
    if not engine.all_finite(K):
        raise ValueError(
            f"the kernel {kernel!r} produced NaN or infinite values on these inputs; check "
            "its parameters (e.g. a fractional polynomial degree on negative dot products, "
            "or a scale that overflows) or rescale X.")
    return K


class Kernel(_GPKernel):
    """Base class of kernelkit kernels.

    A kernelkit kernel is at once

    * a callable ``k(X, Y=None)`` returning the ``(n_X, n_Y)`` kernel matrix, so it
      works as ``SVC(kernel=k)`` or in :func:`sklearn.metrics.pairwise.pairwise_kernels`;
    * a :class:`sklearn.gaussian_process.kernels.Kernel` (``diag``,
      ``is_stationary``, ``+``/``*`` composition, e.g. ``k + WhiteKernel()``) whose
      hyperparameters follow scikit-learn's convention: each continuous positive
      parameter ``<name>`` with a constructor argument ``<name>_bounds`` (a pair,
      or ``"fixed"``) is a log-space hyperparameter with an exact gradient, so a GP
      optimiser tunes it; discrete or signed parameters (``nu``, ``depth``,
      ``degree``, ``coef0``) are not hyperparameters, as ``nu`` of scikit-learn's
      ``Matern``; a parameter left at None (resolved from the data) is fixed;
    * an estimator parameter whose own parameters are tunable as ``kernel__<name>``.

    Evaluation goes through the engine of :func:`kernelkit.get_config`'s
    ``backend`` (see :mod:`kernelkit.backend`). Subclasses define ``_spec``.
    """

    _stationary = False

    def _spec(self, n_features):
        """Validated :class:`~kernelkit.backend.KernelSpec` for ``n_features`` inputs."""
        raise NotImplementedError

    def spec(self, n_features):
        """The engine-level description of this kernel for ``n_features`` features.

        Raises
        ------
        ValueError
            If a parameter is invalid (the message names it).
        """
        return self._spec(int(n_features))

    @property
    def hyperparameters(self):
        """One per constructor parameter ``<name>`` that has a ``<name>_bounds``, in
        constructor order; fixed when its bounds are ``"fixed"`` or its value is not a
        positive number (None: resolved from the data; 0: no bias)."""
        names = [p for p in inspect.signature(type(self).__init__).parameters if p != "self"]
        out = []
        for name in names:
            if not name.endswith("_bounds") or name[:-len("_bounds")] not in names:
                continue
            param = name[:-len("_bounds")]
            bounds = check_bounds(getattr(self, name), name)
            if not _positive(getattr(self, param)):
                bounds = "fixed"
            out.append(Hyperparameter(param, "numeric", bounds))
        return out

    def _gradient(self, X, K, free):
        """``dK / dlog(p)`` for each free hyperparameter ``p`` in ``free``, stacked on the
        last axis, from the host float64 inputs ``X`` and the kernel matrix ``K``."""
        raise NotImplementedError(f"{type(self).__name__} has no gradient for {free}.")

    def __call__(self, X, Y=None, eval_gradient=False):
        """Kernel matrix ``k(X, Y)``.

        Parameters
        ----------
        X : array-like of shape (n_X, n_features)
        Y : array-like of shape (n_Y, n_features), default=None
            None means ``Y = X`` (computed faster, exactly symmetric).
        eval_gradient : bool, default=False
            For the GP interface: also return the exact gradient with respect to
            ``theta``, the logarithms of the free hyperparameters (host NumPy).
            Only with ``Y=None``.

        Returns
        -------
        K : ndarray of shape (n_X, n_Y)
            float32 for float32 inputs, else float64; an array of the inputs' namespace
            (CuPy for CuPy inputs).
        K_gradient : ndarray of shape (n_X, n_X, n_free), float64
            ``dK / dtheta``; only when ``eval_gradient`` is True.

        Raises
        ------
        ValueError
            On NaN/inf, empty or non-2-D input, mismatched feature counts, an
            invalid kernel parameter, an unusable configured backend, or kernel
            values that are NaN or inf (e.g. a fractional degree on negative dot products).
        """
        X_in, Y_in = X, Y
        X, Y = check_pair(X, Y)
        if eval_gradient and Y is not None:
            raise ValueError("eval_gradient=True requires Y=None (as in scikit-learn GP kernels).")
        spec = self.spec(X.shape[1])
        engine = get_backend(None, X, Y)
        K = engine.pairwise(spec, engine.asarray(X), None if Y is None else engine.asarray(Y))
        K = follow_input(checked_values(K, self, engine), X_in, Y_in)
        if not eval_gradient:
            return K
        free = [h.name for h in self.hyperparameters if not h.fixed]
        if not free:
            return K, np.empty((X.shape[0], X.shape[0], 0))
        Xh = np.asarray(X.get() if hasattr(X, "get") else X, dtype=np.float64)
        Kh = np.asarray(K.get() if hasattr(K, "get") else K, dtype=np.float64)
        return K, self._gradient(Xh, Kh, free)

    def diag(self, X):
        """The diagonal ``k(x_i, x_i)``, as ``np.diag(k(X))`` but in O(n) time.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        K_diag : ndarray of shape (n_samples,), float64
            An array of the input's namespace.
        """
        X_in, X = X, check_input(X)
        engine = get_backend(None, X)
        diag = engine.diag(self.spec(X.shape[1]), engine.asarray(X))
        return follow_input(checked_values(diag, self, engine), X_in)

    def is_stationary(self):
        """Whether ``k(x, y)`` depends on ``x - y`` only."""
        return self._stationary

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


def _positive(v):
    return isinstance(v, Real) and not isinstance(v, bool) and np.isfinite(v) and v > 0


def check_bounds(bounds, name):
    """``"fixed"`` or a pair ``(low, high)`` with ``0 < low <= high`` (log-space bounds).

    Raises
    ------
    ValueError
        Naming the argument otherwise.
    """
    if isinstance(bounds, str) and bounds == "fixed":
        return bounds
    try:
        b = np.asarray(bounds, dtype=np.float64)
    except (TypeError, ValueError):
        b = None
    if b is None or b.shape != (2,) or not np.all(np.isfinite(b)) or not 0 < b[0] <= b[1]:
        raise ValueError(f"{name} must be 'fixed' or a pair (low, high) with 0 < low <= high, "
                         f"got {bounds!r}.")
    return tuple(float(v) for v in b)


def _host(A):
    """A host float64 array, or a SciPy sparse matrix left sparse (for sklearn kernels)."""
    import scipy.sparse as sp

    return A if sp.issparse(A) else np.asarray(A, dtype=np.float64)


_CONVENTION = weakref.WeakKeyDictionary()  # callable -> True (row function) / False (matrix)


def _as_matrix(K, shape):
    """A callable's result as a float64 ``shape`` array (SciPy sparse densified), or None
    when it is none (the mark of a row function given two blocks)."""
    import scipy.sparse as sp

    if K is None:
        return None
    if sp.issparse(K):
        K = K.toarray()
    try:
        K = np.asarray(K, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    return K if K.shape == shape else None


class _CallableKernel:
    """A user callable or foreign kernel evaluated on the host (no engine).

    Two calling conventions are accepted and told apart on the first block:
    kernelkit's (and scikit-learn GP kernels') ``f(X, Y, **kernel_params)`` returning
    the ``(n_X, n_Y)`` matrix, and scikit-learn's ``pairwise_kernels`` convention for
    ``KernelRidge`` / ``Nystroem``, ``f(x, y, **kernel_params)`` of two rows returning a
    number. A callable that, given two blocks, raises or returns anything but an
    ``(n_X, n_Y)`` array is taken as a row function from then on (evaluated pair by
    pair through :func:`sklearn.metrics.pairwise.pairwise_kernels`, slow). A SciPy
    sparse ``(n_X, n_Y)`` result is a matrix (densified); once a callable has returned
    a matrix it is a matrix callable for good: its later errors are its own, never
    retried pair by pair.
    """

    def __init__(self, func, params):
        self.func, self.params = func, params
        self._known = None  # the convention learnt by an earlier wrapper of the same func

    @property
    def rows(self):
        """None: convention not known yet; True: row function; False: matrix callable.

        Kept per callable (weakly), not per wrapper: the estimators wrap the user's
        function anew in ``fit`` and in ``predict``, and a matrix callable that fails
        in ``predict`` must not be retried pair by pair there."""
        try:
            return _CONVENTION.get(self.func, self._known)
        except TypeError:  # not weak-referenceable
            return self._known

    @rows.setter
    def rows(self, value):
        self._known = value
        try:
            _CONVENTION[self.func] = value
        except TypeError:
            pass

    def _rowwise(self, X, Y, same):
        from sklearn.metrics.pairwise import pairwise_kernels

        return np.asarray(pairwise_kernels(X, None if same else Y, metric=self.func,
                                           **self.params), dtype=np.float64)

    def __call__(self, X, Y, same=False):
        shape = (X.shape[0], Y.shape[0])
        if self.rows:
            K = self._rowwise(X, Y, same)
        else:
            try:
                K = self.func(X, Y, **self.params)
            except Exception:
                if self.rows is False:  # a known matrix callable: the error is the user's
                    raise
                K = None
            K = _as_matrix(K, shape)
            if self.rows is None and K is None:
                self.rows = True
                K = self._rowwise(X, Y, same)
            else:
                self.rows = False
                if K is None:
                    raise ValueError(f"kernel callable returned a value that is not a numeric "
                                     f"array of shape {shape}.")
        if K.shape != shape:
            raise ValueError(f"kernel callable returned shape {K.shape}, expected {shape}.")
        if not np.all(np.isfinite(K)):
            raise ValueError("kernel callable returned NaN or infinite values.")
        return K


class _PairwiseKernel(_CallableKernel):
    """A kernel of :func:`sklearn.metrics.pairwise.kernel_metrics` (e.g. ``chi2``,
    ``additive_chi2``, ``sigmoid``) computed by scikit-learn on the host; accepts
    SciPy sparse inputs as scikit-learn does."""

    def __init__(self, metric, params):
        super().__init__(metric, params)
        self._known = False  # a metric name: never looked up in the callables' table

    def __call__(self, X, Y, same=False):
        from sklearn.metrics.pairwise import pairwise_kernels

        K = np.asarray(pairwise_kernels(X, None if same else Y, metric=self.func,
                                        filter_params=True, **self.params), dtype=np.float64)
        if not np.all(np.isfinite(K)):
            raise ValueError(f"the kernel {self.func!r} produced NaN or infinite values.")
        return K

    def __repr__(self):
        return f"{self.func!r} (scikit-learn) with {self.params!r}"
