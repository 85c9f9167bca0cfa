"""What is drawn, and the one route from a graph to DOT.

The size policy (roll repeats, fold what is still too big) makes the picture of a
graph's record (:class:`~dynagraph._records.GraphRecord`: plain data, never a
``Graph``); :func:`drawing` maps a view's :class:`~dynagraph._dot.Overlay` onto it and
writes its DOT. ``Graph.to_dot``, every view and the page all draw through
:func:`drawing`.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial

from . import _dot, _fonts, _guards, _overview, _roll, _transform, memory, render
from ._args import integer_or_same
from ._dot import Overlay
from ._language import tr
from ._records import Block, GraphRecord, Node, longest_chain

__all__ = ["MAX_NODES", "ROLL_ABOVE", "TALL", "Picture", "check_overview", "check_policy", "drawing",
           "picture", "sparkline"]

# Graphs with more nodes than this draw repeated structure once, labelled ×N; smaller
# ones are drawn in full, so that a learner sees every op of a short example.
ROLL_ABOVE = 40
# After rolling, a graph still bigger than this folds its middle into one node (the
# last resort): it keeps layout under a second or two and the output under 300 KB.
MAX_NODES = 400
# A rolled picture whose longest path still has more nodes than this (about two
# screens tall at 1:1) draws each chain of ops as one node listing them: the
# model zoo's Transformers and CNNs then fit in about three screens.
TALL = 30
# Per-iteration gradient norms sent to the page, at most (the rest is summarised).
MAX_SERIES_VALUES = 5_000
# A sparkline's levels: shades the renderer's fonts draw (its PNG shows the eighth-height
# blocks \u2581-\u2587 as empty boxes; a browser would draw them, a viewer without scripts not)
_SPARK = "\u2591\u2592\u2593\u2588"
Series = dict[str, list[float | None]]  # "src-dst" (drawn ids) -> norm per iteration


@dataclass
class Picture:
    """What is drawn for a graph, and where each of its nodes went.

    Attributes:
        graph: The record of what is drawn (rolled and folded as needed; no memory: the
            drawn graph's memory is its original's, by :attr:`mapping`).
        mapping: ``{original id: drawn id}`` for every original node.
        iteration: ``{original id: (block index, iteration)}`` for nodes inside a
            rolled block.
        compact: Drawn in the compact form of pictures taller than :data:`TALL`
            (chains of any ops merged; a module frame that holds only one other frame
            left out: see ``_dot.to_dot``'s ``prune``).
        through: ``{original id: (block index, iteration)}`` for the ops drawn as a
            loop edge (a slice that shrinks a packed RNN's state): the iteration whose
            state they pass on.
    """

    graph: GraphRecord
    mapping: dict[int, int]
    iteration: dict[int, tuple[int, int]] = field(default_factory=dict)
    compact: bool = False
    through: dict[int, tuple[int, int]] = field(default_factory=dict)
    own_title: str = ""  # drawn outside Graphviz (Chinese): see drawing(own_title=True)
    # A module overview (see _overview): the op-level picture it stands for, its DOT, how
    # many screens it fills, and {box's drawn id: the op-level drawn ids inside it}
    detail: Picture | None = None
    detail_dot: str = ""
    detail_svg: bytes = b""  # its layout, as measured (the view shows it: no second layout)
    detail_screens: float = 0.0
    boxes: dict[int, list[int]] = field(default_factory=dict)

    def edge(self, edge: tuple[int, int]) -> tuple[int, int]:
        return self.mapping[edge[0]], self.mapping[edge[1]]

    def moved(self, graph: GraphRecord, moves: Mapping[int, int]) -> Picture:
        """This picture after a transform of what it draws: ``graph`` drawn instead, whose
        ids are the drawn ids moved by ``moves`` (``{drawn id: new id}``, the mapping every
        transform returns; an id not in it stays). Its maps stay consistent: each original
        node goes where its drawn node went, and the iterations of rolled blocks are kept
        while ``graph`` keeps every block. Where it keeps some (a fold left out those it
        cut), the iterations of those it keeps stay, numbered by their place in ``graph``."""
        mapping = {old: moves.get(new, new) for old, new in self.mapping.items()}
        if len(graph.blocks) == len(self.graph.blocks):
            return dataclasses.replace(self, graph=graph, mapping=mapping)
        kept = {k: graph.blocks.index(b) for k, b in enumerate(self.graph.blocks) if b in graph.blocks}
        iteration = {old: (kept[k], i) for old, (k, i) in self.iteration.items() if k in kept}
        through = {old: (kept[k], i) for old, (k, i) in self.through.items() if k in kept}
        return dataclasses.replace(self, graph=graph, mapping=mapping, iteration=iteration, through=through)


def check_overview(overview: object) -> None:
    """Raise ``ValueError`` naming a bad ``overview`` (not ``None``, ``True`` or ``False``)."""
    if overview is not None and not isinstance(overview, bool):
        raise ValueError(f"overview must be None (modules as boxes where the picture of every op is "
                         f"tall), True (wherever ops carry module tags) or False (never); got {overview!r}")


def check_title(title: object) -> None:
    """Raise ``TypeError`` naming a ``title`` that is neither a string nor ``None``."""
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title must be a string; got {type(title).__name__}")


def check_policy(roll: object, max_nodes: object, depth: object = None, overview: object = None) -> None:
    """Raise ``ValueError`` naming a bad ``roll``, ``max_nodes``, ``depth`` or ``overview``
    (the one place they are checked). A numpy or torch integer is taken as an int: the
    callers store :func:`dynagraph._args.integer_or_same` of it."""
    depth, max_nodes = integer_or_same(depth), integer_or_same(max_nodes)
    check_overview(overview)
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        raise ValueError(f"depth must be an int >= 1 (1 collapses top-level submodules); got {depth!r}")
    if roll not in ("auto", True, False):
        raise ValueError(f"roll must be 'auto', True or False; got {roll!r}")
    if max_nodes is not None and (not isinstance(max_nodes, int) or max_nodes < 2):
        raise ValueError(f"max_nodes must be an int >= 2 or None (draw everything); got {max_nodes!r}")


def picture(graph: GraphRecord, *, roll: str | bool = "auto", max_nodes: int | None = MAX_NODES) -> Picture:
    """Apply the size policy: roll repeats (graphs over :data:`ROLL_ABOVE` nodes when
    ``roll="auto"``), then fold the middle of what is still over ``max_nodes``.

    ``roll=False`` and ``max_nodes=None`` draw every node.
    """
    check_policy(roll, max_nodes)
    drawn = dataclasses.replace(graph, memory=None)  # (the picture's memory is the graph's: see Picture)
    if roll is True or (roll == "auto" and len(graph.nodes) > ROLL_ABOVE):
        rolled = _roll.roll(graph.nodes, graph.edges, module_types=graph.module_types)
        if rolled.blocks:
            pic = Picture(variant(graph, rolled.nodes, rolled.edges, blocks=rolled.blocks,
                                  max_nodes=graph.max_nodes, module_types=rolled.module_types),
                          rolled.mapping, rolled.iteration, through=rolled.through)
        else:  # (its mapping: every node to itself)
            pic = Picture(drawn, rolled.mapping)
        pic = _merged(pic)
    else:
        pic = Picture(drawn, {n.id: n.id for n in graph.nodes})
    if max_nodes is not None and len(pic.graph.nodes) > max_nodes:
        pic = pic.moved(*_transform.folded(pic.graph, max_nodes))
    return pic


def _merged(pic: Picture) -> Picture:
    """``pic`` with each chain of shape ops drawn as one node, then, if it is still taller
    than :data:`TALL` nodes, each chain of any ops (:func:`_transform.merge_chains`)."""
    pic = _merged_once(pic, any_op=False)
    g = pic.graph
    index = {n.id: k for k, n in enumerate(g.nodes)}
    loops = {edge for block in g.blocks for edge in block.loops}  # they close cycles: left out
    edges = [(index[a], index[b]) for a, b in g.edges if (a, b) not in loops]
    if longest_chain(len(index), edges) > TALL:
        pic = dataclasses.replace(_merged_once(pic, any_op=True), compact=True)
    return pic


def _merged_once(pic: Picture, *, any_op: bool) -> Picture:
    g = pic.graph
    nodes, edges = (_transform.open_leaf_modules(g.nodes) if any_op else g.nodes), g.edges
    in_block = {nid: k for k, block in enumerate(g.blocks) for nid in block.nodes}
    frames = {n.id: (in_block.get(n.id), n.module) for n in nodes}
    loops = {i for block in g.blocks for edge in block.loops for i in edge}
    chains: dict[int, int] = {}  # merged id -> the id it is drawn as, through every step
    steps: list[Callable[..., tuple[list[Node], list[tuple[int, int]], dict[int, int]]]] = (
        [_transform.lift_leaf_ops, partial(_transform.merge_chains, keep=loops, any_op=True),
         _transform.group_leaves, partial(_transform.merge_parallel, keep=loops)] if any_op
        else [partial(_transform.merge_chains, keep=loops)])
    for step in steps:
        nodes, edges, moved = step(nodes, edges, frames)
        chains = {old: moved.get(new, new) for old, new in chains.items()} | moved
    if not chains and nodes is g.nodes:  # (open_leaf_modules opened none)
        return pic
    blocks = [dataclasses.replace(b, nodes=[i for i in b.nodes if i not in chains]) for b in g.blocks]
    return pic.moved(variant(g, nodes, edges, blocks=blocks, max_nodes=g.max_nodes), chains)


def variant(graph: GraphRecord, nodes: list[Node], edges: list[tuple[int, int]], *, blocks: list[Block],
            max_nodes: int | None, module_types: dict[str, str] | None = None) -> GraphRecord:
    """A record like ``graph`` (its module types unless given, title, roll, overview) with
    other nodes, edges, blocks and size limit, and no memory (its ids are others)."""
    types = graph.module_types if module_types is None else module_types
    return dataclasses.replace(graph, nodes=nodes, edges=edges, module_types=types, blocks=blocks,
                               max_nodes=max_nodes, memory=None)


def drawing(graph: GraphRecord, overlay: Overlay | None = None, *, full: bool = False,
            own_title: bool = False,
            layout: Callable[[str], bytes] | None = None) -> tuple[Picture, str, Series]:
    """The picture of ``graph`` under its size policy (``full=True``: every node), its
    DOT with ``overlay`` (in ``graph``'s ids), and the per-iteration gradient norms of
    rolled edges (for the page's script).

    Saved bytes are drawn on nodes and title when ``graph`` was drawn with ``memory=True``.
    ``own_title``: the title lines with Chinese in them, which Graphviz's renderer draws as
    boxes, are left out of the DOT and kept in the picture's ``own_title`` for the caller
    to draw (a view: ``_page``), when the font that draws them is installed.
    ``layout``: DOT -> SVG, to measure a tagged picture for the module overview (by default
    :func:`dynagraph.render.pipe`, the SVG alone: where the overview replaces the picture,
    a PNG made with it would be wasted).
    """
    return _guards.paused_gc(_drawing, graph, overlay, full, own_title, layout)  # (a record per node)


def _drawing(graph: GraphRecord, overlay: Overlay | None, full: bool, own_title: bool = False,
             layout: Callable[[str], bytes] | None = None) -> tuple[Picture, str, Series]:
    pic = picture(graph, roll=False if full else graph.roll, max_nodes=None if full else graph.max_nodes)
    asked = graph.overview is True or (graph.overview is None and graph.roll == "auto"
                                       and graph.max_nodes is not None)  # (the default policy)
    if not full and asked:  # an overview
        overview = _overview_of(graph, pic, overlay, own_title, layout or render.pipe)
        if overview is not None:
            return overview
    return _drawing_of(graph, pic, overlay, own_title)


def _drawing_of(graph: GraphRecord, pic: Picture, overlay: Overlay | None,
                own_title: bool) -> tuple[Picture, str, Series]:
    """The DOT of picture ``pic`` of ``graph`` with ``overlay``, and its series (see drawing)."""
    drawn, series = _mapped(pic, overlay or Overlay())
    g = pic.graph
    legend = _dot.pass_legend(g.nodes)
    unlit = tr("; {n} more new, not outlined: inside a rolled loop, a fold or a module box with old ones",
               n=drawn.unlit) if drawn.unlit else ""
    own = _cut_title(g.title or "") + unlit
    title = f"{own}\n{legend}" if own and legend else own or legend or None
    outside = own_title and _fonts.cjk_font() is not None
    if outside and title and _fonts.needs_cjk_font(title):
        pic.own_title, title = title, None
    saved = graph.memory
    if saved is not None:
        repeats = {nid: block.repeats for block in g.blocks for nid in block.nodes}
        notes, fills, line = memory.decorate(saved, pic.mapping, repeats)
        drawn.notes.update(notes)
        drawn.fills.update(fills)
        if outside and _fonts.needs_cjk_font(line):  # (a Chinese summary: with the title, outside)
            pic.own_title = f"{pic.own_title}\n{line}" if pic.own_title else line
        else:
            title = f"{title}\n{line}" if title else line
    dot = _dot.to_dot(g.nodes, g.edges, g.module_types, title=title, overlay=drawn, blocks=g.blocks,
                      prune=pic.compact)
    return pic, dot, series


TITLE_CHARS = 500  # of a title the picture draws: Graphviz took minutes to set 400,000


def _cut_title(title: str) -> str:
    """``title`` cut to :data:`TITLE_CHARS` characters, and how long it is where it is cut
    (as a step's source line is)."""
    if len(title) <= TITLE_CHARS:
        return title
    return title[:TITLE_CHARS] + tr("\u2026({n} characters)", n=f"{len(title):,}")


def _overview_of(graph: GraphRecord, pic: Picture, overlay: Overlay | None, own_title: bool,
                 layout: Callable[[str], bytes]) -> tuple[Picture, str, Series] | None:
    """The module overview of ``graph`` (:mod:`dynagraph._overview`), or ``None`` where the
    op-level picture ``pic`` stays: no module tags, or at most MAX_SCREENS screens at 1:1
    (laid out to measure it, and cached for the view that draws it next) unless
    ``graph.overview`` is ``True``."""
    forced = graph.overview is True
    if (len(pic.graph.nodes) <= _overview.SMALL and not forced) or not any(n.module for n in graph.nodes):
        return None
    detail, dot, series = _drawing_of(graph, pic, overlay, own_title)
    try:
        svg = layout(dot)
        screens = _overview.screens(svg)
    except (render.RendererNotFoundError, render.RenderTimeoutError):
        return None  # (no renderer here: the DOT of every op, as without tags)
    if screens <= _overview.MAX_SCREENS and not forced:
        return None
    nodes, edges, boxed = _overview.boxes(graph.nodes, graph.edges, graph.module_types)
    small = variant(graph, nodes, edges, blocks=[], max_nodes=graph.max_nodes)
    top = picture(small, roll=graph.roll, max_nodes=graph.max_nodes)
    calls = _overview.rolled_calls(top.graph.nodes, nodes, top.mapping)  # (a loop of calls)
    top = dataclasses.replace(top, graph=dataclasses.replace(top.graph, nodes=calls))
    mapping = {old: top.mapping[boxed.get(old, old)] for old in detail.mapping}
    iteration = {old: top.iteration[boxed.get(old, old)] for old in detail.mapping
                 if boxed.get(old, old) in top.iteration}  # (boxes of one kind rolled: each its iteration)
    ov = dataclasses.replace(top, mapping=mapping, iteration=iteration, through={}, detail=detail,
                             detail_dot=dot, detail_svg=svg, detail_screens=screens)
    for old, new in detail.mapping.items():  # each box's op-level drawn ids
        box = mapping[old]
        if new not in ov.boxes.setdefault(box, []):
            ov.boxes[box].append(new)
    ov.boxes = {b: ids for b, ids in ov.boxes.items() if any(n.id == b and n.kind == "module"
                                                              for n in top.graph.nodes)}
    return _drawing_of(graph, ov, overlay, own_title)


def _mapped(pic: Picture, overlay: Overlay) -> tuple[Overlay, Series]:
    """The DOT part of ``overlay`` in drawn ids, and per-iteration norms of rolled edges."""
    out = Overlay(forward=overlay.forward)
    if overlay.highlight:  # a drawn node is outlined when every node it stands for is
        mixed = {new for old, new in pic.mapping.items() if old not in overlay.highlight}
        lit = [pic.mapping[i] for i in overlay.highlight if i in pic.mapping]
        out.highlight = set(lit) - mixed
        out.unlit = sum(new in mixed for new in lit)
    if overlay.faint:  # a drawn node is faint when every node it stands for is
        shown = {pic.mapping[i] for i in pic.mapping if i not in overlay.faint}
        out.faint = {pic.mapping[i] for i in overlay.faint if i in pic.mapping} - shown
    for nid, badge in overlay.badges.items():
        out.badges.setdefault(pic.mapping[nid], badge)
    for nid in overlay.notes.keys() | overlay.fills.keys():  # a view's marks (a DDP bucket): the first kept
        if nid in pic.mapping:
            if nid in overlay.notes:
                out.notes.setdefault(pic.mapping[nid], overlay.notes[nid])
            if nid in overlay.fills:
                out.fills.setdefault(pic.mapping[nid], overlay.fills[nid])
    by_edge, sources = _drawn_norms(pic, overlay)
    for new, (edge, *more) in sources.items():
        if not more and edge in overlay.parallel_norms:  # drawn one to one: each edge its own norm
            out.parallel_norms[new] = overlay.parallel_norms[edge]
    across = ({drawn for drawn, pairs in sources.items() if len({overlay.passes.get(p) for p in pairs}) > 1}
              if overlay.passes else set())  # (a rolled edge: its iterations' last norms from several passes)
    series: dict[tuple[int, int], list[float | None]] = {}
    for edge, values in by_edge.items():
        known = [v for v in values.values() if v is not None]
        finite = [v for v in known if math.isfinite(v)]
        if known and edge not in across:  # (none: edges whose gradients add up in ways no norm tells)
            out.edge_norms[edge] = max(finite) if finite else math.inf
        if len(values) > 1:
            series[edge] = [values.get(k) for k in range(max(values) + 1)]
    what = "tangent" if overlay.forward else "grad"
    out.block_notes = _sparklines(pic, series, what, across)  # (every iteration)
    return out, {f"{a}-{b}": [_round(v) for v in s] for (a, b), s in _capped(pic, series).items()}


def _drawn_norms(pic: Picture, overlay: Overlay) -> tuple[dict[tuple[int, int], dict[int, float | None]],
                                                          dict[tuple[int, int], list[tuple[int, int]]]]:
    """Per drawn edge, its norm in each iteration (0 outside rolled blocks), and the pairs of
    ``overlay.edge_norms`` it stands for. A drawn edge that stands for several pairs in one
    iteration (into a module box, a merged chain, a fold) carries them together
    (:func:`_together`); ``None`` where that is not known."""
    pairs: dict[tuple[int, int], dict[int, list[tuple[tuple[int, int], float]]]] = {}
    sources: dict[tuple[int, int], list[tuple[int, int]]] = {}  # drawn pair -> the pairs it stands for
    for edge, v in overlay.edge_norms.items():
        new = pic.edge(edge)
        if new[0] == new[1] and not _is_loop(pic, new):
            continue
        at = pic.iteration.get(edge[0]) or pic.through.get(edge[0]) or pic.iteration.get(edge[1])
        k = at[1] if at else 0  # (a bridge drawn as a loop edge: the iteration it leaves)
        pairs.setdefault(new, {}).setdefault(k, []).append((edge, v))
        sources.setdefault(new, []).append(edge)
    consumers = Counter(src for src, _ in overlay.edge_norms)
    by_edge = {new: {k: group[0][1] if len(group) == 1 else _together(group, overlay, consumers)
                     for k, group in per_k.items()} for new, per_k in pairs.items()}
    return by_edge, sources


def _together(group: list[tuple[tuple[int, int], float]], overlay: Overlay,
              consumers: Mapping[int, int]) -> float | None:
    """The norm of what several pairs ``(src, dst)`` carry, drawn as one edge: the gradients
    of different sources taken as one vector; those a source was sent by several of its
    consumers add up, and their sum's norm is the source's ``received`` norm where all its
    consumers are in ``group`` (else unknown: ``None``). Tangents: one per source. Pairs of
    different backward passes (``overlay.passes``) make no one gradient: ``None``."""
    if overlay.passes and len({overlay.passes.get(edge) for edge, _ in group}) > 1:
        return None
    by_src: dict[int, list[float]] = {}
    for (src, _), v in group:
        by_src.setdefault(src, []).append(v)
    norms = []
    for src, vs in by_src.items():
        if len(vs) == 1 or overlay.forward:
            norms.append(vs[0])
        elif len(vs) == consumers[src] and src in overlay.received:
            norms.append(overlay.received[src])
        else:
            return None
    return math.sqrt(sum(v * v for v in norms))


def _capped(pic: Picture, series: dict[tuple[int, int], list[float | None]]
            ) -> dict[tuple[int, int], list[float | None]]:
    """At most :data:`MAX_SERIES_VALUES` values in all: the loop edges' series first, then
    the others while they fit, each cut to the first iterations where even the loop edges
    alone hold too many (a 40,000-step loop). The page shows an edge's norm per iteration
    while its series lasts; the frame's sparkline covers every iteration."""
    if sum(map(len, series.values())) <= MAX_SERIES_VALUES:
        return series
    loops = {e for b in pic.graph.blocks for e in b.loops}
    kept = {e: s for e, s in series.items() if e in loops}
    total = sum(map(len, kept.values()))
    if total > MAX_SERIES_VALUES:
        cap = max(1, MAX_SERIES_VALUES // len(kept))
        return {e: s[:cap] for e, s in kept.items()}
    for e, s in series.items():  # then the other edges, while they fit
        if e not in kept and total + len(s) <= MAX_SERIES_VALUES:
            kept[e], total = s, total + len(s)
    return kept


def _is_loop(pic: Picture, edge: tuple[int, int]) -> bool:
    return any(edge in b.loops for b in pic.graph.blocks)


def _round(v: float | None) -> float | None:
    """3 significant digits for the page; ``None`` (JSON null) for inf and nan."""
    return float(f"{v:.3g}") if v is not None and math.isfinite(v) else None


def _sparklines(pic: Picture, series: dict[tuple[int, int], list[float | None]],
                what: str = "grad", mixed: set[tuple[int, int]] | None = None) -> dict[int, str]:
    """Per rolled block, the norm of ``what`` (a gradient, or a tangent) along its loop edges
    by iteration, as text; none for a block with a loop edge in ``mixed`` (its iterations'
    norms are from different backward passes: no pass sent that strip)."""
    notes = {}
    for k, block in enumerate(pic.graph.blocks):
        rows = [series[e] for e in block.loops if e in series]
        if not rows or (mixed and any(e in mixed for e in block.loops)):
            continue
        n = max(map(len, rows))
        per_it = [math.sqrt(sum((r[i] or 0.0) ** 2 for r in rows if i < len(r))) for i in range(n)]
        line = sparkline(per_it)  # (drawn by Graphviz: its Chinese has no words, see _zh.DRAWN_BY_GRAPHVIZ)
        notes[k] = (tr("\u2016tangent\u2016 along the loop, iteration 1\u2192{n}: {line}", n=n, line=line)
                    if what == "tangent" else
                    tr("\u2016grad\u2016 along the loop, iteration 1\u2192{n}: {line}", n=n, line=line))
    return notes


def sparkline(values: list[float], width: int = 32) -> str:
    """``values`` as a strip of shades on a log scale (darker: larger), binned to
    ``width``, with the first and last values: ``██▓▓▒▒░░ 0.31→2.1e-05``."""
    if not values:
        return ""
    bins = [values[i * len(values) // width:(i + 1) * len(values) // width]
            or [values[i * len(values) // width]]
            for i in range(min(width, len(values)))]
    logs = [math.log10(max(sum(b) / len(b), 1e-30)) for b in bins]
    lo, hi = min(logs), max(logs)
    top = len(_SPARK) - 1
    bar = "".join(_SPARK[int((v - lo) / (hi - lo) * (top + 0.999)) if hi > lo else top // 2] for v in logs)
    return f"{bar} {values[0]:.2g}\u2192{values[-1]:.2g}"
