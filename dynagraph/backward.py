"""trace_backward(): watch the backward pass run, node by node, with gradient norms."""

from __future__ import annotations

import contextlib
import gc
import warnings
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any

import torch
from torch.utils.hooks import RemovableHandle

from . import _engine, _guards, _picture, _tags, _torch, ddp
from ._dot import Overlay
from ._language import N_, counted, tr
from ._records import Node, consumers_of
from ._replay import Replay
from .capture import Params, Roots, named_roots, number_modules, param_names_of, walk
from .graph import Graph
from .norms import norm_of, stack_on_host

__all__ = ["BackwardTrace", "trace_backward"]

# An edge of the trace: (src, dst, input number of dst), or a pair (src, dst) for the norm of
# all that dst sent src (parallel edges summed); with a gradient norm (on the device, read
# after the block) or the note saying why there is none.
Edge = tuple[int, int, int]
_Norms = list[tuple[Edge | tuple[int, int] | tuple[int], torch.Tensor | str]]  # (node,): what it received
_Slot = tuple[int, int] | None  # (child id, output number of the child), or None
_Grads = Sequence[torch.Tensor | None]  # what a backward hook receives, per input or output


class BackwardTrace(Replay):
    """The order autograd ran the nodes of a graph, and the gradient on each edge.

    Attributes:
        nodes, edges: The graph as captured before ``backward()`` (see :func:`draw`).
        order: Node ids in the order their backward ran (repeats for each pass when
            ``backward(retain_graph=True)`` is called again inside the block).
        edge_norms: ``{(src, dst, slot): L2 norm}`` of the gradient sent back along
            each forward edge ``src -> dst`` (the last pass wins). ``slot`` is the
            number of the input of ``dst`` that the edge feeds, as autograd numbers
            them (``dst``'s ``next_functions``; 0 for the edge into an output). It
            tells apart the edges of one tensor used twice by one op: ``x * x`` sends
            ``x`` one gradient per input, ``(src, dst, 0)`` and ``(src, dst, 1)``.
        merged_norms: ``{(src, dst): L2 norm}`` of all the gradient ``dst`` sent
            ``src`` together: the norm of the sum of the gradients of its parallel
            edges (what ``src`` receives from ``dst``), or the edge's own norm when it
            is the only one. A picture that draws parallel edges as one shows this.
        received_norms: ``{node id: L2 norm}`` of all the gradient a node with several
            consumers was sent, as autograd summed it (its hook's incoming gradient; the
            outputs of a node with several taken as one vector). A picture that draws
            several of those edges as one (into a module box) shows this. Where the
            block ran several passes, only if all its consumers' norms are from its pass;
            and only from a backward whose roots are all in the graph (else consumers the
            graph does not have may have sent it gradient too).
        passes: ``{(src, dst): pass}`` where the block ran several backward passes:
            which pass (0 the first; one that raised counts) the norm of ``(src, dst)`` is
            from (empty for one pass). A drawn edge that stands for edges of different
            passes shows no norm, nor does a rolled edge whose iterations' are.
        notes: ``{(src, dst, slot): reason}`` for edges whose gradient has no norm to
            read (the ``meta`` device, a layout torch cannot reduce); they are not in
            ``edge_norms``.
        launches: The all-reduces a ``DistributedDataParallel`` model (``params``)
            launched, in order (:class:`dynagraph.ddp.Launch`: bucket, its parameters,
            the node run it launched in); empty for any other model.
        overview: Whether the picture draws modules as boxes (``trace_backward``'s
            ``overview``: ``None`` automatic, ``True`` always, ``False`` never).

    Displays as the graph with execution order on the nodes and edge width and
    label from the gradient norm, and a stepper that lights nodes in backward order.
    """

    _CAPTION = N_("backward: {runs}. The arrows point the way autograd sends gradients: from the output back "
                  "to the inputs")
    _REPR = N_("<dynagraph.BackwardTrace: {runs}, {norms}{notes}>")

    def __init__(self, nodes: list[Node], edges: list[tuple[int, int]], module_types: dict[str, str]) -> None:
        self.nodes, self.edges, self.module_types = nodes, edges, module_types
        self.order: list[int] = []
        self.edge_norms: dict[Edge, float] = {}
        self.merged_norms: dict[tuple[int, int], float] = {}
        self.received_norms: dict[int, float] = {}
        self.passes: dict[tuple[int, int], int] = {}
        self.notes: dict[Edge, str] = {}
        self.launches: list[ddp.Launch] = []
        self.overview: bool | None = None  # modules as boxes: see dynagraph.draw

    def _repr_fields(self) -> dict[str, str]:
        notes = tr(", {n} without a norm (see .notes)", n=len(self.notes)) if self.notes else ""
        norms = counted(len(self.edge_norms), N_("1 edge norm"), N_("{n} edge norms"))
        return {"norms": norms, "notes": notes}

    def _run_name(self, node: Node) -> str:
        return node.name

    def graph(self, title: str | None = None) -> Graph:
        """The captured graph (without the backward annotations).

        Raises:
            TypeError: ``title`` is not a string.
        """
        _picture.check_title(title)  # (else the picture failed later, inside the DOT writer)
        return Graph(self.nodes, self.edges, self.module_types, title=title, overview=self.overview)

    def _overlays(self) -> Overlay:
        """Order badges, edge norms, and one step per node run, for the picture."""
        badges: dict[int, str] = {}
        for k, nid in enumerate(self.order):
            badges.setdefault(nid, f"#{k + 1}")
        by_id = {n.id: n for n in self.nodes}
        arriving: dict[int, list[float]] = {}  # node id -> norms of the gradients it was sent
        parallel: dict[tuple[int, int], list[float]] = {}  # (src, dst) -> each edge's norm, by slot
        for (src, dst, _), v in sorted(self.edge_norms.items()):
            arriving.setdefault(src, []).append(v)
            parallel.setdefault((src, dst), []).append(v)
        steps = [(_ran(by_id[nid], arriving.get(nid, [])), [nid]) for nid in self.order]
        overlay = Overlay(badges=badges, edge_norms=dict(self.merged_norms), steps=steps, mode="light",
                          received=dict(self.received_norms), passes=dict(self.passes),
                          parallel_norms={pair: vs for pair, vs in parallel.items() if len(vs) > 1})
        return ddp.marked(self, overlay) if self.launches else overlay


