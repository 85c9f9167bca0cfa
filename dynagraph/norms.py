"""Gradient norms per parameter, read with one host-device synchronisation."""

from __future__ import annotations

import math
from collections.abc import ItemsView, Mapping

import torch
from torch import nn

from ._records import owner

__all__ = ["GradHistory", "GradNorms", "grad_norms", "grad_stats", "per_module"]


class GradNorms(dict):
    """``{parameter name: gradient L2 norm}``, saying which are missing or non-finite.

    Parameters with no gradient map to ``nan`` and are listed in ``missing``;
    gradients with an ``inf`` or ``nan`` are listed in ``nonfinite``.
    """

    def __init__(self, norms, missing=(), nonfinite=()):
        super().__init__(norms)
        self.missing = list(missing)
        self.nonfinite = list(nonfinite)

    def __repr__(self) -> str:
        body = ", ".join(f"{k!r}: {v:.4g}" for k, v in self.items())
        return f"GradNorms({{{body}}}, missing={self.missing}, nonfinite={self.nonfinite})"


def named_tensors(source) -> list[tuple[str, torch.Tensor]]:
    """``(name, tensor)`` pairs from a module, a mapping, or an iterable of pairs.

    Raises:
        TypeError: anything else, or a value that is not a tensor.
    """
    if isinstance(source, nn.Module):
        pairs = list(source.named_parameters())
    elif isinstance(source, Mapping):
        pairs = list(source.items())
    elif isinstance(source, (list, tuple, ItemsView)) or hasattr(source, "__next__"):
        pairs = list(source)
    else:
        raise TypeError(
            "expected an nn.Module, a mapping name -> tensor or (name, tensor) pairs "
            f"(model.named_parameters()); got {type(source).__name__}"
        )
    for item in pairs:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], torch.Tensor)):
            raise TypeError(f"expected (name, tensor) pairs; got {item!r:.80}")
    return pairs


def _stack_on_host(values: list[torch.Tensor]) -> list:
    """Move small device tensors to the host with one synchronisation."""
    if not values:
        return []
    dev = values[0].device
    return torch.stack([v.to(dev, torch.float32) for v in values]).tolist()


def _device_norms(grads: list[torch.Tensor]) -> list[torch.Tensor]:
    """L2 norm of each gradient, computed on its device (no synchronisation)."""
    try:
        return list(torch._foreach_norm(grads))
    except (AttributeError, RuntimeError, TypeError):  # private API; plain loop works everywhere
        return [torch.linalg.vector_norm(g) for g in grads]


def grad_norms(source) -> GradNorms:
    """L2 norm of each parameter's ``.grad``, with one host-device synchronisation.

    Args:
        source: An ``nn.Module``, a mapping name -> tensor, or ``(name, tensor)`` pairs.

    Returns:
        A :class:`GradNorms` dict in parameter order; parameters without a gradient
        are ``nan`` and listed in ``.missing``, non-finite ones in ``.nonfinite``.

    Example:
        >>> loss = model(x).sum(); loss.backward()
        >>> dg.grad_norms(model)["0.weight"]  # equals model[0].weight.grad.norm().item()
    """
    pairs = named_tensors(source)
    present = [(n, t.grad.detach()) for n, t in pairs if t.grad is not None]
    values = _stack_on_host(_device_norms([g for _, g in present]))
    found = dict(zip((n for n, _ in present), values))
    norms = {n: found.get(n, math.nan) for n, _ in pairs}
    missing = [n for n, _ in pairs if n not in found]
    nonfinite = [n for n, v in found.items() if not math.isfinite(v)]
    return GradNorms(norms, missing, nonfinite)


def grad_stats(source) -> dict[str, tuple[float, float, float]]:
    """``{name: (norm, mean abs(grad), max abs(grad))}`` for parameters with a gradient (one sync)."""
    pairs = [(n, t.grad.detach()) for n, t in named_tensors(source) if t.grad is not None]
    rows = [torch.stack([torch.linalg.vector_norm(g).float(), g.abs().float().mean(),
                         g.abs().max().float()]) for _, g in pairs]
    values = _stack_on_host(rows)
    return {n: tuple(v) for (n, _), v in zip(pairs, values)}


def per_module(norms: Mapping[str, float]) -> dict[str, float]:
    """Combine parameter norms into one norm per module (``fc.weight`` + ``fc.bias`` -> ``fc``).

    The module of a parameter is its name without the last part, so layers without
    a bias, or with norm layers between them, are labelled correctly. A module with
    any missing gradient is ``nan``.
    """
    sums: dict[str, float] = {}
    for name, value in norms.items():
        module = owner(name) or name
        sums[module] = sums.get(module, 0.0) + value * value
    return {m: math.sqrt(s) for m, s in sums.items()}


class GradHistory:
    """Gradient norms recorded over training steps, plotted as lines or a heatmap.

    ``record()`` keeps the norms on the device; they are read to the host once, when
    first needed (``norms``, ``plot``), so recording adds no synchronisation.

    Example:
        >>> hist = dg.GradHistory(model)
        >>> for step in range(100):
        ...     loss = model(x).sum(); opt.zero_grad(); loss.backward()
        ...     hist.record(); opt.step()
        >>> hist.plot(kind="heatmap")
    """

    def __init__(self, source, per: str = "parameter"):
        if per not in ("parameter", "module"):
            raise ValueError(f"per must be 'parameter' or 'module'; got {per!r}")
        self._pairs = named_tensors(source)
        self.per = per
        self.steps: list[int] = []
        self._pending: list[torch.Tensor] = []
        self._rows: list[list[float]] = []

    @property
    def names(self) -> list[str]:
        names = [n for n, _ in self._pairs]
        return list(per_module(dict.fromkeys(names, 0.0))) if self.per == "module" else names

    def record(self, step: int | None = None) -> None:
        """Store the current gradient norms (``nan`` where a parameter has no grad)."""
        self.steps.append(len(self.steps) if step is None else int(step))
        grads = [t.grad.detach() for _, t in self._pairs if t.grad is not None]
        norms = iter(_device_norms(grads))
        dev = grads[0].device if grads else torch.device("cpu")
        row = [next(norms).to(dev, torch.float32) if t.grad is not None
               else torch.full((), math.nan, device=dev) for _, t in self._pairs]  # no host copy
        self._pending.append(torch.stack(row) if row else torch.empty(0))

    @property
    def norms(self) -> dict[str, list[float]]:
        """``{name: [norm at each recorded step]}`` (one synchronisation for all pending steps)."""
        if self._pending:
            self._rows.extend(torch.stack(self._pending).tolist())
            self._pending.clear()
        names = [n for n, _ in self._pairs]
        rows = [dict(zip(names, r)) for r in self._rows]
        if self.per == "module":
            rows = [per_module(r) for r in rows]
        return {name: [r[name] for r in rows] for name in self.names}

    def __repr__(self) -> str:
        return f"<dynagraph.GradHistory: {len(self.steps)} steps x {len(self.names)} {self.per}s>"

    def plot(self, kind: str = "lines", ax=None):
        """Plot the history; returns the matplotlib ``Axes`` (see :func:`plot_grad_history`)."""
        from .plots import plot_grad_history
        return plot_grad_history(self, kind=kind, ax=ax)
