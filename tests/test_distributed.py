"""Kernel products and EigenPro on a Dask LocalCluster started by the tests."""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.base import clone

distributed = pytest.importorskip("distributed")

from kernelkit.distributed import DaskKernelOperator, kernel_matmul  # noqa: E402
from kernelkit.eigenpro import EigenProClassifier, EigenProRegressor  # noqa: E402
from kernelkit.eigenpro._solver import LocalOperator  # noqa: E402
from kernelkit.kernels import NTK, RBF, KernelOperator, Matern  # noqa: E402


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        with distributed.Client(cluster) as c:
            yield c


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 6))
    Y = np.column_stack([np.sin(X[:, 0]) + X[:, 1] * X[:, 2], np.cos(X[:, 3])])
    return X, Y + 0.05 * rng.standard_normal(Y.shape), rng.standard_normal((50, 6))


@pytest.mark.parametrize("kernel", [RBF(0.3), NTK(depth=2, b_std=0.1), Matern(0.2, 1.5)],
                         ids=repr)
def test_kernel_matmul_equals_local_product(client, data, kernel):
    X, Y, Xt = data
    for W in (Y, Y[:, 0]):
        local = kernel(Xt, X) @ W
        for n_chunks in (None, 3):
            got = kernel_matmul(client, kernel, Xt, X, W, n_chunks=n_chunks)
            assert got.shape == local.shape
            assert_allclose(got, local, rtol=1e-12, atol=1e-12)
    by_name = kernel_matmul(client.scheduler.address, "rbf", Xt, X, Y,
                            kernel_params={"gamma": 0.3})
    assert_allclose(by_name, RBF(0.3)(Xt, X) @ Y, rtol=1e-12)


def test_operator_products_equal_local_ones(client, data):
    X, Y, Xt = data
    ev = KernelOperator(RBF(0.3), 6, "numba")
    local = LocalOperator(ev, X, np.float64)
    dask_op = DaskKernelOperator(client, ev, X, np.float64, n_chunks=3)
    try:
        J = np.array([0, 5, 133, 134, 399])
        hl, hd = local.prepare(Xt), dask_op.prepare(Xt)
        assert_allclose(dask_op.matmul(hd, Y), local.matmul(hl, Y), rtol=1e-12)
        assert_allclose(dask_op.columns(hd, J), local.columns(hl, J), rtol=1e-12)
        assert_allclose(dask_op.rmatmul(hd, Y[:50]), local.rmatmul(hl, Y[:50]), rtol=1e-12)
        assert_allclose(dask_op.forward(Xt, Y), local.forward(Xt, Y), rtol=1e-12)
        dask_op.release(hd)
    finally:
        dask_op.close()


@pytest.mark.parametrize("n_centers", [None, 120])
def test_eigenpro_on_the_cluster_equals_local_fit(client, data, n_centers):
    X, Y, Xt = data
    kw = dict(n_centers=n_centers, gamma=0.3, alpha=0.1, max_iter=3, tol=None,
              dtype="float64", random_state=0)
    local = EigenProRegressor(**kw).fit(X, Y)
    remote = EigenProRegressor(client=client, **kw).fit(X, Y)
    assert remote.batch_size_ == local.batch_size_ and remote.eta_ == local.eta_
    assert_allclose(remote.dual_coef_, local.dual_coef_, rtol=1e-9, atol=1e-12)
    assert_allclose(remote.predict(Xt), local.predict(Xt), rtol=1e-9, atol=1e-12)


def test_address_string_clones_pickles_and_classifies(client, data):
    X, Y, Xt = data
    y = (Y[:, 0] > 0).astype(int)
    clf = EigenProClassifier(client=client.scheduler.address, gamma=0.3, max_iter=3, tol=None,
                             random_state=0)
    clf2 = pickle.loads(pickle.dumps(clone(clf)))
    clf2.fit(X, y)
    local = EigenProClassifier(gamma=0.3, max_iter=3, tol=None, random_state=0).fit(X, y)
    # float32 iterations: the cluster sums the chunks' products in another order
    assert_allclose(clf2.decision_function(Xt), local.decision_function(Xt), rtol=1e-4,
                    atol=1e-5)
    assert clf2.score(X, y) > 0.9


def test_bad_clients_and_arrays(client, data, monkeypatch):
    import kernelkit.distributed._operator

    monkeypatch.setattr(kernelkit.distributed._operator, "CONNECT_TIMEOUT", "1s")
    X, Y, Xt = data
    with pytest.raises(ValueError, match="client must be None"):
        kernel_matmul(42, RBF(), Xt, X, Y)
    with pytest.raises(ValueError, match="client must be None"):
        EigenProRegressor(client=[client], max_iter=1).fit(X, Y)
    with pytest.raises(ValueError, match="W must have shape"):
        kernel_matmul(client, RBF(), Xt, X, Y[:10])
    with pytest.raises(ValueError, match="W contains NaN"):
        kernel_matmul(client, RBF(), Xt, X, np.full(len(X), np.nan))
    with pytest.raises(ValueError, match="Y has 3 features but X has 6"):
        kernel_matmul(client, RBF(), Xt, X[:, :3], Y)
    with pytest.raises(ValueError, match="could not connect"):
        EigenProRegressor(client="tcp://127.0.0.1:9", max_iter=1).fit(X, Y)


@pytest.mark.slow
def test_process_workers_serialise_the_tasks(data):
    """Workers in separate processes: every task and block travels pickled."""
    X, Y, Xt = data
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        with distributed.Client(cluster) as c:
            kw = dict(n_centers=100, kernel=NTK(depth=2), max_iter=2, tol=None,
                      dtype="float64", random_state=0)
            local = EigenProRegressor(**kw).fit(X, Y)
            remote = EigenProRegressor(client=c, **kw).fit(X, Y)
            assert_allclose(remote.predict(Xt), local.predict(Xt), rtol=1e-9, atol=1e-12)


def test_falkon_takes_a_scheduler_address_and_rejects_bad_clients(client, data):
    from kernelkit import FalkonRegressor

    X, Y, Xt = data
    params = dict(gamma=0.3, n_centers=60, tol=1e-10, random_state=0)
    by_client = FalkonRegressor(client=client, **params).fit(X, Y)
    by_address = pickle.loads(pickle.dumps(clone(
        FalkonRegressor(client=client.scheduler.address, **params)))).fit(X, Y)
    assert_allclose(by_address.predict(Xt), by_client.predict(Xt), rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="client must be None"):
        FalkonRegressor(client=123).fit(X, Y)


@pytest.mark.filterwarnings("ignore:Port .* is already in use")  # a second cluster's dashboard
def test_a_closed_client_is_a_clear_error(data):
    from kernelkit import FalkonRegressor, SQUEAK
    from kernelkit.distributed import fit_disqueak

    X, Y, Xt = data
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        closed = distributed.Client(cluster)
        closed.close()
        for call in (lambda: FalkonRegressor(client=closed, n_centers=20).fit(X, Y),
                     lambda: EigenProRegressor(client=closed, max_iter=1).fit(X, Y),
                     lambda: kernel_matmul(closed, RBF(), Xt, X, Y),
                     lambda: fit_disqueak(SQUEAK(), X, client=closed)):
            with pytest.raises(ValueError, match="not usable"):
                call()
