"""One progress convention for every long fit: verbose=0 silent, >= 1 lines "[Name] ..."."""

import numpy as np
import pytest

from kernelkit import (
    SQUEAK,
    EigenProClassifier,
    EigenProRegressor,
    FalkonClassifier,
    FalkonRegressor,
    KernelRidge,
    KernelRidgeClassifierCV,
    KernelRidgeCV,
    KernelThinning,
    KONSRegressor,
    STKRRegressor,
)
from kernelkit.backend._numpy import NumpyBackend
from kernelkit.kernels._resolve import KernelOperator
from kernelkit.leverage import RLSNystroem
from kernelkit.ridge._cv_grid import KernelGrid
from kernelkit.stkr._base import _STKRBase
from kernelkit.thinning import _estimator as kt_module
from kernelkit.utils import _verbose
from kernelkit.utils._verbose import Progress, check_verbose

rng = np.random.default_rng(0)
X = rng.standard_normal((600, 3))
y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(600)
y_semi = np.where(np.arange(600) % 10 == 0, y, np.nan)

CASES = [
    (SQUEAK(random_state=0), (X,)),
    (KernelThinning(gamma=0.5, compress="compress++", random_state=0), (X[:512],)),
    (EigenProRegressor(gamma=0.5, max_iter=2, tol=None, random_state=0), (X, y)),
    (KernelRidge(kernel="rbf", gamma=0.5, alpha=0.1, solver="pcg", random_state=0), (X, y)),
    (FalkonRegressor(n_centers=50, gamma=0.5, alpha=0.1, random_state=0), (X, y)),
    (STKRRegressor(), (X, y_semi)),
    (KONSRegressor(gamma=0.5, random_state=0), (X, y)),
    (EigenProClassifier(gamma=0.5, n_centers=100, max_iter=2, tol=None, random_state=0),
     (X, y > 0)),
    (FalkonRegressor(n_centers=50, centers="rls", gamma=0.5, alpha=0.1, random_state=0), (X, y)),
    (FalkonClassifier(n_centers=50, loss="logistic", gamma=0.5, alpha=0.1, random_state=0),
     (X, y > 0)),
    (KernelRidge(kernel="rbf", gamma=0.5, alpha=0.1, solver="auto", random_state=0), (X, y)),
    (KernelRidge(kernel="rbf", gamma=0.5, alpha=0.1, solver="auto", random_state=0),
     (np.vstack([X, X + 0.01]), np.concatenate([y, y]))),  # n >= 1024: the cost model
    (KernelRidge(kernel="rbf", gamma=0.5, alpha=0.1), (X, y)),
    (RLSNystroem(gamma=0.5, n_components=50, random_state=0), (X,)),
    (KernelThinning(gamma=0.5, random_state=0), (X[:512],)),
    (KernelRidgeCV(kernel="rbf", param_grid={"gamma": [0.1, 0.5]}), (X, y)),
    (KernelRidgeCV(kernel="rbf", gamma=0.5, solver="nystrom", n_centers=50, random_state=0),
     (X, y)),
    (KernelRidgeClassifierCV(kernel="rbf", gamma=0.5, cv=3), (X, y > 0)),
]


@pytest.mark.parametrize("est,args", CASES, ids=lambda c: type(c).__name__)
def test_verbose_levels(est, args, capsys):
    est.set_params(verbose=0).fit(*args)
    assert capsys.readouterr().out == ""
    est.set_params(verbose=1).fit(*args)
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(line.startswith(f"[{type(est).__name__}] ") for line in lines)
    est.set_params(verbose=2).fit(*args)
    assert len(capsys.readouterr().out.splitlines()) >= len(lines)


def test_progress_helper_format_and_validation(capsys):
    p = Progress("Est", 1)
    p("epoch", 2, 10, loss=0.123456, n=3)
    p("inner", level=2, x=1)
    assert capsys.readouterr().out == "[Est] epoch 2/10: loss=0.1235, n=3\n"
    assert check_verbose(True) == 1
    for bad in (-1, 1.5, "2"):
        with pytest.raises(ValueError, match="verbose"):
            check_verbose(bad)


