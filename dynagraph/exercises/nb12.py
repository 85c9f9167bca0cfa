"""Checks for 12_ddp_autograd_hooks.ipynb."""

from __future__ import annotations

import contextlib
import copy
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .._language import N_, tr
from .._records import Node
from . import exercise, expect

# What an answer may use: the notebook's imports (tests run stubs and solutions after this).
SETUP = """
import torch
from torch import nn
import dynagraph as dg
"""


def _mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))


def _whole_batch(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
    grads = torch.autograd.grad((model(x) - y).pow(2).mean(), list(model.parameters()))
    return {name: g for (name, _), g in zip(model.named_parameters(), grads)}


@exercise("12.1", N_("what all-reduce leaves on every rank, simulated in one process"), answer="ddp_gradient")
def _ddp_gradient(ddp_gradient: Callable[..., dict[str, torch.Tensor]]) -> None:
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(8, 4, generator=g), torch.randn(8, 1, generator=g)
    for world in (1, 2, 4):
        model = _mlp()
        sizes: list[int] = []
        hook = model.register_forward_pre_hook(lambda _, args, sizes=sizes: sizes.append(args[0].shape[0]))
        try:
            got = ddp_gradient(model, x, y, world)
        finally:
            hook.remove()
        expect(isinstance(got, dict) and set(got) == {n for n, _ in model.named_parameters()},
               tr("return a dict from each parameter's name (as model.named_parameters() names it) to its "
                  "gradient."))
        expect(sizes == [len(x) // world] * world,
               tr("with world={world} each of the {world} ranks runs the model on its own {rows} rows; your "
                  "answer ran it on batches of {sizes}. Split x and y into world equal parts.",
                  world=world, rows=len(x) // world, sizes=sizes),
               code="`for xs, ys in zip(x.chunk(world), y.chunk(world)): ...`")
        want = _whole_batch(_mlp(), x, y)
        for name, w in want.items():
            ratio = float(got[name].norm() / w.norm())
            expect(torch.allclose(got[name], w, atol=1e-6),
                   tr("with world={world} the gradient of {name} should equal the whole batch's gradient; "
                      "it is {ratio:.2f} times as long. Each rank's loss is the mean over its rows, and "
                      "all-reduce then averages over the ranks: divide the sum by world.",
                      world=world, name=name, ratio=ratio))


def _trace(kinds: str, order: list[int], launches: list[tuple[int, int]]) -> Any:
    """A backward replay of nodes of ``kinds`` (``o`` an op, ``p`` a parameter), run in
    ``order``, with launches ``(bucket, after)``."""
    from ..backward import BackwardTrace
    from ..ddp import Launch
    nodes = [Node(id=i, name="AccumulateGrad" if k == "p" else "AddmmBackward0",
                  kind="parameter" if k == "p" else "op", label=f"p{i}" if k == "p" else "addmm")
             for i, k in enumerate(kinds)]
    trace = BackwardTrace(nodes, [], {})
    trace.order = order
    trace.launches = [Launch(bucket, [], [], after) for bucket, after in launches]
    return trace


@exercise("12.2", N_("count the op nodes backward ran while each bucket's all-reduce was under way"),
          answer="overlapped")
def _overlapped(overlapped: Callable[[Any], dict[int, int]]) -> None:
    cases = [
        (_trace("oppopp", [0, 1, 2, 3, 4, 5], [(0, 2), (1, 5)]), {0: 1, 1: 0}),
        (_trace("opopopop", [0, 1, 2, 3, 4, 5, 6, 7], [(0, 1), (1, 3), (2, 7)]), {0: 3, 1: 2, 2: 0}),
        (_trace("ooppoop", [0, 1, 2, 3, 4, 5, 6], [(0, 3)]), {0: 2}),
    ]
    for trace, want in cases:
        got = overlapped(trace)
        expect(isinstance(got, dict),
               tr("return a dict from each launch's bucket index (launch.bucket) to a count; got {type}.",
                  type=type(got).__name__))
        expect(got == want,
               tr("for launches at positions {afters} of {n} node runs the counts are {want}; "
                  "you gave {got}. "
                  "Count only the node runs after position launch.after, and only op nodes: an "
                  "AccumulateGrad (kind 'parameter') computes nothing.",
                  afters=[b.after for b in trace.launches], n=len(trace.order), want=want, got=got),
               code="`trace.nodes[nid].kind == 'op' for nid in trace.order[launch.after + 1:]`")


@contextlib.contextmanager
def _one_rank() -> Iterator[None]:
    """A one-process gloo group for the check, unless the learner's kernel has one."""
    import torch.distributed as dist
    if dist.is_initialized():
        yield
        return
    with tempfile.TemporaryDirectory() as folder:
        dist.init_process_group("gloo", init_method=f"file://{Path(folder) / 'store'}", rank=0, world_size=1)
        try:
            yield
        finally:
            dist.destroy_process_group()


def _counting_hook(state: dict, bucket):  # type: ignore[no-untyped-def]  # DDP reads annotations
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    state["launched_at"].append(state["forwards"])
    return allreduce_hook(None, bucket)  # type: ignore[arg-type]  # None: the default group


@exercise("12.3", N_("gradient accumulation under DDP: one all-reduce for several micro-batches"),
          answer="accumulate")
def _accumulate(accumulate: Callable[[nn.Module, list], None]) -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP
    g = torch.Generator().manual_seed(5)
    batches = [(torch.randn(4, 4, generator=g), torch.randn(4, 1, generator=g)) for _ in range(3)]
    plain = _mlp()
    want = {name: sum(gs) / len(batches) for name, *gs in zip(
        [n for n, _ in plain.named_parameters()], *(_whole_batch(plain, x, y).values() for x, y in batches))}
    with _one_rank():
        inner = _mlp()
        model = DDP(copy.deepcopy(inner))
        state: dict[str, Any] = {"launched_at": [], "forwards": 0}
        model.register_comm_hook(state, _counting_hook)
        model.module.register_forward_pre_hook(lambda *_: state.update(forwards=state["forwards"] + 1))
        state["backwards"] = 0  # AccumulateGrad runs of one parameter: one per backward through the model
        first = next(model.module.parameters())
        first.register_post_accumulate_grad_hook(lambda _: state.update(backwards=state["backwards"] + 1))
        accumulate(model, batches)
    launched = state["launched_at"]
    expect(state["forwards"] == len(batches),
           tr("run the model once per micro-batch: {n} forwards, not {got}.",
              n=len(batches), got=state["forwards"]))
    expect(state["backwards"] == len(batches),
           tr("call backward() once per micro-batch: {n} backward passes, not {got}. A summed loss "
              "with one backward keeps every micro-batch's graph in memory at once.",
              n=len(batches), got=state["backwards"]))
    expect(launched,
           tr("DDP launched no all-reduce: the ranks never exchanged gradients. Run the last micro-batch's "
              "backward outside model.no_sync()."))
    expect(set(launched) == {len(batches)},
           tr("all-reduces were launched after forwards {launched}: only the last micro-batch's backward "
              "should launch one. Run the others inside `with model.no_sync():` (forward and backward).",
              launched=launched),
           code="with model.no_sync():\n    loss.backward()")
    for name, p in model.module.named_parameters():
        expect(p.grad is not None,
               tr("{name}.grad is None: call backward() on each micro-batch's loss.", name=name))
        ratio = float(p.grad.norm() / want[name].norm())
        expect(torch.allclose(p.grad, want[name], atol=1e-6),
               tr("{name}.grad should be the gradient of the mean of the micro-batches' losses; "
                  "it is {ratio:.2f} times as long. backward() adds into .grad: "
                  "divide each loss by the number of micro-batches.",
                  name=name, ratio=ratio))
