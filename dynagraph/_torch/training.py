"""A training step's internals: ``DistributedDataParallel``'s buckets, the fused norm
kernel, and the timeline of PyTorch's memory profiler."""

from __future__ import annotations

from typing import Any

import torch

from . import features

__all__ = ["MemoryChange", "ddp_buckets", "ddp_logging_data", "foreach_norm", "has_foreach_norm",
           "memory_events", "profiler_running"]


def ddp_buckets(model: Any) -> list[Any]:
    """The gradient buckets of a ``DistributedDataParallel`` model, from its reducer."""
    return list(model.reducer._get_zeros_like_grad_buckets())


def ddp_logging_data(model: Any) -> dict[str, Any]:
    """What a ``DistributedDataParallel`` model logs about itself (``has_rebuilt_buckets``...)."""
    return dict(model._get_ddp_logging_data())


def has_foreach_norm() -> bool:
    """Whether ``torch._foreach_norm`` (one kernel for many norms) exists (used by norms.py)."""
    if hasattr(torch, "_foreach_norm"):
        return True
    features.missing("_foreach_norm")
    return False


def foreach_norm(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """The L2 norm of each tensor: one ``torch._foreach_norm`` kernel where it exists
    and takes these tensors, else one ``vector_norm`` each."""
    if tensors and has_foreach_norm():
        try:
            return list(torch._foreach_norm(tensors))
        except (RuntimeError, TypeError):  # a layout or dtype the fused kernel refuses
            pass
    return [torch.linalg.vector_norm(t) for t in tensors]

# -- the memory profiler's timeline (step_memory.py): torch.profiler._memory_profiler --


def profiler_running() -> bool:
    """Whether a torch profiler is running in this process (a second one cannot start)."""
    enabled = getattr(torch.autograd, "_profiler_enabled", None)
    return bool(enabled()) if enabled is not None else False


MemoryChange = tuple[int, list[tuple[int, str | None]]]  # (time ns, [(bytes, category name), ...])


def memory_events(prof: Any, device: str) -> tuple[int, list[MemoryChange]] | None:
    """What PyTorch's memory profiler saw on ``device`` in the finished profile ``prof``:
    ``(trace start ns, [(time ns, [(bytes, category name), ...]), ...])``, one entry per
    change of a tensor, in order: a tensor made or freed is one change of its bytes; a
    new version that moves it to another category, two (a tensor that existed before
    the step has time -1). ``None`` (warned once) where this torch has no memory
    profiler of that shape."""
    try:
        from torch.profiler import _memory_profiler as mp
        profile = prof._memory_profile()
        timeline, categories = profile.timeline, profile._categories
        start = prof.profiler.kineto_results.trace_start_ns()
        made, destroy = (mp.Action.PREEXISTING, mp.Action.CREATE), mp.Action.DESTROY
        bump = mp.Action.INCREMENT_VERSION
        key_type = mp.TensorKey
    except (ImportError, AttributeError):
        features.missing("memory profiler")
        return None
    target = torch.device(device)

    def category(key: Any, version: int) -> str | None:
        found = categories.get(key, version) if isinstance(key, key_type) else None
        return None if found is None else found.name

    # A tensor made before the step that the step only frees (the gradients that
    # zero_grad(set_to_none=True) drops) shows only where an earlier profile saw it made
    # ("Memory block of unknown size was allocated before the profiling started"): left
    # out always, so that the same step gives the same timeline.
    actions: dict[Any, set[Any]] = {}
    for _, action, (key, _), _ in timeline:
        actions.setdefault(key, set()).add(action)
    only_freed = {key for key, seen in actions.items() if seen == {made[0], destroy}}
    out: list[MemoryChange] = []
    for t, action, (key, version), nbytes in timeline:
        if key.device != target or key in only_freed:
            continue
        if action in made:
            out.append((t, [(nbytes, category(key, version))]))
        elif action == destroy:
            out.append((t, [(-nbytes, category(key, version))]))
        elif action == bump:
            out.append((t, [(-nbytes, category(key, version)), (nbytes, category(key, version + 1))]))
    return start, out
