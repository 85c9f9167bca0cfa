"""Benchmark what recording costs: plain forward+backward vs dg.live() vs dg.trace_backward.

Run from the repo root (a few minutes; ``--quick`` is a smoke run):

    .venv/bin/python benchmarks/bench_live.py [--repeats 15] [--threads 1,2] [--only gpt]

The models learners write, in train mode: MLPs of depth 10 and 100 (width 256,
batch 64, ReLU), one ``nn.TransformerEncoderLayer(256, 4, 512)`` on a (16, 32, 256)
batch, a 12-layer ``nn.TransformerEncoder`` (d 128, 4 heads, batch 8 x 32 tokens), a
4-block GPT (d 128, 4 heads, 8 x 64 tokens, vocabulary 512) and an ``nn.LSTMCell(64,
128)`` unrolled in a Python loop over 50 and 500 steps (batch 32): the last two show
whether the cost stays flat as the graph grows. Per model, one iteration of each
variant is

* ``plain``: ``_loss(model(x)).backward()``;
* ``live``: the same inside ``with dg.live(model):``;
* ``trace``: the forward, then ``with dg.trace_backward(loss, params=model):``
  around the backward (the trace is set up on each iteration's loss).

Variants run interleaved (plain, live, trace, plain, ...) after a warm-up, so drift
hits all three alike; each cell is the median of ``--repeats`` wall-clock samples.
The target is that both recorders cost at most ``TARGET`` x plain. The table also
prints what each recorder adds per recorded op (live) and per autograd node (trace),
in microseconds: the number that stays flat when the graph grows.

Every variant runs with the same ``torch.set_num_threads``, once per value of
``--threads``. The recorders' cost is Python work per op and per node, which more
threads do not shrink, so their ratios grow where plain compute gets faster.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn
from torch.nn import functional as F

import dynagraph as dg

TARGET = 1.5  # a recorder may cost at most this many times plain forward+backward
VARIANTS = ("plain", "live", "trace")


def mlp(depth=10, width=256, batch=64):
    """``depth`` x (Linear + ReLU); returns (model, input)."""
    layers = [m for _ in range(depth) for m in (nn.Linear(width, width), nn.ReLU())]
    return nn.Sequential(*layers), torch.randn(batch, width)


def transformer(d_model=256, heads=4, ff=512, batch=16, seq=32, layers=1):
    """``layers`` train-mode TransformerEncoderLayers (an ``nn.TransformerEncoder`` when
    more than one); returns (model, input)."""
    layer = nn.TransformerEncoderLayer(d_model, heads, ff, batch_first=True)
    model = layer if layers == 1 else nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
    return model.train(), torch.randn(batch, seq, d_model)


class Block(nn.Module):
    """A GPT block as learners write it (nanoGPT's shape): pre-LayerNorm causal
    self-attention and a GELU MLP, each with a residual."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


def gpt(layers=4, d=128, heads=4, batch=8, seq=64, vocab=512):
    """A small GPT: token and position embeddings, ``layers`` blocks, a final
    LayerNorm and the vocabulary head; returns (model, token ids)."""
    model = nn.Sequential(_Embed(vocab, d, seq), *[Block(d, heads) for _ in range(layers)],
                          nn.LayerNorm(d), nn.Linear(d, vocab))
    return model.train(), torch.randint(vocab, (batch, seq))


class _Embed(nn.Module):
    def __init__(self, vocab, d, seq):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)

    def forward(self, idx):
        return self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))


class CellLoop(nn.Module):
    """An ``nn.LSTMCell`` unrolled over the sequence in a Python loop (dim 0)."""

    def __init__(self, inputs, hidden):
        super().__init__()
        self.cell = nn.LSTMCell(inputs, hidden)

    def forward(self, x):
        h = x.new_zeros(x.shape[1], self.cell.hidden_size)
        c = torch.zeros_like(h)
        for x_t in x:
            h, c = self.cell(x_t, (h, c))
        return h


def lstm_cell(steps=50, inputs=64, hidden=128, batch=32):
    """An ``LSTMCell`` loop over ``steps`` time steps; returns (model, input)."""
    return CellLoop(inputs, hidden), torch.randn(steps, batch, inputs)


