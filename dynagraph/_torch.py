"""Every torch internal dynagraph reads, each behind a feature check with a fallback."""

from __future__ import annotations

import functools
import gc
import os
import sys
import warnings
import weakref
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager
from types import FrameType
from typing import Any, TypeGuard

import torch
from torch.autograd.graph import GradientEdge
from torch.overrides import TorchFunctionMode

from . import _signals
from ._records import chains, upstream

__all__ = [
    "FEATURES",
    "FREED",
    "MISSING",
    "SAFE_DEPTH",
    "checkpoint_inputs",
    "compiled_graph_frame",
    "custom_name",
    "ddp_buckets",
    "ddp_logging_data",
    "engine_entry",
    "foreach_norm",
    "gradient_edge_node",
    "has_foreach_norm",
    "has_patchable_apply",
    "hold_deep_graph",
    "is_custom",
    "is_saved_output",
    "keep_wrappers",
    "lifted_saved",
    "memory_events",
    "metadata",
    "mode_stack_len",
    "no_torch_function",
    "original_module",
    "output_meta",
    "own_parameters",
    "packed_of",
    "pop_mode",
    "profiler_running",
    "push_mode",
    "queue_engine_callback",
    "raw_saved_values",
    "release_pending",
    "remove_global_module_hooks",
    "remove_module_hooks",
    "saved_values",
    "sequence_nr",
    "set_engine_entry",
    "shape_of",
    "shapes_of",
    "storage_of",
]

# Private attribute names, each written once here (tests rename them to play a torch
# release that dropped one).
_BACKWARD_CLASS = "BackwardCFunction"  # torch.autograd.function: custom Functions' node class
_FORWARD_CLS = "_forward_cls"  # on that class: the user's Function subclass
_INPUT_METADATA = "_input_metadata"  # shape/dtype/device of the forward outputs
_SEQUENCE_NR = "_sequence_nr"  # autograd's per-thread creation counter
_METADATA = "metadata"  # a dict per node that outlives its Python wrapper
_SAVED = "_saved_"  # prefix of the saved-for-backward attributes of built-in nodes
_RAW_SAVED = "_raw_saved_"  # the same, as SavedTensor objects (no unpack hook runs)
_RAW_SAVED_CUSTOM = "_raw_saved_tensors"  # a custom Function's ctx.saved_tensors, raw
_CHECKPOINT_HOLDER = "_Holder"  # torch.utils.checkpoint: what a non-reentrant region's nodes keep
_CHECKPOINT_ARGS = "saved_args"  # on its frame (closed over by the unpack hook): the region's inputs
_ORIG_MOD = "_orig_mod"  # on what torch.compile(model) returns: the model itself
_ENGINE_ENTRY = "_engine_run_backward"  # torch.autograd: what backward() and grad() call to run the engine
FX_CODE = "<eval_with_key>"  # the file name torch.fx gives the code of a graph it writes
DYNAMO_DIR = os.path.join(os.path.dirname(torch.__file__), "_dynamo") + os.sep  # dynamo's frames

GradFn = torch.autograd.graph.Node  # for annotations: an autograd node (a grad_fn or AccumulateGrad)

# What the picture loses, or how dynagraph copes, without each feature.
FEATURES = {
    "BackwardCFunction": "custom Functions are recognised by their _forward_cls attribute instead",
    "_forward_cls": "custom Function nodes are labelled with their node name, not their class",
    "_input_metadata": "op nodes show no shape, dtype or device",
    "_sequence_nr": "ops are ordered by discovery; track_modules and live() cannot tag modules",
    "_engine_run_backward": "track_passes cannot see the backward passes: no node gets a derivative order",
    "metadata": "nodes carry no module tags (no grouping by module)",
    "_saved_": "show_saved lists nothing for built-in ops",
    "_raw_saved_": "memory=True counts nothing (saved tensors cannot be read without unpacking)",
    "checkpoint saved_args": "memory=True does not count a non-reentrant checkpoint region's inputs",
    "get_gradient_edge": "a leaf root's node is found through a view of it instead",
    "_foreach_norm": "gradient norms are computed one tensor at a time",
    "Function.apply": "live() records a custom Function's inner ops, not one apply step",
    "compiled_autograd": "memory=True does not count what an in-place op on a view (CopySlices) saved",
    "memory profiler": "dg.step_memory cannot run (it reads the categories of PyTorch's memory profiler)",
}
MISSING: set[str] = set()  # features this torch lacks, found so far (each warned about once)
FREED = object()  # a saved tensor that backward() released
SAFE_DEPTH = 1_000  # deeper graphs are freed by dynagraph, node by node (hold_deep_graph)
_holds: dict[int, tuple[weakref.ref, list[GradFn]]] = {}  # id(ref) -> (ref to a live root, what it holds)
_dead: list[weakref.ref] = []  # refs whose root died: appended by the ref's callback, in C (no bytecode runs)
_pending: list[list[GradFn]] = []  # held wrappers of deep graphs whose roots died, to free
_owned: list[list[GradFn]] = []  # held wrappers something else owned at the last try


