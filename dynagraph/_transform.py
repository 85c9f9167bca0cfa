"""Make big graphs drawable: collapse modules to one node, merge chains of shape ops, fold the middle away."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace

from ._records import Node, owner


def _remap(edges: list[tuple[int, int]], mapping: Mapping[int, int]) -> list[tuple[int, int]]:
    """Edges through ``mapping`` (old id -> new id), without self-loops or repeats."""
    out: list[tuple[int, int]] = []
    seen: set[tuple[int, int]] = set()
    for src, dst in edges:
        a, b = mapping.get(src, src), mapping.get(dst, dst)
        if a != b and (a, b) not in seen:
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
    if not groups:
        return nodes, edges, {}
    next_id = max(n.id for n in nodes) + 1
    mapping: dict[int, int] = {}
    merged: list[Node] = []
    for path, members in groups.items():
        ops = [m for m in members if m.seq is not None]
        last = max(ops, key=lambda m: m.seq or 0) if ops else members[-1]
        kind = module_types.get(path, "module")
        node = Node(id=next_id, name=kind, kind="module", label=f"{path}: {kind}\n{len(ops)} ops",
                    shape=last.shape, dtype=last.dtype, device=last.device,
                    module=owner(path), seq=last.seq, count=sum(m.count for m in members))
        for m in members:
            mapping[m.id] = next_id
        merged.append(node)
        next_id += 1
    kept = [n for n in nodes if n.id not in mapping]
    return kept + merged, _remap(edges, mapping), mapping


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
    consumers: dict[int, set[int]] = {}
    producers: dict[int, set[int]] = {}
    for src, dst in edges:
        consumers.setdefault(src, set()).add(dst)
        producers.setdefault(dst, set()).add(src)
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
    return kept + [fold_node], _remap(edges, mapping), mapping


def _hidden(nodes: list[Node], ops: Sequence[Node], consumers: dict[int, set[int]],
            producers: dict[int, set[int]], budget: int) -> set[int]:
    """Ids hidden when the first and last ``budget / 2`` ops are kept."""
    hidden = {n.id for n in ops[budget // 2: len(ops) - (budget - budget // 2)]}
    for n in nodes:  # a leaf whose every consumer is hidden is hidden too
        if n.seq is None and n.kind in ("parameter", "input") and consumers.get(n.id, set()) <= hidden:
            hidden.add(n.id)
    for n in nodes:  # and an output whose every producer is hidden
        if n.kind == "output" and n.id in producers and producers[n.id] <= hidden:
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
                 keep: Collection[int] = ()) -> tuple[list[Node], list[tuple[int, int]], dict[int, int]]:
    """Draw each chain of two or more shape ops (:data:`SHAPE_OPS`) as one node.

    A chain is a path ``a -> b -> ...`` where each op feeds only the next and the next
    reads only it, all in one frame (``frames``: node id -> its block and module; a
    chain never crosses a frame's edge) and none in ``keep`` (a loop edge's ends). The
    merged node keeps the last op's id, name and shape; its label lists the ops in
    order (``View → Transpose → Expand``) and its ``count`` is theirs.

    Returns ``(nodes, edges, mapping)``: ``mapping`` sends each merged id to the last
    op's id (ids not in it are unchanged).
    """
    by_id = {n.id: n for n in nodes}
    outs: dict[int, list[int]] = {}
    ins: dict[int, list[int]] = {}
    for src, dst in edges:
        outs.setdefault(src, []).append(dst)
        ins.setdefault(dst, []).append(src)

    def shape_op(i: int) -> bool:
        n = by_id[i]
        return n.kind == "op" and n.name in SHAPE_OPS and i not in keep

    def joined(a: int) -> int | None:  # the op that a chain continues with after a, if any
        after = outs.get(a, [])
        if len(after) == 1 and shape_op(after[0]) and ins.get(after[0]) == [a] \
                and frames.get(after[0]) == frames.get(a):
            return after[0]
        return None

    mapping: dict[int, int] = {}
    merged: dict[int, Node] = {}
    for n in nodes:
        if not shape_op(n.id) or n.id in mapping:
            continue
        before = ins.get(n.id, [])
        if len(before) == 1 and shape_op(before[0]) and joined(before[0]) == n.id:
            continue  # not the first op of its chain
        chain = [n.id]
        while (nxt := joined(chain[-1])) is not None:
            chain.append(nxt)
        if len(chain) < 2:
            continue
        last = by_id[chain[-1]]
        label = " \u2192 ".join(by_id[i].name.removesuffix(SHORT) for i in chain)
        merged[last.id] = replace(last, label=label, count=sum(by_id[i].count for i in chain))
        for i in chain[:-1]:
            mapping[i] = last.id
    if not mapping:
        return nodes, edges, {}
    kept = [merged.get(n.id, n) for n in nodes if n.id not in mapping]
    return kept, _remap(edges, mapping), mapping
