"""The blockwise kernel engine written against an array namespace ``xp``.

:class:`ArrayBackend` holds everything the engines share: the row-block driver
(bounded by ``working_memory``), the per-row statistics that turn a Gram block
``X @ Y.T`` into a kernel block, and reference element-wise "finishers" written
with ``xp`` operations only. The NumPy engine is this class with ``xp=numpy``
(the oracle); the Numba and CuPy engines override only the finishers (and the
L1 distance), so every engine is checked against the same reference.

All internal arithmetic is float64: float32 inputs are upcast for the Gram
product (cheap: O(n d) copies) and the result is cast back, so float32 outputs
keep float32 accuracy instead of inheriting the cancellation of
``|x|^2 + |y|^2 - 2 x.y`` in float32.

The array code uses the Python array API standard only (tested with
``array-api-strict`` as the namespace), through three small adapters for what
the standard leaves out or older NumPy / CuPy spell differently: products and
casts written into existing arrays (``out=`` and casting assignment, used when the
namespace is NumPy or CuPy), ``asin`` / ``acos`` (``arcsin`` / ``arccos`` before
NumPy 2) and ``astype``. Index pairs are selected by boolean masks (the standard
has no integer-array assignment) and rows gathered with ``take``.
"""

import math

from .._config import get_config

# namespaces whose arrays take ``out=`` and cast on assignment (NumPy and CuPy)
_NUMPY_LIKE = ("numpy", "cupy")


def _fn(xp, name, legacy):
    """``xp.<name>`` (array API spelling), else ``xp.<legacy>`` (NumPy 1.x, older CuPy)."""
    f = getattr(xp, name, None)
    return f if f is not None else getattr(xp, legacy)


def _astype(xp, a, dtype):
    """``a`` as ``dtype`` (no copy when it already is)."""
    if a.dtype == dtype:
        return a
    f = getattr(xp, "astype", None)
    return f(a, dtype) if f is not None else a.astype(dtype)

DISTANCE_KERNELS = ("rbf", "matern")
DOT_KERNELS = ("linear", "polynomial", "cosine")
NN_KERNELS = ("ntk", "nngp")
KERNEL_NAMES = DISTANCE_KERNELS + DOT_KERNELS + NN_KERNELS + ("laplacian",)

# integer codes shared by the compiled engines
STATIONARY_CODES = {("rbf", None): 0, ("matern", 0.5): 1, ("matern", 1.5): 2, ("matern", 2.5): 3}
DOT_CODES = {"linear": 0, "polynomial": 1, "cosine": 2}
ACTIVATION_CODES = {"relu": 0, "erf": 1}
# d2 below this fraction of |x|^2 + |y|^2 is recomputed exactly from the coordinates
CANCELLATION = 1e-4
# relu pairs with defect below this fraction of p take their angle from the defect
NEAR_PARALLEL = 1e-2