def _expensive_steps(monkeypatch, events):
    """Wrap the first costly step of every fit (kernel evaluations on the engine, and
    the steps that evaluate kernels outside it) to log ``"work"``; printed progress
    lines log ``"line"``."""
    real_call = Progress.__call__

    def call(self, what, step=None, total=None, level=1, **values):
        if self.verbose >= level:
            events.append("line")
        return real_call(self, what, step, total, level, **values)

    monkeypatch.setattr(_verbose.Progress, "__call__", call)
    targets = [(KernelOperator, "block"), (KernelOperator, "matmul"), (KernelOperator, "diag"),
               (NumpyBackend, "pairwise"), (NumpyBackend, "matmul"), (KernelGrid, "matrix"),
               (KernelGrid, "cross"),
               (_STKRBase, "_train_operator"), (kt_module, "_kt"), (kt_module, "_compress")]
    for owner, name in targets:
        real = getattr(owner, name)

        def wrapped(*args, _real=real, **kwargs):
            events.append("work")
            return _real(*args, **kwargs)

        monkeypatch.setattr(owner, name, wrapped)


@pytest.mark.parametrize("est,args", CASES, ids=lambda c: type(c).__name__)
def test_first_line_comes_before_the_first_expensive_step(est, args, monkeypatch, capsys):
    events = []
    _expensive_steps(monkeypatch, events)
    est.set_params(verbose=1).fit(*args)
    out = capsys.readouterr().out.splitlines()
    assert "work" in events  # the wrapped steps are the fit's (the check can fail)
    assert events[0] == "line", out
    assert out[0].startswith(f"[{type(est).__name__}] ")
    # one line per stage after the plan: at least one reports its time
    assert any(" done in " in line for line in out), out
    events.clear()
    est.set_params(verbose=0).fit(*args)
    assert "line" not in events and "work" in events
    assert capsys.readouterr().out == ""


@pytest.mark.usefixtures("auto_model_from_1024")
def test_auto_solver_says_what_it_chose_and_why(capsys):
    KernelRidge(kernel="rbf", gamma=0.5, alpha=0.1, verbose=1).fit(X, y)
    first = capsys.readouterr().out.splitlines()[0]
    assert "solver cholesky (auto: n < 1024)" in first
    Xb, yb = np.vstack([X, X + 0.01]), np.concatenate([y, y])
    KernelRidge(kernel="rbf", gamma=0.5, alpha=0.1, verbose=1).fit(Xb, yb)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("[KernelRidge] solver auto, n=1200")
    chose = [line for line in lines if line.startswith("[KernelRidge] solver auto: ")]
    assert len(chose) == 1 and "choice=" in chose[0] and "cholesky_s=" in chose[0]


def test_eigenpro_first_line_states_the_setup(capsys):
    EigenProRegressor(gamma=0.5, max_iter=2, tol=None, subsample_size=300, n_components=20,
                      batch_size=64, random_state=0, verbose=1).fit(X, y)
    lines = capsys.readouterr().out.splitlines()
    # first what it is about to do (before any copy of X), then the setup's plan
    assert lines[0].startswith("[EigenProRegressor] n=600, d=3, 1 target(s): the validation")
    assert lines[1].startswith("[EigenProRegressor] ep2: n=600, d=3, 600 centers;")
    assert "from s=300 rows" in lines[1] and "q=20" in lines[1] and "batch=64" in lines[1]
    setup = [line for line in lines if " setup done in " in line]
    assert len(setup) == 1 and "up to 2 of 10 batches of 64" in setup[0]
    assert sum(" epoch " in line for line in lines) == 2


def test_cv_search_plan_and_one_line_per_kernel(capsys):
    KernelRidgeCV(kernel="rbf", param_grid={"gamma": [0.1, 0.2, 0.5]}, verbose=1).fit(X, y)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("[KernelRidgeCV] n=600, d=3, solver exact: 3 grid point(s);")
    assert [line.split(" done in ")[0] for line in lines[1:]] == [
        f"[KernelRidgeCV] kernel {k}" for k in (1, 2, 3)]
    assert "gamma=0.2, best_score=" in lines[2]
    with pytest.raises(ValueError, match="verbose"):
        KernelRidgeCV(verbose=-1).fit(X, y)
