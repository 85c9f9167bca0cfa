"""live(): record the autograd graph as it grows, one tensor operation at a time."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from . import _guards, _page, _patch, _picture, _signals, _source, _steps, _tags, _torch, memory, render
from ._args import whole_number
from ._dot import Overlay, StepText
from ._language import N_, counted, tr
from ._recorder import Recorder, Step, cut, inside
from ._records import Node, producers_of, upstream
from .capture import param_names_of
from .graph import Graph, record_of
from .memory import SavedMemory

__all__ = ["Recording", "Step", "live"]

REPR_STEPS = 30  # steps listed by repr(); longer recordings show the first and last ones


def _step_number(upto: object) -> int:
    """``upto`` as an int (a numpy integer too), or a TypeError that says what to pass."""
    return whole_number(upto, "upto must be a step number, an int such as 0 or -1 (the last step)")


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

    def __init__(self, steps: list[Step], nodes: list[Node], edges: list[tuple[int, int]],
                 module_types: dict[str, str] | None = None, memory: SavedMemory | None = None, *,
                 key: str | None = None, recorder: Recorder | None = None) -> None:
        """A recording of these records (as :func:`live` and :func:`dynagraph.load_view` make one).

        Args:
            steps, nodes, edges, module_types, memory: What the recording holds (module
                name -> class name in ``module_types``).
            key: The autograd-node metadata key its nodes' ids were noted under (what
                :meth:`feeding` reads), or ``None`` (a loaded recording: no node of it is alive).
            recorder: The recorder still filling these lists while a block runs (for
                :func:`live`): read through before each use until the block ends.
        """
        self._steps, self._nodes, self._edges = steps, nodes, edges
        self.module_types: dict[str, str] = {} if module_types is None else module_types
        self.memory = memory
        self._key = key
        self._recorder = recorder
        self.overview: bool | None = None

    def _ended(self) -> None:
        """The block ended: its recorder is dropped, and the lists are final."""
        self._recorder = None

    def _flush(self) -> None:
        if self._recorder is not None:
            self._recorder.flush()

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
        lines = [tr("<dynagraph.Recording: {steps}, {nodes}>", steps=self._counted_steps(),
                    nodes=counted(len(self.nodes), N_("1 node"), N_("{n} nodes")))]
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
            TypeError: ``upto`` is not a whole number, or ``title`` is not a string.
            IndexError: ``upto`` names no step.
        """
        _picture.check_title(title)  # (else the picture failed later, inside the DOT writer)
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
        nid = None if fn is None or self._key is None else _torch.metadata(fn).get(self._key)
        if nid is not None and all(n.id != nid for n in self.nodes):
            nid = None  # made in the block, but left out of this recording (one that feeding() made)
        if nid is None:
            made = "a leaf (no grad_fn)" if fn is None else f"its node {fn.name()} was not made in this block"
            raise ValueError(f"this tensor was not computed inside the live() block: {made}. "
                             "Pass a tensor that an op in the block returned, such as the loss.")
        keep = _ancestors({nid}, self.edges)
        steps = [dataclasses.replace(s, index=k, nodes=[i for i in s.nodes if i in keep])
                 for k, s in enumerate(x for x in self.steps if any(i in keep for i in x.nodes))]
        rec = Recording(steps, [n for n in self.nodes if n.id in keep],
                        [e for e in self.edges if e[0] in keep and e[1] in keep], self.module_types,
                        None if self.memory is None else self.memory.subset(keep), key=self._key)
        rec.overview = self.overview
        return rec

    def _overlays(self, faint: set[int] | None = None) -> Overlay:
        """The steps, and each node's source line, for the picture (``faint``: the
        nodes drawn faint, :meth:`unused`'s unless given)."""
        played = _steps.played(len(self.steps))  # the middle of a long recording is never shown: no text
        names = _names(self.nodes, (self.steps[i] for i in played))
        steps: list[tuple[StepText, list[int]]] = [("", s.nodes) for s in self.steps]
        for i in played:
            s = self.steps[i]
            steps[i] = (_template(s, s.text(names, self.module_types)), s.nodes)
        info = _StepInfo(self.steps)
        totals = self.saved_by_step() if self.memory is not None else []
        return Overlay(steps=steps, info=info, mode="reveal", totals=totals,
                       faint=self.unused()[1] if faint is None else faint)

    def _counted_steps(self) -> str:
        """How many steps, in words: "1 step", "1,234 steps"."""
        return counted(len(self.steps), N_("1 step"), N_("{n} steps"))

    def _caption(self, last: Step | None, unused: set[int]) -> str:
        """The step list's heading: how many steps, and what is drawn faint."""
        caption = self._counted_steps()
        if unused and last is not None:
            caption += tr("; {n} nodes drawn faint do not feed the result of step {step} ({op}): "
                          "rec.feeding(tensor) draws only what feeds a tensor",
                          n=f"{len(unused):,}", step=f"{last.index + 1:,}", op=last.op)
        return caption

    def _outputs(self) -> list[_page.Output]:
        if not self.steps:
            return [_page.Output({"text/plain": repr(self)}, {})]
        return _guards.paused_gc(self._display)  # a record per step and per node: see paused_gc

    def _display(self) -> list[_page.Output]:
        last, unused = self.unused()
        return _page.outputs(record_of(self.graph()), repr(self), self._overlays(unused),
                             caption=self._caption(last, unused))


