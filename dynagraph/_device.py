"""device(): the torch device notebooks and tests should use."""

from __future__ import annotations

import os

import torch

ENV = "DYNAGRAPH_DEVICE"
# Device types whose availability torch can tell (torch.<type>.is_available()).
ACCELERATORS = ("cuda", "mps", "xpu")


def device() -> torch.device:
    """CUDA when available, else CPU; ``DYNAGRAPH_DEVICE=cpu`` (or ``cuda:1``, ``mps``) overrides.

    Raises:
        ValueError: the environment variable names a device torch does not know,
            or a CUDA, MPS or XPU device this machine does not have (the message
            lists the devices it has).

    Example:
        >>> torch.ones(3, device=dg.device()).device.type in ("cpu", "cuda")
        True
    """
    wanted = os.environ.get(ENV, "").strip()
    if not wanted:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(wanted)
    except RuntimeError as e:
        raise ValueError(f"{ENV}={wanted!r} is not a torch device (try 'cpu' or 'cuda')") from e
    if dev.type in ACCELERATORS and (dev.index or 0) >= _count(dev.type):
        raise ValueError(f"{ENV}={wanted!r} but {_missing(dev)} (available: {', '.join(available())}): "
                         "unset it or use one of those")
    return dev


def available() -> list[str]:
    """The devices torch can use here: ``cpu``, then ``cuda:0``, ``mps:0``, ``xpu:0``..."""
    return ["cpu"] + [f"{kind}:{i}" for kind in ACCELERATORS for i in range(_count(kind))]


def _count(kind: str) -> int:
    """How many ``kind`` devices torch can use here (0 when the build or machine has none)."""
    backend = getattr(torch, kind)
    return backend.device_count() if backend.is_available() else 0


def _missing(dev: torch.device) -> str:
    count = _count(dev.type)
    if count == 0:
        return f"{dev.type.upper()} is not available here"
    return f"this machine has {count} {dev.type.upper()} device{'s' if count > 1 else ''}"
