"""Turn graph records into DOT text, and DOT into SVG/PNG with a Graphviz renderer.

Renderer order (first found wins):

1. ``DYNAGRAPH_DOT`` environment variable: a command name or path of a ``dot``-
   compatible program (set it to ``dot`` to prefer a system Graphviz).
2. ``graphviz-pure`` (the PyPI package of that name, pinned in requirements.txt):
   the same layout on every machine, so stored notebook outputs compare equal
   whether or not the machine has a system Graphviz.
3. The system ``dot`` from Graphviz.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["RendererNotFoundError", "find_renderer", "pipe", "svg_for_html", "to_dot", "STYLE"]

# Legend: colour and shape per node kind (documented in draw()).
STYLE = {
    "op": 'shape=box style="rounded,filled" fillcolor="#eeeeee"',
    "custom": 'shape=box style="rounded,filled,bold" fillcolor="#ffc078" color="#d9480f"',
    "parameter": 'shape=box style=filled fillcolor="#a5d8ff"',
    "input": 'shape=box style=filled fillcolor="#fff3bf"',
    "output": 'shape=box style=filled fillcolor="#b2f2bb"',
    "module": 'shape=box3d style=filled fillcolor="#e5dbff"',
    "fold": 'shape=note style="filled,dashed" fillcolor="#f8f9fa"',
}
_HEADER = (
    'digraph dynagraph {\n'
    '  graph [rankdir=TB nodesep=0.25 ranksep=0.3 fontname="Helvetica" fontsize=10]\n'
    '  node [fontname="Helvetica" fontsize=10 height=0.3 margin="0.08,0.03"]\n'
    '  edge [arrowsize=0.6 color="#495057" fontname="Helvetica" fontsize=8]\n'
)
FORMATS = ("dot", "svg", "png", "pdf", "jpg")
# A leaf feeding more ops than this is drawn once per op: small graphs keep one box
# per tensor, while an RNN weight used at every step no longer fans out everywhere.
SPLIT_LEAVES = 3


class RendererNotFoundError(RuntimeError):
    """No Graphviz layout program could be found."""


def quote(text: str) -> str:
    """A DOT double-quoted string that shows ``text`` literally.

    Backslashes are doubled so that escapes such as ``\\N`` (node name) are not
    interpreted; ``<``, ``>`` and ``&`` need no escaping in quoted strings, and
    Graphviz writes them as entities in SVG.
    """
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + text.replace("\n", "\\n").replace("\r", "") + '"'


def to_dot(nodes, edges, module_types=None, *, title=None, node_attrs=None,
           edge_attrs=None, split_leaves=SPLIT_LEAVES) -> str:
    """DOT text for the records, modules drawn as nested clusters.

    Args:
        nodes, edges: Records from :func:`dynagraph.capture.capture`.
        module_types: ``{module name: class name}`` for cluster titles.
        title: Drawn above the graph.
        node_attrs: ``{node id: extra DOT attribute text}``.
        edge_attrs: ``{(src, dst): extra DOT attribute text}``.
        split_leaves: Draw a parameter or input that feeds more than this many ops
            once per op instead of as one node with a large fan-out (which makes
            layouts slow and tangled); ``None`` never splits.

    Every SVG node group gets the classes ``dg-<kind> dg-n<id>`` (copies of a split
    leaf share them) and every edge ``dg-edge dg-from-<src> dg-to-<dst>``, which the
    steppers use to reveal and highlight parts of one laid-out picture.
    """
    module_types = module_types or {}
    node_attrs = node_attrs or {}
    edge_attrs = edge_attrs or {}
    consumers: dict[int, list[int]] = {}
    for src, dst in edges:
        consumers.setdefault(src, [])
        if dst not in consumers[src]:
            consumers[src].append(dst)
    lines = [_HEADER]
    if title:
        lines.append(f"  labelloc=t label={quote(title)}\n")
    by_id = {node.id: node for node in nodes}
    tree: dict = {}  # module path -> list of DOT node lines
    copies: dict[tuple[int, int], str] = {}
    for node in nodes:
        extra = node_attrs.get(node.id, "")
        users = consumers.get(node.id, [])
        if split_leaves is not None and node.kind in ("parameter", "input") and len(users) > split_leaves:
            for k, user in enumerate(users):
                name = f"n{node.id}_{k}"
                copies[(node.id, user)] = name
                owner = node.module if node.module is not None else by_id[user].module
                tree.setdefault(owner, []).append(_node_line(node, name, extra))
        else:
            tree.setdefault(node.module, []).append(_node_line(node, f"n{node.id}", extra))
    lines.extend(_clusters(tree, module_types))
    for k, (src, dst) in enumerate(edges):
        a = copies.get((src, dst), f"n{src}")
        extra = edge_attrs.get((src, dst), "")
        lines.append(f'  {a} -> n{dst} [id="e{k}" class="dg-edge dg-from-{src} dg-to-{dst}"'
                     f"{' ' + extra if extra else ''}]\n")
    lines.append("}\n")
    return "".join(lines)


def _node_line(node, name, extra) -> str:
    return (f'  {name} [id="{name}" class="dg-{node.kind} dg-n{node.id}" '
            f"label={quote(node_label(node))} {STYLE[node.kind]}{' ' + extra if extra else ''}]\n")


def node_label(node) -> str:
    """The text drawn inside a node: its label, then shape, dtype and device."""
    lines = [node.label]
    if node.kind == "custom":
        lines.append("(custom Function)")
    if node.shape is not None and node.kind != "module":
        lines.append(_meta_line(node))
    lines.extend(f"saved {k}: {v}" for k, v in node.saved)
    return "\n".join(lines)


def _meta_line(node) -> str:
    text = str(tuple(node.shape))
    if node.dtype not in (None, "float32"):
        text += f" {node.dtype}"
    if node.device not in (None, "cpu"):
        text += f" {node.device}"
    return text


def _clusters(tree, module_types):
    """Emit nodes inside nested ``subgraph cluster_...`` blocks, one per module."""
    out = list(tree.get(None, []))
    children: dict = {}
    for path in tree:
        if path is None:
            continue
        parts = path.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            parent = ".".join(parts[:i - 1]) or None
            children.setdefault(parent, set()).add(prefix)

    def emit(path, indent):
        kind = module_types.get(path)
        title = f"{path}: {kind}" if kind else path
        block = [f"{indent}subgraph {quote('cluster_' + path)} {{\n",
                 f'{indent}  label={quote(title)} style="rounded,dashed" color="#868e96" fontcolor="#495057"\n']
        block.extend(indent + line for line in tree.get(path, []))
        for child in sorted(children.get(path, ())):
            block.extend(emit(child, indent + "  "))
        block.append(f"{indent}}}\n")
        return block

    for top in sorted(children.get(None, ())):
        out.extend(emit(top, "  "))
    return out


def _candidates():
    env = os.environ.get("DYNAGRAPH_DOT")
    if env:
        return [env]
    here = Path(sys.executable).parent  # the venv's bin/, even if not on PATH
    return [str(here / "graphviz-pure"), "graphviz-pure", "dot"]


@functools.lru_cache(maxsize=None)
def _resolve(candidates: tuple[str, ...]) -> str | None:
    for c in candidates:
        found = shutil.which(c)
        if found:
            return found
    return None


def find_renderer() -> str:
    """Path of the Graphviz program to use (see the module docstring for the order).

    Raises:
        RendererNotFoundError: none found; the message says how to install one.
    """
    found = _resolve(tuple(_candidates()))
    if found is None:
        env = os.environ.get("DYNAGRAPH_DOT")
        where = f"DYNAGRAPH_DOT={env!r} is not an executable" if env else "no Graphviz program found"
        raise RendererNotFoundError(
            f"cannot lay out the graph: {where}. Install one with "
            "`pip install graphviz-pure` (no system packages needed), or install "
            "Graphviz (`apt install graphviz`, `brew install graphviz`, "
            "`conda install graphviz`). Graph.to_dot() works without either."
        )
    return found


def pipe(dot_text: str, fmt: str = "svg", *, timeout: float = 120) -> bytes:
    """Lay out ``dot_text`` and return the rendered bytes in format ``fmt``.

    Raises:
        ValueError: unknown format.
        RendererNotFoundError: no renderer, or PDF asked of ``graphviz-pure``.
        RuntimeError: the renderer failed (its message is included).
    """
    if fmt not in FORMATS or fmt == "dot":
        raise ValueError(f"unknown format: {fmt!r} (must be one of {sorted(set(FORMATS) - {'dot'})})")
    exe = find_renderer()
    if fmt == "pdf" and "graphviz-pure" in Path(exe).name:
        exe = shutil.which("dot")
        if exe is None:
            raise RendererNotFoundError(
                "PDF output needs the system Graphviz (graphviz-pure writes svg and png): "
                "install Graphviz (`apt install graphviz`) or save as .svg or .png"
            )
    return _run(exe, dot_text, fmt, timeout)


@functools.lru_cache(maxsize=64)
def _run(exe, dot_text, fmt, timeout) -> bytes:
    proc = subprocess.run([exe, f"-T{fmt}"], input=dot_text.encode(), capture_output=True,
                          timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{Path(exe).name} -T{fmt} failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout


_PROLOGUE = re.compile(r"<\?xml.*?\?>\s*|<!DOCTYPE.*?>\s*|<!-- Generated by.*?-->\s*|<!-- Pages:.*?-->\s*", re.S)


def svg_for_html(svg: bytes | str) -> str:
    """SVG text fit to inline in HTML: no XML prologue, renderer banner or fixed width."""
    text = svg.decode() if isinstance(svg, bytes) else svg
    text = _PROLOGUE.sub("", text)
    return text.replace("<svg ", '<svg style="max-width:100%;height:auto" ', 1)
