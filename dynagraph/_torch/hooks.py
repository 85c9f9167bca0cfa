"""Modes and hooks: the torch function mode stack, the engine's entry point, forward
hooks removed by identity, and the modules and frames that ``torch.compile`` makes."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager
from types import FrameType
from typing import Any, TypeGuard

import torch
from torch.overrides import TorchFunctionMode

from . import features

__all__ = ["DYNAMO_DIR", "FX_CODE", "compiled_graph_frame", "engine_entry", "graph_task_id_reader",
           "has_patchable_apply", "mode_stack_len", "no_torch_function", "original_module", "own_parameters",
           "pop_mode", "push_mode", "queue_engine_callback", "remove_global_module_hooks",
           "remove_module_hooks", "set_engine_entry"]

FX_CODE = "<eval_with_key>"  # the file name torch.fx gives the code of a graph it writes
DYNAMO_DIR = os.path.join(os.path.dirname(torch.__file__), "_dynamo") + os.sep  # dynamo's frames


def engine_entry() -> Callable[..., Any] | None:
    """``torch.autograd._engine_run_backward``, through which ``backward()`` and
    ``autograd.grad`` (and ``torch.func``'s transforms) run the engine; ``None`` where
    torch has none."""
    entry = getattr(torch.autograd, features.ENGINE_ENTRY, None)
    if entry is None:
        features.missing(features.ENGINE_ENTRY)
    return entry


def set_engine_entry(entry: Callable[..., Any]) -> None:
    """Make ``backward()`` and ``autograd.grad`` call ``entry`` to run the engine."""
    setattr(torch.autograd, features.ENGINE_ENTRY, entry)


def own_parameters(module: torch.nn.Module) -> list[tuple[str, torch.nn.Parameter | None]]:
    """``(name, parameter)`` of ``module``'s own parameters (not its children's), in the order
    they were registered, ``None`` for one registered empty (``bias=False``)."""
    return list(module._parameters.items())


def queue_engine_callback(callback: Callable[[], None]) -> None:
    """Have the autograd engine call ``callback`` when the backward now running ends."""
    torch.autograd.Variable._execution_engine.queue_callback(callback)


def graph_task_id_reader() -> Callable[[], int] | None:
    """``torch._C._current_graph_task_id``: the id of the backward pass running on this
    thread, a new one for each pass (-1 outside one); ``None`` where torch has none."""
    reader = getattr(torch._C, features.GRAPH_TASK_ID, None)
    if reader is None:
        features.missing("_current_graph_task_id")
    return reader


def original_module(module: Any) -> Any:
    """The model that ``torch.compile(model)`` wraps (the module itself otherwise): its
    forward hooks see the wrapper, which has no name in the model."""
    return getattr(module, features.ORIG_MOD, module)


def compiled_graph_frame(frame: FrameType | None) -> TypeGuard[FrameType]:
    """Whether ``frame`` runs a graph ``torch.compile`` made (torch.fx writes its code
    to no file; the name starts with :data:`FX_CODE`). Where torch names that code
    otherwise, each op of a compiled call is a step of its own, as in eager code."""
    return frame is not None and frame.f_code.co_filename.startswith(FX_CODE)


# TorchFunctionMode stacks (per thread) and turning them off: live() keeps its mode on
# the calling thread's stack and runs its own bookkeeping with every mode off.
def no_torch_function() -> AbstractContextManager[None]:
    """A context in which no torch function mode or tensor subclass sees torch calls."""
    return torch._C.DisableTorchFunction()


# torch's count of the torch function modes on this thread's stack (None: this torch has none)
mode_stack_len: Callable[[], int] | None = getattr(torch._C, "_len_torch_function_stack", None)


def push_mode(mode: TorchFunctionMode) -> None:
    """Put ``mode`` on this thread's torch function mode stack (as entering it would)."""
    torch._C._push_on_torch_function_stack(mode)


def pop_mode() -> TorchFunctionMode | None:
    """Take the top mode off this thread's torch function mode stack, or ``None``."""
    return torch._C._pop_torch_function_stack() if torch._C._len_torch_function_stack() else None


# Hooks by identity: torch's register functions store the hook, then return its handle;
# an interrupt between the two loses the handle and leaves the hook for good. These find
# such hooks in torch's hook dicts by what they are, and delete them with their flags.
_GLOBAL_HOOK_DICTS = ("_global_forward_pre_hooks", "_global_forward_hooks")  # in torch.nn.modules.module
_GLOBAL_FLAG_DICTS = ("_global_forward_hooks_always_called", "_global_forward_hooks_with_kwargs")
_MODULE_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks")  # on each nn.Module
_MODULE_FLAG_DICTS = ("_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs",
                      "_forward_hooks_always_called")


def _remove_by_identity(owner: Any, hook_dicts: Sequence[str], flag_dicts: Sequence[str],
                        hooks: Collection[object]) -> int:
    """Delete from ``owner``'s hook dicts each entry whose hook is one of ``hooks`` (by
    identity), and its flags; return how many. Safe to repeat after an interrupt."""
    removed, ours = 0, {id(h) for h in hooks}  # (alive: the caller holds them)
    for name in hook_dicts:
        found = getattr(owner, name, None)
        if not isinstance(found, dict):
            continue
        for key in [k for k, v in list(found.items()) if id(v) in ours]:
            for flags in flag_dicts:  # flags first: a key whose hook is gone is found no more
                getattr(owner, flags, {}).pop(key, None)
            found.pop(key, None)
            removed += 1
    return removed


def remove_global_module_hooks(hooks: Collection[object]) -> int:
    """Remove ``hooks`` from torch's global module hooks (``register_module_forward_pre_hook``
    and ``register_module_forward_hook``), whether or not their handles were returned."""
    return _remove_by_identity(torch.nn.modules.module, _GLOBAL_HOOK_DICTS, _GLOBAL_FLAG_DICTS, hooks)


def remove_module_hooks(module: torch.nn.Module, hooks: Collection[object]) -> int:
    """Remove ``hooks`` from ``module``'s forward (pre-)hooks, whether or not their handles
    were returned."""
    return _remove_by_identity(module, _MODULE_HOOK_DICTS, _MODULE_FLAG_DICTS, hooks)


def has_patchable_apply() -> bool:
    """Whether ``Function.apply`` is a classmethod in the class dict (live.py swaps it)."""
    if isinstance(torch.autograd.Function.__dict__.get("apply"), classmethod):
        return True
    features.missing("Function.apply")
    return False
