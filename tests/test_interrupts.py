"""An interrupt at any line of a block's entry or exit leaves torch as it was.

A tracer (``sys.settrace``) raises ``KeyboardInterrupt`` at the N-th line that runs in
dynagraph's own files, for N = 1, 2, ... until the entry or exit finishes before the
N-th line. After each one: ``Function.apply`` is torch's, no global or model hook and
no torch function mode is left, torch function and grad mode are as they were, and
the next block records as a clean one does.
"""

import contextlib
import gc
import importlib
import os
import sys
import threading

import pytest
import torch
from torch import nn
from torch.autograd.function import Function

import dynagraph as dg

from _helpers import Square

PACKAGE = os.path.dirname(dg.__file__) + os.sep
backward_module = importlib.import_module("dynagraph.backward")
GLOBAL_HOOKS = ("_global_forward_pre_hooks", "_global_forward_hooks", "_global_forward_hooks_always_called",
                "_global_backward_pre_hooks", "_global_backward_hooks")
MODEL_HOOKS = ("_forward_pre_hooks", "_forward_hooks", "_forward_hooks_always_called",
               "_backward_pre_hooks", "_backward_hooks")


class Squares(nn.Module):
    def forward(self, x):
        return Square.apply(x)


def tiny():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(2, 2), Squares())


TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
# torch's and contextlib's code on the paths dynagraph calls into: file -> the functions traced
CALLED = {os.path.join(TORCH_DIR, "nn", "modules", "module.py"): {
              "register_module_forward_pre_hook", "register_module_forward_hook",
              "register_forward_pre_hook", "register_forward_hook"},
          os.path.join(TORCH_DIR, "utils", "hooks.py"): {"__init__", "remove"},
          os.path.join(TORCH_DIR, "autograd", "grad_mode.py"): {"__init__", "__enter__", "__exit__"},
          contextlib.__file__: {"__enter__", "__exit__", "helper", "__init__"}}
BY_OPCODE = (os.path.join(PACKAGE, "_guards.py"), os.path.join(PACKAGE, "_patch.py"))  # where a guard is entered and noted: every bytecode


def in_reach(code):
    """Whether an interrupt may be injected in ``code``: dynagraph's own, or torch's and
    contextlib's functions that dynagraph calls (register a hook, enter grad mode, a
    ``contextmanager``'s enter and exit)."""
    names = CALLED.get(code.co_filename)
    return code.co_filename.startswith(PACKAGE) or (names is not None and code.co_name in names)


class Interrupt:
    """A trace function that raises KeyboardInterrupt at the ``n``-th 'line' event in the
    code :func:`in_reach` names, and at the ``n``-th bytecode in :data:`BY_OPCODE`'s files
    (where CPython may deliver a signal between two bytecodes of one line); then torch
    unsets it, as it does any tracer that raises."""

    def __init__(self, n):
        self.n, self.seen, self.where = n, 0, None

    def __call__(self, frame, event, arg):
        if not in_reach(frame.f_code):
            return None
        frame.f_trace_opcodes = frame.f_code.co_filename in BY_OPCODE
        return self.line

    def line(self, frame, event, arg):
        if event == ("opcode" if frame.f_trace_opcodes else "line"):
            self.seen += 1
            if self.seen == self.n:
                self.where = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
                if frame.f_trace_opcodes:
                    self.where += f" (bytecode {frame.f_lasti})"
                raise KeyboardInterrupt(f"injected at {self.where}")
        return self.line


def traced(n, action):
    """Run ``action(on)``, where ``on(f, *args)`` calls ``f`` with an interrupt due at the
    ``n``-th line (counted over all its calls); return where it landed (``None``: none did)."""
    tracer = Interrupt(n)

    def on(f, *args):
        before = sys.gettrace()
        sys.settrace(tracer)
        try:
            return f(*args)
        finally:
            sys.settrace(before)

    try:
        action(on)
    except KeyboardInterrupt:
        assert tracer.where is not None, "a KeyboardInterrupt that the test did not inject"
    return tracer.where


def torch_state(model):
    """What a block may change in torch and in ``model``, as comparable values."""
    m = nn.modules.module
    apply = Function.__dict__["apply"]
    return {"apply": (type(apply).__name__, apply.__func__.__module__, apply.__func__.__qualname__),
            "modes": torch.overrides._get_current_function_mode_stack(),
            "torch function on": torch._C._is_torch_function_enabled(),
            "grad on": torch.is_grad_enabled(), "inference mode": torch.is_inference_mode_enabled(),
            "garbage collector on": gc.isenabled(),  # paused while dynagraph walks
            "engine entry": torch.autograd._engine_run_backward,  # track_passes watches it
            "global hooks": [list(getattr(m, name)) for name in GLOBAL_HOOKS],
            "model hooks": [list(getattr(mod, name)) for mod in model.modules() for name in MODEL_HOOKS]}


