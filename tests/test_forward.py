"""trace_forward: the tangent on each edge of a forward-mode computation, checked against
the tangents PyTorch itself carries (``forward_ad.unpack_dual``) and ``torch.func.jvp``."""

from __future__ import annotations

import math
import os

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from hypothesis import HealthCheck, given, settings

import dynagraph as dg
from dynagraph import _page

from _helpers import op_programs, run_steps

EXAMPLES = int(os.environ.get("DYNAGRAPH_PROPERTY_EXAMPLES", "20"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])

# Each instruction is exactly one torch call, so the k-th op the trace records is the
# k-th instruction's result (its name is the op's).
UNARY = {"tanh": torch.tanh, "sigmoid": torch.sigmoid, "sin": torch.sin, "neg": torch.neg, "exp": torch.exp,
         "t": torch.t}
BINARY = {"add": torch.add, "mul": torch.mul, "sub": torch.sub, "maximum": torch.maximum}


def programs():
    """(number of inputs, [("u", op, i) or ("b", op, i, j)]) over values 0..n-1."""
    return op_programs(UNARY, BINARY, most=10)


def run(steps, values):
    """Run ``steps`` on ``values`` (appending each result); returns ``values``."""
    return run_steps(steps, values, UNARY, BINARY)


def norm(t):
    return torch.linalg.vector_norm(t).item()


@SETTINGS
@given(programs())
def test_edge_tangents_match_pytorch(program):
    inputs, steps = program
    torch.manual_seed(len(steps))
    primals = [torch.randn(3, 3, dtype=torch.float64) for _ in range(inputs)]
    tangents = [torch.randn(3, 3, dtype=torch.float64) for _ in range(inputs)]
    with dg.trace_forward() as ft, fwAD.dual_level():
        values = run(steps, [fwAD.make_dual(p, t) for p, t in zip(primals, tangents)])
        want = [norm(fwAD.unpack_dual(v).tangent) for v in values]  # PyTorch's own tangents
    ins = [n.id for n in ft.nodes if n.kind == "input"]
    ops = [n.id for n in ft.nodes if n.kind == "op"]
    node_of = ins + ops  # value k -> the node that made it
    assert len(ins) == inputs and [ft.node_name(i) for i in ops] == [s[1] for s in steps]
    for k, nid in enumerate(node_of):
        assert math.isclose(ft.tangent_norms[nid], want[k], rel_tol=1e-12, abs_tol=1e-300)
    expected = {}
    for k, step in enumerate(steps):
        for slot, i in enumerate(step[2:]):
            expected[node_of[i], node_of[inputs + k], slot] = want[i]
    got = {e: v for e, v in ft.edge_norms.items() if e[1] in set(ops)}
    assert got.keys() == expected.keys()
    for e, v in expected.items():
        assert math.isclose(got[e], v, rel_tol=1e-12, abs_tol=1e-300), e


def test_output_tangent_is_the_jvp():
    x0 = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64)
    v = torch.tensor([1.0, 0.5, -2.0], dtype=torch.float64)

    def f(x):
        return (x.sin() * x.exp()).sum()

    with dg.trace_forward(params={"x": x0}) as ft, fwAD.dual_level():
        f(fwAD.make_dual(x0, v))
    _, jvp = torch.func.jvp(f, (x0,), (v,))
    (out,) = [n.id for n in ft.nodes if n.kind == "output"]
    (edge,) = [e for e in ft.edge_norms if e[1] == out]
    assert math.isclose(ft.edge_norms[edge], abs(jvp.item()), rel_tol=1e-12)
    assert ft.node(0).label == "x"


def test_torch_func_jvp_is_recorded_too():
    x0 = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64)
    v = torch.tensor([1.0, 0.5, -2.0], dtype=torch.float64)
    with dg.trace_forward() as ft:
        _, jvp = torch.func.jvp(lambda x: (x.sin() * x).sum(), (x0,), (v,))
    assert [ft.node_name(i) for i in ft.order] == ["input", "sin", "mul", "sum"]
    (edge,) = [e for e in ft.edge_norms if ft.node_name(e[1]) == "output"]
    assert math.isclose(ft.edge_norms[edge], abs(jvp.item()), rel_tol=1e-12)


def test_picture_arrows_point_forward_and_steps_in_run_order():
    with dg.trace_forward() as ft, fwAD.dual_level():
        x = fwAD.make_dual(torch.ones(2), torch.ones(2))
        (x * 3).sum()
    dot = ft.to_dot()
    assert "dir=back" not in dot and "penwidth" in dot
    outs = ft._outputs()
    assert [o.metadata["dynagraph"] for o in outs] == ["picture", "script", "steps"]
    assert _page.largest_output(outs) < _page.MAX_BYTES
    steps = outs[-1].data["text/plain"].splitlines()
    assert steps[1].startswith("1. input: tangent in") and steps[2].startswith("2. mul ran")


