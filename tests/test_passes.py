"""track_passes: each node's derivative order, checked against the nodes that exist
before and after each autograd.grad call (PyTorch's own node objects)."""

import pytest
import torch

import dynagraph as dg
from dynagraph import _dot, _page, _picture, passes
from dynagraph._walk import reach
from dynagraph.capture import named_roots, walk
from dynagraph.graph import record_of


def reachable(*tensors):
    """Every autograd node behind ``tensors`` (PyTorch's objects, by identity)."""
    found = set()
    reach([t.grad_fn for t in tensors if t.grad_fn is not None], lambda fn: found.add(fn) or True)
    return found


def expected_orders(x, passes_wanted):
    """Run the forward and ``passes_wanted`` nested ``autograd.grad`` calls inside
    ``track_passes``; return the last gradient and {node: the call that made it}, found
    from which nodes exist before and after each call."""
    made = {}
    with dg.track_passes():
        out = (x.sin() * x * x.exp()).sum()
        for fn in reachable(out):
            made[fn] = 0
        for k in range(1, passes_wanted + 1):
            (out,) = torch.autograd.grad(out.sum(), x, create_graph=True)
            for fn in reachable(out) - made.keys():
                made[fn] = k
    return out, made


@pytest.mark.parametrize("order", [1, 2, 3])
def test_derivative_order_matches_the_pass_that_made_each_node(order):
    x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64, requires_grad=True)
    out, made = expected_orders(x, order)
    nodes, _, fns = walk(named_roots(out), {})
    checked = [(n.derivative, made[fn]) for n, fn in zip(nodes, fns) if n.kind == "op"]
    assert [got for got, _ in checked] == [want for _, want in checked]
    assert {want for _, want in checked} == set(range(order + 1))  # every pass shows in the graph


@pytest.mark.filterwarnings(r"ignore:Using backward\(\) with create_graph")
def test_backward_with_create_graph_marks_the_grad_it_accumulates():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    with dg.track_passes():
        y = (w ** 3).sum()
        before = reachable(y)
        y.backward(create_graph=True)
    nodes, _, fns = walk(named_roots(w.grad), {})
    ops = [(n.derivative, fn in before) for n, fn in zip(nodes, fns) if n.kind == "op"]
    assert ops and all(d == (0 if old else 1) for d, old in ops)
    w.grad = None  # (break the cycle backward(create_graph=True) makes)


def test_plain_backward_marks_the_forward_ops_after_a_gradient():
    x = torch.tensor([0.5, -1.0], requires_grad=True)
    with dg.track_passes():
        (g,) = torch.autograd.grad((x.sin() * x).sum(), x, create_graph=True)
        penalty = (g.norm() - 1) ** 2
        before = {n.derivative for n in dg.draw(penalty).nodes if n.kind == "op"}
        made = reachable(g)
        penalty.backward()  # no create_graph: it makes no node, and marks what it ran through
    nodes, _, fns = walk(named_roots(penalty), {})
    assert None in before
    after = [n.derivative for n, fn in zip(nodes, fns) if n.kind == "op" and fn not in made]
    assert after and after == [0] * len(after)  # norm, sub, pow: forward ops, made by no pass


def test_a_live_recording_graph_carries_the_orders():
    x = torch.tensor([0.5, -1.0], requires_grad=True)
    with dg.track_passes(), dg.live(params={"x": x}) as rec:
        y = (x.sin() * x).sum()
        before = reachable(y)
        (g,) = torch.autograd.grad(y, x, create_graph=True)
    ops = {fn for fn in before | reachable(g) if "AccumulateGrad" not in fn.name()}
    want = sorted(0 if fn in before else 1 for fn in ops)  # PyTorch's node sets
    got = sorted(n.derivative for n in rec.graph().nodes if n.kind == "op")
    assert got == want and want.count(1) > 0


def test_picture_legend_and_hover_name_the_passes():
    x = torch.tensor([0.5, -1.0], requires_grad=True)
    out, _ = expected_orders(x, 2)
    graph = dg.draw(out)
    dot = graph.to_dot()
    assert "purple = first backward, teal = second backward" in dot
    assert dot.count('color="#7048e8" penwidth=2') == sum(n.derivative == 1 for n in graph.nodes)
    info = _page._info(record_of(graph), _picture.picture(record_of(graph)), {})
    assert any("made by: the second backward pass" in text for text in info.values())


def test_without_a_backward_no_legend():
    x = torch.tensor([0.5], requires_grad=True)
    with dg.track_passes():
        y = x.sin() * 2
    assert "outline:" not in dg.draw(y).to_dot()
    assert {n.derivative for n in dg.draw(y).nodes} == {None}  # no pass ran through them


