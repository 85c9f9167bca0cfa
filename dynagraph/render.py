"""Turn graph records into DOT text, and DOT into SVG/PNG with a Graphviz renderer.

Renderer order (first found wins):

1. ``DYNAGRAPH_DOT`` environment variable: a command name or path of a ``dot``-
   compatible program (set it to ``dot`` to prefer a system Graphviz).
2. ``graphviz-pure`` (the PyPI package of that name, pinned in requirements.txt):
   the same layout on every machine, so stored notebook outputs compare equal
   whether or not the machine has a system Graphviz.
3. The system ``dot`` from Graphviz.

A successful lookup is remembered (a failed one is retried on the next call, so
``pip install graphviz-pure`` helps without a restart). Rendered output is cached by
DOT text and format, at most :data:`CACHE_BYTES` in all (least recently used first
out); :func:`clear_cache` empties it.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._records import Node
    from ._roll import Block

__all__ = ["CACHE_BYTES", "STYLE", "Overlay", "RenderTimeoutError", "RendererNotFoundError", "clear_cache",
           "compact_svg", "find_renderer", "frames", "pipe", "to_dot"]

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
FORMATS = ("dot", "svg", "png", "pdf", "jpg")
# A leaf feeding more ops than this is drawn once per op: small graphs keep one box
# per tensor, while an RNN weight used at every step no longer fans out everywhere.
SPLIT_LEAVES = 3
# Rendered output kept for reuse, DOT text and result bytes together: a drawing of
# ~3,000 nodes is about 4 MB, so a handful of big ones or many small ones fit.
CACHE_BYTES = 32 * 2**20
# Where a drawn node goes: ((rolled block or None, module path or None), node, DOT name).
_Place = tuple[tuple[int | None, str | None], "Node", str]


class RendererNotFoundError(RuntimeError):
    """No Graphviz layout program could be found."""


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


@dataclass
class Overlay:
    """What a view adds to a graph's picture, by node and edge id (turned into DOT here).

    Attributes:
        badges: ``{node id: text}`` drawn in red beside the node (backward order ``#3``,
            the step that made a node).
        edge_norms: ``{(src, dst): gradient norm}``: edge width and label from the norm,
            arrows turned to point the way the gradient flows.
        highlight: Node ids outlined in red (a diff's new nodes).
        block_notes: ``{block index: text}`` added under a rolled block's ``×N`` title
            (the per-iteration gradient sparkline).
        notes: ``{node id: text}`` added as a last line inside the node (saved bytes).
        fills: ``{node id: colour}`` replacing the node's fill (its share of memory).
    """

    badges: dict[int, str] = field(default_factory=dict)
    edge_norms: dict[tuple[int, int], float] = field(default_factory=dict)
    highlight: set[int] = field(default_factory=set)
    block_notes: dict[int, str] = field(default_factory=dict)
    notes: dict[int, str] = field(default_factory=dict)
    fills: dict[int, str] = field(default_factory=dict)


def to_dot(nodes: Sequence[Node], edges: Sequence[tuple[int, int]],
           module_types: Mapping[str, str] | None = None, *, title: str | None = None,
           overlay: Overlay | None = None, blocks: Sequence[Block] = (),
           split_leaves: int | None = SPLIT_LEAVES) -> str:
    """DOT text for the records, modules drawn as nested clusters.

    Args:
        nodes, edges: Records from :func:`dynagraph.capture.capture`.
        module_types: ``{module name: class name}`` for cluster titles.
        title: Drawn above the graph.
        overlay: An :class:`Overlay` (badges, edge norms, highlights).
        blocks: Rolled blocks (:class:`dynagraph._roll.Block`): each drawn as a frame
            titled ``×N`` around its representative nodes, its loop edges dashed.
        split_leaves: Draw a parameter or input that feeds more than this many ops
            once per op instead of as one node with a large fan-out (which makes
            layouts slow and tangled); ``None`` never splits.

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
    tree: dict = {}  # (block index or None, module path) -> DOT node lines
    for key, node, name in places:
        tree.setdefault(key, []).append(_node_line(node, name, _node_extra(node.id, overlay),
                                                   overlay.notes.get(node.id, "")))
    lines.extend(_frames_dot(tree, module_types, blocks, overlay.block_notes))
    loops = {edge for block in blocks for edge in block.loops}
    span = _norm_span(overlay.edge_norms)
    for k, (src, dst) in enumerate(edges):
        a = copies.get((src, dst), f"n{src}")
        extra = _edge_extra((src, dst), overlay, span, (src, dst) in loops)
        lines.append(f'  {a} -> n{dst} [id="e{k}" class="dg-edge dg-from-{src} dg-to-{dst}"'
                     f"{' ' + extra if extra else ''}]\n")
    lines.append("}\n")
    return "".join(lines)


def _node_extra(nid: int, overlay: Overlay) -> str:
    parts = []
    if nid in overlay.badges:
        parts.append(f'xlabel=<<FONT COLOR="#c92a2a">{_html_text(overlay.badges[nid])}</FONT>>')
    if nid in overlay.highlight:
        parts.append('color="#e03131" penwidth=2.5')
    if nid in overlay.fills:  # after the kind's style: the later fillcolor wins
        parts.append(f'fillcolor="{overlay.fills[nid]}"')
    return " ".join(parts)


def _html_text(text: str) -> str:
    """``text`` for a Graphviz HTML-like label: markup characters as entities,
    backslashes doubled (Graphviz expands ``\\N`` here too) and characters that
    cannot be drawn as escapes (:func:`_visible`)."""
    text = _visible(text.replace("\r", "")).replace("\\", "\\\\")
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _edge_extra(edge: tuple[int, int], overlay: Overlay, span: tuple[float, float], loop: bool) -> str:
    parts = ['style=dashed color="#e8590c" constraint=false'] if loop else []
    if edge in overlay.edge_norms:
        v = overlay.edge_norms[edge]
        width, colour = _norm_width(v, span), _norm_colour(v)
        parts.append(f'dir=back penwidth={width:.2f} color="{colour}" '  # arrows follow the gradient
                     f'label="{v:.3g}" fontcolor="{colour}"')
    return " ".join(parts)


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
           split_leaves: int | None = SPLIT_LEAVES) -> list[list[int]]:
    """Node ids inside each frame, in the order :func:`to_dot` numbers them ``dg-f<k>``."""
    members: dict = {}
    for (block, path), node, _ in _places(nodes, edges, blocks, split_leaves)[0]:
        if block is not None:
            members.setdefault(("block", block), set()).add(node.id)
        parts = path.split(".") if path is not None else []
        for i in range(1, len(parts) + 1):
            members.setdefault((block, ".".join(parts[:i])), set()).add(node.id)
    return [sorted(members[key]) for key in _frame_order(members)]


