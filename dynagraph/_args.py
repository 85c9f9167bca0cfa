"""Checks of the arguments learners pass that more than one view takes the same way."""

from __future__ import annotations

import operator
from typing import Any

__all__ = ["integer_or_same", "whole_number"]


def whole_number(value: object, message: str) -> int:
    """``value`` as an int (a numpy or torch integer too); a bool, a float or a str is
    refused, not rounded, with ``message`` (what to pass) and the value.

    Example:
        >>> whole_number(3, "step must be an int")
        3
    """
    number = integer_or_same(value)
    if isinstance(number, int) and not isinstance(number, bool):
        return number
    raise TypeError(f"{message}; got {value!r} ({type(value).__name__})")


def integer_or_same(value: object) -> Any:  # (what was passed, checked by the caller next)
    """``value`` as an int where it is an integer of another type (numpy's, torch's: a
    loop over ``np.arange``), else ``value`` itself, a bool too, for its check to refuse."""
    if isinstance(value, bool) or type(value) is int:
        return value
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return value
