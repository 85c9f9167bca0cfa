"""Building the rolled graph from the chosen runs: every iteration mapped onto its
block's iteration 0, the leaves each iteration owns rolled with it, the state passed
from k to k + 1 as loop edges, and the resizing ops absorbed into them."""

from __future__ import annotations

import dataclasses
import itertools
import operator
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from .._records import Block, Node
from .names import (
    Range,
    block_label,
    common_module,
    parameter_set_label,
    range_label,
    resize_note,
    split_index,
)
from .runs import Run
from .sequence import Seq, op_key

_block_and_k = operator.itemgetter(0, 1)


@dataclass
class Rolled:
    """A graph with each repeated region kept once, as returned by :func:`roll`.

    Attributes:
        nodes: Nodes of the rolled graph; a representative whose ``count`` changed is a copy.
        edges: Deduplicated edges; a loop edge may be ``(a, a)``, no other edge is.
        blocks: The rolled regions, in creation order.
        mapping: Every old node id -> its id in the rolled graph (itself when kept).
        iteration: Old id -> ``(block index, iteration k)`` for every node of a block.
        module_types: The graph's module types, plus the names that modules inside a
            block get: ``"h.{0…11}.attn"`` for a block over ``h.0`` … ``h.11``, as its
            parameters are named (the representative's ``"h.0.attn"`` would read as layer 0 only).
        through: Old id -> ``(block index, iteration k)`` for each op drawn as a loop
            edge (a slice or cat that resizes the state between iterations k and k + 1);
            these are in :attr:`mapping` but in no iteration.
    """

    nodes: list[Node]
    edges: list[tuple[int, int]]
    blocks: list[Block]
    mapping: dict[int, int]
    iteration: dict[int, tuple[int, int]]
    module_types: dict[str, str] = dataclasses.field(default_factory=dict)
    through: dict[int, tuple[int, int]] = dataclasses.field(default_factory=dict)


def build_rolled(nodes: Sequence[Node], edges: Sequence[tuple[int, int]], seq: Seq,
                 runs: list[Run], module_types: Mapping[str, str]) -> Rolled:
    """The rolled graph: every iteration mapped onto its block's iteration 0."""
    where: dict[int, tuple[int, int, int]] = {}  # old op id -> (block, k, offset)
    iteration: dict[int, tuple[int, int]] = {}
    mapping = {n.id: n.id for n in nodes}
    for b, run in enumerate(runs):  # (in C: a loop of 300,000 steps)
        ops = [n.id for n in seq.ops[run.start:run.stop]]
        spots = list(itertools.product((b,), range(run.repeats), range(run.period)))
        where.update(zip(ops, spots))
        iteration.update(zip(ops, map(_block_and_k, spots)))
        mapping.update(zip(ops, itertools.cycle(ops[:run.period])))
    if len(where) == len(seq.ops):  # every op rolls: the sequence's leaves, which only its leaf edges touch
        owned = _roll_leaves(seq.leaves, seq.leaf_edges, where, runs, mapping)
    else:
        owned = _roll_leaves({n.id: n for n in nodes if n.id not in where and n.kind != "output"}, edges,
                             where, runs, mapping)
    iteration.update({nid: (b, k) for nid, (b, k) in owned.items()})
    absorbed = _absorb(seq, where, mapping)
    through = {b.id: iteration[p.id] for pairs in absorbed.values() for b, p in pairs}
    new_edges, loops = _rolled_edges(edges, mapping, iteration | through if through else iteration)
    ranges, several = _ranges(seq, owned, mapping)
    blocks = [_block(seq, run, b, owned, loops[b], module_types, ranges) for b, run in enumerate(runs)]
    for b, pairs in absorbed.items():  # (bridge, the op it reads)
        blocks[b].note = resize_note([n.shape[0] for pair in pairs for n in pair if n.shape],
                                     [bridge.name for bridge, _ in pairs])
    labels = several | {rep: range_label(*split) for rep, split in ranges.items()}
    renamed = _module_ranges(seq, runs, module_types)
    kept = _kept(nodes, mapping, labels, renamed, {nid for block in blocks for nid in block.nodes},
                 _batch_ranges(seq, runs) if seq.bridges or seq.batchless else {})
    types = dict(module_types)
    for old, new in renamed.items():
        if old in module_types:
            types[new] = module_types[old]
    return Rolled(kept, new_edges, blocks, mapping, iteration, types, through)


