"""Stored pictures show where dynagraph's script cannot run, and its script works
where it can.

A dynagraph view displays as up to four outputs (see dynagraph/_page.py): a diff's
table, the picture (``image/png`` + ``text/plain``), its script (``application/javascript``
alone) and a stepper's plain step list (``text/html``). Where scripts run, the script
draws a live SVG with zoom and a stepper, hides the PNG's output and the plain list (from
its line "The picture cannot step here. In Jupyter, ... it plays its N steps." on, so the
steps do not show twice). Where they do not, the PNG shows, with that line and the list. Here:

* every stored picture is a picture output (PNG and text) followed by its script, each
  of at most 300 KB;
* the committed notebooks open *untrusted* in JupyterLab and show every stored picture
  as a loaded PNG, each stepper's hint line and step list, and no controls or script;
* ``jupyter nbconvert --to html`` pages show every picture with JavaScript off (the
  PNG), and the live SVG and working steppers with JavaScript on;
* in JupyterLab's Dark theme a stepper's text and buttons keep WCAG AA contrast;
* two notebooks holding the same stepper output, open side by side, step apart.

One JupyterLab server (throwaway config, data, runtime, settings and workspace
folders, so no trust database of the user's makes a notebook trusted) serves a
snapshot of notebooks/ for the whole module. DYNAGRAPH_DOCS_NOTEBOOKS points these
tests at another folder of notebooks, as for test_docs.py and test_jupyterlab.py.

JupyterLab windowing: tests/_lab.py turns it off (``windowingMode: none``), so every
cell's outputs are in the page to measure. Each picture and step list is still
scrolled into view before it is measured, and the point at its centre must hit it:
an element can have a box and yet be hidden under another one, or be off screen.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import subprocess
import sys
import time
import warnings
from contextlib import contextmanager
from html import unescape
from pathlib import Path

import pytest

from _chromium import ARTIFACTS, ROOT, VIEWPORT, Watch, check_stepper, chromium
from _helpers import LESSON07_REPLAY, scripts_data
from _lab import serve

NOTEBOOK_DIR = Path(os.environ.get("DYNAGRAPH_DOCS_NOTEBOOKS", ROOT / "notebooks"))
NOTEBOOKS = sorted(p.name for p in NOTEBOOK_DIR.glob("*.ipynb"))
MAX_OUTPUT_BYTES = 300_000  # json.dumps of one stored output's data
PICTURE_MIMES = {"image/png", "text/plain"}
PNG_COLOURS = 64  # the picture's PNG is a palette PNG of at most this many colours (as _png.PNG_COLOURS)
# Tags that every allowlist sanitizer keeps (the step list and the diff's table use only these).
PLAIN_TAGS = {"b", "div", "i", "li", "ol", "span", "table", "td", "tr"}
# The root classes of the older formats (a text/html picture with an <img> or inline
# <svg>): a notebook still holding one must be re-run.
_OLD_CLASS = re.compile(r'class="(?:[^"]*\s)?(dg-out|dynagraph-graph|dg-stepper|dynagraph-diff)(?=[\s"])')
_HINT = re.compile(r'<div id="(dg-hint-[0-9a-f]{12})"><i>(The picture cannot step here\. In Jupyter, once this cell '
                   r'has run or the notebook is trusted, it plays its ([\d,]+) steps?\.)</i></div>')
# What the script's controls would show: button labels, the step counter, the zoom level.
_CONTROL_TEXT = re.compile(r"\bprev\b|\bplay\b|\bnext\b|\bfit\b|1:1|[\u00ab\u00bb\u2039\u203a\u2212]"
                           r"|\bstep [\d,]+ / [\d,]+|\b\d+%")
# What the script's source would show as text.
_SCRIPT_TEXT = re.compile(r"dynagraphView|function \(|\.dg-out \{|typeof element")
OPEN_TIMEOUT = 30_000  # ms: a notebook open with its stored outputs rendered
RUN_TIMEOUT = 90_000  # ms: a one-cell notebook run from a fresh kernel (imports torch)
# A small recording: three ops, so a stepper with three steps.
STEPPER_SOURCE = """import torch, dynagraph as dg
x = torch.tensor([3.0], requires_grad=True)
with dg.live(params={'x': x}) as rec:
    y = (2 * x + 1) * x
rec"""


# -- The stored notebooks --------------------------------------------------------------


def _read(path: Path, tries: int = 20) -> tuple[str, dict]:
    """The notebook's text and JSON; retried briefly while the text is not valid JSON,
    as someone may be re-running and saving the notebook right now."""
    for attempt in range(tries):
        text = path.read_text()
        try:
            return text, json.loads(text)
        except json.JSONDecodeError:
            if attempt == tries - 1:
                raise
            time.sleep(0.25)
    raise AssertionError("unreachable")


def _text(value) -> str:
    """A notebook's multi-line string (a list of lines or one string) as one string."""
    return "".join(value) if isinstance(value, list) else (value or "")


def _kind(output: dict) -> str | None:
    """Which part of a dynagraph view an output is (``table picture steps``), ``"old"``
    for a picture in an older format, or None for any other output."""
    kind = output.get("metadata", {}).get("dynagraph")
    if kind:
        return kind
    if _OLD_CLASS.search(_text(output.get("data", {}).get("text/html"))):
        return "old"
    return None


def _stored(nb: dict) -> list[tuple[int, int, str, dict]]:
    """``(cell index, output index, kind, output)`` of each stored dynagraph output."""
    return [(i, j, _kind(out), out)
            for i, cell in enumerate(nb["cells"]) if cell["cell_type"] == "code"
            for j, out in enumerate(cell.get("outputs", [])) if _kind(out)]


def _pictures(nb: dict) -> list[tuple[int, int, dict]]:
    """``(cell index, output index, output)`` of each stored picture (old formats too)."""
    return [(i, j, out) for i, j, kind, out in _stored(nb) if kind in ("picture", "old")]


