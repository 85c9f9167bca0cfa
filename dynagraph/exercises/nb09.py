"""Checks for 09_what_the_graph_keeps_alive.ipynb."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from . import exercise, expect

# What an answer may use: the notebook's imports (tests run stubs and solutions after this).
SETUP = """
import torch
import torch.utils.checkpoint as cp
from torch import nn
import dynagraph as dg
"""


def _graph_total(out: torch.Tensor) -> int:
    from ..draw import draw
    memory = draw(out, memory=True).memory
    assert memory is not None
    return memory.total


@exercise("09.1", "count what the graph keeps, each storage once, with saved_tensors_hooks",
          answer="packed_bytes")
def _packed_bytes(packed_bytes: Callable[[Callable[[], torch.Tensor]], int]) -> None:
    x = torch.linspace(-1, 1, 1000, requires_grad=True)  # 4,000 bytes

    def cube() -> torch.Tensor:
        h = x.exp()
        return (h * h * h).sum()

    def views() -> torch.Tensor:
        h = x.exp()
        return (h[:10] * h[10:20]).sum()

    cases = {
        "exp(x).sum() (exp keeps its 4,000-byte result)": lambda: x.exp().sum(),
        "h * h * h with h = exp(x) (h is saved three times: one storage)": cube,
        "h[:10] * h[10:20] (two views of one storage: the whole storage is kept)": views,
        "x.sum() (sum saves nothing)": lambda: x.sum(),
    }
    for name, fn in cases.items():
        got = packed_bytes(fn)
        want = _graph_total(fn())
        expect(isinstance(got, int), f"return an int (bytes), not {type(got).__name__}.")
        expect(got == want, f"for {name} the graph keeps {want:,} bytes; you counted {got:,}. "
                            "Key each packed tensor by its storage (untyped_storage().data_ptr()) "
                            "and add its storage's nbytes() once.")


@exercise("09.2", "two checkpointed segments keep one activation and give the same gradients",
          answer="checkpointed")
def _checkpointed(checkpointed: Callable[[nn.Sequential, torch.Tensor], torch.Tensor]) -> None:
    torch.manual_seed(0)
    layers = nn.Sequential(*[nn.Sequential(nn.Linear(32, 32), nn.Tanh()) for _ in range(6)])
    x = torch.randn(16, 32)
    plain = layers(x).sum()
    want = torch.autograd.grad(plain, list(layers.parameters()))
    out = checkpointed(layers, x)
    expect(isinstance(out, torch.Tensor) and out.shape == (16, 32),
           "return the model's output for x (shape (16, 32)), not its sum or a tuple.")
    expect(out.grad_fn is not None,
           "the output has no graph: with use_reentrant=True and an input that does not require "
           "grad nothing is recorded. Use use_reentrant=False.")
    from ..draw import draw
    memory = draw(out.sum(), memory=True).memory
    assert memory is not None
    one = 16 * 32 * 4
    expect(memory.activations <= one,
           f"the graph still keeps {memory.activations:,} bytes of activations; two checkpointed "
           f"halves keep only the second half's input ({one:,} bytes). Checkpoint layers[:3] and "
           "layers[3:], not each layer.")
    got = torch.autograd.grad(out.sum(), list(layers.parameters()))
    expect(all(torch.allclose(a, b, atol=1e-6) for a, b in zip(got, want)),
           "the gradients differ from the plain model's: run the same layers, in order.")


@exercise("09.3", "saved_tensors_hooks that keep float32 saved tensors in half precision",
          answer="half_hooks")
def _half_hooks(half_hooks: Callable[[], tuple]) -> None:
    pair = half_hooks()
    expect(isinstance(pair, tuple) and len(pair) == 2 and all(map(callable, pair)),
           "return a pair (pack, unpack) of functions.")
    pack, unpack = pair
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh())
    x = torch.randn(32, 64)
    halves: list[int] = []  # what each saved tensor weighs as a float16 copy

    def weigh(t: torch.Tensor) -> torch.Tensor:
        halves.append(t.numel() * 2)
        return t
    with torch.autograd.graph.saved_tensors_hooks(weigh, lambda t: t):
        plain = model(x).sum()
    want = torch.autograd.grad(plain, list(model.parameters()))
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        out = model(x).sum()
    total = _graph_total(out)
    expect(total <= sum(halves),
           f"the graph keeps {total:,} bytes; float16 copies of what it saves weigh {sum(halves):,}: "
           "pack should keep a float16 copy (t.half()), not the tensor itself or a float32 copy.")
    got = torch.autograd.grad(out, list(model.parameters()))
    expect(all(g.dtype == torch.float32 for g in got),
           "the gradients are not float32: unpack should give back the saved tensor's dtype.")
    expect(all((a - b).norm() <= 1e-2 * b.norm() for a, b in zip(got, want)),  # float16: ~1e-3
           "the gradients are far from the plain model's: unpack should restore the values "
           "(p.float()), not zeros or new tensors.")
