"""KT-SPLIT, KT-SWAP, Compress and Compress++: the algorithms on a kernel access object."""

import math
from functools import cache

import numpy as np

from ..utils._dispatch import select_loops
from ..utils._validation import check_kernel_matrix
from ._kernel import _PSD_SAMPLE, _TIE_TOL, _Pool
from ._loops import SPLIT_OK


# ------------------------------------------------------------------- KT core
def _loops(engine):
    return select_loops(__package__, engine.name)


def _row_code(engine, spec, X):
    """The engine's direct-row code of ``spec`` for the pool ``X`` (host points), else -1.

    The engine computes whole blocks from the coordinates only for few features (beyond,
    GEMM wins). A swapped-in point's row is one pass over the pool's coordinates either
    way, and the direct pass does not re-prepare the whole pool for every row as a one-row
    ``pairwise`` call does (7,500 Fashion-MNIST images, 784 features: about 8 ms against
    over 100 ms a row), so KT-SWAP takes it at any width.
    """
    if not hasattr(engine, "direct_code") or spec is None or X is None:
        return -1
    code = engine.direct_code(spec, X)
    if code < 0 and X.ndim == 2 and X.shape[1] > 1:
        code = engine.direct_code(spec, X[:, :1])  # the kernel's code, whatever the width
    return code


def _refine(engine, stat, rows, row_index, base, full, coreset, t0, t1, counts, unique, scale,
            tol, spec=None, X=None):
    """KT-SWAP's refinement loop; rows of swapped-in points computed in the loop when the
    engine has a direct formula for the kernel (else it returns to the caller for them)."""
    code = _row_code(engine, spec, X)
    Xc = np.ascontiguousarray(X, dtype=np.float64) if code >= 0 else np.empty((1, 1))
    gamma = float(spec.params[0]) if code >= 0 else 0.0
    return _loops(engine).refine_steps(stat, rows, row_index, base, bool(full), coreset, t0, t1,
                                       counts, bool(unique), float(scale), float(tol), code,
                                       gamma, Xc, np.ascontiguousarray(Xc.T))


