"""Torch patching for live(): a function mode per thread, the Function.apply patch and the module hooks."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.autograd.function import Function
from torch.overrides import TorchFunctionMode

from . import _source, _torch

if TYPE_CHECKING:
    from .live import Recording

__all__ = ["close_block", "open_block"]

_RENAME = {"rmul": "mul", "radd": "add"}  # 2 * x is a mul, as the node says


def _op_name(func: object) -> str:
    name = getattr(func, "__name__", None) or str(func)
    if name == "__get__":  # a property read (x.T, x.grad): name the property
        name = getattr(getattr(func, "__self__", None), "__name__", name)
    if name.startswith("__") and name.endswith("__"):
        name = name[2:-2]
    return _RENAME.get(name, name)


# What an op returns when it returns no tensor (``None`` is not here: ``x[i] = v`` returns it).
_NOT_TENSORS = (bool, int, float, complex, str, torch.Size, torch.dtype, torch.device)


class _Mode(TorchFunctionMode):
    """One per thread with open blocks: hands each user-level tensor op to that
    thread's recordings (nested calls inside an op are not re-seen)."""

    def __torch_function__(self, func: Callable[..., Any], types: Collection[type], args: Sequence[Any] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        if torch.compiler.is_compiling():  # dynamo traces this: the graph gets the op alone
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        if isinstance(out, _NOT_TENSORS):  # x.dim(), x.shape, x.item(): no step, so no bookkeeping
            return out
        recs = [r for r in _here.recs if not r._inside_apply]  # ops inside a Function are its step
        if not recs:
            return out
        with _torch.no_torch_function():  # no mode or subclass sees our bookkeeping
            caller = sys._getframe(1).f_code
            if caller.co_filename.startswith(_source.PACKAGE_DIR):
                return out  # dynagraph's own bookkeeping (e.g. track_modules' probe)
            name = _op_name(func)
            target = args[0] if (name.endswith("_") or name == "setitem") and args and \
                isinstance(args[0], torch.Tensor) else None
            frame = _source.user_frame(sys._getframe(1))
            for rec in recs:
                rec._on_op(name, args, kwargs, out, frame, target)
        return out


# -- what open blocks change in torch: a mode per thread; one patch and two hooks in all --
# torch keeps TorchFunctionMode stacks per thread, so the mode sees only its own thread;
# Function.apply and the global module hooks are process-wide, so they are installed once,
# counted under a lock, and route each call to the open recordings of the calling thread.

class _Thread(threading.local):
    """This thread's open recordings (in the order they opened) and the mode feeding them."""

    def __init__(self) -> None:
        self.recs: list[Recording] = []
        self.mode: _Mode | None = None


_here = _Thread()
_lock = threading.Lock()  # guards _installed: blocks open and close in any thread
_installed: dict = {}  # while any block is open: "blocks" (count), "hooks", "patched"
_original_apply: Any = Function.__dict__.get("apply")  # kept after the last block: a thread may be mid-call


def _apply(cls: type[Function], *args: Any, **kwargs: Any) -> Any:
    """``Function.apply`` while any block is open: one step for each of this thread's
    recordings (the mode does not see custom Functions); other threads pass through."""
    original = _original_apply.__func__
    if torch.compiler.is_compiling() or not _here.recs:
        return original(cls, *args, **kwargs)
    recs = list(_here.recs)  # a block may open or close inside the Function
    for rec in recs:
        rec._inside_apply += 1
    try:
        out = original(cls, *args, **kwargs)
    finally:
        for rec in recs:
            rec._inside_apply -= 1
    outer = [rec for rec in recs if not rec._inside_apply and rec in _here.recs]
    if outer:
        with _torch.no_torch_function():
            frame = _source.user_frame(sys._getframe(1))
            for rec in outer:
                rec._on_op(f"{cls.__name__}.apply", args, kwargs, out, frame)
    return out


def _pre_hook(module: nn.Module, args: tuple[Any, ...]) -> None:
    if torch.compiler.is_compiling():  # compiled code calls no hooks: trace none either
        return
    for rec in _here.recs:
        rec._enter_module(module)


def _post_hook(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
    if torch.compiler.is_compiling():
        return
    for rec in _here.recs:
        if rec._modules:  # a block opened inside a forward sees its end only
            rec._modules.pop()


def _install() -> None:
    """Patch ``Function.apply`` (where torch lets it be patched) and add the global module
    hooks, once for all blocks."""
    global _original_apply
    with _lock:
        if not _installed:
            # without a patchable apply, a custom Function's inner ops are its steps (warned once)
            _installed["patched"] = _torch.has_patchable_apply()
            if _installed["patched"]:
                _original_apply = Function.__dict__["apply"]
                Function.apply = classmethod(_apply)  # type: ignore[method-assign,assignment]  # the patch itself
            _installed["hooks"] = [
                nn.modules.module.register_module_forward_pre_hook(_pre_hook),
                nn.modules.module.register_module_forward_hook(_post_hook, always_call=True)]
            _installed["blocks"] = 0
        _installed["blocks"] += 1


def _uninstall() -> None:
    """Undo :func:`_install` when the last open block, in any thread, ends."""
    with _lock:
        _installed["blocks"] -= 1
        if _installed["blocks"]:
            return
        if _installed["patched"]:
            Function.apply = _original_apply  # type: ignore[method-assign]  # the patch undone
        for h in _installed["hooks"]:
            h.remove()
        _installed.clear()


def open_block(rec: Recording) -> None:
    """Start feeding ``rec`` this thread's ops (the first block pushes the mode)."""
    _install()
    if _here.mode is None:  # (a mode left by a block closed in another thread is reused)
        _here.mode = _Mode()
        _torch.push_mode(_here.mode)
    _here.recs.append(rec)
    rec._peers = _here.recs


def close_block(rec: Recording) -> None:
    """Stop feeding ``rec``; the thread's last block takes its mode off the stack even
    when other modes were pushed above it since (blocks may end in any order)."""
    try:
        peers = rec._peers
        peers.remove(rec)
        if not peers and _here.recs is peers:
            _remove_mode(_here.mode)
            _here.mode = None
    finally:
        _uninstall()


def _remove_mode(mode: TorchFunctionMode | None) -> None:
    """Take ``mode`` off this thread's torch function mode stack, keeping the others."""
    above: list[TorchFunctionMode] = []
    while (top := _torch.pop_mode()) is not None:
        if top is mode:
            break
        above.append(top)
    for m in reversed(above):
        _torch.push_mode(m)

