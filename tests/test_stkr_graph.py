"""The fast kNN graph of STKR equals the brute-force graph of all pairwise distances.

:mod:`kernelkit.stkr._graph` finds neighbourhoods with a k-d tree (few features) or
float32 Gram tiles (many features) and decides the graph on exact pair distances;
:mod:`kernelkit.stkr._graph_brute` is the former implementation (every distance from
float64 Gram products). On integer data both compute every distance exactly, so ties
at the k-th distance, duplicates and equidistant queries must come out identical.
"""

import importlib.util
import tracemalloc

import numpy as np
import pytest
from scipy import sparse

from kernelkit.stkr import STKRClassifier, STKRRegressor, _graph, _graph_brute, _neighbours

_NUMBA = importlib.util.find_spec("numba") is not None
ENGINES = ["numpy", pytest.param("numba", marks=pytest.mark.skipif(not _NUMBA,
                                                                   reason="no Numba"))]


def _both(X, Xq, k, engine):
    """Fast and brute (W, radius2, predict rows) on the scaled rows of X and Xq."""
    e = _graph.max_exponent(X)
    Xs, Xqs = _graph.scale(X, e), _graph.scale(Xq, e)
    loc, first = _graph.locations(Xs)
    W, r2, reverse = _graph.knn_graph(Xs, k, loc, first, engine)
    Wb, r2b = _graph_brute.knn_graph(Xs, k, loc, first)
    degree = _graph.normalised_adjacency(W)[1]
    theta = np.random.default_rng(0).standard_normal((X.shape[0], 2))
    fit = dict(degree=degree, loc=loc, first=first, reverse=reverse, radius2=r2)
    pred = _graph.knn_cross_matmul(Xqs, Xs, fit, k, theta, engine)
    pred_b = _graph_brute.knn_cross_matmul(Xqs, Xs, fit, k, theta)
    return (W, r2, pred), (Wb, r2b, pred_b)


def _assert_same(fast, brute):
    (W, r2, pred), (Wb, r2b, pred_b) = fast, brute
    assert W.shape == Wb.shape and (W != Wb).nnz == 0
    np.testing.assert_array_equal(np.isinf(r2), np.isinf(r2b))
    np.testing.assert_allclose(r2, r2b, rtol=1e-12, atol=0)
    np.testing.assert_allclose(pred, pred_b, rtol=0, atol=1e-12)


