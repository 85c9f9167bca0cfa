"""Property-based tests (Hypothesis): random op programs and random small models.

For each example: ``draw`` captures exactly the graph an independent ``grad_fn`` walk
finds; a ``live()`` recording of the same program builds the same graph; a backward
replay's edge norms agree with the ``.grad`` PyTorch computes, and every edge's norm with
plain hooks of PyTorch's; and nothing dynagraph changed in the process (modes, hooks,
the ``Function.apply`` patch) is left behind.
Random loops whose steps read shared, per-step, alternating or optional weights roll
only steps that read the same leaves, as the program itself says.

The default run keeps each property to ``DYNAGRAPH_PROPERTY_EXAMPLES`` examples (20:
well under a minute in all); the ``long`` marker runs 10x as many
(``python3 dev.py test -m long``).
"""

from __future__ import annotations

import itertools
import os
from collections import Counter

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_roll import check_rolled
from test_roll_leaves import check as check_rolled_leaves
from torch import nn
from torch.autograd.function import Function

import dynagraph as dg
from dynagraph._roll import roll
from dynagraph.capture import capture

from _helpers import check_edge_norms, op_programs, replayed, run_steps

EXAMPLES = int(os.environ.get("DYNAGRAPH_PROPERTY_EXAMPLES", "20"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
LONG = settings(max_examples=10 * EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


# -- an independent oracle: walk grad_fn directly -----------------------------------------

def oracle(root: torch.Tensor) -> tuple[Counter, int]:
    """Names of the autograd nodes behind ``root`` and the number of edges between them,
    by a plain walk of ``grad_fn.next_functions`` (no dynagraph code)."""
    start = root.grad_fn
    seen, stack, edges = {start}, [start], 0
    while stack:
        fn = stack.pop()
        for child, _ in fn.next_functions:
            if child is None:
                continue
            edges += 1
            if child not in seen:
                seen.add(child)
                stack.append(child)
    names = Counter(fn.name().removeprefix("torch::autograd::") for fn in seen)
    return names, edges


def torch_state():
    """What live() and trace_backward() may change while they run."""
    m = nn.modules.module
    return (torch._C._len_torch_function_stack(), len(m._global_forward_hooks),
            len(m._global_forward_pre_hooks), len(m._global_forward_hooks_always_called),
            Function.__dict__["apply"], torch.is_grad_enabled())


# -- random op programs ---------------------------------------------------------------------

UNARY = {
    "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu, "exp": lambda a: torch.exp(a.clamp(-3, 3)),
    "square": lambda a: a * a, "neg": lambda a: -a, "scale": lambda a: 0.5 * a, "sin": torch.sin,
    "transpose": lambda a: a.t(), "flip": lambda a: a.flip(0), "index": lambda a: torch.cat([a[1:], a[:1]]),
    "view": lambda a: a.reshape(-1).reshape(a.shape), "abs1": lambda a: (a + 1.5).abs(),
}
BINARY = {
    "add": torch.add, "mul": torch.mul, "sub": torch.sub, "matmul": lambda a, b: a @ b.t(),
    "max": torch.maximum, "cat": lambda a, b: torch.cat([a, b])[: a.shape[0]],
}
SHAPE = (3, 3)


def programs():
    """A list of instructions over leaves 0..k-1: ("u", op, i) or ("b", op, i, j)."""
    return op_programs(UNARY, BINARY, most=12)


def run(program, leaves):
    """Run ``program`` on ``leaves``; returns the scalar result (every value feeds it)."""
    values = run_steps(program[1], list(leaves), UNARY, BINARY)
    return sum(v.sum() for v in values[len(leaves):]) if len(values) > len(leaves) else values[0].sum()


def make_leaves(program):
    torch.manual_seed(len(program[1]))
    return [torch.randn(SHAPE, dtype=torch.float64, requires_grad=True) for _ in range(program[0])]


def check_program(program):
    before = torch_state()
    leaves = make_leaves(program)
    y = run(program, leaves)
    names, edges = oracle(y)

    drawn = dg.draw(y, roll=False, max_nodes=None)
    assert drawn.counts() == names
    assert len(drawn.edges) == edges + 1  # draw adds the edge into its output node

    with dg.live(params={f"x{i}": t for i, t in enumerate(leaves)}) as rec:
        y2 = run(program, leaves)
    assert rec.graph().counts() == oracle(y2)[0]
    assert sum(len(s.nodes) for s in rec.steps) == len(rec.nodes)  # every node credited once

    params = {f"x{i}": t for i, t in enumerate(leaves)}
    bt, sent = replayed(y, params)
    check_leaf_norms(bt, leaves)
    check_edge_norms(bt, sent, rel=1e-4, abs=1e-8)  # float32 models: rounding
    assert torch_state() == before


def check_leaf_norms(bt, leaves):
    """Each leaf's incoming edge norms agree with its ``.grad``: equal when one edge
    carries all of it, and bound it (triangle inequality) when several do."""
    by_label = {n.label: n.id for n in bt.nodes if n.kind in ("input", "parameter")}
    for i, leaf in enumerate(leaves):
        if f"x{i}" not in by_label:
            continue  # this leaf feeds nothing the result depends on
        nid = by_label[f"x{i}"]
        into = [v for (src, _, _), v in bt.edge_norms.items() if src == nid]
        true = torch.linalg.vector_norm(leaf.grad).item()
        if len(into) == 1:
            assert into[0] == pytest.approx(true, rel=1e-5, abs=1e-9)
        else:
            assert true <= sum(into) * (1 + 1e-6) + 1e-9


@SETTINGS
@given(programs())
def test_random_programs_capture_record_and_replay_like_torch(program):
    check_program(program)


@pytest.mark.long
@LONG
@given(programs())
def test_random_programs_long_run(program):
    check_program(program)


@st.composite
def shared_programs(draw):
    """A program in which some ops read one value in several of their inputs
    (``x * x``, ``x - x``, ``cat([a, a])``): each such op sends that value one
    gradient per input, and a replay must label each of those edges with its own."""
    leaves, steps = draw(programs())
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(steps)))
        i = draw(st.integers(0, leaves + at - 1))
        steps.insert(at, ("b", draw(st.sampled_from(["add", "cat", "max", "mul", "sub"])), i, i))
    return leaves, steps


def check_parallel_edges(program):
    """Every edge of an op that reads one value twice has the norm PyTorch's own hooks
    took for that input (``check_edge_norms``), and the edges into a leaf add up to at
    least its ``.grad`` (each is one term of the sum)."""
    leaves = make_leaves(program)
    y = run(program, leaves)
    params = {f"x{i}": t for i, t in enumerate(leaves)}
    bt, sent = replayed(y, params)
    parallel = Counter((src, dst) for src, dst, _ in bt.edge_norms)
    assert any(n > 1 for n in parallel.values())  # the program has parallel edges
    assert parallel == Counter(bt.edges)  # one norm per drawn edge
    check_edge_norms(bt, sent, rel=1e-6, abs=1e-12)  # read as float32 (norms.stack_on_host)
    check_leaf_norms(bt, leaves)


@SETTINGS
@given(shared_programs())
def test_ops_that_read_one_value_twice_have_a_norm_per_edge_like_torch(program):
    check_parallel_edges(program)


@pytest.mark.long
@LONG
@given(shared_programs())
def test_ops_that_read_one_value_twice_long_run(program):
    check_parallel_edges(program)


# -- random small models --------------------------------------------------------------------

ACTIVATIONS = [nn.ReLU, nn.Tanh, nn.Sigmoid, nn.GELU, nn.Identity]


@st.composite
def models(draw):
    widths = draw(st.lists(st.integers(1, 6), min_size=2, max_size=6))
    layers = []
    for a, b in itertools.pairwise(widths):
        layers.append(nn.Linear(a, b, bias=draw(st.booleans())))
        layers.append(draw(st.sampled_from(ACTIVATIONS))())
    if draw(st.booleans()):
        layers.append(nn.LayerNorm(widths[-1]))
    return nn.Sequential(*layers), widths[0]


def check_model(spec):
    model, width = spec
    before = torch_state()
    torch.manual_seed(0)
    x = torch.randn(4, width)
    with dg.track_modules(model):
        loss = model(x).pow(2).mean()
    assert dg.draw(loss, params=model, roll=False, max_nodes=None).counts() == oracle(loss)[0]

    with dg.live(model) as rec:
        loss2 = model(x).pow(2).mean()
    assert rec.graph().counts() == oracle(loss2)[0]

    bt, sent = replayed(loss, model)
    by_label = {n.label: n.id for n in bt.nodes if n.kind == "parameter"}
    for name, p in model.named_parameters():
        into = [v for (src, _, _), v in bt.edge_norms.items() if src == by_label[name]]
        assert len(into) == 1  # each parameter is used once in a Sequential
        assert into[0] == pytest.approx(torch.linalg.vector_norm(p.grad).item(), rel=1e-4, abs=1e-8)
    check_edge_norms(bt, sent, rel=1e-4, abs=1e-8)  # float32 models: rounding
    assert torch_state() == before


@SETTINGS
@given(models())
def test_random_models_capture_record_and_replay_like_torch(spec):
    check_model(spec)


@pytest.mark.long
@LONG
@given(models())
def test_random_models_long_run(spec):
    check_model(spec)


# -- random loop programs with leaf variations (rolling) -------------------------------------

# Per loop step, each weight slot reads: one weight all steps share, a fresh weight of one
# shape, fresh weights of shapes that vary by step, two weights in turn, or one weight that
# only some steps read (the others scale by a constant).
SLOT_MODES = ("shared", "own", "own_shapes", "alternate", "some")
LEAF_OPS = {"mul": lambda h, w: h * w, "add": lambda h, w: h + w, "mm": lambda h, w: h @ w}
CONSTANT = {"mul": lambda h: h * 2.0, "add": lambda h: h + 1.0, "mm": lambda h: h @ torch.eye(3)}
SHAPES = {"mul": [(3, 3), (3,), (1, 3)], "add": [(3, 3), (3,), (1, 3)], "mm": [(3, 3)]}


@st.composite
def loop_programs(draw):
    """``(steps, body)``: body ops ``(op, uses)`` where ``uses[t]`` is what step t reads:
    ``None`` (no weight), ``("name", i, shape)`` (weight i of the slot) or ``("fresh", shape)``."""
    steps = draw(st.integers(3, 8))
    body = []
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["tanh", "mul", "add", "mm"]))
        if op == "tanh":
            body.append((op, [None] * steps))
            continue
        mode, shape = draw(st.sampled_from(SLOT_MODES)), draw(st.sampled_from(SHAPES[op]))
        if mode == "shared":
            uses = [("name", 0, shape)] * steps
        elif mode == "own":
            uses = [("fresh", shape)] * steps
        elif mode == "own_shapes":
            uses = [("fresh", draw(st.sampled_from(SHAPES[op]))) for _ in range(steps)]
        elif mode == "alternate":
            uses = [("name", t % 2, shape) for t in range(steps)]
        else:
            read = draw(st.lists(st.booleans(), min_size=steps, max_size=steps))
            uses = [("name", 0, shape) if r else None for r in read]
        body.append((op, uses))
    return steps, body


