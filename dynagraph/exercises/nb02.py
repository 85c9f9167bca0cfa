"""Checks for 02_variable_length_rnn.ipynb."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from .._language import N_, tr, translated
from .._walk import reach
from . import Wrong, exercise, expect

# What an answer may use: the notebook's imports (tests run stubs and solutions after this).
SETUP = """
import torch
import torch.nn.functional as F
from torch import nn
import dynagraph as dg
"""


def _batch(seed: int, lengths: list[int], features: int) -> torch.Tensor:
    """A zero-padded batch (batch, max(lengths), features). The last real step of the first
    sequence longer than 1 is all zeros too: real data can be zero, so an answer must read
    the lengths, not guess them from the values."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(len(lengths), max(lengths), features, generator=g)
    x[torch.arange(max(lengths)) >= torch.tensor(lengths)[:, None]] = 0.0
    i = next(i for i, n in enumerate(lengths) if n > 1)
    x[i, lengths[i] - 1] = 0.0
    return x


def _loop(rnn: nn.RNN, x: torch.Tensor, lengths: list[int]) -> torch.Tensor:
    """The oracle: each sequence on its own, cut to its length; the top layer's final state."""
    return torch.stack([rnn(x[i:i + 1, :n])[1][-1, 0] for i, n in enumerate(lengths)])


def _index_hint(e: IndexError) -> AssertionError:
    return Wrong(tr("indexing failed ({error}): a sequence of length n has the steps 0 to n - 1, so its "
                    "last real step is one before its length.", error=e),
                 code=tr("for row i the last real step is `out[i, lengths[i] - 1]`."))


def _counting(module: nn.Module) -> tuple[list[int], Callable[[], None]]:
    """Count the calls of ``module`` (``module(...)`` and ``module.forward(...)`` alike), with
    each call's batch size; returns the list and a function that stops counting."""
    calls: list[int] = []
    forward = module.forward

    def counted(*args: Any, **kwargs: Any) -> Any:
        first = args[0] if args else kwargs.get("input")
        calls.append(first.shape[0] if isinstance(first, torch.Tensor) and first.dim() > 1 else -1)
        return forward(*args, **kwargs)

    module.forward = counted
    return calls, lambda: delattr(module, "forward")


@exercise("02.1", N_("each sequence's output at its last real step, from the padded outputs"),
          answer="last_outputs")
def _last_outputs(last_outputs: Any) -> None:
    g = torch.Generator().manual_seed(0)
    for lengths in ([2, 5, 3, 1], [4, 1, 4], [1], [3, 6, 2, 6, 1]):
        out = torch.randn(len(lengths), max(lengths), 3, generator=g)
        lens = torch.tensor(lengths)
        want = torch.stack([out[i, n - 1] for i, n in enumerate(lengths)])
        try:
            got = last_outputs(out, lens)
        except IndexError as e:
            raise _index_hint(e) from e
        expect(isinstance(got, torch.Tensor) and got.shape == want.shape,
               tr("for a batch of {batch} with hidden size 3 return shape {shape}, one row per "
                  "sequence; got {got_shape}.", batch=len(lengths), shape=tuple(want.shape),
                  got_shape=tuple(getattr(got, "shape", ()))))
        expect(torch.equal(got, want) or not torch.equal(got, out[:, -1]),
               tr("you took the last *padded* step: for every sequence shorter than the longest, "
                  "that step is padding. Each row needs its own last real step."),
               code=tr("`out[:, -1]` is one time step for all rows; row i needs step `lengths[i] - 1`."))
        expect(torch.equal(got, want),
               tr("with lengths {lengths}, row i should be the output at row i's own last real step. "
                  "Pick one (batch, time) pair per row: index both dimensions together.", lengths=lengths),
               code=tr("`out[rows, steps]` with two index tensors of length batch picks "
                       "`out[rows[k], steps[k]]` for each k."))
    with torch.random.fork_rng():              # and on a real RNN: the outputs end where h_n is
        torch.manual_seed(0)                   # (without touching the notebook's random state)
        rnn = nn.RNN(3, 4, batch_first=True)
    lengths = [2, 5, 3, 1]
    x = _batch(1, lengths, 3)
    packed = nn.utils.rnn.pack_padded_sequence(x, torch.tensor(lengths), batch_first=True,
                                               enforce_sorted=False)
    out_packed, h_n = rnn(packed)
    out, out_lengths = nn.utils.rnn.pad_packed_sequence(out_packed, batch_first=True)
    expect(torch.allclose(last_outputs(out, out_lengths), h_n[-1]),
           tr("on the padded outputs of a real RNN your rows differ from its final hidden states."))


