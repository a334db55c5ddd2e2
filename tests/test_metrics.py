"""kernelkit.metrics.mmd against dense closed-form computations."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.metrics.pairwise import laplacian_kernel, polynomial_kernel, rbf_kernel

import kernelkit
from kernelkit.kernels import NTK, Matern
from kernelkit.metrics import mmd


def _dense_mmd2(Kxx, Kxy, Kyy, a, b, unbiased=False):
    """MMD^2 written out from the three kernel matrices (Gretton et al. 2012, eqs. 3 and 5)."""
    a, b = a / a.sum(), b / b.sum()
    if not unbiased:
        return a @ Kxx @ a - 2 * a @ Kxy @ b + b @ Kyy @ b

    def off(K, w):  # sum over i != j, renormalised by sum_{i != j} w_i w_j
        W = np.outer(w, w)
        np.fill_diagonal(W, 0.0)
        return (W * K).sum() / W.sum()

    return off(Kxx, a) - 2 * a @ Kxy @ b + off(Kyy, b)


@pytest.fixture
def samples():
    rng = np.random.default_rng(0)
    return rng.standard_normal((60, 3)), rng.standard_normal((45, 3)) + 0.4


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("kernel, kw, dense", [
    ("rbf", {"gamma": 0.3}, lambda A, B: rbf_kernel(A, B, gamma=0.3)),
    ("laplacian", {"gamma": 0.2}, lambda A, B: laplacian_kernel(A, B, gamma=0.2)),
    ("polynomial", {"gamma": 0.5, "degree": 2, "coef0": 1.0},
     lambda A, B: polynomial_kernel(A, B, degree=2, gamma=0.5, coef0=1.0)),
])
def test_mmd_equals_dense_closed_form(samples, backend, kernel, kw, dense):
    X, Y = samples
    Kxx, Kxy, Kyy = dense(X, X), dense(X, Y), dense(Y, Y)
    rng = np.random.default_rng(1)
    a, b = rng.random(len(X)), rng.random(len(Y))
    ones_a, ones_b = np.ones(len(X)), np.ones(len(Y))
    for wa, wb in ((None, None), (a, b)):
        A = ones_a if wa is None else wa
        B = ones_b if wb is None else wb
        for unbiased in (False, True):
            ref = _dense_mmd2(Kxx, Kxy, Kyy, A, B, unbiased)
            got = mmd(X, Y, kernel=kernel, weights_X=wa, weights_Y=wb, unbiased=unbiased,
                      squared=True, backend=backend, **kw)
            assert_allclose(got, ref, rtol=1e-10, atol=1e-14)
    assert_allclose(mmd(X, Y, kernel=kernel, backend=backend, **kw),
                    np.sqrt(_dense_mmd2(Kxx, Kxy, Kyy, ones_a, ones_b)), rtol=1e-10)


def test_unbiased_uniform_is_the_u_statistic(samples):
    X, Y = samples
    n, m = len(X), len(Y)
    Kxx, Kxy, Kyy = rbf_kernel(X, gamma=0.5), rbf_kernel(X, Y, gamma=0.5), rbf_kernel(Y, gamma=0.5)
    u = ((Kxx.sum() - np.trace(Kxx)) / (n * (n - 1)) - 2 * Kxy.mean()
         + (Kyy.sum() - np.trace(Kyy)) / (m * (m - 1)))
    assert_allclose(mmd(X, Y, gamma=0.5, unbiased=True, squared=True), u, rtol=1e-12)


def test_blockwise_kernel_objects_and_callables_agree(samples):
    X, Y = samples
    ref = mmd(X, Y, kernel=Matern(0.4, 2.5), squared=True)
    with kernelkit.config_context(working_memory=1e-3):  # one row per block
        assert_allclose(mmd(X, Y, kernel=Matern(0.4, 2.5), squared=True), ref, rtol=1e-12)
        f = Matern(0.4, 2.5)
        assert_allclose(mmd(X, Y, kernel=lambda A, B: f(A, B), squared=True), ref, rtol=1e-12)
    ntk = NTK(depth=2)
    Kxx, Kxy, Kyy = ntk(X), ntk(X, Y), ntk(Y)
    n, m = np.ones(len(X)), np.ones(len(Y))
    assert_allclose(mmd(X, Y, kernel=ntk, squared=True), _dense_mmd2(Kxx, Kxy, Kyy, n, m),
                    rtol=1e-10)


def test_mmd_properties(samples):
    X, Y = samples
    assert mmd(X, X, gamma=0.3) < 1e-7  # identical samples (rounding only)
    perm = np.random.default_rng(2).permutation(len(X))
    assert_allclose(mmd(X[perm], Y, gamma=0.3), mmd(X, Y, gamma=0.3), rtol=1e-12)
    assert_allclose(mmd(Y, X, gamma=0.3), mmd(X, Y, gamma=0.3), rtol=1e-12)
    # integer weights = repeated points
    w = np.random.default_rng(3).integers(1, 4, len(X))
    assert_allclose(mmd(X, Y, weights_X=w, gamma=0.3), mmd(np.repeat(X, w, axis=0), Y,
                                                           gamma=0.3), rtol=1e-12)
    # the unbiased estimate of two samples of one distribution is near zero, either sign
    rng = np.random.default_rng(4)
    A, B = rng.standard_normal((300, 2)), rng.standard_normal((300, 2))
    assert abs(mmd(A, B, gamma=0.5, unbiased=True, squared=True)) < 5e-3
    assert mmd(A, B + 1.0, gamma=0.5, unbiased=True, squared=True) > 0.1


def test_inputs_are_not_modified(samples):
    X, Y = samples
    X0, Y0 = X.copy(), Y.copy()
    X.setflags(write=False)
    w = np.ones(len(X))
    mmd(X, Y, weights_X=w, unbiased=True)
    assert_allclose(X, X0, rtol=0)
    assert_allclose(Y, Y0, rtol=0)
    assert_allclose(w, 1.0, rtol=0)


@pytest.mark.parametrize("kwargs, match", [
    ({"X": np.array([[np.nan, 1.0]])}, "NaN"),
    ({"Y": np.array([[np.inf, 1.0]])}, "infinity"),
    ({"X": np.empty((0, 2))}, "0 sample"),
    ({"Y": np.ones((3, 3))}, "features"),
    ({"kernel": "no-such-kernel"}, "kernel"),  # sigmoid is a scikit-learn name now
    ({"kernel": "precomputed"}, "precomputed"),
    ({"gamma": -1.0}, "gamma"),
    ({"weights_X": np.ones(3)}, "weights_X"),
    ({"weights_Y": -np.ones(4)}, "weights_Y"),
    ({"weights_X": np.zeros(4)}, "weights_X"),
    ({"weights_X": np.array([1.0, 0, 0, 0]), "unbiased": True}, "single point"),
    ({"Y": None}, "Y"),
])
def test_bad_input(kwargs, match):
    args = {"X": np.ones((4, 2)) * np.arange(4)[:, None], "Y": np.ones((4, 2))}
    args.update(kwargs)
    X, Y = args.pop("X"), args.pop("Y")
    with pytest.raises(ValueError, match=match):
        mmd(X, Y, **args)


def test_an_overflowing_sample_is_named():
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((50, 3)), rng.standard_normal((50, 3))
    for name, A in (("X", X), ("Y", Y)):
        A = A.copy()
        A[4] = 1e200
        args = (A, Y) if name == "X" else (X, A)
        with pytest.raises(ValueError, match=f"^{name} has values too large"):
            mmd(*args)


def test_a_kernel_that_is_not_psd_is_an_error_not_a_negative_mmd():
    """-rbf gave MMD 0 between different samples (the square root of a negative MMD^2)
    and a negative MMD^2 with squared=True."""
    from sklearn.metrics.pairwise import rbf_kernel

    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((200, 2)), rng.standard_normal((150, 2)) + 0.5
    for squared in (False, True):
        with pytest.raises(ValueError, match="not positive semi-definite"):
            mmd(X, Y, kernel=lambda a, b: -rbf_kernel(a, b), squared=squared)
    assert mmd(X, X) == 0.0 and mmd(X, Y) > 0.1
