"""Checks of the arguments learners pass that more than one view takes the same way."""

from __future__ import annotations

import operator

__all__ = ["whole_number"]


def whole_number(value: object, message: str) -> int:
    """``value`` as an int (a numpy or torch integer too); a bool, a float or a str is
    refused, not rounded, with ``message`` (what to pass) and the value.

    Example:
        >>> whole_number(3, "step must be an int")
        3
    """
    if not isinstance(value, bool):
        try:
            return operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            pass
    raise TypeError(f"{message}; got {value!r} ({type(value).__name__})")
