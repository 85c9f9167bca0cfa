"""Checks for 05_dynamic_depth.ipynb."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from .._language import N_, tr, translated
from ..draw import draw
from . import exercise, expect
from ._backward import BackwardRefused as _BackwardRefused
from ._backward import no_backward as _no_backward

# What an answer may use: the notebook's imports (tests run stubs and solutions after this).
SETUP = """
import torch
import torch.nn.functional as F
from torch import nn
import dynagraph as dg
"""


class _DynamicDepthNet(nn.Module):
    """The notebook's model: ``max_depth`` Linear+ReLU layers, a linear head, a per-sample loop."""

    def __init__(self, dim: int, max_depth: int):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(dim, dim) for _ in range(max_depth))
        self.head = nn.Linear(dim, 1)

    def forward_one(self, x: torch.Tensor, depth: int) -> torch.Tensor:
        h = x
        for layer in self.layers[:depth]:
            h = torch.relu(layer(h))
        return self.head(h)

    def forward(self, x: torch.Tensor, depths: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.forward_one(x[i:i + 1], d) for i, d in enumerate(depths.tolist())])


def _grad(t: torch.Tensor) -> torch.Tensor:
    """``t.grad``, which the reference backward pass has just filled."""
    if t.grad is None:
        raise RuntimeError("the reference backward pass left no gradient")  # a bug in the check itself
    return t.grad


_PRODUCTS = frozenset({"mm", "addmm", "bmm", "baddbmm", "matmul"})  # the ATen matrix products


class _ProductRows(TorchDispatchMode):
    """Records the rows of every matrix product that outputs ``width`` columns, however the
    answer called it (``layer(h)``, ``F.linear``, ``@``): the work each layer really did."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.width = width
        self.rows: list[int] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if name in _PRODUCTS and isinstance(out, torch.Tensor) and out.shape[-1] == self.width:
            self.rows.append(out.numel() // self.width)
        return out


class _TorchCalls(TorchFunctionMode):
    """Records the name of every torch function called inside the block."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.names.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


def _model(dim: int, max_depth: int, seed: int) -> _DynamicDepthNet:
    torch.manual_seed(seed)
    return _DynamicDepthNet(dim, max_depth)


@exercise("05.1", N_("predicting which parameters a batch of depths leaves without a gradient"),
          answer="never_reached")
def _never_reached(never_reached: Any) -> None:
    cases = [([1, 2, 2, 1], 5), ([3, 1], 3), ([1], 4), ([4, 2, 4], 6), ([2, 5, 1, 3], 5)]
    for depths_list, max_depth in cases:
        model = _model(2, max_depth, seed=0)
        depths = torch.tensor(depths_list)
        with _no_backward() as attempts:
            try:
                predicted = never_reached(model, depths)
            except _BackwardRefused:
                predicted = None
        expect(not attempts and all(p.grad is None for p in model.parameters()),
               tr("`never_reached` started a backward pass (on the model or on a copy of it): the "
                  "question asks you to predict, from `depths` and the model's layers alone."))
        x = torch.randn(len(depths_list), 2)
        F.mse_loss(model(x, depths), torch.zeros(len(depths_list), 1)).backward()
        want = [name for name, p in model.named_parameters() if p.grad is None]  # the reference
        expect(isinstance(predicted, (list, tuple)) and all(isinstance(n, str) for n in predicted),
               tr("Return a list of parameter names such as 'layers.4.weight', got {got!r}.", got=predicted))
        expect(list(predicted) == want,
               tr("With depths {depths} and {layers} layers, backward leaves {want} without a "
                  "gradient; you predicted {got}. Layer i runs when some sample has depth > i "
                  "(section 3's rule); list weight and bias, in `named_parameters()` order.",
                  depths=depths_list, layers=max_depth, want=want, got=list(predicted)))


@exercise("05.2", N_("a batched forward that runs each layer on the still-active rows only"),
          answer="forward_active_rows")