def run_loop(program):
    """Run the loop; returns the result, its weights by name, and per op (by autograd's
    counter) what the program knows it reads: ``("none",)``, ``("own", shape)`` for a
    weight no other op reads, or ``("shared", name)``."""
    steps, body = program
    torch.manual_seed(0)
    uses = Counter(f"w{j}_{u[1]}" for j, (_, us) in enumerate(body) for u in us if u and u[0] == "name")
    h = torch.randn(3, 3, requires_grad=True)
    weights, truth = {}, {}
    for t in range(steps):
        for j, (op, us) in enumerate(body):
            use = us[t]
            if use is None:
                h = torch.tanh(h) if op == "tanh" else CONSTANT[op](h)
                truth[h.grad_fn._sequence_nr()] = ("none",)
                continue
            name = f"w{j}_{use[1]}" if use[0] == "name" else f"w{j}_t{t}"
            shape = use[-1]
            if name not in weights:
                weights[name] = nn.Parameter(torch.randn(shape))
            h = LEAF_OPS[op](h, weights[name])
            truth[h.grad_fn._sequence_nr()] = (("shared", name) if uses[name] > 1 else ("own", shape))
    return h.sum(), weights, truth


def check_loop(program):
    """The rolled loop keeps the graph's invariants, draws no leaf where it does not feed
    every iteration (:func:`test_roll_leaves.check`), rolls onto one op only ops that read
    the same by the program's account, and rolls the whole loop when every step does."""
    y, weights, truth = run_loop(program)
    nodes, edges, types = capture(y, params=weights)
    rolled = roll(nodes, edges, module_types=types)
    check_rolled_leaves(nodes, edges, rolled)
    by_id = {n.id: n for n in nodes}
    reads: dict = {}  # (block, drawn op) -> what each iteration's op reads, by the program
    for nid, (b, _) in rolled.iteration.items():
        if by_id[nid].seq in truth:
            reads.setdefault((b, rolled.mapping[nid]), set()).add(truth[by_id[nid].seq])
    for (b, op), seen in reads.items():
        assert len(seen) == 1, f"block {b} rolls ops that read {sorted(seen)} onto {op}"
    per = len(program[1])  # ops per step, in creation order
    reads_in_order = [truth[s] for s in sorted(truth)]
    if len({tuple(reads_in_order[t * per:(t + 1) * per]) for t in range(program[0])}) == 1:
        loop_ops = [n.id for n in nodes if n.seq in truth]  # every step reads the same: all of it rolls
        assert {rolled.iteration.get(i, (None,))[0] for i in loop_ops} == {0}


