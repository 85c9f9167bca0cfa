"""live(): record the autograd graph as it grows, one tensor operation at a time."""

from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.autograd.function import Function
from torch.overrides import TorchFunctionMode

from . import _display, _source, _tags
from ._tags import tensors_in
from ._records import Node, owner
from .capture import param_names_of, record
from .graph import Graph

__all__ = ["Recording", "Step", "live"]

_RENAME = {"rmul": "mul", "radd": "add"}  # 2 * x is a mul, as the node says
_serial = [0]  # each recording tags nodes under its own metadata key
REPR_STEPS = 30  # steps listed by repr(); longer recordings show the first and last ones


@dataclass
class Step:
    """One recorded operation.

    Attributes:
        index: Position in the recording, from 0.
        op: The operation (``mul``, ``linear``, ``ThresholdReLU.apply``).
        where: ``"cell, line 3"`` or ``"file.py:12"``.
        code: That line's source text.
        module: The module whose forward ran the op (dotted name when ``live`` was
            given the model, else its class name), or ``None`` (outside any module,
            or in the given model's own ``forward``).
        inputs, outputs: Shapes of the tensor arguments and results.
        nodes: Ids of the autograd nodes this op created (in :attr:`Recording.nodes`).
        note: Why no node was created, when none was.
    """

    index: int
    op: str
    where: str
    code: str
    module: str | None
    inputs: list[tuple[int, ...]]
    outputs: list[tuple[int, ...]]
    nodes: list[int] = field(default_factory=list)
    note: str = ""

    def text(self, names=None, module_types=None) -> str:
        """One-step summary: op, source line, shapes, and the nodes it created."""
        shapes = f"{_shapes(self.inputs)} -> {_shapes(self.outputs)}"
        made = ", ".join(names[i] for i in self.nodes) if names else f"{len(self.nodes)} nodes"
        made = f"+ {made}" if self.nodes else f"no node ({self.note})"
        kind = (module_types or {}).get(self.module)
        inside = f" in {self.module}" + (f" ({kind})" if kind else "") if self.module else ""
        return f"{self.op}{inside}  [{self.where}] {self.code}\n  {shapes}  {made}"


def _shapes(shapes) -> str:
    return ", ".join(str(tuple(s)) for s in shapes) or "()"


