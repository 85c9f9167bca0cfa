"""track_passes(): mark each autograd node with the pass that made it (forward, first backward ...).

``autograd.grad(..., create_graph=True)`` runs the backward formulas with grad mode on,
so they record new autograd nodes: a graph of the backward pass, joined to the forward
graph. Inside :func:`track_passes` every run of autograd's engine (``backward()``,
``autograd.grad``) is watched at its two ends (``torch.func``'s transforms run the
engine too, on tensors they wrap: what they make gets no mark):

- before it runs, every node reachable from its roots (and from the gradients it is
  given) that no earlier pass made is marked as made by the forward pass (0); the pass
  gets the order one above the highest order it runs through, behind forward ops too
  (a gradient of the forward graph: 1; a gradient of that gradient, or of ``g * w``
  where ``g`` is one: 2);
- after a run with ``create_graph=True``, every unmarked node reachable from what it
  produced (the gradients it returns, or the leaves' ``.grad``) was made by it: it
  gets the pass's order.

The marks live in each node's ``metadata`` (:data:`KEY`); :func:`dynagraph.draw` and
the other views read them into ``Node.derivative``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import torch

from . import _engine, _torch
from ._walk import reach

__all__ = ["KEY", "active", "derivative_of", "track_passes"]

KEY = "dynagraph.pass"
_used = False  # capture reads node.metadata for the mark only once tracking has been used


def active() -> bool:
    """Whether :func:`track_passes` has been used (so capture should read the marks)."""
    return _used


def derivative_of(fn: _torch.GradFn) -> int | None:
    """The pass that made autograd node ``fn``: 0 the forward pass, ``k`` the backward pass
    of order ``k``; ``None`` where no tracked pass saw it."""
    return _torch.metadata(fn).get(KEY)


def _mark_old(starts: Iterable[_torch.GradFn]) -> tuple[int, list[torch.Tensor]]:
    """Mark the unmarked nodes behind ``starts`` as forward (0); return the highest order
    met and the leaves met (whose ``.grad`` a ``backward()`` fills).

    The walk goes on through marked nodes: a forward op on a gradient (``g * w``) is
    marked 0, and the nodes of order 1 behind it still count for the pass's order, and
    the leaves behind them for its ``.grad``."""
    top = 0
    leaves: list[torch.Tensor] = []

    def enter(fn: _torch.GradFn) -> bool:
        nonlocal top
        if fn.name().endswith("AccumulateGrad"):
            leaves.append(fn.variable)  # type: ignore[attr-defined]
            return False
        meta = _torch.metadata(fn)
        if KEY in meta:
            top = max(top, meta[KEY])
        else:
            meta[KEY] = 0
        return True

    reach(starts, enter)
    return top, leaves


def _mark_new(made: Iterable[torch.Tensor], order: int) -> None:
    """Mark the unmarked nodes behind the tensors a pass produced with its ``order``."""
    def enter(fn: _torch.GradFn) -> bool:
        if fn.name().endswith("AccumulateGrad"):
            return False
        meta = _torch.metadata(fn)
        if KEY in meta:
            return False
        meta[KEY] = order
        return True

    reach([t.grad_fn for t in made if isinstance(t, torch.Tensor) and t.grad_fn is not None], enter)


def _grad_fns(tensors: object) -> list[_torch.GradFn]:
    seq = tensors if isinstance(tensors, (list, tuple)) else (tensors,)
    return [t.grad_fn for t in seq if isinstance(t, torch.Tensor) and t.grad_fn is not None]


class _Marking:
    """What :func:`track_passes` does around each run of the engine (an
    :class:`dynagraph._engine.Watcher`; one for all its blocks, so a run is marked once)."""

    @staticmethod
    def before(outputs: Sequence[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        # (autograd.backward and autograd.grad both call the entry as (outputs, grads,
        # retain_graph, create_graph, inputs, allow_unreachable, accumulate_grad=...))
        try:
            return _mark_old(_grad_fns(list(outputs)) + _grad_fns(args[0] if args else None))
        except Exception:  # noqa: BLE001 - a graph walked differently (torch.func's wrapped tensors)
            return -1, []

    @staticmethod
    def after(state: Any, result: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        top, leaves = state
        if top >= 0 and (args[2] if len(args) > 2 else kwargs.get("create_graph", False)):  # it made nodes
            made = list(result or ())
            if kwargs.get("accumulate_grad", len(args) > 5 and args[5]):  # backward(): into .grad
                inputs = args[3] if len(args) > 3 and args[3] else leaves
                made += [t.grad for t in inputs if isinstance(t, torch.Tensor) and t.grad is not None]
            _mark_new(made, top + 1)


_MARKING = _Marking()


@contextlib.contextmanager
def track_passes() -> Iterator[None]:
    """Record which pass made each autograd node: the forward pass, or which backward pass.

    Inside the block each run of autograd's engine marks the nodes it runs through that
    no earlier pass made as forward (0); one with ``create_graph=True`` then marks the
    nodes it made with its order: 1 for a gradient of the forward graph, 2 for a
    gradient of that gradient (a gradient penalty's double backward, a Hessian-vector
    product), and so on. :func:`dynagraph.draw`, a :func:`dynagraph.live` recording's
    graph and the other views then give each node's order in its record
    (``Node.derivative``), its hover details (``made by: the first backward pass``) and
    the picture: nodes made by a backward pass are outlined in that pass's colour,
    named in the title's legend (purple: first backward, teal: second, orange: third
    and later). A node that no run of the engine inside the block has gone
    through (an op after the last backward, a graph made outside the block) has no
    mark (``None``).

    The engine's Python entry (``torch.autograd._engine_run_backward``) is wrapped
    while any block is open, in any thread, and put back when the last one ends, even
    if a block raises or is interrupted, and whatever order overlapping blocks end in.

    Example:
        >>> with dg.track_passes():
        ...     y = (x.sin() * x).sum()
        ...     g, = torch.autograd.grad(y, x, create_graph=True)
        >>> dg.draw(g)      # forward nodes plain, first-backward nodes outlined purple
    """
    global _used
    _used = True
    token = object()
    try:
        try:
            _engine.open_(token, _MARKING)
            yield
        finally:
            _engine.close(token)
    finally:
        _engine.close(token)  # again: it finishes a first close that an interrupt cut short