def _missing(feature: str) -> None:
    """Note that ``feature`` is missing; warn the first time, naming it and the torch version."""
    if feature in MISSING:
        return
    MISSING.add(feature)
    warnings.warn(f"dynagraph: torch {torch.__version__} has no {feature}: {FEATURES[feature]}",
                  RuntimeWarning, stacklevel=3)


def engine_entry() -> Callable[..., Any] | None:
    """``torch.autograd._engine_run_backward``, through which ``backward()`` and
    ``autograd.grad`` (and ``torch.func``'s transforms) run the engine; ``None`` where
    torch has none."""
    entry = getattr(torch.autograd, _ENGINE_ENTRY, None)
    if entry is None:
        _missing(_ENGINE_ENTRY)
    return entry


def set_engine_entry(entry: Callable[..., Any]) -> None:
    """Make ``backward()`` and ``autograd.grad`` call ``entry`` to run the engine."""
    setattr(torch.autograd, _ENGINE_ENTRY, entry)


def own_parameters(module: torch.nn.Module) -> list[tuple[str, torch.nn.Parameter | None]]:
    """``(name, parameter)`` of ``module``'s own parameters (not its children's), in the order
    they were registered, ``None`` for one registered empty (``bias=False``)."""
    return list(module._parameters.items())


def queue_engine_callback(callback: Callable[[], None]) -> None:
    """Have the autograd engine call ``callback`` when the backward now running ends."""
    torch.autograd.Variable._execution_engine.queue_callback(callback)


def ddp_buckets(model: Any) -> list[Any]:
    """The gradient buckets of a ``DistributedDataParallel`` model, from its reducer."""
    return list(model.reducer._get_zeros_like_grad_buckets())


def ddp_logging_data(model: Any) -> dict[str, Any]:
    """What a ``DistributedDataParallel`` model logs about itself (``has_rebuilt_buckets``...)."""
    return dict(model._get_ddp_logging_data())


def original_module(module: Any) -> Any:
    """The model that ``torch.compile(model)`` wraps (the module itself otherwise): its
    forward hooks see the wrapper, which has no name in the model."""
    return getattr(module, _ORIG_MOD, module)


def compiled_graph_frame(frame: FrameType | None) -> TypeGuard[FrameType]:
    """Whether ``frame`` runs a graph ``torch.compile`` made (torch.fx writes its code
    to no file; the name starts with :data:`FX_CODE`). Where torch names that code
    otherwise, each op of a compiled call is a step of its own, as in eager code."""
    return frame is not None and frame.f_code.co_filename.startswith(FX_CODE)


def is_custom(fn: GradFn) -> bool:
    """Whether ``fn`` is the backward node of a custom ``autograd.Function``."""
    cls = getattr(torch.autograd.function, _BACKWARD_CLASS, None)
    if cls is not None:
        return isinstance(fn, cls)
    _missing("BackwardCFunction")
    return hasattr(fn, _FORWARD_CLS)


def custom_name(fn: GradFn) -> str:
    """The user's ``Function`` class name (``Square``), or the node's name less ``Backward``."""
    forward_cls = getattr(fn, _FORWARD_CLS, None)
    if forward_cls is not None:
        return forward_cls.__name__
    _missing("_forward_cls")
    return type(fn).__name__.removesuffix("Backward")


def output_meta(fn: GradFn) -> tuple[tuple[int, ...] | None, torch.dtype, torch.device] | None:
    """``(shape, dtype, device)`` of the node's first forward output, or ``None`` if unknown.

    Unlike saved tensors this survives ``backward()``.
    """
    try:
        meta = getattr(fn, _INPUT_METADATA)
    except AttributeError:
        _missing("_input_metadata")
        return None
    except RuntimeError:  # a node kind that keeps none
        return None
    if not meta:
        return None
    first = meta[0]
    try:
        return tuple(first.shape), first.dtype, first.device
    except RuntimeError:  # a nested tensor's output has no single shape
        return None, first.dtype, first.device


