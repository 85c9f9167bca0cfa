"""device(): the torch device notebooks and tests should use."""

from __future__ import annotations

import os

import torch

ENV = "DYNAGRAPH_DEVICE"


def device() -> torch.device:
    """CUDA when available, else CPU; ``DYNAGRAPH_DEVICE=cpu`` (or ``cuda:1``) overrides.

    Raises:
        ValueError: the environment variable names a device torch does not know,
            or CUDA is asked for on a machine without it.
    """
    wanted = os.environ.get(ENV, "").strip()
    if not wanted:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(wanted)
    except RuntimeError as e:
        raise ValueError(f"{ENV}={wanted!r} is not a torch device (try 'cpu' or 'cuda')") from e
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{ENV}={wanted!r} but CUDA is not available here: unset it or use 'cpu'")
    return dev
