"""Viewers that sanitize HTML, and dark pages: every committed notebook's pictures show
through ``nbconvert --sanitize-html`` and through an nh3 viewer (as GitHub-like sites
show notebooks) with no control text, and a view's text is readable (WCAG contrast of
at least 4.5) on a dark page without theme variables and on the docs site in dark mode.

Screenshots go to artifacts/ (git-ignored) for a person to look at.
"""

from __future__ import annotations

import base64
import functools
import html
import io
import json
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import nh3
import pytest
import torch
from PIL import Image

import dynagraph as dg

from _chromium import ARTIFACTS, ROOT, Watch, chromium, html_page, open_file, open_html
from _helpers import html_of, pictures

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
MIN_CONTRAST = 4.5  # WCAG 2 level AA for normal text


def _notebook(path: Path) -> dict:
    return json.loads(path.read_text())


def _joined(value: str | list[str]) -> str:
    """A notebook's multi-line string (stored as a string or as a list of lines)."""
    return value if isinstance(value, str) else "".join(value)


def picture_outputs(nb: dict) -> list[tuple[str, int]]:
    """``(cell id, output index)`` of every dynagraph picture output in a notebook's JSON."""
    return [(cell["id"], j) for cell in nb["cells"] for j, out in enumerate(cell.get("outputs", []))
            if out.get("metadata", {}).get("dynagraph") == "picture"]


def png_width(data: str) -> int:
    """The width in pixels that a base64 PNG's header (IHDR) states."""
    raw = base64.b64decode(_joined(data))
    if raw[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"not a PNG: it starts with {raw[:8]!r}")
    return struct.unpack(">I", raw[16:20])[0]


# -- What a page shows: loaded pictures, and no control text -----------------------

# (Checks read outputs only, where dynagraph writes: prose and code are the authors'.)
# Each output element's visible text (innerText: no <style>/<script> text, nothing
# hidden) and its images, with whether each loaded.
_OUTPUT_JS = """([cellId, sel, j]) => {
  const cell = document.getElementById('cell-id=' + cellId);
  if (!cell) return null;
  const outs = cell.querySelectorAll(sel);
  const o = outs[j];
  if (!o) return {count: outs.length, images: []};
  return {count: outs.length, images: [...o.querySelectorAll('img')].map(i => ({
    src: (i.getAttribute('src') || '').slice(0, 30), width: i.complete ? i.naturalWidth : 0}))};
}"""
_TEXTS_JS = "sel => [...document.querySelectorAll(sel)].map(o => o.innerText)"

# The words on the picture's buttons (view.js), and what else a bar of them shows:
# arrows, the zoom buttons' signs and the zoom percent.
_LABELS = re.compile(r"prev|play|next|fit|1:1")
_BAR_REST = re.compile(r"[\s\u2039\u203a\u00ab\u00bb\u2212+%\d]*")
# Text that is the view's code or markup, not what it shows: CSS, JavaScript, tags
# that a sanitizer escaped (shown as text instead of being dropped or kept).
_CODE_TEXT = ("dg-out {", ".dg-", "dynagraphView", "function (", "&lt;", "<div", "<details", "<summary",
              "<button", "<style", "<script", "<img", "<svg", "<span", "<table", "<ol", "<li", "<b>", "<i>")


def control_text(texts: list[str]) -> list[str]:
    """The lines of ``texts`` (outputs' visible text) that are controls or code: a line
    made only of button labels ("‹ prev", "play", "fit", "1:1"; joined or apart), or
    one that holds CSS, JavaScript or an escaped tag."""
    bad = []
    for text in texts:
        for line in text.splitlines():
            if _LABELS.search(line) and _BAR_REST.fullmatch(_LABELS.sub("", line)):
                bad.append(f"button labels: {line.strip()!r}")
            bad += [f"code or markup {c!r}: {line.strip()[:80]!r}" for c in _CODE_TEXT if c in line]
    return bad


# What a viewer without scripts cannot do, asked for or spoken of as there: no cell runs
# and no notebook can be trusted on GitHub or in sanitized HTML, and no stepper plays.
_ASKS = re.compile(r"run the cell|trust the notebook|the stepper plays|请运行|或者信任|步进器会播放", re.I)


def asking_text(texts: list[str]) -> list[str]:
    """The lines of ``texts`` (outputs' visible text) that ask a reader to run or trust
    what cannot be run or trusted where no script runs, or speak of a stepper there."""
    return [f"asks for what cannot be done here: {line.strip()[:100]!r}"
            for text in texts for line in text.splitlines() if _ASKS.search(line)]


def shown_problems(page, nb: dict, out_sel: str) -> list[str]:
    """What is wrong on ``page``, a notebook ``nb`` as a viewer shows it (each cell an
    element with id ``cell-id=<id>``, each output in it an element matching ``out_sel``):
    a picture output that shows no loaded image as wide as its PNG's header says, and any
    control text, or text that asks for what cannot be done there, in any output. Empty:
    nothing."""
    cells = {cell["id"]: cell for cell in nb["cells"]}
    problems = []
    for cell_id, j in picture_outputs(nb):
        found = page.evaluate(_OUTPUT_JS, [cell_id, out_sel, j])
        outputs = cells[cell_id]["outputs"]
        if found is None or found["count"] != len(outputs):
            problems.append(f"cell {cell_id}: the page shows {found and found['count']} outputs, "
                            f"the notebook has {len(outputs)}")
            continue
        png = outputs[j]["data"].get("image/png")
        width = png_width(png) if png else None  # (an output by hand may have none: then any image will do)
        loaded = [i for i in found["images"] if i["width"] > 0 and width in (None, i["width"])]
        if not loaded:
            problems.append(f"cell {cell_id} output {j}: no loaded image {width or 'any'} px wide; "
                            f"images: {found['images']}")
    texts = page.evaluate(_TEXTS_JS, out_sel)
    return problems + control_text(texts) + asking_text(texts)