def test_loop_rolls_into_one_block():
    with dg.trace_forward() as ft, fwAD.dual_level():
        h = fwAD.make_dual(torch.ones(4), torch.ones(4))
        for _ in range(30):
            h = torch.tanh(h * 0.9 + 0.1)
    assert len(ft.order) == 91
    pic = ft.graph().picture()
    assert pic.blocks and pic.blocks[0].repeats >= 10
    assert "\u2016tangent\u2016 along the loop" in ft.to_dot()  # the frame's sparkline names tangents


def test_no_dual_tensors_records_nothing():
    with dg.trace_forward() as ft:
        torch.ones(2) * 2
    assert ft.order == [] and "0 node runs" in repr(ft)


def test_mode_removed_even_when_the_block_raises():
    depth = torch._C._len_torch_function_stack()
    with pytest.raises(ZeroDivisionError, match="division"), dg.trace_forward():
        assert torch._C._len_torch_function_stack() == depth + 1
        1 / 0
    assert torch._C._len_torch_function_stack() == depth


def test_meta_tangents_are_nan_with_a_warning_not_a_crash():
    depth = torch._C._len_torch_function_stack()
    with pytest.warns(UserWarning, match=r"tangents on the meta device have a shape but no values, so their "
                                         r"norms show as nan \(2 in this trace\)"):
        with fwAD.dual_level(), dg.trace_forward() as ft:  # its exit raised "Cannot copy out of meta tensor"
            x = fwAD.make_dual(torch.ones(3, device="meta"), torch.ones(3, device="meta"))
            x * 2
    assert torch._C._len_torch_function_stack() == depth
    assert [ft.node(n).label for n in ft.order] == ["input", "mul"]
    assert all(math.isnan(v) for v in [*ft.tangent_norms.values(), *ft.edge_norms.values()])
    assert "2 node runs" in repr(ft) and "digraph" in ft.to_dot()
    steps = ft._outputs()[-1].data["text/plain"].splitlines()
    assert steps[1] == "1. input: tangent in, \u2016t\u2016 = nan"


def test_bad_params_raise():
    with pytest.raises(TypeError, match="params must be a mapping"), dg.trace_forward(params=[1]):
        pass
    with pytest.raises(TypeError, match=r"params\['x'\] is a int"), dg.trace_forward(params={"x": 1}):
        pass


def test_a_one_node_trace_says_1_node_run():
    with fwAD.dual_level():
        with dg.trace_forward() as one:
            fwAD.make_dual(torch.ones(3), torch.ones(3))  # an input, and no op reads it
        with dg.trace_forward() as many:
            fwAD.make_dual(torch.ones(3), torch.ones(3)).sin()
    assert len(one.order) == 1 and len(many.order) > 1
    assert one._caption().startswith("forward mode: 1 node run. The arrows")
    assert many._caption().startswith(f"forward mode: {len(many.order)} node runs. The arrows")
    assert repr(one).startswith("<dynagraph.ForwardTrace: 1 node run, ")  # the repr counts as the caption
    assert repr(many).startswith(f"<dynagraph.ForwardTrace: {len(many.order)} node runs, ")
    dg.set_language("zh")
    try:
        said = one._caption(), repr(one)
    finally:
        dg.set_language("en")
    assert said[0].startswith("前向模式：节点共运行 1 次。") and said[1].startswith("<dynagraph.ForwardTrace：节点共运行 1 次，")


def _edges_into(ft, name):
    (nid,) = [n.id for n in ft.nodes if n.kind == "op" and n.name == name]
    return {(ft.node_name(a), slot): v for (a, b, slot), v in ft.edge_norms.items() if b == nid}


def test_a_write_through_a_view_changes_what_the_base_carries():
    # y's tangent changes when its row is scaled in place: the edge into sum is the
    # tangent y carried then (PyTorch's), drawn from the op that wrote it
    with dg.trace_forward() as ft, fwAD.dual_level():
        x = fwAD.make_dual(torch.ones(2, 2, dtype=torch.float64), torch.ones(2, 2, dtype=torch.float64))
        y = x * 1.0
        y[0].mul_(10.0)
        carried = norm(fwAD.unpack_dual(y).tangent)
        y.sum()
    assert _edges_into(ft, "sum") == {("mul_", 0): pytest.approx(carried, rel=1e-12)}
    assert carried != pytest.approx(2.0)  # (what mul made: the old label)
    assert [n.name for n in ft.nodes].count("output") == 1


def test_setitem_is_the_op_that_wrote():
    with dg.trace_forward() as ft, fwAD.dual_level():
        x = fwAD.make_dual(torch.ones(3, dtype=torch.float64), torch.full((3,), 2.0, dtype=torch.float64))
        y = fwAD.make_dual(torch.zeros(2, 3, dtype=torch.float64), torch.zeros(2, 3, dtype=torch.float64))
        y[0] = x
        carried = norm(fwAD.unpack_dual(y).tangent)
        y.sum()
    assert _edges_into(ft, "setitem") == {("input", 0): 0.0, ("input", 1): pytest.approx(norm(torch.full((3,), 2.0)))}
    assert _edges_into(ft, "sum") == {("setitem", 0): pytest.approx(carried, rel=1e-12)}