LISTED_NORMS = 6  # gradient norms a step's text lists; more are cut to the first ones and the last


def _listed(norms: list[float]) -> str:
    """The norms of the gradients a node was sent, for its step's text: at most
    :data:`LISTED_NORMS`, the first ones and the last (a weight read by each of 40,000
    iterations was sent 40,000: its step's text alone took 280 KB of the output)."""
    if len(norms) <= LISTED_NORMS:
        return ", ".join(f"{v:.2g}" for v in norms)
    first = ", ".join(f"{v:.2g}" for v in norms[:LISTED_NORMS - 1])
    return f"{first}, \u2026, {norms[-1]:.2g}"


def _ran(node: Node, arriving: list[float]) -> str:
    """A backward step's text, in the current language: what ran, and the norm of the
    gradient it was sent (a leaf's AccumulateGrad adds the gradient into the leaf's
    ``.grad``). Names and numbers stay as they are."""
    norms = _listed(arriving)
    if node.kind in ("parameter", "input"):
        added = (tr("{leaf}.grad += the gradient from {n} uses", leaf=node.label, n=len(arriving))
                 if len(arriving) > 1 else tr("{leaf}.grad += the gradient", leaf=node.label))
        return added + (tr(", \u2016g\u2016 = {norms}", norms=norms) if norms else "")
    ran = (tr("{op} in {module} ran", op=node.label, module=node.module) if node.module else
           tr("{op} ran", op=node.label))
    return ran + (tr(": gradient in, \u2016g\u2016 = {norms}", norms=norms) if norms else "")


