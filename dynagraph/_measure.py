"""Read what autograd's nodes saved for backward into :mod:`dynagraph.memory`'s records.

The rules (each storage once; leaves apart from activations; packed, checkpointed,
freed and wrapped tensors) are written in :mod:`dynagraph.memory`. Every private
torch attribute is read through :mod:`dynagraph._torch`.
"""

from __future__ import annotations

import torch

from . import _torch
from ._records import Node, dtype_text
from .memory import FREED_TEXT, RECOMPUTED, UNREAD, SavedMemory, SavedTensor, StorageKey

__all__ = ["leaf_storages", "measure", "measure_into", "storages_of"]

WRAPPERS = frozenset({"CopySlices"})  # node classes that hold another node (torch's functions/tensor.h)
# What a tensor of each sparse layout holds, as the methods that return each part.
SPARSE_PARTS = {torch.sparse_coo: ("_indices", "_values"),
                torch.sparse_csr: ("crow_indices", "col_indices", "values"),
                torch.sparse_bsr: ("crow_indices", "col_indices", "values"),
                torch.sparse_csc: ("ccol_indices", "row_indices", "values"),
                torch.sparse_bsc: ("ccol_indices", "row_indices", "values")}


def measure(fn: object) -> list[SavedTensor]:
    """The tensors autograd node ``fn`` saved for backward, read without unpacking.

    Freed tensors (after backward()) come back with ``note="freed"`` and no storage.
    """
    out: list[SavedTensor] = []
    for name, raw in _torch.raw_saved_values(fn):
        if raw is _torch.FREED:
            out.append(SavedTensor(name, None, 0, False, FREED_TEXT))
        elif isinstance(raw, (list, tuple)):
            for i, item in enumerate(raw):
                out += _one(fn, f"{name}[{i}]", item)
        else:
            out += _one(fn, name, raw)
    if type(fn).__name__ in WRAPPERS:
        out += _wrapped(fn)
    return out


def _wrapped(fn: object) -> list[SavedTensor]:
    """What the node inside wrapper ``fn`` (a ``CopySlices``) saved, one entry per storage;
    one ``UNREAD`` entry when nothing could be read (freed: one ``freed`` entry)."""
    try:
        tensors = _torch.lifted_saved(fn)
    except RuntimeError:  # "backward through the graph a second time": backward() freed them
        return [SavedTensor("wrapped op", None, 0, False, FREED_TEXT)]
    out = [e for i, t in enumerate(tensors or ()) for e in
           _entries(f"wrapped op [{i}]", t, t.grad_fn is None, "saved by the in-place op")]
    return out or [SavedTensor("wrapped op", None, 0, False, UNREAD)]


def _one(fn: object, name: str, raw: object) -> list[SavedTensor]:
    """The storages one raw ``SavedTensor`` of ``fn`` keeps (``name``: ``self``,
    ``tensors[0]``: where to unpack it to tell a saved output from a saved input)."""
    hooked, packed = _torch.packed_of(raw)
    if packed is _torch.FREED:
        return [SavedTensor(name, None, 0, False, FREED_TEXT)]
    if packed is None:
        return []
    if not hooked:
        if not isinstance(packed, torch.Tensor):
            return []
        return _entries(name, packed, _is_leaf(fn, name, packed))
    inputs = _torch.checkpoint_inputs(packed, getattr(raw, "unpack_hook", None))
    if inputs is not None:
        out = [SavedTensor(name, None, 0, False, RECOMPUTED)]
        for i, arg in enumerate(inputs):
            _, t = _torch.packed_of(arg)
            if isinstance(t, torch.Tensor):  # kept as given: a leaf unless autograd made it
                out += _entries(f"checkpoint input {i}", t, t.grad_fn is None, "checkpoint input")
        return out
    tensors = [packed] if isinstance(packed, torch.Tensor) else \
        [t for t in packed if isinstance(t, torch.Tensor)] if isinstance(packed, (tuple, list)) else []
    if not tensors:
        return [SavedTensor(name, None, 0, False, f"packed: {type(packed).__name__}")]
    return [e for t in tensors
            for e in _entries(name, t, False, f"packed: {dtype_text(t.dtype)} {dtype_text(t.device)}")]


def _entries(name: str, tensor: torch.Tensor, leaf: bool, note: str = "") -> list[SavedTensor]:
    """One :class:`SavedTensor` per storage ``tensor`` holds (a sparse one: indices, values)."""
    return [SavedTensor(name, key, nbytes, leaf, note, dtype) for key, nbytes, dtype in _parts(tensor)]


def storages_of(tensor: torch.Tensor) -> list[tuple[StorageKey, int]]:
    """``[(storage key, bytes), ...]`` of what ``tensor`` holds, read without touching data.

    A strided tensor (also meta, quantized, nested) holds its storage; a sparse one its
    indices and values (:data:`SPARSE_PARTS`); a subclass that wraps tensors (a jagged
    nested tensor) the tensors it wraps. A storage at data pointer 0 (meta, empty) is
    keyed by its own address. A tensor with no readable storage is keyed by itself and
    weighs its elements.
    """
    return [(key, nbytes) for key, nbytes, _ in _parts(tensor)]


def _parts(tensor: torch.Tensor, depth: int = 0) -> list[tuple[StorageKey, int, str]]:
    """:func:`storages_of`, each with the dtype of the tensor that holds it (``float32``)."""
    parts = SPARSE_PARTS.get(tensor.layout)
    if parts is not None:
        return [s for part in parts for s in _parts(getattr(tensor, part)(), depth + 1)]
    flatten = getattr(tensor, "__tensor_flatten__", None)
    if flatten is not None and depth < 8:  # a wrapper subclass: what it wraps
        inner = [getattr(tensor, name, None) for name in flatten()[0]]
        return [s for t in inner if isinstance(t, torch.Tensor) for s in _parts(t, depth + 1)]
    return [(*_torch.storage_of(tensor), dtype_text(tensor.dtype))]


def _is_leaf(fn: object, name: str, tensor: torch.Tensor) -> bool:
    """Whether an unhooked saved tensor is a leaf: a parameter or input, or a tensor
    made without grad; not an activation (made by an op of the graph)."""
    if tensor.grad_fn is not None:
        return False  # an op's output, saved by a later op
    if tensor.requires_grad:
        return True  # a leaf that requires grad (parameter, input)
    # autograd keeps a node's own outputs without grad_fn: unpack (no copy) to tell
    return not _torch.is_saved_output(fn, name)


def leaf_storages(fn: object) -> list[StorageKey]:
    """The storages of the leaf behind an ``AccumulateGrad`` node (none for other nodes)."""
    var = getattr(fn, "variable", None)
    return [key for key, _ in storages_of(var)] if isinstance(var, torch.Tensor) else []


def measure_into(memory: SavedMemory, node: Node, fn: object) -> None:
    """Add what autograd node ``fn`` (of record ``node``) saved to ``memory``
    (for an ``AccumulateGrad``, its leaf's storage)."""
    if node.name == "AccumulateGrad":
        memory.leaves.update(leaf_storages(fn))
        return
    entries = measure(fn)
    if entries:
        memory.saved[node.id] = entries
