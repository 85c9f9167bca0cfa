"""Where a line of user code is: a file and line, or a Jupyter cell named in words a
learner recognises ("this cell", "cell defining Net"), the same on every run."""

from __future__ import annotations

import json
import linecache
import os
from pathlib import Path

import pytest

import dynagraph as dg
from dynagraph import _source

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def cells():
    """Put cells' code in linecache under cell-shaped file names, as IPython does;
    yield a function that adds one and returns its name; remove them after."""
    names = []

    def add(text: str, name: str | None = None) -> str:
        name = name or f"ipykernel_4242/{1000 + len(names)}.py"  # the shape of a cell's file name
        linecache.cache[name] = (len(text), None, text.splitlines(True), name)
        names.append(name)
        return name

    yield add
    for name in names:
        linecache.cache.pop(name, None)


def _run_as_cell(name: str, text: str, scope: dict) -> None:
    """Run ``text`` as the kernel runs a cell: its code's file name is the cell's."""
    exec(compile(text, name, "exec"), scope)


def _line_of(text: str, code: str) -> int:
    """The number (from 1) of the line of ``text`` that is ``code`` without its indent."""
    return [line.strip() for line in text.splitlines()].index(code) + 1


NET = "import torch\n\n@torch.no_grad()\ndef unused():\n    pass\n\nclass Net:\n    def forward(self, x):\n" \
      "        return x * 2\n\ndouble = lambda x: x * 2\n"


def test_a_line_in_the_cell_being_run_is_this_cell(cells):
    text = "def f():\n    return describe(*where())\n\nfound = f()\n"
    name = cells(text)
    scope = {"describe": _source.describe, "where": lambda: (name, 2)}
    _run_as_cell(name, text, scope)
    assert scope["found"] == ("this cell, line 2", "return describe(*where())")


def test_a_line_in_another_cell_is_named_by_what_holds_it(cells):
    """Another cell is named by the function or class that holds the line, or else
    called "another cell"; the line number counts from the cell's first line."""
    earlier = cells(NET)
    running = "found = [describe(earlier, n) for n in lines]\n"
    lines = [_line_of(NET, "return x * 2"), _line_of(NET, "@torch.no_grad()"),
             _line_of(NET, "double = lambda x: x * 2"), _line_of(NET, "import torch")]
    scope = {"describe": _source.describe, "earlier": earlier, "lines": lines}
    _run_as_cell(cells(running), running, scope)
    assert scope["found"] == [(f"cell defining Net, line {lines[0]}", "return x * 2"),
                              (f"cell defining unused, line {lines[1]}", "@torch.no_grad()"),
                              (f"another cell, line {lines[2]}", "double = lambda x: x * 2"),
                              (f"another cell, line {lines[3]}", "import torch")]


@pytest.fixture
def chinese():
    dg.set_language("zh")
    yield
    dg.set_language("en")


def test_where_stays_english_and_shows_in_chinese(cells, chinese):
    """``where`` is data a notebook may test (``.endswith(", line 3")``), the same in every
    language; :func:`_source.shown` gives the words a learner reads."""
    earlier = cells(NET)
    running = "found = [describe(earlier, n) for n in lines]\n"
    lines = [_line_of(NET, "return x * 2"), _line_of(NET, "import torch")]
    scope = {"describe": _source.describe, "earlier": earlier, "lines": lines}
    _run_as_cell(cells(running), running, scope)
    (net, _), (other, _) = scope["found"]
    assert (net, other) == (f"cell defining Net, line {lines[0]}", f"another cell, line {lines[1]}")
    assert _source.shown(net) == f"定义 Net 的单元格，第 {lines[0]} 行"
    assert _source.shown(other) == f"另一个单元格，第 {lines[1]} 行"
    assert _source.shown("this cell, line 12") == "本单元格，第 12 行"
    assert _source.shown("model.py:12") == "model.py:12" and _source.shown("?") == "?"  # files: as they are
    dg.set_language("en")
    assert _source.shown(net) == net


def test_a_function_from_another_cell_is_not_this_cell(cells):
    """The cell being run is the outermost cell on the stack, not the cell whose
    function called the op (it is above the running cell)."""
    earlier_text = "def helper():\n    return describe(*where())\n"
    earlier = cells(earlier_text)
    scope = {"describe": _source.describe, "where": lambda: (earlier, 2)}
    _run_as_cell(earlier, earlier_text, scope)  # the cell that defines helper runs first
    running = "found = helper()\n"
    _run_as_cell(cells(running), running, scope)
    assert scope["found"] == ("cell defining helper, line 2", "return describe(*where())")


