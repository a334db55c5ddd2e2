"""Bad input gets a clear ValueError naming the argument."""

import numpy as np
import pytest

import kernelkit as kk
from kernelkit import KernelRidge, NTKRidge, NTKRidgeClassifier
from kernelkit.kernels import NNGP, NTK, RBF, Laplacian, Matern, Polynomial, make_kernel

X = np.random.default_rng(0).standard_normal((10, 3))
y = np.arange(10.0)


@pytest.mark.parametrize("bad, match", [
    (np.array([[1.0, np.nan]]), "NaN"),
    (np.array([[1.0, np.inf]]), "infinity"),
    (np.empty((0, 3)), "0 sample"),
    (np.empty((3, 0)), "0 feature"),
    (np.ones(3), "2D array"),
])
def test_kernel_call_rejects_bad_arrays(bad, match):
    for k in (RBF(), NTK()):
        with pytest.raises(ValueError, match=match):
            k(bad)
        with pytest.raises(ValueError, match=match):
            k(X[:, : bad.shape[-1]] if bad.ndim == 2 and bad.shape[1] else X, bad)


def test_feature_mismatch_and_parameters():
    with pytest.raises(ValueError, match="Y has 2 features but X has 3"):
        RBF()(X, X[:, :2])
    for k, match in [(RBF(gamma=0), "gamma"), (RBF(gamma=-1.0), "gamma"),
                     (Laplacian(gamma=np.nan), "gamma"), (Matern(nu=1.0), "nu"),
                     (Polynomial(degree=-1), "degree"), (NTK(depth=0), "depth"),
                     (NTK(depth=1.5), "depth"), (NNGP(activation="tanh"), "activation"),
                     (NTK(w_std=0), "w_std"), (NTK(b_std=-0.1), "b_std"),
                     (NTK(parameterization="standard"), "parameterization")]:
        with pytest.raises(ValueError, match=match):
            k(X)


def test_estimators_reject_bad_input():
    with pytest.raises(ValueError, match="1 sample"):
        NTKRidge().fit(X[:1], y[:1])
    with pytest.raises(ValueError, match="NaN"):
        NTKRidge().fit(np.where(X > 1, np.nan, X), y)
    with pytest.raises(ValueError, match="NaN"):
        NTKRidge().fit(X, np.where(y > 5, np.nan, y))
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        NTKRidge().fit(X, y[:5])
    with pytest.raises(ValueError, match="alpha"):
        NTKRidge(alpha=-1).fit(X, y)
    with pytest.raises(ValueError, match="depth"):
        NTKRidge(depth=0).fit(X, y)
    with pytest.raises(ValueError, match="activation"):
        NTKRidgeClassifier(activation="sigmoid").fit(X, y > 4)
    with pytest.raises(ValueError, match="backend"):
        NTKRidge(backend="jax").fit(X, y)
    with pytest.raises(ValueError, match="kernel must be one of"):
        KernelRidge(kernel="sinc").fit(X, y)
    with pytest.raises(ValueError, match="kernel_params"):
        KernelRidge(kernel="rbf", kernel_params={"nu": 1.5}).fit(X, y)
    with pytest.raises(ValueError, match="square"):
        KernelRidge(kernel="precomputed").fit(X, y)
    model = NTKRidge().fit(X, y)
    with pytest.raises(ValueError, match="3 features"):
        model.predict(X[:, :2])
    with pytest.raises(ValueError, match="kernel must be"):
        make_kernel(3)


def test_bad_input_leaves_user_arrays_alone():
    Xn = X.copy()
    Xn[0, 0] = np.nan
    before = Xn.copy()
    with pytest.raises(ValueError):
        NTKRidge().fit(Xn, y)
    np.testing.assert_array_equal(Xn, before)


def test_overflowing_inputs_and_negative_weights_are_named():
    big = X * 1e160
    for k in (NTK(), RBF(), Polynomial()):
        with pytest.raises(ValueError, match="X has values too large"):
            k(big)
        with pytest.raises(ValueError, match="Y has values too large"):
            k(X, big)
    with pytest.raises(ValueError, match="Negative values in data passed to `sample_weight`"):
        NTKRidge().fit(X, y, sample_weight=np.linspace(-1, 1, 10))


