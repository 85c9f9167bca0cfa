"""Tests for dynagraph._roll: repeated regions kept once, drawn ×N, with loop edges."""

import collections
import contextlib
import dataclasses
import functools
import gc
import statistics
import time
from collections import Counter

import pytest
import torch
from torch import nn

import dynagraph as dg
from dynagraph import _roll
from dynagraph._records import Node
from dynagraph._roll import Block, Rolled, roll
from dynagraph.capture import capture

# ---- models: each returns (nodes, edges, module_types, ends), ends[k] being the autograd
# ---- sequence number of step k's last op (None where the test needs no such oracle)

class _Loop(nn.Module):
    """A cell called once per time step from a Python loop (tagged as ``cell``)."""

    def __init__(self, cell):
        super().__init__()
        self.cell = cell

    def forward(self, x, state):
        ends = []
        for t in range(x.shape[0]):
            state = self.cell(x[t], state)
            out = state[0] if isinstance(state, tuple) else state
            ends.append(out.grad_fn._sequence_nr())  # the step's last op: the oracle
        return state, ends


@functools.cache
def lstm_loop(steps, zeros=True, tagged=True):
    torch.manual_seed(0)
    model = _Loop(nn.LSTMCell(8, 16))
    x = torch.randn(steps, 2, 8)
    state = (torch.zeros(2, 16), torch.zeros(2, 16)) if zeros else None
    with dg.track_modules(model) if tagged else contextlib.nullcontext():
        (h, _), ends = model(x, state)
    return (*capture(h.sum(), params=model if tagged else None), ends)


@functools.cache
def gru_cell_loop(steps):
    torch.manual_seed(0)
    model = _Loop(nn.GRUCell(8, 16))
    with dg.track_modules(model):
        h, ends = model(torch.randn(steps, 2, 8), None)
    return (*capture(h.sum(), params=model), ends)


@functools.cache
def fused_gru(layers, steps=100):
    torch.manual_seed(0)
    model = nn.GRU(16, 64, num_layers=layers)
    out, _ = model(torch.randn(steps, 1, 16))
    return (*capture(out.sum(), params=model), None)


@functools.cache
def transformer(input_grad, layers=6):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.0)
    model = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).train()  # no fast path
    x = torch.randn(5, 2, 32, requires_grad=input_grad)
    with dg.track_modules(model):
        y = model(x)
    return (*capture(y.sum(), params=model), None)


@functools.cache
def deep_mlp(depth, tagged=True):
    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(depth) for m in (nn.Linear(8, 8), nn.Tanh())])
    with dg.track_modules(model) if tagged else contextlib.nullcontext():
        y = model(torch.randn(2, 8))
    return (*capture(y.sum(), params=model), None)


def _rolled(graph, **kwargs):
    nodes, edges, types, _ = graph
    return roll(nodes, edges, module_types=types, **kwargs)


# ---- the invariants every rolled graph keeps

def check_rolled(nodes, edges, rolled: Rolled):
    """Mapping, edges, iterations and counts agree with the old graph."""
    mapping, iteration = rolled.mapping, rolled.iteration
    kept = {n.id for n in rolled.nodes}
    assert set(mapping) == {n.id for n in nodes}
    assert set(mapping.values()) == kept
    assert all(mapping[i] == i for i in kept)
    loops = {e for b in rolled.blocks for e in b.loops}
    explained = set()
    for src, dst in edges:
        edge = (mapping[src], mapping[dst])
        if edge[0] == edge[1] and edge not in loops:
            continue
        assert edge in rolled.edges, f"old edge {(src, dst)} lost as {edge}"
        explained.add(edge)
    assert set(rolled.edges) == explained  # no edge from nowhere
    assert len(rolled.edges) == len(set(rolled.edges))
    assert all(a != b for a, b in rolled.edges if (a, b) not in loops)
    assert sum(n.count for n in rolled.nodes) == sum(n.count for n in nodes)
    for n in nodes:
        if n.kind == "output":
            assert mapping[n.id] == n.id and n.id not in iteration
    for b, block in enumerate(rolled.blocks):
        check_block(b, block, edges, rolled)


def check_block(b, block: Block, edges, rolled: Rolled):
    """Iterations 0..N-1, each as big as the representative; loops cross k -> k + 1."""
    per_k = Counter(k for blk, k in rolled.iteration.values() if blk == b)
    assert sorted(per_k) == list(range(block.repeats))
    assert set(per_k.values()) == {len(block.nodes)}
    assert all(rolled.iteration[i] == (b, 0) and rolled.mapping[i] == i for i in block.nodes)
    crossing = {(rolled.mapping[s], rolled.mapping[d]) for s, d in edges
                if rolled.iteration.get(s, (None,))[0] == b
                and rolled.iteration.get(d) == (b, rolled.iteration[s][1] + 1)}
    assert set(block.loops) == crossing
    assert set(block.loops) <= set(rolled.edges)


def names(rolled, ids):
    by_id = {n.id: n for n in rolled.nodes}
    return sorted(by_id[i].name for i in ids)


# ---- loops over cells