def _absorb(seq: Seq, where: Mapping[int, tuple[int, int, int]],
            mapping: dict[int, int]) -> dict[int, list[tuple[Node, Node]]]:
    """Draw each bridge on the loop edge it lies on: per block, the bridges it absorbs
    (with the op each reads).

    A bridge (:func:`find_bridges`) whose producer is in iteration k of a block and whose
    consumers are all in iteration k + 1 maps onto its producer's representative (in
    ``mapping``, updated in place; it belongs to no iteration), and its edges to k + 1
    become the block's loop edges.
    Other bridges (a finished sequence's last state, sliced off for the output) stay nodes.
    """
    absorbed: dict[int, list[tuple[Node, Node]]] = defaultdict(list)
    if not seq.bridges:
        return absorbed
    rest = len(seq.ops) - seq.bridges
    for j in range(rest, len(seq.ops)):
        ins, outs = [i for i in seq.producers[j] if i < rest], [o for o in seq.out[j] if o < rest]
        if len(ins) != 1 or not outs or len(outs) != len(seq.out[j]):
            continue
        src = where.get(seq.ops[ins[0]].id)
        dst = {where[seq.ops[o].id][:2] if seq.ops[o].id in where else None for o in outs}
        if src is not None and dst == {(src[0], src[1] + 1)}:
            bridge = seq.ops[j]
            mapping[bridge.id] = mapping[seq.ops[ins[0]].id]
            absorbed[src[0]].append((bridge, seq.ops[ins[0]]))
    return absorbed


def _batch_ranges(seq: Seq, runs: Sequence[Run]) -> dict[int, tuple]:
    """Representative id -> its shape with the first dimension written as the range its
    iterations take (``("1–3", 16)``), for the ops whose iterations differ there."""
    out = {}
    for run in runs:
        for o in range(run.period):
            rep = seq.ops[run.start + o]
            if not rep.shape:
                continue
            sizes = {seq.ops[i].shape[0] for i in range(run.start + o, run.stop, run.period)}  # type: ignore[index]
            if len(sizes) > 1:
                out[rep.id] = (f"{min(sizes)}\u2013{max(sizes)}", *rep.shape[1:])
    return out


def _module_ranges(seq: Seq, runs: list[Run], module_types: Mapping[str, str]) -> dict[str, str]:
    """Module name -> the name it has inside its block: ``"h.0.attn"`` -> ``"h.{0…11}.attn"``
    when the block's iterations run in modules whose names differ in one index
    (``h.0`` … ``h.11``); the representative's modules, and their parents up to the
    iteration's own module, are renamed."""
    renamed: dict[str, str] = {}
    for run in runs:
        heads = _iteration_modules(seq, run)
        if not all(heads) or len(set(heads)) != len(heads):
            continue  # not one module per iteration (a cell called at every step keeps its name)
        split = split_index([h for h in heads if h])
        if split is None:
            continue
        head, name = heads[0] or "", range_label(*split)
        names = {n.module for n in seq.ops[run.start:run.start + run.period] if n.module} | set(module_types)
        for m in sorted(names):  # (sorted: the same order on every run)
            if m == head or m.startswith(head + "."):
                renamed[m] = name + m[len(head):]
    return renamed


