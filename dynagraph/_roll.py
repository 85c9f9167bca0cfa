"""Roll repeated regions of a graph (loop steps, identical layers) into one iteration drawn ×N."""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import math
import operator
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from ._language import tr
from ._records import Node, owner, upstream

__all__ = ["Block", "Rolled", "roll"]

_LAGS = 4  # gaps to the next 1..4 occurrences of a label propose periods
_PERIODS = 10  # candidate periods tried per segment, most frequent gap first
_TRIES = 24  # candidate runs verified per segment, most nodes covered first
_LOOSE_MIN = 8  # fewest ops a loop-free run (parallel copies, no state) must cover
# A region seen only twice rolls when an iteration holds at least this many ops: two
# Transformer layers (GPT-2: 68 ops each, T5: 50-75, Llama: 95) or two ResNet blocks draw
# as one, while two short runs of a few ops (a small example written out twice) stay
# apart, where a learner sees every op. Measured on the zoo: benchmarks/README.md.
TWICE_MIN = 12
_HOIST_MAX = 6  # most ops in a value computed from leaves that may move ahead (see _hoisted)
_seq_number = operator.attrgetter("seq")  # (a sort key read in C)
_block_and_k = operator.itemgetter(0, 1)


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
            iteration k to k + 1; also in :attr:`Rolled.edges`.
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


@dataclass(frozen=True)
class _Run:
    """Iterations ``start + k * period ... + period - 1`` (op positions), k < repeats."""

    start: int
    period: int
    repeats: int

    @property
    def stop(self) -> int:
        return self.start + self.covered

    @property
    def covered(self) -> int:
        return self.period * self.repeats


@dataclass
class _Seq:
    """Op nodes in creation order with interned labels and op-to-op edges by position."""

    ops: list[Node]
    keys: list[int]  # equal keys: same kind, name, shape, dtype, device, count
    out: list[list[int]]  # positions each op feeds
    indeg: list[int]  # number of op producers of each op
    before: list[str | None]  # module of the nearest op before i that has one
    after: list[str | None]  # module of the nearest op at i or later that has one
    feeds: list[Sequence[int]]  # ids of the leaves each op reads, one per edge
    spans: dict[int, tuple[int, int, int]]  # leaf id -> (first, last op position it touches, key)
    leaves: dict[int, Node]  # every node that is neither op nor output
    bridges: int = 0  # the last ``bridges`` ops: state resized between iterations (see _bridges)
    loose: list[tuple[int, int]] = dataclasses.field(default_factory=list)  # edges from or to a non-op
    batchless: bool = False  # ops compared without their first dimension (see _sequence)


def roll(
    nodes: Sequence[Node],
    edges: Sequence[tuple[int, int]],
    *,
    min_repeats: int = 2,
    module_types: Mapping[str, str] | None = None,
) -> Rolled:
    """Keep each repeated region of the graph once, as a block drawn ×N.

    Ops are ordered by autograd's creation counter; a region is a run of consecutive
    iterations with equal labels (name, shape, dtype) whose edges repeat: the same
    edges inside every iteration, and edges to the next iteration (the loop state)
    only from k to k + 1, at the same places each time. Iteration 0 stands for all:
    the others map onto it, their edges to and from the rest of the graph become
    edges of iteration 0, and the state passed from k to k + 1 becomes a loop edge.
    Iterations must read matching leaves too: the same leaf at the same ops (a
    weight every step shares: it stays one node), or each its own leaf of one kind,
    shape and dtype (per-layer parameters: they roll with their iteration, and a
    name like ``h.{0…11}.attn.weight`` stands for theirs). Only the first iteration
    may read more, where the others read the loop state. Outputs never roll.

    Args:
        nodes: The graph's nodes (ids unique, in any order).
        edges: ``(producer id, consumer id)`` pairs.
        min_repeats: Fewest iterations a region needs to be rolled (at least 2).
        module_types: Module name -> class name (capture's third value), for labels.

    Returns:
        A :class:`Rolled`; with no region repeated ``min_repeats`` times, the graph
        unchanged (no blocks, identity mapping).

    Raises:
        ValueError: ``min_repeats`` is not an integer >= 2.

    Example:
        >>> nodes, edges, types = capture(out, params=model)
        >>> rolled = roll(nodes, edges, module_types=types)
        >>> [(b.label, b.repeats) for b in rolled.blocks]
        [('cell: LSTMCell, step 1–500', 500)]
    """
    if isinstance(min_repeats, bool) or not isinstance(min_repeats, int) or min_repeats < 2:
        raise ValueError(f"min_repeats must be an integer >= 2 (3 rolls a region seen three "
                         f"times or more); got {min_repeats!r}")
    seq = _sequence(nodes, edges)
    runs = _find_runs(seq, min_repeats)
    ahead: list[int] = []
    groups = _hoisted(seq)
    for _ in range(2):  # shared values computed inside the first iteration: try them first
        if not groups:
            break
        first = sorted(set().union(*(ids for ids, _ in groups)))
        other = _sequence(nodes, edges, first=first)
        other_runs = _find_runs(other, min_repeats)
        pos = {n.id: i for i, n in enumerate(other.ops)}
        kept = [(ids, by) for ids, by in groups if _read_across(pos, other_runs, by)]
        if len(kept) == len(groups):
            if sum(r.covered for r in other_runs) > sum(r.covered for r in runs):
                seq, runs, ahead = other, other_runs, first
            break
        groups = kept  # a value each iteration makes and reads itself: it stays where it is
    bridges = _bridges(seq)
    if bridges:  # a recurrence whose batch shrinks or grows: try its steps as one loop
        other = _sequence(nodes, edges, first=ahead, last=bridges)
        other_runs = _find_runs(other, min_repeats)
        looped = _looped(other, other_runs)
        if looped != set(bridges):  # slices of an input made before the loop: back in their steps
            other = _sequence(nodes, edges, first=ahead, last=[b for b in bridges if b in looped])
            other_runs = _find_runs(other, min_repeats)
        if _score(other_runs) > _score(runs):
            seq, runs = other, other_runs
    if not seq.bridges and _unequal_batches(seq):  # a loop over batches of unequal size
        other = _sequence(nodes, edges, first=ahead, batchless=True)
        other_runs = _find_runs(other, min_repeats)
        if _score(other_runs) > _score(runs) and all(_looping(other, run) for run in other_runs):
            seq, runs = other, other_runs
    if not runs:
        return Rolled(list(nodes), list(edges), [], {n.id: n.id for n in nodes}, {}, dict(module_types or {}))
    return _build(nodes, edges, seq, runs, module_types or {})


