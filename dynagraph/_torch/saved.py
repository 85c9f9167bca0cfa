"""What a node saved for backward: the values ``show_saved`` lists, and the raw saved
tensors (read without unpacking) whose storages ``memory=True`` weighs."""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch.autograd.graph import GradientEdge

from . import features
from .nodes import GradFn, is_custom

__all__ = ["FREED", "checkpoint_inputs", "is_saved_output", "lifted_saved", "packed_of",
           "raw_saved_values", "saved_values", "storage_of"]

FREED = object()  # a saved tensor that backward() released


def saved_values(fn: GradFn) -> list[tuple[str, object]]:
    """``(name, value)`` of each saved attribute of a built-in node; :data:`FREED` once released."""
    if not _exposes_saved(features.SAVED):
        features.missing("_saved_")
        return []
    out: list[tuple[str, object]] = []
    for attr in _class_attrs(type(fn), features.SAVED):
        try:
            out.append((attr[len(features.SAVED):], getattr(fn, attr)))
        except RuntimeError:  # "Trying to backward through the graph a second time"
            out.append((attr[len(features.SAVED):], FREED))
    return out


@functools.cache  # one probe per attribute prefix
def _exposes_saved(prefix: str) -> bool:
    """Whether built-in nodes expose what they saved (``MulBackward0._saved_other``)."""
    with torch.inference_mode(False), torch.enable_grad():
        probe = torch.ones(1, requires_grad=True)
        return hasattr((probe * probe).grad_fn, f"{prefix}other")

# -- saved tensors as autograd holds them (_measure.py): sizes read without unpacking --


def raw_saved_values(fn: Any) -> list[tuple[str, object]]:
    """``(name, raw)`` of each tensor ``fn`` saved for backward, where ``raw`` is a
    ``SavedTensor`` (or a list of them), :data:`FREED` once backward released it.

    Reading a raw saved tensor runs no ``saved_tensors_hooks`` unpack hook, so it
    neither copies nor moves data (and does not trigger a checkpoint's recompute).
    A custom Function's ``ctx.save_for_backward`` tensors are named ``tensors``.
    """
    attrs = _raw_attrs(type(fn))
    if attrs is None:
        features.missing("_raw_saved_")
        return []
    out: list[tuple[str, object]] = []
    for attr in attrs:
        try:
            value = getattr(fn, attr)
        except RuntimeError:  # a custom Function's tensors after backward()
            value = FREED
        name = "tensors" if attr == features.RAW_SAVED_CUSTOM else attr[len(features.RAW_SAVED):]
        out.append((name, value))
    return out


# A node class's saved attributes are fixed: one dir() per class and prefix. Bounded,
# because custom Functions defined in a loop (or notebook cells run again) are new classes.
@functools.lru_cache(maxsize=4096)
def _class_attrs(cls: type, prefix: str) -> tuple[str, ...]:
    """The attributes of node class ``cls`` whose names start with ``prefix``."""
    return tuple(a for a in dir(cls) if a.startswith(prefix))


def _raw_attrs(cls: type) -> tuple[str, ...] | None:
    names = _class_attrs(cls, features.RAW_SAVED)
    if not names and not _exposes_saved(features.RAW_SAVED):
        return None
    return names


def packed_of(raw: Any) -> tuple[bool, object]:
    """``(hooked, packed)`` of a ``SavedTensor``: whether a ``saved_tensors_hooks`` pack
    hook made it, and what autograd keeps: the tensor itself, or the hook's packed
    object. ``packed`` is :data:`FREED` after backward() released it, and ``None`` for
    an optional tensor that was not given (``bias=None``)."""
    try:
        packed = raw.data
        hooked = raw.unpack_hook is not None
    except RuntimeError:
        return False, FREED
    except AttributeError:
        features.missing("_raw_saved_")
        return False, None
    if packed is None:
        try:
            raw.unpack()  # freed raises; a tensor never given unpacks to None
        except RuntimeError:
            return hooked, FREED
    return hooked, packed


def is_saved_output(fn: Any, name: str) -> bool:
    """Whether ``fn``'s unhooked saved tensor ``name`` is an output of ``fn`` itself
    (autograd keeps outputs without their ``grad_fn``; unpacking through the node puts
    it back, without copying data). Only call it for unhooked saved tensors."""
    try:
        base, _, index = name.partition("[")  # list attributes: "indices[0]"
        if is_custom(fn):  # a custom Function's ctx.saved_tensors
            unpacked = fn.saved_tensors
        else:
            unpacked = getattr(fn, features.SAVED + base)
        if index:
            unpacked = unpacked[int(index[:-1])]
    except (RuntimeError, AttributeError, IndexError, TypeError, ValueError):
        return False
    return isinstance(unpacked, torch.Tensor) and unpacked.grad_fn is fn


