"""Benchmark what recording costs: plain forward+backward vs dg.live() and dg.trace_backward, beside floors.

Run from the repo root (a few minutes; ``--quick`` is a smoke run):

    .venv/bin/python benchmarks/bench_live.py [--repeats 15] [--threads 1,2] [--only gpt,lstm]
        [--stat min] [--baseline DIR]

The models learners write, in train mode: MLPs of depth 10 (width 64 and 256) and
100 (width 256), batch 64, ReLU; one ``nn.TransformerEncoderLayer(256, 4, 512)`` on a (16, 32, 256)
batch, a 12-layer ``nn.TransformerEncoder`` (d 128, 4 heads, batch 8 x 32 tokens), a
4-block GPT (d 128, 4 heads, 8 x 64 tokens, vocabulary 512), an ``nn.LSTMCell(64,
128)`` unrolled in a Python loop over 50 and 500 steps (batch 32), and a packed GRU:
``nn.GRU(32, 64, num_layers=2)`` over a ``pack_padded_sequence`` of 8 sequences of
lengths 100 down to 20, the loss on the padded output (bench_views.py's GRU sizes);
and a 4-layer causal ``nn.TransformerEncoder`` (d 64, 4 heads, feed-forward 128, 8 x
32 tokens, a causal mask).
The LSTMCell rows show whether the cost stays flat as the graph grows.

Then the Hugging Face zoo, built from configs (nothing is downloaded), on 8 x 64
token ids with a vocabulary of 1000: GPT-2 (2 layers, n_embd 128, 4 heads), Llama (2
layers, hidden 128, 4 heads, intermediate 256) and BERT (4 layers, hidden 128, 4
heads, intermediate 256). They use ``attn_implementation="sdpa"`` (transformers'
default, and it runs on CPU; "eager" does too) and no KV cache, as a training step
does; the loss is on ``.logits`` (GPT-2, Llama) or ``.last_hidden_state`` (BERT).
``transformers`` is in requirements.txt (the test lane), not in the lab lane: without
it these rows are skipped with one printed line (``pip install transformers`` to get them).

Per model, one iteration of each variant is

* ``plain``: ``_loss(model(x)).backward()``;
* ``mode``: the same inside a ``TorchFunctionMode`` whose ``__torch_function__`` only
  calls the function;
* ``floor``: ``live()`` as it must be built, each part doing nothing: that bare mode,
  the two global module hooks (a forward pre-hook and an ``always_call`` forward hook:
  a hook makes torch take its slow path for every module call) and the
  ``Function.apply`` patch, put in place and taken out around the step as one
  ``live()`` block does: the floor of ``live()``;
* ``live``: the same inside ``with dg.live(model):``;
* ``hook``: the forward, then a minimal walk of the loss's autograd nodes
  (``next_functions`` and a seen set, nothing recorded) that registers a do-nothing
  post-hook on each, the backward, and the hooks' removal: the floor of
  ``trace_backward``, which must hook every node;
* ``norms``: as ``hook``, but each post-hook takes the norm of each gradient its node
  sends (``torch.linalg.vector_norm``, one kernel each, kept on the device), and the
  norms are read with one ``torch.stack`` after the backward: the least a
  ``trace_backward`` that shows every gradient's norm must do. It is printed beside
  the floors, and it is the floor ``trace`` is held to;
* ``trace``: the forward, then ``with dg.trace_backward(loss, params=model):``
  around the backward (the trace is set up on each iteration's loss).

With ``--baseline DIR`` (a checkout of an earlier commit: ``git worktree add DIR
COMMIT``), that checkout's ``dynagraph`` is imported beside this one (as
``dynagraph_baseline``) and two more variants run: ``live0`` and ``trace0``, the
same blocks with the earlier code, so before and after are measured side by side in
one run.

Variants run interleaved (plain, mode, floor, live, hook, ..., plain, ...) after a
warm-up, so drift and the load of other processes hit all of them alike; each cell
is the median (``--stat min``: the fastest) of ``--repeats`` wall-clock samples.
Every variant runs with the same ``torch.set_num_threads``, once per value
of ``--threads``.

How to read the table: ``plain`` is milliseconds per iteration; every other timing
is a ratio to it. ``mode / plain`` and ``hook / plain`` are the floors: what any
recorder built on that mechanism costs before it does any work of its own.
``cost / floor cost`` is what the recorder adds above plain divided by what its
floor adds (1.0 is as cheap as the mechanism allows; "-" when the floor adds under
``NOISE`` x plain, where the quotient would be noise). ``µs per op`` (live) and ``µs
per node`` (trace) are what the recorder adds above plain per recorded op and per
autograd node: the number that stays flat when the graph grows. The recorders' cost
is Python work per op and per node, which more threads do not shrink, so their
ratios grow where plain compute gets faster.

The verdicts: ``live`` passes when it costs at most ``TARGET`` x plain. Where its
floor alone is above ``TARGET`` (nothing built on that mechanism can pass), the line
says so and ``live`` is held to ``FLOOR_FACTOR`` x the floor's added cost instead
("FLOOR-PASS" or "MISS"). ``trace`` passes when it costs at most ``TRACE_FACTOR`` x
its ``hook + norms`` floor, and, where that floor is under ``SMALL_FLOOR`` x plain,
at most ``TARGET`` x plain too; a line whose floor is above a target names the
floor's own ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import statistics
import sys
import time

import torch
from torch import nn
from torch.autograd.function import Function
from torch.nn import functional as F
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torch.overrides import TorchFunctionMode

import dynagraph as dg

TARGET = 1.5  # a recorder may cost at most this many times plain forward+backward
FLOOR_FACTOR = 2.0  # where the floor is above TARGET: at most this many times the floor's added cost
TRACE_FACTOR = 1.3  # trace_backward may cost at most this many times its hook + norms floor
SMALL_FLOOR = 1.2  # where the hook + norms floor is under this x plain, trace is also held to TARGET
NOISE = 0.02  # a floor that adds under this fraction of plain is too small to divide by
VARIANTS = ("plain", "mode", "floor", "live", "hook", "norms", "trace")
BASELINE = ("live0", "trace0")  # the same blocks with an earlier checkout's code (--baseline)
FLOORS = {"live": "floor", "trace": "norms"}  # each recorder and the variant that is its floor
ATTENTION = "sdpa"  # the Hugging Face models' attn_implementation (runs on CPU)


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


class CausalEncoder(nn.Module):
    """``layers`` post-norm ``nn.TransformerEncoderLayer``s under a causal mask, as a
    learner's small language model runs them."""

    def __init__(self, d_model, heads, ff, layers):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model, heads, ff, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    def forward(self, x):
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        return self.encoder(x, mask=mask, is_causal=True)


