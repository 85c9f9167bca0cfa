"""The docs website: Sphinx builds it from the notebooks' stored outputs, and every
page works offline in a real browser, from file:// and from a local HTTP server.

The site is built once for the run (the `site` fixture in conftest.py, into a
temporary folder). Pages are the landing page, the tutorials list, the API reference, Sphinx's index and search
pages, and one page per notebook in notebooks/, whichever notebooks exist when the
tests are collected. A notebook page runs each dynagraph picture's script
(docs/conf.py puts ``application/javascript`` first): it shows each stored picture
once, as a live SVG, and each stepper steps.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import threading
from html.parser import HTMLParser
from pathlib import Path
from typing import ClassVar

import pytest
from test_zh_english import code_words, dynagraph_english, english_words

import dynagraph

from _chromium import ARTIFACTS, ROOT, Watch, check_stepper, chromium
from _helpers import scripts_data

pytestmark = pytest.mark.slow  # the module builds the whole site once (10-30 s)

# docs/conf.py reads the same variable (a trial set of notebooks instead of notebooks/).
NOTEBOOK_DIR = Path(os.environ.get("DYNAGRAPH_DOCS_NOTEBOOKS", ROOT / "notebooks"))
NOTEBOOKS = sorted(p.stem for p in NOTEBOOK_DIR.glob("*.ipynb"))
CHINESE = sorted(p.stem for p in (NOTEBOOK_DIR / "zh").glob("*.ipynb"))  # the Chinese edition, under zh/
PAGES = (["index", "tutorials", "api", "genindex", "search", "notebooks/glossary"]
         + [f"notebooks/{stem}" for stem in NOTEBOOKS])
ZH_PAGES = ["zh/index", "zh/tutorials", "search-zh", "notebooks/zh/glossary"] + [f"notebooks/zh/{stem}" for stem in CHINESE]


# -- The build ---------------------------------------------------------------------


def test_build_has_no_toctree_warnings(site):
    warnings = (site.parent / "warnings.txt").read_text().splitlines()
    bad = [w for w in warnings if "toctree" in w or "nonexisting document" in w]
    assert not bad, "broken navigation:\n" + "\n".join(bad)


def test_every_notebook_is_listed_in_notebook_order(site):
    html = (site / "tutorials.html").read_text()
    listed = re.findall(r'href="notebooks/([^".#]+)\.html"', html)
    assert "glossary" in listed, "the tutorials page links the glossary"
    assert [stem for stem in dict.fromkeys(listed) if stem != "glossary"] == NOTEBOOKS
    for stem in NOTEBOOKS:
        assert (site / "notebooks" / f"{stem}.html").exists()


def test_api_reference_documents_every_public_name(site):
    html = (site / "api.html").read_text()
    missing = [name for name in dynagraph.__all__ if f'id="dynagraph.{name}"' not in html]
    assert not missing, f"api.html lacks {missing}"


class _Refs(HTMLParser):
    """Collects the URLs a page makes the browser load (not links it merely shows)."""

    LOADS: ClassVar[dict[str, str]] = {"script": "src", "img": "src", "iframe": "src", "source": "src", "audio": "src",
             "video": "src", "embed": "src", "link": "href", "object": "data"}

    def __init__(self):
        super().__init__()
        self.urls = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "link" and not {"stylesheet", "preload", "icon", "modulepreload"} & set(
                (attrs.get("rel") or "").split()):
            return
        url = attrs.get(self.LOADS.get(tag, ""))
        if url:
            self.urls.append(url)


def test_pages_load_nothing_from_other_sites(site):
    external = {}
    for page in sorted(site.rglob("*.html")):
        refs = _Refs()
        refs.feed(page.read_text())
        off = [u for u in refs.urls if re.match(r"(https?:)?//", u)]
        if off:
            external[str(page.relative_to(site))] = off
    for css in site.glob("_static/**/*.css"):
        off = re.findall(r"url\(\s*['\"]?((?:https?:)?//[^)'\"]+)", css.read_text(errors="replace"))
        if off:
            external[str(css.relative_to(site))] = off
    assert not external, f"pages load from other sites: {external}"


def test_mathjax_is_served_from_static(site):
    assert (site / "_static" / "mathjax" / "tex-svg-full.js").stat().st_size > 100_000
    for page in site.rglob("*.html"):
        assert "cdn.jsdelivr.net/npm/mathjax" not in page.read_text(), page


# -- In the browser ------------------------------------------------------------------


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def http_root(site):
    """The built site served by python's http.server on 127.0.0.1, a free port."""
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", server.server_port
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


