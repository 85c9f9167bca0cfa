"""The op sequence that rolling searches, and its pre-passes.

Ops in creation order with interned keys and op-to-op edges by position (:class:`Seq`);
the values a few ops compute from leaves that may move ahead of the loop
(:func:`find_hoisted`); the ops that resize a state between steps (:func:`find_bridges`).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import operator
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .._records import Node, owner, upstream
from .names import common_module

_HOIST_MAX = 6  # most ops in a value computed from leaves that may move ahead (see find_hoisted)

_seq_number = operator.attrgetter("seq")  # (a sort key read in C)


@dataclass
class Seq:
    """Op nodes in creation order with interned labels and op-to-op edges by position."""

    ops: list[Node]
    keys: list[int]  # equal keys: same kind, name, shape, dtype, device, count
    out: list[list[int]]  # positions each op feeds
    indeg: list[int]  # number of op producers of each op
    module_before: list[str | None]  # module of the nearest op before i that has one
    module_after: list[str | None]  # module of the nearest op at i or later that has one
    feeds: list[Sequence[int]]  # ids of the leaves each op reads, one per edge
    spans: dict[int, tuple[int, int, int]]  # leaf id -> (first, last op position it touches, key)
    leaves: dict[int, Node]  # every node that is neither op nor output
    bridges: int = 0  # the last ``bridges`` ops: state resized between iterations (see find_bridges)
    leaf_edges: list[tuple[int, int]] = dataclasses.field(default_factory=list)  # from or to a non-op
    batchless: bool = False  # ops compared without their first dimension (see read_sequence)
    tags: list[str | None] = dataclasses.field(default_factory=list)  # each op's own module: tag, or params'

    @functools.cached_property
    def producers(self) -> list[list[int]]:
        """Per position, the positions of the ops that feed it, in order (made when first
        read: most graphs never need them)."""
        producers: list[list[int]] = [[] for _ in self.ops]
        for i, outs in enumerate(self.out):
            for j in outs:
                producers[j].append(i)
        return producers


def op_key(node: Node) -> tuple:
    """What must match for two nodes to be the same node of different iterations."""
    label = node.label if node.kind == "custom" else node.ops  # a custom Function's class, a box's ops
    return (node.kind, node.name, label, node.shape, node.dtype, node.device, node.count)


def batchless_key(node: Node) -> tuple:
    """:func:`op_key` with the shape's first (batch) dimension left out."""
    label = node.label if node.kind == "custom" else node.ops
    shape = node.shape[1:] if node.shape else node.shape
    return (node.kind, node.name, label, len(node.shape or ()), shape, node.dtype, node.device, node.count)


def read_sequence(nodes: Sequence[Node], edges: Iterable[tuple[int, int]], first: Sequence[int] = (),
                  last: Sequence[int] = (), batchless: bool = False) -> Seq:
    """The ops (nodes with a creation counter, outputs aside) in creation order; the ops
    whose ids are in ``first`` come before all others (see :func:`find_hoisted`).

    With ``last`` (the ids of :func:`find_bridges`), those ops come after all others, every
    other op's shape is compared without its first (batch) dimension, and an edge
    through a bridge also counts as an edge from its producer to its consumers: the
    steps of a recurrence whose batch shrinks then match across the resize. With
    ``batchless`` (and no ``last``), every op is compared without its first dimension:
    the calls of a loop over batches of unequal size (each expert of a mixture on the
    tokens routed to it) then match.
    """
    ops = [n for n in nodes if n.seq is not None and n.kind != "output"]
    ops.sort(key=_seq_number)
    if first or last:
        ahead, behind = set(first), set(last)
        ops = ([n for n in ops if n.id in ahead]
               + [n for n in ops if n.id not in ahead and n.id not in behind]
               + [n for n in ops if n.id in behind])
    rest = len(ops) - len(last)
    interned: dict[tuple, int] = {}
    if last or batchless:
        keys = [interned.setdefault(batchless_key(n), len(interned)) for n in ops[:rest]]
        keys += [interned.setdefault(op_key(n), len(interned)) for n in ops[rest:]]
    else:
        keys = [interned.setdefault(op_key(n), len(interned)) for n in ops]
    pos = {n.id: i for i, n in enumerate(ops)}
    leaves = {n.id: n for n in nodes if n.id not in pos and n.kind != "output"}
    out: list[list[int]] = [[] for _ in ops]
    indeg = [0] * len(ops)
    loose = []  # the edges from or to a node that is not an op
    for edge in edges:
        i, j = pos.get(edge[0]), pos.get(edge[1])
        if i is not None and j is not None:
            out[i].append(j)
            indeg[j] += 1
        else:
            loose.append(edge)
    for i in range(rest if last else 0):  # producer -> bridge -> consumer: also producer -> consumer
        through = [j for b in out[i] if b >= rest for j in out[b] if j not in out[i]]
        out[i].extend(dict.fromkeys(through))
    feeds, spans = _leaf_uses(loose, pos, leaves, interned)
    hints = [n.module for n in ops]
    for i in itertools.compress(range(len(ops)), feeds):  # a parameter's name says which module reads it
        if not hints[i]:
            hints[i] = common_module(owner(leaves[x].label) for x in feeds[i]
                                     if leaves[x].kind == "parameter")
    own = list(hints)  # (a tag, or the module of the parameters the op reads: not inherited)
    before, after = _nearest(inherited_modules(hints, out))
    return Seq(ops, keys, out, indeg, before, after, feeds, spans, leaves, len(last), loose, batchless, own)