def _places(nodes: Sequence[Node], edges: Sequence[tuple[int, int]], blocks: Sequence[Block],
            split_leaves: int | None) -> tuple[list[_Place], dict[tuple[int, int], str]]:
    """Where each drawn node goes: ``[((block, module), node, DOT name)]`` and the
    DOT name of each copy of a split leaf, by ``(leaf, consumer)``."""
    consumers: dict[int, list[int]] = {}
    for src, dst in edges:
        users = consumers.setdefault(src, [])
        if dst not in users:
            users.append(dst)
    by_id = {node.id: node for node in nodes}
    in_block = {nid: k for k, block in enumerate(blocks) for nid in block.nodes}
    places: list[_Place]
    copies: dict[tuple[int, int], str]
    places, copies = [], {}
    for node in nodes:
        users = consumers.get(node.id, [])
        if split_leaves is not None and node.kind in ("parameter", "input") and len(users) > split_leaves:
            for k, user in enumerate(users):
                name = copies[(node.id, user)] = f"n{node.id}_{k}"
                where = node.module if node.module is not None else by_id[user].module
                places.append(((in_block.get(user), where), node, name))
        else:
            places.append(((in_block.get(node.id), node.module), node, f"n{node.id}"))
    return places, copies


def _frame_order(keys: Iterable[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Frames sorted as :func:`_frames_dot` writes them."""
    return sorted(keys, key=lambda k: (k[0] != "block", -1 if k[0] in (None, "block") else k[0],
                                       str(k[1])))


def _node_line(node: Node, name: str, extra: str, note: str = "") -> str:
    label = node_label(node) + (f"\n{note}" if note else "")
    return (f'  {name} [id="{name}" class="dg-{node.kind} dg-n{node.id}" '
            f"label={quote(label)} {STYLE[node.kind]}{' ' + extra if extra else ''}]\n")


def node_label(node: Node) -> str:
    """The text drawn inside a node: its label, then shape, dtype and device."""
    lines = [node.label]
    if node.kind == "custom":
        lines.append("(custom Function)")
    if node.shape is not None and node.kind != "module":
        lines.append(_meta_line(node))
    lines.extend(f"saved {k}: {v}" for k, v in node.saved)
    return "\n".join(lines)


def _meta_line(node: Node) -> str:
    text = str(tuple(node.shape or ()))
    if node.dtype not in (None, "float32"):
        text += f" {node.dtype}"
    if node.device not in (None, "cpu"):
        text += f" {node.device}"
    return text


def _frames_dot(tree: dict[tuple[int | None, str | None], list[str]], module_types: Mapping[str, str],
                blocks: Sequence[Block], notes: Mapping[int, str]) -> list[str]:
    """Nodes inside nested ``subgraph cluster_...`` blocks: rolled blocks, then modules."""
    out = list(tree.get((None, None), []))
    children: dict = {}  # (block, parent path) -> child paths
    for b, path in tree:
        if path is None:
            continue
        parts = path.split(".")
        for i in range(1, len(parts) + 1):
            children.setdefault((b, ".".join(parts[:i - 1]) or None), set()).add(".".join(parts[:i]))
    keys = [("block", k) for k in range(len(blocks))]
    keys += [(b, p) for (b, _), paths in children.items() for p in paths]
    number = {key: i for i, key in enumerate(_frame_order(keys))}

    def emit(block: int | None, path: str, indent: str) -> list[str]:
        kind = module_types.get(path)
        title = f"{path}: {kind}" if kind else path
        name = f"cluster_{path}" if block is None else f"cluster_roll{block}_{path}"
        lines = [f"{indent}subgraph {quote(name)} {{\n",
                 f'{indent}  id="f{number[(block, path)]}" class="dg-frame dg-f{number[(block, path)]}" '
                 f'label={quote(title)} style="rounded,dashed" color="#868e96" fontcolor="#495057"\n']
        lines += [indent + line for line in tree.get((block, path), [])]
        for child in sorted(children.get((block, path), ())):
            lines += emit(block, child, indent + "  ")
        lines.append(f"{indent}}}\n")
        return lines

    for k, block in enumerate(blocks):
        title = f"\u00d7{block.repeats:,}  {block.label}" + (f"\n{notes[k]}" if k in notes else "")
        f = number[("block", k)]
        out += [f'  subgraph "cluster_roll{k}" {{\n',
                f'    id="f{f}" class="dg-frame dg-block dg-f{f}" label={quote(title)} '
                'style="rounded,filled" fillcolor="#fff9db" color="#f08c00" fontcolor="#e8590c"\n']
        out += ["  " + line for line in tree.get((k, None), [])]
        for top in sorted(children.get((k, None), ())):
            out += emit(k, top, "    ")
        out.append("  }\n")
    for top in sorted(children.get((None, None), ())):
        out += emit(None, top, "  ")
    return out


def _candidates() -> list[str]:
    env = os.environ.get("DYNAGRAPH_DOT")
    if env:
        return [env]
    here = Path(sys.executable).parent  # the venv's bin/, even if not on PATH
    return [str(here / "graphviz-pure"), "graphviz-pure", "dot"]


_FOUND: dict[tuple[str, ...], str] = {}  # successful lookups only: a failed one is retried


def _resolve(candidates: tuple[str, ...]) -> str | None:
    """Path of the first of ``candidates`` that is an executable, remembered once found."""
    if candidates not in _FOUND:
        found = next(filter(None, map(shutil.which, candidates)), None)
        if found is None:
            return None
        _FOUND[candidates] = found
    return _FOUND[candidates]


def find_renderer() -> str:
    """Path of the Graphviz program to use (see the module docstring for the order).

    Raises:
        RendererNotFoundError: none found; the message says how to install one.
    """
    found = _resolve(tuple(_candidates()))
    if found is None:
        env = os.environ.get("DYNAGRAPH_DOT")
        where = f"DYNAGRAPH_DOT={env!r} is not an executable" if env else "no Graphviz program found"
        raise RendererNotFoundError(
            f"cannot lay out the graph: {where}. Install one with "
            "`pip install graphviz-pure` (no system packages needed), or install "
            "Graphviz (`apt install graphviz`, `brew install graphviz`, "
            "`conda install graphviz`). Graph.to_dot() works without either."
        )
    return found


def pipe(dot_text: str, fmt: str = "svg", *, timeout: float = 60) -> bytes:
    """Lay out ``dot_text`` and return the rendered bytes in format ``fmt``.

    The result is cached (see :func:`clear_cache`): the same text and format again
    returns the same bytes without running the renderer.

    Raises:
        ValueError: unknown format.
        RendererNotFoundError: no renderer, or PDF asked of ``graphviz-pure``.
        RenderTimeoutError: layout ran past ``timeout`` seconds (the renderer is killed).
        RuntimeError: the renderer failed, or wrote something that is not a ``fmt``
            file (the first and last lines of its error output are included).
    """
    if fmt not in FORMATS or fmt == "dot":
        raise ValueError(f"unknown format: {fmt!r} (must be one of {sorted(set(FORMATS) - {'dot'})})")
    exe = find_renderer()
    if fmt == "pdf" and "graphviz-pure" in Path(exe).name:
        exe = shutil.which("dot") or ""
        if not exe:
            raise RendererNotFoundError(
                "PDF output needs the system Graphviz (graphviz-pure writes svg and png): "
                "install Graphviz (`apt install graphviz`) or save as .svg or .png"
            )
    return _run(exe, dot_text, fmt, timeout)


def clear_cache() -> None:
    """Forget every cached picture and the renderer lookup, freeing their memory.

    :func:`pipe` keeps up to :data:`CACHE_BYTES` of rendered output (least recently
    used dropped first); after this the next drawing runs the renderer again, and
    the renderer is looked up again (say, after installing Graphviz).

    Example:
        >>> import dynagraph.render
        >>> dynagraph.render.clear_cache()
    """
    _run.cache_clear()
    _FOUND.clear()


class RenderTimeoutError(RuntimeError):
    """Graphviz took longer than its timeout to lay a graph out."""


class _ByteCache:
    """``fn``'s results by its arguments, the least recently used dropped past ``max_bytes``.

    An entry weighs what its result and its string arguments (the DOT text) hold in
    memory; one heavier than ``max_bytes`` is returned but not kept. Errors are not
    cached. ``__wrapped__`` is ``fn`` itself (to bypass the cache).
    """

    def __init__(self, fn: Callable[..., bytes], max_bytes: int) -> None:
        self.__wrapped__ = fn
        self.max_bytes = max_bytes
        self._entries: OrderedDict = OrderedDict()  # args -> (result, weight)
        self._bytes = 0
        self._lock = threading.Lock()  # pictures are drawn from recording threads too

    def __call__(self, *args: Any) -> bytes:
        with self._lock:
            if args in self._entries:
                self._entries.move_to_end(args)
                return self._entries[args][0]
        result = self.__wrapped__(*args)
        self._keep(args, result)
        return result

    def _keep(self, args: tuple[Any, ...], result: bytes) -> None:
        weight = sys.getsizeof(result) + sum(sys.getsizeof(a) for a in args if isinstance(a, str))
        with self._lock:
            if weight > self.max_bytes or args in self._entries:
                return
            self._entries[args] = (result, weight)
            self._bytes += weight
            while self._bytes > self.max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped

    def cache_info(self) -> tuple[int, int]:
        """``(entries, bytes)`` held now."""
        with self._lock:
            return len(self._entries), self._bytes

    def cache_clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0


def _layout(exe: str, dot_text: str, fmt: str, timeout: float) -> bytes:
    """Run ``exe -T<fmt>`` on ``dot_text`` and return its checked output."""
    # A session of its own, so that a timeout kills the renderer and anything it started.
    proc = subprocess.Popen([exe, f"-T{fmt}"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(dot_text.encode(), timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        raise RenderTimeoutError(
            f"{Path(exe).name} did not lay out {_size_of(dot_text)} within {timeout:g} s. "
            "Draw less: let the picture roll repeats and fold (the default max_nodes), "
            "collapse modules with depth=1, or draw a shorter sequence or fewer layers."
        ) from None
    if proc.returncode != 0:
        raise RuntimeError(f"{Path(exe).name} -T{fmt} failed: {_stderr_summary(err)}")
    _check_output(exe, fmt, out, err)
    return out


_run = _ByteCache(_layout, CACHE_BYTES)


def _stderr_summary(err: bytes, keep: int = 5, width: int = 200) -> str:
    """A renderer's error output cut to its first and last ``keep`` lines, each at most ``width``."""
    lines = [ln if len(ln) <= width else ln[:width] + "…"
             for ln in err.decode(errors="replace").strip().splitlines()]
    if len(lines) > 2 * keep:
        lines = lines[:keep] + [f"… {len(lines) - 2 * keep} lines …"] + lines[-keep:]
    return "\n".join(lines)


_MAGIC = {"png": b"\x89PNG\r\n\x1a\n", "jpg": b"\xff\xd8\xff", "pdf": b"%PDF"}
_SVG_LEAD = re.compile(rb"\s*(?:(?:<\?xml.*?\?>|<!DOCTYPE[^>]*>|<!--.*?-->)\s*)*", re.S)


def _check_output(exe: str, fmt: str, out: bytes, err: bytes) -> None:
    """Raise unless ``out`` looks like a whole ``fmt`` file (magic bytes; SVG: ``<svg`` to ``</svg>``)."""
    if fmt == "svg":
        lead = _SVG_LEAD.match(out)  # always matches, maybe nothing
        ok = out[lead.end() if lead else 0:].startswith(b"<svg") and out.rstrip().endswith(b"</svg>")
    else:
        ok = out.startswith(_MAGIC[fmt])
    if ok:
        return
    what = "nothing" if not out else f"{len(out):,} bytes that are not {fmt.upper()} ({out[:20]!r}…)"
    said = f"; it said: {_stderr_summary(err)}" if err.strip() else ""
    raise RuntimeError(
        f"{Path(exe).name} -T{fmt} wrote {what}{said}. The renderer is broken or not Graphviz: "
        "reinstall it (`pip install --force-reinstall graphviz-pure`) or set DYNAGRAPH_DOT "
        "to a working Graphviz `dot`."
    )


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        proc.kill()
    proc.communicate()


def _size_of(dot_text: str) -> str:
    """``a graph of N nodes and M edges``, counted from DOT statements (any node names)."""
    # `name [attrs]` lines, not the `graph`/`node`/`edge` defaults
    nodes = len(re.findall(r'^\s*(?!(?:graph|node|edge)\b)[^\s\[{}=>-]+ *\[', dot_text, re.M))
    edges = dot_text.count(" -> ")
    return f"a graph of {nodes:,} nodes and {edges:,} edges"


_PROLOGUE = re.compile(r"<\?xml.*?\?>\s*|<!DOCTYPE.*?>\s*|<!--.*?-->\s*", re.S)
_TITLE = re.compile(r"<title>[^<]*</title>\n?")
_GROUP_ID = re.compile(r'(<g) id="[^"]*"')
_NUMBER = re.compile(r"-?\d+\.\d+")
_GEOMETRY = re.compile(r'(\s(?:points|d|x|y|cx|cy|rx|ry|width|height|viewBox|transform|stroke-width)=")'
                       r'([^"]*)')
_ROUNDED = re.compile(r'(<g class="node[^"]*">\n)<path ([^>]*?) d="M([^"]*)"/>')
_SVG_STYLE = ("<style>text{font-family:Helvetica,Arial,sans-serif}"
              "text:not([font-size]){font-size:10px}text:not([text-anchor]){text-anchor:middle}</style>")


def compact_svg(svg: bytes | str) -> str:
    """Graphviz SVG made small and stand-alone, for a data-URI ``<img>``.

    Drops the prologue, comments, titles and group ids (the page finds parts by
    class), writes rounded node boxes as ``<rect rx>`` instead of a long path,
    rounds coordinates to whole points, and moves the common font attributes into
    one ``<style>``: about a third of Graphviz's size, the same picture.
    """
    text = svg.decode() if isinstance(svg, bytes) else svg
    text = _TITLE.sub("", _PROLOGUE.sub("", text))
    text = _GROUP_ID.sub(r"\1", text.replace("&#45;", "-"))
    text = _ROUNDED.sub(_rect, text)
    for attr in (' xml:space="preserve"', ' font-family="Helvetica,sans-Serif"',
                 ' font-size="10.00"', ' text-anchor="middle"'):
        text = text.replace(attr, "")
    text = _GEOMETRY.sub(lambda m: m[1] + _NUMBER.sub(lambda n: _short(n[0]), m[2]), text)
    return re.sub(r"(<svg\b[^>]*>)", lambda m: m[1] + _SVG_STYLE, text, count=1)


def _rect(m: re.Match[str]) -> str:
    """A rounded box's path (Graphviz's ``style=rounded``) as the same ``<rect rx>``."""
    numbers = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", m[3])]
    xs, ys = numbers[0::2], numbers[1::2]
    x, y, w, h = min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)
    return (f'{m[1]}<rect {m[2]} x="{x:.0f}" y="{y:.0f}" width="{w:.0f}" height="{h:.0f}" '
            f'rx="{min(w, h) / 6:.0f}"/>')


def _short(number: str) -> str:
    value = round(float(number))
    return "0" if value == 0 else str(value)
