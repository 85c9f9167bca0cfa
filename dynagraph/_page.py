"""The Jupyter outputs of every view, shown the same in every viewer.

A view displays as up to four outputs (:class:`Output`), in this order:

- a diff's table (``text/html`` of plain tags), only for :class:`~dynagraph.diff.GraphDiff`;
- **the picture**: ``image/png`` and ``text/plain``, which every viewer shows (a
  notebook opened without running it, a viewer that sanitizes HTML such as GitHub's or
  ``nbconvert --sanitize-html``). A title with Chinese in it, which Graphviz's renderer
  would draw as boxes, is drawn above the PNG by Pillow and above the SVG by the script
  instead (:func:`dynagraph._picture.drawing`'s ``own_title``);
- **its script**: ``application/javascript`` alone. Where scripts run (a trusted
  notebook, nbconvert's HTML, the docs) it (``assets/view.js``, data format
  ``assets/DATA.md``) draws the picture as inline SVG with zoom, hover and a stepper, and
  hides the PNG's output (the nearest image before it of the PNG's size). It is an
  output of its own because viewers show one mime type per output, a script first, and
  nbconvert shows a script as an empty ``<div>`` when it sanitizes;
- **the steps** (a recording or a backward trace): ``text/html`` of plain tags that
  every sanitizer keeps: a caption and, for the reader where no script runs, a line
  that says where the picture steps (in Jupyter, once the cell has run or the
  notebook is trusted: it asks for nothing that cannot be done where it shows) and
  the first :data:`dynagraph._steps.LISTED_STEPS` steps. Where the script runs, it hides that part,
  so that the steps do not show twice beside the live stepper.

No output needs a tag, style or image that a sanitizer drops, so none shows junk.
This module composes the outputs and keeps them within :data:`MAX_BYTES`; the PNG is
made in :mod:`dynagraph._png`, the step list, the stepper's data and a diff's table in
:mod:`dynagraph._steps`.

What a learner reads here (the step list, hover details, the stepper's words) follows
:func:`dynagraph.set_language`; ``view.js`` holds the English and gets other languages'
words in its data (``words``), so an English output's data is as it always was.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any, NamedTuple

from . import _dot, _guards, _overview, _picture, _png, _steps, render
from ._dot import Overlay
from ._language import language, tr
from ._records import GraphRecord, Node, kind_word, shape_text

__all__ = ["MAX_BYTES", "PLACEHOLDER", "Output", "View", "fragment", "largest_output", "outputs",
           "stored_bytes"]

# A view's outputs together (its picture's PNG, its script with the SVG, its steps) over
# this many bytes are made again smaller (see _outputs): notebooks stay small and quick to open.
MAX_BYTES = 300_000
# A picture of at most this many nodes is never folded to fit MAX_BYTES.
FOLD_ABOVE = 10
# The share of MAX_BYTES the rest of a view's outputs leave for the PNG at least (more
# folding or fewer steps first): about a screen of the picture's top.
PNG_SHARE = 0.15
# The text of an output a view cannot make smaller otherwise is cut to this many characters.
MAX_TEXT = 2_000
# What a live view shows before its first picture.
PLACEHOLDER = {"text/plain": "dynagraph: recording..."}


class Output(NamedTuple):
    """One Jupyter output: its data (mime type -> text) and its metadata, whose
    ``"dynagraph"`` key says which part of a view it is (``table picture script steps``)."""

    data: dict[str, str]
    metadata: dict[str, Any]


class View:
    """What every view shares: in IPython it displays as its :meth:`_outputs` (see the
    module docstring); a viewer that asks for one bundle gets the picture's."""

    def _outputs(self) -> list[Output]:
        raise NotImplementedError

    def _ipython_display_(self) -> None:
        from IPython.display import display
        for out in self._outputs():
            display(out.data, metadata=out.metadata, raw=True)

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> tuple[dict[str, str],
                                                                                        dict[str, Any]]:
        outs = self._outputs()
        data, metadata = next((o for o in outs if o.metadata.get("dynagraph") == "picture"), outs[0])
        return data, metadata


