"""The memory of one training step over time: bytes alive by kind, read from PyTorch's memory profiler.

``dg.step_memory(step)`` runs ``step()`` (forward, backward, optimizer step: whatever the
user's function does) once under ``torch.profiler`` with ``profile_memory=True`` and
reads PyTorch's own memory profiler (what ``prof.export_memory_timeline`` draws). That
profiler sees every allocation and free made through PyTorch's allocator on the device,
and sorts each tensor into a category from the data flow it recorded: parameters,
their gradients, optimizer state, inputs, activations (made in the forward and read in
the backward), temporaries, and what it could not place. Python's garbage collector
is run before the step and paused during it, so that no earlier garbage is freed in
the middle of the step (a reference cycle freed there showed as ``other`` bytes
freed). dynagraph counts the bytes of
each kind after every allocation or free, so the x axis counts memory events, not
seconds: the same program gives the same timeline under any load.

What it sees and what it does not:

- on the CPU, every tensor's storage that PyTorch's CPU allocator gives out. Not seen:
  memory a library allocates itself (oneDNN's scratch space, BLAS buffers), Python
  objects, tensors made before the step and not touched in it, and tensors made before
  the step that it only frees (the gradients ``zero_grad(set_to_none=True)`` drops: the
  profiler sees such a free only when an earlier profile saw the tensor made, so they
  are always left out, and the same step gives the same timeline). Gradients left from
  an earlier step that this step accumulates into (no ``zero_grad`` in the step) are
  seen or not depending on what the profiler saw before in the process: measured
  here, a gradient hook's step counted 547 KB of old gradients in a fresh process and
  none after an earlier ``step_memory``. Free them first (``zero_grad()``, whose
  default is ``set_to_none=True``) for a timeline that does not depend on history;
- on CUDA, the same events for the GPU, and :attr:`StepMemory.allocator_peak`, the most
  bytes of tensors allocated at once during the step (``torch.cuda.max_memory_allocated``);
  the caching allocator reserves more than that (its cache, ``max_memory_reserved``),
  which neither counts;
- a kind is PyTorch's inference from the data flow: Adam's ``foreach`` temporaries and
  the gradient of the loss show as ``other``; a tensor made in the forward and freed
  before the backward can show as an activation while it lives.

Example:
    >>> model = torch.nn.Linear(4, 2)
    >>> opt = torch.optim.SGD(model.parameters(), lr=0.1)
    >>> def step():
    ...     opt.zero_grad()
    ...     model(torch.ones(3, 4)).sum().backward()
    ...     opt.step()
    >>> mem = dg.step_memory(step)
    >>> mem.at_end["parameters"], mem.at_end["gradients"]
    (40, 40)
"""

from __future__ import annotations

import bisect
import gc
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from . import _guards, _torch
from ._args import whole_number
from ._language import tr, translated
from .memory import fmt_bytes

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["KINDS", "PHASES", "StepMemory", "step_memory"]

# The kinds of bytes, in the order the plot stacks them; PyTorch's category of each.
KINDS = ("parameters", "gradients", "optimizer state", "inputs", "activations", "temporaries", "other")
_KIND_OF = {"PARAMETER": "parameters", "GRADIENT": "gradients", "OPTIMIZER_STATE": "optimizer state",
            "INPUT": "inputs", "ACTIVATION": "activations", "TEMPORARY": "temporaries"}
PHASES = ("before the step", "forward", "backward", "zero_grad", "optimizer step", "after backward")
_BACKWARD = "autograd::engine::evaluate_function"  # the profiler's name of each backward node's run
# What the profiler's C++ side writes to file descriptor 2 on each run (a Jupyter kernel
# shows it under the cell, time-stamped): its start and stop, and a warning about
# tensors made before it started (which dynagraph leaves out: see memory_events).
_CHATTER = re.compile(r"^USDT:.*ActivityProfiler|^\[W.*CPUAllocator\.cpp:\d+\] Memory block of unknown size")
_OPTIMIZER = {"Optimizer.step#": "optimizer step", "Optimizer.zero_grad#": "zero_grad"}