def _png_size(output: dict) -> tuple[int, int]:
    """Width and height in pixels of a picture output's PNG, read from its header."""
    raw = base64.b64decode(_text(output["data"]["image/png"]))
    assert raw[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return int.from_bytes(raw[16:20], "big"), int.from_bytes(raw[20:24], "big")


def _data(output: dict) -> dict:
    """The data a picture output's script draws (its SVG, and its steps if any)."""
    (data,) = scripts_data(_text(output["data"]["application/javascript"]))
    return data


def _svg_size(svg: str) -> tuple[float, float]:
    """The width and height of an SVG in points (Graphviz writes them as ``...pt``)."""
    head = re.match(r"(?:<\?xml[^>]*>\s*)?(?:<!DOCTYPE[^>]*>\s*)?(?:<!--.*?-->\s*)*<svg\b[^>]*>", svg, re.S)
    assert head, f"no <svg> element at the start of {svg[:80]!r}"
    width = re.search(r'\swidth="([\d.]+)pt"', head.group(0))
    height = re.search(r'\sheight="([\d.]+)pt"', head.group(0))
    assert width and height, f"the <svg> element gives no size in pt: {head.group(0)[:200]!r}"
    return float(width.group(1)), float(height.group(1))


def _step_list(output: dict) -> dict:
    """What a stored step list holds: its hint line (id, text, number of steps), caption,
    listed steps and the line after them, read from its HTML."""
    html = _text(output["data"]["text/html"])
    hint = _HINT.search(html)
    caption = re.search(r"<b>(.*?)</b>", html, re.S)
    more = re.search(r"</ol><div>(.*?)</div></div>$", html, re.S)
    return {"hint_id": hint and hint.group(1), "hint": hint and hint.group(2),
            "steps": int(hint.group(3).replace(",", "")) if hint else None,
            "caption": unescape(caption.group(1)) if caption else "",
            "items": [unescape(t) for t in re.findall(r"<li>(.*?)</li>", html, re.S)],
            "more": unescape(more.group(1)) if more else ""}


def _words(text: str) -> str:
    """Text with its runs of white space made one space (as a browser shows it)."""
    return " ".join(text.split())


def _check_stored_picture(where: str, out: dict, after: dict | None, steps: dict | None) -> list[str]:
    """What is wrong with one stored picture output (``after`` and ``steps``: the next two
    outputs of its cell, which should be its script and, for a stepper, its step list)."""
    from PIL import Image

    data = out.get("data", {})
    if out.get("output_type") != "display_data" or set(data) != PICTURE_MIMES:
        return [f"{where}: a {out.get('output_type')} of {sorted(data)}, not a display_data of "
                f"{sorted(PICTURE_MIMES)}: re-run the notebook"]
    bad = []
    raw = base64.b64decode(_text(data["image/png"]))
    with Image.open(io.BytesIO(raw)) as im:
        if im.format != "PNG" or im.mode != "P" or len(im.getcolors(256) or range(257)) > PNG_COLOURS:
            bad.append(f"{where}: image/png is a {im.format} in mode {im.mode}, not a palette PNG of at most "
                       f"{PNG_COLOURS} colours")
        png = im.size
        foot = im.convert("RGB").getpixel((2, im.height - 2))
    size = out.get("metadata", {}).get("image/png", {})
    if (size.get("width"), size.get("height")) != png:
        bad.append(f"{where}: metadata image/png {out.get('metadata', {}).get('image/png')} is not the PNG's "
                   f"size {png}: the script finds the PNG by it")
    if after is None or _kind(after) != "script" or set(after.get("data", {})) != {"application/javascript"}:
        return [*bad, f"{where}: not followed by its script (an output of application/javascript alone)"]
    try:
        picture = _data(after)
    except ValueError as e:
        return [*bad, f"{where}: the script calls dynagraphView on no data or on more than one: {e}"]
    if picture.get("png") != list(png):
        bad.append(f"{where}: the script hides a PNG of {picture.get('png')} px, the picture's is {png}")
    # The PNG is drawn at 96 dpi, the size the SVG shows at 1:1 (4/3 px a point): never
    # shrunk. Only a crop (with its note's strip at the foot) makes it narrower or shorter,
    # and only a title Pillow drew above it (the script draws it above the SVG) wider or taller.
    w, h = (v * 4 / 3 for v in _svg_size(base64.b64decode(picture["svg"]).decode()))
    cropped = max(abs(a - b) for a, b in zip(foot, (255, 243, 191))) <= 4
    titled = "title" in picture
    if ((not cropped and (png[0] < w - 1.5 or png[1] < h - 1.5))
            or (not titled and (png[0] > w + 1.5 or (not cropped and png[1] > h + 1.5)))):
        bad.append(f"{where}: the PNG is {png[0]} x {png[1]} px, the SVG {w:.0f} x {h:.0f} px at 1:1: "
                   "not the same drawing at the same size")
    if "s" in picture:  # a stepper: its step list follows its script, with the line the script hides
        total = len(picture["s"]) + (picture["gap"][1] if "gap" in picture else 0)
        if steps is None or _kind(steps) != "steps":
            bad.append(f"{where}: a stepper of {total} steps, but no step list right after its script")
        else:
            listed = _step_list(steps)
            if listed["hint_id"] != picture.get("hint"):
                bad.append(f"{where}: the step list's hint line has id {listed['hint_id']!r}, "
                           f"the script hides {picture.get('hint')!r}")
            if listed["steps"] != total:
                bad.append(f"{where}: the hint line speaks of {listed['steps']} steps, the stepper has {total}")
    return bad


def _check_plain_html(where: str, out: dict) -> list[str]:
    """What is wrong with a stored step list or table: tags a sanitizer drops, or a missing hint."""
    html = _text(out.get("data", {}).get("text/html"))
    tags = set(re.findall(r"<([a-zA-Z][a-zA-Z0-9]*)", html)) - PLAIN_TAGS
    bad = [f"{where}: tags {sorted(tags)} that an allowlist sanitizer drops"] if tags else []
    if _kind(out) == "steps" and not _HINT.search(html):
        bad.append(f"{where}: no line that says how to make the picture step (id dg-hint-...)")
    return bad


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_stored_pictures_are_images_and_small(name):
    """Each stored picture is a PNG (the same drawing as its script's SVG), its script
    and its text; a stepper's step list follows it; no output is over 300 KB."""
    _, nb = _read(NOTEBOOK_DIR / name)
    bad = []
    for i, cell in enumerate(nb["cells"]):
        for j, out in enumerate(cell.get("outputs", [])):
            size = len(json.dumps(out.get("data", {})))
            if size > MAX_OUTPUT_BYTES:
                bad.append(f"cell {i} output {j}: {size:,} bytes (limit {MAX_OUTPUT_BYTES:,})")
    for i, j, kind, out in _stored(nb):
        where = f"cell {i} output {j}"
        outputs = nb["cells"][i]["outputs"]
        if kind == "old":
            bad.append(f"{where}: a picture in the old format (text/html, root class "
                       f"{_OLD_CLASS.search(_text(out['data']['text/html'])).group(1)!r}): re-run the notebook")
        elif kind == "picture":
            bad += _check_stored_picture(where, out, *(outputs[j + 1:j + 3] + [None, None])[:2])
        elif kind in ("steps", "table"):
            bad += _check_plain_html(where, out)
    assert not bad, f"{name}:\n" + "\n".join(bad)


# -- Fixtures: a snapshot of the notebooks, one JupyterLab, one browser ----------------


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory) -> tuple[Path, dict[str, dict]]:
    """The notebooks copied once (what is served and what is expected agree even while
    someone re-runs them): ``(folder, {name: notebook JSON})``."""
    if not NOTEBOOKS:
        pytest.skip(f"no notebook in {NOTEBOOK_DIR}")
    folder = tmp_path_factory.mktemp("served")
    notebooks = {}
    for name in NOTEBOOKS:
        text, notebooks[name] = _read(NOTEBOOK_DIR / name)
        (folder / name).write_text(text)
    return folder, notebooks


