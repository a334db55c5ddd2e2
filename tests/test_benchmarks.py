"""The benchmark scripts still run: shared helpers, imports, and a smoke run."""

import importlib
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
