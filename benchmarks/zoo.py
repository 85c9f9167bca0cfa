"""A model zoo: real architectures, small and seeded, that the tests and benchmarks share."""

# Run from the repo root to time every view of every model (a minute or two):
#
#     .venv/bin/python benchmarks/zoo.py [--repeats 3] [--only gpt]
#
# Each factory returns a :class:`Case`: ``(model, inputs, loss)``. The model is in train
# mode (dropout and BatchNorm as in a training step), on the CPU, built after
# ``torch.manual_seed(0)``, so two calls build the same weights and inputs. ``inputs`` are
# the keyword arguments of the forward; ``loss`` maps the model's output to a scalar that
# every output feeds, so that backward reaches the whole graph. ``case.forward()`` runs
# one forward and returns that loss.
#
# The Hugging Face models are built from small configs: nothing is downloaded.
# ``transformers`` is in the test lane (requirements.txt) but not a dependency of
# dynagraph: without it :func:`available` leaves those models out and says why.
# torchvision and timm are not used: torchvision's wheels on the package index pair with
# a CUDA torch and fail to import beside the CPU torch, and timm needs torchvision. So the
# vision models here are written out (ResNet-, MobileNet-, ViT- and U-Net-like).

from __future__ import annotations

import argparse
import re
import statistics
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import dynagraph as dg
from dynagraph import _page, render

SEED = 0
VOCAB = 1000  # the Hugging Face models' vocabulary: small, so the embeddings stay small
ATTENTION = "eager"  # the Hugging Face models' attn_implementation: plain ops, as written in the paper
TIME_TARGET = 2.0  # seconds: every view must display this fast (as in bench_views.py)
SIZE_TARGET = 300.0  # KB: and this small
# One screen: the output area of a notebook in JupyterLab at 100 % on a 1366 x 768
# laptop, in CSS pixels. A picture's "screens" is its area at 1:1 over this area, each
# side counted as at least one screen (a narrow tall picture scrolls one way only).
SCREEN = (1000, 700)


class Case(NamedTuple):
    """One zoo model, ready to run: the module, its forward's keyword arguments, its loss."""

    model: nn.Module
    inputs: dict[str, torch.Tensor]
    loss: Callable[[Any], torch.Tensor]

    def forward(self) -> torch.Tensor:
        """One forward pass: the scalar loss of the model on its inputs."""
        return self.loss(self.model(**self.inputs))


def square_mean(*tensors: torch.Tensor) -> torch.Tensor:
    """The sum over ``tensors`` of the mean of their squares, in float32: a scalar they all feed."""
    return sum(t.float().pow(2).mean() for t in tensors)  # type: ignore[return-value]


def logits_loss(out: Any) -> torch.Tensor:
    """Loss on a Hugging Face output's ``logits`` (a language-model or masked-LM head)."""
    return square_mean(out.logits)


def hidden_loss(out: Any) -> torch.Tensor:
    """Loss on a Hugging Face encoder's ``last_hidden_state``."""
    return square_mean(out.last_hidden_state)


