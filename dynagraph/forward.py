"""trace_forward(): watch forward-mode AD run, op by op, with the tangent norm on each edge."""

from __future__ import annotations

import contextlib
import math
import warnings
import weakref
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

import torch
import torch.autograd.forward_ad as fwAD
from torch.overrides import TorchFunctionMode

from . import _patch, _torch
from ._dot import Overlay
from ._language import N_, counted, tr
from ._records import Node, dtype_text
from ._replay import Replay
from ._tags import tensors_in

__all__ = ["ForwardTrace", "trace_forward"]

Edge = tuple[int, int, int]  # (producer, consumer, number of the consumer's tensor argument)
_SKIP = frozenset({"_unpack_dual", "unpack_dual", "dim", "size", "numel", "is_floating_point"})


class ForwardTrace(Replay):
    """The ops a forward-mode computation ran, and the tangent on each edge.

    Attributes:
        nodes, edges: The computation as a graph: one ``input`` node per dual tensor
            made in the block (``fwAD.make_dual``) or read from outside it, one ``op``
            node per op whose result carries a tangent, in the order they ran, and an
            ``output`` node for each result no later op read. Edges point the way
            data and tangents flow (producer -> consumer).
        order: Node ids in the order they ran (inputs where first met).
        edge_norms: ``{(src, dst, slot): L2 norm}`` of the tangent of the tensor that
            ``src`` made and ``dst`` read as its ``slot``-th tensor argument (0 for the
            edge into an output). ``x * x`` reads ``x`` twice: two edges, one tangent.
        tangent_norms: ``{node id: L2 norm}`` of the tangent of each node's result (of
            its first tensor result).

    Displays as the graph with each edge's width and label from its tangent norm,
    arrows in the forward direction, and a stepper that reveals the ops in the order
    they ran.
    """

    _CAPTION = N_("forward mode: {runs}. The arrows point the way tangents flow: from the inputs to the "
                  "outputs")
    _REPR = N_("<dynagraph.ForwardTrace: {runs}, {tangents}>")

    def __init__(self, nodes: list[Node], edges: list[tuple[int, int]]) -> None:
        self.nodes, self.edges = nodes, edges
        self.order: list[int] = []
        self.edge_norms: dict[Edge, float] = {}
        self.tangent_norms: dict[int, float] = {}

    def _repr_fields(self) -> dict[str, str]:
        return {"tangents": counted(len(self.edge_norms), N_("1 edge tangent"), N_("{n} edge tangents"))}

    def _run_name(self, node: Node) -> str:
        return node.label

    def node(self, node_id: int) -> Node:
        """The record with id ``node_id``."""
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(f"no node with id {node_id!r} in this trace (see [n.id for n in trace.nodes])")

    def node_name(self, node_id: int) -> str:
        """The op (or ``input``, ``output``) of node ``node_id``."""
        return self.node(node_id).name

    def _overlays(self) -> Overlay:
        pairs: dict[tuple[int, int], list[float]] = {}
        for (src, dst, _), v in sorted(self.edge_norms.items()):
            pairs.setdefault((src, dst), []).append(v)
        by_id = {n.id: n for n in self.nodes}
        steps = [(_ran(by_id[nid], self.tangent_norms.get(nid)), [nid]) for nid in self.order]
        # (one tensor read twice carries one tangent: the pair shows it)
        return Overlay(edge_norms={pair: vs[0] for pair, vs in pairs.items()},
                       parallel_norms={pair: vs for pair, vs in pairs.items() if len(vs) > 1},
                       badges={nid: f"#{k + 1}" for k, nid in enumerate(self.order)},
                       steps=steps, mode="reveal", forward=True)


def _ran(node: Node, norm: float | None) -> str:
    """A step's text: what ran, and the norm of the tangent it made."""
    told = "" if norm is None else tr(", \u2016t\u2016 = {norm}", norm=f"{norm:.3g}")
    if node.kind == "input":
        return tr("{leaf}: tangent in", leaf=node.label) + told
    return tr("{op} ran: tangent out", op=node.label) + told


