"""Run a Graphviz layout program: DOT text in, SVG/PNG/PDF out (DOT itself is
written by :mod:`dynagraph._dot`).

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

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["CACHE_BYTES", "FORMATS", "RenderTimeoutError", "RendererNotFoundError", "clear_cache",
           "compact_svg", "find_renderer", "pipe", "png_top", "svg_and_png", "svg_page"]

FORMATS = ("dot", "svg", "png", "pdf", "jpg")
# Rendered output kept for reuse, DOT text and result bytes together: a drawing of
# ~3,000 nodes is about 4 MB, so a handful of big ones or many small ones fit.
CACHE_BYTES = 32 * 2**20


class RendererNotFoundError(RuntimeError):
    """No Graphviz layout program could be found."""


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
    _run_both.cache_clear()
    _FOUND.clear()


class RenderTimeoutError(RuntimeError):
    """Graphviz took longer than its timeout to lay a graph out."""


class _ByteCache:
    """``fn``'s results by its arguments, the least recently used dropped past ``max_bytes``.

    An entry weighs what its result and its string arguments (the DOT text) hold in
    memory; one heavier than ``max_bytes`` is returned but not kept. Errors are not
    cached. ``__wrapped__`` is ``fn`` itself (to bypass the cache).
    """

    def __init__(self, fn: Callable[..., Any], max_bytes: int) -> None:
        self.__wrapped__ = fn
        self.max_bytes = max_bytes
        self._entries: OrderedDict = OrderedDict()  # args -> (result, weight)
        self._bytes = 0
        self._lock = threading.Lock()  # pictures are drawn from recording threads too

    def __call__(self, *args: Any) -> Any:
        with self._lock:
            if args in self._entries:
                self._entries.move_to_end(args)
                return self._entries[args][0]
        result = self.__wrapped__(*args)
        self._keep(args, result)
        return result

    def _keep(self, args: tuple[Any, ...], result: Any) -> None:
        parts = result if isinstance(result, tuple) else (result,)  # (svg_and_png: two pictures)
        weight = sum(map(sys.getsizeof, parts)) + sum(sys.getsizeof(a) for a in args if isinstance(a, str))
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
    out, err = _communicate([exe, f"-T{fmt}"], dot_text, fmt, timeout)
    _check_output(exe, fmt, out, err)
    return out


def _communicate(args: list[str], dot_text: str, fmt: str, timeout: float) -> tuple[bytes, bytes]:
    """Run the renderer ``args`` on ``dot_text``: its output and error output, checked for
    a timeout and a failed exit (``fmt`` names the format in the message)."""
    exe = args[0]
    # A session of its own, so that a timeout kills the renderer and anything it started.
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
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
    return out, err


_run = _ByteCache(_layout, CACHE_BYTES)


def svg_and_png(dot_text: str, dpi: int, *, timeout: float = 60) -> tuple[bytes, bytes]:
    """``dot_text`` laid out once and written both as SVG and as a PNG at ``dpi``.

    The SVG is the one :func:`pipe` writes (Graphviz's 72 dpi: 1 pt a CSS pt): the
    renderer writes both from one layout at ``dpi`` (``-Tsvg -o … -Tpng -o …``), whose
    SVG differs only in its size and scale, set back here. Where that size cannot be
    told for sure (its points end in .5 within the printed digits), the SVG is laid out
    again on its own. Cached as :func:`pipe` is. (A view makes its PNG with
    :func:`png_top` instead: only the rows its budget can keep are rasterized.)

    Raises:
        as :func:`pipe` does.
    """
    svg, png = _run_both(find_renderer(), dot_text, dpi, timeout)
    return svg, png


def _both(exe: str, dot_text: str, dpi: int, timeout: float) -> tuple[bytes, bytes]:
    head, brace, rest = dot_text.partition("{")
    with tempfile.TemporaryDirectory(prefix="dynagraph-") as tmp:
        svg_path, png_path = Path(tmp, "a.svg"), Path(tmp, "a.png")
        _, err = _communicate([exe, "-Tsvg", "-o", str(svg_path), "-Tpng", "-o", str(png_path)],
                              f"{head}{brace}\n  dpi={dpi};{rest}", "svg -Tpng", timeout)
        scaled, png = (path.read_bytes() if path.exists() else b"" for path in (svg_path, png_path))
    _check_output(exe, "svg", scaled, err)
    _check_output(exe, "png", png, err)
    svg = _unscaled(scaled, dpi)
    return (svg if svg is not None else _run(exe, dot_text, "svg", timeout)), png


_run_both = _ByteCache(_both, CACHE_BYTES)


def png_top(dot_text: str, svg: bytes, dpi: int, rows: int | None = None, *, timeout: float = 60) -> bytes:
    """``dot_text`` as a PNG at ``dpi``: the whole picture, or with ``rows`` only its top
    ``rows`` pixels, the rest not rasterized (Graphviz's ``viewport``: rasterizing costs
    about as the area, and a picture too big for a view's budget keeps only its top).

    ``svg`` is :func:`pipe`'s SVG of the same text: its page size and origin place the
    viewport on the picture's top edge, full width, so the rows are those of the whole
    picture's PNG (antialiasing may differ by a level in a few pixels). The whole
    picture where ``svg`` does not say where its page is. Cached as :func:`pipe` is.

    Raises:
        as :func:`pipe` does.
    """
    head, brace, rest = dot_text.partition("{")
    setting = f"dpi={dpi};"
    page = svg_page(svg)
    if rows is not None and page and rows < round(page[1] * dpi / 72):
        width, _, left, top = page  # (the page's top edge is at -top in the SVG, +top in DOT's points)
        tall = max(1, rows) * 72 / dpi
        setting += f' viewport="{width:.4f},{tall:.4f},1,{left + width / 2:.4f},{top - tall / 2:.4f}";'
    return _run(find_renderer(), f"{head}{brace}\n  {setting}{rest}", "png", timeout)


def svg_page(svg: bytes | str) -> tuple[float, float, float, float] | None:
    """``(width, height, left, top)`` of the page of Graphviz's SVG at 72 dpi, in the
    graph's points (its background polygon spans the page, the SVG's own size is rounded),
    or ``None`` where ``svg`` has no such polygon."""
    data = svg.encode() if isinstance(svg, str) else svg
    background = _BACKGROUND.search(data)
    if not background:
        return None
    numbers = [float(v) for v in re.findall(rb"-?\d+(?:\.\d+)?", background[1])]
    xs, ys = numbers[0::2], numbers[1::2]
    if len(xs) < 3 or len(xs) != len(ys):
        return None
    return max(xs) - min(xs), max(ys) - min(ys), min(xs), -min(ys)


_SCALED_HEAD = re.compile(rb'<svg width="(\d+)pt" height="(\d+)pt"\n'
                          rb' viewBox="0\.00 0\.00 (\d+)\.00 (\d+)\.00"')
_SCALE = re.compile(rb'transform="scale\(([\d.]+) ([\d.]+)\) rotate\(0\) translate\(')
_BACKGROUND = re.compile(rb'<polygon fill="[^"]*" stroke="[^"]*" points="([^"]*)"')


def _unscaled(svg: bytes, dpi: int) -> bytes | None:
    """Graphviz's SVG drawn at ``dpi`` as it draws it at 72 dpi, or ``None`` where its
    size at 72 dpi cannot be told for sure. The two differ only in the size
    (``width``/``height``/``viewBox``: the page's size in points, rounded, times
    ``dpi``/72) and the ``scale(…)`` of the outer group; the page's size comes from the
    background polygon, which spans it."""
    head, scale, background = _SCALED_HEAD.search(svg), _SCALE.search(svg), _BACKGROUND.search(svg)
    if not (head and scale and background) or head[1] != head[3] or head[2] != head[4]:
        return None
    numbers = [float(v) for v in re.findall(rb"-?\d+(?:\.\d+)?", background[1])]
    size = [max(numbers[0::2]) - min(numbers[0::2]), max(numbers[1::2]) - min(numbers[1::2])]
    whole = [int(v + 0.5) for v in size]  # Graphviz's ROUND
    if (any(abs(v % 1 - 0.5) < 0.01 or abs(v * dpi / 72 % 1 - 0.5) < 0.01 for v in size)  # (printed: ±0.005)
            or [int(v * dpi / 72 + 0.5) for v in size] != [int(head[1]), int(head[2])]):
        return None  # (a size near .5, or not the one written: lay it out again)
    w, h = whole
    page = b'<svg width="%dpt" height="%dpt"\n viewBox="0.00 0.00 %d.00 %d.00"' % (w, h, w, h)
    return (svg[:head.start()] + page + svg[head.end():scale.start()]
            + b'transform="scale(1 1) rotate(0) translate(' + svg[scale.end():])


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
