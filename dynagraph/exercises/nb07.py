"""Checks for 07_vanishing_gradients.ipynb."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules import module as _module_hooks

from .._language import N_, tr
from . import Kind, exercise, expect
from ._backward import BackwardRefused as _BackwardRefused
from ._backward import no_backward as _no_backward

# What an answer may use: the notebook's imports (tests run stubs and solutions after this).
SETUP = """
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
import dynagraph as dg
"""


class _Block(nn.Module):
    """The notebook's block: Linear -> (norm) -> activation function, optionally residual."""

    def __init__(self, width: int, act: type[nn.Module], norm: type[nn.Module] | None = None,
                 residual: bool = False) -> None:
        super().__init__()
        self.linear = nn.Linear(width, width)
        self.norm = norm(width) if norm else nn.Identity()
        self.act, self.residual = act(), residual
        self.full_hook_seen = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Exercise 1 asks for a full backward hook on each block: note whether one is on this
        # block (or on every module) while it runs.
        self.full_hook_seen = self.full_hook_seen or _has_full_backward_hook(self)
        h = self.act(self.norm(self.linear(x)))
        return x + h if self.residual else h


def _has_full_backward_hook(module: nn.Module) -> bool:
    """Whether a hook from ``register_full_backward_hook`` (on ``module``, or the global one
    for all modules) will run in the backward pass of ``module``'s forward."""
    own = bool(module._backward_hooks) and module._is_full_backward_hook is True
    every = bool(_module_hooks._global_backward_hooks) and _module_hooks._global_is_full_backward_hook is True
    return own or every


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
    """``t.grad``, which the reference backward pass has just filled."""
    if t.grad is None:
        raise RuntimeError("the reference backward pass left no gradient")  # a bug in the check itself
    return t.grad


def _norm64(t: torch.Tensor) -> float:
    """The L2 norm in float64: in float32 the squares of tiny entries underflow to 0 (section 5)."""
    return t.double().norm().item()


def _block_output_norms(model: _DeepMLP, x: torch.Tensor, y: torch.Tensor) -> list[float]:
    """The reference: the norm of the loss's gradient with respect to each block's output
    (``autograd.grad``, no backward hook)."""
    outs: list = []
    handles = [b.register_forward_hook(lambda m, i, o, outs=outs: outs.append(o)) for b in model.blocks]
    loss = F.cross_entropy(model(x), y)
    for h in handles:
        h.remove()
    return [g.norm().item() for g in torch.autograd.grad(loss, outs)]


@exercise("07.1", N_("activation-gradient norms recorded with backward hooks"),
          answer="block_output_grad_norms")