def outputs(graph: GraphRecord, text: str, overlay: Overlay | None = None, *, caption: str = "",
            table: str = "", still: bool = True) -> list[Output]:
    """The Jupyter outputs of any view (see the module docstring) of the graph whose
    record is ``graph`` (:func:`dynagraph.graph.record_of`): ``text`` is the
    picture's ``text/plain``, ``caption`` heads the step list, ``table`` (HTML of plain
    tags) is shown first. ``still=False`` leaves out the PNG (a live view's redraws,
    where the script shows the picture): the picture's output is then its text."""
    return _guards.paused_gc(_outputs, graph, text, overlay or Overlay(), caption, table, still)


def _outputs(graph: GraphRecord, text: str, overlay: Overlay, caption: str, table: str,
             still: bool) -> list[Output]:
    made: list = []  # the stepper's data, made once per picture and number of steps

    def compose(drawn: _Drawn, steps: int) -> tuple[list[Output], dict[str, int]]:
        return _compose(drawn, overlay, text, caption, table, steps, made)

    steps = min(len(overlay.steps), _steps.MAX_STEPS)
    drawn = _drawn(graph, overlay, still)
    room = int(MAX_BYTES * (1 - PNG_SHARE)) if still else MAX_BYTES  # for all but the PNG
    while True:  # over budget (rare): a big graph with no repeats, or thousands of steps
        outs, sizes = compose(drawn, steps)
        size = stored_bytes(outs)
        if size <= room:
            break
        smaller = _shrunk(graph, drawn, steps, sizes, size, room, overlay, still)
        if smaller is None:  # (nothing left to shrink: the picture and what it says, cut)
            outs = _bare(text, table)
            size = stored_bytes(outs)
            break
        graph, drawn, steps = smaller
    if still:  # the PNG last, in what is left
        return _png_added(outs, size, drawn, lambda with_png: compose(with_png, steps)[0])
    return outs


def _shrunk(graph: GraphRecord, drawn: _Drawn, steps: int, sizes: dict[str, int], size: int, room: int,
            overlay: Overlay, still: bool) -> tuple[GraphRecord, _Drawn, int] | None:
    """One step towards outputs of at most ``room`` bytes (they are ``size`` now, whose
    parts are ``sizes``): ``(graph, drawn, steps)`` with less in them, or ``None`` where
    nothing is left to take out."""
    if "inside" in drawn.data:  # a module overview's op-level picture goes first (its boxes stay)
        return graph, drawn._replace(data={k: v for k, v in drawn.data.items() if k != "inside"}), steps
    # (a picture of a few nodes is not what makes it big; one with merged chains and
    # grouped leaves can be, with few nodes of many lines each)
    can_fold = sizes["nodes"] > FOLD_ABOVE
    if steps > 2 and (sizes["steps"] > sizes["picture"] or not can_fold):  # play fewer steps
        fewer = int(steps * max(0.1, 1 - (size - room) / sizes["steps"]) * 0.9)
        return graph, drawn, max(2, min(steps - 1, fewer))
    if drawn.series and len(_json_for_script(drawn.series)) > 0.1 * size:  # a long loop's norms
        return graph, drawn._replace(series={}), steps  # (the edges keep their drawn labels)
    if can_fold:  # fold more of the picture's middle
        budget = max(2, int(sizes["nodes"] * room / size * 0.8))
        folded = dataclasses.replace(graph, max_nodes=budget)  # (same node ids: the same memory)
        smaller = _drawn(folded, overlay, still)
        if len(smaller.pic.graph.nodes) < sizes["nodes"]:
            return folded, smaller, steps
    if drawn.series:
        return graph, drawn._replace(series={}), steps
    return None


