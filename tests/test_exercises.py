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
NOTEBOOKS = sorted(p for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb") if not p.name.startswith("00_"))
ZH_NOTEBOOKS = sorted(p for p in (ROOT / "notebooks" / "zh").glob("[0-9][0-9]_*.ipynb") if not p.name.startswith("00_"))
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


_NO_ZH = [pytest.param(None, marks=pytest.mark.skip(reason="no Chinese notebook notebooks/zh/NN_*.ipynb yet"))]


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


# -- Issue 31: what each check says about answers it once misjudged ---------------------------

def _answer_module(notebook: str):
    """tests/exercise_answers/nbNN.py, for its named answers."""
    spec = importlib.util.spec_from_file_location(f"exercise_answers_nb{notebook}_named", ANSWERS / f"nb{notebook}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def first_try(monkeypatch):
    """Grade each answer as a first wrong try: no code hint yet."""
    monkeypatch.setattr(exercises, "_WRONG_TRIES", {})

    def grade(key: str, code: str) -> exercises.Result:
        exercises._WRONG_TRIES.clear()
        return exercises.grade(key, _answer(key, code))
    return grade


def test_e1_backward_passes_are_counted_however_the_answer_named_them(first_try):
    """01.1 counts passes at autograd's engine: a right answer that bound `grad` or `backward`
    before the check ran is accepted, and a wrong one is told how many passes it really ran."""
    answers = _answer_module("01")
    engine = torch.autograd.graph._engine_run_backward
    for code in (answers.GRAD_IMPORTED, answers.BACKWARD_IMPORTED):
        verdict = first_try("01.1", code)
        assert verdict.status == exercises.SOLVED, verdict.message
    verdict = first_try("01.1", answers.GRAD_IMPORTED_PER_POINT)
    assert verdict.status == exercises.WRONG
    assert "ran 4 backward passes for 4 points" in verdict.message, verdict.message
    assert torch.autograd.graph._engine_run_backward is engine and torch.autograd._engine_run_backward is engine


def test_e2_dynagraph_reached_another_way_is_refused(first_try):
    """01.2 notices dynagraph's own code running, however the answer reached it."""
    import sys
    answers = _answer_module("01")
    for code in (answers.DRAW_BY_IMPORTLIB, answers.PRIVATE_WALK):
        verdict = first_try("01.2", code)
        assert verdict.status == exercises.WRONG, code
        assert "Your function called dynagraph" in verdict.message, verdict.message
    assert sys.getprofile() is None


def test_e3_the_returned_gradient_must_be_the_retained_one(first_try):
    """01.3: with a token retain_grad(), dy/dh worked out by hand is refused; a copy of h.grad is not."""
    answers = _answer_module("01")
    verdict = first_try("01.3", answers.RETAINED_BUT_BY_HAND)
    assert verdict.status == exercises.WRONG
    assert "it is not the gradient that `retain_grad()` kept" in verdict.message, verdict.message
    assert first_try("01.3", answers.RETAINED_CLONE).status == exercises.SOLVED


def test_e4_linear_grads_may_not_run_a_backward_pass(first_try):
    verdict = first_try("07.2", _answer_module("07").AUTOGRAD_LAYER)
    assert verdict.status == exercises.WRONG
    assert "`linear_grads` ran a backward pass" in verdict.message, verdict.message


def test_e5_half_hooks_that_keep_the_float32_tensors_are_refused(first_try):
    answers = _answer_module("09")
    verdict = first_try("09.3", answers.ORIGINALS_KEPT)
    assert verdict.status == exercises.WRONG
    assert "float32 tensors that pack was given are still in memory" in verdict.message, verdict.message
    verdict = first_try("09.3", answers.COPIES_KEPT)
    assert verdict.status == exercises.WRONG
    assert "exactly the plain model's, without the small errors of float16" in verdict.message, verdict.message


def test_e6_build_switches_must_be_true_or_false(first_try):
    verdict = first_try("07.3", _answer_module("07").GLOROT_YES)
    assert verdict.status == exercises.WRONG
    assert "`glorot` must be True or False: True makes the change" in verdict.message, verdict.message
    assert "glorot='yes'" in verdict.message


def test_e7_linear_grads_may_return_a_list(first_try):
    verdict = first_try("07.2", _answer_module("07").LIST_PAIR)
    assert verdict.status == exercises.SOLVED, verdict.message


def test_e8_a_walk_along_first_entries_is_told_so(first_try):
    verdict = first_try("01.2", _answer_module("01").FIRST_ENTRY_ONLY)
    assert verdict.status == exercises.WRONG
    assert "your walk follows only the first entry of each node's `next_functions`" in verdict.message
    assert "count too" not in verdict.message, verdict.message


def test_e9_a_tensor_for_the_float_threshold_gets_a_hint(first_try):
    verdict = first_try("04.2", _answer_module("04").THRESHOLD_ZERO)
    assert verdict.status == exercises.WRONG
    assert "The threshold is a Python float, not a tensor: its gradient must be `None`" in verdict.message
    assert "not a Variable" not in verdict.message, verdict.message


def test_e10_checkpoint_sequential_is_told_its_last_segment_is_not_checkpointed(first_try):
    verdict = first_try("09.2", _answer_module("09").SEQUENTIAL)
    assert verdict.status == exercises.WRONG
    assert "backward recomputed only layers [0, 1, 2]: layers [3, 4, 5] ran outside any checkpoint" \
        in verdict.message, verdict.message
    assert "`checkpoint_sequential` runs its last segment without a checkpoint" in verdict.message
    assert "not one per layer" not in verdict.message


def test_e11_row_counts_read_plainly(first_try):
    verdict = first_try("05.2", _answer_module("05").ROW_BY_ROW)
    assert verdict.status == exercises.WRONG
    assert "layer 0 ran on 1 row, but 6 rows are still active (depth > 0)" in verdict.message, verdict.message


def test_e12_the_second_try_gets_the_idea_and_the_third_the_code(monkeypatch, language):
    monkeypatch.setattr(exercises, "_WRONG_TRIES", {})
    trap = _answer_module("08").NAN_TRAP
    code = "x / torch.where(m > 0, m, 1.0)"
    first, second, third = (exercises.grade("08.2", _answer("08.2", trap)).message for _ in range(3))
    assert code not in first and code not in second and code in third
    for verdict in (first, second, third):
        expect_in_language(exercises.Result("08.2", exercises.WRONG, verdict), language)
    if language == "en":
        assert "the check shows another hint" in first, first
        assert "Another hint: divide x by a denominator that is the maximum m when m > 0, and 1 when m <= 0." \
            in second, second
        assert f"Code hint: {code}" in third, third


def test_n6_pdb_shows_only_what_the_notebooks_function_has(first_try):
    """03.1: pdb's `a` and `l` show the notebook's `forward(x, debugger)`, nothing of the check's own."""
    answers = _answer_module("03")
    args = first_try("03.1", answers.ARGS).message
    assert "x = tensor([5.], requires_grad=True)" in args and "debugger = <pdb.Pdb object" in args, args
    listing = first_try("03.1", answers.LISTING).message
    assert "def forward(x, debugger):" in listing, listing
    for message in (args, listing):
        assert "made" not in message, message


def test_keys_of_one_notebook_take_its_number_any_way_and_refuse_one_without_exercises():
    first = exercises.keys("01")
    assert first and all(k.startswith("01.") for k in first)
    assert exercises.keys("1") == exercises.keys(1) == first  # ("1" gave [] before)
    assert set(exercises.keys()) >= set(first)
    for bad in ("13", "1b", True):
        with pytest.raises(ValueError, match=rf"no exercises for notebook {re.escape(repr(bad))}; .* 01, 02"):
            exercises.keys(bad)
