"""The house rules of the package layout, checked on the source (pkgutil + ast).

* ``backend/`` evaluates kernels only: it imports no method package.
* No import circle among kernelkit's modules (module-level imports).
* Every engine-specific module imports (Numba twins of the methods' loops included).
* No module over 700 lines.
"""

import ast
import importlib
import importlib.util
import pkgutil
from pathlib import Path

import pytest

import kernelkit

ROOT = Path(kernelkit.__file__).parent
METHODS = ("ridge", "eigenpro", "leverage", "thinning", "stkr", "online", "metrics",
           "distributed")


def _modules():
    out = {"kernelkit": ROOT / "__init__.py"}
    for info in pkgutil.walk_packages([str(ROOT)], prefix="kernelkit."):
        spec = importlib.util.find_spec(info.name)
        out[info.name] = Path(spec.origin)
    return out


def _imports(name, path, top_level_only):
    """kernelkit modules imported by ``name`` (resolved, relative imports included)."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [mod] + [f"{mod}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        found.update(t for t in targets if t.startswith("kernelkit"))
    return found


MODULES = _modules()


def test_backend_imports_no_method():
    for name, path in MODULES.items():
        if not name.startswith("kernelkit.backend"):
            continue
        for imp in _imports(name, path, top_level_only=False):
            parts = imp.split(".")
            assert len(parts) < 2 or parts[1] not in METHODS, (
                f"{name} imports {imp}: backend/ must not import a method")


def test_no_import_circle():
    graph = {}
    for name, path in MODULES.items():
        deps = set()
        for imp in _imports(name, path, top_level_only=True):
            while imp and imp not in MODULES:  # "pkg.attr" -> "pkg"
                imp = imp.rpartition(".")[0]
            if imp and imp != name:
                deps.add(imp)
        graph[name] = deps
    # a package's __init__ re-exporting its own submodules is not a circle
    def edges(n):
        return [d for d in graph[n] if not (n.startswith(d + ".") and graph.get(d))]

    state = {}

    def visit(n, stack):
        state[n] = 1
        for d in edges(n):
            if state.get(d) == 1:
                cycle = stack[stack.index(d):] + [d]
                pytest.fail("import circle: " + " -> ".join(cycle))
            if d not in state:
                visit(d, stack + [d])
        state[n] = 2

    for n in graph:
        if n not in state:
            visit(n, [n])


@pytest.mark.parametrize("name", sorted(n for n in MODULES if "numba" in n or "cupy" in n))
def test_engine_specific_modules_import(name):
    if "cupy" in name:
        pytest.importorskip("cupy") if name.endswith("_cupy_only") else None
    if "numba" in name:
        pytest.importorskip("numba")
    importlib.import_module(name)


def test_no_module_over_700_lines():
    long = {n: len(p.read_text().splitlines()) for n, p in MODULES.items()}
    assert not {n: k for n, k in long.items() if k > 700}