@pytest.mark.parametrize("steps", [50, 500])
def test_roll_lstm_cell_loop_keeps_one_step_with_h_and_c_loops(steps):
    nodes, edges, types, ends = graph = lstm_loop(steps)
    rolled = _rolled(graph)
    check_rolled(nodes, edges, rolled)
    (block,) = rolled.blocks
    assert block.repeats == steps  # iteration 0 (zero state) has the same ops as the rest
    assert block.label == f"cell: LSTMCell, step 1\u2013{steps}" and block.module == "cell"
    assert len(block.nodes) == 15 and len(rolled.nodes) < 25
    # h feeds the next step's hidden addmm, c the next step's forget-gate product
    assert sorted(names(rolled, [s for s, _ in block.loops])) == ["AddBackward0", "MulBackward0"]
    assert sorted(names(rolled, [d for _, d in block.loops])) == ["AddmmBackward0", "MulBackward0"]


def test_roll_lstm_iterations_match_the_python_loop_steps():
    nodes, edges, types, ends = graph = lstm_loop(50)
    rolled = _rolled(graph)
    for n in nodes:
        if n.seq is not None and n.seq <= ends[-1]:  # the loss's sum comes after the loop
            step = next(t for t, end in enumerate(ends) if n.seq <= end)  # torch's own count
            assert rolled.iteration[n.id] == (0, step)
    assert len(rolled.iteration) == 15 * 50


def test_roll_lstm_without_initial_state_or_module_tags():
    nodes, edges, types, _ = graph = lstm_loop(50, zeros=False, tagged=False)
    rolled = _rolled(graph)
    check_rolled(nodes, edges, rolled)
    (block,) = rolled.blocks
    assert block.repeats == 50 and len(block.loops) == 2
    assert block.label == "step 1\u201350: TBackward0 \u2026 MulBackward0" and block.module is None


def test_roll_gru_cell_loop():
    nodes, edges, types, ends = graph = gru_cell_loop(100)
    rolled = _rolled(graph)
    check_rolled(nodes, edges, rolled)
    (block,) = rolled.blocks
    assert (block.label, block.repeats) == ("cell: GRUCell, step 1\u2013100", 100)
    assert len(rolled.nodes) < 30
    assert {d for _, d in block.loops} != set() and len({s for s, _ in block.loops}) == 1  # h only


def test_roll_per_step_input_leaves_roll_with_their_step():
    torch.manual_seed(0)
    cell = nn.RNNCell(4, 6)
    xs = [torch.randn(1, 4, requires_grad=True) for _ in range(20)]
    h = None
    for x in xs:
        h = cell(x, h)
    nodes, edges, _ = capture(h.sum(), params=cell)
    rolled = roll(nodes, edges)
    check_rolled(nodes, edges, rolled)
    (block,) = rolled.blocks
    inputs = [n for n in rolled.nodes if n.kind == "input"]
    assert block.repeats == 20 and len(inputs) == 1 and inputs[0].id in block.nodes
    weights = [n for n in rolled.nodes if n.kind == "parameter"]
    assert len(weights) == 4 and not any(w.id in block.nodes for w in weights)  # shared, once


# ---- fused recurrent modules

def _hub_degree(rolled, name, outgoing):
    (hub,) = [n.id for n in rolled.nodes if n.name == name]
    return sum(1 for s, d in rolled.edges if (s if outgoing else d) == hub)


def test_roll_fused_gru_one_layer_drops_the_split_and_stack_hubs():
    nodes, edges, types, _ = graph = fused_gru(1)
    rolled = _rolled(graph)
    check_rolled(nodes, edges, rolled)
    (block,) = rolled.blocks
    assert block.repeats == 100 and len(rolled.nodes) < 30
    assert _hub_degree(rolled, "UnbindBackward0", outgoing=True) == 1
    assert _hub_degree(rolled, "StackBackward0", outgoing=False) == 1
    stack = next(n.id for n in nodes if n.name == "StackBackward0")
    # the stack reads the steps in order: step k is iteration k
    assert [rolled.iteration[s] for s, d in edges if d == stack] == [(0, k) for k in range(100)]


def test_roll_fused_gru_two_layers_gives_two_blocks():
    nodes, edges, types, _ = graph = fused_gru(2)
    rolled = _rolled(graph)
    check_rolled(nodes, edges, rolled)
    assert [b.repeats for b in rolled.blocks] == [100, 100]
    assert len(rolled.nodes) < 60
    reps = {i for b in rolled.blocks for i in b.nodes}
    for name in ("UnbindBackward0", "StackBackward0"):  # one split and one stack per layer
        hubs = [n.id for n in rolled.nodes if n.name == name]
        assert len(hubs) == 2
        for hub in hubs:
            assert sum(1 for s, d in rolled.edges if hub in (s, d) and {s, d} & reps) == 1


# ---- identical layers

def test_roll_transformer_layers_with_input_needing_grad():
    nodes, edges, types, _ = graph = transformer(input_grad=True)
    rolled = _rolled(graph)
    check_rolled(nodes, edges, rolled)
    (block,) = rolled.blocks
    assert block.repeats == 6
    assert block.label == "layers.0\u20135: TransformerEncoderLayer"
    assert block.module == "layers"
    for n in nodes:  # each layer is its own iteration; its parameters roll with it
        if n.id in rolled.iteration:
            name = n.module if n.seq is not None else n.label
            assert rolled.iteration[n.id] == (0, int(name.split(".")[1]))
    assert len(rolled.nodes) < len(nodes) // 5