def causal_encoder(d_model=64, heads=4, ff=128, layers=4, batch=8, seq=32):
    """A causal ``nn.TransformerEncoder``; returns (model, input)."""
    return CausalEncoder(d_model, heads, ff, layers).train(), torch.randn(batch, seq, d_model)


def lstm_cell(steps=50, inputs=64, hidden=128, batch=32):
    """An ``LSTMCell`` loop over ``steps`` time steps; returns (model, input)."""
    return CellLoop(inputs, hidden), torch.randn(steps, batch, inputs)


class PackedGRU(nn.Module):
    """An ``nn.GRU`` over a padded (time, batch, features) batch packed by its sequence
    lengths, as learners feed variable-length batches; returns the padded output."""

    def __init__(self, inputs, hidden, layers, lengths):
        super().__init__()
        self.rnn = nn.GRU(inputs, hidden, num_layers=layers)
        self.lengths = lengths  # int64 on the CPU, as pack_padded_sequence wants them

    def forward(self, x):
        packed = pack_padded_sequence(x, self.lengths, enforce_sorted=False)
        return pad_packed_sequence(self.rnn(packed)[0])[0]


def packed_gru(inputs=32, hidden=64, layers=2, batch=8, shortest=20, longest=100):
    """A ``layers``-layer GRU over ``batch`` sequences of lengths evenly spaced from
    ``longest`` down to ``shortest``; returns (model, padded input)."""
    lengths = torch.linspace(longest, shortest, batch).round().long()
    return PackedGRU(inputs, hidden, layers, lengths), torch.randn(longest, batch, inputs)