def _png_added(outs: list[Output], size: int, drawn: _Drawn,
               compose: Callable[[_Drawn], list[Output]]) -> list[Output]:
    """``outs`` (``size`` bytes) with the picture's PNG in what :data:`MAX_BYTES` leaves,
    or as they are where no PNG fits; ``compose`` makes the outputs again with a PNG
    (where the script carries it)."""
    spare = MAX_BYTES - size - 200  # (the PNG's keys, and its size in the script's data)
    while spare > 0:
        drawn = _with_png(drawn, spare)
        if not drawn.png:
            break
        with_png = ([*outs[:-1], _picture_output(outs[-1].data["text/plain"], drawn)]
                    if "script" not in _parts(outs) else compose(drawn))
        over = stored_bytes(with_png) - MAX_BYTES
        if over <= 0:
            return with_png
        spare = len(drawn.png) - over - 100
    return outs


def _parts(outs: Sequence[Output]) -> list[str]:
    return [o.metadata.get("dynagraph", "") for o in outs]


def _bare(text: str, table: str) -> list[Output]:
    """The outputs of a view whose script and steps cannot fit :data:`MAX_BYTES`: the
    table (as text when long) and the picture's text, each cut to :data:`MAX_TEXT`
    characters; the PNG is added to these where it fits."""
    outs = []
    if table:
        plain = _cut(_steps.plain_table(table))
        outs.append(Output({"text/plain": plain, **({"text/html": table} if len(table) <= MAX_TEXT else {})},
                           {"dynagraph": "table"}))
    outs.append(Output({"text/plain": _cut(text)}, {"dynagraph": "picture"}))
    return outs


def _cut(text: str) -> str:
    """``text`` cut to :data:`MAX_TEXT` characters, saying so."""
    if len(text) <= MAX_TEXT:
        return text
    return text[:MAX_TEXT] + "\n" + tr("\u2026 (cut to {n} characters of {total})", n=f"{MAX_TEXT:,}",
                                       total=f"{len(text):,}")


def _picture_output(text: str, drawn: _Drawn) -> Output:
    """The picture's output: its text, and its PNG where there is one."""
    if not drawn.png:
        return Output({"text/plain": text}, {"dynagraph": "picture"})
    w, h = drawn.png_size
    return Output({"text/plain": text, "image/png": drawn.png},
                  {"dynagraph": "picture", "image/png": {"width": w, "height": h}})


def stored_bytes(outs: Sequence[Output]) -> int:
    """Bytes of ``outs`` as a notebook stores them (JSON; non-ASCII escaped, the larger way)."""
    return sum(len(json.dumps(o.data)) + len(json.dumps(o.metadata)) for o in outs)


def largest_output(outs: Sequence[Output]) -> int:
    """Bytes of the largest of ``outs`` as a notebook stores it: what :data:`MAX_BYTES` bounds."""
    return max(stored_bytes([o]) for o in outs)


class _Drawn(NamedTuple):
    """The part of a view's outputs that playing fewer steps leaves as it is."""

    pic: _picture.Picture
    svg: str
    data: dict[str, Any]  # frames and hover texts
    series: _picture.Series
    dot: str
    png: str = ""  # base64; empty: not made (yet)
    png_size: tuple[int, int] = (0, 0)
    title: str = ""  # drawn outside Graphviz (see _picture.drawing's own_title); empty: none, or in the DOT
    laid: bytes = b""  # the SVG as the renderer wrote it (its page places the PNG's rows); empty: no PNG
    raster: bytes = b""  # the whole PNG, made in the SVG's run (a small DOT); empty: made by _with_png