def _lattice(n, d, seed, levels=3):
    """Integer rows: many rows repeated, many distances tied at the k-th."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, levels, (n, d)).astype(float)
    Xq = np.r_[rng.integers(0, levels, (15, d)), X[:10] + 0.5,  # on and between points
               X[10:15] * (1 + 1e-9), rng.normal(1, 1, (10, d))]  # next to training rows
    return X, Xq


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("fmt", ["dense", "csr"])
@pytest.mark.parametrize("d, k", [(2, 5), (3, 1), (40, 5), (60, 1)])
def test_fast_graph_equals_brute_force_with_ties_and_duplicates(d, k, fmt, engine):
    X, Xq = _lattice(240, d, seed=d + k)
    assert _graph.locations(X)[1].size < X.shape[0] or d > 10  # duplicates in low d
    assert _neighbours.use_tree(d) == (d <= _neighbours.TREE_MAX_D)
    if fmt == "csr":
        X, Xq = sparse.csr_matrix(X), sparse.csr_matrix(Xq)
    _assert_same(*_both(X, Xq, k, engine))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("d", [3, 50])
def test_fast_graph_equals_brute_force_on_continuous_rows(d, engine):
    rng = np.random.default_rng(d)
    X = rng.standard_normal((300, d))
    X = np.r_[X, X[:40], X[:5] + 1e-9 * rng.standard_normal((5, d))]  # copies, near-copies
    Xq = np.r_[rng.standard_normal((20, d)), X[:10], X[20:30] + 1e-8]
    _assert_same(*_both(X, Xq, 7, engine))


@pytest.mark.parametrize("engine", ENGINES)
def test_gram_search_regrows_rows_whose_ties_overflow_the_buffer(engine, monkeypatch):
    # binary rows: Hamming distances, dozens tied at the k-th; the buffer of 2 k + 10
    # cannot hold them, those rows are searched again (in blocks of working_memory)
    import kernelkit

    rng = np.random.default_rng(5)
    X = (rng.random((300, 24)) < 0.15).astype(float)
    Xq = (rng.random((25, 24)) < 0.15).astype(float)
    calls = []
    regrow = _neighbours._Gemm._smallest_rows
    monkeypatch.setattr(_neighbours._Gemm, "_smallest_rows",
                        lambda self, rows, K: calls.append(rows.size) or regrow(self, rows, K))
    with kernelkit.config_context(working_memory=1):
        _assert_same(*_both(X, Xq, 10, engine))
    assert calls and max(calls) > 20


@pytest.mark.parametrize("engine", ENGINES)
def test_gram_search_is_exact_far_from_the_origin(engine):
    # rows at 1000 + O(1): float32 products of uncentred rows could not order these
    # distances; the search centres them, and its error bound keeps the result exact
    rng = np.random.default_rng(4)
    X = 1000.0 + rng.integers(0, 4, (200, 30)).astype(float)
    Xq = 1000.0 + rng.integers(0, 4, (20, 30)) + rng.uniform(0, 1, (20, 30))
    _assert_same(*_both(X, Xq, 6, engine))


def test_fewer_locations_than_neighbours():
    X = np.repeat(np.eye(3), 4, axis=0)  # 3 locations, k = 5: every other location
    fast, brute = _both(X, np.eye(3) * 0.9, 5, "numpy")
    _assert_same(fast, brute)
    assert np.isinf(fast[1]).all() and fast[0].nnz == 12 * 8


def test_estimator_uses_the_fast_graph_with_the_brute_force_values():
    X, _ = _lattice(200, 2, seed=11)
    y = np.sin(X @ [1.0, 0.5])
    y_semi = np.where(np.arange(200) % 10 == 0, y, np.nan)
    est = STKRRegressor(n_neighbors=4, tol=1e-13, max_iter=20000).fit(X, y_semi)
    e = est.knn_scale_exp_
    Xs = _graph.scale(X, e)
    loc, first = _graph.locations(Xs)
    Wb, r2b = _graph_brute.knn_graph(Xs, 4, loc, first)
    np.testing.assert_allclose(est.knn_radius2_, r2b, rtol=1e-12)
    np.testing.assert_allclose(est.knn_degree_, np.maximum(Wb.sum(1).A1, 1.0))
    Xq = X[:30] + 0.25
    fit = dict(degree=est.knn_degree_, loc=loc, first=first, radius2=est.knn_radius2_)
    ref = _graph_brute.knn_cross_matmul(_graph.scale(Xq, e), Xs, fit, 4, est.dual_coef_)
    np.testing.assert_allclose(est.predict(Xq), ref[:, 0], rtol=0, atol=1e-12)


def test_knn_fit_and_predict_memory_is_linear_in_n():
    # no n x n block anywhere: 6,000 rows in 3-D fit and predict within a few MiB
    # (one dense 6000 x 6000 float64 block alone is 275 MiB)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((6000, 3))
    y = np.where(np.arange(6000) % 50 == 0, (X[:, 0] > 0).astype(int), -1)
    tracemalloc.start()
    clf = STKRClassifier().fit(X, y)
    clf.predict(X + 0.01)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 40 * 2**20, peak / 2**20


def test_calibration_refits_are_batched_without_changing_the_fit():
    # the fold refits share the fit's products; each problem stops on its own rule, so
    # the fit is the same as without calibration and the folds as refitted alone
    rng = np.random.default_rng(2)
    X = np.r_[rng.normal(-2, 0.7, (60, 2)), rng.normal(2, 0.7, (60, 2))]
    y = np.full(120, -1)
    lab = np.r_[0:8, 60:68]
    y[lab] = (lab >= 60).astype(int)
    kw = dict(n_neighbors=6, tol=1e-10, max_iter=5000)
    cal = STKRClassifier(**kw).fit(X, y)
    plain = STKRClassifier(calibration=None, **kw).fit(X, y)
    assert cal.n_iter_ == plain.n_iter_
    np.testing.assert_allclose(cal.residuals_, plain.residuals_, rtol=1e-12)
    np.testing.assert_allclose(cal.dual_coef_, plain.dual_coef_, rtol=0, atol=1e-13)
    # one fold alone: its held-out decision values from a refit without those labels
    from kernelkit.utils._calibration import calibration_folds

    rows, held = calibration_folds((y[lab] == 1).astype(int), None)[0]
    y_fold = y.copy()
    y_fold[lab[held]] = -1
    refit = STKRClassifier(calibration=None, **kw).fit(X, y_fold)
    Y = np.eye(2)[(y[lab] == 1).astype(int)]
    _, oos = cal._fit_targets(X, Y, lab, None, None, [(rows, held)])
    np.testing.assert_allclose(oos[held], refit._decision(X[lab[held]]), rtol=0, atol=1e-8)


def test_scale_by_a_product_equals_ldexp_bit_for_bit():
    # the product rounds like ldexp where results turn subnormal; ldexp serves where
    # 2**-e itself overflows (all-subnormal rows), and CSR scales its stored values
    rng = np.random.default_rng(3)
    X = np.r_[rng.standard_normal(400) * 1e-308, rng.uniform(0, 1e-310, 400),
              [1.5, 3e-320, 5e-324, -7e-322]].reshape(-1, 4)
    for A in (X, X * 1e-10, np.full((3, 2), 5e-324), X * 1e290):
        e = _graph.max_exponent(A)
        for shift in (e, e + 3, e - 2):
            np.testing.assert_array_equal(_graph.scale(A, shift), np.ldexp(A, -shift))
    assert np.abs(_graph.scale(X * 1e-10, _graph.max_exponent(X * 1e-10))).max() > 0.5
    S = sparse.random(30, 20, density=0.3, format="csr", random_state=0) * 1e-305
    e = _graph.max_exponent(S)
    np.testing.assert_array_equal(_graph.scale(S, e).toarray(), np.ldexp(S.toarray(), -e))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("fmt", ["dense", "csr"])
def test_panel_search_on_the_pool_equals_brute_force(engine, fmt, monkeypatch):
    # small panels and tiles: many row panels (on kernelkit's pool, each worker with its
    # own buffers), diagonal blocks spanning several tiles and tiles spanning several
    # panels' diagonals, widths that do not divide n; ties and duplicate rows
    monkeypatch.setattr(_neighbours, "PANEL_ROWS", 24)
    monkeypatch.setattr(_neighbours, "TILE", 70)
    for d, k, seed in [(30, 5, 1), (24, 1, 2)]:
        X, Xq = _lattice(330, d, seed=seed)
        X = np.r_[X, X[:25]]  # exact copies: one location, several rows
        if fmt == "csr":
            X, Xq = sparse.csr_matrix(X), sparse.csr_matrix(Xq)
        _assert_same(*_both(X, Xq, k, engine))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("panel, tile", [(512, 2048), (16, 40), (50, 64)])
def test_gram_buffers_hold_the_smallest_distances_within_the_bound(engine, panel, tile,
                                                                   monkeypatch):
    # the merged buffers of the symmetric search: per row, the K smallest approximate
    # distances over all columns, each rank within the error bound of the exact one
    monkeypatch.setattr(_neighbours, "PANEL_ROWS", panel)
    monkeypatch.setattr(_neighbours, "TILE", tile)
    rng = np.random.default_rng(9)
    X = 3.0 + rng.standard_normal((230, 40))
    X = np.r_[X, X[:7] + 1e-3]
    norms = _neighbours.sq_norms(X)
    search = _neighbours._Gemm(X, X, True, engine, norms, norms)
    K = 12
    a, idx = search.smallest(K)
    D = ((X[:, None] - X[None]) ** 2).sum(-1)
    exact = np.sort(D, axis=1)[:, :K]
    bound = search.margin[:, None] + 1e-6 * exact
    assert np.all(np.abs(a - exact) <= bound)
    # every index once per row, and each value is that column's own approximation
    assert (idx >= 0).all() and all(np.unique(r).size == K for r in idx)
    got = D[np.arange(X.shape[0])[:, None], idx]
    assert np.all(np.abs(a - got) <= bound)
    # an exact copy's nearest is itself (distance 0 up to the bound)
    assert np.all(a[:, 0] <= search.margin)


@pytest.mark.skipif(not _NUMBA, reason="no Numba")
@pytest.mark.parametrize("block", [2048, 32])
def test_cg_passes_and_graph_product_compiled_equal_reference(block, monkeypatch):
    from kernelkit.stkr import _loops, _loops_numba

    monkeypatch.setattr(_loops_numba, "_ROWS", block)  # one block; several on the pool

    rng = np.random.default_rng(1)
    n, m = 150, 7
    arrays = [rng.standard_normal((n, m)) for _ in range(5)]
    d = (rng.random((n, m)) < 0.2) * rng.uniform(0.5, 2, (n, m))
    beta, ridge, a = rng.random(m), rng.uniform(0.1, 1, m), rng.standard_normal(m)
    ref = [v.copy() for v in arrays]
    got = [v.copy() for v in arrays]
    s_ref = _loops.cg_direction(*ref[:4], beta, 0.7, ridge, d, ref[4])
    s_got = _loops_numba.cg_direction(*got[:4], beta, 0.7, ridge, d, got[4])
    for u, v in zip(ref, got):  # same arithmetic per entry: equal to the bit
        np.testing.assert_array_equal(u, v)
    np.testing.assert_allclose(s_got, s_ref, rtol=1e-12)
    # the update: theta += a p, r -= a Tp, Gr -= a GTp, and the new sum r Gr
    p, Tp, GTp = (rng.standard_normal((n, m)) for _ in range(3))
    ref = [rng.standard_normal((n, m)) for _ in range(3)]
    got = [v.copy() for v in ref]
    want = (ref[0] + p * a, ref[1] - Tp * a, ref[2] - GTp * a)
    s_ref = _loops.cg_update(a, p, Tp, GTp, *ref)
    s_got = _loops_numba.cg_update(a, p, Tp, GTp, *got)
    for u, v, w in zip(ref, got, want):
        np.testing.assert_array_equal(u, w)
        np.testing.assert_array_equal(v, w)
    np.testing.assert_allclose(s_ref, (want[1] * want[2]).sum(0), rtol=1e-12)
    np.testing.assert_allclose(s_got, s_ref, rtol=1e-12)
    # the kNN kernel's product (M + S V) / 2 against a dense S
    S = sparse.random(n, n, density=0.05, format="csr", random_state=2)
    V, M = rng.standard_normal((n, m)), rng.standard_normal((n, m))
    want = 0.5 * (M + S.toarray() @ V)
    for loops in (_loops, _loops_numba):
        out = np.empty((n, m))
        loops.lazy_walk(S.indptr, S.indices, S.data, V, M, out)
        np.testing.assert_allclose(out, want, rtol=1e-13, atol=1e-14)


@pytest.mark.skipif(not _NUMBA, reason="no Numba")
@pytest.mark.parametrize("block", [2048, 16])
def test_row_hashes_and_centring_compiled_equal_reference(block, monkeypatch):
    from kernelkit.stkr import _loops, _loops_numba

    monkeypatch.setattr(_loops_numba, "_ROWS", block)  # one block; several on the pool

    rng = np.random.default_rng(4)
    X = rng.standard_normal((300, 13))
    X[rng.random(X.shape) < 0.3] = 0.0
    X[5, 3], X[6] = -0.0, X[7]  # -0.0 hashes as 0.0; an exact copy hashes alike
    X[8, 0], X[9, 0] = 5e-324, -1e30
    mult = _graph._hash_factors(X)
    ref, got = (np.empty(300, dtype=np.uint64) for _ in range(2))
    _loops.row_hashes(X, 1.0, mult, ref)
    _loops_numba.row_hashes(X, 1.0, mult, got)
    np.testing.assert_array_equal(got, ref)
    assert ref[6] == ref[7] and np.unique(ref).size == 299
    Y = X.copy()
    Y[5, 3] = 0.0
    _loops.row_hashes(Y, 1.0, mult, got)
    assert got[5] == ref[5]
    for engine in ("numpy", "numba"):  # locations: the same on either engine
        loc, first = _graph.locations(X, engine)
        assert first.size == 299 and loc[6] == loc[7] == 7 - 1 and loc[8] == 7
    # the search's centred float32 rows and their norms (float64 differences)
    mu = X.mean(axis=0)
    want = X - mu
    for loops in (_loops, _loops_numba):
        out, norms = np.empty(X.shape, dtype=np.float32), np.empty(300)
        loops.centre32(X, mu, out, norms, 1.0)
        np.testing.assert_array_equal(out, want.astype(np.float32))
        np.testing.assert_allclose(norms, (want**2).sum(1), rtol=1e-14)
    # exact pair distances: a pair and its transpose alike to the bit, any d (tails)
    rows, cols = rng.integers(0, 300, 500), rng.integers(0, 300, 500)
    for d in (13, 16, 3):
        A = np.ascontiguousarray(X[:, :d])
        fwd, back, ref = np.empty(500), np.empty(500), np.empty(500)
        _loops_numba.pair_sq_dists(A, A, rows, cols, fwd, 1.0)
        _loops_numba.pair_sq_dists(A, A, cols, rows, back, 1.0)
        _loops.pair_sq_dists(A, A, rows, cols, ref, 1.0)
        np.testing.assert_array_equal(fwd, back)
        np.testing.assert_allclose(fwd, ((A[rows] - A[cols]) ** 2).sum(1), rtol=1e-14)
        np.testing.assert_allclose(ref, fwd, rtol=1e-14)


def _stretched(n, d, seed, length=120.0):
    """Rows along one direction (a long cloud) with unit noise: most pairs lie far apart
    in the projection, so the sorted search leaves them out."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(-length / 2, length / 2, n)
    return np.outer(t, np.ones(d) / np.sqrt(d)) + rng.standard_normal((n, d))


