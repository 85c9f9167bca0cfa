"""Checks for 11_mixed_precision_and_the_memory_of_a_step.ipynb."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from .._language import N_, tr, translated
from . import exercise, expect

# What an answer may use: the notebook's imports (tests run stubs and solutions after this).
SETUP = """
import torch
import torch.nn.functional as F
from torch import nn
import dynagraph as dg
"""


def _state_bytes(model: nn.Module) -> int:
    """Bytes of Adam's state for ``model`` after one step: the oracle."""
    opt = torch.optim.Adam(model.parameters())
    model(torch.ones(2, 8, dtype=next(model.parameters()).dtype)).sum().backward()
    opt.step()
    return sum(v.nbytes for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor))


def _models() -> dict[str, Callable[[], nn.Module]]:
    def frozen() -> nn.Module:
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        model[0].requires_grad_(False)  # the first layer is frozen: no gradient, no state
        return model

    def double() -> nn.Module:
        return nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 4)).double()

    return {N_("an MLP 8-16-4"): lambda: nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)),
            N_("an MLP whose first layer is frozen (requires_grad=False)"): frozen,
            N_("an MLP in float64"): double}


@exercise("11.1", N_("the bytes of Adam's state, from the parameters alone"), answer="adam_state_bytes")
def _adam_state_bytes(adam_state_bytes: Callable[[nn.Module], int]) -> None:
    for name, make in _models().items():
        torch.manual_seed(0)
        model = make()
        got = adam_state_bytes(model)
        expect(all(p.grad is None for p in model.parameters()),
               tr("your answer ran a backward pass: count from the parameters alone."))
        want = _state_bytes(copy.deepcopy(model))
        expect(isinstance(got, int) and not isinstance(got, bool),
               tr("return an int (bytes), not {type}.", type=type(got).__name__))
        expect(got == want,
               tr("for {case} Adam keeps {want:,} bytes of state; you counted {got:,}. For each parameter "
                  "that trains, Adam keeps exp_avg and exp_avg_sq (each the parameter's size, in its dtype) "
                  "and a 0-dim float32 step count. A frozen parameter gets no gradient and no state.",
                  case=translated(name), want=want, got=got),
               code="p.numel() * p.element_size()")


def _deep() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(*[m for _ in range(10) for m in (nn.Linear(32, 32), nn.Tanh())])


def _reference(model: nn.Module, x: torch.Tensor, opt: Any, scaler: Any) -> None:
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        out = model(x)
    loss = out.float().pow(2).mean() * 1e-4
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()


@exercise("11.2", N_("one float16 training step with GradScaler"), answer="scaled_step")
def _scaled_step(scaled_step: Callable[..., Any]) -> None:
    x = torch.randn(64, 32, generator=torch.Generator().manual_seed(0))
    runs = []
    for step in (scaled_step, _reference):
        model = _deep()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 36)  # too large: the first step overflows
        before = [p.detach().clone() for p in model.parameters()]
        scales, moved = [], []
        for _ in range(3):
            step(model, x, opt, scaler)
            scales.append(scaler.get_scale())
            moved.append(not all(torch.equal(a, b) for a, b in zip(before, model.parameters())))
            before = [p.detach().clone() for p in model.parameters()]
        runs.append((scales, moved, [p.detach() for p in model.parameters()]))
    (scales, moved, params), (want_scales, want_moved, want_params) = runs
    expect(scales == want_scales,
           tr("the scale after each step was {got}; GradScaler gives {want}. At the first scale, 2**36, "
              "some scaled gradients overflow float16, so scaler.step skips that step and "
              "scaler.update() halves the scale once. Call scaler.update() after scaler.step(opt), and "
              "compute the loss in float32 (out.float()): a float16 loss times the scale overflows at "
              "every step.", got=scales, want=want_scales),
           code="scaler.step(opt)\nscaler.update()")
    expect(moved == want_moved,
           tr("the parameters changed at steps {got} (True: changed); with GradScaler they change at "
              "{want}: a step whose gradients hold inf or NaN is skipped. Step through "
              "scaler.step(opt), not opt.step().", got=moved, want=want_moved),
           code="scaler.scale(loss).backward()\nscaler.step(opt)")
    expect(all(torch.allclose(a, b, rtol=1e-3, atol=1e-7) for a, b in zip(params, want_params)),
           tr("the parameters differ from GradScaler's recipe: zero the gradients, run the forward "
              "under torch.autocast('cpu', dtype=torch.float16), compute the loss in float32, backward "
              "on scaler.scale(loss), then scaler.step(opt) and scaler.update()."))


def _sgd_reference(x: torch.Tensor, lr: float) -> list[torch.Tensor]:
    model = _small()
    model(x).pow(2).mean().backward()
    return [(p - lr * p.grad).detach() for p in model.parameters() if p.grad is not None]


def _small() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))


@exercise("11.3", N_("an SGD step inside backward that frees each gradient"), answer="step_in_backward")
def _step_in_backward(step_in_backward: Callable[[nn.Module, float], Any]) -> None:
    from ..step_memory import step_memory
    x = torch.randn(32, 16, generator=torch.Generator().manual_seed(0))
    model = _small()
    handles = step_in_backward(model, 0.1)
    try:
        expect(isinstance(handles, (list, tuple)) and handles and all(hasattr(h, "remove") for h in handles),
               tr("return the list of hook handles (what register_post_accumulate_grad_hook returns), "
                  "so that the hooks can be removed."))
        expect(all(p.grad is None for p in model.parameters()),
               tr("registering the hooks should not run backward: the gradients must still be None."))
        model(x).pow(2).mean().backward()
        want = _sgd_reference(x, 0.1)
        expect(all(p.grad is None for p in model.parameters()),
               tr("after backward some .grad is still set: the hook should free each gradient once it "
                  "has used it (p.grad = None)."), code="p.grad = None")
        expect(all(torch.allclose(p, w, atol=1e-6) for p, w in zip(model.parameters(), want)),
               tr("the parameters after backward are not p - lr * p.grad: update each parameter in its "
                  "hook, in place, under torch.no_grad()."), code="p.add_(p.grad, alpha=-lr)")
        mem = step_memory(lambda: model(x).pow(2).mean().backward(), device="cpu")
        total = sum(p.nbytes for p in model.parameters())
        expect(mem.most("gradients") < total,
               tr("all the gradients were alive at once ({most:,} bytes): free each one in its own hook.",
                  most=mem.most("gradients")))
    finally:
        for h in handles if isinstance(handles, (list, tuple)) else ():
            if hasattr(h, "remove"):
                h.remove()
