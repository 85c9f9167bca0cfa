"""A module overview for big pictures: modules drawn as boxes, their ops a click away.

Where a graph's op-level picture (rolled and merged as the size policy draws it) is
over :data:`MAX_SCREENS` screens at 1:1 and its nodes carry module tags (a
``dg.live(model)`` recording, ``dg.track_modules``), the default picture draws each
module as one box (:func:`groups` picks which), with the edges between them taken
from the op graph. The view keeps the op-level picture in its data, and its script
opens a box's ops on a click (``assets/overview.js``). Without tags the op-level picture
stays, and so it does where every node is asked for (``roll=False``, ``max_nodes=None``,
``to_dot(full=True)``) or ``overview=False`` (``overview=True``: boxes at any size). A
module called more than once is one box per call (:func:`calls`), and a module that ran
no op here (a tied embedding) is no box: its parameters are drawn as they are.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from itertools import takewhile

from ._records import Node, owner

__all__ = ["BOXES", "MAX_SCREENS", "SCREEN", "SHARE", "SMALL", "boxes", "groups", "screens"]

# One screen: a notebook's output area in JupyterLab at 100 % on a 1366 x 768 laptop,
# in CSS pixels (as benchmarks/zoo.py measures pictures).
SCREEN = (1000, 700)
# An op-level picture over this many screens at 1:1 is drawn as a module overview.
MAX_SCREENS = 3.0
# Boxes an overview draws, at most (a module is opened into the modules it holds while
# the boxes stay this few).
BOXES = 16
# A picture of at most this many drawn nodes is never laid out to measure it (it is
# about three screens tall at most: one rank each, about 70 px).
SMALL = 30
# A box opens while it holds more than 1 / SHARE of the ops (a ResNet's stem, blocks and
# classifier; not each block's convolutions).
SHARE = 4


def screens(svg: str | bytes) -> float:
    """The screens a picture fills at 1:1 (its area over :data:`SCREEN`'s, each side at
    least one screen: a narrow tall picture scrolls one way only), from its SVG."""
    text = svg.decode() if isinstance(svg, bytes) else svg
    found = re.search(r'width="([\d.]+)pt" height="([\d.]+)pt"', text)
    if found is None:
        return 0.0
    width, height = (float(v) * 4 / 3 for v in found.groups())  # points to CSS pixels
    return max(width, SCREEN[0]) * max(height, SCREEN[1]) / (SCREEN[0] * SCREEN[1])


def _tagged(node: Node) -> bool:
    return node.module is not None and node.kind != "output"


def groups(nodes: Sequence[Node], most: int = BOXES) -> dict[int, str]:
    """``{node id: module path of its box}`` for every tagged node (outputs and nodes of no
    module are drawn as they are).

    It starts from the top-level modules and opens the box of the most ops into the
    modules it holds (its own ops stay in a box of its name) while the boxes stay at
    most ``most`` and the opened box holds more than a :data:`SHARE` of the ops: a ResNet
    shows its stem, each residual block and its classifier. A box is named by the
    outermost module that holds just its nodes (``encoder.block.0``, not its
    ``encoder.block.0.layer`` list). One box is an overview too (an ``nn.LSTM`` alone: its ops a click away).
    A box never holds leaves alone: the parameters of a module that ran no op here (T5's
    ``shared`` embedding, whose weight other modules use) are drawn as they are, with an
    edge into each box that uses them.
    """
    tagged = [n for n in nodes if _tagged(n)]
    if not tagged:
        return {}
    parts = {n.id: n.module.split(".") for n in tagged}  # type: ignore[union-attr]
    ops = {n.id: 1 if n.seq is not None else 0 for n in tagged}
    at = {n.id: 1 for n in tagged}  # how many parts of its path a node's box has
    total = max(1, sum(ops.values()))
    closed: set[str] = set()  # boxes that cannot open (no module inside, or too many boxes)

    def box(i: int) -> str:
        return ".".join(parts[i][:at[i]])

    while True:
        members: dict[str, list[int]] = {}
        for i in parts:
            members.setdefault(box(i), []).append(i)
        size = {b: sum(ops[i] for i in ids) for b, ids in members.items()}
        opened = next((b for b in sorted(members, key=lambda b: -size[b]) if b not in closed), None)
        if opened is None or size[opened] * SHARE <= total:
            break
        depth = opened.count(".") + 1
        inside = [i for i in members[opened] if len(parts[i]) > depth]
        below = {parts[i][depth] for i in inside}
        own = len(inside) < len(members[opened])
        if not inside or len(members) - 1 + len(below) + own > most:
            closed.add(opened)
            continue
        for i in inside:  # (a module with one module inside and no op of its own: that module next)
            at[i] = depth + 1
    found = {i: box(i) for i in parts}
    held: Counter[str] = Counter()
    for i, b in found.items():
        held[b] += ops[i]
    found = {i: b for i, b in found.items() if held[b]}  # (a box of leaves alone: see the docstring)
    named = {}
    for b in set(found.values()):  # the outermost module that holds just this box's nodes
        name = b
        while (up := owner(name)) is not None and all(
                found[i] == b for i in parts if ".".join(parts[i][:up.count(".") + 1]) == up):
            name = up
        named[b] = name
    return {i: named[b] for i, b in found.items()}


def boxes(nodes: list[Node], edges: list[tuple[int, int]], module_types: Mapping[str, str],
          most: int = BOXES) -> tuple[list[Node], list[tuple[int, int]], dict[int, int]]:
    """The overview's records: each box of :func:`groups` one ``module`` node (its label
    the module's path and class and how many ops it holds; its ``count`` the autograd
    nodes it stands for), the other nodes as they are, edges between them from the op
    graph. Returns ``(nodes, edges, mapping)``, ``mapping`` sending each boxed id to its
    box's id (ids not in it are unchanged)."""
    from ._transform import merge_modules

    where = groups(nodes, most)
    if not where:
        return nodes, edges, {}
    by_path: dict[str, list[Node]] = {}
    for n in nodes:
        if n.id in where:
            by_path.setdefault(where[n.id], []).append(n)
    boxed = ((path, members, f"{call}\n{_ops(members)}") for path, group in by_path.items()
             for members, call in calls(path, group))
    out, edges, mapping = merge_modules(nodes, edges, boxed, module_types)
    loose = {n.id for n in nodes if n.id not in mapping and _tagged(n)}  # a module's leaves alone
    return [replace(n, module=None) if n.id in loose else n for n in out], edges, mapping  # (in no frame)