def test_engine_entry_restored_even_when_the_block_raises():
    before = torch.autograd._engine_run_backward
    with pytest.raises(ZeroDivisionError, match="division"), dg.track_passes():
        assert torch.autograd._engine_run_backward is not before
        1 / 0
    assert torch.autograd._engine_run_backward is before


def test_torch_func_transforms_still_run_inside():
    x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    with dg.track_passes():
        got = torch.func.vmap(torch.func.grad(lambda v: (v.sin() * v).sum()))(x[:, None])
    torch.testing.assert_close(got[:, 0], x.cos() * x + x.sin())


def test_what_torch_func_transforms_make_gets_no_mark():
    """As the docstring says: torch.func runs the engine on tensors it wraps."""
    x = torch.tensor(0.5, requires_grad=True)
    with dg.track_passes():
        y = torch.func.grad(torch.func.grad(torch.sin))(x)
    torch.testing.assert_close(y, -torch.sin(x.detach()))
    assert y.grad_fn is not None and passes.derivative_of(y.grad_fn) is None


def test_pass_name():
    assert [_dot.pass_name(k) for k in range(5)] == [
        "forward", "first backward", "second backward", "third backward", "4th backward"]


def test_blocks_in_two_threads_that_end_out_of_order_leave_torch_s_entry():
    """The engine's entry is process-wide: a block that ends while another thread's is still
    open must not take the watcher from under it, and the last to end puts torch's back."""
    import threading
    before = torch.autograd._engine_run_backward
    opened, first_ended, marks = threading.Event(), threading.Event(), {}

    def second():
        with dg.track_passes():
            opened.set()
            first_ended.wait(10)
            x = torch.tensor([0.5], requires_grad=True)
            g, = torch.autograd.grad((x.sin() * x).sum(), x, create_graph=True)
            marks["second"] = {n.derivative for n in dg.draw(g).nodes if n.kind == "op"}

    thread = threading.Thread(target=second)
    with dg.track_passes():
        thread.start()
        assert opened.wait(10)
    first_ended.set()  # the first block ended, the second is still open
    thread.join(10)
    assert marks["second"] == {0, 1}  # still watched after the first block ended
    assert torch.autograd._engine_run_backward is before


def test_a_watcher_left_under_another_patch_marks_nothing_and_is_reused():
    before = torch.autograd._engine_run_backward
    calls = []

    def other(*args, **kwargs):  # a patch put over ours inside the block, taken out after it
        calls.append(1)
        return watcher(*args, **kwargs)

    x = torch.tensor([0.5], requires_grad=True)
    with dg.track_passes():
        watcher = torch.autograd._engine_run_backward
        torch.autograd._engine_run_backward = other
    assert torch.autograd._engine_run_backward is other  # ours could not be taken out from under it
    torch.autograd._engine_run_backward = watcher  # the other patch ends: ours is back, idle
    y = (x.sin() * x).sum()
    g, = torch.autograd.grad(y, x, create_graph=True)
    assert {n.derivative for n in dg.draw(g).nodes} == {None}  # no block open: nothing marked
    with dg.track_passes():
        assert torch.autograd._engine_run_backward is watcher  # reused, not wrapped again
        g, = torch.autograd.grad((x.sin() * x).sum(), x, create_graph=True)
    assert torch.autograd._engine_run_backward is before
    assert {n.derivative for n in dg.draw(g).nodes if n.kind == "op"} == {0, 1}


def test_a_pass_through_a_forward_op_on_a_gradient_gets_the_order_behind_it():
    """``h = g * w`` is a forward op (0) on a gradient (1): every later pass through it runs
    through the first backward's nodes, so its order is 2, however many passes met it before."""
    x = torch.tensor([0.5, 1.0], requires_grad=True)
    w = torch.tensor([2.0, 3.0], requires_grad=True)
    with dg.track_passes():
        g, = torch.autograd.grad((x.sin() * x).sum(), x, create_graph=True)
        h = g * w
        a, = torch.autograd.grad(h.sum(), x, create_graph=True)
        b, = torch.autograd.grad((h * 3).sum(), x, create_graph=True)  # (the second pass through h)
    assert [passes.derivative_of(t.grad_fn) for t in (g, h, a, b)] == [1, 0, 2, 2]


def test_backward_with_create_graph_marks_the_grad_of_leaves_behind_an_earlier_pass():
    w = torch.tensor([2.0, 3.0], requires_grad=True)
    xi = torch.ones(3, 2, requires_grad=True)
    with dg.track_passes():
        g, = torch.autograd.grad((xi * w).sin().sum(), xi, create_graph=True)
        (g ** 2).sum().backward(create_graph=True)
    assert passes.derivative_of(w.grad.grad_fn) == 2
    assert passes.derivative_of(xi.grad.grad_fn) == 2
