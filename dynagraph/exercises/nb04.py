"""Checks for 04_custom_threshold_relu.ipynb."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.autograd import gradcheck, gradgradcheck

from .._language import N_, tr
from . import AUTOGRAD_FUNCTION, exercise, expect, filled

# What an answer may use: the notebook's imports (tests run stubs and solutions after this).
SETUP = """
import torch
from torch.autograd import Function, gradcheck
import dynagraph as dg
"""


def _points(seed: int, n: int, threshold: float = 0.0) -> torch.Tensor:
    """Random float64 points, none closer than 0.1 to ``threshold`` (the jump)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, generator=g, dtype=torch.float64) * 4 + threshold
    return torch.where((x - threshold).abs() < 0.1, x + 0.5, x)


def _weights(seed: int, n: int) -> torch.Tensor:
    """Upstream gradients that are not all ones, so a backward must use ``grad_output``."""
    return torch.randn(n, generator=torch.Generator().manual_seed(seed + 100), dtype=torch.float64)


def _grad(fn: Callable[..., torch.Tensor], x: torch.Tensor, w: torch.Tensor, *args: Any) -> torch.Tensor:
    """d/dx of sum(fn(x, *args) * w), through the answer's backward."""
    x = x.clone().requires_grad_()
    (fn(x, *args) * w).sum().backward()
    return filled(x.grad, tr("x.grad was not filled: `backward` must return a gradient for x."))


def _first(t: torch.Tensor) -> str:
    """The first three values of ``t``, rounded for a hint: ``[6.164, -1.174, -8.715, ...]``."""
    return "[" + ", ".join(f"{v:.3f}" for v in t[:3].tolist()) + ", ...]"


def _count_gradients_error(e: RuntimeError) -> None:
    """Fail with a hint when ``e`` is PyTorch refusing what ``backward`` returned: too few or too
    many gradients, or a tensor for the threshold, which is a Python float."""
    expect("forward input was not a Variable" not in str(e),
           tr("The threshold is a Python float, not a tensor: its gradient must be `None`. "
              "`None` tells autograd \"zero: nothing to add\" (section 4)."),
           code="`return grad_x, None`")
    expect("incorrect number of gradients" not in str(e),
           tr("`backward` must return one gradient per input of `forward`, in order. The "
              "threshold is an input too, and its gradient is 0 except at the jump (section 4)."),
           code="`return grad_x, None`")


@exercise("04.1", N_("the backward of y = x**2, checked by gradcheck and gradgradcheck"), answer="Square",
          kind=AUTOGRAD_FUNCTION)
def _square(Square: Any) -> None:
    for seed in range(3):
        x, w = _points(seed, 5), _weights(seed, 5)
        y = Square.apply(x.clone().requires_grad_())
        expect(torch.allclose(y, x * x), tr("keep the forward as it was: `Square` must compute x * x."))
        got = _grad(Square.apply, x, w)
        expect(got is not None and got.shape == x.shape,
               tr("`backward` must return a gradient shaped like x."))
        expect(not torch.allclose(got, 2 * x),
               tr("your gradient ignores `grad_output`. The chain rule multiplies the local "
                  "derivative by the gradient that arrives from above."),
               code=tr("`x, = ctx.saved_tensors`, then `local_derivative * grad_output`"))
        expect(not torch.allclose(got, x * w), tr("you return x * grad_output, but d(x²)/dx is 2x."))
        expect(torch.allclose(got, 2 * x * w),
               tr("d(x²)/dx is 2x, times grad_output. At x = {x} autograd gets {want}, you {got}.",
                  x=_first(x), want=_first(2 * x * w), got=_first(got)))
    x = _points(7, 4).requires_grad_()
    expect(gradcheck(Square.apply, (x,), raise_exception=False),
           tr("`gradcheck` disagrees with your backward: compare it with finite differences."))
    expect(gradgradcheck(Square.apply, (x,), raise_exception=False),
           tr("first derivatives are right, but second derivatives are not (`gradgradcheck` "
              "fails). Autograd must be able to differentiate your backward in float64. Compute it "
              "with torch ops on the saved `x`, without `.detach()`, `.data`, `.item()`, NumPy, "
              "`torch.no_grad()` or a float32 copy."))