@SETTINGS
@given(loop_programs())
def test_random_loops_roll_only_steps_that_read_the_same_leaves(program):
    check_loop(program)


@pytest.mark.long
@LONG
@given(loop_programs())
def test_random_loops_long_run(program):
    check_loop(program)


# -- loops whose batch shrinks or grows: rolled as one loop, shapes as ranges ----------------

@st.composite
def resized_loops(draw):
    """``(cell, sizes, finished)``: a cell over steps on ``sizes[t]`` rows, the state sliced
    (fewer rows) or grown by a cat (more rows) between steps; ``finished``: rows that leave
    the state go to the output (as a packed RNN returns them)."""
    cell = draw(st.sampled_from(["gru", "lstm", "tanh"]))
    steps = draw(st.integers(3, 9))
    start = draw(st.integers(1, 4))
    deltas = draw(st.lists(st.sampled_from([0, 0, -1, 1]), min_size=steps - 1, max_size=steps - 1))
    sizes = [start]
    for d in deltas:
        sizes.append(min(4, max(1, sizes[-1] + d)))
    return cell, sizes, draw(st.booleans())


def run_resized(program):
    """Run the loop; returns the loss and the cell."""
    kind, sizes, finished = program
    torch.manual_seed(0)
    cell = {"gru": nn.GRUCell(3, 4), "lstm": nn.LSTMCell(3, 4), "tanh": nn.Linear(4, 4)}[kind]
    state = [torch.zeros(sizes[0], 4, requires_grad=True)] * (2 if kind == "lstm" else 1)
    done = []
    for b in sizes:
        rows = state[0].shape[0]
        if b < rows:
            if finished:
                done += [s[b:] for s in state]
            state = [s[:b] for s in state]
        elif b > rows:
            state = [torch.cat([s, torch.zeros(b - rows, 4)]) for s in state]
        x = torch.randn(b, 3)
        if kind == "gru":
            state = [cell(x, state[0])]
        elif kind == "lstm":
            state = list(cell(x, (state[0], state[1])))
        else:
            state = [torch.tanh(cell(torch.cat([x, state[0][:, 3:]], 1)))]
    return torch.cat([*state, *done]).sum(), cell


