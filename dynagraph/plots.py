"""Matplotlib plots of gradient norms: per layer, and over training steps."""

from __future__ import annotations

import math

from ._records import owner
from .norms import GradHistory, grad_norms, grad_stats, per_module

__all__ = ["plot_grad_history", "plot_grad_norms"]


def _axes(ax, size):
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt
    return plt.subplots(figsize=size, layout="constrained")[1]


def plot_grad_norms(source, *, per="module", ax=None, title=None):
    """Bar chart of gradient norms per layer (or per parameter), on a log scale.

    Bars are L2 norms. When ``source`` holds tensors, markers add the mean ``|grad|``
    (circle) and max ``|grad|`` (triangle) of each parameter, as the popular
    ``plot_grad_flow`` snippet does. Parameters without a gradient are marked
    "no grad" in red and non-finite norms "inf/nan", instead of being left out.

    Args:
        source: An ``nn.Module``, a mapping name -> tensor, or a dict of norms as
            returned by :func:`grad_norms`.
        per: ``"module"`` (one bar per layer: ``fc.weight`` and ``fc.bias`` combined)
            or ``"parameter"``.
        ax: Axes to draw on; a new figure when ``None``.
        title: Axes title.

    Returns:
        The matplotlib ``Axes``.

    Raises:
        ValueError: ``per`` is not ``"module"`` or ``"parameter"``.
    """
    if per not in ("module", "parameter"):
        raise ValueError(f"per must be 'module' or 'parameter'; got {per!r}")
    is_norms = isinstance(source, dict) and all(isinstance(v, float) for v in source.values())
    norms = source if is_norms else grad_norms(source)
    stats = {} if is_norms or per == "module" else grad_stats(source)
    values = per_module(norms) if per == "module" else dict(norms)
    names = list(values)
    ax = _axes(ax, (min(12.0, max(4.0, 0.3 * len(names) + 1.5)), 3.2))  # capped: PNGs stay small
    xs = range(len(names))
    finite = [v if math.isfinite(v) and v > 0 else math.nan for v in values.values()]
    ax.bar(xs, finite, color="#4dabf7", label="L2 norm")
    if stats:
        ax.scatter(xs, [stats.get(n, (math.nan,) * 3)[1] for n in names], marker="o",
                   color="#1c7ed6", zorder=3, label="mean |grad|")
        ax.scatter(xs, [stats.get(n, (math.nan,) * 3)[2] for n in names], marker="^",
                   color="#e8590c", zorder=3, label="max |grad|")
    ax.set_yscale("log")
    _mark_problems(ax, values, norms)
    ax.set_xticks(list(xs), names, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("gradient norm (log)")
    ax.set_title(title or f"gradient norm per {per}")
    ax.legend(fontsize=8, loc="best")
    return ax


def _mark_problems(ax, values, norms):
    """Write 'no grad', 'inf/nan' or 'zero' over bars that cannot be drawn on a log axis."""
    missing = set(getattr(norms, "missing", ()))
    for i, (name, v) in enumerate(values.items()):
        if name in missing or any(owner(m) == name for m in missing):
            text = "no grad"
        elif not math.isfinite(v):
            text = "inf/nan"
        elif v == 0:
            text = "zero"
        else:
            continue
        ax.annotate(text, (i, 0), xycoords=("data", "axes fraction"), xytext=(0, 4),
                    textcoords="offset points", ha="center", rotation=90, color="#e03131",
                    fontsize=8)


def plot_grad_history(history: GradHistory, *, kind="lines", ax=None):
    """Gradient norms over recorded steps: one line per name, or a heatmap.

    Args:
        history: A :class:`GradHistory` with at least one recorded step.
        kind: ``"lines"`` (log y axis) or ``"heatmap"`` (log10 of the norm; steps
            across, names down).
        ax: Axes to draw on; a new figure when ``None``.

    Returns:
        The matplotlib ``Axes``.

    Raises:
        ValueError: unknown ``kind`` or an empty history.
    """
    if kind not in ("lines", "heatmap"):
        raise ValueError(f"kind must be 'lines' or 'heatmap'; got {kind!r}")
    if not history.steps:
        raise ValueError("the history is empty: call history.record() after backward() first")
    norms = history.norms
    if kind == "lines":
        ax = _axes(ax, (6.0, 3.2))
        for name, series in norms.items():
            ax.plot(history.steps, series, label=name)
        ax.set_yscale("log")
        ax.set_ylabel("gradient norm (log)")
        if len(norms) <= 12:
            ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    else:
        ax = _axes(ax, (6.0, 0.25 * len(norms) + 1.5))
        grid = [[math.log10(v) if v > 0 and math.isfinite(v) else math.nan for v in s]
                for s in norms.values()]
        image = ax.imshow(grid, aspect="auto", cmap="viridis", interpolation="nearest",
                          extent=(history.steps[0] - 0.5, history.steps[-1] + 0.5,
                                  len(grid) - 0.5, -0.5))
        ax.set_yticks(range(len(norms)), list(norms), fontsize=7)
        ax.figure.colorbar(image, ax=ax, label="log10 gradient norm")
    ax.set_xlabel("step")
    ax.set_title(f"gradient norm per {history.per} over steps")
    return ax