def test_roll_transformer_first_layer_without_input_grad_stays_unrolled():
    nodes, edges, types, _ = graph = transformer(input_grad=False)
    rolled = _rolled(graph)
    check_rolled(nodes, edges, rolled)
    (block,) = rolled.blocks
    # layer 0 lacks the ops on the input (it needs no grad), so only layers 1-5 match
    assert block.repeats == 5
    assert block.label == "layers.1\u20135: TransformerEncoderLayer"
    first = {n.id for n in nodes if (n.module or "").split(".")[:2] == ["layers", "0"]}
    assert first and all(rolled.mapping[i] == i and i not in rolled.iteration for i in first)


def test_roll_names_modules_inside_a_block_in_one_order():
    """The renamed modules (``layers.{0…5}.linear1`` …) came in the order of a set of
    strings, which changes from run to run with Python's hash seed."""
    rolled = _rolled(transformer(True))
    inside = [m for m in rolled.module_types if "{" in m]
    assert len(inside) > 3 and inside == sorted(inside)


def test_roll_two_big_identical_layers_roll():
    """Two repeats roll when an iteration holds _roll.TWICE_MIN ops or more (two
    Transformer layers); the zoo's 2-layer GPT-2 and Llama roll by this rule."""
    nodes, edges, types, _ = graph = transformer(input_grad=True, layers=2)
    rolled = _rolled(graph)
    check_rolled(nodes, edges, rolled)
    (block,) = rolled.blocks
    assert (block.label, block.repeats) == ("layers.0\u20131: TransformerEncoderLayer", 2)
    ops = sum(1 for i in block.nodes if rolled.nodes[[n.id for n in rolled.nodes].index(i)].seq is not None)
    assert ops >= _roll.TWICE_MIN
    assert roll(nodes, edges, module_types=types, min_repeats=3).blocks == []  # the old rule: never twice


def test_roll_two_small_identical_layers_stay_apart():
    nodes, edges, types, _ = graph = deep_mlp(2)  # two Linear + Tanh: 3 ops each
    assert _rolled(graph).blocks == []
    nodes, edges, types, _ = graph = deep_mlp(3)  # three repeats of any size roll
    assert [b.repeats for b in _rolled(graph).blocks] == [3]


class _SharedBias(nn.Module):
    """T5's pattern: the first layer computes a value from its own weight (the relative
    position bias), and every layer adds that same value."""

    def __init__(self, layers, per_layer=False):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(6, 6) for _ in range(layers))
        self.gates = nn.ParameterList(nn.Parameter(torch.randn(6)) for _ in range(layers))
        self.bias = nn.Parameter(torch.randn(6, 1))
        self.per_layer = per_layer

    def forward(self, x):
        bias = None
        for layer, gate in zip(self.layers, self.gates, strict=True):
            h = layer(x)
            if self.per_layer:  # each layer makes its own value and reads it twice
                g = torch.sigmoid(gate)
                x = torch.tanh(h * g + x * g)
            else:
                if bias is None:
                    bias = (self.bias * 2).t()  # made in the first layer, read by all
                x = torch.tanh(h + bias)
        return x


def test_roll_a_value_the_first_layer_makes_for_all_layers_rolls_every_layer():
    torch.manual_seed(0)
    model = _SharedBias(4)
    nodes, edges, types = capture(model(torch.randn(3, 6)).sum(), params=model)
    rolled = roll(nodes, edges, module_types=types)
    check_rolled(nodes, edges, rolled)
    (block,) = rolled.blocks
    assert block.repeats == 4  # without moving the bias's ops ahead, layer 0 would not match
    by_id = {n.id: n for n in rolled.nodes}
    (made,) = (n.id for n in nodes if n.name == "TBackward0" and n.shape == (1, 6))  # the bias, made once
    assert made not in rolled.iteration and rolled.mapping[made] == made  # drawn once, outside the block
    readers = [dst for src, dst in rolled.edges if src == made]
    assert [by_id[r].name for r in readers] == ["AddBackward0"] and readers[0] in block.nodes


def test_roll_a_value_each_layer_makes_and_reads_twice_stays_in_its_layer():
    torch.manual_seed(0)
    model = _SharedBias(4, per_layer=True)
    nodes, edges, types = capture(model(torch.randn(3, 6)).sum(), params=model)
    rolled = roll(nodes, edges, module_types=types)
    check_rolled(nodes, edges, rolled)
    (block,) = rolled.blocks
    assert block.repeats == 4
    assert "SigmoidBackward0" in names(rolled, block.nodes)  # inside the block: each layer's own