def check_resized(program):
    """Invariants hold; every op a drawn node stands for has its name and all but the first
    dimension of its shape; a drawn range is exactly the sizes it stands for; an op drawn as
    a loop edge is a slice or cat between two iterations of its block."""
    loss, cell = run_resized(program)
    nodes, edges, types = capture(loss, params=cell)
    rolled = roll(nodes, edges, module_types=types)
    check_rolled(nodes, edges, rolled)
    by_id = {n.id: n for n in nodes}
    drawn = {n.id: n for n in rolled.nodes}
    stands: dict[int, list] = {}
    for nid in rolled.iteration:
        stands.setdefault(rolled.mapping[nid], []).append(by_id[nid])
    for rep, olds in stands.items():
        shown = drawn[rep]
        assert {(n.name, n.shape[1:] if n.shape else n.shape) for n in olds} == {
            (shown.name, shown.shape[1:] if shown.shape else shown.shape)}
        first = {n.shape[0] for n in olds if n.shape}
        if shown.shape and isinstance(shown.shape[0], str):
            lo, hi = map(int, shown.shape[0].split("\u2013"))
            assert (lo, hi) == (min(first), max(first)) and len(first) > 1
        elif shown.shape:
            assert first == {shown.shape[0]}
    for nid, (b, k) in rolled.through.items():
        assert by_id[nid].name in ("SliceBackward0", "CatBackward0")
        assert rolled.mapping[nid] in rolled.blocks[b].nodes
        assert 0 <= k < rolled.blocks[b].repeats - 1
    if rolled.through:
        assert any(block.note for block in rolled.blocks)


@SETTINGS
@given(resized_loops())
def test_random_resized_loops_roll_with_true_shapes(program):
    check_resized(program)


@pytest.mark.long
@LONG
@given(resized_loops())
def test_random_resized_loops_long_run(program):
    check_resized(program)
