"""Checks for 06_dynamic_attention.ipynb."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from .._language import N_, tr
from . import Wrong, exercise, expect

# What an answer may use: the notebook's imports (tests run stubs and solutions after this).
SETUP = """
import math
import torch
import torch.nn.functional as F
import dynagraph as dg
"""


def _scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])


def _close(a: object, b: torch.Tensor) -> bool:
    return isinstance(a, torch.Tensor) and a.shape == b.shape and torch.allclose(a, b, atol=1e-6, rtol=1e-5)


@exercise("06.1", N_("important keys count three times as much, by adding a log to the scores"),
          answer="triple_weights")
def _triple_weights(triple_weights: Any) -> None:
    torch.manual_seed(0)
    masks = [[1.0, 0.0, 1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
             [0.0, 1.0, 0.0, 0.0, 1.0, 0.0], [1.0, 0.0, 0.0, 1.0, 0.0, 1.0]]
    inputs = [(torch.randn(3, d) * 2, torch.randn(6, d) * 2) for d in (4, 8, 2, 16)]
    # scores of 96 to 140, exact in float32 (integers, d = 4): exp(score) overflows float32 there
    inputs.append((torch.randint(12, 15, (3, 4)).float(), torch.randint(4, 6, (6, 4)).float()))
    for (q, k), mask in zip(inputs, masks):
        d = q.shape[-1]
        importance = torch.tensor(mask)
        got = triple_weights(q, k, importance)
        s = _scores(q, k).double()                        # the reference in float64: exp(140) is finite
        reference = (1 + 2 * importance.double()) * s.exp()  # weights ∝ 3 exp(score) for important keys
        want = (reference / reference.sum(dim=-1, keepdim=True)).float()
        expect(isinstance(got, torch.Tensor) and got.shape == want.shape,
               tr("Return the (queries, keys) weights, shape {shape}, got {got!r}.",
                  shape=tuple(want.shape), got=getattr(got, "shape", got)))
        expect(torch.isfinite(got).all(),
               tr("With scores between {low:.0f} and {high:.0f} your weights hold NaN or inf: exp(score) "
                  "overflows float32 above about 88. A softmax does not overflow (it subtracts each "
                  "row's largest score first). So put the factor in as an added term, before one "
                  "softmax (section 3).", low=s.min().item(), high=s.max().item()))
        expect(torch.allclose(got.sum(dim=-1), torch.ones(3), atol=1e-5),
               tr("Each row of weights should sum to 1: end with a softmax over the keys (dim=-1)."))
        expect((got > 0).all(),
               tr("A key got weight 0: nothing is dropped here, unimportant keys count once. "
                  "log(importance) alone would drop the importance-0 keys."))
        expect(_close(got, want),
               tr("With importance {mask} (d={d}) the weights are not ∝ (1 + 2·importance)·exp(score). "
                  "Give each key a factor f (3 or 1). A softmax can only add to the scores, and "
                  "f·exp(score) = exp(score + log f) (section 3). Remember the 1/sqrt(d) scaling. "
                  "Multiplying the scores is the anti-pattern of section 2.", mask=mask, d=d),
               code=tr("`f = 1 + 2 * importance` is 3 or 1 per key; the softmax's input is the scaled "
                       "scores plus a term made from `f`"))


@exercise("06.2", N_("doubling every logit, computed from the weights alone"), answer="sharpen")
def _sharpen(sharpen: Any) -> None:
    torch.manual_seed(0)
    for shape in ((3, 6), (1, 4), (2, 3, 5)):
        s = torch.randn(shape) * 2
        p = s.softmax(dim=-1)
        got = sharpen(p.clone())
        want = (2 * s).softmax(dim=-1)
        expect(isinstance(got, torch.Tensor) and got.shape == want.shape,
               tr("`sharpen` should return weights of the same shape as `p`, {shape}, got {got!r}.",
                  shape=tuple(p.shape), got=getattr(got, "shape", got)))
        expect(torch.allclose(got.sum(dim=-1), torch.ones(shape[:-1]), atol=1e-5),
               tr("For weights of shape {shape}, each row (the last dim) should sum to 1: "
                  "renormalise per row, `.sum(dim=-1, keepdim=True)`.", shape=tuple(shape)))
        expect(_close(got, want),
               tr("For weights of shape {shape}, `sharpen(softmax(s))` is not `softmax(2 * s)`: "
                  "exp(2s) = exp(s)², and softmax divides out the row's constant.", shape=tuple(shape)))


class _Calls(TorchFunctionMode):
    """Records the name of every torch function called inside the block (however it was imported)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []
        self.sdpa_outputs: list[Any] = []

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        name = getattr(func, "__name__", str(func))
        self.names.append(name)
        out = func(*args, **(kwargs or {}))
        if name == "scaled_dot_product_attention":
            self.sdpa_outputs.append(out)
        return out