def _screenshot_first_picture(page, nb: dict, out_sel: str, path: Path) -> None:
    """Save the viewport, scrolled to the notebook's first picture output."""
    path.parent.mkdir(exist_ok=True)
    first = picture_outputs(nb)[:1]
    if first:
        page.evaluate("""([cellId, sel, j]) => { const o = document.getElementById('cell-id=' + cellId)
                           .querySelectorAll(sel)[j]; if (o) o.scrollIntoView({block: 'start'}); }""",
                      [first[0][0], out_sel, first[0][1]])
    page.screenshot(path=str(path))


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


# -- An nh3 viewer ---------------------------------------------------------------------
# nh3 is ammonia, the allowlist sanitizer GitHub-like viewers use. Such a viewer shows
# one mime type per output, as nbconvert picks them but among the types a static
# viewer shows: text/html, image/png, image/jpeg, text/plain. It does not show
# application/javascript (it runs no script) or image/svg+xml (an SVG can hold
# scripts and links, so such viewers leave it out or sanitize it away).
VIEWER_ORDER = ("text/html", "image/png", "image/jpeg", "text/plain")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def viewer_output(out: dict) -> str:
    """The HTML an nh3 viewer shows for one notebook output."""
    if out["output_type"] == "stream":
        return f"<pre>{html.escape(_joined(out['text']))}</pre>"
    if out["output_type"] == "error":
        return f"<pre>{html.escape(_ANSI.sub('', chr(10).join(out['traceback'])))}</pre>"
    data = out.get("data", {})
    kind = next((k for k in VIEWER_ORDER if k in data), None)
    if kind == "text/html":
        return nh3.clean(_joined(data[kind]))
    if kind in ("image/png", "image/jpeg"):  # the viewer writes this tag itself: it is not sanitized
        return f'<img src="data:{kind};base64,{_joined(data[kind]).strip()}">'
    if kind == "text/plain":
        return f"<pre>{html.escape(_joined(data[kind]))}</pre>"
    return ""


def viewer_page(nb: dict) -> str:
    """A notebook's code cells and their outputs as an nh3 viewer shows them: each cell
    a ``div`` with id ``cell-id=<id>``, each output in it a ``div.out``."""
    cells = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        outs = "".join(f'<div class="out">{viewer_output(o)}</div>' for o in cell.get("outputs", []))
        cells.append(f'<div id="cell-id={html.escape(cell["id"])}"><pre>{html.escape(_joined(cell["source"]))}'
                     f"</pre>{outs}</div>")
    return html_page("".join(cells))


def viewed_problems(browser, page_path: Path, path: Path, nb: dict, output: str, shot: Path) -> list[str]:
    """Open ``page_path`` (a viewer's page of notebook ``path``, whose outputs match the CSS
    selector ``output``) and return :func:`shown_problems`; the first notebook with pictures
    also leaves a screenshot of its first one at ``shot``."""
    watch, page = open_file(browser, page_path)
    try:
        if path == _first_with_pictures():
            _screenshot_first_picture(page, nb, output, shot)
        return shown_problems(page, nb, output)
    finally:
        watch.close()


@pytest.mark.browser
def test_nh3_viewer_shows_every_picture(browser, tmp_path):
    assert NOTEBOOKS, "no committed notebooks in notebooks/"
    failures = {}
    for path in NOTEBOOKS:
        nb = _notebook(path)
        page_path = tmp_path / f"{path.stem}.html"
        page_path.write_text(viewer_page(nb))
        problems = viewed_problems(browser, page_path, path, nb, "div.out", ARTIFACTS / "viewers-nh3.png")
        if problems:
            failures[path.name] = problems
    assert not failures, "through an nh3 viewer:\n" + "\n".join(f"{k}: {v}" for k, v in failures.items())


def old_format_output() -> dict:
    """A picture output in the old format, built by hand: one text/html that holds the
    picture as an ``<img>`` of an SVG data URL, the buttons, the CSS and the script."""
    svg = pictures(html_of(dg.draw((torch.ones(2, requires_grad=True) * 2).sum())))[0]
    uri = "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()
    buttons = "".join(f'<button data-act="{a}">{t}</button>' for a, t in (
        ("first", "\u00ab"), ("prev", "\u2039 prev"), ("play", "play"), ("next", "next \u203a"),
        ("last", "\u00bb"), ("zout", "\u2212"), ("fit", "fit"), ("one", "1:1"), ("zin", "+")))
    page = (f'<div class="dg-out dg-stepper"><style>.dg-out {{ color: #212529 }}</style>'
            f'<div class="dg-bar">{buttons}<span class="dg-zoom">100%</span></div>'
            f'<div class="dg-canvas"><img class="dg-pic" src="{uri}"></div>'
            "<details><summary>2 steps</summary><ol><li>mul</li><li>sum</li></ol></details>"
            "<script>(function () { dynagraphView(null, {}, ''); })();</script></div>")
    return {"output_type": "display_data", "data": {"text/html": page, "text/plain": "<Graph>"},
            "metadata": {"dynagraph": "picture"}}