def _transformers():
    """The ``transformers`` module, or None where it is not importable (the lab lane
    does not install it)."""
    try:
        import transformers
    except ImportError:
        return None
    return transformers


def hf_gpt2(layers=2, d=128, heads=4, vocab=1000, batch=8, seq=64):
    """Hugging Face GPT-2 with a language-model head, from a config; returns (model, token ids)."""
    tf = _transformers()
    config = tf.GPT2Config(n_layer=layers, n_embd=d, n_head=heads, vocab_size=vocab, n_positions=seq,
                           bos_token_id=0, eos_token_id=0,  # the defaults lie outside a small vocabulary
                           use_cache=False, attn_implementation=ATTENTION)
    return tf.GPT2LMHeadModel(config).train(), torch.randint(vocab, (batch, seq))


def hf_llama(layers=2, d=128, heads=4, ff=256, vocab=1000, batch=8, seq=64):
    """Hugging Face Llama with a language-model head, from a config; returns (model, token ids)."""
    tf = _transformers()
    config = tf.LlamaConfig(num_hidden_layers=layers, hidden_size=d, num_attention_heads=heads,
                            intermediate_size=ff, vocab_size=vocab, max_position_embeddings=seq,
                            use_cache=False, attn_implementation=ATTENTION)
    return tf.LlamaForCausalLM(config).train(), torch.randint(vocab, (batch, seq))


def hf_bert(layers=4, d=128, heads=4, ff=256, vocab=1000, batch=8, seq=64):
    """Hugging Face BERT encoder (no pooler: the loss is on ``last_hidden_state``), from a
    config; returns (model, token ids)."""
    tf = _transformers()
    config = tf.BertConfig(num_hidden_layers=layers, hidden_size=d, num_attention_heads=heads,
                           intermediate_size=ff, vocab_size=vocab, max_position_embeddings=seq,
                           attn_implementation=ATTENTION)
    return tf.BertModel(config, add_pooling_layer=False).train(), torch.randint(vocab, (batch, seq))


ZOO = ("GPT-2 2 layers (HF)", "Llama 2 layers (HF)", "BERT 4 layers (HF)")  # the zoo's row names


def models(quick=False):
    """(row name, factory) pairs; ``quick`` shrinks every size for a smoke run.

    The Hugging Face rows (:data:`ZOO`) are left out where ``transformers`` is not importable.
    """
    if quick:
        tiny = dict(d=16, heads=2, vocab=32, batch=2, seq=8)
        rows = [("MLP 10x64", lambda: mlp(width=8, batch=4)),
                ("MLP 10x256", lambda: mlp(width=16, batch=4)),
                ("TransformerEncoderLayer", lambda: transformer(16, 2, 32, 2, 4)),
                ("GPT 4 blocks", lambda: gpt(2, 16, 2, 2, 8, 32)),
                ("LSTMCell x50", lambda: lstm_cell(5, 4, 8, 2)),
                ("causal encoder 4 layers", lambda: causal_encoder(8, 2, 16, 2, 2, 4)),
                ("GRU 2 layers, packed", lambda: packed_gru(4, 8, 2, 2, 3, 5))]
        zoo = [lambda: hf_gpt2(1, **tiny), lambda: hf_llama(1, ff=32, **tiny),
               lambda: hf_bert(1, ff=32, **tiny)]
    else:
        rows = [("MLP 10x64", lambda: mlp(width=64)),
                ("MLP 10x256", mlp),
                ("MLP 100x256", lambda: mlp(depth=100)),
                ("TransformerEncoderLayer", transformer),
                ("TransformerEncoder 12 layers", lambda: transformer(128, 4, 256, 8, 32, layers=12)),
                ("GPT 4 blocks", gpt),
                ("LSTMCell x50", lstm_cell),
                ("LSTMCell x500", lambda: lstm_cell(steps=500)),
                ("causal encoder 4 layers", causal_encoder),
                ("GRU 2 layers, packed", packed_gru)]
        zoo = [hf_gpt2, hf_llama, hf_bert]
    return rows + (list(zip(ZOO, zoo)) if _transformers() else [])


