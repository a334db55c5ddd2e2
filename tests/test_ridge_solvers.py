"""Kernel ridge solvers: Nyström-preconditioned CG (exact KRR) and FALKON (Nyström KRR).

References are dense solves written here: Cholesky KRR, and the Nyström estimator as
the stable least-squares problem ``min ||[K_nM; sqrt(alpha) R] b - [y; 0]||`` with
``R^T R = K_MM`` (no squared condition number).
"""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import linalg
from sklearn.exceptions import ConvergenceWarning, EfficiencyWarning
from sklearn.utils.estimator_checks import parametrize_with_checks

from kernelkit import KernelRidge, KernelRidgeClassifier, NTKRidge
from kernelkit.kernels import RBF
from kernelkit.ridge import FalkonClassifier, FalkonRegressor, _auto, _kernel_ridge
from kernelkit.ridge._pcg import NystromPreconditioner, rp_cholesky

GAMMA = 0.3


def _data(n, d=3, seed=0, k=None):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, d)
    y = np.sin(X).sum(1) + 0.1 * rng.randn(n)
    if k is not None:
        y = np.column_stack([y] + [np.cos(X[:, j % d]) for j in range(k - 1)])
    return X, y


def _rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def _krr(X, y, alpha, gamma=GAMMA):
    K = RBF(gamma)(X)
    return linalg.solve(K + alpha * np.eye(len(X)), y, assume_a="pos")


def _nystrom_predictions(X, C, y, alpha, gamma=GAMMA):
    """K_nM b for the Nyström KRR solution b, by a stable stacked least squares."""
    Knm, Kmm = RBF(gamma)(X, C), RBF(gamma)(C)
    w, V = linalg.eigh(Kmm)
    R = np.sqrt(np.clip(w, 0, None))[:, None] * V.T  # R^T R = K_MM
    A = np.vstack([Knm, np.sqrt(alpha) * R])
    rhs = np.concatenate([y, np.zeros((len(C),) + y.shape[1:])])
    b = linalg.lstsq(A, rhs, lapack_driver="gelsd")[0]
    return Knm @ b


# ---------------------------------------------------------------------- PCG
@pytest.mark.parametrize("alpha", [1.0, 1e-5], ids=["well", "ill"])
def test_pcg_float64_reaches_cholesky(alpha):
    X, Y = _data(800, k=3)
    ref = _krr(X, Y, alpha)
    m = KernelRidge(alpha=alpha, kernel="rbf", gamma=GAMMA, solver="pcg", tol=1e-12,
                    max_iter=3000, random_state=0).fit(X, Y)
    assert m.solver_ == "pcg" and m.n_iter_ >= 1 and m.preconditioner_rank_ >= 1
    assert _rel(m.dual_coef_, ref) < 1e-6
    chol = KernelRidge(alpha=alpha, kernel="rbf", gamma=GAMMA, solver="cholesky").fit(X, Y)
    assert chol.n_iter_ == 1 and chol.solver_ == "cholesky" and chol.preconditioner_rank_ is None
    assert _rel(m.predict(X[:50]), chol.predict(X[:50])) < 1e-6


@pytest.mark.parametrize("alpha", [1.0, 1e-3], ids=["well", "ill"])
def test_pcg_float32_products_reach_cholesky_to_1e4(alpha):
    X, y = _data(800)
    m = KernelRidge(alpha=alpha, kernel="rbf", gamma=GAMMA, solver="pcg", tol=1e-6,
                    random_state=0).fit(X, y)
    chol = KernelRidge(alpha=alpha, kernel="rbf", gamma=GAMMA, solver="cholesky").fit(X, y)
    # fitted values: their error is bounded by the residual, whatever the conditioning
    assert _rel(m.predict(X), chol.predict(X)) < 1e-4
    if alpha == 1.0:  # coefficients too, where K + alpha I is well conditioned
        assert _rel(m.dual_coef_, chol.dual_coef_) < 1e-4


@pytest.mark.parametrize("kernel, alpha", [("rbf", 1e-3), ("rbf", 1.0), ("linear", 1e-3)])
def test_pcg_float32_residual_is_certified_against_the_exact_kernel(kernel, alpha):
    # float32 products: the stopping test accounts for the rounding of the held K (or
    # refines in float64), so the residual against the float64 K meets tol
    X, Y = _data(700, d=4, k=2)
    tol = 1e-5
    m = KernelRidge(alpha=alpha, kernel=kernel, gamma=GAMMA if kernel == "rbf" else None,
                    solver="pcg", tol=tol, random_state=0).fit(X, Y)
    K = m._operator(False).block_host(X)
    C = m.dual_coef_
    true = np.linalg.norm(Y - K @ C - alpha * C, axis=0) / np.linalg.norm(Y, axis=0)
    assert true.max() <= tol, true


@pytest.mark.parametrize("weighted", [False, True])
def test_storage_error_measures_the_float32_rounding(weighted):
    # the held float32 K's rounding dK moves the residual by ||dK S c||: the estimate
    # from sampled exact rows covers it (margin 2) and sits well below the former bound
    from kernelkit.ridge._kernel_product import KernelProduct, held_kernel

    rng = np.random.RandomState(0)
    X = np.vstack([rng.randn(1800, 8), np.repeat(rng.randn(4, 8), 50, axis=0)])  # clusters
    C = rng.randn(len(X), 3)
    sw = rng.uniform(0.1, 10.0, len(X)) if weighted else None
    op = KernelRidge(kernel="rbf", gamma=0.05).fit(X[:5], X[:5, 0])._operator()
    product = KernelProduct(op, X, sw=None if sw is None else np.sqrt(sw))
    assert product.rounded
    SC = C if sw is None else C * np.sqrt(sw)[:, None]
    dK = held_kernel(op, X, None, np.float64) - product.K
    true = np.linalg.norm(dK @ SC, axis=0)
    est = product.storage_error(C)
    bound = np.finfo(np.float32).eps * np.sqrt((product.K.astype(np.float64) ** 2).sum(0).max()) \
        * np.linalg.norm(SC, axis=0)
    assert np.all(true <= est) and np.all(est <= 3 * true), est / true
    assert np.all(est <= bound / 2), bound / est


def test_pcg_per_target_alpha_sample_weight_and_blockwise():
    X, Y = _data(500, k=2)
    alpha = np.array([0.5, 1e-3])
    sw = np.random.RandomState(1).uniform(0.1, 3, len(X))
    sw[:5] = 0.0
    ref = KernelRidge(alpha=alpha, kernel="rbf", gamma=GAMMA, solver="cholesky").fit(X, Y, sw)
    for cache in (4096, 0):  # held K, and K recomputed blockwise on every product
        m = KernelRidge(alpha=alpha, kernel="rbf", gamma=GAMMA, solver="pcg", tol=1e-11,
                        cache_size=cache, random_state=0, max_iter=3000).fit(X, Y, sw)
        assert _rel(m.dual_coef_, ref.dual_coef_) < 1e-6