@pytest.mark.browser
def test_nh3_viewer_check_fails_on_the_old_format(browser, tmp_path):
    """The emulation can fail: the old format's picture (an SVG data URL, which nh3
    drops) shows no image, and its buttons' labels show as text."""
    nb = {"cells": [{"cell_type": "code", "id": "old", "source": "dg.draw(y)", "outputs": [old_format_output()]}]}
    page_path = tmp_path / "old.html"
    page_path.write_text(viewer_page(nb))
    watch, page = open_file(browser, page_path)
    try:
        problems = shown_problems(page, nb, "div.out")
    finally:
        watch.close()
    assert any("no loaded image" in p for p in problems), problems
    assert any(p.startswith("button labels") for p in problems), problems


def test_control_text_finds_labels_and_code():
    assert control_text(["\u00ab\u2039 prevplaynext \u203a\u00bb\u2212fit1:1+100%"]) == [
        "button labels: '\u00ab\u2039 prevplaynext \u203a\u00bb\u2212fit1:1+100%'"]
    assert control_text(["play", "1:1"]) == ["button labels: 'play'", "button labels: '1:1'"]
    assert control_text(["mul [this cell, line 3] y = next(it)", "fit the model"]) == []
    assert len(control_text(['<div class="dg-steps">', ".dg-out { color: red }"])) == 3


def test_asking_text_finds_requests_a_static_viewer_cannot_meet():
    assert asking_text(["To step through the 4 steps in the picture, run the cell, or trust the notebook.",
                        "\u2026 and 1 more steps (the stepper plays them all)", "要在图中逐步查看这 6 步，请运行本单元格"]) \
        == ["asks for what cannot be done here: 'To step through the 4 steps in the picture, run the cell, or trust "
            "the notebook.'", "asks for what cannot be done here: '\u2026 and 1 more steps (the stepper plays them all)'",
            "asks for what cannot be done here: '要在图中逐步查看这 6 步，请运行本单元格'"]
    assert asking_text(["The picture cannot step here. In Jupyter, once this cell has run or the notebook is "
                        "trusted, it plays its 21 steps.", "\u2026 and 1 more step"]) == []


