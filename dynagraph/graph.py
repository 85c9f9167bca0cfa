"""The Graph object: captured records that draw, save and display themselves."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from . import render
from ._records import Node

__all__ = ["Graph"]


class Graph:
    """A captured autograd graph: plain records plus drawing and display.

    Attributes:
        nodes: list of :class:`dynagraph.Node` records (``id``, ``name``, ``kind``,
            ``label``, ``shape``, ``dtype``, ``device``, ``module``, ...).
        edges: ``(src id, dst id)`` pairs in the direction data flows forward.
        module_types: ``{module name: class name}`` of the modules named by ``params``.
        title: Optional caption drawn above the picture.

    In Jupyter the graph shows as an inline SVG (``text/html``) with a stable
    ``text/plain`` summary (no memory addresses).
    """

    def __init__(self, nodes: list[Node], edges: list[tuple[int, int]],
                 module_types: dict[str, str] | None = None, title: str | None = None):
        self.nodes = nodes
        self.edges = edges
        self.module_types = module_types or {}
        self.title = title

    def __len__(self) -> int:
        return len(self.nodes)

    def __repr__(self) -> str:
        kinds = Counter(n.kind for n in self.nodes)
        parts = ", ".join(f"{k} {kinds[k]}" for k in sorted(kinds))
        return f"<dynagraph.Graph: {len(self.nodes)} nodes, {len(self.edges)} edges ({parts})>"

    def counts(self) -> Counter:
        """How many nodes carry each autograd name, e.g. ``{'MulBackward0': 2}``."""
        return Counter(n.name for n in self.nodes if n.kind not in ("output", "fold", "module"))

    def node(self, node_id: int) -> Node:
        """The record with id ``node_id``."""
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(f"no node with id {node_id!r} in this graph (see [n.id for n in graph.nodes])")

    def to_dot(self, **attrs) -> str:
        """DOT source of the drawing (keyword arguments go to :func:`render.to_dot`)."""
        return render.to_dot(self.nodes, self.edges, self.module_types, title=self.title, **attrs)

    def svg(self) -> str:
        """The drawing as SVG text ready to inline in HTML."""
        return render.svg_for_html(render.pipe(self.to_dot(), "svg"))

    def save(self, path) -> Path:
        """Write the drawing to ``path``; the suffix picks the format (svg, png, pdf, dot).

        Raises:
            ValueError: unknown suffix.
        """
        path = Path(path)
        fmt = path.suffix.lstrip(".").lower()
        if fmt in ("dot", "gv"):
            path.write_text(self.to_dot())
        elif fmt in render.FORMATS:
            path.write_bytes(render.pipe(self.to_dot(), fmt))
        else:
            raise ValueError(
                f"unknown format: {path.suffix!r} in {str(path)!r} "
                f"(must be one of {sorted(set(render.FORMATS) | {'gv'})})"
            )
        return path

    def to_graphviz(self):
        """A ``graphviz.Source`` of the drawing, for the graphviz package's tools."""
        import graphviz
        return graphviz.Source(self.to_dot())

    def _repr_html_(self) -> str:
        return f'<div class="dynagraph-graph">{self.svg()}</div>'

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": repr(self), "text/html": self._repr_html_()}