@contextlib.contextmanager
def trace_backward(roots: Roots, *, params: Params = None,
                   overview: bool | None = None) -> Iterator[BackwardTrace]:
    """Record the backward pass run inside the block over the graph behind ``roots``.

    Hooks every autograd node of the graph with one post-hook: it notes that the
    node ran and takes the norm of each gradient the node sends to its inputs (on
    the device, no synchronisation). On exit the hooks are removed, even if the
    block raises or an interrupt (Ctrl-C) lands while they are added or removed,
    and all norms are read with one synchronisation. While the block is open, the
    engine's entry (``torch.autograd._engine_run_backward``) is wrapped, as in
    :func:`track_passes`, to see each backward's roots: a node's ``received_norms``
    is kept only from a backward whose roots are all in the traced graph.

    Args:
        roots: The tensor(s) you will call ``backward()`` on (as for :func:`draw`).
        params: An ``nn.Module`` or a mapping name -> tensor naming the leaves. A
            ``DistributedDataParallel`` model also records its buckets (see
            :mod:`dynagraph.ddp`): each parameter is marked by its bucket, and the steps
            say where each bucket's all-reduce launched. This registers the model's one
            communication hook, for good (outside a trace it runs DDP's default
            all-reduce); pass ``params=model.module`` to leave the model's hook free.
        overview: Draw modules as boxes (ops tagged by :func:`track_modules`): ``None``
            where the picture of every op is over three screens, ``True`` always,
            ``False`` never (as for :func:`draw`).

    Yields:
        A :class:`BackwardTrace`, complete after the block. A gradient with no norm
        to read (``meta`` device) gets a note in ``.notes``; the hooks never raise,
        so the user's ``backward()`` always finishes.

    Warns:
        UserWarning: the block ran no backward over these roots (0 node runs).

    Raises:
        RuntimeError: ``params`` is a DDP model with a communication hook of its own.
        ValueError: ``overview`` is not ``None``, ``True`` or ``False``.

    Example:
        >>> with dg.trace_backward(loss, params=model) as bt:
        ...     loss.backward()
        >>> bt          # stepper in backward order, edge width = gradient norm
    """
    _picture.check_overview(overview)
    numbers: dict[str, int | None] | None = {} if _tags.active() else None  # (modules are tagged)
    names, types = param_names_of(params, numbers=numbers)
    slots: dict[int, list] = {}
    nodes, edges, fns = walk(named_roots(roots), names, slots=slots)
    number_modules(nodes, numbers or {})
    trace = BackwardTrace(nodes, edges, types)
    trace.overview = overview
    outputs = {n.id for n in nodes if n.kind == "output"}
    roots_of = {src: dst for src, dst in edges if dst in outputs}
    fanout = {src for src, dsts in consumers_of(edges).items() if len(set(dsts)) > 1}
    pending: _Norms = []
    handles: list[RemovableHandle] = []
    pause = _Pause(pending)
    runs = _Runs(fns, pause, fanout)
    try:
        try:
            _guards.paused_gc(_add_hooks, fns, slots, roots_of, trace.order, pending, handles, pause, fanout)
            del slots  # the hooks hold the graph only until removed
            _engine.open_(runs, runs)
            with ddp.launches_of(params, trace) if ddp.is_ddp(params) else contextlib.nullcontext():
                yield trace
        finally:
            _guards.remove_hooks(handles)
            _engine.close(runs)
            pause.resume()  # a backward that raised never ran its end-of-pass callback
    finally:
        _guards.remove_hooks(handles)  # again: it finishes a first run that an interrupt cut short
        _engine.close(runs)  # again: it finishes a first close that an interrupt cut short
        pause.resume()
        fns.clear()
        runs.inside.clear()
        runs.fed.clear()
        _guards.paused_gc(_read, pending, trace, pause.segments, pause.outside_passes)
    if not trace.order:  # the block finished without running any hooked node
        warnings.warn("trace_backward: no backward ran inside the block (0 node runs); call "
                      "loss.backward() inside the `with` block, on the tensor you passed as roots",
                      stacklevel=3)


