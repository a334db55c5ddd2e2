"""One progress convention for every long fit: verbose=0 silent, >= 1 lines "[Name] ..."."""

import numpy as np
import pytest

from kernelkit import (
    SQUEAK,
    EigenProRegressor,
    FalkonRegressor,
    KernelRidge,
    KernelThinning,
    KONSRegressor,
    STKRRegressor,
)
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
