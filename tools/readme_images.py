"""Regenerate the SVG pictures in docs/images/ (README.md shows live_mlp.svg).

    .venv/bin/python tools/readme_images.py
"""

from pathlib import Path

import torch
from torch import nn

import dynagraph as dg
from dynagraph import _dot, render

OUT = Path(__file__).resolve().parent.parent / "docs" / "images"


def live_picture() -> str:
    """A small MLP's recording, each node labelled with the step that created it."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    with dg.live(model) as rec:
        model(torch.ones(2, 3)).pow(2).mean()  # the loss: live() records the ops that make it
    badges = {n: f"step {s.index}" for s in rec.steps for n in s.nodes}
    dot = _dot.to_dot(rec.nodes, rec.edges, rec.module_types, overlay=_dot.Overlay(badges=badges),
                        title=f"dg.live(): {len(rec.steps)} steps, each node labelled by its step")
    return render.pipe(dot, "svg").decode()


def backward_picture() -> str:
    """The same model's backward pass: execution order and gradient norm per edge."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    loss = model(torch.ones(2, 3)).pow(2).mean()
    with dg.trace_backward(loss, params=model) as bt:
        loss.backward()
    return render.pipe(bt.to_dot(), "svg").decode()


def rolled_picture() -> str:
    """An LSTMCell called 50 times in a Python loop: the picture draws the cell once, ×50."""
    torch.manual_seed(0)
    cell = nn.LSTMCell(3, 4)
    h = c = torch.zeros(1, 4)
    for _ in range(50):
        h, c = cell(torch.ones(1, 3), (h, c))
    return dg.draw(h.sum(), params=cell).svg()


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "live_mlp.svg").write_text(live_picture())
    (OUT / "backward_mlp.svg").write_text(backward_picture())
    (OUT / "rolled_lstm.svg").write_text(rolled_picture())
    print("wrote", ", ".join(p.name for p in sorted(OUT.glob("*.svg"))))
