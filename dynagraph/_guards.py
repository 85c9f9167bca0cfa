"""Guards that hold whatever instant an interrupt (KeyboardInterrupt) lands: a context
entered and exited in single C calls, the garbage collector paused, hooks removed (no torch import).

A ``with`` statement can be interrupted on its last line, just before it exits, and so
can the first line of a ``finally``: each guard here exits in a ``finally`` and once
more in an outer one, and each step of its undo is safe to repeat
(``tests/test_interrupts.py`` injects an interrupt at every line and bytecode).
"""

from __future__ import annotations

import gc
import operator
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

__all__ = ["Removable", "guarded", "paused_gc", "remove_hooks"]

T = TypeVar("T")


class Removable(Protocol):
    """A hook's handle (``torch.utils.hooks.RemovableHandle``): removing it twice is harmless."""

    def remove(self) -> None: ...


H = TypeVar("H", bound=Removable)

_Entered = list[tuple[AbstractContextManager[Any], Any]]  # (context, its enter's result), while entered


def guarded(context: AbstractContextManager[Any], f: Callable[..., T], *args: Any) -> T:
    """``f(*args)`` inside ``context`` (a lock, or one of torch's mode guards: they ignore
    the error), exited whatever instant an interrupt lands.

    A ``with`` statement can be interrupted on its last line, just before it exits
    (leaving a lock held, or torch function off in this thread), and so can the first
    line of a ``finally``, or a ``try`` nested in another. So the exit runs in the
    ``finally`` of :func:`_then` and once more in this one, and ``context`` is entered
    and noted in one C call (:func:`_enter`), taken out and exited in another
    (:func:`_exit`): CPython delivers a signal between two bytecodes, even between
    ``__enter__`` returning and the append that notes it, never inside one C call.
    ``context`` must be one whose ``__enter__`` and ``__exit__`` are C (a lock, torch's
    ``DisableTorchFunction``); for grad mode see :func:`dynagraph._patch.grad_on`.
    """
    entered: _Entered = []
    try:
        _enter(context, entered)
        return _then(f, args, entered)
    finally:
        _exit(entered)


_ENTER = operator.methodcaller("__enter__")
_EXIT = operator.methodcaller("__exit__", None, None, None)
_CONTEXT = operator.itemgetter(0)
_POP = operator.methodcaller("pop")


def _enter(context: AbstractContextManager[Any], entered: _Entered) -> None:
    """Enter ``context`` and note it in ``entered``, in one C call: ``extend`` runs
    ``zip`` and ``map`` in C, so no bytecode (where an interrupt lands) falls between
    ``__enter__`` returning and the note. An enter that raises (a lock's wait cut short
    by Ctrl-C) notes nothing."""
    entered.extend(zip((context,), map(_ENTER, (context,))))


def _exit(entered: _Entered) -> None:
    """Take the last noted context out of ``entered`` and exit it, in one C call (``any``
    runs the maps: ``pop``, then ``__exit__``): an interrupt finds the context
    either noted and entered, or out of the list and exited (safe to repeat). ``guarded``
    notes one context per list."""
    if entered:
        any(map(_EXIT, map(_CONTEXT, map(_POP, (entered,)))))


def paused_gc(f: Callable[..., T], *args: Any) -> T:
    """``f(*args)`` with Python's cyclic garbage collector paused, even if an interrupt lands.

    dynagraph's walks and pictures make one record per autograd node, and records
    live as long as the picture. Each 700 new objects start a collection, and every
    tenth of tenth is a full one, over every object of the process (torch, IPython:
    hundreds of thousands), which took 40-50 ms each and came every third ``draw`` of
    a 7,500-node graph. Paused, the records cost one collection afterwards.
    Nothing is left paused: the collector is on again on the way out when it was on
    when ``f`` started (a paused collector stays paused).
    """
    was = gc.isenabled()
    try:
        try:
            gc.disable()
            return f(*args)
        finally:
            if was:
                gc.enable()
    finally:  # again: an interrupt can land on the first line of a finally (see guarded)
        if was:
            gc.enable()  # (enabling twice is harmless)


def _then(f: Callable[..., T], args: tuple[Any, ...], entered: _Entered) -> T:
    try:
        return f(*args)
    finally:
        _exit(entered)


def remove_hooks(handles: list[H]) -> None:
    """Remove the hooks of ``handles``, emptying the list; a run an interrupt cut short is
    finished by the next (a handle leaves the list only once its hook is removed)."""
    while handles:
        handles[-1].remove()
        handles.pop()
