"""Checks for 09_what_the_graph_keeps_alive.ipynb."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from .._language import N_, tr, translated
from .._walk import reach
from . import Wrong, exercise, expect

# What an answer may use: the notebook's imports (tests run stubs and solutions after this).
SETUP = """
import torch
import torch.utils.checkpoint as cp
from torch import nn
import dynagraph as dg
"""


def _graph_total(out: torch.Tensor) -> int:
    return _memory(out).total


def _memory(out: torch.Tensor) -> Any:
    from ..draw import draw
    memory = draw(out, memory=True).memory
    assert memory is not None
    return memory


@exercise("09.1", N_("count what the graph keeps, each storage once, with saved_tensors_hooks"),
          answer="packed_bytes")
def _packed_bytes(packed_bytes: Callable[[Callable[[], Any]], int]) -> None:
    x = torch.linspace(-1, 1, 1000, requires_grad=True)  # 4,000 bytes

    def cube() -> torch.Tensor:
        h = x.exp()
        return (h * h * h).sum()

    def views() -> torch.Tensor:
        h = x.exp()
        return (h[:10] * h[10:20]).sum()

    kept: list[torch.Tensor] = []
    scale = torch.linspace(0, 1, 1000)  # needs no gradient

    def returns_nothing() -> None:  # the graph lives on in `kept`; only pack sees what it saves
        kept.append((x * scale).sum())

    cases: dict[str, Callable[[], Any]] = {  # each name marked with N_: translated in the hints
        N_("exp(x).sum() (exp keeps its 4,000-byte result)"): lambda: x.exp().sum(),
        N_("h * h * h with h = exp(x) (h is saved three times: one storage)"): cube,
        N_("h[:10] * h[10:20] (two views of one storage: the whole storage is kept)"): views,
        N_("x * x (mul keeps the leaf x twice: one storage)"): lambda: (x * x).sum(),
        N_("a function that returns nothing (mul keeps `scale`, a tensor that needs no gradient)"):
            returns_nothing,
        N_("x.sum() (sum saves nothing)"): lambda: x.sum(),
    }
    for name, fn in cases.items():
        try:
            got = packed_bytes(fn)
        except Exception as e:
            expect(fn is not returns_nothing,
                   tr("for {case} your answer raised {error}: {message}. Count what `pack` sees "
                      "while `fn()` runs: do not use what `fn()` returns.",
                      case=translated(name), error=type(e).__name__, message=e))
            raise
        result = fn()
        want = _graph_total(kept[-1] if fn is returns_nothing else result)
        expect(isinstance(got, int), tr("return an int (bytes), not {type}.", type=type(got).__name__))
        expect(got == want,
               tr("for {case} the graph keeps {want:,} bytes; you counted {got:,}. "
                  "Count allocations, not tensors: a tensor saved by several nodes is one allocation, "
                  "and a view keeps the whole memory block of the tensor it views alive.",
                  case=translated(name), want=want, got=got),
               code=tr("t.untyped_storage() is the memory block behind t (a view shares its base's block); "
                       "its data_ptr() names the block and its nbytes() weighs all of it"))


def _segments(order: list[int]) -> list[list[int]]:
    """Split the layer indices that backward ran again into runs of consecutive layers:
    each checkpointed segment is recomputed as one such run."""
    runs: list[list[int]] = []
    for i in order:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def _is_reentrant(out: torch.Tensor) -> bool:
    """Whether the graph of ``out`` holds a reentrant checkpoint node."""
    found: list[Any] = []

    def enter(fn: Any) -> bool:
        if type(fn).__name__.startswith("CheckpointFunction"):
            found.append(fn)
        return not found  # stop walking once it is found

    reach([out.grad_fn] if out.grad_fn is not None else [], enter)
    return bool(found)


# Hints used more than once, marked with N_: translated where they are shown.
SLICE = N_("layers[:3] is an nn.Sequential of layers 0-2, and cp.checkpoint(part, h, use_reentrant=False) "
           "runs part on h and keeps only h")
REENTRANT = N_("your answer uses reentrant checkpointing (use_reentrant=True, which this PyTorch also "
               "uses when use_reentrant is not given). It does not record the parameters in the graph, so "
               "torch.autograd.grad, which this check uses, cannot reach them. This is a limit of "
               "reentrant checkpointing, not an error in your split. Pass use_reentrant=False, as "
               "PyTorch recommends.")


@exercise("09.2", N_("two checkpointed halves keep one activation and give the same gradients"),
          answer="checkpointed")
def _checkpointed(checkpointed: Callable[[nn.Sequential, torch.Tensor], torch.Tensor]) -> None:
    torch.manual_seed(0)
    layers = nn.Sequential(*[nn.Sequential(nn.Linear(32, 32), nn.Tanh()) for _ in range(6)])
    x = torch.randn(16, 32)
    params = list(layers.parameters())
    want = torch.autograd.grad(layers(x).sum(), params)
    ran: list[int] = []  # the index of each layer as its forward starts
    hooks = [layer.register_forward_pre_hook(lambda *_, i=i: ran.append(i))
             for i, layer in enumerate(layers)]
    try:
        out = checkpointed(layers, x)
        forward = ran.copy()
        ran.clear()
        activations = _check_graph(out, forward, x.shape)
        try:
            got = torch.autograd.grad(out.sum(), params)
        except RuntimeError as e:
            expect("not have been used in the graph" not in str(e),
                   tr("some weights are not in the output's graph, so they would get no gradient. "
                      "Did part of the model run under torch.no_grad() or on a detached tensor? "
                      "Run every layer with grad on, inside one of the two checkpoints."))
            raise
    finally:
        for hook in hooks:
            hook.remove()
    segments = _segments(ran)
    _check_memory(activations, segments)
    _check_halves(segments)
    expect(all(torch.allclose(a, b, atol=1e-6) for a, b in zip(got, want)),
           tr("the gradients differ from the plain model's: run the same layers, in order."))


def _check_graph(out: object, forward: list[int], shape: torch.Size) -> int:
    """Check the output and its graph; return the bytes of activations that the graph keeps."""
    if not isinstance(out, torch.Tensor) or out.shape != shape:
        raise Wrong(tr("return the model's output for x (shape (16, 32)), not its sum or a tuple."))
    expect(forward == list(range(6)),
           tr("the forward pass started the layers in the order {order}; run each of the six "
              "layers once, in order.", order=forward))
    expect(out.grad_fn is not None,
           tr("the output has no graph: with use_reentrant=True and an input that does not require "
              "grad nothing is recorded. Use use_reentrant=False."))
    expect(not _is_reentrant(out), translated(REENTRANT))
    return int(_memory(out.sum()).activations)


def _check_memory(activations: int, segments: list[list[int]]) -> None:
    """Fail unless the graph kept only one activation; ``segments``: the layers that backward
    ran again, one list per checkpoint, which tell where the rest of the memory comes from."""
    one = 16 * 32 * 4
    recomputed = sorted(i for segment in segments for i in segment)
    outside = [i for i in range(6) if i not in recomputed]
    last = outside == list(range(6 - len(outside), 6))  # what checkpoint_sequential leaves out
    expect(activations <= one or not segments or not outside,
           tr("the graph keeps {activations:,} bytes of activations; two checkpointed halves keep "
              "only the second half's input ({one:,} bytes). backward recomputed only layers "
              "{layers}: layers {outside} ran outside any checkpoint, so the graph keeps their "
              "activations.{sequential} Put each half in its own checkpoint.",
              activations=activations, one=one, layers=recomputed, outside=outside,
              sequential=tr(" `checkpoint_sequential` runs its last segment without a checkpoint.")
              if last else ""),
           code=translated(SLICE))
    expect(activations <= one,
           tr("the graph still keeps {activations:,} bytes of activations; two checkpointed halves "
              "keep only the second half's input ({one:,} bytes). Every layer must be inside a "
              "checkpoint, and each half must be one checkpoint, not one per layer.",
              activations=activations, one=one),
           code=translated(SLICE))


def _check_halves(segments: list[list[int]]) -> None:
    expect(segments, tr("backward ran no layer again: nothing was checkpointed."))
    expect(len(segments) != 1,
           tr("backward ran layers {layers} again as one segment: that is one checkpoint around "
              "the whole model. Split the six layers into two halves and checkpoint each half on its own.",
              layers=segments[0]),
           code=translated(SLICE))
    expect(sorted(segments) == [[0, 1, 2], [3, 4, 5]],
           tr("backward recomputed the layers in the segments {segments}; two halves of equal "
              "size are layers 0-2 and layers 3-5, each in its own checkpoint.", segments=sorted(segments)),
           code=translated(SLICE))


@exercise("09.3", N_("saved_tensors_hooks that keep float32 saved tensors in half precision"),
          answer="half_hooks")
def _half_hooks(half_hooks: Callable[[], Any]) -> None:
    pair = half_hooks()
    expect(isinstance(pair, (tuple, list)) and len(pair) == 2 and all(map(callable, pair)),
           tr("return a pair (pack, unpack) of functions, as a tuple or a list."))
    pack, unpack = pair
    packed_dtypes: set[torch.dtype] = set()  # the dtypes of the tensors that pack returns
    originals: list[weakref.ref[torch.Tensor]] = []  # the tensors that pack was given, not kept here

    def spy(t: torch.Tensor) -> Any:
        originals.append(weakref.ref(t))
        packed = pack(t)
        items = packed if isinstance(packed, (tuple, list)) else (packed,)
        packed_dtypes.update(item.dtype for item in items if isinstance(item, torch.Tensor))
        return packed
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh())
    x = torch.randn(32, 64)
    halves, want = _plain_run(model, x)
    with torch.autograd.graph.saved_tensors_hooks(spy, unpack):
        out = model(x).sum()
    # The activations that pack was given: nothing holds them now, unless the answer kept them
    # (the input and the weights stay alive anyway: the check and the model hold them).
    held = {t.untyped_storage().data_ptr() for t in (x, *model.parameters())}
    alive = [t for t in (ref() for ref in originals) if t is not None]
    kept = [t for t in alive if t.untyped_storage().data_ptr() not in held]
    _check_packed(_graph_total(out), halves, packed_dtypes, kept)
    _check_unpacked(out, list(model.parameters()), want)


def _plain_run(model: nn.Module, x: torch.Tensor) -> tuple[int, tuple[torch.Tensor, ...]]:
    """``(bytes, gradients)`` of ``model(x).sum()`` without the learner's hooks: what the
    tensors it saves weigh as float16 copies, and its parameters' gradients."""
    halves: list[int] = []  # what each saved tensor weighs as a float16 copy

    def weigh(t: torch.Tensor) -> torch.Tensor:
        halves.append(t.numel() * 2)
        return t
    with torch.autograd.graph.saved_tensors_hooks(weigh, lambda t: t):
        plain = model(x).sum()
    return sum(halves), torch.autograd.grad(plain, list(model.parameters()))


