"""diff(): how two graphs differ, op by op, as a table and a picture."""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Sequence
from typing import Protocol

from . import _page, _picture
from ._dot import Overlay
from ._language import tr
from ._records import Node
from .graph import Graph

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
        new: Ids of the nodes of ``b`` with no counterpart in ``a`` (matched by name,
            module and leaf name; the latest created ones), lit in the picture.
    """

    def __init__(self, a: Graph, b: Graph, labels: Sequence[str] = ("a", "b")) -> None:
        self.a, self.b, self.labels = a, b, labels
        ca, cb = a.counts(), b.counts()
        names = sorted(set(ca) | set(cb), key=lambda n: (-(cb[n] - ca[n]), n))
        self.rows = [(n, ca[n], cb[n]) for n in names]
        self.new = _extra_nodes(a, b)

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
        return "\n".join(lines)

    def _graph(self) -> Graph:
        b = self.b
        return Graph(b.nodes, b.edges, b.module_types,
                     title=f"{self.labels[1]}: new vs {self.labels[0]} in red",
                     blocks=b.blocks, roll=b.roll, max_nodes=b.max_nodes)

    def to_dot(self) -> str:
        """DOT of the picture of ``b`` with its new nodes outlined in red."""
        return _picture.drawing(self._graph(), Overlay(highlight=set(self.new)))[1]

    def _outputs(self) -> list[_page.Output]:
        return _page.outputs(self._graph(), repr(self), Overlay(highlight=set(self.new)),
                             table=_page.diff_table(self.rows, self.labels, self.total))


def _columns(text: str) -> int:
    """Columns ``text`` takes in a monospace font: a Chinese character takes two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _left(text: str, width: int) -> str:
    return text + " " * max(0, width - _columns(text))


def _right(text: str, width: int) -> str:
    return " " * max(0, width - _columns(text)) + text


def _key(node: Node, modules: bool) -> tuple[str, str | None, str | None]:
    """What makes two nodes 'the same' across graphs: name, module, and leaf name."""
    leaf = node.label if node.kind in ("parameter", "input") else None
    return node.name, node.module if modules else None, leaf


def _extra_nodes(a: Graph, b: Graph) -> list[int]:
    """Nodes of ``b`` beyond ``a``'s count of the same kind of node, latest created first.

    Nodes match by autograd name, module (when both graphs know modules) and, for
    leaves, their name,
    so a new layer's parameters are new even though every leaf is an AccumulateGrad.
    """
    modules = all(any(n.module for n in g.nodes if n.seq is not None) for g in (a, b))
    have = Counter(_key(n, modules) for n in a.nodes if n.kind not in ("output", "fold", "module"))
    by_key: dict[tuple[str, str | None, str | None], list[Node]] = {}
    for n in b.nodes:
        if n.kind not in ("output", "fold", "module"):
            by_key.setdefault(_key(n, modules), []).append(n)
    extra: list[int] = []
    for key, group in by_key.items():
        surplus = len(group) - have[key]
        if surplus > 0:
            group.sort(key=lambda n: (n.seq is not None, n.seq or 0, n.id))
            extra.extend(n.id for n in group[-surplus:])
    return sorted(extra)


def diff(a: Graph | _HasGraph, b: Graph | _HasGraph, *, labels: Sequence[object] = ("a", "b")) -> GraphDiff:
    """Compare two graphs or recordings (two sequence lengths, two depths, ...).

    Args:
        a, b: :class:`Graph` (from :func:`draw`) or :class:`Recording` objects.
        labels: Column names for ``a`` and ``b`` in the table.

    Returns:
        A :class:`GraphDiff`: a table of node counts per op in text, and in Jupyter
        the table plus ``b``'s picture with its new nodes outlined in red.

    Raises:
        TypeError: ``a`` or ``b`` is not a graph or recording.

    Example:
        >>> dg.diff(dg.draw(rnn(x[:2])), dg.draw(rnn(x[:5])), labels=("len 2", "len 5"))
    """
    if len(labels) != 2:
        raise ValueError(f"labels must be two names; got {labels!r}")
    return GraphDiff(_as_graph(a, "a"), _as_graph(b, "b"), tuple(map(str, labels)))
