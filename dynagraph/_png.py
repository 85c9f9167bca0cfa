"""The picture's PNG, for viewers that run no script: drawn at the size the script's SVG
shows at 1:1, in a small palette, and cropped to its top (never shrunk) when it would not
fit what is left of a view's budget (:data:`dynagraph._page.MAX_BYTES`), with a strip at
its foot that says so. A title with Chinese in it is drawn above it by Pillow (see
:func:`dynagraph._picture.drawing`'s ``own_title``)."""

from __future__ import annotations

import base64
import io
import re
from typing import Any, NamedTuple

from . import _fonts, render
from ._language import tr

__all__ = ["CROP_NOTE_PT", "ONE_RUN_DOT", "ONE_RUN_NODES", "PALETTE_STRIDE", "PNG_COLOURS", "PNG_DENSITY",
           "PNG_DPI", "PNG_PIXELS", "TITLE_MARGIN_PT", "TITLE_PT", "Laid", "fit",
           "laid_out"]

# The picture for viewers without scripts: a PNG at 96 dpi, the size the script's SVG
# draws at 1:1 (1 pt = 4/3 CSS px), so that its text is as readable; in a palette of
# this many colours (about half the bytes of a full-colour PNG; 16 colours lose text on
# coloured nodes). A PNG that would take the view over its budget is cropped, never
# shrunk: it shows the picture's top (and left), and says so in a strip at its foot.
PNG_DPI = 96
PNG_COLOURS = 64
# The palette is made from every this-many-th row of the picture (a quarter of the time of
# all rows; every mark of a picture spans rows, and its pixels each take the nearest
# palette colour: on the zoo's pictures no farther from the renderer's than a palette of
# all rows, whose octree maps each pixel to its bucket's colour).
PALETTE_STRIDE = 4
PNG_PIXELS = 4_000_000  # a bigger PNG is cropped to this many pixels first (packing it takes time)
# A title drawn outside Graphviz (see _picture.drawing's own_title) as Graphviz draws one: _dot's graph
# font size in points, centred above the picture with this margin in points.
TITLE_PT = 10
TITLE_MARGIN_PT = 4


class Laid(NamedTuple):
    """What a picture's PNG is made from."""

    dot: str
    svg: bytes  # as the renderer wrote it: its page places the PNG's rows
    raster: bytes = b""  # the whole PNG, made in the SVG's run (a small DOT); empty: made by fit
    title: str = ""  # drawn above the PNG by Pillow (see _picture.drawing's own_title); empty: none


# A picture of at most this many nodes, whose DOT is at most ONE_RUN_DOT characters, gets its
# SVG and its whole PNG from one renderer run: a second run costs a start and a layout (5-20 %
# of such a view), and such a picture fits the budget whole. Counted from the DOT, not its
# length (a replay's DOT carries each step's ids, twice a drawing's): on the zoo every picture
# cropped to fit draws 85 nodes or more, and none of 54 or fewer is cropped, while a DOT of
# 21,000-23,000 characters is either (a 2-layer Llama's replay fits, a T5 drawing does not).
ONE_RUN_NODES = 64
ONE_RUN_DOT = 40_000
_NODE_LINE = re.compile(r"^\s*(?!(?:graph|node|edge|subgraph)\b)[^\s\[{}=>-]+ *\[", re.M)  # `name [attrs]`


def laid_out(dot: str) -> tuple[bytes, bytes]:
    """A view's SVG of ``dot``, with its whole PNG from the same renderer run where the
    picture is small (:data:`ONE_RUN_NODES`); else no PNG yet (:func:`fit` makes the
    part kept). Decided from the text alone."""
    one_run = len(dot) <= ONE_RUN_DOT and len(_NODE_LINE.findall(dot)) <= ONE_RUN_NODES
    return render.svg_and_png(dot, PNG_DPI) if one_run else (render.pipe(dot, "svg"), b"")