def _drawn(graph: GraphRecord, overlay: Overlay, still: bool = False) -> _Drawn:
    """``graph`` drawn with ``overlay``: its SVG, hover texts and frames, and with
    ``still`` what its PNG is made from (no PNG yet: see :func:`_with_png`). A picture of
    at most :data:`dynagraph._png.ONE_RUN_NODES` nodes is rasterized whole in the SVG's renderer run (one
    layout); a bigger one, whose picture may not fit the budget, is laid out alone, and
    :func:`_with_png` rasterizes only what the budget can keep."""
    # A title with Chinese (and a Chinese memory line) is drawn by the script and by Pillow
    # instead: see _picture.drawing
    # (a tagged picture is laid out to measure it for the module overview: its SVG alone, since
    # its PNG is wasted where the overview replaces it; where it stays, its PNG is made below)
    pic, dot, series = _picture.drawing(graph, overlay, own_title=True)
    title = pic.own_title
    drawn = pic.graph
    data: dict[str, Any] = {"frames": _dot.frames(drawn.nodes, drawn.edges, drawn.blocks, prune=pic.compact),
                            "info": _info(graph, pic, overlay.info)}
    if title:
        data["title"] = title
    if pic.detail is not None:  # a module overview: its op-level picture, opened a box at a time
        data["inside"] = _inside(pic)
    svg, raster = _png.laid_out(dot) if still else (render.pipe(dot, "svg"), b"")
    return _Drawn(pic, render.compact_svg(svg), data, series, dot, title=title, laid=svg if still else b"",
                  raster=raster)


def _inside(pic: _picture.Picture) -> dict[str, Any]:
    """A module overview's op-level picture for its script (``inside`` in ``assets/DATA.md``):
    its SVG (as laid out when the overview measured it) and each box's op-level ids."""
    svg = render.compact_svg(pic.detail_svg)
    boxes = {str(b): ids for b, ids in pic.boxes.items()}
    return {"svg": base64.b64encode(svg.encode()).decode(), "boxes": boxes}


def _with_png(drawn: _Drawn, room: int) -> _Drawn:
    """``drawn`` with its PNG, its output at most ``room`` bytes (:func:`dynagraph._png.fit`:
    cropped to the picture's top where it must be); as it was where not even a strip fits."""
    made = _png.fit(_png.Laid(drawn.dot, drawn.laid, drawn.raster, drawn.title), room)
    return drawn if made is None else drawn._replace(png=made[0], png_size=made[1])


def _compose(drawn: _Drawn, overlay: Overlay, text: str, caption: str, table: str,
             max_steps: int, made: list | None = None) -> tuple[list[Output], dict[str, int]]:
    """The outputs, and the sizes that decide what to shrink when they are too big:
    ``picture`` and ``steps`` (bytes) and ``nodes`` (how many its picture draws).
    ``made``: ``[picture, max_steps, stepper data]`` of an earlier call, reused when both
    match (the same drawing again with its PNG), else filled in."""
    steps: dict[str, Any] = {}
    if overlay.steps and made and made[0] is drawn.pic and made[1] == max_steps:
        steps = made[2]
    elif overlay.steps:
        steps = _steps.stepper(drawn.pic, overlay, max_steps)
        if made is not None:
            made[:] = [drawn.pic, max_steps, steps]
    # base64: the SVG's many < and " would each be 6-7 bytes as escaped JSON in a notebook
    data = {**drawn.data, **steps, "svg": base64.b64encode(drawn.svg.encode()).decode()}
    if drawn.series:
        data["norms"] = drawn.series
    if steps:  # the id of the step list's line that says how to make it step (the script hides it)
        data["hint"] = "dg-hint-" + hashlib.sha1(_json_for_script(data).encode()).hexdigest()[:12]
    if drawn.png:  # the script hides the PNG's output, found by this size, where it runs
        data["png"] = list(drawn.png_size)
    if language() != "en":  # view.js has the English
        data["words"] = _words(bool(steps), "inside" in data)
    outs = []
    if table:
        outs.append(Output({"text/plain": _steps.plain_table(table), "text/html": table},
                           {"dynagraph": "table"}))
    outs.append(_picture_output(text, drawn))
    # The script on its own: a viewer that picks one mime type per output and shows a
    # script as an empty <div> when it sanitizes (nbconvert) still shows the PNG above.
    outs.append(Output({"application/javascript": _script(data)}, {"dynagraph": "script"}))
    if steps:
        caption += _overview_note(drawn)
        html, plain = _steps.listing(overlay.steps, overlay.totals, steps.get("gap"), caption, data["hint"])
        outs.append(Output({"text/plain": plain, "text/html": html}, {"dynagraph": "steps"}))
    return outs, {"picture": max(len(drawn.svg), len(drawn.png)), "nodes": len(drawn.pic.graph.nodes),
                  "steps": len(_json_for_script(steps)) if steps else 0}


