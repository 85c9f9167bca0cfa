"""Checks for 03_debugging_pdb.ipynb."""

from __future__ import annotations

import bdb
import io
import pdb
import re
import warnings
from typing import Any

import torch
from torch.autograd import gradcheck

from .._language import N_, tr
from .._walk import reach
from . import STRING, Wrong, exercise, expect, filled
from ._pdb_forward import forward
from ._state import debugger_as_found

# What an answer may use: the notebook's imports (tests run stubs and solutions after this).
SETUP = """
import torch
import dynagraph as dg
"""


def _noting_a(debugger: pdb.Pdb, made: list[Any]) -> None:
    """When ``debugger`` first stops in ``forward``, note the node of the original ``a`` in
    ``made`` (03.2 checks that the result still uses it), before the learner's commands run."""
    interaction = debugger.interaction

    def noted(frame: Any, *args: Any, **kwargs: Any) -> Any:
        if not made and frame is not None and frame.f_code is forward.__code__:
            made.append(getattr(frame.f_locals.get("a"), "grad_fn", None))
        return interaction(frame, *args, **kwargs)

    debugger.interaction = noted  # type: ignore[method-assign]


# An absolute file path (POSIX or Windows): a transcript shown in a hint must not name this
# machine's files (pdb's location lines, `w`, `p __file__`).
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][\w.+~-]+){2,}")
_PROMPT = re.compile(r"^(\(Pdb\)|ipdb>)", re.M)


class _Script(io.StringIO):
    """pdb commands, echoed into the transcript as they are read (as in the notebook)."""

    def __init__(self, commands: str, transcript: io.StringIO) -> None:
        super().__init__(commands)
        self.transcript = transcript

    def readline(self, size: int = -1, /) -> str:  # type: ignore[override]  # as typeshed types StringIO
        line = super().readline(size)
        self.transcript.write(line)
        return line


def _session(commands: str, x: torch.Tensor) -> tuple[torch.Tensor, str, Any]:
    """Run ``forward`` under a debugger fed ``commands``; return ``b``, the transcript and
    the autograd node of the original ``a``. Breakpoints the commands set end with the session."""
    out = io.StringIO()
    dbg = pdb.Pdb(stdin=_Script(commands, out), stdout=out, nosigint=True, readrc=False)
    made: list[Any] = []
    _noting_a(dbg, made)
    try:
        # `.item()` of a tensor that requires grad warns in torch 2.13
        with debugger_as_found(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            b = forward(x, dbg)
    except bdb.BdbQuit as e:
        raise Wrong(tr("the debugger quit and stopped the program (`BdbQuit`): when the commands run "
                       "out, pdb reads end-of-file, which means quit. The last command must let the "
                       "program go on (section 4)."),
                    code=tr("end the string with `c\\n` (continue)")) from e
    expect(isinstance(b, torch.Tensor),
           tr("the function returned a {type}, not a tensor: your commands replaced `a` "
              "with something that is not a tensor.", type=type(b).__name__))
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())
    return b, text, made[0] if made else None


def _reaches(fn: Any, target: Any) -> bool:
    """Whether the autograd node ``target`` lies in the graph below the node ``fn``."""
    found: list[Any] = []

    def enter(node: Any) -> bool:
        if node is target:
            found.append(node)
        return not found  # stop walking once it is found

    reach([fn] if fn is not None else [], enter)
    return bool(found)


def _after_prompt(text: str) -> str:
    """The transcript from the first prompt on: what the commands printed (the lines before
    it are pdb's location line, which names this file, and IPython's source lines)."""
    first = _PROMPT.search(text)
    return text[first.start():] if first else ""


def _shown(printed: str) -> str:
    """``printed`` for a hint: file paths masked, at most the last 300 characters, indented."""
    shown = _PATH.sub("<file>", printed).strip()[-300:] or tr("(nothing)")
    return "".join(f"    {line}\n" for line in shown.splitlines())


def _printed_numbers(text: str) -> list[float]:
    numbers = []
    for line in text.splitlines():
        line = re.sub(r"^(\(Pdb\)|ipdb>)\s*", "", line.strip())
        try:
            numbers.append(float(line))
        except ValueError:
            pass
    return numbers