def _fresh_notebook(path: Path) -> dict:
    """A notebook whose outputs this code makes now (not the stored lessons'): lesson 07's
    backward replay (21 steps: the list leaves 1 out), a 22-step recording, both in
    English and in Chinese. Written to ``path``; its JSON."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output
    from test_page import _long_recording, lesson07_replay

    cells = []
    for language in ("en", "zh"):
        dg.set_language(language)
        try:
            for view in (lesson07_replay(), _long_recording(22)):
                outs = [new_output("display_data", data=o.data, metadata=o.metadata) for o in view._outputs()]
                cells.append(new_code_cell("view", outputs=outs))
        finally:
            dg.set_language("en")
    nb = new_notebook(cells=cells)
    nbformat.write(nb, path)
    return json.loads(path.read_text())


@pytest.mark.browser
def test_a_step_list_without_scripts_asks_for_nothing_it_cannot_do_and_counts_right(browser, tmp_path):
    """Through an nh3 viewer and ``nbconvert --sanitize-html``, the step lists of outputs
    made now say where the picture steps, ask for nothing that cannot be done there, and
    count what they leave out ("1 more step", "2 more steps")."""
    nb = _fresh_notebook(tmp_path / "fresh.ipynb")
    (tmp_path / "nh3.html").write_text(viewer_page(nb))
    proc = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--sanitize-html",
                           "fresh.ipynb"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for page_name, out_sel in (("nh3.html", "div.out"), ("fresh.html", ".jp-OutputArea-child")):
        watch, page = open_file(browser, tmp_path / page_name)
        try:
            problems = shown_problems(page, nb, out_sel)
            text = "\n".join(page.evaluate(_TEXTS_JS, out_sel))
        finally:
            watch.close()
        assert not problems, f"{page_name}:\n" + "\n".join(problems)
        for line in ("The picture cannot step here. In Jupyter, once this cell has run or the notebook is trusted, "
                     "it plays its 21 steps.", "it plays its 22 steps.", "\u2026 and 1 more step\n",
                     "\u2026 and 2 more steps\n", "图会逐步播放这 21 步。", "……还有 1 步\n", "……还有 2 步\n"):
            assert line in text + "\n", f"{page_name}: {line!r} not shown"


def test_png_width_reads_the_header():
    buf = io.BytesIO()
    Image.new("RGB", (37, 5)).save(buf, "PNG")
    assert png_width(base64.b64encode(buf.getvalue()).decode()) == 37
    with pytest.raises(ValueError, match="not a PNG"):
        png_width(base64.b64encode(b"GIF89a" + bytes(30)).decode())


# -- Contrast on a dark page without theme variables -----------------------------------

_COLOUR = re.compile(r"rgba?\(\s*([\d.]+)[,\s]+([\d.]+)[,\s]+([\d.]+)(?:\s*[,/]\s*([\d.]+%?))?\s*\)"
                     r"|color\(srgb\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)(?:\s*/\s*([\d.]+%?))?\s*\)")


def rgba(text: str) -> tuple[float, float, float, float]:
    """A computed CSS colour (``rgb()``, ``rgba()`` or ``color(srgb ...)``) as 0-1 floats."""
    m = _COLOUR.fullmatch(text.strip())
    if not m:
        raise ValueError(f"cannot read the colour {text!r}: expected rgb(), rgba() or color(srgb ...)")
    g = m.groups()
    r, gr, b, a = g[:4] if g[0] is not None else g[4:]
    scale = 255.0 if g[0] is not None else 1.0
    alpha = 1.0 if a is None else (float(a[:-1]) / 100 if a.endswith("%") else float(a))
    return float(r) / scale, float(gr) / scale, float(b) / scale, alpha


def over(top: tuple[float, ...], bottom: tuple[float, ...]) -> tuple[float, float, float, float]:
    """``top`` composited over the opaque ``bottom`` (source-over)."""
    a = top[3]
    return (*(a * t + (1 - a) * u for t, u in zip(top[:3], bottom[:3])), 1.0)


def luminance(c: tuple[float, ...]) -> float:
    """WCAG 2 relative luminance of an sRGB colour."""
    lin = [v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4 for v in c[:3]]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(fg: tuple[float, ...], bg: tuple[float, ...]) -> float:
    """WCAG 2 contrast ratio of two opaque colours (1 to 21)."""
    hi, lo = sorted((luminance(fg), luminance(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def backdrop(layers: list[str]) -> tuple[float, float, float, float]:
    """The colour behind an element: its and its ancestors' background colours
    (innermost first) composited from the first opaque one (white, the browser's
    canvas, when none is opaque)."""
    colours = [rgba(c) for c in layers]
    first = next((i for i, c in enumerate(colours) if c[3] >= 1), len(colours))
    bg = colours[first] if first < len(colours) else (1.0, 1.0, 1.0, 1.0)
    for c in reversed(colours[:first]):
        bg = over(c, bg)
    return bg


# Every HTML element with text of its own that shows, inside the roots (the graph's
# SVG aside: Graphviz draws its text in its own colours on the picture's white canvas).
_TEXT_COLOURS_JS = """sel => {
  const seen = new Set(), out = [];
  for (const root of document.querySelectorAll(sel)) for (const e of [root, ...root.querySelectorAll('*')]) {
    if (seen.has(e) || e.closest('svg')) continue;
    seen.add(e);
    const text = [...e.childNodes].filter(n => n.nodeType === 3).map(n => n.data).join('').trim();
    const box = e.getBoundingClientRect();
    if (!text || !box.width || !box.height || !e.checkVisibility({opacityProperty: true, visibilityProperty: true}))
      continue;
    const layers = [];
    for (let a = e; a; a = a.parentElement) layers.push(getComputedStyle(a).backgroundColor);
    const cls = el => (el.className ? '.' + String(el.className).split(' ').join('.') : '');
    out.push({where: root.tagName.toLowerCase() + cls(root) + ' ' + e.tagName.toLowerCase() + cls(e),
              text: text.slice(0, 40), color: getComputedStyle(e).color, layers});
  }
  return out;
}"""
DG_TEXT = "div.dg-out, div.dg-steps, table.dg-diff"


def low_contrast(page, sel: str = DG_TEXT) -> tuple[list[str], int]:
    """The text elements inside ``sel`` whose contrast is under :data:`MIN_CONTRAST`
    (each described), and how many text elements were measured."""
    found = page.evaluate(_TEXT_COLOURS_JS, sel)
    bad = []
    for e in found:
        bg = backdrop(e["layers"])
        ratio = contrast(over(rgba(e["color"]), bg), bg)
        if ratio < MIN_CONTRAST:
            bad.append(f"{e['where']} {e['text']!r}: {ratio:.2f} ({e['color']} on {e['layers'][:4]})")
    return bad, len(found)


def test_contrast_matches_wcag_examples():
    white, black = (1, 1, 1, 1), (0, 0, 0, 1)
    assert contrast(black, white) == pytest.approx(21)
    assert contrast(rgba("rgb(119, 119, 119)"), white) == pytest.approx(4.48, abs=0.01)  # #777: just under AA
    assert contrast(rgba("rgb(118, 118, 118)"), white) == pytest.approx(4.54, abs=0.01)  # #767676: just over
    half = over(rgba("rgba(0, 0, 0, 0.5)"), white)
    assert half[:3] == pytest.approx((0.5, 0.5, 0.5))
    assert backdrop(["rgba(0, 0, 0, 0)", "rgba(0, 0, 0, 0.5)", "rgb(255, 255, 255)"])[:3] == pytest.approx(half[:3])
    assert backdrop(["rgba(0, 0, 0, 0)"]) == (1, 1, 1, 1)
    assert rgba("color(srgb 1 0.5 0 / 0.25)") == (1, 0.5, 0, 0.25)
    with pytest.raises(ValueError, match="cannot read the colour 'oklch"):
        rgba("oklch(0.5 0.1 30)")


def _views_for_a_dark_page() -> str:
    """A recording's, a backward trace's and a diff's outputs, as a page with scripts shows them."""
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with dg.live(params={"x": x}) as rec:
        y = (2 * x + 1).sum()
    with dg.trace_backward(y) as bt:
        y.backward()
    d = dg.diff(dg.draw((x * 2).sum()), dg.draw((torch.tanh(x * 2) + 1).sum()), labels=("short", "long"))
    return html_of(rec) + html_of(bt) + html_of(d)


