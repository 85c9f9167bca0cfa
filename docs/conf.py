"""Sphinx configuration: the notebooks (with their stored outputs) and the API as an offline website.

Build with ``python3 dev.py docs`` (or ``sphinx-build -b html docs docs/_build/html``).

Why Sphinx + myst-nb + pydata-sphinx-theme: it renders committed notebook outputs
without running them, runs dynagraph's pictures as their scripts (the
``application/javascript`` output that draws the SVG, zoom and stepper), generates the
API reference from the docstrings (autodoc + napoleon), and builds with no network once
MathJax is served from _static.
jupyter-book 2 builds through a Node.js tool that downloads its site theme at build
time (no offline build), and MkDocs Material has announced its end of life.
"""

import functools
import importlib.util
import os
import re
import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))  # autodoc imports the checkout's dynagraph, installed or not

import dynagraph  # noqa: E402

project = "dynagraph"
author = "the dynagraph authors"
copyright = "the dynagraph authors"
release = version = dynagraph.__version__

extensions = [
    "myst_nb",  # notebooks and Markdown (includes myst_parser)
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",  # Google-style Args/Returns/Raises
    "sphinx.ext.mathjax",
]

# -- Notebooks ---------------------------------------------------------------------
# The notebooks live in ../notebooks (where JupyterLab and nbval use them); Sphinx
# reads only files under docs/, so each build mirrors them into docs/notebooks/
# (git-ignored). copy2 keeps mtimes, so unchanged notebooks are not re-read.
# DYNAGRAPH_DOCS_NOTEBOOKS points the build at another folder (e.g. a trial set).
NOTEBOOKS_SRC = Path(os.environ.get("DYNAGRAPH_DOCS_NOTEBOOKS", ROOT / "notebooks"))
NOTEBOOKS_DST = DOCS / "notebooks"


def mirror_notebooks(src: Path, dst: Path) -> None:
    """Make ``dst`` hold exactly the ``*.ipynb`` of ``src`` and its glossary (``glossary.md``,
    beside the notebooks so that the index links it in JupyterLab and on the site alike),
    and ``dst/zh`` the Chinese notebooks of ``src/zh`` (when there are any)."""
    dst.mkdir(exist_ok=True)
    wanted = {p.name: p for p in sorted([*src.glob("*.ipynb"), *src.glob("glossary.md")])}
    chinese = src / "zh"
    for old in dst.iterdir():
        if old.name not in wanted and not (old.name == "zh" and chinese.is_dir()):
            shutil.rmtree(old) if old.is_dir() else old.unlink()
    for name, path in wanted.items():
        target = dst / name
        if not target.exists() or target.stat().st_mtime != path.stat().st_mtime:
            shutil.copy2(path, target)
    if chinese.is_dir():
        mirror_notebooks(chinese, dst / "zh")


mirror_notebooks(NOTEBOOKS_SRC, NOTEBOOKS_DST)

nb_execution_mode = "off"  # render the stored outputs; nbval checks they are current
nb_ipywidgets_js = {}  # no widget manager from a CDN (the notebooks use no widgets)
# A dynagraph picture's script first (it draws the live SVG; its PNG is for viewers that run
# no script), then HTML (step lists, tables), then images; the plain-text repr is for terminals.
nb_mime_priority_overrides = [
    ("html", "application/javascript", 0),
    ("html", "text/html", 10),
    ("html", "image/svg+xml", 20),
    ("html", "image/png", 30),
]
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3

# -- API reference -----------------------------------------------------------------
autodoc_member_order = "bysource"
autodoc_typehints = "description"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

# -- MathJax, served from _static ----------------------------------------------------
# Sphinx's default mathjax_path is a CDN; the site must work offline, so MathJax is
# shipped as _static/mathjax/. It comes from the PyPI package django-static-mathjax
# (MathJax's own files, no Django needed: pip alone installs it), copied once into
# docs/_vendor/ (git-ignored); the build fetches nothing itself. The SVG output needs no
# web fonts (nothing more to serve or to fail from file://) and the "full" bundle
# loads no extensions later.
MATHJAX_VERSION = "3.2.2"
MATHJAX_FILE = "tex-svg-full.js"
VENDOR = DOCS / "_vendor"


def _mathjax_from_pip() -> Path | None:
    """The folder of MathJax's files installed by django-static-mathjax, if any."""
    spec = importlib.util.find_spec("mathjax")
    for base in (spec.submodule_search_locations or []) if spec else []:
        folder = Path(base) / "static" / "mathjax"
        if (folder / "es5" / MATHJAX_FILE).exists():
            return folder
    return None


def ensure_mathjax(vendor: Path) -> None:
    """Put MathJax's ``es5/tex-svg-full.js`` and LICENSE under ``vendor/mathjax``."""
    out = vendor / "mathjax"
    if (out / MATHJAX_FILE).exists():
        return
    installed = _mathjax_from_pip()
    if installed is not None:
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(installed / "es5" / MATHJAX_FILE, out / MATHJAX_FILE)
        shutil.copyfile(installed / "LICENSE", out / "LICENSE")
        return
    raise RuntimeError(
        f"MathJax {MATHJAX_VERSION} is not installed: `pip install django-static-mathjax` (it is in "
        "requirements.txt; python3 dev.py docs installs it). The docs build reads nothing from the network."
    )


