"""Roll repeated regions of a graph (loop steps, identical layers) into one iteration drawn ×N.

Ops are ordered by autograd's creation counter; a region is a run of consecutive
iterations with equal labels (name, shape, dtype) whose edges repeat: the same edges
inside every iteration, and edges to the next iteration (the loop state) only from k to
k + 1, at the same places each time. Iteration 0 stands for all: the others map onto
it, their edges to and from the rest of the graph become edges of iteration 0, and the
state passed from k to k + 1 becomes a loop edge. Iterations must read matching leaves
too: the same leaf at the same ops (a weight every step shares: it stays one node), or
each its own leaf of one kind, shape and dtype (per-layer parameters: they roll with
their iteration, and a name like ``h.{0…11}.attn.weight`` stands for theirs). Only the
first iteration may read more, where the others read the loop state. Outputs never roll.

Four rooms: :mod:`.sequence` (the ops in creation order, and the pre-passes that move
shared values ahead or find the ops that resize a state), :mod:`.runs` (finding runs
of iterations and verifying them, one signature per iteration), :mod:`.build` (the
rolled graph) and :mod:`.names` (what blocks and rolled parameters are called).
:func:`roll` chooses among the sequences those pre-passes offer by one score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from .._records import Node
from . import names, runs, sequence
from .build import Block, Rolled, build_rolled
from .runs import Run, find_runs, looped_bridges, looping, read_across
from .sequence import Seq, find_bridges, find_hoisted, read_sequence, unequal_batches

__all__ = ["Block", "Rolled", "roll"]

# What the tests import by the names these had when _roll was one module.
TWICE_MIN = runs.TWICE_MIN
_inherited, _layer, _several = sequence.inherited_modules, names.layer_label, names.parameter_set_label
_split_index, _range_label = names.split_index, names.range_label


def roll(
    nodes: Sequence[Node],
    edges: Sequence[tuple[int, int]],
    *,
    min_repeats: int = 2,
    module_types: Mapping[str, str] | None = None,
) -> Rolled:
    """Keep each repeated region of the graph once, as a block drawn ×N (see the module's
    docstring for what repeats).

    The ops are read in creation order, then in the orders the pre-passes offer (shared
    values moved ahead, resizing ops moved behind, shapes compared without the batch);
    each offer is a candidate, and the one whose runs score best (:func:`_score`) rolls.

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
    offer = _Offer(nodes, edges, min_repeats)
    best = offer()
    for alternatives in (_hoisted, _bridged, _batchless):  # each pre-pass reorders the best so far
        best = max([best, *alternatives(offer, best)], key=_score)  # (a tie keeps the earlier)
    if not best.runs:
        return Rolled(list(nodes), list(edges), [], {n.id: n.id for n in nodes}, {}, dict(module_types or {}))
    return build_rolled(nodes, edges, best.seq, best.runs, module_types or {})


class _Candidate(NamedTuple):
    """One order of the ops, and the runs found in it."""

    seq: Seq
    runs: list[Run]
    ahead: Sequence[int]  # ids of the ops moved ahead of all others (see find_hoisted)


class _Offer(NamedTuple):
    """Makes candidates of one graph: the ops in some order, and their runs."""

    nodes: Sequence[Node]
    edges: Sequence[tuple[int, int]]
    min_repeats: int

    def __call__(self, ahead: Sequence[int] = (), last: Sequence[int] = (),
                 batchless: bool = False) -> _Candidate:
        seq = read_sequence(self.nodes, self.edges, first=ahead, last=last, batchless=batchless)
        return _Candidate(seq, find_runs(seq, self.min_repeats), ahead)


def _score(candidate: _Candidate) -> tuple[int, int]:
    """Which candidate rolls better: more ops covered, then fewer blocks."""
    return sum(r.covered for r in candidate.runs), -len(candidate.runs)


def _hoisted(offer: _Offer, best: _Candidate) -> list[_Candidate]:
    """The ops in creation order but the shared values computed inside the first iteration
    (:func:`find_hoisted`) ahead of all, when every such value is then read across
    iterations of one run; a value each iteration makes and reads itself stays where it is."""
    groups = find_hoisted(best.seq)
    for _ in range(2):  # (the values read across, once more without the others)
        if not groups:
            return []
        other = offer(ahead=sorted(set().union(*(ids for ids, _ in groups))))
        pos = {n.id: i for i, n in enumerate(other.seq.ops)}
        kept = [(ids, by) for ids, by in groups if read_across(pos, other.runs, by)]
        if len(kept) == len(groups):
            return [other]
        groups = kept
    return []


def _bridged(offer: _Offer, best: _Candidate) -> list[_Candidate]:
    """A recurrence whose batch shrinks or grows, its steps as one loop: the ops that resize
    its state (:func:`find_bridges`) behind all others; the slices of an input made before
    the loop go back into their steps."""
    bridges = find_bridges(best.seq)
    if not bridges:
        return []
    other = offer(ahead=best.ahead, last=bridges)
    looped = looped_bridges(other.seq, other.runs)
    if looped != set(bridges):
        other = offer(ahead=best.ahead, last=[b for b in bridges if b in looped])
    return [other]


def _batchless(offer: _Offer, best: _Candidate) -> list[_Candidate]:
    """A loop over batches of unequal size (each expert of a mixture on its tokens): the ops
    compared without their first dimension, when every run it finds is a loop or of one
    size (:func:`looping`)."""
    if best.seq.bridges or not unequal_batches(best.seq):
        return []
    other = offer(ahead=best.ahead, batchless=True)
    return [other] if all(looping(other.seq, run) for run in other.runs) else []
