"""diff(): how two graphs differ, op by op, as a table and a picture."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import Protocol

from . import _match, _page, _picture, _steps
from ._dot import Overlay
from ._language import tr
from ._match import Unplaced
from ._records import Node
from .graph import Graph, record_of

__all__ = ["GraphDiff", "diff"]


class _HasGraph(Protocol):  # Recording, BackwardTrace
    def graph(self) -> Graph: ...


def _as_graph(obj: object, which: str) -> Graph:
    if isinstance(obj, Graph):
        return obj
    if hasattr(obj, "graph") and callable(obj.graph):  # Recording, BackwardTrace
        return obj.graph()
    raise TypeError(f"{which} must be a dynagraph Graph or Recording; got {type(obj).__name__}")


class GraphDiff(_page.View):
    """Per-op node counts of two graphs, and which nodes of ``b`` are new.

    Attributes:
        a, b: The two :class:`Graph` objects.
        rows: ``(name, count in a, count in b)`` for every autograd name, sorted by
            the change (largest first), then name.
        new: Ids of the nodes of ``b`` with no counterpart in ``a``, lit in the
            picture. A leaf both graphs read matches by its tensor (a layer put in
            the middle renames the parameters after it; this process only). Nodes are
            matched by structure: by name (module and leaf name
            too, where known) and the matches of their inputs, from the leaves
            forwards, or of their consumers, from the outputs backwards. Of
            interchangeable repeats (a loop's steps) the latest created are new.
        unplaced: New nodes that the structure cannot place: :class:`Unplaced`
            ``(name, new, candidates)``, ``new`` of the ``candidates`` (node ids of
            ``b``) are new and the rest changed. None of them is in ``new``; the
            picture marks the candidates ``?`` and the table says how many.
    """

    def __init__(self, a: Graph, b: Graph, labels: Sequence[str] = ("a", "b")) -> None:
        self.a, self.b, self.labels = a, b, labels
        ca, cb = a.counts(), b.counts()
        names = sorted(set(ca) | set(cb), key=lambda n: (-(cb[n] - ca[n]), n))
        self.rows = [(n, ca[n], cb[n]) for n in names]
        self.new, self.unplaced = _new_nodes(a, b)

    @property
    def total(self) -> tuple[int, int]:
        """Node counts of ``a`` and ``b`` (outputs, folds and modules excluded)."""
        return sum(self.a.counts().values()), sum(self.b.counts().values())

    def __repr__(self) -> str:
        """The table as text; its header and ``total`` in the current language (a Chinese
        word or label is padded by the columns it takes, two a character)."""
        la, lb = self.labels
        width = max([len(r[0]) for r in self.rows] + [8])
        lines = [f"{_left(tr('node'), width)} {_right(la, 6)} {_right(lb, 6)} {_right(tr('change'), 7)}"]
        lines += [f"{n:<{width}} {x:>6} {y:>6} {y - x:>+7}" for n, x, y in self.rows]
        ta, tb = self.total
        lines.append(f"{_left(tr('total'), width)} {ta:>6} {tb:>6} {tb - ta:>+7}")
        return "\n".join(lines + self._notes())

    def _notes(self) -> list[str]:
        """A line for each group of new nodes that could not be placed."""
        return [tr("not placed: {count} new of the {n} {name} marked ?", count=u.new,
                   n=len(u.candidates), name=u.name) for u in self.unplaced]

    def _graph(self) -> Graph:
        b = self.b
        title = tr("{b}: new vs {a} in red", a=self.labels[0], b=self.labels[1])
        if self.unplaced:
            title += tr("; {n} more new, not placed, among those marked ?",
                        n=sum(u.new for u in self.unplaced))
        return Graph(b.nodes, b.edges, b.module_types, title=title,
                     blocks=b.blocks, roll=b.roll, max_nodes=b.max_nodes, overview=b.overview)

    def _overlay(self) -> Overlay:
        """New nodes outlined in red; those that could be new, not placed, marked ``?``."""
        maybe = {i: "?" for u in self.unplaced for i in u.candidates}
        return Overlay(highlight=set(self.new), badges=maybe)

    def to_dot(self) -> str:
        """DOT of the picture of ``b`` with its new nodes outlined in red."""
        return _picture.drawing(record_of(self._graph()), self._overlay())[1]

    def _outputs(self) -> list[_page.Output]:
        table = _steps.diff_table(self.rows, self.labels, self.total, notes=self._notes())
        return _page.outputs(record_of(self._graph()), repr(self), self._overlay(), table=table)


def _columns(text: str) -> int:
    """Columns ``text`` takes in a monospace font: a Chinese character takes two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _left(text: str, width: int) -> str:
    return text + " " * max(0, width - _columns(text))


def _right(text: str, width: int) -> str:
    return " " * max(0, width - _columns(text)) + text


_LEAVES = ("parameter", "input")


def _key(node: Node, modules: bool, same: set[int]) -> tuple[str, object, object]:
    """What must agree for two nodes to match across graphs: name, label (a leaf's
    name, a custom Function's class) and, when ``modules``, module. A leaf whose tensor
    is in both graphs (its number is in ``same``) is keyed by the tensor alone, so it
    matches that tensor and no leaf that only shares its name; another leaf by its name
    alone (its module is the first to read it: where it is read, the structure says); an op made by a module
    object both graphs have (its number in ``same`` too) by that module, not its name."""
    if node.tensor in same:
        return node.name, ("tensor", node.tensor), None
    if node.kind in _LEAVES:  # (a leaf's module is the first to read it: where, not which)
        return node.name, node.label, None
    if node.module_number in same:
        return node.name, node.label, ("module", node.module_number)
    return node.name, node.label, node.module if modules else None


def _new_nodes(a: Graph, b: Graph) -> tuple[list[int], list[Unplaced]]:
    """Nodes of ``b`` with no counterpart in ``a``, and those that cannot be placed.

    A leaf whose tensor both graphs read matches by that tensor, and an op by the module
    object that made it where both graphs have it, as recorded in this process (a layer
    put in the middle renames every module and parameter after it: they are not new,
    and the layer put there is); other leaves by their name, so a new layer's
    parameters are new even though every leaf is an AccumulateGrad, and other ops by
    their module's name where both graphs carry module tags, unless a tensor they share
    was renamed and no module is known (the structure places them then).
    """
    objects = {n.tensor: n.label for n in a.nodes if n.tensor is not None}
    shared_modules = ({n.module_number for n in a.nodes if n.module_number is not None}
                      & {n.module_number for n in b.nodes if n.module_number is not None})
    same = {n.tensor for n in b.nodes if n.tensor in objects} | shared_modules
    renamed = any(n.tensor in same and objects[n.tensor] != n.label for n in b.nodes)
    tagged = all(any(n.module for n in g.nodes if n.seq is not None) for g in (a, b))
    modules = tagged and (bool(shared_modules) or not renamed)
    pair = [(g.nodes, g.edges) for g in (a, b)]
    if not all(any(n.kind == "output" for n in g.nodes) for g in (a, b)):  # (a recording draws none)
        pair = [_without_outputs(g) for g in (a, b)]
    return _match.added(pair[0], pair[1], lambda n: _key(n, modules, same))


def _without_outputs(g: Graph) -> tuple[list[Node], list[tuple[int, int]]]:
    """``g``'s nodes and edges less its output nodes: so that a recording, which knows no
    output, and a drawn graph match from their last ops backwards too."""
    outputs = {n.id for n in g.nodes if n.kind == "output"}
    return ([n for n in g.nodes if n.id not in outputs],
            [(s, t) for s, t in g.edges if s not in outputs and t not in outputs])


def diff(a: Graph | _HasGraph, b: Graph | _HasGraph, *, labels: Sequence[object] = ("a", "b")) -> GraphDiff:
    """Compare two graphs or recordings (two sequence lengths, two depths, ...).

    Args:
        a, b: :class:`Graph` (from :func:`draw`) or :class:`Recording` objects.
        labels: Column names for ``a`` and ``b`` in the table.

    Returns:
        A :class:`GraphDiff`: a table of node counts per op in text, and in Jupyter
        the table plus ``b``'s picture with its new nodes outlined in red. New nodes
        that the structure cannot place (which of two ``sin`` is the old one?) are
        not lit: their candidates are marked ``?`` and a line under the table counts them.

    Raises:
        TypeError: ``a`` or ``b`` is not a graph or recording, or ``labels`` is not a
            pair (a string, a number).
        ValueError: ``labels`` does not hold two names.

    Example:
        >>> dg.diff(dg.draw(rnn(x[:2])), dg.draw(rnn(x[:5])), labels=("len 2", "len 5"))
    """
    if isinstance(labels, (str, bytes)) or not isinstance(labels, Sequence):
        raise TypeError(f"labels must be a pair of names, e.g. labels=('len 2', 'len 5'); "
                        f"got {type(labels).__name__} {labels!r}")
    if len(labels) != 2:
        raise ValueError(f"labels must be two names, e.g. labels=('len 2', 'len 5'); got {labels!r}")
    return GraphDiff(_as_graph(a, "a"), _as_graph(b, "b"), tuple(map(str, labels)))
