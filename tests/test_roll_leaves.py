"""Tests for dynagraph._roll: iterations roll only when their leaves match too, and rolled
blocks and parameters say which layers or steps they stand for."""

from collections import defaultdict

import pytest
import torch
from test_roll import check_rolled
from torch import nn

import dynagraph as dg
from dynagraph._picture import picture
from dynagraph._roll import roll
from dynagraph.capture import capture
from dynagraph.graph import record_of

# ---- the oracle: what a rolled picture claims about leaves holds in every iteration


def check_leaves(nodes, edges, rolled):
    """Every leaf drawn into a rolled op feeds that op in each iteration it stands for.

    A leaf outside the block must feed the op in every iteration (a shared weight), or
    in iteration 0 only where later iterations get the loop state (an initial state).
    A leaf inside the block stands for one leaf per iteration, each of its shape and
    dtype, each feeding that iteration's op.
    """
    leaves = {n.id: n for n in nodes if n.seq is None and n.kind != "output"}
    original = set(edges)
    for b, block in enumerate(rolled.blocks):
        op_at, leaf_at = {}, defaultdict(list)  # (drawn id, k) -> original ids
        for nid, (blk, k) in rolled.iteration.items():
            if blk == b:
                if nid in leaves:
                    leaf_at[rolled.mapping[nid], k].append(nid)
                else:
                    op_at[rolled.mapping[nid], k] = nid
        states = {d for _, d in block.loops}
        for src, dst in rolled.edges:
            if src not in leaves or (dst, 0) not in op_at:
                continue
            if src in block.nodes:
                for k in range(block.repeats):
                    (leaf,) = leaf_at[src, k]
                    assert (leaf, op_at[dst, k]) in original
                    assert (leaves[leaf].shape, leaves[leaf].dtype) == (leaves[src].shape, leaves[src].dtype)
                continue
            fed = {k for k in range(block.repeats) if (src, op_at[dst, k]) in original}
            assert fed == set(range(block.repeats)) or (fed == {0} and dst in states), (
                f"{leaves[src].label} drawn into block {b}'s {op_at[dst, 0]} but feeds it only in "
                f"iterations {sorted(fed)} of {block.repeats}")


def check(nodes, edges, rolled):
    check_rolled(nodes, edges, rolled)
    check_leaves(nodes, edges, rolled)


def _loop(weights, steps=8, op=torch.mul):
    """``h = tanh(op(h, w_k))`` for k < steps, where ``weights(k)`` is step k's weight as
    ``(name, shape)``, made once per name (``None``: the step scales by 2 instead).
    Returns the capture and, per step, autograd's counter of its last op."""
    torch.manual_seed(0)
    h = torch.randn(3, 3, requires_grad=True)
    named, ends = {}, []
    for k in range(steps):
        w = weights(k)
        if w is not None and w[0] not in named:
            named[w[0]] = nn.Parameter(torch.randn(w[1]))
        h = torch.tanh(op(h, named[w[0]]) if w is not None else h * 2.0)
        ends.append(h.grad_fn._sequence_nr())
    return capture(h.sum(), params=named), ends


def _step_of(ends, seq):
    return next((k for k, end in enumerate(ends) if seq <= end), None)


def _blocks_by_step(nodes, rolled, ends):
    """Per block, the loop steps each of its iterations holds (by torch's own counter)."""
    steps = defaultdict(set)
    by_id = {n.id: n for n in nodes}
    for nid, (b, k) in rolled.iteration.items():
        if by_id[nid].seq is not None:
            steps[b, k].add(_step_of(ends, by_id[nid].seq))
    return [[sorted(steps[b, k]) for k in range(block.repeats)] for b, block in enumerate(rolled.blocks)]


# ---- fault: iterations that differ only in their leaves rolled onto one


def test_roll_weights_of_two_shapes_roll_as_two_blocks():
    (nodes, edges, types), ends = _loop(lambda k: (f"w{k}", (3, 3) if k < 4 else (3,)))
    rolled = roll(nodes, edges, module_types=types)
    check(nodes, edges, rolled)
    assert _blocks_by_step(nodes, rolled, ends) == [[[0], [1], [2], [3]], [[4], [5], [6], [7]]]