@dataclass(frozen=True)
class StepMemory:
    """The bytes alive by kind after each memory event of one step, and its peak.

    Attributes:
        device: ``"cpu"`` or ``"cuda"``.
        kinds: ``{kind: [bytes after event 0, 1, ...]}`` for every kind of :data:`KINDS`;
            event 0 holds what existed before the step (parameters, old gradients, state).
        phases: The phase of each event (one of :data:`PHASES`).
        ops: The outermost ``aten`` op running at each event (``""`` outside any op).
        allocator_peak: On CUDA, the most bytes of tensors allocated at once during the
            step (``torch.cuda.max_memory_allocated``, not the cache the allocator
            reserves); ``None`` on the CPU.
    """

    device: str
    kinds: dict[str, list[int]]
    phases: list[str]
    ops: list[str]
    allocator_peak: int | None = None

    @property
    def totals(self) -> list[int]:
        """Bytes alive (all kinds) after each event."""
        return [sum(col) for col in zip(*self.kinds.values(), strict=True)]

    @property
    def peak(self) -> int:
        """The most bytes alive at once."""
        return max(self.totals)

    @property
    def peak_index(self) -> int:
        """The event after which :attr:`peak` bytes were alive (the first, if several)."""
        totals = self.totals
        return totals.index(max(totals))

    @property
    def peak_phase(self) -> str:
        """The phase the peak fell in (``forward``, ``backward``, ``optimizer step`` ...)."""
        return self.phases[self.peak_index]

    @property
    def peak_op(self) -> str:
        """The ``aten`` op that allocated the peak's last bytes."""
        return self.ops[self.peak_index]

    def at(self, index: int) -> dict[str, int]:
        """``{kind: bytes}`` alive after event ``index`` (``-1`` is the last event).

        Raises:
            TypeError: ``index`` is not an int.
            IndexError: there is no event ``index``.
        """
        n = len(self.phases)
        index = whole_number(index, "index must be an event number, an int such as 0 or -1 (the last event)")
        if not -n <= index < n:
            raise IndexError(f"index={index} names no event: this step has {n} memory events "
                             f"(0 to {n - 1}, or -1 for the last)")
        return {kind: values[index] for kind, values in self.kinds.items()}

    @property
    def at_peak(self) -> dict[str, int]:
        """``{kind: bytes}`` alive at the peak."""
        return self.at(self.peak_index)

    @property
    def at_end(self) -> dict[str, int]:
        """``{kind: bytes}`` alive after the step's last memory event."""
        return self.at(len(self.phases) - 1)

    def most(self, kind: str) -> int:
        """The most bytes of ``kind`` alive at once (at any event, not only the peak)."""
        if kind not in self.kinds:
            raise ValueError(f"unknown kind: {kind!r} (must be one of {list(KINDS)})")
        return max(self.kinds[kind])

    def plot(self, ax: Axes | None = None) -> Axes:
        """The timeline as stacked areas by kind (see :func:`dynagraph.plots.plot_step_memory`)."""
        from .plots import plot_step_memory
        return plot_step_memory(self, ax=ax)

    def __repr__(self) -> str:
        from .plots import KIND_NAMES, PHASE_NAMES  # the words of the plot's legend and phases
        parts = tr(", ").join(f"{translated(KIND_NAMES.get(k, k))} {fmt_bytes(v)}"
                              for k, v in self.at_peak.items() if v)
        op = tr(", in {op}", op=self.peak_op) if self.peak_op else ""
        cuda = ("" if self.allocator_peak is None
                else tr("; allocator peak {bytes}", bytes=fmt_bytes(self.allocator_peak)))
        phase = translated(PHASE_NAMES.get(self.peak_phase, self.peak_phase))
        return tr("<dynagraph.StepMemory ({device}): peak {bytes} in the {phase}{op}, "
                  "event {k} of {n}: {kinds}{cuda}>", device=self.device, bytes=fmt_bytes(self.peak),
                  phase=phase, op=op, k=self.peak_index, n=len(self.phases) - 1, kinds=parts, cuda=cuda)