def _roll_leaves(leaves: Mapping[int, Node], edges: Sequence[tuple[int, int]],
                 where: Mapping[int, tuple[int, int, int]], runs: list[Run],
                 mapping: dict[int, int]) -> dict[int, tuple[int, int]]:
    """Map leaves owned by one iteration onto iteration 0's, where every iteration has them.

    A leaf (any node of ``leaves``: neither a rolled op nor an output) is owned by
    iteration k when all its neighbours are ops of k; its place is its label and the
    offsets it touches. Leaves at one place roll when every iteration of the block owns
    as many there. ``edges``: every edge that touches a leaf, in the graph's order.

    Returns:
        Rolled leaf id -> ``(block, k)``; ``mapping`` is updated in place.
    """
    at: dict[tuple[int, int], list[list[int]]] = {}  # (block, place) -> ids per iteration
    for nid, (b, k, place) in _owned_places(leaves, edges, where).items():
        if (b, place) not in at:
            at[b, place] = [[] for _ in range(runs[b].repeats)]
        at[b, place][k].append(nid)
    owned = {}
    for (b, _), per_iter in at.items():
        if len({len(ids) for ids in per_iter}) != 1:
            continue  # some iteration lacks it (an input only the first one reads)
        for k, ids in enumerate(per_iter):
            for nid, rep in zip(ids, per_iter[0]):
                mapping[nid] = rep
                owned[nid] = (b, k)
    return owned


def _owned_places(leaves: Mapping[int, Node], edges: Sequence[tuple[int, int]],
                  where: Mapping[int, tuple[int, int, int]]) -> dict[int, tuple[int, int, int]]:
    """Leaf id -> ``(block, k, place)`` for each leaf whose neighbours all lie in one iteration."""
    touches: dict[int, list[tuple[bool, int]]] = defaultdict(list)
    for src, dst in edges:
        if src in leaves:
            touches[src].append((True, dst))
        if dst in leaves:
            touches[dst].append((False, src))
    interned: dict[tuple, int] = {}
    out = {}
    for nid, seen in touches.items():
        spots = [where[other] for _, other in seen if other in where]
        if len(spots) < len(seen) or len({(b, k) for b, k, _ in spots}) != 1:
            continue
        b, k, _ = spots[0]
        offsets = sorted({(feeds, spot[2]) for (feeds, _), spot in zip(seen, spots)})
        place = (op_key(leaves[nid]), tuple(offsets))  # what it is, which offsets it touches
        out[nid] = (b, k, interned.setdefault(place, len(interned)))
    return out


def _rolled_edges(edges: Iterable[tuple[int, int]], mapping: Mapping[int, int],
                  iteration: Mapping[int, tuple[int, int]]
                  ) -> tuple[list[tuple[int, int]], dict[int, list[tuple[int, int]]]]:
    """Edges through ``mapping``, deduplicated; loop edges (k -> k + 1 of one block) per block."""
    out: list[tuple[int, int]] = []
    seen: set[tuple[int, int]] = set()
    loops: dict[int, list[tuple[int, int]]] = defaultdict(list)
    looped: set[tuple[int, int]] = set()
    for src, dst in edges:
        edge = (mapping.get(src, src), mapping.get(dst, dst))
        if edge in looped:  # (seen, and a loop edge already: a rolled chain's every step)
            continue
        at_src, at_dst = iteration.get(src), iteration.get(dst)
        loop = (at_src is not None and at_dst is not None
                and at_src[0] == at_dst[0] and at_dst[1] == at_src[1] + 1)
        if edge[0] == edge[1] and not loop:
            continue
        if loop and at_src is not None and edge not in looped:
            looped.add(edge)
            loops[at_src[0]].append(edge)
        if edge not in seen:
            seen.add(edge)
            out.append(edge)
    return out, loops


def _block(seq: Seq, run: Run, b: int, owned: Mapping[int, tuple[int, int]],
           loops: list[tuple[int, int]], module_types: Mapping[str, str],
           ranges: Mapping[int, Range]) -> Block:
    """The :class:`Block` record of run ``b``."""
    rep = seq.ops[run.start:run.start + run.period]
    leaves = [nid for nid, (blk, k) in owned.items() if blk == b and k == 0]
    heads = _iteration_modules(seq, run)
    shared = _shared(seq, run)
    tagged = ([n.module for n in ops if n.module] for ops in _iterations(seq, run))
    label = block_label([n.name for n in rep], run.repeats, tagged, heads, module_types,
                        [ranges[r] for r in leaves if r in ranges], shared, _first_step(seq, run))
    return Block(label, run.repeats, [n.id for n in rep] + leaves, loops,
                 common_module(heads) if all(heads) else None)