def tensors_loss(out: torch.Tensor | tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Loss on a tensor, or on every tensor of a tuple (an RNN's output and states)."""
    return square_mean(*out) if isinstance(out, tuple) else square_mean(out)


# -- Hugging Face transformers, from configs ------------------------------------------------

def _transformers() -> Any:
    """The ``transformers`` module; ImportError where it is not installed."""
    import transformers
    return transformers


def _token_ids(batch: int, seq: int) -> torch.Tensor:
    """A (batch, seq) batch of random token ids from the small vocabulary."""
    return torch.randint(VOCAB, (batch, seq))


def gpt2(layers: int = 2, d: int = 64, heads: int = 4, batch: int = 2, seq: int = 8) -> Case:
    """GPT-2 with its language-model head (``GPT2LMHeadModel``): the decoder-only model
    most tutorials start from; at 12 layers it shows ``transformer.h.0–11`` rolled."""
    tf = _transformers()
    torch.manual_seed(SEED)
    config = tf.GPT2Config(n_layer=layers, n_embd=d, n_head=heads, vocab_size=VOCAB, n_positions=seq,
                           bos_token_id=0, eos_token_id=0,  # the defaults lie outside a small vocabulary
                           use_cache=False, attn_implementation=ATTENTION)
    model = tf.GPT2LMHeadModel(config).train()
    return Case(model, {"input_ids": _token_ids(batch, seq)}, logits_loss)


def bert(layers: int = 4, d: int = 64, heads: int = 4, batch: int = 2, seq: int = 8) -> Case:
    """BERT's encoder (``BertModel``, no pooler, so every parameter feeds the loss): the
    encoder-only model, with token-type and position embeddings beside the tokens'."""
    tf = _transformers()
    torch.manual_seed(SEED)
    config = tf.BertConfig(num_hidden_layers=layers, hidden_size=d, num_attention_heads=heads,
                           intermediate_size=2 * d, vocab_size=VOCAB, max_position_embeddings=seq,
                           attn_implementation=ATTENTION)
    model = tf.BertModel(config, add_pooling_layer=False).train()
    return Case(model, {"input_ids": _token_ids(batch, seq)}, hidden_loss)


def t5(layers: int = 2, d: int = 64, heads: int = 4, batch: int = 2, seq: int = 8) -> Case:
    """T5 (``T5ForConditionalGeneration``), ``layers`` encoder and ``layers`` decoder
    blocks: the encoder-decoder model, with cross-attention and relative position bias."""
    tf = _transformers()
    torch.manual_seed(SEED)
    config = tf.T5Config(num_layers=layers, num_decoder_layers=layers, d_model=d, d_kv=d // heads,
                         d_ff=2 * d, num_heads=heads, vocab_size=VOCAB, decoder_start_token_id=0,
                         use_cache=False, attn_implementation=ATTENTION)
    model = tf.T5ForConditionalGeneration(config).train()
    inputs = {"input_ids": _token_ids(batch, seq), "decoder_input_ids": _token_ids(batch, seq // 2 + 2)}
    return Case(model, inputs, logits_loss)


def llama(layers: int = 2, d: int = 64, heads: int = 4, batch: int = 2, seq: int = 8) -> Case:
    """Llama (``LlamaForCausalLM``): today's decoder, with RMSNorm, rotary position
    embeddings and a gated SiLU MLP."""
    tf = _transformers()
    torch.manual_seed(SEED)
    config = tf.LlamaConfig(num_hidden_layers=layers, hidden_size=d, num_attention_heads=heads,
                            intermediate_size=2 * d, vocab_size=VOCAB, max_position_embeddings=seq,
                            use_cache=False, attn_implementation=ATTENTION)
    model = tf.LlamaForCausalLM(config).train()
    return Case(model, {"input_ids": _token_ids(batch, seq)}, logits_loss)


# -- vision models, written out ------------------------------------------------------------

def _conv_bn(inp: int, out: int, kernel: int, stride: int = 1, groups: int = 1) -> list[nn.Module]:
    """A "same"-padded convolution without bias, then BatchNorm (which makes the bias redundant)."""
    return [nn.Conv2d(inp, out, kernel, stride, kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(out)]


class BasicBlock(nn.Module):
    """ResNet's two 3x3 convolutions with BatchNorm, plus a (1x1 when reshaping) shortcut."""

    def __init__(self, inp: int, out: int, stride: int):
        super().__init__()
        self.body = nn.Sequential(*_conv_bn(inp, out, 3, stride), nn.ReLU(), *_conv_bn(out, out, 3))
        reshape = stride != 1 or inp != out
        self.shortcut = nn.Sequential(*_conv_bn(inp, out, 1, stride)) if reshape else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.body(x) + self.shortcut(x)).relu()


class ResNet(nn.Module):
    """ResNet-18's layout: a stem, four stages of BasicBlocks (the first block of stages
    2-4 halves the size), global average pooling and a linear classifier."""

    def __init__(self, blocks: int = 2, widths: tuple[int, ...] = (8, 16, 32, 64), classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(*_conv_bn(3, widths[0], 3), nn.ReLU())
        layers, inp = [], widths[0]
        for stage, out in enumerate(widths):
            for i in range(blocks):
                layers.append(BasicBlock(inp, out, 2 if stage and not i else 1))
                inp = out
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(inp, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.layers(self.stem(x)).mean(dim=(2, 3)))


def resnet(blocks: int = 2, size: int = 16, batch: int = 2) -> Case:
    """A ResNet-18-like CNN (``blocks`` per stage, 4 stages): residual adds and
    BatchNorm in train mode, the model every vision course draws."""
    torch.manual_seed(SEED)
    return Case(ResNet(blocks).train(), {"x": torch.randn(batch, 3, size, size)}, tensors_loss)


class InvertedResidual(nn.Module):
    """MobileNetV2's block: 1x1 expand, 3x3 depthwise, 1x1 linear projection; a
    residual add when the shape is kept."""

    def __init__(self, inp: int, out: int, stride: int, expand: int):
        super().__init__()
        hidden = inp * expand
        self.body = nn.Sequential(*_conv_bn(inp, hidden, 1), nn.ReLU6(),
                                  *_conv_bn(hidden, hidden, 3, stride, groups=hidden), nn.ReLU6(),
                                  *_conv_bn(hidden, out, 1))
        self.residual = stride == 1 and inp == out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.residual else y


class MobileNet(nn.Module):
    """MobileNetV2's layout, shortened: a stem, a depthwise-separable block, inverted
    residual stages ``(expand, channels, blocks, stride)``, pooling and a classifier."""

    STAGES = ((4, 16, 2, 2), (4, 24, 2, 2), (4, 32, 2, 1))

    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(*_conv_bn(3, 8, 3, 2), nn.ReLU6())
        blocks: list[nn.Module] = [InvertedResidual(8, 8, 1, 1)]  # expand 1: depthwise-separable
        inp = 8
        for expand, out, n, stride in self.STAGES:
            for i in range(n):
                blocks.append(InvertedResidual(inp, out, stride if i == 0 else 1, expand))
                inp = out
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(inp, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.blocks(self.stem(x)).mean(dim=(2, 3)))


def mobilenet(size: int = 32, batch: int = 2) -> Case:
    """A MobileNetV2-like CNN: depthwise (grouped) convolutions, ReLU6 and inverted
    residuals, whose many small nodes differ from ResNet's."""
    torch.manual_seed(SEED)
    return Case(MobileNet().train(), {"x": torch.randn(batch, 3, size, size)}, tensors_loss)


class EncoderBlock(nn.Module):
    """A pre-LayerNorm transformer encoder block: ``nn.MultiheadAttention`` and a GELU
    MLP, each with a residual (the ViT paper's block)."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, dropout=0.1, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Dropout(0.1), nn.Linear(2 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.ln1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class ViT(nn.Module):
    """A Vision Transformer: a strided convolution cuts patches, a class token and
    learned positions join them, encoder blocks mix them, the class token classifies."""

    def __init__(self, size: int = 16, patch: int = 4, d: int = 32, heads: int = 4, layers: int = 4,
                 classes: int = 10):
        super().__init__()
        self.patch = nn.Conv2d(3, d, patch, patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.randn(1, (size // patch) ** 2 + 1, d) * 0.02)
        self.blocks = nn.Sequential(*(EncoderBlock(d, heads) for _ in range(layers)))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.patch(x).flatten(2).transpose(1, 2)  # (batch, patches, d)
        tokens = torch.cat([self.cls.expand(len(x), -1, -1), tokens], dim=1) + self.pos
        return self.head(self.ln(self.blocks(tokens))[:, 0])


def vit(layers: int = 4, size: int = 16, batch: int = 2) -> Case:
    """A ViT-like model (patch embedding and ``layers`` encoder blocks): attention on
    images, and a class token that is a parameter concatenated to the data."""
    torch.manual_seed(SEED)
    return Case(ViT(size, layers=layers).train(), {"x": torch.randn(batch, 3, size, size)}, tensors_loss)


def _double_conv(inp: int, out: int) -> nn.Sequential:
    """U-Net's unit: two 3x3 convolutions, each with BatchNorm and ReLU."""
    return nn.Sequential(*_conv_bn(inp, out, 3), nn.ReLU(), *_conv_bn(out, out, 3), nn.ReLU())


class UNet(nn.Module):
    """U-Net's layout: double convolutions going down (max-pooled), then up (transposed
    convolutions), each level up concatenating the level down's features (the skips)."""

    def __init__(self, widths: tuple[int, ...] = (8, 16, 32), classes: int = 2):
        super().__init__()
        self.down = nn.ModuleList(_double_conv(a, b) for a, b in zip((1, *widths[:-2]), widths[:-1]))
        self.bottom = _double_conv(widths[-2], widths[-1])
        pairs = list(zip(widths[:0:-1], widths[-2::-1]))  # (from, to) going up: (32, 16), (16, 8)
        self.up = nn.ModuleList(nn.ConvTranspose2d(a, b, 2, 2) for a, b in pairs)
        self.fuse = nn.ModuleList(_double_conv(2 * b, b) for _, b in pairs)
        self.out = nn.Conv2d(widths[0], classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for down in self.down:
            x = down(x)
            skips.append(x)
            x = nn.functional.max_pool2d(x, 2)
        x = self.bottom(x)
        for up, fuse, skip in zip(self.up, self.fuse, reversed(skips)):
            x = fuse(torch.cat([up(x), skip], dim=1))
        return self.out(x)


def unet(size: int = 16, batch: int = 2) -> Case:
    """A U-Net-like segmenter: the skip concatenations make long edges across the
    graph, from each level down to its level up."""
    torch.manual_seed(SEED)
    return Case(UNet().train(), {"x": torch.randn(batch, 1, size, size)}, tensors_loss)


# -- packed recurrent networks -------------------------------------------------------------

class PackedRNN(nn.Module):
    """An ``nn.LSTM`` or ``nn.GRU`` over a padded (time, batch, features) batch packed
    by its sequence lengths, as learners feed variable-length batches; returns the
    padded output and the final states."""

    def __init__(self, rnn: nn.LSTM | nn.GRU, lengths: torch.Tensor):
        super().__init__()
        self.rnn = rnn
        self.lengths = lengths  # int64 on the CPU, as pack_padded_sequence wants them

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out, state = self.rnn(pack_padded_sequence(x, self.lengths, enforce_sorted=False))
        states = state if isinstance(state, tuple) else (state,)  # LSTM: (h, c); GRU: h
        return (pad_packed_sequence(out)[0], *states)


def _packed(rnn: nn.LSTM | nn.GRU, batch: int, longest: int, shortest: int) -> Case:
    """``rnn`` over ``batch`` random sequences of lengths evenly spaced from ``longest`` to ``shortest``."""
    lengths = torch.linspace(longest, shortest, batch).round().long()
    x = torch.randn(longest, batch, rnn.input_size)
    return Case(PackedRNN(rnn, lengths).train(), {"x": x}, tensors_loss)


def packed_lstm(steps: int = 12, inp: int = 8, hidden: int = 16, batch: int = 3,
                shortest: int | None = None) -> Case:
    """A 2-layer bidirectional ``nn.LSTM`` over a packed batch of ``batch`` lengths evenly
    spaced from ``steps`` down to ``shortest`` (``steps // 3`` by default): each layer
    and direction unrolled step by step, on fewer sequences as the short ones end."""
    torch.manual_seed(SEED)
    rnn = nn.LSTM(inp, hidden, num_layers=2, bidirectional=True)
    return _packed(rnn, batch, steps, shortest or max(1, steps // 3))


def packed_gru(steps: int = 12, inp: int = 8, hidden: int = 16, batch: int = 3, layers: int = 2,
               shortest: int | None = None) -> Case:
    """A ``layers``-layer ``nn.GRU`` over a packed batch of ``batch`` lengths evenly spaced
    from ``steps`` down to ``shortest`` (``steps // 3`` by default): each layer unrolled
    step by step, on fewer sequences as the short ones end."""
    torch.manual_seed(SEED)
    rnn = nn.GRU(inp, hidden, num_layers=layers)
    return _packed(rnn, batch, steps, shortest or max(1, steps // 3))


# -- the zoo -------------------------------------------------------------------------------

Factory = Callable[[], Case]

MODELS: dict[str, Factory] = {
    "gpt2-2": gpt2,
    "gpt2-12": lambda: gpt2(layers=12),
    "bert-4": bert,
    "t5-2+2": t5,
    "llama-2": llama,
    "resnet": resnet,
    "mobilenet": mobilenet,
    "vit": vit,
    "unet": unet,
    "packed-lstm": packed_lstm,
    "packed-gru": packed_gru,
}
NEEDS_TRANSFORMERS = frozenset({"gpt2-2", "gpt2-12", "bert-4", "t5-2+2", "llama-2"})


def available() -> tuple[dict[str, Factory], dict[str, str]]:
    """The zoo models this environment can build, and ``{name: why not}`` for the rest.

    Returns:
        ``(models, left_out)``: without ``transformers`` the Hugging Face models are
        left out, each with the reason and how to install it.
    """
    try:
        _transformers()
    except ImportError as exc:
        why = f"transformers is not importable ({exc}): pip install 'transformers>=5.23,<5.24'"
        return ({k: f for k, f in MODELS.items() if k not in NEEDS_TRANSFORMERS},
                dict.fromkeys(sorted(NEEDS_TRANSFORMERS), why))
    return dict(MODELS), {}


# -- timing every view (python benchmarks/zoo.py) ------------------------------------------

def _view(case: Case, view: str) -> Any:
    """The object Jupyter would display for ``view`` of ``case``."""
    if view == "draw":
        return dg.draw(case.forward(), params=case.model)
    if view == "live":
        with dg.live(case.model) as rec:
            case.forward()
        return rec
    loss = case.forward()
    with dg.trace_backward(loss, params=case.model) as bt:
        loss.backward()
    return bt


def picture_size(graph: Any) -> tuple[float, float, float]:
    """``(width, height, screens)`` of ``graph``'s default picture at 1:1 zoom, in CSS
    pixels (Graphviz's points x 4/3), and how many :data:`SCREEN` it fills."""
    width, height = (float(v) * 4 / 3 for v in re.search(
        r'width="([\d.]+)pt" height="([\d.]+)pt"', graph.svg()).groups())  # type: ignore[union-attr]
    return width, height, max(width, SCREEN[0]) * max(height, SCREEN[1]) / (SCREEN[0] * SCREEN[1])


def display_cost(factory: Factory, view: str, repeats: int) -> tuple[float, float]:
    """Median seconds of ``repeats`` displays (all of the view's outputs: layout, PNG and
    script; building the view is not timed) of a freshly built view, and the KB of its
    largest output as a notebook stores it (JSON)."""
    times, kb = [], 0.0
    for _ in range(repeats):
        obj = _view(factory(), view)
        render.clear_cache()  # else every display after the first reuses the first's layout
        start = time.perf_counter()
        outputs = obj._outputs()
        times.append(time.perf_counter() - start)
        kb = _page.largest_output(outputs) / 1024
    return statistics.median(times), kb


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3, help="displays per cell (the median is shown)")
    parser.add_argument("--only", nargs="*", help="model names containing any of these")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    models, left_out = available()
    for name, why in left_out.items():
        print(f"skipped {name}: {why}")
    print("| model | view | s | KB | picture at 1:1 (px) | screens | verdict |\n"
          "|---|---|---:|---:|---:|---:|---|")
    for name, factory in models.items():
        if args.only and not any(o.lower() in name.lower() for o in args.only):
            continue
        for view in ("draw", "live", "backward"):
            s, kb = display_cost(factory, view, args.repeats)
            obj = _view(factory(), view)
            w, h, screens = picture_size(obj if view == "draw" else obj.graph())
            ok = s <= TIME_TARGET and kb <= SIZE_TARGET
            print(f"| {name} | {view} | {s:.3f} | {kb:.1f} | {w:,.0f} x {h:,.0f} | {screens:.1f} | "
                  f"{'PASS' if ok else 'MISS'} |", flush=True)


if __name__ == "__main__":
    main()