def test_pcg_precomputed_ntk_and_classifier():
    X, y = _data(300)
    K = RBF(GAMMA)(X)
    K0 = K.copy()
    m = KernelRidge(alpha=0.1, kernel="precomputed", solver="pcg", tol=1e-12,
                    random_state=0).fit(K, y)
    np.testing.assert_array_equal(K, K0)  # the user's matrix is not modified
    assert _rel(m.dual_coef_, _krr(X, y, 0.1)) < 1e-8
    a = NTKRidge(alpha=0.1, depth=2, solver="pcg", tol=1e-12, random_state=0).fit(X, y)
    b = NTKRidge(alpha=0.1, depth=2, solver="cholesky").fit(X, y)
    assert _rel(a.dual_coef_, b.dual_coef_) < 1e-8
    lab = np.where(y > np.median(y), "hi", "lo")
    c = KernelRidgeClassifier(alpha=0.1, kernel="rbf", gamma=GAMMA, solver="pcg", tol=1e-12,
                              random_state=0).fit(X, lab)
    d = KernelRidgeClassifier(alpha=0.1, kernel="rbf", gamma=GAMMA, solver="cholesky").fit(X, lab)
    assert _rel(c.decision_function(X), d.decision_function(X)) < 1e-8
    np.testing.assert_array_equal(c.predict(X), d.predict(X))


def _no_probe(*a, **k):
    raise AssertionError("the cost model was consulted")


def _fix_rates(monkeypatch, rates):
    """A fixed machine for solver="auto": its probes' rates, and the range of plausible
    entry times (which may spare the product probe) closed on them."""
    monkeypatch.setattr(_auto, "machine_rates", lambda *a: rates)
    monkeypatch.setattr(_auto, "entry_bounds", lambda: (rates, rates))


@pytest.mark.usefixtures("auto_model_from_1024")
def test_auto_tiny_n_alpha_zero_and_memory_rules_need_no_model(monkeypatch):
    X, y = _data(1100)
    monkeypatch.setattr(_auto, "_dgemm_rate", _no_probe)
    monkeypatch.setattr(_auto, "_entry_seconds", _no_probe)
    assert KernelRidge(alpha=0.1, kernel="rbf").fit(X[:200], y[:200]).solver_ == "cholesky"
    # alpha = 0 has no pcg preconditioner: auto stays exact
    assert KernelRidge(alpha=0.0, kernel="rbf", gamma=50.0).fit(X, y).solver_ == "cholesky"
    # the float64 K (9.7 MB) fits no 1 MiB cache_size, nor the float32 one: every CG step
    # would recompute it, so auto refuses (naming the way out) and leaves the model as it was
    m = KernelRidge(alpha=0.1, kernel="rbf", gamma=GAMMA, cache_size=1, tol=1e-10,
                    random_state=0)
    with pytest.raises(ValueError, match=r"1,100 x 1,100 kernel matrix.*FalkonRegressor.*"
                       r"cache_size to at least 10 \(MiB\).*solver='pcg'"):
        m.fit(X, y)
    assert not hasattr(m, "backend_") and not hasattr(m, "dual_coef_")
    # an explicit pcg runs (with a warning) and gives the exact solution
    m.set_params(solver="pcg")
    with pytest.warns(EfficiencyWarning, match="would recompute it"):
        m.fit(X, y)
    assert m.solver_ == "pcg" and _rel(m.dual_coef_, _krr(X, y, 0.1)) < 1e-8


def test_a_kernel_matrix_recomputed_every_step_is_reported():
    # 600^2 float32 entries (1.4 MiB) do not fit 1 MiB: a warning that names FALKON and the
    # same solution as the held matrix gives (solver="auto": the test above, n = 1,100)
    X, y = _data(600)
    kw = dict(alpha=0.1, kernel="rbf", gamma=GAMMA, solver="pcg", random_state=0)
    with pytest.warns(EfficiencyWarning, match=r"600 x 600 kernel matrix.*FalkonRegressor"):
        m = KernelRidge(cache_size=1, **kw).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", EfficiencyWarning)  # held: no warning
        ref = KernelRidge(**kw).fit(X, y)
    assert m.solver_ == "pcg" and _rel(m.dual_coef_, ref.dual_coef_) < 1e-3


def test_auto_large_n_large_alpha_is_pcg_and_equals_it(monkeypatch):
    # n = 4,000, kappa ~ 1: the model's Cholesky / PCG is n / (2.55 t 1.13 g e) = 35 / (g e)
    # (t ~ 40 iterations, 1.13 for the passes over F): PCG while g e < 35 (dgemm flops per
    # float32 entry streamed; 11 measured on a quiet 2-core Xeon, 15-30 expected on CPUs).
    # The rates are fixed at that Xeon's (the probes read the machine's load) and the
    # time-based bail-out is off: the choice is the model's, not the clock's.
    gemm = 88e9
    _fix_rates(monkeypatch, (gemm, 11.0 / gemm))
    monkeypatch.setattr(_auto, "_BAIL_MARGIN", np.inf)
    X, y = _data(4000, d=2)
    kw = dict(alpha=1.0, kernel="rbf", gamma=GAMMA, random_state=0)
    m = KernelRidge(**kw).fit(X, y)
    assert m.solver_ == "pcg"
    p = KernelRidge(solver="pcg", **kw).fit(X, y)
    np.testing.assert_array_equal(m.dual_coef_, p.dual_coef_)
    assert (m.n_iter_, m.preconditioner_rank_) == (p.n_iter_, p.preconditioner_rank_)


@pytest.mark.usefixtures("auto_model_from_1024")
@pytest.mark.parametrize("chol_s, expected", [(0.0, "cholesky"), (1e9, "pcg")])
def test_auto_forced_branches_equal_the_chosen_solver(monkeypatch, chol_s, expected):
    X, Y = _data(1200, k=3)
    monkeypatch.setattr(_auto, "cholesky_seconds", lambda *a, **k: chol_s)
    if expected == "cholesky":  # below the PCG floor: not even the sketch is drawn
        monkeypatch.setattr(_auto, "nystrom_sketch", _no_probe)
    kw = dict(alpha=1e-2, kernel="rbf", gamma=GAMMA, random_state=0)
    m = KernelRidge(**kw).fit(X, Y)
    ref = KernelRidge(solver=expected, **kw).fit(X, Y)
    assert m.solver_ == expected
    np.testing.assert_array_equal(m.dual_coef_, ref.dual_coef_)
    assert m.n_iter_ == ref.n_iter_


@pytest.mark.parametrize("rates", [(34e9, 1e-9), (88e9, 11.0 / 88e9)])
def test_auto_draws_no_sketch_where_pcg_cannot_win(monkeypatch, rates):
    # n = 1,500 on the rates of a 2-core EPYC (one thread) and Xeon (two): Cholesky 60 and
    # 19 ms, PCG's floor (its sketch to rank 128 and 2 ln(2 / tol) = 20 iterations there,
    # each a product and two passes over F) 88 and 18 ms (PCG would save at most 1 / 1.2
    # of Cholesky's time): no sketch, Cholesky's result
    _fix_rates(monkeypatch, rates)
    monkeypatch.setattr(_auto, "nystrom_sketch", _no_probe)
    X, Y = _data(1500, k=2)
    kw = dict(alpha=1e-2, kernel="rbf", gamma=GAMMA, random_state=0)
    m = KernelRidge(**kw).fit(X, Y)
    assert m.solver_ == "cholesky" and m.preconditioner_rank_ is None
    np.testing.assert_array_equal(m.dual_coef_, KernelRidge(solver="cholesky", **kw)
                                  .fit(X, Y).dual_coef_)


