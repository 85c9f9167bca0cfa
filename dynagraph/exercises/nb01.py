"""Checks for 01_simple_backward.ipynb."""

from __future__ import annotations

import warnings
from typing import Any

import torch

from . import Wrong, exercise, expect

# What an answer may use: the notebook's imports (tests run stubs and solutions after this).
SETUP = """
import torch
import dynagraph as dg
"""


def _filled(grad: torch.Tensor | None, hint: str) -> torch.Tensor:
    """``grad`` when backward filled it; otherwise the check fails with ``hint``."""
    if grad is None:
        raise Wrong(hint)
    return grad


@exercise("01.1", "the derivative of an elementwise function at many points, with one backward()",
          answer="derivative")
def _derivative(derivative: Any) -> None:
    cases = [  # (f, its analytic derivative, the points)
        (lambda t: 3 * t ** 2 + 2 * t, lambda t: 6 * t + 2, [2.0]),
        (lambda t: 3 * t ** 2 + 2 * t, lambda t: 6 * t + 2, [-1.5, 0.0, 2.0, 4.0]),
        (torch.sin, torch.cos, [0.0, 0.5, 1.0, 3.0]),
        (lambda t: t.exp() * t, lambda t: t.exp() * (t + 1), [-2.0, 0.25, 1.0]),
    ]
    for f, df, points in cases:
        for _ in range(2):  # twice on the same tensor: nothing may carry over
            xs = torch.tensor(points)
            try:
                got = derivative(f, xs)
            except RuntimeError as e:
                expect("implicitly created only for scalar" not in str(e),
                       "`backward()` without an argument works only for a scalar output; f(x) "
                       "here has one value per point: pass `gradient=torch.ones_like(y)` (or call "
                       "`y.sum().backward()`), see section 4.")
                raise
            expect(not xs.requires_grad and xs.grad is None,
                   "your function changed the caller's tensor (`requires_grad_` or `.grad` on "
                   "`xs` itself): make a fresh leaf, `x = xs.clone().requires_grad_()`.")
            expect(isinstance(got, torch.Tensor) and got.shape == xs.shape,
                   f"return a tensor of shape {tuple(xs.shape)} (one derivative per point), got "
                   f"{type(got).__name__} {tuple(getattr(got, 'shape', ()))}.")
            expect(got.grad_fn is None,
                   "the result still carries a graph (`grad_fn`): return the leaf's `.grad`.")
            want = df(torch.tensor(points))
            if torch.allclose(got, want, rtol=1e-5, atol=1e-6):
                continue
            expect(not torch.allclose(got, want, rtol=1e-2, atol=1e-2),
                   f"at x = {points} the derivative is {want.tolist()}, you got {got.tolist()}: "
                   "close, not exact. Finite differences are an approximation; let `backward()` "
                   "compute the derivative.")
            expect(False, f"at x = {points} the derivative is {want.tolist()}, you got "
                          f"{got.tolist()}. `gradient=` weights each output (it is v in v·J): "
                          "for the plain derivative every weight is 1 (section 4).")
    x = torch.tensor([1.0, 2.0])
    expect(not derivative(torch.exp, x).requires_grad, "return a plain tensor, not one that requires grad.")


