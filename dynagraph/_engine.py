"""One watcher of autograd's engine entry, shared by every block that needs to see each
backward run (:func:`dynagraph.track_passes`, :func:`dynagraph.trace_backward`).

``backward()`` and ``autograd.grad`` both run the engine through
``torch.autograd._engine_run_backward``. It is process-wide, so it is wrapped once while
any block is open, in any thread (blocks may overlap and end in any order), and put back
when the last one ends. Each open block names a :class:`Watcher`; each run calls each
watcher once, however many of its blocks are open, before the engine runs and after.
A watcher that raises never breaks the user's backward.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from . import _torch
from ._guards import guarded

__all__ = ["Watcher", "close", "open_"]


class Watcher(Protocol):
    """What a block does around each run of the engine (``args``, ``kwargs``: the rest of
    the call, as ``(grads, retain_graph, create_graph, inputs, allow_unreachable,
    accumulate_grad)``)."""

    def before(self, outputs: Sequence[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any: ...

    def after(self, state: Any, result: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None: ...


_lock = threading.Lock()  # one change of what follows at a time
_open: dict[object, Watcher] = {}  # the open blocks, by a token of each
_watching: list[tuple[Callable[..., Any], Callable[..., Any]]] = []  # (the entry before, ours) while in place


def open_(token: object, watcher: Watcher) -> None:
    """Block ``token`` is open: ``watcher`` sees each run from now on."""
    guarded(_lock, _opened, token, watcher)


def close(token: object) -> None:
    """Block ``token`` has ended (safe to repeat: a second call finishes a first that an
    interrupt cut short)."""
    guarded(_lock, _closed, token)


def _opened(token: object, watcher: Watcher) -> None:
    _open[token] = watcher  # noted before anything changes, so _closed undoes it all
    _sync()


def _closed(token: object) -> None:
    _open.pop(token, None)
    _sync()


def _sync() -> None:
    """The engine's entry watched while a block is open, the one before ours once none is.
    Where another patch was put over ours (it will put ours back), ours stays: it tells
    no block anything while none is open."""
    in_place = bool(_watching) and _torch.engine_entry() is _watching[-1][1]
    if _open and not in_place:
        run = _torch.engine_entry()
        if run is not None:
            _watching.append((run, _watched(run)))
            _torch.set_engine_entry(_watching[-1][1])
    elif not _open and in_place:
        _torch.set_engine_entry(_watching[-1][0])
        _watching.pop()


def _watched(run: Callable[..., Any]) -> Callable[..., Any]:
    """``run`` (the engine's entry) with each open block's watcher called around it."""
    def engine_run_backward(t_outputs: Sequence[Any], *args: Any, **kwargs: Any) -> Any:
        watchers = list(dict.fromkeys(_open.values()))  # (each once: two track_passes blocks, one marking)
        if not watchers:  # left in place under another patch after the last block
            return run(t_outputs, *args, **kwargs)
        states = []
        for watcher in watchers:
            try:  # bookkeeping never breaks the user's backward
                states.append(watcher.before(t_outputs, args, kwargs))
            except Exception:  # noqa: BLE001
                states.append(None)
        result = run(t_outputs, *args, **kwargs)
        for watcher, state in zip(watchers, states):
            try:
                watcher.after(state, result, args, kwargs)
            except Exception:  # noqa: BLE001
                pass
        return result
    engine_run_backward.__wrapped__ = run  # type: ignore[attr-defined]
    return engine_run_backward
