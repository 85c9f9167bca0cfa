"""_dot: edge labels (gradient norms) keep clear of edges, measured in the rendered SVG.

Each test lays a picture out, reads every edge label's text box (from its x, y, font
size and the Helvetica widths of its characters) and every edge's stroke (points
along its path and arrowhead, widened by half the stroke width), and checks that
they do not meet. Both the layout program's SVG and dynagraph's compact SVG (whole
points) are checked.
"""

import math
import re
import xml.etree.ElementTree as ET

import pytest
import torch
from torch import nn

import dynagraph as dg
from dynagraph import _dot, render
from dynagraph._records import Node

from _helpers import svg_texts

SVG = "{http://www.w3.org/2000/svg}"
# Helvetica advance widths in em (Adobe's font metrics, which Graphviz lays text out
# with): the characters of a norm such as 0.5, 1.23e-05, inf or nan. Others count 1 em.
WIDTHS = {**dict.fromkeys("0123456789", 0.556), ".": 0.278, "e": 0.556, "+": 0.584, "-": 0.333,
          "i": 0.222, "n": 0.556, "f": 0.278, "a": 0.556}
ASCENT, DESCENT = 0.718, 0.207  # Helvetica, of the font size above and below the baseline
STEP = 0.25  # points between samples along a stroke


# Geometry read from an SVG.

def text_box(text: ET.Element) -> tuple[float, float, float, float]:
    """``(left, top, right, bottom)`` of an SVG ``<text>`` (y grows downwards)."""
    x, y = float(text.get("x")), float(text.get("y"))
    size = float(text.get("font-size", "10"))
    width = size * sum(WIDTHS.get(c, 1.0) for c in "".join(text.itertext()))
    anchor = text.get("text-anchor", "middle")  # compact SVG leaves out "middle"
    left = {"start": x, "middle": x - width / 2, "end": x - width}[anchor]
    return left, y - ASCENT * size, left + width, y + DESCENT * size


def _numbers(text: str) -> list[tuple[float, float]]:
    values = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", text)]
    return list(zip(values[0::2], values[1::2]))


def path_points(d: str) -> list[tuple[float, float]]:
    """Points every :data:`STEP` or less along a Graphviz edge path (``M`` then cubic ``C`` pieces)."""
    assert re.fullmatch(r"M[-\d.,]+C[-\d., ]+", d), d  # the only form Graphviz writes for a spline
    pts = _numbers(d)
    out = [pts[0]]
    for k in range(1, len(pts) - 2, 3):
        p0, p1, p2, p3 = pts[k - 1:k + 3]
        n = max(2, math.ceil(sum(math.dist(a, b) for a, b in ((p0, p1), (p1, p2), (p2, p3))) / STEP))
        out += [_cubic(p0, p1, p2, p3, i / n) for i in range(1, n + 1)]
    return out


def _cubic(p0, p1, p2, p3, t: float) -> tuple[float, float]:
    """The point at ``t`` (0 to 1) of the cubic Bezier curve with control points ``p0`` to ``p3``."""
    weights = ((1 - t) ** 3, 3 * (1 - t) ** 2 * t, 3 * (1 - t) * t ** 2, t ** 3)
    return tuple(sum(w * p[i] for w, p in zip(weights, (p0, p1, p2, p3))) for i in range(2))


def polygon_points(points: str) -> list[tuple[float, float]]:
    """Points every :data:`STEP` or less around a closed polygon (an arrowhead)."""
    pts = _numbers(points)
    out = []
    for a, b in zip(pts, pts[1:] + pts[:1]):
        n = max(1, math.ceil(math.dist(a, b) / STEP))
        out += [(a[0] + (b[0] - a[0]) * i / n, a[1] + (b[1] - a[1]) * i / n) for i in range(n)]
    return out


def edges_in(svg: str) -> list[dict]:
    """Per edge group: its ``id``, label ``boxes`` with their ``texts`` and ``colours``,
    and ``strokes`` as ``(points, half the stroke width)`` with the ``stroke_colour``."""
    edges = []
    for g in ET.fromstring(svg).iter(SVG + "g"):
        if "edge" not in g.get("class", "").split():
            continue
        edge = {"id": g.get("class"), "boxes": [], "texts": [], "colours": [], "strokes": [],
                "stroke_colour": None}
        for el in g:
            half = float(el.get("stroke-width", "1")) / 2
            if el.tag == SVG + "path":
                edge["strokes"].append((path_points(el.get("d")), half))
                edge["stroke_colour"] = el.get("stroke")
            elif el.tag == SVG + "polygon":
                edge["strokes"].append((polygon_points(el.get("points")), half))
            elif el.tag == SVG + "text":
                edge["boxes"].append(text_box(el))
                edge["texts"].append("".join(el.itertext()))
                edge["colours"].append(el.get("fill"))
        edges.append(edge)
    return edges


def clearance(box: tuple[float, float, float, float], strokes: list) -> float:
    """Points between ``box`` and the nearest painted point of ``strokes`` (below 0: they meet)."""
    left, top, right, bottom = box
    return min(math.hypot(max(left - x, 0, x - right), max(top - y, 0, y - bottom)) - half
               for points, half in strokes for x, y in points)


