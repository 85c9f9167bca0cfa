"""Checks for 10_forward_mode_and_the_graph_of_a_gradient.ipynb."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.autograd.forward_ad as fwAD
from torch import nn

from .._language import N_, tr
from . import Wrong, exercise, expect

# What an answer may use: the notebook's imports (tests run stubs and solutions after this).
SETUP = """
import torch
import torch.autograd.forward_ad as fwAD
from torch import nn
from torch.func import grad, jacfwd, jacrev, jvp, vjp, vmap
import dynagraph as dg
"""

Fn = Callable[[torch.Tensor], torch.Tensor]


def _cases() -> list[tuple[Fn, torch.Tensor, torch.Tensor]]:
    """(f, x, v): functions of other shapes in and out (m != n), float64."""
    def wide(x: torch.Tensor) -> torch.Tensor:  # R^4 -> R^2
        return torch.stack([(x.sin() * x).sum(), x[0] * x[3]])

    def tall(x: torch.Tensor) -> torch.Tensor:  # R^2 -> R^3
        return torch.stack([x[0] ** 2, x[0] * x[1], x[1].exp()])

    def square(x: torch.Tensor) -> torch.Tensor:  # R^3 -> R^3, not symmetric
        return torch.stack([x[0] * x[1], x[1] + x[2] ** 2, x[2].tanh() * x[0]])

    d = torch.float64
    return [(wide, torch.tensor([0.5, -1.0, 2.0, 1.5], dtype=d),
             torch.tensor([1.0, 2.0, 0.0, -1.0], dtype=d)),
            (tall, torch.tensor([0.3, 0.7], dtype=d), torch.tensor([2.0, -1.0], dtype=d)),
            (square, torch.tensor([1.0, 2.0, 3.0], dtype=d), torch.tensor([0.0, 1.0, 1.0], dtype=d))]


@exercise("10.1", N_("J @ v with dual tensors (forward mode)"), answer="jvp_dual")
def _jvp_dual(jvp_dual: Callable[[Fn, torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    for f, x, v in _cases():
        duals: list[bool] = []

        def watched(t: torch.Tensor, f: Fn = f, duals: list[bool] = duals) -> torch.Tensor:
            duals.append(fwAD.unpack_dual(t).tangent is not None)  # called with a dual tensor?
            return f(t)

        got = jvp_dual(watched, x.clone(), v.clone())
        jac = torch.autograd.functional.jacobian(f, x)
        want, out = jac @ v, f(x)
        expect(isinstance(got, torch.Tensor),
               tr("return a tensor (the tangent of f's output), not {type}: unpack_dual(out) gives "
                  "(primal, tangent), and the tangent is None once dual_level() has ended.",
                  type=type(got).__name__))
        expect(got.shape == out.shape,
               tr("for an f with {n} inputs and {m} outputs, J @ v has {m} numbers; you returned shape "
                  "{shape}. v @ J (reverse mode, vjp) would have {n}.",
                  n=x.numel(), m=out.numel(), shape=tuple(got.shape)))
        expect(any(duals),
               tr("f never received a dual tensor: J @ v was not computed in forward mode (a full "
                  "Jacobian from jacobian() or jacrev is reverse mode). Inside fwAD.dual_level(), "
                  "make x carry the tangent v with fwAD.make_dual(x, v), call f, and read the tangent "
                  "of its output with fwAD.unpack_dual."))
        expect(not torch.allclose(got, out) or torch.allclose(want, out),
               tr("you returned f(x), the primal: the tangent is the second part of fwAD.unpack_dual(out)."))
        expect(torch.allclose(got, want),
               tr("the result differs from J @ v (J from torch.autograd.functional.jacobian): "
                  "make_dual(x, v) takes the point first and the direction second."),
               code="with fwAD.dual_level():\n    out = f(fwAD.make_dual(x, v))\n    "
                    "return fwAD.unpack_dual(out).tangent")


@exercise("10.2", N_("the Jacobian row by row: one forward pass, one backward pass per output"),
          answer="jacobian_by_vjp")
def _jacobian_by_vjp(jacobian_by_vjp: Callable[[Fn, torch.Tensor], torch.Tensor]) -> None:
    for f, x, _ in _cases():
        calls = {"f": 0, "backward": 0}

        def counted(t: torch.Tensor, f: Fn = f, calls: dict[str, int] = calls) -> torch.Tensor:
            calls["f"] += 1
            out = f(t)
            if out.requires_grad:  # a hook on the output runs once per backward pass through it
                out.register_hook(lambda g: calls.update(backward=calls["backward"] + 1))
            return out

        got = jacobian_by_vjp(counted, x.clone())
        want = torch.autograd.functional.jacobian(f, x)
        m, n = want.shape
        expect(isinstance(got, torch.Tensor) and got.shape == want.shape,
               tr("return the Jacobian as one tensor of shape (outputs, inputs) = ({m}, {n}); you returned "
                  "{what}. torch.stack(rows) stacks the rows.", m=m, n=n,
                  what=tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__))
        expect(calls["backward"] != 0,
               tr("no backward pass ran: that is forward mode (jacfwd or jvp), one pass per input. "
                  "Build each row with the function vjp returns."))
        expect(calls["f"] == 1,
               tr("f ran {k} times for {m} rows: call vjp(f, x) once, then call the function it "
                  "returns once per row, with a one-hot vector (a row of torch.eye(m)).", k=calls["f"], m=m))
        expect(calls["backward"] == m,
               tr("{k} backward passes ran for {m} rows: each row is one vector-Jacobian product, its own "
                  "backward pass (jacrev without chunk_size batches them into one with vmap).",
                  k=calls["backward"], m=m))
        expect(not (m == n and torch.allclose(got, want.T) and not torch.allclose(got, want)),
               tr("you returned the transpose: row i of J is u @ J for u the i-th one-hot vector."))
        expect(torch.allclose(got, want),
               tr("the rows differ from the Jacobian: row i is pullback(e_i) with e_i the i-th row of "
                  "torch.eye(m), m the number of outputs."),
               code="out, pullback = vjp(f, x)\n"
                    "return torch.stack([pullback(e)[0] for e in torch.eye(out.numel())])")


def _penalty_oracle(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The penalty and its gradient for each parameter, by torch.func (no autograd.grad)."""
    from torch.func import functional_call, grad, vmap

    params = dict(model.named_parameters())

    def penalty(p: dict[str, torch.Tensor]) -> torch.Tensor:
        def out(xi: torch.Tensor) -> torch.Tensor:
            return functional_call(model, p, (xi[None],)).sum()
        slopes = vmap(grad(out))(x)
        return ((slopes.norm(dim=1) - 1) ** 2).mean()

    value = penalty({k: v.detach() for k, v in params.items()})
    grads = grad(penalty)({k: v.detach() for k, v in params.items()})
    return value, [grads[k] for k in params]


