"""dynagraph: see PyTorch's dynamic autograd graph, live, and the gradients that flow through it.

Example:
    >>> import torch, dynagraph as dg
    >>> x = torch.tensor([1.0], requires_grad=True)
    >>> dg.draw(2 * x + 1)          # displays itself in Jupyter
"""

from ._device import device
from ._language import language
from ._records import Node
from ._settings import set_language
from ._tags import track_modules
from .backward import BackwardTrace, trace_backward
from .diff import GraphDiff, diff
from .draw import draw
from .forward import ForwardTrace, trace_forward
from .graph import Graph
from .history import GradHistory
from .live import Recording, Step, live
from .norms import GradNorms, grad_norms
from .passes import track_passes
from .plots import plot_grad_history, plot_grad_norms, plot_step_memory
from .render import RendererNotFoundError, RenderTimeoutError
from .saving import load_view, save_view
from .step_memory import StepMemory, step_memory
from .timing import Comparison, compare

__version__ = "0.1.0"

__all__ = [  # sorted; literal, so that linters and type checkers read it
    "BackwardTrace",
    "Comparison",
    "ForwardTrace",
    "GradHistory",
    "GradNorms",
    "Graph",
    "GraphDiff",
    "Node",
    "Recording",
    "RenderTimeoutError",
    "RendererNotFoundError",
    "Step",
    "StepMemory",
    "compare",
    "device",
    "diff",
    "draw",
    "grad_norms",
    "language",
    "live",
    "load_view",
    "plot_grad_history",
    "plot_grad_norms",
    "plot_step_memory",
    "save_view",
    "set_language",
    "step_memory",
    "trace_backward",
    "trace_forward",
    "track_modules",
    "track_passes",
]