class Lab:
    """A running JupyterLab: its URL, port, token, served folder and environment."""

    def __init__(self, base: str, port: int, token: str, folder: Path, env: dict):
        self.base, self.port, self.token, self.folder, self.env = base, port, token, folder, env

    def url(self) -> str:
        """JupyterLab with an empty workspace (no tabs restored from an earlier page)."""
        return f"{self.base}/lab?reset&token={self.token}"


@pytest.fixture(scope="module")
def lab(snapshot, tmp_path_factory):
    """`jupyter lab` on the snapshot with throwaway folders (JUPYTER_DATA_DIR too: the
    trust database is empty, so every stored notebook opens untrusted)."""
    folder, _ = snapshot
    # Opening a notebook starts no kernel (the stored notebooks are only looked at);
    # the test that runs code starts one itself.
    with serve(folder, tmp_path_factory.mktemp("lab"), {"notebookStartsKernel": "false"}) as (base, port, token, env):
        yield Lab(base, port, token, folder, env)


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


@contextmanager
def _lab_page(lab: Lab, browser):
    """A page on JupyterLab (restored, no notebook open) and its Watch; checks at the
    end that nothing was requested outside the server."""
    watch = Watch(browser, port=lab.port)
    try:
        page = watch.new_page()
        page.set_default_timeout(OPEN_TIMEOUT)
        page.goto(lab.url(), wait_until="domcontentloaded", timeout=60_000)
        page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=60_000)
        page.evaluate("async () => { await window.jupyterapp.restored; window.__dgPanels = {}; }")
        yield page, watch
        assert not watch.blocked, f"JupyterLab requested outside 127.0.0.1 (blocked): {watch.blocked}"
    finally:
        watch.close()


@pytest.fixture
def lab_page(lab, browser):
    with _lab_page(lab, browser) as page_watch:
        yield page_watch


@contextmanager
def _shot_on_failure(page, name: str):
    """Save what the page showed when the block fails, as artifacts/<name>-failed.png."""
    try:
        yield
    except BaseException:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{name}-failed.png"))
        raise


# -- Measuring outputs in the browser ---------------------------------------------------

# Defines window.__dgMeasure(child, kind): what one output (its .jp-OutputArea-child)
# shows (`text`: its rendered text, so no <script> source that does not show). A picture's image and a step list's hint line and list are scrolled into view
# first, and `on_top` says whether the point at the centre of their part on screen hits
# them. Playwright runs this with the page's JavaScript off too.
_MEASURE_JS = """() => {
  const box = e => { const b = e.getBoundingClientRect(); return [Math.round(b.width), Math.round(b.height)]; };
  const seen = e => {
    e.scrollIntoView({block: 'center', inline: 'nearest'});
    const b = e.getBoundingClientRect();
    const l = Math.max(b.left, 0), r = Math.min(b.right, innerWidth), t = Math.max(b.top, 0), u = Math.min(b.bottom, innerHeight);
    const hit = r > l && u > t ? document.elementFromPoint((l + r) / 2, (t + u) / 2) : null;
    return {box: box(e), visible: e.checkVisibility({visibilityProperty: true, opacityProperty: true}),
            on_top: !!hit && (hit === e || e.contains(hit)), hit: hit ? hit.tagName + '.' + hit.className : null};
  };
  window.__dgMeasure = (child, kind) => {
    const node = child.querySelector('.jp-OutputArea-output');
    // (nbconvert writes no data-mime-type on an image's output: its class says what it is)
    const mime = node ? node.dataset.mimeType || (node.classList.contains('jp-RenderedImage') ? 'image/png' : '') : '';
    const o = {kind, mime, text: child.innerText.slice(0, 3000),
               buttons: child.querySelectorAll('button').length, inputs: child.querySelectorAll('input').length,
               scripts: child.querySelectorAll('script').length, styles: child.querySelectorAll('style').length,
               svg: child.querySelectorAll('svg').length, imgs: child.querySelectorAll('img').length,
               dg: [...child.querySelectorAll('div.dg-out')].map(d => ({
                 stepper: d.classList.contains('dg-stepper'), nodes: d.querySelectorAll('svg g.node').length,
                 box: box(d.querySelector('svg') || d), bar: !!d.querySelector('.dg-bar')}))};
    const img = child.querySelector('img');
    if (img) o.img = {complete: img.complete, natural: [img.naturalWidth, img.naturalHeight],
                      src: (img.getAttribute('src') || '').slice(0, 30), ...seen(img)};
    const hint = child.querySelector('[id^="dg-hint-"]') ||
                 [...child.querySelectorAll('div')].find(d => d.textContent.startsWith('The picture cannot step'));
    if (hint) o.hint = {id: hint.id, text: hint.textContent, ...seen(hint)};
    const list = child.querySelector('ol');
    if (list) o.list = {items: [...list.querySelectorAll('li')].map(li => li.textContent), ...seen(list)};
    const caption = child.querySelector('b');
    if (caption) o.caption = {text: caption.textContent, visible: caption.checkVisibility()};
    const steps = child.querySelector('.dg-steps') || node;
    const more = steps && [...steps.children].filter(e => e.tagName === 'DIV').pop();
    if (more && more !== hint) o.more = {text: more.textContent, visible: more.checkVisibility()};
    return o;
  };
}"""


# -- JupyterLab helpers -----------------------------------------------------------------

# Starts opening a notebook in the main area (split to the right of `ref` when given);
# _OPENED_JS then says when it shows, and keeps the panel as window.__dgPanels[path] for
# the snippets below. The open is polled, not awaited inside one evaluate: a notebook
# whose open JupyterLab gave up on leaves a promise nothing can resolve, which Chromium
# collects ("Resulting promise was garbage collected", seen twice in CI), and a poll
# can say what happened and try again.
_OPEN_JS = """([path, ref]) => {
  const options = ref ? {mode: 'split-right', ref: window.__dgPanels[ref].id} : undefined;
  const opening = window.__dgOpening = {widget: null, error: null};
  window.jupyterapp.commands.execute('docmanager:open', {path, factory: 'Notebook', options})
    .then(w => { opening.widget = w; }, e => { opening.error = String(e); }); }"""