# A page without any theme variables, in VS Code's dark colours.
_DARK_BODY = "background:#1e1e1e;color:#d4d4d4"
# Makes the step texts unreadable: the current step and the step list, #777 on #666
# (contrast 1.3), stronger than the outputs' own colours.
_BAD_STYLE = (".dg-now, .dg-steps, .dg-steps * { color: #777 !important; background: #666 !important; }")


@pytest.mark.browser
def test_views_are_readable_on_a_dark_page_without_theme_variables(browser, tmp_path):
    watch, page = open_html(browser, _views_for_a_dark_page(), tmp_path, name="dark.html", body_style=_DARK_BODY)
    try:
        assert page.locator("div.dg-stepper").count() == 2, "the scripts did not draw both steppers"
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "viewers-dark-page.png"), full_page=True)
        bad, measured = low_contrast(page)
        kinds = page.evaluate(f"() => [...document.querySelectorAll('{DG_TEXT}')].map(e => e.className)")
        page.add_style_tag(content=_BAD_STYLE)
        caught, _ = low_contrast(page)
        errors = watch.errors
    finally:
        watch.close()
    assert {"dg-out dg-stepper", "dg-steps", "dg-diff", "dg-out"} <= set(kinds)
    assert measured >= 20, f"only {measured} text elements measured"
    assert not bad, f"text under contrast {MIN_CONTRAST} on a dark page:\n" + "\n".join(bad)
    assert any(".dg-now" in c for c in caught) and any("dg-steps" in c for c in caught), caught
    assert not errors, errors


# -- The docs site in dark mode --------------------------------------------------------


def _docs_page_with_a_stepper() -> str:
    """The notebook whose outputs hold the most kinds of dynagraph output (a stepper's
    picture and steps, and a diff's table when one has it); its stem."""
    def kinds(path: Path) -> set[str]:
        return {o.get("metadata", {}).get("dynagraph") for c in _notebook(path)["cells"]
                for o in c.get("outputs", [])} - {None}
    with_steps = [p for p in NOTEBOOKS if "steps" in kinds(p)]
    if not with_steps:
        pytest.fail("no committed notebook has a stepper (an output with dynagraph 'steps')")
    return max(with_steps, key=lambda p: len(kinds(p))).stem


# pydata-sphinx-theme reads the colour mode from localStorage before the page shows.
_DARK_INIT = "localStorage.setItem('mode', 'dark'); localStorage.setItem('theme', 'dark');"


@pytest.mark.slow
@pytest.mark.browser
def test_docs_site_in_dark_mode_is_readable(browser, site):
    stem = _docs_page_with_a_stepper()
    watch = Watch(browser)
    try:
        watch.context.add_init_script(_DARK_INIT)
        page = watch.new_page()
        page.emulate_media(color_scheme="dark")
        page.goto((site / "notebooks" / f"{stem}.html").as_uri(), wait_until="load")
        page.evaluate("() => { document.documentElement.dataset.theme = 'dark'; "
                      "document.documentElement.dataset.mode = 'dark'; }")
        body = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
        assert luminance(rgba(body)) < 0.05, f"the page is not dark: its body is {body}"
        assert page.locator("div.dg-stepper").count() > 0, f"{stem}: no stepper drawn"
        page.locator("div.dg-stepper").first.scroll_into_view_if_needed()
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "viewers-docs-dark.png"))
        bad, measured = low_contrast(page)
        page.add_style_tag(content=_BAD_STYLE)
        caught, _ = low_contrast(page)
    finally:
        watch.close()
    assert measured >= 20, f"only {measured} text elements measured"
    assert not bad, f"{stem} in dark mode: text under contrast {MIN_CONTRAST}:\n" + "\n".join(bad)
    assert any(".dg-now" in c for c in caught) and any("dg-steps" in c for c in caught), caught


# -- nbconvert --sanitize-html --------------------------------------------------------
# How nbconvert (7.x) shows an output with --sanitize-html (HTMLExporter.sanitize_html,
# exporters/html.py; the lab template, templates/lab/base.html.j2):
# - It picks ONE mime type per output: the first of HTMLExporter's
#   display_data_priority that the output holds (WidgetsDataTypeFilter):
#   widget-view, application/javascript, text/html, text/markdown, image/svg+xml,
#   text/vnd.mermaid, text/latex, image/png, image/jpeg, text/plain. So a bundle
#   with application/javascript and image/png would be shown as its script: dynagraph
#   puts its script in an output of its own, after the PNG's.
# - With sanitize_html, the template's data_javascript block writes the output's
#   <div> without the <script>: the output shows nothing. It does not fall back to
#   the next mime type.
# - text/html and Markdown go through the clean_html filter (filters/strings.py):
#   bleach.clean with bleach's tags plus div pre code span table tr td, the
#   attributes class and id, and strip=False, so a tag outside that list is
#   escaped (shown as text), and style attributes are dropped. (Markdown's own <p>
#   is not in the list: every paragraph of prose shows a literal "<p>". That is
#   nbconvert's, not ours: the checks read outputs only.)
# - The SanitizeHTML preprocessor (preprocessors/sanitize.py), which deletes
#   application/javascript and keeps image/png, is NOT run by --sanitize-html:
#   the HTML exporter does not enable it (it runs only if a config adds it).


