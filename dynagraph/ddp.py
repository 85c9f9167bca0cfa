"""DDP in a backward replay: which bucket each gradient went into, and when each bucket launched.

``trace_backward(loss, params=ddp_model)`` on a ``DistributedDataParallel`` model records,
beside the nodes backward ran, each all-reduce DDP launched: the bucket's index, its
parameters, and the node run it launched in. It needs two hooks:

- ``register_post_accumulate_grad_hook`` on each parameter, removed at the end of the
  block: it notes each gradient as it lands in ``.grad``;
- a communication hook (``DistributedDataParallel.register_comm_hook``) that notes the
  bucket and then runs DDP's own all-reduce (``default_hooks.allreduce_hook``: divide by
  the world size, sum over ranks). DDP takes one communication hook per model, for good:
  the first trace registers it and it stays. Outside a trace it only runs that all-reduce,
  so the model computes what it computed without it. A model with a hook of its own
  cannot be traced this way, and a traced model cannot take another hook later: trace
  ``params=model.module`` for a replay without buckets that leaves the model untouched.

The picture fills each parameter with its bucket's colour (:data:`BUCKET_FILLS`, by bucket
index) and adds a line ``bucket k`` in its box; the stepper has a step ``bucket k launched
(n parameters)`` just after the node run the bucket launched in, lighting its parameters.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeGuard

import torch
from torch import nn

from ._dot import Overlay
from ._language import tr

if TYPE_CHECKING:
    from .backward import BackwardTrace

__all__ = ["BUCKET_FILLS", "Launch", "is_ddp", "launches_of", "marked", "place"]

# Fill colours of parameters by bucket (cycled): pale, so the black text stays readable.
BUCKET_FILLS = ("#ffd8a8", "#eebefa", "#99e9f2", "#ffc9c9", "#d8f5a2", "#ffec99")  # no kind's own fill
_HOOK_ATTR = "_dynagraph_bucket_hook"  # the model's one comm hook, once a trace registered it


@dataclass
class Launch:
    """One all-reduce DDP launched during a traced backward pass.

    Attributes:
        bucket: DDP's index of the bucket (``GradBucket.index()``, from 0).
        params: Names of its parameters, in DDP's order (``GradBucket.parameters()``).
        landed: Names of the parameters whose gradient had landed in ``.grad`` when it
            launched, in the order they landed (every one of ``params`` is among them).
        after: Position in ``trace.order`` of the node run it launched in: the
            ``AccumulateGrad`` of the last of its parameters to land (``-1`` when none
            of them is in the traced graph). Node runs after it ran while the
            all-reduce was under way: ``len(trace.order) - 1 - after`` of them.
    """

    bucket: int
    params: list[str]
    landed: list[str] = field(default_factory=list)
    after: int = -1


def is_ddp(model: object) -> TypeGuard[nn.Module]:
    """Whether ``model`` is a ``DistributedDataParallel`` (without importing it when unused)."""
    ddp = getattr(getattr(torch.nn, "parallel", None), "DistributedDataParallel", None)
    return ddp is not None and isinstance(model, ddp)


class _BucketHook:
    """The state of the model's communication hook: the running trace, if any, and the
    names of the gradients that landed in it so far."""

    def __init__(self, names: dict[int, str]) -> None:
        self.names = names
        self.trace: BackwardTrace | None = None
        self.landed: list[str] = []


def _note_then_all_reduce(state, bucket):  # type: ignore[no-untyped-def]  # DDP reads annotations: none
    """The communication hook: note the bucket in the running trace (if any), then run
    DDP's default all-reduce (divide by the world size, sum over the ranks)."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    trace = state.trace
    if trace is not None:  # after: the node runs so far (see place)
        params = [state.names.get(id(p), "?") for p in bucket.parameters()]
        trace.launches.append(Launch(bucket.index(), params, list(state.landed), len(trace.order)))
    return allreduce_hook(None, bucket)  # type: ignore[arg-type]  # None: the default group


def _bucket_hook(model: nn.Module) -> _BucketHook:
    """The model's bucket hook, registered now if this is its first trace.

    Raises:
        RuntimeError: the model already has a communication hook of its own.
    """
    hook = getattr(model, _HOOK_ATTR, None)
    if hook is not None:
        return hook
    hook = _BucketHook({id(p): n for n, p in model.named_parameters()})
    try:
        model.register_comm_hook(hook, _note_then_all_reduce)  # type: ignore[operator]
    except RuntimeError as e:
        raise RuntimeError(
            "trace_backward(params=ddp_model) records buckets with a communication hook, and this "
            "DDP model already has one (DDP takes one per model, for good). Pass params=model.module "
            "to trace without buckets, or trace a model built without a hook of its own") from e
    setattr(model, _HOOK_ATTR, hook)
    return hook


@contextlib.contextmanager
def launches_of(model: nn.Module, trace: BackwardTrace) -> Iterator[None]:
    """Note each all-reduce ``model`` launches inside the block in ``trace.launches``.

    The first call registers the model's communication hook, for good (see the module
    docstring); the gradient hooks are removed at the end, even if the block raises.
    """
    hook = _bucket_hook(model)
    hook.landed, hook.trace = [], trace
    handles = []
    try:
        for name, p in model.named_parameters():
            if p.requires_grad:
                handles.append(p.register_post_accumulate_grad_hook(
                    lambda _, name=name, landed=hook.landed: landed.append(name)))
        yield
    finally:
        for h in handles:
            h.remove()
        hook.trace = None
        place(trace.launches, trace)


def place(launches: list[Launch], trace: BackwardTrace) -> None:
    """Set each launch's :attr:`Launch.after`: the last run of one of its parameters'
    ``AccumulateGrad`` among the node runs up to the one it launched in."""
    acc = {n.label: n.id for n in trace.nodes if n.kind == "parameter"}
    for launch in launches:
        ids = {acc[p] for p in launch.params if p in acc}
        # DDP's hook on the AccumulateGrad node runs before the trace's: the run that
        # launched it is noted just after the launch, at position len(order) then
        upto = min(len(trace.order), launch.after + 1)
        runs = [i for i in range(upto) if trace.order[i] in ids]
        launch.after = runs[-1] if runs else -1


def marked(trace: BackwardTrace, overlay: Overlay) -> Overlay:
    """``overlay`` with each parameter marked by its bucket (fill and a line ``bucket k``),
    and a step ``bucket k launched (n parameters)`` after the node run it launched in."""
    acc = {n.label: n.id for n in trace.nodes if n.kind == "parameter"}
    by_after: dict[int, list[Launch]] = {}
    for launch in trace.launches:
        by_after.setdefault(launch.after, []).append(launch)
        for p in launch.params:
            if p in acc:
                overlay.notes[acc[p]] = tr("bucket {k}", k=launch.bucket)
                overlay.fills[acc[p]] = BUCKET_FILLS[launch.bucket % len(BUCKET_FILLS)]
    steps = []
    for k, step in enumerate([("", []), *overlay.steps]):  # a launch before any node run goes first
        if k:
            steps.append(step)
        for launch in by_after.get(k - 1, []):
            ids = [acc[p] for p in launch.params if p in acc]
            steps.append((tr("bucket {k} launched ({n} parameters): all-reduce of their gradients",
                             k=launch.bucket, n=len(launch.params)), ids))
    overlay.steps = steps
    return overlay
