"""The benchmark scripts still run: shared helpers, imports, and a smoke run."""

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(autouse=True)
def _bench_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))


@pytest.mark.parametrize("script", sorted(p.stem for p in BENCH.glob("bench_*.py")))
def test_benchmark_scripts_import(script):
    mod = importlib.import_module(script)
    assert callable(mod.main)


def test_write_section_replaces_only_its_own(tmp_path):
    from _common import MD_HEADER, write_section

    path = tmp_path / "R.md"
    write_section(path, "## A", MD_HEADER, "## A\n\nfirst-xq\n")
    write_section(path, "## B", MD_HEADER, "## B\n\nsecond-xq\n")
    write_section(path, "## A", MD_HEADER, "## A\n\nthird-xq\n")
    text = path.read_text()
    assert text.startswith(MD_HEADER.rstrip())
    assert text.index("## A") < text.index("## B")
    assert "third-xq" in text and "second-xq" in text and "first-xq" not in text


def test_machine_line_names_versions_and_load():
    from _common import machine_info, machine_line, peak_rss_mib

    info = machine_info(peers=("not-a-package-xyz",))
    assert info["versions"]["not-a-package-xyz"] is None
    line = machine_line(info, loads=([0.1, 0, 0], [0.2, 0, 0]), timestamp="T", commit="abc")
    assert "numpy" in line and "0.10 / 0.20" in line and "busy" not in line
    busy = machine_line(info, loads=([99.0, 0, 0], [99.0, 0, 0]))
    assert "busy machine" in busy
    assert peak_rss_mib() is None or peak_rss_mib() > 10


