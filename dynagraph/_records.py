"""Plain records for graph nodes: what capture produces and render consumes."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, overload

from ._language import N_, translated

if TYPE_CHECKING:
    from .memory import SavedMemory

__all__ = ["KINDS", "Block", "GraphRecord", "Node", "chains", "consumers_of", "dtype_text", "kind_word",
           "longest_chain", "owner", "producers_of", "shape_text", "upstream"]

# What a node stands for; the renderer's legend is keyed on these.
KINDS = ("op", "custom", "parameter", "input", "output", "module", "fold")
# Each kind as a learner reads it (hover details, a graph's repr), translated where shown
_KIND_WORDS = {"op": N_("op"), "custom": N_("custom"), "parameter": N_("parameter"), "input": N_("input"),
               "output": N_("output"), "module": N_("module"), "fold": N_("fold")}


def kind_word(kind: str) -> str:
    """A node's kind (one of :data:`KINDS`) in the current language: ``"op"`` is 运算 in Chinese."""
    return translated(_KIND_WORDS.get(kind, kind))


@overload
def upstream(starts: Iterable[int], producers: Callable[[int], Iterable[int] | None]) -> set[int]: ...
@overload
def upstream(starts: Iterable[int], producers: Callable[[int], Iterable[int] | None],
             most: int | None) -> set[int] | None: ...
def upstream(starts: Iterable[int], producers: Callable[[int], Iterable[int] | None],
             most: int | None = None) -> set[int] | None:
    """``starts`` and every node they are computed from, following ``producers(i)`` (the
    nodes ``i`` reads, or ``None`` for none); ``None`` once they would be more than ``most``.

    Example:
        >>> upstream([2], {2: [1], 1: [0]}.get)
        {0, 1, 2}
    """
    found = set(starts)
    todo = list(found)
    while todo:
        for p in producers(todo.pop()) or ():
            if p not in found:
                if most is not None and len(found) == most:
                    return None
                found.add(p)
                todo.append(p)
    return found


def producers_of(edges: Iterable[tuple[int, int]]) -> dict[int, list[int]]:
    """Each node -> the nodes it reads, from ``edges`` (producer -> consumer), in edge
    order; a node that reads none is not a key.

    Example:
        >>> producers_of([(0, 2), (1, 2), (2, 3)])
        {2: [0, 1], 3: [2]}
    """
    producers: dict[int, list[int]] = {}
    for src, dst in edges:
        producers.setdefault(dst, []).append(src)
    return producers


def consumers_of(edges: Iterable[tuple[int, int]]) -> dict[int, list[int]]:
    """Each node -> the nodes that read it, from ``edges`` (producer -> consumer), in edge
    order; a node that none reads is not a key.

    Example:
        >>> consumers_of([(0, 2), (1, 2), (0, 3)])
        {0: [2, 3], 1: [2]}
    """
    return producers_of((dst, src) for src, dst in edges)  # the edges turned round


def shape_text(shape: tuple[int | str, ...] | None) -> str:
    """``"(3, 16)"``, ``"(48,)"``, ``"(1–3, 16)"`` (a rolled block's batch range): as
    Python writes a tuple, with no quotes round a text entry; ``"nested"`` for ``None``
    (a nested tensor has no one shape)."""
    if shape is None:
        return "nested"
    inner = ", ".join(map(str, shape))
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


_TEXTS: dict[object, str] = {}  # few distinct dtypes and devices, asked for per node (faster than @cache)


def dtype_text(dtype: object) -> str:
    """A tensor's dtype or device as the pictures write it: ``float32`` for
    ``torch.float32``, ``cuda:0`` for ``torch.device("cuda:0")``.

    Example:
        >>> import torch
        >>> dtype_text(torch.bfloat16), dtype_text(torch.device("cuda", 0))
        ('bfloat16', 'cuda:0')
    """
    text = _TEXTS.get(dtype)
    if text is None:
        text = _TEXTS[dtype] = str(dtype).removeprefix("torch.")
    return text


def owner(name: str) -> str | None:
    """The dotted name that owns ``name`` (``fc`` for ``fc.weight``), ``None`` at the top."""
    return name.rpartition(".")[0] or None