ensure_mathjax(VENDOR)
mathjax_path = f"mathjax/{MATHJAX_FILE}"  # relative: Sphinx links it from _static/

# -- The theme's words on the Chinese pages -------------------------------------------
# The site is one English build (one search index, relative links between the twins), so
# the theme speaks English. On a Chinese page every word the theme writes is Chinese: its
# templates call gettext, which chinese_pages_say_so hands a Chinese catalog for that page
# (the words below, then the theme's and Sphinx's own Chinese catalogs, both incomplete);
# the theme settings and text that are no gettext call are set here too, and
# _templates/navbar-nav.html links the Chinese pages in the top bar.
THEME_ZH = {
    "Skip to main content": "跳到正文",
    "Back to top": "回到顶部",
    "Search": "搜索",
    "Site navigation": "网站导航",
    "Section Navigation": "本节导航",
    "On this page": "本页内容",
    "Color mode": "颜色模式",
    "Light": "浅色",
    "Dark": "深色",
    "System Settings": "跟随系统",
    "Collapse Sidebar": "收起侧栏",
    "Expand Sidebar": "展开侧栏",
    "Breadcrumb": "页面路径",
    "Home": "首页",
    "Version warning": "版本提示",
    "previous page": "上一页",
    "next page": "下一页",
    "previous": "上一页",
    "next": "下一页",
    "Link to this heading": "链接到本标题",
    "\u00a9 Copyright %(copyright)s.": "\u00a9 %(copyright)s\u3002",
    "Please activate JavaScript to enable the search functionality.": "请启用 JavaScript 以使用搜索功能。",
}
THEME_SETTINGS_ZH = {
    "theme_search_bar_text": "搜索文档\u2026\u2026",
    "copyright": "dynagraph 的作者",
    "root_doc": "zh/index",  # the logo and the breadcrumbs' home lead to the Chinese home page
    "master_doc": "zh/index",
}


# -- A Chinese font, served from _static -----------------------------------------------
# The Chinese pages must read on a machine with no Chinese font (a fresh Linux, a
# container): the site serves Noto Sans SC (SIL OFL 1.1, from the pip package
# pylopdf-fonts-zh-cn, which the course lane installs for plots), cut down to the
# characters the site uses, as WOFF; _static/dynagraph-docs.css names it after the
# theme's own fonts, so a browser uses it only for glyphs its fonts lack.
CJK_FONT = "noto-sans-sc-subset.woff"
_CJK = re.compile(r"[\u2000-\u206f\u3000-\u30ff\u3400-\u9fff\uff00-\uffef]")


def site_characters(*folders: Path, also: tuple[str, ...] = ()) -> str:
    """The CJK characters and punctuation in every Markdown file, notebook and template
    under ``folders``, and in the texts ``also`` (sorted, once each)."""
    chars: set[str] = set(_CJK.findall(" ".join(also)))
    for folder in folders:
        for path in folder.rglob("*"):
            if path.suffix in (".md", ".ipynb", ".html") and path.is_file():
                chars |= set(_CJK.findall(path.read_text(encoding="utf-8")))
    return "".join(sorted(chars))


def ensure_cjk_font(vendor: Path, text: str) -> None:
    """Write ``vendor/fonts/CJK_FONT``: Noto Sans SC with only the glyphs of ``text``."""
    out = vendor / "fonts" / CJK_FONT
    stamp = vendor / ".cjk-font.chars"  # the characters it was cut to (a dot file: Sphinx serves none)
    if out.exists() and stamp.exists() and stamp.read_text(encoding="utf-8") == text:
        return
    try:
        import pylopdf_fonts_zh_cn
        from fontTools import subset
    except ImportError as e:
        raise RuntimeError(
            f"the Chinese pages need a Chinese font: `pip install pylopdf-fonts-zh-cn` (it is in "
            f"requirements-lab.txt; python3 dev.py docs installs it) ({e})") from e
    options = subset.Options()
    options.flavor = "woff"  # zlib (fontTools alone); woff2 would need brotli
    options.layout_features = ["*"]
    font = subset.load_font(str(pylopdf_fonts_zh_cn.sans_path()), options)
    subsetter = subset.Subsetter(options)
    subsetter.populate(text=text)
    subsetter.subset(font)
    out.parent.mkdir(parents=True, exist_ok=True)
    subset.save_font(font, str(out), options)
    stamp.write_text(text, encoding="utf-8")


ensure_cjk_font(VENDOR, site_characters(NOTEBOOKS_DST / "zh", DOCS / "zh", DOCS / "_templates",
                                        NOTEBOOKS_DST / "glossary.md",
                                        also=(*THEME_ZH.values(), *THEME_SETTINGS_ZH.values())))