def shape_of(tensor: torch.Tensor) -> tuple[int, ...] | None:
    """``tuple(tensor.shape)``, or ``None`` for a tensor without one shape (nested)."""
    try:
        return tuple(tensor.shape)
    except RuntimeError:  # NestedTensorImpl doesn't support sizes
        return None


def shapes_of(tensors: list[torch.Tensor]) -> list[tuple[int, ...] | None]:
    """:func:`shape_of` of each tensor (one ``try`` for the list: this runs once per op)."""
    try:
        return [tuple(t.shape) for t in tensors]
    except RuntimeError:  # a nested tensor among them
        return [shape_of(t) for t in tensors]


def sequence_nr(fn: GradFn) -> int | None:
    """Autograd's creation counter of ``fn`` (later ops higher), or ``None`` if unknown."""
    method = getattr(fn, _SEQUENCE_NR, None)
    if method is None:
        _missing("_sequence_nr")
        return None
    return method()


def metadata(fn: GradFn) -> dict[str, Any]:
    """The node's own metadata dict (a throwaway dict where torch has none)."""
    try:
        return getattr(fn, _METADATA)
    except AttributeError:
        _missing("metadata")
        return {}


def saved_values(fn: GradFn) -> list[tuple[str, object]]:
    """``(name, value)`` of each saved attribute of a built-in node; :data:`FREED` once released."""
    if not _exposes_saved(_SAVED):
        _missing("_saved_")
        return []
    out: list[tuple[str, object]] = []
    for attr in _class_attrs(type(fn), _SAVED):
        try:
            out.append((attr[len(_SAVED):], getattr(fn, attr)))
        except RuntimeError:  # "Trying to backward through the graph a second time"
            out.append((attr[len(_SAVED):], FREED))
    return out


@functools.cache  # one probe per attribute prefix
def _exposes_saved(prefix: str) -> bool:
    """Whether built-in nodes expose what they saved (``MulBackward0._saved_other``)."""
    with torch.inference_mode(False), torch.enable_grad():
        probe = torch.ones(1, requires_grad=True)
        return hasattr((probe * probe).grad_fn, f"{prefix}other")


def gradient_edge_node(tensor: torch.Tensor) -> GradFn:
    """The node ``tensor``'s gradient flows into: its ``grad_fn``, or a leaf's ``AccumulateGrad``."""
    get = getattr(torch.autograd.graph, "get_gradient_edge", None)
    if get is not None:
        return get(tensor).node
    _missing("get_gradient_edge")
    if tensor.grad_fn is not None:
        return tensor.grad_fn
    with torch.inference_mode(False), torch.enable_grad():
        # a view's one input is the leaf's accumulator, shared with its other uses
        # (a view of a tensor that requires grad always has a grad_fn, with the accumulator as input)
        return tensor.view_as(tensor).grad_fn.next_functions[0][0]  # type: ignore[union-attr,return-value]


def has_foreach_norm() -> bool:
    """Whether ``torch._foreach_norm`` (one kernel for many norms) exists (used by norms.py)."""
    if hasattr(torch, "_foreach_norm"):
        return True
    _missing("_foreach_norm")
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
    _missing("Function.apply")
    return False


class _InOrder(list):
    """Held wrappers already in release order (producers first: popped, consumers go first)."""