def inherited_modules(hints: list[str | None], out: Sequence[Sequence[int]]) -> list[str | None]:
    """Each op's module, where an op with none of its own (no tag, no parameter) takes the
    one all the ops it feeds share.

    Without module tags, the module of an op is known only where it reads a parameter. An
    RMSNorm written out (``x * rsqrt(mean(x ** 2) + eps) * weight``) reads its weight in
    its last op: its first four ops feed only ops of that norm, so they are the norm's too,
    and a layer's boundary falls before them, not in the middle of the norm. Consumers come
    later in creation order, so one pass from the end carries a module up a chain.

    Example:
        >>> inherited_modules([None, None, "norm", None], [[1], [2], [3], []])
        ['norm', 'norm', 'norm', None]
        >>> inherited_modules([None, "a", "b"], [[1, 2], [], []])  # two modules read it: none
        [None, 'a', 'b']
    """
    hints = list(hints)
    for i in range(len(hints) - 1, -1, -1):
        if hints[i] is None and out[i]:
            first = hints[out[i][0]]
            if first is not None and all(hints[j] == first for j in out[i]):
                hints[i] = first
    return hints


def _leaf_uses(edges: Iterable[tuple[int, int]], pos: Mapping[int, int], leaves: Mapping[int, Node],
               interned: dict[tuple, int]) -> tuple[list[Sequence[int]], dict[int, tuple[int, int, int]]]:
    """Per op position, the leaves it reads; per leaf, the first and last op it touches and its key.

    A leaf that also touches a node that is not an op (an output) gets ``(-1, -1)``: it
    can belong to no iteration.
    """
    fed: dict[int, list[int]] = defaultdict(list)  # op position -> its leaves (most ops read none)
    touched: dict[int, list[int]] = defaultdict(list)
    for src, dst in edges:
        if src in leaves:
            touched[src].append(pos.get(dst, -1))
            if dst in pos:
                fed[pos[dst]].append(src)
        if dst in leaves:
            touched[dst].append(pos.get(src, -1))
    feeds: list[Sequence[int]] = [()] * len(pos)
    for i, ids in fed.items():
        feeds[i] = ids
    spans = {leaf: ((min(at), max(at)) if min(at) >= 0 else (-1, -1))
             + (interned.setdefault(op_key(leaves[leaf]), len(interned)),) for leaf, at in touched.items()}
    return feeds, spans


def _nearest(hints: list[str | None]) -> tuple[list[str | None], list[str | None]]:
    """Per position: the nearest module name before it, and at it or after it.

    An op's module is its tag, else the module owning the parameters it reads, so
    that iteration boundaries fall between modules even without tags.
    """
    before: list[str | None]
    after: list[str | None]
    last: str | None
    if not any(hints):  # no tags, no parameters: a loop of small ops
        return [None] * len(hints), [None] * len(hints)
    before, last = [], None
    for hint in hints:
        before.append(last)
        last = hint or last
    after, last = [None] * len(hints), None
    for i in range(len(hints) - 1, -1, -1):
        last = hints[i] or last
        after[i] = last
    return before, after


def unequal_batches(seq: Seq) -> bool:
    """Whether some ops of ``seq`` differ only in their first dimension (worth comparing
    them without it: :func:`read_sequence`'s ``batchless``)."""
    kinds = dict(zip(seq.keys, seq.ops))  # one op of each key (C speed: 300,000 ops in ms)
    return len({batchless_key(n) for n in kinds.values()}) < len(kinds)


_RESIZE = frozenset({"SliceBackward0", "CatBackward0"})  # ops that take rows off a state, or add rows to it


def find_bridges(seq: Seq) -> list[int]:
    """Ids of the ops that resize a state between steps: a slice or cat whose one op input
    differs from it in the first (batch) dimension only, where an op like that input
    also feeds an op like one of its consumers directly (at the steps with no resize).

    An ``nn.GRU`` over packed sequences slices its hidden state each time a sequence
    ends (3 rows, then 2, then 1); the reverse direction of a bidirectional one adds
    rows with a cat. The slices that cut each step's rows out of an input computed for
    all steps at once are not bridges: that input feeds no step directly.
    """
    if _RESIZE.isdisjoint([n.name for n in seq.ops]):
        return []
    candidates = []
    for j in (j for j, n in enumerate(seq.ops) if n.name in _RESIZE and seq.producers[j]):
        node, (i, *more) = seq.ops[j], seq.producers[j]
        before = seq.ops[i].shape
        if (not more and node.shape and before and len(node.shape) == len(before)
                and node.shape[1:] == before[1:] and node.shape[0] != before[0]):
            candidates.append((i, j))
    if not candidates:
        return []
    key = [batchless_key(n) for n in seq.ops]
    direct = {(key[i], key[j]) for i, outs in enumerate(seq.out) for j in outs}
    return [seq.ops[j].id for i, j in candidates if any((key[i], key[c]) in direct for c in seq.out[j])]


def find_hoisted(seq: Seq) -> list[tuple[set[int], list[int]]]:
    """Values that a few ops compute from leaves alone and that several like ops read:
    per value, the ids of the ops that compute it and of the ops that read it.

    T5's first layer computes the relative position bias from its own weight (an
    embedding, a permute, an unsqueeze) and every later layer reads that same value:
    the first layer has three ops more than the others, so no two layers match. These
    ops read no other op, so they may come first without changing the graph: moved
    ahead of everything, they leave layers that match, and draw as nodes outside the
    block that every iteration reads (:func:`roll` keeps the move only then).
    """
    found = []
    for i in itertools.compress(range(len(seq.out)), map((2).__le__, map(len, seq.out))):  # 2 readers or more
        outs = seq.out[i]
        if len({seq.keys[j] for j in outs}) == 1:
            ops = upstream([i], seq.producers.__getitem__, _HOIST_MAX)
            if ops is not None and not any(j in ops for j in outs):
                found.append(({seq.ops[k].id for k in ops}, [seq.ops[j].id for j in outs]))
    return found