def _check_packed(total: int, halves: int, packed_dtypes: set[torch.dtype], kept: list[torch.Tensor]) -> None:
    """pack's checks: the graph keeps ``total`` bytes, at most ``halves`` (its saved tensors
    as float16 copies); pack returned tensors of ``packed_dtypes`` (float16 only) and kept
    none of the tensors it was given (``kept``: those still alive)."""
    expect(total <= halves,
           tr("the graph keeps {total:,} bytes; float16 copies of what it saves weigh {halves:,}. "
              "pack should return a new float16 copy of the tensor, not the tensor itself or a "
              "float32 copy.", total=total, halves=halves), code="pack = lambda t: t.half()")
    expect(packed_dtypes == {torch.float16},
           tr("pack kept tensors of dtype {dtypes}. The question asks for half precision, float16 "
              "(`torch.half`), for every saved tensor. (bfloat16 is another 16-bit format, with fewer "
              "digits.)", dtypes=sorted(map(str, packed_dtypes))),
           code="pack = lambda t: t.half()")
    expect(not kept,
           tr("after the forward pass, float32 tensors that pack was given are still in memory: your "
              "hooks keep them (in a dict, a list or a closure). Then the float16 copies save nothing. "
              "pack should return only the float16 copy; unpack should make a float32 tensor from "
              "that copy."), code="pack = lambda t: t.half()")


