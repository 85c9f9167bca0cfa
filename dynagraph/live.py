"""live(): record the autograd graph as it grows, one tensor operation at a time."""

from __future__ import annotations

import contextlib
import dataclasses
import operator
import time
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import torch
from torch import nn

from . import _page, _patch, _picture, _signals, _source, _tags, _torch, memory, render
from ._dot import Overlay, StepText
from ._language import N_, tr, translated
from ._records import Node, owner, upstream
from ._tags import tensors_in
from ._walk import reach
from .capture import param_names_of, record
from .graph import Graph
from .memory import SavedMemory

__all__ = ["Recording", "Step", "live"]

_serial = [0]  # each recording tags nodes under its own metadata key
_ROOTS = 64  # weak references kept to the newest steps' outputs (a deep graph's roots)
REPR_STEPS = 30  # steps listed by repr(); longer recordings show the first and last ones
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
        inside = _inside(self.module) + (tr(" ({kind})", kind=kind) if kind else "") if self.module else ""
        return f"{self.op}{inside}  [{_source.shown(self.where)}] {_cut(self.code)}\n  {shapes}  {made}"


def _step_number(upto: object) -> int:
    """``upto`` as an int (a numpy integer too), or a TypeError that says what to pass."""
    try:
        if isinstance(upto, bool):
            raise TypeError
        return operator.index(upto)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"upto must be a step number, an int such as 0 or -1 (the last step); "
                        f"got {upto!r} ({type(upto).__name__})") from None


def _cut(code: str) -> str:
    """A step's source line as its texts show it: at most :data:`CODE_CHARS` characters,
    and how long the line is where it is cut (a model called on a pasted 5,000-number
    literal made each step's text 38 KB, and outputs of 250-530 KB)."""
    if len(code) <= CODE_CHARS:
        return code
    return code[:CODE_CHARS] + tr("\u2026({n} characters)", n=f"{len(code):,}")


def _inside(module: str) -> str:
    """`` in {module}`` of a step's text (which :func:`_template` finds to mark the module)."""
    return tr(" in {module}", module=module)


def _shapes(shapes: Iterable[tuple[int, ...] | None]) -> str:
    return ", ".join("nested" if s is None else str(tuple(s)) for s in shapes) or "()"