class Recording:
    """What ran inside a :func:`live` block: steps, and the graph they built.

    Displays as a stepper (slider and play controls over the final graph, each
    step's op and source line, its new nodes lit); ``repr`` is a text table.

    Attributes:
        steps: :class:`Step` per recorded op, in the order they ran.
        nodes, edges: The graph built inside the block (records, no torch objects).
    """

    def __init__(self, module_names, param_names):
        self.steps: list[Step] = []
        self.nodes: list[Node] = []
        self.edges: list[tuple[int, int]] = []
        self.module_types: dict[str, str] = {}
        self._module_names = module_names  # id(module) -> dotted name; dropped at exit
        self._param_names = param_names
        self._key = f"dynagraph.live.{_serial[0]}"
        _serial[0] += 1
        self._start = None
        self._modules: list[str | None] = []
        self._inside_apply = 0
        self._view = None
        self._lines: dict = {}  # (filename, lineno) -> (where, code): loops repeat lines

    def __repr__(self) -> str:
        lines = [f"<dynagraph.Recording: {len(self.steps)} steps, {len(self.nodes)} nodes>"]
        names = [n.name for n in self.nodes]
        shown = self.steps if len(self.steps) <= REPR_STEPS else self.steps[:REPR_STEPS - 5]
        lines += [f"{s.index:>3} {s.text(names, self.module_types)}" for s in shown]
        if len(shown) < len(self.steps):
            lines.append(f"... {len(self.steps) - len(shown) - 5:,} more steps (rec.steps has them all) ...")
            lines += [f"{s.index:>3} {s.text(names, self.module_types)}" for s in self.steps[-5:]]
        return "\n".join(lines)

    def graph(self, *, upto: int | None = None, title=None) -> Graph:
        """The graph built by steps ``0..upto`` (all steps by default; a negative
        ``upto`` counts from the end, as in Python: ``-1`` is the last step).

        Raises:
            IndexError: ``upto`` names no step.
        """
        keep = None
        if upto is not None:
            if not -len(self.steps) <= upto < len(self.steps):
                raise IndexError(f"upto={upto!r} names no step: the recording has {len(self.steps)} steps")
            keep = {i for s in self.steps[: upto % len(self.steps) + 1] for i in s.nodes} | self._earlier()
        nodes = [n for n in self.nodes if keep is None or n.id in keep]
        edges = [e for e in self.edges if keep is None or (e[0] in keep and e[1] in keep)]
        return Graph(nodes, edges, self.module_types, title=title)

    def _earlier(self) -> set[int]:
        made = {i for s in self.steps for i in s.nodes}
        return {n.id for n in self.nodes if n.id not in made}

    def _overlays(self) -> _display.Overlays:
        """The steps, and each node's source line, for the picture."""
        names = [n.name for n in self.nodes]
        steps = [(_template(s, s.text(names, self.module_types)), s.nodes) for s in self.steps]
        info = {nid: f"step {s.index}: {s.op} [{s.where}] {s.code}" for s in self.steps for nid in s.nodes}
        return _display.Overlays(steps=steps, info=info, mode="reveal")

    def _repr_mimebundle_(self, include=None, exclude=None):
        if not self.steps:
            return {"text/plain": repr(self)}
        return _display.bundle(self.graph(), repr(self), self._overlays(),
                               caption=f"{len(self.steps):,} steps")

    # -- recording ---------------------------------------------------------------

    def _on_op(self, op, args, kwargs, out, inplace_target=None):
        outs = tensors_in(out, [])
        if inplace_target is not None and not any(t is inplace_target for t in outs):
            outs.append(inplace_target)  # setitem returns None; mul_ returns its target
        if not outs:
            return
        line = _source.caller(3)
        described = self._lines.get(line)
        if described is None:
            described = self._lines[line] = _source.describe(*line)
        where, code = described
        module = self._modules[-1] if self._modules else None
        ins = tensors_in(args, [])
        if kwargs:
            tensors_in(kwargs, ins)
        new = self._tag(outs, module)
        note = "" if new else _why_no_node(ins, outs)
        self.steps.append(Step(len(self.steps), op, where, code, module,
                               [tuple(t.shape) for t in ins], [tuple(t.shape) for t in outs],
                               new, note))
        if self._view is not None:
            self._view.maybe_update(self)

    def _tag(self, outs, module) -> list[int]:
        """Record the autograd nodes not seen before that lead to ``outs``."""
        key, new, pending = self._key, [], []
        stack = [t.grad_fn for t in outs if t.grad_fn is not None]
        while stack:
            fn = stack.pop()
            meta = fn.metadata
            if key in meta:
                continue
            nid = len(self.nodes)
            meta[key] = nid
            node = record(fn, nid, self._param_names, tags=False)  # we set the module
            earlier = node.seq is not None and self._start is not None and node.seq < self._start
            if earlier:  # built before the block: drawn, not credited to this step
                node.label += "\n(before live)"
            else:
                new.append(nid)
                if node.kind == "parameter":
                    node.module = owner(node.label)
                elif module is not None and self._module_names:
                    node.module = module
                    meta.setdefault(_tags.KEY, module)
            self.nodes.append(node)
            if earlier:
                continue
            for child, _ in fn.next_functions:
                if child is not None:
                    pending.append((child, nid))
                    stack.append(child)
        for child, nid in pending:
            self.edges.append((child.metadata[key], nid))
        return sorted(new)


def _template(step: Step, text: str):
    """``text`` with its module's name marked, so that a loop over many modules of one
    class (an MLP's 1,000 layers) shares one text in the page."""
    if not step.module:
        return text
    template = text.replace(f" in {step.module}", f" in {_display.FILL}", 1)
    return (template, step.module) if template != text else text


def _why_no_node(ins, outs) -> str:
    if torch.is_inference_mode_enabled():
        return "inference_mode"
    if not torch.is_grad_enabled():
        return "grad disabled: torch.no_grad()"
    if any(t.requires_grad and t.grad_fn is None for t in outs):
        return "a leaf: autograd records it where an op uses it"
    if not any(t.requires_grad for t in ins):
        return "no input requires grad"
    if not any(t.is_floating_point() or t.is_complex() for t in outs):
        return "integer or bool result: not differentiable"
    return "no new node"


def _op_name(func) -> str:
    name = getattr(func, "__name__", None) or str(func)
    if name == "__get__":  # a property read (x.T, x.grad): name the property
        name = getattr(getattr(func, "__self__", None), "__name__", name)
    if name.startswith("__") and name.endswith("__"):
        name = name[2:-2]
    return _RENAME.get(name, name)