def fit(laid: Laid, room: int) -> tuple[str, tuple[int, int]] | None:
    """The PNG of ``laid``, its output at most ``room`` bytes: ``(base64, its size in
    pixels)``, cropped to the picture's top (and left, when still too big), with a strip
    at its foot that says so and where the whole picture shows; ``None`` where not even
    a strip of it fits.

    A PNG made whole with the SVG (``laid.raster``: a small DOT) is cut from that.
    Otherwise only about the rows that can fit are rasterized (``render.png_top``;
    rasterizing and packing cost about as the area): as many as ``room`` holds at
    :data:`PNG_DENSITY` and a quarter more, then, if all of those fit with room to spare,
    once more as many as the bytes they took say fit."""
    page = render.svg_page(laid.svg)
    width, height = ((round(page[0] * PNG_DPI / 72), round(page[1] * PNG_DPI / 72)) if page else (0, 0))
    rows = None
    if width and height and not laid.raster:
        rows = min(height, max(1, PNG_PIXELS // width))  # (packing a huge PNG to crop it after takes seconds)
        if width * rows * PNG_DENSITY > room:  # it will be cropped: rasterize about what fits
            rows = min(rows, max(64, int(room / (width * PNG_DENSITY) * 1.25)))
    for again in (True, False):
        fitted = _fitted(laid, room, rows, (width, height))
        if fitted is None:
            return None
        b64, size, kept = fitted
        if not (again and rows is not None and kept >= rows and rows < min(height, PNG_PIXELS // width)
                and len(b64) < 0.9 * room):
            return b64, size
        rows = min(height, PNG_PIXELS // width, int(rows * 0.95 * room / len(b64)))  # (bytes grow as rows)
    return b64, size


# What a view's PNG takes, base64, per pixel of its picture: 0.045-0.08 on the zoo's models
# (white space packs to almost nothing); its rows too many for the budget are not rasterized.
PNG_DENSITY = 0.06


def _fitted(laid: Laid, room: int, rows: int | None, whole: tuple[int, int]) -> tuple[str, tuple[int, int],
                                                                                     int] | None:
    """The PNG of ``laid``'s top ``rows`` rows (all: ``None``) of a picture ``whole``
    pixels in size, cut to at most ``room`` bytes: ``(base64, size, rows it shows of the
    picture)``, or ``None`` where it cannot be made."""
    from PIL import Image

    try:
        png = laid.raster or render.png_top(laid.dot, laid.svg, PNG_DPI, rows)
        with Image.open(io.BytesIO(png)) as raw:
            im = raw.convert("RGB")
    except Image.DecompressionBombError:  # (over ~180 million pixels: no PNG, its text shows)
        return None
    strip = 0
    if laid.title:
        titled = _titled(im, laid.title, PNG_DPI)
        strip, im = titled.height - im.height, titled
    full = im.size if rows is None or rows >= whole[1] else (im.width, whole[1] + strip)
    w, h = im.size
    if w * h > PNG_PIXELS:
        h = max(1, PNG_PIXELS // w)
        w = min(w, PNG_PIXELS // h)
    while True:
        shown = im if (w, h) == full else _cropped(im.crop((0, 0, w, h)), full)
        b64 = _encoded(shown, shown.height - h)
        if len(b64) <= room:
            return b64, shown.size, h - strip
        if w * h <= 64 * 64:
            return None
        scale = 0.9 * room / len(b64)  # (bytes grow about as the area)
        if h * scale >= min(h, 3 * w, 400):  # a tall picture: its top
            h = max(1, int(h * scale))
        else:
            h, w = min(h, max(32, int(h * scale ** 0.5))), max(32, int(w * scale ** 0.5))


# The strip under a cropped PNG: text this many points (the picture's node text's size).
CROP_NOTE_PT = 10


def _cropped(im: Any, full: tuple[int, int]) -> Any:
    """``im``, the top-left of a picture ``full`` pixels in size, with a strip at its
    foot saying that it is cropped and where the whole picture shows."""
    from PIL import Image, ImageDraw, ImageFont

    shown = (f"{im.width:,} x {im.height:,}" if im.width < full[0] else f"{im.height:,}")
    note = tr("Cropped: the top {shown} px of a {w} x {h} px picture. The whole picture shows in Jupyter "
              "once this cell has run or the notebook is trusted.",
              shown=shown, w=f"{full[0]:,}", h=f"{full[1]:,}")
    size, cjk = round(CROP_NOTE_PT * PNG_DPI / 72), _fonts.needs_cjk_font(note)
    font = _fonts.pillow_font(size) if cjk else None
    if font is None:
        font = ImageFont.load_default(size)
    draw = ImageDraw.Draw(im)
    lines: list[str] = []
    for word in re.findall(r"[\x00-\x7f]+|." if cjk else r"\S+\s*", note):  # (Chinese: wrap at any character)
        if lines and draw.textlength((lines[-1] + word).rstrip(), font=font) <= im.width - 8:
            lines[-1] += word
        else:
            lines.append(word)
    lines = [line.strip() for line in lines]
    pad, step = 4, round(size * 1.3)
    out = Image.new("RGB", (im.width, im.height + 2 * pad + step * len(lines)), "#fff3bf")
    out.paste(im, (0, 0))
    draw = ImageDraw.Draw(out)
    draw.line([(0, im.height), (im.width, im.height)], fill="#d9480f", width=2)
    for i, line in enumerate(lines):
        draw.text((4, im.height + pad + i * step), line, fill="black", font=font)
    return out


def _titled(im: Any, title: str, dpi: int) -> Any:
    """``im`` (a picture drawn at ``dpi``) with ``title`` above it, drawn by Pillow in
    Noto Sans SC as Graphviz draws a title: :data:`TITLE_PT`, black, centred, each line
    of ``title`` on its own line."""
    from PIL import Image, ImageDraw

    font = _fonts.pillow_font(max(1, round(TITLE_PT * dpi / 72)))
    margin = round(TITLE_MARGIN_PT * dpi / 72)
    spacing = round(0.2 * TITLE_PT * dpi / 72)
    box = ImageDraw.Draw(im).multiline_textbbox((0, 0), title, font=font, spacing=spacing, align="center")
    left, top, right, bottom = map(int, box)
    width, strip = max(im.width, right - left + 2 * margin), bottom - top + 2 * margin
    out = Image.new("RGB", (width, im.height + strip), im.getpixel((0, 0)))  # Graphviz's background
    out.paste(im, ((width - im.width) // 2, strip))
    # (at the strip's foot: the picture's own margin is under it, as under Graphviz's title)
    ImageDraw.Draw(out).multiline_text(((width - (right - left)) // 2 - left, strip - bottom), title,
                                       fill="black", font=font, spacing=spacing, align="center")
    return out


def _encoded(im: Any, foot: int = 0) -> str:
    """``im`` as a PNG of :data:`PNG_COLOURS` colours, base64: its palette is Pillow's fast
    octree of every :data:`PALETTE_STRIDE`-th row (and every row of its ``foot``, a
    crop strip whose 2-px line may fall between them), and every pixel takes the
    palette's nearest colour (no dithering)."""
    from PIL import Image

    w, h = im.size
    sample = im.resize((w, max(1, (h - foot) // PALETTE_STRIDE)), Image.Resampling.NEAREST,
                       box=(0, 0, w, h - foot))
    if foot:
        rows = Image.new(im.mode, (w, sample.height + foot))
        rows.paste(sample, (0, 0))
        rows.paste(im.crop((0, h - foot, w, h)), (0, sample.height))
        sample = rows
    palette = sample.quantize(PNG_COLOURS, method=Image.Quantize.FASTOCTREE)
    buf = io.BytesIO()
    im.quantize(palette=palette, dither=Image.Dither.NONE).save(buf, "PNG")
    return base64.b64encode(buf.getvalue()).decode()