def _check_unpacked(out: torch.Tensor, params: list[torch.Tensor], want: tuple[torch.Tensor, ...]) -> None:
    """unpack's checks: backward from ``out`` runs and gives ``params`` float32 gradients
    close to ``want`` (the plain model's), but not equal to them (float16 rounds)."""
    try:
        got = torch.autograd.grad(out, params)
    except RuntimeError as e:  # unpack gave backward a float16 tensor: matmul of mixed dtypes
        expect("dtype" not in str(e),
               tr("backward failed ({error}): unpack gave it a tensor of another dtype than the one "
                  "that was saved. unpack should turn the float16 copy back into float32.", error=e),
               code="unpack = lambda p: p.float()")
        raise
    expect(all(g.dtype == torch.float32 for g in got),
           tr("the gradients are not float32: unpack should give backward a tensor of the dtype that "
              "was saved."), code="unpack = lambda p: p.float()")
    expect(all((a - b).norm() <= 1e-2 * b.norm() for a, b in zip(got, want)),  # float16: ~1e-3
           tr("the gradients are far from the plain model's: unpack should give back the saved values, "
              "not zeros or new tensors."), code="unpack = lambda p: p.float()")
    expect(any((a - b).abs().max() > 1e-6 * b.abs().max() for a, b in zip(got, want)),
           tr("the gradients are exactly the plain model's, without the small errors of float16: "
              "backward got float32 values that pack kept on the side. pack should return only the "
              "float16 copy; unpack should make a float32 tensor from that copy."),
           code="unpack = lambda p: p.float()")
