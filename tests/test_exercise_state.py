"""Exercise checks leave the learner's kernel as they found it, list every exercise in a
fresh kernel, and tell an answer of the wrong kind what kind is wanted (issue 19).

The answers come from the notebooks (stub and solution) and from ``tests/exercise_answers/``
(``RIGHT`` and ``WRONG``), as in ``tests/test_exercises.py``.
"""

from __future__ import annotations

import bdb
import inspect
import json
import random
import subprocess
import sys
import threading

import pytest
import torch
from test_exercises import CASES, NOTEBOOKS, RIGHT_CASES, _answer, parse
from torch.nn.modules import module as module_hooks
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

from dynagraph import exercises

# What checks patch for a while (and must put back): the objects there now.
_PATCHED = [(torch.autograd, "backward"), (torch.autograd, "grad"), (torch.Tensor, "backward"),
            (torch.Tensor, "retain_grad"), (torch.autograd.Function, "apply")]


def _learner_function() -> tuple[torch.Tensor, list[int], object]:
    """A function the learner compiled before the checks run: its input, the list its
    backend grows at each compile, and the compiled function."""
    compiles: list[int] = []

    def count(gm: torch.fx.GraphModule, inputs: list) -> object:
        compiles.append(1)
        return gm.forward

    def learners_own(x: torch.Tensor) -> torch.Tensor:
        return x * 2 + 1

    compiled = torch.compile(learners_own, backend=count)
    x = torch.ones(3)
    compiled(x)
    return x, compiles, compiled


def _state(learner: tuple, frame_traces: list) -> dict[str, object]:
    """What a check must leave as it found it; ``learner`` is run again on its input."""
    x, compiles, compiled = learner
    compiled(x)
    bps = tuple((bp.number, bp.file, bp.line) for bp in bdb.Breakpoint.bpbynumber if bp is not None)
    return {
        "learner's compiles": len(compiles),
        "sys.gettrace()": sys.gettrace(), "threading.gettrace()": threading.gettrace(),
        "sys.getprofile()": sys.getprofile(),
        "frames' f_trace": frame_traces,
        "breakpoints": (bdb.Breakpoint.next, bps, tuple(bdb.Breakpoint.bplist)),
        "grad mode": torch.is_grad_enabled(), "inference mode": torch.is_inference_mode_enabled(),
        "anomaly mode": torch.is_anomaly_enabled(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "default dtype": torch.get_default_dtype(), "threads": torch.get_num_threads(),
        "torch RNG": torch.get_rng_state().numpy().tobytes(), "random": random.getstate(),
        "function modes": tuple(torch.overrides._get_current_function_mode_stack()),
        "dispatch modes": tuple(_get_current_dispatch_mode_stack()),
        "saved tensors hooks": torch._C._autograd._top_saved_tensors_default_hooks(False),
        "module hooks": (len(module_hooks._global_forward_hooks), len(module_hooks._global_backward_hooks),
                         len(module_hooks._global_forward_pre_hooks)),
        "patched": tuple(inspect.getattr_static(owner, name) for owner, name in _PATCHED),
        "Tensor's own attributes": frozenset(vars(torch.Tensor)),
    }


def _frame_traces() -> list:
    frame, traces = sys._getframe(1), []
    while frame is not None:
        traces.append(frame.f_trace)
        frame = frame.f_back
    return traces


def _all_answers() -> list[tuple[str, str, object]]:
    """(key, what the answer is, the answer) for every exercise: stub, None, the solution,
    the RIGHT and WRONG answers, and answers of other kinds."""
    right: dict[str, list[str]] = {}
    for case in RIGHT_CASES:
        key, code = case.values
        right.setdefault(key, []).append(code)
    found = []
    for case in CASES:
        _, ex, wrong = case.values
        key = ex["key"]
        found += [(key, "the stub", _answer(key, ex["stub"])), (key, "None", None),
                  (key, "the solution", _answer(key, ex["solution"]))]
        found += [(key, f"RIGHT[{i}]", _answer(key, code)) for i, code in enumerate(right.get(key, []))]
        found += [(key, f"WRONG[{i}]", _answer(key, code)) for i, code in enumerate(wrong)]
        found += [(key, f"a {kind}", sample) for kind, sample in _SAMPLES.items()]
    return found


class _Thing:
    """A plain class, not an ``autograd.Function``."""


_SAMPLES = {"function": lambda *args: None, "class": _Thing, "tensor": torch.ones(2), "string": "p a\nc\n",
            "int": 3, "dict": {}, "list": []}


def test_every_check_leaves_the_kernel_as_it_found_it():
    learner = _learner_function()
    changed = []
    for key, what, answer in _all_answers():
        before = _state(learner, _frame_traces())
        exercises.grade(key, answer)
        after = _state(learner, _frame_traces())
        changed += [f"{key} on {what}: {name}" for name in before if before[name] != after[name]]
    assert not changed, "these checks changed the kernel's state:\n" + "\n".join(changed)


_FRESH = """
import json
from dynagraph import exercises
errors = []
for key in ("01.99", "77.1"):
    try:
        exercises.grade(key, 1)
    except ValueError as e:
        errors.append(str(e))
print(json.dumps({"keys": exercises.keys(), "errors": errors}))
"""


@pytest.fixture(scope="module")
def fresh_kernel() -> dict:
    """What ``keys()`` and unknown keys give in a new Python process, before any check ran."""
    done = subprocess.run([sys.executable, "-c", _FRESH], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_keys_lists_every_exercise_in_a_fresh_kernel(fresh_kernel):
    assert fresh_kernel["keys"] == [ex["key"] for path in NOTEBOOKS for ex in parse(path)]


def test_an_unknown_key_names_the_known_keys_and_what_to_do(fresh_kernel):
    of_notebook, unknown_notebook = fresh_kernel["errors"]
    assert "'01.99'" in of_notebook and "01.1" in of_notebook and "01.5" in of_notebook
    assert "02.1" not in of_notebook, "a key of a known notebook names that notebook's keys"
    assert "'77.1'" in unknown_notebook and "01.1" in unknown_notebook and "09.3" in unknown_notebook
    assert all("check cell" in e for e in fresh_kernel["errors"]), "the error says what to do"


def _kind(value: object) -> str:
    """A value's kind as the test sees it, to pick answers of another kind than the solution."""
    if isinstance(value, type):
        return "Function subclass" if issubclass(value, torch.autograd.Function) else "class"
    for kind, sample in _SAMPLES.items():
        if kind not in ("function", "class") and isinstance(value, type(sample)):
            return kind
    return "function" if callable(value) else type(value).__name__


_KEYS = [case.values[1]["key"] for case in CASES]
_SOLUTIONS = {case.values[1]["key"]: case.values[1]["solution"] for case in CASES}


@pytest.mark.parametrize("key", _KEYS)
def test_an_answer_of_the_wrong_kind_is_told_what_kind_is_wanted(key):
    want = _kind(_answer(key, _SOLUTIONS[key]))
    for kind, sample in _SAMPLES.items():
        if kind == want:
            continue
        message = exercises.grade(key, sample).message
        assert "not right yet" in message and "raised" not in message, f"{key} given a {kind}: {message}"
        assert f"{key} wants " in message and "; got " in message, f"{key} given a {kind}: {message}"
