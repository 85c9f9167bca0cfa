"""The font that draws Chinese: in matplotlib's plots, and in a picture's title on its PNG.

Graphviz's renderer (graphviz-pure) measures and draws ASCII and Latin text only: it
draws Chinese as empty boxes. So a title with Chinese in it is drawn outside Graphviz
(:mod:`dynagraph._png`), with Noto Sans SC from the ``pylopdf-fonts-zh-cn`` wheel (SIL
OFL 1.1), which :func:`dynagraph.set_language` also hands to matplotlib for ``"zh"``::

    pip install pylopdf-fonts-zh-cn

Without the wheel everything works and ``set_language("zh")`` says once how to install
it; Chinese then shows as boxes in plots and stays in Graphviz's titles, as before.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["CJK_FAMILY", "INSTALL", "cjk_font", "follow", "needs_cjk_font", "pillow_font"]

CJK_FAMILY = "Noto Sans SC"  # the family name in the font file (matplotlib looks fonts up by it)
INSTALL = "pip install pylopdf-fonts-zh-cn"
# Characters Graphviz's renderer has no glyph for, and Noto Sans SC has: CJK symbols and
# punctuation, kana, ideographs, compatibility forms, full-width forms (， ： （ ）).
_CJK = re.compile("[\u2e80-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0002ffff]")
_changed: list[tuple[list[str], list[str]]] = []  # (font.family before set_language("zh"), what it set)
_warned = [False]


def cjk_font() -> Path | None:
    """The file of Noto Sans SC (from ``pylopdf-fonts-zh-cn``), or ``None`` without the wheel."""
    try:
        import pylopdf_fonts_zh_cn
    except ImportError:
        return None
    path = Path(pylopdf_fonts_zh_cn.sans_path())
    return path if path.is_file() else None


def needs_cjk_font(text: str) -> bool:
    """Whether ``text`` holds characters that Graphviz's renderer draws as boxes (Chinese)."""
    return _CJK.search(text) is not None


@lru_cache(maxsize=8)  # one per size (a title and a crop note, at 96 dpi)
def pillow_font(size: int) -> Any:
    """Noto Sans SC at ``size`` pixels for Pillow, or ``None`` without the wheel."""
    path = cjk_font()
    if path is None:
        return None
    from PIL import ImageFont
    return ImageFont.truetype(str(path), size)


def follow(lang: str) -> bool:
    """Set matplotlib up for ``lang``: for ``"zh"`` register Noto Sans SC and put it after
    DejaVu Sans in ``rcParams["font.family"]`` (matplotlib falls back glyph by glyph
    along that list); for another language undo that, if nothing changed it since.

    Returns whether the caller should warn that the font is missing (the first time
    ``"zh"`` finds no font; the message is the caller's, in the learner's language)."""
    if lang == "zh":
        return _use_cjk_font()
    if _changed:
        import matplotlib
        before, ours = _changed.pop()
        if list(matplotlib.rcParams["font.family"]) == ours:
            matplotlib.rcParams["font.family"] = before
    return False


def _use_cjk_font() -> bool:
    path = cjk_font()
    if path is None:
        first = not _warned[0]
        _warned[0] = True
        return first
    import matplotlib
    from matplotlib import font_manager

    if CJK_FAMILY not in {f.name for f in font_manager.fontManager.ttflist}:
        font_manager.fontManager.addfont(str(path))
    family = list(matplotlib.rcParams["font.family"])
    if CJK_FAMILY in family:
        return False
    if "DejaVu Sans" in family:
        at = family.index("DejaVu Sans") + 1
        ours = [*family[:at], CJK_FAMILY, *family[at:]]
    elif family == ["sans-serif"]:  # matplotlib's default, which is DejaVu Sans
        ours = ["DejaVu Sans", CJK_FAMILY]
    else:  # the user's own choice first
        ours = [*family, CJK_FAMILY]
    matplotlib.rcParams["font.family"] = ours
    _changed.append((family, ours))
    return False