class _Pause:
    """Python's garbage collector paused while a traced backward pass runs, and which
    pass each of the norms in ``pending`` is from.

    The hooks make a tensor per gradient norm (5,000 in a packed GRU's backward), and
    every 700 new objects start a collection; some become full ones over every object
    of the process (~100 ms where ``transformers`` is loaded). The first hook of a pass
    pauses the collector, and autograd's end-of-pass callback starts it again; so does
    the end of the block, when a backward raised (the callback then never runs). A
    collector that was already paused stays paused.

    A pass is known by the id autograd gives each run of its engine: a pass that raised
    ends without its callback, so the callback alone ran it on into the next pass.
    ``segments`` holds ``(index in pending, pass number)`` where the norms of a pass
    start (0 the first pass; a backward run inside a node of another, then the outer
    one again, make three segments of two passes); ``None`` where torch has no
    end-of-pass callback. Where torch gives no ids, a pass starts after one ended.
    """

    def __init__(self, pending: _Norms) -> None:
        self.paused = False
        self.pending = pending
        self.segments: list[tuple[int, int]] | None = []
        self.task = -1  # the id of the pass the last hook ran in (torch's ids start at 0)
        self.numbers: dict[int, int] = {}  # pass id -> pass number
        self.ended = 0  # passes ended: the ids where torch gives none
        self.task_id: Callable[[], int] = _torch.graph_task_id_reader() or (lambda: self.ended)
        self.outside = False  # the engine's last run has a root outside the traced graph (see _Runs)
        self.outside_passes: set[int] = set()  # the numbers of the passes that had

    def start(self, task: int) -> None:
        self.task = task  # first: an interrupt after it finds the collector as the block's end expects
        number = self.numbers.get(task)
        if number is None:  # a new pass (not the outer pass again)
            number = self.numbers[task] = len(self.numbers)
            if self.outside:
                self.outside_passes.add(number)
            self.outside = False
        if self.segments is not None:
            self.segments.append((len(self.pending), number))
        if gc.isenabled():
            self.paused = True  # first: an interrupt after it still finds the collector to restart
            gc.disable()
        try:
            _torch.queue_engine_callback(self.resume)
        except Exception:  # noqa: BLE001 - no engine callbacks (another torch): no pause, no passes
            self.segments = None
            self.resume()

    def resume(self) -> None:
        self.ended += 1
        if self.paused:
            gc.enable()  # then the flag: an interrupt between the two leaves it to a later call
            self.paused = False


def _passes(keys: Sequence[tuple[int, ...]], segments: list[tuple[int, int]], trace: BackwardTrace,
            several: bool = True, outside: Collection[int] = ()) -> None:
    """Where the block ran several passes: the pass each pair's norm is from, as
    ``trace.passes`` (the last pass wins, as for the norms); a node's received norm is
    dropped where its consumers' norms are not all from the pass it is from (a later
    pass ran only some of them: the sum of the last norms is no gradient autograd made),
    or where that pass is one of ``outside`` (it may hold gradient from consumers the
    graph does not have). ``segments``: see :class:`_Pause`."""
    bounds, k, number = segments[1:], 0, segments[0][1]
    received: dict[int, int] = {}
    for i, key in enumerate(keys):
        while k < len(bounds) and i >= bounds[k][0]:
            number, k = bounds[k][1], k + 1
        if len(key) == 1:
            received[key[0]] = number
        elif several:
            trace.passes[key[0], key[1]] = number
    passes_of: dict[int, set[int]] = {}
    for (src, _), number in trace.passes.items():
        passes_of.setdefault(src, set()).add(number)
    for src, number in received.items():
        if number in outside or passes_of.get(src, {number}) != {number}:
            trace.received_norms.pop(src, None)


