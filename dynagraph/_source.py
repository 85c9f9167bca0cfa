"""Find the line of user code that called a tensor operation."""

from __future__ import annotations

import linecache
import os
import re
import sys
from types import FrameType

import torch

_SKIP = tuple(os.path.dirname(m.__file__) + os.sep for m in (torch,) if m.__file__)
PACKAGE_DIR = os.path.dirname(__file__) + os.sep
_CELL = re.compile(r"(ipykernel_\d+[/\\]\d+\.py|<ipython-input-[\d-]+>)$")
_internal: dict[str, bool] = {}


def _is_internal(filename: str) -> bool:
    hit = _internal.get(filename)
    if hit is None:
        hit = filename.startswith(_SKIP) or filename.startswith(PACKAGE_DIR) or filename.startswith("<frozen")
        _internal[filename] = hit
    return hit


def caller(depth: int = 2) -> tuple[str, int] | tuple[None, None]:
    """``(filename, lineno)`` of the nearest frame outside torch and dynagraph."""
    frame: FrameType | None = sys._getframe(depth)
    while frame is not None and _is_internal(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return None, None
    return frame.f_code.co_filename, frame.f_lineno


def describe(filename: str | None, lineno: int | None) -> tuple[str, str]:
    """``(where, code)``: ``"cell In[5], line 3"`` or ``"model.py:12"``, and the line's text.

    A Jupyter cell is named as IPython's tracebacks name it, by the execution count
    shown beside it (``In[5]``), not by its temporary file name, which changes from
    run to run; IPython keeps the cell's text in ``linecache``.
    """
    if filename is None or lineno is None:
        return "?", ""
    code = linecache.getline(filename, lineno).strip()
    if _CELL.search(filename):
        cell = _cell_name(filename)
        return (f"cell {cell}, line {lineno}" if cell else f"cell, line {lineno}"), code
    return f"{os.path.basename(filename)}:{lineno}", code


def _cell_name(filename: str) -> str | None:
    """``In[5]`` for the file IPython compiled cell 5 to, or ``None`` outside IPython."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    name_of = getattr(getattr(shell, "compile", None), "format_code_name", None)
    try:
        named = name_of(filename) if name_of is not None else None
    except Exception:  # noqa: BLE001 - an IPython without it: name the cell by line only
        return None
    return named[1] if named and len(named) == 2 else None
