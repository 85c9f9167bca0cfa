"""Torch patching for live(): a function mode per thread, the Function.apply patch and the module hooks.

Each open block feeds a :class:`Listener` (``live``'s recorder). Install and removal
survive an interrupt (KeyboardInterrupt) at any line. What is installed follows the
set of open blocks (state, not a count); each step of the undo is safe to repeat; a
block is remembered before anything changes for it; callers run the undo in
``finally`` and once more in an outer ``finally`` (the first line of a ``finally`` can
be interrupted before it runs). No ``with`` statement is used on these paths: an
interrupt can land on its last line, just before it exits
(:func:`dynagraph._guards.guarded`).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Collection, Sequence
from types import FrameType
from typing import Any, Protocol, TypeVar

import torch
from torch import nn
from torch.autograd.function import Function
from torch.overrides import TorchFunctionMode
from torch.utils.hooks import RemovableHandle

from . import _source, _torch
from ._guards import guarded

__all__ = ["Listener", "close_block", "grad_on", "op_name", "open_block"]

T = TypeVar("T")

_RENAME = {"rmul": "mul", "radd": "add"}  # 2 * x is a mul, as the node says


class Listener(Protocol):
    """What an open block feeds (``live``'s recorder): its thread's ops, and each module's
    forward as it starts and ends."""

    def on_op(self, op: str, args: Sequence[Any], kwargs: dict[str, Any], out: object,
              frame: FrameType | None, inplace_target: torch.Tensor | None, /) -> None:
        """Op ``op`` ran at ``frame`` (the user's line) and returned ``out`` (an in-place
        op's ``inplace_target`` is among its outputs)."""

    def enter_module(self, module: nn.Module, /) -> None:
        """``module``'s forward starts."""

    def exit_module(self) -> None:
        """The innermost running module's forward ended (or raised)."""


_NAMES: dict[object, str] = {}  # func -> its op name: a loop calls the same few funcs


def _op_name(func: object) -> str:
    try:
        name = _NAMES.get(func)
    except TypeError:  # an unhashable callable
        return _name_of(func)
    if name is None:
        if len(_NAMES) >= 4096:  # (functions made on the fly: keep it small)
            _NAMES.clear()
        name = _NAMES[func] = _name_of(func)
    return name


op_name = _op_name  # the name a step gives a torch function (for forward-mode traces too)


def _name_of(func: object) -> str:
    name = getattr(func, "__name__", None) or str(func)
    if name == "__get__":  # a property read (x.T, x.grad): name the property
        name = getattr(getattr(func, "__self__", None), "__name__", name)
    if name.startswith("__") and name.endswith("__"):
        name = name[2:-2]
    return _RENAME.get(name, name)


# What an op returns when it returns no tensor (``None`` is not here: ``x[i] = v`` returns it).
_NOT_TENSORS = (bool, int, float, complex, str, torch.Size, torch.dtype, torch.device)


_is_compiling = torch.compiler.is_compiling  # asked once per op


class _Mode(TorchFunctionMode):
    """One per thread with open blocks: hands each user-level tensor op to that
    thread's recordings (nested calls inside an op are not re-seen)."""

    def __torch_function__(self, func: Callable[..., Any], types: Collection[type], args: Sequence[Any] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        if _is_compiling():  # dynamo traces this: the graph gets the op alone
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        if isinstance(out, _NOT_TENSORS):  # x.dim(), x.shape, x.item(): no step, so no bookkeeping
            return out
        # (a custom Function's inner ops are its step: not handed on)
        listeners = [b.listener for b in _local.thread.blocks if not b.inside_apply]
        if not listeners:
            return out
        frame = sys._getframe(1)
        if frame.f_code.co_filename.startswith(_source.PACKAGE_DIR):
            return out  # dynagraph's own bookkeeping (e.g. track_modules' probe)
        name = _op_name(func)
        target = args[0] if (name.endswith("_") or name == "setitem") and args and \
            isinstance(args[0], torch.Tensor) else None
        if _unseen(types, out):  # nothing could see the bookkeeping: no guard needed
            _give(listeners, name, args, kwargs, out, frame, target)
        else:
            guarded(_torch.no_torch_function(), _give, listeners, name, args, kwargs, out, frame, target)
        return out


_Tensor = torch.Tensor
# torch's count of the modes on this thread's stack (ours is off it while it handles an op)
_stack_len = _torch.mode_stack_len


def _unseen(types: Collection[type], out: object) -> bool:
    """Whether no torch function mode or tensor subclass can see what the recordings read
    of an op (its tensors' ``grad_fn``, ``shape``): no other mode is on this thread's
    stack (torch takes ours off while it handles the op), and the op's tensors and what
    it returned are plain tensors (``types`` names the arguments' subclasses that
    override ``__torch_function__``; a ``Parameter`` does not). Then the guard that
    turns torch function off for the bookkeeping changes nothing, and is left out: it
    cost some 5 µs per op, more than the rest of a step."""
    if _stack_len is None or _stack_len():
        return False
    for t in types:
        if t is not _Tensor:
            return False
    if out is None or type(out) is _Tensor:
        return True
    return type(out) is tuple and all(type(t) is _Tensor for t in out)


def _give(listeners: list[Listener], op: str, args: Sequence[Any], kwargs: dict[str, Any], out: object,
          frame: FrameType, target: torch.Tensor | None) -> None:
    """Hand op ``op``, run from ``frame``, to each of ``listeners`` (with torch function off,
    so that no mode or subclass sees our bookkeeping)."""
    where = _source.user_frame(frame)
    for listener in listeners:
        listener.on_op(op, args, kwargs, out, where, target)


# -- what open blocks change in torch: a mode per thread; one patch and two hooks in all --
# torch keeps TorchFunctionMode stacks per thread, so the mode sees only its own thread;
# Function.apply and the global module hooks are process-wide: they are there while any
# block is open, in any thread, and route each call to the open blocks of the calling thread.

class _Thread:
    """One thread's open blocks (in the order they opened) and the mode feeding them."""

    def __init__(self) -> None:
        self.blocks: list[_Block] = []
        self.mode: _Mode | None = None


class _Local(threading.local):
    def __init__(self) -> None:
        self.thread = _Thread()  # a plain object, so that a block closed elsewhere reaches it


class _Block:
    """One open block: its listener, the thread that opened it, and how many custom
    Functions of that thread are running (their inner ops are the Function's step)."""

    __slots__ = ("inside_apply", "listener", "thread")

    def __init__(self, listener: Listener, thread: _Thread) -> None:
        self.listener, self.thread, self.inside_apply = listener, thread, 0


_local = _Local()
_lock = threading.Lock()  # guards _open, _hooks and the patch: blocks open and close in any thread
_open: dict[Listener, _Block] = {}  # the open blocks of all threads: torch is patched while there is one
_hooks: dict[str, RemovableHandle] = {}  # the global module hooks now registered
# torch's own apply, taken at import: the only one ever put back (never one patched since)
_TORCH_APPLY: Any = Function.__dict__.get("apply")
_torch_apply: Any = getattr(_TORCH_APPLY, "__func__", None)


def _apply(cls: type[Function], *args: Any, **kwargs: Any) -> Any:
    """``Function.apply`` while any block is open: one step for each of this thread's
    recordings (the mode does not see custom Functions); other threads pass through."""
    blocks = _local.thread.blocks
    if torch.compiler.is_compiling() or not blocks:
        return _torch_apply(cls, *args, **kwargs)
    blocks = list(blocks)  # a block may open or close inside the Function
    for block in blocks:
        block.inside_apply += 1
    try:
        out = _torch_apply(cls, *args, **kwargs)
    finally:
        for block in blocks:
            block.inside_apply -= 1
    still = _local.thread.blocks
    outer = [b.listener for b in blocks if not b.inside_apply and b in still]
    if outer:
        guarded(_torch.no_torch_function(), _give, outer, f"{cls.__name__}.apply", args, kwargs, out,
                sys._getframe(1), None)
    return out


_PATCH = classmethod(_apply)


def _pre_hook(module: nn.Module, args: tuple[Any, ...]) -> None:
    if torch.compiler.is_compiling():  # compiled code calls no hooks: trace none either
        return
    for block in _local.thread.blocks:
        block.listener.enter_module(module)


def _post_hook(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
    if torch.compiler.is_compiling():
        return
    for block in _local.thread.blocks:
        block.listener.exit_module()


def _sync() -> None:
    """Make torch match :data:`_open` (call it holding :data:`_lock`): ``Function.apply``
    patched (where torch lets it be) and the module hooks added while any block is open,
    both as torch ships them when none is. Each change is one statement, made only where
    it is missing, so a run an interrupt cut short is finished by the next."""
    if _open:
        current = Function.__dict__.get("apply")
        # without a patchable apply, a custom Function's inner ops are its steps (warned once);
        # an apply some other library patched is left to it
        if current is not _PATCH and _torch.has_patchable_apply() and current is _TORCH_APPLY:
            Function.apply = _PATCH  # type: ignore[method-assign,assignment]  # the patch itself
        # (a hook whose handle an interrupt lost inside torch's register function is found
        # by identity and removed first: else every module would be entered twice)
        if "pre" not in _hooks:
            _torch.remove_global_module_hooks([_pre_hook])
            _hooks["pre"] = nn.modules.module.register_module_forward_pre_hook(_pre_hook)
        if "post" not in _hooks:
            _torch.remove_global_module_hooks([_post_hook])
            _hooks["post"] = nn.modules.module.register_module_forward_hook(_post_hook, always_call=True)
        return
    if Function.__dict__.get("apply") is _PATCH:
        Function.apply = _TORCH_APPLY  # type: ignore[method-assign]  # the patch undone
    for name in list(_hooks):
        _hooks[name].remove()  # (removing twice is harmless: an interrupt may fall before the del)
        del _hooks[name]
    _torch.remove_global_module_hooks([_pre_hook, _post_hook])  # any whose handle was lost


def open_block(listener: Listener) -> None:
    """Start feeding ``listener`` this thread's ops (the thread's first block pushes the mode).

    An interrupt at any point leaves only what :func:`close_block` undoes: call it
    inside a ``try`` whose ``finally`` calls ``close_block(listener)`` (twice, as ``live()``
    does, so that a close an interrupt cut short is finished).
    """
    thread = _local.thread
    block = _Block(listener, thread)
    guarded(_lock, _remember, listener, block)
    thread.blocks.append(block)
    if thread.mode is None:  # (a mode left by a block closed in another thread is reused)
        thread.mode = _Mode()  # named before it is pushed: close_block takes off what is named
        _torch.push_mode(thread.mode)


def close_block(listener: Listener) -> None:
    """Stop feeding ``listener``; when it was its thread's last block, take the thread's mode
    off the stack (even when other modes were pushed above it since: blocks may end in
    any order), and when it was the last open block, put torch back.

    Safe to repeat, and for a block that opened halfway or not at all. A block closed in
    another thread than the one that opened it (a generator closed elsewhere) cannot
    reach that thread's mode stack: torch keeps one per thread. The mode stays there,
    feeding nothing, until that thread opens and closes its next block.
    """
    block = _open.get(listener)
    if block is not None:
        thread = block.thread
        if block in thread.blocks:
            thread.blocks.remove(block)
        if not thread.blocks and thread is _local.thread and thread.mode is not None:
            _remove_mode(thread.mode)
            thread.mode = None
    guarded(_lock, _forget, listener)


def _remember(listener: Listener, block: _Block) -> None:
    _open[listener] = block  # remembered before anything changes, so close_block undoes it all
    _sync()


def _forget(listener: Listener) -> None:
    _open.pop(listener, None)
    _sync()


def _remove_mode(mode: TorchFunctionMode) -> None:
    """Take ``mode`` off this thread's torch function mode stack, keeping the others in
    their order (a ``mode`` not on the stack leaves the stack as it was)."""
    taken: list[TorchFunctionMode | None] = []
    try:
        while not taken or (taken[-1] is not None and taken[-1] is not mode):
            taken.append(_torch.pop_mode())  # straight into the list: never held in a loose name
    finally:
        for m in reversed(taken):
            if m is not None and m is not mode:
                _torch.push_mode(m)


def grad_on(f: Callable[..., T], *args: Any) -> T:
    """``f(*args)`` with grad mode on, and grad mode as it was afterwards, whatever instant
    an interrupt lands (``torch.enable_grad()``'s ``__enter__`` is Python: an interrupt can
    land after it turned grad on and before a ``with`` notes it). The mode before is read
    first, and putting it back is safe to repeat."""
    was = torch.is_grad_enabled()
    try:
        try:
            torch.set_grad_enabled(True)
            return f(*args)
        finally:
            torch.set_grad_enabled(was)
    finally:  # again: an interrupt can land on the first line of a finally
        torch.set_grad_enabled(was)
