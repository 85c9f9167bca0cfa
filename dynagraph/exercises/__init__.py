"""Checks for the notebooks' exercises.

Every exercise in the tutorial is three cells:

1. a **stub** the learner fills in (tagged ``exercise-stub``): a function whose body
   is ``raise NotImplementedError`` or a value left as ``...``;
2. a **check** (tagged ``exercise-check``)::

       from dynagraph.exercises import check
       check("01.4", sgd_step)

3. a **solution**, out of sight in a collapsed ``<details>`` block (tagged
   ``exercise-solution``).

A check tests properties of the answer (several inputs, gradients against
PyTorch's own), never one value shown next to the question. It prints one of
three verdicts and never raises, so a notebook runs top to bottom with its stubs
untouched:

* ``not done yet``: the stub is as it was (``...``, ``None``, or ``NotImplementedError``);
* ``not right yet``: with a hint that says what is wrong and where to look;
* ``solved``.

A hint gives the idea first. Where a check also has a code hint (``expect(...,
code=...)``), it is shown only from the second wrong try at the same exercise on,
so that a learner thinks before reading code.

The checks for notebook NN live in ``dynagraph/exercises/nbNN.py``; ``tests/test_exercises.py``
proves each one passes on its solution and fails on its stub and on wrong answers.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["Result", "Wrong", "check", "exercise", "expect", "grade", "keys"]

TODO, WRONG, SOLVED = "todo", "wrong", "solved"


class Wrong(AssertionError):
    """Raised by a check: the answer is not right; the message is the hint (the idea).

    ``code``, when given, is a code hint that :func:`grade` shows only from the
    second wrong try at the same exercise on.
    """

    def __init__(self, hint: str, code: str | None = None) -> None:
        super().__init__(hint)
        self.code = code


class NotDone(Exception):
    """Raised by a check when the answer is still the stub."""


@dataclass(frozen=True)
class Exercise:
    key: str
    title: str
    answer: str  # the name the stub cell defines and the check cell passes
    run: Callable[[Any], None]


@dataclass(frozen=True)
class Result:
    """A verdict: ``status`` is "todo", "wrong" or "solved"; ``message`` is what is printed."""

    key: str
    status: str
    message: str

    def __bool__(self) -> bool:
        return self.status == SOLVED


_EXERCISES: dict[str, Exercise] = {}
_WRONG_TRIES: dict[str, int] = {}  # wrong answers graded so far in this process, per exercise


def exercise(key: str, title: str, answer: str) -> Callable[[Callable[[Any], None]], Callable[[Any], None]]:
    """Register a check: ``@exercise("01.4", "an SGD step", answer="sgd_step")``.

    The decorated function receives the learner's answer and raises :class:`Wrong`
    (via :func:`expect`) with a hint when it is not right; it returns on success.
    """
    def register(fn: Callable[[Any], None]) -> Callable[[Any], None]:
        if key in _EXERCISES:
            raise ValueError(f"exercise {key!r} is registered twice")
        _EXERCISES[key] = Exercise(key, title, answer, fn)
        return fn
    return register


def expect(condition: object, hint: str, code: str | None = None) -> None:
    """Fail the check with ``hint`` unless ``condition`` holds; ``code`` is a code hint
    shown from the second wrong try on."""
    if not condition:
        raise Wrong(hint, code)


def _module_for(key: str) -> str:
    return f"{__name__}.nb{key.split('.', 1)[0]}"


def _lookup(key: str) -> Exercise:
    if not isinstance(key, str) or "." not in key:
        raise ValueError(f"exercise key {key!r} should look like '01.2' (notebook.exercise)")
    if key not in _EXERCISES:
        try:
            importlib.import_module(_module_for(key))
        except ModuleNotFoundError:
            pass
    if key not in _EXERCISES:
        raise ValueError(f"no exercise {key!r}; known: {', '.join(keys()) or 'none'}")
    return _EXERCISES[key]


def keys(notebook: str | None = None) -> list[str]:
    """The registered exercise keys (all notebooks' checks are imported), optionally
    only those of one notebook ("01")."""
    if notebook is not None:
        try:
            importlib.import_module(_module_for(f"{notebook}.0"))
        except ModuleNotFoundError:
            pass
    return sorted(k for k in _EXERCISES if notebook is None or k.split(".")[0] == notebook)


def grade(key: str, answer: Any) -> Result:
    """Run exercise ``key``'s check on ``answer`` and return the verdict (prints nothing)."""
    ex = _lookup(key)
    label = f"Exercise {key.split('.', 1)[1]}"
    todo = Result(key, TODO, f"⏳ {label}: not done yet. Fill in `{ex.answer}` in the cell above, "
                             "then run this cell again.")
    if answer is ... or answer is None:
        return todo
    try:
        with _own_random_state():
            ex.run(answer)
    except (NotDone, NotImplementedError):
        return todo
    except Wrong as e:
        return Result(key, WRONG, f"✗ {label}: not right yet. {e}{_code_hint(key, e.code)}")
    except Exception as e:  # noqa: BLE001 - the learner's code failed inside the check
        _code_hint(key, None)
        return Result(key, WRONG, f"✗ {label}: not right yet. Your answer raised "
                                  f"{type(e).__name__}: {e}")
    return Result(key, SOLVED, f"✓ {label} solved: {ex.title}.")


def _code_hint(key: str, code: str | None) -> str:
    """Count one more wrong try at ``key``; the code hint's text once this is the second or later."""
    _WRONG_TRIES[key] = tries = _WRONG_TRIES.get(key, 0) + 1
    if code is None:
        return ""
    if tries < 2:
        return " (Try again. If it is still wrong, the check shows a code hint.)"
    return f" Code hint: {code}"


def _own_random_state() -> contextlib.AbstractContextManager[Any]:
    """Checks draw their own random inputs (and may seed them): the learner's random
    state is the same after a check as before it, on the CPU and on CUDA devices in use."""
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    return torch.random.fork_rng(devices=devices)


def check(key: str, answer: Any) -> None:
    """Print the verdict of exercise ``key`` on ``answer`` (see the module docstring)."""
    print(grade(key, answer).message)