# Resolves once MathJax has typeset the page (at once on pages without math).
_TYPESET_JS = """async () => {
  if (document.querySelector('.math') && window.MathJax && MathJax.startup) await MathJax.startup.promise; }"""
# Everything a page shows, measured in one go. Graphs are the inline SVGs of cell
# outputs (MathJax's own SVGs aside); collapsed <details> are opened first.
_REPORT_JS = """() => {
  document.querySelectorAll('details').forEach(d => d.open = true);
  const box = e => { const b = e.getBoundingClientRect(); return [Math.round(b.width), Math.round(b.height)]; };
  const graphs = [...document.querySelectorAll('.cell_output svg')]
    .filter(s => !s.closest('mjx-container') && !s.parentElement.closest('svg'))
    .map(s => { const nodes = s.querySelectorAll('g.node');
                return {nodes: nodes.length, box: box(s), node: nodes.length ? box(nodes[0]) : [0, 0],
                        visible: s.checkVisibility()}; });
  const images = [...document.images].map(i => ({src: (i.getAttribute('src') || '').slice(0, 80),
                                               ok: i.complete && i.naturalWidth > 0}));
  const math = [...document.querySelectorAll('.math')].map(m => ({tex: m.textContent.slice(0, 60),
      ok: !!m.querySelector('mjx-container svg') && !m.querySelector('[data-mml-node="merror"]')}));
  const live = [...document.querySelectorAll('div.dg-out')].map(d => ({
    nodes: d.querySelectorAll('svg g.node').length, stepper: d.classList.contains('dg-stepper')}));
  return {graphs, images, math, mathjax: !!window.MathJax, live,
          steppers: document.querySelectorAll('div.dg-stepper').length,
          step_lists: document.querySelectorAll('.cell_output .dg-steps').length,
          cell_images: [...document.querySelectorAll('.cell_output img')].filter(i => i.checkVisibility()).length};
}"""


def _stored_views(stem: str) -> dict[str, int]:
    """What a notebook page should show, from the notebook's stored outputs: its
    dynagraph pictures, how many of them are steppers (the data of the script after
    the picture has steps),
    and its other images (a plot's PNG, which the page shows as an <img>)."""
    nb = json.loads((NOTEBOOK_DIR / f"{stem}.ipynb").read_text())
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    pictures = [o for o in outputs if o.get("metadata", {}).get("dynagraph") == "picture"]
    scripts = [o for o in outputs if o.get("metadata", {}).get("dynagraph") == "script"]  # one per picture
    steppers = sum("s" in data for o in scripts
                   for data in scripts_data("".join(o["data"].get("application/javascript", ""))))
    images = sum(1 for o in outputs if not o.get("metadata", {}).get("dynagraph") and "image/png" in o.get("data", {})
                 and not {"text/html", "application/javascript"} & set(o["data"]))
    return {"pictures": len(pictures), "steppers": steppers, "images": images}


