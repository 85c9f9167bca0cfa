"""Benchmark dynagraph against torchviz, side by side, on graphs of growing size.

Run from the repo root (takes several minutes; ``--quick`` is a smoke run):

    .venv/bin/python benchmarks/bench_draw.py [--quick] [--renderer dot]

For each model it prints one Markdown table row: autograd nodes, forward+backward
time, graph-build time (torchviz ``make_dot`` vs dynagraph ``draw``), the whole graph's
DOT text (torchviz ``make_dot(...).source`` with the stack it needs vs dynagraph
``draw(...).to_dot(full=True)``, capture included), and layout+SVG
time with the same renderer program for dynagraph's default drawing, its full
expansion (``roll=False, max_nodes=None``) and torchviz's DOT. Every timing is a median over
repeats after one warm-up run (5 repeats under 1 s, 3 under 10 s); a warm-up that
takes over 10 s is itself the one measurement. Failures are printed as they happen
(``RecursionError``, ``>60s``); nothing raises the recursion limit.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch
from torch import nn
from torchviz import make_dot

import dynagraph as dg
from dynagraph import render

TIMEOUT = 60.0  # seconds allowed for one layout
LAYOUT_TARGET = 2.0  # seconds: the default drawing must lay out this fast


def mlp(depth, width=32, batch=8):
    """``depth`` x (Linear + ReLU); returns (model, closure computing the loss)."""
    layers = [m for _ in range(depth) for m in (nn.Linear(width, width), nn.ReLU())]
    model, x = nn.Sequential(*layers), torch.randn(batch, width)
    return model, lambda: model(x).sum()


def transformer(layers, d_model=64, heads=4, ff=128, seq=8, batch=2):
    """A train-mode TransformerEncoder of ``layers`` layers."""
    layer = nn.TransformerEncoderLayer(d_model, heads, ff, batch_first=True)
    model = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).train()
    x = torch.randn(batch, seq, d_model)
    return model, lambda: model(x).sum()


def lstm_loop(steps, inp=16, hidden=32, batch=4):
    """An LSTMCell unrolled for ``steps`` steps."""
    cell, xs = nn.LSTMCell(inp, hidden), torch.randn(steps, batch, inp)

    def loss():
        h = c = torch.zeros(batch, hidden)
        for x in xs:
            h, c = cell(x, (h, c))
        return h.sum()
    return cell, loss


def models(quick):
    """(row name, factory) pairs, smallest first within each family."""
    sizes = ((10, 100), (2,), (50,)) if quick else ((10, 100, 1000), (2, 6, 12), (50, 500))
    return ([(f"MLP depth {n}", lambda n=n: mlp(n)) for n in sizes[0]]
            + [(f"Transformer {n} layers", lambda n=n: transformer(n)) for n in sizes[1]]
            + [(f"LSTMCell {n} steps", lambda n=n: lstm_loop(n)) for n in sizes[2]])


def timed(fn, quick=False):
    """Median seconds of ``fn()`` after a warm-up; exceptions propagate."""
    start = time.perf_counter()
    fn()
    first = time.perf_counter() - start
    if first > 10:
        return first
    repeats = 1 if quick else (5 if first < 1 else 3)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def layout(exe, dot_text, timeout=TIMEOUT):
    """DOT -> SVG bytes with ``exe``, bypassing render's result cache."""
    return render._run.__wrapped__(exe, dot_text, "svg", timeout)


def attempt(fn, quick):
    """``timed(fn)``, or the failure's name (``RecursionError``, ``>60s``)."""
    try:
        return timed(fn, quick)
    except (subprocess.TimeoutExpired, render.RenderTimeoutError):
        return f">{TIMEOUT:g}s"
    except RecursionError:
        return "RecursionError"