def label_problems(svg: str) -> tuple[int, list[str]]:
    """How many edge labels ``svg`` has, and a line for each that meets an edge."""
    edges = edges_in(svg)
    count, problems = 0, []
    for k, edge in enumerate(edges):
        for box, colour in zip(edge["boxes"], edge["colours"]):
            count += 1
            own = clearance(box, edge["strokes"])
            if own <= 0:
                problems.append(f"{edge['id']}: label meets its own edge ({own:.2f} pt)")
            for j, other in enumerate(edges):
                if j != k and other["strokes"] and (gap := clearance(box, other["strokes"])) <= 0:
                    problems.append(f"{edge['id']}: label meets {other['id']} ({gap:.2f} pt)")
            if colour != edge["stroke_colour"]:
                problems.append(f"{edge['id']}: label {colour}, edge {edge['stroke_colour']}")
    return count, problems


def both_svgs(dot: str) -> dict[str, str]:
    """The layout program's SVG (as ``save`` writes it) and the compact SVG that pages show."""
    raw = render.pipe(dot, "svg").decode()
    return {"layout": raw, "compact": render.compact_svg(raw)}


# Pictures with edge labels.

def traced(loss: torch.Tensor, params=None) -> dg.BackwardTrace:
    with dg.trace_backward(loss, params=params) as bt:
        loss.backward()
    return bt


def chain_rule() -> dg.BackwardTrace:
    """Notebook 01: y = x * x + 3 * x; x * x sends 4 to x along two thick parallel edges."""
    x = torch.tensor([2.0], requires_grad=True)
    return traced(x * x + 3 * x, {"x": x})


def sigmoid_net() -> dg.BackwardTrace:
    """Notebook 07: four sigmoid layers; widths from thick near the loss to thin at the input."""
    tiny = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(3, 3), nn.Sigmoid())])
    w = torch.tensor([[1.0, -1.0, 0.0], [0.0, 1.0, -1.0], [1.0, 0.0, -1.0]]) / 2
    with torch.no_grad():
        for layer in tiny[::2]:
            layer.weight.copy_(w)
            layer.bias.zero_()
    return traced(tiny(torch.ones(1, 3)).sum(), tiny)


def doubling() -> dg.BackwardTrace:
    """h = h * 0.5 + h * 1.5, five times: every h is used twice."""
    x = torch.tensor([1.0], requires_grad=True)
    h = x
    for _ in range(5):
        h = h * 0.5 + h * 1.5
    return traced(h, {"x": x})


def lstm_loop() -> dg.BackwardTrace:
    """An LSTMCell over 12 steps: drawn rolled, with loop edges."""
    torch.manual_seed(0)
    cell = nn.LSTMCell(4, 8)
    h = c = torch.zeros(2, 8)
    for x in torch.randn(12, 2, 4):
        h, c = cell(x, (h, c))
    return traced(h.sum(), cell)


@pytest.mark.parametrize("make", [chain_rule, sigmoid_net, doubling, lstm_loop])
def test_norm_labels_keep_clear_of_every_edge(make):
    bt = make()
    dot = bt.to_dot()
    for form, svg in both_svgs(dot).items():
        count, problems = label_problems(svg)
        assert count == dot.count(" -> ") and count > 0, form  # every drawn edge carries its norm
        assert not problems, f"{form} SVG:\n" + "\n".join(problems)


def test_chain_rule_labels_show_the_local_gradients():
    svg = both_svgs(chain_rule().to_dot())["compact"]
    labels = sorted(text for edge in edges_in(svg) for text in edge["texts"])
    # dy/dx = 2x + 3 at x = 2: x * x sends x 2 along each of its two edges, 3 * x sends 3;
    # the labels into x add up to x.grad = 7
    assert labels == ["1", "1", "1", "2", "2", "3"]


def _chain(norms: list[float]) -> tuple[list[Node], list[tuple[int, int]], dict[tuple[int, int], float]]:
    """A chain of ops from a leaf to the output, the k-th edge carrying ``norms[k]``; the
    op next to the leaf uses it twice (two parallel edges that share the last norm)."""
    n = len(norms)
    nodes = [Node(id=0, name="output", kind="output", label="loss", shape=())]
    nodes += [Node(id=k, name="MulBackward0", kind="op", label="MulBackward0", shape=(3,))
              for k in range(1, n)]
    nodes.append(Node(id=n, name="AccumulateGrad", kind="parameter", label="w", shape=(3,)))
    edges = [(k + 1, k) for k in range(n)] + [(n, n - 1)]
    return nodes, edges, {edge: v for edge, v in zip(edges, norms)}


@pytest.mark.parametrize("norms", [
    [1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0, 1e3],  # widths 0.6 to 4 in even steps
    [1.0, 1.0, 1.0],  # one norm: every edge 1 wide
    [math.inf, 2.0, math.nan, 5e-7],  # red edges 3 wide, long texts
])
def test_labels_keep_clear_of_strokes_of_any_width(norms):
    nodes, edges, edge_norms = _chain(norms)
    dot = _dot.to_dot(nodes, edges, overlay=_dot.Overlay(edge_norms=edge_norms))
    widths = sorted({float(w) for w in re.findall(r"penwidth=([\d.]+)", dot)})
    assert widths[0] >= 0.6 and widths[-1] <= 4
    for form, svg in both_svgs(dot).items():
        count, problems = label_problems(svg)
        assert count == len(edges), form  # the parallel edges share their norm and both show it
        assert not problems, f"{form} SVG:\n" + "\n".join(problems)


def test_edge_label_shows_its_text_literally():
    dot = "digraph { a -> b [label=" + _dot._edge_label("a < b & \\N", 2.0) + "] }"
    assert "a < b & \\N" in svg_texts(render.pipe(dot, "svg").decode())
