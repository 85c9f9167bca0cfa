"""Matplotlib plots of gradient norms (per layer, and over training steps) and of a step's memory.

Titles, axis labels and legends follow :func:`dynagraph.set_language` (which gives
matplotlib a font for Chinese); parameter and module names stay as they are.
"""

from __future__ import annotations

import itertools
import math
import numbers
import warnings
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, cast

import numpy as np
import torch

from ._language import N_, tr, translated
from ._records import owner
from .norms import NamedTensors, grad_norms, grad_stats, named_tensors, per_module

if TYPE_CHECKING:  # history.py imports this module (types only: no import circle at run time)
    from matplotlib.axes import Axes
    from matplotlib.cm import ScalarMappable

    from .history import GradHistory
    from .step_memory import StepMemory

__all__ = ["plot_grad_history", "plot_grad_norms", "plot_step_memory"]

MAX_SHOWN = 60  # bars or rows; more are unreadable, and tick labels make drawing slow
LABEL_CHARS = 40  # a longer name is shown as its start and end: a 100k-character name stays one line


def _check_ax(ax: object) -> None:
    """Refuse an ``ax`` that is not one matplotlib Axes, before anything is computed or drawn."""
    if ax is None:
        return
    from matplotlib.axes import Axes
    if not isinstance(ax, Axes):
        hint = (" plt.subplots(1, 2) returns an array of Axes: pass one of them, such as ax=axes[0]."
                if hasattr(ax, "__len__") else "")
        raise TypeError(f"ax must be a matplotlib Axes (fig, ax = plt.subplots()) or None (a new figure); "
                        f"got {type(ax).__name__}.{hint}")


def _axes(ax: Axes | None, size: tuple[float, float]) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt
    return plt.subplots(figsize=size, layout="constrained")[1]


def _shown(name: str) -> str:
    """``name`` as a label matplotlib draws literally (``$`` would start maths) and at
    most :data:`LABEL_CHARS` long (its middle cut out)."""
    if len(name) > LABEL_CHARS:
        half = (LABEL_CHARS - 1) // 2
        name = f"{name[:half]}\u2026{name[-half:]}"
    return name.replace("$", r"\$")


def _pick(values: dict[str, float], limit: int = MAX_SHOWN) -> list[str]:
    """At most ``limit`` names, in their order: problems, largest and smallest norms, in turn.

    Problems are ``nan``, ``inf`` and zero norms (no bar on a log axis). Taking one
    from each list in turn keeps both ends of the range, where vanishing and
    exploding gradients show, and some of every problem.
    """
    if len(values) <= limit:
        return list(values)
    ok = sorted((n for n, v in values.items() if math.isfinite(v) and v > 0), key=values.__getitem__)
    good = set(ok)
    queues = [[n for n in values if n not in good], ok[::-1], ok]
    keep: set[str] = set()
    for name in itertools.chain.from_iterable(itertools.zip_longest(*queues)):
        if name is not None:
            keep.add(name)
        if len(keep) == limit:
            break
    return [n for n in values if n in keep]


def _shown_note(shown: int, total: int, per: str) -> str:
    if per == "parameter":
        return tr("{shown} of {total} parameters shown: the largest and smallest norms and any without one; "
                  "per='module' combines them", shown=shown, total=f"{total:,}")
    return tr("{shown} of {total} modules shown: the largest and smallest norms and any without one",
              shown=shown, total=f"{total:,}")


def _per_title(per: str, over_steps: bool = False) -> str:
    """The title of a plot of one norm per module or per parameter (over training steps)."""
    if over_steps:
        return (tr("gradient norm per parameter over steps") if per == "parameter" else
                tr("gradient norm per module over steps"))
    return tr("gradient norm per parameter") if per == "parameter" else tr("gradient norm per module")


def _given_norms(source: object) -> Mapping[str, float] | None:
    """``source`` when it is a dict of norms (a GradNorms keeps its notes), as floats when
    some are ints or numpy numbers; ``None`` when it is a source of tensors."""
    if not isinstance(source, dict):
        return None
    if not all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in source.values()):
        return None  # (a bool is no norm; a tensor is a parameter)
    if all(type(v) is float for v in source.values()):
        return source
    return {k: float(v) for k, v in source.items()}


def _norms_of(source: NamedTensors | Mapping[str, float], is_norms: bool) -> Mapping[str, float]:
    """The norms to plot; raises on nothing to plot, warns when no parameter has a gradient."""
    norms = cast("Mapping[str, float]", source) if is_norms else grad_norms(cast(NamedTensors, source))
    if not norms:
        raise ValueError("plot_grad_norms: nothing to plot, the source has no parameters; pass a "
                         "model with parameters (or a dict of norms from dg.grad_norms(model))")
    if len(getattr(norms, "missing", ())) == len(norms):
        warnings.warn("plot_grad_norms: no parameter has a gradient (every .grad is None), so there "
                      "are no bars; call it after loss.backward() and before optimizer.zero_grad(), "
                      "which sets .grad to None", stacklevel=3)
    return norms