# -- HTML ------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = "dynagraph"
html_static_path = ["_static", str(VENDOR), str(VENDOR / "fonts")]
html_css_files = ["dynagraph-docs.css"]
html_show_sourcelink = False
html_copy_source = False  # no _sources/ copies of the notebooks (they are large)
# Everything here is local: the theme bundles its icons (Font Awesome) and uses
# system fonts. Left out on purpose, because each would load or link the network:
# analytics, a version switcher (fetches switcher.json), a URL announcement banner
# and Read the Docs' ethical-ads sidebar.
# Every page links its twin in the other language (_templates/language-switch.html):
# the English site is at the root, the Chinese one under zh/ (its notebooks under
# notebooks/zh/), one build, so the switch is a relative link that works offline.
templates_path = ["_templates"]
html_theme_options = {
    "navbar_end": ["language-switch", "theme-switcher"],  # no icon links (they point off-site)
    "footer_start": ["copyright"],
    "footer_end": [],
    "secondary_sidebar_items": ["page-toc"],
    "primary_sidebar_end": [],
    "show_prev_next": True,
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_context = {"default_mode": "light"}
# One-page sections have nothing to list in the left sidebar: drop it there.
html_sidebars = {name: [] for name in ("index", "api", "genindex", "search")}

exclude_patterns = ["_build", "_vendor", "README.md", "**.ipynb_checkpoints", "jupyter_execute"]
html_sidebars["zh/index"] = []
# The Chinese pages search on a search page of their own (the one index of the site, the
# theme's words in Chinese); its script's words (results, "searching") are Sphinx's own
# Chinese catalogue, which ensure_search_words copies into the vendored static files and
# which takes effect only on a page whose <html lang> is zh-CN.
html_additional_pages = {"search-zh": "search.html"}  # at the root: the results link from there
html_sidebars["search-zh"] = []
html_js_files = ["search_words_zh.js"]


def ensure_search_words(vendor: Path) -> None:
    """``search_words_zh.js``: Sphinx's Chinese catalogue for its scripts, added on the
    Chinese pages only (the English pages keep the scripts' own English)."""
    import sphinx

    catalogue = Path(sphinx.__file__).parent / "locale" / "zh_CN" / "LC_MESSAGES" / "sphinx.js"
    text = ('if (document.documentElement.lang === "zh-CN") {\n'
            + catalogue.read_text(encoding="utf-8") + "}\n")
    vendor.mkdir(parents=True, exist_ok=True)
    target = vendor / "search_words_zh.js"
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        target.write_text(text, encoding="utf-8")


ensure_search_words(VENDOR)


@functools.cache
def _theme_catalog():
    """A gettext catalog for the Chinese pages: THEME_ZH, then the theme's and Sphinx's own."""
    import gettext

    import pydata_sphinx_theme
    import sphinx

    class Words(gettext.NullTranslations):
        def gettext(self, message):
            return THEME_ZH[message] if message in THEME_ZH else super().gettext(message)

        def ngettext(self, singular, plural, n):
            return self.gettext(singular if n == 1 else plural)

    words = Words()
    for mo in (Path(pydata_sphinx_theme.__file__).parent / "locale" / "zh" / "LC_MESSAGES" / "sphinx.mo",
               Path(sphinx.__file__).parent / "locale" / "zh_CN" / "LC_MESSAGES" / "sphinx.mo"):
        if mo.exists():
            with mo.open("rb") as f:
                words.add_fallback(gettext.GNUTranslations(f))
    return words


def chinese_pages_say_so(app, pagename, templatename, context, doctree):
    """On the Chinese pages: ``<html lang="zh-CN">`` (browsers pick Chinese glyph forms,
    screen readers the Chinese voice), and the theme's words in Chinese (THEME_ZH); the
    site's language stays English elsewhere."""
    if not pagename.startswith(("zh/", "notebooks/zh/")) and pagename != "search-zh":
        return
    context["language"] = "zh-CN"
    context["dg_chinese"] = True  # what _templates/ ask: this page is Chinese
    pathto = context["pathto"]  # the search box sends a Chinese page's reader to the Chinese search page
    context["pathto"] = lambda name, *args, **kwargs: pathto("search-zh" if name == "search" else name,
                                                             *args, **kwargs)
    if pagename == "search-zh":  # the theme loads the search scripts once, and the page searches on submit,
        context["pagename"] = "search"  # where its pagename is "search" (as on the English search page)
        app.add_js_file(None, body="DOCUMENTATION_OPTIONS.search_as_you_type = false;")
    catalog = _theme_catalog()
    # what the templates' _() and {% trans %} call
    context["gettext"], context["ngettext"] = catalog.gettext, catalog.ngettext
    context.update(THEME_SETTINGS_ZH)
    if "body" in context:  # Sphinx's writer put its own words in the page's body
        context["body"] = context["body"].replace('title="Link to this heading"',
                                                  f'title="{THEME_ZH["Link to this heading"]}"')


def setup(app):
    app.connect("html-page-context", chinese_pages_say_so)