def models(quick=False):
    """(row name, factory) pairs; ``quick`` shrinks every size for a smoke run."""
    if quick:
        return [("MLP 10x256", lambda: mlp(width=16, batch=4)),
                ("TransformerEncoderLayer", lambda: transformer(16, 2, 32, 2, 4)),
                ("GPT 4 blocks", lambda: gpt(2, 16, 2, 2, 8, 32)),
                ("LSTMCell x50", lambda: lstm_cell(5, 4, 8, 2))]
    return [("MLP 10x256", mlp),
            ("MLP 100x256", lambda: mlp(depth=100)),
            ("TransformerEncoderLayer", transformer),
            ("TransformerEncoder 12 layers", lambda: transformer(128, 4, 256, 8, 32, layers=12)),
            ("GPT 4 blocks", gpt),
            ("LSTMCell x50", lstm_cell),
            ("LSTMCell x500", lambda: lstm_cell(steps=500))]


def iteration(variant, model, x):
    """One forward+backward of ``model`` on ``x`` the way ``variant`` runs it."""
    model.zero_grad(set_to_none=True)
    if variant == "plain":
        _loss(model(x)).backward()
    elif variant == "live":
        with dg.live(model):
            _loss(model(x)).backward()
    elif variant == "trace":
        loss = _loss(model(x))
        with dg.trace_backward(loss, params=model):
            loss.backward()
    else:
        raise ValueError(f"unknown variant: {variant!r} (must be one of {VARIANTS})")


def _loss(out):
    """A scalar of the output that every element feeds (mean, so big outputs stay finite)."""
    return out.float().pow(2).mean()


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


def sizes(model, x):
    """(recorded steps, autograd nodes) of one iteration: what the per-op costs divide by."""
    with dg.live(model) as rec:
        loss = _loss(model(x))
    nodes = sum(dg.draw(loss, roll=False, max_nodes=None).counts().values())
    return len(rec.steps), nodes


def table(rows):
    """Markdown table: ms per variant, the recorders' ratios to plain, and their
    cost per recorded op (live) and per autograd node (trace) above plain."""
    lines = ["| model | threads | ops | nodes | plain | live / plain | µs per op | "
             "trace / plain | µs per node |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, threads, (ops, nodes), t in rows:
        lines.append(
            f"| {name} | {threads} | {ops:,} | {nodes:,} | {t['plain'] * 1e3:.2f} ms | "
            f"{t['live'] / t['plain']:.2f}x | {(t['live'] - t['plain']) / ops * 1e6:.1f} | "
            f"{t['trace'] / t['plain']:.2f}x | {(t['trace'] - t['plain']) / nodes * 1e6:.1f} |")
    return "\n".join(lines)


def verdicts(rows):
    """``(line, passed)`` per model, thread count and recorder against :data:`TARGET`."""
    out = []
    for name, threads, _, t in rows:
        for v in ("live", "trace"):
            ratio = t[v] / t["plain"]
            passed = ratio <= TARGET
            out.append((f"{'PASS' if passed else 'MISS'}: {v} on {name}, {threads} thread"
                        f"{'s' if threads > 1 else ''}: {ratio:.2f}x plain (target <= {TARGET:g}x)",
                        passed))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15, help="timed samples per variant")
    parser.add_argument("--threads", default="1,2", help="torch.set_num_threads values, e.g. 1,2")
    parser.add_argument("--only", default="", help="run only models whose name contains this")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 3 repeats")
    args = parser.parse_args(argv)
    before = torch.get_num_threads()
    repeats = 3 if args.quick else args.repeats
    counts = [int(n) for n in args.threads.split(",")]
    print(f"torch {torch.__version__}, threads {counts}, median of {repeats} interleaved "
          "repeats after warm-up\n", flush=True)
    rows = []
    try:
        for name, factory in models(args.quick):
            if args.only.lower() not in name.lower():
                continue
            torch.manual_seed(0)
            model, x = factory()
            size = sizes(model, x)
            for threads in counts:
                torch.set_num_threads(threads)
                rows.append((name, threads, size, measure(model, x, repeats)))
                print(f"  {name}, {threads} thread(s): done", flush=True)
    finally:
        torch.set_num_threads(before)
    print()
    print(table(rows))
    print()
    for line, _ in verdicts(rows):
        print(line)
    return rows


if __name__ == "__main__":
    main()