def _unequal_batches(seq: _Seq) -> bool:
    """Whether some ops of ``seq`` differ only in their first dimension (worth comparing
    them without it: :func:`_sequence`'s ``batchless``)."""
    kinds = dict(zip(seq.keys, seq.ops))  # one op of each key (C speed: 300,000 ops in ms)
    return len({_batchless_key(n) for n in kinds.values()}) < len(kinds)


def _looping(seq: _Seq, run: _Run) -> bool:
    """Whether ``run`` is a loop (an iteration feeds the next), or its iterations have one
    size: calls on batches of unequal size roll only when a state joins them (an
    expert loop adding into one result), not as independent calls that happen to match."""
    sizes = {shape[0] for i in range(run.start, run.stop) if (shape := seq.ops[i].shape)}
    if len(sizes) <= 1:
        return True
    return any((j - run.start) // run.period == (i - run.start) // run.period + 1
               for i in range(run.start, run.stop - run.period) for j in seq.out[i] if j < run.stop)


def _score(runs: Sequence[_Run]) -> tuple[int, int]:
    """Which runs roll better: more ops covered, then fewer blocks."""
    return sum(r.covered for r in runs), -len(runs)


def _key(node: Node) -> tuple:
    """What must match for two nodes to be the same node of different iterations."""
    label = node.label if node.kind == "custom" else None  # a custom Function's class
    return (node.kind, node.name, label, node.shape, node.dtype, node.device, node.count)


def _batchless_key(node: Node) -> tuple:
    """:func:`_key` with the shape's first (batch) dimension left out."""
    label = node.label if node.kind == "custom" else None
    shape = node.shape[1:] if node.shape else node.shape
    return (node.kind, node.name, label, len(node.shape or ()), shape, node.dtype, node.device, node.count)


