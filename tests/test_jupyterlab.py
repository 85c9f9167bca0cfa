"""A real client: JupyterLab in headless Chromium clears a notebook, runs it all, and
shows dynagraph's pictures live: each picture output's script draws an inline SVG, and
each stepper steps.

The server runs on 127.0.0.1 (a free port, a token) with throwaway config, runtime,
settings and workspace folders, serving a temporary copy of notebooks/ only.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from _chromium import ARTIFACTS, ROOT, Watch, check_stepper, chromium
from _lab import serve

NOTEBOOK_DIR = Path(os.environ.get("DYNAGRAPH_DOCS_NOTEBOOKS", ROOT / "notebooks"))
# DYNAGRAPH_LAB_NOTEBOOK=05_dynamic_depth.ipynb runs another notebook through the same check.
PREFERRED = os.environ.get("DYNAGRAPH_LAB_NOTEBOOK", "01_simple_backward.ipynb")
RUN_TIMEOUT = 75_000  # ms, Run All to an idle kernel


def _notebook() -> str | None:
    names = sorted(p.name for p in NOTEBOOK_DIR.glob("*.ipynb"))
    if "DYNAGRAPH_LAB_NOTEBOOK" in os.environ and PREFERRED not in names:
        raise ValueError(f"DYNAGRAPH_LAB_NOTEBOOK={PREFERRED!r} is not one of {names}")
    return PREFERRED if PREFERRED in names else next(iter(names), None)


@pytest.fixture
def lab(tmp_path):
    """Start `jupyter lab` on a copy of the notebooks; yield (base URL, port, token, notebook)."""
    name = _notebook()
    if name is None:
        pytest.skip(f"no notebook in {NOTEBOOK_DIR}")
    served = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOK_DIR, served, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    with serve(served, tmp_path) as (base, port, token, _):
        yield base, port, token, name


# The open notebook panel, once its kernel is ready.
_PANEL_READY_JS = """() => { const app = window.jupyterapp; const w = app && app.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!(w && w.content && w.context.isReady && k && k.status === 'idle'); }"""
_CLEAR_AND_RUN_JS = """async () => { const app = window.jupyterapp, w = app.shell.currentWidget;
  await app.commands.execute('notebook:clear-all-cell-outputs');
  const left = [...w.model.cells].filter(c => c.type === 'code' && c.outputs.length > 0).length;
  await app.commands.execute('notebook:run-all-cells');
  return left; }"""
# Done: the kernel is idle and every code cell ran, or an untagged error stopped Run All.
_RUN_DONE_JS = """() => { const w = window.jupyterapp.shell.currentWidget;
  if (w.sessionContext.session.kernel.status !== 'idle') return false;
  const code = [...w.model.cells].filter(c => c.type === 'code');
  const stopped = code.some(c => !(c.getMetadata('tags') || []).includes('raises-exception')
                                 && c.outputs.toJSON().some(o => o.output_type === 'error'));
  return stopped || code.every(c => c.executionCount !== null); }"""
_CELLS_JS = """() => [...window.jupyterapp.shell.currentWidget.model.cells]
  .filter(c => c.type === 'code')
  .map(c => ({count: c.executionCount, tags: c.getMetadata('tags') || [],
                   errors: c.outputs.toJSON().filter(o => o.output_type === 'error').map(o => o.ename + ': ' + o.evalue + '\\n'
                     + o.traceback.slice(-3).join('\\n').replace(/\\x1b\\[[0-9;]*m/g, '')),
                   source: c.sharedModel.getSource().slice(0, 60)}))"""
# Each picture output (metadata dynagraph: picture) of the run notebook: whether its PNG
# still shows, and how JupyterLab rendered the script output after it (its mime type)
# and the live pictures (div.dg-out) that script drew.
_LIVE_JS = """() => [...window.jupyterapp.shell.currentWidget.content.widgets].flatMap((cell, i) => {
  if (cell.model.type !== 'code') return [];
  const items = cell.outputArea.widgets;
  return items.flatMap((child, j) => {
    const model = j < cell.model.outputs.length ? cell.model.outputs.get(j) : null;
    if (!model || !model.metadata || model.metadata.dynagraph !== 'picture') return [];
    const script = items[j + 1] ? items[j + 1].node : null, after = cell.model.outputs.get(j + 2);
    const node = script ? script.querySelector('.jp-OutputArea-output') : null;
    return [{cell: i, output: j, png_shown: child.node.checkVisibility(), mime: node ? node.dataset.mimeType : null,
             imgs: script ? script.querySelectorAll('img').length : 0,
             listed: !!(after && after.metadata && after.metadata.dynagraph === 'steps'),
             live: script ? [...script.querySelectorAll('div.dg-out')].map(d => ({
               nodes: d.querySelectorAll('svg g.node').length, stepper: d.classList.contains('dg-stepper')})) : []}];
  }); })"""
_PICTURES_JS = """() => [...document.querySelectorAll('.jp-OutputArea-output svg')]
  .filter(s => !s.closest('mjx-container') && !s.parentElement.closest('svg'))
  .map(s => { const b = s.getBoundingClientRect();
              return {nodes: s.querySelectorAll('g.node').length, box: [Math.round(b.width), Math.round(b.height)]}; })"""


@pytest.mark.browser
@pytest.mark.slow
def test_run_all_in_jupyterlab_shows_the_graphs(lab):
    base, port, token, name = lab
    with chromium() as browser:
        watch = Watch(browser, port=port)
        page = watch.new_page()
        try:
            page.goto(f"{base}/lab/tree/{name}?token={token}", wait_until="domcontentloaded", timeout=60_000)
            page.wait_for_function(_PANEL_READY_JS, timeout=60_000, polling=250)
            left = page.evaluate(_CLEAR_AND_RUN_JS)
            assert left == 0, f"{left} code cells kept outputs after 'clear all outputs'"
            page.wait_for_function(_RUN_DONE_JS, timeout=RUN_TIMEOUT, polling=250)

            cells = page.evaluate(_CELLS_JS)
            unexpected = [(c["source"], c["errors"]) for c in cells
                          if c["errors"] and "raises-exception" not in c["tags"]]
            assert not unexpected, f"errors in cells not tagged raises-exception: {unexpected}"
            not_run = [c["source"] for c in cells if c["count"] is None]
            assert not not_run, f"code cells that did not run: {not_run}"

            pictures = page.evaluate(_PICTURES_JS)
            assert pictures, "no SVG picture in any output area"
            empty = [p for p in pictures if p["nodes"] == 0 or 0 in p["box"]]
            assert not empty, f"pictures without nodes or with an empty box: {empty}"
            # Outputs made by running are trusted: each picture's script output runs,
            # draws one live picture and hides the PNG's output.
            live = page.evaluate(_LIVE_JS)
            assert live, "no dynagraph picture output (metadata dynagraph: picture) after Run All"
            not_live = [p for p in live if p["mime"] != "application/javascript" or p["imgs"] or p["png_shown"]
                        or len(p["live"]) != 1 or p["live"][0]["nodes"] == 0]
            assert not not_live, f"picture outputs not drawn live (once, as SVG with nodes): {not_live}"
            _screenshot(page, ARTIFACTS / "jupyterlab.png")
            # A picture with steps (a step list output follows it) is a stepper; check each one.
            wrong = [p for p in live if p["live"][0]["stepper"] != p["listed"]]
            assert not wrong, f"a stepper without a step list after it, or a step list after a still picture: {wrong}"
            steppers = page.locator(".jp-OutputArea-output div.dg-stepper")
            assert steppers.count() == sum(p["listed"] for p in live)
            for k in range(steppers.count()):
                check_stepper(steppers.nth(k))
            print(f"{name}: {len(live)} live pictures, {steppers.count()} steppers checked")
            assert not watch.blocked, f"JupyterLab requested outside 127.0.0.1 (blocked): {watch.blocked}"
            assert not watch.errors, f"errors in the browser console: {watch.errors}"
        except Exception:
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "jupyterlab-failed.png"))  # what the page showed
            raise
        finally:
            watch.close()


def _screenshot(page, path: Path) -> None:
    path.parent.mkdir(exist_ok=True)
    page.locator(".jp-OutputArea-output svg g.node").first.evaluate(
        "n => n.closest('.jp-Cell').scrollIntoView({block: 'start'})")
    page.wait_for_timeout(200)  # let the notebook repaint after scrolling
    page.screenshot(path=str(path))
