"""The README's quick-start runs as pasted."""

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def _quick_start():
    text = README.read_text()
    section = text[text.index("## Quick start"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_quick_start_runs_as_pasted(tmp_path):
    script = tmp_path / "quick_start.py"
    script.write_text(_quick_start())
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    acc = float(re.search(r"NTK ridge accuracy: ([\d.]+)", out.stdout).group(1))
    assert acc > 0.95
    assert float(re.search(r"EigenPro accuracy: ([\d.]+)", out.stdout).group(1)) > 0.9
    assert "features (1347, 200)" in out.stdout
    assert float(re.search(r"STKR, 5% labels: ([\d.]+)", out.stdout).group(1)) > 0.85
    assert float(re.search(r"KONS accuracy: ([\d.]+)", out.stdout).group(1)) > 0.9


def test_readme_commands_are_what_ci_runs():
    ci = (README.parent / ".ci" / "run").read_text()
    assert "# 2. install with the test extras" in README.read_text()
    assert "grep -A1 '^# 2\\. install with the test extras' README.md" in ci
