"""GradHistory: gradient norms over training steps, kept on the device until read."""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any

import torch

from . import norms as norms_of  # (``norms`` is the name of GradHistory's own property)
from ._args import whole_number
from ._language import tr
from .plots import plot_grad_history

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from .norms import NamedTensors

__all__ = ["GradHistory"]


class GradHistory:
    """Gradient norms recorded over training steps, plotted as lines or a heatmap.

    ``record()`` keeps the norms on the device; they are read to the host once, when
    first needed (``norms``, ``plot``), so recording adds no synchronisation. Each norm
    is ``torch.linalg.vector_norm`` of the ``.grad`` as it is at ``record()`` (after
    any clipping; still multiplied by a ``GradScaler``'s scale unless
    ``scaler.unscale_(optimizer)`` ran first). So, as in PyTorch, a float32 or
    bfloat16 gradient whose squares leave float32's normal range (values above
    about 1e19 or below about 1e-19; float64 ones beyond 1e154 or 1e-154) shows
    ``inf``, 0 or a norm off by up to half here, where :func:`dynagraph.grad_norms`
    computes it again, rescaled.

    Args:
        source: An ``nn.Module`` (its named parameters), a mapping name -> tensor,
            or an iterable of ``(name, tensor)`` pairs; each ``.grad`` is read at
            every ``record()``.
        per: ``"parameter"``: one norm per tensor; ``"module"``: one per module (a
            parameter's name without its last part), the L2 norm of its parameters'
            norms, ``nan`` where any of them has no gradient.

    Raises:
        ValueError: ``per`` is neither ``"parameter"`` nor ``"module"``.
        TypeError: ``source`` is none of those, or holds a value that is not a tensor.

    Example:
        >>> hist = dg.GradHistory(model)
        >>> for step in range(100):
        ...     loss = model(x).sum(); opt.zero_grad(); loss.backward()
        ...     hist.record(); opt.step()
        >>> hist.plot(kind="heatmap")
    """

    def __init__(self, source: NamedTensors, per: str = "parameter") -> None:
        if per not in ("parameter", "module"):
            raise ValueError(f"per must be 'parameter' or 'module'; got {per!r}")
        self._pairs = norms_of.named_tensors(source)
        self.per = per
        self.steps: list[int] = []
        self._pending: list[torch.Tensor] = []
        self._rows: list[list[float]] = []
        self.notes: dict[str, str] = {}  # name -> why its norm could not be read (meta device)

    @property
    def names(self) -> list[str]:
        names = [n for n, _ in self._pairs]
        return list(norms_of.per_module(dict.fromkeys(names, 0.0))) if self.per == "module" else names

    def record(self, step: int | None = None) -> None:
        """Store the current gradient norms (``nan`` where a parameter has no grad).

        Warns when no parameter has a gradient (``record()`` before ``backward()``,
        or after ``zero_grad()``): that step is all ``nan``.

        Args:
            step: This step's number on the x axis (such as the loop's ``i``); ``None``:
                the step after the last one recorded (0, 1, 2, ... when no step is given;
                11 after ``record(10)``).

        Raises:
            TypeError: ``step`` is not an int or None (a float is not rounded).
        """
        if step is not None:
            step = _step_number(step)
        grads = [t.grad.detach() for _, t in self._pairs if t.grad is not None]
        if self._pairs and not grads:
            warnings.warn("GradHistory.record(): no parameter has a gradient, so this step is all "
                          "nan; call record() after loss.backward() and before optimizer.zero_grad()",
                          stacklevel=2)
        self._pending.append(self._row(grads))
        if step is None:  # the next step: after record(10), 11 (it was 1, drawn before step 10)
            step = self.steps[-1] + 1 if self.steps else 0
        self.steps.append(step)

    def _row(self, grads: list[torch.Tensor]) -> torch.Tensor:
        """This step's norms as one device tensor (no host copy); notes go to ``self.notes``."""
        norms = iter(norms_of.device_norms(grads))
        dev = next((g.device for g in grads if g.device.type != "meta"), torch.device("cpu"))
        row: list[torch.Tensor] = []
        for name, t in self._pairs:
            norm = next(norms) if t.grad is not None else None
            if isinstance(norm, str):
                self.notes[name] = norm
            row.append(norm.to(dev, torch.float64 if norm.dtype == torch.float64 else torch.float32)
                       if isinstance(norm, torch.Tensor) else torch.full((), math.nan, device=dev))
        return torch.stack(row) if row else torch.empty(0)  # (float64 if any norm is: its range)

    @property
    def norms(self) -> dict[str, list[float]]:
        """``{name: [norm at each recorded step]}`` (one synchronisation for all pending steps)."""
        if self._pending:
            self._rows.extend(torch.stack(self._pending).tolist())
            self._pending.clear()
        names = [n for n, _ in self._pairs]
        rows = [dict(zip(names, r)) for r in self._rows]
        if self.per == "module":
            rows = [norms_of.per_module(r) for r in rows]
        return {name: [r[name] for r in rows] for name in self.names}

    def __repr__(self) -> str:
        steps, n = len(self.steps), len(self.names)
        if self.per == "module":
            return tr("<dynagraph.GradHistory: {steps} steps x {n} modules>", steps=steps, n=n)
        return tr("<dynagraph.GradHistory: {steps} steps x {n} parameters>", steps=steps, n=n)

    def plot(self, kind: str = "lines", ax: Axes | None = None) -> Axes:
        """Plot the history; returns the matplotlib ``Axes`` (see :func:`plot_grad_history`)."""
        return plot_grad_history(self, kind=kind, ax=ax)


def _step_number(step: Any) -> int:
    """``step`` as an int; a float, a str or a bool is refused, not rounded."""
    return whole_number(step, "step must be an int (the step's number, such as the loop's i) or None "
                              "(count from 0)")
