"""The Graph object: captured records that draw, save and display themselves."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from . import _page, _picture, _transform, render
from ._args import integer_or_same
from ._language import N_, counted, tr
from ._records import Block, GraphRecord, Node, kind_word
from .memory import SavedMemory

if TYPE_CHECKING:
    import graphviz

__all__ = ["Graph"]


class Graph(_page.View):
    """A captured autograd graph: plain records plus drawing and display.

    Attributes:
        nodes: list of :class:`dynagraph.Node` records (``id``, ``name``, ``kind``,
            ``label``, ``shape``, ``dtype``, ``device``, ``module``, ...).
        edges: ``(src id, dst id)`` pairs in the direction data flows forward.
        module_types: ``{module name: class name}`` of the modules named by ``params``.
        title: Optional caption drawn above the picture.
        blocks: Rolled blocks (each drawn once, labelled ``×N``); empty unless this
            graph is a picture (:meth:`picture`) that rolled repeats.
        roll, max_nodes: The size policy of the picture: ``roll="auto"`` draws
            repeated structure once in graphs over 40 nodes, and what is still over
            ``max_nodes`` has its middle folded; ``roll=False, max_nodes=None`` draws
            every node.
        overview: Whether the picture draws modules as boxes (:mod:`dynagraph._overview`):
            ``None`` where the op-level picture is over three screens and ops carry module
            tags (the default policy only), ``True`` wherever ops carry module tags,
            ``False`` never.
        memory: What the graph keeps alive for backward, by node id (a
            :class:`dynagraph.memory.SavedMemory`), when drawn with ``memory=True``;
            else ``None``.

    In Jupyter the graph shows as a picture that also shows in untrusted notebooks
    and without JavaScript, with a stable ``text/plain`` summary (no memory addresses).
    """

    def __init__(self, nodes: list[Node], edges: list[tuple[int, int]],
                 module_types: dict[str, str] | None = None, title: str | None = None, *,
                 blocks: Iterable[Block] = (), roll: str | bool = "auto",
                 max_nodes: int | None = _picture.MAX_NODES, overview: bool | None = None) -> None:
        max_nodes = integer_or_same(max_nodes)  # (checked next)
        _picture.check_policy(roll, max_nodes, None, overview)
        _picture.check_title(title)
        self.nodes = nodes
        self.edges = edges
        self.module_types = module_types or {}
        self.title = title
        self.blocks = list(blocks)
        self.roll = roll
        self.max_nodes = max_nodes
        self.overview = overview
        self.memory: SavedMemory | None = None

    @classmethod
    def _of(cls, record: GraphRecord) -> Graph:
        """The graph of ``record`` (a record the drawing side made from one of ours)."""
        graph = cls(record.nodes, record.edges, record.module_types, record.title, blocks=record.blocks,
                    roll=record.roll, max_nodes=record.max_nodes, overview=record.overview)
        graph.memory = record.memory
        return graph

    def __len__(self) -> int:
        return len(self.nodes)

    def __repr__(self) -> str:
        """``<dynagraph.Graph: 4 nodes, 3 edges (input 1, op 2, output 1)>``, in the current
        language (op, module and block names as they are)."""
        kinds = Counter(n.kind for n in self.nodes)
        parts = tr(", ").join(f"{kind_word(k)} {kinds[k]:,}" for k in sorted(kinds))
        rest = "".join(tr(", {block} \u00d7{n}", block=b.label, n=b.repeats) for b in self.blocks)
        if self.memory is not None:
            rest += tr("; {summary}", summary=self.memory.summary())
        return tr("<dynagraph.Graph: {nodes}, {edges} ({kinds}){rest}>",
                  nodes=counted(len(self.nodes), N_("1 node"), N_("{n} nodes")),
                  edges=counted(len(self.edges), N_("1 edge"), N_("{n} edges")), kinds=parts, rest=rest)

    def counts(self) -> Counter[str]:
        """How many autograd nodes carry each name, e.g. ``{'MulBackward0': 2}``
        (a rolled node stands for, and counts, one node per iteration)."""
        out: Counter[str] = Counter()
        for n in self.nodes:
            if n.kind not in ("output", "fold", "module"):
                out[n.name] += n.count
        return out

    def node(self, node_id: int) -> Node:
        """The record with id ``node_id``."""
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(f"no node with id {node_id!r} in this graph (see [n.id for n in graph.nodes])")

    def collapsed(self, depth: int) -> tuple[Graph, dict[int, int]]:
        """Every module at nesting ``depth`` merged into one node, and ``{old id: new id}``."""
        depth = integer_or_same(depth)  # (checked next)
        _picture.check_policy(self.roll, self.max_nodes, depth)
        nodes, edges, mapping = _transform.collapse(self.nodes, self.edges, self.module_types, depth)
        memory = None if self.memory is None else self.memory.remap(mapping)
        return Graph._of(replace(record_of(self), nodes=nodes, edges=edges, memory=memory)), mapping

    def folded(self, max_nodes: int) -> tuple[Graph, dict[int, int]]:
        """The middle folded into one node so that at most ``max_nodes`` remain, and
        ``{old id: new id}``."""
        max_nodes = integer_or_same(max_nodes)  # (checked next)
        _picture.check_policy(self.roll, max_nodes)
        folded, mapping = _transform.folded(record_of(self), max_nodes)
        return Graph._of(folded), mapping

    def picture(self) -> Graph:
        """The graph as it is drawn: this one after the size policy (``roll``, ``max_nodes``)."""
        pic = _picture.picture(record_of(self), roll=self.roll, max_nodes=self.max_nodes)
        memory = None if self.memory is None else self.memory.remap(pic.mapping)
        return Graph._of(replace(pic.graph, memory=memory))

    def to_dot(self, *, full: bool = False) -> str:
        """DOT source of the drawing (``full=True``: of every node, ignoring the size policy)."""
        return _picture.drawing(record_of(self), full=full)[1]

    def svg(self) -> str:
        """The drawing as compact SVG text."""
        return render.compact_svg(render.pipe(self.to_dot(), "svg"))

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the drawing to ``path``; the suffix picks the format (svg, png, pdf, jpg, dot).

        Raises:
            ValueError: unknown suffix.
        """
        path = file_path(path, "graph.svg")
        fmt = path.suffix.lstrip(".").lower()
        fmt = {"gv": "dot", "jpeg": "jpg"}.get(fmt, fmt)
        if fmt == "dot":
            path.write_text(self.to_dot())
        elif fmt in render.FORMATS:
            path.write_bytes(render.pipe(self.to_dot(), fmt))
        else:
            raise ValueError(
                f"unknown format: {path.suffix!r} in {str(path)!r} "
                f"(must be one of {sorted(set(render.FORMATS) | {'gv', 'jpeg'})})"
            )
        return path

    def to_graphviz(self) -> graphviz.Source:
        """A ``graphviz.Source`` of the drawing, for the graphviz package's tools."""
        import graphviz
        return graphviz.Source(self.to_dot())

    def _outputs(self) -> list[_page.Output]:
        return _page.outputs(record_of(self), repr(self))


def file_path(path: object, example: str) -> Path:
    """``path`` as a Path; anything but a str or an os.PathLike is refused, naming it
    (``example``: a file name of the kind asked for)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a file name, a str or a pathlib.Path such as {example!r}; "
                        f"got {path!r} ({type(path).__name__})")
    return Path(path)


def record_of(graph: Graph) -> GraphRecord:
    """The plain record of ``graph`` that the drawing side takes (``_picture``, ``_page``):
    its fields as they are now (a graph's fields may be set after it is made)."""
    return GraphRecord(graph.nodes, graph.edges, graph.module_types, graph.title, graph.blocks, graph.roll,
                       graph.max_nodes, graph.overview, graph.memory)