def _nodes(t: torch.Tensor) -> int:
    """The autograd nodes reachable from ``t.grad_fn``, each once."""
    found: list[Any] = []

    def enter(fn: Any) -> bool:
        found.append(fn)
        return True

    reach([t.grad_fn] if t.grad_fn is not None else [], enter)
    return len(found)


class _GradCalls(TorchFunctionMode):
    """Records the torch calls inside the block that touch a tensor requiring grad: creating
    parameters, running a module, drawing a graph. Plain arithmetic on tensors, or reading a
    tensor's attributes such as ``grad_fn``, is not recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", str(func))
        seen = (*args, *(kwargs or {}).values(), out)
        if name != "__get__" and any(isinstance(t, torch.Tensor) and t.requires_grad for t in seen):
            self.names.append(name)
        return out


_BUILT = N_("your function built or used tensors that require grad (`{call}`). The question asks for "
            "a prediction: work the count out from the numbers section 3 measured, without "
            "building or drawing a graph.")


@exercise("02.2", N_("the node count of the cell loop for any length, predicted without drawing"),
          answer="predicted_nodes")
def _predicted_nodes(predicted_nodes: Any) -> None:
    with torch.random.fork_rng():
        torch.manual_seed(0)
        cell = nn.RNNCell(1, 2)                # as `tiny` in the notebook
    seq = torch.arange(1.0, 41.0).view(1, 40, 1)
    for n in (1, 2, 3, 4, 7, 12, 40):          # 40: longer than any graph drawn in the notebook
        h = torch.zeros(1, 2)
        for t in range(n):
            h = cell(seq[:, t], h)
        want = _nodes(h)
        calls = _GradCalls()
        with torch.no_grad(), calls:           # a prediction builds no graph
            try:
                got = predicted_nodes(n)
            except NotImplementedError:
                raise                          # the stub: "not done yet"
            except Exception as e:
                expect(not calls.names, translated(_BUILT, call=calls.names[0] if calls.names else ""))
                expect(not isinstance(e, (KeyError, IndexError)),
                       tr("your function has no answer for length {n} ({error}). Find a rule that "
                          "works for every length n >= 1.", n=n, error=type(e).__name__))
                raise
        expect(not calls.names, translated(_BUILT, call=calls.names[0] if calls.names else ""))
        expect(isinstance(got, int) and not isinstance(got, bool),
               tr("return the number of nodes as an int, got {type}.", type=type(got).__name__))
        if got == want:
            continue
        per_step = _nodes_after(cell, seq, 2) - _nodes_after(cell, seq, 1)
        expect(got != per_step * n,
               tr("for length {n} you predict {got}, the graph has {want}: the 4 parameters' "
                  "`AccumulateGrad` nodes are there once, whatever the length.", n=n, got=got, want=want))
        expect(got != _nodes_after(cell, seq, 1) * n,
               tr("for length {n} you predict {got}, the graph has {want}: scaling the whole "
                  "length-1 graph counts the shared parameters once per step; they are shared "
                  "(one `AccumulateGrad` each), only `per_step` nodes repeat.", n=n, got=got, want=want))
        expect(False, tr("for length {n} you predict {got}, the graph has {want}. Start from the "
                         "length-1 or length-2 total and add `per_step` per extra step (section 3).",
                         n=n, got=got, want=want))


def _nodes_after(cell: nn.RNNCell, seq: torch.Tensor, n: int) -> int:
    h = torch.zeros(1, 2)
    for t in range(n):
        h = cell(seq[:, t], h)
    return _nodes(h)


@exercise("02.3", N_("the top layer's final states of a padded batch, from one packed call"),
          answer="final_states")
def _final_states(final_states: Any) -> None:
    for seed, (layers, lengths) in enumerate([(1, [2, 5, 3, 1]), (2, [3, 1, 6, 6, 2]), (2, [1, 4])]):
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            rnn = nn.RNN(3, 5, num_layers=layers, batch_first=True)
        x = _batch(seed, lengths, 3)
        got, calls = _run_final_states(final_states, rnn, x, lengths)
        want = _loop(rnn, x, lengths)
        expect(isinstance(got, torch.Tensor),
               tr("return a tensor of shape {shape}, got {type}.", shape=tuple(want.shape),
                  type=type(got).__name__))
        expect(got.shape == want.shape,
               tr("with {layers} layer(s) `h_n` is (num_layers, batch, hidden): return the top "
                  "layer, shape {shape}; got {got_shape}.", layers=layers, shape=tuple(want.shape),
                  got_shape=tuple(got.shape)))
        expect(len(calls) == 1,
               tr("your function called the RNN {calls} times: pack the batch and call it once.",
                  calls=len(calls)))
        _check_final_values(got, want, rnn, x, lengths)


def _run_final_states(final_states: Any, rnn: nn.RNN, x: torch.Tensor,
                      lengths: list[int]) -> tuple[Any, list]:
    """``(result, calls)``: what the learner's ``final_states`` returns for the padded batch
    ``x``, and the calls it made of ``rnn``; a RuntimeError it raises becomes a hint."""
    calls, stop = _counting(rnn)
    try:
        got = final_states(rnn, x, torch.tensor(lengths))
    except NotImplementedError:            # the stub (a RuntimeError too): "not done yet"
        raise
    except RuntimeError as e:
        expect("enforce_sorted" not in str(e),
               tr("the lengths are not sorted, and packing expects them longest first unless "
                  "you tell it otherwise. PyTorch can sort them, and put `h_n` back in the "
                  "original order, for you (section 5)."),
               code="`pack_padded_sequence(..., enforce_sorted=False)`")
        raise Wrong(tr("your function raised RuntimeError: {message}. Here `x` is (batch, time, "
                       "features): check that your packing call knows that the batch comes first.",
                       message=str(e).rstrip(".")),
                    code="`pack_padded_sequence(x, lengths, batch_first=True, ...)`") from e
    finally:
        stop()
    return got, calls


def _check_final_values(got: torch.Tensor, want: torch.Tensor, rnn: nn.RNN, x: torch.Tensor,
                        lengths: list[int]) -> None:
    """The learner's final states ``got`` (of the right shape) against ``want``, the
    per-sequence loop's: each mistake that gives other values named, then the gradients."""
    layers = rnn.num_layers
    with torch.no_grad():
        unpacked = rnn(x)[1][-1]
    expect(not torch.allclose(got, unpacked),
           tr("these are the final states of the *padded* tensor: the RNN read the padding. "
              "Tell the RNN each sequence's real length first (section 5)."),
           code="`nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, ...)`")
    order = torch.argsort(torch.tensor(lengths), descending=True, stable=True)
    in_order = torch.equal(order, torch.arange(len(lengths)))
    expect(in_order or not torch.allclose(got, want[order], atol=1e-6),
           tr("your rows are in the order of the sorted lengths, longest first, not in the "
              "order of the batch. Put them back, or let PyTorch sort and unsort them (section 5)."),
           code=tr("`pack_padded_sequence(..., enforce_sorted=False)` returns `h_n` in the "
                   "original order."))
    expect(not bool((got.detach().abs().sum(dim=1) == 0).any()),
           tr("some rows are all zero: in padded outputs, the steps after a sequence's end are "
              "zeros. A final state is the state at each sequence's own last real step."))
    if layers > 1:
        expect(not torch.allclose(got, rnn(nn.utils.rnn.pack_padded_sequence(
                   x, torch.tensor(lengths), batch_first=True, enforce_sorted=False))[1][0]),
               tr("with {layers} layers these are the bottom layer's states. `h_n` holds one "
                  "row per layer, the bottom layer first: return the top one.", layers=layers),
               code=tr("`h_n[-1]` is the top layer, `h_n[0]` the bottom one."))
    expect(torch.allclose(got, want, atol=1e-6),
           tr("with lengths {lengths} your states differ from the per-sequence loop's. "
              "Take the lengths from `lengths`, not from the values of `x`: a real step can be "
              "all zeros.", lengths=lengths))
    _expect_same_gradients(
        got, want, rnn,
        tr("the values are right, but they carry no gradient: training needs the RNN's "
           "weights to get one through these states. Do not detach them or use `no_grad()`."),
        tr("the values are right but the weights' gradients differ from the per-sequence loop's."))


