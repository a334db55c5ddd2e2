"""FalkonClassifier(loss="logistic"): Nyström kernel logistic regression by the Newton path."""

import pickle
import warnings

import numpy as np
import pytest
from scipy import linalg
from scipy.optimize import minimize
from scipy.special import expit, log_softmax, softmax
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.utils.class_weight import compute_sample_weight

from kernelkit.ridge import FalkonClassifier

GAMMA = 0.7


def _problem(n_classes, n=80, m=20, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 2)
    t = X[:, 0] + 0.5 * rng.randn(n)
    y = (t > 0).astype(int) if n_classes == 2 else np.digitize(t, [-0.5, 0.5])
    C = X[np.sort(rng.choice(n, m, replace=False))]
    return X, y, C, rng.uniform(0.2, 3.0, n)


def _dense_logistic(X, y, C, alpha, w):
    """scipy L-BFGS on min_c sum_i w_i logloss(y_i, K_nm c) + alpha / 2 c^T K_mm c, in the
    whitened variable u = T c (K_mm = T^T T): the same problem, conditioned by alpha."""
    Knm, Kmm = rbf_kernel(X, C, gamma=GAMMA), rbf_kernel(C, C, gamma=GAMMA)
    T = linalg.cholesky(Kmm + 1e-10 * np.eye(len(C)))
    B = linalg.solve_triangular(T, Knm.T, trans="T").T  # K_nm T^-1
    classes = np.unique(y)
    k = 1 if len(classes) == 2 else len(classes)
    Yoh = np.eye(len(classes))[np.searchsorted(classes, y)]
    s = np.where(y == classes[-1], 1.0, -1.0)

    def f(u):
        U = u.reshape(-1, k)
        Z = B @ U
        if k == 1:
            z = Z[:, 0]
            val = np.dot(w, np.logaddexp(0, -s * z))
            G = (-w * s * expit(-s * z))[:, None]
        else:
            lp = log_softmax(Z, axis=1)
            val = -np.dot(w, (Yoh * lp).sum(1))
            G = w[:, None] * (np.exp(lp) - Yoh)
        return val + alpha / 2 * np.sum(U * U), (B.T @ G + alpha * U).ravel()

    res = minimize(f, np.zeros(len(C) * k), jac=True, method="L-BFGS-B",
                   options=dict(gtol=1e-13, ftol=1e-16, maxiter=50000, maxcor=30))
    # L-BFGS stalls short of 1e-6 when K_mm is ill-conditioned (small alpha): a few dense
    # Newton steps on the exact objective in c (K_mm itself, no jitter) finish it
    c = linalg.lstsq(T, res.x.reshape(-1, k))[0]
    for _ in range(8):
        Z = Knm @ c
        if k == 1:
            p = expit(s * Z[:, 0])
            G, S = (-w * s * (1 - p))[:, None], (w * p * (1 - p))[:, None, None]
        else:
            P = softmax(Z, axis=1)
            G = w[:, None] * (P - Yoh)
            S = w[:, None, None] * (np.einsum("ia,ab->iab", P, np.eye(k))
                                    - np.einsum("ia,ib->iab", P, P))
        mk = c.size
        H = np.einsum("ij,il,iab->jalb", Knm, Knm, S).reshape(mk, mk)
        H += alpha * np.kron(Kmm, np.eye(k))
        g = (Knm.T @ G + alpha * Kmm @ c).ravel()
        c = c - linalg.lstsq(H, g)[0].reshape(c.shape)
    return Knm @ c


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("weighted", [False, True])
def test_equals_dense_kernel_logistic_regression(n_classes, weighted):
    X, y, C, w = _problem(n_classes)
    w = w if weighted else np.ones(len(y))
    alpha = 0.5
    clf = FalkonClassifier(alpha=alpha, centers=C, gamma=GAMMA, loss="logistic",
                           tol=1e-10).fit(X, y, sample_weight=w if weighted else None)
    ref = _dense_logistic(X, y, C, alpha, w)
    got = clf.decision_function(X).reshape(len(y), -1)
    if n_classes > 2:  # the softmax is shift invariant: compare centred logits
        ref, got = ref - ref.mean(1, keepdims=True), got - got.mean(1, keepdims=True)
    np.testing.assert_allclose(got, ref, atol=1e-6)
    # more classes: the model's own probabilities, no temperature; two: the slopes
    # fitted on approximate leave-one-out values (test_falkon_calibration.py)
    P = clf.predict_proba(X)
    d = clf.decision_function(X)
    if n_classes == 2:
        a = np.where(d > 0, clf.calibration_slopes_[1], clf.calibration_slopes_[0])
        want = np.column_stack([1 - expit(a * d), expit(a * d)])
    else:
        assert clf.calibration_temperature_ == 1.0 and clf.calibration_slopes_ is None
        want = softmax(d, axis=1)
    np.testing.assert_allclose(P, want, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(P.sum(1), 1.0)
    np.testing.assert_array_equal(clf.classes_[P.argmax(1)], clf.predict(X))
    assert clf.n_iter_ == len(clf.loss_curve_) > 0
    assert np.all(np.diff(clf.loss_curve_[-3:]) <= 1e-9 * abs(clf.loss_curve_[-1]))


def test_small_penalty_path_and_default_precision():
    """A small alpha (ill-conditioned Newton systems): the path reaches the optimum, and
    the default tol (float32 K_nM) is within 1e-4 of the float64 fit."""
    X, y, C, _ = _problem(3, n=120, m=30, seed=1)
    fine = FalkonClassifier(alpha=1e-3, centers=C, gamma=GAMMA, loss="logistic",
                            tol=1e-10).fit(X, y)
    ref = _dense_logistic(X, y, C, 1e-3, np.ones(len(y)))
    got = fine.decision_function(X)
    np.testing.assert_allclose(got - got.mean(1, keepdims=True),
                               ref - ref.mean(1, keepdims=True), atol=1e-5 * np.abs(ref).max())
    coarse = FalkonClassifier(alpha=1e-3, centers=C, gamma=GAMMA, loss="logistic").fit(X, y)
    np.testing.assert_allclose(coarse.predict_proba(X), fine.predict_proba(X), atol=1e-4)


def test_class_weight_balanced_is_the_matching_sample_weight():
    X, y, C, w = _problem(3, seed=2)
    y[:50] = 0  # unbalanced
    a = FalkonClassifier(centers=C, gamma=GAMMA, loss="logistic", tol=1e-10,
                         class_weight="balanced").fit(X, y, sample_weight=w)
    b = FalkonClassifier(centers=C, gamma=GAMMA, loss="logistic", tol=1e-10).fit(
        X, y, sample_weight=w * compute_sample_weight("balanced", y))
    np.testing.assert_allclose(a.dual_coef_, b.dual_coef_, rtol=1e-9, atol=1e-12)


def test_uniform_centers_labels_and_pickle():
    X, y, _, _ = _problem(2, n=300)
    labels = np.array(["no", "yes"])[y]
    clf = FalkonClassifier(alpha=1e-2, n_centers=60, gamma=GAMMA, loss="logistic",
                           random_state=0).fit(X, labels)
    assert clf.n_centers_ == 60 and set(clf.classes_) == {"no", "yes"}
    assert np.mean(clf.predict(X) == labels) > 0.8
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.predict_proba(X), clf.predict_proba(X))


