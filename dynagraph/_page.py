"""The HTML of every view's Jupyter output: the picture, its data for the page's
script (``assets/view.js``, whose data format is ``assets/DATA.md``), the step list
that needs no script, and a diff's table."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from functools import cache
from html import escape
from importlib import resources
from typing import TYPE_CHECKING, Any

from . import _dot, _patch, _picture, memory, render
from ._dot import Overlay, StepText
from ._records import Node

if TYPE_CHECKING:  # graph.py imports this module (types only: no import circle at run time)
    from .graph import Graph

__all__ = ["FILL", "LISTED_STEPS", "MAX_BYTES", "PLACEHOLDER", "bundle", "diff_table", "page", "played",
           "stored_bytes"]

# An output (picture, data and script) over this many bytes is drawn again with more
# of its middle folded: notebooks stay small and quick to open.
MAX_BYTES = 300_000
# Steps listed in the no-JavaScript list under a stepper.
LISTED_STEPS = 40
# Steps a stepper plays, at most: the first and last halves of a longer recording
# (80,000 steps would be ~650 KB of step data); the page says what it left out. An
# output still over MAX_BYTES, with its step data the bigger part, plays fewer.
MAX_STEPS = 20_000
# Where a step text's varying part (its module's name) goes: loops over many
# modules of one class then share one text (see _dot.StepText).
FILL = "\x00"
# What a live view shows before its first picture.
PLACEHOLDER = {"text/plain": "dynagraph: recording..."}


def bundle(graph: Graph, text: str, overlay: Overlay | None = None, *, caption: str = "") -> dict[str, str]:
    """The Jupyter output of any view: ``text/plain`` and a ``text/html`` whose picture
    is an ``<img>`` (shows in untrusted notebooks and without JavaScript) that the
    page's script upgrades in place to inline SVG with zoom, hover and a stepper.
    """
    return _patch.paused_gc(_bundle, graph, text, overlay or Overlay(), caption)


def _bundle(graph: Graph, text: str, overlay: Overlay, caption: str) -> dict[str, str]:
    steps = min(len(overlay.steps), MAX_STEPS)
    drawn = _drawn(graph, overlay)
    html, sizes = _html(drawn, overlay, text, caption, steps)
    for _ in range(4):  # over budget (rare): a big graph with no repeats, or thousands of steps
        size = stored_bytes({"text/plain": text, "text/html": html})
        if size <= MAX_BYTES:
            break
        can_fold = sizes["nodes"] > _picture.ROLL_ABOVE  # (a small picture is not what makes it big)
        if steps > 2 and (sizes["steps"] > sizes["picture"] or not can_fold):  # play fewer steps
            steps = max(2, int(steps * max(0.1, 1 - (size - MAX_BYTES) / sizes["steps"]) * 0.9))
        elif not can_fold:
            break
        else:  # fold more of the picture's middle
            budget = max(2, int(sizes["nodes"] * MAX_BYTES / size * 0.8))
            memory = getattr(graph, "memory", None)
            graph = _picture.variant(graph, graph.nodes, graph.edges, blocks=graph.blocks, max_nodes=budget)
            graph.memory = memory  # same node ids: the same memory
            drawn = _drawn(graph, overlay)
        html, sizes = _html(drawn, overlay, text, caption, steps)
    return {"text/plain": text, "text/html": html}


def stored_bytes(bundle: dict[str, str]) -> int:
    """Bytes of ``bundle`` as a notebook stores it (JSON; non-ASCII escaped, the larger way)."""
    return len(json.dumps(bundle))


def _drawn(graph: Graph, overlay: Overlay) -> tuple[_picture.Picture, str, dict[str, Any], _picture.Series]:
    """The picture, its SVG, its frames and hover texts, and the rolled edges' norms: the
    part of an output that playing fewer steps leaves as it is."""
    pic, dot, series = _picture.drawing(graph, overlay)
    drawn = pic.graph
    data: dict[str, Any] = {"frames": _dot.frames(drawn.nodes, drawn.edges, drawn.blocks),
                            "info": _info(drawn, pic, overlay.info)}
    return pic, render.compact_svg(render.pipe(dot, "svg")), data, series


def _html(drawing: tuple[_picture.Picture, str, dict[str, Any], _picture.Series], overlay: Overlay, text: str,
          caption: str, max_steps: int) -> tuple[str, dict[str, int]]:
    """The output's HTML, and the sizes that decide what to shrink when it is too big:
    ``picture`` and ``steps`` (bytes) and ``nodes`` (how many its picture draws)."""
    pic, svg, picture_data, series = drawing
    steps: dict[str, Any] = _steps(pic, overlay, max_steps) if overlay.steps else {}
    data = {**picture_data, **steps}
    if series:
        data["norms"] = series
    html = page(svg, data, text, caption, overlay.steps, overlay.totals)
    return html, {"picture": len(svg) * 4 // 3, "steps": len(_json_for_script(steps)) if steps else 0,
                  "nodes": len(pic.graph.nodes)}


def _info(drawn: Graph, pic: _picture.Picture, extra: dict[int, str]) -> dict[int, str]:
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


def _steps(pic: _picture.Picture, overlay: Overlay, max_steps: int) -> dict[str, Any]:
    """The stepper's data in drawn ids (keys ``mode texts kinds s k blocks``, and
    ``fills f`` and ``mem`` when used), for at most ``max_steps`` steps (the first and
    last halves, and a ``gap`` key saying what is left out): the format is ``assets/DATA.md``."""
    texts: dict[str, int] = {}
    fills: dict[str, int] = {}
    kinds: dict[tuple[int, tuple[int, ...], int], int] = {}
    s: list[int] = []
    k: list[int] = []
    f: list[int] = []
    kept, gap = _kept(len(overlay.steps), max_steps)
    for i in kept:
        text, ids = overlay.steps[i]
        template, fill = text if isinstance(text, tuple) else (text, None)
        drawn = tuple(dict.fromkeys(pic.mapping[i] for i in ids if i in pic.mapping))
        block, it = next((pic.iteration[i] for i in ids if i in pic.iteration), (-1, -1))
        kind = (texts.setdefault(template, len(texts)), drawn, block)
        s.append(kinds.setdefault(kind, len(kinds)))
        k.append(it)
        f.append(-1 if fill is None else fills.setdefault(fill, len(fills)))
    data: dict[str, Any]
    data = {"mode": overlay.mode, "texts": list(texts), "kinds": [[t, list(n), b] for t, n, b in kinds],
            "s": s, "k": k, "blocks": [block.repeats for block in pic.graph.blocks]}
    if fills:
        data.update(fills=list(fills), f=f)
    if overlay.totals:  # the running total of saved bytes, shown beside the step number
        data["mem"] = [overlay.totals[i] for i in kept]
    if gap:
        data["gap"] = gap
    return data


def played(n: int) -> set[int] | range:
    """The indices of the steps of ``n`` that an output may play or list: views need
    step texts only for these (a 300,000-step recording plays 20,000)."""
    kept = _kept(n, MAX_STEPS)[0]
    return kept if isinstance(kept, range) else set(kept)


def _kept(n: int, most: int) -> tuple[range | list[int], list[int]]:
    """The indices of the steps the stepper plays (all, or the first and last halves of
    ``most``), and ``[where, how many]`` were left out (empty: none)."""
    if n <= most:
        return range(n), []
    head = most // 2
    return [*range(head), *range(n - (most - head), n)], [head, n - most]


def page(svg: str, data: dict[str, Any], alt: str, caption: str,
         steps: Sequence[tuple[StepText, list[int]]], totals: Sequence[int] = ()) -> str:
    """The HTML of one output (see :func:`bundle`)."""
    uri = "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()
    listing = _listing(steps, totals, data.get("gap")) if steps else ""
    head = f"<b>{escape(caption)}</b>" if caption else ""
    hint = (f'<div class="dg-hint">To step through the {len(steps):,} steps, run the cell, '
            "or trust the notebook.</div>") if steps else ""
    return (
        f'<div class="dg-out{" dg-stepper" if steps else ""}"><style>{_asset("view.css")}</style>{head}'
        # The script builds the controls (they work only where it runs) and shows
        # them; the inline style is kept by JupyterLab's sanitizer, unlike `hidden`.
        '<div class="dg-bar" style="display:none"></div>'
        + ('<div class="dg-now" style="display:none"></div>' if steps else "")
        + '<div class="dg-canvas" style="overflow:auto;max-height:70vh">'
        f'<img class="dg-pic" style="max-width:none" alt="{escape(alt[:300])}" src="{uri}"></div>'
        f"{hint}{listing}"
        f'<script type="application/json" class="dg-data">{_json_for_script(data)}</script>'
        f"<script>{_asset('view.js')}</script></div>"
    )


def _listing(steps: Sequence[tuple[StepText, list[int]]], totals: Sequence[int] = (),
             gap: list[int] | None = None) -> str:
    """The steps as a list that needs no script (the first :data:`LISTED_STEPS`), each
    with the bytes the graph keeps after it when ``totals`` are given."""
    kept = [f" \u00b7 the graph keeps {memory.fmt_bytes(t)} for backward" for t in totals]
    items = "".join(f"<li>{escape(_filled(text) + (kept[i] if kept else ''))}</li>"
                    for i, (text, _) in enumerate(steps[:LISTED_STEPS]))
    more = len(steps) - LISTED_STEPS
    plays = ("the stepper plays them all" if not gap else
             f"the stepper plays the first {gap[0]:,} and the last {len(steps) - gap[0] - gap[1]:,}, "
             f"so that the output stays small")
    tail = f"<p>\u2026 and {more:,} more steps ({plays})</p>" if more > 0 else ""
    return f"<details><summary>{len(steps):,} steps</summary><ol>{items}</ol>{tail}</details>"


def _filled(text: StepText) -> str:
    """A step text: a plain string, or ``(template, fill)`` with one :data:`FILL` mark."""
    return text[0].replace(FILL, text[1]) if isinstance(text, tuple) else text


def diff_table(rows: Sequence[tuple[str, int, int]], labels: Sequence[str], total: tuple[int, int]) -> str:
    """A diff's node counts as an HTML table: ``(name, count in a, count in b)`` per row."""
    la, lb = map(escape, labels)
    head = f"<tr><th>node</th><th>{la}</th><th>{lb}</th><th>change</th></tr>"
    body = "".join(f"<tr><td>{escape(n)}</td><td>{x}</td><td>{y}</td><td>{y - x:+d}</td></tr>"
                   for n, x, y in rows)
    ta, tb = total
    foot = f"<tr><th>total</th><th>{ta}</th><th>{tb}</th><th>{tb - ta:+d}</th></tr>"
    return f'<table class="dg-diff">{head}{body}{foot}</table>'


@cache
def _asset(name: str) -> str:
    return resources.files("dynagraph").joinpath("assets").joinpath(name).read_text()  # 3.10: one per call


def _json_for_script(data: dict[str, Any]) -> str:
    """JSON safe inside a <script> element (no ``</script>`` or ``<!--`` can close it)."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
