"""Walk the autograd graph behind tensors into plain records (no drawing here)."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from . import _guards, _tags, _torch, passes
from ._measure import measure_into
from ._records import Node, dtype_text, owner, shape_text
from ._walk import reach
from .memory import SavedMemory

__all__ = ["capture", "named_roots", "node_name", "number_modules", "number_of", "param_names_of", "record",
           "walk"]

_PREFIX = "torch::autograd::"

# What draw() and friends accept (checked at run time: other types raise TypeError).
Roots = torch.Tensor | list[torch.Tensor] | tuple[torch.Tensor, ...] | Mapping[str, torch.Tensor]
Params = nn.Module | Mapping[str, torch.Tensor] | None


def node_name(fn: _torch.GradFn) -> str:
    """``fn.name()`` without the C++ namespace (``AccumulateGrad``, not
    ``torch::autograd::AccumulateGrad``)."""
    name = fn.name()
    return name[len(_PREFIX):] if name.startswith(_PREFIX) else name


def capture(roots: Roots, *, params: Params = None, show_saved: bool = False,
            memory: SavedMemory | None = None) -> tuple[list[Node], list[tuple[int, int]], dict[str, str]]:
    """Walk ``grad_fn`` from ``roots`` and return ``(nodes, edges, module_types)``.

    Iterative (no recursion limit), breadth-first from the roots; keeps no reference
    to any tensor or autograd node once it returns (a graph deeper than
    ``_torch.SAFE_DEPTH`` is held until its roots die, then freed node by node).
    Edges point the way data flows in the forward pass (producer -> consumer).
    Given ``memory`` (an empty :class:`dynagraph.memory.SavedMemory`), what each node
    saved for backward is measured into it in the same walk.

    Raises:
        TypeError: a root or parameter is not a tensor, or ``params`` has the wrong type.
        ValueError: no roots, or a root that autograd recorded nothing for.
    """
    numbers: dict[str, int | None] | None = {} if _tags.active() else None  # (modules are tagged)
    param_names, module_types = param_names_of(params, numbers=numbers)
    on_record = None if memory is None else functools.partial(measure_into, memory)
    nodes, edges, _ = walk(named_roots(roots), param_names, show_saved, on_record=on_record)
    number_modules(nodes, numbers or {})
    return nodes, edges, module_types


def walk(roots: list[tuple[str, torch.Tensor]], param_names: Mapping[int, str], show_saved: bool = False,
         slots: dict[int, list[tuple[int, int] | None]] | None = None,
         on_record: Callable[[Node, _torch.GradFn], None] | None = None,
         ) -> tuple[list[Node], list[tuple[int, int]], list[_torch.GradFn | None]]:
    """The walk behind :func:`capture`; also returns the autograd node of each record.

    ``fns[i]`` is the autograd node of ``nodes[i]`` (``None`` for outputs). Callers
    that keep ``fns`` keep the graph alive: drop it when done. A deep graph is held
    until its roots die, then freed root first (torch would crash freeing it).

    ``slots``, a dict, receives for each record id the node's inputs in autograd's
    order: ``(producer id, output number of the producer)``, or ``None`` where an
    input needs no gradient. ``on_record(node, fn)`` is called as each op or leaf
    record is made (the memory measure, in the same pass).
    """
    fns: list[_torch.GradFn | None] = []
    try:
        return _guards.paused_gc(_walk, roots, param_names, show_saved, slots, on_record, fns)
    except BaseException:  # an interrupt before a deep graph was held: its wrappers wait to be freed in order
        _torch.keep_wrappers(fns)
        raise


def _walk(roots: list[tuple[str, torch.Tensor]], param_names: Mapping[int, str], show_saved: bool,
          slots: dict[int, list[tuple[int, int] | None]] | None,
          on_record: Callable[[Node, _torch.GradFn], None] | None, fns: list[_torch.GradFn | None],
          ) -> tuple[list[Node], list[tuple[int, int]], list[_torch.GradFn | None]]:
    nodes: list[Node] = []
    edges: list[tuple[int, int]] = []
    ids: dict[_torch.GradFn, int] = {}  # autograd node -> record id, given when first met

    def visit(fn: _torch.GradFn) -> int:
        if fn not in ids:
            ids[fn] = len(nodes)
            nodes.append(record(fn, len(nodes), param_names, show_saved))
            fns.append(fn)
            if on_record is not None:
                on_record(nodes[-1], fn)
        return ids[fn]

    def enter(fn: _torch.GradFn) -> Any:  # breadth-first: entered in the order visit() met them
        consumer = ids[fn]
        row = slots.setdefault(consumer, []) if slots is not None else None
        inputs = fn.next_functions
        for child, k in inputs:
            if child is None:
                if row is not None:
                    row.append(None)
                continue
            producer = visit(child)
            edges.append((producer, consumer))
            if row is not None:
                row.append((producer, k))
        return inputs or True  # reach() goes on into them without reading them again

    starts: list[tuple[torch.Tensor, int]] = []
    firsts: list[_torch.GradFn] = []  # each root's node
    for label, tensor in roots:
        out = len(nodes)
        nodes.append(Node(id=out, name="output", kind="output", label=label, **_meta_of(tensor)))
        fns.append(None)
        fn = tensor.grad_fn
        if fn is None:  # a leaf root: its AccumulateGrad, shared with its other uses
            fn = _torch.gradient_edge_node(tensor)
        start = visit(fn)
        firsts.append(fn)
        edges.append((start, out))
        starts.append((tensor, start))
    reach(firsts, enter, breadth_first=True)
    _place_parameters(nodes)
    _torch.hold_deep_graph(starts, fns, edges)
    return nodes, edges, fns


def named_roots(roots: Roots) -> list[tuple[str, torch.Tensor]]:
    if isinstance(roots, torch.Tensor):
        items = [("output", roots)]
    elif isinstance(roots, Mapping):
        items = [(str(k), v) for k, v in roots.items()]
    elif isinstance(roots, (list, tuple)):
        items = [(f"output[{i}]", v) for i, v in enumerate(roots)]
    else:
        fields = [f.name for f in dataclasses.fields(roots)] if dataclasses.is_dataclass(roots) else []
        raise TypeError(  # a model's output as a dataclass: name the tensor it holds
            f"roots must be a tensor, or a list, tuple or dict of tensors; got {type(roots).__name__}"
            + (f" (a dataclass with fields {', '.join(fields)}: pass one of its tensors, such as "
               f"out.{fields[0]})" if fields else "")
        )
    if not items:
        raise ValueError(f"roots is empty ({roots!r}): pass at least one tensor to draw")
    for label, t in items:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"root {label!r} is a {type(t).__name__}, not a tensor")
        if t.grad_fn is None and not t.requires_grad and not (t.is_floating_point() or t.is_complex()):
            raise ValueError(
                f"root {label!r} has dtype {t.dtype}: integer and bool "
                "tensors are not differentiable, so autograd records no graph for them. Draw a "
                "float tensor instead: compute it from float inputs that require grad "
                "(torch.ones(3, requires_grad=True), or x.float().requires_grad_())."
            )
        if t.grad_fn is None and not t.requires_grad:
            raise ValueError(
                f"root {label!r} has no grad_fn and does not require grad, so autograd "
                "recorded no graph for it. Make its inputs require grad "
                "(torch.ones(3, requires_grad=True)) and compute it outside "
                "torch.no_grad() / torch.inference_mode(). Inside torch.vmap no tensor shows "
                "its graph: draw what the vmap call returns."
            )
    return items


def param_names_of(params: Params, module_names: dict[int, str] | None = None,
                   numbers: dict[str, int | None] | None = None) -> tuple[dict[int, str], dict[str, str]]:
    """``params`` -> ({id(tensor): name}, {module name: class name}); for a module, also
    fills ``module_names`` (when given) with {id(submodule): dotted name} ("" for itself),
    and ``numbers`` with ``{dotted name: number_of(submodule)}`` (:attr:`Node.module_number`).

    One walk of the modules gives all three (``named_parameters`` walks them again, and
    hashes each parameter into a set: a ``live()`` block paid three walks on entry).
    """
    if params is None:
        return {}, {}
    if isinstance(params, nn.Module):
        names: dict[int, str] = {}
        types: dict[str, str] = {}
        for prefix, module in params.named_modules():  # (each module once, as named_parameters)
            if module_names is not None:
                module_names[id(module)] = prefix
            if prefix:
                types[prefix] = type(module).__name__
                if numbers is not None:
                    numbers[prefix] = number_of(module)
            for name, p in _torch.own_parameters(module):
                if p is not None:  # tied weights keep their first name
                    names.setdefault(id(p), f"{prefix}.{name}" if prefix else name)
        return names, types
    if isinstance(params, Mapping):
        names = {}
        for name, t in params.items():
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"params[{name!r}] is a {type(t).__name__}, not a tensor")
            names.setdefault(id(t), str(name))
        return names, {}
    raise TypeError(
        f"params must be an nn.Module or a mapping name -> tensor; got {type(params).__name__}"
    )


# Which tensor a leaf is, and which module made a node, as a number: id(object) -> (a
# weak reference, its number). An object keeps its number while it lives; one made later
# never gets it again.
_OBJECTS: dict[int, tuple[weakref.ref[Any], int]] = {}
_NUMBERS = itertools.count(1)


def number_of(obj: torch.Tensor | nn.Module) -> int | None:
    """A leaf's :attr:`Node.tensor`, a module's :attr:`Node.module_number`: the same
    number in every graph recorded while ``obj`` lives, in this process; a new one for
    any other object (``None`` for one that takes no weak reference)."""
    key = id(obj)
    known = _OBJECTS.get(key)
    if known is not None and known[0]() is obj:
        return known[1]
    number = next(_NUMBERS)

    def forget(_: object) -> None:  # (only its own entry: the id may be taken again)
        if _OBJECTS.get(key, (None, 0))[1] == number:
            _OBJECTS.pop(key, None)

    try:
        _OBJECTS[key] = (weakref.ref(obj, forget), number)
    except TypeError:
        return None
    return number


def number_modules(nodes: list[Node], numbers: Mapping[str, int | None]) -> None:
    """Set each node's :attr:`Node.module_number` from its module's name."""
    if numbers:
        for n in nodes:
            if n.module is not None:
                n.module_number = numbers.get(n.module)


def _leaf_kind(tensor: torch.Tensor, param_names: Mapping[int, str]) -> tuple[str, str]:
    """``(kind, label)`` of a leaf: parameters are ``nn.Parameter``s, other leaves inputs."""
    kind = "parameter" if isinstance(tensor, nn.Parameter) else "input"
    return kind, param_names.get(id(tensor)) or kind


def _meta_of(tensor: torch.Tensor) -> dict[str, Any]:
    """``shape``, ``dtype`` and ``device`` of ``tensor``, as :class:`Node` fields."""
    return {"shape": _torch.shape_of(tensor), "dtype": dtype_text(tensor.dtype),
            "device": dtype_text(tensor.device)}


def _output_meta(fn: _torch.GradFn) -> tuple[tuple[int, ...] | None, str | None, str | None]:
    """``(shape, dtype, device)`` of the node's first forward output (``None`` each if
    unknown), as :class:`Node` fields (a tuple: this runs once per node)."""
    meta = _torch.output_meta(fn)
    if meta is None:
        return None, None, None
    return meta[0], dtype_text(meta[1]), dtype_text(meta[2])


_KINDS: dict[type, tuple[str, str, str]] = {}  # node class -> (name, kind, label), where fixed


def _kind_of(fn: _torch.GradFn) -> tuple[str, str, str]:
    """``(name, kind, label)`` of an autograd node; looked up once per node class
    when the class fixes them (built-in ops and custom Functions: nearly always)."""
    cls = type(fn)
    known = _KINDS.get(cls)
    if known is not None:
        return known
    name = node_name(fn)
    if name == "AccumulateGrad":
        known = (name, "leaf", name)
    elif _torch.is_custom(fn):
        known = (name, "custom", _torch.custom_name(fn))  # the user's Function class
    else:
        known = (name, "op", name)
    if cls.__name__ == name:  # one class, one name (not a shared wrapper class)
        if len(_KINDS) >= 4096:  # custom Functions redefined cell after cell: keep it small
            _KINDS.clear()
        _KINDS[cls] = known
    return known


def record(fn: _torch.GradFn, nid: int, param_names: Mapping[int, str], show_saved: bool = False,
           tags: bool = True) -> Node:
    """The :class:`Node` record of autograd node ``fn`` (``tags``: read its module tag)."""
    name, kind, label = _kind_of(fn)
    if kind == "leaf":
        var = fn.variable  # type: ignore[attr-defined]  # AccumulateGrad's leaf; the Node stub lacks it
        kind, label = _leaf_kind(var, param_names)
        return Node(id=nid, name=name, kind=kind, label=label, tensor=number_of(var), **_meta_of(var))
    seq = _torch.sequence_nr(fn)
    if seq is None:  # no creation counter: discovery order (found later, made earlier)
        seq = -nid
    shape, dtype, device = _output_meta(fn)
    node = Node(id=nid, name=name, kind=kind, label=label, seq=seq, shape=shape, dtype=dtype, device=device)
    if tags and _tags.active():
        node.module = _tags.module_of(fn)
        node.calls = _tags.calls_of(_torch.metadata(fn).get(_tags.CALLS), node.module)
    if passes.active():
        node.derivative = passes.derivative_of(fn)
    if show_saved:
        node.saved = _saved(fn)
    return node


def _saved(fn: _torch.GradFn) -> list[tuple[str, str]]:
    """Describe each ``_saved_*`` attribute; freed buffers say so instead of raising."""
    if _torch.is_custom(fn):  # a custom Function keeps ctx.saved_tensors instead
        return _saved_custom(fn)
    out: list[tuple[str, str]] = []
    for name, value in _torch.saved_values(fn):
        if value is _torch.FREED:
            out.append((name, "freed"))
        elif isinstance(value, torch.Tensor):  # sizes, strides and scalars are not shown
            out.append((name, _tensor_text(value)))
    return out


def _saved_custom(fn: _torch.GradFn) -> list[tuple[str, str]]:
    try:
        tensors = fn.saved_tensors  # type: ignore[attr-defined]  # BackwardCFunction's; not in the Node stub
    except RuntimeError:  # freed by backward(); how many there were is gone with them
        return [("tensors", "freed")]
    return [(f"tensors[{i}]", _tensor_text(t)) for i, t in enumerate(tensors) if isinstance(t, torch.Tensor)]


def _tensor_text(tensor: torch.Tensor) -> str:
    """``(3, 16) float32``: a saved tensor's shape and dtype."""
    return f"{shape_text(_torch.shape_of(tensor))} {dtype_text(tensor.dtype)}"


def _place_parameters(nodes: list[Node]) -> None:
    """Put each parameter in the module its name says, once ops carry module tags.

    Without tags (no :func:`track_modules` or live recording) nothing is grouped: a
    frame holding only parameters would pull the layout apart.
    """
    if not any(n.module for n in nodes if n.seq is not None):
        return
    for node in nodes:
        if node.kind == "parameter" and node.module is None:
            node.module = owner(node.label)