def test_roll_deep_mlp_keeps_one_layer():
    nodes, edges, types, _ = graph = deep_mlp(1000)
    rolled = _rolled(graph)
    check_rolled(nodes, edges, rolled)
    (block,) = rolled.blocks
    assert block.repeats == 1000 and len(rolled.nodes) < 30
    assert block.label == "0\u20131999: Linear, Tanh"
    assert names(rolled, block.nodes) == sorted(
        ["TBackward0", "AddmmBackward0", "TanhBackward0", "AccumulateGrad", "AccumulateGrad"])
    assert names(rolled, [s for s, _ in block.loops]) == ["TanhBackward0"]
    for n in nodes:
        if n.seq is not None and n.kind == "op" and n.module is not None:
            assert rolled.iteration[n.id] == (0, int(n.module) // 2)


def test_roll_deep_mlp_without_module_tags_labels_with_parameter_names():
    nodes, edges, types, _ = deep_mlp(30, tagged=False)
    rolled = roll(nodes, edges, module_types=types)
    check_rolled(nodes, edges, rolled)
    # the Linear layers are modules 0, 2, ..., 58 of the Sequential (the Tanhs own no parameters)
    assert [(b.label, b.repeats, b.module) for b in rolled.blocks] == [("0,2,\u2026,58: Linear", 30, None)]
    assert {n.label for n in rolled.nodes if n.kind == "parameter"} == {"{0,2,\u2026,58}.weight",
                                                                        "{0,2,\u2026,58}.bias"}


def test_roll_without_names_or_module_tags_labels_with_op_names():
    x = torch.randn(2, 8, requires_grad=True)
    for _ in range(30):
        x = torch.tanh(x * 2 + 1)  # nothing names the steps, and no weight is shared
    nodes, edges, _ = capture(x.sum())
    rolled = roll(nodes, edges)
    check_rolled(nodes, edges, rolled)
    assert [(b.label, b.repeats) for b in rolled.blocks] == [("MulBackward0 \u2026 TanhBackward0", 30)]


# ---- small graphs, options and records

def test_roll_graph_without_repetition_is_unchanged():
    x = torch.tensor([1.0], requires_grad=True)
    nodes, edges, _ = capture(2 * x + 1)
    rolled = roll(nodes, edges)
    assert rolled == Rolled(nodes, edges, [], {n.id: n.id for n in nodes}, {})


def test_roll_small_net_of_different_widths_is_unchanged():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2), nn.ReLU())
    nodes, edges, _ = capture(model(torch.randn(3, 4)).sum(), params=model)
    rolled = roll(nodes, edges)
    assert rolled.blocks == [] and rolled.nodes == nodes and rolled.edges == edges
    assert rolled.mapping == {n.id: n.id for n in nodes}


def test_roll_fewer_repeats_than_min_repeats_is_unchanged():
    nodes, edges, types, _ = lstm_loop(50)
    assert roll(nodes, edges, min_repeats=51).blocks == []
    assert roll(nodes, edges, min_repeats=50).blocks[0].repeats == 50


def test_roll_single_op_iteration_loops_onto_itself():
    x = torch.ones(3, requires_grad=True)
    y = x
    for _ in range(10):
        y = torch.sin(y)
    nodes, edges, _ = capture(y.sum())
    rolled = roll(nodes, edges)
    check_rolled(nodes, edges, rolled)
    (block,) = rolled.blocks
    (rep,) = block.nodes
    assert block.repeats == 10 and block.loops == [(rep, rep)] and (rep, rep) in rolled.edges
    assert block.label == "SinBackward0"
    assert next(n for n in rolled.nodes if n.id == rep).count == 10


def test_a_one_op_loop_keeps_its_loop_edge_when_other_nodes_of_the_picture_merge():
    # found by fuzzing: merging a chain of shape ops elsewhere dropped the (rep, rep) edge
    w = torch.randn(3, 3, requires_grad=True)
    h = torch.randn(3, 3, requires_grad=True)
    for _ in range(6):
        h = h * w
    graph = dg.draw(h.reshape(9).t().reshape(3, 3).sum(), roll=True)
    pic = graph.picture()
    (block,) = pic.blocks
    (rep,) = block.nodes
    assert block.repeats == 6 and block.loops == [(rep, rep)]
    assert any(n.label.count("\u2192") == 2 for n in pic.nodes)  # the reshape, t, reshape chain: one node
    assert (rep, rep) in pic.edges
    assert graph.to_dot().count(f"n{rep} -> n{rep} ") == 1  # drawn: the dashed loop edge


def test_ops_that_read_more_inputs_from_outside_in_a_later_step_do_not_roll():
    # found by fuzzing: three chained muls rolled as one step x3, drawn reading e in every
    # step, though the second reads only the one before it and the third reads e again
    a = torch.randn(3, requires_grad=True)
    e = a.exp()
    y = e * ((e * 2) * 1.5)
    nodes, edges, _ = capture(y.sum())
    rolled = roll(nodes, edges, min_repeats=2)
    assert rolled.blocks == []
    x = torch.randn(3, requires_grad=True)
    h = x.exp()
    for _ in range(3):  # the same three ops as a loop whose steps all read e: it rolls
        h = e * h
    nodes, edges, _ = capture(h.sum())
    (block,) = roll(nodes, edges).blocks
    assert block.repeats == 3 and block.label == "MulBackward0"