def step_memory(step: Callable[[], Any], *, device: str | torch.device | None = None) -> StepMemory:
    """Run ``step()`` once and return the bytes alive by kind after each memory event.

    Args:
        step: A function of no arguments that runs one training step (for example
            ``zero_grad``, forward, ``backward()``, ``optimizer.step()``). It runs once,
            for real: parameters and optimizer state change as they would.
        device: Whose memory to read: ``"cpu"`` or ``"cuda"`` (or a ``torch.device`` of
            either, such as :func:`dynagraph.device`); by default ``"cuda"`` where a GPU
            is available, else ``"cpu"``.

    Returns:
        A :class:`StepMemory`: ``kinds`` (bytes of each kind after each event), the
        ``peak``, its ``peak_phase`` and ``peak_op``, ``at_peak`` and ``at_end``; ``.plot()``.

    Raises:
        TypeError: ``step`` is not callable.
        ValueError: ``device`` is not ``"cpu"`` or ``"cuda"``, is ``"cuda"`` without a GPU,
            or names a GPU other than the current one.
        RuntimeError: another profiler is running, or this torch has no memory profiler.
        Whatever ``step`` raises, with a note: the profiler is stopped first and nothing is kept.
    """
    if not callable(step):
        raise TypeError(f"step must be a function of no arguments that runs one training step; "
                        f"got {type(step).__name__}")
    device = _checked_device(device)
    if _torch.profiler_running():
        raise RuntimeError("another torch profiler is running: dg.step_memory starts its own; "
                           "call it outside the other profiler's block")
    gc.collect()  # earlier garbage freed now, not in the middle of the step (it would show as frees)
    with _chatter_dropped():
        prof = _guards.paused_gc(_profile, step, device)
    peak = torch.cuda.max_memory_allocated() if device == "cuda" else None
    found = _torch.memory_events(prof, device)
    if found is None:
        raise RuntimeError(f"torch {torch.__version__} has no memory profiler that dg.step_memory can read")
    start, events = found
    spans = _spans(prof, start)
    kinds, phases, ops = _timeline(events, spans)
    return StepMemory(device, kinds, phases, ops, peak)


@contextmanager
def _chatter_dropped() -> Iterator[None]:
    """File descriptor 2 into a temporary file for the block; on the way out (also when
    the block raises) it is put back, and the lines that are not the profiler's own
    chatter (:data:`_CHATTER`) are written to ``sys.stderr``."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        try:
            os.dup2(caught.fileno(), 2)
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            lines = caught.read().decode(errors="replace").splitlines(keepends=True)
            kept = "".join(line for line in lines if not _CHATTER.search(line))
            if kept:
                sys.stderr.write(kept)


def _checked_device(device: str | torch.device | None) -> str:
    """``"cpu"`` or ``"cuda"`` for ``device``: either name, or a torch.device of either
    (what :func:`dynagraph.device` returns, ``"cuda:0"``)."""
    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        parsed = torch.device(device) if isinstance(device, (str, torch.device)) else None
    except RuntimeError:  # not a device torch knows ("tpu")
        parsed = None
    if parsed is None or parsed.type not in ("cpu", "cuda"):
        raise ValueError(f"unknown device: {device!r} (must be 'cpu' or 'cuda', or a torch.device of either, "
                         "such as dg.device())")
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} but torch sees no GPU here: use device='cpu'")
    if parsed.type == "cuda" and parsed.index not in (None, torch.cuda.current_device()):
        raise ValueError(f"device={device!r} is not the current GPU (cuda:{torch.cuda.current_device()}), "
                         "whose memory the measure reads: call torch.cuda.set_device first, or pass 'cuda'")
    return parsed.type


def _profile(step: Callable[[], Any], device: str) -> Any:
    """The finished profile of one run of ``step`` (stopped even when ``step`` raises)."""
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    with profile(activities=activities, profile_memory=True, record_shapes=True, with_stack=True) as prof:
        try:
            step()
        except Exception as e:
            note = getattr(e, "add_note", None)  # (Python 3.11 and newer)
            if note is not None:
                note("dg.step_memory: the step raised; the profiler was stopped and nothing was measured")
            raise
        if device == "cuda":
            torch.cuda.synchronize()
    return prof


@dataclass(frozen=True)
class _Spans:
    """Where each phase ran, in ns on the memory profiler's clock."""

    phases: list[tuple[int, int, str]]  # optimizer step / zero_grad / one backward node's run
    backward: tuple[int, int] | None  # from the first backward node's start to the last's end
    ops: list[tuple[int, int, str]]  # outermost aten ops, by start


