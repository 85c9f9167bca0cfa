"""Finding runs of repeated iterations in an op sequence, and verifying them.

A run is found by its keys (periods, tandem repeats, the phase where iteration 0
starts), then verified by each iteration's signature: its edges, the leaves it reads
and how many inputs each op has, computed once per iteration.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import operator
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .sequence import Seq

_LAGS = 4  # gaps to the next 1..4 occurrences of a label propose periods

_PERIODS = 10  # candidate periods tried per segment, most frequent gap first

_TRIES = 24  # candidate runs verified per segment, most nodes covered first

_LOOSE_MIN = 8  # fewest ops a loop-free run (parallel copies, no state) must cover

# A region seen only twice rolls when an iteration holds at least this many ops: two
# Transformer layers (GPT-2: 68 ops each, T5: 50-75, Llama: 95) or two ResNet blocks draw
# as one, while two short runs of a few ops (a small example written out twice) stay
# apart, where a learner sees every op. Measured on the zoo: benchmarks/README.md.
TWICE_MIN = 12


@dataclass(frozen=True)
class Run:
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


def find_runs(seq: Seq, min_repeats: int) -> list[Run]:
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


def _best_run(seq: Seq, lo: int, hi: int, min_repeats: int) -> Run | None:
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
        run = _verified(seq, Run(phase, period, (start + length - phase) // period), min_repeats)
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


def _phase(seq: Seq, start: int, length: int, period: int) -> int:
    """Where iteration 0 starts in a stretch longer than its whole iterations.

    Among the starts that keep every iteration, prefer a boundary between modules
    (fewest shared dotted parts), then the fewest ops and edges carrying state
    across the boundary, then a first op fed by no other op, then the earliest.
    Where that start cuts a module of one iteration in two (a pre-norm layer after a
    first layer that differs: iteration k would end with layer k + 1's norm, and the
    last one hold the final norm), the best start of the period that cuts none, one
    iteration fewer.
    """
    spare = length % period
    edges_cut, sources_cut = _cuts(seq, start, length, period)

    def rank(s: int) -> tuple[int, ...]:
        return _shared_depth(seq, s + period), sources_cut[s - start], edges_cut[s - start], seq.indeg[s], s

    best = min(range(start, start + spare + 1), key=rank)
    if not _splits_module(seq, best, period, (start + length - best) // period):
        return best
    whole = [s for s in range(start + spare + 1, start + period)
             if not _splits_module(seq, s, period, (start + length - s) // period)]
    return min(whole, key=rank, default=best)


def _splits_module(seq: Seq, start: int, period: int, repeats: int) -> bool:
    """Whether the boundary after the first iteration from ``start`` falls inside a module
    that is not around every op of the iterations on either side (one layer's, not the
    list of layers). An op's module is its own (``Seq.tags``: its tag, or the module of
    the parameters it reads), not one taken from its consumers, which can be another's
    (a residual add before a final norm, a Tanh before the next Linear)."""
    at = start + period
    tags = seq.tags
    left = next((m for m in reversed(tags[start:at]) if m), None)
    right = next((m for m in tags[at:at + period] if m), None)
    if left is None or right is None or repeats < 2:
        return False
    parts = list(itertools.takewhile(lambda ab: ab[0] == ab[1], zip(left.split("."), right.split("."))))
    if not parts:
        return False
    inside = ".".join(a for a, _ in parts)
    return any(m and m != inside and not m.startswith(inside + ".")
               for m in tags[start:start + 2 * period])  # (the two iterations on either side)


def _cuts(seq: Seq, start: int, length: int, period: int) -> tuple[list[int], list[int]]:
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


def _shared_depth(seq: Seq, i: int) -> int:
    """Dotted parts shared by the modules on either side of a boundary before op ``i``."""
    left, right = seq.module_before[i], seq.module_after[i]
    if left is None or right is None:
        return 0
    shared = 0
    for a, b in zip(left.split("."), right.split(".")):
        if a != b:
            break
        shared += 1
    return shared


def _verified(seq: Seq, run: Run, min_repeats: int) -> Run | None:
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
    found = Run(run.start + first * run.period, run.period, repeats)
    if not sigs.cross[first] and (found.covered < _LOOSE_MIN or not same_consumers(seq, found)):
        return None
    return found


def same_consumers(seq: Seq, run: Run) -> bool:
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


def _edge_signatures(seq: Seq, run: Run) -> tuple[list[tuple], list[tuple], list[bool]]:
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


def _leaf_signatures(seq: Seq, run: Run) -> list[tuple]:
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
    each: list[tuple] = dataclasses.field(init=False)  # per iteration: all of the above at once

    def __post_init__(self) -> None:
        period = len(self.inputs) // len(self.inner)
        per_op = zip(*[iter(self.inputs)] * period)  # iteration k's numbers of inputs (in C)
        got = self.cross[:1] + self.cross[:-1]  # the state each gets (iteration 0: as 1 does)
        self.each = list(zip(self.inner, self.leaves, per_op, got))


def _longest_group(sigs: _Signatures, period: int) -> tuple[int, int]:
    """``(first, count)`` of the longest stretch of iterations with equal signatures.

    A group of two or more runs up to the next of :func:`_changes`; a group of one
    takes in the next iteration by the first iteration's looser rule (:func:`_second_joins`).
    """
    n = len(sigs.inner)
    changes = _changes(sigs)
    best_first, best_len, first, k = 0, 1, 0, 1
    while k < n:
        if k - 1 > first:  # a group of two or more: it takes in every iteration up to the next change
            k = changes[at] if (at := bisect.bisect_left(changes, k)) < len(changes) else n
            if k - first > best_len:
                best_first, best_len = first, k - first
            if k == n:
                break
            first = k - 1 if _second_joins(sigs, k - 1, period) else k
        elif not _second_joins(sigs, first, period):
            first = k
        if k - first + 1 > best_len:
            best_first, best_len = first, k - first + 1
        k += 1
    return best_first, best_len


def _changes(sigs: _Signatures) -> list[int]:
    """The iterations ``k`` that do not extend a group of two or more before them: the rule,
    written once. ``k`` joins when its signature equals ``k - 1``'s (the same edges inside,
    leaves and numbers of inputs at each op, and the loop state it gets from ``k - 1`` the
    same as ``k - 1`` got from ``k - 2``) and no edge of ``k - 1`` skips past it. Sorted."""
    each = sigs.each
    if each[1:] == each[:-1] and not any(sigs.broken):  # (in C: a long loop's every step alike)
        return []
    return list(itertools.compress(range(1, len(each)),
                                   map(operator.or_, map(operator.ne, each[1:], each), sigs.broken)))


def _second_joins(sigs: _Signatures, first: int, period: int) -> bool:
    """Whether iteration ``first + 1`` joins iteration ``first`` (a group of one).

    The first iteration may read more leaves than the others, but only at ops that later
    iterations feed with the loop state, and with no more inputs there in all: leaves
    that stand in for the state (an initial state that needs grad). Its loop state is
    not compared: it is the group's first.
    """
    k = first + 1
    if sigs.inner[k] != sigs.inner[first] or sigs.broken[first]:
        return False
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


def looping(seq: Seq, run: Run) -> bool:
    """Whether ``run`` is a loop (an iteration feeds the next), or its iterations have one
    size: calls on batches of unequal size roll only when a state joins them (an
    expert loop adding into one result), not as independent calls that happen to match."""
    sizes = {shape[0] for i in range(run.start, run.stop) if (shape := seq.ops[i].shape)}
    if len(sizes) <= 1:
        return True
    return any((j - run.start) // run.period == (i - run.start) // run.period + 1
               for i in range(run.start, run.stop - run.period) for j in seq.out[i] if j < run.stop)


def read_across(pos: Mapping[int, int], runs: Sequence[Run], readers: Sequence[int]) -> bool:
    """Whether the ops ``readers`` (at op positions ``pos``) lie in two or more iterations of
    one run: the value they read is shared across iterations (not one each iteration makes
    and reads twice)."""
    spots = {(r, (pos[nid] - run.start) // run.period) for nid in readers for r, run in enumerate(runs)
             if run.start <= pos[nid] < run.stop}
    return len({r for r, _ in spots}) == 1 and len(spots) >= 2


def looped_bridges(seq: Seq, runs: Sequence[Run]) -> set[int]:
    """The ids of the bridges (the last ops of ``seq``) whose input an iteration of a run
    computes: those that resize a loop's state. The others slice a value made before
    the loop (an input projected for all steps at once) and belong in the steps that read them."""
    rest = len(seq.ops) - seq.bridges
    found: set[int] = set()
    for run in runs:
        for i in range(run.start, run.stop):
            found.update(seq.ops[j].id for j in seq.out[i] if j >= rest)
    return found