def hold_deep_graph(roots: list[tuple[torch.Tensor, int]], fns: Sequence[GradFn | None],
                    edges: list[tuple[int, int]]) -> bool:
    """Keep a deep graph's node wrappers while its roots live, then free them node by node.

    In torch 2.13 an autograd node keeps its Python wrapper for life, and freeing a
    chain of wrapped nodes recurses once per node in C++: some 40,000 of them overflow
    an 8 MB stack and kill the process. So dynagraph holds the wrappers itself; when
    a root dies its wrappers wait in a queue (the dying tensor still owns its node)
    that the next garbage collection or capture empties (:func:`release_pending`).
    Graphs whose longest chain is under :data:`SAFE_DEPTH` are left alone.

    A root's death is noted by its weak reference's callback, ``list.append`` (C: no
    Python code runs inside the dying tensor's dealloc, where an interrupt would drop
    the hand-over). A Ctrl-C that lands while a graph is held or freed is delivered
    after it (:mod:`dynagraph._signals`), never lost in a garbage-collector callback.

    Args:
        roots: ``(tensor, record id of its node)`` for each root. A root must not be a
            tensor that the graph itself saved (an input of one of its ops): its death
            would wait for the graph's.
        fns: The autograd node of each record (``None`` for outputs).
        edges: ``(producer, consumer)`` record ids.

    Returns:
        Whether the graph was deep enough to be held.
    """
    held = _signals.protected(_hold, roots, fns, edges)
    if not (_holds or _dead or _pending or _owned):
        _signals.release()  # nothing left to protect: the SIGINT handler found is put back
    return held


def _hold(roots: list[tuple[torch.Tensor, int]], fns: Sequence[GradFn | None],
          edges: list[tuple[int, int]]) -> bool:
    release_pending()
    if len(fns) < SAFE_DEPTH:  # fewer nodes: no deep chain
        return False
    depth, order = chains(len(fns), edges)
    if max(depth, default=0) < SAFE_DEPTH:
        return False
    producers: list[list[int]] = [[] for _ in fns]
    for src, dst in edges:
        producers[dst].append(src)
    for tensor, start in roots:
        if depth[start] < SAFE_DEPTH:  # its own chains are short (a leaf root, say): torch frees it safely
            continue
        reach = upstream([start], producers.__getitem__)  # the records `start` depends on
        # in release order, so that freeing them needs no walk; outputs (None) are never reached
        held = _InOrder(fn for i in order if i in reach and (fn := fns[i]) is not None)
        _signals.defer_in(_after_collection)  # from now on a Ctrl-C waits for a release to end
        ref = weakref.ref(tensor, _dead.append)  # kept alive by _holds: else no callback
        _holds[id(ref)] = (ref, held)
        _watch_collections()
    return True


def release_pending(retry: bool = True) -> None:
    """Free the held graphs whose roots have died, one node at a time, consumers first.

    Nodes that something else still owns (a tensor the user kept, another root drawn
    while it lives) stay held; ``retry`` tries those again too. A Ctrl-C meanwhile is
    delivered after it (:func:`_signals.protected`).
    """
    _signals.protected(_release, retry)


def _release(retry: bool) -> None:
    global _releasing
    if _releasing or not (_dead or _pending or (retry and _owned)):
        return
    _signals.defer_in()  # (again: Jupyter's kernel puts its own SIGINT handler back after each cell)
    _releasing = True
    try:
        _bury()
        kept: list[GradFn] = []
        if _pending and all(isinstance(held, _InOrder) for held in _pending):
            stack = _merged_order(_pending)  # roots died: their orders are known
            _pending.clear()
            kept = _free_unowned(stack)
        # what was owned last time (a parameter's AccumulateGrad, nodes of a tensor the
        # user kept): after the new graph's nodes, which may consume them
        stack = _release_order(_take(retry))
        kept += _free_unowned(stack)
        if kept:
            _owned.append(kept)
    finally:
        _releasing = False


def _bury() -> None:
    """Move what the dead roots held from :data:`_holds` to :data:`_pending` (each step
    safe to repeat: a list queued twice is freed once)."""
    while _dead:
        key = id(_dead[-1])
        if key in _holds:
            _pending.append(_holds[key][1])
            del _holds[key]
        _dead.pop()


def keep_wrappers(fns: list[GradFn | None]) -> None:  # (None: an output's record)
    """Hold the node wrappers of a walk that an interrupt cut short before it could hand
    a deep graph to :func:`hold_deep_graph`: they are freed in order, like the held
    nodes something else owned, once nothing else owns them (dropped at once, they were
    freed by torch's recursion when their root died)."""
    if len(fns) >= SAFE_DEPTH:
        _owned.append(fns)  # type: ignore[arg-type]  # the list itself, in one step (_take skips None)
        _watch_collections()


def _merged_order(orders: list[list[GradFn]]) -> list[GradFn]:
    """One release order for the nodes of several roots (each list in release order).

    Each list holds everything its root reaches, so a node that a later list adds is
    reached by no earlier root: it feeds no node already listed, and may only consume
    them. Appended after them, in its list's order, it is popped (freed) before them.
    """
    if len(orders) == 1:
        return orders[0]
    merged: list[GradFn] = []
    seen: set[int] = set()
    for order in orders:
        for fn in order:
            if id(fn) not in seen:
                seen.add(id(fn))
                merged.append(fn)
    return merged


