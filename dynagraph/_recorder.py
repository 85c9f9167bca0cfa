"""The recorder behind live(): what a block holds while it runs, dropped in one call.

The recorder is what :mod:`dynagraph._patch` feeds (a :class:`dynagraph._patch.Listener`):
each op becomes a :class:`Step`, and the autograd nodes the ops made become records
(:class:`dynagraph.Node`) and edges. It holds the torch side of a block (the walked
nodes, weak references to the newest outputs, the frame of a compiled graph, the
running modules) until :meth:`Recorder.drop`. A :class:`dynagraph.Recording` reads
its lists, which the recorder fills.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import torch
from torch import nn

from . import _guards, _patch, _signals, _source, _tags, _torch
from ._language import N_, tr, translated
from ._measure import measure_into
from ._records import Node, owner, producers_of, shape_text, upstream
from ._tags import tensors_in
from ._walk import reach
from .capture import record
from .memory import SavedMemory

__all__ = ["CODE_CHARS", "STEP_NODES", "Recorder", "Step", "cut", "inside"]

_serial = [0]  # each recorder tags nodes under its own metadata key
_ROOTS = 64  # weak references kept to the newest steps' outputs (a deep graph's roots)
STEP_NODES = 6  # nodes a step's text names; an op that made more (nn.GRU: thousands) says how many
CODE_CHARS = 200  # characters of a step's source line its texts show; a longer line says its length


@dataclass(slots=True)  # one per recorded op
class Step:
    """One recorded operation.

    Attributes:
        index: Position in ``rec.steps``, from 0. What a learner reads (the repr, the
            step list, the slider, hover details) numbers steps from 1: this is step
            ``index + 1`` there.
        op: The operation (``mul``, ``linear``, ``ThresholdReLU.apply``).
        where: ``"this cell, line 3"`` or ``"cell defining Net, line 10"`` (a Jupyter cell),
            or ``"file.py:12"``: English in every language (:meth:`text` shows it in the
            learner's).
        code: That line's source text (whole; the step's texts show its first
            :data:`CODE_CHARS` characters and the line's length).
        module: The module whose forward ran the op (dotted name when ``live`` was
            given the model, else its class name), or ``None`` (outside any module,
            or in the given model's own ``forward``).
        inputs, outputs: Shapes of the tensor arguments and results.
        nodes: Ids of the autograd nodes this op created (in :attr:`Recording.nodes`).
        note: Why no node was created, when none was (English; :meth:`text` shows it
            in the learner's language).
    """

    index: int
    op: str
    where: str
    code: str
    module: str | None
    inputs: list[tuple[int, ...] | None]  # None: a nested tensor (no one shape)
    outputs: list[tuple[int, ...] | None]
    nodes: list[int] = field(default_factory=list)
    note: str = ""

    def text(self, names: Mapping[int, str] | None = None,
             module_types: Mapping[str, str] | None = None) -> str:
        """One-step summary: op, source line, shapes, and the nodes it created, in the
        current language (op, module and node names, shapes and code as they are)."""
        shapes = f"{_shapes(self.inputs)} -> {_shapes(self.outputs)}"
        if not names:
            made = tr("{n} nodes", n=len(self.nodes))
        elif len(self.nodes) <= STEP_NODES:
            made = ", ".join(names[i] for i in self.nodes)
        else:
            first = ", ".join(names[i] for i in self.nodes[:STEP_NODES])
            made = tr("{first}, \u2026 ({n} nodes)", first=first, n=f"{len(self.nodes):,}")
        made = f"+ {made}" if self.nodes else tr("no node ({note})", note=translated(self.note))
        kind = (module_types or {}).get(self.module) if self.module else None
        within = inside(self.module) + (tr(" ({kind})", kind=kind) if kind else "") if self.module else ""
        return f"{self.op}{within}  [{_source.shown(self.where)}] {cut(self.code)}\n  {shapes}  {made}"


def cut(code: str) -> str:
    """A step's source line as its texts show it: at most :data:`CODE_CHARS` characters,
    and how long the line is where it is cut (a model called on a pasted 5,000-number
    literal made each step's text 38 KB, and outputs of 250-530 KB)."""
    if len(code) <= CODE_CHARS:
        return code
    return code[:CODE_CHARS] + tr("\u2026({n} characters)", n=f"{len(code):,}")


def inside(module: str) -> str:
    """`` in {module}`` of a step's text (which ``live._template`` finds to mark the module)."""
    return tr(" in {module}", module=module)


def _shapes(shapes: Iterable[tuple[int, ...] | None]) -> str:
    return ", ".join(map(shape_text, shapes)) or "()"


class Recorder:
    """Turns the ops of one ``live()`` block into steps, node records and edges.

    :mod:`dynagraph._patch` calls :meth:`on_op`, :meth:`enter_module` and
    :meth:`exit_module` while the block is open. The walk that finds each op's new
    autograd nodes runs in bulk (:meth:`flush`), when the lists are next read.

    Attributes:
        steps, nodes, edges: What the block recorded so far (a recording reads them).
        memory: What each new node saves for backward (``live(memory=True)``), or ``None``.
        key: The autograd-node metadata key under which this recorder notes node ids.
        on_step: Called after each new step while the block runs (the live view), or ``None``.
    """

    def __init__(self, module_names: dict[int, str], param_names: dict[int, str], *,
                 memory: SavedMemory | None = None,
                 module_numbers: Mapping[str, int | None] | None = None) -> None:
        self.steps: list[Step] = []
        self.nodes: list[Node] = []
        self.edges: list[tuple[int, int]] = []
        self.memory = memory
        self.key = f"dynagraph.live.{_serial[0]}"
        _serial[0] += 1
        self.on_step: Callable[[], None] | None = None
        self._module_names = module_names  # id(module) -> dotted name
        self._module_numbers = module_numbers or {}  # dotted name -> Node.module_number
        self._param_names = param_names
        # the creation number of the newest node made before the block (a user's mode
        # sees no probe, and grad is on for it: guarded, grad_on, as a `with` can be interrupted)
        self._start: int | None = _guards.guarded(_torch.no_torch_function(), _patch.grad_on,
                                                 _tags.current_seq)
        self._modules: list[str | None] = []  # the modules whose forward is running, innermost last
        self._ran: dict[str, int] = {}  # module name -> its calls so far (a block applied twice: 2)
        self._calls: list[dict[str, int]] = [{}]  # {name: number of its call} of the running ones, each entry
        self._step_calls: list[dict[str, int]] = []  # the running calls at each step (shared dicts)
        self._graph_frame: FrameType | None = None  # the compiled graph whose ops the last step gathers
        self._lines: dict = {}  # (filename, lineno) -> (where, code): loops repeat lines
        # Steps whose autograd nodes are not walked yet, with their outputs' nodes: the
        # walk runs in bulk when the graph is next read (at the latest when the block
        # ends), so an op costs little more than noting what it returned.
        self._todo: list[tuple[Step, list]] = []
        self._hi = -1  # the highest creation number among the outputs' nodes so far
        self._held: list = []  # every walked node while the block runs (see finish)
        self._roots: list = []  # weak references to the newest steps' outputs (deep graphs)

    # -- what dynagraph's torch patching (_patch) calls while the block runs --

    def enter_module(self, module: nn.Module) -> None:
        """A module's forward starts: its ops are its steps until :meth:`exit_module`."""
        name = self._module_names.get(id(module))
        if name is None:  # torch.compile(model) runs the model under a wrapper
            name = self._module_names.get(id(_torch.original_module(module)), type(module).__name__)
        self._modules.append(name or None)  # "" is the model itself: its ops are in no module
        calls = self._calls[-1]
        if name:
            self._ran[name] = self._ran.get(name, 0) + 1
            calls = {**calls, name: self._ran[name]}
        self._calls.append(calls)

    def exit_module(self) -> None:
        """The innermost running module's forward ended (or raised)."""
        if self._modules:  # a block opened inside a forward sees its end only
            self._modules.pop()
            self._calls.pop()

    def on_op(self, op: str, args: Sequence[Any], kwargs: Mapping[str, Any], out: object,
              frame: FrameType | None, inplace_target: torch.Tensor | None = None) -> None:
        """Op ``op`` ran at ``frame`` and returned ``out``: note it as a step (an in-place
        op's ``inplace_target`` is among its outputs)."""
        outs = [out] if isinstance(out, torch.Tensor) else tensors_in(out, [])
        if inplace_target is not None and not any(t is inplace_target for t in outs):
            outs.append(inplace_target)  # setitem returns None; mul_ returns its target
        if _torch.compiled_graph_frame(frame):
            self._on_compiled_op(frame, outs)
            return
        self._graph_frame = None
        if outs:
            self._add_step(op, frame, tensors_in(kwargs, tensors_in(args, [])), outs)

    def _on_compiled_op(self, frame: FrameType, outs: list[torch.Tensor]) -> None:
        """An op of a compiled graph: all of one call's ops are one step."""
        if frame is not self._graph_frame:  # held until the next op, so never reused meanwhile
            self._graph_frame = frame
            code = frame.f_code  # the graph's arguments: inputs and the weights it reads
            ins = tensors_in([frame.f_locals[n] for n in code.co_varnames[:code.co_argcount]], [])
            self._add_step("compiled", _source.caller_of_graph(frame), ins, outs)
            return
        step = self.steps[-1]
        step.outputs = _torch.shapes_of(outs)
        fns = self._made(outs)
        if fns:
            step.note = ""
            self._note(step, fns)

    def _made(self, outs: list[torch.Tensor]) -> list[_torch.GradFn]:
        """The autograd nodes of ``outs`` if any was created since the last step (else
        ``[]``); moves :attr:`_hi` to the newest of them."""
        fns = [fn for t in outs if (fn := t.grad_fn) is not None]
        made = False
        for fn in fns:
            seq = _torch.sequence_nr(fn)
            if seq is None:  # no counter: the walk decides
                made = True
            elif seq > self._hi:
                self._hi, made = seq, True
        return fns if made else []

    def _note(self, step: Step, fns: list[_torch.GradFn]) -> None:
        """Queue ``fns`` for the walk that credits their new nodes to ``step``."""
        self._todo.append((step, fns))
        if self.memory is not None:  # saved tensors are read as the op runs
            self.flush()

    def _add_step(self, op: str, frame: FrameType | None, ins: list[torch.Tensor],
                  outs: list[torch.Tensor]) -> None:
        line = (frame.f_code.co_filename, frame.f_lineno) if frame is not None else (None, None)
        described = self._lines.get(line)
        if described is None:
            described = self._lines[line] = _source.described(*line)
        where, code = described
        module = self._modules[-1] if self._modules else None
        fns = self._made(outs)
        step = Step(len(self.steps), op, where, code, module, _torch.shapes_of(ins), _torch.shapes_of(outs),
                    [], "" if fns else _why_no_node(ins, outs))
        self.steps.append(step)
        self._step_calls.append(self._calls[-1])
        if fns:
            self._note(step, fns)
            if len(self._roots) == _ROOTS:
                del self._roots[: _ROOTS // 2]
            self._roots.append([weakref.ref(t) for t in outs])
        if self.on_step is not None:
            self.on_step()

    # -- the walk, and the end of the block --

    def flush(self) -> None:
        """Walk the nodes of the steps noted since the last walk, in step order: each
        new node goes to the first step whose outputs lead to it (as if each op had
        been walked as it ran)."""
        if not self._todo:
            return
        todo, self._todo = self._todo, []
        # no mode or subclass sees it, and no garbage collection runs among its records
        _guards.paused_gc(_guards.guarded, _torch.no_torch_function(), self._credit, todo)
        while todo:  # newest first, so no long chain is freed in one recursive go
            todo.pop()

    def _credit(self, todo: list[tuple[Step, list]]) -> None:
        """Give each step of ``todo`` the new nodes its outputs lead to (see :meth:`flush`):
        one walk per step, in step order, with one ``enter`` for them all (a loop of
        small ops makes thousands of steps between two reads)."""
        key, nodes, held, edges = self.key, self.nodes, self._held, self.edges
        params, start, measured = self._param_names, self._start, self.memory
        named = bool(self._module_names)
        metadata, module_key = _torch.metadata, _tags.KEY
        new: list[int] = []  # the current step's new node ids
        pending: list[tuple[_torch.GradFn, int]] = []  # (input, id of the node it feeds)
        module: str | None = None  # the current step's module
        calls: dict[str, int] = {}  # and the module calls running at it
        calls_key, step_calls, numbers = _tags.CALLS, self._step_calls, self._module_numbers

        def enter(fn: _torch.GradFn) -> Any:
            meta = metadata(fn)
            if key in meta:  # recorded by an earlier step: its inputs too
                return False
            nid = meta[key] = len(nodes)
            node = record(fn, nid, params, tags=False)  # we set the module
            if measured is not None:  # measured now: backward() may free them before long
                measure_into(measured, node, fn)
            nodes.append(node)
            held.append(fn)
            seq = node.seq
            if seq is not None and start is not None and seq < start:
                node.label += "\n(before live)"  # built before the block: drawn, not credited
                return False
            new.append(nid)
            if node.kind == "parameter":
                node.module = owner(node.label)  # (its tensor tells it: no module number)
            elif named and module is not None:
                node.module, node.module_number = module, numbers.get(module)
                node.calls = made_by
                meta.setdefault(module_key, module)
                meta.setdefault(calls_key, calls)
            inputs = fn.next_functions
            for child, _ in inputs:
                if child is not None:
                    pending.append((child, nid))
            return inputs  # reach() goes on into them without reading them again

        for step, fns in todo:
            module, calls = step.module, step_calls[step.index]
            made_by = _tags.calls_of(calls, module) if named else None  # its nodes' Node.calls, once a step
            reach(fns, enter)
            if new:
                self._give(step, new)
                new = []
            elif not step.nodes and not step.note:
                step.note = "no new node"
        for child, nid in pending:  # every input is recorded by now, by this walk or an earlier one
            edges.append((metadata(child)[key], nid))

    @staticmethod
    def _give(step: Step, new: list[int]) -> None:
        """Give ``step`` the nodes ``new`` (ids, not empty) that its outputs led to."""
        new.sort()
        step.nodes = sorted(step.nodes + new) if step.nodes else new
        step.note = ""

    def finish(self) -> None:
        """The block ended: walk what is left, let the graph go, and if it is deep
        enough to crash torch when freed, hand it to :func:`_torch.hold_deep_graph`."""
        if len(self.steps) >= _torch.SAFE_DEPTH or len(self._held) >= _torch.SAFE_DEPTH:
            _signals.defer_in()  # maybe deep: from now on a Ctrl-C in a protected call waits for its end
        self.flush()
        held = self._held  # (emptied in place: what an interrupt leaves, drop hands on)
        if len(held) >= _torch.SAFE_DEPTH:
            _guards.paused_gc(_guards.guarded, _torch.no_torch_function(), self._hold, held)
        self._roots = []
        while held:  # newest first, so no long chain is freed in one recursive go
            held.pop()

    def _hold(self, held: list[_torch.GradFn]) -> None:
        """Give a deep graph to :func:`_torch.hold_deep_graph`, rooted at the newest
        steps' outputs that are still alive and that no other of them is computed from
        (``held[i]`` is the node of record ``i``). An output that a live one is computed
        from may be alive only because its consumer saved it for backward: rooted there, a
        recording with no backward (a forward, an evaluation) held its graph for good. An
        output whose consumers all died (a loss printed and dropped, or a result an
        interrupt cut off before its assignment) is a root: its graph is freed when it dies.
        Nodes no root reaches (a graph kept alive by an older tensor) are held until
        nothing else owns them (:func:`_torch.keep_wrappers`), never left to torch's
        recursive free."""
        alive: dict[int, torch.Tensor] = {}  # record id -> a live output of the newest steps
        for refs in self._roots:
            for ref in refs:
                t = ref()
                nid = None if t is None or t.grad_fn is None else _torch.metadata(t.grad_fn).get(self.key)
                if nid is not None:
                    alive.setdefault(nid, t)
        producers = producers_of(self.edges)
        below = upstream([p for nid in alive for p in producers.get(nid, ())], producers.get)
        roots = [(t, nid) for nid, t in alive.items() if nid not in below]
        if roots:
            _torch.hold_deep_graph(roots, held, self.edges)
        # what the roots reach, with no second walk: each node of `below` feeds a live output,
        # and each live output that is no root feeds another, so in the end a root
        reached = below.union(nid for _, nid in roots)
        _torch.keep_wrappers([fn for nid, fn in enumerate(held) if nid not in reached])

    def drop(self) -> None:
        """Let go of everything torch made, and of the block's names and modules (after
        :meth:`finish`, or instead of it when it failed). The node wrappers a finish cut
        short left are freed in order later (:func:`_torch.keep_wrappers`). Safe to repeat."""
        _torch.keep_wrappers(self._held)
        self._todo, self._held, self._roots, self._graph_frame = [], [], [], None
        self._module_names, self._param_names, self._modules, self._lines = {}, {}, [], {}
        self._calls, self._step_calls, self._ran = [{}], [], {}
        self.on_step = None


def _why_no_node(ins: list[torch.Tensor], outs: list[torch.Tensor]) -> str:
    """Why an op made no autograd node, in English (``Step.note``; ``Step.text`` translates it)."""
    if torch.is_inference_mode_enabled():
        return N_("inference_mode")
    if not torch.is_grad_enabled():
        return N_("grad disabled: torch.no_grad()")
    if any(t.requires_grad and t.grad_fn is None for t in outs):
        return N_("a leaf: autograd records it where an op uses it")
    if not any(t.requires_grad for t in ins):
        return N_("no input requires grad")
    if not any(t.is_floating_point() or t.is_complex() for t in outs):
        return N_("integer or bool result: not differentiable")
    return N_("no new node")  # (also what _credit notes for a step its walk found no new node for)