def test_every_page_links_its_twin_in_the_other_language(site):
    """English pages link their Chinese twin and back (the search page too); a page with no
    twin (the API reference, Sphinx's index) links the other language's home page."""
    twins = {"index": "zh/index", "tutorials": "zh/tutorials", "notebooks/glossary": "notebooks/zh/glossary",
             "search": "search-zh",
             **{f"notebooks/{stem}": f"notebooks/zh/{stem}" for stem in CHINESE}}
    twins |= {zh: en for en, zh in twins.items()}
    for page in PAGES + ZH_PAGES:
        html = (site / f"{page}.html").read_text()
        (href,) = set(re.findall(r'<a class="nav-link dg-language" href="([^"]+)"', html))  # (wide and narrow)
        target = (site / page).parent / href
        assert target.resolve().exists(), f"{page}: its language link {href} leads nowhere"
        chinese = page.startswith(("zh/", "notebooks/zh/")) or page == "search-zh"
        want = twins.get(page, "index" if chinese else "zh/index")
        assert target.resolve() == (site / f"{want}.html").resolve(), f"{page} links {href}, not {want}"
        lang = re.search(r'<html lang="([^"]+)"', html)[1]
        assert lang == ("zh-CN" if chinese else "en"), page


def test_the_chinese_pages_say_previous_and_next_in_chinese(site):
    """The theme's words are the build's (English): _templates/components/prev-next.html
    says 上一页 and 下一页 on the Chinese pages."""
    for page in ZH_PAGES[3:]:  # the notebooks: each has a neighbour
        html = (site / f"{page}.html").read_text()
        words = re.findall(r'<p class="prev-next-subtitle">([^<]*)</p>', html)
        assert words and set(words) <= {"上一页", "下一页"}, f"{page}: {words}"
    html = (site / "notebooks" / f"{NOTEBOOKS[1]}.html").read_text()
    assert set(re.findall(r'<p class="prev-next-subtitle">([^<]*)</p>', html)) <= {"previous", "next"}


class _Visible(HTMLParser):
    """What a page shows as text, in three parts: the theme's, each notebook output's (a
    printed line with no Chinese is a message as it is, unless it is a dynagraph repr), and
    the pages' own prose (the article, and the titles and headings the theme repeats in
    its sidebars, breadcrumbs and page title). Scripts, styles and keyboard keys are left
    out; so are code outside the outputs and a link whose language is English (the
    language switch). Tracebacks and warnings are PyTorch's, left out as in the notebooks."""

    VOID: ClassVar[set[str]] = {"br", "img", "input", "meta", "link", "hr", "source", "wbr"}
    BLOCK: ClassVar[set[str]] = {"div", "pre", "p", "tr", "td", "th", "li", "table", "summary", "details", "br"}
    # where the theme shows the pages' own titles and headings
    TITLES: ClassVar[set[str]] = {"bd-sidenav", "toc-entry", "breadcrumb-item", "prev-next-title"}

    def __init__(self):
        super().__init__()
        self.stack: list[tuple[str, str]] = []  # (tag, what its text is: theme, output, prose, skip)
        self.theme: list[str] = []
        self.outputs: list[list[str]] = []
        self.prose: list[str] = []

    def _part(self) -> str:
        return self.stack[-1][1] if self.stack else "theme"

    def handle_starttag(self, tag, attrs):
        part = self._part()
        if part == "output" and tag in self.BLOCK:
            self.outputs[-1].append("\n")  # elements are lines; a <pre>'s spans are not
        attrs = dict(attrs)
        classes = set((attrs.get("class") or "").split())
        if (tag in ("script", "style", "kbd", "link", "meta") or (tag == "code" and part != "output")
                or (tag == "a" and attrs.get("lang") == "en") or {"traceback", "stderr"} & classes):
            part = "skip"
        elif "bd-article" in classes or self.TITLES & classes or tag == "title":
            part = "prose"
        elif "headerlink" in classes:  # the theme's "#" beside a heading, and its tooltip
            part = "theme"
        elif part == "prose" and "cell_output" in classes:
            part = "output"
            self.outputs.append([])
        elif (part == "prose" and tag == "pre") or "cell_input" in classes:
            part = "skip"
        if part == "theme":  # a tooltip, a search box's placeholder, a screen reader's label
            self.theme += [attrs[name] or "" for name in ("title", "placeholder", "aria-label") if name in attrs]
        if tag not in self.VOID:
            self.stack.append((tag, part))

    def handle_endtag(self, tag):
        if any(t == tag for t, _ in self.stack):  # (not a void element's "<br/>")
            while self.stack.pop()[0] != tag:
                pass
            if self._part() == "output" and tag in self.BLOCK:
                self.outputs[-1].append("\n")

    def handle_data(self, data):
        part = self._part()
        if part == "theme":
            self.theme.append(data)
        elif part == "output":
            self.outputs[-1].append(data)
        elif part == "prose":
            self.prose.append(data)