@pytest.mark.usefixtures("auto_model_from_1024")
@pytest.mark.parametrize("chol_s, expected", [(0.011, "cholesky"), (0.013, "pcg")])
def test_auto_prefers_cholesky_unless_pcg_is_clearly_faster(monkeypatch, chol_s, expected):
    # PCG predicted at 10 iterations of 1 ms: chosen only when Cholesky costs more than
    # 1.2 x 10 ms (its time varies more than Cholesky's)
    monkeypatch.setattr(_auto, "cholesky_seconds", lambda *a, **k: chol_s)
    monkeypatch.setattr(_auto, "pcg_floor_seconds", lambda *a, **k: 0.0)
    monkeypatch.setattr(_auto, "estimated_iterations", lambda *a: 10.0)
    monkeypatch.setattr(_auto, "float64_share", lambda *a: 0.0)
    monkeypatch.setattr(_auto, "iteration_seconds", lambda *a, **k: 1e-3)
    monkeypatch.setattr(_auto._Abandon, "__call__", lambda *a: False)
    monkeypatch.setattr(_auto, "_BAIL_MARGIN", np.inf)
    X, Y = _data(1200, k=2)
    kw = dict(alpha=1e-2, kernel="rbf", gamma=GAMMA, random_state=0)
    m = KernelRidge(**kw).fit(X, Y)
    ref = KernelRidge(solver=expected, **kw).fit(X, Y)
    assert m.solver_ == expected
    np.testing.assert_array_equal(m.dual_coef_, ref.dual_coef_)


def test_probe_scales_the_one_core_dgemm_rate_to_the_threads(monkeypatch):
    # every timed run takes one tick of a fake clock: the rates are the sizes' own
    clock = iter(range(1000))
    monkeypatch.setattr(_auto.time, "perf_counter", lambda: float(next(clock)))
    gemm, entry = _auto._dgemm_rate.__wrapped__, _auto._entry_seconds.__wrapped__  # uncached
    assert (gemm(1), entry(1, 3, 2048)) == (2 * 256**3, 1 / (2048 * 2048))
    assert (gemm(2), entry(2, 3, 4096)) == (1.95 * 2 * 256**3, 1 / (4096 * 2048))


@pytest.mark.usefixtures("auto_model_from_1024")
@pytest.mark.parametrize("alpha", [1.0, 1e-6])
def test_auto_choice_follows_the_model_on_the_sketch(monkeypatch, alpha):
    from kernelkit.ridge._kernel_product import KernelProduct
    from kernelkit.ridge._pcg import nystrom_sketch

    X, y = _data(1500)
    rates = (8e9, 2e-10)  # a fixed machine: flops/s, seconds per float32 entry
    _fix_rates(monkeypatch, rates)
    op = KernelRidge(kernel="rbf", gamma=GAMMA).fit(X[:5], y[:5])._operator()
    product = KernelProduct(op, X, defer=True)
    share = _auto.float64_share(product, alpha, 1e-4)
    info = nystrom_sketch(product, alpha, np.random.RandomState(0))[2]
    n = len(X)
    pcg = (_auto.estimated_iterations(info["lam_min"], alpha, 1e-4, n) * (1 + share)
           * ((n * n + 8 * n * info["rank"]) * rates[1] + _auto._ITER_OVERHEAD_S))
    chol = n**3 / 3 / (_auto.POTRF_EFFICIENCY * rates[0]) + 8 * n * n * rates[1]
    expected = "pcg" if 1.2 * pcg < chol else "cholesky"
    monkeypatch.setattr(_auto, "_BAIL_MARGIN", np.inf)  # the a priori choice only
    monkeypatch.setattr(_auto._Abandon, "__call__", lambda *a: False)  # the full sketch
    m = KernelRidge(alpha=alpha, kernel="rbf", gamma=GAMMA, random_state=0).fit(X, y)
    assert m.solver_ == expected
    # both branches covered: Cholesky 152 ms against PCG 60 ms (alpha 1, 16 iterations:
    # 1.2 x 60 < 152) and 374 ms (alpha 1e-6, 48 iterations, float64 throughout
    # predicted); the floor, 105 ms, lets the sketch run
    assert expected == ("pcg" if alpha == 1.0 else "cholesky")


def test_auto_bails_out_to_the_exact_cholesky_solution(monkeypatch):
    X, Y = _data(1500, k=2)
    # predicted cheap PCG (one iteration), then no patience at the first check: the
    # observed rate at iteration 10 says PCG will not finish first
    monkeypatch.setattr(_auto, "estimated_iterations", lambda *a: 1.0)
    monkeypatch.setattr(_auto, "_BAIL_MARGIN", 0.0)
    kw = dict(alpha=1e-6, kernel="rbf", gamma=GAMMA, random_state=0)
    m = KernelRidge(verbose=1, **kw).fit(X, Y)
    ref = KernelRidge(solver="cholesky", **kw).fit(X, Y)
    assert m.solver_ == "cholesky" and m.n_iter_ == 1 and m.preconditioner_rank_ is None
    np.testing.assert_array_equal(m.dual_coef_, ref.dual_coef_)
    c = KernelRidgeClassifier(**kw).fit(X, Y[:, 0] > 0)  # the LOO calibration path too
    d = KernelRidgeClassifier(solver="cholesky", **kw).fit(X, Y[:, 0] > 0)
    assert c.solver_ == "cholesky"
    np.testing.assert_array_equal(c.predict_proba(X), d.predict_proba(X))


def test_watch_predicts_the_time_left_from_the_observed_rate(monkeypatch):
    clock = iter(range(100))  # one second per CG step
    monkeypatch.setattr(_auto.time, "perf_counter", lambda: float(next(clock)))

    def run(restart):
        w = _auto.Watch(1e-4, lambda: restart)
        for it in range(1, 40):
            w(it, 0.5**it)  # halves per step: ln(tol / 2^-10) / ln(1/2) = 3.3 steps left
            if it >= 10:
                return it

    with pytest.raises(_auto.SwitchToCholesky):
        run(2.0)  # 3.3 s left > 1.5 x 2 s
    clock = iter(range(100))
    assert run(2.3) == 10  # 3.3 s < 1.5 x 2.3 s: PCG goes on


def test_watch_waits_out_cg_early_plateau(monkeypatch):
    # CG at small alpha sits near its start, then falls: no switch on a plateau while
    # CG has spent under a third of the restart cost; the rate is read after that
    clock = iter(range(100))  # one second per CG step
    monkeypatch.setattr(_auto.time, "perf_counter", lambda: float(next(clock)))
    w = _auto.Watch(1e-4, lambda: 90.0)
    for it in range(1, 30):  # 29 s < 30 s: 0.82 of the start throughout, no rate read
        w(it, 0.82)
    clock = iter(range(100))
    w = _auto.Watch(1e-4, lambda: 30.0)
    with pytest.raises(_auto.SwitchToCholesky) as stop:
        for it in range(1, 40):
            w(it, 0.82)
    assert stop.value.args[0] == 11  # 10 s spent >= 30 s / 3, the rate is 0: switch
    clock = iter(range(100))
    w = _auto.Watch(1e-4, lambda: 10.0)
    for it in range(1, 12):  # the fall after a plateau: halving per step from step 6,
        # at step 10, ln(0.028 / 0.9) / 5 = ln 0.5 per step: 8.1 steps left < 1.5 x 10 s
        w(it, 0.9 if it < 6 else 0.45 * 0.5 ** (it - 6))


