"""The one walk of the autograd graph: each node reachable from some nodes, once."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from . import _torch

__all__ = ["reach"]


def reach(starts: Iterable[_torch.GradFn], enter: Callable[[_torch.GradFn], Any], *,
          breadth_first: bool = False) -> None:
    """The one walk of the autograd graph: each node reachable from ``starts`` once.

    ``enter(fn)`` is called once per node, in walk order, and returns whether to go
    on into the node's inputs (``fn.next_functions``); ``False`` stops there (a node
    already recorded, one made before a block, a leaf). An ``enter`` that read
    ``fn.next_functions`` itself may return it instead of ``True`` (torch builds that
    tuple anew at each read). Iterative (no recursion
    limit); depth-first, or breadth-first (then nodes are entered in the order
    they were first met). :func:`dynagraph.capture.walk`, the live recording's tagging and
    module tagging (:func:`dynagraph._tags.tag_new_nodes`) all walk with it.

    Example:
        >>> seen = []
        >>> reach([loss.grad_fn], lambda fn: seen.append(fn.name()) is None)
    """
    frontier: deque[_torch.GradFn] = deque(starts)
    seen: set[_torch.GradFn] = set()
    take = frontier.popleft if breadth_first else frontier.pop
    add, push = seen.add, frontier.append
    while frontier:
        fn = take()
        if fn in seen:
            continue
        add(fn)
        go = enter(fn)
        if go:
            for child, _ in fn.next_functions if go is True else go:  # (a loop: no generator per node)
                if child is not None:
                    push(child)
