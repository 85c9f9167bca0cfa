"""Make big graphs drawable: collapse modules to one node, merge chains of shape ops, fold the middle away."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace

from ._dot import meta_line
from ._records import GraphRecord, Node, consumers_of, owner, producers_of


def remap(edges: list[tuple[int, int]], mapping: Mapping[int, int]) -> list[tuple[int, int]]:
    """Edges through ``mapping`` (old id -> new id), without repeats, and without the
    self-loops that merging makes (an edge between two merged nodes). A self-loop that
    was there before, on a node that stays, stays: a rolled one-op loop (``h = h * w``)
    is drawn by its loop edge from the op to itself."""
    out: list[tuple[int, int]] = []
    seen: set[tuple[int, int]] = set()
    for src, dst in edges:
        a, b = mapping.get(src, src), mapping.get(dst, dst)
        if (a != b or (src == dst and a == src)) and (a, b) not in seen:
            seen.add((a, b))
            out.append((a, b))
    return out


def collapse(nodes: list[Node], edges: list[tuple[int, int]], module_types: Mapping[str, str],
             depth: int) -> tuple[list[Node], list[tuple[int, int]], dict[int, int]]:
    """Merge every module at nesting ``depth`` (dotted-name parts) into one node.

    Returns ``(nodes, edges, mapping)``: ``mapping`` sends each merged id to its
    module's new node (ids not in it are unchanged).

    ``depth=1`` draws each top-level submodule (``encoder``, ``fc``) as one node;
    ``depth=2`` opens those one level (``encoder.layers``). Nodes of no module stay.
    ``depth`` is checked by the caller (:func:`dynagraph._picture.check_policy`).
    """
    groups: dict[str, list[Node]] = {}
    for node in nodes:
        if node.module is not None and node.kind != "output":
            parts = node.module.split(".")
            if len(parts) >= depth:
                groups.setdefault(".".join(parts[:depth]), []).append(node)
    said = ((path, members, f"\n{sum(m.seq is not None for m in members)} ops")
            for path, members in groups.items())
    return merge_modules(nodes, edges, said, module_types)


def merge_modules(nodes: list[Node], edges: list[tuple[int, int]],
                  groups: Iterable[tuple[str, list[Node], str]], module_types: Mapping[str, str],
                  ) -> tuple[list[Node], list[tuple[int, int]], dict[int, int]]:
    """Each ``(path, members, said)`` of ``groups`` drawn as one ``module`` node: labelled
    ``{path}: {its class}{said}``, with the shape of its last op's tensor and the
    autograd nodes it stands for as its ``count``, in the frame of the module around
    ``path``. Returns ``(nodes, edges, mapping)`` as :func:`collapse` does (the module
    nodes after the nodes that stay; the nodes unchanged where ``groups`` is empty).
    A module collapsed to a depth and a module overview's box are both made here."""
    next_id = max((n.id for n in nodes), default=-1) + 1
    mapping: dict[int, int] = {}
    merged: list[Node] = []
    for path, members, said in groups:
        ops = [m for m in members if m.seq is not None]
        last = max(ops, key=lambda m: m.seq or 0) if ops else members[-1]
        kind = module_types.get(path, "module")
        merged.append(Node(id=next_id, name=kind, kind="module", label=f"{path}: {kind}{said}",
                           shape=last.shape, dtype=last.dtype, device=last.device,
                           module=owner(path), seq=last.seq, count=sum(m.count for m in members),
                           ops=tuple(m.name for m in sorted(ops, key=lambda m: m.seq or 0))))
        for m in members:
            mapping[m.id] = next_id
        next_id += 1
    if not merged:
        return nodes, edges, {}
    kept = [n for n in nodes if n.id not in mapping]
    return kept + merged, remap(edges, mapping), mapping


