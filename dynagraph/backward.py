"""trace_backward(): watch the backward pass run, node by node, with gradient norms."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Collection, Iterator, Sequence

import torch

from . import _display
from ._records import Node
from .capture import Params, Roots, named_roots, param_names_of, walk
from .graph import Graph
from .norms import _device_norms, _norm, _stack_on_host

__all__ = ["BackwardTrace", "trace_backward"]

# A gradient norm (on the device, read after the block) or the note saying why there is none.
_Norms = list[tuple[tuple[int, int], torch.Tensor | str]]
_Slot = tuple[int, int] | None  # (child id, output number of the child), or None
_Grads = Sequence[torch.Tensor | None]  # what a backward hook receives, per input or output


class BackwardTrace:
    """The order autograd ran the nodes of a graph, and the gradient on each edge.

    Attributes:
        nodes, edges: The graph as captured before ``backward()`` (see :func:`draw`).
        order: Node ids in the order their backward ran (repeats for each pass when
            ``backward(retain_graph=True)`` is called again inside the block).
        edge_norms: ``{(src, dst): L2 norm}`` of the gradient sent back along each
            forward edge ``src -> dst`` (the last pass wins).
        notes: ``{(src, dst): reason}`` for edges whose gradient has no norm to read
            (the ``meta`` device, a layout torch cannot reduce); they are not in
            ``edge_norms``.

    Displays as the graph with execution order on the nodes and edge width and
    label from the gradient norm, and a stepper that lights nodes in backward order.
    """

    def __init__(self, nodes: list[Node], edges: list[tuple[int, int]], module_types: dict[str, str]) -> None:
        self.nodes, self.edges, self.module_types = nodes, edges, module_types
        self.order: list[int] = []
        self.edge_norms: dict[tuple[int, int], float] = {}
        self.notes: dict[tuple[int, int], str] = {}

    def __repr__(self) -> str:
        names = {n.id: n.name for n in self.nodes}
        ran = " -> ".join(names[i] for i in self.order[:12])
        more = f" ... (+{len(self.order) - 12})" if len(self.order) > 12 else ""
        notes = f", {len(self.notes)} without a norm (see .notes)" if self.notes else ""
        return (f"<dynagraph.BackwardTrace: {len(self.order)} node runs, "
                f"{len(self.edge_norms)} edge norms{notes}>\n  {ran}{more}")

    def graph(self, title: str | None = None) -> Graph:
        """The captured graph (without the backward annotations)."""
        return Graph(self.nodes, self.edges, self.module_types, title=title)

    def _overlays(self) -> _display.Overlays:
        """Order badges, edge norms, and one step per node run, for the picture."""
        badges: dict[int, str] = {}
        for k, nid in enumerate(self.order):
            badges.setdefault(nid, f"#{k + 1}")
        by_id = {n.id: n for n in self.nodes}
        steps = [(_ran(by_id[nid]), [nid]) for nid in self.order]
        return _display.Overlays(badges=badges, edge_norms=dict(self.edge_norms), steps=steps,
                                 mode="light")

    def to_dot(self) -> str:
        """DOT of the picture: execution order on the nodes, gradient norm on the edges."""
        return _display.drawing(self.graph(), self._overlays())[1]

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict[str, str]:
        if not self.order:
            return {"text/plain": repr(self)}
        return _display.bundle(self.graph(), repr(self), self._overlays(),
                               caption=f"backward: {len(self.order):,} node runs")


def _ran(node: Node) -> str:
    """A backward step's text: the node that ran, and where."""
    where = f" in {node.module}" if node.module else ""
    return f"{node.label}{where} ran"


