"""The package's modules: each imports on its own, none imports another in a circle,
and importing dynagraph changes no process state (no gc hook, bounded caches)."""

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "dynagraph"
# The package's modules: its files, and its private packages (dynagraph/_roll/), each one module.
MODULES = sorted([p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"]
                 + [p.parent.name for p in PACKAGE.glob("_*/__init__.py")])


def parsed(module: str) -> ast.Module:
    """The source of ``module``: its file, or every file of a private package in one tree."""
    files = sorted((PACKAGE / module).glob("*.py")) if (PACKAGE / module).is_dir() else [PACKAGE / f"{module}.py"]
    return ast.Module(body=[s for f in files for s in ast.parse(f.read_text()).body], type_ignores=[])


def _is_type_checking(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def runtime_imports(module: str) -> set[str]:
    """The dynagraph modules ``module`` imports when it runs: anywhere in the file (a
    function's lazy import counts too), except under ``if TYPE_CHECKING:``. Inside a
    package, ``from .. import`` reads a module of dynagraph, ``from . import`` one of its own."""
    found: set[str] = set()
    top = 2 if (PACKAGE / module).is_dir() else 1
    stack: list[ast.AST] = [parsed(module)]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.ImportFrom) and node.level == top:
            if node.module:  # from .x import y
                found.add(node.module.split(".")[0])
            else:  # from . import x, y
                found.update(a.name for a in node.names if a.name in MODULES)
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            found.update(n.split(".")[1] for n in names if n.startswith("dynagraph.") and n.count(".") >= 1)
        stack.extend(c for c in ast.iter_child_nodes(node) if not (isinstance(c, ast.stmt) and _is_type_checking(c)))
    return found - {module}


def test_runtime_imports_reads_every_form_of_import():
    assert "render" in runtime_imports("graph")  # from . import _page, _picture, _transform, render
    assert "_records" in runtime_imports("graph")  # from ._records import Node
    assert "graph" not in runtime_imports("_picture")  # only under TYPE_CHECKING
    assert "_roll" in runtime_imports("_picture")  # from . import _roll (a package)
    assert runtime_imports("_roll") == {"_language", "_records"}  # its rooms' from .._records import ...


def test_no_import_circle_between_dynagraph_modules():
    graph = {m: runtime_imports(m) for m in MODULES}
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            pytest.fail("import circle: " + " -> ".join(path[path.index(module):] + [module]))
        if module in done:
            return
        for dep in sorted(graph.get(module, ())):
            visit(dep, path + [module])
        done.add(module)

    for module in MODULES:
        visit(module, [])


def test_every_module_imports_and_adds_no_gc_hook():
    code = ("import gc, importlib; before = len(gc.callbacks); "
            f"[importlib.import_module('dynagraph.' + m) for m in {MODULES!r}]; "
            "print(len(gc.callbacks) - before)")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "0"


def test_class_attribute_cache_is_bounded():
    _torch = importlib.import_module("dynagraph._torch")
    assert _torch.saved._class_attrs.cache_info().maxsize is not None


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_names_defined(tree: ast.AST) -> set[str]:
    """The private names a module defines: its functions, classes and globals, and the
    attributes its classes set on themselves (``self._x = ...``)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and \
                isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            found.add(node.attr)
    return {n for n in found if _is_private(n)}


def private_names_crossing(trees: dict[str, ast.AST]) -> list[str]:
    """``module:line name`` for each private name a module reads, writes or imports that
    another dynagraph module defines and this one does not (``rec._on_op`` in _patch,
    ``_tags._used = True``, ``from .norms import _norm``)."""
    defined = {m: private_names_defined(tree) for m, tree in trees.items()}
    found = []
    for module, tree in trees.items():
        others = set().union(*(d for m, d in defined.items() if m != module)) - defined[module]
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in others:
                found.append(f"{module}:{node.lineno} {ast.unparse(node)}")
            elif isinstance(node, ast.ImportFrom) and node.level >= 1:
                found += [f"{module}:{node.lineno} import {a.name}" for a in node.names
                          if _is_private(a.name) and a.name not in MODULES]
    return sorted(found)


def test_private_names_crossing_finds_each_form():
    trees = {"a": ast.parse("class R:\n    def __init__(self):\n        self._n = 0\n_flag = 1"),
             "b": ast.parse("from .a import _flag\nimport a\na._flag = 2\ndef f(r):\n    r._n += 1")}
    assert private_names_crossing(trees) == ["b:1 import _flag", "b:3 a._flag", "b:5 r._n"]


def test_no_private_name_crosses_modules():
    trees = {m: parsed(m) for m in MODULES}
    assert private_names_crossing(trees) == []