def fold(nodes: list[Node], edges: list[tuple[int, int]],
         max_nodes: int | None) -> tuple[list[Node], list[tuple[int, int]], dict[int, int]]:
    """Keep the ``max_nodes`` nodes nearest the inputs and outputs; fold the rest.

    Returns ``(nodes, edges, mapping)``: ``mapping`` sends each hidden id to the fold
    node (ids not in it are unchanged).

    Ops are ordered by autograd's creation counter: the first half of the budget
    goes to the earliest ops, the second half to the latest; a leaf or output is
    hidden with the ops it feeds or comes from. Should leaves and outputs alone
    still overflow (3,000 roots), the middle ones are hidden too, so the result never
    has more than ``max_nodes`` nodes. The hidden middle becomes one node that says
    how many nodes of which kinds it stands for. ``max_nodes`` (``>= 2``) is checked
    by the caller (:func:`dynagraph._picture.check_policy`).
    """
    if max_nodes is None or len(nodes) <= max_nodes:
        return nodes, edges, {}
    ops = sorted((n for n in nodes if n.seq is not None), key=lambda n: n.seq or 0)
    consumers, producers = consumers_of(edges), producers_of(edges)
    budget = max_nodes - 1  # ops kept; leaves and outputs ride along, so shrink to fit
    while True:
        hidden = _hidden(nodes, ops, consumers, producers, budget)
        over = len(nodes) - len(hidden) + 1 - max_nodes
        if over <= 0 or budget <= 2:
            break
        budget = max(2, min(budget - 1, budget * max_nodes // (max_nodes + over)))
    if over > 0:  # leaves or outputs alone overflow: hide the middle ones too
        hidden |= _trim(nodes, hidden, over)
    if not hidden:
        return nodes, edges, {}
    fold_id = max(n.id for n in nodes) + 1
    folded = [n for n in nodes if n.id in hidden]
    names = Counter(n.name for n in folded)
    top = ", ".join(f"{name} \u00d7{k}" for name, k in names.most_common(3))
    label = (f"\u22ef {sum(n.count for n in folded):,} nodes folded \u22ef\n{top}\n"
             "draw(..., max_nodes=None) shows all")
    fold_node = Node(id=fold_id, name="fold", kind="fold", label=label, count=sum(n.count for n in folded))
    kept = [n for n in nodes if n.id not in hidden]
    mapping = {i: fold_id for i in hidden}
    return kept + [fold_node], remap(edges, mapping), mapping


def folded(graph: GraphRecord, max_nodes: int) -> tuple[GraphRecord, dict[int, int]]:
    """:func:`fold` on a graph's record: the record with its middle folded (the rolled
    blocks that lost a node left out, its memory by the new ids), and the mapping."""
    nodes, edges, mapping = fold(graph.nodes, graph.edges, max_nodes)
    blocks = [b for b in graph.blocks if not any(mapping.get(i, i) != i for i in b.nodes)]
    memory = None if graph.memory is None else graph.memory.remap(mapping)
    return replace(graph, nodes=nodes, edges=edges, blocks=blocks, memory=memory), mapping


def _hidden(nodes: list[Node], ops: Sequence[Node], consumers: dict[int, list[int]],
            producers: dict[int, list[int]], budget: int) -> set[int]:
    """Ids hidden when the first and last ``budget / 2`` ops are kept."""
    hidden = {n.id for n in ops[budget // 2: len(ops) - (budget - budget // 2)]}
    for n in nodes:  # a leaf whose every consumer is hidden is hidden too
        if n.seq is None and n.kind in ("parameter", "input") and hidden.issuperset(consumers.get(n.id, ())):
            hidden.add(n.id)
    for n in nodes:  # and an output whose every producer is hidden
        if n.kind == "output" and n.id in producers and hidden.issuperset(producers[n.id]):
            hidden.add(n.id)
    return hidden


def _trim(nodes: list[Node], hidden: set[int], excess: int) -> set[int]:
    """``excess`` more ids to hide: the middle of the kept leaves and outputs, then of the rest."""
    kept = [n for n in nodes if n.id not in hidden]
    extra = _middle([n.id for n in kept if n.seq is None], excess)
    return set(extra + _middle([n.id for n in kept if n.seq is not None], excess - len(extra)))


def _middle(ids: list[int], k: int) -> list[int]:
    """``k`` ids from the middle of ``ids`` (all of them if there are fewer)."""
    start = max(0, (len(ids) - k) // 2)
    return ids[start:start + k] if k > 0 else []


# Ops that only change how a tensor's values are laid out (shape, strides, a copy):
# chains of them fill a Transformer's attention (view, transpose, expand, clone,
# unsafe view) between the ops that compute something.
SHAPE_OPS = frozenset({
    "AliasBackward0", "CloneBackward0", "ExpandBackward0", "PermuteBackward0", "ReshapeAliasBackward0",
    "SqueezeBackward0", "SqueezeBackward1", "SqueezeBackward2", "TBackward0", "TransposeBackward0",
    "TransposeBackward1", "UnsafeViewBackward0", "UnsqueezeBackward0", "ViewBackward0",
})
SHORT = "Backward0"  # dropped from the names in a merged node's label


def merge_chains(nodes: list[Node], edges: list[tuple[int, int]], frames: Mapping[int, object],
                 keep: Collection[int] = (), *, any_op: bool = False,
                 ) -> tuple[list[Node], list[tuple[int, int]], dict[int, int]]:
    """Draw each chain of two or more shape ops (:data:`SHAPE_OPS`) as one node.

    A chain is a path ``a -> b -> ...`` where each op feeds only the next and the next
    reads only it, all in one frame (``frames``: node id -> its block and module; a
    chain never crosses a frame's edge) and none in ``keep`` (a loop edge's ends). The
    merged node keeps the last op's id, name and shape; its label lists the ops in
    order (``View → Transpose → Expand``) and its ``count`` is theirs.

    ``any_op=True`` (for pictures still too tall, see :data:`dynagraph._picture.TALL`)
    merges chains of any built-in ops, at most :data:`LONGEST` to a node, where the
    next op may also read parameters and inputs (a Linear's ``View → Addmm → View``,
    an attention's ``Mul → Add → Softmax``); its label breaks into lines of about
    :data:`LINE` characters so that the node stays narrow. Custom Functions stay
    apart: they are the user's own ops.

    Returns ``(nodes, edges, mapping)``: ``mapping`` sends each merged id to the last
    op's id (ids not in it are unchanged).
    """
    by_id = {n.id: n for n in nodes}
    outs = consumers_of(edges)
    # any_op: a leaf input does not end a chain
    ins = producers_of(e for e in edges if not (any_op and by_id[e[0]].kind in _LEAVES))

    def mergeable(i: int) -> bool:
        n = by_id[i]
        return n.kind == "op" and (any_op or n.name in SHAPE_OPS) and i not in keep

    def joined(a: int) -> int | None:  # the op that a chain continues with after a, if any
        after = outs.get(a, [])
        if len(after) == 1 and mergeable(after[0]) and ins.get(after[0]) == [a] \
                and frames.get(after[0]) == frames.get(a):
            return after[0]
        return None

    longest = LONGEST if any_op else len(nodes)
    mapping: dict[int, int] = {}
    merged: dict[int, Node] = {}
    for n in nodes:
        if not mergeable(n.id) or n.id in mapping:
            continue
        before = ins.get(n.id, [])
        if len(before) == 1 and mergeable(before[0]) and joined(before[0]) == n.id:
            continue  # not the first op of its chain
        chain = [n.id]
        while (nxt := joined(chain[-1])) is not None:
            chain.append(nxt)
        for part in _parts(chain, longest):
            if len(part) < 2:
                continue
            merged[part[-1]] = _merged_node([by_id[i] for i in part], any_op)
            for i in part[:-1]:
                mapping[i] = part[-1]
    if any_op:  # a long chain of shape ops merged before, and not merged further: narrow it too
        merged.update({n.id: replace(n, label=_wrapped([n.label])) for n in nodes if n.id not in merged
                       and n.id not in mapping and n.kind == "op" and len(n.label) > 2 * LINE})
    if not mapping and not merged:
        return nodes, edges, {}
    kept = [merged.get(n.id, n) for n in nodes if n.id not in mapping]
    return kept, remap(edges, mapping), mapping


_LEAVES = ("parameter", "input")
LONGEST = 4  # any_op: ops drawn as one node, at most (a CNN's conv, norm and activation: 3)
LINE = 24  # any_op: characters per line of a merged node's label, about


def _merged_node(part: list[Node], any_op: bool) -> Node:
    """The node that draws the ops of ``part`` (a chain, in order) as one: the last op's,
    its label listing their names and its ``count`` theirs."""
    names = [n.label.removesuffix(SHORT) if any_op else n.name.removesuffix(SHORT) for n in part]
    label = _wrapped(names) if any_op else " \u2192 ".join(names)
    return replace(part[-1], label=label, count=sum(n.count for n in part))


def _parts(chain: list[int], longest: int) -> list[list[int]]:
    """``chain`` cut into the fewest parts of at most ``longest``, as even as can be (a
    chain of 5 is 3 + 2: a CNN's conv, norm, activation | conv, norm; not 4 + 1)."""
    count = -(-len(chain) // longest)
    size, extra = divmod(len(chain), count)
    parts, start = [], 0
    for k in range(count):
        end = start + size + (k < extra)
        parts.append(chain[start:end])
        start = end
    return parts


def _wrapped(labels: list[str]) -> str:
    """The op names in ``labels`` joined by arrows, a new line before a name that would
    pass :data:`LINE` (a label that already lists a chain, ``View → Transpose``, gives
    each of its names)."""
    names = [name for label in labels for name in label.replace(" \u2192\n", " \u2192 ").split(" \u2192 ")]
    lines = [names[0]]
    for name in names[1:]:
        if len(lines[-1]) + len(name) + 3 > LINE:
            lines[-1] += " \u2192"
            lines.append(name)
        else:
            lines[-1] += " \u2192 " + name
    return "\n".join(lines)


def group_leaves(nodes: list[Node], edges: list[tuple[int, int]], frames: Mapping[int, object],
                 ) -> tuple[list[Node], list[tuple[int, int]], dict[int, int]]:
    """Draw the leaves that only one op reads as one node listing them, one per line.

    For pictures still too tall (as ``merge_chains(any_op=True)``): a Linear's weight and
    bias, a conv's weight and its norm's weight and bias stand in one box above the op
    that reads them, not side by side in a row as wide as the picture. Leaves of one
    kind (parameters, or inputs) in one frame are grouped, two or more; a leaf that
    other ops read too stays apart. Each line is the leaf's label and what its own
    box showed under it (its shape, and its dtype and device where not float32 on the CPU).

    Returns ``(nodes, edges, mapping)``: ``mapping`` sends each grouped id to the
    first leaf's id (ids not in it are unchanged).
    """
    by_id = {n.id: n for n in nodes}
    readers = {src: set(dsts) for src, dsts in consumers_of(edges).items() if by_id[src].kind in _LEAVES}
    groups: dict[tuple[int, str, object], list[Node]] = {}
    for leaf, ops in readers.items():
        if len(ops) == 1:
            node = by_id[leaf]
            groups.setdefault((next(iter(ops)), node.kind, frames.get(leaf)), []).append(node)
    def boxed(members: list[Node]) -> Node:
        lines = [m.label + ("" if m.shape is None else f" {meta_line(m)}") for m in members]
        return replace(members[0], label="\n".join(lines), shape=None, count=sum(m.count for m in members))
    return _merge_groups(nodes, edges, groups.values(), boxed)


def _merge_groups(nodes: list[Node], edges: list[tuple[int, int]], groups: Iterable[list[Node]],
                  merged: Callable[[list[Node]], Node],
                  ) -> tuple[list[Node], list[tuple[int, int]], dict[int, int]]:
    """Each group of two or more nodes drawn as one, ``merged(members)``, with the first
    member's id: ``(nodes, edges, mapping)``, ``mapping`` sending the others to the first."""
    mapping: dict[int, int] = {}
    made: dict[int, Node] = {}
    for members in groups:
        if len(members) < 2:
            continue
        made[members[0].id] = merged(members)
        for m in members[1:]:
            mapping[m.id] = members[0].id
    if not mapping:
        return nodes, edges, {}
    kept = [made.get(n.id, n) for n in nodes if n.id not in mapping]
    return kept, remap(edges, mapping), mapping


def merge_parallel(nodes: list[Node], edges: list[tuple[int, int]], frames: Mapping[int, object],
                   keep: Collection[int] = ()) -> tuple[list[Node], list[tuple[int, int]], dict[int, int]]:
    """Draw ops of one name that read the same nodes and feed the same nodes as one node
    (``SliceBackward0 ×7``: the last state of each sequence of a packed batch, sliced off
    as it ends, each into the same ``cat``).

    For pictures still too tall (as ``merge_chains(any_op=True)``). Ops in one frame only,
    none in ``keep`` (a loop edge's ends); the shape is kept where they share it, else
    only the dimensions they share are written (``…`` for the others).

    Returns ``(nodes, edges, mapping)``: ``mapping`` sends each merged id to the first op's id.
    """
    ins, outs = producers_of(edges), consumers_of(edges)
    groups: dict[tuple, list[Node]] = {}
    for n in nodes:
        if n.kind == "op" and n.id in ins and n.id in outs and n.id not in keep:
            key = (n.name, frozenset(ins[n.id]), frozenset(outs[n.id]), frames.get(n.id))
            groups.setdefault(key, []).append(n)
    def one(members: list[Node]) -> Node:
        first, shapes = members[0], {m.shape for m in members}
        shape = first.shape if len(shapes) == 1 else _shared_dims(shapes)
        return replace(first, label=f"{first.label} \u00d7{len(members)}", shape=shape,
                       count=sum(m.count for m in members))
    return _merge_groups(nodes, edges, groups.values(), one)


def _shared_dims(shapes: set) -> tuple[int | str, ...] | None:
    """The dimensions several shapes share, ``"…"`` where they differ; ``None`` when they
    differ in length or one is unknown."""
    if None in shapes or len({len(s) for s in shapes}) != 1:
        return None
    return tuple(dims[0] if len(set(dims)) == 1 else "\u2026" for dims in zip(*shapes))


def lift_leaf_ops(nodes: list[Node], edges: list[tuple[int, int]], frames: Mapping[int, object],
                  ) -> tuple[list[Node], list[tuple[int, int]], dict[int, int]]:
    """Draw each shape op that reads only one leaf, which nothing else reads, in the
    leaf's node with the op's shape (``q.weight.T``: a Linear's transposed weight).

    For pictures still too tall (as ``merge_chains(any_op=True)``, which then sees the
    Linear's ``Mm`` read one op instead of two). Returns ``(nodes, edges, mapping)``:
    ``mapping`` sends each lifted op's id to its leaf's id.
    """
    by_id = {n.id: n for n in nodes}
    ins, outs = producers_of(edges), consumers_of(edges)
    mapping: dict[int, int] = {}
    lifted: dict[int, Node] = {}
    for n in nodes:
        before = ins.get(n.id, [])
        if n.kind != "op" or n.name not in SHAPE_OPS or len(before) != 1 or len(outs.get(n.id, [])) != 1:
            continue
        leaf = by_id[before[0]]
        if leaf.kind in _LEAVES and outs.get(leaf.id) == [n.id] and frames.get(leaf.id) == frames.get(n.id):
            then = ".T" if n.label == "TBackward0" else f" \u2192 {n.label.removesuffix(SHORT)}"
            lifted[leaf.id] = replace(leaf, label=leaf.label + then, shape=n.shape,
                                      count=leaf.count + n.count)
            mapping[n.id] = leaf.id
    if not mapping:
        return nodes, edges, {}
    kept = [lifted.get(n.id, n) for n in nodes if n.id not in mapping]
    return kept, remap(edges, mapping), mapping


def open_leaf_modules(nodes: list[Node]) -> list[Node]:
    """``nodes`` with each node of an innermost module (one that holds no other) moved to
    the module around it: a tall picture then draws no frame per Linear, Conv2d or norm,
    and a chain of ops may run through them (``Convolution → NativeBatchNorm → Relu``
    inside the block's frame). A top-level module stays where it is."""
    modules = {n.module for n in nodes if n.module}
    around = {m.rsplit(".", k)[0] for m in modules for k in range(1, m.count(".") + 1)}
    inner = {m for m in modules if m not in around and "." in m}  # holds no other, has a parent
    if not inner:
        return nodes  # (the same list: nothing to draw again)
    return [replace(n, module=owner(n.module)) if n.module in inner else n for n in nodes]