@pytest.mark.parametrize("n, probed", [(5000, False), (20000, True)])
def test_auto_probes_the_memory_only_where_its_speed_decides(monkeypatch, n, probed):
    # two threads at 1.2e11 dgemm flops/s, 784 features: at n 5,000, Cholesky 0.39 s and
    # PCG's floor 0.15 s even at 1e-10 s per entry (twice the fastest measured), 0.24 s
    # to save against a first check of 0.028 s: Cholesky without the product probe (both
    # rules are linear in the entry time). At 20,000 the measured rate decides.
    from types import SimpleNamespace

    monkeypatch.setattr(_auto, "blas_limit", lambda: 2)
    monkeypatch.setattr(_auto, "_dgemm_rate", lambda limit: 1.2e11)
    calls, sketches = [], []
    monkeypatch.setattr(_auto, "_entry_seconds", lambda *a: calls.append(a) or 2.2e-10)

    def sketch(*a, **k):
        sketches.append(1)
        return None, None, {"stopped": True, "rank": 128}

    monkeypatch.setattr(_auto, "nystrom_sketch", sketch)
    product = SimpleNamespace(n=n, dtype=np.dtype(np.float32), K=None,
                              X=np.empty((1, 784)), drop_columns=lambda: None)
    got = _auto.choose(product, 1e-2, 1e-4, 10, np.random.RandomState(0),
                       lambda *a, **k: None, fits=True)
    assert got == ("cholesky", None, None)
    assert (len(calls), len(sketches)) == ((1, 1) if probed else (0, 0))


@pytest.mark.parametrize("check_s, drawn", [(0.06, False), (0.04, True)])
def test_auto_draws_the_sketch_only_where_pcg_could_repay_it(monkeypatch, check_s, drawn):
    # Cholesky 1 s, PCG's floor 0.5 s: PCG could save at most 0.5 s, which pays for a
    # first check of 0.04 s ten times (drawn), not one of 0.06 s (Cholesky, no sketch)
    from kernelkit.ridge._kernel_product import KernelProduct

    X, _ = _data(1500)
    est = KernelRidge(kernel="rbf", gamma=GAMMA).fit(X[:5], X[:5, 0])
    product = KernelProduct(est._operator(), X, defer=True)
    _fix_rates(monkeypatch, (2e10, 1e-9))
    monkeypatch.setattr(_auto, "cholesky_seconds", lambda *a, **k: 1.0)
    monkeypatch.setattr(_auto, "pcg_floor_seconds", lambda *a: 0.5)
    monkeypatch.setattr(_auto, "sketch_seconds", lambda n, r, d, rates: check_s)
    seen = []

    def sketch(*a, **k):
        seen.append(1)
        return None, None, {"stopped": True, "rank": 128}

    monkeypatch.setattr(_auto, "nystrom_sketch", sketch)
    got = _auto.choose(product, 1e-2, 1e-4, 1, np.random.RandomState(0),
                       lambda *a, **k: None, fits=True)
    assert got == ("cholesky", None, None) and seen == ([1] if drawn else [])


@pytest.mark.parametrize("alpha, chol_s, choice",
                         [(1e-6, 1e3, "pcg"), (1e-6, 1e-3, "cholesky"), (10.0, 1e3, "pcg")])
def test_auto_prepares_columns_once(monkeypatch, alpha, chol_s, choice):
    # the float64 share reads its 64 columns from the sketch's prepared X (one
    # preparation; not at all where the sketch is abandoned on the bound alone: alpha
    # 1e-6 grows the rank past the first check; alpha 10 ends the sketch there, with no
    # check of the bound), and the prepared copy is dropped whichever solver is chosen
    from kernelkit.ridge._kernel_product import KernelProduct

    X, _ = _data(1500)
    est = KernelRidge(kernel="rbf", gamma=GAMMA).fit(X[:5], X[:5, 0])
    product = KernelProduct(est._operator(), X, defer=True)
    prepared = []
    columns = product.op.columns
    monkeypatch.setattr(product.op, "columns", lambda X: prepared.append(1) or columns(X))
    _fix_rates(monkeypatch, (2e10, 1e-9))
    monkeypatch.setattr(_auto, "cholesky_seconds", lambda *a, **k: chol_s)
    monkeypatch.setattr(_auto, "pcg_floor_seconds", lambda *a: 0.0)
    monkeypatch.setattr(_auto, "_PAYBACK", 0.0)
    shares = []
    share = _auto.float64_share
    monkeypatch.setattr(_auto, "float64_share", lambda *a: shares.append(1) or share(*a))
    got, sketch, _ = _auto.choose(product, alpha, 1e-4, 1, np.random.RandomState(0),
                                  lambda *a, **k: None, fits=True)
    assert got == choice and prepared == [1] and product._columns is None
    assert len(shares) == (choice == "pcg")


@pytest.mark.usefixtures("auto_model_from_1024")
def test_abandoned_sketch_is_cholesky(monkeypatch):
    rates = (2e10, 1e-9)
    it_s = _auto.iteration_seconds(5000, 625, 4, rates)

    def pcg(lam_final):  # the forecast without the sketch's own (microseconds) time
        return _auto.estimated_iterations(lam_final, 1e-4, 1e-4, 5000) / 1.88 * it_s

    # one check (rank 128, lam_min 1 >> 10 alpha): decay assumed 1 / rank, to the cap 625
    f = _auto._Abandon(5000, 1e-4, 1e-4, 1.0, rates).forecast(128, 1.0, 625)
    assert pcg(128 / 625) <= f < pcg(128 / 625) + 0.05
    # abandoned unless Cholesky costs more than 1.2 times even that PCG
    assert _auto._Abandon(5000, 1e-4, 1e-4, 1.15 * f, rates)(128, 1.0, 625)
    ab = _auto._Abandon(5000, 1e-4, 1e-4, 1.25 * f, rates)
    assert not ab(128, 1.0, 625)
    # the float64 share is read only where the forecast without it does not abandon,
    # and then counts: a share of 1 doubles the iterations' part of the forecast
    reads = []

    def share(value):
        return lambda: reads.append(value) or value

    assert _auto._Abandon(5000, 1e-4, 1e-4, 1.15 * f, rates, share(1.0))(128, 1.0, 625)
    assert reads == []
    assert not _auto._Abandon(5000, 1e-4, 1e-4, 1.25 * f, rates, share(0.0))(128, 1.0, 625)
    assert _auto._Abandon(5000, 1e-4, 1e-4, 1.25 * f, rates, share(1.0))(128, 1.0, 625)
    assert reads == [0.0, 1.0]
    assert ab.forecast(128, 1.0, 625, 1.0) > 1.9 * f
    # two checks: the decay over the last doubling (1 -> 0.25: rank^-2) is extrapolated
    f = ab.forecast(256, 0.25, 625)
    assert pcg(0.25 * (256 / 625) ** 2) <= f < pcg(0.25 * (256 / 625) ** 2) + 0.05
    # a fast decay reaching 10 alpha before the cap: the rank stops there, lam >= 5 alpha
    f = ab.forecast(256, 2e-3, 625)
    lo = (_auto.estimated_iterations(1e-3, 1e-4, 1e-4, 5000) / 1.88
          * _auto.iteration_seconds(5000, 256, 4, rates))
    assert lo <= f < pcg(5e-4)
    X, y = _data(1500)
    seen = {}
    sketch = _auto.nystrom_sketch

    def spy(*a, **k):
        out = sketch(*a, **k)
        seen.update(out[2])
        return out

    monkeypatch.setattr(_auto, "nystrom_sketch", spy)
    _fix_rates(monkeypatch, rates)
    # above 1.2 times the PCG floor (0.11 s), below the optimistic forecast at rank 128
    monkeypatch.setattr(_auto, "cholesky_seconds", lambda *a, **k: 0.2)
    kw = dict(alpha=1e-6, kernel="rbf", gamma=GAMMA, random_state=0)
    m = KernelRidge(**kw).fit(X, y)
    assert m.solver_ == "cholesky" and seen["stopped"] and seen["rank"] == 128
    np.testing.assert_array_equal(m.dual_coef_, KernelRidge(solver="cholesky", **kw)
                                  .fit(X, y).dual_coef_)


