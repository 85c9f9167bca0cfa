"""Benchmark what recording costs: plain forward+backward vs dg.live() vs dg.trace_backward.

Run from the repo root (about a minute; ``--quick`` is a smoke run):

    .venv/bin/python benchmarks/bench_live.py [--repeats 30] [--threads 2]

Two models, as in the brief: a 10-layer MLP (width 256, batch 64, ReLU) and one
``nn.TransformerEncoderLayer(256, 4, 512, batch_first=True)`` on a (16, 32, 256)
batch, both in train mode. Per model, one iteration of each variant is

* ``plain``: ``model(x).sum().backward()``;
* ``live``: the same inside ``with dg.live(model):``;
* ``trace``: the forward, then ``with dg.trace_backward(loss, params=model):``
  around the backward (the trace is set up on each iteration's loss).

Variants run interleaved (plain, live, trace, plain, ...) after a warm-up, so drift
hits all three alike; each cell is the median of ``--repeats`` wall-clock samples.
The target is that both recorders cost at most ``TARGET`` x plain.

Every variant runs with the same ``torch.set_num_threads`` (``--threads``, default 1:
on a shared machine more threads make plain timings swing by several times). The
recorders' cost is Python work per op and per node, which more threads do not
shrink, so their ratios grow where plain compute gets faster.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

import dynagraph as dg

TARGET = 1.5  # a recorder may cost at most this many times plain forward+backward
VARIANTS = ("plain", "live", "trace")


def mlp(depth=10, width=256, batch=64):
    """``depth`` x (Linear + ReLU); returns (model, input)."""
    layers = [m for _ in range(depth) for m in (nn.Linear(width, width), nn.ReLU())]
    return nn.Sequential(*layers), torch.randn(batch, width)


def transformer(d_model=256, heads=4, ff=512, batch=16, seq=32):
    """One train-mode TransformerEncoderLayer; returns (model, input)."""
    layer = nn.TransformerEncoderLayer(d_model, heads, ff, batch_first=True).train()
    return layer, torch.randn(batch, seq, d_model)


def models(quick=False):
    """(row name, factory) pairs; ``quick`` shrinks every size for a smoke run."""
    if quick:
        return [("MLP 10x256", lambda: mlp(width=16, batch=4)),
                ("TransformerEncoderLayer", lambda: transformer(16, 2, 32, 2, 4))]
    return [("MLP 10x256", mlp), ("TransformerEncoderLayer", transformer)]


def iteration(variant, model, x):
    """One forward+backward of ``model`` on ``x`` the way ``variant`` runs it."""
    model.zero_grad(set_to_none=True)
    if variant == "plain":
        model(x).sum().backward()
    elif variant == "live":
        with dg.live(model):
            model(x).sum().backward()
    elif variant == "trace":
        loss = model(x).sum()
        with dg.trace_backward(loss, params=model):
            loss.backward()
    else:
        raise ValueError(f"unknown variant: {variant!r} (must be one of {VARIANTS})")


def measure(model, x, repeats, warmup=3):
    """Median seconds per variant, the variants interleaved sample by sample."""
    for _ in range(warmup):
        for v in VARIANTS:
            iteration(v, model, x)
    samples = {v: [] for v in VARIANTS}
    for _ in range(repeats):
        for v in VARIANTS:
            start = time.perf_counter()
            iteration(v, model, x)
            samples[v].append(time.perf_counter() - start)
    return {v: statistics.median(s) for v, s in samples.items()}


def table(rows):
    """Markdown table: ms per variant and the recorders' ratios to plain."""
    lines = ["| model | plain | live | live / plain | trace_backward | trace / plain |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, t in rows:
        lines.append(f"| {name} | {t['plain'] * 1e3:.2f} ms | {t['live'] * 1e3:.2f} ms | "
                     f"{t['live'] / t['plain']:.2f}x | {t['trace'] * 1e3:.2f} ms | "
                     f"{t['trace'] / t['plain']:.2f}x |")
    return "\n".join(lines)


def verdicts(rows):
    """``(line, passed)`` per model and recorder against :data:`TARGET`."""
    out = []
    for name, t in rows:
        for v in ("live", "trace"):
            ratio = t[v] / t["plain"]
            passed = ratio <= TARGET
            out.append((f"{'PASS' if passed else 'MISS'}: {v} on {name}: {ratio:.2f}x plain "
                        f"(target <= {TARGET:g}x)", passed))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30, help="timed samples per variant")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads for all")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 3 repeats")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    repeats = 3 if args.quick else args.repeats
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, median of "
          f"{repeats} interleaved repeats after warm-up\n", flush=True)
    rows = []
    for name, factory in models(args.quick):
        model, x = factory()
        rows.append((name, measure(model, x, repeats)))
    print(table(rows))
    print()
    for line, _ in verdicts(rows):
        print(line)
    return rows


if __name__ == "__main__":
    main()