@exercise("04.2", N_("LeakyThreshold's true derivative in backward"), answer="LeakyThreshold",
          kind=AUTOGRAD_FUNCTION)
def _leaky(LeakyThreshold: Any) -> None:
    for seed, t in enumerate((5.0, -1.0, 0.0)):
        x, w = _points(seed, 8, t), _weights(seed, 8)
        want = torch.where(x > t, w, 0.1 * w)
        try:
            got = _grad(LeakyThreshold.apply, x, w, t)
        except RuntimeError as e:
            _count_gradients_error(e)
            raise
        expect(not torch.allclose(got, torch.where(x > t, w, 0.0)),
               tr("below the threshold LeakyThreshold is 0.1 * x, so its slope there is 0.1, "
                  "not 0: that was ThresholdReLU's backward."))
        expect(not torch.allclose(got, torch.where(x > t, 1.0, 0.1).to(x.dtype)),
               tr("your gradient ignores `grad_output`: multiply the local slope (1 or 0.1) by it."))
        expect(torch.allclose(got, want),
               tr("with threshold {t}, the local slope is 1 above the threshold and 0.1 below "
                  "it. Check two things: both sides are multiplied by grad_output, and x is "
                  "compared with the threshold that forward got, `ctx.threshold`.", t=t),
               code=tr("`torch.where(x > ctx.threshold, a, b)` picks `a` above the threshold, `b` below it"))
    x = _points(9, 6, 5.0).requires_grad_()
    expect(gradcheck(lambda v: LeakyThreshold.apply(v, 5.0), (x,), raise_exception=False),
           tr("`gradcheck` disagrees with your backward (float64 points away from the threshold)."))


@exercise("04.3", N_("LeakyThreshold in the setup_context style, under vmap(grad(...))"),
          answer="LeakyThreshold2", kind=AUTOGRAD_FUNCTION)
def _leaky2(LeakyThreshold2: Any) -> None:
    for seed, t in enumerate((5.0, -1.0)):
        batch = torch.stack([_points(seed + 10 * k, 3, t) for k in range(4)])
        w = torch.stack([_weights(seed + 10 * k, 3) for k in range(4)])  # upstream gradients, not ones
        oracle = torch.func.vmap(torch.func.grad(
            lambda r, v, t=t: (torch.where(r > t, r, 0.1 * r) * v).sum()))
        per_row = torch.func.vmap(torch.func.grad(lambda r, v, t=t: (LeakyThreshold2.apply(r, t) * v).sum()))
        try:
            got = per_row(batch, w)
        except RuntimeError as e:
            expect("setup_context" not in str(e),
                   tr("`torch.func` transforms need the new style: a `forward` that only computes, "
                      "without `ctx`, and a separate `setup_context` that saves what `backward` "
                      "needs (section 7)."),
                   code=tr("`def forward(x, threshold): ...` and "
                           "`def setup_context(ctx, inputs, output): ...`"))
            expect("generate_vmap_rule" not in str(e),
                   tr("vmap needs a batching rule: ask PyTorch to derive it from the ops you used "
                      "(section 7)."),
                   code=tr("`generate_vmap_rule = True`, a class attribute"))
            _count_gradients_error(e)
            raise
        expect(not torch.allclose(got, torch.where(batch > t, 1.0, 0.1).to(batch.dtype)),
               tr("your gradient ignores `grad_output`: multiply the local slope (1 or 0.1) by it."))
        expect(torch.allclose(got, oracle(batch, w)),
               tr("per-row gradients with threshold {t} differ from autograd through built-in "
                  "ops. The local slope is 1 above the threshold and 0.1 below it, and both sides "
                  "are multiplied by grad_output. Does `backward` compare the saved *input* x (not "
                  "the output) with the threshold?", t=t))
        values = LeakyThreshold2.apply(batch, t)
        expect(torch.allclose(values, torch.where(batch > t, batch, 0.1 * batch)),
               tr("the forward values are wrong: y = where(x > t, x, 0.1 * x)."))
    x = _points(3, 6, 5.0).requires_grad_()
    expect(gradcheck(lambda v: LeakyThreshold2.apply(v, 5.0), (x,), raise_exception=False),
           tr("`gradcheck` disagrees with your backward (float64 points away from the threshold)."))