class _Runs:
    """Each run of autograd's engine inside the block, seen at its entry (as
    :func:`dynagraph.track_passes` sees them), tells ``pause`` whether one of its roots
    is outside the traced graph: ``(loss + aux).backward()`` where ``aux`` reads a traced
    tensor, or a gradient penalty's backward through the graph ``create_graph=True``
    made. Such a run can send a traced node gradient from nodes the graph does not
    have: what the node received is then more than its consumers in the picture sent.
    So does a root that is a traced node of several consumers (``fanout``): it is also
    sent the gradient the run starts from. ``inside`` and ``fed``: the traced graph's
    nodes, and those of ``fanout`` (both cleared at the block's end)."""

    def __init__(self, fns: Sequence[_torch.GradFn | None], pause: _Pause, fanout: set[int]) -> None:
        self.inside = {fn for fn in fns if fn is not None}
        self.fed = {fns[nid] for nid in fanout}
        self.pause = pause

    def before(self, outputs: Sequence[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """(An :class:`dynagraph._engine.Watcher`.) Note whether this run has such a root."""
        self.pause.outside = any(isinstance(t, torch.Tensor) and t.grad_fn is not None
                                 and (t.grad_fn not in self.inside or t.grad_fn in self.fed)
                                 for t in outputs)

    def after(self, state: Any, result: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        pass


def _add_hooks(fns: list, slots: dict[int, list], roots_of: dict[int, int], order: list[int],
               pending: _Norms, handles: list[RemovableHandle], pause: _Pause, fanout: set[int]) -> None:
    """Hook each node of ``fns``, noting each handle in ``handles`` as it is made (no
    interrupt falls between the two); a node of ``fanout`` also notes what it received."""
    for nid, fn in enumerate(fns):
        if fn is not None:
            hook = _hook(nid, slots[nid], roots_of.get(nid), order, pending, pause, nid in fanout)
            handles.append(fn.register_hook(hook))


def _read(pending: _Norms, trace: BackwardTrace, segments: list[tuple[int, int]] | None = None,
          outside: Collection[int] = ()) -> None:
    """Read all queued norms into ``trace.edge_norms`` and ``trace.merged_norms`` with one
    synchronisation; notes aside. An edge alone between its two nodes is its own merged norm.
    ``segments``: which pass the norms of ``pending`` are from (see :class:`_Pause`);
    ``outside``: the passes with a root outside the graph (see :class:`_Runs`)."""
    several = segments is not None and len({number for _, number in segments}) > 1
    keys = [key for key, _ in pending] if several or outside else None
    _read_all(pending, trace)
    if keys is not None and segments is not None:
        _passes(keys, segments, trace, several, outside)
    elif outside:  # (no passes told apart: no received norm is known to hold only the graph's)
        trace.received_norms.clear()


def _read_all(pending: _Norms, trace: BackwardTrace) -> None:
    tensors = [v for _, v in pending if not isinstance(v, str)]
    read = stack_on_host(tensors)  # the one sync
    if len(tensors) == len(pending) and not trace.notes:  # no note, now or before (the usual case)
        _read_norms(pending, read, trace)
        return
    values = iter(read)
    merged: dict[tuple[int, int], float | None] = {}  # None: a note, no merged norm
    for key, v in pending:
        value = None if isinstance(v, str) else next(values)
        if len(key) == 1:  # what a node of several consumers received
            if value is None:
                trace.received_norms.pop(key[0], None)
            else:
                trace.received_norms[key[0]] = value
            continue
        if len(key) == 2:  # a pair's merged norm (parallel edges)
            merged[key[0], key[1]] = value
            continue
        edge = (key[0], key[1], key[2])
        if value is None:
            trace.notes[edge] = str(v)
            trace.edge_norms.pop(edge, None)
        else:
            trace.edge_norms[edge] = value
            trace.notes.pop(edge, None)
        merged[edge[0], edge[1]] = value  # a pair's own merged norm, queued after its edges, replaces it
    for pair, value in merged.items():
        if value is None:
            trace.merged_norms.pop(pair, None)
        else:
            trace.merged_norms[pair] = value
    pending.clear()


_NONE: frozenset[int] = frozenset()


def _read_norms(pending: _Norms, values: list[float], trace: BackwardTrace) -> None:
    """:func:`_read` where every queued value is a norm: the same result, with none of
    the checks a note needs (this runs once per edge)."""
    edge_norms = trace.edge_norms
    merged: dict[tuple[int, int], float] = {}
    for (key, _), value in zip(pending, values):
        if len(key) == 1:  # what a node of several consumers received
            trace.received_norms[key[0]] = value
        elif len(key) == 2:  # a pair's merged norm (parallel edges), queued after its edges
            merged[key] = value
        else:
            edge_norms[key] = value
            merged[key[0], key[1]] = value
    trace.merged_norms.update(merged)
    pending.clear()


def _hook(nid: int, slots: list[_Slot], output_id: int | None, order: list[int],
          pending: _Norms, pause: _Pause, fanout: bool = False) -> Callable[[_Grads, _Grads], None]:
    """Post-hook of node ``nid``: note that it ran, and the norm of each gradient it sent.

    Each norm is taken at once (on the device, no sync), not queued: a held gradient
    would stop autograd from adding into it in place or making it a leaf's ``.grad``
    without a copy, which costs more than batched kernels save (measured on CPU).

    ``slots[k]`` is ``(child id, output number of the child)`` that the node's k-th
    input came from, or ``None``. Each input is its own edge, ``(child, nid, k)``; where
    one child feeds several inputs (``x * x``) the norm of all it is sent together is
    queued too, under ``(child, nid)``. Autograd runs one node at a time per device, so
    post-hooks fire in the order the nodes ran. A node of several consumers (``fanout``)
    also queues the norm of what it received, under ``(nid,)``.
    """
    sent = [(k, (s[0], nid, k)) for k, s in enumerate(slots) if s is not None]  # (input number, its edge)
    children = [edge[0] for _, edge in sent] if len(sent) > 1 else []
    parallel = (frozenset(child for child in children if children.count(child) > 1)  # fed by several edges
                if len(set(children)) < len(children) else _NONE)
    out_edge = (nid, output_id, 0) if output_id is not None else None

    def hook(grad_inputs: _Grads, grad_outputs: _Grads) -> None:
        order.append(nid)
        try:
            task = pause.task_id()
            if task != pause.task:  # the first node of a pass (or of the outer pass again)
                pause.start(task)
            if out_edge is not None and grad_outputs and grad_outputs[0] is not None:
                pending.append((out_edge, norm_of(grad_outputs[0])))
            if fanout:
                received = [norm_of(g) for g in grad_outputs if g is not None]
                if received:
                    pending.append(((nid,), _joined(received)))
            last: torch.Tensor | None = None  # an add sends one tensor to both inputs: one norm
            norm: torch.Tensor | str = ""
            for k, edge in sent:
                grad = grad_inputs[k]
                if grad is not None:
                    if grad is not last:
                        last, norm = grad, norm_of(grad)
                    pending.append((edge, norm))
            if parallel:  # x * x: one child, several edges; also the norm of their sum
                merged = _merged(slots, grad_inputs, parallel)
                pending.extend(((child, nid), norm) for child, norm in merged.items())
        except Exception as e:  # noqa: BLE001 - never abort the user's backward()
            note = f"no norm: {type(e).__name__}: {str(e)[:120]}"
            edges = [edge for _, edge in sent] + ([out_edge] if out_edge else [])
            pending.extend((edge, note) for edge in edges)
    return hook


def _merged(slots: list[_Slot], grads: _Grads, children: frozenset[int]) -> dict[int, torch.Tensor | str]:
    """Norm of all the gradient a node sends each of ``children`` (the children it sends
    several gradients).

    Gradients for the same tensor add up (``x * x`` sends ``x`` two, and ``x.grad``
    is their sum); different tensors of one child (two outputs of ``unbind``) are
    taken together, as one vector.
    """
    summed: dict[tuple[int, int], torch.Tensor] = {}
    for slot, grad in zip(slots, grads):
        if slot is not None and grad is not None and slot[0] in children:
            summed[slot] = summed[slot] + grad if slot in summed else grad
    norms: dict[int, list[torch.Tensor | str]] = {}
    for (child, _), grad in summed.items():
        norms.setdefault(child, []).append(norm_of(grad))
    return {child: _joined(ns) for child, ns in norms.items()}


def _joined(norms: list[torch.Tensor | str]) -> torch.Tensor | str:
    """The norm of several tensors taken as one vector, or the first note among them."""
    notes = [n for n in norms if isinstance(n, str)]
    if notes or len(norms) == 1:
        return notes[0] if notes else norms[0]
    return torch.linalg.vector_norm(torch.stack([n.float() for n in norms if isinstance(n, torch.Tensor)]))