def _cell_loop(cell: nn.RNNCell, x: torch.Tensor, lengths: list[int]) -> torch.Tensor:
    """The oracle: the cell over each sequence on its own, cut to its length."""
    finals = []
    for i, n in enumerate(lengths):
        h = torch.zeros(1, cell.hidden_size)
        for t in range(n):
            h = cell(x[i:i + 1, t], h)
        finals.append(h[0])
    return torch.stack(finals)


@exercise("02.4", N_("a batched cell loop that freezes each sequence's state after its last step"),
          answer="run_cell_masked")
def _run_cell_masked(run_cell_masked: Any) -> None:
    for seed, lengths in enumerate(([2, 5, 3, 1], [4, 4, 1], [1, 6, 2, 6, 3])):
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            cell = nn.RNNCell(3, 4)
        x = _batch(seed, lengths, 3)
        calls, stop = _counting(cell)
        try:
            got = run_cell_masked(cell, x, torch.tensor(lengths))
        finally:
            stop()
        want = _cell_loop(cell, x, lengths)
        expect(isinstance(got, torch.Tensor) and got.shape == want.shape,
               tr("return the final states, shape {shape}.", shape=tuple(want.shape)))
        expect(len(calls) == max(lengths) and all(b == len(lengths) for b in calls),
               tr("your function called the cell {calls} times on batches of {sizes}: run it once per "
                  "time step ({steps} steps) on the whole batch.", calls=len(calls),
                  sizes=sorted(set(calls)), steps=max(lengths)))
        unmasked = x.new_zeros(len(lengths), 4)
        with torch.no_grad():
            for t in range(max(lengths)):
                unmasked = cell(x[:, t], unmasked)
        expect(not torch.allclose(got, unmasked),
               tr("these are the states after stepping through the padding too: a sequence must "
                  "keep its state once its real steps are over. Choose, row by row, between the "
                  "new state and the old one."),
               code=tr("`torch.where(mask, a, b)` takes `a` where `mask` is True and `b` elsewhere."))
        zero = (got.detach().abs().sum(dim=1) == 0).tolist()
        expect(zero != [n < max(lengths) for n in lengths],
               tr("the final states of all the shorter sequences are zero: a finished sequence "
                  "must *keep* its last state, not lose it. Multiplying by the mask erases it."),
               code=tr("`torch.where` keeps a row as it was; a product with a 0/1 mask sets it to 0."))
        expect(not any(zero),
               tr("some final states are still the zero start state: those sequences never took "
                  "their real steps. At step t a sequence is still running when t < its length."))
        expect(torch.allclose(got, want, atol=1e-6),
               tr("with lengths {lengths} your states differ from running each sequence on its own. "
                  "At step t a sequence is still running when t < its length. Use `lengths`, not "
                  "the values of `x`: a real step can be all zeros.", lengths=lengths))
        _expect_same_gradients(
            got, want, cell,
            tr("the values are right, but they carry no gradient: the check compares the "
               "parameter gradients too. Do not detach the result or use `no_grad()`."),
            tr("the values are right but the parameter gradients are not. A kept state must carry "
               "its gradient back to the steps that made it, and a step the mask discards must "
               "give no gradient."))


def _expect_same_gradients(got: torch.Tensor, want: torch.Tensor, module: nn.Module,
                           no_grad_hint: str, wrong_hint: str) -> None:
    """The answer carries a gradient, and it gives ``module``'s parameters the same
    gradients as the reference ``want``."""
    expect(got.requires_grad, no_grad_hint)
    params = list(module.parameters())
    grads = torch.autograd.grad(got.sum(), params)
    want_grads = torch.autograd.grad(want.sum(), params)
    expect(all(torch.allclose(a, b, atol=1e-5) for a, b in zip(grads, want_grads)), wrong_hint)
