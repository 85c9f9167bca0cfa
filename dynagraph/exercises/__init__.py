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

An answer of another kind than the exercise wants (a function where a
``torch.autograd.Function`` subclass is wanted, a tensor where a function is) reads
``not right yet`` with the kind wanted, before the check runs. A check leaves the
learner's kernel as it found it: ``torch.compile``'s caches, the trace function and
breakpoints, torch modes, grad mode, the default dtype, the thread count and the random
states (``_state.py``). :func:`keys` lists every notebook's exercises.

A hint gives the idea first. Where a check also has a code hint (``expect(...,
code=...)``), it is shown only from the second wrong try at the same exercise on,
so that a learner thinks before reading code. Where the code would give the whole
solution away, the check also has a further hint (``expect(..., code=..., further=...)``),
a second idea in words: it comes on the second wrong try, and the code from the third on.

Verdicts and hints follow ``dg.set_language``: each hint is written in English as
``tr("...", field=value)`` and translated in ``_zh.py``; a title or a :class:`Kind`'s text,
defined at import time, is marked with ``N_("...")`` and translated where it is shown.

The checks for notebook NN live in ``dynagraph/exercises/nbNN.py``; ``tests/test_exercises.py``
proves each one passes on its solution and fails on its stub and on wrong answers.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .._language import N_, tr, translated
from ._state import as_found

__all__ = ["Result", "Wrong", "check", "exercise", "expect", "filled", "grade", "keys"]

TODO, WRONG, SOLVED = "todo", "wrong", "solved"


class Wrong(AssertionError):
    """Raised by a check: the answer is not right; the message is the hint (the idea).

    ``code``, when given, is a code hint that :func:`grade` shows only from the
    second wrong try at the same exercise on; with ``further`` (a hint in words), from the
    third try on, and ``further`` on the second.
    """

    def __init__(self, hint: str, code: str | None = None, further: str | None = None) -> None:
        super().__init__(hint)
        self.code, self.further = code, further


class NotDone(Exception):
    """Raised by a check when the answer is still the stub."""


@dataclass(frozen=True)
class Kind:
    """What kind of answer an exercise wants: ``wants`` and ``how`` (with ``{name}``, the
    answer's name) are for the hint; ``accepts`` tells whether a value is of this kind.
    ``wants`` is marked with ``N_`` (it is translated where the hint is made); ``how`` is code."""

    wants: str
    how: str
    accepts: Callable[[Any], bool]


FUNCTION = Kind(N_("a function"), "def {name}(...): ...",
                lambda a: callable(a) and not isinstance(a, type))
CLASS = Kind(N_("a class"), "class {name}: ...", lambda a: isinstance(a, type))
AUTOGRAD_FUNCTION = Kind(
    N_("a subclass of torch.autograd.Function, with forward and backward staticmethods"),
    "class {name}(Function): ...",
    lambda a: isinstance(a, type) and issubclass(a, torch.autograd.Function))
STRING = Kind(N_("a string of pdb commands, one command per line"), '{name} = "p ...\\nc\\n"',
              lambda a: isinstance(a, str))


@dataclass(frozen=True)
class Exercise:
    key: str
    title: str  # English, marked with N_: translated when a verdict shows it
    answer: str  # the name the stub cell defines and the check cell passes
    run: Callable[[Any], None]
    kind: Kind = FUNCTION


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


def exercise(key: str, title: str, answer: str,
             kind: Kind = FUNCTION) -> Callable[[Callable[[Any], None]], Callable[[Any], None]]:
    """Register a check: ``@exercise("01.4", N_("an SGD step"), answer="sgd_step")``.

    The decorated function receives the learner's answer and raises :class:`Wrong`
    (via :func:`expect`) with a hint when it is not right; it returns on success. It
    runs only on an answer of ``kind`` (a function unless told): an answer of another
    kind gets a hint that names the kind wanted.
    """
    def register(fn: Callable[[Any], None]) -> Callable[[Any], None]:
        if key in _EXERCISES:
            raise ValueError(f"exercise {key!r} is registered twice")
        _EXERCISES[key] = Exercise(key, title, answer, fn, kind)
        return fn
    return register


def expect(condition: object, hint: str, code: str | None = None, further: str | None = None) -> None:
    """Fail the check with ``hint`` unless ``condition`` holds; ``code`` is a code hint
    shown from the second wrong try on, or, with ``further``, from the third (``further``
    is shown on the second)."""
    if not condition:
        raise Wrong(hint, code, further)


def filled(grad: torch.Tensor | None, hint: str) -> torch.Tensor:
    """``grad`` when backward filled it; otherwise the check fails with ``hint``."""
    if grad is None:
        raise Wrong(hint)
    return grad


def _module_for(key: str) -> str:
    return f"{__name__}.nb{key.split('.', 1)[0]}"


def _import_all() -> None:
    """Import every notebook's checks (``nbNN.py``): each registers its exercises."""
    for module in pkgutil.iter_modules(__path__):
        if re.fullmatch(r"nb\d\d", module.name):
            importlib.import_module(f"{__name__}.{module.name}")


