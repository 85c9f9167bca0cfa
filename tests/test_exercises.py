"""Every exercise can be failed: its check says "not done yet" on the stub, "not right
yet" on plausible wrong answers, and "solved" on the solution shown in the notebook.

An exercise in a notebook is a stub cell (tag ``exercise-stub``), a check cell
(``exercise-check``: ``check("NN.K", name)``) and a collapsed solution
(``exercise-solution``: a ``<details>`` block holding one python code fence).
Wrong answers live in ``tests/exercise_answers/nbNN.py`` (``WRONG``), and so do other
right answers written differently from the solution (``RIGHT``), which must read "solved".

The checks speak English and, after ``dg.set_language("zh")``, Chinese: every answer gets
the same verdict in both, and a Chinese verdict is Chinese. The Chinese notebooks
(``notebooks/zh/``) have the English notebooks' exercises.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import string
from pathlib import Path

import pytest
import torch

import dynagraph as dg
from dynagraph import exercises

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("0[1-9]_*.ipynb"))
ZH_NOTEBOOKS = sorted((ROOT / "notebooks" / "zh").glob("0[1-9]_*.ipynb"))
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


@pytest.fixture(params=["en", "zh"])
def language(request):
    """Each language in turn; English again after the test, even when it fails."""
    dg.set_language(request.param)
    try:
        yield request.param
    finally:
        dg.set_language("en")


@pytest.fixture
def chinese():
    dg.set_language("zh")
    try:
        yield
    finally:
        dg.set_language("en")


CJK = re.compile(r"[\u4e00-\u9fff]")
ENGLISH = re.compile(r"[A-Za-z]+(?: [A-Za-z]+){2,}")  # three English words in a row: a sentence


def untranslated(message: str) -> str | None:
    """The first three English words in a row in a verdict, outside what stays English:
    code fences and `code`, text quoted from Python or PyTorch (an exception's message, in
    “…”) and a pdb transcript (indented lines)."""
    prose = re.sub(r"```.*?```", " ", message, flags=re.S)
    prose = re.sub(r"`[^`\n]*`", " ", prose)
    prose = re.sub(r"“[^”]*”", " ", prose)
    prose = "\n".join(line for line in prose.split("\n") if not line.startswith("    "))
    found = ENGLISH.search(prose)
    return found.group() if found else None


def expect_in_language(verdict: exercises.Result, lang: str) -> None:
    """A verdict in Chinese has Chinese in it and no English sentence left."""
    if lang == "zh":
        assert CJK.search(verdict.message), f"{verdict.key}: no Chinese in {verdict.message!r}"
        english = untranslated(verdict.message)
        assert english is None, f"{verdict.key}: {english!r} is still English in {verdict.message!r}"


def expect_exercises_match_checks(path: Path) -> None:
    found = parse(path)
    keys = [ex["key"] for ex in found]
    assert len(found) >= 3, f"{path.name} has {len(found)} exercises in the stub/check/solution form"
    assert keys == exercises.keys(path.name[:2]), "every registered check is used once, in order"
    for ex in found:
        assert ex["solution"] is not None, f"{ex['key']} has no solution cell after its check"
        assert ex["name"] == exercises._lookup(ex["key"]).answer
        assert "solution" not in ex["stub"].lower() or "# " in ex["stub"], ex["stub"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_notebook_exercises_match_their_checks(path):
    expect_exercises_match_checks(path)


@pytest.mark.parametrize(("path", "ex", "wrong"), CASES)
def test_check_fails_on_stub_and_wrong_answers_and_passes_on_solution(path, ex, wrong, language):
    key = ex["key"]
    verdict = exercises.grade(key, _answer(key, ex["stub"]))
    assert verdict.status == exercises.TODO, f"{key}: the untouched stub must read 'not done yet'"
    expect_in_language(verdict, language)
    solution = _answer(key, ex["solution"])
    state = torch.get_rng_state()
    verdict = exercises.grade(key, solution)
    assert verdict.status == exercises.SOLVED, f"{key}: the notebook's solution fails: {verdict.message}"
    assert torch.equal(torch.get_rng_state(), state), f"{key}: the check changed the learner's random state"
    expect_in_language(verdict, language)
    assert wrong, f"{key}: list at least one plausible wrong answer in tests/exercise_answers/"
    shortest = {"en": 40, "zh": 25}[language]   # Chinese says as much in about half the characters
    for code in wrong:
        verdict = exercises.grade(key, _answer(key, code))
        assert verdict.status == exercises.WRONG, f"{key}: this wrong answer passed or read as a stub:\n{code}"
        assert len(verdict.message) > shortest, f"{key}: a wrong answer gets a hint, not just 'wrong'"
        expect_in_language(verdict, language)


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


_NO_ZH = [pytest.param(None, marks=pytest.mark.skip(reason="no Chinese notebook notebooks/zh/0[1-9]_*.ipynb yet"))]


@pytest.mark.parametrize("path", ZH_NOTEBOOKS or _NO_ZH, ids=lambda p: p.name[:2] if p else "none")
def test_chinese_notebook_exercises_match_their_checks(path):
    expect_exercises_match_checks(path)


@pytest.mark.parametrize("path", ZH_NOTEBOOKS or _NO_ZH, ids=lambda p: p.name[:2] if p else "none")
def test_committed_chinese_notebook_shows_not_done_yet(path, chinese):
    """Once executed, a Chinese notebook's check cells show the Chinese 'not done yet' verdict
    (the notebook calls ``dg.set_language("zh")`` in its first cell)."""
    cells = json.loads(path.read_text())["cells"]
    if not any(cell.get("outputs") for cell in cells if cell["cell_type"] == "code"):
        pytest.skip(f"{path.name} has no stored outputs yet (it is executed later); once it has, "
                    "its check cells must show the Chinese 'not done yet' verdict")
    for ex in parse(path):
        text = "".join("".join(o.get("text", "")) for o in ex["check"].get("outputs", []))
        want = exercises.grade(ex["key"], None).message     # the stub's verdict, in Chinese
        assert want in text, f"{path.name} {ex['key']}: stored check output is {text!r}, not {want!r}"


def test_every_hint_fills_the_fields_it_names():
    """Each ``tr("...", name=...)`` in the checks passes exactly the names in its braces (a
    missing one would fail inside the check and read as 'Your answer raised KeyError')."""
    wrong = []
    for path in sorted((ROOT / "dynagraph" / "exercises").glob("*.py")):
        tree = ast.parse(path.read_text())
        marked = {target.id: node.value.args[0].value for node in tree.body if isinstance(node, ast.Assign)
                  and isinstance(node.value, ast.Call) and getattr(node.value.func, "id", "") == "N_"
                  for target in node.targets if isinstance(target, ast.Name)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("tr", "translated")):
                continue
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant):
                message = first.value
            elif isinstance(first, ast.Name) and first.id in marked:
                message = marked[first.id]
            else:
                continue                                # a title or a case name: no fields
            names = {name for _, name, _, _ in string.Formatter().parse(message) if name is not None}
            given = {k.arg for k in node.keywords}
            if names != given:
                wrong.append(f"{path.name}:{node.lineno} names {sorted(names)}, passes {sorted(given)}")
    assert not wrong, "\n".join(wrong)


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


def test_value_hint_is_the_same_whatever_order_prev_is_stored_in(monkeypatch):
    """01.5's hint shows the grads a wrong backward() got. The notebook's Value keeps `_prev`
    in a set, whose order follows memory addresses, so a backward() that visits `_prev` in
    its own order got other numbers, and another hint, from run to run. The check fixes the
    order: Values that store `_prev` in opposite orders get the same hint."""
    depth_first = _answers("01")["01.5"][0]      # runs each `_backward` in the order it meets them
    stored = "self._prev = set(_prev)"
    assert stored in depth_first
    hints = set()
    for order in ("list(_prev)", "list(reversed(_prev))"):
        monkeypatch.setattr(exercises, "_WRONG_TRIES", {})   # the first wrong try, each time
        code = depth_first.replace(stored, f"self._prev = {order}")
        verdict = exercises.grade("01.5", _answer("01.5", code))
        assert verdict.status == exercises.WRONG, verdict.message
        hints.add(verdict.message)
    assert len(hints) == 1, hints


def test_no_verdict_names_a_path_of_this_machine():
    import os
    home = os.path.expanduser("~")
    for case in CASES:
        _, ex, wrong = case.values
        for code in wrong:
            message = exercises.grade(ex["key"], _answer(ex["key"], code)).message
            assert str(ROOT) not in message and home not in message and "site-packages" not in message, \
                f"{ex['key']}: {message}"


def test_untranslated_finds_an_english_sentence_outside_code_and_quotes():
    assert untranslated("✗ 练习 2：还不对。the values are right，但梯度不对。") == "the values are right"
    assert untranslated("✗ 练习 2：还不对。请在 `torch.no_grad()` 下使用 `w -= lr * w.grad`。") is None
    assert untranslated("你的答案抛出了 IndexError：“index 4 is out of bounds”。") is None
    assert untranslated("你的命令打印了：\n    (Pdb) p a is not a number\n") is None