def deep(fn):
    """``fn()`` in a thread with a 512 MB stack and a raised recursion limit: torchviz
    recurses once per node in a chain, so a long loop needs both to finish at all."""
    result = {}

    def run():
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(200_000)
        try:
            result["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            result["error"] = exc
        finally:
            sys.setrecursionlimit(limit)

    size = threading.stack_size(512 * 2**20)
    try:
        thread = threading.Thread(target=run)
        thread.start()
    finally:
        threading.stack_size(size)
    thread.join()
    if "error" in result:
        raise result["error"]
    return result["value"]


def row(name, factory, exe, quick=False, timeout=TIMEOUT):
    """Benchmark one model; returns a dict of counts, seconds and failure strings."""
    model, loss_fn = factory()
    loss = loss_fn()
    params = dict(model.named_parameters())
    full = dg.draw(loss, params=model, max_nodes=None, roll=False)  # every node
    out = {"model": name, "nodes": sum(full.counts().values())}
    out["fwd_bwd"] = timed(lambda: loss_fn().backward(), quick)
    out["tv_build"] = attempt(lambda: make_dot(loss, params=params), quick)
    out["dg_build"] = timed(lambda: dg.draw(loss, params=model), quick)
    if isinstance(out["tv_build"], float):
        out["ratio"] = out["dg_build"] / out["tv_build"]
    # the whole graph's DOT text, capture included: torchviz's make_dot(...).source (with
    # the stack it needs) against dynagraph's draw(...).to_dot(full=True)
    out["tv_dot"] = deep(lambda: timed(lambda: make_dot(loss, params=params).source, quick))
    out["dg_full_dot"] = timed(lambda: dg.draw(loss, params=model).to_dot(full=True), quick)
    out["dot_ratio"] = out["dg_full_dot"] / out["tv_dot"]
    graph = dg.draw(loss, params=model)
    out["dg_layout"] = attempt(lambda: layout(exe, graph.to_dot(), timeout), quick)
    out["dg_full_layout"] = attempt(lambda: layout(exe, full.to_dot(), timeout), quick)
    if isinstance(out["tv_build"], float):
        tv_dot = make_dot(loss, params=params).source
        out["tv_layout"] = attempt(lambda: layout(exe, tv_dot, timeout), quick)
    else:
        out["tv_layout"] = "n/a"
    return out


COLUMNS = [("model", "model"), ("nodes", "autograd nodes"), ("fwd_bwd", "fwd+bwd"),
           ("tv_build", "torchviz build"), ("dg_build", "dynagraph build"),
           ("ratio", "ours/torchviz"), ("tv_dot", "torchviz DOT text*"),
           ("dg_full_dot", "dynagraph full DOT text"), ("dot_ratio", "ours/torchviz (DOT)"),
           ("dg_layout", "dynagraph layout+SVG (default)"),
           ("dg_full_layout", "dynagraph layout+SVG (every node)"),
           ("tv_layout", "torchviz layout+SVG")]


def cell(key, value):
    """Table text for one field: seconds become ms or s, failures pass through."""
    if value is None:
        return "n/a"
    if key in ("ratio", "dot_ratio"):
        return f"{value:.2f}"
    if isinstance(value, float):
        return f"{value * 1e3:.1f} ms" if value < 1 else f"{value:.2f} s"
    return str(value)


def table_header():
    """The Markdown header and alignment lines."""
    return ("| " + " | ".join(title for _, title in COLUMNS) + " |\n"
            + "|" + "|".join("---" if k == "model" else "---:" for k, _ in COLUMNS) + "|")


def table_line(result):
    """One Markdown table row for a :func:`row` result."""
    return "| " + " | ".join(cell(k, result.get(k)) for k, _ in COLUMNS) + " |"


def verdicts(rows):
    """(label, passed, detail) for each target."""
    slower = [r["model"] for r in rows
              if isinstance(r["tv_build"], float) and r["dg_build"] > r["tv_build"]]
    slow_layout = [r["model"] for r in rows
                   if not (isinstance(r["dg_layout"], float) and r["dg_layout"] <= LAYOUT_TARGET)]
    slower_dot = [r["model"] for r in rows if r["dg_full_dot"] > r["tv_dot"]]
    return [("build time <= torchviz's at every size", not slower,
             "slower on: " + ", ".join(slower) if slower else "torchviz failures count as wins"),
            (f"default layout+SVG <= {LAYOUT_TARGET:g} s for every model", not slow_layout,
             "over on: " + ", ".join(slow_layout) if slow_layout else ""),
            ("the whole graph's DOT text (to_dot(full=True)) <= torchviz's at every size", not slower_dot,
             "slower on: " + ", ".join(slower_dot) if slower_dot else "")]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    parser.add_argument("--renderer", help="renderer program (sets DYNAGRAPH_DOT), e.g. dot")
    args = parser.parse_args(argv)
    if args.renderer:
        os.environ["DYNAGRAPH_DOT"] = args.renderer
    try:
        exe = render.find_renderer()
    except dg.RendererNotFoundError as exc:
        sys.exit(str(exc))
    # Tiny tensors gain nothing from intra-op threads, and on a busy machine the
    # thread pool's spin-waits make fwd+bwd times erratic (10x swings seen on 2 cores).
    torch.set_num_threads(1)
    print(f"renderer: {Path(exe).name}; torch {torch.__version__}, 1 thread; recursion limit "
          f"{sys.getrecursionlimit()} (unchanged); layout timeout {TIMEOUT:g} s\n", flush=True)
    start, rows = time.perf_counter(), []
    print(table_header(), flush=True)
    for name, factory in models(args.quick):
        rows.append(row(name, factory, exe, quick=args.quick))
        print(table_line(rows[-1]), flush=True)
    print("\n* torchviz DOT text: make_dot(...).source, run with a raised recursion limit and a "
          "512 MB stack (its build column above is as a user meets it: limit unchanged)")
    for label, passed, detail in verdicts(rows):
        print(f"{'PASS' if passed else 'MISS'}: {label}{' (' + detail + ')' if detail else ''}")
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