def iteration(variant, model, x, package=None):
    """One forward+backward of ``model`` on ``x`` the way ``variant`` runs it
    (``live0`` and ``trace0`` with ``package``, an earlier checkout's dynagraph)."""
    model.zero_grad(set_to_none=True)
    if variant in BASELINE:
        if package is None:
            raise ValueError(f"{variant!r} needs package=, an earlier dynagraph (--baseline DIR)")
        variant, dg_ = variant[:-1], package
    else:
        dg_ = dg
    if variant == "plain":
        _loss(model(x)).backward()
    elif variant == "mode":
        with _PassThrough():
            _loss(model(x)).backward()
    elif variant == "floor":
        with _bare_live():
            _loss(model(x)).backward()
    elif variant == "live":
        with dg_.live(model):
            _loss(model(x)).backward()
    elif variant in ("hook", "norms"):
        loss = _loss(model(x))
        norms = []
        handles = hook_every_node(loss, _norm_hook(norms) if variant == "norms" else None)
        try:
            loss.backward()
        finally:
            for handle in handles:
                handle.remove()
        if norms:
            torch.stack(norms).tolist()  # the one read of them all
    elif variant == "trace":
        loss = _loss(model(x))
        with dg_.trace_backward(loss, params=model):
            loss.backward()
    else:
        raise ValueError(f"unknown variant: {variant!r} (must be one of {VARIANTS + BASELINE})")


class _PassThrough(TorchFunctionMode):
    """A torch function mode that only calls each function: the least a mode can cost."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


_TORCH_APPLY = Function.__dict__["apply"]  # torch's own Function.apply (a classmethod)


def _apply(cls, *args, **kwargs):
    """A ``Function.apply`` patch that only calls torch's."""
    return _TORCH_APPLY.__func__(cls, *args, **kwargs)


def _noop_pre_hook(module, args):
    """A global module forward pre-hook that does nothing."""


def _noop_post_hook(module, args, output):
    """A global module forward hook that does nothing."""


@contextlib.contextmanager
def _bare_live():
    """The floor of ``live()``: what it must put in place to see every op, module call
    and custom Function, each doing nothing (the mode, the global module hooks, the
    ``Function.apply`` patch), put in place on entry and taken out on exit."""
    pre = register_module_forward_pre_hook(_noop_pre_hook)
    post = register_module_forward_hook(_noop_post_hook, always_call=True)
    Function.apply = classmethod(_apply)
    try:
        with _PassThrough():
            yield
    finally:
        Function.apply = _TORCH_APPLY
        pre.remove()
        post.remove()


def _noop_hook(grad_inputs, grad_outputs):
    """A node post-hook that does nothing (the ``hook`` floor registers it everywhere)."""


def _norm_hook(norms):
    """A node post-hook that appends to ``norms`` the norm of each gradient its node
    sends (one norm for a tensor sent twice in a row, as ``trace_backward`` takes it)."""
    def hook(grad_inputs, grad_outputs):
        last = None
        for grad in grad_inputs:
            if grad is not None and grad is not last:
                last = grad
                norms.append(torch.linalg.vector_norm(grad))
    return hook