def plot_grad_norms(source: NamedTensors | Mapping[str, float], *, per: str = "module",
                    ax: Axes | None = None, title: str | None = None) -> Axes:
    """Bar chart of gradient norms per layer (or per parameter), on a log scale.

    Bars are L2 norms of each ``.grad`` as it is now (after any clipping; still
    multiplied by a ``GradScaler``'s scale unless ``scaler.unscale_(optimizer)`` ran
    first). With ``per="parameter"`` and a ``source`` of tensors, markers add the
    mean ``|grad|`` (circle) and max ``|grad|`` (triangle) of each parameter, as the
    popular ``plot_grad_flow`` snippet does (a module's bar has no markers).
    Parameters without a gradient are marked "no grad" in red, non-finite norms
    "inf/nan", and gradients with no values to read (``meta`` device) "no value",
    instead of being left out. With more than
    ``MAX_SHOWN`` (60) bars, only 60 are drawn: the largest and smallest norms and
    the problems, in model order, as the x label says.

    Args:
        source: An ``nn.Module``, a mapping name -> tensor, or a dict of norms as
            returned by :func:`grad_norms`.
        per: ``"module"`` (one bar per layer: the L2 norm of ``fc.weight``'s and
            ``fc.bias``'s norms, "no grad" when any of them has none, such as a frozen
            bias) or ``"parameter"``.
        ax: Axes to draw on; a new figure when ``None``.
        title: Axes title.

    Returns:
        The matplotlib ``Axes``.

    Raises:
        ValueError: ``per`` is not ``"module"`` or ``"parameter"``, or ``source``
            has no parameters.
        TypeError: ``ax`` is not a matplotlib Axes.

    Warns:
        UserWarning: no parameter has a gradient (before ``backward()``, or after
            ``zero_grad()``).
    """
    if per not in ("module", "parameter"):
        raise ValueError(f"per must be 'module' or 'parameter'; got {per!r}")
    _check_ax(ax)
    given = _given_norms(source)
    is_norms = given is not None
    norms = _norms_of(source if given is None else given, is_norms)
    every = per_module(norms) if per == "module" else dict(norms)
    names = _pick(every)
    values = {n: every[n] for n in names}
    stats = {} if is_norms or per == "module" else grad_stats(_subset(cast(NamedTensors, source), names))
    ax = _axes(ax, (min(12.0, max(4.0, 0.3 * len(names) + 1.5)), 3.2))  # capped: PNGs stay small
    _bars(ax, values, stats)
    _mark_problems(ax, values, norms)
    ax.set_xticks(range(len(names)), [_shown(n) for n in names], rotation=60, ha="right", fontsize=8)
    if len(names) < len(every):
        ax.set_xlabel(_shown_note(len(names), len(every), per), fontsize=8)
    ax.set_ylabel(tr("gradient norm (log)"))
    ax.set_title(title or _per_title(per))
    ax.legend(fontsize=8, loc="best")
    return ax


def _subset(source: NamedTensors, names: list[str]) -> list[tuple[str, torch.Tensor]]:
    """The ``(name, tensor)`` pairs of ``source`` named in ``names``."""
    wanted = set(names)
    return [(n, t) for n, t in named_tensors(source) if n in wanted]


def _bars(ax: Axes, values: dict[str, float], stats: Mapping[str, tuple[float, float, float]]) -> None:
    """Norm bars on a log axis, with mean and max ``|grad|`` markers when ``stats`` has them."""
    xs = range(len(values))
    finite = [v if math.isfinite(v) and v > 0 else math.nan for v in values.values()]
    ax.bar(xs, finite, color="#4dabf7", label=tr("L2 norm"))
    if stats:
        rows = [stats.get(n, (math.nan,) * 3) for n in values]
        ax.scatter(xs, [r[1] for r in rows], marker="o", color="#1c7ed6", zorder=3,
                   label=tr("mean |grad|"))
        ax.scatter(xs, [r[2] for r in rows], marker="^", color="#e8590c", zorder=3,
                   label=tr("max |grad|"))
    ax.set_yscale("log")


def _with_owners(names: Iterable[str]) -> set[str]:
    """``names`` and the modules that own them (``fc.bias`` -> also ``fc``)."""
    return set(names) | {o for n in names if (o := owner(n))}