def _split_one(pool, engine, P, uniforms, log_mult, acc, wb, budget, tri=None):
    """KT-SPLIT halving of the sequence ``P`` (local indices): the +1/-1 child signs.

    Reads a stored kernel matrix in place; otherwise computes the kernel rows of the
    pairs against the earlier positions, in blocks of at most ``budget`` bytes. ``acc``
    and ``wb``: see :meth:`ArrayBackend.kt_split_chunk`. ``tri`` (row blocks only, ``P``
    the whole pool in order): receives the lower triangle of the pool's kernel matrix,
    row by row (see :func:`._loops.packed_row`), which the blocks compute anyway.
    """
    s = len(P)
    pairs = s // 2
    sign = np.zeros(s)
    state = np.zeros(1)
    if pool.K is not None:
        chunks = [(0, pairs, pool.K, P, P)]
    elif 8 * s * s <= budget:  # this halving's own matrix fits: one symmetric block
        ci = np.arange(s, dtype=np.int64)
        chunks = [(0, pairs, pool.block(P, None, key="split"), ci, ci)]
    else:  # row blocks of the lower triangle, at least 8 so that little above it is computed
        step = max(1, min(budget // (16 * s), -(-pairs // 8)))
        ci = np.arange(s, dtype=np.int64)
        chunks = ((i0, min(pairs, i0 + step), None, None, ci) for i0 in range(0, pairs, step))
    for i0, i1, kmat, ri, ci in chunks:
        if kmat is None:
            kmat = pool.block(P[2 * i0:2 * i1], P[:2 * i1], key="split")
            ri = np.arange(2 * (i1 - i0), dtype=np.int64)
            if tri is not None:
                for p in range(2 * i0, 2 * i1):
                    tri[p * (p + 1) // 2:(p + 1) * (p + 2) // 2] = kmat[p - 2 * i0, :p + 1]
        status = _loops(engine).split_chunk(kmat, ri, ci, i0, i1, sign, uniforms, state,
                                            float(log_mult),
                                       acc, wb)
        if status != SPLIT_OK:
            raise ValueError(
                "kernel is not positive semidefinite on the data: ||k(x, .) - k(y, .)||^2 = "
                "k(x, x) + k(y, y) - 2 k(x, y) came out negative; kernel thinning needs a "
                "positive semidefinite kernel.")
    return sign


def _kt_split(split, engine, seq_split, m, delta, uniforms, acc, wb, budget, tri=None):
    """KT-SPLIT [KT, Alg. 1a]: the ``2^m`` candidate coresets of ``seq_split`` (in order).

    Level by level: the halving of one coreset reads only its own points, so this order
    makes the same decisions as the streaming order of Alg. 1a. Pair ``i`` of coreset
    ``ell`` at level ``j`` draws ``uniforms[j - 1, ell * s_j / 2 + i]`` (``s_j`` the parent
    size) and uses the failure probability ``delta' = delta 2^(j-1) / (n m)``
    (``delta_i = delta / n`` per pair, shared by the ``m`` levels as in Alg. 1a).
    ``acc``/``wb`` accumulate products at level 1 (see ``ArrayBackend.kt_split_chunk``).
    """
    n_split = len(seq_split)
    parents = [seq_split]
    for j in range(1, m + 1):
        log_mult = 2.0 * math.log(2.0 * n_split * m / (delta * 2.0 ** (j - 1)))
        s = n_split >> (j - 1)
        children = []
        for ell, P in enumerate(parents):
            u = uniforms[j - 1, ell * (s // 2):(ell + 1) * (s // 2)]
            sign = _split_one(split, engine, P, u, log_mult, acc if j == 1 else acc[:0], wb,
                              budget, tri if j == 1 else None)
            children += [P[sign > 0], P[sign < 0]]
        parents = children
    return parents


def _kt(split, swap, engine, seq, m, delta, rng, budget, *, weights=None, unique=True,
        symmetrize=False, want_mmd=True):
    """Kernel thinning [KT, Alg. 1] of the points of ``swap`` (a :class:`_Pool`).

    Parameters
    ----------
    split, swap : _Pool
        The same points under the split and the swap (target) kernel (may be one object).
    seq : ndarray of int
        Local indices KT-SPLIT halves, in order (``arange(n)``, or a resampled sequence).
    m : int
        Halving rounds; the coreset has ``len(seq) >> m`` points.
    weights : ndarray or None
        Target measure's weights over the pool (None: uniform).
    unique : bool
        KT-SWAP keeps the coreset free of repeated points.
    symmetrize : bool
        Return the coreset or its complement with probability 1/2 each (needs m = 1,
        an even pool and ``unique``): the symmetrized halving of [CPP].

    Returns
    -------
    coreset : ndarray of int64
        Local indices.
    mmd : float or None
        MMD under the swap kernel between the target measure and the coreset (equal weights).
    """
    n = swap.n
    everything = np.arange(n)
    n_seq = len(seq)
    q = n_seq >> m
    n_split = q << m
    # random draws, always in this order: leftovers, KT-SPLIT coins, symmetrization coin
    if n_split < n_seq:
        keep = np.ones(n_seq, dtype=bool)
        keep[rng.choice(n_seq, n_seq - n_split, replace=False)] = False
        seq_split = seq[keep]
    else:
        seq_split = seq
    uniforms = rng.random_sample((m, n_split // 2))
    coin = rng.random_sample() if symmetrize else 1.0

    # KT-SPLIT. With one kernel and equal weights, level 1 reads every kernel entry of the
    # split points once: it also accumulates the row sums (the target's Pk) and, for a single
    # halving of the whole pool, k(., Q) 1 for the candidate Q and for the baseline.
    baseline_pos = n_seq - 1 - (n_seq // q) * np.arange(q)[::-1]
    use_acc = split is swap and weights is None
    halving = use_acc and m == 1 and n_split == n
    acc = np.zeros((3 if halving else 1 if use_acc else 0, n_split))
    wb = np.zeros(n_split)
    if halving:
        wb[baseline_pos] = 1.0
    # a halving whose kernel matrix does not fit the budget but its lower triangle does keeps
    # the triangle that KT-SPLIT's row blocks compute: KT-SWAP then reads rows instead of
    # computing one per swapped-in point (O(n d) each; about 40% of the points swap)
    tri = None
    if (halving and split.K is None and 4 * n * (n + 1) <= budget
            and np.array_equal(seq_split, everything)):
        tri = np.empty(n * (n + 1) // 2)
    parents = _kt_split(split, engine, seq_split, m, delta, uniforms, acc, wb, budget, tri)

    # target measure: meanK[y] = sum_i w_i k(y, x_i)
    if weights is None:
        if use_acc:
            tot = np.zeros(n)
            tot[seq_split] = acc[0]
            if n_split < n:
                left = np.setdiff1d(everything, seq_split)
                tot[seq_split] += swap.matvec(seq_split, left, np.ones(len(left)))
                tot[left] = swap.matvec(left, everything, np.ones(n))
            meanK = tot / n
        else:
            meanK = swap.matvec(everything, everything, np.full(n, 1.0 / n))
    else:
        meanK = swap.matvec(everything, everything, weights)

    # KT-SWAP [KT, Alg. 1b], step 1: the candidate closest to the target, against a
    # standard-thinning baseline (every (n_seq // q)-th point counted from the end)
    # (the baseline counts as better only beyond rounding: it can tie a candidate exactly,
    # e.g. when it is a candidate's complement, and ties must not depend on the engine)
    baseline = seq[baseline_pos]
    ones_q = np.ones(q)
    diag = swap.diag()
    tol = _TIE_TOL * max(float(np.abs(meanK).max()), float(np.abs(diag).max()))
    best, best_val, best_v = None, np.inf, None
    if halving:  # complementary halves have equal MMD to the pool: one candidate
        for Q, v in ((parents[0], acc[1]), (baseline, acc[2])):
            val = v[Q].sum() / (q * q) - 2.0 * meanK[Q].mean()
            if val < best_val - tol:
                best, best_val, best_v = Q, val, v
    else:
        for Q in parents + [baseline]:
            val = swap.matvec(Q, Q, ones_q).sum() / (q * q) - 2.0 * meanK[Q].mean()
            if val < best_val - tol:
                best, best_val = Q, val

    # KT-SWAP step 2: replace each point in turn by the best point of the pool
    Q = np.array(best, dtype=np.int64)
    scale = 2.0 / q
    if best_v is None:
        best_v = swap.matvec(everything, Q, ones_q)
    stat = diag / q + scale * best_v - 2.0 * meanK
    counts = np.bincount(Q, minlength=n).astype(np.int64)
    if swap.K is not None:
        _refine(engine, stat, swap.K, Q.copy(), 0, True, Q, 0, q, counts, unique, scale, tol)
    elif tri is not None:
        _loops(engine).refine_packed(stat, tri, Q, counts, bool(unique), float(scale),
                                     float(tol))
    else:
        spec, points = swap.single()
        per = max(1, budget // (8 * n))
        for t0 in range(0, q, per):
            t1 = min(q, t0 + per)
            R = swap.block(Q[t0:t1].copy(), everything, key="refine")
            row_index = np.arange(t1 - t0, dtype=np.int64)
            t = t0
            while t < t1:
                t, y = _refine(engine, stat, R, row_index, t0, False, Q, t, t1, counts,
                                              unique, scale, tol, spec, points)
                if t < t1:
                    stat += scale * swap.block(np.array([y]), everything)[0]
                    t += 1
    mmd = None
    if want_mmd:
        core = (stat - diag / q + 2.0 * meanK) * (q / 2.0)  # sum_{c in Q} k(y, c)
        target = meanK.mean() if weights is None else float(weights @ meanK)
        mmd2 = target - 2.0 * meanK[Q].mean() + core[Q].sum() / (q * q)
        mmd = math.sqrt(max(mmd2, 0.0))
    if symmetrize and coin < 0.5:
        Q = np.flatnonzero(counts == 0)
    return Q, mmd


def _halve(split_kern, swap_kern, engine, cat, delta_per_sq, rng, budget):
    """Symmetrized KT halving of the points ``cat`` (indices into X): Compress's Halve [CPP].

    KT with one round and the failure probability ``delta_per_sq * ell^2`` for ``ell``
    points ([CPP]'s choice, proportional to ``ell^2``), returning the coreset or its
    complement with probability 1/2 each.
    """
    if len(cat) % 2:  # odd: one point, drawn uniformly, is left out of this halving
        cat = np.delete(cat, rng.randint(len(cat)))
    ell = len(cat)
    delta = min(0.5, delta_per_sq * ell * ell)
    split = _Pool(split_kern, cat, budget)
    swap = split if swap_kern is split_kern else _Pool(swap_kern, cat, budget)
    Q, _ = _kt(split, swap, engine, np.arange(ell), 1, delta, rng, budget, unique=True,
               symmetrize=True, want_mmd=False)
    return cat[Q]


def _compress(split_kern, swap_kern, engine, idx, height, delta_per_sq, rng, budget):
    """Compress [CPP, Alg. 1]: split into 4 consecutive parts, compress each, halve the union."""
    if height == 0:
        return idx
    parts = np.array_split(idx, 4)
    cat = np.concatenate([_compress(split_kern, swap_kern, engine, p, height - 1, delta_per_sq,
                                    rng, budget) for p in parts])
    return _halve(split_kern, swap_kern, engine, cat, delta_per_sq, rng, budget)


@cache
def _compress_plan(n, height):
    """(output size, sum of the squared halving sizes) of :func:`_compress` on n points."""
    if height == 0:
        return n, 0
    out, sq = 0, 0
    for size in (n // 4 + (i < n % 4) for i in range(4)):  # np.array_split's sizes
        o, q = _compress_plan(size, height - 1)
        out, sq = out + o, sq + q
    ell = out - out % 2
    return ell // 2, sq + ell * ell


def _systematic_resample(w, n, rng):
    """``n`` indices drawn by systematic resampling from weights ``w`` (sum 1), sorted.

    Each index ``i`` appears ``floor(n w_i)`` or ``ceil(n w_i)`` times.
    """
    c = np.cumsum(w)
    c[-1] = 1.0
    u = (np.arange(n) + rng.random_sample()) / n
    return np.minimum(np.searchsorted(c, u, side="right"), len(w) - 1).astype(np.int64)


def _check_psd(kern, n):
    """Reject a kernel whose Gram matrix on up to 64 of the points is not symmetric PSD
    (the one rule of :func:`kernelkit.utils._validation.check_kernel_matrix`)."""
    idx = np.unique(np.linspace(0, n - 1, min(n, _PSD_SAMPLE)).astype(np.int64))
    check_kernel_matrix(np.asarray(kern.block(idx, idx), dtype=np.float64), "X")