def _lookup(key: str) -> Exercise:
    if not isinstance(key, str) or "." not in key:
        raise ValueError(f"exercise key {key!r} should look like '01.2' (notebook.exercise)")
    if key not in _EXERCISES:
        _import_all()
    if key not in _EXERCISES:
        notebook = key.split(".", 1)[0]
        known = _keys_of(notebook)
        where = f"notebook {notebook} has " if known else "the exercises are "
        where += ", ".join(known or keys())
        raise ValueError(f"no exercise {key!r}; {where}. Use the key that the exercise's check cell "
                         "shows, as in `check(\"01.2\", count_nodes)`.")
    return _EXERCISES[key]


def keys(notebook: str | int | None = None) -> list[str]:
    """The exercise keys of every notebook (all their checks are imported), optionally
    only those of one notebook ("01"; 1 and "1" name it too).

    Raises:
        ValueError: no notebook of that number has exercises (the message lists those that do).
    """
    _import_all()
    if notebook is None:
        return sorted(_EXERCISES)
    whole = isinstance(notebook, int) and not isinstance(notebook, bool)
    name = f"{notebook:02d}" if whole else str(notebook)
    found = _keys_of(name.zfill(2) if name.isdigit() else name)
    if not found:
        raise ValueError(f"no exercises for notebook {notebook!r}; the notebooks with exercises are "
                         f"{', '.join(sorted({k.split('.')[0] for k in _EXERCISES}))} (such as keys('01'))")
    return found


def _keys_of(notebook: str) -> list[str]:
    """The registered keys of ``notebook`` ("01"), in order."""
    return sorted(k for k in _EXERCISES if k.split(".")[0] == notebook)


def grade(key: str, answer: Any) -> Result:
    """Run exercise ``key``'s check on ``answer`` and return the verdict (prints nothing)."""
    ex = _lookup(key)
    label = tr("Exercise {number}", number=key.split(".", 1)[1])
    todo = Result(key, TODO, tr("⏳ {label}: not done yet. Fill in `{answer}` in the cell above, "
                                "then run this cell again.", label=label, answer=ex.answer))
    if answer is ... or answer is None:
        return todo
    try:
        _expect_kind(ex, answer)
        with as_found():
            ex.run(answer)
    except (NotDone, NotImplementedError):
        return todo
    except Wrong as e:
        return Result(key, WRONG, tr("✗ {label}: not right yet. {hint}{code_hint}",
                                     label=label, hint=e, code_hint=_code_hint(key, e.code, e.further)))
    except Exception as e:  # noqa: BLE001 - the learner's code failed inside the check
        _code_hint(key, None)
        return Result(key, WRONG, tr("✗ {label}: not right yet. Your answer raised {error}: {message}",
                                     label=label, error=type(e).__name__, message=e))
    return Result(key, SOLVED, tr("✓ {label} solved: {title}.", label=label, title=translated(ex.title)))


def _code_hint(key: str, code: str | None, further: str | None = None) -> str:
    """Count one more wrong try at ``key``; what follows the hint on this try: a word that more
    help comes, the ``further`` hint (on the second try, when given), or the code hint."""
    _WRONG_TRIES[key] = tries = _WRONG_TRIES.get(key, 0) + 1
    if code is None:
        return ""
    if further is None:
        if tries < 2:
            return tr(" (Try again. If it is still wrong, the check shows a code hint.)")
        return tr(" Code hint: {code}", code=code)
    if tries < 2:
        return tr(" (Try again. If it is still wrong, the check shows another hint.)")
    if tries == 2:
        return tr(" Another hint: {further} (If it is still wrong, the check shows a code hint.)",
                  further=further)
    return tr(" Code hint: {code}", code=code)


def _expect_kind(ex: Exercise, answer: Any) -> None:
    """Fail with a hint that names the kind wanted unless ``answer`` is of ``ex.kind``."""
    how = ex.kind.how.format(name=ex.answer)
    expect(ex.kind.accepts(answer),
           tr("{key} wants {wants}; got {got}. Write `{how}` in the cell above, run it, then run "
              "this cell again.", key=ex.key, wants=translated(ex.kind.wants), got=_kind_of(answer), how=how))


def _kind_of(value: Any) -> str:
    """What ``value`` is, for a hint: "a function (`square`)", "a tensor", "an int"."""
    if isinstance(value, type):
        if issubclass(value, torch.autograd.Function):
            return tr("a subclass of torch.autograd.Function (`{name}`)", name=value.__name__[:40])
        return tr("a class (`{name}`)", name=value.__name__[:40])
    if callable(value) and hasattr(value, "__name__"):
        return tr("a function (`{name}`)", name=str(value.__name__)[:40])
    if isinstance(value, torch.Tensor):             # a Parameter too
        return tr("a tensor")
    if isinstance(value, str):
        return tr("a string")
    name = type(value).__name__[:40]
    return tr("an {name}", name=name) if name[:1] in tuple("aeiou") else tr("a {name}", name=name)


def check(key: str, answer: Any) -> None:
    """Print the verdict of exercise ``key`` on ``answer`` (see the module docstring)."""
    print(grade(key, answer).message)
