"""Checks for 08_jit_and_graph_capture.ipynb."""

from __future__ import annotations

import contextlib
import functools
import logging
import types
import warnings
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from .._device import device as _device
from .._language import N_, tr
from . import exercise, expect

# What an answer may use: the notebook's imports (tests run stubs and solutions after this).
SETUP = """
import contextlib, logging, time, warnings
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence
import dynagraph as dg
"""


class _LoopRNN(nn.Module):
    """The notebook's per-sequence loop: one ``nn.RNN`` call per sequence, on its real length."""

    def __init__(self, n_in: int = 4, n_hidden: int = 8):
        super().__init__()
        self.rnn = nn.RNN(n_in, n_hidden, batch_first=True)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        outs = []
        for i in range(x.shape[0]):
            n = int(lengths[i])
            _, h = self.rnn(x[i:i + 1, :n])
            outs.append(h[-1, 0])
        return torch.stack(outs)


@contextlib.contextmanager
def _calls_to(*targets: tuple[Any, str]) -> Iterator[list[str]]:
    """Count calls to ``getattr(owner, name)`` for each ``(owner, name)`` while inside: the
    entry points that every way of calling ``torch.jit.trace`` or ``torch.export.export`` reaches."""
    calls: list[str] = []
    saved = [(owner, name, getattr(owner, name)) for owner, name in targets]

    def spy(name: str, original: Any) -> Any:
        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return original(*args, **kwargs)
        return wrapper

    for owner, name, original in saved:
        setattr(owner, name, spy(name, original))
    try:
        yield calls
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


def _tracing_entry_points() -> tuple[tuple[Any, str], ...]:
    """Where ``torch.jit.trace`` and ``trace_module`` end up, however they were imported."""
    import torch.jit._trace as jit_trace
    return ((jit_trace, "make_module"), (torch._C, "_create_function_from_trace"),
            (torch._C, "_create_function_from_trace_with_dict"))


def _export_entry_points() -> tuple[tuple[Any, str], ...]:
    """Where ``torch.export.export`` ends up, however it was imported."""
    import torch.export._trace as export_trace
    return ((export_trace, "_export"),)


@functools.cache
def _traced_rnn_calls(lengths_list: tuple[int, ...], dev: str) -> int:
    """The number of ``aten::rnn_tanh`` calls in ``torch.jit.trace`` of the loop on these lengths."""
    torch.manual_seed(0)
    model = _LoopRNN().to(dev)
    lengths = torch.tensor(lengths_list)             # on the CPU, as in the notebook
    x = torch.randn(len(lengths_list), 6, 4, device=dev)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")              # the deprecation and TracerWarnings of section 2
        traced = torch.jit.trace(model, (x, lengths))
    return str(traced.inlined_graph).count("aten::rnn_tanh")


@exercise("08.1", N_("predicting what torch.jit.trace records for a per-sequence loop"),
          answer="predicted_rnn_calls")
def _predicted_rnn_calls(predicted_rnn_calls: Any) -> None:
    dev = str(_device())                             # CUDA when available: trace where the notebook runs
    for lengths_list in ([6, 2, 4], [1, 2, 3, 4], [5], [3, 3, 1, 2, 6, 4]):
        want = _traced_rnn_calls(tuple(lengths_list), dev)
        with _calls_to(*_tracing_entry_points()) as traced:
            got = predicted_rnn_calls(torch.tensor(lengths_list))
        expect(not traced,
               tr("Your answer runs `torch.jit.trace` to count the calls. The exercise asks for a "
                  "prediction: work the count out from `lengths` and what section 3 showed, without "
                  "tracing."))
        expect(isinstance(got, int) and not isinstance(got, bool),
               tr("Return a Python int, got {type} ({got!r}).", type=type(got).__name__, got=got))
        expect(got == want,
               tr("For lengths {lengths} the trace holds {want} `aten::rnn_tanh` calls, you predicted "
                  "{got}. The tracer records each op that ran once per run of the Python loop; and "
                  "`nn.RNN` runs a whole sequence in one call, whatever its length.",
                  lengths=lengths_list, want=want, got=got))


def _reference_grad(x: torch.Tensor) -> torch.Tensor:
    """d/dx sum(x / m), m = max(x) when m > 0 (unique maximum), else d/dx sum(x) = 1."""
    m = x.max()
    if m <= 0:
        return torch.ones_like(x)
    g = torch.full_like(x, 1 / m.item())
    g.view(-1)[x.argmax()] -= (x.sum() / m ** 2).item()
    return g


def _fresh(fn: Any) -> Any:
    """A copy of the function ``fn`` with a code object of its own. ``torch.compile`` keeps its
    cache on the code object: compiling the copy leaves the learner's compiled ``fn`` as it was."""
    if not isinstance(fn, types.FunctionType):
        return fn
    copy = types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__,
                              fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy


def _breaks_graph(fn: Any, x: torch.Tensor) -> bool:
    """Whether ``torch.compile`` breaks the graph of ``fn(x)``: it fails with ``fullgraph=True``.
    It compiles a fresh copy of ``fn``, with no codegen and no ``torch.compiler.reset()``: the
    learner's own compiled functions keep their caches. With ``fullgraph`` a helper that ``fn``
    calls is traced inline, never compiled and cached on its own code (without it, that cache
    reaches the recompile limit after 8 checks, and the break is no longer seen)."""
    logger = logging.getLogger("torch._dynamo")     # its graph-break warnings name temporary files
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        torch.compile(_fresh(fn), backend=lambda gm, inputs: gm.forward, fullgraph=True)(x)
    except (torch._dynamo.exc.Unsupported, torch._dynamo.exc.UserError):
        return True
    finally:
        logger.setLevel(level)
    return False