def _mark_problems(ax: Axes, values: dict[str, float], norms: Mapping[str, float]) -> None:
    """Write 'no grad', 'no value', 'inf/nan' or 'zero' over bars that cannot be drawn on a log axis."""
    missing = _with_owners(getattr(norms, "missing", ()))
    unreadable = _with_owners(getattr(norms, "notes", {}))
    for i, (name, v) in enumerate(values.items()):
        if name in missing:
            text = tr("no grad")
        elif name in unreadable:
            text = tr("no value")
        elif not math.isfinite(v):
            text = "inf/nan"  # (as Python prints them)
        elif v == 0:
            text = tr("zero")
        else:
            continue
        ax.annotate(text, (i, 0), xycoords=("data", "axes fraction"), xytext=(0, 4),
                    textcoords="offset points", ha="center", rotation=90, color="#e03131",
                    fontsize=8)


def _shown_series(history: GradHistory) -> tuple[dict[str, list[float]], str | None]:
    """At most ``MAX_SHOWN`` series of the history (by their largest norm), and a note if cut."""
    every = history.norms
    peaks = {n: max((v for v in s if math.isfinite(v)), default=math.nan) for n, s in every.items()}
    names = _pick(peaks)
    note = _shown_note(len(names), len(every), history.per) if len(names) < len(every) else None
    return {n: every[n] for n in names}, note


def plot_grad_history(history: GradHistory, *, kind: str = "lines", ax: Axes | None = None) -> Axes:
    """Gradient norms over recorded steps: one line per name, or a heatmap.

    With more than ``MAX_SHOWN`` (60) names, 60 are drawn (those with the largest
    and smallest peak norms, and any without a norm), as the y label says.

    Args:
        history: A :class:`GradHistory` with at least one recorded step.
        kind: ``"lines"`` (log y axis) or ``"heatmap"`` (log10 of the norm; steps
            across, names down; each cell centred on its step, steps that were not
            recorded, such as 3 to 49 of ``record(0), record(1), record(2), record(50)``,
            left blank).
        ax: Axes to draw on; a new figure when ``None``.

    Returns:
        The matplotlib ``Axes``.

    Raises:
        ValueError: unknown ``kind``, an empty history, or one with no parameters.
        TypeError: ``history`` is not a :class:`GradHistory`, or ``ax`` is not a matplotlib Axes.
    """
    if not all(hasattr(type(history), a) for a in ("record", "norms")):  # (history.py imports plots)
        raise TypeError(f"history must be a dg.GradHistory (record() it after each backward); "
                        f"got {type(history).__name__}")
    if kind not in ("lines", "heatmap"):
        raise ValueError(f"kind must be 'lines' or 'heatmap'; got {kind!r}")
    _check_ax(ax)
    if not history.steps:
        raise ValueError("the history is empty: call history.record() after backward() first")
    if not history.names:
        raise ValueError("the history has no parameters to plot: GradHistory(model) was given a "
                         "model (or mapping) without parameters; pass the model you train")
    norms, note = _shown_series(history)
    ax = (_lines if kind == "lines" else _heatmap)(history.steps, norms, ax)
    if note:
        ax.set_ylabel(f"{ax.get_ylabel()}\n{note}".strip(), fontsize=7)
    ax.set_xlabel(tr("step"))  # a training step
    from matplotlib.ticker import MaxNLocator
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # (no step 1.5)
    ax.set_title(_per_title(history.per, over_steps=True))
    return ax


def _lines(steps: list[int], norms: dict[str, list[float]], ax: Axes | None) -> Axes:
    ax = _axes(ax, (6.0, 3.2))
    for name, series in norms.items():
        ax.plot(steps, series, label=_shown(name))
    ax.set_yscale("log")
    ax.set_ylabel(tr("gradient norm (log)"))
    if len(norms) <= 12:
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return ax


def _heatmap(steps: list[int], norms: dict[str, list[float]], ax: Axes | None) -> Axes:
    ax = _axes(ax, (6.0, 0.25 * len(norms) + 1.5))  # at most MAX_SHOWN rows: 16.5 inches
    grid = [[math.log10(v) if v > 0 and math.isfinite(v) else math.nan for v in s]
            for s in norms.values()]
    gaps = [b - a for a, b in itertools.pairwise(steps)]
    if all(g == 1 for g in gaps) or not all(g > 0 for g in gaps):  # steps 0, 1, 2, ...: one cell each
        image: ScalarMappable = ax.imshow(grid, aspect="auto", cmap="viridis", interpolation="nearest",
                                          extent=(steps[0] - 0.5, steps[-1] + 0.5, len(grid) - 0.5, -0.5))
    else:  # steps 0, 10, 20 or 0, 1, 2, 50: each cell centred on its step, unrecorded steps left blank
        edges, columns = _cells(steps, min(gaps))
        rows = [[row[c] if c is not None else math.nan for c in columns] for row in grid]
        image = ax.pcolormesh(edges, [r - 0.5 for r in range(len(grid) + 1)],
                              np.ma.masked_invalid(np.array(rows, dtype=float)), cmap="viridis")
        ax.set_ylim(len(grid) - 0.5, -0.5)
    ax.set_yticks(range(len(norms)), [_shown(n) for n in norms], fontsize=7)
    ax.figure.colorbar(image, ax=ax, label=tr("log10 gradient norm"))
    return ax