def test_bad_parameters_rejected_before_data_and_state_kept():
    X, y, C, _ = _problem(2)
    clf = FalkonClassifier(centers=C, gamma=GAMMA, loss="logistic").fit(X, y)
    before = pickle.dumps(clf.__dict__)
    with pytest.raises(ValueError, match="loss"):
        FalkonClassifier(loss="hinge").fit(np.full((3, 2), np.nan), [0, 1, 0])
    for bad in (dict(alpha=0.0), dict(alpha=[1.0, 2.0]), dict(class_weight={7: 1.0})):
        with pytest.raises(ValueError, match="alpha|class_weight"):
            clf.set_params(**bad).fit(X, y)
        clf.set_params(alpha=1e-3, class_weight=None)
        assert pickle.dumps(clf.__dict__) == before
    clf.set_params(calibration=None).fit(X, y)
    assert not hasattr(clf, "predict_proba") and clf.calibration_temperature_ is None


def test_newton_limit_warns():
    X, y, C, _ = _problem(3)
    with pytest.warns(ConvergenceWarning, match="Newton"):
        FalkonClassifier(alpha=1e-4, centers=C, gamma=GAMMA, loss="logistic", tol=1e-9,
                         max_iter=1).fit(X, y)


def test_verbose_reports_newton_steps(capsys):
    X, y, C, _ = _problem(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        FalkonClassifier(centers=C, gamma=GAMMA, loss="logistic", verbose=1).fit(X, y)
    assert "Newton step" in capsys.readouterr().out


def test_numerically_singular_kmm_does_not_run_off():
    """100 rbf centers on 300 points in 2-D: K_MM is singular to rounding. Its rounding
    once gave negative curvature, along which b ran off (objective -1e298, accuracy 0.65)."""
    from sklearn.datasets import make_blobs
    from sklearn.preprocessing import StandardScaler

    X, y = make_blobs(n_samples=300, random_state=0)
    X = StandardScaler().fit_transform(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # converges, no warning
        clf = FalkonClassifier(random_state=0, loss="logistic").fit(X, y)
    assert clf.n_centers_ == 100 and min(clf.loss_curve_) > 0
    # the target penalty's steps (the last two at least) never increase the objective
    assert np.all(np.diff(clf.loss_curve_[-2:]) <= 1e-9 * clf.loss_curve_[-1])
    assert np.mean(clf.predict(X) == y) > 0.9


@pytest.mark.parametrize("n_classes", [2, 3])
def test_uniform_centers_equals_dense(n_classes):
    """Centers drawn from the rows: the preconditioner weighs each class by its
    centers' own curvature, its heaviest rows exactly; the fit is still the dense
    optimum."""
    X, y, _, w = _problem(n_classes, n=150, seed=3)
    clf = FalkonClassifier(alpha=0.5, n_centers=20, gamma=GAMMA, loss="logistic",
                           tol=1e-10, random_state=0).fit(X, y, sample_weight=w)
    ref = _dense_logistic(X, y, clf.centers_, 0.5, w)
    got = clf.decision_function(X).reshape(len(y), -1)
    if n_classes > 2:  # the softmax is shift invariant: compare centred logits
        ref, got = ref - ref.mean(1, keepdims=True), got - got.mean(1, keepdims=True)
    np.testing.assert_allclose(got, ref, atol=1e-6)


def test_class_preconditioner_is_block_jacobi_within_factor_two():
    """Centers = all rows, unit weights: FALKON's approximation is exact, so the per-class
    preconditioned softmax system is ``B^T Pi H Pi B`` with ``B = T^-1 A^-1`` per class,
    its spectrum on the shift-free subspace within (0, 2] (the softmax block is at most
    twice its diagonal)."""
    from kernelkit.ridge._falkon_logistic_pre import _ClassPreconditioner
    from kernelkit.ridge._falkon_ops import _FalkonPreconditioner

    rng = np.random.RandomState(0)
    n, k, lam = 25, 4, 1e-3
    X = 2 * rng.randn(n, 2)  # K_MM well conditioned: the dense inverses below are exact
    K = rbf_kernel(X, X, gamma=GAMMA)
    P = softmax(3 * rng.randn(n, k), axis=1)
    pre = _FalkonPreconditioner(np.asfortranarray(K.copy()), np.ones(n), n)
    cls = _ClassPreconditioner(pre, k)
    cls.set_weights(np.sqrt(P * (1 - P) / n), lam)

    def product(U):  # K_nM (softmax Hessian) K_nM U, K_MM taken as T^T T = K + eps I
        Kt = K + pre.eps * np.eye(n)
        Z = Kt @ U
        return Kt @ (P * Z - P * (P * Z).sum(1, keepdims=True)) + n * lam * pre.eps * U

    E = np.eye(n * k)
    Op = np.column_stack([cls.apply(E[:, j].reshape(n, k), product, lam, n).ravel()
                          for j in range(n * k)])
    # dense reference: Pi, T, A_c explicitly
    T = np.triu(pre.F.copy())
    np.fill_diagonal(T, pre.tdiag)
    Pi = np.kron(np.eye(n), np.eye(k) - 1.0 / k)  # row-major (n, k) vectors
    Ainv = np.zeros((n * k, n * k))
    for c in range(k):
        A = linalg.cholesky(T @ np.diag(P[:, c] * (1 - P[:, c]) / n) @ T.T + lam * np.eye(n))
        sel = np.arange(n) * k + c
        Ainv[np.ix_(sel, sel)] = linalg.inv(A)
    B = Pi @ np.kron(linalg.inv(T), np.eye(k)) @ Ainv
    Kt = np.kron(K + pre.eps * np.eye(n), np.eye(k))
    S = linalg.block_diag(*[np.diag(p) - np.outer(p, p) for p in P])
    H = Kt @ S @ Kt / n + lam * np.kron(K, np.eye(k))
    want = B.T @ H @ B
    np.testing.assert_allclose(Op, want, atol=1e-8 * np.abs(want).max())
    ev = linalg.eigvalsh(0.5 * (want + want.T))
    assert ev.max() <= 2 + 1e-6 and ev.min() >= -1e-8
    assert np.sum(ev > 1e-9) == n * (k - 1)  # nonsingular on the shift-free subspace


def test_heavy_rows_hold_half_the_weight_at_most_m():
    from kernelkit.ridge._falkon_logistic_pre import heavy_rows

    dk = np.array([[0.1, 1.0], [0.4, 1.0], [0.2, 1.0], [0.3, 1.0]])
    got = heavy_rows(dk, m=10)
    assert list(got[0]) == [1, 3]  # 0.4 + 0.3 >= half of 1.0
    assert len(got[1]) == 2 and np.all(np.diff(got[1]) > 0)  # equal weights: any two
    got = heavy_rows(dk, m=1)  # at most one row per class
    assert [len(g) for g in got] == [1, 1] and list(got[0]) == [1]


def test_shared_preconditioner_adds_the_exact_rows():
    """``set_lambda(lam, extra=P)``: ``A^T A = T S^2 T^T + P P^T + lam I`` (dense)."""
    from kernelkit.ridge._falkon_ops import _FalkonPreconditioner

    rng = np.random.RandomState(2)
    m, h, lam = 12, 5, 1e-3
    C = 2 * rng.randn(m, 2)
    pre = _FalkonPreconditioner(np.asfortranarray(rbf_kernel(C, C, gamma=GAMMA)),
                                np.ones(m), m)
    pre.scale = rng.uniform(0.0, 1.0, m)
    P = np.asfortranarray(rng.randn(m, h))
    pre.set_lambda(lam, extra=P)
    L = np.tril(pre.F, -1) + np.diag(pre.adiag)  # A^T
    T = np.triu(pre.F, 1) + np.diag(pre.tdiag)
    want = T @ np.diag(pre.scale ** 2) @ T.T + P @ P.T + lam * np.eye(m)
    np.testing.assert_allclose(L @ L.T, want, rtol=1e-10, atol=1e-12)


def test_class_preconditioner_takes_heavy_rows_exactly():
    """``R_c^T R_c = sum_{heavy i} d_ic phi_i phi_i^T + T S_c^2 T^T + lam I`` with
    ``phi_i = T^-T k(C, x_i)`` and the centers among the heavy rows out of ``S_c``
    (dense reference)."""
    from kernelkit.ridge._falkon_logistic_pre import _ClassPreconditioner, heavy_rows
    from kernelkit.ridge._falkon_ops import _FalkonPreconditioner

    rng = np.random.RandomState(1)
    n, m, k, lam = 40, 10, 3, 1e-3
    X = 2 * rng.randn(n, 2)
    idx = np.arange(0, n, n // m)  # centers: every fourth row
    Knm = rbf_kernel(X, X[idx], gamma=GAMMA)
    dk = rng.uniform(0.01, 0.1, (n, k))
    dk[idx[:3]] *= 20  # some centers carry much of the weight: heavy rows
    wc = np.full(m, n / m)
    scales = np.sqrt(wc[:, None] * dk[idx] / n)
    pre = _FalkonPreconditioner(np.asfortranarray(Knm[idx].copy()), wc, n)
    cls = _ClassPreconditioner(pre, k)
    heavy = heavy_rows(dk, m)
    cls.set_weights(scales, lam, heavy=heavy, dk=dk / n, idx=idx, rows=lambda I: Knm[I])
    T = np.triu(pre.F.copy())
    np.fill_diagonal(T, pre.tdiag)
    Phi = linalg.solve_triangular(T, Knm.T, trans="T")  # columns phi_i
    for c in range(k):
        light = ~np.isin(idx, heavy[c])
        assert 0 < light.sum() < m  # both parts present
        H = heavy[c]
        want = (Phi[:, H] * (dk[H, c] / n)) @ Phi[:, H].T
        want += T @ np.diag(scales[:, c] ** 2 * light) @ T.T + lam * np.eye(m)
        R = np.triu(cls.R[c])
        np.testing.assert_allclose(R.T @ R, want, rtol=1e-10, atol=1e-12)


def test_newton_cg_sums_the_fitted_value_change():
    """The Newton CG returns, beside ``x``, ``sum_i a_i K p_i = K x`` from the products'
    second output (no pass of its own), and ``x`` solves the system to its tolerance."""
    from kernelkit.ridge._falkon_logistic import _newton_cg

    rng = np.random.RandomState(0)
    m, n = 30, 50
    Q = rng.randn(m, m)
    A = Q @ Q.T + m * np.eye(m)
    K = rng.randn(n, m)
    b = rng.randn(m)
    x, KX, it, done = _newton_cg(lambda p: (A @ p, K @ p), b, 1e-12, 200,
                                 lambda *a, **k: None, np.zeros(n))
    np.testing.assert_allclose(x, linalg.solve(A, b), rtol=1e-9)
    np.testing.assert_allclose(KX, K @ x, rtol=1e-9, atol=1e-12)
    assert 0 < it <= m + 5 and done
    # a loose tolerance stops early, with the residual within it
    x, KX, it, done = _newton_cg(lambda p: (A @ p, K @ p), b, 0.2, 200,
                                 lambda *a, **k: None, np.zeros(n))
    assert np.linalg.norm(b - A @ x) <= 0.2 * np.linalg.norm(b) and it < 10 and done
    np.testing.assert_allclose(KX, K @ x, rtol=1e-9, atol=1e-12)


def test_newton_cg_plateau_stops_only_on_rounding(monkeypatch):
    """A plateau of CG's residual is checked against the true residual from ``exact``
    (float64 products where ``apply`` rounds): without a gap CG goes on and converges;
    with a gap of more than a tenth of the residual (here ``exact`` offset by a fixed
    vector, as rounded products leave the recurrence behind) it stops at the first
    plateau past that point, short of its tolerance."""
    import kernelkit.ridge._falkon_logistic as fl

    monkeypatch.setattr(fl, "_STALL", 1)  # a check after every iteration short of 10%
    rng = np.random.RandomState(0)
    m = 60
    U = np.linalg.qr(rng.randn(m, m))[0]
    A = (U * np.logspace(0, -4, m)) @ U.T  # the residual rises and falls
    b = rng.randn(m)
    gaps = []

    def run(offset):
        def exact(x):
            y = A @ x + offset
            r = b - A @ x  # the recurrence's residual, exact here
            gaps.append(np.linalg.norm(b - y - r) / np.linalg.norm(r))
            return y

        gaps.clear()
        return fl._newton_cg(lambda p: (A @ p, np.zeros(1)), b, 1e-10, 2000,
                             lambda *a, **k: None, np.zeros(1), exact=exact)

    x, _, it_exact, done = run(0.0)
    assert done and len(gaps) > 0 and max(gaps) < 1e-6
    np.testing.assert_allclose(A @ x, b, atol=1e-8 * np.linalg.norm(b))
    x, _, it, done = run(1e-3 * np.linalg.norm(b) * U[:, 0])
    assert not done and it < it_exact
    assert gaps[-1] > 0.1 and all(g <= 0.1 + 1e-9 for g in gaps[:-1])


def test_float32_hessian_products_match_float64():
    """The float32 products of a loose CG (held float32 K_nM, V split into two float32
    parts) equal the float64 pass over the same held values to float32 rounding: 1e-6
    relative for a plain V; for a V with cancelling entries (T^-1 of an ill-conditioned
    K_MM, as the preconditioned products have) within float32's rounding model
    ``u |K|^T D |K| |V|``, far from the float64 result's size."""
    from kernelkit.kernels import resolve_kernel
    from kernelkit.ridge._falkon_logistic import _sandwich32
    from kernelkit.ridge._falkon_ops import _NystromNormalOperator

    rng = np.random.RandomState(1)
    X = rng.randn(3000, 3)
    C = X[:200]
    op = resolve_kernel("rbf", GAMMA, 3, 1, None, n_features=3, backend="numpy")
    normal = _NystromNormalOperator(op, X, C, np.float32, 4096)
    assert normal.mixed
    K = normal.KnM.astype(np.float64)
    D = rng.uniform(0.0, 0.25, (3000, 4))

    def fn(P, r0, r1):
        return D[r0:r1] * P

    V = rng.randn(200, 4)
    want = K.T @ (D * (K @ V))
    np.testing.assert_allclose(normal.sandwich(V, fn), want, rtol=1e-12)
    np.testing.assert_allclose(_sandwich32(normal, V, fn), want, atol=1e-6 * np.abs(want).max())
    T = linalg.cholesky(rbf_kernel(C, C, gamma=GAMMA) + 1e-8 * np.eye(200))
    V = linalg.solve_triangular(T, rng.randn(200, 4))  # large, cancelling entries
    want = K.T @ (D * (K @ V))
    bound = 30 * np.finfo(np.float32).eps * (np.abs(K).T @ (D * (np.abs(K) @ np.abs(V))))
    err = np.abs(_sandwich32(normal, V, fn) - want)
    assert np.all(err <= bound)


def test_loose_tol_is_close_to_the_optimum():
    """At tol=1e-3 (float32 K_nM and products, preconditioners kept while the Hessian
    weights hold, the per-class preconditioner on; here the float32 products stall CG
    and the float32 K_nM is too rounded, so both fall back to float64) the training
    probabilities are those of the tightly converged fit to tol (root mean square)."""
    X, y, _, _ = _problem(3, n=600, seed=4)
    kw = dict(alpha=1e-3, n_centers=150, gamma=GAMMA, loss="logistic", random_state=0)
    fine = FalkonClassifier(tol=1e-10, **kw).fit(X, y)
    coarse = FalkonClassifier(tol=1e-3, **kw).fit(X, y)
    d = coarse.predict_proba(X) - fine.predict_proba(X)
    assert np.sqrt(np.mean(np.sum(d ** 2, axis=1))) <= 1e-3 and np.abs(d).max() <= 5e-3


def test_slow_cg_refresh_changes_the_path_not_the_optimum(monkeypatch):
    """A preconditioner is refactored once CG needs more than ``_SLOW`` times the
    iterations of its first step (weights moved less than ``_REUSE``): more builds, the
    same dense optimum."""
    import kernelkit.ridge._falkon_logistic as fl
    import kernelkit.ridge._falkon_logistic_pre as fp

    X, y, C, w = _problem(3, n=150, m=30, seed=1)
    ref = _dense_logistic(X, y, C, 1e-2, w)
    ref -= ref.mean(1, keepdims=True)
    calls = []
    orig = fp._ClassPreconditioner.set_weights
    monkeypatch.setattr(fp._ClassPreconditioner, "set_weights",
                        lambda self, *a, **kw: (calls.append(1), orig(self, *a, **kw))[1])
    monkeypatch.setattr(fl, "_REUSE", np.inf)  # only the slowdown rule refreshes
    builds = {}
    for slow in (np.inf, 0.0):  # never; after every step that needed a CG iteration
        monkeypatch.setattr(fl, "_SLOW", slow)
        calls.clear()
        clf = FalkonClassifier(alpha=1e-2, centers=C, gamma=GAMMA, loss="logistic",
                               tol=1e-10).fit(X, y, sample_weight=w)
        builds[slow] = (len(calls), clf.n_iter_)
        got = clf.decision_function(X)
        np.testing.assert_allclose(got - got.mean(1, keepdims=True), ref, atol=1e-6)
    assert builds[np.inf][0] == 1
    assert builds[0.0][0] > 1


def test_newton_pcg_solves_with_a_preconditioner():
    """With ``precond`` the Newton CG is PCG: same solution, fewer iterations with a good
    preconditioner, and the stop is on ``sqrt(r^T P^-1 r)``."""
    from kernelkit.ridge._falkon_logistic import _newton_cg

    rng = np.random.RandomState(1)
    m = 60
    d = np.logspace(0, 4, m)  # ill-conditioned diagonal plus a small coupling
    Q = rng.randn(m, m) * 0.01
    A = np.diag(d) + Q @ Q.T
    b, quiet = rng.randn(m), (lambda *a, **k: None)
    plain = _newton_cg(lambda p: (A @ p, p), b, 1e-10, 500, quiet, np.zeros(m))
    pcg = _newton_cg(lambda p: (A @ p, p), b, 1e-10, 500, quiet, np.zeros(m),
                     precond=lambda r: r / d)
    for x, KX, it, done in (plain, pcg):
        np.testing.assert_allclose(x, linalg.solve(A, b), rtol=1e-7)
        assert done
    assert pcg[2] < plain[2] / 3
    x, _, it, done = _newton_cg(lambda p: (A @ p, p), b, 0.1, 500, quiet, np.zeros(m),
                                precond=lambda r: r / d)
    r = b - A @ x
    assert done and np.sqrt(r @ (r / d)) <= 0.1 * np.sqrt(b @ (b / d))


def test_threshold_sample_is_unbiased():
    """Poisson sampling: inclusion probabilities ``min(1, c w)`` summing to ``r``, weights
    ``w / p``; the weighted sum of any per-item value is unbiased (Monte Carlo, 3 SE)."""
    from kernelkit.ridge._falkon_logistic_pre import threshold_sample

    rng = np.random.RandomState(0)
    w = rng.pareto(1.0, 400) + 1e-3  # heavy tailed: some items certain
    w[:50] = 0.0
    v = rng.randn(400)
    S, ws = threshold_sample(w, 40, rng)
    p = w[S] / ws
    assert np.any(p == 1.0) and np.all((p > 0) & (p <= 1))
    est = np.array([np.dot(ws, v[S]) for S, ws in
                    (threshold_sample(w, 40, rng) for _ in range(4000))])
    assert abs(est.mean() - np.dot(w, v)) <= 3 * est.std() / np.sqrt(est.size)
    sizes = [threshold_sample(w, 40, rng)[0].size for _ in range(500)]
    assert abs(np.mean(sizes) - 40) < 1.0
    S, ws = threshold_sample(w, 400, rng)  # all nonzero ones, as they are
    np.testing.assert_array_equal(S, np.arange(50, 400))
    np.testing.assert_array_equal(ws, w[50:])


def test_sampled_preconditioner_is_woodbury_of_its_sample():
    """Everything sampled (``r`` at least the rows): ``P_c = lam I + Phi_c Phi_c^T`` with
    ``Phi_c Phi_c^T = sum_{heavy i} d_ic phi_i phi_i^T + T S_c^2 T^T`` (the heavy rows'
    ``phi_i`` solved in float32), and ``precond`` is ``Pi diag_c(P_c^-1) Pi`` (dense)."""
    from kernelkit.ridge._falkon_logistic_pre import _SampledPreconditioner, heavy_rows
    from kernelkit.ridge._falkon_ops import _FalkonPreconditioner

    rng = np.random.RandomState(1)
    n, m, k, lam = 40, 10, 3, 1e-3
    X = 2 * rng.randn(n, 2)
    idx = np.arange(0, n, n // m)
    Knm = rbf_kernel(X, X[idx], gamma=GAMMA)
    dk = rng.uniform(0.01, 0.1, (n, k))
    dk[idx[:3]] *= 20
    wc = np.full(m, n / m)
    pre = _FalkonPreconditioner(np.asfortranarray(Knm[idx].copy()), wc, n)
    samp = _SampledPreconditioner(pre, k, r=2 * m, rng=rng)  # heavy: at most m per class
    cw = wc[:, None] * dk[idx] / n
    samp.set_weights(cw, lam, dk=dk / n, idx=idx, rows=lambda I: Knm[I])
    T = np.triu(pre.F.copy())
    np.fill_diagonal(T, pre.tdiag)
    Phi = linalg.solve_triangular(T, Knm.T, trans="T")
    heavy = heavy_rows(dk / n, m)
    V = rng.randn(m, k)
    V -= V.mean(1, keepdims=True)
    want = np.empty((m, k))
    for c in range(k):
        H = heavy[c]
        S = (Phi[:, H] * (dk[H, c] / n)) @ Phi[:, H].T
        S += T @ np.diag(cw[:, c] * ~np.isin(idx, H)) @ T.T
        held = samp.Phi[c] @ samp.Phi[c].T
        np.testing.assert_allclose(held, S, rtol=1e-4, atol=1e-5 * abs(S).max())  # float32
        want[:, c] = linalg.solve(held + lam * np.eye(m), V[:, c])
    want -= want.mean(1, keepdims=True)
    np.testing.assert_allclose(samp.precond(V), want, rtol=1e-8, atol=1e-10 * abs(want).max())
    # one group for all classes (the path's penalties): the centers' mean weights only
    samp.set_weights(cw.mean(1, keepdims=True), lam)
    P = T @ np.diag(cw.mean(1)) @ T.T + lam * np.eye(m)
    np.testing.assert_allclose(samp.Phi[0] @ samp.Phi[0].T + lam * np.eye(m), P, rtol=1e-10)
    want = linalg.solve(P, V)
    want -= want.mean(1, keepdims=True)
    np.testing.assert_allclose(samp.precond(V), want, rtol=1e-8, atol=1e-10 * abs(want).max())


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("r", [4, 12])
def test_sampled_preconditioner_fit_equals_dense(monkeypatch, capsys, n_classes, r):
    """Forced onto the sampled preconditioner (of a few rows: a poor one), the fit is
    still the dense optimum."""
    import kernelkit.ridge._falkon_logistic as fl

    monkeypatch.setattr(fl, "_SAMPLED_FROM", 1)
    monkeypatch.setattr(fl, "_SAMPLE_R", r)
    X, y, _, w = _problem(n_classes, n=150, seed=3)
    clf = FalkonClassifier(alpha=0.5, n_centers=20, gamma=GAMMA, loss="logistic",
                           tol=1e-10, random_state=0, verbose=2)
    clf.fit(X, y, sample_weight=w)
    ref = _dense_logistic(X, y, clf.centers_, 0.5, w)
    got = clf.decision_function(X).reshape(len(y), -1)
    if n_classes > 2:
        ref, got = ref - ref.mean(1, keepdims=True), got - got.mean(1, keepdims=True)
    np.testing.assert_allclose(got, ref, atol=1e-6)
    out = capsys.readouterr().out
    assert ("per class sampled" in out) == (n_classes > 2) and "shared sampled" in out


@pytest.mark.parametrize("n_classes", [2, 3])
def test_class_factors_over_budget_take_the_sample(monkeypatch, capsys, n_classes):
    """Per-class factors beyond their memory budget: the sampled preconditioner (two
    classes keep the shared factor, which needs no per-class memory)."""
    import kernelkit.ridge._falkon_logistic as fl

    monkeypatch.setattr(fl, "_CLASS_PRE_BYTES", 0)
    X, y, _, w = _problem(n_classes, n=150, seed=3)
    FalkonClassifier(alpha=0.5, n_centers=20, gamma=GAMMA, loss="logistic", tol=1e-6,
                     random_state=0, verbose=1).fit(X, y, sample_weight=w)
    assert ("sampled" in capsys.readouterr().out) == (n_classes > 2)


@pytest.mark.parametrize("r", [1, 2, 5])
def test_tiny_or_empty_samples_still_fit_the_optimum(monkeypatch, capfd, r):
    """A sample of one row (no room beside a heavy one) or an empty Poisson sample (all
    of a group's weight elsewhere): that group's preconditioner is ``lam I``; the fit is
    the unsampled path's optimum (tested against dense solves above) and LAPACK is never
    called with an empty matrix."""
    import kernelkit.ridge._falkon_logistic as fl
    from kernelkit.ridge._falkon_logistic_pre import threshold_sample

    S, ws = threshold_sample(np.ones(5), 0, np.random.RandomState(0))
    assert S.size == ws.size == 0
    monkeypatch.setattr(fl, "_SAMPLED_FROM", 1)
    monkeypatch.setattr(fl, "_SAMPLE_R", r)
    rng = np.random.RandomState(1)
    X = rng.randn(200, 2)
    y = np.digitize(X[:, 0] + 0.5 * rng.randn(200), [-0.5, 0.5])
    for kw in ({"centers": X[:25]}, {"n_centers": 25, "random_state": 0}):
        make = lambda: FalkonClassifier(alpha=0.5, gamma=GAMMA, loss="logistic",  # noqa
                                        tol=1e-10, **kw)
        got = make().fit(X, y).decision_function(X)
        with monkeypatch.context() as mp:  # the same objective without the sample
            mp.setattr(fl, "_SAMPLED_FROM", 10**9)
            plain = make().fit(X, y)
        np.testing.assert_allclose(got, plain.decision_function(X), atol=1e-7)
    assert "illegal value" not in capfd.readouterr().err


def test_sample_size_keeps_the_samples_within_their_budget():
    """The k samples (``M r + r^2`` float64 each) and the heavy rows' cache (``k r / 2``
    columns of ``M``) fit ``_SAMPLE_BYTES``; the default where they do."""
    from kernelkit.ridge._falkon_logistic import _SAMPLE_BYTES, _SAMPLE_R, _sample_size

    assert _sample_size(8000, 10) == _sample_size(16000, 10) == _SAMPLE_R
    assert _sample_size(300, 10) == 300 and _sample_size(1, 3) == 1
    for m, k in ((2400, 100), (20000, 50), (50000, 10)):
        r = _sample_size(m, k)
        assert 1 <= r < _SAMPLE_R
        assert 8 * k * (m * r + r * r + m * r / 2) <= _SAMPLE_BYTES
        assert 8 * k * (m * (r + 2) * 1.5 + (r + 2) ** 2) > _SAMPLE_BYTES  # the largest


def test_shortened_step_is_not_convergence(monkeypatch):
    """A line search that cuts a step to a sliver moves the probabilities by a sliver:
    the distance is judged on the whole step, so the fit goes on (and reaches the dense
    optimum) rather than stopping there."""
    import kernelkit.ridge._falkon_logistic as fl

    calls = []
    orig = fl._line_search

    def sliver(*a):  # the fifth step only (the target penalty's second): a step of 1e-9
        t, J = orig(*a)
        calls.append(t)
        return (1e-9, J) if len(calls) == 5 else (t, J)

    monkeypatch.setattr(fl, "_line_search", sliver)
    X, y, C, w = _problem(3, n=150, m=30, seed=1)
    clf = FalkonClassifier(alpha=1e-2, centers=C, gamma=GAMMA, loss="logistic",
                           tol=1e-8).fit(X, y, sample_weight=w)
    assert len(calls) > 5
    ref = _dense_logistic(X, y, C, 1e-2, w)
    got = clf.decision_function(X)
    np.testing.assert_allclose(got - got.mean(1, keepdims=True),
                               ref - ref.mean(1, keepdims=True), atol=1e-6)
