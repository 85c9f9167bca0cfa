"""Benchmark the time and size to display each dynagraph view, beside torchviz and torchview."""

# Run from the repo root (several minutes; ``--quick`` is a smoke run of under a minute):
#
#     .venv/bin/python benchmarks/bench_views.py [--quick] [--only LSTM] [--timeout 30]
#
# Per model it prints one Markdown row per view: ``draw`` (``dg.draw`` of the loss, the
# forward inside ``dg.track_modules``), ``live`` (a ``dg.live(model)`` recording of the
# forward), ``backward`` (a ``dg.trace_backward`` replay of ``loss.backward()``) and, for
# the RNNs, ``diff`` (``dg.diff`` of the graphs for input lengths L // 2 and L). A view's
# time is its ``_outputs()`` (everything Jupyter shows, layout included; building
# the object is not timed) and its size the KB of its largest output as JSON. The draw row also
# shows the peers' pictures: torchviz ``make_dot(...).pipe("svg")`` (forward not timed) and
# torchview ``draw_graph(...).visual_graph.pipe("svg")`` (it runs the forward itself).
#
# Every measurement runs in a forked child (fresh caches, nothing shared between runs) that
# is killed, with any renderer it started, after ``--timeout`` seconds ("> 30 s"). Cheap
# cells (first run under CHEAP seconds) are the median of ``--repeats`` runs; slow ones are
# one run. A failure prints its exception's class name (torchviz's RecursionError).
#
# Last, the cost of ``dg.live(view=True)``: a 600-step LSTMCell forward loop plain, inside
# ``dg.live(cell)`` and inside ``dg.live(cell, view=True)`` under an IPython shell whose
# display output is captured (the view only draws in IPython), interleaved, median of 3.
#
# Then the model zoo (``benchmarks/zoo.py``, the models this environment builds): per model
# and view, the median of ``--repeats`` displays (``_outputs()``, fresh renderer cache)
# beside torchviz on the same model, interleaved in one run: ``make_dot`` of the loss and
# its SVG laid out by the same renderer dynagraph uses (graphviz-pure unless
# DYNAGRAPH_DOT says otherwise; torchviz's own ``pipe`` needs a system ``dot``), and the
# ratio of the two (target: at most ZOO_RATIO where torchviz finishes). Beside the
# seconds, the CPU seconds of each (this process and the renderers it ran: what other work
# on a busy machine does not change) and their ratio. Beside them, the same view without
# its still PNG (``image/png``, what viewers without scripts show; torchviz makes none):
# its seconds and their ratio to torchviz's, what the PNG costs apart. ``--zoo`` runs only
# this part (``--only``: the zoo's models whose name contains it).
#
# Then long recordings: a ``dg.live(memory=True)`` recording of a loop of 80,000 and
# 300,000 small ops (``y = y * 1.0``), displayed in a child like the views; each must stay
# under the same time and size targets (the stepper keeps the first and last steps).

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.metadata
import math
import multiprocessing
import os
import platform
import shutil
import signal
import statistics
import subprocess
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

import dynagraph as dg
from dynagraph import _page

TIMEOUT = 30.0  # seconds allowed for one measured case (``--timeout``)
QUICK_TIMEOUT = 10.0  # the same under ``--quick``
CHEAP = 2.0  # a first run under this many seconds is repeated for a median
TIME_TARGET = 2.0  # seconds: every dynagraph view must display this fast
SIZE_TARGET = 300.0  # KB: and this small
VIEW_TARGET = 1.5  # live(view=True) may cost at most this many times the loop it watches (live)
JUDGED_STEPS = 200  # a shorter loop is not judged: its final redraw, one whole draw, costs more than it
# The watched loop: an LSTMCell language-model-sized step (what a learner's RNN runs),
# so that the loop takes seconds, as the loops that people watch do.
ZOO_RATIO = 1.5  # a zoo view may take at most this many times torchviz's build and layout
LOOP_CELL = (256, 512)
LOOP_BATCH = 32
TORCHVIEW_DEPTH = 3  # torchview's default module depth
NO_DOT = "n/a (no dot)"


# -- models ------------------------------------------------------------------------------