@exercise("10.3", N_("a gradient penalty you can backpropagate (double backward)"), answer="gradient_penalty")
def _gradient_penalty(gradient_penalty: Callable[[nn.Module, torch.Tensor], torch.Tensor]) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1)).double()
    x = torch.randn(5, 3, dtype=torch.float64)
    given = x.clone()
    want, want_grads = _penalty_oracle(model, x)
    got = gradient_penalty(model, x)
    expect(torch.equal(x, given) and not x.requires_grad,
           tr("your answer changed the x it was given: work on a copy that requires grad, "
              "x.detach().requires_grad_()."))
    expect(isinstance(got, torch.Tensor) and got.dim() == 0,
           tr("return one number as a 0-dim tensor (the mean over the samples), not {what}.",
              what=tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__))
    expect(got.grad_fn is not None,
           tr("the penalty has no graph, so training cannot backpropagate it: pass create_graph=True to "
              "torch.autograd.grad, so that the slopes are computed with a graph."))
    expect(torch.allclose(got, want),
           tr("the penalty is {got:.4g}, the check computes {want:.4g}: the slope of each sample is the "
              "gradient of model(x).sum() with respect to x (one row per sample); take each row's norm, "
              "subtract 1, square, and average.", got=got.item(), want=want.item()))
    params = list(model.parameters())
    try:
        got_grads = torch.autograd.grad(got, params, allow_unused=True)
    except RuntimeError as e:
        raise Wrong(tr("backpropagating your penalty failed: {message}", message=str(e)[:200])) from e
    # (the last bias does not change any slope: no gradient, or zeros)
    expect(all(torch.allclose(torch.zeros_like(w) if g is None else g, w)
               for g, w in zip(got_grads, want_grads)),
           tr("the penalty's gradients for the weights differ from torch.func's: the slopes must come "
              "from the same model(x) the penalty is for, with create_graph=True."))
