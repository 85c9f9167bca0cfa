"""Find the line of user code that called a tensor operation: its frame, and its text."""

from __future__ import annotations

import ast
import linecache
import os
import re
import sys
import warnings
from types import CodeType, FrameType

import torch

from . import _torch
from ._language import N_, language, translated

_SKIP = tuple(os.path.dirname(m.__file__) + os.sep for m in (torch,) if m.__file__)
PACKAGE_DIR = os.path.dirname(__file__) + os.sep
_CELL = re.compile(r"(ipykernel_\d+[/\\]\d+\.py|<ipython-input-[\da-f-]+>)$")
_internal: dict[str, bool] = {}
# Where a cell's line is: written in English (``Step.where`` is data that notebooks test,
# the same in every language) and shown in the learner's language by :func:`shown`.
_THIS_CELL = N_("this cell, line {line}")
_DEFINING = N_("cell defining {name}, line {line}")
_ANOTHER_CELL = N_("another cell, line {line}")
_PLACE = re.compile(r"(?:(?P<this>this cell)|cell defining (?P<name>[^,]+)|another cell), line (?P<line>\d+)")


def _is_internal(filename: str) -> bool:
    hit = _internal.get(filename)
    if hit is None:
        hit = filename.startswith(_SKIP) or filename.startswith(PACKAGE_DIR) or filename.startswith("<frozen")
        _internal[filename] = hit
    return hit


def describe(filename: str | None, lineno: int | None) -> tuple[str, str]:
    """Say where a line of user code is, in words a learner recognises, and give its text.

    Call it while the op on that line runs: a Jupyter cell is named from the cell
    that the kernel is running then (the outermost cell on the call stack).

    Args:
        filename: The frame's file name (a cell's temporary file name in Jupyter),
            or ``None`` when no user frame was found.
        lineno: The line number in that file (in a cell, from the cell's first line).

    Returns:
        ``(where, code)``. ``where`` is one of:

        * ``"model.py:12"``: a line in a file.
        * ``"this cell, line 3"``: the cell being run now (its top level, or a
          function that it defines).
        * ``"cell defining DynamicDepthNet, line 10"``: another cell; the name is
          the function or class of that cell that holds the line.
        * ``"another cell, line 4"``: another cell, where no function or class holds
          the line (a lambda at a cell's top level).
        * ``"?"``: no line.

        ``code`` is the line's text without its indent (``""`` if unknown).

    ``where`` is English in every language; :func:`shown` gives it in the learner's.

    A cell is not named by its execution count (``[5]``), nor by its file name:
    they differ between runs. nbval runs each cell without history, so there every
    cell has count 1, while a notebook run top to bottom (which stores the outputs)
    numbers its cells 1, 2, 3 and so on. The file name holds the kernel's process
    id. IPython keeps the cell's code in :mod:`linecache`.

    Example:
        >>> describe("model.py", 12)[0]
        'model.py:12'
    """
    if filename is None or lineno is None:
        return "?", ""
    code = linecache.getline(filename, lineno).strip()
    if not _CELL.search(filename):
        return f"{os.path.basename(filename)}:{lineno}", code
    if filename == _running_cell():
        return _THIS_CELL.format(line=lineno), code
    name = _definition_at(filename, lineno)
    return (_DEFINING.format(name=name, line=lineno) if name else _ANOTHER_CELL.format(line=lineno)), code


_FILE_LINES: dict[tuple[str, int], tuple[object, tuple[str, str]]] = {}  # see described()


def described(filename: str | None, lineno: int | None) -> tuple[str, str]:
    """:func:`describe`, remembered across calls for lines of files (not of cells: which
    cell is "this cell" changes), while :mod:`linecache` holds the same text of the
    file (an edited file, read again, is described again). A ``live()`` block described
    each line it met anew: a Hugging Face model runs ops on some fifty lines of its own."""
    if filename is None or lineno is None or _CELL.search(filename):
        return describe(filename, lineno)
    key = (filename, lineno)
    entry = linecache.cache.get(filename)
    known = _FILE_LINES.get(key)
    if known is not None and known[0] is entry and entry is not None:
        return known[1]
    found = describe(filename, lineno)
    if len(_FILE_LINES) >= 8192:  # (lines of many files: keep it small)
        _FILE_LINES.clear()
    _FILE_LINES[key] = (linecache.cache.get(filename), found)
    return found


def shown(where: str) -> str:
    """``where`` as :func:`describe` gave it, in the current language (a file's
    ``model.py:12`` and ``?`` read the same in every language).

    Example:
        >>> dg.set_language("zh")
        >>> shown("this cell, line 3")
        '本单元格，第 3 行'
    """
    place = _PLACE.fullmatch(where) if language() != "en" else None
    if place is None:
        return where
    if place["this"]:
        return translated(_THIS_CELL, line=place["line"])
    if place["name"]:
        return translated(_DEFINING, name=place["name"], line=place["line"])
    return translated(_ANOTHER_CELL, line=place["line"])


def _running_cell() -> str | None:
    """The file name of the cell that the kernel is running now: the outermost cell on
    this thread's call stack (``None`` when there is none, as in a thread)."""
    found = None
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if _CELL.search(frame.f_code.co_filename):
            found = frame.f_code.co_filename  # keep going: a cell's function calls sit above the cell
        frame = frame.f_back
    return found


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _definition_at(filename: str, lineno: int) -> str | None:
    """The name of the outermost function or class in the cell's code that holds line
    ``lineno`` (its decorators count as its lines), or ``None``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a cell's own SyntaxWarning was shown when it ran
        try:
            tree = ast.parse("".join(linecache.getlines(filename)))
        except (SyntaxError, ValueError):  # not the code that ran (the cache was changed)
            return None
    for node in ast.walk(tree):  # outer nodes come first
        if isinstance(node, _DEFINITIONS):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if first <= lineno <= (node.end_lineno or node.lineno):
                return node.name
    return None


def user_frame(frame: FrameType | None) -> FrameType | None:
    """The nearest frame outside torch and dynagraph that is not a ``__torch_function__``
    (a user's own mode or tensor subclass passing the op on): the line that ran the op."""
    while frame is not None:
        code = frame.f_code
        user = _user_code.get(code)
        if user is None:
            if len(_user_code) >= 4096:  # (code made on the fly, cell after cell: keep it small)
                _user_code.clear()
            user = code.co_name != "__torch_function__" and not _is_internal(code.co_filename)
            _user_code[code] = user
        if user:
            return frame
        frame = frame.f_back
    return None


_user_code: dict[CodeType, bool] = {}  # code -> whether its frames are the user's (asked per op and frame)


def caller_of_graph(graph_frame: FrameType) -> FrameType | None:
    """The user's line that called a compiled function whose graph runs in ``graph_frame``:
    past torch and the compiled function's own frame (which dynamo calls)."""
    frame = user_frame(graph_frame.f_back)
    while frame is not None and frame.f_back is not None and \
            frame.f_back.f_code.co_filename.startswith(_torch.DYNAMO_DIR):
        frame = user_frame(frame.f_back)
    return frame