def test_roll_parallel_steps_gathered_by_one_stack_roll_without_loops():
    x = torch.randn(10, 3, requires_grad=True)
    nodes, edges, _ = capture(torch.stack([torch.tanh(x[i] * 2 + 1) for i in range(10)]).sum())
    rolled = roll(nodes, edges)
    check_rolled(nodes, edges, rolled)
    (block,) = rolled.blocks
    assert (block.repeats, block.loops) == (10, [])
    assert names(rolled, block.nodes) == sorted(
        ["SelectBackward0", "MulBackward0", "AddBackward0", "TanhBackward0"])
    assert len(rolled.nodes) == 8  # x, the 4 ops, stack, sum, output


def test_roll_parallel_copies_that_go_different_ways_stay(monkeypatch):
    torch.manual_seed(0)
    q, k, v = (nn.Linear(8, 8) for _ in range(3))  # one input, three differently used results
    x = torch.randn(4, 8)
    heads = [lin(x).view(4, 2, 4).transpose(0, 1) for lin in (q, k, v)]
    scores = torch.softmax(heads[0] @ heads[1].transpose(1, 2), dim=-1)
    nodes, edges, _ = capture((scores @ heads[2]).sum())
    assert roll(nodes, edges).blocks == []
    monkeypatch.setattr(_roll.runs, "same_consumers", lambda seq, run: True)
    assert [b.repeats for b in roll(nodes, edges).blocks] == [3]  # the rule is what keeps them


def test_roll_outputs_of_every_step_stay():
    torch.manual_seed(0)
    cell = nn.GRUCell(3, 5)
    h, outs = None, []
    for x in torch.randn(8, 1, 3):
        h = cell(x, h)
        outs.append(h)
    nodes, edges, _ = capture(outs, params=cell)
    rolled = roll(nodes, edges)
    check_rolled(nodes, edges, rolled)
    assert rolled.blocks[0].repeats == 8
    assert sum(n.kind == "output" for n in rolled.nodes) == 8


# ---- loops whose batch shrinks or grows (packed sequences)

def shrinking_loop(batches, grow=False):
    """A GRUCell over steps on ``batches[t]`` sequences, as an ``nn.GRU`` over packed
    sequences runs: the state loses rows as sequences end (``h[:b]``; the finished rows
    go to the output), or, with ``grow``, gains rows (``cat``: the reverse direction)."""
    torch.manual_seed(0)
    cell = nn.GRUCell(4, 8)
    x = torch.randn(len(batches), max(batches), 4)
    h, done = torch.zeros(batches[0], 8), []
    for t, b in enumerate(batches):
        if b < h.shape[0]:
            done.append(h[b:])
            h = h[:b]
        elif b > h.shape[0]:
            h = torch.cat([h, torch.zeros(b - h.shape[0], 8)])
        h = cell(x[t, :b], h)
    nodes, edges, types = capture(torch.cat([h, *done]).sum(), params=cell)
    return nodes, edges, types


def test_roll_a_loop_whose_batch_shrinks_is_one_block_with_the_slices_on_its_loop_edge():
    """Steps on 3, 2 and 1 sequences are one loop: they rolled as three blocks, the step
    where the batch shrinks (two more slices) between them unrolled."""
    nodes, edges, types = shrinking_loop([3, 3, 3, 2, 2, 2, 1, 1, 1])
    rolled = roll(nodes, edges, module_types=types)
    check_rolled(nodes, edges, rolled)
    (block,) = rolled.blocks
    assert block.repeats == 9 and block.label.startswith("step 1\u20139")
    assert block.note == "batch 1\u20133: SliceBackward0 \u00d72 on the loop edge"
    by_id = {n.id: n for n in rolled.nodes}
    reps = [by_id[i] for i in block.nodes if by_id[i].seq is not None]
    assert {n.shape for n in reps if n.name == "AddBackward0"} == {("1\u20133", 8)}
    assert all(n.shape[0] == "1\u20133" for n in reps if n.shape and len(n.shape) == 2 and n.shape[1] != 24)
    # the state's two slices are drawn as the loop edge; the finished rows' slices stay nodes
    state_slices = [n for n in nodes if n.name == "SliceBackward0" and n.shape[0] in (1, 2)
                    and any(rolled.iteration.get(d, (None,))[0] == 0 for s, d in edges if s == n.id)]
    assert len(state_slices) == 2
    assert all(rolled.mapping[n.id] in block.nodes for n in state_slices)
    kept = [n for n in rolled.nodes if n.name == "SliceBackward0" and n.id not in block.nodes]
    assert sorted(n.shape for n in kept) == [(1, 8), (1, 8)]


def test_roll_a_loop_whose_batch_grows_is_one_block_with_the_cat_on_its_loop_edge():
    nodes, edges, types = shrinking_loop([1, 1, 1, 2, 2, 2, 3, 3, 3], grow=True)
    rolled = roll(nodes, edges, module_types=types)
    check_rolled(nodes, edges, rolled)
    (block,) = rolled.blocks
    assert block.repeats == 9
    assert block.note == "batch 1\u20133: CatBackward0 \u00d72 on the loop edge"


def test_roll_a_loop_of_one_batch_has_no_batch_note_and_plain_shapes():
    nodes, edges, types = shrinking_loop([3] * 9)
    (block,) = roll(nodes, edges, module_types=types).blocks
    assert block.repeats == 9 and block.note is None


