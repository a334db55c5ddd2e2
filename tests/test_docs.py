"""The documentation says what is true: figures come from RESULTS.md, every estimator
is on the choosing page and in the API reference, and the distributed example runs."""

import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest
from sklearn.base import BaseEstimator

import kernelkit
from kernelkit.online import RiverKONS

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "doc"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"

# A measured figure: a time, a size or a speed ratio ("4.57x"), or an accuracy / error
# written with three or four decimals.
_FIGURE = re.compile(r"(?<![\w.])(\d[\d,]*\.\d+|\d[\d,]*)\s?(?:s|GB|GiB|MiB)\b"
                     r"|(?<![\w.])(\d[\d,]*\.\d+|\d+)x\b"
                     r"|(?<![\w.])(0\.\d{3,4})\b")
# Numbers of that shape that are not measurements: settings and hypothetical sizes.
_NOT_MEASURED = {
    ("gpu.rst", "141"),          # the size of a device, in a worked memory example
    ("ridge_solvers.rst", "4096"),  # a parameter's default (cache_size, MiB)
    ("stkr.rst", "0.999"),       # values of the eta parameter
}


def _public_estimators():
    names = [n for n in kernelkit.__all__ if inspect.isclass(getattr(kernelkit, n))
             and issubclass(getattr(kernelkit, n), BaseEstimator)]
    return names + [RiverKONS.__name__]


def _documents():
    return [ROOT / "README.md"] + sorted(DOC.glob("*.rst"))


def test_every_quoted_figure_is_in_results():
    numbers = set(re.findall(r"\d[\d,]*(?:\.\d+)?", RESULTS.read_text()))
    missing = []
    for path in _documents():
        for i, line in enumerate(path.read_text().splitlines(), 1):
            line = re.sub(r"``[^`]*``|`[^`]*`", "", line)  # code: settings, not figures
            for m in _FIGURE.finditer(line):
                num = next(g for g in m.groups() if g)
                if num not in numbers and (path.name, num) not in _NOT_MEASURED:
                    missing.append(f"{path.name}:{i}: {m.group(0)!r}")
    assert not missing, "figures not found in benchmarks/RESULTS.md:\n" + "\n".join(missing)


def test_figure_pattern_finds_figures():
    found = [next(g for g in m.groups() if g) for m in _FIGURE.finditer(
        "0.9024 in 94.7 s and 5.43 GB, 2.81x; 20,000 x 20,000, tol 1e-3")]
    assert found == ["0.9024", "94.7", "5.43", "2.81"]


@pytest.mark.parametrize("page", ["choosing.rst", "api.rst"])
def test_every_estimator_is_documented(page):
    text = (DOC / page).read_text()
    absent = [n for n in _public_estimators() if not re.search(rf"\b{n}\b", text)]
    assert not absent, f"{page} does not name {absent}"


def test_user_guide_lists_every_page():
    toc = (DOC / "user_guide.rst").read_text() + (DOC / "index.rst").read_text()
    # pages marked :orphan: are outside every toctree by design (sphinx-gallery writes
    # doc/sg_execution_times.rst into the source tree when the docs are built)
    pages = {p.stem for p in DOC.glob("*.rst") if not p.read_text().lstrip().startswith(":orphan:")}
    pages -= {"index", "user_guide", "api"}
    assert not [p for p in pages if not re.search(rf"^\s+{p}$", toc, re.M)]


@pytest.mark.slow
def test_distributed_page_example_runs(tmp_path):
    text = (DOC / "distributed.rst").read_text()
    block = text[text.index(".. code-block:: python"):].split("\n\n", 1)[1]
    code = "\n".join(line[4:] for line in block.split("\nWhat it costs")[0].splitlines()
                     if line.startswith("    ") or not line.strip())
    code = code.split("\nAn estimator fitted")[0]
    script = tmp_path / "example.py"
    script.write_text(code)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    shape, dictionary, r2 = out.stdout.split()[-3:]
    assert float(r2) > 0.9 and int(dictionary) > 10


@pytest.mark.parametrize("name", _public_estimators())
def test_docstring_sections_parse(name):
    """numpydoc reads every section where it stands (a section spliced in without its
    blank line became part of the one before it)."""
    from numpydoc.docscrape import ClassDoc

    est = RiverKONS if name == "RiverKONS" else getattr(kernelkit, name)
    doc = ClassDoc(est)
    assert doc["Parameters"], name
    fields = [p.name for sec in ("Parameters", "Attributes") for p in doc[sec]]
    assert not [f for f in fields if f.strip("-") in ("", "Raises", "Examples", "Notes")]
    body = [line.strip() for p in doc["Parameters"] + doc["Attributes"] for line in p.desc]
    assert not [line for line in body if line and set(line) == {"-"}], name
