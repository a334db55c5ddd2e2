"""Kernel thinning's sequential loops and power kernels: the NumPy reference.

Kernel thinning (Dwivedi & Mackey, "Kernel Thinning", COLT 2021 / JMLR 25(152), 2024)
runs two sequential loops that no matrix product expresses:

* :func:`split_chunk`, the self-balancing Hilbert walk of KT-SPLIT (JMLR Alg. 1a),
  which halves a point sequence pair by pair, each pair's coin biased against the
  signed kernel sum of the decisions made so far;
* :func:`refine_steps`, the greedy refinement of KT-SWAP (JMLR Alg. 1b), which
  revisits each coreset point in turn and replaces it by the input point that most
  decreases the MMD to the input.

Both read kernel values from blocks computed beforehand by an engine (``pairwise``);
they never evaluate a kernel themselves. The Numba engine runs compiled copies of
the same loops (:mod:`._loops_numba`), checked against these.

:func:`power_block` evaluates the fractional power kernels of Generalized Kernel
Thinning (Dwivedi & Mackey, ICLR 2022) that have no engine kernel: Matérn kernels of
arbitrary smoothness and products of one-dimensional Matérn kernels.
"""

import math

import numpy as np

# b^2 = k(x,x) + k(y,y) - 2 k(x,y) below -PSD_TOL * (|k(x,x)| + |k(y,y)|) means the
# kernel is not positive semidefinite (rounding gives ~1e-16 on PSD kernels).
PSD_TOL = 1e-8
SPLIT_OK = 0
SPLIT_NOT_PSD = 1


def split_chunk(kmat, ri, ci, i0, i1, sign, uniforms, state, log_mult, acc, wb):
    """KT-SPLIT's halving of one coreset, pairs ``i0 .. i1 - 1`` (reference loop).

    The coreset to halve is a sequence ``P`` of ``s`` points (positions ``0 .. s-1``);
    pair ``i`` is ``(x, y) = (P[2i], P[2i+1])``. The walk keeps
    ``psi = sum_{child 1} k(z, .) - sum_{child 2} k(z, .)`` implicitly through
    ``sign`` and sends ``x`` to child 1 (``psi += k(x, .) - k(y, .)``) with probability
    ``(1 - alpha / a) / 2`` where ``alpha = <psi, k(x, .) - k(y, .)>`` and ``a`` is the
    adaptive threshold of ``get_swap_params`` (JMLR Alg. 1a): with
    ``b^2 = ||k(x, .) - k(y, .)||^2``, ``a = max(b sigma sqrt(log_mult), b^2)`` and then
    ``sigma^2 += b^2 max(0, 1 + (b^2 - 2a) sigma^2 / a^2)``.

    Parameters
    ----------
    kmat : ndarray of shape (r, c), float64
        Kernel values: position ``2 i0 + t``'s row is ``kmat[ri[t]]`` and position ``q``'s
        column is ``ci[q]`` (a block computed for these pairs, or a stored kernel matrix).
    ri : ndarray of shape (2 * (i1 - i0),), int64
    ci : ndarray of shape (>= 2 * i1,), int64
    i0, i1 : int
        First and one-past-last pair.
    sign : ndarray of shape (s,), float64
        +1 / -1: child of each position; read below ``2 i0``, written on ``2 i0 .. 2 i1 - 1``.
    uniforms : ndarray, float64
        ``uniforms[i]`` is pair ``i``'s U(0, 1) draw.
    state : ndarray of shape (1,), float64
        ``sigma^2`` of the walk, updated in place (0 before the first pair).
    log_mult : float
        ``2 log(2 / delta')``, ``delta'`` the pair's failure probability.
    acc : ndarray of shape (k, s), float64, k in {0, 1, 3}
        Accumulates products of the parent's kernel matrix, reading each entry of its
        lower triangle once (valid once every pair is processed): ``acc[0] += K 1``,
        ``acc[1] += K 1{child 1}``, ``acc[2] += K wb``.
    wb : ndarray of shape (s,), float64
        Weights of ``acc[2]`` (used when ``k == 3``).

    Returns
    -------
    status : int
        ``SPLIT_OK``, or ``SPLIT_NOT_PSD`` when some ``b^2`` was clearly negative.
    """
    sig2 = state[0]
    nacc = acc.shape[0]
    status = SPLIT_OK
    for i in range(i0, i1):
        r = 2 * (i - i0)
        p = 2 * i
        kx = kmat[ri[r]]
        ky = kmat[ri[r + 1]]
        cols = ci[:p]
        kxx, kyy, kxy, kyx = kx[ci[p]], ky[ci[p + 1]], kx[ci[p + 1]], ky[ci[p]]
        b2 = kxx + kyy - 2.0 * kxy
        if b2 < -PSD_TOL * (abs(kxx) + abs(kyy)):
            status = SPLIT_NOT_PSD
        b2 = max(b2, 0.0)
        ux, uy = kx[cols], ky[cols]
        alpha = float(np.dot(ux - uy, sign[:p]))
        a = max(math.sqrt(sig2 * b2 * log_mult), b2)
        if a > 0.0:
            sig2 += b2 * max(0.0, 1.0 + (b2 - 2.0 * a) * sig2 / (a * a))
            prob = 0.5 * (1.0 - alpha / a)
        else:  # x and y are the same point of the RKHS: a fair coin
            prob = 0.5
        if uniforms[i] < prob:
            sign[p], sign[p + 1] = 1.0, -1.0
        else:
            sign[p], sign[p + 1] = -1.0, 1.0
        if nacc:
            weights = [(0, 1.0, 1.0, None)]
            if nacc == 3:
                wx = 1.0 if sign[p] > 0 else 0.0
                weights += [(1, wx, 1.0 - wx, (sign[:p] > 0).astype(np.float64)),
                            (2, wb[p], wb[p + 1], wb[:p])]
            for row, wx, wy, wq in weights:
                if wq is None:
                    acc[row, p] += ux.sum() + kxx * wx + kxy * wy
                    acc[row, p + 1] += uy.sum() + kyx * wx + kyy * wy
                else:
                    acc[row, p] += ux @ wq + kxx * wx + kxy * wy
                    acc[row, p + 1] += uy @ wq + kyx * wx + kyy * wy
                acc[row, :p] += ux * wx + uy * wy
    state[0] = sig2
    return status