_OPENED_JS = """path => { const o = window.__dgOpening, w = o.widget;
  if (o.error) return 'the open failed: ' + o.error;
  if (!w) return false;
  if (w.isDisposed) return 'its panel was closed before it showed';
  if (!w.context.isReady || !w.isRevealed) return false;
  window.__dgPanels[path] = w; return 'open'; }"""
_GIVE_UP_JS = "() => { const w = window.__dgOpening.widget; if (w && !w.isDisposed) w.dispose(); }"
_CLOSE_JS = "path => { const w = window.__dgPanels[path]; delete window.__dgPanels[path]; w.dispose(); }"
# Rendered: every stored output has its node, every HTML output its content, and
# every image in them has settled (loaded or failed).
_RENDERED_JS = """path => { const w = window.__dgPanels[path];
  const cells = w.content.widgets.filter(c => c.model.type === 'code');
  return cells.every(c => c.outputArea.widgets.length >= c.model.outputs.length)
    && [...w.node.querySelectorAll('.jp-OutputArea-output[data-mime-type="text/html"]')].every(o => o.childNodes.length)
    && [...w.node.querySelectorAll('.jp-OutputArea-output img')].every(i => i.complete); }"""
# Per cell (by model index; null for a cell that is not code): its trust, how many
# outputs its model holds, and what each shown output item shows (window.__dgMeasure;
# each item's element is marked data-dg-test="c<cell>-o<output>" for screenshots). An
# output with no safe mime type (a script, untrusted) is an empty widget, not an item.
_REPORT_JS = """path => { const w = window.__dgPanels[path];
  return w.content.widgets.map((cell, index) => {
    if (cell.model.type !== 'code') return null;
    const outputs = [];
    cell.outputArea.widgets.forEach((child, m) => {
      if (!child.node.classList.contains('jp-OutputArea-child')) return;
      child.node.dataset.dgTest = 'c' + index + '-o' + m;
      const model = m < cell.model.outputs.length ? cell.model.outputs.get(m) : null;
      outputs.push(window.__dgMeasure(child.node, (model && model.metadata && model.metadata.dynagraph) || null));
    });
    return {index, trusted: cell.model.trusted, stored: cell.model.outputs.length, outputs};
  }); }"""
_THEME_JS = "theme => window.jupyterapp.commands.execute('apputils:change-theme', {theme})"
_THEME_DONE_JS = "theme => document.body.dataset.jpThemeName === theme"
# Starts a kernel (opening one starts none, see the `lab` fixture) and runs all cells.
_RUN_JS = """async path => { const w = window.__dgPanels[path];
  await w.sessionContext.ready;
  if (!w.sessionContext.session) await w.sessionContext.changeKernel({name: 'python3'});
  w.content.activeCellIndex = 0;
  await window.jupyterapp.commands.execute('notebook:run-all-cells'); }"""
_RUN_DONE_JS = """path => { const w = window.__dgPanels[path];
  const k = w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.status === 'idle' && [...w.model.cells].every(c => c.type !== 'code' || c.executionCount !== null)
         && !!w.node.querySelector('.dg-out .dg-bar:not([hidden])'); }"""
_CELL_ERRORS_JS = """path => [...window.__dgPanels[path].model.cells].flatMap(c => c.type !== 'code' ? [] :
  c.outputs.toJSON().filter(o => o.output_type === 'error').map(o => o.ename + ': ' + o.evalue))"""


def _open(page, path: str, ref: str | None = None, watch: Watch | None = None) -> None:
    """Open ``path`` and wait until it shows. An open that fails is tried once more, with
    a warning that says why and moves the console errors it made (from ``watch``) into
    the warning: they are JupyterLab's about its own open, not about what the notebook
    shows, which the second open is checked for."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for attempt in (1, 2):
        errors_before = len(watch.errors) if watch else 0
        page.evaluate(_OPEN_JS, [path, ref])
        try:
            state = page.wait_for_function(_OPENED_JS, arg=path, timeout=OPEN_TIMEOUT, polling=100).json_value()
        except PlaywrightTimeout:
            state = f"it did not show within {OPEN_TIMEOUT // 1000} s"
        if state == "open":
            return
        page.evaluate(_GIVE_UP_JS)
        errors = watch.errors[errors_before:] if watch else []
        if watch:
            del watch.errors[errors_before:]
        message = f"JupyterLab did not open {path} (try {attempt} of 2): {state}; console: {errors}"
        if attempt == 2:
            pytest.fail(message)
        warnings.warn(message, stacklevel=2)


def _wait(page, js: str, arg, timeout: int) -> bool:
    """Wait for ``js(arg)`` to be true; False on timeout (the caller says what is wrong)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(js, arg=arg, timeout=timeout, polling=200)
        return True
    except PlaywrightTimeout:
        return False


def _new_notebook(folder: Path, name: str, source: str) -> Path:
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    path = folder / name
    nbformat.write(nb, path)
    return path


def _shot(page, locator, path: Path) -> None:
    path.parent.mkdir(exist_ok=True)
    locator.scroll_into_view_if_needed()
    locator.evaluate("e => e.scrollIntoView({block: 'center'})")
    page.wait_for_timeout(500)  # let the notebook repaint after scrolling
    page.screenshot(path=str(path))


def _css_id(page, name: str) -> str:
    return page.evaluate("p => CSS.escape(window.__dgPanels[p].id)", name)


# -- 1. Untrusted notebooks ---------------------------------------------------------------