def test_roll_two_alternating_weights_roll_as_pairs_of_steps():
    (nodes, edges, types), ends = _loop(lambda k: ("AB"[k % 2], (3, 3)), op=torch.mm)
    rolled = roll(nodes, edges, module_types=types)
    check(nodes, edges, rolled)
    assert _blocks_by_step(nodes, rolled, ends) == [[[0, 1], [2, 3], [4, 5], [6, 7]]]
    by_id = {n.id: n for n in rolled.nodes}
    into = sorted(by_id[s].label for s, d in rolled.edges if by_id[s].kind == "parameter")
    assert into == ["A", "B"]  # each drawn once, each into its own MmBackward0
    assert len({d for s, d in rolled.edges if by_id[s].kind == "parameter"}) == 2


def test_roll_weight_only_the_last_steps_use_stays_out_of_the_block():
    (nodes, edges, types), ends = _loop(lambda k: ("w", (3, 3)) if k >= 6 else None)
    rolled = roll(nodes, edges, module_types=types)
    check(nodes, edges, rolled)
    assert _blocks_by_step(nodes, rolled, ends) == [[[k] for k in range(6)]]


def test_roll_shared_weight_and_per_step_weights_of_one_shape_still_roll():
    for weights in (lambda k: ("w", (3, 3)), lambda k: (f"w{k}", (3,))):
        (nodes, edges, types), ends = _loop(weights)
        rolled = roll(nodes, edges, module_types=types)
        check(nodes, edges, rolled)
        assert _blocks_by_step(nodes, rolled, ends) == [[[k] for k in range(8)]]


def test_roll_learned_initial_state_like_the_step_weights_keeps_the_first_step_apart():
    torch.manual_seed(0)
    params = {"h0": nn.Parameter(torch.randn(3, 3))}  # as each step's weight: (3, 3), read by one Mul
    h = params["h0"]
    for k in range(8):
        params[f"w{k}"] = nn.Parameter(torch.randn(3, 3))
        h = torch.tanh(h * params[f"w{k}"])
    nodes, edges, types = capture(h.sum(), params=params)
    rolled = roll(nodes, edges)
    check(nodes, edges, rolled)
    (block,) = rolled.blocks
    assert block.repeats == 7
    outside = {n.label for n in rolled.nodes if n.kind == "parameter" and n.id not in block.nodes}
    assert outside == {"h0", "w0"}  # the first step, drawn as it is


# ---- what a block and its parameters say they stand for


