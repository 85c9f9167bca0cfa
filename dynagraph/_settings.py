"""What :func:`dynagraph.set_language` sets: the language of messages
(:mod:`dynagraph._language`, plain data) and matplotlib's font for it
(:mod:`dynagraph._fonts`, which changes matplotlib's settings)."""

from __future__ import annotations

import warnings

from . import _fonts, _language
from ._language import tr

__all__ = ["set_language"]


def set_language(lang: str) -> None:
    """Choose the language of learner-facing messages: ``"en"`` or ``"zh"``.

    For ``"zh"``, matplotlib also gets a font for Chinese (see :mod:`dynagraph._fonts`).

    Raises:
        ValueError: ``lang`` is not one of :data:`dynagraph._language.LANGUAGES`.

    Warns:
        UserWarning: ``"zh"`` without the font's wheel (once): ``pip install pylopdf-fonts-zh-cn``.

    Example:
        >>> dg.set_language("zh")
        >>> dg.language()
        'zh'
    """
    _language.choose(lang)
    if _fonts.follow(lang):  # matplotlib's fallback font for Chinese (or back to the default)
        warnings.warn(tr("Chinese text in plots and picture titles needs a font that has its glyphs: "
                         "{install} (Noto Sans SC), then restart the kernel. Until then it shows "
                         "as boxes.", install=_fonts.INSTALL), stacklevel=2)
