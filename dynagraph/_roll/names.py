"""Names of rolled blocks and of the parameters a rolled node stands for.

``"h.{0…11}.attn"``, ``"layers.0–5: TransformerEncoderLayer"``, ``"cell: LSTMCell, step
1–500"``: pure functions of strings, whose docstring examples run as tests
(tests/test_doctests.py).
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from .._language import tr
from .._records import owner

# A name split at the index where the iterations' names differ: (before it, after it, the indices).
Range = tuple[str, str, list[int]]

_LAYER = re.compile(r"_l(\d+)(_reverse)?$")  # nn.RNN/LSTM/GRU weight names: weight_ih_l1_reverse


def layer_label(names: Sequence[str]) -> str | None:
    """``"layer 1"`` (``"layer 1, reverse"``) when every one of ``names`` is a recurrent
    layer's weight of that layer and direction, else ``None``.

    Example:
        >>> layer_label(["weight_ih_l1_reverse", "weight_hh_l1_reverse"])
        'layer 1, reverse'
        >>> layer_label(["weight_ih_l0", "weight_ih_l1"]) is None  # two layers
        True
    """
    found = {m.groups() if (m := _LAYER.search(name)) else None for name in names}
    (one,) = found if len(found) == 1 else (None,)
    if one is None:
        return None
    index, reverse = one
    return f"layer {index}" + (", reverse" if reverse else "")


def block_label(ops: Sequence[str], repeats: int, tagged: Iterable[Sequence[str]],
                heads: Sequence[str | None], module_types: Mapping[str, str], ranges: Sequence[Range],
                shared: Sequence[str], first_step: int = 1) -> str:
    """What a block is called: which layers or steps it stands for, and their classes.

    ``"layers.0–5: TransformerEncoderLayer"`` (N sibling modules, found by module tags
    or, without tags, by the one index that differs in the names of the iterations'
    parameters), ``"0–1999: Linear, Tanh"`` (each iteration spans several siblings),
    ``"cell: LSTMCell, step 1–500"`` (one module, or weights every step shares, used
    at each step; ``"rnn: GRU layer 1, step 6–8"`` for a recurrent layer's weights,
    its steps counted from ``first_step``), else the first and last op: ``"step 1–50:
    TBackward0 … MulBackward0"`` with shared weights, ``"TBackward0 … TanhBackward0"`` without.

    Args:
        ops: The names of the ops of iteration 0, in order.
        repeats: How many iterations.
        tagged: Per iteration, the modules its tagged ops run in (read only as far as needed).
        heads: Per iteration, the module all its ops run in, or ``None``.
        module_types: Module name -> class name.
        ranges: The names of the parameters iteration 0 owns, split where the iterations differ.
        shared: The names of the parameters every iteration reads.
        first_step: The number of the first iteration among the steps of its loop.

    Example:
        >>> types = {"layers.0": "Block", "layers.1": "Block", "cell": "LSTMCell"}
        >>> block_label(["MmBackward0", "AddBackward0"], 2, [], ["layers.0", "layers.1"], types, [], [])
        'layers.0–1: Block'
        >>> block_label(["MmBackward0"], 50, [], ["cell"] * 50, types, [], ["cell.weight_ih"])
        'cell: LSTMCell, step 1–50'
        >>> block_label(["TBackward0", "TanhBackward0"], 9, [[]], [None] * 9, {}, [], [])
        'TBackward0 … TanhBackward0'
    """
    span = _tagged_span(tagged, heads, module_types) or _param_span(ranges, module_types)
    if span is not None:
        return span
    names = ops[0] if len(ops) == 1 else f"{ops[0]} \u2026 {ops[-1]}"
    owners = [owner(name) for name in shared]
    one = heads[0] if heads[0] is not None and len(set(heads)) == 1 else None
    home = one or (common_module(owners) if owners and None not in owners else None)
    steps = (tr("step {first}\u2013{last}", first=f"{first_step:,}", last=f"{first_step + repeats - 1:,}")
             if shared else None)
    layer = layer_label(shared) if shared else None
    if layer is not None:
        steps = f"{layer}, {steps}"
    if home is None:
        return f"{steps}: {names}" if steps else names
    kind = module_types.get(home)
    where = f"{home}: {kind}" if kind else home
    return f"{where}, {steps}" if steps else where


def _tagged_span(tagged: Iterable[Sequence[str]], heads: Sequence[str | None],
                 module_types: Mapping[str, str]) -> str | None:
    """By module tags: ``"layers.0–5: Foo"`` for iterations in sibling modules, ``"0–1999:
    Linear, Tanh"`` for iterations each spanning several; ``None`` for one module or no tags.

    Example:
        >>> types = {"0": "Linear", "1": "Tanh", "2": "Linear", "3": "Tanh"}
        >>> _tagged_span([["0", "1"], ["2", "3"]], [None, None], types)  # each iteration: two siblings
        '0–3: Linear, Tanh'
        >>> _tagged_span([], ["rnn", "rnn"], {}) is None  # one module called each time
        True
    """
    named = [h for h in heads if h]
    if len(named) == len(heads):
        if len(set(named)) == 1:  # one module called each time: not a span
            return None
        split = split_index(named)  # encoder.block.0.layer ... encoder.block.1.layer: cut at the index
        if split is not None:
            before, _, indices = split
            cut = [f"{before}{i}" for i in indices]
            return _named_span(cut[0], cut[-1], map(module_types.get, cut))
        return _named_span(named[0], named[-1], map(module_types.get, named))
    each = []
    for modules in tagged:  # (stops at the first iteration with no tag: a long loop of untagged ops)
        if not modules:
            return None
        each.append(modules)
    kinds = [", ".join(dict.fromkeys(module_types[m] for m in t if m in module_types)) for t in each]
    return _named_span(each[0][0], each[-1][-1], kinds)


def _param_span(ranges: Sequence[Range], module_types: Mapping[str, str]) -> str | None:
    """By parameter names: ``"transformer.h.0–11: GPT2Block"`` when the parameters each
    iteration owns differ in one index, the same for all of them; else ``None``.

    Example:
        >>> _param_span([("h.", ".attn.weight", [0, 1]), ("h.", ".mlp.weight", [0, 1])], {"h.0": "Block"})
        'h.0–1: Block'
        >>> _param_span([("h.", ".w", [0, 1]), ("g.", ".w", [0, 1])], {}) is None  # two stacks
        True
    """
    if not ranges or len({(before, tuple(indices)) for before, _, indices in ranges}) != 1:
        return None
    before, _, indices = ranges[0]
    span = _span(indices, "\u2013")
    kinds = _counted(module_types.get(f"{before}{i}") for i in indices)
    where = f"{before}{span}"
    return f"{where}: {kinds}" if kinds else where


def _named_span(first: str, last: str, kinds: Iterable[str | None]) -> str:
    """``"first–last: kinds"``, the dotted parts the two names share written once (``layers.0–5``).

    Example:
        >>> _named_span("layers.0", "layers.5", ["Foo"] * 6)
        'layers.0–5: Foo'
        >>> _named_span("enc.0", "dec.1", [None, None])
        'enc.0–dec.1'
    """
    a, b = first.split("."), last.split(".")
    if first == last:
        span = first
    else:
        span = f"{first}\u2013{b[-1] if a[:-1] == b[:-1] else last}"
    text = _counted(kinds)
    return f"{span}: {text}" if text else span


def _counted(kinds: Iterable[str | None]) -> str | None:
    """``"Foo"`` when every iteration is of one class, ``"Foo ×2, Bar ×10"`` when they differ.

    Example:
        >>> _counted(["Foo", "Foo", None])
        'Foo'
        >>> _counted(["Foo", "Foo", "Bar", "Linear, Tanh"])
        'Foo ×2, Bar ×1, (Linear, Tanh) ×1'
    """
    counts = Counter(kind for kind in kinds if kind)
    if len(counts) <= 1:
        return next(iter(counts), None)
    return ", ".join(f"({kind}) \u00d7{n}" if ", " in kind else f"{kind} \u00d7{n}"
                     for kind, n in counts.items())


def parameter_set_label(names: Sequence[str]) -> str:
    """One label for the different parameters one rolled node stands for, when they do
    not differ in one index: ``"blk.{0…1}.{0…2}.w"`` when they differ in several
    indices and hold every combination of them (a nested loop), else
    ``"a.w1 … b.w9 (5 parameters)"``, the first and the last name in iteration order.

    Example:
        >>> parameter_set_label(["blk.0.0.w", "blk.0.1.w", "blk.1.0.w", "blk.1.1.w"])
        'blk.{0…1}.{0…1}.w'
        >>> parameter_set_label(["a.w1", "a.w2", "b.w9"])
        'a.w1 … b.w9 (3 parameters)'
    """
    parts = [name.split(".") for name in names]
    if len({len(p) for p in parts}) == 1:
        differ = [i for i in range(len(parts[0])) if len({p[i] for p in parts}) > 1]
        if all(p[i].isdigit() for p in parts for i in differ):
            values = [sorted({int(p[i]) for p in parts}) for i in differ]
            if math.prod(len(v) for v in values) == len(names):  # every combination, once
                spans = {i: "{" + _span(v, "\u2026") + "}" for i, v in zip(differ, values)}
                return ".".join(spans.get(i, part) for i, part in enumerate(parts[0]))
    if len(names) == 2:
        return f"{names[0]}, {names[1]}"
    return f"{names[0]} \u2026 {names[-1]} ({len(names)} parameters)"


_NUMBERED = re.compile(r"(?P<pre>\D*?)(?P<num>\d+)(?P<post>\D*)")  # a name part: encoder_layer_11, layer1, 3


def split_index(names: Sequence[str]) -> Range | None:
    """Names that differ in one dotted part, by a number in it, cut around that number:
    ``(before, after, indices)``, ``before`` and ``after`` with their separators; ``None``
    for any other names.

    Example:
        >>> split_index(["h.0.ln_1.weight", "h.1.ln_1.weight"])
        ('h.', '.ln_1.weight', [0, 1])
        >>> split_index(["encoder.layers.encoder_layer_0.mlp", "encoder.layers.encoder_layer_11.mlp"])
        ('encoder.layers.encoder_layer_', '.mlp', [0, 11])
        >>> split_index(["a.0.w", "b.1.w"]) is None  # two parts differ
        True
    """
    parts = [name.split(".") for name in names]
    if len({len(p) for p in parts}) != 1:
        return None
    differ = [i for i in range(len(parts[0])) if len({p[i] for p in parts}) > 1]
    if len(differ) != 1:
        return None
    i = differ[0]
    found = [m for p in parts if (m := _NUMBERED.fullmatch(p[i]))]
    if len(found) != len(parts) or len({(m["pre"], m["post"]) for m in found}) != 1:
        return None
    before = "".join(f"{part}." for part in parts[0][:i]) + found[0]["pre"]
    after = found[0]["post"] + "".join(f".{part}" for part in parts[0][i + 1:])
    return before, after, [int(m["num"]) for m in found]


def range_label(before: str, after: str, indices: list[int]) -> str:
    """``"h.{0…11}.ln_1.weight"``: one name standing for every iteration's.

    Example:
        >>> range_label("encoder.layers.encoder_layer_", ".mlp.weight", [0, 1, 2])
        'encoder.layers.encoder_layer_{0…2}.mlp.weight'
    """
    return before + "{" + _span(indices, "\u2026") + "}" + after


def _span(indices: Sequence[int], dash: str) -> str:
    """``"0–11"`` for consecutive indices (``dash`` between), else ``"0,2,…,22"``.

    Example:
        >>> _span([0, 1, 2], "–"), _span([0, 2, 4, 6], "–"), _span([1, 5], "–")
        ('0–2', '0,2,…,6', '1,5')
    """
    if all(b - a == 1 for a, b in itertools.pairwise(indices)):
        return f"{indices[0]}{dash}{indices[-1]}"
    if len(indices) <= 3:
        return ",".join(map(str, indices))
    return f"{indices[0]},{indices[1]},\u2026,{indices[-1]}"


def common_module(modules: Iterable[str | None]) -> str | None:
    """The longest dotted prefix of the tagged module names, ``None`` if none or empty.

    Example:
        >>> common_module(["h.0.attn", None, "h.0.mlp"])
        'h.0'
        >>> common_module(["encoder", "decoder"]) is None
        True
    """
    prefix: list[str] | None = None
    for name in modules:
        if name is None:
            continue
        parts = name.split(".")
        if prefix is None:
            prefix = parts
            continue
        n = 0
        while n < min(len(prefix), len(parts)) and prefix[n] == parts[n]:
            n += 1
        prefix = prefix[:n]
    return ".".join(prefix) if prefix else None


def resize_note(sizes: Iterable[int | str], bridges: Iterable[str]) -> str:
    """The note of a block whose state's first dimension takes ``sizes``, resized by the
    ops named ``bridges`` drawn as the loop edge.

    Example:
        >>> resize_note([3, 2, 2, 1], ["SliceBackward0", "SliceBackward0"])
        'batch 1–3: SliceBackward0 ×2 on the loop edge'
    """
    sizes = set(sizes)
    counts = Counter(bridges)
    ops = ", ".join(f"{name} \u00d7{n}" if n > 1 else name for name, n in counts.items())
    return f"batch {min(sizes)}\u2013{max(sizes)}: {ops} on the loop edge"