def _nodes(t: torch.Tensor, tree: bool = False, leaves: bool = True) -> int:
    """The oracle: the nodes reachable from ``t.grad_fn``, each once (or, with ``tree``,
    once per path: the mistake to diagnose); ``leaves=False`` leaves out ``AccumulateGrad``."""
    seen, count, stack = set(), 0, [t.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or (fn in seen and not tree):
            continue
        seen.add(fn)
        count += leaves or type(fn).__name__ != "AccumulateGrad"
        stack.extend(child for child, _ in fn.next_functions)
    return count


@exercise("01.2", "a walk over grad_fn and next_functions that counts every node once",
          answer="count_nodes")
def _count_nodes(count_nodes: Any) -> None:
    x = torch.tensor([1.0], requires_grad=True)
    w = torch.tensor([0.5, -1.0], requires_grad=True)
    c = torch.tensor([3.0])                                     # a constant: no node
    graphs = {
        "2 * x + 1": 2 * x + 1,
        "(x * 2 + 1) * x": (x * 2 + 1) * x,                     # x is used twice
        "c * x + c": c * x + c,
        "((x + 1) * (x + 1)).sin()": ((x + 1) * (x + 1)).sin(),
        "(x * w).exp().sum() + (x * w).sum()": (x * w).exp().sum() + (x * w).sum(),
    }
    for code, t in graphs.items():
        want, got = _nodes(t), count_nodes(t)
        expect(isinstance(got, int) and not isinstance(got, bool),
               f"return the number of nodes as an int, got {type(got).__name__}.")
        if got == want:
            continue
        expect(got != _nodes(t, tree=True),
               f"for `{code}` you counted {got} nodes, but the graph has {want}: a node that two "
               "paths reach (the `AccumulateGrad` of a tensor used twice) was counted once per "
               "path. Keep a set of the nodes already seen.")
        expect(got != _nodes(t, leaves=False),
               f"for `{code}` you counted {got} nodes, but the graph has {want}: the leaves' "
               "`AccumulateGrad` nodes count too (they appear in `next_functions`).")
        expect(False, f"for `{code}` you counted {got} nodes, but the graph has {want}. Follow "
                      "*every* entry of `next_functions` (not only the first), skip the `None` "
                      "entries (inputs that need no gradient), and count each node once.")


@exercise("01.3", "the gradient that reaches an intermediate tensor, kept with retain_grad()",
          answer="h_grad")
def _h_grad(h_grad: Any) -> None:
    for start in ([1.0, 2.0], [-0.5, 0.5, 3.0], [2.0]):
        x = torch.tensor(start, requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = h_grad(x)
        warned = any("not a leaf" in str(w.message) for w in caught)
        expect(got is not None,
               "you returned `None`: `h` is not a leaf, so `backward()` does not keep its "
               "`.grad`. Call `h.retain_grad()` *before* `backward()` (section 7)."
               + (" PyTorch warned you about it." if warned else ""))
        xs = torch.tensor(start)
        want = 2 * xs ** 2                                       # y = sum(h^2): dy/dh = 2h = 2x^2
        expect(isinstance(got, torch.Tensor) and got.shape == x.shape,
               f"return dy/dh, a tensor of shape {tuple(x.shape)}.")
        x_grad = _filled(x.grad, "`x.grad` was not filled: compute `h` from `x` itself (not from "
                                 "a detached copy), then call `y.backward()`.")
        expect(not torch.allclose(got, 2 * want),
               f"at x = {start} you got {got.tolist()}, twice dy/dh = {want.tolist()}: gradients "
               "accumulate, so call `backward()` only once.")
        expect(torch.allclose(got, want),
               f"at x = {start}, dy/dh should be 2h = {want.tolist()}, got {got.tolist()}. Return "
               "the gradient that reached `h` (`h.grad`), not `x.grad`.")
        expect(torch.allclose(x_grad, 4 * xs ** 3),
               f"after one backward(), x.grad should be dy/dx = 4x^3 = {(4 * xs ** 3).tolist()}, "
               f"got {x_grad.tolist()}.")
        expect(not got.requires_grad, "return a plain tensor (`h.grad`), not one with a graph.")


@exercise("01.4", "an SGD step that updates the leaf in place, unrecorded, and clears its gradient",
          answer="sgd_step")
def _sgd_step(sgd_step: Any) -> None:
    for start, lr in (([1.0, -1.0], 0.5), ([3.0, 0.5, -2.0], 0.1)):
        w = torch.tensor(start, requires_grad=True)
        (w ** 2).sum().backward()
        want = w.detach() - lr * 2 * torch.tensor(start)  # d(sum w^2)/dw = 2w
        before = w.data_ptr()
        out = sgd_step(w, lr)
        expect(out is None or out is w,
               "update `w` itself; `sgd_step` should not build and return a new tensor.")
        expect(w.is_leaf and w.grad_fn is None,
               "`w` is no longer a leaf: the update was recorded. Do it under `torch.no_grad()`.")
        expect(w.data_ptr() == before,
               "`w` points at new memory: update it in place (`w -= ...` or `w.sub_(...)`).")
        expect(w.requires_grad, "`w` no longer requires grad; keep it a trainable leaf.")
        expect(torch.allclose(w.detach(), want),
               f"with lr={lr}, w should become {want.tolist()}, got {w.detach().tolist()}: "
               "step against the gradient, w - lr * w.grad.")
        expect(w.grad is None or not w.grad.any(),
               "`w.grad` still holds the old gradient: clear it (`w.grad = None`).")