class Foo(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.lin = nn.Linear(width, width)

    def forward(self, x):
        return torch.tanh(self.lin(x))


class Bar(Foo):
    """The same ops as Foo under another class name."""


class Stack(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def _capture(model, x, tagged):
    if tagged:
        with dg.track_modules(model):
            y = model(x)
    else:
        y = model(x)
    return capture(y.sum(), params=model)


def _param_labels(rolled, block):
    by_id = {n.id: n for n in rolled.nodes}
    return {by_id[i].label for i in block.nodes if by_id[i].kind == "parameter"}


def _ranged(model, first, span):
    """The names of layer ``first``'s parameters with its index replaced by ``span``."""
    return {name.replace(first, span, 1) for name, _ in model.named_parameters() if name.startswith(first)}


@pytest.mark.parametrize("tagged", [True, False])
def test_roll_block_of_two_classes_names_both(tagged):
    torch.manual_seed(0)
    model = Stack([Foo() for _ in range(2)] + [Bar() for _ in range(10)])
    nodes, edges, types = _capture(model, torch.randn(2, 8), tagged)
    rolled = roll(nodes, edges, module_types=types)
    check(nodes, edges, rolled)
    (block,) = rolled.blocks
    assert (block.label, block.repeats) == ("layers.0\u201311: Foo \u00d72, Bar \u00d710", 12)


@pytest.mark.parametrize("tagged", [True, False])
def test_roll_stack_of_identical_layers_names_the_layers_and_their_parameters(tagged):
    torch.manual_seed(0)
    model = Stack([Foo() for _ in range(12)])
    nodes, edges, types = _capture(model, torch.randn(2, 8), tagged)
    rolled = roll(nodes, edges, module_types=types)
    check(nodes, edges, rolled)
    (block,) = rolled.blocks
    assert (block.label, block.repeats) == ("layers.0\u201311: Foo", 12)
    assert _param_labels(rolled, block) == _ranged(model, "layers.0.", "layers.{0\u202611}.")
    assert _param_labels(rolled, block) == {"layers.{0\u202611}.lin.weight", "layers.{0\u202611}.lin.bias"}


class Attention(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.c_attn, self.c_proj = nn.Linear(width, 3 * width), nn.Linear(width, width)

    def forward(self, x):
        q, k, v = self.c_attn(x).split(x.shape[-1], dim=-1)
        weights = torch.softmax(q @ k.transpose(-2, -1) / x.shape[-1] ** 0.5, dim=-1)
        return self.c_proj(weights @ v)


class MLP(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.c_fc, self.c_proj = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        return self.c_proj(torch.nn.functional.gelu(self.c_fc(x)))


class GPT2Block(nn.Module):
    """Named like Hugging Face's: transformer.h.<i>.ln_1, .attn.c_attn, .ln_2, .mlp."""

    def __init__(self, width):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(width), Attention(width)
        self.ln_2, self.mlp = nn.LayerNorm(width), MLP(width)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, layers=12, width=16):
        super().__init__()
        self.transformer = nn.Module()
        self.transformer.h = nn.ModuleList(GPT2Block(width) for _ in range(layers))
        self.transformer.ln_f = nn.LayerNorm(width)

    def forward(self, x):
        for block in self.transformer.h:
            x = block(x)
        return self.transformer.ln_f(x)


@pytest.mark.parametrize("tagged", [True, False])
def test_roll_gpt2_like_layers_name_their_range_and_class(tagged):
    torch.manual_seed(0)
    model = GPT2()
    nodes, edges, types = _capture(model, torch.randn(1, 5, 16), tagged)
    rolled = roll(nodes, edges, module_types=types)
    check(nodes, edges, rolled)
    (block,) = rolled.blocks
    assert (block.label, block.repeats) == ("transformer.h.0\u201311: GPT2Block", 12)
    labels = _param_labels(rolled, block)
    assert labels == _ranged(model, "transformer.h.0.", "transformer.h.{0\u202611}.")
    assert "transformer.h.{0\u202611}.attn.c_attn.weight" in labels
    outside = {n.label for n in rolled.nodes if n.kind == "parameter"} - labels
    assert outside == {"transformer.ln_f.weight", "transformer.ln_f.bias"}  # not rolled: named as they are
    # the caller's records keep their names (the drawn ones are copies)
    assert {n.label for n in nodes if n.kind == "parameter"} == {name for name, _ in model.named_parameters()}


def test_modules_inside_a_rolled_block_are_named_for_every_layer():
    """The frames drawn inside the block say h.{0…11}, as its parameters do; the
    representative's own names (h.0, h.0.attn) would read as layer 0 only."""
    torch.manual_seed(0)
    model = GPT2()
    nodes, edges, types = _capture(model, torch.randn(1, 5, 16), True)
    rolled = roll(nodes, edges, module_types=types)
    (block,) = rolled.blocks
    inside = {n.module for n in rolled.nodes if n.id in set(block.nodes)}
    assert inside and all(m.startswith("transformer.h.{0\u202611}") for m in inside), inside
    assert rolled.module_types["transformer.h.{0\u202611}"] == "GPT2Block"
    assert rolled.module_types["transformer.h.{0\u202611}.attn"] == types["transformer.h.0.attn"]
    outside = {n.module for n in rolled.nodes if n.id not in set(block.nodes) and n.kind != "output"}
    assert outside - {None} == {"transformer.ln_f"}  # not rolled: named as it is
    assert {n.module for n in nodes} >= {"transformer.h.0.attn", "transformer.h.11.attn"}  # records unchanged
    dot = dg.draw(model(torch.randn(1, 5, 16)).sum(), params=model).to_dot()  # untagged: no frames
    assert "transformer.h.0:" not in dot
    with dg.track_modules(model):
        out = model(torch.randn(1, 5, 16)).sum()
    dot = dg.draw(out, params=model, overview=False).to_dot()  # op level: its frames
    assert 'label="transformer.h.{0\u202611}.attn: ' in dot and "transformer.h.0." not in dot


@pytest.mark.parametrize("tagged", [True, False])
def test_a_cell_called_at_every_step_keeps_its_name_inside_the_block(tagged):
    torch.manual_seed(0)
    model = CellLoop(nn.LSTMCell(4, 6))
    nodes, edges, types = _capture(model, torch.randn(20, 2, 4), tagged)
    rolled = roll(nodes, edges, module_types=types)
    (block,) = rolled.blocks
    assert {n.module for n in rolled.nodes if n.id in set(block.nodes)} <= {"cell", None}
    assert rolled.module_types == types


class CellLoop(nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.cell = cell

    def forward(self, xs):
        state = None
        for x in xs:
            state = self.cell(x, state)
        return state[0] if isinstance(state, tuple) else state


@pytest.mark.parametrize("cell, name", [(nn.LSTMCell(4, 6), "LSTMCell"), (nn.GRUCell(4, 6), "GRUCell")])
@pytest.mark.parametrize("tagged", [True, False])
def test_roll_cell_loop_sharing_its_weights_says_steps(cell, name, tagged):
    torch.manual_seed(0)
    model = CellLoop(cell)
    nodes, edges, types = _capture(model, torch.randn(20, 2, 4), tagged)
    rolled = roll(nodes, edges, module_types=types)
    check(nodes, edges, rolled)
    (block,) = rolled.blocks
    assert block.repeats in (19, 20)  # the first step, with no state, may differ
    assert block.label == f"cell: {name}, step 1\u2013{block.repeats}"
    shared = {n.label for n in rolled.nodes if n.kind == "parameter"}
    assert shared == {name for name, _ in model.named_parameters()}  # one weight: named as it is


def test_roll_fused_gru_without_names_says_steps_and_ops():
    torch.manual_seed(0)
    model = nn.GRU(4, 6)
    out, _ = model(torch.randn(30, 1, 4))
    nodes, edges, types = capture(out.sum(), params=model)
    rolled = roll(nodes, edges, module_types=types)
    check(nodes, edges, rolled)
    (block,) = rolled.blocks
    first = 31 - block.repeats  # the first step, with no state, may not roll: the block starts after it
    assert block.label.startswith(f"layer 0, step {first}\u201330: ") and block.repeats >= 29


def test_a_recurrent_layer_is_named_from_its_weights():
    from dynagraph._roll import _layer
    assert _layer(["rnn.weight_ih_l1", "rnn.weight_hh_l1", "rnn.bias_ih_l1"]) == "layer 1"
    assert _layer(["rnn.weight_ih_l0_reverse", "rnn.bias_hh_l0_reverse"]) == "layer 0, reverse"
    assert _layer(["rnn.weight_ih_l0", "rnn.weight_ih_l0_reverse"]) is None  # two directions: no one name
    assert _layer(["cell.weight_ih", "cell.weight_hh"]) is None  # an LSTMCell's weights name no layer


def _per_step_weights(names):
    """A loop over ``names``: each step multiplies by its own weight, then tanh; the
    rolled picture's parameter labels and what each drawn parameter stands for."""
    h0 = torch.randn(2, 3, requires_grad=True)
    params, h = {"h0": h0}, h0
    for name in names:
        w = params[name] = nn.Parameter(torch.randn(3))
        h = torch.tanh(h * w)
    graph = dg.draw(h.sum(), params=params, roll=True)
    pic = picture(record_of(graph), roll=True)
    (block,) = pic.graph.blocks
    assert block.repeats == len(names)
    drawn = [n for n in pic.graph.nodes if n.kind == "parameter" and n.id in block.nodes]
    assert f'label="{drawn[0].label}' in graph.to_dot()
    return {n.label: sorted(o.label for o in graph.nodes if pic.mapping[o.id] == n.id) for n in drawn}


def test_a_rolled_parameter_from_a_nested_loop_names_both_indices():
    # found by fuzzing: names that differ in two indices kept iteration 0's name, blk.0.0.w
    names = [f"blk.{t}.{s}.w" for t in range(2) for s in range(3)]
    assert _per_step_weights(names) == {"blk.{0\u20261}.{0\u20262}.w": sorted(names)}


def test_a_rolled_parameter_of_unrelated_names_says_how_many_it_stands_for():
    names = ["enc.alpha", "enc.beta", "dec.gamma", "dec.delta"]
    assert _per_step_weights(names) == {"enc.alpha \u2026 dec.delta (4 parameters)": sorted(names)}


def test_several_names_get_a_grid_only_when_every_combination_is_there():
    from dynagraph._roll import _several
    assert _several(["a.0.0", "a.0.1", "a.1.0", "a.1.1"]) == "a.{0\u20261}.{0\u20261}"
    assert _several(["a.0.0", "a.0.1", "a.1.0"]) == "a.0.0 \u2026 a.1.0 (3 parameters)"  # not a grid
    assert _several(["layers.0.lin7.bias", "layers.0.b8"]) == "layers.0.lin7.bias, layers.0.b8"