def _overview_note(drawn: _Drawn) -> str:
    """The caption's words for a module overview (empty for an op-level picture)."""
    if drawn.pic.detail is None:
        return ""
    note = tr("; modules drawn as boxes (the picture of every op fills {n} screens at 1:1)",
              n=f"{drawn.pic.detail_screens:.1f}")
    if "inside" in drawn.data:
        note += tr(": where the picture's script runs, a click on a box opens its ops")
    if any(n.kind == "module" and _overview.per_call(n.label) for n in drawn.pic.graph.nodes):
        note += tr("; a module called more than once is one box per call (“call 1 of 2”)")
    return note


# Iterations a rolled node's hover details list by name and shape (then "... and N more").
LISTED_ITERATIONS = 12


def _info(graph: GraphRecord, pic: _picture.Picture, extra: Mapping[int, str]) -> dict[int, str]:
    """Hover text of each drawn node: name, kind, module, tensor, saved, source, and for
    a node of a rolled block what each iteration's node was (name and shape)."""
    drawn = pic.graph
    repeats = {nid: block.repeats for block in drawn.blocks for nid in block.nodes}
    first: dict[int, int] = {}  # drawn id -> the first original node whose note it shows
    drawn_id, note_of = pic.mapping.get, first.setdefault  # (bound once: 300,000 nodes)
    for old in extra:
        note_of(drawn_id(old, old), old)
    notes = {new: extra[old] for new, old in first.items()}  # (a lazy ``extra`` makes only these)
    saved = graph.memory
    for nid, text in (saved.dtype_notes(pic.mapping) if saved is not None else {}).items():
        notes[nid] = f"{text}\n{notes[nid]}" if nid in notes else text  # saved dtypes (mixed precision)
    stands: dict[int, list[Node]] = {}
    if pic.iteration:
        by_id = {n.id: n for n in graph.nodes}
        for old in sorted(pic.iteration, key=pic.iteration.__getitem__):  # block, then iteration order
            if old in by_id:
                new = pic.mapping[old]
                if new not in stands:  # (no empty list made per node)
                    stands[new] = []
                stands[new].append(by_id[old])
    return {n.id: _describe(n, repeats.get(n.id), notes.get(n.id), stands.get(n.id, ())) for n in drawn.nodes}


def _iterations(nodes: Sequence[Node]) -> list[str]:
    """One line per iteration a rolled node stands for: its name and shape."""
    def line(k: int, n: Node) -> str:
        shape = "" if n.shape is None else f" {shape_text(n.shape)}"
        return f"  {k}: {n.label if n.label != n.name else n.name}{shape}"
    lines = [line(k, n) for k, n in enumerate(nodes[:LISTED_ITERATIONS], 1)]
    if len(nodes) > LISTED_ITERATIONS:
        lines.append("  " + tr("\u2026 and {n} more", n=f"{len(nodes) - LISTED_ITERATIONS:,}"))
    return lines


def _describe(node: Node, repeats: int | None, note: str | None, stands: Sequence[Node] = ()) -> str:
    """A node's hover details (names, kinds, shapes and numbers as they are)."""
    lines = [tr("{name} ({kind})", name=node.name, kind=kind_word(node.kind))]
    if node.label != node.name:
        lines.append(node.label)
    if node.module:
        lines.append(tr("module: {module}", module=node.module))
    if node.shape is not None:
        lines.append(tr("tensor: {shape} {dtype} {device}", shape=shape_text(node.shape), dtype=node.dtype,
                        device=node.device))
    lines += [tr("saved {name}: {value}", name=k, value=v) for k, v in node.saved]
    if node.derivative is not None:
        lines.append(tr("made by: the {name} pass", name=_dot.pass_name(node.derivative)))
    if repeats:
        lines.append(tr("drawn once for {n} iterations", n=f"{repeats:,}"))
        if len({(n.label, n.shape) for n in stands}) > 1:  # (an op node that is the same each time: no list)
            lines += [tr("iteration: node"), *_iterations(stands)]
    if note:
        lines.append(note)
    return "\n".join(lines)


