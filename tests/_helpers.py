"""Small pieces several test modules share (import as ``from _helpers import ...``)."""

import importlib.util
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
    spec.loader.exec_module(module)
    return module