def _ops(members: list[Node]) -> str:
    """``"1 op"``, ``"1,234 ops"``: the autograd op nodes ``members`` stand for."""
    count = sum(m.count for m in members if m.seq is not None)
    return "1 op" if count == 1 else f"{count:,} ops"


def calls(path: str, members: list[Node]) -> list[tuple[list[Node], str]]:
    """The box of module ``path`` holding ``members`` as one box per call of the module
    (a shared block applied twice: two boxes, in call order), each with the words its
    label adds (``", call 1 of 2"``; none for a module called once). A member made by no
    call (a parameter) goes with the first call.

    Where ``path`` itself was not called (a ``ModuleList``), the calls of the one module
    inside it that holds all its ops count.
    """
    made = [m for m in members if m.calls]
    common = min((len(m.calls or ()) for m in made), default=0)  # (the path parts all members share)
    depth = path.count(".")
    parts = [(m.module or "").split(".") for m in made]
    shared = takewhile(lambda d: len({p[d] for p in parts}) == 1, range(depth, common))
    at = next((d for d in shared if any((m.calls or ())[d] is not None for m in made)), None)
    if at is None:
        return [(members, "")]
    numbers = sorted({c for m in made if (c := (m.calls or ())[at]) is not None})
    if len(numbers) < 2:
        return [(members, "")]
    by_call: dict[int, list[Node]] = {c: [] for c in numbers}
    for m in members:
        c = (m.calls or ())[at] if m.calls else None
        by_call[numbers[0] if c is None else c].append(m)
    return [(by_call[c], f", call {k} of {len(numbers)}") for k, c in enumerate(numbers, 1)]


_CALL = re.compile(r", call (\d+) of (\d+)\n")  # what :func:`calls` adds to a box's label


def per_call(label: str) -> bool:
    """Whether a box's ``label`` says it stands for some of its module's calls (see
    :func:`calls`, :func:`rolled_calls`)."""
    return re.search(r", (?:calls? [\d\u2013]+|\d+ calls) of \d+\n", label) is not None


def rolled_calls(drawn: Sequence[Node], made: Sequence[Node], mapping: Mapping[int, int]) -> list[Node]:
    """``drawn`` with each box that stands for the boxes of several calls (``made``, the
    boxes before rolling; ``mapping``: their drawn ids), a loop that calls a module at
    every step rolled, labelled with those calls (``calls 2–60 of 60``), not the first's.
    """
    numbers: dict[int, set[int]] = {}
    for box in made:
        found = _CALL.search(box.label)
        if found is not None:
            numbers.setdefault(mapping[box.id], set()).add(int(found[1]))
    out = []
    for n in drawn:
        ks = sorted(numbers.get(n.id, ()))
        found = _CALL.search(n.label)
        if len(ks) > 1 and found is not None:
            what = f"calls {ks[0]}\u2013{ks[-1]}" if ks[-1] - ks[0] == len(ks) - 1 else f"{len(ks)} calls"
            n = replace(n, label=_CALL.sub(f", {what} of {found[2]}\n", n.label))
        out.append(n)
    return out


def op_counts(nodes: Sequence[Node]) -> Counter[str]:
    """Autograd op nodes per module path and every path around it (for tests and captions)."""
    out: Counter[str] = Counter()
    for n in nodes:
        if _tagged(n) and n.seq is not None:
            path = n.module
            while path:
                out[path] += n.count
                path = owner(path)
    return out