def test_bench_kernels_smoke_run():
    out = subprocess.run([sys.executable, str(BENCH / "bench_kernels.py"), "--smoke"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "GEMM" in out.stdout and "total wall time" in out.stdout


def test_gpu_check_table_with_a_host_namespace():
    """``bench_gpu.py --check`` with array-api-strict standing in for CuPy: every row of the
    table (engine kernels, convolutional kernels, mmd, every estimator) passes against NumPy;
    without ``--xp`` and without a GPU it exits with status 2 and says why."""
    pytest.importorskip("array_api_strict")
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    out = subprocess.run([sys.executable, str(BENCH / "bench_gpu.py"), "--check", "--xp",
                          "array_api_strict"], capture_output=True, text=True, timeout=600,
                         env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    rows = [ln for ln in out.stdout.splitlines() if ln.startswith("| ")][1:]
    kinds = {ln.split("|")[1].strip() for ln in rows}
    assert {"engine", "conv", "metric", "estimator"} <= kinds
    from _xp_cases import CASES

    assert all(any(f"| {case} |" in ln for ln in rows) for case in CASES)
    assert all(ln.rstrip().endswith("| pass |") for ln in rows)
    assert f"{len(rows)} of {len(rows)} checks passed" in out.stdout


def test_gpu_check_compares_values():
    """The check's comparison sees a wrong value, a wrong shape and a wrong namespace."""
    from types import SimpleNamespace

    import numpy as np
    from _xp_cases import compare
    from gpu_check import _row

    ns = SimpleNamespace(name="numpy", device=False)
    a = np.array([1.0, 2.0, 4.0])
    assert compare(a, a + np.array([0, 0, 0.5])) == (0.5, 0.125, None)
    assert compare(a, a[:2])[1] == float("inf")
    assert compare(np.array([1, 2, 3, 4]), np.array([1, 2, 0, 4]))[2] == 0.75
    assert _row("e", "x", ns, a, a.copy(), 1e-9, 0.0)["ok"]
    assert not _row("e", "x", ns, a, a * (1 + 1e-6), 1e-9, 0.0)["ok"]
    assert not _row("e", "x", ns, a, [1.0, 2.0, 4.0], 1e-9, 0.0)["ok"]  # not in numpy


def test_array_api_bench_times_and_checks_each_namespace(monkeypatch):
    """bench_array_api on tiny data: alternating timed calls per namespace, the ratio to
    NumPy's median, results in the input's namespace and equal to NumPy's; the table."""
    pytest.importorskip("array_api_strict")
    monkeypatch.setenv("SCIPY_ARRAY_API", "1")  # scikit-learn's dispatch asks for it
    import numpy as np
    from _xp_cases import data
    from bench_array_api import bench_case, render

    cfg = {"n": 120, "n_test": 30, "repeats": 3, "scale": "tiny", "warm_n": 60}
    base = data(cfg["n"], cfg["n_test"], d=8)
    rows = bench_case("KernelRidgeClassifier (exact)", cfg, base, ["numpy", "array_api_strict"],
                      np.dtype("float64"))
    ref, strict = rows["numpy"], rows["array_api_strict"]
    assert len(ref["times"]) == len(strict["times"]) == 3
    assert ref["median_s"] == np.median(ref["times"])
    assert strict["ratio"] == strict["median_s"] / ref["median_s"]
    assert strict["follows_input"] and strict["label_agreement"] == 1.0
    assert strict["max_rel_diff"] <= 1e-12
    res = {"config": cfg, "machine": {"cpu_count": 2, "cpu_model": "cpu", "env": {}},
           "git": {"commit": "abc"}, "timestamp": "T", "loadavg_before": [0.1],
           "loadavg_after": [0.2], "versions": {"numpy": np.__version__},
           "namespaces": ["numpy", "array_api_strict"],
           "cases": {"KernelRidgeClassifier (exact)": {"float64": rows}}}
    md = render(res)
    line = next(ln for ln in md.splitlines() if ln.startswith("| KernelRidgeClassifier"))
    assert f"| {strict['ratio']:.3f} | yes |" in line
    assert ("met in 1 of 1 rows" in md) == (strict["ratio"] <= 1.10)


def test_fm60k_table_names_each_outcome():
    """bench_fm60k's table: one row per case with its call, fit time, score, peak memory,
    and the outcome as recorded (fitted with its solver, the error raised, timed out, killed)."""
    from bench_fm60k import CASES, render

    rows = [
        {"case": "rf", "call": CASES["rf"], "n": 60_000, "n_test": 10_000, "outcome": "fitted",
         "fit_s": 12.345, "accuracy": 0.84567, "peak_gb": 1.234, "memory_limit_bytes": 2**34},
        {"case": "kt", "call": CASES["kt"], "n": 60_000, "n_test": 10_000, "outcome": "fitted",
         "fit_s": 3.0, "output_size": 234, "mmd": 0.0125, "m": 8, "peak_gb": 0.9},
        {"case": "krc", "call": CASES["krc"], "n": 60_000, "n_test": 10_000, "outcome": "error",
         "error": "MemoryError: Unable to allocate 26.8 GiB", "fit_s": 9.8, "peak_gb": 1.1},
        {"case": "ntk", "call": CASES["ntk"], "outcome": "timed out", "timeout_s": 600.0},
        {"case": "iw", "call": CASES["iw"], "outcome": "killed (SIGKILL)", "wall_s": 5.0},
    ]
    res = {"timestamp": "T", "timeout_s": 600.0, "loadavg_before": [0.1, 0, 0],
           "loadavg_after": [0.2, 0, 0], "git": {"commit": "abcdef1234567"}, "rows": rows,
           "machine": {"cpu_model": "cpu", "cpu_count": 2, "memory_gib": 24.0,
                       "versions": {"numpy": "2"}, "blas_summary": []}}
    md = render(res)
    table = [ln for ln in md.splitlines() if ln.startswith("| `")]
    assert len(table) == 5
    assert table[0] == ("| `RandomFeaturesClassifier(random_state=0)` | 12.35 | 0.8457 | 1.23 | "
                        "fitted |")
    assert table[1] == ("| `KernelThinning(gamma=0.02, random_state=0)` | 3.00 | 234 points, "
                        "MMD 0.0125 | 0.90 | fitted (m 8) |")
    assert "| 9.80 |  | 1.10 | refused: `MemoryError: Unable to allocate 26.8 GiB` |" in table[2]
    assert table[3].endswith("|  |  |  | **timed out** (> 600 s) |")
    assert table[4].endswith("| **killed (SIGKILL)** |")
    assert "the first 60,000 training images" in md and "16.0-16.0 GiB" in md