def chinese_page_english(html: str, allowed: set[str]) -> list[str]:
    """The English words of a Chinese page's theme text and outputs (see test_zh_english),
    and any of dynagraph's English messages anywhere on it."""
    page = _Visible()
    page.feed(html)
    found = [f"theme: {w}" for w in english_words(" ".join(page.theme), allowed)]
    for k, parts in enumerate(page.outputs):
        lines = "".join(parts).splitlines()
        text = "\n".join(ln for ln in lines if re.search(r"[\u3400-\u9fff]", ln) or ln.startswith("<dynagraph."))
        found += [f"output {k}: {w} in {text.strip()[:60]!r}" for w in english_words(text, allowed)]
    shown = " ".join([*page.theme, *("".join(p) for p in page.outputs), *page.prose])
    return found + [f"dynagraph's English {s!r}" for s in dynagraph_english() if s in shown]


def test_the_chinese_pages_show_no_english_outside_code_and_the_lessons_prose(site):
    """Every Chinese page's theme text (top bar, sidebars, search box, footer) and notebook
    outputs, scanned as tests/test_zh_english.py scans the stored outputs: no English word
    but code, names and PyTorch's messages; nowhere one of dynagraph's English messages."""
    notebooks = {stem: json.loads((NOTEBOOK_DIR / "zh" / f"{stem}.ipynb").read_text(encoding="utf-8"))
                 for stem in CHINESE}
    problems = {}
    for page in ZH_PAGES:
        stem = page.rsplit("/", 1)[-1]
        allowed = {"dynagraph"} | (code_words(notebooks[stem]) if stem in notebooks else set())  # the site's name
        found = chinese_page_english((site / f"{page}.html").read_text(), allowed)
        if found:
            problems[page] = found[:8]
    assert not problems, f"English on the Chinese pages: {problems}"


def test_the_page_scan_finds_the_themes_english():
    html = ('<html><body><nav>搜索<input placeholder="Search the docs"></nav><a lang="en" title="In English">English</a><kbd>Ctrl</kbd>'
            '<article class="bd-article"><p>术语（saved tensor）</p><pre>x = 1</pre>'
            '<div class="cell_output"><pre>计时：batched 更快\nplain English line</pre></div>'
            '<div class="cell_output"><div class="traceback">RuntimeError: Trying to backward</div></div>'
            '</article><footer>Created using Sphinx</footer></body></html>')
    assert [p.split(" in ")[0] for p in chinese_page_english(html, set())] == [
        "theme: Search", "theme: the", "theme: docs", "theme: Created", "theme: using", "theme: Sphinx", "output 0: batched"]


def test_the_chinese_tutorials_list_every_chinese_notebook_in_order(site):
    html = (site / "zh" / "tutorials.html").read_text()
    listed = re.findall(r'href="\.\./notebooks/zh/([^".#]+)\.html"', html)
    assert "glossary" in listed, "the Chinese tutorials page links the Chinese glossary"
    assert [stem for stem in dict.fromkeys(listed) if stem != "glossary"] == CHINESE and len(CHINESE) == len(NOTEBOOKS)