class _Recorder(TorchFunctionMode):
    """Notes each op whose result carries a tangent, and the tangents' norms (on the device)."""

    def __init__(self, names: Mapping[int, str]) -> None:
        super().__init__()
        self.names = names
        self.nodes: list[Node] = []
        # id(tensor) -> (the tensor, its producer, which of the producer's results it is, its version)
        self.made: dict[int, tuple[weakref.ref, int, int, int]] = {}
        # storage -> each recorded in-place write into it: (its version after, the op, the offsets written)
        self.writers: dict[object, list[tuple[int, int, _Offsets | None]]] = {}
        self.edges: list[tuple[int, int, int, int]] = []  # (producer, consumer, slot, which result)
        self.read: set[int] = set()  # node ids some op read
        self.norms: dict[tuple[int, int], torch.Tensor] = {}  # (node id, result) -> tangent norm (0-dim)
        self.edge_norms: dict[Edge, torch.Tensor] = {}  # an edge whose tangent changed after its producer ran
        self.meta = 0  # tangents on the meta device (no values: their norms are nan)

    def __torch_function__(self, func: Callable[..., Any], types: Collection[type], args: Sequence[Any] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        name = _patch.op_name(func)
        if name in _SKIP:
            return func(*args, **kwargs)
        with _torch.no_torch_function():
            try:  # what each tensor argument carries in, read before the op (an in-place op changes it)
                ins = tensors_in(kwargs, tensors_in(args, []))
                before: list[tuple[Any, ...] | None] | None = [self._before(t) for t in ins]
            except Exception:  # noqa: BLE001 - bookkeeping never breaks the user's computation
                before = None
        out = func(*args, **kwargs)
        if before is None:
            return out
        with _torch.no_torch_function():
            try:
                self._note(name, ins, before, out)
            except Exception:  # noqa: BLE001 - bookkeeping never breaks the user's computation
                pass
        return out

    def _before(self, tensor: torch.Tensor) -> tuple[Any, ...] | None:
        """What ``tensor`` carries into an op: ``("op", node, result)`` for a recorded
        result unchanged since, else ``(node or None, tangent norm)`` (a dual tensor made
        outside the block, or a result written into in place since, through a view or by
        an op that made no tangent); ``None`` for a tensor without a tangent."""
        known = self.made.get(id(tensor))
        if known is not None and known[0]() is not tensor:
            known = None  # (another tensor's, gone: its id was reused)
        if known is not None and known[3] == _torch.version_of(tensor):
            return "op", known[1], known[2]
        tangent = _tangent(tensor)
        if tangent is None:
            return None
        if known is None:
            return None, self._norm(tangent)
        writer = self._writer(tensor, known)
        if writer is None:  # written into since, but only where it holds no element
            return "op", known[1], known[2]
        return writer, self._norm(tangent)

    def _writer(self, tensor: torch.Tensor, known: tuple[weakref.ref, int, int, int]) -> int | None:
        """The op that last changed ``tensor`` (``known``: what :attr:`made` holds of it,
        its storage version last) in place, through itself or a view sharing an element
        with it; ``None`` where every write since is recorded and none of them touched its
        elements. Where a write is not recorded (an op that made no tangent), or the
        elements cannot be told, the last recorded writer, else the op that made it."""
        made, now = known[3], _torch.version_of(tensor)
        writes = [w for w in self.writers.get(_torch.storage_key(tensor), []) if made < w[0] <= now]
        if not writes:
            return known[1]
        mine = _offsets(tensor)
        for _, nid, written in reversed(writes):
            if _overlap(mine, written):
                return nid
        if {w[0] for w in writes} == set(range(made + 1, now + 1)):
            return None
        return writes[-1][1]

    def _note(self, name: str, ins: list[torch.Tensor], before: list[tuple[Any, ...] | None],
              out: object) -> None:
        outs = [out] if isinstance(out, torch.Tensor) else tensors_in(out, [])
        if out is None and name == "setitem" and ins:  # y[i] = v writes into y, returns None
            outs = [ins[0]]
        tangents = [_tangent(t) for t in outs]
        if not any(t is not None for t in tangents):
            return
        if name == "_make_dual" and tangents[0] is not None:  # a new dual tensor: an input
            label = self.names.get(id(ins[0]), "input") if ins else "input"
            self._add(Node(id=len(self.nodes), name="input", kind="input", label=label, **_meta(outs[0])),
                      outs[0], self._norm(tangents[0]))
            return
        sources = [self._source(t, b) for t, b in zip(ins, before)]
        nid = len(self.nodes)
        k, first = next((k, t) for k, t in enumerate(outs) if tangents[k] is not None)
        self.nodes.append(Node(id=nid, name=name, kind="op", label=name, seq=nid, **_meta(first)))
        for k, (t, tan) in enumerate(zip(outs, tangents)):
            if tan is not None:
                self._made(nid, k, t, self._norm(tan))
                if any(t is i for i in ins):  # written in place: its base, views sharing an element too
                    writes = self.writers.setdefault(_torch.storage_key(t), [])
                    writes.append((_torch.version_of(t), nid, _offsets(t)))
                    del writes[:-KEPT_WRITES]
        for slot, (src, b) in enumerate(zip(sources, before)):
            if src is not None:
                self.edges.append((src[0], nid, slot, src[1]))
                self.read.add(src[0])
                if b is not None and b[0] != "op":
                    self.edge_norms[src[0], nid, slot] = b[1]

    def _add(self, node: Node, tensor: torch.Tensor, norm: torch.Tensor) -> None:
        self.nodes.append(node)
        self._made(node.id, 0, tensor, norm)

    def _made(self, nid: int, k: int, tensor: torch.Tensor, norm: torch.Tensor) -> None:
        """Node ``nid`` made ``tensor`` as its ``k``-th result, with a tangent of ``norm``."""
        self.made[id(tensor)] = (weakref.ref(tensor), nid, k, _torch.version_of(tensor))
        self.norms[nid, k] = norm

    def _norm(self, tangent: torch.Tensor) -> torch.Tensor:
        """The L2 norm of ``tangent`` (0-dim, on its device)."""
        if tangent.is_meta:  # a shape, no values: nan, said on exit (a meta norm stopped the exit)
            self.meta += 1
            return torch.tensor(math.nan, dtype=torch.float64)
        return torch.linalg.vector_norm(tangent.detach())

    def _source(self, tensor: torch.Tensor, before: tuple[Any, ...] | None) -> tuple[int, int] | None:
        """The node whose result ``tensor`` carried into the op and which result it is:
        a recorded op, or a new input node for a dual tensor made outside the block;
        ``None`` for a tensor that carried no tangent in."""
        if before is None:
            return None
        if before[0] == "op":
            return before[1], before[2]
        if before[0] is not None:
            return before[0], 0
        nid = len(self.nodes)  # (noted as made by it: the next op that reads it reads this node)
        self._add(Node(id=nid, name="input", kind="input", label=self.names.get(id(tensor), "input"),
                       **_meta(tensor)), tensor, before[1])
        return nid, 0


# A view's elements are compared by their offsets in the storage. A tensor of more elements
# than this, or one that is its whole storage, is taken to share one with any write (no
# offsets listed); the last this many writes into a storage are kept (an older one is
# taken to share an element with what it may have changed).
MAX_OFFSETS = 10_000
KEPT_WRITES = 64


_Offsets = tuple[int, torch.Tensor]  # (element size in bytes, each element's offset in the storage)


def _offsets(t: torch.Tensor) -> _Offsets | None:
    """Where ``t``'s elements are in its storage (``y[0]`` and ``y[1]`` share none, ``y[0]``
    and ``y.t()`` one); ``None`` where ``t`` fills its storage, is over :data:`MAX_OFFSETS`
    elements, or where its elements cannot be told (a tensor torch.func wraps)."""
    try:
        if t.numel() > MAX_OFFSETS or t.numel() * t.element_size() == t.untyped_storage().nbytes():
            return None
        offsets = torch.tensor(t.storage_offset())
        for size, stride in zip(t.shape, t.stride()):
            offsets = offsets.unsqueeze(-1) + torch.arange(size) * stride
        return t.element_size(), offsets.reshape(-1)
    except (RuntimeError, NotImplementedError):
        return None


def _overlap(a: _Offsets | None, b: _Offsets | None) -> bool:
    """Whether two tensors of one storage may share an element: ``True`` unless both
    offsets are known, in elements of one size, and none is in both."""
    if a is None or b is None or a[0] != b[0]:
        return True
    return bool(torch.isin(a[1], b[1]).any())


def _tangent(t: torch.Tensor) -> torch.Tensor | None:
    try:
        return fwAD.unpack_dual(t).tangent
    except Exception:  # noqa: BLE001 - no forward-mode level, or a tensor torch cannot unpack
        return None


def _meta(t: torch.Tensor) -> dict[str, Any]:
    return {"shape": _torch.shape_of(t), "dtype": dtype_text(t.dtype), "device": dtype_text(t.device)}


@contextlib.contextmanager
def trace_forward(*, params: Mapping[str, torch.Tensor] | None = None) -> Iterator[ForwardTrace]:
    """Record a forward-mode computation (dual tensors) run inside the block, with tangents.

    Every op whose result carries a tangent (``torch.autograd.forward_ad``: inside
    ``fwAD.dual_level()``, on tensors made by ``fwAD.make_dual``) is noted as it runs,
    with the L2 norm of the tangent of its result: what :func:`trace_backward` shows for
    gradients flowing back, this shows for tangents flowing forward. The picture is the
    same kind as the other views': edge width and label from the tangent norm (arrows
    in the forward direction), a stepper that reveals the ops in the order they ran,
    hover details, and rolled blocks for loops.

    ``torch.func.jvp`` passes its function dual tensors too: the ops of a ``jvp`` call
    made inside the block are recorded the same way.

    Args:
        params: A mapping name -> tensor naming inputs: a primal passed to
            ``fwAD.make_dual`` (or a dual tensor made before the block) is labelled
            with its name.

    Yields:
        A :class:`ForwardTrace`, complete after the block. The recording stops on exit,
        even if the block raises.

    Raises:
        TypeError: ``params`` is not a mapping of names to tensors.

    Example:
        >>> import torch.autograd.forward_ad as fwAD
        >>> with dg.trace_forward() as ft, fwAD.dual_level():
        ...     x = fwAD.make_dual(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 0.0]))
        ...     y = (x.sin() * x).sum()
        >>> ft          # edge width = tangent norm, arrows forward
    """
    if params is not None and not isinstance(params, Mapping):
        raise TypeError(f"params must be a mapping name -> tensor (such as {{'x': x}}); "
                        f"got {type(params).__name__}")
    names: dict[int, str] = {}
    for key, t in (params or {}).items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"params[{key!r}] is a {type(t).__name__}, not a tensor")
        names.setdefault(id(t), str(key))
    recorder = _Recorder(names)
    trace = ForwardTrace([], [])
    try:
        with recorder:
            yield trace
    finally:
        _finish(recorder, trace)