class _StepInfo(Mapping[int, str]):
    """Node id -> the hover line of the step that made it: ``step 3: mul [this cell,
    line 2] y = x * 2``, written only for the nodes a picture shows (a rolled loop of
    300,000 steps shows a handful)."""

    def __init__(self, steps: Sequence[Step]) -> None:
        self._steps = {nid: s for s in steps for nid in s.nodes}
        self._template = tr("step {k}: {op} [{where}] {code}")  # steps count from 1

    def __getitem__(self, nid: int) -> str:
        s = self._steps[nid]
        return self._template.format(k=s.index + 1, op=s.op, where=_source.shown(s.where), code=cut(s.code))

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
    return upstream(ids, producers_of(edges).get) or set()


def _template(step: Step, text: str) -> StepText:
    """``text`` with its module's name marked, so that a loop over many modules of one
    class (an MLP's 1,000 layers) shares one text in the page."""
    if not step.module:
        return text
    template = text.replace(inside(step.module), inside(_steps.FILL), 1)
    return (template, step.module) if template != text else text


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
            outs = _page.outputs(record_of(graph), repr(graph), still=force)  # the last stays: with a PNG
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
        ValueError: both ``model`` and ``params`` are given.
        ValueError: ``interval`` is not a positive number.
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
    if model is not None and params is not None:  # (params= was dropped without a word)
        raise ValueError("pass a model or params=, not both (with a model, params= was ignored): "
                         "dg.live(model) names the model's modules and parameters; "
                         "dg.live(params={'x': x}) names the tensors you list")
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not interval > 0:  # nan too
        raise ValueError(f"interval must be > 0 seconds; got {interval!r} (pass a number such as 0.5)")
    module_names: dict[int, str] = {}
    numbers: dict[str, int | None] = {}  # (Node.module_number of each module name)
    names, types = param_names_of(model if model is not None else params, module_names, numbers)
    if not isinstance(memory, bool):
        raise TypeError(f"memory must be True or False; got {type(memory).__name__}")
    _picture.check_overview(overview)
    if model is not None:
        _tags.use()  # capture (dg.draw) reads the module tags this recording writes
    recorder = Recorder(module_names, names, memory=SavedMemory() if memory else None,
                        module_numbers=numbers)
    rec = Recording(recorder.steps, recorder.nodes, recorder.edges, types, recorder.memory,
                    key=recorder.key, recorder=recorder)
    rec.overview = overview
    shown = _View(interval) if view else None
    if shown is not None:
        recorder.on_step = functools.partial(shown.maybe_update, rec)
    try:
        try:
            _patch.open_block(recorder)
            yield rec
        finally:
            _patch.close_block(recorder)
    finally:
        _patch.close_block(recorder)  # again: it finishes a first close that an interrupt cut short
        try:
            _signals.protected(recorder.finish)  # a Ctrl-C meanwhile waits for the deep graph's hand-over
            if shown is not None:
                shown.maybe_update(rec, force=True)
        finally:  # whatever the last walk or redraw did, nothing torch made stays here
            recorder.drop()
            rec._ended()