def _scale_by_max(x: torch.Tensor) -> torch.Tensor:
    m = x.max().item()
    return x / m if m > 0 else x


@exercise("08.2", N_("dividing by the maximum inside the graph, with finite gradients"),
          answer="scale_by_max_no_break")
def _scale_by_max_no_break(scale_by_max_no_break: Any) -> None:
    inputs = [[1.0, 2.0, 4.0], [-1.0, -2.0], [-1.0, 0.0], [0.0, 0.0, 0.0],   # maxima > 0, < 0, == 0
              [[0.5, 3.0], [2.0, -1.0]], [0.25, 0.5]]
    for values in inputs:
        x = torch.tensor(values, requires_grad=True)
        got = scale_by_max_no_break(x)
        want = _scale_by_max(x.detach())
        expect(isinstance(got, torch.Tensor) and got.shape == want.shape
               and torch.allclose(got.detach(), want, equal_nan=False),
               tr("For {values} the values differ from `scale_by_max`'s {want}: got {got}. Divide by the "
                  "maximum only where it is > 0; elsewhere return x unchanged.", values=values,
                  want=want.tolist(), got=got.tolist() if isinstance(got, torch.Tensor) else repr(got)))
        expect(got.requires_grad,
               tr("For {values} the result does not require grad: keep it inside autograd.", values=values))
        (grad,) = torch.autograd.grad(got.sum(), x)
        expect(torch.isfinite(grad).all(),
               tr("For {values} (maximum {max:g}) the gradient is {grad}: `torch.where` differentiates "
                  "*both* branches, and the branch it did not pick divides by 0 here. Choose what to "
                  "divide by, not what to return: a denominator that is never 0 needs no second branch.",
                  values=values, max=x.max().item(), grad=grad.tolist()),
               further=tr("divide x by a denominator that is the maximum m when m > 0, and 1 when "
                          "m <= 0."),
               code="x / torch.where(m > 0, m, 1.0)")
        expect(torch.allclose(grad, _reference_grad(x.detach()), atol=1e-6),
               tr("For {values} the gradient is {grad}, the analytic one is {want}: the maximum depends "
                  "on x too, so do not detach it (no `.item()`, `.detach()` or `.data` on m).",
                  values=values, grad=grad.tolist(), want=_reference_grad(x.detach()).tolist()))
    expect(not _breaks_graph(scale_by_max_no_break, torch.tensor([1.0, 2.0, 4.0])),
           tr("`torch.compile(..., fullgraph=True)` fails on your function: it has a graph break. A Python "
              "number taken from a tensor (`.item()`, `float(...)`, an `if` on a tensor) breaks the graph, "
              "and so does a `print`: keep the choice a tensor op."))


def _describe(model: nn.Sequential) -> list[str]:
    """The modules of a Sequential by class name, marking a Linear without a bias."""
    return [type(m).__name__ + ("(bias=False)" if getattr(m, "bias", 0) is None else "") for m in model]


def _export_targets(model: nn.Module, n_in: int) -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exported = torch.export.export(model, (torch.randn(2, n_in),))
    return [str(node.target) for node in exported.graph.nodes if node.op == "call_function"]


def _op_name(op: Any) -> str:
    """An op as ``str(node.target)`` names it: ``torch.ops.aten.linear.default`` (the op, or its
    name as a string) and ``"aten.linear.default"`` all become ``"aten.linear.default"``."""
    name = str(op)                                   # an OpOverload prints as 'aten.linear.default'
    return name.removeprefix("torch.ops.") if isinstance(op, str) else name


@exercise("08.3", N_("predicting the ops torch.export captures for a Sequential"),
          answer="predicted_aten_ops")
def _predicted_aten_ops(predicted_aten_ops: Any) -> None:
    torch.manual_seed(0)
    models = [(6, nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 5), nn.ReLU(), nn.Linear(5, 2))),
              (4, nn.Sequential(nn.Linear(4, 3, bias=False), nn.Tanh(), nn.Linear(3, 1))),
              (3, nn.Sequential(nn.Linear(3, 3), nn.Sigmoid()))]
    for n_in, model in models:
        with _calls_to(*_export_entry_points()) as exported:
            got = predicted_aten_ops(model)
        expect(not exported,
               tr("Your answer runs `torch.export.export` to read the ops. The exercise asks for a "
                  "prediction: work the list out from the modules of the `Sequential`, without exporting."))
        expect(isinstance(got, (list, tuple)),
               tr("Return a list of ops, got {type}.", type=type(got).__name__))
        got = [_op_name(op) for op in got]
        want = _export_targets(model, n_in)
        expect(len(got) != len(want) or all(name.count(".") == 2 for name in got),
               tr("For {model} you predicted {got}: name each op with its overload, as export records it "
                  "(`torch.ops.aten.<op>.<overload>`); a module's op uses the `default` overload.",
                  model=_describe(model), got=got))
        expect(got == want,
               tr("For {model} torch.export records {want}, you predicted {got}. Each module becomes one "
                  "high-level ATen op (`torch.ops.aten.<op>.default`), with or without a bias: export does "
                  "not split `linear` into a transpose and a matmul.", model=_describe(model), want=want,
                  got=got))
