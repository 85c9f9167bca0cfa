"""The package's layers: each module imports only from its own layer and those above it,
the torch side and the drawing side stay apart, the drawing side never reaches torch,
only ``_torch`` reads torch's private attributes, no file is over 600 lines and no
function over 50.

Read from each module's source (its AST): imports at the top, inside functions and
under ``if TYPE_CHECKING:`` all count. Where today's code still breaks a rule, the
exception is listed below with why; each list must shrink, and an entry that is no
longer needed fails its test (so it is taken out).
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "dynagraph"

# Top first. A module may import modules of its own layer and of the layers above.
# The torch side and the drawing side are one level, beside each other: neither
# imports the other. The views and the tools beside them are one level too.
PLAIN_DATA = {"_records", "memory", "_language", "_zh", "_args"}  # records, their text, argument checks: no torch
PLATFORM = {"_torch", "_signals", "_guards", "render", "_fonts", "_settings", "_device"}  # torch's internals, interrupts, renderer, fonts, settings
TORCH_SIDE = {"_walk", "_measure", "_tags", "_source", "capture", "passes", "_patch", "_recorder", "_engine"}
DRAWING_SIDE = {"_dot", "_roll", "_transform", "_overview", "_match", "_picture", "_page", "_png", "_steps"}  # no torch
VIEWS = {"__init__", "graph", "draw", "live", "_replay", "backward", "diff", "forward", "saving", "ddp", "ddp_worker"}
BESIDE_VIEWS = {"norms", "history", "plots", "timing", "course", "exercises", "step_memory", "digits"}
LEVEL = {**dict.fromkeys(PLAIN_DATA, 0), **dict.fromkeys(PLATFORM, 1), **dict.fromkeys(TORCH_SIDE, 2),
         **dict.fromkeys(DRAWING_SIDE, 2), **dict.fromkeys(VIEWS | BESIDE_VIEWS, 3)}
# Modules that neither import torch nor reach a module that does (issue 35's list, and the data they read).
NO_TORCH = PLAIN_DATA | DRAWING_SIDE | {"graph"}

# Imports that break the layers today: (importer, imported) -> why. Must shrink.
LAYER_EXCEPTIONS: dict[tuple[str, str], str] = {}

# Modules outside _torch that read a private attribute of torch (or of its objects) today,
# with what and why. Must shrink.
PRIVATE_EXCEPTIONS = {
    "exercises": "the lessons' checks read torch's mode stacks, hook dicts and _version, and show "
                 "torch._C and torch._dynamo to learners on purpose",
}
# Private names of Python itself and of namedtuples, not torch's.
NOT_TORCH = {"_getframe", "_replace", "_asdict", "_fields"}
# Saved-tensor attributes that torch names at run time (getattr with a made-up name).
PRIVATE_PREFIXES = ("_saved_", "_raw_saved_", "_sequence_nr")

MAX_LINES = 600
# Files over MAX_LINES today -> why. Must shrink.
LONG_FILES = {
    "exercises/_zh.py": "the Chinese text of every exercise: a catalogue, one entry per message",
}


def modules() -> dict[str, list[Path]]:
    """Each module of the package -> its files (a package, such as ``_roll``, is one module)."""
    found: dict[str, list[Path]] = {p.stem: [p] for p in PACKAGE.glob("*.py")}
    for init in PACKAGE.glob("*/__init__.py"):
        found[init.parent.name] = sorted(init.parent.glob("*.py"))
    return found


MODULES = modules()


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def imports(module: str) -> tuple[set[str], bool]:
    """The dynagraph modules ``module`` imports anywhere (top level, in functions, under
    ``TYPE_CHECKING``), and whether it imports torch itself."""
    found: set[str] = set()
    torch = False
    for path in MODULES[module]:
        inside = path.parent != PACKAGE  # a file of a package: `from ..x` reads dynagraph's x
        top = 2 if inside else 1
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == top:
                found.update([node.module.split(".")[0]] if node.module else
                             [a.name for a in node.names if a.name in MODULES])
            elif (isinstance(node, ast.ImportFrom) and node.level == 0) or isinstance(node, ast.Import):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                for name in names:
                    torch |= name == "torch" or name.startswith("torch.")
                    if name == "dynagraph":
                        found.add("__init__")
                    elif name.startswith("dynagraph."):
                        found.add(name.split(".")[1])
    return found - {module}, torch


IMPORTS = {m: imports(m) for m in MODULES}


def _allowed(importer: str, imported: str) -> bool:
    if LEVEL[imported] > LEVEL[importer]:
        return False  # a lower layer
    sides = {importer in TORCH_SIDE, imported in TORCH_SIDE}
    return not (LEVEL[importer] == LEVEL[imported] == 2 and sides == {True, False})  # across the sides


def layer_breaks() -> set[tuple[str, str]]:
    return {(m, d) for m, (deps, _) in IMPORTS.items() for d in deps if not _allowed(m, d)}


def test_every_module_has_one_layer():
    groups = [PLAIN_DATA, PLATFORM, TORCH_SIDE, DRAWING_SIDE, VIEWS, BESIDE_VIEWS]
    assert sum(len(g) for g in groups) == len(set().union(*groups)), "a module listed in two layers"
    assert set(MODULES) == set(LEVEL), "place a new module in a layer (or drop a gone one)"


def test_imports_reads_every_form():
    assert "_records" in IMPORTS["_roll"][0]  # a package's `from .._records import`
    assert "memory" in IMPORTS["_records"][0]  # under TYPE_CHECKING
    assert "_language" in IMPORTS["exercises"][0]  # a subpackage's `from .._language import`
    assert {"_signals", "_records"} <= IMPORTS["_torch"][0]  # its room deep.py: `from .. import _signals`
    assert IMPORTS["live"][1] and not IMPORTS["memory"][1]
    assert not _allowed("_picture", "_patch") and not _allowed("capture", "_dot")  # across the sides
    assert not _allowed("_records", "_torch") and _allowed("live", "_recorder")


def test_each_module_imports_only_its_layer_and_those_above():
    breaks = layer_breaks()
    assert sorted(breaks - set(LAYER_EXCEPTIONS)) == []
    assert sorted(set(LAYER_EXCEPTIONS) - breaks) == [], "fixed: take it off LAYER_EXCEPTIONS"


def test_the_drawing_side_reaches_no_torch():
    """No module of :data:`NO_TORCH` imports torch, or a module that imports it, even
    through others (graph's and the page's exceptions above included)."""
    for module in sorted(NO_TORCH):
        seen, todo = set(), [module]
        while todo:
            m = todo.pop()
            if m in seen:
                continue
            seen.add(m)
            deps, torch = IMPORTS[m]
            assert not torch, f"{module} reaches torch through {m}" if m != module else f"{module} imports torch"
            todo.extend(deps)


def _private_names_defined() -> set[str]:
    """Private names dynagraph defines (functions, classes, globals, attributes it sets,
    arguments): reading these is not reading torch."""
    found: set[str] = set()
    for files in MODULES.values():
        for path in files:
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    found.add(node.name)
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    found.add(node.id)
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                    found.add(node.attr)
                elif isinstance(node, ast.arg):
                    found.add(node.arg)
                elif isinstance(node, ast.alias):
                    found.add((node.asname or node.name).split(".")[0])
    return found | set(MODULES)


def private_reads(module: str, ours: set[str]) -> list[str]:
    """``file:line text`` for each private attribute ``module`` reads that dynagraph does
    not define (``torch._C``, ``fn._saved_self``), each private torch module it imports
    (``torch.utils._python_dispatch``), and each string naming a saved-tensor attribute.

    What it cannot see: a private name that dynagraph also uses for its own (a class of
    ours with ``_parameters`` would hide ``module._parameters``), and an attribute name
    built at run time that is not one of :data:`PRIVATE_PREFIXES`.
    """
    found = []
    for path in MODULES[module]:
        where = path.relative_to(PACKAGE) if path.is_relative_to(PACKAGE) else path.name
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                receiver = node.value.id if isinstance(node.value, ast.Name) else None
                if receiver not in ("self", "cls") and node.attr not in ours and node.attr not in NOT_TORCH:
                    found.append(f"{where}:{node.lineno} {ast.unparse(node)}")
            elif isinstance(node, ast.Import | ast.ImportFrom):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                found += [f"{where}:{node.lineno} import {n}" for n in names
                          if n.split(".")[0] == "torch" and any(p.startswith("_") for p in n.split("."))]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    node.value.startswith(PRIVATE_PREFIXES):
                found.append(f"{where}:{node.lineno} {node.value!r}")
    return found


def test_private_reads_finds_each_form(tmp_path, monkeypatch):
    path = tmp_path / "m.py"
    path.write_text("import torch.utils._pytree\nn = torch._C._len_torch_function_stack()\n"
                    "s = getattr(fn, '_saved_self')\nself._mine = sys._getframe(1)\nx = ours._helper\n")
    monkeypatch.setitem(MODULES, "m", [path])
    assert sorted(private_reads("m", {"_helper"})) == [
        "m.py:1 import torch.utils._pytree", "m.py:2 torch._C", "m.py:2 torch._C._len_torch_function_stack",
        "m.py:3 '_saved_self'"]


def test_only_torch_reads_torch_private_attributes():
    ours = _private_names_defined()
    readers = {m: private_reads(m, ours) for m in MODULES if m != "_torch"}
    found = {m: r for m, r in readers.items() if r}
    assert {m: r for m, r in found.items() if m not in PRIVATE_EXCEPTIONS} == {}
    assert sorted(set(PRIVATE_EXCEPTIONS) - set(found)) == [], "fixed: take it off PRIVATE_EXCEPTIONS"
    assert private_reads("_torch", ours), "the check sees _torch's own reads (else it sees nothing)"


@pytest.mark.parametrize("path", sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")))
def test_no_file_is_over_600_lines(path):
    lines = len((PACKAGE / path).read_text().splitlines())
    if path in LONG_FILES:
        assert lines > MAX_LINES, f"{path} is {lines} lines now: take it off LONG_FILES"
    else:
        assert lines <= MAX_LINES, f"{path} is {lines} lines: split it (one idea per module)"


MAX_FUNCTION_LINES = 50


def function_lengths(source: str) -> list[tuple[str, int, int]]:
    """``(name, line, length)`` of every function in ``source``, nested ones too. The length
    counts from ``def`` to the function's last line, less its docstring."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if ast.get_docstring(node, clean=False) is not None:
                doc = node.body[0]
                length -= doc.end_lineno - doc.lineno + 1
            found.append((node.name, node.lineno, length))
    return found


def test_function_lengths_skip_the_docstring_and_count_nested_functions():
    source = 'def f(x):\n    """Doc\n    string."""\n    def g():\n        return 1\n    return g\n'
    assert sorted(function_lengths(source)) == [("f", 1, 4), ("g", 4, 2)]


def test_no_function_is_over_50_lines():
    long = [f"{path.relative_to(PACKAGE).as_posix()}:{line} {name} is {length} lines"
            for path in sorted(PACKAGE.rglob("*.py"))
            for name, line, length in function_lengths(path.read_text())
            if length > MAX_FUNCTION_LINES]
    assert not long, "split these by what they do (a named helper per concern):\n" + "\n".join(long)