def _iteration_modules(seq: Seq, run: Run) -> list[str | None]:
    """The module every op of each iteration of ``run`` runs in (their common prefix), or
    ``None``; all ``None`` at once when no op of the run has a module (no tags: a
    300,000-step loop of small ops makes no 300,000 empty lookups)."""
    if seq.module_after[run.start] is None or not any(n.module for n in seq.ops[run.start:run.stop]):
        return [None] * run.repeats  # (no module or parameter at or after the run's start: no tag)
    return [common_module(n.module for n in it) for it in _iterations(seq, run)]


def _iterations(seq: Seq, run: Run) -> Iterator[list[Node]]:
    """The ops of each iteration of ``run``, in order (sliced as read: a 300,000-step
    loop often reads only the first)."""
    return (seq.ops[start:start + run.period] for start in range(run.start, run.stop, run.period))


def _read_by_all(seq: Seq, run: Run) -> set[int]:
    """The leaves both the first and the last iteration of ``run`` read: what every
    iteration shares (the iterations' leaves match), as a recurrence's weights."""
    first, last = (set(itertools.chain.from_iterable(seq.feeds[i:i + run.period]))
                   for i in (run.start, run.stop - run.period))
    return first & last


def _first_step(seq: Seq, run: Run) -> int:
    """The step number (from 1) of the run's first iteration among all the steps that
    read its shared weights: the blocks of one loop count on from each other (a step
    where a packed batch shrinks does not roll, and the next block starts after it)."""
    common = _read_by_all(seq, run)
    if not common:
        return 1
    leaf = min(common)
    per_step = sum(feeds.count(leaf) for feeds in seq.feeds[run.start:run.start + run.period])
    before = sum(feeds.count(leaf) for feeds in seq.feeds[:run.start])
    return before // per_step + 1


def _shared(seq: Seq, run: Run) -> list[str]:
    """Names of the parameters every iteration of ``run`` shares (:func:`_read_by_all`)."""
    return sorted(seq.leaves[x].label for x in _read_by_all(seq, run) if seq.leaves[x].kind == "parameter")


def _ranges(seq: Seq, owned: Mapping[int, tuple[int, int]],
            mapping: Mapping[int, int]) -> tuple[dict[int, Range], dict[int, str]]:
    """Rolled parameter id -> its iterations' names, split at the one index where they
    differ; and the label of each other rolled parameter that stands for several names
    (:func:`parameter_set_label`)."""
    names: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for nid, (_, k) in owned.items():
        if seq.leaves[nid].kind == "parameter":
            names[mapping[nid]].append((k, seq.leaves[nid].label))
    out, several = {}, {}
    for rep, pairs in names.items():
        ordered = [name for _, name in sorted(pairs)]
        split = split_index(ordered)
        if split is not None:
            out[rep] = split
        elif len(set(ordered)) > 1:
            several[rep] = parameter_set_label(list(dict.fromkeys(ordered)))
    return out, several


def _kept(nodes: Sequence[Node], mapping: Mapping[int, int], labels: Mapping[int, str],
          modules: Mapping[str, str], inside: set[int], shapes: Mapping[int, tuple]) -> list[Node]:
    """The nodes that stay, each representative's ``count`` summed over the nodes it
    stands for, its ``label`` from ``labels``, its ``shape`` from ``shapes`` and, for the nodes
    ``inside`` a block, its ``module`` from ``modules`` where given (copies: callers
    keep their records)."""
    ids = [n.id for n in nodes]
    targets = [mapping[i] for i in ids]
    counts: Counter[int]
    if {n.count for n in nodes} == {1}:  # every node is one node: count them in C (Counter)
        counts = Counter(targets)
    else:
        counts = Counter()
        for node, target in zip(nodes, targets):
            counts[target] += node.count
    kept = []
    for node in itertools.compress(nodes, map(operator.eq, ids, targets)):  # the nodes that stay
        changed: dict = {"count": counts[node.id]} if counts[node.id] != node.count else {}
        if node.id in labels:
            changed["label"] = labels[node.id]
        if node.id in shapes:
            changed["shape"] = shapes[node.id]
        if node.module is not None and node.module in modules and node.id in inside:
            changed["module"] = modules[node.module]
        kept.append(dataclasses.replace(node, **changed) if changed else node)
    return kept