@pytest.fixture(scope="module")
def untrusted(lab, browser, snapshot) -> dict[str, dict]:
    """Each stored notebook opened untrusted in JupyterLab, with no kernel, one at a
    time: ``{name: {"cells": per-cell report, "errors": console errors}}``. Saves
    artifacts/untrusted.png (02's last picture, a rolled 100-step RNN), untrusted-steps.png
    (the first step list), untrusted.json (what each dynagraph output showed) and
    untrusted-failed.png (the first notebook whose pictures fail, as it looked)."""
    _, notebooks = snapshot
    seen, shots, failed = {}, set(), False
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "untrusted-failed.png").unlink(missing_ok=True)  # not a stale one
    with _lab_page(lab, browser) as (page, watch):
        page.evaluate(_MEASURE_JS)
        for name, nb in notebooks.items():
            stored = _stored(nb)
            errors_before = len(watch.errors)
            _open(page, name, watch=watch)
            _wait(page, _RENDERED_JS, name, OPEN_TIMEOUT)
            cells = page.evaluate(_REPORT_JS, name)
            panel = f"#{_css_id(page, name)}"
            pictures = [(i, j) for i, j, kind, _ in stored if kind == "picture"]
            steps = [(i, j) for i, j, kind, _ in stored if kind == "steps"]
            if pictures and name.startswith("02") and "pictures" not in shots:
                _shot(page, page.locator(f'{panel} [data-dg-test="c{pictures[-1][0]}-o{pictures[-1][1]}"]'),
                      ARTIFACTS / "untrusted.png")
                shots.add("pictures")
            if steps and "steps" not in shots:
                _shot(page, page.locator(f'{panel} [data-dg-test="c{steps[0][0]}-o{steps[0][1]}"]'),
                      ARTIFACTS / "untrusted-steps.png")
                shots.add("steps")
            if not failed and _check_untrusted(name, nb, cells):
                page.screenshot(path=str(ARTIFACTS / "untrusted-failed.png"))
                failed = True
            page.evaluate(_CLOSE_JS, name)
            seen[name] = {"cells": cells, "errors": watch.errors[errors_before:]}
    (ARTIFACTS / "untrusted.json").write_text(json.dumps(
        {name: [{"cell": c["index"], "output": j, **o} for c in r["cells"] if c
                for j, o in enumerate(c["outputs"]) if o["kind"]]
         for name, r in seen.items()}, indent=1))
    return seen


@pytest.mark.browser
@pytest.mark.slow
def test_untrusted_notebooks_show_every_picture(untrusted, snapshot):
    """Every stored picture shows as its PNG, loaded and on screen when scrolled to;
    every step list shows its hint line and its steps."""
    _, notebooks = snapshot
    problems = []
    for name, nb in notebooks.items():
        problems += _check_untrusted(name, nb, untrusted[name]["cells"])
        problems += [f"{name}: console: {e}" for e in untrusted[name]["errors"]]
    assert not problems, f"{len(problems)} problems in untrusted notebooks:\n" + "\n".join(problems)


def _lab_indices(outputs: list[dict]) -> list[int]:
    """Where each stored output is among JupyterLab's untrusted output items: it joins a
    stream output (stdout, stderr) to the one before it when both are of the same
    stream, and shows an output with no safe mime type (a script alone) as an empty
    widget that is not an item (-1)."""
    where: list[int] = []
    previous, last = None, -1
    for out in outputs:
        if set(out.get("data", {"": 0})) == {"application/javascript"}:
            where.append(-1)
            continue
        stream = out.get("name") if out.get("output_type") == "stream" else None
        joined = stream is not None and stream == previous
        last = last if joined else last + 1
        where.append(last)
        previous = stream
    return where


def _check_untrusted(name: str, nb: dict, cells) -> list[str]:
    """What is wrong with one untrusted notebook's rendered outputs, one line each."""
    if len(cells) != len(nb["cells"]):
        return [f"{name}: JupyterLab shows {len(cells)} cells, the file has {len(nb['cells'])}"]
    problems = []
    for cell in filter(None, cells):
        i = cell["index"]
        stored = nb["cells"][i].get("outputs", [])
        if cell["trusted"] and stored:
            problems.append(f"{name} cell {i}: opened TRUSTED, so this does not test untrusted output")
        where = _lab_indices(stored)
        want, model = len(set(where) - {-1}), len(set(where) - {-1}) + where.count(-1)
        if len(cell["outputs"]) != want or cell["stored"] != model:
            problems.append(f"{name} cell {i}: {len(cell['outputs'])} outputs shown and {cell['stored']} in "
                            f"JupyterLab's model, {want} and {model} expected from the {len(stored)} stored")
    for i, j, kind, out in _stored(nb):
        where = f"{name} cell {i} output {j}"
        got, k = cells[i]["outputs"], _lab_indices(nb["cells"][i]["outputs"])[j]
        if kind == "script":  # nothing to show untrusted (JupyterLab runs no script there)
            if k != -1:
                problems.append(f"{where}: a script output that JupyterLab shows as an output item")
            continue
        if k >= len(got):
            problems.append(f"{where}: not shown (a {kind} output)")
            continue
        shown = got[k]
        if kind == "old":
            problems.append(f"{where}: a picture in the old format: re-run the notebook")
        elif shown["kind"] != kind:
            problems.append(f"{where}: JupyterLab's model says it is {shown['kind']!r}, the file {kind!r}")
        elif kind == "picture":
            problems += _check_untrusted_picture(where, out, shown)
        elif kind == "steps":
            problems += _check_untrusted_steps(where, out, shown)
        elif shown["mime"] != "text/html":
            problems.append(f"{where}: the {kind} shown as {shown['mime']!r}, not as HTML")
    return problems


def _check_untrusted_picture(where: str, out: dict, shown: dict) -> list[str]:
    plain = _text(out["data"]["text/plain"]).strip().splitlines()[0]
    if shown["mime"] != "image/png":
        return [f"{where}: shown as {shown['mime']!r} with {shown['imgs']} <img>, not as its image/png "
                f"(its text: {shown['text'][:80]!r})"]
    img = shown.get("img")
    if img is None:
        return [f"{where}: shown as image/png, but holds no <img>"]
    problems = []
    if not (img["complete"] and img["natural"][0] > 0):
        problems.append(f"{where}: image not loaded (complete={img['complete']}, natural={img['natural']}, "
                        f"src={img['src']!r})")
    elif tuple(img["natural"]) != _png_size(out):
        problems.append(f"{where}: the image is {img['natural']} px, the stored PNG {_png_size(out)}")
    if not img["visible"] or 0 in img["box"] or not img["on_top"]:
        problems.append(f"{where}: image not visible when scrolled to (box {img['box']}, visible "
                        f"{img['visible']}, the point at its centre hits {img['hit']})")
    if plain in shown["text"]:
        problems.append(f"{where}: its text/plain {plain[:60]!r} shown beside or instead of the picture")
    return problems


