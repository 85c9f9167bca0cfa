"""Helpers for the `browser` tests: Debian's headless Chromium driven by Playwright.

Playwright's own browser download (`playwright install`) is not used: the tests run
the system Chromium (`apt-get install chromium`; `python3 dev.py test` installs it
when missing and run as root). tests/conftest.py skips `browser` tests without it.
"""

from __future__ import annotations

import socket
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "artifacts"  # screenshots for people to look at (git-ignored)
CHROMIUM = "/usr/bin/chromium"
# No sandbox (root in containers), no GPU, and none of Chromium's own traffic
# (updates, sync, field trials), so that every request a page makes is its own.
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
]
VIEWPORT = {"width": 1280, "height": 900}


@contextmanager
def chromium():
    """A headless Chromium ``Browser``, closed on exit."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Watch:
    """A browser context that records console errors and blocks off-site requests.

    Requests to ``file:``/``data:``/``blob:`` URLs and to ``127.0.0.1:<port>`` go
    through; any other is aborted and listed in :attr:`blocked`, so a test can fail
    naming each one.
    """

    def __init__(self, browser, port: int | None = None):
        self.port = port
        self.errors: list[str] = []
        self.blocked: list[str] = []
        self.context = browser.new_context(viewport=VIEWPORT)
        self.context.route("**/*", self._route)

    def _route(self, route):
        url = route.request.url
        if self.is_local(url):
            route.continue_()
        else:
            self.blocked.append(url)
            route.abort()

    def is_local(self, url: str) -> bool:
        parts = urlsplit(url)
        if parts.scheme in ("file", "data", "blob", "about"):
            return True
        return parts.hostname == "127.0.0.1" and self.port is not None and parts.port == self.port

    def new_page(self):
        page = self.context.new_page()
        page.on("console", lambda m: m.type == "error" and self.errors.append(f"console: {m.text}"))
        page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))
        return page

    def close(self):
        self.context.close()


def html_page(body: str = "", *, body_style: str = "") -> str:
    """``body`` as a whole HTML page in UTF-8, the page every browser test writes."""
    style = f" style='{body_style}'" if body_style else ""
    return f"<!doctype html><html><head><meta charset='utf-8'></head><body{style}>{body}</body></html>"


def open_file(browser, path: Path) -> tuple[Watch, object]:
    """A :class:`Watch` of ``browser`` and its page, at ``path`` loaded (images included)."""
    watch = Watch(browser)
    page = watch.new_page()
    page.goto(path.as_uri(), wait_until="load")
    return watch, page


def open_html(browser, body: str, tmp_path: Path, *, name: str = "page.html",
              body_style: str = "") -> tuple[Watch, object]:
    """``body`` written as a page (:func:`html_page`) to ``tmp_path / name`` and opened
    in ``browser``: the :class:`Watch` (close it; it lists errors) and the page."""
    path = tmp_path / name
    path.write_text(html_page(body, body_style=body_style), encoding="utf-8")
    return open_file(browser, path)


# -- Steppers (dynagraph.stepper): step and check what changes -----------------------

# A step shows its text and lights its nodes: two steps may share a text (a backward
# replay runs two MulBackward0 nodes in a row) but never both text and lit nodes.
_STATE_JS = """r => [r.querySelector('.dg-now').textContent + ' | lit: ' +
  [...r.querySelectorAll('g.node.dg-lit')].map(g => (g.getAttribute('class').match(/dg-n\\d+/) || ['?'])[0])
    .sort().join(' '),
  r.querySelectorAll('g.node.dg-hidden, g.node.dg-dim').length,
  +r.querySelector('input[type=range]').value]"""
MAX_CLICKS = 12  # per direction: enough to see monotony, cheap on long recordings


def check_stepper(stepper) -> dict:
    """Step a ``div.dg-stepper`` (a dynagraph output with steps) back to the start, forward and back again; assert
    that what a step shows (its text and its lit nodes) changes on every click and that the number of hidden (or
    dimmed) graph nodes only falls going forward and only rises going back.

    Args:
        stepper: A Playwright ``Locator`` for one ``div.dg-stepper``.

    Returns:
        ``{"steps": n, "hidden_first": k0, "hidden_last": k1}`` for reporting.
    """
    assert stepper.locator(".dg-bar").is_visible(), "stepper controls hidden: its script did not run"
    hint = stepper.evaluate("r => r.dgData.hint")
    assert stepper.page.locator(f"#{hint}:visible").count() == 0, "the 'picture cannot step here' line stayed"
    assert stepper.page.locator(f"#{hint} ~ ol li:visible").count() == 0, "the plain step list shows beside the stepper"
    data = stepper.evaluate("r => ({s: r.dgData.s, kinds: r.dgData.kinds})")
    n = len(data["s"])
    state = lambda: stepper.evaluate(_STATE_JS)  # noqa: E731 (text, hidden nodes, slider)
    button = lambda act: stepper.locator(f'button[data-act="{act}"]').click()  # noqa: E731

    text_last, hidden_last, at = state()
    assert at == n - 1, f"a stepper starts at its last step ({n - 1}), not {at}"
    button("first")
    text, hidden_first, at = state()
    assert at == 0
    if n == 1:
        return {"steps": n, "hidden_first": hidden_first, "hidden_last": hidden_last}
    assert text != text_last, f"'first' did not change the step text {text!r}"
    if any(data["kinds"][kind][1] for kind in data["s"][1:]):
        assert hidden_first > hidden_last, (
            f"at the first step {hidden_first} nodes are hidden/dimmed, at the last {hidden_last}: "
            "later steps' nodes should be hidden at the start")
    for act, sign in (("next", +1), ("prev", -1)):
        if act == "prev":
            button("last")
        prev_text, prev_hidden, prev_at = state()
        for _ in range(min(n - 1, MAX_CLICKS)):
            button(act)
            text, hidden, at = state()
            assert at == prev_at + sign, f"{act}: slider went from {prev_at} to {at}"
            assert text != prev_text, f"{act}: step text and lit nodes did not change at step {at}: {text!r}"
            assert (hidden <= prev_hidden) if sign > 0 else (hidden >= prev_hidden), (
                f"{act} to step {at}: hidden/dimmed nodes went {prev_hidden} -> {hidden}, not monotonic")
            prev_text, prev_hidden, prev_at = text, hidden, at
    return {"steps": n, "hidden_first": hidden_first, "hidden_last": hidden_last}