def _sequence(nodes: Sequence[Node], edges: Iterable[tuple[int, int]], first: Sequence[int] = (),
              last: Sequence[int] = (), batchless: bool = False) -> _Seq:
    """The ops (nodes with a creation counter, outputs aside) in creation order; the ops
    whose ids are in ``first`` come before all others (see :func:`_hoisted`).

    With ``last`` (the ids of :func:`_bridges`), those ops come after all others, every
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
        keys = [interned.setdefault(_batchless_key(n), len(interned)) for n in ops[:rest]]
        keys += [interned.setdefault(_key(n), len(interned)) for n in ops[rest:]]
    else:
        keys = [interned.setdefault(_key(n), len(interned)) for n in ops]
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
            hints[i] = _common(owner(leaves[x].label) for x in feeds[i] if leaves[x].kind == "parameter")
    before, after = _nearest(_inherited(hints, out))
    return _Seq(ops, keys, out, indeg, before, after, feeds, spans, leaves, len(last), loose, batchless)


def _inherited(hints: list[str | None], out: Sequence[Sequence[int]]) -> list[str | None]:
    """Each op's module, where an op with none of its own (no tag, no parameter) takes the
    one all the ops it feeds share.

    Without module tags, the module of an op is known only where it reads a parameter. An
    RMSNorm written out (``x * rsqrt(mean(x ** 2) + eps) * weight``) reads its weight in
    its last op: its first four ops feed only ops of that norm, so they are the norm's too,
    and a layer's boundary falls before them, not in the middle of the norm. Consumers come
    later in creation order, so one pass from the end carries a module up a chain.

    Example:
        >>> _inherited([None, None, "norm", None], [[1], [2], [3], []])
        ['norm', 'norm', 'norm', None]
        >>> _inherited([None, "a", "b"], [[1, 2], [], []])  # two modules read it: none
        [None, 'a', 'b']
    """
    hints = list(hints)
    for i in range(len(hints) - 1, -1, -1):
        if hints[i] is None and out[i]:
            first = hints[out[i][0]]
            if first is not None and all(hints[j] == first for j in out[i]):
                hints[i] = first
    return hints


_RESIZE = frozenset({"SliceBackward0", "CatBackward0"})  # ops that take rows off a state, or add rows to it


def _bridges(seq: _Seq) -> list[int]:
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
    producers: dict[int, list[int]] = {}
    for i, outs in enumerate(seq.out):
        for j in outs:
            if seq.ops[j].name in _RESIZE:
                producers.setdefault(j, []).append(i)
    candidates = []
    for j, ins in producers.items():
        node, (i, *more) = seq.ops[j], ins
        before = seq.ops[i].shape
        if (not more and node.shape and before and len(node.shape) == len(before)
                and node.shape[1:] == before[1:] and node.shape[0] != before[0]):
            candidates.append((i, j))
    if not candidates:
        return []
    key = [_batchless_key(n) for n in seq.ops]
    direct = {(key[i], key[j]) for i, outs in enumerate(seq.out) for j in outs}
    return [seq.ops[j].id for i, j in candidates if any((key[i], key[c]) in direct for c in seq.out[j])]


def _hoisted(seq: _Seq) -> list[tuple[set[int], list[int]]]:
    """Values that a few ops compute from leaves alone and that several like ops read:
    per value, the ids of the ops that compute it and of the ops that read it.

    T5's first layer computes the relative position bias from its own weight (an
    embedding, a permute, an unsqueeze) and every later layer reads that same value:
    the first layer has three ops more than the others, so no two layers match. These
    ops read no other op, so they may come first without changing the graph: moved
    ahead of everything, they leave layers that match, and draw as nodes outside the
    block that every iteration reads (:func:`roll` keeps the move only then).
    """
    producers: list[list[int]] = []  # made when first needed: most ops feed one op
    found = []
    for i in itertools.compress(range(len(seq.out)), map((2).__le__, map(len, seq.out))):  # 2 readers or more
        outs = seq.out[i]
        if len({seq.keys[j] for j in outs}) == 1:
            if not producers:
                producers = [[] for _ in seq.ops]
                for p, ins in enumerate(seq.out):
                    for j in ins:
                        producers[j].append(p)
            ops = upstream([i], producers.__getitem__, _HOIST_MAX)
            if ops is not None and not any(j in ops for j in outs):
                found.append(({seq.ops[k].id for k in ops}, [seq.ops[j].id for j in outs]))
    return found


def _read_across(pos: Mapping[int, int], runs: Sequence[_Run], readers: Sequence[int]) -> bool:
    """Whether the ops ``readers`` (at op positions ``pos``) lie in two or more iterations of
    one run: the value they read is shared across iterations (not one each iteration makes
    and reads twice)."""
    spots = {(r, (pos[nid] - run.start) // run.period) for nid in readers for r, run in enumerate(runs)
             if run.start <= pos[nid] < run.stop}
    return len({r for r, _ in spots}) == 1 and len(spots) >= 2


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
             + (interned.setdefault(_key(leaves[leaf]), len(interned)),) for leaf, at in touched.items()}
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


def _find_runs(seq: _Seq, min_repeats: int) -> list[_Run]:
    """The rolled runs: the best run of the whole sequence, then of what lies around it."""
    runs, todo = [], [(0, len(seq.ops) - seq.bridges)]  # (bridges roll with no run)
    while todo:
        lo, hi = todo.pop()
        if hi - lo < min_repeats:
            continue
        run = _best_run(seq, lo, hi, min_repeats)
        if run is not None:
            runs.append(run)
            todo += [(lo, run.start), (run.stop, hi)]
    return sorted(runs, key=lambda r: r.start)


def _best_run(seq: _Seq, lo: int, hi: int, min_repeats: int) -> _Run | None:
    """The verified run in positions ``[lo, hi)`` covering the most ops, or ``None``."""
    candidates = []
    for period in _periods(seq.keys, lo, hi, min_repeats):
        for start, length in _tandems(seq.keys, lo, hi, period):
            if length // period >= min_repeats:
                candidates.append((length // period * period, period, start, length))
    candidates.sort(key=lambda c: (-c[0], c[1], c[2]))
    best = None
    for covered, period, start, length in candidates[:_TRIES]:
        if best is not None and covered <= best.covered:
            break  # sorted by cover: nothing left can beat it
        phase = _phase(seq, start, length, period)
        run = _verified(seq, _Run(phase, period, length // period), min_repeats)
        if run is not None and (best is None or run.covered > best.covered):
            best = run
    return best


def _periods(keys: Sequence[int], lo: int, hi: int, min_repeats: int) -> list[int]:
    """Candidate periods: the commonest gaps between near occurrences of one label.

    Args:
        keys: Interned labels in creation order.
        lo, hi: The segment searched, positions ``[lo, hi)``.
        min_repeats: Fewest iterations a run needs.

    Returns:
        Up to ``_PERIODS`` gaps, most frequent first.
    """
    where: dict[int, list[int]] = defaultdict(list)
    for i in range(lo, hi):
        where[keys[i]].append(i)
    gaps: Counter[int] = Counter()
    for pos in where.values():
        if len(pos) >= min_repeats:
            step = list(map(operator.sub, pos[1:], pos))
            even = step.count(step[0]) == len(step)  # evenly spaced (a loop): each lag has one gap
            for lag in range(1, min(_LAGS, len(pos) - 1) + 1):
                if even:
                    gaps[lag * step[0]] += len(pos) - lag
                else:
                    gaps.update(step if lag == 1 else map(operator.sub, pos[lag:], pos))
    longest = (hi - lo) // min_repeats
    ranked = sorted((-count, gap) for gap, count in gaps.items()
                    if gap <= longest and count >= min_repeats - 1)
    return [gap for _, gap in ranked[:_PERIODS]]


def _tandems(keys: Sequence[int], lo: int, hi: int, period: int) -> Iterable[tuple[int, int]]:
    """Maximal stretches ``(start, length)`` of ``[lo, hi)`` whose labels repeat with ``period``."""
    same = map(operator.eq, keys[lo:hi - period], keys[lo + period:hi])
    i = lo
    for equal, group in itertools.groupby(same):
        n = len(list(group))
        if equal:
            yield i, n + period
        i += n


def _phase(seq: _Seq, start: int, length: int, period: int) -> int:
    """Where iteration 0 starts in a stretch longer than its whole iterations.

    Among the starts that keep every iteration, prefer a boundary between modules
    (fewest shared dotted parts), then the fewest ops and edges carrying state
    across the boundary, then a first op fed by no other op, then the earliest.
    """
    spare = length % period
    if spare == 0:
        return start
    edges_cut, sources_cut = _cuts(seq, start, length, period)
    return min(range(start, start + spare + 1), key=lambda s: (
        _shared_depth(seq, s + period), sources_cut[s - start],
        edges_cut[s - start], seq.indeg[s], s))


def _cuts(seq: _Seq, start: int, length: int, period: int) -> tuple[list[int], list[int]]:
    """Per boundary offset: edges, and distinct source ops, crossing an iteration boundary.

    Counted over one period inside the stretch, with difference arrays (linear time).
    """
    edges_diff, sources_diff = [0] * (period + 1), [0] * (period + 1)
    stop = start + length
    for i in range(start + period, min(start + 2 * period, stop)):
        far = i
        for j in seq.out[i]:
            if i < j < stop:
                _mark(edges_diff, (i + 1 - start) % period, j - i, period)
                far = max(far, j)
        if far > i:
            _mark(sources_diff, (i + 1 - start) % period, far - i, period)
    return _running(edges_diff, period), _running(sources_diff, period)


def _mark(diff: list[int], first: int, span: int, period: int) -> None:
    """Add 1 to the ``span`` offsets from ``first`` on, around the circle of ``period``."""
    if span >= period:
        diff[0] += 1
        diff[period] -= 1
    elif first + span <= period:
        diff[first] += 1
        diff[first + span] -= 1
    else:
        diff[first] += 1
        diff[period] -= 1
        diff[0] += 1
        diff[first + span - period] -= 1


def _running(diff: list[int], period: int) -> list[int]:
    """Running sums of a difference array: the count at each of the ``period`` offsets."""
    total, out = 0, []
    for d in diff[:period]:
        total += d
        out.append(total)
    return out


def _shared_depth(seq: _Seq, i: int) -> int:
    """Dotted parts shared by the modules on either side of a boundary before op ``i``."""
    left, right = seq.before[i], seq.after[i]
    if left is None or right is None:
        return 0
    shared = 0
    for a, b in zip(left.split("."), right.split(".")):
        if a != b:
            break
        shared += 1
    return shared


def _verified(seq: _Seq, run: _Run, min_repeats: int) -> _Run | None:
    """The longest part of ``run`` whose iterations have the same edges, or ``None``.

    Same edges: the same edges inside each iteration (as offset pairs), the same
    edges from each iteration to the next, and none that skip an iteration; and the
    same leaves (:func:`_leaf_signatures`). Copies that pass no state along (no such
    edges) must also feed the same ops outside and cover at least ``_LOOSE_MIN`` ops:
    per-step work gathered by one stack rolls; the query, key and value projections,
    whose results go different ways, do not.
    """
    span = slice(run.start, run.stop)
    inputs = list(map(operator.add, seq.indeg[span], map(len, seq.feeds[span])))  # by position in the run
    sigs = _Signatures(*_edge_signatures(seq, run), _leaf_signatures(seq, run), inputs)
    first, repeats = _longest_group(sigs, run.period)
    if repeats < max(min_repeats, 2 if run.period >= TWICE_MIN else 3):
        return None
    found = _Run(run.start + first * run.period, run.period, repeats)
    if not sigs.cross[first] and (found.covered < _LOOSE_MIN or not _same_consumers(seq, found)):
        return None
    return found


def _same_consumers(seq: _Seq, run: _Run) -> bool:
    """Whether every iteration of ``run`` feeds the same ops outside it."""
    outside: set[int] = set()
    for k in range(run.repeats):
        first = run.start + k * run.period
        fed = {j for i in range(first, first + run.period) for j in seq.out[i]
               if not run.start <= j < run.stop}
        if k and fed != outside:
            return False
        outside = fed
    return True


def _edge_signatures(seq: _Seq, run: _Run) -> tuple[list[tuple], list[tuple], list[bool]]:
    """Per iteration k: its inner edges, its edges into k + 1, whether an edge skips past k + 1."""
    start, period, stop, out = run.start, run.period, run.stop, seq.out
    inner: list[tuple] = []
    cross: list[tuple] = []
    broken = [False] * run.repeats
    for k, first in enumerate(range(start, stop, period)):
        after = first + period  # iteration k + 1 starts here
        if period == 1 and after < stop and len(out[first]) == 1 and out[first][0] == after:
            inner.append(())  # one op that feeds the next only (y = y * 1.0 in a loop)
            cross.append((0,))
            continue
        here: list[int] = []
        ahead: list[int] = []
        beyond = min(after + period, stop)
        for o in range(period):
            base = o * period - first  # edge code minus j, for a j in k
            for j in out[first + o]:
                if first <= j < after:
                    here.append(base + j)
                elif after <= j < beyond:
                    ahead.append(base + j - period)
                elif start <= j < stop:  # no group may hold both k and j's iteration
                    broken[min(k, (j - start) // period)] = True
        inner.append(tuple(here) if len(here) < 2 else tuple(sorted(here)))  # (most have one item or none)
        cross.append(tuple(ahead) if len(ahead) < 2 else tuple(sorted(ahead)))
    return inner, cross, broken


def _leaf_signatures(seq: _Seq, run: _Run) -> list[tuple]:
    """Per iteration k: the leaves its ops read, as a sorted tuple of entries.

    A leaf that only iteration k touches is k's own (a per-layer weight): one entry
    ``(0, key, offsets it feeds)``, so that the iterations' own leaves must match in
    kind, shape and dtype. Any other leaf (a weight every step shares) is
    ``(1, offset, leaf id)`` for each op it feeds: the same leaf, at the same places.
    """
    sigs: dict[int, list[tuple]] = defaultdict(list)  # (most iterations read no leaf)
    own: dict[int, set[int]] = defaultdict(set)
    feeds = seq.feeds
    for i in itertools.compress(range(run.start, run.stop), feeds[run.start:run.stop]):
        k, o = divmod(i - run.start, run.period)
        for leaf in feeds[i]:
            lo, hi, _ = seq.spans[leaf]
            if run.start <= lo and hi < run.start + (k + 1) * run.period and lo >= i - o:
                own[leaf].add(o)
            else:
                sigs[k].append((1, o, leaf))
    for leaf, offsets in own.items():
        lo, _, key = seq.spans[leaf]
        sigs[(lo - run.start) // run.period].append((0, key, tuple(sorted(offsets))))
    out: list[tuple] = [()] * run.repeats
    for k, entries in sigs.items():
        out[k] = tuple(entries) if len(entries) < 2 else tuple(sorted(entries))
    return out


@dataclass
class _Signatures:
    """Per iteration of a run: what must match for iterations to be equal."""

    inner: list[tuple]  # edges inside the iteration
    cross: list[tuple]  # edges into the next iteration
    broken: list[bool]  # an edge skips past the next iteration
    leaves: list[tuple]  # the leaves it reads (:func:`_leaf_signatures`)
    inputs: list[int]  # per op of the run, in order: how many ops and leaves feed it


def _longest_group(sigs: _Signatures, period: int) -> tuple[int, int]:
    """``(first, count)`` of the longest stretch of iterations with equal signatures."""
    n = len(sigs.inner)
    changes = _changes(sigs, period)
    best_first, best_len, first = 0, 1, 0
    k = 1
    while k < n:
        upto = k  # the next iteration that _joins must check
        if k - 1 > first:  # a group of two or more takes in every iteration before the next change
            at = bisect.bisect_left(changes, k)
            upto = changes[at] if at < len(changes) else n
        if upto > k:
            k = upto - 1
        elif not _joins(sigs, first, k, period):
            first = k - 1 if _joins(sigs, k - 1, k, period) else k
        if k - first + 1 > best_len:
            best_first, best_len = first, k - first + 1
        k += 1
    return best_first, best_len


def _changes(sigs: _Signatures, period: int) -> list[int]:
    """The iterations ``k`` that a group of two or more before them may not take in
    (:func:`_joins`: their edges, leaves or numbers of inputs differ from ``k - 1``'s, or
    ``k - 1``'s loop state differs from ``k - 2``'s, or an edge of ``k - 1`` skips an
    iteration), sorted."""
    found: set[int] = set()
    for sig, first in ((sigs.inner, 1), (sigs.leaves, 1), (sigs.cross[:-1], 2)):
        if sig[1:] != sig[:-1]:  # (in C, one object compared with itself at once: a long loop's)
            found.update(itertools.compress(range(first, first + len(sig)), map(operator.ne, sig[1:], sig)))
    if any(sigs.broken):
        found.update(itertools.compress(range(1, len(sigs.inner)), sigs.broken))
    inputs = sigs.inputs
    if inputs[period:] != inputs[:-period]:  # an op with more or fewer inputs than in k - 1
        found.update(p // period for p in itertools.compress(
            range(period, len(inputs)), map(operator.ne, inputs[period:], inputs)))
    return sorted(found)


def _joins(sigs: _Signatures, first: int, k: int, period: int) -> bool:
    """Whether iteration ``k`` extends the group of iterations ``first .. k - 1``.

    The group's first iteration may read more leaves than the others, but only at ops
    that later iterations feed with the loop state, and with no more inputs there in
    all: leaves that stand in for the state (an initial state that needs grad). The
    later iterations have as many inputs at each op as each other: the drawn op shows
    one iteration's inputs for all.
    """
    if sigs.inner[k] != sigs.inner[k - 1] or sigs.broken[k - 1]:
        return False
    if k - 1 > first:  # and as many inputs at each op: one more would come from outside the block
        return (sigs.cross[k - 1] == sigs.cross[first] and sigs.leaves[k] == sigs.leaves[k - 1]
                and sigs.inputs[k * period:(k + 1) * period] == sigs.inputs[(k - 1) * period:k * period])
    head, rest = Counter(sigs.leaves[first]), Counter(sigs.leaves[k])
    if rest - head:
        return False  # the first iteration lacks a leaf the others read
    fed = Counter(code % period for code in sigs.cross[first])  # ops the state feeds, by offset
    extra: Counter[int] = Counter()
    for entry, n in (head - rest).items():
        if entry in rest:
            return False  # which of the like leaves stands for the state is unknown: keep it apart
        for offset in (entry[2] if entry[0] == 0 else (entry[1],)):
            extra[offset] += n
    return all(n <= fed[offset] and sigs.inputs[first * period + offset] <= sigs.inputs[k * period + offset]
               for offset, n in extra.items())


def _build(nodes: Sequence[Node], edges: Sequence[tuple[int, int]], seq: _Seq,
           runs: list[_Run], module_types: Mapping[str, str]) -> Rolled:
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
    if len(where) == len(seq.ops):  # every op rolls: the sequence's leaves, which only its loose edges touch
        owned = _roll_leaves(seq.leaves, seq.loose, where, runs, mapping)
    else:
        owned = _roll_leaves({n.id: n for n in nodes if n.id not in where and n.kind != "output"}, edges,
                             where, runs, mapping)
    iteration.update({nid: (b, k) for nid, (b, k) in owned.items()})
    absorbed = _absorb(seq, where, mapping)
    through = {b.id: iteration[p.id] for pairs in absorbed.values() for b, p in pairs}
    new_edges, loops = _rolled_edges(edges, mapping, iteration | through if through else iteration)
    ranges, several = _ranges(seq, owned, mapping)
    blocks = [_block(seq, run, b, owned, loops[b], module_types, ranges) for b, run in enumerate(runs)]
    for b, names in absorbed.items():
        blocks[b].note = _resize_note(names)
    labels = several | {rep: _range_label(*split) for rep, split in ranges.items()}
    renamed = _module_ranges(seq, runs, module_types)
    kept = _kept(nodes, mapping, labels, renamed, {nid for block in blocks for nid in block.nodes},
                 _batch_ranges(seq, runs) if seq.bridges or seq.batchless else {})
    types = dict(module_types)
    for old, new in renamed.items():
        if old in module_types:
            types[new] = module_types[old]
    return Rolled(kept, new_edges, blocks, mapping, iteration, types, through)


def _looped(seq: _Seq, runs: Sequence[_Run]) -> set[int]:
    """The ids of the bridges (the last ops of ``seq``) whose input an iteration of a run
    computes: those that resize a loop's state. The others slice a value made before
    the loop (an input projected for all steps at once) and belong in the steps that read them."""
    rest = len(seq.ops) - seq.bridges
    found: set[int] = set()
    for run in runs:
        for i in range(run.start, run.stop):
            found.update(seq.ops[j].id for j in seq.out[i] if j >= rest)
    return found


def _absorb(seq: _Seq, where: Mapping[int, tuple[int, int, int]],
            mapping: dict[int, int]) -> dict[int, list[tuple[Node, Node]]]:
    """Draw each bridge on the loop edge it lies on: per block, the bridges it absorbs
    (with the op each reads).

    A bridge (:func:`_bridges`) whose producer is in iteration k of a block and whose
    consumers are all in iteration k + 1 maps onto its producer's representative (in
    ``mapping``, updated in place; it belongs to no iteration), and its edges to k + 1
    become the block's loop edges.
    Other bridges (a finished sequence's last state, sliced off for the output) stay nodes.
    """
    absorbed: dict[int, list[tuple[Node, Node]]] = defaultdict(list)
    if not seq.bridges:
        return absorbed
    rest = len(seq.ops) - seq.bridges
    producer: dict[int, list[int]] = defaultdict(list)
    for i in range(rest):
        for j in seq.out[i]:
            if j >= rest:
                producer[j].append(i)
    for j in range(rest, len(seq.ops)):
        ins, outs = producer.get(j, []), [o for o in seq.out[j] if o < rest]
        if len(ins) != 1 or not outs or len(outs) != len(seq.out[j]):
            continue
        src = where.get(seq.ops[ins[0]].id)
        dst = {where[seq.ops[o].id][:2] if seq.ops[o].id in where else None for o in outs}
        if src is not None and dst == {(src[0], src[1] + 1)}:
            bridge = seq.ops[j]
            mapping[bridge.id] = mapping[seq.ops[ins[0]].id]
            absorbed[src[0]].append((bridge, seq.ops[ins[0]]))
    return absorbed


def _resize_note(bridges: Sequence[tuple[Node, Node]]) -> str:
    """``"batch 1–3: SliceBackward0 ×2 on the loop edge"``: the sizes the state's first
    dimension takes, and the resizing ops drawn as the loop edge (``(bridge, its input)`` pairs)."""
    sizes = {n.shape[0] for pair in bridges for n in pair if n.shape}
    counts = Counter(b.name for b, _ in bridges)
    ops = ", ".join(f"{name} \u00d7{n}" if n > 1 else name for name, n in counts.items())
    return f"batch {min(sizes)}\u2013{max(sizes)}: {ops} on the loop edge"


def _batch_ranges(seq: _Seq, runs: Sequence[_Run]) -> dict[int, tuple]:
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


def _module_ranges(seq: _Seq, runs: list[_Run], module_types: Mapping[str, str]) -> dict[str, str]:
    """Module name -> the name it has inside its block: ``"h.0.attn"`` -> ``"h.{0…11}.attn"``
    when the block's iterations run in modules whose names differ in one index
    (``h.0`` … ``h.11``); the representative's modules, and their parents up to the
    iteration's own module, are renamed."""
    renamed: dict[str, str] = {}
    for run in runs:
        heads = _heads(seq, run)
        if not all(heads) or len(set(heads)) != len(heads):
            continue  # not one module per iteration (a cell called at every step keeps its name)
        split = _split_index([h for h in heads if h])
        if split is None:
            continue
        head, name = heads[0] or "", _range_label(*split)
        names = {n.module for n in seq.ops[run.start:run.start + run.period] if n.module} | set(module_types)
        for m in sorted(names):  # (sorted: the same order on every run)
            if m == head or m.startswith(head + "."):
                renamed[m] = name + m[len(head):]
    return renamed


def _roll_leaves(leaves: Mapping[int, Node], edges: Sequence[tuple[int, int]],
                 where: Mapping[int, tuple[int, int, int]], runs: list[_Run],
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
        place = (_key(leaves[nid]), tuple(offsets))  # what it is, which offsets it touches
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


def _block(seq: _Seq, run: _Run, b: int, owned: Mapping[int, tuple[int, int]],
           loops: list[tuple[int, int]], module_types: Mapping[str, str],
           ranges: Mapping[int, _Range]) -> Block:
    """The :class:`Block` record of run ``b``."""
    rep = seq.ops[run.start:run.start + run.period]
    leaves = [nid for nid, (blk, k) in owned.items() if blk == b and k == 0]
    heads = _heads(seq, run)
    shared = _shared(seq, run)
    label = _label(rep, run.repeats, _iterations(seq, run), heads, module_types,
                   [ranges[r] for r in leaves if r in ranges], shared, _first_step(seq, run))
    return Block(label, run.repeats, [n.id for n in rep] + leaves, loops,
                 _common(heads) if all(heads) else None)


def _heads(seq: _Seq, run: _Run) -> list[str | None]:
    """The module every op of each iteration of ``run`` runs in (their common prefix), or
    ``None``; all ``None`` at once when no op of the run has a module (no tags: a
    300,000-step loop of small ops makes no 300,000 empty lookups)."""
    if seq.after[run.start] is None or not any(n.module for n in seq.ops[run.start:run.stop]):
        return [None] * run.repeats  # (no module or parameter at or after the run's start: no tag)
    return [_common(n.module for n in it) for it in _iterations(seq, run)]


def _iterations(seq: _Seq, run: _Run) -> Iterator[list[Node]]:
    """The ops of each iteration of ``run``, in order (sliced as read: a 300,000-step
    loop often reads only the first)."""
    return (seq.ops[start:start + run.period] for start in range(run.start, run.stop, run.period))


def _read_by_all(seq: _Seq, run: _Run) -> set[int]:
    """The leaves both the first and the last iteration of ``run`` read: what every
    iteration shares (the iterations' leaves match), as a recurrence's weights."""
    first, last = (set(itertools.chain.from_iterable(seq.feeds[i:i + run.period]))
                   for i in (run.start, run.stop - run.period))
    return first & last


def _first_step(seq: _Seq, run: _Run) -> int:
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


_LAYER = re.compile(r"_l(\d+)(_reverse)?$")  # nn.RNN/LSTM/GRU weight names: weight_ih_l1_reverse


def _layer(names: Sequence[str]) -> str | None:
    """``"layer 1"`` (``"layer 1, reverse"``) when every one of ``names`` is a recurrent
    layer's weight of that layer and direction, else ``None``."""
    found = {m.groups() if (m := _LAYER.search(name)) else None for name in names}
    (one,) = found if len(found) == 1 else (None,)
    if one is None:
        return None
    index, reverse = one
    return f"layer {index}" + (", reverse" if reverse else "")


def _shared(seq: _Seq, run: _Run) -> list[str]:
    """Names of the parameters every iteration of ``run`` shares (:func:`_read_by_all`)."""
    return sorted(seq.leaves[x].label for x in _read_by_all(seq, run) if seq.leaves[x].kind == "parameter")


def _label(rep: Sequence[Node], repeats: int, iters: Iterable[Sequence[Node]], heads: Sequence[str | None],
           module_types: Mapping[str, str], ranges: Sequence[_Range], shared: Sequence[str],
           first_step: int = 1) -> str:
    """What a block is called: which layers or steps it stands for, and their classes.

    ``"layers.0–5: TransformerEncoderLayer"`` (N sibling modules, found by module tags
    or, without tags, by the one index that differs in the names of the iterations'
    parameters), ``"0–1999: Linear, Tanh"`` (each iteration spans several siblings),
    ``"cell: LSTMCell, step 1–500"`` (one module, or weights every step shares, used
    at each step; ``"rnn: GRU layer 1, step 6–8"`` for a recurrent layer's weights,
    its steps counted from ``first_step``), else the first and last op: ``"step 1–50:
    TBackward0 … MulBackward0"`` with shared weights, ``"TBackward0 … TanhBackward0"`` without.
    """
    span = _tagged_span(iters, heads, module_types) or _param_span(ranges, module_types)
    if span is not None:
        return span
    ops = rep[0].name if len(rep) == 1 else f"{rep[0].name} \u2026 {rep[-1].name}"
    owners = [owner(name) for name in shared]
    one = heads[0] if heads[0] is not None and len(set(heads)) == 1 else None
    home = one or (_common(owners) if owners and None not in owners else None)
    steps = (tr("step {first}\u2013{last}", first=f"{first_step:,}", last=f"{first_step + repeats - 1:,}")
             if shared else None)
    layer = _layer(shared) if shared else None
    if layer is not None:
        steps = f"{layer}, {steps}"
    if home is None:
        return f"{steps}: {ops}" if steps else ops
    kind = module_types.get(home)
    where = f"{home}: {kind}" if kind else home
    return f"{where}, {steps}" if steps else where


def _tagged_span(iters: Iterable[Sequence[Node]], heads: Sequence[str | None],
                 module_types: Mapping[str, str]) -> str | None:
    """By module tags: ``"layers.0–5: Foo"`` for iterations in sibling modules, ``"0–1999:
    Linear, Tanh"`` for iterations each spanning several; ``None`` for one module or no tags."""
    named = [h for h in heads if h]
    if len(named) == len(heads):
        if len(set(named)) == 1:  # one module called each time: not a span
            return None
        split = _split_index(named)  # encoder.block.0.layer ... encoder.block.1.layer: cut at the index
        if split is not None:
            before, _, indices = split
            cut = [f"{before}{i}" for i in indices]
            return _named_span(cut[0], cut[-1], map(module_types.get, cut))
        return _named_span(named[0], named[-1], map(module_types.get, named))
    tagged = []
    for ops in iters:  # (stops at the first iteration with no tag: a long loop of untagged ops)
        modules = [n.module for n in ops if n.module]
        if not modules:
            return None
        tagged.append(modules)
    kinds = [", ".join(dict.fromkeys(module_types[m] for m in t if m in module_types)) for t in tagged]
    return _named_span(tagged[0][0], tagged[-1][-1], kinds)


def _param_span(ranges: Sequence[_Range], module_types: Mapping[str, str]) -> str | None:
    """By parameter names: ``"transformer.h.0–11: GPT2Block"`` when the parameters each
    iteration owns differ in one index, the same for all of them; else ``None``."""
    if not ranges or len({(before, tuple(indices)) for before, _, indices in ranges}) != 1:
        return None
    before, _, indices = ranges[0]
    span = _span(indices, "\u2013")
    kinds = _counted(module_types.get(f"{before}{i}") for i in indices)
    where = f"{before}{span}"
    return f"{where}: {kinds}" if kinds else where


def _named_span(first: str, last: str, kinds: Iterable[str | None]) -> str:
    """``"first–last: kinds"``, the dotted parts the two names share written once (``layers.0–5``)."""
    a, b = first.split("."), last.split(".")
    if first == last:
        span = first
    else:
        span = f"{first}\u2013{b[-1] if a[:-1] == b[:-1] else last}"
    text = _counted(kinds)
    return f"{span}: {text}" if text else span


def _counted(kinds: Iterable[str | None]) -> str | None:
    """``"Foo"`` when every iteration is of one class, ``"Foo ×2, Bar ×10"`` when they differ."""
    counts = Counter(kind for kind in kinds if kind)
    if len(counts) <= 1:
        return next(iter(counts), None)
    return ", ".join(f"({kind}) \u00d7{n}" if ", " in kind else f"{kind} \u00d7{n}"
                     for kind, n in counts.items())


# A name split at the index where the iterations' names differ: (before it, after it, the indices).
_Range = tuple[str, str, list[int]]


def _ranges(seq: _Seq, owned: Mapping[int, tuple[int, int]],
            mapping: Mapping[int, int]) -> tuple[dict[int, _Range], dict[int, str]]:
    """Rolled parameter id -> its iterations' names, split at the one index where they
    differ; and the label of each other rolled parameter that stands for several names
    (:func:`_several`)."""
    names: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for nid, (_, k) in owned.items():
        if seq.leaves[nid].kind == "parameter":
            names[mapping[nid]].append((k, seq.leaves[nid].label))
    out, several = {}, {}
    for rep, pairs in names.items():
        ordered = [name for _, name in sorted(pairs)]
        split = _split_index(ordered)
        if split is not None:
            out[rep] = split
        elif len(set(ordered)) > 1:
            several[rep] = _several(list(dict.fromkeys(ordered)))
    return out, several


def _several(names: Sequence[str]) -> str:
    """One label for the different parameters one rolled node stands for, when they do
    not differ in one index: ``"blk.{0…1}.{0…2}.w"`` when they differ in several
    indices and hold every combination of them (a nested loop), else
    ``"a.w1 … b.w9 (5 parameters)"``, the first and the last name in iteration order."""
    parts = [name.split(".") for name in names]
    if len({len(p) for p in parts}) == 1:
        differ = [i for i in range(len(parts[0])) if len({p[i] for p in parts}) > 1]
        if all(p[i].isdigit() for p in parts for i in differ):
            values = [sorted({int(p[i]) for p in parts}) for i in differ]
            if math.prod(len(v) for v in values) == len(names):  # every combination, once
                spans = {i: "{" + _span(v, "\u2026") + "}" for i, v in zip(differ, values)}
                return ".".join(spans.get(i, part) for i, part in enumerate(parts[0]))
    if len(names) == 2:
        return f"{names[0]}, {names[1]}"
    return f"{names[0]} \u2026 {names[-1]} ({len(names)} parameters)"


_NUMBERED = re.compile(r"(?P<pre>\D*?)(?P<num>\d+)(?P<post>\D*)")  # a name part: encoder_layer_11, layer1, 3


def _split_index(names: Sequence[str]) -> _Range | None:
    """Names that differ in one dotted part, by a number in it, cut around that number:
    ``(before, after, indices)``, ``before`` and ``after`` with their separators; ``None``
    for any other names.

    Example:
        >>> _split_index(["h.0.ln_1.weight", "h.1.ln_1.weight"])
        ('h.', '.ln_1.weight', [0, 1])
        >>> _split_index(["encoder.layers.encoder_layer_0.mlp", "encoder.layers.encoder_layer_11.mlp"])
        ('encoder.layers.encoder_layer_', '.mlp', [0, 11])
        >>> _split_index(["a.0.w", "b.1.w"]) is None  # two parts differ
        True
    """
    parts = [name.split(".") for name in names]
    if len({len(p) for p in parts}) != 1:
        return None
    differ = [i for i in range(len(parts[0])) if len({p[i] for p in parts}) > 1]
    if len(differ) != 1:
        return None
    i = differ[0]
    found = [m for p in parts if (m := _NUMBERED.fullmatch(p[i]))]
    if len(found) != len(parts) or len({(m["pre"], m["post"]) for m in found}) != 1:
        return None
    before = "".join(f"{part}." for part in parts[0][:i]) + found[0]["pre"]
    after = found[0]["post"] + "".join(f".{part}" for part in parts[0][i + 1:])
    return before, after, [int(m["num"]) for m in found]


def _range_label(before: str, after: str, indices: list[int]) -> str:
    """``"h.{0…11}.ln_1.weight"``: one name standing for every iteration's.

    Example:
        >>> _range_label("encoder.layers.encoder_layer_", ".mlp.weight", [0, 1, 2])
        'encoder.layers.encoder_layer_{0…2}.mlp.weight'
    """
    return before + "{" + _span(indices, "\u2026") + "}" + after


def _span(indices: Sequence[int], dash: str) -> str:
    """``"0–11"`` for consecutive indices (``dash`` between), else ``"0,2,…,22"``."""
    if all(b - a == 1 for a, b in itertools.pairwise(indices)):
        return f"{indices[0]}{dash}{indices[-1]}"
    if len(indices) <= 3:
        return ",".join(map(str, indices))
    return f"{indices[0]},{indices[1]},\u2026,{indices[-1]}"


def _common(modules: Iterable[str | None]) -> str | None:
    """The longest dotted prefix of the tagged module names, ``None`` if none or empty."""
    prefix: list[str] | None = None
    for name in modules:
        if name is None:
            continue
        parts = name.split(".")
        if prefix is None:
            prefix = parts
            continue
        n = 0
        while n < min(len(prefix), len(parts)) and prefix[n] == parts[n]:
            n += 1
        prefix = prefix[:n]
    return ".".join(prefix) if prefix else None


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