@pytest.fixture(scope="module")
def sanitized(tmp_path_factory) -> Path:
    """Every committed notebook converted with ``jupyter nbconvert --to html --sanitize-html``
    (the venv's jupyter) into a temporary folder; the folder."""
    pytest.importorskip("nbconvert", reason="needs nbconvert: pip install nbconvert (JupyterLab brings it)")
    out = tmp_path_factory.mktemp("sanitized")
    for path in NOTEBOOKS:
        shutil.copy(path, out / path.name)
    proc = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--sanitize-html",
                           *(p.name for p in NOTEBOOKS)], cwd=out, capture_output=True, text=True, timeout=600)
    if proc.returncode:
        pytest.fail(f"nbconvert failed:\n{proc.stderr[-4000:]}")
    return out


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_nbconvert_sanitized_html_shows_every_picture(browser, sanitized, path):
    nb = _notebook(path)
    problems = viewed_problems(browser, sanitized / f"{path.stem}.html", path, nb, ".jp-OutputArea-child",
                               ARTIFACTS / "viewers-nbconvert.png")
    assert not problems, f"{path.name} through nbconvert --sanitize-html:\n" + "\n".join(problems)


@functools.cache
def _first_with_pictures() -> Path | None:
    return next((p for p in NOTEBOOKS if picture_outputs(_notebook(p))), None)


# -- VS Code's notebook view -------------------------------------------------------------
# A page that shows a notebook's outputs as VS Code does (read in its source):
# - which mime type an output shows: the first in the ipynb extension's order
#   (microsoft/vscode extensions/ipynb/src/deserializers.ts, orderOfMimeTypes);
# - how: the built-in renderer (extensions/notebook-renderers/src/index.ts). An image is
#   an <img> of a blob: URL in a div.display; text/html is set as innerHTML and each of
#   its scripts re-created (domEval); application/javascript is a <script type="module">
#   set as innerHTML (it stays inert) and a copy run by domEval, which takes it out again:
#   a module script has no document.currentScript. In Restricted Mode (an untrusted
#   workspace) text/html and application/javascript show nothing;
# - the Jupyter extension's renderers (microsoft/vscode-notebook-renderers
#   src/client/builtinRendererHooks.ts) wrap the script in a function given the output's
#   element as `element`; VS Code without them (or with an older version, which gives it
#   as jQuery of the element's id) gives no `element`;
# - where (src/vs/workbench/contrib/notebook/browser/view/renderers/webviewPreloads.ts):
#   all outputs in one webview document, each output a div.output (its id the output's)
#   in a div.output_container that is absolutely placed, clips (overflow: hidden) and is
#   as high as the editor last measured the output (a ResizeObserver); the webview is
#   as high as the notebook plus 2 x NOTEBOOK_WEBVIEW_BOUNDARY (5,000 px) and placed
#   5,000 px above the editor's top (notebookCellList.ts, notebookEditorWidget.ts), so
#   that `vh` there is a hundredth of all that, not of the screen;
# - its theme: --vscode-* variables and a vscode-dark or vscode-light class on <body>.
VSCODE_ORDER = ["application/vnd.", "application/vdom.", "application/geo+json",
                "application/x-nteract-model-debug+json", "text/html", "application/javascript", "image/gif",
                "text/latex", "text/markdown", "image/png", "image/svg+xml", "image/jpeg", "application/json",
                "text/plain"]
VSCODE_BOUNDARY = 5_000
VSCODE_NOTEBOOK = 3_000  # px: the notebook's height (one cell), within the webview's
VSCODE_THEMES = {  # (body class, --vscode-* variables): Dark Modern's and Light Modern's editor colours
    "dark": ("vscode-dark", {"--vscode-editor-background": "#1f1f1f", "--vscode-editor-foreground": "#cccccc",
                             "--vscode-font-family": "system-ui, sans-serif", "--vscode-font-size": "13px"}),
    "light": ("vscode-light", {"--vscode-editor-background": "#ffffff", "--vscode-editor-foreground": "#3b3b3b",
                               "--vscode-font-family": "system-ui, sans-serif", "--vscode-font-size": "13px"}),
}
_VSCODE_JS = r"""
const order = ORDER, rank = (m) => { const i = order.findIndex((o) => m.startsWith(o)); return i < 0 ? 100 : i; };
const domEval = (container) => {  // notebook-renderers' domEval
  for (const node of [...container.getElementsByTagName('script')]) {
    const tag = document.createElement('script');
    tag.text = node.innerText;
    for (const key of ['type', 'src', 'nonce', 'noModule', 'async']) {
      const val = node[key] || node.getAttribute(key);
      if (val) tag.setAttribute(key, val);
    }
    container.appendChild(tag).parentNode.removeChild(tag);
  }
};
const hooked = (script, element) => `(function(){ let gotToUserScript = false; try {
  const context = { outputs: [{ metadata: {}, data: {} }] };
  const ele = document.getElementById("${element.id}");
  (function (element){ gotToUserScript = true; ${script} }).call(context, ele);
  } catch (ex) { console.error('VS Code Renderer failed to render output', ex); if (gotToUserScript) throw ex; } })();`;
const render = (mime, value, el) => {
  if (mime === 'image/png') {
    const img = document.createElement('img'), display = document.createElement('div');
    img.src = URL.createObjectURL(new Blob([Uint8Array.from(atob(value), (c) => c.charCodeAt(0))], { type: mime }));
    display.className = 'display'; display.append(img); el.append(display);
  } else if (mime === 'text/html') {
    if (!TRUSTED) return;
    const div = document.createElement('div');
    div.innerHTML = value; el.append(div); domEval(div);
  } else if (mime === 'application/javascript') {
    if (!TRUSTED) return;
    const script = document.createElement('script'), div = document.createElement('div');
    script.type = 'module'; script.textContent = HOOK ? hooked(value, el) : value;
    div.innerHTML = script.outerHTML; el.append(div); domEval(div);
  } else if (mime === 'text/plain') {
    const pre = document.createElement('div');
    pre.className = 'output-plaintext'; pre.textContent = value.split('\n').slice(0, 30).join('\n'); el.append(pre);
  }
};
const cell = document.querySelector('.cell_container'), boxes = [];
const layout = () => { let top = 0; for (const b of boxes) { b.style.top = top + 'px'; top += b.offsetHeight; } };
OUTPUTS.forEach((data, i) => {
  const box = document.createElement('div'), out = document.createElement('div');
  box.className = 'output_container'; box.style.maxHeight = '0px';
  out.className = 'output'; out.id = 'output-' + i;
  box.append(out); cell.append(box); boxes.push(box);
  new ResizeObserver(([e]) => {  // the editor's measure of the output, sent back as the box's height
    const h = e.contentRect.height;
    out.style.padding = h ? '4px 8px' : '0px';
    const high = h ? h + 8 : 0;
    box.style.height = box.style.maxHeight = high + 'px';
    layout();
  }).observe(out);
  const mime = Object.keys(data).sort((a, b) => rank(a) - rank(b))[0];
  render(mime, data[mime], out);
});
"""