_SOFTMAX = {"softmax", "_softmax", "log_softmax", "exp", "exp_", "softmin"}


@exercise("06.3", N_("batched, multi-head importance weighting with scaled_dot_product_attention"),
          answer="importance_attention")
def _importance_attention(importance_attention: Any) -> None:
    torch.manual_seed(0)
    for batch, heads, n_q, n_k, d in ((2, 2, 3, 6, 4), (3, 1, 5, 4, 8), (1, 4, 2, 7, 2)):
        q = torch.randn(batch, heads, n_q, d, requires_grad=True)
        k, v = torch.randn(batch, heads, n_k, d), torch.randn(batch, heads, n_k, d)
        importance = torch.randint(0, 4, (batch, n_k)).float()
        importance[:, 0] = 1.0                          # every batch element keeps a key
        importance[:, 1] = 0.0                          # and drops one
        # a dropped key's value is huge: any weight left on it (an epsilon in the log) shows
        v = torch.where((importance == 0)[:, None, :, None], 1e6, v)
        got = _run_attention(importance_attention, q, k, v, importance)
        w = importance[:, None, None, :] * _scores(q, k).exp()
        want = (w / w.sum(dim=-1, keepdim=True)) @ v
        expect(isinstance(got, torch.Tensor) and got.shape == want.shape,
               tr("The output should be (batch, heads, queries, d) = {shape}, got {got!r}.",
                  shape=tuple(want.shape), got=getattr(got, "shape", got)))
        expect(_close(got, want),
               tr("With importance values {values} the output is not softmax(scores + log(importance)) @ v: "
                  "a float attn_mask is *added* to the scaled scores (pass log(importance), not "
                  "importance, and not a boolean mask, which ignores the values 2 and 3), one importance "
                  "row per batch element. Importance 0 must drop its key exactly: log(0) = -inf gives "
                  "weight 0, an epsilon or a clamp does not.",
                  values=sorted(set(importance.flatten().tolist()))))
        expect(got.requires_grad,
               tr("The values are right but the output does not require grad: keep the call inside "
                  "autograd (no `.detach()`, no `torch.no_grad()`), so gradients reach q, k and v."))
        (g_got,) = torch.autograd.grad(got.sum(), q)
        (g_want,) = torch.autograd.grad(want.sum(), q)
        expect(torch.allclose(g_got, g_want, atol=1e-5),
               tr("The values are right but the gradient with respect to q is not: keep the call "
                  "inside autograd (no `.detach()`, no `torch.no_grad()`)."))


def _run_attention(importance_attention: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                   importance: torch.Tensor) -> Any:
    """What the learner's function returns, checked to be the output of its one call to
    F.scaled_dot_product_attention (a RuntimeError it raises becomes a hint on the mask)."""
    try:
        with _Calls() as calls:
            got = importance_attention(q, k, v, importance)
    except NotImplementedError:
        raise
    except RuntimeError as e:
        raise Wrong(tr(
            "With q {q_shape} and importance {importance_shape}: {error}. The attn_mask must "
            "broadcast to (batch, heads, queries, keys): importance is (batch, keys), so give it "
            "the heads and queries dims as size-1 dims.", q_shape=tuple(q.shape),
            importance_shape=tuple(importance.shape), error=str(e).splitlines()[0])) from None
    sdpa = calls.names.count("scaled_dot_product_attention")
    own = sorted(_SOFTMAX.intersection(calls.names))
    also = tr(" and computed weights itself ({names})", names=", ".join(own)) if own else ""
    expect(sdpa == 1 and not own,
           tr("The question asks for one call to F.scaled_dot_product_attention; your function "
              "called it {calls} time(s){also}. Let the one call do the softmax: the importance "
              "goes in through its attn_mask.", calls=sdpa, also=also))
    out = calls.sdpa_outputs[0]
    expect(isinstance(got, torch.Tensor) and isinstance(out, torch.Tensor) and got.numel() == out.numel()
           and torch.equal(got.reshape(out.shape), out),
           tr("Return what the one F.scaled_dot_product_attention call gives: your result is not its "
              "output. Let that call do all the work, the importance going in through its attn_mask."))
    return got