def _forward_active_rows(forward_active_rows: Any) -> None:
    cases = [([1, 3, 2, 5, 4, 1], 5, 0), ([2, 2, 2], 4, 1), ([1, 1, 3, 2], 3, 2), ([1, 2], 4, 3)]
    for depths_list, max_depth, seed in cases:
        model = _model(3, max_depth, seed)
        depths = torch.tensor(depths_list)
        x = torch.randn(len(depths_list), 3, requires_grad=True)
        y = torch.randn(len(depths_list), 1)
        want, want_grads, want_x = _loop_reference(model, x, y, depths)
        got, rows_seen, product_rows = _run_watching_rows(forward_active_rows, model, x, depths)
        expect(isinstance(got, torch.Tensor) and got.shape == want.shape,
               tr("The output should have the loop's shape {shape} (one row per sample, after the "
                  "head), got {got!r}.", shape=tuple(want.shape), got=getattr(got, "shape", got)))
        _check_rows(depths_list, max_depth, rows_seen, product_rows)
        expect(torch.allclose(got, want, atol=1e-6),
               tr("With depths {depths} the outputs differ from the loop's by {diff:.2g}: a row is "
                  "still active in layer i when its depth is > i; put the layer's output back with "
                  "`index_copy` and apply the head last.", depths=depths_list,
                  diff=(got - want).abs().max().item()))
        F.mse_loss(got, y).backward()
        for name, g in want_grads.items():
            p = model.get_parameter(name)
            expect(p.grad is not None and torch.allclose(p.grad, g, atol=1e-6),
                   tr("The gradient of {name} differs from the loop's: keep every step inside autograd "
                      "(no `.data`, no in-place writes into `x`).", name=name))
        expect(x.grad is not None and torch.allclose(x.grad, want_x, atol=1e-6),
               tr("The gradient with respect to the input `x` differs from the loop's: inactive rows "
                  "must pass through unchanged, and nothing may be detached."))


def _loop_reference(model: _DynamicDepthNet, x: torch.Tensor, y: torch.Tensor, depths: torch.Tensor
                    ) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor]:
    """The reference: the per-sample loop's output, its parameters' gradients and the
    input's gradient (every gradient then cleared)."""
    want = model(x, depths)
    F.mse_loss(want, y).backward()
    want_grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    want_x = _grad(x).clone()
    model.zero_grad(set_to_none=True)
    x.grad = None
    return want, want_grads, want_x


def _run_watching_rows(forward_active_rows: Any, model: _DynamicDepthNet, x: torch.Tensor,
                       depths: torch.Tensor) -> tuple[Any, list[tuple[int, int]], list[int]]:
    """``(result, rows_seen, product_rows)``: what the learner's function returns, the
    ``(layer, rows)`` each layer call was given, and the rows of each matrix product."""
    rows_seen: list[tuple[int, int]] = []
    hooks = [layer.register_forward_hook(
                 lambda m, inp, out, i=i, seen=rows_seen: seen.append((i, inp[0].shape[0])))
             for i, layer in enumerate(model.layers)]
    try:
        with _ProductRows(width=3) as products:
            got = forward_active_rows(model, x, depths)
    finally:
        for hook in hooks:
            hook.remove()
    return got, rows_seen, products.rows


def _check_rows(depths_list: list[int], max_depth: int, rows_seen: list[tuple[int, int]],
                product_rows: list[int]) -> None:
    """Each layer ran once, on the rows still active at it (depth > its index)."""
    depths = torch.tensor(depths_list)
    for i, n in rows_seen:
        active = int((depths > i).sum())
        expect(n == active,
               tr("With depths {depths}, layer {i} ran on {ran}, but {still} (depth > {i}). Select "
                  "the active rows (`h[rows]`), then call the layer once on all of them.",
                  depths=depths_list, i=i,
                  ran=translated(N_("{n} row") if n == 1 else N_("{n} rows"), n=n),
                  still=translated(N_("{n} row is still active") if active == 1
                                   else N_("{n} rows are still active"), n=active)))
    active_rows = [n for n in (int((depths > i).sum()) for i in range(max_depth)) if n]
    done = [n for n in product_rows if n]
    expect(sorted(done) == sorted(active_rows),
           tr("With depths {depths}, your layers multiplied {rows} rows in {products} matrix "
              "products; running each layer once on its active rows takes {want_rows} rows in "
              "{want_products} products ({active_rows}). Select the rows with depth > i, run "
              "layer i on those rows only, all at once.", depths=depths_list, rows=sum(done),
              products=len(done), want_rows=sum(active_rows), want_products=len(active_rows),
              active_rows=active_rows))


@exercise("05.3", N_("predicting the number of autograd nodes at any depth"), answer="predicted_nodes")
def _predicted_nodes(predicted_nodes: Any) -> None:
    for dim, max_depth in ((2, 4), (3, 6)):
        model = _model(dim, max_depth, seed=0)
        one = torch.ones(1, dim)
        for depth in range(max_depth + 1):
            want = sum(draw(model.forward_one(one, depth), params=model).counts().values())
            with _TorchCalls() as calls:
                got = predicted_nodes(depth)
            expect(not calls.names,
                   tr("`predicted_nodes` ran torch operations ({names}): it builds a model or a graph. "
                      "The question asks for a prediction: work the count out from numbers (what the "
                      "head records, section 2's `per_layer`).",
                      names=", ".join(sorted(set(calls.names))[:4])))
            expect(got == want,
                   tr("At depth {depth} the graph has {want} nodes, you predicted {got!r}. Count the "
                      "depth-0 graph (the head alone: its op nodes and its two parameters) and what each "
                      "Linear+ReLU layer adds (section 2's `per_layer`).", depth=depth, want=want, got=got))
