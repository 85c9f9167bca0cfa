"""Deep graphs freed node by node: dynagraph holds the node wrappers of a graph too deep
for torch's recursive free, and frees them in order once its roots die."""

from __future__ import annotations

import gc
import sys
import weakref
from collections.abc import Sequence
from typing import Any

import torch

from .. import _signals
from .._records import chains, producers_of, upstream
from .nodes import GradFn

__all__ = ["SAFE_DEPTH", "hold_deep_graph", "keep_wrappers", "release_pending"]

SAFE_DEPTH = 1_000  # deeper graphs are freed by dynagraph, node by node (hold_deep_graph)
_holds: dict[int, tuple[weakref.ref, list[GradFn]]] = {}  # id(ref) -> (ref to a live root, what it holds)
_dead: list[weakref.ref] = []  # refs whose root died: appended by the ref's callback, in C (no bytecode runs)
_pending: list[list[GradFn]] = []  # held wrappers of deep graphs whose roots died, to free
_owned: list[list[GradFn]] = []  # held wrappers something else owned at the last try


class _InOrder(list):
    """Held wrappers already in release order (producers first: popped, consumers go first)."""


def hold_deep_graph(roots: list[tuple[torch.Tensor, int]], fns: Sequence[GradFn | None],
                    edges: list[tuple[int, int]]) -> bool:
    """Keep a deep graph's node wrappers while its roots live, then free them node by node.

    In torch 2.13 an autograd node keeps its Python wrapper for life, and freeing a
    chain of wrapped nodes recurses once per node in C++: some 40,000 of them overflow
    an 8 MB stack and kill the process. So dynagraph holds the wrappers itself; when
    a root dies its wrappers wait in a queue (the dying tensor still owns its node)
    that the next garbage collection or capture empties (:func:`release_pending`).
    Graphs whose longest chain is under :data:`SAFE_DEPTH` are left alone.

    A root's death is noted by its weak reference's callback, ``list.append`` (C: no
    Python code runs inside the dying tensor's dealloc, where an interrupt would drop
    the hand-over). A Ctrl-C that lands while a graph is held or freed is delivered
    after it (:mod:`dynagraph._signals`), never lost in a garbage-collector callback.

    Args:
        roots: ``(tensor, record id of its node)`` for each root. A root must not be a
            tensor that the graph itself saved (an input of one of its ops): its death
            would wait for the graph's.
        fns: The autograd node of each record (``None`` for outputs).
        edges: ``(producer, consumer)`` record ids.

    Returns:
        Whether the graph was deep enough to be held.
    """
    held = _signals.protected(_hold, roots, fns, edges)
    if not (_holds or _dead or _pending or _owned):
        _signals.release()  # nothing left to protect: the SIGINT handler found is put back
    return held


def _hold(roots: list[tuple[torch.Tensor, int]], fns: Sequence[GradFn | None],
          edges: list[tuple[int, int]]) -> bool:
    release_pending()
    if len(fns) < SAFE_DEPTH:  # fewer nodes: no deep chain
        return False
    depth, order = chains(len(fns), edges)
    if max(depth, default=0) < SAFE_DEPTH:
        return False
    producers = producers_of(edges).get
    for tensor, start in roots:
        if depth[start] < SAFE_DEPTH:  # its own chains are short (a leaf root, say): torch frees it safely
            continue
        reach = upstream([start], producers)  # the records `start` depends on
        # in release order, so that freeing them needs no walk; outputs (None) are never reached
        held = _InOrder(fn for i in order if i in reach and (fn := fns[i]) is not None)
        _signals.defer_in(_after_collection)  # from now on a Ctrl-C waits for a release to end
        ref = weakref.ref(tensor, _dead.append)  # kept alive by _holds: else no callback
        _holds[id(ref)] = (ref, held)
        _watch_collections()
    return True


def release_pending(retry: bool = True) -> None:
    """Free the held graphs whose roots have died, one node at a time, consumers first.

    Nodes that something else still owns (a tensor the user kept, another root drawn
    while it lives) stay held; ``retry`` tries those again too. A Ctrl-C meanwhile is
    delivered after it (:func:`_signals.protected`).
    """
    _signals.protected(_release, retry)