def phases(block, body):
    """Entry, body, exit, and exit with an exception in flight: each an action whose
    part named by the phase runs traced (the rest as a ``with`` statement runs it)."""
    def entry(on):
        on(block().__enter__)  # an interrupted entry runs no exit: the block must undo itself

    def inside(on):
        cm = block()
        value = cm.__enter__()
        try:
            on(body, value)
        except KeyboardInterrupt as e:  # Ctrl-C in the user's loop: the with statement exits
            cm.__exit__(type(e), e, None)
            raise
        cm.__exit__(None, None, None)

    def exit_(error):
        def run(on):
            cm = block()
            body(cm.__enter__())
            on(cm.__exit__, *((type(error), error, None) if error else (None, None, None)))
        return run

    return {"entry": entry, "body": inside, "exit": exit_(None),
            "exit while raising": exit_(RuntimeError("boom"))}


def interrupt_everywhere(block, body, model, then):
    """Interrupt each phase of ``block`` at every line; after each, check that torch and
    ``model`` are as before and call ``then()`` (the next block must work)."""
    before = torch_state(model)
    assert before["apply"] == ("classmethod", "torch.autograd.function", "Function.apply")
    assert before["modes"] == []
    landed = {}
    for phase, action in phases(block, body).items():
        n = 0
        while (where := traced(n := n + 1, action)) is not None:
            assert torch_state(model) == before, f"{phase}: interrupt at {where} left something behind"
            then()
        landed[phase] = n - 1
    assert all(landed.values()), landed
    return landed


def custom_function_works():
    x = torch.tensor([1.0, -2.0], requires_grad=True)
    y = Square.apply(x)
    y.sum().backward()
    assert torch.equal(y, x.detach() ** 2) and torch.equal(x.grad, 2 * x.detach())


def test_an_interrupt_anywhere_in_live_leaves_nothing_behind():
    model = tiny()

    def record():
        with dg.live(model) as rec:
            model(torch.ones(1, 2)).sum()
        return [(s.op, s.module) for s in rec.steps]

    expected = record()
    assert ("Square.apply", "1") in expected  # the custom Function is one step

    def then():
        assert record() == expected
        custom_function_works()

    def body(rec):
        model(torch.ones(1, 2)).sum()

    interrupt_everywhere(lambda: dg.live(model), body, model, then)


def module_tags(model):
    with dg.track_modules(model):
        out = model(torch.ones(1, 2)).sum()
    return sorted((n.name, n.module) for n in dg.draw(out, params=model).nodes)


def test_an_interrupt_anywhere_in_track_modules_leaves_nothing_behind():
    model = tiny()
    expected = module_tags(model)
    assert ("AddmmBackward0", "0") in expected

    def then():
        assert module_tags(model) == expected
        custom_function_works()

    interrupt_everywhere(lambda: dg.track_modules(model), lambda m: m(torch.ones(1, 2)), model, then)


def derivative_orders():
    x = torch.tensor([0.5, -1.0], requires_grad=True)
    with dg.track_passes():
        g, = torch.autograd.grad((x.sin() * x).sum(), x, create_graph=True)
    return sorted({n.derivative for n in dg.draw(g).nodes if n.kind == "op"})


def test_an_interrupt_anywhere_in_track_passes_leaves_torch_s_engine_entry():
    model = tiny()
    assert derivative_orders() == [0, 1]

    def then():
        assert derivative_orders() == [0, 1]
        custom_function_works()

    def body(_):
        x = torch.tensor([0.5], requires_grad=True)
        torch.autograd.grad((x * x).sum(), x, create_graph=True)

    landed = interrupt_everywhere(lambda: dg.track_passes(), body, model, then)
    assert landed["entry"] >= 4 and landed["exit"] >= 4, landed  # the injection reached the patch


