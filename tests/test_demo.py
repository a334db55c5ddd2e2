"""The command-line demo runs end to end on bundled data."""

from kernelkit import _demo
from kernelkit.__main__ import main
from kernelkit._demo import run_demo


def test_demo_on_breast_cancer(monkeypatch):
    fits = []  # every warm-up, in order
    real = _demo._warm_up

    def spy(est, X, y, task):
        fits.append(("warm-up", type(est).__name__))
        return real(est, X, y, task)

    monkeypatch.setattr(_demo, "_warm_up", spy)
    lines = []
    rows = run_demo(["breast_cancer"], out=lines.append)
    assert {r["model"] for r in rows} >= {"kernelkit NTKRidgeClassifier",
                                          "sklearn SVC (rbf)"}
    ntk = next(r for r in rows if r["model"] == "kernelkit NTKRidgeClassifier")
    assert ntk["test_score"] > 0.93
    assert len(lines) == 3 + len(rows)
    # every model is warmed up once before its timed fit; both times are reported
    assert len(fits) == len(rows)
    assert all(r["warmup_s"] >= 0 and r["fit_time_s"] >= 0 for r in rows)
    assert "warm-up (s)" in lines[1] and "warm:" in lines[0]
    assert all(line.split()[-1] == f"{r['warmup_s']:.2f}" for line, r in zip(lines[3:], rows,
                                                                              strict=True))


def test_warm_up_slice_is_small_and_stratified():
    import numpy as np

    X = np.random.default_rng(0).standard_normal((300, 3))
    y = np.repeat(np.arange(10), 30)
    seen = {}

    class Spy:
        def get_params(self, deep=False):
            return {}

        def set_params(self, **p):
            return self

        def fit(self, X, y):
            seen["n"], seen["classes"] = len(X), len(set(y))
            return self

    _demo._warm_up(Spy(), X, y, "classification")
    assert seen == {"n": _demo.WARMUP_ROWS, "classes": 10}


def test_info_command(capsys):
    assert main(["info"]) == 0
    assert "usable backends: numpy, numba" in capsys.readouterr().out