@pytest.mark.parametrize("alpha, tol, expected", [
    (1e-4, 1e-4, None), (1e-6, 1e-4, 1.0), (10.0, 1e-4, 0.0), (1e-6, 1e-8, 0.0)])
def test_float64_share_from_the_float32_rounding_bound(alpha, tol, expected):
    # n <= 64: every column is read, so the bound eps32 max_j ||K_:j|| / alpha is exact;
    # a tiny alpha: float64 throughout, a large one: none; below tol 1e-6 the products
    # are float64 from the start (nothing to switch)
    from sklearn.metrics.pairwise import rbf_kernel

    from kernelkit.ridge._kernel_product import KernelProduct
    from kernelkit.ridge._pcg import product_dtype

    X, _ = _data(60)
    op = KernelRidge(kernel="rbf", gamma=GAMMA).fit(X[:5], X[:5, 0])._operator()
    if expected is None:
        K = rbf_kernel(X, gamma=GAMMA)
        bound = np.finfo(np.float32).eps * np.sqrt((K**2).sum(0).max()) / alpha
        expected = np.log10(bound / (20 * tol)) / 2
        assert 0 < expected < 1
    product = KernelProduct(op, X, dtype=product_dtype(tol), defer=True)
    assert _auto.float64_share(product, alpha, tol) == pytest.approx(expected, rel=1e-6)


def test_cg_patience_counts_only_near_tol():
    # a spread spectrum: the residual stays at its start for over 5 steps, then falls;
    # plain patience=5 gives up with x = 0, counted only below 1e-2 CG converges
    from kernelkit.ridge._pcg import conjugate_gradient

    w = np.logspace(-3, 0, 30)
    b = np.ones(30)

    def apply_A(v):
        return w[:, None] * v.reshape(30, -1)

    x, it, rel = conjugate_gradient(apply_A, b, 1e-6, 500, patience=5)
    assert it == 5 and rel[0] == 1.0 and not x.any()
    x, it, rel = conjugate_gradient(apply_A, b, 1e-6, 500, patience=5, stall_below=1e-2)
    assert rel[0] <= 1e-6 and _rel(x, b / w) < 1e-6


def test_cost_model_closed_forms():
    assert _auto.estimated_iterations(0.0, 1.0, 1e-4, 5000) == pytest.approx(
        2.53 * np.log(2e4))
    assert _auto.estimated_iterations(4.5, 1.0, 1e-4, 20000) == pytest.approx(
        2.53 * 10**0.17 * 4**0.38 * np.log(2e4))
    assert _auto.min_iterations(1e-4) == pytest.approx(2 * np.log(2e4))
    rates = (1e10, 1e-9)
    assert _auto.cholesky_seconds(3000, 1, rates) == pytest.approx(
        9e9 / (0.95e10) + 8 * 9e6 * 1e-9)
    assert _auto.cholesky_seconds(3000, 2, rates) == pytest.approx(
        10 * _auto.cholesky_seconds(3000, 1, rates))
    assert _auto.iteration_seconds(1000, 100, 8, rates) == pytest.approx(
        (2e6 + 8e5) * 1e-9 + 3e-3)
    # 2 n r (d + r + 128) flops at 2.5 times the dgemm time
    assert _auto.sketch_seconds(1000, 128, 784, rates) == pytest.approx(
        2.5 * 2 * 1000 * 128 * (784 + 256) / 1e10)
    assert _auto.pcg_floor_seconds(1000, 784, 4, 1e-4, rates) == pytest.approx(
        _auto.sketch_seconds(1000, 128, 784, rates)
        + 2 * np.log(2e4) * ((1e6 + 8 * 128e3) * 1e-9 + 3e-3))
    assert _auto.cholesky_fits(23170, 4096) and not _auto.cholesky_fits(23171, 4096)
    gemm, entry = _auto.machine_rates(3)
    assert gemm > 0 and entry > 0 and _auto.machine_rates(3) == (gemm, entry)  # cached


def test_pcg_convergence_warning_and_verbose(capsys):
    X, y = _data(400)
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        m = KernelRidge(alpha=1e-4, kernel="rbf", gamma=GAMMA, solver="pcg", tol=1e-12,
                        max_iter=2, random_state=0).fit(X, y)
    assert m.n_iter_ == 2
    KernelRidge(alpha=0.1, kernel="rbf", gamma=GAMMA, solver="pcg", verbose=2,
                random_state=0).fit(X, y)
    out = capsys.readouterr().out
    assert "[KernelRidge] PCG done" in out and "CG iteration 1" in out


def test_rp_cholesky_recovers_low_rank_operator_and_preconditions_exactly():
    # an exactly rank-20 psd matrix is recovered exactly by RPCholesky (Chen et al. 2024),
    # which stops at rank 20 (the residual trace vanishes), whatever max_rank
    rng = np.random.RandomState(0)
    G = rng.randn(300, 20)
    A = G @ G.T
    F, FtF = rp_cholesky(lambda S: A[:, S], np.diag(A).copy(), 1e-9, rng, max_rank=64)
    assert F.shape == (300, 20)
    np.testing.assert_allclose(F @ F.T, A, atol=1e-8 * np.abs(A).max())
    np.testing.assert_allclose(FtF, F.T @ F, rtol=1e-12, atol=1e-10)
    # P = F F^T + mu I: P^-1 (A + mu I) is the identity when F F^T = A (Woodbury, exact)
    mu = 0.5
    P = NystromPreconditioner(F, FtF, mu)
    V = rng.randn(300, 3)
    np.testing.assert_allclose(P((A + mu * np.eye(300)) @ V), V, atol=1e-9)
    # duplicated points (a singular pivot block) do not break it
    B = np.repeat(A[::3][:, ::3], 3, axis=0)[:, np.repeat(np.arange(100), 3)]
    F2, _ = rp_cholesky(lambda S: B[:, S], np.diag(B).copy(), 1e-9, rng, max_rank=64)
    np.testing.assert_allclose(F2 @ F2.T, B, atol=1e-8 * np.abs(B).max())


@pytest.mark.parametrize("kernel, X", [
    ("linear", np.random.RandomState(0).randn(600, 5)),
    ("poly", np.random.RandomState(1).randn(600, 3)),
    ("rbf", np.random.RandomState(2).randn(600, 1)),  # numerically low rank
], ids=["linear", "poly", "rbf-1d"])
@pytest.mark.parametrize("tol", [1e-10, 1e-5], ids=["float64", "float32"])
def test_pcg_low_rank_kernels_converge_to_cholesky(kernel, X, tol):
    y = np.sin(X).sum(1) + 0.1 * np.random.RandomState(3).randn(len(X))
    kw = dict(alpha=1e-3, kernel=kernel, gamma=0.5 if kernel != "linear" else None)
    chol = KernelRidge(**kw, solver="cholesky").fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        m = KernelRidge(**kw, solver="pcg", tol=tol, random_state=0).fit(X, y)
    assert m.n_iter_ <= 60, m.n_iter_
    assert _rel(m.predict(X), chol.predict(X)) < max(10 * tol, 1e-8)


