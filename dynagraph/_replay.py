"""What a replay of one pass shares: a graph, the order its nodes ran, and a picture of both.

:class:`dynagraph.BackwardTrace` and :class:`dynagraph.ForwardTrace` are replays. Each
says how to draw its own annotations (``_overlays``) and what its step list's heading
says after its count of node runs (``_CAPTION``); this base counts the runs once, for the
caption and the repr alike (``_runs``), and turns both into DOT and the notebook's outputs.
"""

from __future__ import annotations

from . import _page, _picture
from ._dot import Overlay
from ._language import N_, counted, translated
from ._records import Node
from .graph import Graph

__all__ = ["Replay"]


class Replay(_page.View):
    """A pass that ran over ``nodes`` and ``edges``, node ids in ``order`` as they ran."""

    nodes: list[Node]
    edges: list[tuple[int, int]]
    order: list[int]
    _CAPTION: str  # the step list's heading, marked with N_: {runs} is where the count goes

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
        return _picture.drawing(self.graph(), self._overlays())[1]

    def _outputs(self) -> list[_page.Output]:
        if not self.order:
            return [_page.Output({"text/plain": repr(self)}, {})]
        return _page.outputs(self.graph(), repr(self), self._overlays(), caption=self._caption())