def _block_output_grad_norms(block_output_grad_norms: Any) -> None:
    cases: list[tuple[type[nn.Module], int, int, bool]] = [(nn.Tanh, 5, 16, False), (nn.Sigmoid, 4, 8, False),
                                                          (nn.ReLU, 3, 8, True)]
    for seed, (act, depth, width, residual) in enumerate(cases):
        model = _build(act, depth=depth, width=width, residual=residual, seed=seed)
        torch.manual_seed(0)
        x = torch.randn(16, width, requires_grad=True)   # so block 0 has an input gradient too
        y = torch.randint(0, 10, (16,))
        want = _block_output_norms(model, x, y)
        for block in model.block_list():
            block.full_hook_seen = False
        got = block_output_grad_norms(model, x, y)
        if residual:
            described = tr("a depth-{depth} {act} net with residual blocks", depth=depth, act=act.__name__)
        else:
            described = tr("a depth-{depth} {act} net", depth=depth, act=act.__name__)
        expect(isinstance(got, (list, tuple)) and len(got) == len(want),
               tr("For {net}, return a list with one norm per block ({blocks}), got {got!r}.",
                  net=described, blocks=len(want), got=got))
        got = [g.item() if isinstance(g, torch.Tensor) else g for g in got]
        leftover = [b for b in model.blocks if b._backward_hooks or b._forward_hooks or b._forward_pre_hooks]
        expect(not leftover,
               tr("Your hooks are still registered on the blocks after the function returned. Each "
                  "registration gives back a handle: keep the handles, and remove every hook before you "
                  "return."),
               code=tr("`handle = block.register_full_backward_hook(hook)`, later `handle.remove()`"))
        expect(all(block.full_hook_seen for block in model.block_list()),
               tr("For {net}, a block ran without a full backward hook. This exercise records "
                  "dL/dh with module hooks: register one on each block, before the forward pass. "
                  "retain_grad(), tensor hooks and autograd.grad give the same numbers with other tools; "
                  "register_backward_hook (without 'full') is the old kind.", net=described),
               code=tr("`handle = block.register_full_backward_hook(hook)` for each block in `model.blocks`"))
        close = all(abs(a - b) <= 1e-5 * (1 + abs(b)) for a, b in zip(got, want))
        shifted = all(abs(a - b) <= 1e-5 * (1 + abs(b)) for a, b in zip(got[1:], want[:-1]))
        expect(close or not shifted,
               tr("For {net} your norms are those of the block *inputs*, one block off. The hook "
                  "receives two gradients: the one at the module's input and the one at its output.",
                  net=described),
               code=tr("in `hook(module, grad_input, grad_output)`, dL/d(output) is `grad_output[0]`"))
        expect(close,
               tr("For {net}, the gradient norms of the block outputs are {want}, got {got}. Store one "
                  "norm per block, the gradient at its output, in block order (block 0 first), after one "
                  "backward pass of F.cross_entropy(model(x), y).", net=described,
                  want=[f"{w:.2e}" for w in want], got=[f"{g:.2e}" for g in got]),
               code=tr("hooks fire from the last block to the first; `def hook(module, grad_input, "
                       "grad_output, i=i)` keeps each block's index i inside its own hook"))


@exercise("07.2", N_("a Linear layer's weight and bias gradients from its input and dL/dz"),
          answer="linear_grads")
def _linear_grads(linear_grads: Any) -> None:
    torch.manual_seed(0)
    for batch, n_in, n_out in ((1, 5, 3), (4, 6, 2), (32, 3, 7)):
        layer = nn.Linear(n_in, n_out)
        x = torch.randn(batch, n_in)
        z = layer(x)
        z.retain_grad()
        (z.tanh() * torch.randn(batch, n_out)).sum().backward()   # any loss: the reference is autograd
        with _no_backward() as attempts:
            try:
                got = linear_grads(x, _grad(z).clone())
            except _BackwardRefused:
                got = None
        expect(not attempts,
               tr("`linear_grads` ran a backward pass: autograd computed the gradients for you. The "
                  "exercise is to write them from `x` and dL/dz with matrix operations (section 2)."))
        expect(isinstance(got, (tuple, list)) and len(got) == 2,
               tr("Return a pair (weight gradient, bias gradient), as a tuple or a list; got {type}.",
                  type=type(got).__name__))
        w_grad, b_grad = got
        expect(isinstance(w_grad, torch.Tensor) and w_grad.shape == layer.weight.shape,
               tr("The weight gradient has the shape of the weight, (out, in) = {shape}; got {got_shape}. "
                  "Which product of dL/dz, shape (batch, out), and x, shape (batch, in), gives (out, in)?",
                  shape=tuple(layer.weight.shape), got_shape=tuple(getattr(w_grad, "shape", ()))),
               code=tr("`a.T @ b` multiplies (k, batch) by (batch, m); the batch dimension is summed away"))
        w_grad = w_grad.to(torch.float32)   # a right answer in float64 is still right
        expect(torch.allclose(w_grad, _grad(layer.weight), atol=1e-5),
               tr("With a batch of {batch} the weight gradient differs from autograd's. W.grad adds up one "
                  "outer product dL/dz ⊗ x per sample. Do not average: any mean is already in dL/dz.",
                  batch=batch))
        expect(isinstance(b_grad, torch.Tensor) and b_grad.shape == layer.bias.shape
               and torch.allclose(b_grad.to(torch.float32), _grad(layer.bias), atol=1e-5),
               tr("With a batch of {batch} the bias gradient differs from autograd's. The bias is added "
                  "to every sample, so its gradient is dL/dz added up over the batch.", batch=batch))
        if batch == 1:
            expect(torch.allclose(w_grad.norm(), _grad(z).norm() * x.norm()),
                   tr("For one sample, ‖W.grad‖ should be ‖dL/dz‖ · ‖x‖ (section 2)."))