def _iters(n):
    X, y = _data(n, d=3, seed=n)
    # fixed kernel and fixed lambda = alpha / n: the effective dimension stays bounded
    m = KernelRidge(alpha=1e-3 * n, kernel="rbf", gamma=0.5, solver="pcg", tol=1e-8,
                    random_state=0).fit(X, y)
    return m.n_iter_


def test_pcg_iterations_bounded_in_n():
    its = [_iters(n) for n in (1000, 2000, 4000)]
    assert max(its) <= 40, its
    assert max(its) <= 2 * min(its) + 5, its


@pytest.mark.slow
def test_pcg_iterations_bounded_in_n_up_to_16000():
    its = [_iters(n) for n in (1000, 2000, 4000, 8000, 16000)]
    assert max(its) <= 40, its
    assert max(its) <= 2 * min(its) + 5, its


# ------------------------------------------------------------------- FALKON
def test_falkon_all_points_as_centers_is_exact_krr():
    X, Y = _data(400, k=2)
    alpha = 1e-2
    f = FalkonRegressor(alpha=alpha, centers=X, gamma=GAMMA, tol=1e-13, max_iter=2000).fit(X, Y)
    ref = RBF(GAMMA)(X) @ _krr(X, Y, alpha)
    assert _rel(f.predict(X), ref) < 1e-8
    assert f.n_centers_ == 400 and f.center_indices_ is None


@pytest.mark.parametrize("centers", ["uniform", "rls", "thinning", "array"])
def test_falkon_equals_closed_form_nystrom(centers):
    X, y = _data(600)
    alpha = 1e-2
    C_given = np.random.RandomState(3).randn(50, 3) if centers == "array" else centers
    f = FalkonRegressor(alpha=alpha, n_centers=64, centers=C_given, gamma=GAMMA, tol=1e-13,
                        max_iter=3000, random_state=0).fit(X, y)
    ref = _nystrom_predictions(X, f.centers_, y, alpha)
    assert _rel(f.predict(X), ref) < 1e-8
    if centers != "array":
        assert f.n_centers_ == 64 and len(np.unique(f.center_indices_)) == 64
        np.testing.assert_array_equal(f.centers_, X[f.center_indices_])


def test_falkon_user_centers_used_exactly_and_not_modified():
    X, y = _data(300)
    C = np.random.RandomState(5).randn(40, 3)
    C0 = C.copy()
    f = FalkonRegressor(alpha=0.1, centers=C, gamma=GAMMA, n_centers=7).fit(X, y)
    np.testing.assert_array_equal(f.centers_, C0)
    np.testing.assert_array_equal(C, C0)
    assert f.centers_ is not C and f.n_centers_ == 40


def test_falkon_float32_products_and_blockwise_agree():
    X, Y = _data(700, k=2)
    kw = dict(alpha=1e-2, n_centers=80, gamma=GAMMA, random_state=0)
    held = FalkonRegressor(tol=1e-12, **kw).fit(X, Y)
    block = FalkonRegressor(tol=1e-12, cache_size=0, **kw).fit(X, Y)
    f32 = FalkonRegressor(tol=1e-6, **kw).fit(X, Y)
    assert held.kernel_nbytes_ == 700 * 80 * 8 and block.kernel_nbytes_ == 0
    assert f32.kernel_nbytes_ == 700 * 80 * 4
    np.testing.assert_array_equal(held.centers_, block.centers_)
    assert _rel(block.predict(X), held.predict(X)) < 1e-9
    assert _rel(f32.predict(X), held.predict(X)) < 1e-4


def test_falkon_classifier_matches_kernel_ridge_classifier():
    X, y = _data(300)
    lab = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    f = FalkonClassifier(alpha=0.1, centers=X, gamma=GAMMA, tol=1e-12).fit(X, lab)
    k = KernelRidgeClassifier(alpha=0.1, kernel="rbf", gamma=GAMMA, solver="cholesky").fit(X, lab)
    assert _rel(f.decision_function(X), k.decision_function(X)) < 1e-8
    np.testing.assert_array_equal(f.classes_, [0, 1, 2])


def test_rls_centers_not_worse_than_uniform_on_outliers():
    # dense cluster + a rare far region: leverage scores put centers there, uniform misses it
    rng = np.random.RandomState(0)
    Xc = rng.randn(1900, 2) * 0.5
    Xo = rng.randn(100, 2) * 0.3 + 6.0
    X = np.vstack([Xc, Xo])
    y = np.sin(2 * X[:, 0]) + X[:, 1]
    errs = {}
    for c in ("uniform", "rls"):
        e = []
        for seed in range(3):
            f = FalkonRegressor(alpha=1e-3, n_centers=40, centers=c, gamma=1.0,
                                random_state=seed).fit(X, y)
            e.append(np.sqrt(np.mean((f.predict(Xo) - y[1900:]) ** 2)))
        errs[c] = np.mean(e)
    assert errs["rls"] <= errs["uniform"], errs


def test_falkon_dask_client_matches_local():
    distributed = pytest.importorskip("distributed")
    X, Y = _data(400, k=2)
    kw = dict(alpha=1e-2, n_centers=50, gamma=GAMMA, tol=1e-12, random_state=0)
    local = FalkonRegressor(**kw).fit(X, Y)
    with distributed.LocalCluster(n_workers=2, processes=False, dashboard_address=None) as lc, \
            distributed.Client(lc) as client:
        remote = FalkonRegressor(client=client, **kw).fit(X, Y)
    assert remote.kernel_nbytes_ == 0
    assert _rel(remote.predict(X), local.predict(X)) < 1e-9


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("params, match", [
    ({"solver": "lsqr"}, "solver must be one of"),
    ({"solver": "pcg", "tol": 0.0}, "tol must be"),
    ({"solver": "pcg", "tol": -1.0}, "tol must be"),
    ({"solver": "pcg", "max_iter": 0}, "max_iter must be"),
    ({"solver": "pcg", "alpha": 0.0}, "solver='pcg' needs alpha > 0"),
    ({"solver": "pcg", "cache_size": -1}, "cache_size must be"),
    ({"solver": "pcg", "verbose": -1}, "verbose must be"),
])
def test_kernel_ridge_bad_solver_params(params, match):
    X, y = _data(50)
    kw = {"alpha": 1.0, "kernel": "rbf", **params}
    with pytest.raises(ValueError, match=match):
        KernelRidge(**kw).fit(X, y)


@pytest.mark.parametrize("params, match", [
    ({"n_centers": 0}, "n_centers must be"),
    ({"n_centers": 51}, r"n_centers must be .*n_samples=50"),
    ({"n_centers": 2.5}, "n_centers must be"),
    ({"centers": np.ones((5, 2))}, "centers has shape"),
    ({"centers": np.full((5, 3), np.nan)}, "centers contains NaN"),
    ({"centers": np.ones(3)}, "centers must be one of"),
    ({"centers": "kmeans"}, "centers must be one of"),
    ({"tol": 0}, "tol must be"),
    ({"max_iter": 0}, "max_iter must be"),
    ({"kernel": "precomputed"}, "kernel='precomputed' cannot be used by FALKON"),
    ({"alpha": -1.0}, "alpha must be"),
])
def test_falkon_bad_input(params, match):
    X, y = _data(50)
    with pytest.raises(ValueError, match=match):
        FalkonRegressor(**params).fit(X, y)


