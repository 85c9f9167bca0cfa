"""The Chinese edition says which links lead to English: each is followed by （英文）.

Every markdown link of the Chinese edition (the markdown cells of notebooks/zh/*.ipynb,
notebooks/zh/glossary.md, README.zh-CN.md and the Chinese docs pages in docs/zh/) is
checked. A link is Chinese when it leads to a page of :data:`CHINESE_SITES` (zh.d2l.ai,
the Chinese Python docs), to a file of the Chinese edition, or to a place on the same page.
Any other link leads to English (pytorch.org, GitHub, arXiv, the English notebooks) and is
followed by ``（英文）``, or by a bracket that ends in it (``（2016，英文）``, as lesson 12
writes a paper's year). A link whose own text, or the label just before it, names the
language (``[English](README.md)``, ``英文版：[../glossary.md](../glossary.md)``) needs no mark.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ZH = ROOT / "notebooks" / "zh"
PAGES = [*sorted(ZH.glob("*.ipynb")), ZH / "glossary.md", ROOT / "README.zh-CN.md",
         *sorted((ROOT / "docs" / "zh").glob("*.md"))]

# Sites in Chinese: d2l-zh, the Chinese Python docs, the Chinese Wikipedia.
CHINESE_SITES = ("https://zh.d2l.ai/", "https://docs.python.org/zh-cn/", "https://zh.wikipedia.org/")
# Files of the Chinese edition, relative to the repository
CHINESE_FILES = ("notebooks/zh/", "docs/zh/", "docs/notebooks/zh/", "README.zh-CN.md")  # docs/notebooks: the build's copy

# [text](target): the text may hold code spans and one level of brackets; not an image (![...])
_LINK = re.compile(r"(?<!!)\[((?:[^\[\]\n]|\[[^\]\n]*\])*)\]\(([^)\s]+)\)")
_MARK = re.compile(r"（(?:[^（）\n]*，)?英文）")  # （英文） or （2016，英文）
_LABEL = re.compile(r"(?:English|英文)[\w ]{0,10}[：:] ?$")  # "English edition：", "英文版：" just before a link
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _markdown(path: Path) -> list[tuple[str, str]]:
    """``(where, text)`` for each piece of markdown in ``path``, fenced code left out."""
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        pieces = [(f"cell {i}", "".join(c["source"])) for i, c in enumerate(cells) if c["cell_type"] == "markdown"]
    else:
        pieces = [("", path.read_text(encoding="utf-8"))]
    return [(where, _FENCE.sub("", text)) for where, text in pieces]


def is_chinese(target: str, page: Path) -> bool:
    """Whether a link from ``page`` to ``target`` leads to a page in Chinese."""
    if target.startswith("#"):
        return True
    if re.match(r"[a-z]+:", target):
        return target.startswith(CHINESE_SITES)
    path = (page.parent / target.split("#")[0]).resolve()
    try:
        relative = path.relative_to(ROOT).as_posix()
    except ValueError:
        return False
    return relative.startswith(CHINESE_FILES)


def _says_english(text: str, link: re.Match) -> bool:
    """Whether the link's text, or the label just before it on its line, names English."""
    return "English" in link[1] or "英文" in link[1] or bool(_LABEL.search(text, 0, link.start()))


def unmarked(page: Path) -> list[str]:
    """``"cell N: [text](target)"`` for each link to English not followed by （英文）."""
    found = []
    for where, text in _markdown(page):
        for link in _LINK.finditer(text):
            target = link[2]
            if is_chinese(target, page) or _says_english(text, link):
                continue
            if not _MARK.match(text, link.end()):
                found.append(f"{where}: {link.group(0)[:90]}{text[link.end():link.end() + 8]!r}")
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_to_english_says_so(page):
    problems = unmarked(page)
    assert not problems, f"{page.name}: links to English pages without （英文）:\n" + "\n".join(problems)


def test_the_check_tells_chinese_from_english(tmp_path):
    page = ZH / "01_simple_backward.ipynb"
    assert is_chinese("https://zh.d2l.ai/chapter_preliminaries/autograd.html", page)
    assert is_chinese("https://docs.python.org/zh-cn/3/library/pdb.html", page)
    assert is_chinese("01b_deep_dive_how_backward_runs.ipynb", page)
    assert is_chinese("#exercises", page)
    assert not is_chinese("https://docs.python.org/3/library/pdb.html", page)
    assert not is_chinese("https://d2l.ai/chapter_recurrent-neural-networks/bptt.html", page)
    assert not is_chinese("../01_simple_backward.ipynb", page)
    assert not is_chinese("CONTRIBUTING.md", ROOT / "README.zh-CN.md")
    md = tmp_path / "page.md"
    md.write_text("[a](https://pytorch.org/a)（英文）、[b](https://arxiv.org/abs/1)（2016，英文）、"
                  "[c](https://github.com/c)。[d](https://zh.d2l.ai/)、[English](README.md)、"
                  "英文版：[g](../g.md)、![e](https://example.org/e.png)\n```\n[f](https://example.org/f)\n```\n", encoding="utf-8")
    assert [p.split("]")[0] for p in unmarked(md)] == [": [c"]
