"""Find the line of user code that called a tensor operation: its frame, and its text."""

from __future__ import annotations

import linecache
import os
import re
from types import FrameType

import torch

from . import _torch

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


def describe(filename: str | None, lineno: int | None) -> tuple[str, str]:
    """``(where, code)``: ``'cell "def forward(self, x):", line 3'`` or ``"model.py:12"``,
    and the line's text.

    A Jupyter cell is named by its first line: its temporary file name changes from
    run to run, and so does its execution count (``In[5]``), which a notebook run
    without history (as nbval runs it) does not even have. IPython keeps the
    cell's text in ``linecache``.
    """
    if filename is None or lineno is None:
        return "?", ""
    code = linecache.getline(filename, lineno).strip()
    if _CELL.search(filename):
        first = _first_line(filename)
        return (f'cell "{first}", line {lineno}' if first else f"cell, line {lineno}"), code
    return f"{os.path.basename(filename)}:{lineno}", code


FIRST_LINE = 32  # characters of a cell's first line that name it


def _first_line(filename: str) -> str:
    """The cell's first line that is not blank or a comment, cut to :data:`FIRST_LINE`."""
    for line in linecache.getlines(filename):
        line = line.strip()
        if line and not line.startswith("#"):
            return line if len(line) <= FIRST_LINE else line[: FIRST_LINE - 1] + "…"
    return ""


def user_frame(frame: FrameType | None) -> FrameType | None:
    """The nearest frame outside torch and dynagraph that is not a ``__torch_function__``
    (a user's own mode or tensor subclass passing the op on): the line that ran the op."""
    while frame is not None:
        code = frame.f_code
        if code.co_name != "__torch_function__" and not _is_internal(code.co_filename):
            return frame
        frame = frame.f_back
    return None


def caller_of_graph(graph_frame: FrameType) -> FrameType | None:
    """The user's line that called a compiled function whose graph runs in ``graph_frame``:
    past torch and the compiled function's own frame (which dynamo calls)."""
    frame = user_frame(graph_frame.f_back)
    while frame is not None and frame.f_back is not None and \
            frame.f_back.f_code.co_filename.startswith(_torch.DYNAMO_DIR):
        frame = user_frame(frame.f_back)
    return frame
