"""The language of learner-facing messages: English (the default) or Chinese.

What a learner reads from dynagraph (the exercise checks' verdicts and hints, the
stepper's controls and step list, plot titles) follows one setting::

    dg.set_language("zh")   # the Chinese notebooks do this where they import dynagraph

Error messages meant for programmers (a bad argument, a missing renderer) stay in
English, as do the names inside pictures (op names, module and parameter names,
shapes): they are code, and code reads the same in every language.

For ``"zh"`` the font that draws Chinese (Noto Sans SC, from ``pip install
pylopdf-fonts-zh-cn``) is handed to matplotlib, and draws Chinese picture titles on
their PNG: see :mod:`dynagraph._fonts`. :func:`dynagraph.set_language`
(:mod:`dynagraph._settings`) does both; this module holds only the setting and the catalogs.

Each message is written in English in the code, as the argument of :func:`tr`; the
translations live in catalogs keyed by that English text (``dynagraph/_zh.py`` for the
package, ``dynagraph/exercises/_zh.py`` for the exercise checks).
``tests/test_language.py`` fails when a message has no translation or a translation
has no message.

A message defined at import time, before a learner chooses a language (an exercise's
title), is marked where it is defined with :func:`N_`, which returns it unchanged, and
translated where it is shown with :func:`translated`, which takes a variable.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

__all__ = ["LANGUAGES", "N_", "choose", "counted", "language", "tr", "translated"]

LANGUAGES = ("en", "zh")  # English (the default) and Simplified Chinese
_CATALOGS = {"zh": ("dynagraph._zh", "dynagraph.exercises._zh")}  # modules holding MESSAGES dicts
_current = ["en"]
_loaded: dict[str, dict[str, str]] = {}


def choose(lang: str) -> None:
    """Make ``lang`` the language of messages (:func:`dynagraph.set_language` also
    hands matplotlib a font for it).

    Raises:
        ValueError: ``lang`` is not one of :data:`LANGUAGES`.
    """
    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}: use one of {', '.join(map(repr, LANGUAGES))} "
                         "('en' is English, 'zh' is Simplified Chinese)")
    _current[0] = lang


def language() -> str:
    """The language chosen with :func:`dynagraph.set_language` (``"en"`` until then)."""
    return _current[0]


def tr(message: str, /, **fields: Any) -> str:
    """``message`` (English) in the current language, with ``fields`` filled in.

    Args:
        message: The English text, a literal (the catalogs are keyed by it); names
            in braces are filled from ``fields`` as :meth:`str.format` does.
        fields: Values for the names in braces.

    Example:
        >>> tr("{n} steps", n=3)
        '3 steps'
    """
    return translated(message, **fields)


def N_(message: str, /) -> str:
    """``message`` unchanged: marks an English message defined at import time, to be
    translated where it is shown with :func:`translated` (gettext's ``N_``).

    Example:
        >>> TITLE = N_("an SGD step")
        >>> TITLE
        'an SGD step'
    """
    return message


def translated(text: str, /, **fields: Any) -> str:
    """``text`` (an English message marked with :func:`N_` where it was defined) in the
    current language, with ``fields`` filled in: :func:`tr` for a message held in a variable.

    Example:
        >>> title = N_("an SGD step")
        >>> translated(title)
        'an SGD step'
    """
    if _current[0] == "en":
        return text.format(**fields) if fields else text
    text = catalog(_current[0]).get(text, text)
    return _CJK_SPACE.sub("", text.format(**fields) if fields else text)


def counted(n: int, one: str, many: str, /) -> str:
    """A count said in words, in the current language: ``one`` (a message marked with
    :func:`N_`) when ``n`` is 1, else ``many`` with ``{n}`` filled (thousands with commas).

    Example:
        >>> counted(1, N_("1 step"), N_("{n} steps")), counted(1200, N_("1 step"), N_("{n} steps"))
        ('1 step', '1,200 steps')
    """
    return translated(one) if n == 1 else translated(many, n=f"{n:,}")


# A space with a Chinese character on each side: a template's spaces around a field read as
# gaps once the field is Chinese ("打包 的速度"); beside digits and Latin names they stay.
_CJK = r"[\u3400-\u9fff\u3000-\u303f\uff00-\uffef]"  # ideographs, Chinese punctuation, full-width forms
_CJK_SPACE = re.compile(rf"(?<={_CJK}) (?={_CJK})")


def catalog(lang: str) -> dict[str, str]:
    """``{English message: translation}`` for ``lang``, from all its catalog modules."""
    if lang not in _loaded:
        merged: dict[str, str] = {}
        for name in _CATALOGS.get(lang, ()):
            merged.update(importlib.import_module(name).MESSAGES)
        _loaded[lang] = merged
    return _loaded[lang]