class _Mode(TorchFunctionMode):
    """Sees every user-level tensor op; nested calls inside an op are not re-seen."""

    def __init__(self, rec: Recording):
        super().__init__()
        self.rec = rec

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        rec = self.rec
        if rec._inside_apply:  # ops inside a custom Function's forward: part of its step
            return out
        caller = sys._getframe(1).f_code
        nested = caller is _Mode.__torch_function__.__code__  # an inner live() passing the op on
        if not nested and caller.co_filename.startswith(_source.PACKAGE_DIR):
            return out  # dynagraph's own bookkeeping (e.g. track_modules' probe)
        name = _op_name(func)
        target = args[0] if (name.endswith("_") or name == "setitem") and args and \
            isinstance(args[0], torch.Tensor) else None
        rec._on_op(name, args, kwargs, out, target)
        return out


class _View:
    """Redraws the graph so far in one display area while the block runs.

    A redraw waits at least ``interval`` seconds and at least ``PATIENCE`` times as
    long as the last redraw took, so drawing costs the loop it watches at most
    ``1 / PATIENCE`` of its time however big the graph grows (and the picture rolls
    repeats, so it stays small). Outside IPython (a plain script) there is nowhere to
    draw: the view does nothing, rather than print object reprs to stdout.
    """

    PATIENCE = 4

    def __init__(self, interval: float):
        self.interval, self.handle, self.cost = interval, None, 0.0
        self.last = time.perf_counter()
        try:
            from IPython import get_ipython
            from IPython.display import display
        except ImportError:
            return
        if get_ipython() is None:
            return
        from . import render
        render.find_renderer()  # no renderer: fail now, saying how to install one
        self.handle = display({"text/plain": "dynagraph: recording..."}, raw=True, display_id=True)

    def maybe_update(self, rec, force=False):
        now = time.perf_counter()
        due = now - self.last >= max(self.interval, self.PATIENCE * self.cost)
        if self.handle is None or not rec.nodes or not (force or due):
            return
        graph = rec.graph(title=f"{len(rec.steps)} steps so far")
        self.handle.update(_display.bundle(graph, repr(graph)), raw=True)
        self.last = time.perf_counter()
        self.cost = self.last - now


@contextlib.contextmanager
def _patched_apply(rec: Recording):
    """Record ``Function.apply`` as one step; the TorchFunctionMode does not see it."""
    original = Function.__dict__["apply"]

    def apply(cls, *args, **kwargs):
        rec._inside_apply += 1
        try:
            out = original.__func__(cls, *args, **kwargs)
        finally:
            rec._inside_apply -= 1
        if not rec._inside_apply:
            rec._on_op(f"{cls.__name__}.apply", args, kwargs, out)
        return out

    Function.apply = classmethod(apply)
    try:
        yield
    finally:
        Function.apply = original


@contextlib.contextmanager
def _module_stack(rec: Recording):
    """Keep the stack of running modules (global hooks, removed on exit)."""
    def pre(module, args):
        name = rec._module_names.get(id(module), type(module).__name__)
        rec._modules.append(name or None)  # "" is the model itself: its ops are in no module

    def post(module, args, output):
        if rec._modules:
            rec._modules.pop()

    handles = [nn.modules.module.register_module_forward_pre_hook(pre),
               nn.modules.module.register_module_forward_hook(post, always_call=True)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


@contextlib.contextmanager
def live(model: nn.Module | None = None, *, params=None, view: bool = False,
         interval: float = 1.0):
    """Record every tensor operation in the block and the autograd nodes it creates.

    Args:
        model: Names modules (``layers.0.linear1``) and parameters in the recording;
            without it steps name a module by its class.
        params: A mapping name -> tensor naming leaves (inputs, weights) instead.
        view: In Jupyter, redraw the growing graph in place while the block runs
            (outside IPython there is nowhere to draw, and nothing happens).
        interval: Seconds between redraws of the live view.

    Yields:
        A :class:`Recording`, filled as the block runs. On exit (even when the block
        raises) the mode, hooks and patch are removed and no tensor or autograd node
        is kept.

    Raises:
        TypeError: ``model`` is not an ``nn.Module``.
        ValueError: ``interval`` is not positive.
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
    names, types = param_names_of(model if model is not None else params)
    module_names = {id(m): n for n, m in model.named_modules()} if model is not None else {}
    rec = Recording(module_names, names)
    rec.module_types = types
    if model is not None:
        _tags._used = True  # capture (dg.draw) reads the module tags this recording writes
    with torch.enable_grad():
        rec._start = _tags._current_seq()
    if view:
        rec._view = _View(interval)
    try:
        with _module_stack(rec), _patched_apply(rec), _Mode(rec):
            yield rec
    finally:
        if rec._view is not None:
            rec._view.maybe_update(rec, force=True)
            rec._view = None
        rec._module_names = {}
        rec._param_names = {}
        rec._modules.clear()
        rec._lines.clear()
