"""Checks for 01_simple_backward.ipynb."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from . import exercise, expect

# What an answer may use: the notebook's imports (tests run stubs and solutions after this).
SETUP = """
import torch
import dynagraph as dg
"""


@exercise("01.4", "an SGD step that updates the leaf in place, unrecorded, and clears its gradient",
          answer="sgd_step")
def _sgd_step(sgd_step: Callable[[torch.Tensor, float], Any]) -> None:
    for start, lr in (([1.0, -1.0], 0.5), ([3.0, 0.5, -2.0], 0.1)):
        w = torch.tensor(start, requires_grad=True)
        (w ** 2).sum().backward()
        want = w.detach() - lr * 2 * torch.tensor(start)  # d(sum w^2)/dw = 2w
        before = w.data_ptr()
        out = sgd_step(w, lr)
        expect(out is None or out is w,
               "update `w` itself; `sgd_step` should not build and return a new tensor.")
        expect(w.is_leaf and w.grad_fn is None,
               "`w` is no longer a leaf: the update was recorded. Do it under `torch.no_grad()`.")
        expect(w.data_ptr() == before,
               "`w` points at new memory: update it in place (`w -= ...` or `w.sub_(...)`).")
        expect(w.requires_grad, "`w` no longer requires grad; keep it a trainable leaf.")
        expect(torch.allclose(w.detach(), want),
               f"with lr={lr}, w should become {want.tolist()}, got {w.detach().tolist()}: "
               "step against the gradient, w - lr * w.grad.")
        expect(w.grad is None or not w.grad.any(),
               "`w.grad` still holds the old gradient: clear it (`w.grad = None`).")
