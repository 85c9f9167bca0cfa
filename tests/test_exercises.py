"""Every exercise can be failed: its check says "not done yet" on the stub, "not right
yet" on plausible wrong answers, and "solved" on the solution shown in the notebook.

An exercise in a notebook is a stub cell (tag ``exercise-stub``), a check cell
(``exercise-check``: ``check("NN.K", name)``) and a collapsed solution
(``exercise-solution``: a ``<details>`` block holding one python code fence).
Wrong answers live in ``tests/exercise_answers/nbNN.py`` (``WRONG``), and so do other
right answers written differently from the solution (``RIGHT``), which must read "solved".
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
import torch

from dynagraph import exercises

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("0[1-9]_*.ipynb"))
ANSWERS = Path(__file__).resolve().parent / "exercise_answers"
CHECK = re.compile(r"""check\(\s*["'](\d\d\.\d+)["']\s*,\s*(\w+)\s*\)""")
FENCE = re.compile(r"```python\n(.*?)```", re.S)


def _tags(cell) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def _source(cell) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def parse(path: Path) -> list[dict]:
    """The exercises of one notebook, in order: key, stub, check cell, solution code."""
    cells = json.loads(path.read_text())["cells"]
    found, stub = [], None
    for cell in cells:
        tags = _tags(cell)
        if "exercise-stub" in tags:
            stub = cell
        elif "exercise-check" in tags:
            m = CHECK.search(_source(cell))
            assert m, f"{path.name}: check cell without check('NN.K', name): {_source(cell)[:80]!r}"
            assert stub is not None, f"{path.name}: check {m.group(1)} has no stub cell before it"
            found.append({"key": m.group(1), "name": m.group(2), "stub": _source(stub),
                          "check": cell, "solution": None})
            stub = None
        elif "exercise-solution" in tags:
            assert found and found[-1]["solution"] is None, f"{path.name}: solution cell without a check"
            text = _source(cell)
            assert cell["cell_type"] == "markdown" and "<details>" in text and "<details open" not in text, \
                f"{path.name} {found[-1]['key']}: the solution must be a collapsed <details> markdown cell"
            fences = FENCE.findall(text)
            assert len(fences) == 1, f"{path.name} {found[-1]['key']}: the solution needs one ```python fence"
            found[-1]["solution"] = fences[0]
    return found


def _answers(notebook: str, kind: str = "WRONG") -> dict[str, list[str]]:
    """``WRONG`` (or ``RIGHT``) of tests/exercise_answers/nbNN.py: exercise key -> answers' code."""
    path = ANSWERS / f"nb{notebook}.py"
    if not path.exists():
        return {}
    spec = importlib.util.spec_from_file_location(f"exercise_answers_nb{notebook}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, kind, {})


CASES = []
RIGHT_CASES = []
for _nb in NOTEBOOKS:
    _num = _nb.name[:2]
    _wrong, _right = _answers(_num), _answers(_num, "RIGHT")
    for _ex in parse(_nb):
        CASES.append(pytest.param(_nb, _ex, _wrong.get(_ex["key"], []), id=_ex["key"]))
    for _key, _codes in _right.items():
        RIGHT_CASES += [pytest.param(_key, _code, id=f"{_key}-{_i}") for _i, _code in enumerate(_codes)]


def _answer(key: str, code: str):
    """Run the notebook's set-up then ``code`` in a fresh namespace; return the answer it defines."""
    setup = importlib.import_module(exercises._module_for(key)).SETUP
    ns: dict = {}
    exec(compile(setup, f"<setup {key}>", "exec"), ns)
    exec(compile(code, f"<answer {key}>", "exec"), ns)
    return ns.get(exercises._lookup(key).answer, ...)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_notebook_exercises_match_their_checks(path):
    found = parse(path)
    keys = [ex["key"] for ex in found]
    assert len(found) >= 3, f"{path.name} has {len(found)} exercises in the stub/check/solution form"
    assert keys == exercises.keys(path.name[:2]), "every registered check is used once, in order"
    for ex in found:
        assert ex["solution"] is not None, f"{ex['key']} has no solution cell after its check"
        assert ex["name"] == exercises._lookup(ex["key"]).answer
        assert "solution" not in ex["stub"].lower() or "# " in ex["stub"], ex["stub"]


@pytest.mark.parametrize(("path", "ex", "wrong"), CASES)
def test_check_fails_on_stub_and_wrong_answers_and_passes_on_solution(path, ex, wrong):
    key = ex["key"]
    assert exercises.grade(key, _answer(key, ex["stub"])).status == exercises.TODO, \
        f"{key}: the untouched stub must read 'not done yet'"
    solution = _answer(key, ex["solution"])
    state = torch.get_rng_state()
    verdict = exercises.grade(key, solution)
    assert verdict.status == exercises.SOLVED, f"{key}: the notebook's solution fails: {verdict.message}"
    assert torch.equal(torch.get_rng_state(), state), f"{key}: the check changed the learner's random state"
    assert wrong, f"{key}: list at least one plausible wrong answer in tests/exercise_answers/"
    for code in wrong:
        verdict = exercises.grade(key, _answer(key, code))
        assert verdict.status == exercises.WRONG, f"{key}: this wrong answer passed or read as a stub:\n{code}"
        assert len(verdict.message) > 40, f"{key}: a wrong answer gets a hint, not just 'wrong'"


@pytest.mark.parametrize(("key", "code"), RIGHT_CASES)
def test_other_right_answers_are_accepted(key, code):
    verdict = exercises.grade(key, _answer(key, code))
    assert verdict.status == exercises.SOLVED, f"{key}: a right answer was refused: {verdict.message}\n{code}"


def test_right_answers_name_only_exercises_that_exist():
    assert {key for key, _ in (case.values for case in RIGHT_CASES)} <= set(exercises.keys())


@pytest.mark.parametrize(("path", "ex", "wrong"), CASES)
def test_committed_notebook_shows_not_done_yet(path, ex, wrong):
    """The notebook is committed with stubs: its check cell's stored output is the
    'not done yet' verdict, so a learner never sees the answer in an output."""
    text = "".join("".join(o.get("text", "")) for o in ex["check"].get("outputs", []))
    assert "not done yet" in text, f"{ex['key']}: stored check output is {text!r}"


def test_grade_rejects_unknown_keys():
    with pytest.raises(ValueError, match=r"'01\.99'"):
        exercises.grade("01.99", 1)
    with pytest.raises(ValueError, match="should look like"):
        exercises.grade("one", 1)


def test_a_code_hint_shows_only_from_the_second_wrong_try(monkeypatch):
    monkeypatch.setattr(exercises, "_WRONG_TRIES", {})

    number = exercises.Kind("a number", "value = ...", lambda a: isinstance(a, int))

    @exercises.exercise("99.1", "a test exercise", answer="value", kind=number)
    def _check(value):
        exercises.expect(value == 4, "the idea: square the input.", code="`value = x * x`")

    monkeypatch.setitem(exercises._EXERCISES, "99.1", exercises._EXERCISES.pop("99.1"))
    first = exercises.grade("99.1", 3).message
    second = exercises.grade("99.1", 5).message
    assert "the idea: square the input." in first and "x * x" not in first and "Try again" in first
    assert "Code hint: `value = x * x`" in second
    assert exercises.grade("99.1", 4).status == exercises.SOLVED
    exercises._EXERCISES.pop("99.1")


def test_no_verdict_names_a_path_of_this_machine():
    import os
    home = os.path.expanduser("~")
    for case in CASES:
        _, ex, wrong = case.values
        for code in wrong:
            message = exercises.grade(ex["key"], _answer(ex["key"], code)).message
            assert str(ROOT) not in message and home not in message and "site-packages" not in message, \
                f"{ex['key']}: {message}"