@contextlib.contextmanager
def trace_backward(roots: Roots, *, params: Params = None) -> Iterator[BackwardTrace]:
    """Record the backward pass run inside the block over the graph behind ``roots``.

    Hooks every autograd node of the graph with one post-hook: it notes that the
    node ran and takes the norm of each gradient the node sends to its inputs (on
    the device, no synchronisation). On exit the hooks are removed, even if the
    block raises, and all norms are read with one synchronisation.

    Args:
        roots: The tensor(s) you will call ``backward()`` on (as for :func:`draw`).
        params: An ``nn.Module`` or a mapping name -> tensor naming the leaves.

    Yields:
        A :class:`BackwardTrace`, complete after the block. A gradient with no norm
        to read (``meta`` device) gets a note in ``.notes``; the hooks never raise,
        so the user's ``backward()`` always finishes.

    Warns:
        UserWarning: the block ran no backward over these roots (0 node runs).

    Example:
        >>> with dg.trace_backward(loss, params=model) as bt:
        ...     loss.backward()
        >>> bt          # stepper in backward order, edge width = gradient norm
    """
    names, types = param_names_of(params)
    slots: dict[int, list] = {}
    nodes, edges, fns = walk(named_roots(roots), names, slots=slots)
    trace = BackwardTrace(nodes, edges, types)
    outputs = {n.id for n in nodes if n.kind == "output"}
    leaves = {n.id for n in nodes if n.kind in ("parameter", "input")}
    roots_of = {src: dst for src, dst in edges if dst in outputs}
    pending = _Pending()
    handles = []
    try:
        for nid, fn in enumerate(fns):
            if fn is not None:
                handles.append(fn.register_hook(_hook(nid, slots[nid], roots_of.get(nid), trace.order,
                                                      pending, leaves)))
        del fn, slots  # the hooks hold the graph only until removed
        yield trace
    finally:
        for h in handles:
            h.remove()
        handles.clear()
        fns.clear()
        _read(pending.done(), trace)
    if not trace.order:  # the block finished without running any hooked node
        warnings.warn("trace_backward: no backward ran inside the block (0 node runs); call "
                      "loss.backward() inside the `with` block, on the tensor you passed as roots",
                      stacklevel=3)


class _Pending:
    """Gradients queued by the hooks, their norms taken in batches.

    A hook only queues the gradient (a reference, no copy and no kernel), and every
    ``BATCH`` gradients, or ``ELEMENTS`` elements, their norms are taken together
    (one ``torch._foreach_norm`` for the plain ones): one kernel per batch instead
    of one per edge, while at most one batch of gradients is held. Autograd adds
    into a gradient in place only when nothing else holds it, so a queued
    gradient keeps the value it was sent with.
    """

    BATCH = 256
    ELEMENTS = 1 << 22  # 16 MB of float32

    def __init__(self) -> None:
        self.norms: _Norms = []
        self.edges: list[tuple[int, int]] = []
        self.grads: list[torch.Tensor] = []
        self.size = 0

    def add(self, edge: tuple[int, int], grad: torch.Tensor) -> None:
        self.edges.append(edge)
        self.grads.append(grad)
        self.size += grad.numel()  # (a sparse gradient counts as dense: flushed sooner)
        if len(self.grads) >= self.BATCH or self.size >= self.ELEMENTS:
            self.flush()

    def now(self, edge: tuple[int, int], grad: torch.Tensor) -> None:
        """Take this gradient's norm now (an edge's norms are all taken now or all queued,
        so each edge's norms stay in the order they came)."""
        self.norms.append((edge, _norm_or_note(grad)))

    def note(self, edge: tuple[int, int], value: torch.Tensor | str) -> None:
        """A norm taken already (on the device) or a note: kept in the order it came."""
        self.flush()
        self.norms.append((edge, value))

    def flush(self) -> None:
        if not self.grads:
            return
        edges, grads = self.edges, self.grads
        self.edges, self.grads, self.size = [], [], 0
        index: dict[int, int] = {}  # id -> position in `unique`: many nodes pass one
        unique: list[torch.Tensor] = []  # gradient on unchanged (add, views, the loss's sum)
        slots = []
        for g in grads:
            slot = index.setdefault(id(g), len(unique))  # (ids are fixed: the batch holds them)
            if slot == len(unique):
                unique.append(g)
            slots.append(slot)
        try:
            with torch.no_grad():  # (a create_graph=True backward sends gradients with history)
                values = _device_norms(unique)
        except Exception:  # noqa: BLE001 - never abort the user's backward(): one at a time
            values = [_norm_or_note(g) for g in unique]
        self.norms.extend(zip(edges, (values[slot] for slot in slots)))

    def done(self) -> _Norms:
        self.flush()
        return self.norms