def checkpoint_inputs(packed: object, unpack_hook: Any) -> list | None:
    """The ``SavedTensor`` inputs kept by a non-reentrant ``torch.utils.checkpoint``
    region whose pack hook returned ``packed``, or ``None`` if it is not one.

    The checkpoint keeps its region's inputs on a frame its unpack hook closes over
    (``frame.saved_args``); the region's own nodes keep only placeholders. Where the
    frame cannot be found the inputs are not counted (``[]``, with a warning).
    """
    if type(packed).__name__ != features.CHECKPOINT_HOLDER or unpack_hook is None:
        return None
    for cell in getattr(unpack_hook, "__closure__", None) or ():
        try:
            saved = getattr(cell.cell_contents, features.CHECKPOINT_ARGS, None)
        except ValueError:  # an empty cell
            continue
        if isinstance(saved, list):
            return [a for a in saved if hasattr(a, "unpack_hook")]
    features.missing("checkpoint saved_args")
    return []


def storage_of(tensor: torch.Tensor) -> tuple[tuple[str, int], int]:
    """``((device, key), bytes)`` of the storage under ``tensor`` (a view shares its
    base's), read without touching the data. The key is the data pointer, or for a
    storage at data pointer 0 (meta, empty) the storage object's own address
    (``_cdata``), so that such storages are never merged. A tensor without a readable
    storage is keyed by identity and weighs its elements."""
    try:
        storage = tensor.untyped_storage()
        return (str(tensor.device), storage.data_ptr() or storage._cdata), storage.nbytes()
    except (RuntimeError, NotImplementedError, TypeError, AttributeError):
        return (str(tensor.device), -id(tensor)), tensor.numel() * tensor.element_size()


def storage_key(tensor: torch.Tensor) -> tuple[str, int]:
    """:func:`storage_of`'s key, read through ``torch.func``'s wrappers (the tensors a
    ``jvp`` or ``grad`` passes its function) to the tensor each wraps, whose storage a
    view shares with its base."""
    functorch = getattr(torch._C, "_functorch", None)
    try:
        while functorch is not None and functorch.is_functorch_wrapped_tensor(tensor):
            tensor = functorch.get_unwrapped(tensor)
    except (AttributeError, RuntimeError):
        pass
    return storage_of(tensor)[0]


class _Stop(Exception):
    """Ends the backward :func:`lifted_saved` starts, before any node runs."""


class _Lifter:
    """A stand-in compiled-autograd compiler: it keeps the tensors autograd lifts out of
    the nodes it would run (their saved tensors) and stops the backward."""

    def __init__(self) -> None:
        self.inputs: list[torch.Tensor] = []

    def begin_capture(self, inputs: list[torch.Tensor], *_: object) -> None:
        self.inputs = list(inputs)
        raise _Stop

    def close(self) -> None:  # torch calls it as the stopped backward unwinds
        pass


def lifted_saved(fn: object) -> list[torch.Tensor] | None:
    """The tensors node ``fn`` keeps that torch shows on no attribute (a ``CopySlices``
    node's wrapped op), or ``None`` where they cannot be read (no compiled autograd in
    this torch, or no edge to stop at).

    A compiled-autograd backward from ``fn`` to its inputs lifts the saved tensors of
    ``fn`` alone (the inputs' nodes are not needed); it is stopped at once, so no node
    runs, nothing is accumulated and the graph is kept. Packed values of
    ``saved_tensors_hooks`` are not lifted then, so they are not counted.

    Raises:
        RuntimeError: backward() already freed what ``fn`` saved.
    """
    compiled = getattr(getattr(torch._C, "_dynamo", None), "compiled_autograd", None)
    ends = [GradientEdge(f, i) for f, i in getattr(fn, "next_functions", ()) if f is not None]
    if compiled is None or not hasattr(compiled, "set_autograd_compiler"):
        features.missing("compiled_autograd")
        return None
    if not ends:
        return None
    seeds = [torch.empty_strided(m.shape, [0] * len(m.shape), dtype=m.dtype, device=m.device)
             for m in getattr(fn, features.INPUT_METADATA)]  # one element each
    lifter = _Lifter()
    previous = compiled.set_autograd_compiler(lambda: lifter, False)
    try:
        torch.autograd.grad([GradientEdge(fn, i) for i in range(len(seeds))],  # type: ignore[arg-type]
                            ends, seeds, retain_graph=True, allow_unused=True)
    except _Stop:
        pass
    except RuntimeError as e:
        if "second time" in str(e):
            raise
        return None
    finally:
        compiled.set_autograd_compiler(*previous)
    ours = {t.untyped_storage().data_ptr() for t in seeds}
    return [t for t in lifter.inputs if t.untyped_storage().data_ptr() not in ours]