def _count_products(monkeypatch):
    pairs = []
    product = _neighbours._Gemm._product
    monkeypatch.setattr(_neighbours._Gemm, "_product",
                        lambda self, A, B: pairs.append(A.shape[0] * B.shape[0])
                        or product(self, A, B))
    return pairs


@pytest.mark.parametrize("engine", ENGINES)
def test_sorted_search_leaves_far_pairs_out_and_equals_brute_force(engine, monkeypatch):
    # rows sorted by their projection, each panel multiplying only its window: far
    # fewer products than the half Gram matrix, the same graph as every distance gives
    monkeypatch.setattr(_neighbours, "PANEL_ROWS", 32)
    monkeypatch.setattr(_neighbours, "TILE", 64)
    X = _stretched(700, 30, seed=1)
    X = np.r_[X, X[:20], X[20:25] + 1e-9]  # copies and near-copies
    Xq = np.r_[X[:15] + 0.3, _stretched(15, 30, seed=2)]
    e = _graph.max_exponent(X)
    Xs = _graph.scale(X, e)
    loc, first = _graph.locations(Xs)
    n = first.size
    pairs = _count_products(monkeypatch)
    _graph.knn_graph(Xs, 7, loc, first, engine)
    assert sum(pairs) < 0.5 * n * n / 2, sum(pairs) / (n * n / 2)
    _assert_same(*_both(X, Xq, 7, engine))
    # the search's own record: every pair that no product covered lies beyond both
    # rows' bounds, and a row has a finite bound exactly when a pair of it was left out
    U = Xs[first]
    norms = _neighbours.sq_norms(U)
    search = _neighbours._Gemm(U, U, True, engine, norms, norms,
                               lambda a, rows, margin: np.full(rows.size, 40.0 / 4**e))
    windows = []
    record = _neighbours._Gemm._skipped_bounds
    monkeypatch.setattr(_neighbours._Gemm, "_skipped_bounds",
                        lambda self, ends: windows.append(dict(ends)) or record(self, ends))
    search.smallest(24)
    covered = np.zeros((n, n), dtype=bool)
    for i0, (i1, end) in windows[0].items():
        covered[i0:i1, i0:end] = True
    covered |= covered.T
    covered = covered[search.pos][:, search.pos]  # positions -> rows
    lb2 = search.skip_lb2
    D = ((U[:, None] - U[None]) ** 2).sum(-1)
    np.testing.assert_array_equal(np.isfinite(lb2), ~covered.all(axis=1))
    assert 0.3 < np.isfinite(lb2).mean() and (~covered).mean() > 0.5
    assert np.all(D[~covered] >= np.maximum.outer(lb2, lb2)[~covered])
    assert np.all(lb2 > 0)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("data", ["stretched", "lattice"])
