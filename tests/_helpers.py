"""Small pieces several test modules share (import as ``from _helpers import ...``)."""

import base64
import importlib.util
import json
import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
import torch
from hypothesis import strategies as st

from dynagraph import _page
from dynagraph.capture import named_roots, param_names_of, walk

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


class Square(torch.autograd.Function):
    """x * x as a custom Function that saves its input: its node is named SquareBackward."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a * a

    @staticmethod
    def backward(ctx, grad):
        (a,) = ctx.saved_tensors
        return 2 * a * grad


def load_benchmark(name: str):
    """Import ``benchmarks/<name>.py`` (the folder is not a package) as a module."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while it runs
    spec.loader.exec_module(module)
    return module


def html_of(view) -> str:
    """A view's outputs as one HTML fragment, as a page that runs scripts shows them."""
    return _page.fragment(view._outputs())


def stored(view) -> int:
    """Bytes of all of a view's outputs as a notebook stores them (the budget is for their sum)."""
    return _page.stored_bytes(view._outputs())


def outputs_of(view) -> dict[str, dict[str, str]]:
    """A view's outputs' data by part (``table picture steps``)."""
    return {out.metadata["dynagraph"]: out.data for out in view._outputs()}


_CALL = re.compile(r"dynagraphView\(typeof element !== \"undefined\" \? element : null, (\{.*?\}), \"")


def scripts_data(html: str) -> list[dict]:
    """The data each dynagraph picture's script in ``html`` (or one script) draws."""
    return [json.loads(text) for text in _CALL.findall(html)]


def pictures(html: str) -> list[str]:
    """The SVG text of every picture in a dynagraph output (what its scripts draw)."""
    return [base64.b64decode(data["svg"]).decode() for data in scripts_data(html)]