class CellLoop(nn.Module):
    """An ``LSTMCell`` or ``GRUCell`` stepped over the first axis of its input in a Python loop."""

    def __init__(self, cell: nn.Module):
        super().__init__()
        self.cell = cell

    def forward(self, xs: torch.Tensor) -> torch.Tensor:
        h = xs.new_zeros(xs.shape[1], self.cell.hidden_size)
        state = (h, h) if isinstance(self.cell, nn.LSTMCell) else h
        for x in xs:
            state = self.cell(x, state)
        return state[0] if isinstance(state, tuple) else state


class FusedGRU(nn.Module):
    """``nn.GRU`` over a whole (time, batch, features) sequence; returns every output."""

    def __init__(self, inp: int, hidden: int, layers: int):
        super().__init__()
        self.rnn = nn.GRU(inp, hidden, num_layers=layers)

    def forward(self, xs: torch.Tensor) -> torch.Tensor:
        return self.rnn(xs)[0]


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which each token sees only itself and earlier ones."""

    def __init__(self, d: int, heads: int, tokens: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.register_buffer("mask", torch.tril(torch.ones(tokens, tokens, dtype=torch.bool)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for z in self.qkv(x).split(d, dim=2))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        att = att.masked_fill(~self.mask[:t, :t], float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    """Pre-LayerNorm transformer block: attention and a 4x MLP, each with a residual."""

    def __init__(self, d: int, heads: int, tokens: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads, tokens)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Token and position embeddings, ``layers`` Blocks, a final LayerNorm and the logits."""

    def __init__(self, layers: int = 4, d: int = 64, heads: int = 4, tokens: int = 16,
                 vocab: int = 64):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(tokens, d))
        self.blocks = nn.ModuleList(Block(d, heads, tokens) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos[: idx.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


class BasicBlock(nn.Module):
    """ResNet's two 3x3 convolutions with BatchNorm, plus a (1x1 when reshaping) shortcut."""

    def __init__(self, inp: int, out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(inp, out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out)
        self.conv2 = nn.Conv2d(out, out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out)
        self.shortcut = nn.Sequential()
        if stride != 1 or inp != out:
            self.shortcut = nn.Sequential(nn.Conv2d(inp, out, 1, stride, bias=False),
                                          nn.BatchNorm2d(out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn1(self.conv1(x)).relu()
        return (self.bn2(self.conv2(y)) + self.shortcut(x)).relu()


class ResNet(nn.Module):
    """ResNet-18 layout (BasicBlocks per stage), narrowed to ``widths``, for 32x32 images."""

    def __init__(self, blocks=(2, 2, 2, 2), widths=(16, 32, 64, 128), classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 3, 1, 1, bias=False),
                                  nn.BatchNorm2d(widths[0]), nn.ReLU())
        layers, inp = [], widths[0]
        for stage, (n, out) in enumerate(zip(blocks, widths)):
            for i in range(n):
                layers.append(BasicBlock(inp, out, 2 if stage and not i else 1))
                inp = out
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(inp, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.layers(self.stem(x)).mean(dim=(2, 3)))


def cell_loop(kind: str, steps: int, inp: int = 32, hidden: int = 64, batch: int = 4):
    """(CellLoop over an ``nn.<kind>``, a (steps, batch, inp) input)."""
    return CellLoop(getattr(nn, kind)(inp, hidden)), torch.randn(steps, batch, inp)


def fused_gru(steps: int, layers: int, inp: int = 32, hidden: int = 64, batch: int = 4):
    """(FusedGRU, a (steps, batch, inp) input)."""
    return FusedGRU(inp, hidden, layers), torch.randn(steps, batch, inp)


def gpt(layers: int, tokens: int = 16, vocab: int = 64):
    """(GPT of ``layers`` blocks, one sequence of ``tokens`` token ids)."""
    return GPT(layers, tokens=tokens, vocab=vocab), torch.randint(vocab, (1, tokens))


def resnet(blocks=(2, 2, 2, 2), size: int = 32):
    """(ResNet, one 3 x size x size image)."""
    return ResNet(blocks), torch.randn(1, 3, size, size)


def mlp(depth: int, width: int = 32, batch: int = 4):
    """(``depth`` x (Linear + ReLU), a (batch, width) input)."""
    layers = [m for _ in range(depth) for m in (nn.Linear(width, width), nn.ReLU())]
    return nn.Sequential(*layers), torch.randn(batch, width)


@dataclass(frozen=True)
class Spec:
    """One benchmarked model: its row name, factory, and whether its input is a sequence."""

    name: str
    build: Callable[[], tuple[nn.Module, torch.Tensor]]
    rnn: bool = False  # time-major input: also diff length L // 2 against L

    def views(self) -> tuple[str, ...]:
        return ("draw", "live", "backward", "diff") if self.rnn else ("draw", "live", "backward")


def models(quick: bool = False) -> list[Spec]:
    """The benchmarked models, as in the brief; ``quick`` shrinks every size."""
    p = functools.partial
    steps = (4,) if quick else (50, 200, 500)
    short = 4 if quick else 100
    return ([Spec(f"LSTMCell {n} steps", p(cell_loop, "LSTMCell", n), True) for n in steps]
            + [Spec(f"GRUCell {short} steps", p(cell_loop, "GRUCell", short), True),
               Spec(f"nn.GRU 1 layer, {short} steps", p(fused_gru, short, 1), True),
               Spec(f"nn.GRU 2 layers, {short} steps", p(fused_gru, short, 2), True),
               Spec(f"GPT {1 if quick else 4} blocks", p(gpt, 1 if quick else 4)),
               Spec("ResNet-18-like", p(resnet, (1, 1, 1, 1) if quick else (2, 2, 2, 2),
                                        16 if quick else 32)),
               Spec(f"MLP depth {10 if quick else 1000}", p(mlp, 10 if quick else 1000))])


def select(specs: list[Spec], only: list[str] | None) -> list[Spec]:
    """The specs whose name contains any of ``only`` (case-insensitive); all without it."""
    if not only:
        return specs
    chosen = [s for s in specs if any(o.lower() in s.name.lower() for o in only)]
    if not chosen:
        raise SystemExit(f"--only {only} matches no model (names: {[s.name for s in specs]})")
    return chosen


# -- what runs in a child ------------------------------------------------------------------

def autograd_nodes(loss: torch.Tensor) -> int:
    """Distinct autograd nodes behind ``loss`` (AccumulateGrad included), walked iteratively."""
    seen, stack = set(), [loss.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        stack.extend(next_fn for next_fn, _ in fn.next_functions)
    return len(seen)


def count_nodes(spec: Spec) -> dict:
    """{"nodes": autograd nodes of the model's loss}."""
    model, x = fresh(spec)
    return {"nodes": autograd_nodes(model(x).sum())}


def fresh(spec: Spec):
    """The spec's (model, input), seeded so every child builds the same."""
    torch.manual_seed(0)
    return spec.build()


def view_draw(model, x):
    """``dg.draw`` of the loss, the forward run inside ``dg.track_modules``."""
    with dg.track_modules(model):
        loss = model(x).sum()
    return dg.draw(loss, params=model)


def view_live(model, x):
    """The ``dg.live`` recording of the forward."""
    with dg.live(model) as rec:
        model(x).sum()
    return rec


def view_backward(model, x):
    """The ``dg.trace_backward`` replay of ``loss.backward()``."""
    loss = model(x).sum()
    with dg.trace_backward(loss, params=model) as bt:
        loss.backward()
    return bt


def view_diff(model, x):
    """``dg.diff`` of the graphs for the first half of the sequence and for all of it."""
    short = dg.draw(model(x[: len(x) // 2]).sum(), params=model)
    return dg.diff(short, dg.draw(model(x).sum(), params=model))


VIEWS = {"draw": view_draw, "live": view_live, "backward": view_backward, "diff": view_diff}


def display_cost(spec: Spec, view: str) -> dict:
    """Build one view, then time what Jupyter would do to show it: {"s", "kb"}."""
    obj = VIEWS[view](*fresh(spec))
    start = time.perf_counter()
    outputs = obj._outputs()
    seconds = time.perf_counter() - start
    return {"s": seconds, "kb": _page.largest_output(outputs) / 1024}


def torchviz_cost(spec: Spec) -> dict:
    """torchviz's SVG of the loss's graph (make_dot + layout; the forward is not timed)."""
    from torchviz import make_dot
    model, x = fresh(spec)
    loss = model(x).sum()
    start = time.perf_counter()
    svg = make_dot(loss, params=dict(model.named_parameters())).pipe(format="svg")
    return {"s": time.perf_counter() - start, "kb": len(svg) / 1024}


def torchview_cost(spec: Spec) -> dict:
    """torchview's SVG of the model (draw_graph runs the forward itself, so it is timed)."""
    import torchview
    model, x = fresh(spec)
    start = time.perf_counter()
    graph = torchview.draw_graph(model, input_data=x, depth=TORCHVIEW_DEPTH)
    svg = graph.visual_graph.pipe(format="svg")
    return {"s": time.perf_counter() - start, "kb": len(svg) / 1024}


# -- the zoo beside torchviz --------------------------------------------------------------

def _sibling(name: str):
    """``benchmarks/<name>.py`` as a module (the folder is not a package, and this file may
    be run as a script or loaded from its path by the tests)."""
    import importlib.util
    import sys
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[name] = module
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    return sys.modules[name]


def cpu_seconds() -> float:
    """CPU seconds this process and its finished children (the renderers) have used."""
    import resource
    return sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))


def torchviz_layout(case, timeout: float) -> tuple[float, float] | str:
    """Seconds and CPU seconds of torchviz's ``make_dot`` of ``case``'s loss and its SVG
    layout by dynagraph's renderer (uncached), or why it did not finish."""
    from torchviz import make_dot

    from dynagraph import render
    loss = case.forward()
    start, cpu = time.perf_counter(), cpu_seconds()
    try:
        dot = make_dot(loss, params=dict(case.model.named_parameters())).source
        render._layout(render.find_renderer(), dot, "svg", timeout)
    except render.RenderTimeoutError:
        return f"> {timeout:g} s"
    except RecursionError as exc:
        return type(exc).__name__
    return time.perf_counter() - start, cpu_seconds() - cpu


def zoo_rows(repeats: int, timeout: float, only: tuple[str, ...] = ()) -> tuple[list[str], bool]:
    """The zoo table: each view's display beside torchviz's build and layout, interleaved
    (``only``: just these models)."""
    from dynagraph import render
    zoo = _sibling("zoo")
    models, left_out = zoo.available()
    models = {k: f for k, f in models.items() if not only or any(o in k for o in only)}
    lines = [f"skipped {name}: {why}" for name, why in left_out.items()]
    lines += ["| model | view | dynagraph s | all outputs KB | torchviz s | ratio | without PNG s | "
              "its ratio | dynagraph CPU s | torchviz CPU s | CPU ratio | verdict |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    print("\n".join(lines), flush=True)
    passed = True
    # per view where torchviz finishes: the ratio in seconds, in CPU seconds, and without the PNG
    ratios: list[tuple[float, float, float]] = []
    for name, factory in models.items():
        for view in ("draw", "live", "backward"):
            ours, our_cpu, bare, theirs, kb = [], [], [], [], 0.0
            for _ in range(repeats):  # interleaved: a busy moment hits all alike
                obj = zoo._view(factory(), view)
                render.clear_cache()
                start, cpu = time.perf_counter(), cpu_seconds()
                outs = obj._outputs()
                ours.append(time.perf_counter() - start)
                our_cpu.append(cpu_seconds() - cpu)
                kb = _page.stored_bytes(outs) / 1000
                render.clear_cache()
                with _without_png():
                    start = time.perf_counter()
                    obj._outputs()
                    bare.append(time.perf_counter() - start)
                tv = torchviz_layout(factory(), timeout)
                theirs.append(tv)
            s, cpu_s, bare_s = statistics.median(ours), statistics.median(our_cpu), statistics.median(bare)
            if all(isinstance(t, tuple) for t in theirs):
                tv_s = statistics.median(t[0] for t in theirs)  # type: ignore[index]
                tv_cpu = statistics.median(t[1] for t in theirs)  # type: ignore[index]
                ratio, tv_text = s / tv_s, seconds_text(tv_s)
                ok = ratio <= ZOO_RATIO and s <= TIME_TARGET and kb <= SIZE_TARGET
                ratio_text = f"{ratio:.2f}x | {seconds_text(bare_s)} | {bare_s / tv_s:.2f}x"
                cpu_text = (f"{tv_cpu:.2f} | {cpu_s / tv_cpu:.2f}x" if tv_cpu > 0 else f"{tv_cpu:.2f} | -")
                ratios.append((ratio, cpu_s / tv_cpu if tv_cpu > 0 else math.inf, bare_s / tv_s))
            else:
                tv_text = str(next(t for t in theirs if not isinstance(t, tuple)))
                ratio_text = f"- | {seconds_text(bare_s)} | -"
                ok = s <= TIME_TARGET and kb <= SIZE_TARGET
                cpu_text = "- | -"
            passed &= ok
            line = (f"| {name} | {view} | {seconds_text(s)} | {kb:.1f} | {tv_text} | {ratio_text} | "
                    f"{cpu_s:.2f} | {cpu_text} | {'PASS' if ok else 'MISS'} |")
            lines.append(line)
            print(line, flush=True)
    lines.append(ratio_summary(ratios))
    print(lines[-1], flush=True)
    return lines, passed


def ratio_summary(ratios: list[tuple[float, ...]]) -> str:
    """How many zoo views meet :data:`ZOO_RATIO` where torchviz finishes, in seconds and in
    CPU seconds (what other work on the machine changes less), with the range of each;
    and, where a third ratio is given, in seconds without the view's still PNG."""
    if not ratios:
        return "no view to compare: torchviz finished on none"
    def part(values: list[float], what: str) -> str:
        met = sum(v <= ZOO_RATIO for v in values)
        return f"{what} {met} of {len(values)} ({min(values):.2f}-{max(values):.2f}x)"
    seconds, cpu, *bare = zip(*ratios)
    return (f"at most {ZOO_RATIO:g}x torchviz where it finishes: "
            f"{part(list(seconds), 'in seconds')}, {part(list(cpu), 'in CPU seconds')}"
            + (f"; without the PNG: {part(list(bare[0]), 'in seconds')}" if bare else ""))


@contextlib.contextmanager
def _without_png():
    """Views made inside leave out their still PNG (as a live view's redraws do,
    ``still=False``): what the rest of a view costs, beside torchviz, which makes none."""
    outputs = _page.outputs
    _page.outputs = functools.partial(outputs, still=False)
    try:
        yield
    finally:
        _page.outputs = outputs


# -- running children ----------------------------------------------------------------------

def _child(conn, fn, args) -> None:
    """Child side of :func:`run_case`: own process group, send the result or the error name."""
    os.setsid()  # so a timeout kills the renderer subprocesses too
    try:
        result = fn(*args)
    except BaseException as exc:  # noqa: BLE001 - RecursionError, KeyboardInterrupt, ...: report, don't hang
        result = type(exc).__name__
    conn.send(result)
    conn.close()


def _kill_group(pid: int) -> None:
    """Kill the child, its process group and every descendant: a renderer runs in a
    session of its own (so that its own timeout can stop it), out of the group's reach."""
    for kid in _descendants(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(kid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _descendants(pid: int) -> list[int]:
    """Pids of every process below ``pid``, read from /proc (empty where there is none)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, stack = [], [pid]
    while stack:
        for kid in children.get(stack.pop(), []):
            out.append(kid)
            stack.append(kid)
    return out


def run_case(fn, args, timeout: float):
    """``fn(*args)`` in a forked child, killed after ``timeout`` s.

    Returns:
        The child's result (a dict), or text: ``"> 30 s"``, an exception's class name,
        or ``"crashed (exit N)"``.
    """
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, fn, args), daemon=True)
    proc.start()
    send.close()
    try:
        result = recv.recv() if recv.poll(timeout) else f"> {timeout:g} s"
    except EOFError:  # died without a word: segfault, out of memory
        proc.join()
        result = f"crashed (exit {proc.exitcode})"
    finally:
        _kill_group(proc.pid)  # the child is unreaped until join(), so its pid is not reused
        proc.join()
        recv.close()
    return result


def measure(fn, args, timeout: float, repeats: int):
    """Median of ``repeats`` children when the first is cheap; else the first (or its failure)."""
    first = run_case(fn, args, timeout)
    if not isinstance(first, dict) or repeats <= 1 or first["s"] > CHEAP:
        return first
    runs = [first] + [run_case(fn, args, timeout) for _ in range(repeats - 1)]
    seconds = [r["s"] for r in runs if isinstance(r, dict)]
    return {**first, "s": statistics.median(seconds)}


# -- the table -----------------------------------------------------------------------------

COLUMNS = ("model", "autograd nodes", "view", "dynagraph s", "dynagraph KB", "torchviz s",
           "torchviz KB", "torchview s", "torchview KB", "verdict")


def seconds_text(s: float) -> str:
    return f"{s:.3f}" if s < 1 else f"{s:.2f}"


def cells(result) -> tuple[str, str]:
    """(seconds, KB) text for a measurement, or (failure, "-")."""
    if isinstance(result, dict):
        return seconds_text(result["s"]), f"{result['kb']:.1f}"
    return str(result), "-"


def verdict(result) -> str:
    """PASS, or FAIL with what missed the targets (time, size, or the failure)."""
    if not isinstance(result, dict):
        return f"FAIL ({result})"
    missed = [what for what, ok in (("time", result["s"] <= TIME_TARGET),
                                    ("size", result["kb"] <= SIZE_TARGET)) if not ok]
    return "PASS" if not missed else f"FAIL ({', '.join(missed)})"


def table_header() -> str:
    return ("| " + " | ".join(COLUMNS) + " |\n"
            + "|" + "|".join("---" if c in ("model", "view", "verdict") else "---:"
                             for c in COLUMNS) + "|")


def table_line(name: str, nodes, view: str, ours, peers=None) -> str:
    """One Markdown row; ``peers`` is (torchviz, torchview) results, on the draw row only."""
    node_text = str(nodes["nodes"]) if isinstance(nodes, dict) else str(nodes)
    peer_cells = [c for p in peers for c in cells(p)] if peers else [""] * 4
    row = [name, node_text, view, *cells(ours), *peer_cells, verdict(ours)]
    return "| " + " | ".join(row) + " |"


def peer_results(spec: Spec, timeout: float, repeats: int, dot: str | None):
    """(torchviz, torchview) results, or "n/a (no dot)" / "n/a (not installed)" text."""
    if dot is None:
        return NO_DOT, NO_DOT
    out = []
    for module, fn in (("torchviz", torchviz_cost), ("torchview", torchview_cost)):
        if not version(module):
            out.append("n/a (not installed)")
        else:
            out.append(measure(fn, (spec,), timeout, repeats))
    return tuple(out)


def model_rows(spec: Spec, timeout: float, repeats: int, dot: str | None):
    """Measure and print each view of one model; yields the dynagraph results."""
    nodes = run_case(count_nodes, (spec,), timeout)
    for view in spec.views():
        ours = measure(display_cost, (spec, view), timeout, repeats)
        peers = peer_results(spec, timeout, repeats, dot) if view == "draw" else None
        print(table_line(spec.name, nodes, view, ours, peers), flush=True)
        yield ours


# -- live(view=True) overhead ----------------------------------------------------------------

LOOP_VARIANTS = ("plain", "live", "view")


def quiet_shell():
    """An IPython shell (so ``get_ipython()`` is not None) that captures what it displays."""
    from IPython.core.displaypub import CapturingDisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config
    config = Config()
    config.HistoryManager.enabled = False  # no sqlite file under ~/.ipython
    shell = InteractiveShell.instance(config=config)
    shell.display_pub = CapturingDisplayPublisher()
    return shell


def watcher(variant: str, cell: nn.Module):
    """The context manager ``variant`` runs the loop in."""
    if variant == "plain":
        return contextlib.nullcontext()
    if variant in ("live", "view"):
        return dg.live(cell, view=variant == "view")
    raise ValueError(f"unknown variant: {variant!r} (must be one of {LOOP_VARIANTS})")


def lstm_steps(cell: nn.Module, xs: torch.Tensor) -> torch.Tensor:
    """An LSTMCell forward loop over ``xs``; returns the loss."""
    h = c = xs.new_zeros(xs.shape[1], cell.hidden_size)
    for x in xs:
        h, c = cell(x, (h, c))
    return h.sum()


def loop_time(variant: str, steps: int) -> dict:
    """Seconds for the whole ``with`` block around the loop (its final redraw included)."""
    shell = quiet_shell()
    torch.manual_seed(0)
    cell, xs = nn.LSTMCell(*LOOP_CELL), torch.randn(steps, LOOP_BATCH, LOOP_CELL[0])
    with watcher("plain" if variant == "plain" else "live", cell):
        lstm_steps(cell, xs[:5])  # warm-up: first-call costs are not the loop's
    start = time.perf_counter()
    with watcher(variant, cell):
        lstm_steps(cell, xs)
    return {"s": time.perf_counter() - start, "displays": len(shell.display_pub.outputs)}


def view_overhead(steps: int, timeout: float, repeats: int = 3) -> dict:
    """Per variant, the median seconds (or first failure), runs interleaved."""
    runs = {v: [] for v in LOOP_VARIANTS}
    for _ in range(repeats):
        for v in LOOP_VARIANTS:
            runs[v].append(run_case(loop_time, (v, steps), timeout))
    out = {}
    for v, results in runs.items():
        failed = [r for r in results if not isinstance(r, dict)]
        out[v] = failed[0] if failed else {
            "s": statistics.median(r["s"] for r in results), "displays": results[0]["displays"]}
    return out


def overhead_lines(steps: int, result: dict) -> tuple[list[str], bool | None]:
    """Markdown table of the three loops and their ratios; and whether view passed
    (``None``: not judged, a loop under :data:`JUDGED_STEPS` steps, as ``--quick`` runs).

    The target is on view / live: what drawing adds to the recorded loop it watches
    (what recording itself costs is bench_live.py's measure)."""
    lines = [f"live(view=True) overhead: {steps}-step LSTMCell{LOOP_CELL} forward loop, batch "
             f"{LOOP_BATCH}, whole `with` block timed (final redraw included)",
             "", "| loop | s | / plain | / live | displays | verdict |", "|---|---:|---:|---:|---:|---|"]
    passed: bool | None = None if steps < JUDGED_STEPS else False
    ratio = lambda r, base: r["s"] / base["s"] if isinstance(base, dict) else None  # noqa: E731
    text = lambda x: "n/a" if x is None else f"{x:.2f}x"  # noqa: E731
    for v in LOOP_VARIANTS:
        r = result[v]
        if not isinstance(r, dict):
            lines.append(f"| {v} | {r} | n/a | n/a | - | {'FAIL' if v == 'view' else ''} |")
            continue
        to_plain, to_live = ratio(r, result["plain"]), ratio(r, result["live"])
        mark = ""
        if v == "view" and steps < JUDGED_STEPS:
            mark = f"not judged ({steps} steps: the final redraw alone costs more than the loop)"
        elif v == "view":
            passed = to_live is not None and to_live <= VIEW_TARGET
            mark = f"{'PASS' if passed else 'FAIL'} (target <= {VIEW_TARGET:g}x the live loop)"
        lines.append(f"| {v} | {seconds_text(r['s'])} | {text(to_plain)} | {text(to_live)} | "
                     f"{r['displays']} | {mark} |")
    return lines, passed


# -- main ----------------------------------------------------------------------------------

LONG_STEPS = (80_000, 300_000)  # steps of the long recordings (``--quick``: 2,000)


def long_recording_display(steps: int) -> dict:
    """Seconds and KB to display a ``live(memory=True)`` recording of ``steps`` small ops
    (recording it is not timed)."""
    x = torch.ones(1, requires_grad=True)
    with dg.live(memory=True) as rec:
        y = x
        for _ in range(steps):
            y = y * 1.0
    rec.steps  # noqa: B018 - the walk that a read triggers is recording, not display
    start = time.perf_counter()
    outputs = rec._outputs()
    return {"s": time.perf_counter() - start, "kb": _page.largest_output(outputs) / 1e3}


def long_lines(results: dict) -> tuple[list[str], bool]:
    """Markdown rows for the long recordings, and whether all met the targets."""
    lines = ["| recording | display | size | verdict |", "|---|---:|---:|---|"]
    passed = True
    for steps, result in results.items():
        if not isinstance(result, dict):
            lines.append(f"| {steps:,} steps | {result} | - | FAIL |")
            passed = False
            continue
        ok = result["s"] <= TIME_TARGET and result["kb"] <= SIZE_TARGET
        passed = passed and ok
        lines.append(f"| {steps:,} steps | {seconds_text(result['s'])} | {result['kb']:.0f} KB | "
                     f"{'PASS' if ok else 'FAIL'} (<= {TIME_TARGET:g} s, <= {SIZE_TARGET:g} KB) |")
    return lines, passed


def version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def dot_version(dot: str | None) -> str:
    if dot is None:
        return "not found (peers print n/a)"
    proc = subprocess.run([dot, "-V"], capture_output=True, text=True, timeout=30, check=False)
    return f"{dot} ({(proc.stderr or proc.stdout).strip()})"


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def environment(dot: str | None, timeout: float) -> list[str]:
    """Lines naming the machine, the versions and the settings of this run."""
    try:
        from dynagraph import render
        renderer = render.find_renderer()
    except Exception as exc:  # noqa: BLE001 - the package is being edited: say so, don't stop
        renderer = f"unavailable ({type(exc).__name__})"
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    pkgs = ", ".join(f"{d} {version(d) or 'not installed'}"
                     for d in ("torchviz", "torchview", "graphviz-pure", "graphviz", "ipython"))
    return [f"machine: {platform.platform()}; {cpu_model()}; {os.cpu_count()} cores "
            f"({usable} usable)",
            f"python {platform.python_version()}; torch {torch.__version__}, "
            f"{torch.get_num_threads()} thread; dynagraph {dg.__version__}; {pkgs}",
            f"dynagraph renderer: {renderer}; peers' dot: {dot_version(dot)}",
            f"limit {timeout:g} s per case (child killed); median of runs under {CHEAP:g} s; "
            f"targets: each dynagraph view <= {TIME_TARGET:g} s and <= {SIZE_TARGET:g} KB; "
            f"torchview depth={TORCHVIEW_DEPTH}"]


def warm_up() -> None:
    """Load what displays import lazily, once, so no child pays for it."""
    import IPython.core.interactiveshell  # the view's shell
    import IPython.display  # noqa: F401
    with contextlib.suppress(Exception):  # a broken view is reported per case, not here
        x = torch.ones(1, requires_grad=True)
        dg.draw(2 * x + 1)._repr_mimebundle_()


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one run, short limit")
    parser.add_argument("--only", action="append", metavar="NAME",
                        help="only models whose name contains NAME (repeatable)")
    parser.add_argument("--timeout", type=float, help=f"seconds per case (default {TIMEOUT:g}; "
                        f"{QUICK_TIMEOUT:g} with --quick)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per cheap cell")
    parser.add_argument("--zoo", action="store_true", help="only the zoo beside torchviz")
    parser.add_argument("--loop-steps", type=int, help="steps of the view-overhead loop "
                        "(default 600; 20 with --quick)")
    args = parser.parse_args(argv)
    args.timeout = args.timeout or (QUICK_TIMEOUT if args.quick else TIMEOUT)
    args.repeats = 1 if args.quick else args.repeats
    args.loop_steps = args.loop_steps or (20 if args.quick else 600)
    return args


def main(argv=None) -> dict:
    """Print the environment, the views table and the live-view overhead; returns the results."""
    args = parse(argv)
    torch.set_num_threads(1)  # as the other benches: tiny tensors, steady timings
    warnings.filterwarnings("ignore", "distutils Version classes", DeprecationWarning)
    dot = shutil.which("dot")
    print("\n".join(environment(dot, args.timeout)) + "\n", flush=True)
    warm_up()
    if args.zoo:  # (--only: the zoo's models whose name contains it)
        return {"zoo": zoo_rows(args.repeats, args.timeout, tuple(args.only or ()))[1]}
    specs = select(models(args.quick), args.only)
    start, ours = time.perf_counter(), []
    print(table_header(), flush=True)
    for spec in specs:
        ours += model_rows(spec, args.timeout, args.repeats, dot)
    print()
    overhead = view_overhead(args.loop_steps, args.timeout, 1 if args.quick else 3)
    lines, view_passed = overhead_lines(args.loop_steps, overhead)
    print("\n".join(lines))
    long = {n: measure(long_recording_display, (n,), args.timeout, args.repeats)
            for n in ((2_000,) if args.quick else LONG_STEPS)}
    lines, long_passed = long_lines(long)
    print("\n" + "\n".join(lines) + "\n")
    zoo_passed = zoo_rows(1 if args.quick else args.repeats, args.timeout, ("unet",) if args.quick else ())[1]
    passed = sum(verdict(r) == "PASS" for r in ours)
    view_said = "not judged" if view_passed is None else "PASS" if view_passed else "FAIL"
    print(f"\nviews: {passed} PASS, {len(ours) - passed} FAIL; live(view=True): {view_said}; "
          f"long recordings: {'PASS' if long_passed else 'FAIL'}; "
          f"zoo beside torchviz: {'PASS' if zoo_passed else 'MISS'}; "
          f"total {time.perf_counter() - start:.0f} s")
    return {"views": ours, "overhead": overhead, "long": long, "zoo": zoo_passed}


if __name__ == "__main__":
    main()