def _check_untrusted_steps(where: str, out: dict, shown: dict) -> list[str]:
    want = _step_list(out)
    hint, listed = shown.get("hint"), shown.get("list")
    problems = []
    if hint is None:
        problems.append(f"{where}: no hint line 'The picture cannot step here ...' (shown: {shown['text'][:120]!r})")
    else:
        if _words(hint["text"]) != _words(want["hint"] or ""):
            problems.append(f"{where}: the hint line reads {hint['text']!r}, stored {want['hint']!r}")
        if not hint["visible"] or 0 in hint["box"] or not hint["on_top"]:
            problems.append(f"{where}: the hint line is not visible when scrolled to (box {hint['box']}, "
                            f"the point at its centre hits {hint['hit']})")
    if listed is None:
        problems.append(f"{where}: no step list (<ol>) shown")
    else:
        if [_words(t) for t in listed["items"]] != [_words(t) for t in want["items"]]:
            problems.append(f"{where}: the list shows {len(listed['items'])} steps {listed['items'][:3]}..., "
                            f"stored {len(want['items'])} {want['items'][:3]}...")
        if not listed["visible"] or 0 in listed["box"] or not listed["on_top"]:
            problems.append(f"{where}: the step list is not visible when scrolled to (box {listed['box']}, "
                            f"the point at its centre hits {listed['hit']})")
    if want["caption"] and not (shown.get("caption") and shown["caption"]["visible"]
                                and _words(shown["caption"]["text"]) == _words(want["caption"])):
        problems.append(f"{where}: the caption {want['caption']!r} is not shown ({shown.get('caption')})")
    if want["more"] and not (shown.get("more") and shown["more"]["visible"]
                             and _words(shown["more"]["text"]) == _words(want["more"])):
        problems.append(f"{where}: the line {want['more']!r} after the list is not shown ({shown.get('more')})")
    return problems


# -- 2. Dark theme contrast ------------------------------------------------------------------

# WCAG 2 contrast of an element's text against what is behind it: its own background
# composited over its ancestors' (white, the canvas, when none is opaque).
_CONTRAST_JS = """e => {
  const rgba = c => { const m = c.match(/rgba?\\(([^)]+)\\)/); if (!m) return [0, 0, 0, 0];
    const v = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number); return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1]; };
  const over = (top, under) => [0, 1, 2].map(i => top[i] * top[3] + under[i] * (1 - top[3]));
  const layers = [];
  for (let n = e; n; n = n.parentElement) {
    const c = rgba(getComputedStyle(n).backgroundColor);
    if (c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
  }
  let bg = [255, 255, 255];
  for (const c of layers.reverse()) bg = over(c, bg);
  const fg = over(rgba(getComputedStyle(e).color), bg);
  const lin = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
  const lum = c => 0.2126 * lin(c[0]) + 0.7152 * lin(c[1]) + 0.0722 * lin(c[2]);
  const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
  return {ratio: (hi + 0.05) / (lo + 0.05), fg: fg.map(Math.round), bg: bg.map(Math.round),
          text: e.textContent.slice(0, 60), visible: e.checkVisibility()}; }"""


@pytest.mark.browser
def test_an_open_jupyterlab_gives_up_on_is_tried_again_and_a_missing_notebook_fails(lab_page):
    """The tests' _open: a panel closed as it opens (as JupyterLab closes one whose open
    failed) is opened again with a warning that says so; a notebook that is not there
    fails the test, naming it and what the server said."""
    page, watch = lab_page
    page.evaluate("""() => { const c = window.jupyterapp.commands, run = c.execute.bind(c); let n = 0;
      c.execute = (id, args) => { const p = run(id, args);
        if (id === 'docmanager:open' && n++ === 0) p.then(w => w.dispose());
        return p; }; }""")
    name = "01_simple_backward.ipynb"
    with pytest.warns(UserWarning, match=f"did not open {name} \\(try 1 of 2\\): its panel was closed"):
        _open(page, name, watch=watch)
    assert page.evaluate("p => window.__dgPanels[p].isRevealed && !window.__dgPanels[p].isDisposed", name)
    with pytest.warns(UserWarning, match="try 1 of 2"), pytest.raises(pytest.fail.Exception) as failed:
        _open(page, "no_such.ipynb", watch=watch)
    assert "did not open no_such.ipynb (try 2 of 2)" in str(failed.value)
    assert "404" in str(failed.value)
    assert not watch.errors, watch.errors  # the failed opens' 404s went into the messages


@pytest.mark.browser
@pytest.mark.slow
def test_dark_theme_step_text_is_readable(lab_page, lab):
    """In JupyterLab's Dark theme, a run (so trusted) stepper's step text, counter,
    buttons and zoom level, and its step list's caption, have a contrast of at least
    4.5:1 (WCAG AA) against what is behind them; the list's steps are hidden (the
    stepper shows them)."""
    page, watch = lab_page
    name = "dark_theme_stepper.ipynb"
    _new_notebook(lab.folder, name, STEPPER_SOURCE)
    try:
        with _shot_on_failure(page, "dark"):
            _open(page, name, watch=watch)
            page.evaluate(_THEME_JS, "JupyterLab Dark")
            if not _wait(page, _THEME_DONE_JS, "JupyterLab Dark", OPEN_TIMEOUT):
                pytest.fail(f"the theme is {page.evaluate('document.body.dataset.jpThemeName')!r} "
                            "after apputils:change-theme to 'JupyterLab Dark'")
            page.evaluate(_RUN_JS, name)  # outputs made by running are trusted: the script runs
            if not _wait(page, _RUN_DONE_JS, name, RUN_TIMEOUT):
                pytest.fail(f"{name}: no live stepper within {RUN_TIMEOUT // 1000} s; "
                            f"cell errors {page.evaluate(_CELL_ERRORS_JS, name)}, console {watch.errors}")
            panel = page.locator(f"#{_css_id(page, name)}")
            out = panel.locator(".dg-out").first
            measured = {sel: out.locator(sel).first.evaluate(_CONTRAST_JS) for sel in (
                ".dg-now", ".dg-info", 'button[data-act="next"]', 'button[data-act="zin"]', ".dg-zoom")}
            steps = panel.locator(".dg-steps")
            assert steps.count() == 1, f"{steps.count()} step lists (div.dg-steps) shown, expected 1"
            measured[".dg-steps b"] = steps.locator("b").first.evaluate(_CONTRAST_JS)
            assert steps.locator("li").count() and not steps.locator("li:visible").count(), \
                "the plain step list shows beside the live stepper"
            print("contrast in JupyterLab Dark:", {k: round(m["ratio"], 2) for k, m in measured.items()})
            _shot(page, out, ARTIFACTS / "dark.png")
            hidden = [k for k, m in measured.items() if not m["visible"]]
            assert not hidden, f"not visible in the Dark theme: {hidden}"
            low = {k: m for k, m in measured.items() if m["ratio"] < 4.5}
            assert not low, f"contrast below WCAG AA 4.5:1 in JupyterLab Dark: {low}"
            assert not watch.errors, f"errors in the browser console: {watch.errors}"
    finally:
        page.evaluate(_THEME_JS, "JupyterLab Light")  # the server's settings outlive the test


TALL_SOURCE = LESSON07_REPLAY  # lesson 07's backward replay: 21 steps, taller than its canvas


