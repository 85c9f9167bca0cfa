"""The learner's kernel state around a check: what a check, or the answer it runs, may change
for a while and must put back (trace function, breakpoints, torch modes and flags, RNGs)."""

from __future__ import annotations

import bdb
import contextlib
import random
import sys
from collections.abc import Iterator
from types import FrameType
from typing import Any

import torch

__all__ = ["as_found", "debugger_as_found"]


@contextlib.contextmanager
def debugger_as_found() -> Iterator[None]:
    """Inside, a debugger may install its trace function and set breakpoints; after, the trace
    function, each frame's ``f_trace`` and pdb's breakpoints (shared by all debuggers) are
    as they were, so a breakpoint set by an answer never stops or slows later code."""
    trace = sys.gettrace()
    frames = _stack(sys._getframe(2))              # the caller's frame and those above it
    traces = [frame.f_trace for frame in frames]
    breaks = (bdb.Breakpoint.next, list(bdb.Breakpoint.bpbynumber),   # copies: bdb appends to these lists
              {where: list(bps) for where, bps in bdb.Breakpoint.bplist.items()})
    try:
        yield
    finally:
        sys.settrace(trace)
        for frame, frame_trace in zip(frames, traces):
            frame.f_trace = frame_trace
        bdb.Breakpoint.next, bdb.Breakpoint.bpbynumber, bdb.Breakpoint.bplist = breaks


def _stack(frame: FrameType | None) -> list[FrameType]:
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames


@contextlib.contextmanager
def _torch_flags() -> Iterator[None]:
    """Grad mode, the default dtype and the number of CPU threads are as they were after."""
    grad, dtype, threads = torch.is_grad_enabled(), torch.get_default_dtype(), torch.get_num_threads()
    try:
        yield
    finally:
        torch.set_grad_enabled(grad)
        torch.set_default_dtype(dtype)
        if torch.get_num_threads() != threads:     # setting it costs a little: only when changed
            torch.set_num_threads(threads)


@contextlib.contextmanager
def _modes() -> Iterator[None]:
    """A ``TorchFunctionMode`` or ``TorchDispatchMode`` entered and never left is popped after."""
    functions, dispatches = torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack()
    try:
        yield
    finally:
        while torch._C._len_torch_function_stack() > functions:
            torch._C._pop_torch_function_stack()
        while torch._C._len_torch_dispatch_stack() > dispatches:
            torch._C._pop_torch_dispatch_stack()


@contextlib.contextmanager
def _random_states() -> Iterator[None]:
    """torch's RNGs (the CPU and the CUDA devices in use), Python's ``random`` and, once
    imported, NumPy's global RNG are as they were after: checks draw and seed their own inputs."""
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    python = random.getstate()
    numpy: Any = sys.modules.get("numpy")
    numpy_state = numpy.random.get_state() if numpy is not None else None
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        random.setstate(python)
        if numpy is not None:
            numpy.random.set_state(numpy_state)


@contextlib.contextmanager
def as_found() -> Iterator[None]:
    """Run a check inside: after it, the kernel state listed in this module's docstring is as
    the learner had it. (A check must also keep ``torch.compile``'s caches: see nb08.)"""
    with contextlib.ExitStack() as stack:
        for keep in (debugger_as_found, _torch_flags, _modes, _random_states):
            stack.enter_context(keep())
        yield
