"""The one picture path: size policy, DOT, layout and the HTML every view displays."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from html import escape
from importlib import resources
from typing import TYPE_CHECKING, Any

from . import _roll, memory, render
from ._records import Node

if TYPE_CHECKING:  # graph.py imports this module (types only: no import circle at run time)
    from ._roll import Block
    from .graph import Graph

__all__ = ["MAX_NODES", "ROLL_ABOVE", "Overlays", "Picture", "bundle", "check_policy", "drawing",
           "expand_steps", "picture", "sparkline"]

# Graphs with more nodes than this draw repeated structure once, labelled ×N; smaller
# ones are drawn in full, so that a learner sees every op of a short example.
ROLL_ABOVE = 40
# After rolling, a graph still bigger than this folds its middle into one node (the
# last resort): it keeps layout under a second or two and the output under 300 KB.
MAX_NODES = 400
# Per-iteration gradient norms sent to the page, at most (the rest is summarised).
MAX_SERIES_VALUES = 20_000
# An output (picture, data and script) over this many bytes is drawn again with more
# of its middle folded: notebooks stay small and quick to open.
MAX_BYTES = 300_000
# Steps listed in the no-JavaScript list under a stepper.
LISTED_STEPS = 40
# Where a step text's varying part (its module's name) goes: loops over many
# modules of one class then share one text.
FILL = "\x00"
_SPARK = "\u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588"
StepText = str | tuple[str, str]  # a step's text, or (template, fill): see FILL


@dataclass
class Picture:
    """What is drawn for a graph, and where each of its nodes went.

    Attributes:
        graph: The drawn :class:`dynagraph.Graph` (rolled and folded as needed).
        mapping: ``{original id: drawn id}`` for every original node.
        iteration: ``{original id: (block index, iteration)}`` for nodes inside a
            rolled block.
    """

    graph: Graph
    mapping: dict[int, int]
    iteration: dict[int, tuple[int, int]] = field(default_factory=dict)

    def edge(self, edge: tuple[int, int]) -> tuple[int, int]:
        return self.mapping[edge[0]], self.mapping[edge[1]]


def check_policy(roll: object, max_nodes: object, depth: object = None) -> None:
    """Raise ``ValueError`` naming a bad ``roll``, ``max_nodes`` or ``depth`` (the one
    place they are checked)."""
    if depth is not None and (not isinstance(depth, int) or depth < 1):
        raise ValueError(f"depth must be an int >= 1 (1 collapses top-level submodules); got {depth!r}")
    if roll not in ("auto", True, False):
        raise ValueError(f"roll must be 'auto', True or False; got {roll!r}")
    if max_nodes is not None and (not isinstance(max_nodes, int) or max_nodes < 2):
        raise ValueError(f"max_nodes must be an int >= 2 or None (draw everything); got {max_nodes!r}")


def picture(graph: Graph, *, roll: str | bool = "auto", max_nodes: int | None = MAX_NODES) -> Picture:
    """Apply the size policy: roll repeats (graphs over :data:`ROLL_ABOVE` nodes when
    ``roll="auto"``), then fold the middle of what is still over ``max_nodes``.

    ``roll=False`` and ``max_nodes=None`` draw every node.
    """
    check_policy(roll, max_nodes)
    pic = Picture(graph, {n.id: n.id for n in graph.nodes})
    if roll is True or (roll == "auto" and len(graph.nodes) > ROLL_ABOVE):
        rolled = _roll.roll(graph.nodes, graph.edges, module_types=graph.module_types)
        if rolled.blocks:
            pic = Picture(_variant(graph, rolled.nodes, rolled.edges, blocks=rolled.blocks,
                                   max_nodes=graph.max_nodes),
                          rolled.mapping, rolled.iteration)
    if max_nodes is not None and len(pic.graph.nodes) > max_nodes:
        folded, fmap = pic.graph.folded(max_nodes)
        iteration = pic.iteration if len(folded.blocks) == len(pic.graph.blocks) else {}
        pic = Picture(folded, {old: fmap.get(new, new) for old, new in pic.mapping.items()}, iteration)
    return pic


def _variant(graph: Graph, nodes: list[Node], edges: list[tuple[int, int]], *, blocks: list[Block],
             max_nodes: int | None) -> Graph:
    """A graph like ``graph`` (its class, module types, title, roll) with other records and
    size limit, made by the public constructor (so without ``graph``'s memory)."""
    return type(graph)(nodes, edges, graph.module_types, graph.title, blocks=blocks, roll=graph.roll,
                       max_nodes=max_nodes)


@dataclass
class Overlays:
    """A view's additions, by the ids of the original graph (mapped here).

    Attributes:
        badges: ``{node id: text}`` drawn beside nodes (the first one of a rolled
            node's iterations wins).
        edge_norms: ``{edge: gradient norm}``.
        highlight: Node ids outlined in red.
        info: ``{node id: text}`` added to a node's hover details (its source line).
        steps: ``[(text, [node ids])]`` for a stepper, in order (a text may be
            ``(template, fill)``: see :data:`FILL`); ``mode`` is
            ``"reveal"`` (later nodes hidden) or ``"light"`` (later nodes dimmed).
        totals: Bytes kept alive for backward after each step (shown by the
            stepper), or empty.
    """

    badges: dict[int, str] = field(default_factory=dict)
    edge_norms: dict[tuple[int, int], float] = field(default_factory=dict)
    highlight: set[int] = field(default_factory=set)
    info: dict[int, str] = field(default_factory=dict)
    steps: Sequence[tuple[StepText, list[int]]] = field(default_factory=list)
    mode: str = "reveal"
    totals: list[int] = field(default_factory=list)


def bundle(graph: Graph, text: str, overlays: Overlays | None = None, *, caption: str = "") -> dict[str, str]:
    """The Jupyter output of any view: ``text/plain`` and a ``text/html`` whose picture
    is an ``<img>`` (shows in untrusted notebooks and without JavaScript) that the
    page's script upgrades in place to inline SVG with zoom, hover and a stepper.
    """
    overlays = overlays or Overlays()
    html, drawn = _html(graph, overlays, text, caption)
    if len(html) > MAX_BYTES:  # rare: a big graph with no repeats; fold more, once
        budget = max(2, int(drawn * MAX_BYTES / len(html) * 0.8))
        smaller = _variant(graph, graph.nodes, graph.edges, blocks=graph.blocks, max_nodes=budget)
        smaller.memory = getattr(graph, "memory", None)  # same node ids: the same memory
        html, _ = _html(smaller, overlays, text, caption)
    return {"text/plain": text, "text/html": html}


def _html(graph: Graph, overlays: Overlays, text: str, caption: str) -> tuple[str, int]:
    """The output's HTML, and how many nodes its picture draws."""
    pic, dot, series = drawing(graph, overlays)
    drawn = pic.graph
    svg = render.compact_svg(render.pipe(dot, "svg"))
    data: dict[str, Any] = {"frames": render.frames(drawn.nodes, drawn.edges, drawn.blocks),
            "info": _info(drawn, pic, overlays.info)}
    if overlays.steps:
        data.update(_steps(pic, overlays))
    if series:
        data["norms"] = series
    return page(svg, data, text, caption, overlays.steps), len(drawn.nodes)


def drawing(graph: Graph,
            overlays: Overlays | None = None) -> tuple[Picture, str, dict[str, list[float | None]]]:
    """The picture of ``graph`` under its size policy, its DOT with ``overlays``, and
    the per-iteration norms of rolled edges (for the page's script)."""
    pic = picture(graph, roll=graph.roll, max_nodes=graph.max_nodes)
    overlay, series = _mapped(pic, overlays or Overlays())
    g = pic.graph
    title = g.title
    saved = getattr(graph, "memory", None)
    if saved is not None:  # drawn with memory=True
        repeats = {nid: block.repeats for block in g.blocks for nid in block.nodes}
        title = memory.decorate(overlay, saved, pic.mapping, repeats, title)
    dot = render.to_dot(g.nodes, g.edges, g.module_types, title=title, overlay=overlay, blocks=g.blocks)
    return pic, dot, series


def _mapped(pic: Picture, overlays: Overlays) -> tuple[render.Overlay, dict[str, list[float | None]]]:
    """The overlay in drawn ids, and per-iteration norms of rolled edges for the page."""
    out = render.Overlay(highlight={pic.mapping[i] for i in overlays.highlight if i in pic.mapping})
    for nid, badge in overlays.badges.items():
        out.badges.setdefault(pic.mapping[nid], badge)
    by_edge: dict[tuple[int, int], dict[int, float]] = {}
    for edge, v in overlays.edge_norms.items():
        new = pic.edge(edge)
        if new[0] == new[1] and not _is_loop(pic, new):
            continue
        k = pic.iteration.get(edge[0], pic.iteration.get(edge[1], (None, 0)))[1]
        by_edge.setdefault(new, {})[k] = v
    series: dict[tuple[int, int], list[float | None]] = {}
    for edge, values in by_edge.items():
        finite = [v for v in values.values() if math.isfinite(v)]
        out.edge_norms[edge] = max(finite) if finite else math.inf
        if len(values) > 1:
            series[edge] = [values.get(k) for k in range(max(values) + 1)]
    out.block_notes = _sparklines(pic, series)
    if sum(map(len, series.values())) > MAX_SERIES_VALUES:
        loops = {e for b in pic.graph.blocks for e in b.loops}
        series = {e: s for e, s in series.items() if e in loops}
    return out, {f"{a}-{b}": [_round(v) for v in s] for (a, b), s in series.items()}


def _is_loop(pic: Picture, edge: tuple[int, int]) -> bool:
    return any(edge in b.loops for b in pic.graph.blocks)


def _round(v: float | None) -> float | None:
    """3 significant digits for the page; ``None`` (JSON null) for inf and nan."""
    return float(f"{v:.3g}") if v is not None and math.isfinite(v) else None


def _sparklines(pic: Picture, series: dict[tuple[int, int], list[float | None]]) -> dict[int, str]:
    """Per rolled block, the gradient norm along its loop edges by iteration, as text."""
    notes = {}
    for k, block in enumerate(pic.graph.blocks):
        rows = [series[e] for e in block.loops if e in series]
        if not rows:
            continue
        n = max(map(len, rows))
        per_it = [math.sqrt(sum((r[i] or 0.0) ** 2 for r in rows if i < len(r))) for i in range(n)]
        notes[k] = f"\u2016grad\u2016 along the loop, iteration 1\u2192{n}: {sparkline(per_it)}"
    return notes


def sparkline(values: list[float], width: int = 32) -> str:
    """``values`` as a bar of block characters on a log scale, binned to ``width``,
    with the first and last values: ``▇▆▅▃▂▁ 0.31→2.1e-05``."""
    if not values:
        return ""
    bins = [values[i * len(values) // width:(i + 1) * len(values) // width]
            or [values[i * len(values) // width]]
            for i in range(min(width, len(values)))]
    logs = [math.log10(max(sum(b) / len(b), 1e-30)) for b in bins]
    lo, hi = min(logs), max(logs)
    bar = "".join(_SPARK[int((v - lo) / (hi - lo) * 7.999) if hi > lo else 3] for v in logs)
    return f"{bar} {values[0]:.2g}\u2192{values[-1]:.2g}"


def _info(drawn: Graph, pic: Picture, extra: dict[int, str]) -> dict[int, str]:
    """Hover text of each drawn node: name, kind, module, tensor, saved, source."""
    repeats = {nid: block.repeats for block in drawn.blocks for nid in block.nodes}
    notes: dict[int, str] = {}
    for old, text in extra.items():
        notes.setdefault(pic.mapping.get(old, old), text)
    return {n.id: _describe(n, repeats.get(n.id), notes.get(n.id)) for n in drawn.nodes}


def _describe(node: Node, repeats: int | None, note: str | None) -> str:
    lines = [f"{node.name} ({node.kind})"]
    if node.label != node.name:
        lines.append(node.label)
    if node.module:
        lines.append(f"module: {node.module}")
    if node.shape is not None:
        lines.append(f"tensor: {tuple(node.shape)} {node.dtype} {node.device}")
    lines += [f"saved {k}: {v}" for k, v in node.saved]
    if repeats:
        lines.append(f"drawn once for {repeats:,} iterations")
    if note:
        lines.append(note)
    return "\n".join(lines)


def _steps(pic: Picture, overlays: Overlays) -> dict[str, Any]:
    """Step data in drawn ids, compact for long loops: a table of distinct texts, a
    table of distinct step kinds ``[text, drawn nodes, block]`` (a rolled loop's
    iterations share them), and per step its kind, iteration (``-1`` outside rolled
    blocks) and fill (the module name put in a text's :data:`FILL` mark, or ``-1``)."""
    texts: dict[str, int] = {}
    fills: dict[str, int] = {}
    kinds: dict[tuple[int, tuple[int, ...], int], int] = {}
    s: list[int] = []
    k: list[int] = []
    f: list[int] = []
    for text, ids in overlays.steps:
        template, fill = text if isinstance(text, tuple) else (text, None)
        drawn = tuple(dict.fromkeys(pic.mapping[i] for i in ids if i in pic.mapping))
        block, it = next((pic.iteration[i] for i in ids if i in pic.iteration), (-1, -1))
        kind = (texts.setdefault(template, len(texts)), drawn, block)
        s.append(kinds.setdefault(kind, len(kinds)))
        k.append(it)
        f.append(-1 if fill is None else fills.setdefault(fill, len(fills)))
    data: dict[str, Any]
    data = {"mode": overlays.mode, "texts": list(texts), "kinds": [[t, list(n), b] for t, n, b in kinds],
            "s": s, "k": k, "blocks": [block.repeats for block in pic.graph.blocks]}
    if fills:
        data.update(fills=list(fills), f=f)
    if overlays.totals:  # the running total of saved bytes, shown beside the step number
        data["mem"] = overlays.totals
    return data


def expand_steps(data: dict[str, Any]) -> list[tuple[str, list[int], int, int]]:
    """``(text, drawn nodes, block, iteration)`` per step, from :func:`_steps`'s data
    (what the page's script reads)."""
    out: list[tuple[str, list[int], int, int]] = []
    fills = data.get("f", [-1] * len(data["s"]))
    for kind, it, fill in zip(data["s"], data["k"], fills):
        t, nodes, block = data["kinds"][kind]
        text = data["texts"][t]
        out.append((text.replace(FILL, data["fills"][fill]) if fill >= 0 else text, nodes, block, it))
    return out


_BUTTONS = (("first", "\u00ab"), ("prev", "\u2039 prev"), ("play", "play"), ("next", "next \u203a"),
            ("last", "\u00bb"))
_ZOOM = (("zout", "\u2212"), ("fit", "fit"), ("one", "1:1"), ("zin", "+"))


def page(svg: str, data: dict[str, Any], alt: str, caption: str,
         steps: Sequence[tuple[StepText, list[int]]]) -> str:
    """The HTML of one output (see :func:`bundle`)."""
    uri = "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()
    controls = ""
    if steps:
        n = len(steps)
        controls = "".join(f'<button type="button" data-act="{a}" title="{a}">{t}</button>'
                           for a, t in _BUTTONS)
        controls += (f'<input type="range" min="0" max="{n - 1}" value="{n - 1}" aria-label="step">'
                     '<span class="dg-info"></span><span class="dg-gap"></span>')
    controls += "".join(f'<button type="button" data-act="{a}" title="zoom: {a}">{t}</button>'
                        for a, t in _ZOOM)
    controls += '<span class="dg-zoom"></span>'
    listing = _listing(steps, data.get("mem", [])) if steps else ""
    head = f"<b>{escape(caption)}</b>" if caption else ""
    return (
        f'<div class="dg-out{" dg-stepper" if steps else ""}"><style>{_asset("view.css")}</style>{head}'
        # Controls work only where script runs: hidden by an inline style (which
        # JupyterLab's sanitizer keeps, unlike `hidden`) that the script clears.
        f'<div class="dg-bar" style="display:none">{controls}</div>'
        + ('<div class="dg-now" style="display:none"></div>' if steps else "")
        + '<div class="dg-canvas" style="overflow:auto;max-height:70vh">'
        f'<img class="dg-pic" style="max-width:none" alt="{escape(alt[:300])}" src="{uri}"></div>'
        f"{listing}"
        f'<script type="application/json" class="dg-data">{_json_for_script(data)}</script>'
        f"<script>{_asset('view.js')}</script></div>"
    )


def _listing(steps: Sequence[tuple[StepText, list[int]]], totals: Sequence[int] = ()) -> str:
    """The steps as a list that needs no script (the first :data:`LISTED_STEPS`), each
    with the bytes the graph keeps after it when ``totals`` are given."""
    kept = [f" \u00b7 the graph keeps {memory.fmt_bytes(t)} for backward" for t in totals]
    items = "".join(f"<li>{escape(_filled(text) + (kept[i] if kept else ''))}</li>"
                    for i, (text, _) in enumerate(steps[:LISTED_STEPS]))
    more = len(steps) - LISTED_STEPS
    tail = f"<p>\u2026 and {more:,} more steps (the stepper plays them all)</p>" if more > 0 else ""
    return f"<details><summary>{len(steps):,} steps</summary><ol>{items}</ol>{tail}</details>"


def _filled(text: StepText) -> str:
    """A step text: a plain string, or ``(template, fill)`` with one :data:`FILL` mark."""
    return text[0].replace(FILL, text[1]) if isinstance(text, tuple) else text


@cache
def _asset(name: str) -> str:
    return resources.files("dynagraph").joinpath("assets").joinpath(name).read_text()  # 3.10: one per call


def _json_for_script(data: dict[str, Any]) -> str:
    """JSON safe inside a <script> element (no ``</script>`` or ``<!--`` can close it)."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
