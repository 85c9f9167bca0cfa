"""save_view() and load_view(): a view written to a JSON file in one process, shown in another.

A drawing (:class:`~dynagraph.Graph`), a recording (:class:`~dynagraph.Recording`) and a
backward replay (:class:`~dynagraph.BackwardTrace`) hold plain records (nodes, edges,
steps, numbers), never torch objects. This module writes those records as JSON, and reads
them back into a view of the same class that draws the same picture with the same steps
and numbers. No pickle: a file from someone else cannot run code when it is loaded.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._records import Block, Node
from .backward import BackwardTrace
from .graph import Graph, file_path
from .live import Recording, Step
from .memory import SavedMemory, SavedTensor

__all__ = ["FORMAT", "load_view", "save_view"]

FORMAT = "dynagraph-view/1"  # the "format" key of every file; a later layout gets a new number
_View = Graph | Recording | BackwardTrace


def save_view(view: _View, path: str | os.PathLike[str]) -> Path:
    """Write ``view``'s records to ``path`` as JSON, to open later with :func:`load_view`.

    Args:
        view: A :class:`Graph` (from :func:`draw`), a :class:`Recording` (from :func:`live`,
            after its block) or a :class:`BackwardTrace` (from :func:`trace_backward`).
        path: The file to write (``.json`` is usual; any name works).

    Returns:
        The path written.

    Raises:
        TypeError: ``view`` is not one of those three, or ``path`` is not a str or a path.

    Example:
        >>> dg.save_view(bt, "trace.json")        # in a worker process
        >>> dg.load_view("trace.json")            # in the notebook: the same picture and steps
    """
    if not isinstance(view, (Graph, Recording, BackwardTrace)):
        raise TypeError(f"save_view takes a Graph, Recording or BackwardTrace; got {type(view).__name__}")
    path = file_path(path, "view.json")
    path.write_text(json.dumps(_encode(view), ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
    return path


def load_view(path: str | os.PathLike[str]) -> _View:
    """The view written to ``path`` by :func:`save_view`, of the class it was.

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: the file is not JSON written by :func:`save_view` (or by another
            version's layout: the message names the format it found).
        TypeError: ``path`` is not a str or a path.
    """
    path = file_path(path, "view.json")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:  # (a binary file is not UTF-8)
        raise ValueError(f"{str(path)!r} is not a saved view: not JSON ({e})") from e
    found = data.get("format") if isinstance(data, dict) else None
    if found != FORMAT:
        raise ValueError(f"{str(path)!r} is not a saved view of this dynagraph: format {found!r} "
                         f"(expected {FORMAT!r}); save it again with dg.save_view")
    try:
        return _DECODERS[data["kind"]](data)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:  # a field missing or wrong
        raise ValueError(f"{str(path)!r} is a damaged saved view ({type(e).__name__}: {e}); "
                         f"save it again with dg.save_view") from e


# -- records <-> JSON (tuples become lists in JSON: each decoder puts them back) --

def _node(d: dict[str, Any]) -> Node:
    d = dict(d)
    d["shape"] = None if d["shape"] is None else tuple(d["shape"])
    d["saved"] = [tuple(s) for s in d["saved"]]
    d["calls"] = None if d.get("calls") is None else tuple(d["calls"])  # (files saved before it: none)
    d.pop("tensor", None)  # (never saved; a file edited by hand may hold them)
    d.pop("module_number", None)
    d["ops"] = None if d.get("ops") is None else tuple(d["ops"])  # (files saved before it: none)
    return Node(**d)


def _node_out(n: Node) -> dict[str, Any]:
    """A node as JSON, without its ``tensor`` and ``module_number``: they name objects of
    this process."""
    d = dataclasses.asdict(n)
    del d["tensor"], d["module_number"]
    return d


def _memory_out(m: SavedMemory | None) -> dict[str, Any] | None:
    if m is None:
        return None
    return {"saved": [[nid, [dataclasses.asdict(s) for s in ss]] for nid, ss in m.saved.items()],
            "leaves": sorted(list(k) for k in m.leaves)}


def _memory_in(d: dict[str, Any] | None) -> SavedMemory | None:
    if d is None:
        return None
    saved = {nid: [SavedTensor(**{**s, "storage": None if s["storage"] is None else tuple(s["storage"])})
                   for s in ss] for nid, ss in d["saved"]}
    return SavedMemory(saved=saved, leaves={tuple(k) for k in d["leaves"]})


def _shapes(shapes: list[Any]) -> list[tuple[int, ...] | None]:
    return [None if s is None else tuple(s) for s in shapes]


def _encode(view: _View) -> dict[str, Any]:
    out: dict[str, Any] = {"format": FORMAT, "nodes": [_node_out(n) for n in view.nodes],
                           "edges": [list(e) for e in view.edges], "module_types": view.module_types}
    if isinstance(view, Graph):
        out.update(kind="graph", title=view.title, roll=view.roll, max_nodes=view.max_nodes,
                   overview=view.overview, blocks=[dataclasses.asdict(b) for b in view.blocks],
                   memory=_memory_out(view.memory))
    elif isinstance(view, Recording):
        out.update(kind="recording", steps=[dataclasses.asdict(s) for s in view.steps],
                   memory=_memory_out(view.memory), overview=view.overview)
    else:
        out.update(kind="backward", order=view.order,
                   edge_norms=[[*e, v] for e, v in view.edge_norms.items()],
                   merged_norms=[[*e, v] for e, v in view.merged_norms.items()],
                   received_norms=[[n, v] for n, v in view.received_norms.items()],
                   passes=[[*e, k] for e, k in view.passes.items()],
                   notes=[[*e, v] for e, v in view.notes.items()],
                   launches=[dataclasses.asdict(b) for b in view.launches], overview=view.overview)
    return out


def _graph(d: dict[str, Any]) -> Graph:
    blocks = [Block(**{**b, "loops": [tuple(e) for e in b["loops"]]}) for b in d["blocks"]]
    graph = Graph([_node(n) for n in d["nodes"]], [tuple(e) for e in d["edges"]], d["module_types"],
                  d["title"], blocks=blocks, roll=d["roll"], max_nodes=d["max_nodes"],
                  overview=d.get("overview"))  # (files saved before it: automatic)
    graph.memory = _memory_in(d["memory"])
    return graph


def _recording(d: dict[str, Any]) -> Recording:
    steps = [Step(**{**s, "inputs": _shapes(s["inputs"]), "outputs": _shapes(s["outputs"])})
             for s in d["steps"]]
    rec = Recording(steps, [_node(n) for n in d["nodes"]], [tuple(e) for e in d["edges"]],
                    d["module_types"], _memory_in(d["memory"]))
    rec.overview = d.get("overview")  # (files saved before it: automatic)
    return rec


def _backward(d: dict[str, Any]) -> BackwardTrace:
    from .ddp import Launch  # the DDP module imports torch.distributed: only when it is needed
    trace = BackwardTrace([_node(n) for n in d["nodes"]], [tuple(e) for e in d["edges"]], d["module_types"])
    trace.order = list(d["order"])
    trace.edge_norms = {(s, t, k): v for s, t, k, v in d["edge_norms"]}
    trace.merged_norms = {(s, t): v for s, t, v in d["merged_norms"]}
    trace.received_norms = {n: v for n, v in d.get("received_norms", [])}  # (files saved before it: none)
    trace.passes = {(s, t): k for s, t, k in d.get("passes", [])}  # (files saved before it: none)
    trace.notes = {(s, t, k): v for s, t, k, v in d["notes"]}
    trace.launches = [Launch(**b) for b in d["launches"]]
    trace.overview = d.get("overview")
    return trace


_DECODERS: dict[str, Callable[[dict[str, Any]], _View]] = {"graph": _graph, "recording": _recording,
                                                            "backward": _backward}