def test_falkon_wrong_feature_count_at_predict():
    X, y = _data(50)
    f = FalkonRegressor(n_centers=10, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        f.predict(X[:, :2])


_OOS = ("predict_proba is calibrated on out-of-sample values: a repeated row is still "
        "seen when its copy is left out (the fit itself is weight-equivalent: tested)")
_CENTERS = ("the centers are drawn from the rows: a repeated row changes the draw (the "
            "weighted normal equations are tested against a dense solve)")
_SCALE = ("the check's blobs (std 20) at the default kernel scale (gamma = 1 / n_features): "
          "the kernel is ~0 between test and training points; the class weights themselves "
          "are tested at gamma=1e-3 (test_ridge_proba.py)")


def _expected(est):
    out = {}
    if hasattr(est, "calibration"):
        out["check_class_weight_classifiers"] = _SCALE
        if getattr(est, "loss", "squared") == "squared":
            out["check_sample_weight_equivalence_on_dense_data"] = _OOS
            out["check_sample_weight_equivalence_on_sparse_data"] = _OOS
    if isinstance(est, (FalkonRegressor, FalkonClassifier)):
        out["check_sample_weight_equivalence_on_dense_data"] = _CENTERS
    return out


@parametrize_with_checks([
    KernelRidge(alpha=1.0, kernel="rbf", solver="pcg", tol=1e-10, random_state=0),
    KernelRidgeClassifier(alpha=1.0, kernel="rbf", solver="pcg", tol=1e-10, random_state=0),
    FalkonRegressor(random_state=0),
    FalkonClassifier(random_state=0),
    FalkonClassifier(random_state=0, loss="logistic"),
], expected_failed_checks=_expected)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)


# ------------------------------------------------------- scale-free pcg (adversarial finds)
@pytest.mark.parametrize("scale", [1e-150, 1e-30, 1e30, 1e150])
def test_pcg_is_scale_free_in_the_targets(scale):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = X[:, 0] + 0.1 * rng.normal(size=60)
    pcg = KernelRidge(kernel="rbf", solver="pcg").fit(X, y * scale).predict(X) / scale
    chol = KernelRidge(kernel="rbf", solver="cholesky").fit(X, y * scale).predict(X) / scale
    assert_allclose(pcg, chol, atol=1e-4)


def test_pcg_kernel_matrix_from_inputs_outside_float32_range():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 3)) * 1e150
    y = rng.normal(size=60)
    kw = dict(kernel="rbf", gamma=1e-300, alpha=1e-3)
    pcg = KernelRidge(solver="pcg", **kw).fit(X, y)
    chol = KernelRidge(solver="cholesky", **kw).fit(X, y)
    assert_allclose(pcg.predict(X), chol.predict(X), atol=1e-4)


def test_auto_keeps_cholesky_for_low_rank_dot_product_kernels():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(1500, 5))
    assert KernelRidge(kernel="poly", degree=2).fit(X, X.sum(1)).solver_ == "cholesky"
    assert KernelRidge().fit(X, X.sum(1)).solver_ == "primal"  # linear, n >= 2 d: d x d
    Xw = rng.normal(size=(1500, 800))  # linear, n < 2 d: the dual's rule
    assert KernelRidge().fit(Xw, Xw[:, 0]).solver_ == "cholesky"
    assert KernelRidge(kernel="rbf", gamma=0.1).fit(X[:100], X[:100, 0]).solver_ == "cholesky"


def _true_rel(K, alpha, C, Y):
    return np.linalg.norm(Y - K @ C - alpha * C, axis=0) / np.linalg.norm(Y, axis=0)


@pytest.mark.parametrize("case", ["offset", "chi2", "sparse", "tiny-alpha", "tiny-column"])
def test_pcg_meets_tol_against_the_float64_kernel(case):
    # each case once returned a residual far above tol without a warning, or diverged:
    # X rounded to float32 before the kernel (offsets, chi2, sparse X), float32 CG past
    # its noise floor (tiny alpha), one scale for all targets (tiny column)
    import scipy.sparse as sp
    from sklearn.metrics.pairwise import chi2_kernel, rbf_kernel

    rng = np.random.RandomState(0)
    tol, alpha, kw = 1e-4, 1e-3, {"kernel": "rbf", "gamma": 0.5}
    if case == "offset":
        Z = rng.randn(800, 2)
        X, Y, K = Z + 1e5, np.sin(Z[:, 0]), RBF(0.5)(Z)
    elif case == "chi2":
        X = np.abs(rng.randn(800, 3))
        Y, K, kw = np.sin(rng.randn(800)), chi2_kernel(X), {"kernel": "chi2"}
    elif case == "sparse":
        X = sp.random(600, 20, density=0.2, random_state=0, format="csr")
        Y, K = rng.randn(600), rbf_kernel(X, gamma=0.5)
    elif case == "tiny-alpha":
        X = rng.rand(800, 3)
        Y, K, alpha, kw = np.sin(6 * X[:, 0]), RBF(1.0)(X), 1e-6, {"kernel": "rbf", "gamma": 1.0}
    else:
        X = rng.randn(600, 2)
        y = np.sin(X[:, 0])
        Y, K = np.column_stack([y, y[::-1] * 1e-50]), RBF(0.5)(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        m = KernelRidge(alpha=alpha, solver="pcg", tol=tol, random_state=0, **kw).fit(X, Y)
    assert np.all(_true_rel(K, alpha, m.dual_coef_, Y) <= tol)


@pytest.mark.parametrize("s", [1e-200, 1e200])
def test_falkon_is_scale_free_in_y(s):
    X, y = _data(800)
    ref = FalkonRegressor(gamma=GAMMA, n_centers=100, random_state=0).fit(X, y)
    f = FalkonRegressor(gamma=GAMMA, n_centers=100, random_state=0).fit(X, y * s)
    assert _rel(f.predict(X) / s, ref.predict(X)) < 1e-4  # both solves to tol 1e-5


# ---------------------------------------------------- sample weights in the pcg solve
@pytest.mark.parametrize("w_big", [1e20, 1e-20])
@pytest.mark.parametrize("tol", [1e-4, 1e-8], ids=["float32-K", "float64-K"])
def test_pcg_extreme_sample_weight_meets_tol_on_the_unweighted_residual(w_big, tol):
    # the residual of S K S + alpha I, weighted by S, let a 1e20 weight hide every other
    # row (error 0.018, no warning); the solve now stops on the residual of
    # (K + alpha W^-1) c = y, the dense reference (a zero weight drops its row, c_i = 0)
    rng = np.random.RandomState(0)
    X, y = rng.uniform(size=(300, 3)), rng.randn(300)
    w = rng.uniform(0.5, 2.0, 300)
    w[7], w[3] = w_big, 0.0
    K, keep = RBF(2.0)(X), w > 0
    c = np.zeros(300)
    c[keep] = np.linalg.solve(K[np.ix_(keep, keep)] + 0.1 * np.diag(1 / w[keep]), y[keep])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        m = KernelRidge(alpha=0.1, kernel="rbf", gamma=2.0, solver="pcg", tol=tol,
                        random_state=0).fit(X, y, sample_weight=w)
    assert m.dual_coef_[3] == 0.0
    res = K[np.ix_(keep, keep)] @ m.dual_coef_[keep] + 0.1 * m.dual_coef_[keep] / w[keep]
    # (float32 K: the certified residual includes the rounding estimate; it holds within 2x)
    assert np.linalg.norm(res - y[keep]) <= 2 * tol * np.linalg.norm(y[keep])
    assert _rel(m.predict(X), K @ c) < 10 * tol


# ------------------------------------------------------ FALKON: atomic fit, dtypes
@pytest.mark.parametrize("cls", [FalkonRegressor, FalkonClassifier])
@pytest.mark.parametrize("bad", ["tol", "X", "y", "kernel"])
def test_falkon_rejected_fit_leaves_the_model_as_it_was(cls, bad):
    rng = np.random.RandomState(0)
    X3, X5 = rng.rand(60, 3), rng.rand(60, 5)
    y = rng.rand(60) > 0.5 if cls is FalkonClassifier else rng.rand(60)
    model = cls(n_centers=20, random_state=0).fit(X3, y)
    pred = model.predict(X3)
    before = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in vars(model).items()}
    params = model.get_params()

    def failing(A, B):
        raise RuntimeError("kernel failed midway")

    args, err = (X5, y), ValueError
    if bad == "tol":
        model.set_params(tol=-1.0)
    elif bad == "X":
        args = (np.full((60, 5), np.inf), y)
    elif bad == "y":
        args = (X5, y[:7])
    else:
        model.set_params(kernel=failing)
        err = RuntimeError
    with pytest.raises(err):
        model.fit(*args)
    model.set_params(**params)
    assert vars(model).keys() == before.keys()
    for k, v in before.items():
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(vars(model)[k], v)
    np.testing.assert_array_equal(model.predict(X3), pred)
    with pytest.raises(ValueError, match="features"):
        model.predict(X5)


