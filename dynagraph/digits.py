"""Numbers as text that reads the same on any CPU: what a notebook's stored output may print.

Float32 results differ in their last bits between CPUs (vector unit, BLAS kernels,
thread count). A notebook whose stored output prints ``0.41`` must print ``0.41`` on
every machine, or strict nbval fails there. So the lessons print a value through one
of these two functions. Each prints only digits that a small move of the value cannot
change, and raises when the value lies too close to a point where the text changes.

Example:
    >>> from dynagraph.digits import approx, rounded
    >>> approx(0.40824829), approx(2.4e-11)
    ('0.41', '10^-11')
    >>> rounded([0.62245933, 0.73105858])
    [0.6225, 0.7311]
"""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["approx", "rounded"]


def approx(x: float, drift: float = 1e-4) -> str:
    """``x`` (>= 0) as short text: 2 significant digits, else 1, else a power of ten.

    It picks the first of these that every value within ``drift`` of ``x`` (relative)
    rounds to. Float32 results move between CPUs by about 5e-6 (relative) in the
    lessons' networks, so another CPU prints the same text.

    Args:
        x: the value, a non-negative float.
        drift: how far (relative) another CPU's value may lie from ``x``.

    Returns:
        ``"0.41"``, ``"310"`` (never ``"3.1e+02"``), ``"10^-11"`` or ``"0"``.

    Raises:
        ValueError: ``x`` is negative, or so close to a rounding edge that even its
            power of ten could print differently elsewhere.

    Example:
        >>> approx(0.0059134), approx(28.4), approx(0.0)
        ('0.0059', '28', '0')
    """
    if x < 0:
        raise ValueError(f"approx needs a value >= 0; got {x!r} (print abs(x) and the sign apart)")
    if x == 0:
        return "0"
    ends = [x * (1 - drift), x * (1 + drift)]
    if x >= 1e-4:
        for digits in (2, 1):
            texts = {f"{float(f'{v:.{digits}g}'):g}" for v in ends}     # 310, not 3.1e+02
            if len(texts) == 1:
                return texts.pop()
    powers = {round(math.log10(v)) for v in ends}
    if len(powers) != 1:
        raise ValueError(f"{x!r} is too close to a rounding edge to print the same on every CPU: "
                         "print a bound instead (x < 1e-3)")
    return f"10^{powers.pop()}"


def rounded(t: Any, digits: int = 4) -> Any:
    """``t`` (a tensor, a number or nested lists) rounded to ``digits`` decimal places.

    Returns a float, or nested lists of floats, for printing. Round-off differs between
    CPUs by far less than 1e-6, so no value may lie within 1e-6 of a rounding boundary:
    each printed digit is then the same on any machine.

    Args:
        t: what to round; a tensor on any device, or anything ``torch.as_tensor`` takes.
        digits: decimal places to keep.

    Returns:
        A float for a single value, else nested lists of floats (never ``-0.0``).

    Raises:
        ValueError: a value lies within 1e-6 of a rounding boundary.

    Example:
        >>> rounded(torch.tensor(-3.13795), 3)
        -3.138
    """
    x = torch.as_tensor(t).detach().double().cpu()
    scaled = x * 10 ** digits
    close = (scaled - scaled.floor() - 0.5).abs() <= 1e-6 * 10 ** digits
    if close.any():
        raise ValueError(f"{x[close].flatten()[0].item()!r} is within 1e-6 of a rounding boundary at "
                         f"{digits} places: too close to call on every CPU (print fewer digits or a bound)")
    return (x.round(decimals=digits) + 0.0).tolist()   # + 0.0: never print -0.0