def _norm_or_note(grad: torch.Tensor) -> torch.Tensor | str:
    try:
        return _norm(grad)
    except Exception as e:  # noqa: BLE001 - never abort the user's backward()
        return f"no norm: {type(e).__name__}: {str(e)[:120]}"


def _read(pending: _Norms, trace: BackwardTrace) -> None:
    """Read all queued norms into ``trace.edge_norms`` with one synchronisation; notes aside."""
    values = iter(_stack_on_host([v for _, v in pending if not isinstance(v, str)]))  # the one sync
    for edge, v in pending:
        if isinstance(v, str):
            trace.notes[edge] = v
            trace.edge_norms.pop(edge, None)
        else:
            trace.edge_norms[edge] = next(values)
            trace.notes.pop(edge, None)
    pending.clear()


def _hook(nid: int, slots: list[_Slot], output_id: int | None, order: list[int],
          pending: _Pending, leaves: Collection[int] = ()) -> Callable[[_Grads, _Grads], None]:
    """Post-hook of node ``nid``: note that it ran, queue each gradient it sent.

    ``slots[k]`` is ``(child id, output number of the child)`` that the node's k-th
    input came from, or ``None``. Autograd runs one node at a time per device, so
    post-hooks fire in the order the nodes ran.
    """
    children = [s[0] if s is not None else None for s in slots]
    real = [c for c in children if c is not None]
    shared = len(real) > 1 and len(set(real)) < len(real)
    sent = [(c, nid) if c is not None else None for c in children]  # the edge of each input
    # A leaf's gradient is measured at once, not queued: autograd makes it the leaf's
    # .grad without a copy only when nothing else holds it.
    now = [c in leaves for c in children]
    out_edge = (nid, output_id) if output_id is not None else None

    def hook(grad_inputs: _Grads, grad_outputs: _Grads) -> None:
        order.append(nid)
        try:
            if out_edge is not None and grad_outputs and grad_outputs[0] is not None:
                pending.add(out_edge, grad_outputs[0])
            if shared:  # x * x: one edge carries several gradients
                for child, norm in _merged(slots, grad_inputs).items():
                    pending.note((child, nid), norm)
                return
            for edge, grad, leaf in zip(sent, grad_inputs, now):
                if edge is not None and grad is not None:
                    if leaf:
                        pending.now(edge, grad)
                    else:
                        pending.add(edge, grad)
        except Exception as e:  # noqa: BLE001 - never abort the user's backward()
            note = f"no norm: {type(e).__name__}: {str(e)[:120]}"
            for edge in [e for e in sent if e is not None] + ([out_edge] if out_edge else []):
                pending.note(edge, note)
    return hook


def _merged(slots: list[_Slot], grads: _Grads) -> dict[int, torch.Tensor | str]:
    """Norm of all the gradient a node sends each child, when some child gets several.

    Gradients for the same tensor add up (``x * x`` sends ``x`` two, and ``x.grad``
    is their sum); different tensors of one child (two outputs of ``unbind``) are
    taken together, as one vector.
    """
    summed: dict[tuple[int, int], torch.Tensor] = {}
    for slot, grad in zip(slots, grads):
        if slot is not None and grad is not None:
            summed[slot] = summed[slot] + grad if slot in summed else grad
    norms: dict[int, list[torch.Tensor | str]] = {}
    for (child, _), grad in summed.items():
        norms.setdefault(child, []).append(_norm(grad))
    return {child: _joined(ns) for child, ns in norms.items()}


def _joined(norms: list[torch.Tensor | str]) -> torch.Tensor | str:
    """The norm of several tensors taken as one vector, or the first note among them."""
    notes = [n for n in norms if isinstance(n, str)]
    if notes or len(norms) == 1:
        return notes[0] if notes else norms[0]
    return torch.linalg.vector_norm(torch.stack([n.float() for n in norms if isinstance(n, torch.Tensor)]))
