"""The ``D x D`` Gram matrix of the features, accumulated and factored in one buffer.

The feature-space ridge needs ``G = Z^T W Z`` (accumulated over row blocks by a
symmetric rank-k update, half the flops of a general product), the solve of
``(G + alpha I) C = B`` and, for the classifier's leave-one-out values, the quadratic
forms ``z^T (G + alpha I)^-1 z``. :func:`factored` does all of it in ``G``'s own memory:
the Cholesky factor of the equilibrated ``S (G + alpha I) S`` overwrites the upper
triangle while the strict lower triangle keeps ``G``, from which ``G`` is rebuilt on
exit. So the fit holds one ``D x D`` array, not three (a copy for the solve, the
identity and the inverse). A matrix that is not numerically positive definite falls back
to :func:`kernelkit.utils._linalg.solve_ridge` (minimum-norm solution, with its warning).
"""

import contextlib
import warnings

import numpy as np
from scipy.linalg import lapack

from ..utils._linalg import solve_ridge
from ..utils._potrf import potrf, syrk_upper
from ..utils._threads import blas_threads_for

_BLOCK = 256  # columns per pass of the in-place triangle work (D x 256 temporaries)


def new_gram(D):
    """A zero ``D x D`` float64 Gram buffer (Fortran order: BLAS and LAPACK work in place)."""
    return np.zeros((D, D), order="F")


def add_rows(G, Z, w, overwrite_z=False):
    """``G += Z^T diag(w) Z`` into the upper triangle of ``G`` (one syrk; ``w >= 0``).

    ``overwrite_z``: ``Z`` (float64, C-contiguous) may be scaled in place (no copy of
    the block)."""
    if overwrite_z and Z.dtype == np.float64 and Z.flags.c_contiguous and Z.flags.writeable:
        Z *= np.sqrt(w)[:, None]
    else:
        Z = np.ascontiguousarray(Z * np.sqrt(w)[:, None], dtype=np.float64)
    with blas_threads_for(G.shape[0]):
        syrk_upper(G, Z)


def symmetrize(G):
    """Copy the upper triangle of ``G`` into its strict lower one, in place."""
    D = G.shape[0]
    for j0 in range(0, D, _BLOCK):
        j1 = min(D, j0 + _BLOCK)
        blk = G[j0:j1, j0:j1]
        G[j1:, j0:j1] = G[j0:j1, j1:].T
        blk[...] = np.triu(blk) + np.triu(blk, 1).T


def _lower_to_upper(G, diag):
    """Rebuild the full symmetric ``G`` from its strict lower triangle and ``diag``."""
    D = G.shape[0]
    for j0 in range(0, D, _BLOCK):
        j1 = min(D, j0 + _BLOCK)
        blk = G[j0:j1, j0:j1]
        G[j0:j1, j1:] = G[j1:, j0:j1].T
        blk[...] = np.tril(blk, -1) + np.tril(blk, -1).T
    G[np.arange(D), np.arange(D)] = diag


class _Fallback:
    """Solves and quadratic forms of the general path (``solve_ridge``, explicit inverse)."""

    def __init__(self, G, alpha):
        self.G, self.alpha, self._inv = G, alpha, None

    def solve(self, B):
        return solve_ridge(self.G, B, self.alpha)

    def quad(self, Z, overwrite_z=False):
        if self._inv is None:
            with warnings.catch_warnings():  # the solve has already warned
                warnings.simplefilter("ignore")
                self._inv = solve_ridge(self.G, np.eye(self.G.shape[0]), self.alpha)
        return np.einsum("ij,ij->i", Z @ self._inv, Z)


class _Cholesky:
    def __init__(self, U, s):
        self.U, self.s = U, s

    def solve(self, B):
        sB = self.s[:, None] * B.reshape(len(B), -1)
        with blas_threads_for(self.U.shape[0]):
            X, info = lapack.dpotrs(self.U, sB, lower=0)
        if info != 0 or not np.all(np.isfinite(X)):
            raise np.linalg.LinAlgError("dpotrs failed")
        return (self.s[:, None] * X).reshape(B.shape)

    def quad(self, Z, overwrite_z=False):
        """``z_i^T (G + alpha I)^-1 z_i`` for the rows of ``Z``: ``||U^-T S z_i||^2``
        (``overwrite_z``: ``Z``, float64 C-contiguous, may be overwritten)."""
        if overwrite_z and Z.dtype == np.float64 and Z.flags.c_contiguous and Z.flags.writeable:
            Z *= self.s[None, :]
            V = Z.T  # Fortran-ordered view: the triangular solve works in place
        else:
            V = np.asarray((Z * self.s[None, :]).T, order="F")
        with blas_threads_for(self.U.shape[0]):
            V, info = lapack.dtrtrs(self.U, V, lower=0, trans=1, overwrite_b=1)
        return np.einsum("ij,ij->j", V, V)


@contextlib.contextmanager
def factored(G, alpha):
    """Context: an object with ``solve(B)`` and ``quad(Z)`` for ``G + alpha I``.

    ``G`` (full, symmetric, Fortran-ordered float64) is factored in place and restored
    on exit, also when the body raises.
    """
    D = G.shape[0]
    diag = np.diag(G).copy()
    d = diag + alpha
    if not (G.flags.f_contiguous and alpha > 0 and np.all(d > 0) and np.all(np.isfinite(d))):
        yield _Fallback(G, alpha)
        return
    s = 1.0 / np.sqrt(d)
    # 1-norm of the equilibrated matrix (for the condition estimate), column block by block
    anorm = 0.0
    for j0 in range(0, D, _BLOCK):
        j1 = min(D, j0 + _BLOCK)
        col = np.abs(G[:, j0:j1]).T @ s * s[j0:j1] + alpha * s[j0:j1] ** 2
        anorm = max(anorm, float(col.max()))
    for j0 in range(0, D, _BLOCK):  # upper triangle (with the diagonal): S (G + alpha I) S
        j1 = min(D, j0 + _BLOCK)
        G[:j0, j0:j1] *= s[:j0, None] * s[None, j0:j1]
        blk = G[j0:j1, j0:j1]
        blk[...] = np.tril(blk, -1) + np.triu(blk) * (s[j0:j1, None] * s[None, j0:j1])
    G[np.arange(D), np.arange(D)] = d * s * s
    ok = False
    try:
        with blas_threads_for(D):
            info = potrf(G, lower=False)
        if info == 0:
            rcond, info = lapack.dpocon(G, anorm, uplo="U")
            ok = info == 0 and rcond > D * np.finfo(np.float64).eps
        if ok:  # the generator yields exactly once: here, or below after the restore
            yield _Cholesky(G, s)
    finally:
        _lower_to_upper(G, diag)
    if not ok:
        yield _Fallback(G, alpha)