def packed_gru_by_hand(batches):
    """A GRU over packed sequences as ``nn.GRU`` runs it: the input projected for all
    steps at once (``gi``), each step's rows sliced out of it, the state sliced as
    sequences end."""
    torch.manual_seed(0)
    w_ih, w_hh = nn.Parameter(torch.randn(24, 4)), nn.Parameter(torch.randn(24, 8))
    gi = torch.nn.functional.linear(torch.randn(sum(batches), 4), w_ih)
    h, offset = torch.zeros(batches[0], 8), 0
    for b in batches:
        h = h[:b] if b < h.shape[0] else h
        i_r, i_z, i_n = gi[offset:offset + b].chunk(3, 1)
        h_r, h_z, h_n = torch.nn.functional.linear(h, w_hh).chunk(3, 1)
        r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
        h = (1 - z) * torch.tanh(i_n + r * h_n) + z * h
        offset += b
    return capture(h.sum(), params={"w_ih": w_ih, "w_hh": w_hh})


def test_roll_per_step_slices_of_an_input_made_before_the_loop_stay_in_their_step():
    """Each step slices its rows out of an input projected for all steps at once: those
    slices change the first dimension too, and their input is like the state's, but they
    are part of every step, not the state passed on."""
    nodes, edges, types = packed_gru_by_hand([3, 3, 3, 2, 2, 2, 1, 1, 1])
    rolled = roll(nodes, edges, module_types=types)
    check_rolled(nodes, edges, rolled)
    blocks = [b for b in rolled.blocks if b.loops]
    assert [(b.repeats, b.note) for b in blocks] == [
        (9, "batch 1\u20133: SliceBackward0 \u00d72 on the loop edge")]
    by_id = {n.id: n for n in rolled.nodes}
    slices = [by_id[i] for i in blocks[0].nodes if by_id[i].name == "SliceBackward0"]
    assert [n.shape for n in slices] == [("1\u20133", 24)]  # gi[offset:offset + b], in the step


def test_roll_a_batch_that_differs_only_without_a_resize_between_steps_stays_apart():
    """Steps on different batches that share no state (no slice or cat between them) do
    not become one block: the batch-blind comparison is tried only across a resize."""
    torch.manual_seed(0)
    lin = nn.Linear(8, 8)
    outs = [torch.tanh(lin(torch.randn(b, 8))) for b in (3, 3, 3, 2, 2, 2)]
    nodes, edges, types = capture(torch.cat(outs).sum(), params=lin)
    rolled = roll(nodes, edges, module_types=types)
    assert all(b.note is None for b in rolled.blocks)
    assert all(isinstance(d, int) for n in rolled.nodes for d in (n.shape or ()))


def test_roll_does_not_depend_on_ids_or_node_order():
    nodes, edges, types, _ = lstm_loop(50)
    shuffled = [dataclasses.replace(n, id=3 * n.id + 1000) for n in reversed(nodes)]
    moved = [(3 * s + 1000, 3 * d + 1000) for s, d in edges]
    rolled, base = roll(shuffled, moved), roll(nodes, edges)
    check_rolled(shuffled, moved, rolled)
    assert [(b.repeats, len(b.nodes), len(b.loops)) for b in rolled.blocks] == [
        (b.repeats, len(b.nodes), len(b.loops)) for b in base.blocks]
    assert {k: rolled.iteration[3 * k + 1000] for k in base.iteration} == base.iteration


def test_roll_leaves_its_input_records_alone():
    nodes, edges, types, _ = lstm_loop(50)
    before = [dataclasses.replace(n) for n in nodes]
    rolled = roll(nodes, edges)
    assert nodes == before
    reps = [n for n in rolled.nodes if n.count > 1]
    assert len(reps) == 15 and all(n.count == 50 for n in reps)
    originals = {id(n) for n in nodes}
    assert all(id(n) not in originals for n in reps)  # copies, not the caller's records


def test_roll_module_nodes_repeat_by_class():
    layers = [Node(id=10 + i, name="Block", kind="module", label=f"blocks.{i}: Block\n9 ops",
                   shape=(2, 8), module="blocks", seq=9 * i, count=9) for i in range(4)]
    head = Node(id=1, name="output", kind="output", label="output", shape=(2, 8))
    edges = [(10 + i, 11 + i) for i in range(3)] + [(13, 1)]
    rolled = roll(layers + [head], edges)
    check_rolled(layers + [head], edges, rolled)
    # a collapsed module node's ``module`` is its parent, so the block is named after that
    assert [(b.label, b.repeats, b.loops) for b in rolled.blocks] == [("blocks", 4, [(10, 10)])]
    assert rolled.edges == [(10, 10), (10, 1)]


@pytest.mark.parametrize("bad", [1, 0, -3, 2.5, True, "3"])
def test_roll_bad_min_repeats_raises(bad):
    with pytest.raises(ValueError, match="min_repeats must be an integer >= 2"):
        roll([], [], min_repeats=bad)


# ---- timings (not a test): python tests/test_roll.py