def vscode_pages(folder: Path, outputs: list, theme: str, trusted: bool = True, hook: bool = True) -> Path:
    """The editor page (a 900 px window on a webview ``iframe``) and the webview page
    that show ``outputs`` (a view's :class:`~dynagraph._page.Output` s) in one cell as
    VS Code shows them (see above); the editor page's path."""
    body_class, variables = VSCODE_THEMES[theme]
    data = json.dumps([o.data for o in outputs]).replace("</", "<\\/")
    script = (f"const ORDER = {json.dumps(VSCODE_ORDER)}, TRUSTED = {json.dumps(trusted)}, "
              f"HOOK = {json.dumps(hook)}, OUTPUTS = {data};\n{_VSCODE_JS}")
    # (the rules of backLayerWebView.ts's page that place outputs, and its table rules)
    style = ("body { margin: 0; padding: 0; overflow: hidden; background: var(--vscode-editor-background); "
             "color: var(--vscode-editor-foreground); font-family: var(--vscode-font-family); "
             "font-size: var(--vscode-font-size); } #container { position: absolute; width: 100%; top: 0; } "
             "#container .cell_container, #container .output_container { width: 100%; } "
             "#container > div > div > div.output { width: calc(100% - 60px); margin-left: 40px; "
             "box-sizing: border-box; } #container > div > div:not(.preview) > div { overflow-x: auto; } "
             "table, thead, tr, th, td, tbody { border: none !important; border-color: transparent; "
             "border-spacing: 0; border-collapse: collapse; } table, th, tr { vertical-align: middle; "
             "text-align: right; } tr:nth-child(even) { background-color: rgba(130, 130, 130, 0.08); } "
             ".cell_container { position: absolute; } "
             ".output_container { position: absolute; overflow: hidden; }")
    (folder / "webview.html").write_text(
        f"<!doctype html><html style='{';'.join(f'{k}:{v}' for k, v in variables.items())}'><head>"
        f"<meta charset='utf-8'><style>{style}</style></head><body class='{body_class}'><div id='container' "
        f"class='widgetarea'>"
        f"<div class='cell_container' style='top:{VSCODE_BOUNDARY}px'></div></div>"
        f"<script>{script}</script></body></html>")
    editor = folder / "editor.html"
    editor.write_text(html_page(
        f"<iframe src='webview.html' style='position:absolute;left:0;top:{20 - VSCODE_BOUNDARY}px;width:100%;"
        f"height:{VSCODE_NOTEBOOK + 2 * VSCODE_BOUNDARY}px;border:0'></iframe>",
        body_style=f"margin:0;overflow:hidden;background:{variables['--vscode-editor-background']}"))
    return editor


def _webview(page):
    return next(f for f in page.frames if f.url.endswith("webview.html"))


# A lit node a reader sees in the editor: its box (in the editor's window, across the
# iframe) inside the window and inside the canvas's inside.
_LIT_BOXES_JS = """root => {
  const canvas = root.querySelector('.dg-canvas'), c = canvas.getBoundingClientRect();
  const inside = [c.left + canvas.clientLeft, c.top + canvas.clientTop];
  inside.push(inside[0] + canvas.clientWidth, inside[1] + canvas.clientHeight);
  return {canvas: inside, lit: [...root.querySelectorAll('g.node.dg-lit')].map(g => {
    const b = g.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; })};
}"""


def vscode_lit_unseen(page, stepper, frame_top: float) -> list[str]:
    """The lit nodes of ``stepper`` (in the webview frame) that a reader of the editor's
    window does not see whole: outside the window, or outside the canvas's inside."""
    got = stepper.evaluate(_LIT_BOXES_JS)
    height = page.viewport_size["height"]
    cl, ct, cr, cb = got["canvas"]
    bad = []
    for left, top, right, bottom in got["lit"]:
        shown_top, shown_bottom = top + frame_top, bottom + frame_top  # in the editor's window
        if not (left >= cl and right <= cr and top >= ct and bottom <= cb):
            bad.append(f"lit node at {left:.0f},{top:.0f}-{right:.0f},{bottom:.0f} outside the canvas {got['canvas']}")
        if shown_top < 0 or shown_bottom > height:
            bad.append(f"lit node at y {shown_top:.0f}-{shown_bottom:.0f} outside the editor's window (0-{height})")
    return bad