def _release(retry: bool) -> None:
    global _releasing
    if _releasing or not (_dead or _pending or (retry and _owned)):
        return
    _signals.defer_in()  # (again: Jupyter's kernel puts its own SIGINT handler back after each cell)
    _releasing = True
    try:
        _bury()
        kept: list[GradFn] = []
        if _pending and all(isinstance(held, _InOrder) for held in _pending):
            stack = _merged_order(_pending)  # roots died: their orders are known
            _pending.clear()
            kept = _free_unowned(stack)
        # what was owned last time (a parameter's AccumulateGrad, nodes of a tensor the
        # user kept): after the new graph's nodes, which may consume them
        stack = _release_order(_take(retry))
        kept += _free_unowned(stack)
        if kept:
            _owned.append(kept)
    finally:
        _releasing = False


def _bury() -> None:
    """Move what the dead roots held from :data:`_holds` to :data:`_pending` (each step
    safe to repeat: a list queued twice is freed once)."""
    while _dead:
        key = id(_dead[-1])
        if key in _holds:
            _pending.append(_holds[key][1])
            del _holds[key]
        _dead.pop()


def keep_wrappers(fns: list[GradFn | None]) -> None:  # (None: an output's record)
    """Hold the node wrappers of a walk that an interrupt cut short before it could hand
    a deep graph to :func:`hold_deep_graph`: they are freed in order, like the held
    nodes something else owned, once nothing else owns them (dropped at once, they were
    freed by torch's recursion when their root died)."""
    if len(fns) >= SAFE_DEPTH:
        _owned.append(fns)  # type: ignore[arg-type]  # the list itself, in one step (_take skips None)
        _watch_collections()


def _merged_order(orders: list[list[GradFn]]) -> list[GradFn]:
    """One release order for the nodes of several roots (each list in release order).

    Each list holds everything its root reaches, so a node that a later list adds is
    reached by no earlier root: it feeds no node already listed, and may only consume
    them. Appended after them, in its list's order, it is popped (freed) before them.
    """
    if len(orders) == 1:
        return orders[0]
    merged: list[GradFn] = []
    seen: set[int] = set()
    for order in orders:
        for fn in order:
            if id(fn) not in seen:
                seen.add(id(fn))
                merged.append(fn)
    return merged


def _take(retry: bool) -> dict[int, GradFn]:
    """Empty the queues into one dict ``id -> wrapper`` (each wrapper once)."""
    held: dict[int, GradFn] = {}
    for batch in _pending + (_owned if retry else []):
        held.update((id(fn), fn) for fn in batch if fn is not None)
    _pending.clear()
    if retry:
        _owned.clear()
    return held


def _release_order(held: dict[int, GradFn]) -> list[GradFn]:
    """The wrappers as a stack: each is popped after every held node that consumes it."""
    producers = {key: [id(c) for c, _ in fn.next_functions if c is not None and id(c) in held]
                 for key, fn in held.items()}
    waiting = dict.fromkeys(held, 0)  # held consumers not yet popped
    for ids in producers.values():
        for key in ids:
            waiting[key] += 1
    ready = [key for key, n in waiting.items() if n == 0]
    order = []
    while ready:
        key = ready.pop()
        order.append(held.pop(key))
        for p in producers[key]:
            waiting[p] -= 1
            if waiting[p] == 0:
                ready.append(p)
    order.reverse()
    return order


def _free_unowned(stack: list[GradFn]) -> list[GradFn]:
    """Drop each wrapper only dynagraph holds (freeing one node); return the others."""
    kept = []
    while stack:
        fn = stack.pop()
        if sys.getrefcount(fn) > 2:  # more than this name and the call's argument: owned
            kept.append(fn)
        del fn  # its producers are still on the stack, so the free stops at this node
    return kept


_releasing = False  # a collection during a release must not start another


def _after_collection(phase: str, info: dict[str, Any]) -> None:
    """A ``gc.callbacks`` hook: free held graphs after each collection (all of them,
    owned ones too, after a full one). Its own frame is protected too (an interrupt at
    its first bytecode would be lost in the collector)."""
    if phase == "stop" and (_dead or _pending or _owned):
        release_pending(retry=info["generation"] == 2)


def _watch_collections() -> None:
    """Install :func:`_after_collection` once, when the first deep graph is held (not
    at import: a process that never draws a deep graph gets no hook)."""
    if _after_collection not in gc.callbacks:
        gc.callbacks.append(_after_collection)