def test_overflow_check_uses_actual_norms():
    A = np.ones((3, 1000))
    A[0, 0] = 1e153  # |a|^2 = 1e306: representable
    assert np.all(np.isfinite(RBF()(A)))
    with pytest.raises(ValueError, match="X has values too large"):
        NTK().diag(X * 1e200)


@pytest.mark.parametrize("params, match", [
    ({"alpha": True}, "alpha"), ({"alpha": 1j}, "alpha"), ({"alpha": "1"}, "alpha")])
def test_alpha_types(params, match):
    with pytest.raises(ValueError, match=match):
        NTKRidge(**params).fit(X, y)


def test_parameter_types_are_named():
    with pytest.raises(ValueError, match="nu"):
        Matern(nu=np.array([1.5, 2.5]))(X)
    with pytest.raises(ValueError, match="activation"):
        NTK(activation=np.array(["relu"]))(X)
    with pytest.raises(ValueError, match="working_memory"):
        import kernelkit

        kernelkit.set_config(working_memory=1e303)


def test_non_finite_kernel_matrix_is_an_error_in_fit():
    with pytest.raises(ValueError, match="NaN or infinite"):
        KernelRidge(kernel="poly", degree=0.5, coef0=-5).fit(X, y)


@pytest.mark.parametrize("make, match", [
    (lambda: kk.KernelRidgeClassifier(kernel_params=5), "kernel_params must be None or a dict"),
    (lambda: kk.KernelRidgeClassifierCV(kernel_params="nu"), "kernel_params must be None"),
    (lambda: kk.FalkonClassifier(kernel_params=[("nu", 1.5)]), "kernel_params must be None"),
    (lambda: kk.EigenProClassifier(kernel_params=5), "kernel_params must be None"),
    (lambda: kk.KONSClassifier(kernel_params=5), "kernel_params must be None"),
    (lambda: kk.FalkonClassifier(centers=None), r"centers must be one of .* got None"),
    (lambda: kk.FalkonClassifier(centers=10), r"centers must be one of .* got 10"),
    (lambda: kk.FalkonClassifier(centers=np.zeros(3)), r"centers must be one of"),
    (lambda: kk.KONSClassifier(method=["kons"]), r"method must be one of"),
    (lambda: kk.KONSClassifier(loss=["squared"]), r"loss must be one of"),
    (lambda: kk.KONSClassifier(forgetting=["discount"]), r"forgetting must be None"),
    (lambda: kk.KernelRidgeClassifier(kernel="sigmoid", gamma="x"),
     r"gamma of kernel 'sigmoid' must be a finite number"),
    (lambda: kk.KernelRidgeClassifier(kernel="sigmoid", coef0=np.inf), r"coef0 of kernel"),
    (lambda: kk.KernelRidgeClassifier(kernel="chi2", gamma=np.nan), r"gamma of kernel 'chi2'"),
])
def test_bad_parameter_of_any_type_is_a_value_error_naming_it(make, match):
    """Parameters of the wrong type (a number or list where a dict or name belongs, a
    scikit-learn kernel's non-finite gamma) are named, not a TypeError from inside."""
    Xc, yc = np.abs(X), (y > np.median(y)).astype(int)
    with pytest.raises(ValueError, match=match):
        make().fit(Xc, yc)


@pytest.mark.parametrize("name", ["chi2", "additive_chi2"])
def test_sparse_input_to_a_dense_only_scikit_learn_kernel_is_a_clear_type_error(name):
    import scipy.sparse as sp

    Xs = sp.random(30, 5, density=0.5, format="csr", random_state=0)
    with pytest.raises(TypeError, match=f"kernel='{name}' needs dense X"):
        KernelRidge(kernel=name).fit(Xs, np.arange(30.0))
    KernelRidge(kernel=name).fit(Xs.toarray(), np.arange(30.0))  # dense: fine
    KernelRidge(kernel="sigmoid").fit(Xs, np.arange(30.0))  # sparse-capable: fine