def svg_texts(svg: str) -> list[str]:
    """The text lines drawn in an SVG (parsing it proves it is well-formed XML)."""
    return ["".join(t.itertext()) for t in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text")]


def page_data(html: str) -> dict:
    """The JSON data a dynagraph output hands its script."""
    (data,) = scripts_data(html)
    return data


def expand_steps(data: dict) -> list[tuple[str, list[int], int, int]]:
    """``(text, drawn nodes, block, iteration)`` per step, read from a page's data as
    ``dynagraph/assets/DATA.md`` says (what ``view.js`` does in the browser)."""
    out: list[tuple[str, list[int], int, int]] = []
    fills = data.get("f", [-1] * len(data["s"]))
    for kind, it, fill in zip(data["s"], data["k"], fills, strict=True):
        t, nodes, block = data["kinds"][kind]
        text = data["texts"][t]
        out.append((text.replace("\x00", data["fills"][fill]) if fill >= 0 else text, nodes, block, it))
    return out


def page_steps(html: str) -> list[tuple[str, list[int]]]:
    """``(text, drawn node ids)`` of each step of a stepper output, in order."""
    return [(text, nodes) for text, nodes, _, _ in expand_steps(page_data(html))]


def frame_rows(svg: str) -> dict[int, tuple[float, float]]:
    """Frame number -> (top, bottom) of its box in SVG coordinates (y grows downwards)."""
    rows = {}
    for k, d in re.findall(r'class="cluster dg-frame[^"]*dg-f(\d+)">\s*<path[^>]*\bd="([^"]+)"', svg):
        ys = [float(y) for y in re.findall(r"-?[\d.]+,(-?[\d.]+)", d)]
        rows[int(k)] = (min(ys), max(ys))
    return rows


def _wide(g):
    """``g`` in float64, or complex128 when complex (``double()`` drops the imaginary part)."""
    return g.to(torch.complex128) if g.is_complex() else g.double()


def sent_norms(root, params):
    """The oracle of every edge of a backward replay, taken in float64 by plain
    post-hooks: ``{(src id, dst id, input number): norm}`` of what node ``dst`` sent node
    ``src`` through its input ``k`` (one norm per input slot: ``x * x`` sends ``x``
    two), and ``{(src id, dst id): norm}`` of all of it together (gradients for one slot
    of ``src`` added up; several slots of one child, two outputs of ``unbind``, taken as
    one vector). Register it inside ``trace_backward`` (after the tracer's hooks, so they
    see the same gradients), before ``backward()``. Returns the dict, filled by
    ``backward()``, and the hooks' handles to remove. Record ids come from ``walk`` (its
    records are checked against a plain walk in test_properties)."""
    _, _, fns = walk(named_roots(root), param_names_of(params)[0])
    ids = {fn: nid for nid, fn in enumerate(fns) if fn is not None}
    sent, handles = {}, []
    for fn, nid in ids.items():
        def hook(grad_inputs, grad_outputs, nid=nid, fn=fn):
            summed = {}
            for k, ((child, out), g) in enumerate(zip(fn.next_functions, grad_inputs)):
                if child is not None and g is not None:
                    sent[(ids[child], nid, k)] = torch.linalg.vector_norm(_wide(g)).item()
                    key = (ids[child], out)
                    summed[key] = summed[key] + g if key in summed else g
            per_child = {}
            for (child, _), g in summed.items():
                per_child.setdefault(child, []).append(torch.linalg.vector_norm(_wide(g)).item())
            for child, norms in per_child.items():
                sent[(child, nid)] = sum(n * n for n in norms) ** 0.5
        handles.append(fn.register_hook(hook))
    return sent, handles


def replayed(root, params):
    """``root.backward()`` under ``trace_backward`` with the oracle's hooks beside the
    tracer's: ``(trace, what the oracle took)`` (:func:`sent_norms`), the hooks removed."""
    import dynagraph as dg

    with dg.trace_backward(root, params=params) as bt:
        sent, handles = sent_norms(root, params)
        root.backward()
    for handle in handles:
        handle.remove()
    return bt, sent


# Lesson 07's backward replay (notebooks/07_vanishing_gradients.ipynb, the cell with
# `tiny`): four Linear + Sigmoid layers, 21 steps, a picture taller than its canvas.
LESSON07_REPLAY = """import torch, dynagraph as dg
from torch import nn
tiny = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(3, 3), nn.Sigmoid())])
W = torch.tensor([[1.0, -1.0, 0.0], [0.0, 1.0, -1.0], [1.0, 0.0, -1.0]]) / 2
with torch.no_grad():
    for layer in tiny[::2]:
        layer.weight.copy_(W)
        layer.bias.zero_()
loss = tiny(torch.ones(1, 3)).sum()
with dg.trace_backward(loss, params=tiny) as bt:
    loss.backward()
bt"""


def check_edge_norms(bt, sent, rel, abs=1e-12):
    """Every edge between two nodes of ``bt`` has the norm the oracle took, within
    ``rel``, one per input slot, and each pair of nodes the norm of all it carries
    together (edges into the drawn output are not autograd edges: the oracle has none)."""
    outputs = {n.id for n in bt.nodes if n.kind == "output"}
    for got, want in ((bt.edge_norms, {k: v for k, v in sent.items() if len(k) == 3}),
                      (bt.merged_norms, {k: v for k, v in sent.items() if len(k) == 2})):
        inner = {edge: v for edge, v in got.items() if edge[1] not in outputs}
        assert inner.keys() == want.keys()
        for edge, v in inner.items():
            assert v == pytest.approx(want[edge], rel=rel, abs=abs), (bt.nodes[edge[0]].name, bt.nodes[edge[1]].name)



def op_programs(unary: Mapping[str, Callable], binary: Mapping[str, Callable], most: int):
    """A Hypothesis strategy of random op programs: ``(inputs, steps)`` with 1-3 inputs and
    1 to ``most`` steps, each ``("u", op, i)`` or ``("b", op, i, j)`` over the values so far
    (the inputs, then each step's result), ops named from ``unary`` and ``binary``."""

    @st.composite
    def programs(draw):
        inputs = draw(st.integers(1, 3))
        steps = []
        for n in range(draw(st.integers(1, most))):
            values = inputs + n
            if draw(st.booleans()):
                steps.append(("u", draw(st.sampled_from(sorted(unary))), draw(st.integers(0, values - 1))))
            else:
                steps.append(("b", draw(st.sampled_from(sorted(binary))),
                              draw(st.integers(0, values - 1)), draw(st.integers(0, values - 1))))
        return inputs, steps

    return programs()


def run_steps(steps, values: list, unary: Mapping[str, Callable], binary: Mapping[str, Callable]) -> list:
    """Run an :func:`op_programs` program's ``steps`` on ``values`` (appending each result)."""
    for step in steps:
        op = (unary if step[0] == "u" else binary)[step[1]]
        values.append(op(*(values[i] for i in step[2:])))
    return values