@pytest.mark.browser
@pytest.mark.slow
def test_a_tall_stepper_keeps_what_it_lights_in_view_in_jupyterlab(lab_page, lab):
    """Run in JupyterLab (so trusted), lesson 07's replay lights every step's node in
    view, whether the notebook shows the output's top or its own top, with the canvas's
    foot below the notebook's (measured as in test_page: the node's box inside the canvas
    and the window, hit tests at its corners and centre); its plain step list does not show."""
    from test_page import _check_taller_than_canvas, _lit_problems

    page, watch = lab_page
    name = "tall_stepper.ipynb"
    _new_notebook(lab.folder, name, TALL_SOURCE)
    problems = []
    with _shot_on_failure(page, "tall-lab"):
        _open(page, name, watch=watch)
        page.evaluate(_RUN_JS, name)
        if not _wait(page, _RUN_DONE_JS, name, RUN_TIMEOUT):
            pytest.fail(f"{name}: no live stepper within {RUN_TIMEOUT // 1000} s; "
                        f"cell errors {page.evaluate(_CELL_ERRORS_JS, name)}, console {watch.errors}")
        panel = page.locator(f"#{_css_id(page, name)}")
        stepper = panel.locator("div.dg-stepper")
        _check_taller_than_canvas(stepper)
        page.wait_for_timeout(300)
        problems += _lit_problems(stepper, "on run")
        for where, scroll in (("the output's top in view", "r => r.scrollIntoView({block: 'start'})"),
                              ("the notebook scrolled to its top, the canvas's foot below it",
                               "r => { r.closest('.jp-WindowedPanel-outer').scrollTop = 0; }")):
            stepper.evaluate(scroll)
            page.wait_for_timeout(300)
            stepper.locator('button[data-act="first"]').click()
            problems += _lit_problems(stepper, f"{where}: first")
            for _ in range(20):
                stepper.locator('button[data-act="next"]').click()
                problems += _lit_problems(stepper, f"{where}: next")
        listed = panel.locator(".dg-steps li:visible").count()
        _shot(page, stepper, ARTIFACTS / "tall-lab.png")
        assert not problems, f"{len(problems)} steps light nodes out of view in JupyterLab:\n" + "\n".join(problems)
        assert listed == 0, f"{listed} steps of the plain list show beside the live stepper"
        assert not watch.errors, f"errors in the browser console: {watch.errors}"


# -- 3. One output shown twice ------------------------------------------------------------

_INFO_JS = "d => [d.querySelector('.dg-info').textContent, d.querySelector('.dg-now').textContent]"


@pytest.mark.browser
@pytest.mark.slow
def test_same_notebook_open_twice_steps_both(lab_page, lab):
    """Two trusted copies of one notebook, open side by side: a button in one steps
    that copy only."""
    import nbformat
    from nbclient import NotebookClient

    page, watch = lab_page
    names = ["twice_a.ipynb", "twice_b.ipynb"]
    nb = nbformat.read(_new_notebook(lab.folder, "twice.ipynb", STEPPER_SOURCE), as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(lab.folder)}}).execute()
    for name in names:
        nbformat.write(nb, lab.folder / name)
    subprocess.run([sys.executable, "-m", "jupyter", "trust", *names], cwd=lab.folder, env=lab.env,
                   check=True, capture_output=True, timeout=60)

    with _shot_on_failure(page, "twice"):
        _open(page, names[0], watch=watch)
        _open(page, names[1], ref=names[0], watch=watch)
        outs = [page.locator(f"#{_css_id(page, name)} .dg-out") for name in names]
        for name, out in zip(names, outs):
            _wait(page, _RENDERED_JS, name, OPEN_TIMEOUT)
            try:
                out.first.locator(".dg-bar").wait_for(state="visible")
            except Exception:  # noqa: BLE001 - a timeout or a detached page: either way no bar came
                pytest.fail(f"{name}: no stepper bar: the picture's script did not run (was the notebook trusted?)")
            assert out.count() == 1, f"{name}: {out.count()} div.dg-out, expected 1"
            assert out.locator("svg g.node").count() > 0, f"{name}: the script drew no inline SVG with nodes"
        infos = [o.evaluate(_INFO_JS) for o in outs]
        n = int(infos[0][0].split("/")[1].split()[0])
        assert infos[0] == infos[1] and infos[0][0] == f"step {n} / {n}", f"steppers start at {infos}"

        for me, other in ((0, 1), (1, 0)):
            for act, want in (("first", 1), ("next", 2), ("prev", 1), ("last", n)):
                before = [o.evaluate(_INFO_JS) for o in outs]
                outs[me].locator(f'button[data-act="{act}"]').click()  # its handler runs in the click
                after = [o.evaluate(_INFO_JS) for o in outs]
                assert after[me][0] == f"step {want} / {n}", (
                    f"'{act}' in {names[me]}: its .dg-info reads {after[me][0]!r}, expected 'step {want} / {n}'")
                assert after[me] != before[me], f"'{act}' in {names[me]} changed nothing there: {after[me]}"
                assert after[other] == before[other], (
                    f"'{act}' in {names[me]} changed the other copy {names[other]}: {before[other]} -> {after[other]}")
        outs[0].locator('button[data-act="first"]').click()  # the copies differ in the picture
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "twice.png"))
        assert not watch.errors, f"errors in the browser console: {watch.errors}"


# -- 4. nbconvert HTML, without and with JavaScript ------------------------------------------


@pytest.fixture(scope="module")
def converted(snapshot, tmp_path_factory) -> Path:
    """The snapshot's notebooks as `jupyter nbconvert --to html` pages: their folder."""
    folder, notebooks = snapshot
    out = tmp_path_factory.mktemp("nbconvert")
    proc = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--output-dir", str(out),
         *(str(folder / name) for name in notebooks)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"nbconvert failed:\n{proc.stderr[-3000:]}"
    return out


class _NoScript(Watch):
    """A :class:`Watch` whose pages run no JavaScript (file: pages; the rest blocked)."""

    def __init__(self, browser):
        self.port = None
        self.errors, self.blocked = [], []
        self.context = browser.new_context(viewport=VIEWPORT, java_script_enabled=False)
        self.context.route("**/*", self._route)


# Per cell of an nbconvert page (in order): what each output shows (window.__dgMeasure).
_PAGE_JS = """() => [...document.querySelectorAll('.jp-Cell')].map(cell =>
  [...cell.querySelectorAll('.jp-OutputArea-child')].map((child, j) => window.__dgMeasure(child, null)))"""


