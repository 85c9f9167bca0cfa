"""Tag autograd nodes with the module that created them, via ``node.metadata``."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from . import _guards, _torch
from ._walk import reach

__all__ = ["CALLS", "KEY", "active", "calls_of", "current_seq", "module_of", "tag_new_nodes", "tensors_in",
           "track_modules", "use"]

KEY = "dynagraph.module"
CALLS = "dynagraph.calls"  # {module name: number of its call} of every call that made the node
_used = False  # capture reads node.metadata only once tagging has been used


def active() -> bool:
    """Whether module tagging has been used (so capture should read the tags)."""
    return _used


def use() -> None:
    """Say that module tags are being written (capture reads them from now on)."""
    global _used
    _used = True


def module_of(fn: _torch.GradFn) -> str | None:
    """The module tag of autograd node ``fn``, if it has one."""
    return _torch.metadata(fn).get(KEY)


def calls_of(calls: Mapping[str, int] | None, module: str | None) -> tuple[int | None, ...] | None:
    """:attr:`Node.calls <dynagraph.Node>` of a node of ``module`` made while the calls
    ``{module name: number of its call}`` ran.

    Example:
        >>> calls_of({"block": 2, "block.fc": 3}, "block.fc")
        (2, 3)
    """
    if module is None or not calls:
        return None
    parts = module.split(".")
    return tuple(calls.get(".".join(parts[:k])) for k in range(1, len(parts) + 1))


def current_seq() -> int | None:
    """Autograd's per-thread creation counter now, or None where no node is recorded."""
    probe = _probe() * 1
    seq = None if probe.grad_fn is None else _torch.sequence_nr(probe.grad_fn)
    return None if seq is None else seq + 1


@functools.cache
def _probe() -> torch.Tensor:
    """A leaf whose one-op products read the counter (made once, on first use)."""
    return torch.zeros((), requires_grad=True)


def tensors_in(obj: object, out: list[torch.Tensor]) -> list[torch.Tensor]:
    """Flatten nested outputs (tuples, lists, dicts) into a list of tensors."""
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (tuple, list)):
        for item in obj:  # (an op's arguments are mostly tensors and numbers: no call for them)
            if isinstance(item, torch.Tensor):
                out.append(item)
            elif isinstance(item, (tuple, list, dict)):
                tensors_in(item, out)
    elif isinstance(obj, dict):
        for item in obj.values():
            tensors_in(item, out)
    return out


def tag_new_nodes(outputs: object, name: str, start: int, call: int | None = None) -> None:
    """Tag untagged nodes created since ``start`` that lead to ``outputs`` (and note
    that the module's ``call``-th call made them, in :data:`CALLS`).

    Inner modules finish first and tag their nodes; an outer module then walks
    through them (without retagging) to reach its own ops.
    """
    def enter(fn: _torch.GradFn) -> bool:
        if fn.name().endswith("AccumulateGrad") or (_torch.sequence_nr(fn) or 0) < start:
            return False  # a leaf, or made before this module's call
        meta = _torch.metadata(fn)
        meta.setdefault(KEY, name)
        if call is not None:
            made = meta.get(CALLS)
            if made is None or name not in made:  # (a new dict: a live recording shares its own)
                meta[CALLS] = {**(made or {}), name: call}
        return True

    reach([t.grad_fn for t in tensors_in(outputs, []) if t.grad_fn is not None], enter)


@contextlib.contextmanager
def track_modules(model: nn.Module, prefix: str = "") -> Iterator[nn.Module]:
    """Record which submodule of ``model`` created each autograd node.

    Inside the block every forward call of a submodule tags the nodes it created
    (``node.metadata["dynagraph.module"]``), so that :func:`dynagraph.draw` can group
    and collapse them by module. Hooks are removed on exit, even if the body raises
    or an interrupt (Ctrl-C) lands while they are added or removed.

    Args:
        model: The module whose submodules are tracked.
        prefix: Prepended to module names (for a model nested in a bigger one).

    Raises:
        TypeError: ``model`` is not an ``nn.Module``, or ``prefix`` is not a str.

    Example:
        >>> with dg.track_modules(model):
        ...     loss = model(x).sum()
        >>> dg.draw(loss, params=model, depth=1)
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"track_modules needs an nn.Module; got {type(model).__name__}")
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str, the dotted name of the model in a bigger one "
                        f"(such as 'encoder'); got {prefix!r} ({type(prefix).__name__})")
    use()
    starts: list[int | None] = []
    handles: list[RemovableHandle] = []
    made: list[Callable[..., None]] = []  # every hook, noted before torch stores it (see _unhook)

    def pre(module: nn.Module, args: tuple[Any, ...]) -> None:
        starts.append(current_seq())

    def post_for(name: str) -> Callable[[nn.Module, tuple[Any, ...], Any], None]:
        calls = 0  # this module's calls so far (a shared block applied twice: 2)

        def post(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
            nonlocal calls
            start = starts.pop() if starts else None  # (none: the block opened inside this forward)
            calls += 1
            if start is not None:  # output is None when the forward raised
                tag_new_nodes(output, name, start, calls)
        return post

    made.append(pre)
    try:
        try:
            for name, module in model.named_modules():
                full = ".".join(p for p in (prefix, name) if p)
                if not full:  # ops of the top-level forward belong to no submodule
                    continue
                handles.append(module.register_forward_pre_hook(pre))
                made.append(post := post_for(full))
                # always_call: a forward that raises still ends, so a caller that catches it keeps its start
                handles.append(module.register_forward_hook(post, always_call=True))
            yield model
        finally:
            _unhook(model, handles, made)
    finally:
        _unhook(model, handles, made)  # again: it finishes a first run that an interrupt cut short


def _unhook(model: nn.Module, handles: list[RemovableHandle], made: list[Callable[..., None]]) -> None:
    """Remove the hooks of ``handles``, then any of ``made`` still on a module of ``model``:
    torch's ``register_forward_(pre_)hook`` stores the hook before it returns the handle,
    so an interrupt between the two leaves a hook no handle names. Safe to repeat."""
    _guards.remove_hooks(handles)
    for module in model.modules():
        _torch.remove_module_hooks(module, made)
