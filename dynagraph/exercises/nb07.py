"""Checks for 07_vanishing_gradients.ipynb."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from . import exercise, expect

# What an answer may use: the notebook's imports (tests run stubs and solutions after this).
SETUP = """
import statistics
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
import dynagraph as dg
"""


class _Block(nn.Module):
    """The notebook's block: Linear -> (norm) -> activation, optionally residual."""

    def __init__(self, width: int, act: type[nn.Module], norm: type[nn.Module] | None = None,
                 residual: bool = False) -> None:
        super().__init__()
        self.linear = nn.Linear(width, width)
        self.norm = norm(width) if norm else nn.Identity()
        self.act, self.residual = act(), residual

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act(self.norm(self.linear(x)))
        return x + h if self.residual else h


class _DeepMLP(nn.Module):
    def __init__(self, act: type[nn.Module], depth: int = 30, width: int = 128,
                 norm: type[nn.Module] | None = None, residual: bool = False) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*[_Block(width, act, norm, residual) for _ in range(depth)])
        self.head = nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x))

    def block_list(self) -> list[_Block]:
        return [m for m in self.blocks if isinstance(m, _Block)]


def _build(act: type[nn.Module], depth: int = 30, norm: type[nn.Module] | None = None, residual: bool = False,
           kaiming: bool = False, glorot: bool = False, seed: int = 0, width: int = 128) -> _DeepMLP:
    """The notebook's ``build``, with a seed and a width to vary."""
    torch.manual_seed(seed)
    model = _DeepMLP(act, depth, width, norm, residual)
    for block in model.block_list():
        if kaiming:
            nn.init.kaiming_normal_(block.linear.weight, nonlinearity="relu")
        if glorot:
            nn.init.xavier_uniform_(block.linear.weight)
    return model


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Run on one CPU thread, then restore the count: these matrices are small, and two
    threads contending on a busy CPU made the depth-30 check many times slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _grad(t: torch.Tensor) -> torch.Tensor:
    """``t.grad``, which the oracle's backward pass has just filled."""
    if t.grad is None:
        raise RuntimeError("the oracle's backward pass left no gradient")  # a bug in the check itself
    return t.grad


def _small_models() -> list[nn.Module]:
    torch.manual_seed(0)
    section7 = nn.Sequential(nn.Linear(4, 4, bias=False), nn.LayerNorm(4), nn.ReLU(),
                             nn.Linear(4, 4, bias=False), nn.LayerNorm(4), nn.ReLU(), nn.Linear(4, 1))
    nested = _build(nn.Tanh, depth=3, norm=nn.LayerNorm, width=4, seed=1)
    plain = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2), nn.ReLU(), nn.Linear(2, 1))
    return [section7, nested, plain]


@exercise("07.1", "weight-gradient norms labelled by Linear module", answer="linear_norms")
def _linear_norms(linear_norms: Any) -> None:
    for model in _small_models():
        out = model(torch.ones(2, 4))
        out.float().pow(2).mean().backward()
        want = {name: _grad(m.weight).norm() for name, m in model.named_modules() if isinstance(m, nn.Linear)}
        got = linear_norms(model)
        expect(isinstance(got, dict), f"Return a dict {{module name: norm}}, got {type(got).__name__}.")
        expect(list(got) == list(want),
               f"The keys should be the names of the model's Linear modules, in order, {list(want)}; "
               f"got {list(got)}. Walk `named_modules()` (it reaches nested modules too) and keep "
               "`isinstance(m, nn.Linear)`: counting parameters mislabels layers without a bias "
               "and norm layers (section 7).")
        for name, norm in want.items():
            value = got[name]
            value = value.item() if isinstance(value, torch.Tensor) else value
            expect(isinstance(value, float) and abs(value - norm.item()) <= 1e-5 * (1 + norm.item()),
                   f"Module {name!r}: the weight-gradient norm is {norm.item():.4f}, got {got[name]!r}: "
                   "use `m.weight.grad.norm()`.")


@exercise("07.2", "activation-gradient norms recorded with backward hooks", answer="block_output_grad_norms")
def _block_output_grad_norms(block_output_grad_norms: Any) -> None:
    cases: list[tuple[type[nn.Module], int, int, bool]] = [(nn.Tanh, 5, 16, False), (nn.Sigmoid, 4, 8, False),
                                                          (nn.ReLU, 3, 8, True)]
    for seed, (act, depth, width, residual) in enumerate(cases):
        model = _build(act, depth=depth, width=width, residual=residual, seed=seed)
        torch.manual_seed(0)
        x = torch.randn(16, width, requires_grad=True)   # so block 0 has an input gradient too
        y = torch.randint(0, 10, (16,))
        outs: list = []                  # the oracle: autograd.grad with respect to each block output
        handles = [b.register_forward_hook(lambda m, i, o, outs=outs: outs.append(o)) for b in model.blocks]
        loss = F.cross_entropy(model(x), y)
        for h in handles:
            h.remove()
        want = [g.norm().item() for g in torch.autograd.grad(loss, outs)]
        got = block_output_grad_norms(model, x, y)
        described = f"a depth-{depth} {act.__name__} net" + (" with residual blocks" if residual else "")
        expect(isinstance(got, (list, tuple)) and len(got) == len(want),
               f"For {described}, return a list with one norm per block ({len(want)}), got {got!r}.")
        got = [g.item() if isinstance(g, torch.Tensor) else g for g in got]
        leftover = [b for b in model.blocks if b._backward_hooks or b._forward_hooks or b._forward_pre_hooks]
        expect(not leftover,
               "Your hooks are still registered on the blocks after the function returned: keep the "
               "handles that `register_full_backward_hook` returns and call `.remove()` on each.")
        close = all(abs(a - b) <= 1e-5 * (1 + abs(b)) for a, b in zip(got, want))
        shifted = all(abs(a - b) <= 1e-5 * (1 + abs(b)) for a, b in zip(got[1:], want[:-1]))
        expect(close or not shifted,
               f"For {described} your norms are those of the block *inputs*, one block off: in the hook "
               "`(module, grad_input, grad_output)`, the gradient of the block's output is `grad_output[0]`.")
        expect(close,
               f"For {described}, the gradient norms of the block outputs are "
               f"{[f'{w:.2e}' for w in want]}, got {[f'{g:.2e}' for g in got]}: store "
               "`grad_output[0].norm()` for each block, in block order, after one backward pass of "
               "`F.cross_entropy(model(x), y)`.")