def test_a_plain_tensor_written_into_is_no_input():
    # y had no tangent before add_: no edge comes from it, and it is no input
    with dg.trace_forward() as ft, fwAD.dual_level():
        x = fwAD.make_dual(torch.ones(3, dtype=torch.float64), torch.full((3,), 2.0, dtype=torch.float64))
        y = torch.zeros(3, dtype=torch.float64)
        y.add_(x)
    assert [n.kind for n in ft.nodes].count("input") == 1
    assert _edges_into(ft, "add_") == {("input", 1): pytest.approx(norm(torch.full((3,), 2.0)))}


def test_a_dual_from_outside_carries_its_tangent_before_the_write():
    with fwAD.dual_level():
        x = fwAD.make_dual(torch.ones(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64))
        with dg.trace_forward(params={"x": x}) as ft:
            x.mul_(4.0)
    assert _edges_into(ft, "mul_") == {("input", 0): pytest.approx(norm(torch.ones(3)))}
    assert ft.tangent_norms[ft.edges[0][0]] == pytest.approx(norm(torch.ones(3)))


def test_a_write_through_a_view_inside_jvp():
    # torch.func.jvp passes wrapped tensors: the write is still found through the view
    seen = {}

    def f(x):
        y = x * 1.0
        y[0].mul_(10.0)
        seen["y"] = norm(fwAD.unpack_dual(y).tangent)
        return y.sum()

    with dg.trace_forward() as ft:
        torch.func.jvp(f, (torch.ones(2, 2, dtype=torch.float64),), (torch.ones(2, 2, dtype=torch.float64),))
    assert _edges_into(ft, "sum") == {("mul_", 0): pytest.approx(seen["y"], rel=1e-12)}


@pytest.mark.parametrize("change", ["view", "setitem", "operator", "sibling"])
def test_an_in_place_change_feeds_the_ops_that_read_the_tensor_after_it(change):
    # y[0].mul_(5), y[1] = v and v *= 3 (v a view of y) change y's tangent: the sum
    # reads the op that changed y, with the tangent PyTorch carries then (the trace
    # showed the older one, and the change as an output that fed nothing; y[1] = v
    # was not recorded at all)
    with dg.trace_forward() as ft, fwAD.dual_level():
        x = fwAD.make_dual(torch.ones(3, dtype=torch.float64), torch.arange(1.0, 4.0, dtype=torch.float64))
        y = x * 1
        if change == "sibling":  # y is a view too: y[0] views what y views, not y
            y = y[:]
            y[0].mul_(5)
        elif change == "view":
            y[0].mul_(5)
        elif change == "setitem":
            y[1] = x[0] * 7
        else:
            v = y[1:]
            v *= 3
        read = norm(fwAD.unpack_dual(y).tangent)  # what the sum reads
        y.sum()
    (total,) = [n.id for n in ft.nodes if ft.node_name(n.id) == "sum"]
    (into,) = [e for e in ft.edge_norms if e[1] == total]
    assert ft.node_name(into[0]) == {"view": "mul_", "setitem": "setitem", "operator": "mul_",
                                         "sibling": "mul_"}[change]
    assert math.isclose(ft.edge_norms[into], read, rel_tol=1e-12)
    outputs = [e[0] for e in ft.edge_norms if ft.node_name(e[1]) == "output"]
    assert outputs == [total]  # the change feeds the sum: no other output


def test_an_in_place_change_leaves_views_that_share_no_element():
    with dg.trace_forward() as ft, fwAD.dual_level():
        x = fwAD.make_dual(torch.ones(2, 2, dtype=torch.float64), torch.ones(2, 2, dtype=torch.float64))
        y = x * 1
        row, col = y[1], y[:, 0]
        y[0, 0].mul_(5)  # changes col (it holds y[0, 0]), not row
        row.exp()
        col.exp()
    exps = [n.id for n in ft.nodes if ft.node_name(n.id) == "exp"]
    read = [ft.node_name(src) for src, dst, _ in ft.edge_norms if dst in exps]
    assert read == ["getitem", "mul_"]


def test_a_dual_made_outside_the_block_is_one_input_however_many_ops_read_it():
    with fwAD.dual_level():
        x = fwAD.make_dual(torch.ones(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64))
        with dg.trace_forward() as ft:
            x.sin() + x.cos()
    inputs = [n.id for n in ft.nodes if n.kind == "input"]
    assert len(inputs) == 1
    assert sorted(ft.node_name(dst) for src, dst, _ in ft.edge_norms if src == inputs[0]) == ["cos", "sin"]