def _cells(steps: list[int], width: int) -> tuple[list[float], list[int | None]]:
    """Cell edges along x for increasing ``steps``, each cell ``width`` wide and centred on its
    step, and which recorded column each cell shows (``None``: a blank gap between steps)."""
    edges: list[float] = [steps[0] - width / 2]
    columns: list[int | None] = []
    for i, step in enumerate(steps):
        if step - width / 2 > edges[-1]:  # steps not recorded: a blank cell
            edges.append(step - width / 2)
            columns.append(None)
        edges.append(step + width / 2)
        columns.append(i)
    return edges, columns


# Colours of the kinds of a step's memory (PyTorch's memory timeline uses the same hues).
# The phases' names as the plot writes them (step_memory.PHASES), marked for translation.
PHASE_NAMES = {"before the step": N_("before the step"), "forward": N_("forward"), "backward": N_("backward"),
               "optimizer step": N_("optimizer step"), "after backward": N_("after backward")}
# The kinds' names as the legend writes them (step_memory.KINDS), marked for translation.
KIND_NAMES = {"parameters": N_("parameters"), "gradients": N_("gradients"),
              "optimizer state": N_("optimizer state"), "inputs": N_("inputs"),
              "activations": N_("activations"), "temporaries": N_("temporaries"), "other": N_("other")}
WIDE_PHASE = 0.08  # a phase's name is written above its band when the band is this share of the axis
KIND_COLOURS = {"parameters": "#2f9e44", "gradients": "#1971c2", "optimizer state": "#f08c00",
                "inputs": "#495057", "activations": "#e03131", "temporaries": "#9775fa", "other": "#adb5bd"}


def plot_step_memory(memory: StepMemory, *, ax: Axes | None = None) -> Axes:
    """A step's memory (:func:`dynagraph.step_memory`) as stacked areas by kind.

    The x axis counts memory events (each allocation or free), so the picture is the
    same under any load; the phases (forward, backward, optimizer step) are shaded
    and named above, and the peak is marked with its bytes.

    Returns:
        The matplotlib ``Axes``.

    Raises:
        TypeError: ``memory`` is not a :class:`StepMemory`, or ``ax`` is not a matplotlib Axes.
    """
    from .memory import fmt_bytes
    if not all(hasattr(type(memory), a) for a in ("at", "peak_index")):  # (step_memory.py imports plots)
        raise TypeError(f"memory must be what dg.step_memory(step) returns; got {type(memory).__name__}")
    _check_ax(ax)
    ax = _axes(ax, (8.0, 3.6))
    xs = list(range(len(memory.phases)))
    shown = [k for k, v in memory.kinds.items() if any(v)]
    scale, unit = next(((s, u) for s, u in ((1e9, "GB"), (1e6, "MB"), (1e3, "KB")) if memory.peak >= s),
                       (1.0, "B"))
    ax.stackplot(xs, *[[b / scale for b in memory.kinds[k]] for k in shown],
                 labels=[translated(KIND_NAMES.get(k, k)) for k in shown],
                 colors=[KIND_COLOURS.get(k, "#adb5bd") for k in shown], step="post", alpha=0.85)
    start, shade = 0, False
    for k in range(1, len(xs) + 1):  # one band per run of events of the same phase, shaded in turn
        if k == len(xs) or memory.phases[k] != memory.phases[start]:
            shade = not shade
            if shade:
                ax.axvspan(start, k, color="#e9ecef", zorder=-1)
            if k - start >= len(xs) * WIDE_PHASE:  # (a narrow band's name would run into its neighbours')
                phase = memory.phases[start]
                ax.text((start + k) / 2, 1.01, translated(PHASE_NAMES.get(phase, phase)),
                        transform=ax.get_xaxis_transform(), ha="center", va="bottom", fontsize=8)
            start = k
    i = memory.peak_index
    ax.plot([i], [memory.peak / scale], "kv")
    ax.annotate(tr("peak {bytes}", bytes=fmt_bytes(memory.peak)), (i, memory.peak / scale),
                textcoords="offset points", xytext=(6, -4), ha="left", va="top", fontsize=8)
    ax.set_xlim(0, max(1, len(xs) - 1))
    ax.set_xlabel(tr("memory event (allocation or free) during the step"))
    ax.set_ylabel(tr("bytes alive ({unit})", unit=unit))
    ax.set_ylim(0, memory.peak / scale * 1.08)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return ax