def _spans(prof: Any, start: int) -> _Spans:
    phases: list[tuple[int, int, str]] = []
    ops: list[tuple[int, int, str]] = []
    for e in prof.events():
        a, b = start + round(e.time_range.start * 1000), start + round(e.time_range.end * 1000)
        name = e.name
        if name.startswith(_BACKWARD):
            phases.append((a, b, "backward"))
        for prefix, phase in _OPTIMIZER.items():
            if name.startswith(prefix):
                phases.append((a, b, phase))
        parent = e.cpu_parent
        if name.startswith("aten::") and (parent is None or not parent.name.startswith("aten::")):
            ops.append((a, b, name))
    runs = [(a, b) for a, b, phase in phases if phase == "backward"]
    backward = (min(a for a, _ in runs), max(b for _, b in runs)) if runs else None
    ops.sort()
    return _Spans(phases, backward, ops)


def _phase(t: int, spans: _Spans) -> str:
    """The phase of an event at ``t`` ns: an optimizer call wins over a backward it runs in
    (an optimizer step in a gradient hook)."""
    if t < 0:
        return "before the step"
    inside = {phase for a, b, phase in spans.phases if a <= t <= b}
    for phase in ("optimizer step", "zero_grad", "backward"):
        if phase in inside:
            return phase
    if spans.backward is None or t < spans.backward[0]:
        return "forward"
    return "backward" if t <= spans.backward[1] else "after backward"


def _op(t: int, spans: _Spans, starts: list[int]) -> str:
    """The outermost aten op running at ``t`` (the latest one started by then that has not ended)."""
    k = bisect.bisect_right(starts, t) - 1
    while k >= 0:
        a, b, name = spans.ops[k]
        if b >= t:
            return name
        k -= 1
        if t - a > 10**9:  # (ops end in order: one a second back cannot hold t)
            break
    return ""


def _timeline(events: list[tuple[int, list[tuple[int, str | None]]]], spans: _Spans
              ) -> tuple[dict[str, list[int]], list[str], list[str]]:
    """Bytes of each kind after each event (what existed before the step: event 0), and
    each event's phase and op."""
    alive = dict.fromkeys(KINDS, 0)
    kinds: dict[str, list[int]] = {k: [] for k in KINDS}
    phases: list[str] = []
    ops: list[str] = []
    starts = [a for a, _, _ in spans.ops]
    before = [e for e in events if e[0] < 0] or [(-1, [])]  # (nothing before: a point at 0 bytes)
    during = [e for e in events if e[0] >= 0]
    for k, (t, changes) in enumerate([*before, *during]):
        for delta, category in changes:
            alive[_KIND_OF.get(category or "", "other")] += delta
        if t < 0 and k + 1 < len(before):
            continue  # (what existed before the step is one point)
        for kind in KINDS:
            kinds[kind].append(alive[kind])
        phases.append(_phase(t, spans))
        ops.append(_op(t, spans, starts) if t >= 0 else "")
    return kinds, phases, ops
