"""Stored pictures show where dynagraph's script cannot run, and its script works
where it can.

A dynagraph output is one ``<div class="dg-out">`` whose picture is an ``<img>`` of
base64 SVG; view.js, where scripts run, upgrades it in place to inline SVG with zoom
and a stepper. Here:

* the committed notebooks open *untrusted* in JupyterLab (scripts and inline SVG
  stripped) and show every stored picture as a loaded image;
* ``jupyter nbconvert --to html`` pages show every picture with JavaScript off;
* in JupyterLab's Dark theme a stepper's text and buttons keep WCAG AA contrast;
* two notebooks holding the same stepper output, open side by side, step apart;
* untrusted output shows no buttons (no script runs there to make them work).

One JupyterLab server (throwaway config, data, runtime, settings and workspace
folders, so no trust database of the user's makes a notebook trusted) serves a
snapshot of notebooks/ for the whole module. DYNAGRAPH_DOCS_NOTEBOOKS points these
tests at another folder of notebooks, as for test_docs.py and test_jupyterlab.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from _chromium import ARTIFACTS, ROOT, VIEWPORT, Watch, chromium
from _lab import serve

NOTEBOOK_DIR = Path(os.environ.get("DYNAGRAPH_DOCS_NOTEBOOKS", ROOT / "notebooks"))
NOTEBOOKS = sorted(p.name for p in NOTEBOOK_DIR.glob("*.ipynb"))
MAX_OUTPUT_BYTES = 300_000  # json.dumps of one stored output's data
# The root of a dynagraph output: the current `dg-out`, and the classes of the
# older formats (inline <svg>), so that a notebook still holding those is counted
# as holding pictures that the checks below then do not find.
_DG_CLASS = re.compile(r'class="(?:[^"]*\s)?(dg-out|dynagraph-graph|dg-stepper|dynagraph-diff)(?=[\s"])')
_SCRIPT = re.compile(r"<script\b.*?</script>", re.S | re.I)
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


def _html(output: dict) -> str | None:
    html = output.get("data", {}).get("text/html")
    return "".join(html) if isinstance(html, list) else html


def _pictures(nb: dict) -> list[tuple[int, int, dict]]:
    """``(cell index, output index, output)`` of each stored dynagraph picture (an
    output that shows several, side by side, is listed once for each)."""
    return [(i, j, out)
            for i, cell in enumerate(nb["cells"]) if cell["cell_type"] == "code"
            for j, out in enumerate(cell.get("outputs", []))
            for _ in _DG_CLASS.findall(_html(out) or "")]


def _plain(output: dict) -> str:
    text = output.get("data", {}).get("text/plain", "")
    return "".join(text) if isinstance(text, list) else text


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_stored_pictures_are_images_and_small(name):
    _, nb = _read(NOTEBOOK_DIR / name)
    bad = []
    for i, cell in enumerate(nb["cells"]):
        for j, out in enumerate(cell.get("outputs", [])):
            size = len(json.dumps(out.get("data", {})))
            if size >= MAX_OUTPUT_BYTES:
                bad.append(f"cell {i} output {j}: {size:,} bytes (limit {MAX_OUTPUT_BYTES:,})")
    for i, j, out in _pictures(nb):
        html = _html(out)
        markup = _SCRIPT.sub("", html)  # the picture's markup, not view.js's source
        if 'class="dg-out' not in html:
            bad.append(f"cell {i} output {j}: old format (no div.dg-out; root class "
                       f"{_DG_CLASS.search(html).group(1)!r}): re-run the notebook")
        if "data:image/svg+xml;base64," not in html or 'class="dg-pic"' not in html:
            bad.append(f"cell {i} output {j}: no <img class=\"dg-pic\" src=\"data:image/svg+xml;base64,...\">")
        if "<svg" in markup:
            bad.append(f"cell {i} output {j}: inline <svg> in the stored HTML (stripped in untrusted notebooks)")
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


# -- JupyterLab helpers -----------------------------------------------------------------

# Opens a notebook in the main area (split to the right of `ref` when given), and
# keeps the panel as window.__dgPanels[path] for the snippets below.
_OPEN_JS = """async ([path, ref]) => {
  const app = window.jupyterapp;
  const options = ref ? {mode: 'split-right', ref: window.__dgPanels[ref].id} : undefined;
  const w = await app.commands.execute('docmanager:open', {path, factory: 'Notebook', options});
  await w.context.ready; await w.revealed;
  window.__dgPanels[path] = w;
  return w.id; }"""
_CLOSE_JS = "path => { const w = window.__dgPanels[path]; delete window.__dgPanels[path]; w.dispose(); }"
# Rendered: every stored output has its node, every HTML output its content, and
# every image in them has settled (loaded or failed).
_RENDERED_JS = """path => { const w = window.__dgPanels[path];
  const cells = w.content.widgets.filter(c => c.model.type === 'code');
  return cells.every(c => c.node.querySelectorAll('.jp-OutputArea-output').length >= c.model.outputs.length)
    && [...w.node.querySelectorAll('.jp-OutputArea-output[data-mime-type="text/html"]')].every(o => o.childNodes.length)
    && [...w.node.querySelectorAll('.jp-OutputArea-output img')].every(i => i.complete); }"""
# Per code cell (by model index): trust, what each output rendered as, and each
# div.dg-out: its image, and what the sanitizer kept of its markup.
_REPORT_JS = """path => { const w = window.__dgPanels[path];
  const box = e => { const b = e.getBoundingClientRect(); return [Math.round(b.width), Math.round(b.height)]; };
  return w.content.widgets.map((cell, index) => {
    if (cell.model.type !== 'code') return null;
    const outputs = [...cell.node.querySelectorAll('.jp-OutputArea-output')].map(o => ({
      mime: o.dataset.mimeType || '', text: o.textContent.slice(0, 200)}));
    const pictures = [...cell.node.querySelectorAll('.dg-out')].map(d => {
      const img = d.querySelector('img.dg-pic'), bar = d.querySelector('.dg-bar'), now = d.querySelector('.dg-now');
      const canvas = d.querySelector('.dg-canvas');
      return {
        img: img && {complete: img.complete, natural: [img.naturalWidth, img.naturalHeight], box: box(img),
                     visible: img.checkVisibility(), src: (img.getAttribute('src') || '').slice(0, 30),
                     style: img.getAttribute('style')},
        svg: d.querySelectorAll('svg').length, scripts: d.querySelectorAll('script').length,
        style_element: !!d.querySelector('style'),
        bar: bar && {hidden_attr: bar.hasAttribute('hidden'), visible: bar.checkVisibility(),
                     buttons: bar.querySelectorAll('button').length},
        now: now && {hidden_attr: now.hasAttribute('hidden'), visible: now.checkVisibility(), box: box(now)},
        canvas: canvas && {style: canvas.getAttribute('style'), box: box(canvas),
                           overflow: getComputedStyle(canvas).overflow, maxHeight: getComputedStyle(canvas).maxHeight},
        details: !!d.querySelector('details'), text: d.textContent.slice(0, 300)};
    });
    return {index, trusted: cell.model.trusted, outputs, pictures};
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


def _open(page, path: str, ref: str | None = None) -> None:
    page.evaluate(_OPEN_JS, [path, ref])


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


# -- 1. Untrusted notebooks ---------------------------------------------------------------


@pytest.fixture(scope="module")
def untrusted(lab, browser, snapshot) -> dict[str, dict]:
    """Each stored notebook opened untrusted in JupyterLab, with no kernel, one at a
    time: ``{name: {"cells": per-cell report, "errors": console errors}}``. Saves
    artifacts/untrusted.png (02's rolled RNN, or the last notebook's picture), untrusted.json
    (what the sanitizer left of each picture) and untrusted-failed.png (the first
    notebook whose pictures fail, as it looked)."""
    _, notebooks = snapshot
    seen, shot, failed = {}, False, False
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "untrusted-failed.png").unlink(missing_ok=True)  # not a stale one
    with _lab_page(lab, browser) as (page, watch):
        for name, nb in notebooks.items():
            expected = _pictures(nb)
            errors_before = len(watch.errors)
            _open(page, name)
            _wait(page, _RENDERED_JS, name, OPEN_TIMEOUT)
            cells = page.evaluate(_REPORT_JS, name)
            outs = page.locator(f"#{_css_id(page, name)} .dg-out")
            # the screenshot: 02's last picture (a rolled 100-step RNN), else the first one
            wanted = name.startswith("02") or (not shot and name == list(notebooks)[-1])
            if outs.count() and wanted and not shot:
                _shot(page, outs.last, ARTIFACTS / "untrusted.png")
                shot = True
            if not failed and _check_untrusted(name, nb, expected, cells):
                page.screenshot(path=str(ARTIFACTS / "untrusted-failed.png"))
                failed = True
            page.evaluate(_CLOSE_JS, name)
            seen[name] = {"cells": cells, "errors": watch.errors[errors_before:]}
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "untrusted.json").write_text(json.dumps(
        {name: [{"cell": c["index"], **p} for c in r["cells"] if c for p in c["pictures"]]
         for name, r in seen.items()}, indent=1))
    return seen


@pytest.mark.browser
@pytest.mark.slow
def test_untrusted_notebooks_show_every_picture(untrusted, snapshot):
    _, notebooks = snapshot
    problems = []
    for name, nb in notebooks.items():
        problems += _check_untrusted(name, nb, _pictures(nb), untrusted[name]["cells"])
        problems += [f"{name}: console: {e}" for e in untrusted[name]["errors"]]
    assert not problems, f"{len(problems)} problems in untrusted notebooks:\n" + "\n".join(problems)


def _check_untrusted(name: str, nb: dict, expected, cells) -> list[str]:
    """What is wrong with one untrusted notebook's rendered outputs, one line each."""
    problems = []
    by_cell: dict[int, list[tuple[int, dict]]] = {}
    for i, j, out in expected:
        by_cell.setdefault(i, []).append((j, out))
    if len(cells) != len(nb["cells"]):
        return [f"{name}: JupyterLab shows {len(cells)} cells, the file has {len(nb['cells'])}"]
    found = sum(len(c["pictures"]) for c in cells if c)
    if found != len(expected):
        problems.append(f"{name}: {found} div.dg-out shown, {len(expected)} dynagraph outputs stored")
    for cell in cells:
        if cell is None:
            continue
        i, want, got = cell["index"], by_cell.get(cell["index"], []), cell["pictures"]
        if cell["trusted"] and nb["cells"][i].get("outputs"):
            problems.append(f"{name} cell {i}: opened TRUSTED, so this does not test untrusted output")
        for k, (j, out) in enumerate(want):
            where = f"{name} cell {i} output {j}"
            plain = _plain(out).strip()[:60]
            if plain and any(o["mime"] == "text/plain" and plain in o["text"] for o in cell["outputs"]):
                problems.append(f"{where}: shown as bare text {plain!r} instead of a picture")
            if k >= len(got):
                root = _DG_CLASS.search(_html(out)).group(1)
                shown = [o["text"][:80] for o in cell["outputs"] if o["mime"] == "text/html"]
                problems.append(f"{where}: no div.dg-out shown (stored root class {root!r}); "
                                f"the cell's HTML outputs read {shown}")
                continue
            p = got[k]
            img = p["img"]
            if img is None:
                problems.append(f"{where}: div.dg-out without img.dg-pic (svg elements: {p['svg']})")
            elif not (img["complete"] and img["natural"][0] > 0):
                problems.append(f"{where}: image not loaded (complete={img['complete']}, natural={img['natural']}, "
                                f"src={img['src']!r})")
            elif not img["visible"] or 0 in img["box"]:
                problems.append(f"{where}: image not visible (box {img['box']})")
            if any(s in p["text"] for s in ("<svg", "data:image", ".dg-out {", "function ()")):
                problems.append(f"{where}: markup, CSS or script shown as text: {p['text'][:120]!r}")
            if p["scripts"] or p["svg"]:
                problems.append(f"{where}: {p['scripts']} <script> and {p['svg']} <svg> left in untrusted output")
        if len(got) > len(want):
            problems.append(f"{name} cell {i}: {len(got)} div.dg-out shown, {len(want)} stored")
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
@pytest.mark.slow
def test_dark_theme_step_text_is_readable(lab_page, lab):
    page, watch = lab_page
    name = "dark_theme_stepper.ipynb"
    _new_notebook(lab.folder, name, STEPPER_SOURCE)
    try:
        with _shot_on_failure(page, "dark"):
            _open(page, name)
            page.evaluate(_THEME_JS, "JupyterLab Dark")
            if not _wait(page, _THEME_DONE_JS, "JupyterLab Dark", OPEN_TIMEOUT):
                pytest.fail(f"the theme is {page.evaluate('document.body.dataset.jpThemeName')!r} "
                            "after apputils:change-theme to 'JupyterLab Dark'")
            page.evaluate(_RUN_JS, name)  # outputs made by running are trusted: view.js runs
            if not _wait(page, _RUN_DONE_JS, name, RUN_TIMEOUT):
                pytest.fail(f"{name}: no live stepper within {RUN_TIMEOUT // 1000} s; "
                            f"cell errors {page.evaluate(_CELL_ERRORS_JS, name)}, console {watch.errors}")
            out = page.locator(f"#{_css_id(page, name)} .dg-out").first
            measured = {sel: out.locator(sel).first.evaluate(_CONTRAST_JS) for sel in (
                ".dg-now", ".dg-info", 'button[data-act="next"]', 'button[data-act="zin"]', ".dg-zoom")}
            print("contrast in JupyterLab Dark:", {k: round(m["ratio"], 2) for k, m in measured.items()})
            _shot(page, out, ARTIFACTS / "dark.png")
            hidden = [k for k, m in measured.items() if not m["visible"]]
            assert not hidden, f"not visible in the Dark theme: {hidden}"
            low = {k: m for k, m in measured.items() if m["ratio"] < 4.5}
            assert not low, f"contrast below WCAG AA 4.5:1 in JupyterLab Dark: {low}"
            assert not watch.errors, f"errors in the browser console: {watch.errors}"
    finally:
        page.evaluate(_THEME_JS, "JupyterLab Light")  # the server's settings outlive the test


# -- 3. One output shown twice ------------------------------------------------------------

_INFO_JS = "d => [d.querySelector('.dg-info').textContent, d.querySelector('.dg-now').textContent]"


@pytest.mark.browser
@pytest.mark.slow
def test_same_notebook_open_twice_steps_both(lab_page, lab):
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
        _open(page, names[0])
        _open(page, names[1], ref=names[0])
        outs = [page.locator(f"#{_css_id(page, name)} .dg-out") for name in names]
        for name, out in zip(names, outs):
            _wait(page, _RENDERED_JS, name, OPEN_TIMEOUT)
            assert out.count() == 1, f"{name}: {out.count()} div.dg-out, expected 1"
            bar = out.locator(".dg-bar")
            try:
                bar.wait_for(state="visible")
            except Exception:  # noqa: BLE001 - a timeout or a detached page: either way the bar stayed hidden
                pytest.fail(f"{name}: stepper bar stays hidden: view.js did not run (was the notebook trusted?)")
            assert out.locator("svg g.node").count() > 0, f"{name}: the image was not upgraded to inline SVG"
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


def _css_id(page, name: str) -> str:
    return page.evaluate("p => CSS.escape(window.__dgPanels[p].id)", name)


# -- 4. nbconvert HTML without JavaScript ----------------------------------------------------


class _NoScript(Watch):
    """A :class:`Watch` whose pages run no JavaScript (file: pages; the rest blocked)."""

    def __init__(self, browser):
        self.port = None
        self.errors, self.blocked = [], []
        self.context = browser.new_context(viewport=VIEWPORT, java_script_enabled=False)
        self.context.route("**/*", self._route)


_STATIC_JS = """() => [...document.querySelectorAll('.dg-out')].map(d => {
  const img = d.querySelector('img.dg-pic'), bar = d.querySelector('.dg-bar');
  const b = img ? img.getBoundingClientRect() : {width: 0, height: 0};
  return {img: !!img, complete: !!img && img.complete, natural: img ? [img.naturalWidth, img.naturalHeight] : [0, 0],
          box: [Math.round(b.width), Math.round(b.height)], svg: d.querySelectorAll('svg').length,
          bar: !!bar && bar.checkVisibility()}; })"""


@pytest.mark.browser
@pytest.mark.slow
def test_nbconvert_html_without_javascript_shows_every_picture(snapshot, browser, tmp_path):
    folder, notebooks = snapshot
    proc = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--output-dir", str(tmp_path),
         *(str(folder / name) for name in notebooks)],
        capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"nbconvert failed:\n{proc.stderr[-3000:]}"
    watch = _NoScript(browser)
    problems = []
    try:
        page = watch.new_page()
        for name, nb in notebooks.items():
            expected = _pictures(nb)
            html = tmp_path / (Path(name).stem + ".html")
            page.goto(html.as_uri(), wait_until="load")
            shown = page.evaluate(_STATIC_JS)
            if len(shown) != len(expected):
                problems.append(f"{name}: {len(shown)} div.dg-out in the HTML, "
                                f"{len(expected)} dynagraph outputs stored")
            for (i, j, _), p in zip(expected, shown):
                if not (p["complete"] and p["natural"][0] > 0) or 0 in p["box"]:
                    problems.append(f"{name} cell {i} output {j}: picture not shown without JavaScript: {p}")
                if p["bar"]:
                    problems.append(f"{name} cell {i} output {j}: buttons shown that need JavaScript")
    finally:
        watch.close()
    assert not problems, "\n".join(problems)
    assert not watch.errors, f"errors in the browser console: {watch.errors}"
    print(f"nbconvert pages without JavaScript requested (blocked): {watch.blocked}")


# -- Last (so that -x runs the rest first): what untrusted output must not show -------


@pytest.mark.browser
@pytest.mark.slow
def test_untrusted_notebooks_show_no_dead_controls(untrusted):
    """No script runs in untrusted output, so its stepper and zoom buttons would do
    nothing: they must stay hidden. (JupyterLab's sanitizer drops the `hidden`
    attribute and <style> elements; an inline ``style="display:none"`` survives.)"""
    dead = []
    for name, report in untrusted.items():
        for cell in filter(None, report["cells"]):
            for p in cell["pictures"]:
                if p["bar"] and p["bar"]["visible"]:
                    dead.append(f"{name} cell {cell['index']}: div.dg-bar with {p['bar']['buttons']} buttons shown")
                if p["now"] and p["now"]["visible"] and p["now"]["box"][1] > 0:
                    dead.append(f"{name} cell {cell['index']}: div.dg-now (the step text box) shown, empty")
    assert not dead, ("controls that cannot work are shown in untrusted output:\n" + "\n".join(dead))