_LOW, _HIGH = 1 / 30, 30.0  # "fixed": both first/last ratios strictly between these (section 3)
_ACTS = (nn.Sigmoid, nn.Tanh, nn.ReLU)
_CHANGES = ("norm", "residual", "kaiming", "glorot")
_SWITCHES = ("residual", "kaiming", "glorot")  # build(...)'s arguments that are True or False


_BUILD_ARGUMENTS = Kind(N_("a dict of `build(...)` arguments"), "{name} = dict(act=nn.Tanh, ...)",
                       lambda a: isinstance(a, dict))


@exercise("07.3", N_("a depth-30 network whose gradient neither vanishes nor explodes"), answer="deep_fix",
          kind=_BUILD_ARGUMENTS)
def _deep_fix(deep_fix: dict) -> None:
    allowed = {"act", "depth", *_CHANGES}
    expect(set(deep_fix) <= allowed, tr("`build` takes only {allowed}; got {got}.",
                                        allowed=sorted(allowed), got=sorted(deep_fix)))
    expect(deep_fix.get("act") in _ACTS,
           tr("Give the activation function as a class, one of nn.Sigmoid, nn.Tanh or nn.ReLU "
              "(act=...); got {act!r}.", act=deep_fix.get("act")))
    expect(deep_fix.get("depth", 30) == 30,
           tr("Keep depth 30: a shallower network hides the problem, it does not fix it."))
    for name in _SWITCHES:
        value = deep_fix.get(name, False)
        expect(isinstance(value, bool),
               tr("`{name}` must be True or False: True makes the change, False leaves it out. You "
                  "gave {name}={value!r}.", name=name, value=value))
    changes = {k: v for k, v in deep_fix.items() if k in _CHANGES and v not in (None, False)}
    expect(len(changes) <= 1,
           tr("Change exactly one thing besides the activation function; you changed {changes}.",
              changes=sorted(changes)))
    for seed in (0, 1):
        with _one_thread():
            _check_deep_fix(deep_fix, changes, seed)


def _check_deep_fix(deep_fix: dict, changes: dict, seed: int) -> None:
    """Build the network from the learner's arguments and measure it: both first/last ratios
    (two-sided: vanishing and exploding both fail) and the forward signal."""
    model = _build(**deep_fix, seed=seed)
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
    w_ratio = _norm64(_grad(blocks[0].linear.weight)) / _norm64(_grad(blocks[-1].linear.weight))
    h_ratio = _norm64(act_grads[0]) / _norm64(act_grads[-1])
    act = deep_fix["act"].__name__
    change = ", ".join(f"{k}={getattr(v, '__name__', v)}" for k, v in changes.items())
    what = (tr("{act} and {change}", act=act, change=change) if change
            else tr("{act} and no other change", act=act))
    measured = tr("the first/last ratio is {w_ratio:.1e} for W.grad and {h_ratio:.1e} for dL/dh "
                  "(seed {seed})", w_ratio=w_ratio, h_ratio=h_ratio, seed=seed)
    expect(min(w_ratio, h_ratio) > _LOW or max(w_ratio, h_ratio) >= _HIGH,
           tr("With {what}, {measured}: the gradient still vanishes (fixed means between 1/30 and 30). "
              "Look at section 3's table: which change fixes your activation function?",
              what=what, measured=measured))
    expect(max(w_ratio, h_ratio) < _HIGH,
           tr("With {what}, {measured}: the gradient explodes toward the input (fixed means between "
              "1/30 and 30): on the way back, the blocks make it larger. Which change does section 3's "
              "table call fixed for your activation function?", what=what, measured=measured))
    output_std = outs[-1].std(dim=0).mean().item()
    expect(output_std > 1e-3,
           tr("The gradients are balanced, but block 29's output hardly varies across the batch (its "
              "standard deviation is {std:.1e}): the forward signal has collapsed.", std=output_std))