def test_sorted_search_regrows_rows_a_short_window_left_incomplete(engine, data,
                                                                   monkeypatch):
    # windows cut right after the diagonal tiles (a whole-row search costing nothing):
    # most rows miss pairs they need, which the bounds from the final buffers find;
    # those rows are searched whole again
    monkeypatch.setattr(_neighbours, "PANEL_ROWS", 24)
    monkeypatch.setattr(_neighbours, "TILE", 50)
    monkeypatch.setattr(_neighbours, "REGROW", 0.0)
    calls = []
    regrow = _neighbours._Gemm._smallest_rows
    monkeypatch.setattr(_neighbours._Gemm, "_smallest_rows",
                        lambda self, rows, K: calls.append(rows.size) or regrow(self, rows, K))
    if data == "stretched":
        X = _stretched(400, 20, seed=3, length=40.0)
        Xq = X[:20] + 0.2
    else:
        X, Xq = _lattice(330, 30, seed=4)
        X = np.r_[X, X[:25]]
    _assert_same(*_both(X, Xq, 5, engine))
    assert calls and calls[0] > 50


@pytest.mark.parametrize("engine", ENGINES)
def test_projection_gaps_bound_the_distances(engine, monkeypatch):
    # rows on a line (plus exact copies): the projection gap is the distance itself
    # up to the rounding allowance, never above it; positions map back to the rows
    monkeypatch.setattr(_neighbours, "TILE", 64)
    monkeypatch.setattr(_neighbours, "PANEL_ROWS", 32)
    rng = np.random.default_rng(6)
    d = 24
    w = rng.standard_normal(d)
    t = rng.uniform(-1, 1, 300)
    X = 5.0 + np.outer(t, w)
    X = np.r_[X, X[:10]]
    norms = _neighbours.sq_norms(X)
    search = _neighbours._Gemm(X, X, True, engine, norms, norms,
                               lambda a, rows, margin: np.full(rows.size, np.inf))
    assert search.order is not None
    np.testing.assert_array_equal(search.order[search.pos], np.arange(X.shape[0]))
    assert np.all(np.diff(search.proj) >= 0)
    p = search.proj[search.pos]
    gap = np.maximum(np.abs(p[:, None] - p[None]) * (1 - 1e-15) - 2 * search.err, 0.0)
    lb2 = (gap / search.vnorm) ** 2 * (1 - 1e-12)
    D = ((X[:, None] - X[None]) ** 2).sum(-1)
    assert np.all(lb2 <= D)
    far = D > 1e-6
    np.testing.assert_allclose(lb2[far], D[far], rtol=1e-6)
    # the rows in sorted order, centred and rounded to float32
    np.testing.assert_array_equal(search.Uc, (X[search.order] - X.mean(0)).astype(np.float32))
    np.testing.assert_allclose(search.nu, ((X - X.mean(0)) ** 2).sum(1), rtol=1e-12)
    # with no window (bound infinite) nothing is left out
    a, idx = search.smallest(12)
    assert np.all(np.isinf(search.skip_lb2))
    np.testing.assert_allclose(a[:, 0], 0.0, atol=float(search.margin.max()))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("f", [0.5, 2.0**-40, 8.0])