def _timings():
    cases = {
        "LSTMCell loop, 500 steps": lambda: lstm_loop(500, tagged=False),
        "LSTMCell loop, 500 steps, tagged": lambda: lstm_loop(500),
        "GRUCell loop, 100 steps": lambda: gru_cell_loop(100),
        "nn.GRU fused, 100 steps, 1 layer": lambda: fused_gru(1),
        "nn.GRU fused, 100 steps, 2 layers": lambda: fused_gru(2),
        "TransformerEncoder, 6 layers": lambda: transformer(True),
        "MLP depth 1000": lambda: deep_mlp(1000, tagged=False),
        "MLP depth 1000, tagged": lambda: deep_mlp(1000),
    }
    for name, build in cases.items():
        graph = build()
        gc.collect()  # capture's garbage is not roll's cost
        wall, cpu = [], []
        for _ in range(7):
            start, start_cpu = time.perf_counter(), time.process_time()
            rolled = _rolled(graph)
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        blocks = ", ".join(f"\u00d7{b.repeats} ({len(b.nodes)} nodes)" for b in rolled.blocks)
        print(f"{name:34s} {len(graph[0]):5d} -> {len(rolled.nodes):3d} nodes  {blocks:32s} "
              f"median wall {statistics.median(wall) * 1000:5.1f} ms, "
              f"cpu {statistics.median(cpu) * 1000:5.1f} ms (max wall {max(wall) * 1000:5.1f} ms)")


if __name__ == "__main__":
    _timings()


# -- frames that stand for their layers (issue 32) -------------------------------------------

class _RMSNorm(nn.Module):
    """RMSNorm written out, as Llama, Mixtral and T5 do: the weight is read by the last op."""

    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))


class _LlamaLayer(nn.Module):
    """A pre-norm decoder layer: attention and a gated MLP, each after an RMSNorm."""

    def __init__(self, d):
        super().__init__()
        self.norm1, self.norm2 = _RMSNorm(d), _RMSNorm(d)
        self.q, self.o = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.gate, self.up, self.down = (nn.Linear(d, 2 * d, bias=False), nn.Linear(d, 2 * d, bias=False),
                                         nn.Linear(2 * d, d, bias=False))

    def forward(self, x):
        a = self.norm1(x)
        x = x + self.o(torch.softmax(self.q(a) @ a.transpose(-1, -2), -1) @ a)
        b = self.norm2(x)
        return x + self.down(nn.functional.silu(self.gate(b)) * self.up(b))


class _Llama(nn.Module):
    def __init__(self, d=8, layers=2):
        super().__init__()
        self.emb = nn.Embedding(50, d)
        self.layers = nn.ModuleList([_LlamaLayer(d) for _ in range(layers)])
        self.norm, self.head = _RMSNorm(d), nn.Linear(d, 50, bias=False)

    def forward(self, ids):
        h = self.emb(ids)
        for layer in self.layers:
            h = layer(h)
        return self.head(self.norm(h)).pow(2).mean()


def _seq_now():
    """Autograd's creation counter now (the number the next recorded op gets)."""
    return (torch.ones(1, requires_grad=True) * 1).grad_fn._sequence_nr()


@pytest.mark.parametrize("layers", [2, 3, 4])
def test_roll_frames_of_rmsnorm_layers_hold_exactly_their_layers(layers):
    """Without module tags, a layer is known by the weights its ops read. RMSNorm reads its
    weight in its last op: the frame must still start at the norm's first op (it started at
    the weight's multiply with two layers, and held the final norm's ops) and hold every op
    of each layer and nothing computed after the last one."""
    torch.manual_seed(0)
    model = _Llama(layers=layers)
    spans = []
    for layer in model.layers:
        layer.register_forward_pre_hook(lambda m, a: spans.append([_seq_now()]))
        layer.register_forward_hook(lambda m, a, out: spans[-1].append(_seq_now()))
    y = model(torch.randint(0, 50, (2, 5)))
    nodes, edges, types = capture(y, params=model)
    rolled = roll(nodes, edges, module_types=types)
    (block,) = rolled.blocks
    assert block.repeats == layers
    for node in nodes:
        if node.seq is None or node.kind == "output":
            continue
        inside = [k for k, (lo, hi) in enumerate(spans) if lo < node.seq < hi]
        place = rolled.iteration.get(node.id)
        assert (place[1] if place else None) == (inside[0] if inside else None), (node.name, node.seq)


class _FeatureLlama(_Llama):
    """:class:`_Llama` on float features, no embedding: layer 0's first norm reads a tensor
    that needs no gradient, so it records only the weight's multiply, and layer 0 differs."""

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x)).pow(2).mean()