def test_the_site_serves_a_chinese_font_with_every_character_its_pages_use(site):
    """A machine with no Chinese font (a fresh Linux, CI) still reads the Chinese pages:
    docs/conf.py serves Noto Sans SC cut down to the site's characters."""
    from fontTools.ttLib import TTFont  # fontTools comes with matplotlib
    font = site / "_static" / "noto-sans-sc-subset.woff"
    assert font.stat().st_size < 400_000  # the whole font is 8 MB: only what the site uses
    covered = set(map(chr, TTFont(str(font)).getBestCmap()))
    used = set()
    for page in ZH_PAGES:
        used |= set(re.findall(r"[\u3400-\u9fff]", (site / f"{page}.html").read_text()))
    assert used and not used - covered, f"characters the font lacks: {sorted(used - covered)[:20]}"
    css = (site / "_static" / "dynagraph-docs.css").read_text()
    assert 'url("noto-sans-sc-subset.woff")' in css


@pytest.mark.browser
def test_chinese_headings_draw_every_glyph_from_a_font(browser, site, http_root):
    """Chromium says which fonts drew a heading's text: every character came from a
    font that has it (the served Noto Sans SC where the machine has no Chinese font)."""
    base, port = http_root
    watch = Watch(browser, port=port)
    try:
        page = watch.new_page()
        page.goto(f"{base}/notebooks/zh/05_dynamic_depth.html", wait_until="load")
        page.evaluate("document.fonts.ready.then(() => true)")
        cdp = page.context.new_cdp_session(page)
        cdp.send("DOM.enable")
        cdp.send("CSS.enable")
        root = cdp.send("DOM.getDocument")["root"]["nodeId"]
        h1 = cdp.send("DOM.querySelector", {"nodeId": root, "selector": "h1"})["nodeId"]
        fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": h1})["fonts"]
        text = page.locator("h1").first.inner_text()
        hanzi = len(re.findall(r"[\u3400-\u9fff\uff00-\uffef]", text))
        chinese = [f for f in fonts if f["familyName"] in ("Noto Sans SC", "Noto Sans CJK SC", "Noto Sans CJK")
                   or "CJK" in f["familyName"] or "SC" in f["familyName"].split()]
        assert hanzi > 5 and chinese and sum(f["glyphCount"] for f in chinese) >= hanzi, (text, fonts)
    finally:
        watch.close()


@pytest.mark.browser
def test_the_language_switch_leads_to_the_twin_and_back(browser, site, http_root):
    base, port = http_root
    watch = Watch(browser, port=port)
    try:
        page = watch.new_page()
        page.goto(f"{base}/notebooks/05_dynamic_depth.html", wait_until="load")
        page.locator("a.dg-language").first.click()
        page.wait_for_url(f"{base}/notebooks/zh/05_dynamic_depth.html")
        assert page.evaluate("document.documentElement.lang") == "zh-CN"
        assert "动态深度" in page.locator("h1").first.inner_text()
        page.locator("a.dg-language").first.click()
        page.wait_for_url(f"{base}/notebooks/05_dynamic_depth.html")
        assert not watch.errors and not watch.blocked
    finally:
        watch.close()


@pytest.mark.browser
def test_a_chinese_page_searches_on_the_chinese_search_page(browser, site, http_root):
    """The search box of a Chinese page leads to search-zh.html, whose results and their
    words are Chinese and whose links open the pages found; the English search stays English."""
    base, port = http_root
    watch = Watch(browser, port=port)
    try:
        page = watch.new_page()
        page.goto(f"{base}/notebooks/zh/05_dynamic_depth.html", wait_until="load")
        assert page.locator("form.bd-search").first.get_attribute("action") == "../../search-zh.html"
        page.goto(f"{base}/search-zh.html?q=梯度", wait_until="load")
        page.wait_for_function("() => /搜索完成/.test(document.querySelector('#search-results').innerText)")
        results = page.locator("#search-results")
        assert "搜索结果" in results.inner_text() and "Search" not in results.inner_text()
        first = results.locator("a").first
        href = first.get_attribute("href")
        assert href.startswith("notebooks/zh/"), href
        first.click()
        page.wait_for_url(f"{base}/{href.split('?')[0]}*")
        assert page.evaluate("document.documentElement.lang") == "zh-CN"
        page.goto(f"{base}/search.html?q=gradient", wait_until="load")
        page.wait_for_function("() => /Search finished/.test(document.querySelector('#search-results').innerText)")
        assert not watch.errors and not watch.blocked
    finally:
        watch.close()