def _finish(rec: _Recorder, trace: ForwardTrace) -> None:
    """Fill ``trace`` from what ``rec`` noted: nodes, output nodes, and every norm read
    with one synchronisation."""
    with _torch.no_torch_function():
        keys, edge_keys = list(rec.norms), list(rec.edge_norms)
        tensors = [rec.norms[key] for key in keys] + [rec.edge_norms[key] for key in edge_keys]
        values = torch.stack([t.to(torch.float64) for t in tensors]).tolist() if tensors else []
    norms = dict(zip(keys, values))
    changed = dict(zip(edge_keys, values[len(keys):]))
    nodes = list(rec.nodes)
    edges = list(rec.edges)
    for node in rec.nodes:  # a result no op read: an output
        if node.kind == "op" and node.id not in rec.read:
            k = min(key[1] for key in norms if key[0] == node.id)
            nodes.append(Node(id=len(nodes), name="output", kind="output", label="output", shape=node.shape,
                              dtype=node.dtype, device=node.device))
            edges.append((node.id, nodes[-1].id, 0, k))
    trace.nodes, trace.edges = nodes, [(a, b) for a, b, _, _ in edges]
    trace.order = [n.id for n in rec.nodes]
    trace.tangent_norms = {}
    for (nid, _), v in sorted(norms.items()):
        trace.tangent_norms.setdefault(nid, v)  # (its first result with a tangent)
    trace.edge_norms = {(a, b, slot): changed.get((a, b, slot), norms.get((a, k), math.nan))
                        for a, b, slot, k in edges}
    rec.made.clear()
    rec.norms.clear()
    rec.edge_norms.clear()
    if rec.meta:
        warnings.warn(f"trace_forward: tangents on the meta device have a shape but no values, so their "
                      f"norms show as nan ({rec.meta} in this trace). "
                      "Make the dual tensors on the cpu or a GPU to see the numbers", stacklevel=4)