def test_an_interrupt_anywhere_in_trace_backward_leaves_no_hook_that_fires(monkeypatch):
    model = tiny()
    loss = model(torch.ones(1, 2)).sum()
    fired = []
    hook = backward_module._hook

    def counted(*args):  # every hook trace_backward adds, counted as it fires
        inner = hook(*args)

        def run(grad_inputs, grad_outputs):
            fired.append(1)
            return inner(grad_inputs, grad_outputs)
        return run

    monkeypatch.setattr(backward_module, "_hook", counted)

    def traced_backward():
        with dg.trace_backward(loss, params=model) as bt:
            loss.backward(retain_graph=True)
        return bt.order, bt.edge_norms

    expected = traced_backward()
    assert expected[0] and expected[1]

    def then():
        fired.clear()
        loss.backward(retain_graph=True)  # no hook of an interrupted block may still run
        assert fired == []
        assert traced_backward() == expected
        custom_function_works()

    interrupt_everywhere(lambda: dg.trace_backward(loss, params=model),
                         lambda bt: loss.backward(retain_graph=True), model, then)


@pytest.mark.parametrize("phase", ["entry", "exit"])
def test_the_injection_reaches_the_patch(phase):
    """The tracer does interrupt live() where it patches torch (else the test above
    could pass without ever landing there)."""
    model = tiny()
    action = phases(lambda: dg.live(model), lambda rec: None)[phase]
    landed = set()
    n = 0
    while (where := traced(n := n + 1, action)) is not None:
        landed.add(where.split(":")[0])
    assert "_patch.py" in landed and "live.py" in landed


def test_paused_gc_pauses_the_collector_and_puts_it_back_as_it_found_it():
    from dynagraph import _guards
    assert gc.isenabled()
    assert _guards.paused_gc(gc.isenabled) is False
    assert gc.isenabled()
    with pytest.raises(ZeroDivisionError):
        _guards.paused_gc(lambda: 1 / 0)
    assert gc.isenabled()  # on again after an error
    assert _guards.paused_gc(_guards.paused_gc, gc.isenabled) is False and gc.isenabled()  # nested
    gc.disable()
    try:
        _guards.paused_gc(lambda: None)
        assert not gc.isenabled()  # the user's own pause stays
    finally:
        gc.enable()


def test_an_interrupt_anywhere_in_paused_gc_leaves_the_collector_on():
    from dynagraph import _guards
    n = 0
    while (where := traced(n := n + 1, lambda on: on(_guards.paused_gc, lambda: None))) is not None:
        assert gc.isenabled(), f"an interrupt at {where} left the garbage collector off"
    assert n > 3  # it did land inside


@pytest.mark.parametrize("guard", ["lock", "torch function off", "grad on"])
def test_an_interrupt_at_any_bytecode_of_a_guard_leaves_it_exited(guard):
    """CPython delivers a signal between two bytecodes, even between ``__enter__``
    returning and the append that notes it: a guard noted a bytecode late stayed entered
    (a lock held, so every later live() hung; torch function off on the thread)."""
    from dynagraph import _guards, _patch, _torch
    lock = threading.Lock()
    run = {"lock": lambda on: on(_guards.guarded, lock, lambda: None),
           "torch function off": lambda on: on(_guards.guarded, _torch.no_torch_function(), lambda: None),
           "grad on": lambda on: on(_patch.grad_on, lambda: None)}[guard]
    n = 0
    with torch.no_grad():
        while (where := traced(n := n + 1, run)) is not None:
            assert not lock.locked(), f"an interrupt at {where} left the lock held"
            assert torch._C._is_torch_function_enabled(), f"an interrupt at {where} left torch function off"
            assert not torch.is_grad_enabled(), f"an interrupt at {where} left grad mode on"
    assert n > 10  # it landed on every bytecode


def test_a_live_hook_whose_handle_torch_lost_is_found_and_removed():
    """torch's register_module_forward_pre_hook stores the hook, then returns its handle:
    an interrupt between the two lost the handle, and every later live(model) entered
    each module twice and left once."""
    from dynagraph import _patch
    model = tiny()
    pre_hooks = nn.modules.module._global_forward_pre_hooks

    def record():
        with dg.live(model) as rec:
            model(torch.ones(1, 2)).sum()
        return [(s.op, s.module) for s in rec.steps]

    clean = record()
    assert clean == [("ones", None), ("linear", "0"), ("Square.apply", "1"), ("sum", None)]
    nn.modules.module.register_module_forward_pre_hook(_patch._pre_hook)  # a handle lost
    try:
        assert record() == clean
        assert not any(h is _patch._pre_hook for h in pre_hooks.values())  # removed with live's own
    finally:
        for key in [k for k, h in pre_hooks.items() if h is _patch._pre_hook]:
            del pre_hooks[key]