def _words(stepper: bool, overview: bool = False) -> dict[str, Any]:
    """The words of ``view.js``'s bar in the current language, for a language other than
    English (``view.js`` holds the English): button labels and titles by action, and the
    stepper's lines as templates whose ``{fields}`` it fills (``assets/DATA.md``).
    (The English titles in ``view.js`` are the actions' names: ``first``, ``zoom: zin``.)"""
    label = {"fit": tr("fit")}
    title = {"zout": tr("zoom out"), "fit": tr("fit the picture to the width"), "one": tr("actual size"),
             "zin": tr("zoom in")}
    if overview:  # a module overview's hint, and its panel's button
        label["open"] = tr("a click on a module box opens its ops")
        title["close"] = tr("close")
    if not stepper:
        return {"label": label, "title": title}
    label.update(prev=tr("\u2039 prev"), play=tr("play"), next=tr("next \u203a"))
    title.update(first=tr("first step"), prev=tr("previous step"), play=tr("play or pause"),
                 next=tr("next step"), last=tr("last step"))
    return {"label": label, "title": title, "slider": tr("the step shown"), "step": tr("step {k} / {n}"),
            "iteration": tr("iteration {k} of {n}"), "keeps": tr("the graph keeps {bytes} for backward")}


def _script(data: dict[str, Any]) -> str:
    """The picture's ``application/javascript``: ``assets/view.js`` and its call on ``data``.
    JupyterLab and nbconvert's HTML give the output's element as ``element``."""
    host = 'typeof element !== "undefined" ? element : null'
    # A module overview's clicks (assets/overview.js): in its script only, so others stay as they were
    extra, then = "", ""
    if "inside" in data:
        extra = _asset("overview.js")
        css = _json_for_script(_css("overview.css"))
        then = f"dynagraphOverview({host}, document.currentScript, {css});\n"
    return (f"(function () {{\n{_asset('view.js')}{extra}dynagraphView({host}, "
            f"{_json_for_script(data)}, {_json_for_script(_css())});\n{then}}})();\n")


@cache
def _css(name: str = "view.css") -> str:
    """``assets/view.css`` (or another style sheet there) without its comments (every picture
    carries view.css; a module overview, overview.css too)."""
    return re.sub(r"/\*.*?\*/\s*", "", _asset(name), flags=re.S)


def fragment(outs: Sequence[Output]) -> str:
    """The outputs as one HTML fragment for a page that runs scripts (as nbconvert or
    the docs show them): each ``text/html``, and each script in a ``<script>``."""
    # (the script holds no "</": its data is escaped by _json_for_script)
    parts = []
    for o in outs:
        if "text/html" in o.data:
            parts.append(o.data["text/html"])
        elif "application/javascript" in o.data:
            parts.append(f'<div><script>{o.data["application/javascript"]}</script></div>')
        elif "image/png" in o.data:
            size = o.metadata.get("image/png", {})
            parts.append(f'<div><img src="data:image/png;base64,{o.data["image/png"]}" '
                         f'width="{size.get("width", "")}" height="{size.get("height", "")}" alt=""></div>')
    return "".join(parts)



@cache
def _asset(name: str) -> str:
    return resources.files("dynagraph").joinpath("assets").joinpath(name).read_text()  # 3.10: one per call


def _json_for_script(data: dict[str, Any] | str) -> str:
    """JSON safe inside a <script> element (no ``</script>`` or ``<!--`` can close it)."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
