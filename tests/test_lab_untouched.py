"""A placed lesson opened in JupyterLab and closed without running is not modified.

JupyterLab sets a notebook's ``metadata.language_info`` to what the kernel reports when
the kernel starts, and marks the notebook modified when that changes it; autosave then
writes it. The course that ``python3 dev.py lab`` places (dynagraph.course.place) carries
the kernel's ``language_info``, so nothing changes. Here every notebook of a placed
course is opened in a real JupyterLab with its kernel started, watched with autosave at
1 s, and closed: no notebook may be marked modified, ask to be saved, or change on disk
(bytes and mtime). A copy of a repository notebook, as stored, is the control: Lab does
mark it modified, so the check can see the change it guards against.
"""

from __future__ import annotations

import json
import shutil
import warnings

import pytest

from dynagraph import course

from _chromium import ARTIFACTS, ROOT, Watch, chromium
from _lab import serve

CONTROL = "control_as_stored.ipynb"  # 01 as the repository stores it: Lab marks it modified
WATCH_MS = 4_000  # after the kernel is idle: longer than autosave's 1 s
# Opens a notebook, starts its kernel, waits until the kernel has answered (its info is
# what Lab writes into language_info), then watches for WATCH_MS; returns whether the
# notebook was ever marked modified (autosave clears the mark when it writes), and
# whether a dialog asked anything, and closes it (shutting its kernel down; a modified
# one is marked clean first, so no dialog waits).
_OPEN_WATCH_CLOSE_JS = """async ([path, wait]) => {
  const app = window.jupyterapp;
  const w = await app.commands.execute('docmanager:open', {path, factory: 'Notebook'});
  await w.context.ready;  // loaded from disk (loading marks the model dirty, then clean)
  let ever = w.context.model.dirty;
  w.context.model.stateChanged.connect((m, a) => { if (a.name === 'dirty' && a.newValue) ever = true; });
  await w.sessionContext.ready;
  const kernel = w.sessionContext.session.kernel;
  await kernel.info;
  const t0 = Date.now();
  while (kernel.status !== 'idle' && Date.now() - t0 < 60000) await new Promise(r => setTimeout(r, 100));
  await new Promise(r => setTimeout(r, wait));
  const dirty = ever || w.context.model.dirty;
  const info = w.context.model.getMetadata('language_info');
  await w.sessionContext.shutdown();
  w.context.model.dirty = false;
  w.close();
  await new Promise(r => setTimeout(r, 300));
  return {dirty, info, dialog: !!document.querySelector('.jp-Dialog')}; }"""


# Several notebooks open, watched and closed at once (each as above; the dialog check
# is made once all of a batch are closed). Started, not awaited inside one evaluate: an
# open JupyterLab gives up on leaves a promise nothing resolves, which Chromium collects
# ("Resulting promise was garbage collected": seen in test_untrusted); each notebook's
# result (or error) is kept in window.__dgSeen, which the test polls.
_START_ALL_JS = f"""([paths, wait]) => {{
  const one = {_OPEN_WATCH_CLOSE_JS};
  window.__dgSeen = window.__dgSeen || {{}};
  for (const path of paths) {{
    delete window.__dgSeen[path];
    one([path, wait]).then(r => {{ window.__dgSeen[path] = r; }},
                           e => {{ window.__dgSeen[path] = {{error: String(e)}}; }});
  }} }}"""
_ALL_SEEN_JS = "paths => paths.every(p => p in (window.__dgSeen || {}))"
BATCH = 6  # kernels started at once: a 2-core machine under load still starts each within a minute
BATCH_TIMEOUT = 240_000  # ms for a batch: each kernel starts within a minute (see BATCH)


def _watch_batch(page, batch: list[str], timeout: int = BATCH_TIMEOUT) -> dict[str, dict]:
    """Open, watch and close ``batch`` at once; a notebook whose result never came (its
    promise collected) or whose open failed is tried once more alone, with a warning."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.evaluate(_START_ALL_JS, [batch, WATCH_MS])
    try:
        page.wait_for_function(_ALL_SEEN_JS, arg=batch, timeout=timeout, polling=500)
    except PlaywrightTimeout:
        pass
    seen = dict(zip(batch, page.evaluate("paths => paths.map(p => (window.__dgSeen || {})[p] || null)", batch)))
    for name in [n for n, r in seen.items() if r is None or "error" in r]:
        warnings.warn(f"JupyterLab did not finish with {name} (try 1 of 2): {seen[name]}", stacklevel=2)
        page.evaluate(_START_ALL_JS, [[name], WATCH_MS])
        try:
            page.wait_for_function(_ALL_SEEN_JS, arg=[name], timeout=timeout, polling=500)
        except PlaywrightTimeout:
            pytest.fail(f"JupyterLab did not finish with {name} (try 2 of 2) within {timeout // 1000} s")
        seen[name] = page.evaluate("p => window.__dgSeen[p]", name)
        assert "error" not in seen[name], f"{name} (try 2 of 2): {seen[name]['error']}"
    return seen


def _state(folder):
    return {p.relative_to(folder).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*.ipynb")) if ".ipynb_checkpoints" not in p.parts}


@pytest.mark.browser
@pytest.mark.slow
def test_placed_lessons_opened_and_closed_without_running_stay_unchanged(tmp_path):
    folder = tmp_path / "course"
    course.place(folder)
    shutil.copy(ROOT / "notebooks" / "01_simple_backward.ipynb", folder / CONTROL)
    settings = tmp_path / "jupyterlab_settings_dir" / "@jupyterlab" / "docmanager-extension" / "plugin.jupyterlab-settings"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"autosaveInterval": 1}))  # a modified notebook is written at once
    before = _state(folder)
    seen = {}
    with serve(folder, tmp_path) as (base, port, token, _), chromium() as browser:
        watch = Watch(browser, port=port)
        page = watch.new_page()
        page.goto(f"{base}/lab?reset&token={token}", wait_until="domcontentloaded", timeout=60_000)
        page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=60_000)
        page.evaluate("async () => { await window.jupyterapp.restored; }")
        names = list(before)
        for k in range(0, len(names), BATCH):  # a batch at a time: their kernels start and are watched together
            batch = names[k:k + BATCH]
            seen.update(_watch_batch(page, batch))
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "lab-untouched.png"))
        watch.close()
    after = _state(folder)
    control = seen.pop(CONTROL)
    problems = []
    if not control["dirty"]:
        problems.append("the control (a notebook as stored) was not marked modified: the check sees nothing")
    if after.pop(CONTROL)[0] == before.pop(CONTROL)[0]:
        problems.append("autosave did not write the control")
    if len(seen) != len(course.course_files()) - 4:  # every placed notebook (not the two glossaries, run times)
        problems.append(f"{len(seen)} notebooks opened")
    problems += [f"{name}: marked modified on opening (Lab's language_info: {s['info']})"
                 for name, s in seen.items() if s["dirty"]]
    problems += [f"{name}: a dialog asked on closing" for name, s in seen.items() if s["dialog"]]
    problems += [f"{name}: changed on disk" for name in before if after[name] != before[name]]
    assert not problems, "\n".join(problems)