def test_passes_read_rows_scaled_as_a_copy_holds_them(engine, f, monkeypatch):
    # each pass reading X * f (a power of two) sees the values of the scaled copy,
    # subnormal roundings included: hashes, centring, projections, pair distances and
    # norms equal to the bit, so the graph of the fit without the copy is the same
    from kernelkit.stkr import _loops, _loops_numba

    loops = _loops_numba if engine == "numba" else _loops
    monkeypatch.setattr(_loops_numba, "_ROWS", 64)
    rng = np.random.default_rng(8)
    X = rng.standard_normal((300, 21))
    X[rng.random(X.shape) < 0.2] = 0.0
    X[:40, 3] = rng.uniform(1e-310, 1e-300, 40)  # subnormal once scaled down
    X[40, 5], X[41] = -0.0, X[42]
    Xs = X * f
    mult = _graph._hash_factors(X)
    h_f, h_s = np.empty(300, dtype=np.uint64), np.empty(300, dtype=np.uint64)
    loops.row_hashes(X, f, mult, h_f)
    loops.row_hashes(Xs, 1.0, mult, h_s)
    np.testing.assert_array_equal(h_f, h_s)
    for a, b in zip(_graph.locations(X, engine, f), _graph.locations(Xs, engine)):
        np.testing.assert_array_equal(a, b)
    mu, v = Xs.mean(0), rng.standard_normal(21)
    out = [[np.empty((300, 21), np.float32), np.empty(300)] for _ in range(2)]
    loops.centre32(X, mu, *out[0], f)
    loops.centre32(Xs, mu, *out[1], 1.0)
    proj = [[np.empty(300), np.empty(300)] for _ in range(2)]
    loops.project(X, mu, v, *proj[0], f)
    loops.project(Xs, mu, v, *proj[1], 1.0)
    order = rng.permutation(300)
    rows32 = [np.empty((300, 21), np.float32) for _ in range(2)]
    loops.centre32_rows(X, order, mu, rows32[0], f)
    loops.centre32_rows(Xs, order, mu, rows32[1], 1.0)
    rows, cols = rng.integers(0, 300, 400), rng.integers(0, 300, 400)
    d2 = [np.empty(400), np.empty(400)]
    loops.pair_sq_dists(X, X, rows, cols, d2[0], f)
    loops.pair_sq_dists(Xs, Xs, rows, cols, d2[1], 1.0)
    for a, b in [*zip(*out), *zip(*proj), rows32, d2]:
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(rows32[0], out[0][0][order])
    np.testing.assert_allclose(proj[0][1], (Xs - mu) @ v, rtol=1e-12, atol=1e-300)
    # norms scaled a block at a time (3 blocks of 1,337 rows at 784 features)
    B = rng.standard_normal((3000, 784))
    np.testing.assert_array_equal(_neighbours.sq_norms(B, f), _neighbours.sq_norms(B * f))
    # the whole graph (sorted search: 330 rows, tile 64), and with copies (a gather)
    monkeypatch.setattr(_neighbours, "TILE", 64)
    monkeypatch.setattr(_neighbours, "PANEL_ROWS", 32)
    Z = np.r_[_stretched(330, 24, seed=9), X[:30, :3] @ np.ones((3, 24))] * 1e3
    for A in (Z, np.r_[Z, Z[:12]]):
        e = _graph.max_exponent(A)
        g = _graph.scale_factor(e)
        loc, first = _graph.locations(A, engine, g)
        copy = _graph.knn_graph(_graph.scale(A, e), 6, loc, first, engine)
        lazy = _graph.knn_graph(A, 6, loc, first, engine, g)
        assert (copy[0] != lazy[0]).nnz == 0 and (copy[2] != lazy[2]).nnz == 0
        np.testing.assert_array_equal(copy[1], lazy[1])


@pytest.mark.parametrize("offset", [1e5, 1e8])
def test_graph_and_predictions_do_not_depend_on_an_offset(offset):
    # distances between rows far from the origin: the same graph once the offset is
    # removed (the same-location test compares them with the rows' norms)
    rng = np.random.default_rng(3)
    X, Xq = rng.normal(size=(300, 3)), rng.normal(size=(40, 3))
    y = np.where(np.arange(300) % 10 == 0, (X[:, 0] > 0).astype(int), -1)
    ref = STKRClassifier().fit(X, y)
    est = STKRClassifier().fit(X + offset, y)
    assert ref.knn_offset_ is None
    np.testing.assert_allclose(est.knn_offset_, X.mean(axis=0) + offset, rtol=1e-14)
    np.testing.assert_array_equal(est.knn_degree_, ref.knn_degree_)
    np.testing.assert_array_equal(est.transduction_, ref.transduction_)
    np.testing.assert_allclose(est.decision_function(Xq + offset), ref.decision_function(Xq),
                               rtol=0, atol=1e-9)
