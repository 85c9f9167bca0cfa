"""Roll repeated regions of a graph (loop steps, identical layers) into one iteration drawn ×N.

Four rooms: :mod:`.sequence` (the ops in creation order, and the pre-passes that move
shared values ahead or find the ops that resize a state), :mod:`.runs` (finding runs
of iterations and verifying them, one signature per iteration), :mod:`.build` (the
rolled graph) and :mod:`.names` (what blocks and rolled parameters are called).
:func:`roll` chooses among the sequences those pre-passes offer by one score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .._records import Node
from . import names, runs, sequence
from .build import Block, Rolled, build_rolled
from .runs import Run, find_runs, looped_bridges, looping, read_across
from .sequence import find_bridges, find_hoisted, read_sequence, unequal_batches

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
    seq = read_sequence(nodes, edges)
    runs = find_runs(seq, min_repeats)
    ahead: list[int] = []
    groups = find_hoisted(seq)
    for _ in range(2):  # shared values computed inside the first iteration: try them first
        if not groups:
            break
        first = sorted(set().union(*(ids for ids, _ in groups)))
        other = read_sequence(nodes, edges, first=first)
        other_runs = find_runs(other, min_repeats)
        pos = {n.id: i for i, n in enumerate(other.ops)}
        kept = [(ids, by) for ids, by in groups if read_across(pos, other_runs, by)]
        if len(kept) == len(groups):
            if sum(r.covered for r in other_runs) > sum(r.covered for r in runs):
                seq, runs, ahead = other, other_runs, first
            break
        groups = kept  # a value each iteration makes and reads itself: it stays where it is
    bridges = find_bridges(seq)
    if bridges:  # a recurrence whose batch shrinks or grows: try its steps as one loop
        other = read_sequence(nodes, edges, first=ahead, last=bridges)
        other_runs = find_runs(other, min_repeats)
        looped = looped_bridges(other, other_runs)
        if looped != set(bridges):  # slices of an input made before the loop: back in their steps
            other = read_sequence(nodes, edges, first=ahead, last=[b for b in bridges if b in looped])
            other_runs = find_runs(other, min_repeats)
        if _score(other_runs) > _score(runs):
            seq, runs = other, other_runs
    if not seq.bridges and unequal_batches(seq):  # a loop over batches of unequal size
        other = read_sequence(nodes, edges, first=ahead, batchless=True)
        other_runs = find_runs(other, min_repeats)
        if _score(other_runs) > _score(runs) and all(looping(other, run) for run in other_runs):
            seq, runs = other, other_runs
    if not runs:
        return Rolled(list(nodes), list(edges), [], {n.id: n.id for n in nodes}, {}, dict(module_types or {}))
    return build_rolled(nodes, edges, seq, runs, module_types or {})



def _score(runs: Sequence[Run]) -> tuple[int, int]:
    """Which runs roll better: more ops covered, then fewer blocks."""
    return sum(r.covered for r in runs), -len(runs)