@exercise("03.1", N_("a pdb script that prints the number in `a` at the breakpoint"), answer="commands1",
          kind=STRING)
def _commands1(commands1: Any) -> None:
    for value in (5.0, -1.5, 0.25):
        x = torch.tensor([value], requires_grad=True)
        b, text, _ = _session(commands1, x)
        expect(b.item() == 3 * value + 1,
               tr("for x = {x} the function returned {got} instead of {want}: your commands changed "
                  "`a`. Only print it.", x=value, got=b.item(), want=3 * value + 1))
        printed = _after_prompt(text)
        numbers = _printed_numbers(printed)
        expect(3 * value in numbers or not re.search(r"^tensor\(", printed, re.M),
               tr("the transcript shows a tensor (`tensor([{a}], ...)`), not the number in it. Print "
                  "a Python float: a tensor method turns a one-element tensor into one.", a=3 * value),
               code=tr("`t.item()` is the Python number held by a one-element tensor `t`"))
        expect(3 * value in numbers,
               tr("for x = {x}, `a` holds {a}, but no line your commands printed is that number. Use "
                  "pdb's print command on the number held by `a` (section 4). Your commands printed:\n",
                  x=value, a=3 * value) + _shown(printed),
               code=tr("`p expression` prints the value of a Python expression in the stopped function"))


@exercise("03.2", N_("a pdb script that doubles `a` at the breakpoint, changing result and gradient"),
          answer="commands2", kind=STRING)
def _commands2(commands2: Any) -> None:
    for value in (2.0, -1.0, 0.5):
        x = torch.tensor([value], requires_grad=True)
        b, _, original = _session(commands2, x)
        expect(b.item() != 3 * value + 1,
               tr("for x = {x} the result is still 3x + 1 = {got}: `a` was not changed. At the pdb "
                  "prompt, a line that starts with `a` is pdb's `args` command, not Python. Mark the "
                  "line as a Python statement (section 5).", x=value, got=b.item()),
               code=tr("`!` in front of a line runs it as Python: `!name = ...`"))
        expect(b.item() == 6 * value + 1,
               tr("for x = {x} the result should be 2·3x + 1 = {want}, got {got}.",
                  x=value, want=6 * value + 1, got=b.item()))
        expect(b.requires_grad,
               tr("the result no longer requires grad: your new `a` was cut from the graph "
                  "(`.detach()`, `.data`, `.item()`); compute it from `a` itself."))
        expect(_reaches(b.grad_fn, original),
               tr("for x = {x} the result is right, but it no longer uses the `a` that the debugger "
                  "stopped at: your commands computed a new `a` from `x` again. The question asks you "
                  "to double the `a` that is already there (section 5).", x=value))
        b.backward()
        x_grad = filled(x.grad, tr("the result is not connected to x: compute the new `a` from `a`."))
        expect(x_grad.item() == 6.0,
               tr("the result is right, but x.grad = {grad} instead of 6: the doubled `a` must be "
                  "computed from `a` (a recorded op), so the gradient follows.", grad=x_grad.item()))


@exercise("03.3", N_("a hook that records the gradient flowing into a tensor, without changing it"),
          answer="watch")