def refine_steps(stat, rows, row_index, base, full, coreset, t0, t1, counts, unique, scale,
                 tol, code=-1, gamma=0.0, X=None, Xt=None):
    """KT-SWAP's greedy refinement over coreset slots ``t0 .. t1 - 1`` (reference loop).

    With ``Q`` the coreset (``s`` points, equal weights) and ``P`` the target measure,
    ``stat[y] = k(y, y) / s + (2 / s) sum_{c in Q} k(y, c) - 2 (P k)(y)`` is, up to a
    constant and the factor ``1 / s``, the squared MMD to ``P`` after adding ``y``. Slot
    ``t``'s point ``c`` is removed (``stat -= scale k(c, .)``, ``scale = 2 / s``) and,
    when the smallest ``stat`` of an allowed point is below ``stat[c] - tol``, replaced
    by the first allowed point within ``tol`` of that minimum; otherwise ``c`` stays.
    (``tol`` makes exact ties, e.g. between duplicate points, independent of rounding.)

    Parameters
    ----------
    stat : ndarray of shape (n,), float64
        Updated in place.
    rows : ndarray of shape (r, n), float64
        Kernel rows; slot ``t``'s current point has row ``rows[row_index[t - base]]``.
    row_index : ndarray of int64
    base : int
    full : bool
        ``rows`` is the whole ``n x n`` kernel matrix: additions are applied here.
    coreset : ndarray of shape (s,), int64
        Updated in place.
    t0, t1 : int
        Slots to process.
    counts : ndarray of shape (n,), int64
        Multiplicity of each point in the coreset, updated in place.
    unique : bool
        Allow only points not in the coreset (besides the removed one).
    scale : float
        ``2 / s``.
    tol : float >= 0
        Smallest decrease of ``stat`` that counts as an improvement.
    code, gamma, X, Xt
        Unused here: the compiled loop may evaluate the rows of swapped-in points itself
        (see :func:`kernelkit.backend._numba_thinning.refine_steps`).

    Returns
    -------
    t, y : int
        ``t == t1`` when done. Otherwise slot ``t`` received the new point ``y`` and the
        caller must add ``scale * k(y, .)`` to ``stat`` before resuming at ``t + 1``.
    """
    for t in range(t0, t1):
        c = coreset[t]
        row_c = rows[row_index[t - base]]
        stat -= scale * row_c
        counts[c] -= 1
        if unique:
            masked = np.where(counts == 0, stat, np.inf)
        else:
            masked = stat
        low = masked.min()
        # the first point within tol of the minimum: duplicates of a point tie exactly
        y = int(np.argmax(masked <= low + tol)) if low < stat[c] - tol else int(c)
        counts[y] += 1
        if y == c:
            stat += scale * row_c
            continue
        coreset[t] = y
        if full:
            stat += scale * rows[y]
            continue
        return t, y
    return t1, -1


def packed_row(tri, i, n):
    """Row ``i`` of the symmetric ``n x n`` matrix whose lower triangle ``tri`` holds
    row by row (``K[i, j]``, ``j <= i``, at ``i (i + 1) / 2 + j``)."""
    j = np.arange(i + 1, n)
    return np.concatenate([tri[i * (i + 1) // 2:(i + 1) * (i + 2) // 2], tri[j * (j + 1) // 2 + i]])


def refine_packed(stat, tri, coreset, counts, unique, scale, tol):
    """:func:`refine_steps` over every slot, with the pool's kernel matrix held as its
    lower triangle ``tri`` (see :func:`packed_row`): the same steps and tie rules."""
    n = stat.shape[0]
    for t in range(coreset.shape[0]):
        c = int(coreset[t])
        stat -= scale * packed_row(tri, c, n)
        counts[c] -= 1
        masked = np.where(counts == 0, stat, np.inf) if unique else stat
        low = masked.min()
        y = int(np.argmax(masked <= low + tol)) if low < stat[c] - tol else c
        counts[y] += 1
        coreset[t] = y
        stat += scale * packed_row(tri, y, n)