@pytest.mark.browser
@pytest.mark.parametrize(("page_name", "scheme"), [(p, s) for p in PAGES for s in ("file", "http")]
                         + [(p, "http") for p in ZH_PAGES] + [("notebooks/zh/01_simple_backward", "file")])
def test_page_works_offline(browser, site, http_root, page_name, scheme):
    base, port = http_root
    url = (site / f"{page_name}.html").as_uri() if scheme == "file" else f"{base}/{page_name}.html"
    watch = Watch(browser, port=port if scheme == "http" else None)
    try:
        page = watch.new_page()
        page.goto(url, wait_until="load")
        page.evaluate(_TYPESET_JS)
        if scheme == "http" and page_name in _screenshots(site):
            _screenshot(page, ARTIFACTS / _screenshots(site)[page_name])
        report = page.evaluate(_REPORT_JS)

        assert not watch.blocked, f"{page_name} requested outside the site (blocked): {watch.blocked}"
        bad_graphs = [g for g in report["graphs"]
                      if g["nodes"] == 0 or 0 in g["box"] or 0 in g["node"] or not g["visible"]]
        assert not bad_graphs, f"graphs not drawn (no nodes or an empty box): {bad_graphs}"
        bad_images = [i["src"] for i in report["images"] if not i["ok"]]
        assert not bad_images, f"images that did not load: {bad_images}"
        bad_math = [m["tex"] for m in report["math"] if not m["ok"]]
        assert not bad_math, f"formulas MathJax did not typeset (mathjax loaded: {report['mathjax']}): {bad_math}"

        if page_name.startswith("notebooks/") and not page_name.endswith("/glossary"):
            # Each stored picture is drawn once, live (its script runs; its PNG is not shown).
            want = _stored_views(page_name.split("/", 1)[1])  # (a Chinese page: zh/NAME)
            shown = {"pictures": len(report["live"]), "steppers": report["steppers"],
                     "images": report["cell_images"]}
            assert shown == want, f"{page_name}: the page shows {shown}, the notebook stores {want}"
            assert report["step_lists"] == want["steppers"], (
                f"{page_name}: {report['step_lists']} step lists (div.dg-steps), {want['steppers']} steppers stored")
            empty = [p for p in report["live"] if p["nodes"] == 0]
            assert not empty, f"{page_name}: live pictures without nodes: {empty}"
        steppers = page.locator("div.dg-stepper")
        for i in range(steppers.count()):
            check_stepper(steppers.nth(i))
        assert not watch.errors, f"{page_name}: errors in the browser console: {watch.errors}"
        assert not watch.blocked, f"{page_name} requested outside the site (blocked): {watch.blocked}"
    finally:
        watch.close()


@functools.cache
def _screenshots(site: Path) -> dict[str, str]:
    """Page -> artifact name: the landing page and the first notebook page with a graph."""
    shots = {"index": "docs-index.png"}
    for stem in NOTEBOOKS:
        if 'class="node' in (site / "notebooks" / f"{stem}.html").read_text():
            shots[f"notebooks/{stem}"] = "docs-notebook.png"
            break
    return shots


def _screenshot(page, path: Path) -> None:
    """Save the viewport, scrolled to the first graph when the page has one."""
    path.parent.mkdir(exist_ok=True)
    graph = page.locator(".cell_output svg g.node").first
    if graph.count():
        graph.evaluate("n => n.closest('.cell_output').scrollIntoView({block: 'center'})")
    page.screenshot(path=str(path))


def test_docs_build_fetches_nothing():
    """The docs build copies MathJax from an installed pip package; it runs no npm,
    downloads nothing, and says what to install when the package is missing."""
    source = (Path(__file__).resolve().parent.parent / "docs" / "conf.py").read_text()
    for fetcher in ("npm", "urllib", "requests", "subprocess", "http://", "https://cdn"):
        assert fetcher not in source, fetcher
    assert "pip install django-static-mathjax" in source