def _watch(watch: Any) -> None:
    cases = [(lambda x: x.exp(), lambda h: (h * h).sum(), [0.0, 1.0]),
             (lambda x: x * 3, lambda h: (h ** 2).sum(), [1.0, 2.0]),
             (lambda x: x.sin(), lambda h: (h * torch.tensor([1.0, -2.0, 0.5])).sum(), [0.3, -1.0, 2.0])]
    for f, loss_fn, start in cases:
        x_ref = torch.tensor(start, requires_grad=True)
        h_ref = f(x_ref)
        want_h, = torch.autograd.grad(loss_fn(h_ref), h_ref, retain_graph=True)
        want_x, = torch.autograd.grad(loss_fn(h_ref), x_ref)
        x = torch.tensor(start, requires_grad=True)
        h = f(x)
        seen = watch(h)
        expect(isinstance(seen, list),
               tr("return the list the hook fills, got {type}.", type=type(seen).__name__))
        loss_fn(h).backward(retain_graph=True)
        expect(len(seen) == 1 and seen[0] is not None,
               tr("after one backward() the list holds {seen!r}, not one gradient. Register a hook "
                  "on `h`: a function that autograd calls with the gradient of `h` during backward. "
                  "Let it add that gradient to the list (section 1).", seen=seen),
               code=tr("`h.register_hook(fn)` makes autograd call `fn(grad)`"))
        expect(isinstance(seen[0], torch.Tensor) and seen[0].shape == h.shape,
               tr("record the gradient itself, shaped like h {shape}.", shape=tuple(h.shape)))
        expect(torch.allclose(seen[0], want_h),
               tr("you recorded {got}, but dL/dh is {want}.", got=seen[0].tolist(), want=want_h.tolist()))
        x_grad = filled(x.grad, tr("x.grad was not filled: leave the graph from x to h as it is."))
        expect(torch.allclose(x_grad, want_x),
               tr("x.grad is {got} instead of {want}: your hook changed the gradient. A hook that "
                  "returns a tensor replaces it; a watching hook returns None.",
                  got=x_grad.tolist(), want=want_x.tolist()))
        loss_fn(h).backward()                 # a second pass through the same h
        expect(len(seen) == 2,
               tr("a second backward() through h should add a second gradient to the list: the hook "
                  "must stay registered and append each time."))


@exercise("03.4", N_("log with the same values but a finite gradient where x <= 0"), answer="safe_log")
def _safe_log(safe_log: Any) -> None:
    for start in ([0.0, 2.0], [-1.0, 0.0, 0.5, 3.0], [1e-3, 1e-20, 0.0, -0.0, 10.0]):
        x = torch.tensor(start, dtype=torch.float64, requires_grad=True)
        want = torch.where(x > 0, x.detach().log(), 0.0)
        y = safe_log(x)
        expect(isinstance(y, torch.Tensor) and y.shape == x.shape,
               tr("return a tensor shaped like x, {shape}.", shape=tuple(x.shape)))
        tiny = (x.detach() > 0) & (x.detach() < 1e-6)
        expect(torch.allclose(y.detach()[~tiny], want[~tiny]),
               tr("at x = {x} the values should be log(x) where x > 0 and 0 elsewhere, {want}; "
                  "got {got}.", x=start, want=want.tolist(), got=y.detach().tolist()))
        if not torch.allclose(y.detach(), want):  # then the values differ at a tiny x > 0
            raise Wrong(tr("at x = {x} the values are wrong only at the tiny x > 0: log(1e-20) is "
                           "{want:.1f}, you give {got:.1f}. A clamp or a small number added to x changes "
                           "log(x) there: change the input of log only where x <= 0.",
                           x=start, want=want[tiny][0].item(), got=y.detach()[tiny][0].item()))
        expect(y.requires_grad, tr("the result does not require grad: keep it a function of x "
                                   "(no `.detach()`, `.data` or `.item()`)."))
        y.sum().backward()
        x_grad = filled(x.grad, tr("the result is not connected to x: keep it a function of x."))
        expect(not torch.isnan(x_grad).any(),
               tr("at x = {x} the gradient has NaN ({grad}): `torch.where` sends 0 to the branch it "
                  "discards, and log's backward makes 0 · (1/0) = NaN there. Make the discarded branch "
                  "safe: take the log of a harmless value where x <= 0 (section 2).",
                  x=start, grad=x_grad.tolist()),
               code=tr("a safe input is `torch.where(x > 0, x, c)`, with a constant c where log is smooth"))
        want_grad = torch.where(x > 0, 1 / x.detach(), 0.0)
        expect(torch.allclose(x_grad, want_grad),
               tr("at x = {x} the gradient should be 1/x where x > 0 and 0 elsewhere, {want}; got {got}.",
                  x=start, want=want_grad.tolist(), got=x_grad.tolist()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pts = torch.tensor([-2.0, -0.5, 0.5, 3.0], dtype=torch.float64, requires_grad=True)
        expect(gradcheck(safe_log, (pts,), raise_exception=False),
               tr("`gradcheck` disagrees with your gradient at points away from 0."))
