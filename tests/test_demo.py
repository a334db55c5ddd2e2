"""The command-line demo runs end to end on bundled data."""

from kernelkit.__main__ import main
from kernelkit._demo import run_demo


def test_demo_on_breast_cancer():
    lines = []
    rows = run_demo(["breast_cancer"], out=lines.append)
    assert {r["model"] for r in rows} >= {"kernelkit NTKRidgeClassifier",
                                          "sklearn SVC (rbf)"}
    ntk = next(r for r in rows if r["model"] == "kernelkit NTKRidgeClassifier")
    assert ntk["test_score"] > 0.93
    assert len(lines) == 3 + len(rows)


def test_info_command(capsys):
    assert main(["info"]) == 0
    assert "usable backends: numpy, numba" in capsys.readouterr().out