class ArrayBackend:
    """Blockwise kernel evaluation on the array namespace ``xp``.

    Parameters
    ----------
    xp : module
        Array namespace (``numpy`` or ``cupy``).

    Notes
    -----
    A kernel is described by a ``KernelSpec(name, params)`` (see
    :mod:`kernelkit.backend`); inputs are assumed already validated (2-D, finite).
    """

    name = "array"
    # k(X, X) is computed as its lower triangle and mirrored: half the work, and
    # exactly symmetric whatever the blocks.
    triangular = True

    def __init__(self, xp):
        self.xp = xp
        self._numpy_like = getattr(xp, "__name__", "").split(".")[0] in _NUMPY_LIKE

    # ------------------------------------------------------------------ arrays
    def asarray(self, a, dtype=None):
        """Array on this engine's device (no copy when already there)."""
        return self.xp.asarray(a, dtype=dtype)

    def to_host(self, a):
        """NumPy array with the values of ``a`` (no copy for a NumPy array)."""
        import numpy

        if isinstance(a, numpy.ndarray):
            return a
        try:
            return numpy.asarray(a)
        except (TypeError, RuntimeError, ValueError):  # not host-resident: copy over DLPack
            return numpy.from_dlpack(a)

    def is_native(self, a):
        """Whether ``a`` already is an array of this engine's namespace."""
        cls = getattr(self.xp, "ndarray", None)
        if cls is not None:
            return isinstance(a, cls)
        ns = getattr(a, "__array_namespace__", None)
        return ns is not None and ns() is self.xp

    def _gemm(self, A, B, out):
        """``out[...] = A @ B`` (in place where the namespace allows: no temporary)."""
        if self._numpy_like:
            self.xp.matmul(A, B, out=out)
        else:
            out[...] = A @ B

    def _put(self, dst, values):
        """``dst[...] = values``, cast to ``dst``'s dtype (float64 -> float32 output)."""
        if not self._numpy_like:
            values = _astype(self.xp, values, dst.dtype)
        dst[...] = values

    def _check_room(self, nbytes, what, advice):
        """Hook: raise ``MemoryError`` if ``nbytes`` more cannot be allocated (engines
        with a bounded device memory); the host engines leave that to the OS."""

    # ------------------------------------------------------------ public ops
    def pairwise(self, spec, X, Y=None, out_dtype=None):
        """Kernel matrix ``k(X, Y)`` (``k(X, X)`` when ``Y`` is None).

        ``out_dtype`` None: float32 when ``X`` (and ``Y``) are float32, else float64.
        The arithmetic is float64 either way: float64 inputs with ``out_dtype=float32``
        give float64 kernel values rounded once to float32 (half the memory, nothing
        lost to rounding the inputs first). Memory beyond the output: float64 scratch
        blocks of at most ``working_memory`` MiB in all (none for float64 output, which
        is computed in place).
        """
        xp = self.xp
        out_dtype = self._out_dtype(X, Y) if out_dtype is None else out_dtype
        fast = self._direct_pairwise(spec, X, Y, out_dtype)
        if fast is not None:
            return fast
        ctx = self._prepare(spec, X, Y)
        n, m = ctx["X"].shape[0], ctx["Y"].shape[0]
        self._check_room(n * m * (xp.finfo(out_dtype).bits // 8),
                         f"the kernel matrix k(X, Y) of shape ({n}, {m})",
                         "compute it in row blocks (pairwise_chunked), use the fused "
                         "product k(X, Y) @ W (matmul), or float32 inputs")
        out = xp.empty((n, m), dtype=out_dtype)
        tri = Y is None and self.triangular
        direct = out_dtype == xp.float64

        def job(r0, r1, scratch):
            ncols = r1 if tri else m
            dst = out[r0:r1, :ncols]
            block = dst if direct else scratch[: r1 - r0, :ncols]
            self._fill(spec, ctx, r0, r1, block, self_offset=r0 if Y is None else -1, tri=tri,
                       dst=dst)
            if tri:
                self._mirror_rows(out, r0, r1)

        self._map_blocks(job, n, m, scratch=not direct)
        return out

    def _direct_pairwise(self, spec, X, Y, out_dtype):
        """Hook: ``k(X, Y)`` computed another way than Gram blocks (an engine's direct path
        for few features), or None to take the blockwise path."""
        return None

    def pairwise_columns(self, spec, X):
        """``S -> k(X, X[S])`` (float64) for many small index sets ``S`` of one ``X``.

        The float64 copy, centering and row statistics of ``X`` are prepared once:
        :meth:`pairwise` prepares them per call, several passes over ``X`` that cost
        about as much as 128 columns (the Nyström sketch reads 128 at a time).
        """
        xp = self.xp
        ctx = self._prepare(spec, X, None)
        n = ctx["X"].shape[0]

        def cols(S):
            S = xp.asarray(S)
            sub = dict(ctx, Y=ctx["X"][S], sy=None if ctx["sy"] is None else ctx["sy"][S])
            out = xp.empty((n, sub["Y"].shape[0]), dtype=xp.float64)

            def job(r0, r1, scratch):
                self._fill(spec, sub, r0, r1, out[r0:r1], self_offset=-1, tri=False)

            self._map_blocks(job, n, out.shape[1], scratch=False)
            return out

        return cols

    def pairwise_chunked(self, spec, X, Y=None):
        """Yield ``(start, block)``: consecutive float64 row blocks of ``k(X, Y)``.

        Each block holds at most ``working_memory`` MiB (at least one row).
        """
        ctx = self._prepare(spec, X, Y)
        n, m = ctx["X"].shape[0], ctx["Y"].shape[0]
        rows = self._budget_rows(m)
        for r0 in range(0, n, rows):
            r1 = min(n, r0 + rows)
            block = self.xp.empty((r1 - r0, m), dtype=self.xp.float64)
            self._fill(spec, ctx, r0, r1, block, self_offset=r0 if Y is None else -1, tri=False)
            yield r0, block

    def matmul(self, spec, X, Y, W):
        """``k(X, Y) @ W`` in float64, never holding more than ``working_memory`` of ``k``.

        ``W`` has shape ``(n_Y,)`` or ``(n_Y, k)``; the result has shape
        ``(n_X,)`` or ``(n_X, k)``.
        """
        xp = self.xp
        W = xp.asarray(W, dtype=xp.float64)
        ctx = self._prepare(spec, X, Y)
        n, m = ctx["X"].shape[0], ctx["Y"].shape[0]
        self._check_room(8 * n * (W.shape[1] if W.ndim == 2 else 1),
                         f"the product k(X, Y) @ W with {n} rows", "use fewer rows of X")
        out = xp.empty((n,) + tuple(W.shape[1:]), dtype=xp.float64)

        def job(r0, r1, scratch):
            block = scratch[: r1 - r0, :]
            self._fill(spec, ctx, r0, r1, block, self_offset=r0 if Y is None else -1, tri=False)
            out[r0:r1, ...] = block @ W

        self._map_blocks(job, n, m, scratch=True)
        return out

    def all_finite(self, A):
        """Whether ``A`` holds no NaN or inf (min and max propagate NaN and expose inf
        without an ``A``-sized boolean temporary)."""
        xp = self.xp
        return not A.size or (math.isfinite(float(xp.min(A))) and math.isfinite(float(xp.max(A))))

    def diag(self, spec, X):
        """The diagonal ``k(x_i, x_i)`` as a float64 vector of length ``n_X``."""
        xp = self.xp
        X = xp.asarray(X, dtype=xp.float64)
        name, p = spec
        if name in DISTANCE_KERNELS or name == "laplacian":
            return xp.ones(X.shape[0], dtype=xp.float64)
        self._check_norms(X, "X")
        sq = self._row_sq_norms(X)
        if name == "linear":
            return sq
        if name == "polynomial":
            gamma, degree, coef0 = p
            return (gamma * sq + coef0) ** degree
        if name == "cosine":  # a row whose |x|^2 underflows counts as zero (as in pairwise)
            return _astype(xp, sq >= xp.finfo(xp.float64).smallest_normal, xp.float64)
        depth, act, w2, b2 = p
        _, nngp, ntk = nn_row_stats(xp, sq, int(depth), act, w2, b2, 1.0 / X.shape[1])
        return ntk if name == "ntk" else nngp

    # ---------------------------------------------------------------- driver
    def _out_dtype(self, X, Y):
        xp = self.xp
        if X.dtype == xp.float32 and (Y is None or Y.dtype == xp.float32):
            return xp.float32
        return xp.float64

    def _check_norms(self, A, name):
        """Raise if a squared norm ``|a|^2`` (hence ``a.b``) overflows float64.

        Computed on the rows scaled by the largest magnitude, so the check itself
        cannot overflow.
        """
        xp = self.xp
        # the largest magnitude from two reductions: no |A| temporary (a pass per call)
        big = max(float(xp.max(A)), -float(xp.min(A))) if A.size else 0.0
        if big > 1e150 and math.log(big) * 2 + math.log(
                float(xp.max(xp.sum((A / big) ** 2, axis=1)))) >= math.log(1.7e308):
            raise ValueError(f"{name} has values too large in magnitude for float64 kernel "
                             "arithmetic (squared norms overflow); rescale it.")

    def _row_sq_norms(self, A):
        """``sum_j A_ij^2`` per row of a float64 ``A``."""
        return self.xp.sum(A * A, axis=1)

    def _check_centered_norms(self, Xc, Yc, X, Y):
        """:meth:`_check_norms` for a distance kernel: on the centered rows it computes
        with, naming the input whose magnitude makes them overflow."""
        xp = self.xp
        try:
            for A in (Xc,) if Yc is Xc else (Xc, Yc):
                self._check_norms(A, "X")
        except ValueError:
            big = [float(xp.max(xp.abs(A))) if A.size else 0.0 for A in (X, Y) if A is not None]
            name = "X" if big[0] >= big[-1] else "Y"
            self._check_norms(xp.asarray(X if name == "X" else Y, dtype=xp.float64), name)
            raise

    def _budget_bytes(self):
        """Bytes one block (with its element-wise work) may take: ``working_memory``."""
        return get_config()["working_memory"] * 2**20

    def _budget_rows(self, ncols):
        """Rows of a float64 block of ``ncols`` columns that fit in the block budget."""
        return max(1, int(self._budget_bytes() // (8 * max(1, ncols))))

    def _map_blocks(self, job, n, ncols, scratch):
        """Run ``job(r0, r1, scratch)`` over row blocks covering ``0:n``.

        The reference runs them in order with one shared float64 scratch block
        (None when ``scratch`` is False); engines may run them concurrently.
        """
        rows = self._budget_rows(ncols)
        buf = self.xp.empty((min(rows, n), ncols), dtype=self.xp.float64) if scratch else None
        for r0 in range(0, n, rows):
            job(r0, min(n, r0 + rows), buf)

    def _prepare(self, spec, X, Y):
        """float64 copies (centered for distance kernels) and per-row statistics."""
        xp = self.xp
        name, p = spec
        n_copies = (X.shape[0] if X.dtype != xp.float64 else 0) + (
            Y.shape[0] if Y is not None and Y.dtype != xp.float64 else 0)
        if name in DISTANCE_KERNELS or name == "laplacian":
            n_copies = X.shape[0] + (0 if Y is None else Y.shape[0])  # centered copies
        self._check_room(8 * n_copies * X.shape[1], "float64 copies of the inputs",
                         "use fewer rows")
        Xf = xp.asarray(X, dtype=xp.float64)
        Yf = Xf if Y is None else xp.asarray(Y, dtype=xp.float64)
        distance = name in DISTANCE_KERNELS or name == "laplacian"
        for A, arg in ((Xf, "X"), (Yf, "Y")) if not distance else ():
            self._check_norms(A, arg)
        if distance:
            # Distances are translation invariant: centering removes the large common
            # offset whose squares would cancel in |x|^2 + |y|^2 - 2 x.y.
            if Y is None:
                shift = xp.mean(Xf, axis=0)
            else:
                shift = (xp.sum(Xf, axis=0) + xp.sum(Yf, axis=0)) / (Xf.shape[0] + Yf.shape[0])
            Xf = Xf - shift
            Yf = Xf if Y is None else Yf - shift
            self._check_centered_norms(Xf, Yf, X, Y)
        ctx = {"X": Xf, "Y": Yf, "sx": None, "sy": None}
        if name == "laplacian" or name == "linear" or name == "polynomial":
            return ctx
        if name in NN_KERNELS:
            depth, act, w2, b2 = p
            inv_d = 1.0 / Xf.shape[1]

            def stats(A):
                return nn_row_stats(xp, self._row_sq_norms(A), int(depth), act, w2, b2,
                                    inv_d)[0]
        elif name == "cosine":

            def stats(A):  # a row whose |a|^2 underflows (to 0 or a subnormal, which has
                # lost its precision) counts as zero: cosine 0 with every row, itself too
                sq = self._row_sq_norms(A)
                return xp.sqrt(xp.where(sq >= xp.finfo(xp.float64).smallest_normal, sq, 0.0))
        else:

            stats = self._row_sq_norms

        ctx["sx"] = stats(Xf)
        ctx["sy"] = ctx["sx"] if Y is None else stats(Yf)
        return ctx

    def _fill(self, spec, ctx, r0, r1, block, self_offset, tri, dst=None):
        """Kernel rows ``r0:r1`` (columns ``:block.shape[1]``) into ``dst`` (default ``block``).

        ``block`` is float64 scratch for the Gram product; ``dst`` (same shape, any
        float dtype, may be ``block`` itself) receives the kernel values.

        ``self_offset`` >= 0 means X is Y and row ``i`` of the block is the point
        ``self_offset + i``: its self-pair is set exactly (distance 0, cosine 1).
        ``tri`` means only columns ``j <= self_offset + i`` need be correct.
        """
        name, p = spec
        dst = block if dst is None else dst
        Xb = ctx["X"][r0:r1, :]
        ncols = block.shape[1]
        Yb = ctx["Y"][:ncols, :]
        if name == "laplacian":
            self._laplacian(Xb, Yb, p[0], dst, self_offset, tri)
            return
        self._gemm(Xb, Yb.T, block)
        sx = None if ctx["sx"] is None else ctx["sx"][r0:r1, ...]
        sy = None if ctx["sy"] is None else ctx["sy"][:ncols, ...]
        if name in DISTANCE_KERNELS:
            nu = None if name == "rbf" else p[1]
            code = STATIONARY_CODES[(name, nu)]
            self._stationary(code, block, dst, sx, sy, p[0], self_offset, tri, Xb, Yb)
        elif name in DOT_KERNELS:
            gamma, degree, coef0 = p if name == "polynomial" else (1.0, 1.0, 0.0)
            self._dot(DOT_CODES[name], block, dst, sx, sy, gamma, degree, coef0, self_offset,
                      tri)
        else:
            depth, act, w2, b2 = p
            self._nn(block, dst, sx, sy, int(depth), ACTIVATION_CODES[act], w2, b2,
                     1.0 / ctx["X"].shape[1], name == "ntk", self_offset, tri, Xb, Yb)

    # ------------------------------------------------ reference finishers (xp)
    def _self_mask(self, shape, self_offset):
        """Boolean mask of a block's self-pairs (row i, column self_offset + i)."""
        xp = self.xp
        return xp.arange(shape[0])[:, None] + self_offset == xp.arange(shape[1])[None, :]

    def _stationary(self, code, block, dst, sx, sy, gamma, self_offset, tri, Xb, Yb):
        xp = self.xp
        d2 = sx[:, None] + sy[None, :] - 2.0 * block
        # Where |x|^2 + |y|^2 - 2 x.y cancels (near-duplicate points), recompute the
        # distance from the coordinates: sqrt(d2) would amplify the rounding error.
        near = d2 <= CANCELLATION * (sx[:, None] + sy[None, :])
        i, j = xp.nonzero(near)
        if i.shape[0]:
            d2[near] = self._pair_sqdist(Xb, Yb, i, j)  # nonzero and masks: row-major order
        if self_offset >= 0:
            d2[self._self_mask(d2.shape, self_offset)] = 0.0
        self._put(dst, stationary_from_sqdist(xp, code, d2, gamma))

    def _dot(self, code, block, dst, sx, sy, gamma, degree, coef0, self_offset, tri):
        xp = self.xp
        if code == 0 and dst is not block:
            self._put(dst, block)
        elif code == 1:
            self._put(dst, (gamma * block + coef0) ** degree)
        elif code == 2:
            norm = sx[:, None] * sy[None, :]
            cos = xp.clip(xp.where(norm > 0, block / xp.where(norm > 0, norm, 1.0), 0.0),
                          -1.0, 1.0)
            if self_offset >= 0:  # self-pairs exactly 1 (0 for a zero row)
                cos = xp.where(self._self_mask(block.shape, self_offset),
                               _astype(xp, sx[:, None] > 0, xp.float64), cos)
            self._put(dst, cos)

    def _nn(self, block, dst, sx, sy, depth, act, w2, b2, inv_d, want_ntk, self_offset, tri,
            Xb, Yb):
        xp = self.xp
        K = block * inv_d
        T = xp.zeros_like(K)
        if act == 0:
            D = self._input_defect(K, sx[:, 0], sy[:, 0], self_offset, Xb, Yb)
        for layer in range(1, depth + 1):
            a, b = sx[:, layer][:, None], sy[:, layer][None, :]
            K_new = w2 * K + b2
            if act == 0:
                r2 = 1.0 if layer == 1 else math.sqrt(0.5)
                sa, sb = sx[:, layer - 1][:, None] * r2, sy[:, layer - 1][None, :] * r2
                D = affine_defect(xp, K, D, sa, sb, w2, b2, a * b, K_new)
            K = K_new
            T = K + w2 * T
            if act == 0:  # relu: arc-cosine kernel of degree 1 (Cho & Saul 2009)
                K, D, factor = relu_layer(xp, K, D, a * b)
                T = T * factor
            else:  # erf (Williams 1997)
                den = a * b
                T = T * ((4.0 / math.pi) / xp.sqrt(erf_gap(xp, a, b, K)))
                K = (2.0 / math.pi) * _fn(xp, "asin", "arcsin")(
                    xp.clip(2.0 * K / xp.sqrt(den), -1.0, 1.0))
        K = w2 * K + b2
        self._put(dst, K + w2 * T if want_ntk else K)

    def _input_defect(self, K, s0x, s0y, self_offset, Xb, Yb):
        """``sqrt(q_x q_y) - K`` at the input; from the unit vectors where it cancels."""
        xp = self.xp
        p = s0x[:, None] * s0y[None, :]
        D = xp.maximum(p - K, 0.0)
        near = (K > (1.0 - CANCELLATION) * p) & (p > 0)
        i, j = xp.nonzero(near)
        if i.shape[0]:
            D[near] = p[near] * self._pair_sqdist(Xb, Yb, i, j, s0x, s0y) * (0.5 / Xb.shape[1])
        if self_offset >= 0:
            D[self._self_mask(D.shape, self_offset)] = 0.0
        return D

    def _pair_sqdist(self, A, B, i, j, sa=None, sb=None):
        """``||A[i]/sa[i] - B[j]/sb[j]||^2`` for index pairs, in chunks within working_memory."""
        xp = self.xp
        out = xp.empty(i.shape[0], dtype=xp.float64)
        step = self._budget_rows(2 * A.shape[1])
        for s in range(0, i.shape[0], step):
            e = min(s + step, i.shape[0])  # the standard has no out-of-range slice ends
            ii, jj = i[s:e], j[s:e]
            a, b = xp.take(A, ii, axis=0), xp.take(B, jj, axis=0)
            if sa is not None:
                a, b = a / xp.take(sa, ii)[:, None], b / xp.take(sb, jj)[:, None]
            out[s:e] = xp.sum((a - b) ** 2, axis=1)
        return out

    def _laplacian(self, Xb, Yb, gamma, block, self_offset, tri):
        xp = self.xp
        # sub-blocks so the (rows, cols, d) broadcast stays within working_memory
        step = max(1, self._budget_rows(Yb.shape[0] * Xb.shape[1]))
        for s in range(0, Xb.shape[0], step):
            e = min(s + step, Xb.shape[0])
            diff = xp.abs(Xb[s:e, None, :] - Yb[None, :, :])
            self._put(block[s:e, :], xp.exp(-gamma * xp.sum(diff, axis=2)))

    def _mirror_rows(self, out, r0, r1):
        """Copy the lower-triangle rows ``r0:r1`` of square ``out`` to their transposes."""
        xp = self.xp
        out[:r0, r0:r1] = out[r0:r1, :r0].T
        sub = out[r0:r1, r0:r1]
        idx = xp.arange(r1 - r0)
        out[r0:r1, r0:r1] = xp.where(idx[:, None] < idx[None, :], sub.T, sub)

    # ------------------------------------- kernel thinning loops (kernelkit.thinning)
    # Sequential loops over host (NumPy) arrays that hold kernel blocks computed by
    # ``pairwise``; see :mod:`kernelkit.backend._thinning`. This class runs the NumPy
    # reference; the Numba engine overrides the two loops with compiled copies.
    def pairwise_into(self, spec, X, Y=None, out=None):
        """:meth:`pairwise`, written into ``out`` (host float64) where the engine can.

        For repeated blocks of one size (kernel thinning's rounds) a reused ``out``
        avoids page-faulting a fresh large array per call; this engine ignores it.
        """
        return self.pairwise(spec, X, Y)


def _no_overflow_warning(xp):
    import contextlib

    errstate = getattr(xp, "errstate", None)
    return errstate(over="ignore") if errstate is not None else contextlib.nullcontext()


def stationary_from_sqdist(xp, code, d2, gamma):
    """Stationary kernel value from squared Euclidean distance ``d2`` (reference).

    ``code`` 0 is the Gaussian ``exp(-gamma d2)``; 1, 2, 3 are Matérn nu = 1/2, 3/2,
    5/2 with length scale ``1 / sqrt(2 gamma)`` (so that Matérn tends to the
    Gaussian of the same ``gamma`` as nu grows).
    """
    if code == 0:
        return xp.exp(-gamma * d2)
    with _no_overflow_warning(xp):  # gamma * d2 may overflow to inf: the value is then 0
        r = xp.sqrt(2.0 * (gamma * d2))  # this order: no 0 * inf when gamma is huge
    if code == 1:
        return xp.exp(-r)
    # t capped where exp(-t) is already exactly 0: an infinite distance gives 0, not inf * 0
    if code == 2:
        t = xp.minimum(math.sqrt(3.0) * r, 1e3)
        return (1.0 + t) * xp.exp(-t)
    t = xp.minimum(math.sqrt(5.0) * r, 1e3)
    return (1.0 + t + t * t / 3.0) * xp.exp(-t)


def nn_row_stats(xp, sqnorm, depth, act, w2, b2, inv_d):
    """Per-row quantities of the infinite-width network recursion.

    Parameters
    ----------
    xp : module
        Array namespace.
    sqnorm : array of shape (n,)
        Squared norms ``|x|^2`` of the inputs.
    depth : int
        Number of hidden layers.
    act : {"relu", "erf"}
        Activation.
    w2, b2 : float
        Weight and bias variances ``w_std**2`` and ``b_std**2``.
    inv_d : float
        ``1 / n_features``: the input covariance is ``x.y / d``.

    Returns
    -------
    stats : array of shape (n, depth + 1)
        Column 0 is ``sqrt(|x|^2 / d)``; column ``l`` >= 1 is, for the pre-activation
        variance ``q_l(x)`` of layer ``l``, ``sqrt(q_l)`` for relu and ``1 + 2 q_l`` for erf.
    nngp_diag, ntk_diag : arrays of shape (n,)
        The NNGP and NTK values ``k(x, x)``.
    """
    q = sqnorm * inv_d
    t = xp.zeros_like(q)
    cols = [xp.sqrt(q)]
    for _ in range(depth):
        q = w2 * q + b2
        t = q + w2 * t
        if act == "relu":
            cols.append(xp.sqrt(q))
            q, t = q / 2.0, t / 2.0
        else:
            cols.append(1.0 + 2.0 * q)
            t = t * (4.0 / math.pi) / xp.sqrt(1.0 + 4.0 * q)
            q = (2.0 / math.pi) * _fn(xp, "asin", "arcsin")(2.0 * q / (1.0 + 2.0 * q))
    q = w2 * q + b2
    t = q + w2 * t
    return xp.stack(cols, axis=1), q, t


def relu_layer(xp, K, D, p):
    """One relu layer of the arc-cosine recursion, tracking the defect ``D = p - K``.

    ``K`` is the pre-activation covariance of a pair, ``p = sqrt(q_x q_y)`` and
    ``D = p - K >= 0`` is carried separately so that nearly parallel pairs, whose
    ``K / p`` rounds to 1 and whose ``arccos`` would amplify that rounding to
    ``sqrt(eps)``, get their angle from ``D`` instead (``1 - cos t = D / p``).

    Returns
    -------
    K_new, D_new : post-activation covariance and its defect ``p / 2 - K_new``
    factor : the NTK multiplier ``E[relu'(u) relu'(v)] = (pi - t) / (2 pi)``
    """
    pos = p > 0
    ps = xp.where(pos, p, 1.0)
    near = D < NEAR_PARALLEL * ps
    h = xp.sqrt(xp.clip(0.5 * D / ps, 0.0, 1.0))  # sin(t / 2)
    th_near = 2.0 * _fn(xp, "asin", "arcsin")(h)
    c = xp.where(near, 1.0 - 2.0 * h * h, xp.clip(K / ps, -1.0, 1.0))
    th = xp.where(near, th_near, _fn(xp, "acos", "arccos")(c))
    sn = xp.sin(th)
    omc = xp.where(near, 2.0 * h * h, 1.0 - c)
    t2 = th * th
    smtc = xp.where(near, th * t2 * (1 / 3 - t2 * (1 / 30 - t2 * (1 / 840 - t2 / 45360))),
                    sn - th * c)
    K_new = xp.where(pos, p * (sn + (math.pi - th) * c) / (2 * math.pi), 0.0)
    D_new = xp.where(pos, p * (math.pi * omc - smtc) / (2 * math.pi), 0.0)
    factor = xp.where(pos, (math.pi - th) / (2 * math.pi), 0.25)
    return K_new, D_new, factor


def erf_gap(xp, a, b, K):
    """``(1 + 2 q_x)(1 + 2 q_y) - 4 K^2`` for ``a = 1 + 2 q_x``, ``b = 1 + 2 q_y``.

    Written as ``a + b - 1 + 4 (p - K)(p + K)`` with ``p = sqrt(q_x q_y) >= |K|``: the
    leading terms are positive and the product is clipped at 0, so large inputs
    (``q ~ 1e16``) no longer cancel to 0 or below.
    """
    p = 0.5 * xp.sqrt((a - 1.0) * (b - 1.0))
    return a + b - 1.0 + 4.0 * xp.maximum((p - K) * (p + K), 0.0)


def affine_defect(xp, K, D, sa, sb, w2, b2, p_new, K_new):
    """Defect after ``K <- w2 K + b2`` without cancellation.

    ``sa``, ``sb``: square roots of the two variances before the layer; ``p_new``:
    ``sqrt`` of the product of the variances after it.
    """
    num = w2 * w2 * D * (sa * sb + K) + w2 * b2 * ((sa - sb) ** 2 + 2.0 * D)
    # p_new - K_new cancels only when K_new > 0, where the quotient's denominator is >= p_new
    pos = K_new > 0
    return xp.where(pos, num / xp.where(pos, p_new + K_new, 1.0), p_new - K_new)
