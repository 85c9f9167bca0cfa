"""DOT text for graph records: nodes, module frames, rolled blocks, and what a view adds.

This module writes the DOT language only; :mod:`dynagraph._picture` decides what is
drawn (the size policy) and is the one route from a graph to DOT, and
:mod:`dynagraph.render` runs the layout program.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._language import N_, tr, translated
from ._records import consumers_of, producers_of, shape_text, upstream

if TYPE_CHECKING:
    from ._records import Block, Node

__all__ = ["FAINT", "SPLIT_LEAVES", "STYLE", "Overlay", "StepText", "frames", "meta_line", "node_label",
           "quote", "to_dot"]

# Legend: colour and shape per node kind (documented in draw()).
STYLE = {
    "op": 'shape=box style="rounded,filled" fillcolor="#eeeeee"',
    "custom": 'shape=box style="rounded,filled,bold" fillcolor="#ffc078" color="#d9480f"',
    "parameter": 'shape=box style=filled fillcolor="#a5d8ff"',
    "input": 'shape=box style=filled fillcolor="#fff3bf"',
    "output": 'shape=box style=filled fillcolor="#b2f2bb"',
    "module": 'shape=box3d style=filled fillcolor="#e5dbff"',
    "fold": 'shape=note style="filled,dashed" fillcolor="#f8f9fa"',
}
_HEADER = (
    'digraph dynagraph {\n'
    '  graph [rankdir=TB nodesep=0.25 ranksep=0.3 fontname="Helvetica" fontsize=10]\n'
    '  node [fontname="Helvetica" fontsize=10 height=0.3 margin="0.08,0.03"]\n'
    '  edge [arrowsize=0.6 color="#495057" fontname="Helvetica" fontsize=8]\n'
)
# Outline of a node made by backward pass k (create_graph=True: see dynagraph.passes), by
# k = 1, 2, 3 and later; named in the title's legend (:func:`pass_legend`).
PASS_COLOURS = ("#7048e8", "#0ca678", "#e8590c")
# A node that does not feed the output a recording is drawn for (later attributes win).
FAINT = 'color="#adb5bd" fontcolor="#868e96" fillcolor="#f8f9fa"'
# A leaf feeding more ops than this is drawn once per op: small graphs keep one box
# per tensor, while an RNN weight used at every step no longer fans out everywhere.
SPLIT_LEAVES = 3
# Graphviz keeps an edge this many times harder to bend than a leaf's: the chain of ops
# stays straight and the leaves go beside it (with weight 1 everywhere, a MobileNet's
# chain drifted sideways one step per leaf: 2,008 pt wide; 818 pt with this).
_CHAIN_WEIGHT = 4
# An invisible edge that puts a later block's stack under an earlier block (see
# :func:`_stacked`) pulls this hard: with the chain weight alone the second stack went
# beside or diagonally under the first.
_STACK_WEIGHT = 20
# Where a drawn node goes: ((rolled block or None, module path or None), node, DOT name).
_Place = tuple[tuple[int | None, str | None], "Node", str]
# A frame: ("block", k) for rolled block k, (block or None, module path) for a module.
_Frame = tuple[Any, Any]




def quote(text: str) -> str:
    """A DOT double-quoted string that shows ``text`` literally.

    Backslashes are doubled so that escapes such as ``\\N`` (node name) are not
    interpreted, and ``&`` is written ``&amp;`` because Graphviz reads entities
    (``&lt;``) in quoted strings too; ``<`` and ``>`` need no escaping. Newlines
    break the line, carriage returns are dropped, and characters that cannot be
    drawn (see :func:`_visible`) are shown as escapes.
    """
    text = _visible(text.replace("\r", "")).replace("\\", "\\\\").replace('"', '\\"')
    return '"' + text.replace("&", "&amp;").replace("\n", "\\n") + '"'


def _visible(text: str) -> str:
    """``text`` with characters no picture can hold shown as Python escapes.

    Control characters other than newline (NUL becomes ``\\x00``), lone surrogates
    (``\\ud800``, which cannot be written as UTF-8) and U+FFFE/U+FFFF (not allowed in
    XML, so not in SVG) are replaced; everything else is kept.
    """
    return _UNDRAWABLE.sub(_escape, text)


# Unicode categories Cc (controls) less the newline, Cs (surrogates), and U+FFFE/U+FFFF.
_UNDRAWABLE = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def _escape(m: re.Match) -> str:
    code = ord(m[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


# A step's text: a string, or ``(template, fill)`` where the page puts ``fill`` (a
# module's name) at the template's mark (:data:`dynagraph._steps.FILL`), so that the
# steps of a loop over many modules of one class share one text.
StepText = str | tuple[str, str]


@dataclass
class Overlay:
    """What a view adds to a graph's picture, by node and edge id.

    A view (a recording, a backward trace, a diff) fills one in the ids of the graph it
    draws; :func:`dynagraph._picture.drawing` maps it to the ids of the picture that is
    drawn (rolled and folded). :func:`to_dot` writes the fields that change the picture
    (badges, edge norms, highlight, faint, block notes, notes, fills); ``info``,
    ``steps``, ``mode`` and ``totals`` go to the page's script.

    Attributes:
        badges: ``{node id: text}`` drawn in red beside the node (backward order ``#3``);
            of a rolled node's iterations, the first one's badge is drawn.
        edge_norms: ``{(src, dst): gradient norm}``: edge width and label from the norm,
            arrows turned to point the way the gradient flows. Where several edges run
            from ``src`` to ``dst`` (``x * x``), the norm of all they carry together.
        parallel_norms: ``{(src, dst): [norm of each edge]}`` where several edges run
            from ``src`` to ``dst``, in the order they come in the edge list: each
            drawn edge is labelled with its own (``edge_norms`` labels them only when
            the picture draws them as fewer edges, merged).
        highlight: Node ids outlined in red (a diff's new nodes). A drawn node is
            outlined only when every node it stands for is (a rolled loop's node stands
            for old iterations too); the picture's title counts the others (``unlit``).
        faint: Node ids drawn faint (grey text and outline, a pale fill): in a
            recording, the nodes that do not feed the output it is drawn for.
        block_notes: ``{block index: text}`` added under a rolled block's ``×N`` title
            (the per-iteration gradient sparkline).
        notes: ``{node id: text}`` added as a last line inside the node (saved bytes).
        fills: ``{node id: colour}`` replacing the node's fill (its share of memory).
        info: ``{node id: text}`` added to a node's hover details (its source line).
        steps: ``[(text, [node ids])]`` for a stepper, in order.
        mode: ``"reveal"`` (the stepper hides later nodes) or ``"light"`` (dims them).
        totals: Bytes kept alive for backward after each step (shown by the stepper),
            or empty.
        forward: The edge norms are tangents flowing forward (a forward-mode trace): the
            arrows keep the forward direction instead of turning to the gradient's.
        received: ``{node id: norm}`` of all the gradient a node with several consumers was
            sent, summed (what autograd adds up for it): a drawn edge that stands for
            several of its consumers' edges carries this.
        passes: ``{(src, dst): pass}`` where a backward replay ran several passes: the
            pass each ``edge_norms`` entry is from. A drawn edge that stands for pairs
            of different passes gets no norm (no gradient of one pass is their sum).
        unlit: In drawn ids only: how many ``highlight`` nodes are inside drawn nodes
            that also stand for others, and so are not outlined.
    """

    badges: dict[int, str] = field(default_factory=dict)
    edge_norms: dict[tuple[int, int], float] = field(default_factory=dict)
    highlight: set[int] = field(default_factory=set)
    faint: set[int] = field(default_factory=set)
    block_notes: dict[int, str] = field(default_factory=dict)
    notes: dict[int, str] = field(default_factory=dict)
    fills: dict[int, str] = field(default_factory=dict)
    info: Mapping[int, str] = field(default_factory=dict)
    steps: Sequence[tuple[StepText, list[int]]] = field(default_factory=list)
    mode: str = "reveal"
    totals: list[int] = field(default_factory=list)
    parallel_norms: dict[tuple[int, int], list[float]] = field(default_factory=dict)
    forward: bool = False
    received: dict[int, float] = field(default_factory=dict)
    passes: dict[tuple[int, int], int] = field(default_factory=dict)
    unlit: int = 0


def to_dot(nodes: Sequence[Node], edges: Sequence[tuple[int, int]],
           module_types: Mapping[str, str] | None = None, *, title: str | None = None,
           overlay: Overlay | None = None, blocks: Sequence[Block] = (),
           split_leaves: int | None = SPLIT_LEAVES, prune: bool = False) -> str:
    """DOT text for the records, modules drawn as nested clusters.

    Args:
        nodes, edges: Records from :func:`dynagraph.capture.capture`.
        module_types: ``{module name: class name}`` for cluster titles.
        title: Drawn above the graph.
        overlay: An :class:`Overlay` (badges, edge norms, highlights).
        blocks: Rolled blocks (:class:`dynagraph._records.Block`): each drawn as a frame
            titled ``×N`` around its representative nodes, its loop edges dashed.
        split_leaves: Draw a parameter or input that feeds more than this many ops
            once per op instead of as one node with a large fan-out (which makes
            layouts slow and tangled); ``None`` never splits.
        prune: Leave out each module frame that holds no node of its own and only one
            other frame (for tall pictures: see :func:`_pruned`).

    Every SVG node group gets the classes ``dg-<kind> dg-n<id>`` (copies of a split
    leaf share them), every edge ``dg-edge dg-from-<src> dg-to-<dst>`` and every
    frame ``dg-frame dg-f<k>`` (module frames first, in the order of
    :func:`frames`), which the page's script uses to reveal and light parts of one
    laid-out picture.
    """
    module_types = module_types or {}
    overlay = overlay or Overlay()
    lines = [_HEADER]
    if title:
        lines.append(f"  labelloc=t label={quote(title)}\n")
    places, copies = _places(nodes, edges, blocks, split_leaves)
    chains = _chains(places, blocks, prune)
    inner: dict[_Frame | None, list[str]] = {}  # innermost frame (None: no frame) -> DOT node lines
    parents: dict[_Frame, _Frame | None] = {}  # in the order frames are first met in creation order
    if any(chains.values()):
        for key, _, _ in sorted(places, key=lambda p: (p[1].seq is None, p[1].seq or 0)):
            chain = chains[key]
            for outer, frame in zip((None, *chain), chain, strict=False):
                parents.setdefault(frame, outer)
    for key, node, name in places:
        chain = chains[key]
        inner.setdefault(chain[-1] if chain else None, []).append(
            _node_line(node, name, _node_extra(node.id, overlay), overlay.notes.get(node.id, "")))
    lines.extend(_frames_dot(inner, parents, module_types, blocks, overlay.block_notes))
    loops = {edge for block in blocks for edge in block.loops}
    norms = _edge_norms(edges, overlay)
    span = _norm_span({k: v for k, v in enumerate(norms) if v is not None})
    spaced = _entering(places, edges, chains) if parents else set()
    computed = {node.id for _, node, _ in places if node.kind not in ("parameter", "input")}
    for k, (src, dst) in enumerate(edges):
        a = copies.get((src, dst), f"n{src}")
        extra = _edge_extra(norms[k], span, (src, dst) in loops, overlay.forward)
        if (src, dst) in spaced:
            extra = f"minlen=2 {extra}".rstrip()
        if src in computed and dst in computed and (src, dst) not in loops:  # the chain of ops stays straight
            extra = f"weight={_CHAIN_WEIGHT} {extra}".rstrip()
        lines.append(f'  {a} -> n{dst} [id="e{k}" class="dg-edge dg-from-{src} dg-to-{dst}"'
                     f"{' ' + extra if extra else ''}]\n")
    for src, dst in _stacked(blocks, edges, computed):
        lines.append(f"  n{src} -> n{dst} [style=invis weight={_STACK_WEIGHT}]\n")
    lines.append("}\n")
    return "".join(lines)


def _stacked(blocks: Sequence[Block], edges: Sequence[tuple[int, int]],
             computed: set[int]) -> list[tuple[int, int]]:
    """Invisible edges ``(x, s)`` that draw a block's stack under another block it reads.

    An encoder-decoder model rolls to two blocks: the decoder's layers read the
    encoder's output ``x`` (cross-attention), but the decoder's own input ``s`` (the
    first layer's state, from its embedding) does not come from the encoder. Graphviz
    then starts the decoder's stack at the top, beside the encoder, and pushes its
    layers down to meet ``x``: T5 2+2 was 2,250 x 3,150 px, half of it empty. An edge
    ``x -> s`` puts the decoder's input under the encoder's output: one column, 1,290 x
    4,060 px. It is added for a block whose computed state inputs (into ops its loop
    edges enter) come from no block and all come from one of them, ``s``, when an op
    outside the block that comes from another block feeds it, and ``s`` does not lead
    to that op (no cycle).
    """
    if len(blocks) < 2:
        return []
    consumers, producers = consumers_of(edges), producers_of(edges)

    def after(starts: Iterable[int]) -> set[int]:  # the starts and all they lead to
        return upstream(starts, consumers.get) or set()  # (no bound: never None)

    below = after(nid for block in blocks for nid in block.nodes)
    out: list[tuple[int, int]] = []
    for block in blocks:
        mine = set(block.nodes)
        entries = {dst for _, dst in block.loops}
        states = {src for dst in entries for src in producers.get(dst, ())
                  if src not in mine and src in computed}
        if states & below:
            continue  # already under a block
        ahead = {s: after([s]) for s in states}
        firsts = [s for s in states if not any(s in ahead[t] for t in states - {s})]
        if len(firsts) != 1:
            continue  # several inputs
        state = firsts[0]  # the others come from it (a layer norm of the embedding)
        read = sorted(src for nid in block.nodes for src in producers.get(nid, ())
                      if src not in mine and src in computed and src in below and src not in ahead[state])
        if read:
            out.append((read[0], state))
    return out


def _anchors(blocks: Sequence[Block]) -> dict[int, str]:
    """Block index -> the module whose frame holds the block: the module every iteration
    runs inside (``transformer.h`` for ``transformer.h.0`` ... ``.11``), where known."""
    return {k: block.module for k, block in enumerate(blocks) if block.module}


def _chain(key: tuple[int | None, str | None], anchors: Mapping[int, str]) -> tuple[_Frame, ...]:
    """The frames a node placed at ``key`` (its block, its module path) sits in, outermost first.

    A block sits inside the frames of its anchor module and the modules around it; inside
    the block, a frame for each module below the anchor. So a GPT-2's rolled layers are
    drawn inside ``transformer: GPT2Model`` beside its embeddings, not in a copy of it.
    """
    block, path = key
    parts = path.split(".") if path else []
    if block is None:
        return tuple((None, ".".join(parts[:i])) for i in range(1, len(parts) + 1))
    anchor = anchors.get(block)
    inside = anchor is not None and (path == anchor or (path or "").startswith(anchor + "."))
    depth = len(anchor.split(".")) if anchor and inside else 0
    return (tuple((None, ".".join(parts[:i])) for i in range(1, depth + 1)) + (("block", block),)
            + tuple((block, ".".join(parts[:i])) for i in range(depth + 1, len(parts) + 1)))


def _entering(places: Sequence[_Place], edges: Sequence[tuple[int, int]],
              chains: Mapping[tuple[int | None, str | None], tuple[_Frame, ...]]) -> set[tuple[int, int]]:
    """Edges from an op into a frame the op is not in.

    Graphviz ranks a leaf one above the op that reads it: the rank of that op's other
    input. When the op is in a frame its other input is not in, the leaf (or a ``t()``
    of it) is in the frame too, so the frame and the frame it comes from overlap by one
    rank; frames cannot overlap, so Graphviz puts the new frame beside the old one.
    Along a chain of modules (a ResNet's blocks, a Transformer's layers) that made a
    staircase as wide as the model is deep (8,319 px for the zoo's ResNet with module
    frames; 857 px with this). These edges get ``minlen=2``: the leaf takes the rank between.
    """
    frames = {key: frozenset(chain) for key, chain in chains.items()}
    where = {node.id: frames[key] for key, node, name in places
             if name == f"n{node.id}" and node.kind not in ("parameter", "input")}  # one copy: not split
    return {(src, dst) for src, dst in edges
            if src in where and dst in where and not where[dst] <= where[src]}


def _node_extra(nid: int, overlay: Overlay) -> str:
    parts = []
    if nid in overlay.badges:
        parts.append(f'xlabel=<<FONT COLOR="#c92a2a">{_html_text(overlay.badges[nid])}</FONT>>')
    if nid in overlay.highlight:
        parts.append('color="#e03131" penwidth=2.5')
    if nid in overlay.fills:  # after the kind's style: the later fillcolor wins
        parts.append(f'fillcolor="{overlay.fills[nid]}"')
    if nid in overlay.faint:
        parts.append(FAINT)
    return " ".join(parts)


def _html_text(text: str) -> str:
    """``text`` for a Graphviz HTML-like label: markup characters as entities,
    backslashes doubled (Graphviz expands ``\\N`` here too) and characters that
    cannot be drawn as escapes (:func:`_visible`)."""
    text = _visible(text.replace("\r", "")).replace("\\", "\\\\")
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _edge_norms(edges: Sequence[tuple[int, int]], overlay: Overlay) -> list[float | None]:
    """The norm to draw on each edge, or ``None``: parallel edges each their own, where
    the overlay has one per edge drawn; else the norm of all that runs between the two nodes.

    Example:
        >>> _edge_norms([(1, 2), (1, 2), (2, 3)], Overlay(edge_norms={(1, 2): 4.0, (2, 3): 1.0},
        ...                                               parallel_norms={(1, 2): [2.0, 2.0]}))
        [2.0, 2.0, 1.0]
    """
    drawn = Counter(edges)
    seen: Counter[tuple[int, int]] = Counter()
    out: list[float | None] = []
    for edge in edges:
        each = overlay.parallel_norms.get(edge)
        if each is not None and len(each) == drawn[edge]:
            out.append(each[seen[edge]])
            seen[edge] += 1
        else:
            out.append(overlay.edge_norms.get(edge))
    return out


def _edge_extra(v: float | None, span: tuple[float, float], loop: bool, forward: bool = False) -> str:
    parts = ['style=dashed color="#e8590c" constraint=false'] if loop else []
    if v is not None:
        width, colour = _norm_width(v, span), _norm_colour(v)
        turn = "" if forward else "dir=back "  # a gradient's arrow points back to the input
        parts.append(f'{turn}penwidth={width:.2f} color="{colour}" '  # arrows follow the gradient
                     f'label={_edge_label(f"{v:.3g}", width)} fontcolor="{colour}"')
    return " ".join(parts)


def _edge_label(text: str, penwidth: float) -> str:
    """A DOT edge label that keeps ``text`` clear of a stroke ``penwidth`` points wide.

    Graphviz's ``dot`` puts the left side of a plain label on the line that its edge
    follows, so half of the stroke covers the text. Here the text sits in a table cell
    with no border, padded on every side by half the stroke plus one point (whole
    points, as Graphviz wants). The padding also keeps the text off other edges that
    pass above or below it.

    Example:
        >>> _edge_label("4", 4.0)
        '<<TABLE BORDER="0" CELLSPACING="0" CELLPADDING="3"><TR><TD>4</TD></TR></TABLE>>'
    """
    pad = math.ceil(round(penwidth, 2) / 2) + 1  # the width as the DOT text writes it
    return (f'<<TABLE BORDER="0" CELLSPACING="0" CELLPADDING="{pad}">'
            f"<TR><TD>{_html_text(text)}</TD></TR></TABLE>>")


def _norm_colour(v: float) -> str:
    return "#1971c2" if math.isfinite(v) else "#e03131"


def _norm_span(norms: dict) -> tuple[float, float]:
    """Smallest and largest finite, positive norm (``(1, 1)`` when there is none)."""
    finite = [x for x in norms.values() if x > 0 and math.isfinite(x)]
    return (min(finite), max(finite)) if finite else (1.0, 1.0)


def _norm_width(v: float, span: tuple[float, float]) -> float:
    """Edge width 0.6-4 by where the norm's log falls in ``span``."""
    lo, hi = span
    if math.isfinite(v) and v > 0 and hi > lo:
        return 0.6 + 3.4 * (math.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo))
    return 1.0 if math.isfinite(v) else 3.0


def frames(nodes: Sequence[Node], edges: Sequence[tuple[int, int]], blocks: Sequence[Block] = (),
           split_leaves: int | None = SPLIT_LEAVES, *, prune: bool = False) -> list[list[int]]:
    """Node ids inside each frame, in the order :func:`to_dot` numbers them ``dg-f<k>``
    (given the same ``prune``)."""
    members: dict = {}
    places = _places(nodes, edges, blocks, split_leaves)[0]
    chains = _chains(places, blocks, prune)
    for key, node, _ in places:
        for frame in chains[key]:
            members.setdefault(frame, set()).add(node.id)
    return [sorted(members[key]) for key in _frame_order(members)]


def _places(nodes: Sequence[Node], edges: Sequence[tuple[int, int]], blocks: Sequence[Block],
            split_leaves: int | None) -> tuple[list[_Place], dict[tuple[int, int], str]]:
    """Where each drawn node goes: ``[((block, module), node, DOT name)]`` and the
    DOT name of each copy of a split leaf, by ``(leaf, consumer)``."""
    consumers: dict[int, dict[int, None]] = {}  # producer -> its consumers, in edge order, once each
    for src, dst in edges:
        consumers.setdefault(src, {})[dst] = None  # (a dict: a weight a 500-step loop reads has 500)
    by_id = {node.id: node for node in nodes}
    in_block = {nid: k for k, block in enumerate(blocks) for nid in block.nodes}
    places: list[_Place]
    copies: dict[tuple[int, int], str]
    places, copies = [], {}
    for node in nodes:
        users = consumers.get(node.id, {})
        if split_leaves is not None and node.kind in ("parameter", "input") and len(users) > split_leaves:
            for k, user in enumerate(users):
                name = copies[(node.id, user)] = f"n{node.id}_{k}"
                where = node.module if node.module is not None else by_id[user].module
                places.append(((in_block.get(user), where), node, name))
        else:
            places.append(((in_block.get(node.id), node.module), node, f"n{node.id}"))
    return places, copies


def _chains(places: Sequence[_Place], blocks: Sequence[Block], prune: bool) -> dict[Any, tuple[_Frame, ...]]:
    """The frames around each distinct place (:func:`_chain`), pruned as asked: one
    computation for :func:`to_dot` and :func:`frames`, whose frame numbers must agree."""
    anchors = _anchors(blocks)
    chains = {key: _chain(key, anchors) for key in {key for key, _, _ in places}}  # few distinct places
    return _pruned(chains) if prune else chains


def _pruned(chains: dict[Any, tuple[_Frame, ...]]) -> dict[Any, tuple[_Frame, ...]]:
    """``chains`` without the module frames that hold no node of their own and one frame
    only: ``decoder.block.{0…1}.layer: ModuleList`` around ``….layer.0: T5LayerSelfAttention``
    adds a margin and a title row and says nothing the inner title (a full dotted name)
    does not. Rolled blocks always stay."""
    ends = {chain[-1] for chain in chains.values() if chain}
    inside: dict[_Frame, set[_Frame]] = {}
    for chain in chains.values():
        for outer, frame in itertools.pairwise(chain):
            inside.setdefault(outer, set()).add(frame)
    gone = {f for f, kids in inside.items() if f[0] != "block" and f not in ends and len(kids) == 1}
    if not gone:
        return chains
    return {key: tuple(f for f in chain if f not in gone) for key, chain in chains.items()}


def _frame_order(keys: Iterable[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Frames sorted as :func:`_frames_dot` writes them."""
    return sorted(keys, key=lambda k: (k[0] != "block", -1 if k[0] in (None, "block") else k[0],
                                       str(k[1])))


def _node_line(node: Node, name: str, extra: str, note: str = "") -> str:
    label = node_label(node) + (f"\n{note}" if note else "")
    if node.derivative:  # made by a backward pass: its colour's outline (before extra: a highlight wins)
        extra = f'color="{_pass_colour(node.derivative)}" penwidth=2 {extra}'.rstrip()
    return (f'  {name} [id="{name}" class="dg-{node.kind} dg-n{node.id}" '
            f"label={quote(label)} {STYLE[node.kind]}{' ' + extra if extra else ''}]\n")


def _pass_colour(order: int) -> str:
    return PASS_COLOURS[min(order, len(PASS_COLOURS)) - 1]


_ORDINALS = (N_("first backward"), N_("second backward"), N_("third backward"))


def pass_name(order: int) -> str:
    """``"forward"``, ``"first backward"``, ... ``"4th backward"`` for derivative order ``order``,
    in the language of :func:`dynagraph.set_language` (Chinese: ``"前向传播"``, ``"第一次反向传播"`` ...)."""
    if order == 0:
        return tr("forward")
    if order <= len(_ORDINALS):
        return translated(_ORDINALS[order - 1])
    return tr("{order}th backward", order=order)


def pass_legend(nodes: Iterable[Node]) -> str:
    """The title line naming the outline of each backward pass that made a node of
    ``nodes`` (``""`` when the forward pass made them all, or no pass was recorded).

    Example:
        >>> from dynagraph._records import Node
        >>> pass_legend([Node(id=0, name="A", kind="op", label="A", derivative=0),
        ...              Node(id=1, name="B", kind="op", label="B", derivative=1)])
        'outline: plain = forward, purple = first backward'
    """
    orders = sorted({n.derivative for n in nodes if n.derivative})
    if not orders:
        return ""
    names = {"#7048e8": N_("purple"), "#0ca678": N_("teal"), "#e8590c": N_("orange")}
    parts = [tr(", {colour} = {name}", colour=translated(names[_pass_colour(k)]), name=pass_name(k))
             for k in orders]  # (in Chinese the line holds Chinese: views draw it outside Graphviz)
    return tr("outline: plain = forward") + "".join(dict.fromkeys(parts))


def node_label(node: Node) -> str:
    """The text drawn inside a node: its label, then shape, dtype and device."""
    lines = [node.label]
    if node.kind in ("parameter", "input") and len(node.label) > NAME_LINE:
        lines = [_dotted(line) for line in node.label.split("\n")]
    if node.kind == "custom":
        lines.append("(custom Function)")
    if node.shape is not None and node.kind != "module":
        lines.append(meta_line(node))
    lines.extend(f"saved {k}: {v}" for k, v in node.saved)
    return "\n".join(lines)


NAME_LINE = 36  # a parameter's name longer than this breaks after a dot (a rolled T5's
# ``encoder.block.{0…1}.layer.0.SelfAttention.q.weight``: one line made each box 330 px wide)


def _dotted(line: str) -> str:
    """A leaf's label line (a name, then maybe its shape after a space) with the name
    broken into lines of about :data:`NAME_LINE` characters, each break after a dot."""
    name, space, rest = line.partition(" ")
    if len(name) <= NAME_LINE:
        return line
    lines = [""]
    for part in re.split(r"(?<=\.)", name):
        if lines[-1] and len(lines[-1]) + len(part) > NAME_LINE:
            lines.append(part)
        else:
            lines[-1] += part
    return "\n".join(lines) + space + rest


def meta_line(node: Node) -> str:
    """The line under a node's label: its shape, and its dtype and device where not float32
    on the CPU (``(64, 128) bfloat16 cuda:0``)."""
    text = shape_text(node.shape or ())
    if node.dtype not in (None, "float32"):
        text += f" {node.dtype}"
    if node.device not in (None, "cpu"):
        text += f" {node.device}"
    return text


def _frames_dot(inner: Mapping[_Frame | None, list[str]], parents: Mapping[_Frame, _Frame | None],
                module_types: Mapping[str, str], blocks: Sequence[Block],
                notes: Mapping[int, str]) -> list[str]:
    """Nodes inside nested ``subgraph cluster_...`` blocks: module frames and rolled blocks."""
    children: dict[_Frame | None, list[_Frame]] = {}
    for frame, parent in parents.items():  # written in creation order: Graphviz keeps it left to right
        children.setdefault(parent, []).append(frame)
    number = {key: i for i, key in enumerate(_frame_order(parents))}

    def emit(frame: _Frame, indent: str) -> list[str]:
        f = number[frame]
        if frame[0] == "block":
            k = frame[1]
            title = f"\u00d7{blocks[k].repeats:,}  {blocks[k].label}"
            title += f"\n{blocks[k].note}" if blocks[k].note else ""
            title += f"\n{notes[k]}" if k in notes else ""
            lines = [f'{indent}subgraph "cluster_roll{k}" {{\n',
                     f'{indent}  id="f{f}" class="dg-frame dg-block dg-f{f}" label={quote(title)} '
                     'style="rounded,filled" fillcolor="#fff9db" color="#f08c00" fontcolor="#e8590c"\n']
        else:
            block, path = frame
            kind = module_types.get(path)
            title = f"{path}: {kind}" if kind else path
            name = f"cluster_{path}" if block is None else f"cluster_roll{block}_{path}"
            lines = [f"{indent}subgraph {quote(name)} {{\n",
                     f'{indent}  id="f{f}" class="dg-frame dg-f{f}" label={quote(title)} '
                     'style="rounded,dashed" color="#868e96" fontcolor="#495057"\n']
        lines += [indent + line for line in inner.get(frame, [])]
        for child in children.get(frame, []):
            lines += emit(child, indent + "  ")
        lines.append(f"{indent}}}\n")
        return lines

    out = list(inner.get(None, []))
    for top in children.get(None, []):
        out += emit(top, "  ")
    return out