@pytest.mark.browser
@pytest.mark.parametrize(("theme", "hook"), [("dark", True), ("light", False)],
                         ids=["jupyter-renderers-dark", "built-in-renderer-light"])
def test_vscode_shows_and_steps_a_tall_replay(browser, tmp_path, theme, hook):
    """Lesson 07's backward replay (21 steps, a picture taller than a screen) in VS Code's
    notebook view, with the Jupyter extension's renderers (``element`` given) and with the
    built-in renderer alone (no ``element``, no ``document.currentScript``): the script
    draws one stepper, hides the PNG and the static step list, and at every step the lit
    nodes are inside the canvas and inside the editor's 900 px window; all text reads at
    WCAG AA contrast in the theme's colours; no console error."""
    from test_page import lesson07_replay

    outputs = lesson07_replay()._outputs()
    watch, page = open_file(browser, vscode_pages(tmp_path, outputs, theme, hook=hook))
    try:
        frame = _webview(page)
        frame.wait_for_selector("div.dg-stepper", timeout=15_000)
        stepper = frame.locator("div.dg-stepper")
        assert stepper.count() == 1, f"{stepper.count()} steppers drawn for one view"
        frame.wait_for_function("() => [...document.images].every(i => i.complete)")
        frame.wait_for_timeout(300)  # (hidePng, then the editor's new measure of the outputs)
        shown = frame.evaluate("""() => [...document.querySelectorAll('.output_container')].map(b => [
          b.offsetHeight, b.querySelector('img') ? b.querySelector('img').getBoundingClientRect().height : -1,
          b.querySelector('.output').scrollHeight])""")
        hint = stepper.evaluate("r => r.dgData.hint")
        hint_seen = frame.locator(f"#{hint}:visible").count() + frame.locator(f"#{hint} ~ ol li:visible").count()
        canvas_height = stepper.evaluate("r => r.querySelector('.dg-canvas').clientHeight")
        frame_top = page.evaluate("() => document.querySelector('iframe').getBoundingClientRect().top")
        click = lambda act: stepper.locator(f'button[data-act="{act}"]').evaluate("b => b.click()")  # noqa: E731
        click("first")
        texts, unseen = [], []
        for k in range(len(stepper.evaluate("r => r.dgData.s"))):
            if k:
                click("next")
            texts.append(stepper.evaluate("r => r.querySelector('.dg-now').textContent + '|' + "
                                          "[...r.querySelectorAll('g.dg-lit')].length"))
            unseen += [f"step {k + 1}: {p}" for p in vscode_lit_unseen(page, stepper, frame_top)]
        outer_scroll = page.evaluate("() => [scrollX, scrollY]")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"viewers-vscode-{theme}.png"))
        bad, measured = low_contrast(frame)
        frame.add_style_tag(content=_BAD_STYLE)  # (the measure can fail: unreadable step texts are caught)
        caught, _ = low_contrast(frame)
        errors = watch.errors + watch.blocked
    finally:
        watch.close()
    assert any(".dg-now" in c for c in caught), caught
    png_box, script_box = shown[0], shown[1]
    assert png_box[0] == 0, f"the PNG's output still takes {png_box[0]} px beside the live picture"
    assert hint_seen == 0, "the static step list shows beside the stepper"
    assert script_box[0] >= script_box[2], f"the stepper's output is clipped: {script_box}"
    assert len(texts) == 21 and len(set(texts)) == 21, f"the steps did not each show something new: {texts}"
    assert not unseen, "\n".join(unseen)
    assert 200 < canvas_height <= 640, f"the canvas is {canvas_height} px high: not a box a screen shows whole"
    assert outer_scroll == [0, 0], f"the editor's window scrolled to {outer_scroll}"
    assert measured >= 8 and not bad, f"{measured} text elements measured; under {MIN_CONTRAST}:\n" + "\n".join(bad)
    assert not errors, errors


@pytest.mark.browser
def test_vscode_restricted_mode_shows_the_png(browser, tmp_path):
    """In VS Code's Restricted Mode (an untrusted workspace: no text/html, no script) a
    view's picture still shows: its PNG, loaded, at the size the PNG's header says."""
    from test_page import lesson07_replay

    outputs = lesson07_replay()._outputs()
    png = next(o for o in outputs if "image/png" in o.data)
    watch, page = open_file(browser, vscode_pages(tmp_path, outputs, "dark", trusted=False))
    try:
        frame = _webview(page)
        frame.wait_for_function("() => document.images.length && [...document.images].every(i => i.complete)")
        images = frame.evaluate("() => [...document.images].map(i => [i.naturalWidth, i.getBoundingClientRect().height])")
        drawn = frame.locator("div.dg-out").count()
        errors = watch.errors + watch.blocked
    finally:
        watch.close()
    assert drawn == 0, "a script ran in Restricted Mode: the page does not reproduce VS Code"
    assert len(images) == 1 and images[0][0] == png_width(png.data["image/png"]) and images[0][1] > 100, images
    assert not errors, errors