def test_the_outermost_definition_names_the_line(cells):
    """A method of a class defined inside an ``if`` is named by that class."""
    text = "if True:\n    class Outer:\n        class Inner:\n            def f(self):\n                return 1\n"
    assert _source.describe(cells(text), 5) == ("cell defining Outer, line 5", "return 1")


def test_no_cell_running_still_names_a_cell_by_what_it_defines(cells):
    """On a thread (no cell on its call stack) every cell is another cell."""
    name = cells(NET)
    assert _source.describe(name, _line_of(NET, "return x * 2"))[0].startswith("cell defining Net, line ")


def test_a_cell_whose_cached_code_does_not_parse_is_another_cell(cells):
    name = cells("def f(:\n    return 1\n")
    assert _source.describe(name, 2) == ("another cell, line 2", "return 1")


def test_a_terminal_ipython_cell_is_a_cell(cells):
    from IPython.core.compilerop import code_name

    name = cells("def g():\n    return 1\n", code_name("def g():\n    return 1\n", 5))  # <ipython-input-5-…>
    assert _source.describe(name, 2)[0] == "cell defining g, line 2"


def test_a_file_is_named_by_its_base_name_and_line():
    where, code = _source.describe(__file__, 1)
    assert where == "test_source.py:1"
    assert code == Path(__file__).read_text().splitlines()[0].strip()


def test_no_line_is_a_question_mark():
    assert _source.describe(None, None) == ("?", "")


# A real kernel, run as nbval runs a notebook (without history) and as a notebook
# run top to bottom does (with history, which numbers the cells).
KERNEL_CELLS = [
    "import json, sys\nimport torch\nimport dynagraph as dg\n",
    "class Twice(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n",
    "net = Twice()\nx = torch.tensor([1.0], requires_grad=True)\nwith dg.live(net) as rec:\n"
    "    y = net(x) + 1\n"
    "counts = get_ipython().compile._filename_map\n"
    "print(json.dumps({'steps': [[s.op, s.where, s.code] for s in rec.steps], 'repr': repr(rec),\n"
    "                  'counts': [counts.get(Twice.forward.__code__.co_filename),\n"
    "                             counts.get(sys._getframe().f_code.co_filename)]}))\n",
]


def _run_kernel(store_history: bool, ipython_dir: Path) -> dict:
    """Run KERNEL_CELLS in a fresh kernel; the last cell's printed JSON."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", cwd=str(ROOT),
                              env={**os.environ, "IPYTHONDIR": str(ipython_dir)})
    try:
        printed = ""
        for code in KERNEL_CELLS:
            msg_id = kc.execute(code, store_history=store_history)
            while True:
                msg = kc.get_iopub_msg(timeout=60)
                if msg["parent_header"].get("msg_id") != msg_id:
                    continue
                if msg["msg_type"] == "error":
                    raise AssertionError("\n".join(msg["content"]["traceback"]))
                if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
                    printed += msg["content"]["text"]
                if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                    break
        return json.loads(printed)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.mark.slow
def test_a_kernel_names_cells_the_same_with_and_without_history(tmp_path):
    """What a learner sees for ops in two cells, the same in two fresh runs with
    history and one without (nbval); the execution counts are not the same."""
    runs = [_run_kernel(True, tmp_path), _run_kernel(True, tmp_path), _run_kernel(False, tmp_path)]
    defining, running = KERNEL_CELLS[1], KERNEL_CELLS[2]
    expected = [["mul", f"cell defining Twice, line {_line_of(defining, 'return x * 2')}", "return x * 2"],
                ["add", f"this cell, line {_line_of(running, 'y = net(x) + 1')}", "y = net(x) + 1"]]
    assert [run["steps"] for run in runs] == [expected] * 3
    assert runs[0]["repr"] == runs[1]["repr"] == runs[2]["repr"]
    for _op, where, code in expected:
        assert f"[{where}] {code}" in runs[0]["repr"]
    # Why a cell is not named by its count: with history the cells are In[2] and In[3];
    # without it (as nbval runs them) both are In[1]. If IPython changes this, the count
    # might become usable.
    assert runs[0]["counts"] == runs[1]["counts"] == [2, 3]
    assert runs[2]["counts"] == [1, 1]