class Recording(_page.View):
    """What ran inside a :func:`live` block: steps, and the graph they built.

    Displays as a stepper (slider and play controls over the final graph, each
    step's op and source line, its new nodes lit); ``repr`` is a text table.

    Its :attr:`steps` are the recorded ops, in the order they ran.

    Attributes:
        nodes, edges: The graph built inside the block (records, no torch objects).
        memory: What each node saved for backward, measured as its op ran
            (``live(memory=True)``; else ``None``): a
            :class:`dynagraph.memory.SavedMemory`. The recording keeps no tensor, so
            a later ``backward()`` does not show here: draw the output with
            ``dg.draw(..., memory=True)`` to see ``freed``.
        overview: Whether its picture draws modules as boxes (``live``'s ``overview``:
            ``None`` automatic, ``True`` always, ``False`` never); :meth:`graph` draws so.
    """

    def __init__(self, module_names: dict[int, str], param_names: dict[int, str]) -> None:
        self._steps: list[Step] = []
        self._nodes: list[Node] = []
        self._edges: list[tuple[int, int]] = []
        self.module_types: dict[str, str] = {}
        self._module_names = module_names  # id(module) -> dotted name; dropped at exit
        self._param_names = param_names
        self._key = f"dynagraph.live.{_serial[0]}"
        _serial[0] += 1
        self._start: int | None = None
        self._modules: list[str | None] = []  # the modules whose forward is running, innermost last
        self._ran: dict[str, int] = {}  # module name -> its calls so far (a block applied twice: 2)
        self._calls: list[dict[str, int]] = [{}]  # {name: number of its call} of the running ones, each entry
        self._step_calls: list[dict[str, int]] = []  # the running calls at each step (shared dicts)
        self._graph_frame: FrameType | None = None  # the compiled graph whose ops the last step gathers
        self._view: _View | None = None
        self._lines: dict = {}  # (filename, lineno) -> (where, code): loops repeat lines
        # Steps whose autograd nodes are not walked yet, with their outputs' nodes: the
        # walk runs in bulk when the graph is next read (at the latest when the block
        # ends), so an op costs little more than noting what it returned.
        self._todo: list[tuple[Step, list]] = []
        self._hi = -1  # the highest creation number among the outputs' nodes so far
        self._held: list = []  # every walked node while the block runs (see _finish)
        self._roots: list = []  # weak references to the newest steps' outputs (deep graphs)
        self.memory: SavedMemory | None = None
        self.overview: bool | None = None

    @classmethod
    def from_records(cls, steps: list[Step], nodes: list[Node], edges: list[tuple[int, int]],
                     module_types: dict[str, str], memory: SavedMemory | None = None) -> Recording:
        """A finished recording of these records (as :func:`dynagraph.load_view` reads one)."""
        rec = cls({}, {})
        rec._steps, rec._nodes, rec._edges = steps, nodes, edges
        rec.module_types, rec.memory = module_types, memory
        return rec

    @property
    def steps(self) -> list[Step]:
        """:class:`Step` per recorded op, in the order they ran."""
        self._flush()
        return self._steps

    @property
    def nodes(self) -> list[Node]:
        """The nodes of the graph built inside the block (records, no torch objects)."""
        self._flush()
        return self._nodes

    @property
    def edges(self) -> list[tuple[int, int]]:
        """``(producer, consumer)`` node ids of the graph built inside the block."""
        self._flush()
        return self._edges

    def __repr__(self) -> str:
        lines = [tr("<dynagraph.Recording: {steps} steps, {nodes} nodes>",
                    steps=len(self.steps), nodes=len(self.nodes))]
        shown = self.steps if len(self.steps) <= REPR_STEPS else self.steps[:REPR_STEPS - 5]
        names = _names(self.nodes, [*shown, *self.steps[-5:]])
        lines += [f"{s.index + 1:>3} {s.text(names, self.module_types)}" for s in shown]  # steps count from 1
        if len(shown) < len(self.steps):
            lines.append(tr("... {n} more steps (rec.steps has them all) ...",
                            n=f"{len(self.steps) - len(shown) - 5:,}"))
            lines += [f"{s.index + 1:>3} {s.text(names, self.module_types)}" for s in self.steps[-5:]]
        return "\n".join(lines)

    def graph(self, *, upto: int | None = None, title: str | None = None) -> Graph:
        """The graph built by steps ``0..upto`` (all steps by default; a negative
        ``upto`` counts from the end, as in Python: ``-1`` is the last step), drawn with
        modules as boxes as :attr:`overview` says (set ``graph.overview`` to change it).

        Raises:
            TypeError: ``upto`` is not a whole number.
            IndexError: ``upto`` names no step.
        """
        keep = None
        if upto is not None:
            upto = _step_number(upto)
            if not -len(self.steps) <= upto < len(self.steps):
                raise IndexError(f"upto={upto!r} names no step: the recording has {len(self.steps)} steps")
            keep = {i for s in self.steps[: upto % len(self.steps) + 1] for i in s.nodes} | self._earlier()
        nodes = list(self.nodes) if keep is None else [n for n in self.nodes if n.id in keep]
        edges = list(self.edges) if keep is None else [e for e in self.edges if e[0] in keep and e[1] in keep]
        graph = Graph(nodes, edges, self.module_types, title=title, overview=self.overview)
        if self.memory is not None:
            graph.memory = self.memory if keep is None else self.memory.subset(keep)
        return graph

    def saved_by_step(self) -> list[int]:
        """Bytes the graph keeps alive for backward after each step (each storage once),
        as measured while the block ran.

        Raises:
            ValueError: the recording did not measure memory (use ``live(memory=True)``).
        """
        if self.memory is None:
            raise ValueError("this recording did not measure memory: record with dg.live(..., memory=True)")
        return memory.running_totals(self.memory, [s.nodes for s in self.steps])

    def _earlier(self) -> set[int]:
        made = {i for s in self.steps for i in s.nodes}
        return {n.id for n in self.nodes if n.id not in made}

    def unused(self) -> tuple[Step | None, set[int]]:
        """The last step that made nodes, and the ids of the nodes that do not feed its result.

        A recording is drawn for the result of its last op that made autograd nodes
        (usually the loss): nodes that do not lead to it (an ``nn.LSTM``'s final states
        when the loss reads only its output, a forward whose result is dropped) are drawn
        faint, and the step list says how many. :meth:`feeding` draws only what feeds
        another tensor.
        """
        last = next((s for s in reversed(self.steps) if s.nodes), None)
        if last is None:
            return None, set()
        producers = {src for src, _ in self.edges}
        result = set(last.nodes) - producers  # its nodes that feed nothing: its result
        if (producers | result).issuperset([n.id for n in self.nodes]):
            return last, set()  # no other end: everything feeds the result (no walk of a long chain)
        return last, {n.id for n in self.nodes} - _ancestors(result, self.edges)

    def feeding(self, tensor: torch.Tensor) -> Recording:
        """This recording, restricted to what ``tensor`` is computed from: the steps that
        made a node ``tensor`` depends on, and those nodes.

        Raises:
            TypeError: ``tensor`` is not a tensor.
            ValueError: ``tensor`` was not computed in this block (a leaf, or made elsewhere).

        Example:
            >>> with dg.live(model) as rec:
            ...     out, (h, c) = lstm(x)
            ...     loss = out.pow(2).mean()
            >>> rec.feeding(h)       # only the steps that h depends on
        """
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"feeding() takes a tensor made inside the block; got {type(tensor).__name__}")
        fn = tensor.grad_fn
        nid = None if fn is None else _torch.metadata(fn).get(self._key)
        if nid is None:
            made = "a leaf (no grad_fn)" if fn is None else f"its node {fn.name()} was not made in this block"
            raise ValueError(f"this tensor was not computed inside the live() block: {made}. "
                             "Pass a tensor that an op in the block returned, such as the loss.")
        keep = _ancestors({nid}, self.edges)
        rec = Recording({}, {})
        rec.module_types, rec.overview = self.module_types, self.overview
        rec._nodes = [n for n in self.nodes if n.id in keep]
        rec._edges = [e for e in self.edges if e[0] in keep and e[1] in keep]
        rec._steps = [dataclasses.replace(s, index=k, nodes=[i for i in s.nodes if i in keep])
                      for k, s in enumerate(x for x in self.steps if any(i in keep for i in x.nodes))]
        if self.memory is not None:
            rec.memory = self.memory.subset(keep)
        return rec

    def _overlays(self, faint: set[int] | None = None) -> Overlay:
        """The steps, and each node's source line, for the picture (``faint``: the
        nodes drawn faint, :meth:`unused`'s unless given)."""
        played = _page.played(len(self.steps))  # the middle of a long recording is never shown: no text
        names = _names(self.nodes, (self.steps[i] for i in played))
        steps: list[tuple[StepText, list[int]]] = [("", s.nodes) for s in self.steps]
        for i in played:
            s = self.steps[i]
            steps[i] = (_template(s, s.text(names, self.module_types)), s.nodes)
        info = _StepInfo(self.steps)
        totals = self.saved_by_step() if self.memory is not None else []
        return Overlay(steps=steps, info=info, mode="reveal", totals=totals,
                       faint=self.unused()[1] if faint is None else faint)

    def _caption(self, last: Step | None, unused: set[int]) -> str:
        """The step list's heading: how many steps, and what is drawn faint."""
        caption = tr("1 step") if len(self.steps) == 1 else tr("{n} steps", n=f"{len(self.steps):,}")
        if unused and last is not None:
            caption += tr("; {n} nodes drawn faint do not feed the result of step {step} ({op}): "
                          "rec.feeding(tensor) draws only what feeds a tensor",
                          n=f"{len(unused):,}", step=f"{last.index + 1:,}", op=last.op)
        return caption

    def _outputs(self) -> list[_page.Output]:
        if not self.steps:
            return [_page.Output({"text/plain": repr(self)}, {})]
        return _patch.paused_gc(self._display)  # a record per step and per node: see paused_gc

    def _display(self) -> list[_page.Output]:
        last, unused = self.unused()
        return _page.outputs(self.graph(), repr(self), self._overlays(unused),
                             caption=self._caption(last, unused))

    # -- recording: what dynagraph's torch patching (_patch) calls while the block runs --

    def enter_module(self, module: nn.Module) -> None:
        """A module's forward starts: its ops are its steps until :meth:`exit_module`.
        (For dynagraph's torch patching, not for users.)"""
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
        op's ``inplace_target`` is among its outputs). (For dynagraph's torch patching.)"""
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
        step = self._steps[-1]
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
            self._flush()

    def _add_step(self, op: str, frame: FrameType | None, ins: list[torch.Tensor],
                  outs: list[torch.Tensor]) -> None:
        line = (frame.f_code.co_filename, frame.f_lineno) if frame is not None else (None, None)
        described = self._lines.get(line)
        if described is None:
            described = self._lines[line] = _source.described(*line)
        where, code = described
        module = self._modules[-1] if self._modules else None
        fns = self._made(outs)
        step = Step(len(self._steps), op, where, code, module, _torch.shapes_of(ins), _torch.shapes_of(outs),
                    [], "" if fns else _why_no_node(ins, outs))
        self._steps.append(step)
        self._step_calls.append(self._calls[-1])
        if fns:
            self._note(step, fns)
            if len(self._roots) == _ROOTS:
                del self._roots[: _ROOTS // 2]
            self._roots.append([weakref.ref(t) for t in outs])
        if self._view is not None:
            self._view.maybe_update(self)

    def _flush(self) -> None:
        """Walk the nodes of the steps noted since the last walk, in step order: each
        new node goes to the first step whose outputs lead to it (as if each op had
        been walked as it ran)."""
        if not self._todo:
            return
        todo, self._todo = self._todo, []
        # no mode or subclass sees it, and no garbage collection runs among its records
        _patch.paused_gc(_patch.guarded, _torch.no_torch_function(), self._credit, todo)
        while todo:  # newest first, so no long chain is freed in one recursive go
            todo.pop()

    def _credit(self, todo: list[tuple[Step, list]]) -> None:
        """Give each step of ``todo`` the new nodes its outputs lead to (see :meth:`_flush`):
        one walk per step, in step order, with one ``enter`` for them all (a loop of
        small ops makes thousands of steps between two reads)."""
        key, nodes, held, edges = self._key, self._nodes, self._held, self._edges
        params, start, measured = self._param_names, self._start, self.memory
        named = bool(self._module_names)
        metadata, module_key = _torch.metadata, _tags.KEY
        new: list[int] = []  # the current step's new node ids
        pending: list[tuple[_torch.GradFn, int]] = []  # (input, id of the node it feeds)
        module: str | None = None  # the current step's module
        calls: dict[str, int] = {}  # and the module calls running at it
        calls_key, step_calls = _tags.CALLS, self._step_calls

        def enter(fn: _torch.GradFn) -> Any:
            meta = metadata(fn)
            if key in meta:  # recorded by an earlier step: its inputs too
                return False
            nid = meta[key] = len(nodes)
            node = record(fn, nid, params, tags=False)  # we set the module
            if measured is not None:  # measured now: backward() may free them before long
                memory.measure_into(measured, nid, node.name, fn)
            nodes.append(node)
            held.append(fn)
            seq = node.seq
            if seq is not None and start is not None and seq < start:
                node.label += "\n(before live)"  # built before the block: drawn, not credited
                return False
            new.append(nid)
            if node.kind == "parameter":
                node.module = owner(node.label)
            elif named and module is not None:
                node.module = module
                node.calls = _tags.calls_of(calls, module)
                meta.setdefault(module_key, module)
                meta.setdefault(calls_key, calls)
            inputs = fn.next_functions
            for child, _ in inputs:
                if child is not None:
                    pending.append((child, nid))
            return inputs  # reach() goes on into them without reading them again

        for step, fns in todo:
            module, calls = step.module, step_calls[step.index]
            reach(fns, enter)
            if new:
                new.sort()
                step.nodes = sorted(step.nodes + new) if step.nodes else new
                step.note = ""
                new = []
            elif not step.nodes and not step.note:
                step.note = "no new node"
        for child, nid in pending:  # every input is recorded by now, by this walk or an earlier one
            edges.append((metadata(child)[key], nid))

    def _finish(self) -> None:
        """The block ended: walk what is left, let the graph go, and if it is deep
        enough to crash torch when freed, hand it to :func:`_torch.hold_deep_graph`."""
        if len(self._steps) >= _torch.SAFE_DEPTH or len(self._held) >= _torch.SAFE_DEPTH:
            _signals.defer_in()  # maybe deep: from now on a Ctrl-C in a protected call waits for its end
        self._flush()
        held = self._held  # (emptied in place: what an interrupt leaves, live() hands on)
        if len(held) >= _torch.SAFE_DEPTH:
            _patch.paused_gc(_patch.guarded, _torch.no_torch_function(), self._hold, held)
        self._roots = []
        while held:  # newest first, so no long chain is freed in one recursive go
            held.pop()

    def _hold(self, held: list[_torch.GradFn]) -> None:
        """Give a deep graph to :func:`_torch.hold_deep_graph`, rooted at the newest
        steps' outputs that are still alive and that no op of the block consumed
        (``held[i]`` is the node of record ``i``). A consumed output may be alive only
        because its consumer saved it for backward: rooted there, a recording with no
        backward (a forward, an evaluation) held its graph for good."""
        roots = []
        consumed = {src for src, _ in self._edges}
        for refs in self._roots:
            for ref in refs:
                t = ref()
                nid = None if t is None or t.grad_fn is None else _torch.metadata(t.grad_fn).get(self._key)
                if nid is not None and nid not in consumed:
                    roots.append((t, nid))
        if roots:
            _torch.hold_deep_graph(roots, held, self._edges)


class _StepInfo(Mapping[int, str]):
    """Node id -> the hover line of the step that made it: ``step 3: mul [this cell,
    line 2] y = x * 2``, written only for the nodes a picture shows (a rolled loop of
    300,000 steps shows a handful)."""

    def __init__(self, steps: Sequence[Step]) -> None:
        self._steps = {nid: s for s in steps for nid in s.nodes}
        self._template = tr("step {k}: {op} [{where}] {code}")  # steps count from 1

    def __getitem__(self, nid: int) -> str:
        s = self._steps[nid]
        return self._template.format(k=s.index + 1, op=s.op, where=_source.shown(s.where), code=_cut(s.code))

    def __iter__(self) -> Iterator[int]:
        return iter(self._steps)

    def __len__(self) -> int:
        return len(self._steps)


def _names(nodes: Sequence[Node], steps: Iterable[Step]) -> dict[int, str]:
    """Node id -> name, for the nodes that ``steps`` made (for :meth:`Step.text`). A
    recording's node ``i`` is ``nodes[i]``: a long one's texts read a few of its 300,000
    nodes (any other list of nodes, as ``feeding`` makes: all of them, by id)."""
    names = {}
    for s in steps:
        for i in s.nodes:
            if not 0 <= i < len(nodes) or nodes[i].id != i:
                return {n.id: n.name for n in nodes}
            names[i] = nodes[i].name
    return names


def _ancestors(ids: set[int], edges: Sequence[tuple[int, int]]) -> set[int]:
    """``ids`` and every node they are computed from (``edges`` run producer -> consumer)."""
    producers: dict[int, list[int]] = {}
    for src, dst in edges:
        producers.setdefault(dst, []).append(src)
    return upstream(ids, producers.get) or set()


def _template(step: Step, text: str) -> StepText:
    """``text`` with its module's name marked, so that a loop over many modules of one
    class (an MLP's 1,000 layers) shares one text in the page."""
    if not step.module:
        return text
    template = text.replace(_inside(step.module), _inside(_page.FILL), 1)
    return (template, step.module) if template != text else text


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


class _View:
    """Redraws the graph so far in one display area while the block runs.

    A redraw waits at least ``interval`` seconds and at least ``PATIENCE`` times as
    long as the last redraw took, so drawing costs the loop it watches at most
    ``1 / PATIENCE`` of its time however big the graph grows (and the picture rolls
    repeats, so it stays small). Outside IPython (a plain script) there is nowhere to
    draw: the view does nothing, rather than print object reprs to stdout.

    A redraw that fails (the renderer crashed or ran out of time) never reaches the
    user's code: the view says that it stopped redrawing and why, and the recording
    goes on (the recording itself still displays when the block ends).
    """

    PATIENCE = 4
    handle: Any  # IPython's DisplayHandle of the picture's output (its PNG); None outside IPython
    script: Any  # and of the script's output, which draws the live picture

    def __init__(self, interval: float) -> None:
        self.interval, self.handle, self.script, self.cost = interval, None, None, 0.0
        self.last = time.perf_counter()
        self.stopped: str | None = None  # why redrawing stopped, once it has
        try:
            from IPython import get_ipython
            from IPython.display import display
        except ImportError:
            return
        if get_ipython() is None:
            return
        render.find_renderer()  # no renderer: fail now, saying how to install one
        self.handle = display(_page.PLACEHOLDER, raw=True, display_id=True)
        self.script = display({"application/javascript": ""}, raw=True, display_id=True)

    def maybe_update(self, rec: Recording, force: bool = False) -> None:
        now = time.perf_counter()
        due = now - self.last >= max(self.interval, self.PATIENCE * self.cost)
        if self.handle is None or self.stopped or not (force or due) or not rec.nodes:  # (nodes: walks)
            return
        try:
            so_far = tr("1 step so far") if len(rec.steps) == 1 else tr("{n} steps so far", n=len(rec.steps))
            graph = rec.graph(title=so_far)
            outs = _page.outputs(graph, repr(graph), still=force)  # the last stays: with a PNG
            picture = outs[0]  # (and no script where even the script cannot fit: the text alone)
            script = outs[1] if len(outs) > 1 else _page.Output({"application/javascript": ""}, {})
            if force:
                self.handle.update(picture.data, metadata=picture.metadata, raw=True)
            self.script.update(script.data, metadata=script.metadata, raw=True)
        except Exception as err:  # noqa: BLE001 -- a picture must never break the loop it watches
            self.stopped = f"{type(err).__name__}: {err}"
            self.handle.update({"text/plain": f"dynagraph: stopped redrawing at step {len(rec.steps):,} "
                                f"({self.stopped[:500]}); the recording goes on"}, raw=True)
        self.last = time.perf_counter()
        self.cost = self.last - now


@contextlib.contextmanager
def live(model: nn.Module | None = None, *, params: Mapping[str, torch.Tensor] | None = None,
         view: bool = False, interval: float = 1.0, memory: bool = False,
         overview: bool | None = None) -> Iterator[Recording]:
    """Record every tensor operation in the block and the autograd nodes it creates.

    Args:
        model: Names modules (``layers.0.linear1``) and parameters in the recording;
            without it steps name a module by its class.
        params: A mapping name -> tensor naming leaves (inputs, weights) instead.
        view: In Jupyter, redraw the growing graph in place while the block runs
            (outside IPython there is nowhere to draw, and nothing happens).
        interval: Seconds between redraws of the live view.
        memory: Measure what each new node saves for backward as its op runs: the
            recording's picture shows it (as ``dg.draw(..., memory=True)`` does) and
            its stepper the running total per step (:meth:`Recording.saved_by_step`).
        overview: Draw modules as boxes, a click opening a box's ops (needs ``model``):
            ``None`` (the default) where the picture of every op would fill over three
            screens at 1:1, ``True`` always, ``False`` never (every op).

    Yields:
        A :class:`Recording`, filled as the block runs. While the block runs it holds
        the autograd nodes built inside it (so a graph you drop before ``backward()``
        stays in memory until the block ends; ``backward()`` still frees the tensors
        they saved). On exit (even when the block raises) no tensor or autograd node
        is kept, and when the last open block ends the mode, hooks and patch are
        removed. This holds even when an interrupt (Ctrl-C) lands while the block
        opens or closes.

    Blocks may nest and overlap and end in any order, in any number of threads; each
    records only the thread that opened it. A block that ends in another thread (a
    generator closed there) stops recording at once, but its mode stays, doing
    nothing, on the opening thread's stack until that thread's next block ends:
    torch lets no thread change another's modes. Code made by ``torch.compile`` runs as it
    would outside, and each call of one of its graphs is one ``compiled`` step (a
    backend with autograd, like the default, shows as ``CompiledFunction.apply``).

    Raises:
        TypeError: ``model`` is not an ``nn.Module``.
        ValueError: ``interval`` is not positive.
        TypeError: ``memory`` is not a bool.
        ValueError: ``overview`` is not ``None``, ``True`` or ``False``.
        RendererNotFoundError: ``view=True`` in IPython and no Graphviz renderer.

    Example:
        >>> x = torch.tensor([1.0], requires_grad=True)
        >>> with dg.live(params={"x": x}) as rec:
        ...     y = 2 * x + 1
        >>> [s.op for s in rec.steps]
        ['mul', 'add']
    """
    if model is not None and not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module (or pass params=); got {type(model).__name__}")
    if interval <= 0:
        raise ValueError(f"interval must be > 0 seconds; got {interval!r}")
    module_names: dict[int, str] = {}
    names, types = param_names_of(model if model is not None else params, module_names)
    if not isinstance(memory, bool):
        raise TypeError(f"memory must be True or False; got {type(memory).__name__}")
    _picture.check_overview(overview)
    rec = Recording(module_names, names)
    rec.module_types, rec.overview = types, overview
    if memory:
        rec.memory = SavedMemory()
    if model is not None:
        _tags.use()  # capture (dg.draw) reads the module tags this recording writes
    # a user's mode sees no probe, and grad is on for it (guarded, grad_on: a `with` can be interrupted)
    rec._start = _patch.guarded(_torch.no_torch_function(), _patch.grad_on, _tags.current_seq)
    if view:
        rec._view = _View(interval)
    try:
        try:
            _patch.open_block(rec)
            yield rec
        finally:
            _patch.close_block(rec)
    finally:
        _patch.close_block(rec)  # again: it finishes a first close that an interrupt cut short
        try:
            _signals.protected(rec._finish)  # a Ctrl-C meanwhile waits for the deep graph's hand-over
            if rec._view is not None:
                rec._view.maybe_update(rec, force=True)
        finally:  # whatever the last walk or redraw did, nothing torch made stays here
            _torch.keep_wrappers(rec._held)  # (what a finish cut short left: freed in order later)
            rec._todo, rec._held, rec._roots = [], [], []
            rec._view = None
            rec._module_names = {}
            rec._param_names = {}
            rec._modules.clear()
            rec._calls, rec._step_calls, rec._ran = [{}], [], {}
            rec._lines.clear()
            rec._graph_frame = None