def _page_report(page, nb: dict) -> tuple[list, list[str]]:
    """What each cell of an nbconvert page shows, and a problem if its cells or outputs
    do not line up with the notebook's."""
    page.evaluate(_MEASURE_JS)
    cells = page.evaluate(_PAGE_JS)
    if len(cells) != len(nb["cells"]):
        return cells, [f"{len(cells)} cells in the page, {len(nb['cells'])} in the notebook"]
    return cells, [f"cell {i}: {len(shown)} outputs in the page, {len(cell.get('outputs', []))} stored"
                   for i, (cell, shown) in enumerate(zip(nb["cells"], cells))
                   if len(shown) != len(cell.get("outputs", []))]


def _converted_pages(page, notebooks: dict, converted: Path, problems: list[str]):
    """Open each notebook's nbconvert page in ``page``; yield ``(name, notebook, what each
    cell shows)`` for each page whose cells and outputs line up with the notebook's (and
    add a problem for each that does not)."""
    for name, nb in notebooks.items():
        page.goto((converted / (Path(name).stem + ".html")).as_uri(), wait_until="load")
        cells, bad = _page_report(page, nb)
        problems += [f"{name}: {b}" for b in bad]
        if not bad:
            yield name, nb, cells


@pytest.mark.browser
@pytest.mark.slow
def test_nbconvert_html_without_javascript_shows_every_picture(snapshot, converted, browser):
    """With JavaScript off, each stored picture of an nbconvert page shows as its PNG
    (loaded, on screen when scrolled to), each step list shows its hint line, and no
    output shows controls or script text."""
    _, notebooks = snapshot
    watch = _NoScript(browser)
    problems = []
    shot = ARTIFACTS / "nbconvert-nojs-failed.png"  # the first output that fails, as it looked
    shot.unlink(missing_ok=True)
    try:
        page = watch.new_page()
        for name, nb, cells in _converted_pages(page, notebooks, converted, problems):
            for i, j, kind, out in _stored(nb):
                where, shown = f"{name} cell {i} output {j}", cells[i][j]
                found = _dead_controls(where, shown)
                if kind == "picture":
                    found += _check_untrusted_picture(where, out, shown)
                elif kind == "steps":
                    found += _check_untrusted_steps(where, out, shown)
                elif kind == "old":
                    found.append(f"{where}: a picture in the old format: re-run the notebook")
                if found and not shot.exists():
                    _shot(page, page.locator(".jp-Cell").nth(i).locator(".jp-OutputArea-child").nth(j), shot)
                problems += found
    finally:
        watch.close()
    print(f"nbconvert pages without JavaScript requested (blocked): {sorted(set(watch.blocked))}")
    assert not problems, f"{len(problems)} problems in nbconvert pages without JavaScript:\n" + "\n".join(problems)
    assert not watch.errors, f"errors in the browser console: {watch.errors}"


@pytest.mark.browser
@pytest.mark.slow
def test_nbconvert_html_with_javascript_shows_live_pictures(snapshot, converted, browser):
    """With JavaScript on (and nothing loaded from other sites), each stored picture of an
    nbconvert page is drawn once as inline SVG with nodes; each stepper steps
    (check_stepper) and hides its step list's hint line."""
    _, notebooks = snapshot
    watch = Watch(browser)
    problems, steppers = [], 0
    try:
        page = watch.new_page()
        for name, nb, cells in _converted_pages(page, notebooks, converted, problems):
            for i, j, out in _pictures(nb):
                where, shown = f"{name} cell {i} output {j}", cells[i][j]
                if _kind(out) == "old":
                    problems.append(f"{where}: a picture in the old format: re-run the notebook")
                    continue
                script = cells[i][j + 1]  # the script's output draws the live picture
                live = script["dg"]
                want_steps = "s" in _data(nb["cells"][i]["outputs"][j + 1])
                if len(live) != 1:
                    problems.append(f"{where}: {len(live)} live pictures (div.dg-out) after it, expected 1 "
                                    f"(shown as {script['mime']!r})")
                elif live[0]["nodes"] == 0 or 0 in live[0]["box"] or not live[0]["bar"]:
                    problems.append(f"{where}: the live picture has no nodes, an empty box or no bar: {live[0]}")
                elif live[0]["stepper"] != want_steps:
                    problems.append(f"{where}: stepper is {live[0]['stepper']}, its data has steps: {want_steps}")
                if script["imgs"] or (shown.get("img") or {}).get("visible", True):
                    problems.append(f"{where}: the PNG still shows beside the live picture (the script hides it)")
            stepper = page.locator("div.dg-stepper")
            for k in range(stepper.count()):
                check_stepper(stepper.nth(k))
            steppers += stepper.count()
            if name.startswith("05") and stepper.count():
                _shot(page, stepper.first, ARTIFACTS / "nbconvert-js.png")
    finally:
        watch.close()
    print(f"nbconvert pages with JavaScript: {steppers} steppers checked; requested (blocked): {sorted(set(watch.blocked))}")
    assert not problems, f"{len(problems)} problems in nbconvert pages with JavaScript:\n" + "\n".join(problems)
    # The only errors allowed: loading the scripts from other sites that the page links (blocked here).
    errors = [e for e in watch.errors if not (watch.blocked and "net::ERR_FAILED" in e)]
    assert not errors, f"errors in the browser console: {errors}"


# -- Last (so that -x runs the rest first): what untrusted output must not show -------


def _dead_controls(where: str, shown: dict) -> list[str]:
    """Controls, or the script's text, in an output where no script runs to make them work."""
    bad = []
    parts = {k: shown[k] for k in ("buttons", "inputs") if shown[k]}
    if parts:
        bad.append(f"{where}: controls shown: {parts}")
    controls = sorted(set(_CONTROL_TEXT.findall(shown["text"])))
    if controls:
        bad.append(f"{where}: the controls' text {controls} shown")
    script = _SCRIPT_TEXT.search(shown["text"])
    if script:
        bad.append(f"{where}: the script shown as text: "
                   f"{shown['text'][max(0, script.start() - 40):script.end() + 40]!r}")
    return bad


@pytest.mark.browser
@pytest.mark.slow
def test_untrusted_notebooks_show_no_dead_controls(untrusted):
    """No script runs in untrusted output, so no button, slider, step counter or zoom
    level may show there (they would do nothing), nor the script's source as text; no
    output of any cell holds a button."""
    dead = []
    for name, report in untrusted.items():
        for cell in filter(None, report["cells"]):
            for j, shown in enumerate(cell["outputs"]):
                where = f"{name} cell {cell['index']} output {j}"
                if shown["kind"]:
                    dead += _dead_controls(where, shown)
                elif shown["buttons"] or _SCRIPT_TEXT.search(shown["text"]):
                    dead.append(f"{where}: {shown['buttons']} buttons or the script's text: {shown['text'][:120]!r}")
    assert not dead, "controls that cannot work are shown in untrusted output:\n" + "\n".join(dead)