@pytest.mark.parametrize("tagged", [False, True], ids=["untagged", "tagged"])
@pytest.mark.parametrize("layers", [2, 3, 4, 6])
def test_roll_frames_never_hold_part_of_a_layer_when_the_first_layer_differs(layers, tagged):
    """Layers 1 to L-1 are alike; the final norm is like each layer's first norm. The frame
    started after layer 0's first norm and ran to the next layer's, so each iteration held
    two layers' halves and the last one the final norm (x3 for 3 layers; x2 of two layers
    each for 4 and 6). Every op drawn in an iteration must come from the layer it stands for,
    and nothing computed after the last layer may be in one, with module tags or without
    (each op's module then read from the parameters it reads)."""
    torch.manual_seed(0)
    model = _FeatureLlama(layers=layers)
    del model.emb
    spans = []
    for layer in model.layers:
        layer.register_forward_pre_hook(lambda m, a: spans.append([_seq_now()]))
        layer.register_forward_hook(lambda m, a, out: spans[-1].append(_seq_now()))
    with dg.track_modules(model) if tagged else contextlib.nullcontext():
        y = model(torch.randn(2, 5, 8))
    nodes, edges, types = capture(y, params=model)
    rolled = roll(nodes, edges, module_types=types)
    assert [b.repeats for b in rolled.blocks] == ([layers - 1] if layers > 2 else [])  # layers 1 to L-1
    firsts = {}
    for node in nodes:
        place = rolled.iteration.get(node.id)
        if node.seq is None or place is None:
            continue
        inside = [k for k, (lo, hi) in enumerate(spans) if lo < node.seq < hi]
        assert len(inside) == 1, (node.name, node.seq)  # (none: computed after the last layer)
        assert inside[0] - place[1] == firsts.setdefault(place[0], inside[0] - place[1]), (node.name, node.seq)


class _VitBlock(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.ln, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.Linear(2 * d, d)

    def forward(self, x):
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln(x))))


class _VitEncoder(nn.Module):
    """torchvision's ViT names its layers ``encoder.layers.encoder_layer_0`` ... ``_11``."""

    def __init__(self, layers=4):
        super().__init__()
        self.layers = nn.Sequential(collections.OrderedDict(
            (f"encoder_layer_{k}", _VitBlock()) for k in range(layers)))


def test_roll_titles_read_layers_numbered_inside_a_name():
    """A layer's index inside a name part (``encoder_layer_0`` ... ``encoder_layer_11``)
    is a range like ``h.0`` ... ``h.11``: the frame was titled with op names."""
    torch.manual_seed(0)
    model = nn.Module()
    model.encoder = _VitEncoder(layers=12)
    y = model.encoder.layers(torch.randn(2, 8)).pow(2).mean()
    nodes, edges, types = capture(y, params=model)
    rolled = roll(nodes, edges, module_types=types)
    (block,) = rolled.blocks
    assert (block.label, block.repeats) == ("encoder.layers.encoder_layer_0\u201311: _VitBlock", 12)
    labels = {n.label for n in rolled.nodes if n.kind == "parameter"}
    assert "encoder.layers.encoder_layer_{0\u202611}.fc1.weight" in labels


class _Expert(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.w1, self.w3 = nn.Linear(d, 2 * d, bias=False), nn.Linear(d, 2 * d, bias=False)
        self.w2 = nn.Linear(2 * d, d, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)) * self.w3(x))


class _EagerMoE(nn.Module):
    """Mixtral's eager expert loop: each expert runs on the tokens routed to it (a
    different number per expert), and adds its weighted output into the result."""

    def __init__(self, d=8, experts=5):
        super().__init__()
        self.gate = nn.Linear(d, experts, bias=False)
        self.experts = nn.ModuleList([_Expert(d) for _ in range(experts)])

    def forward(self, x, calls):
        weights, chosen = torch.topk(torch.softmax(self.gate(x), -1), 2, -1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            token, slot = torch.where(chosen == e)
            if len(token):
                calls.append((e, len(token), _seq_now()))
                out = out.index_add(0, token, expert(x[token]) * weights[token, slot, None])
        calls.append((None, 0, _seq_now()))
        return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_roll_an_eager_expert_loop_rolls_every_call_with_the_experts_names(seed):
    """The experts get different numbers of tokens, so their ops differ in the first
    dimension: only calls of equal size rolled (2 of 5, under 'step 4–5'). Every call
    rolls now, titled with the experts' names, its shapes with the range of sizes."""
    torch.manual_seed(seed)
    model, calls = _EagerMoE(), []
    y = model(torch.randn(12, 8), calls).pow(2).mean()
    nodes, edges, types = capture(y, params=model)
    rolled = roll(nodes, edges, module_types=types)
    (block,) = rolled.blocks
    experts = [e for e, _, _ in calls[:-1]]
    assert block.repeats == len(experts) >= 4
    assert block.label == f"experts.{experts[0]}\u2013{experts[-1]}: _Expert"
    labels = {n.label: n for n in rolled.nodes if n.kind == "parameter"}
    assert f"experts.{{{experts[0]}\u2026{experts[-1]}}}.w1.weight" in labels
    sizes = sorted(n for _, n, _ in calls[:-1])
    assert (f"{sizes[0]}\u2013{sizes[-1]}", 16) in {n.shape for n in rolled.nodes}  # w1's output, per call
    starts = [seq for _, _, seq in calls]
    for node in nodes:  # every op of call k is drawn as iteration k
        if node.seq is not None and node.kind != "output" and starts[0] < node.seq < starts[-1]:
            k = next(k for k in range(len(experts)) if starts[k] < node.seq < starts[k + 1])
            assert rolled.iteration[node.id][1] == k, node.name