@dataclass(kw_only=True, slots=True)  # many fields: name each one; slots: one record per autograd node
class Node:
    """One node of a captured graph, holding no reference to torch objects.

    Attributes:
        id: Small integer, unique in its graph, in discovery order from the roots.
        name: The autograd node's own name (``grad_fn.name()`` without the
            ``torch::autograd::`` prefix, e.g. ``AddBackward0``, ``AccumulateGrad``);
            for outputs ``"output"``, for collapsed modules the module's class name.
        kind: One of :data:`KINDS`.
        label: Text drawn in the node (parameter name, custom Function class, ...).
        shape, dtype, device: Of the tensor the node produces in the forward pass,
            where known (``None`` otherwise). In a rolled picture, a dimension the
            iterations differ in is a text range (``("1–3", 16)``: see :func:`shape_text`).
        module: Dotted name of the module that created the node, if known.
        seq: Autograd's creation counter for op nodes (ordering); ``None`` for leaves.
        saved: ``(attribute, description)`` pairs of saved tensors, when asked for.
        count: Number of autograd nodes this node stands for (>1 for modules, folds).
        derivative: The pass that made the node, where recorded (see
            :func:`dynagraph.track_passes`): 0 the forward pass, 1 the first backward
            pass (``create_graph=True``), 2 the second ...; ``None`` for leaves and
            where not recorded.
        calls: Which call of each module on ``module``'s dotted path made the node:
            per part of the path, the call's number among that module's calls (1 for
            its first, 2 for its second: a block applied twice), or ``None`` for a
            part that was not called (a ``ModuleList``); ``None`` where not recorded.
        tensor: Which tensor a leaf is: the same number in every graph this process
            records while the tensor lives, another for any other tensor (so
            :func:`dynagraph.diff` knows a parameter renamed by a layer put before it);
            ``None`` for other nodes and in views read from a file (not saved).
        ops: Of a module node (a module collapsed to a depth, an overview's box): the
            names of the autograd nodes it stands for, in the order they were made (so
            that only boxes that hold the same ops roll together); ``None`` for others.
        module_number: Which module object made the node (``module`` names it), told
            the same way as ``tensor`` (a module renamed by a layer put before it is the
            same module); ``None`` where not known and in views read from a file.
    """

    id: int
    name: str
    kind: str
    label: str
    shape: tuple[int | str, ...] | None = None
    dtype: str | None = None
    device: str | None = None
    module: str | None = None
    seq: int | None = None
    saved: list[tuple[str, str]] = field(default_factory=list)
    count: int = 1
    derivative: int | None = None
    calls: tuple[int | None, ...] | None = None
    tensor: int | None = None
    module_number: int | None = None
    ops: tuple[str, ...] | None = None


def longest_chain(n: int, edges: list[tuple[int, int]]) -> int:
    """Nodes on the longest path of the DAG of ``n`` records and producer -> consumer ``edges``."""
    return max(chains(n, edges)[0], default=0)


def chains(n: int, edges: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """``(depth, order)``: the nodes on the longest path ending at each record, and the
    records in a topological order (producers first)."""
    consumers: list[list[int]] = [[] for _ in range(n)]
    indeg = [0] * n
    for src, dst in edges:
        consumers[src].append(dst)
        indeg[dst] += 1
    depth = [1] * n
    ready = [i for i in range(n) if indeg[i] == 0]
    order = []
    while ready:  # Kahn's order: producers first, each node's depth final when popped
        i = ready.pop()
        order.append(i)
        for j in consumers[i]:
            depth[j] = max(depth[j], depth[i] + 1)
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(j)
    return depth, order


@dataclass
class Block:
    """One rolled region: its representative iteration, drawn once and labelled ×N.

    Attributes:
        label: Which layers or steps the block stands for, and their classes:
            ``"layers.0–5: TransformerEncoderLayer"`` (from module tags or, without
            them, from the parameters' names), ``"layers.0–11: Foo ×2, Bar ×10"``
            (two classes with the same ops), ``"cell: LSTMCell, step 1–50"`` (one
            module or shared weights at every step; ``"rnn: GRU, layer 1, step 6–8"``
            for a recurrent layer, its steps counted across the blocks of one loop), else the names of the
            representative's first and last ops (``"TBackward0 … TanhBackward0"``).
        repeats: N, the number of iterations.
        nodes: Ids of the representative's nodes (iteration 0), kept in the rolled graph:
            its ops in creation order, then the leaves it owns.
        loops: ``(src, dst)`` edges of the representative that carry state from
            iteration k to k + 1; also in the rolled graph's edges.
        module: Dotted module name shared by every op of every iteration, if any.
        note: A line under the title where the iterations differ in the batch
            dimension: ``"batch 1–3: SliceBackward0 ×2 on the loop edge"`` (a recurrence
            over packed sequences, whose state loses rows as sequences end).
    """

    label: str
    repeats: int
    nodes: list[int]
    loops: list[tuple[int, int]]
    module: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class GraphRecord:
    """What the drawing side draws: a graph's records and its size policy, no behaviour.

    A :class:`dynagraph.Graph` hands this down (:func:`dynagraph.graph.record_of`); the
    picture and the page take it and make others like it (``dataclasses.replace``), and
    never build a ``Graph``. The fields are those of ``Graph`` of the same names.
    """

    nodes: list[Node]
    edges: list[tuple[int, int]]
    module_types: dict[str, str] = field(default_factory=dict)
    title: str | None = None
    blocks: list[Block] = field(default_factory=list)
    roll: str | bool = "auto"
    max_nodes: int | None = None
    overview: bool | None = None
    memory: SavedMemory | None = None