def test_falkon_parameters_are_validated_before_the_data():
    with pytest.raises(ValueError, match="tol must be"):
        FalkonRegressor(tol=0).fit(np.full((5, 2), np.nan), np.ones(5))
    with pytest.raises(ValueError, match="centers must be one of"):
        FalkonClassifier(centers="kmeans").fit([[1.0]], [0])


@pytest.mark.parametrize("dt", [">f8", "<f4", np.float16])
def test_falkon_non_native_and_low_precision_inputs(dt):
    X, y = _data(200)
    Xd, yd, C = X.astype(dt), y.astype(dt), X[:40].astype(dt)
    X64, y64, C64 = (np.asarray(a, np.float64) for a in (Xd, yd, C))
    f = FalkonRegressor(alpha=1e-2, centers=C, gamma=GAMMA, tol=1e-10).fit(Xd, yd)
    assert f.centers_.dtype == np.float64 and f.centers_.dtype.isnative
    ref = _nystrom_predictions(X64, C64, y64, 1e-2)
    assert _rel(f.predict(Xd), ref) < 1e-7


# ----------------------------------- FALKON: float64 path refined, tiny and huge targets
def test_falkon_float64_path_refines_where_cg_breaks_down():
    # every point a center, a flat kernel: float64 CG (tol < 1e-6) broke down after ~180
    # steps, 350x less accurate than the mixed tol=1e-6 solve, and blamed max_iter
    rng = np.random.RandomState(0)
    X, y = rng.uniform(size=(200, 3)), rng.randn(200)
    kw = dict(alpha=1e-3, centers=X, gamma=0.1)
    K = RBF(0.1)(X)
    ref = K @ linalg.solve(K + 1e-3 * np.eye(200), y, assume_a="pos")
    mixed = FalkonRegressor(tol=1e-6, **kw).fit(X, y)
    # tol=1e-7 is just below the true residual float64 reaches here: the fit says so
    with pytest.warns(ConvergenceWarning, match=r"broke down .*max_iter=500 not reached"):
        f64 = FalkonRegressor(tol=1e-7, **kw).fit(X, y)
    assert _rel(f64.predict(X), ref) < 1e-8
    assert _rel(f64.predict(X), ref) <= 2 * _rel(mixed.predict(X), ref)


@pytest.mark.parametrize("s", [1e-300, 1e300])
@pytest.mark.parametrize("tol", [1e-5, 1e-8], ids=["mixed", "float64"])
def test_falkon_targets_at_the_ends_of_float64(s, tol):
    X, y = _data(200)
    Y = np.column_stack([y, np.cos(X[:, 0])])
    C = X[:40]
    kw = dict(centers=C, gamma=GAMMA, tol=tol, max_iter=2000)
    ref = _nystrom_predictions(X, C, Y, 1e-2)
    f = FalkonRegressor(alpha=1e-2, **kw).fit(X, Y * s)
    assert _rel(f.predict(X) / s, ref) < 1e-3
    # one column tiny beside an ordinary one, each with its own alpha
    f2 = FalkonRegressor(alpha=[1e-2, 1e-1], **kw).fit(X, Y * [1.0, s])
    assert _rel(f2.predict(X)[:, 1] / s, _nystrom_predictions(X, C, Y[:, 1], 1e-1)) < 1e-3


def test_rp_cholesky_refuses_a_kernel_whose_diagonal_sum_overflows():
    """K times 2**1020: the diagonal's sum, K's trace and so ||F||_F^2, overflows float64
    (the pivots' probabilities were NaN: numpy's 'probabilities do not sum to 1')."""
    X = np.random.default_rng(0).standard_normal((300, 4))
    K = RBF(0.3)(X) * 2.0 ** 1020
    with pytest.raises(ValueError, match="diagonal sums beyond float64's range"):
        rp_cholesky(lambda S: K[:, S], np.diag(K).copy(), 1.0, np.random.RandomState(0),
                    max_rank=64)
    Xl = np.random.default_rng(0).standard_normal((200, 5)) * 1e153
    with pytest.raises(ValueError, match="diagonal sums beyond float64's range"):
        KernelRidgeClassifier(kernel="linear", solver="pcg").fit(Xl, Xl[:, 0] > 0)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_pcg_factors_its_preconditioner_where_kernel_values_dwarf_alpha():
    """A degree-60 polynomial kernel (values to ~1e150) at alpha 1: F^T F's rounding
    exceeds alpha, and the factor of F^T F + alpha I failed (a LinAlgError out of fit);
    it now takes a jitter at that rounding and the fit goes through as Cholesky's does."""
    X = np.random.default_rng(0).standard_normal((200, 5)) * 10
    y = (X[:, 0] > 0).astype(int)
    model = KernelRidgeClassifier(kernel="poly", degree=60, gamma=1.0, solver="pcg",
                                  calibration=None).fit(X, y)
    assert np.all(np.isfinite(model.dual_coef_))
    F = np.random.default_rng(1).standard_normal((50, 8)) * 1e150
    pre = NystromPreconditioner(F, F.T @ F, 1.0)
    R = np.random.default_rng(2).standard_normal((50, 2))
    Z = pre(R)  # spd: R^T P^-1 R > 0
    assert np.all(np.isfinite(Z)) and np.all(np.einsum("ij,ij->j", R, Z) > 0)