def hook_every_node(loss, hook=None):
    """Register ``hook`` (default :func:`_noop_hook`) on every autograd node of ``loss``;
    returns the handles.

    The walk is the least ``trace_backward`` must do: ``next_functions`` and a seen set,
    nothing recorded.
    """
    hook = _noop_hook if hook is None else hook
    handles, seen, stack = [], set(), [loss.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        handles.append(fn.register_hook(hook))
        stack.extend(next_fn for next_fn, _ in fn.next_functions)
    return handles


def _loss(out):
    """A scalar of the output that every element feeds (mean, so big outputs stay finite).

    A Hugging Face output gives its ``.logits`` or else its ``.last_hidden_state``.
    """
    for field in ("logits", "last_hidden_state"):
        if hasattr(out, field):
            out = getattr(out, field)
            break
    return out.float().pow(2).mean()


def measure(model, x, repeats, warmup=3, package=None, stat="median"):
    """Seconds per variant (the median of the samples, or with ``stat="min"`` the
    fastest), the variants interleaved sample by sample; with ``package`` (an earlier
    dynagraph) also :data:`BASELINE`'s."""
    variants = VARIANTS + (BASELINE if package is not None else ())
    for _ in range(warmup):
        for v in variants:
            iteration(v, model, x, package)
    samples = {v: [] for v in variants}
    for _ in range(repeats):
        for v in variants:
            start = time.perf_counter()
            iteration(v, model, x, package)
            samples[v].append(time.perf_counter() - start)
    pick = min if stat == "min" else statistics.median
    return {v: pick(s) for v, s in samples.items()}


def load_baseline(folder):
    """The ``dynagraph`` package of the checkout at ``folder``, imported as
    ``dynagraph_baseline`` beside this one (its imports inside are relative)."""
    init = os.path.join(folder, "dynagraph", "__init__.py")
    if not os.path.isfile(init):
        raise SystemExit(f"--baseline {folder!r}: no dynagraph/__init__.py there; pass a checkout "
                         "of an earlier commit (git worktree add DIR COMMIT)")
    spec = importlib.util.spec_from_file_location(
        "dynagraph_baseline", init, submodule_search_locations=[os.path.dirname(init)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["dynagraph_baseline"] = module
    spec.loader.exec_module(module)
    return module


def sizes(model, x):
    """(recorded steps, autograd nodes) of one iteration: what the per-op costs divide by."""
    with dg.live(model) as rec:
        loss = _loss(model(x))
    nodes = sum(dg.draw(loss, roll=False, max_nodes=None).counts().values())
    return len(rec.steps), nodes


def cost_over_floor(t, recorder):
    """What ``recorder`` adds above plain over what its floor adds, or None when the
    floor adds under ``NOISE`` x plain (the quotient would be noise)."""
    floor_cost = t[FLOORS[recorder]] - t["plain"]
    if floor_cost < NOISE * t["plain"]:
        return None
    return (t[recorder] - t["plain"]) / floor_cost


def _times(value):
    """``1.23x``, or ``-`` for None."""
    return "-" if value is None else f"{value:.2f}x"


def table(rows):
    """Markdown table: plain ms, then every other variant's ratio to plain; per recorder
    its cost over its floor's (``live / floor``: added cost over added cost; ``trace /
    hook + norms``: time over time) and what it adds per op (live) or per autograd node
    (trace); ``live0`` and ``trace0`` (an earlier checkout) where a row has them."""
    before = any("live0" in t for *_, t in rows)
    head = ["model", "threads", "ops", "nodes", "plain", "mode", "floor", "live", "live cost / floor cost",
            "µs per op"] + (["live before"] if before else []) + [
            "hook", "hook + norms", "trace", "trace / hook + norms", "µs per node"] + (
            ["trace before"] if before else [])
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for name, threads, (ops, nodes), t in rows:
        plain = t["plain"]
        cells = [name, str(threads), f"{ops:,}", f"{nodes:,}", f"{plain * 1e3:.2f} ms"]
        cells += [_times(t[v] / plain) for v in ("mode", "floor", "live")]
        cells += [_times(cost_over_floor(t, "live")), f"{(t['live'] - plain) / ops * 1e6:.1f}"]
        cells += [_times(t["live0"] / plain)] if before else []
        cells += [_times(t[v] / plain) for v in ("hook", "norms", "trace")]
        cells += [_times(t["trace"] / t["norms"]), f"{(t['trace'] - plain) / nodes * 1e6:.1f}"]
        cells += [_times(t["trace0"] / plain)] if before else []
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def verdicts(rows):
    """``(line, passed)`` per model, thread count and recorder.

    ``live``: at most :data:`TARGET` x plain, or where its floor alone is above that,
    at most :data:`FLOOR_FACTOR` x the floor's added cost. ``trace``: at most
    :data:`TRACE_FACTOR` x its hook + norms floor, and where that floor is under
    :data:`SMALL_FLOOR` x plain, at most :data:`TARGET` x plain too. Each line gives
    the earlier checkout's ratio where the row has one.
    """
    out = []
    for name, threads, _, t in rows:
        where = f"on {name}, {threads} thread{'s' if threads > 1 else ''}"
        ratio, floor_ratio = t["live"] / t["plain"], t["floor"] / t["plain"]
        if floor_ratio <= TARGET:
            passed = ratio <= TARGET
            line = (f"{'PASS' if passed else 'MISS'}: live {where}: {ratio:.2f}x plain "
                    f"(target <= {TARGET:g}x; its floor alone {floor_ratio:.2f}x)")
        else:  # the floor adds over half of plain, so cost_over_floor is never None here
            cost = cost_over_floor(t, "live")
            passed = cost <= FLOOR_FACTOR
            line = (f"{'FLOOR-PASS' if passed else 'MISS'}: live {where}: {ratio:.2f}x plain; FLOOR: "
                    f"its floor alone is {floor_ratio:.2f}x (above {TARGET:g}x), so it may add "
                    f"<= {FLOOR_FACTOR:g}x the floor's added cost: {cost:.2f}x")
        if "live0" in t:
            line += f" (before: {t['live0'] / t['plain']:.2f}x)"
        out.append((line, passed))
        ratio, floor_ratio = t["trace"] / t["plain"], t["norms"] / t["plain"]
        over = t["trace"] / t["norms"]
        passed = over <= TRACE_FACTOR and (floor_ratio >= SMALL_FLOOR or ratio <= TARGET)
        line = (f"{'PASS' if passed else 'MISS'}: trace {where}: {ratio:.2f}x plain, {over:.2f}x its "
                f"hook + norms floor (target <= {TRACE_FACTOR:g}x"
                + (f", and <= {TARGET:g}x plain: the floor is {floor_ratio:.2f}x, under {SMALL_FLOOR:g}x)"
                   if floor_ratio < SMALL_FLOOR else f"; the floor alone is {floor_ratio:.2f}x)"))
        if "trace0" in t:
            line += (f" (before: {t['trace0'] / t['plain']:.2f}x plain, "
                     f"{t['trace0'] / t['norms']:.2f}x the floor)")
        out.append((line, passed))
    return out


def _picked(part, name):
    """Whether ``--only``'s ``part`` picks row ``name``: a part in it, or ``=name`` exactly."""
    return name == part[1:] if part.startswith("=") else part in name


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15, help="timed samples per variant")
    parser.add_argument("--threads", default="1,2", help="torch.set_num_threads values, e.g. 1,2")
    parser.add_argument("--only", default="",
                        help="run only models whose name contains this (or one of these, comma-separated; "
                             "=NAME: that row only)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 3 repeats")
    parser.add_argument("--stat", choices=("median", "min"), default="median",
                        help="each cell: the median of the samples, or the fastest")
    parser.add_argument("--baseline", default="",
                        help="a checkout of an earlier commit: its live and trace_backward run beside these")
    args = parser.parse_args(argv)
    package = load_baseline(args.baseline) if args.baseline else None
    before = torch.get_num_threads()
    repeats = 3 if args.quick else args.repeats
    counts = [int(n) for n in args.threads.split(",")]
    load = f", load average {os.getloadavg()[0]:.2f} at the start" if hasattr(os, "getloadavg") else ""
    print(f"torch {torch.__version__}, threads {counts}, {args.stat} of {repeats} interleaved "
          f"repeats after warm-up, {os.cpu_count()} CPUs{load}"
          + (f"; before = the dynagraph of {args.baseline}" if package else "") + "\n", flush=True)
    if _transformers() is None:
        print(f"skipped {', '.join(ZOO)}: transformers is not importable "
              "(pip install transformers to get these rows)\n", flush=True)
    rows = []
    try:
        for name, factory in models(args.quick):
            if not any(_picked(part.strip().lower(), name.lower()) for part in args.only.split(",")):
                continue
            torch.manual_seed(0)
            model, x = factory()
            size = sizes(model, x)
            for threads in counts:
                torch.set_num_threads(threads)
                times = measure(model, x, repeats, package=package, stat=args.stat)
                rows.append((name, threads, size, times))
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
