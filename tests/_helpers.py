"""Small pieces several test modules share (import as ``from _helpers import ...``)."""

import base64
import importlib.util
import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import torch

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


def pictures(html: str) -> list[str]:
    """The SVG text of every picture in a dynagraph output (its data-URI images)."""
    return [base64.b64decode(b).decode() for b in re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', html)]


def svg_texts(svg: str) -> list[str]:
    """The text lines drawn in an SVG (parsing it proves it is well-formed XML)."""
    return ["".join(t.itertext()) for t in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text")]


def page_data(html: str) -> dict:
    """The JSON data a dynagraph output hands its script."""
    (text,) = re.findall(r'<script type="application/json" class="dg-data">(.*?)</script>', html, re.S)
    return json.loads(text)


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