@exercise("07.3", "a Linear layer's weight and bias gradients from its input and dL/dz",
          answer="linear_grads")
def _linear_grads(linear_grads: Any) -> None:
    torch.manual_seed(0)
    for batch, n_in, n_out in ((1, 5, 3), (4, 6, 2), (32, 3, 7)):
        layer = nn.Linear(n_in, n_out)
        x = torch.randn(batch, n_in)
        z = layer(x)
        z.retain_grad()
        (z.tanh() * torch.randn(batch, n_out)).sum().backward()   # any loss: the oracle is autograd
        got = linear_grads(x, z.grad.clone())
        expect(isinstance(got, tuple) and len(got) == 2,
               f"Return a pair (weight gradient, bias gradient), got {type(got).__name__}.")
        w_grad, b_grad = got
        expect(isinstance(w_grad, torch.Tensor) and w_grad.shape == layer.weight.shape,
               f"The weight gradient has the shape of the weight, (out, in) = {tuple(layer.weight.shape)}; "
               f"got {tuple(getattr(w_grad, 'shape', ()))}. z = x @ W.T + b: which product of dL/dz "
               "(batch, out) and x (batch, in) gives (out, in)?")
        expect(torch.allclose(w_grad, _grad(layer.weight), atol=1e-5),
               f"With a batch of {batch} the weight gradient differs from autograd's: W.grad sums one "
               "outer product dL/dz ⊗ x per sample (do not average: any mean is already in dL/dz).")
        expect(isinstance(b_grad, torch.Tensor) and b_grad.shape == layer.bias.shape
               and torch.allclose(b_grad, _grad(layer.bias), atol=1e-5),
               f"With a batch of {batch} the bias gradient differs from autograd's: the bias is added "
               "to every sample, so its gradient is dL/dz summed over the batch.")
        if batch == 1:
            expect(torch.allclose(w_grad.norm(), z.grad.norm() * x.norm()),
                   "For one sample, ‖W.grad‖ should be ‖dL/dz‖ · ‖x‖ (section 2).")


_FIXED = 1e-2  # "fixed": first/last ratio above this (section 3)


@exercise("07.4", "a depth-30 tanh network whose gradient no longer vanishes", answer="tanh_fix")
def _tanh_fix(tanh_fix: Any) -> None:
    expect(isinstance(tanh_fix, dict),
           f"`tanh_fix` should be a dict of `build(...)` arguments, such as dict(act=nn.Tanh, ...); "
           f"got {type(tanh_fix).__name__}.")
    allowed = {"act", "depth", "norm", "residual", "kaiming", "glorot"}
    expect(set(tanh_fix) <= allowed, f"`build` takes only {sorted(allowed)}; got {sorted(tanh_fix)}.")
    expect(tanh_fix.get("act") is nn.Tanh, "Keep the activation: act=nn.Tanh. The point is to fix tanh, "
                                           "not to replace it.")
    expect(tanh_fix.get("depth", 30) == 30,
           "Keep depth 30: a shallower net hides the problem, it does not fix it.")
    changes = {k: v for k, v in tanh_fix.items() if k not in ("act", "depth") and v not in (None, False)}
    expect(len(changes) <= 1,
           f"Change exactly one thing (one keyword besides act); you changed {sorted(changes)}.")
    for seed in (0, 1):
        with _one_thread():
            _check_tanh_fix(tanh_fix, changes, seed)


def _check_tanh_fix(tanh_fix: dict, changes: dict, seed: int) -> None:
    """Build the network from the learner's arguments and measure it: gradients and forward spread."""
    model = _build(**tanh_fix, seed=seed)
    torch.manual_seed(seed)
    x, y = torch.randn(32, 128), torch.randint(0, 10, (32,))
    outs: list = []
    handles = [b.register_forward_hook(lambda m, i, o, outs=outs: outs.append(o)) for b in model.blocks]
    loss = F.cross_entropy(model(x), y)
    for h in handles:
        h.remove()
    act_grads = torch.autograd.grad(loss, outs, retain_graph=True)
    loss.backward()
    blocks = model.block_list()
    w_ratio = (_grad(blocks[0].linear.weight).norm() / _grad(blocks[-1].linear.weight).norm()).item()
    h_ratio = (act_grads[0].norm() / act_grads[-1].norm()).item()
    spread = outs[-1].std(dim=0).mean().item()
    expect(w_ratio > _FIXED and h_ratio > _FIXED,
           f"With {changes or 'the default arguments'} the first/last ratio is {w_ratio:.1e} for the "
           f"weights and {h_ratio:.1e} for dL/dh (seed {seed}): still vanishing "
           f"(fixed means above {_FIXED:g}). "
           "Look at section 3's table: which configurations keep tanh's ratio near 1?")
    expect(spread > 1e-3,
           f"The gradients are balanced, but block 29's output hardly varies across the batch "
           f"(spread {spread:.1e}): the forward signal has collapsed.")
