"""What a replay of one pass shares: a graph, the order its nodes ran, and a picture of both.

:class:`dynagraph.BackwardTrace` and :class:`dynagraph.ForwardTrace` are replays. Each
says how to draw its own annotations (``_overlays``) and what its step list's heading
says after its count of node runs (``_CAPTION``), and what its repr adds to that count
(``_REPR``, ``_repr_fields``); this base counts the runs once (``_runs``), for the caption
and the repr alike, and turns the trace into DOT and into the notebook's outputs.
"""

from __future__ import annotations

from . import _page, _picture
from ._dot import Overlay
from ._language import N_, counted, translated
from ._records import Node
from .graph import Graph, record_of

__all__ = ["Replay"]

SHOWN_RUNS = 12  # node runs the repr's second line names


class Replay(_page.View):
    """A pass that ran over ``nodes`` and ``edges``, node ids in ``order`` as they ran."""

    nodes: list[Node]
    edges: list[tuple[int, int]]
    order: list[int]
    _CAPTION: str  # the step list's heading, marked with N_: {runs} is where the count goes
    _REPR: str  # the repr's first line, marked with N_: {runs} and the fields of _repr_fields

    def __repr__(self) -> str:
        names = {n.id: self._run_name(n) for n in self.nodes}
        ran = " -> ".join(names[i] for i in self.order[:SHOWN_RUNS])
        more = f" ... (+{len(self.order) - SHOWN_RUNS})" if len(self.order) > SHOWN_RUNS else ""
        return f"{translated(self._REPR, runs=self._runs(), **self._repr_fields())}\n  {ran}{more}"

    def _repr_fields(self) -> dict[str, str]:
        """The repr's first line beyond the count of runs: its fields in ``_REPR``."""
        raise NotImplementedError

    def _run_name(self, node: Node) -> str:
        """What the repr calls ``node`` in the order it ran."""
        raise NotImplementedError

    def graph(self, title: str | None = None) -> Graph:
        """The graph the pass ran over (without the pass's annotations)."""
        return Graph(self.nodes, self.edges, title=title)

    def _overlays(self) -> Overlay:
        """The pass's annotations on the picture: badges, edge norms, one step per node run."""
        raise NotImplementedError

    def _runs(self) -> str:
        """How many nodes ran, in words: "1 node run", "1,234 node runs"."""
        return counted(len(self.order), N_("1 node run"), N_("{n} node runs"))

    def _caption(self) -> str:
        """The step list's heading: how many node runs, and which way the arrows point."""
        return translated(self._CAPTION, runs=self._runs())

    def to_dot(self) -> str:
        """DOT of the picture: the run order on the nodes, the norms on the edges."""
        return _picture.drawing(record_of(self.graph()), self._overlays())[1]

    def _outputs(self) -> list[_page.Output]:
        if not self.order:
            return [_page.Output({"text/plain": repr(self)}, {})]
        return _page.outputs(record_of(self.graph()), repr(self), self._overlays(), caption=self._caption())