def _take(retry: bool) -> dict[int, GradFn]:
    """Empty the queues into one dict ``id -> wrapper`` (each wrapper once)."""
    held: dict[int, GradFn] = {}
    for batch in _pending + (_owned if retry else []):
        held.update((id(fn), fn) for fn in batch if fn is not None)
    _pending.clear()
    if retry:
        _owned.clear()
    return held


def _release_order(held: dict[int, GradFn]) -> list[GradFn]:
    """The wrappers as a stack: each is popped after every held node that consumes it."""
    producers = {key: [id(c) for c, _ in fn.next_functions if c is not None and id(c) in held]
                 for key, fn in held.items()}
    waiting = dict.fromkeys(held, 0)  # held consumers not yet popped
    for ids in producers.values():
        for key in ids:
            waiting[key] += 1
    ready = [key for key, n in waiting.items() if n == 0]
    order = []
    while ready:
        key = ready.pop()
        order.append(held.pop(key))
        for p in producers[key]:
            waiting[p] -= 1
            if waiting[p] == 0:
                ready.append(p)
    order.reverse()
    return order


def _free_unowned(stack: list[GradFn]) -> list[GradFn]:
    """Drop each wrapper only dynagraph holds (freeing one node); return the others."""
    kept = []
    while stack:
        fn = stack.pop()
        if sys.getrefcount(fn) > 2:  # more than this name and the call's argument: owned
            kept.append(fn)
        del fn  # its producers are still on the stack, so the free stops at this node
    return kept


_releasing = False  # a collection during a release must not start another


def _after_collection(phase: str, info: dict[str, Any]) -> None:
    """A ``gc.callbacks`` hook: free held graphs after each collection (all of them,
    owned ones too, after a full one). Its own frame is protected too (an interrupt at
    its first bytecode would be lost in the collector)."""
    if phase == "stop" and (_dead or _pending or _owned):
        release_pending(retry=info["generation"] == 2)


def _watch_collections() -> None:
    """Install :func:`_after_collection` once, when the first deep graph is held (not
    at import: a process that never draws a deep graph gets no hook)."""
    if _after_collection not in gc.callbacks:
        gc.callbacks.append(_after_collection)


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
        _missing("_raw_saved_")
        return []
    out: list[tuple[str, object]] = []
    for attr in attrs:
        try:
            value = getattr(fn, attr)
        except RuntimeError:  # a custom Function's tensors after backward()
            value = FREED
        name = "tensors" if attr == _RAW_SAVED_CUSTOM else attr[len(_RAW_SAVED):]
        out.append((name, value))
    return out


# A node class's saved attributes are fixed: one dir() per class and prefix. Bounded,
# because custom Functions defined in a loop (or notebook cells run again) are new classes.
@functools.lru_cache(maxsize=4096)
def _class_attrs(cls: type, prefix: str) -> tuple[str, ...]:
    """The attributes of node class ``cls`` whose names start with ``prefix``."""
    return tuple(a for a in dir(cls) if a.startswith(prefix))


def _raw_attrs(cls: type) -> tuple[str, ...] | None:
    names = _class_attrs(cls, _RAW_SAVED)
    if not names and not _exposes_saved(_RAW_SAVED):
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
        _missing("_raw_saved_")
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
            unpacked = getattr(fn, _SAVED + base)
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
    if type(packed).__name__ != _CHECKPOINT_HOLDER or unpack_hook is None:
        return None
    for cell in getattr(unpack_hook, "__closure__", None) or ():
        try:
            saved = getattr(cell.cell_contents, _CHECKPOINT_ARGS, None)
        except ValueError:  # an empty cell
            continue
        if isinstance(saved, list):
            return [a for a in saved if hasattr(a, "unpack_hook")]
    _missing("checkpoint saved_args")
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
        _missing("compiled_autograd")
        return None
    if not ends:
        return None
    seeds = [torch.empty_strided(m.shape, [0] * len(m.shape), dtype=m.dtype, device=m.device)
             for m in getattr(fn, _INPUT_METADATA)]  # one element each
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
        _missing("memory profiler")
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
