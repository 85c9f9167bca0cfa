"""trace_backward: the order autograd ran the nodes, and gradient norms checked against .grad."""

import gc
import re
import weakref
from collections import Counter

import pytest
import torch
from torch import nn

import dynagraph as dg
from dynagraph import _dot, _page, _picture, backward
from dynagraph.graph import record_of

from _helpers import Square, check_edge_norms, html_of, outputs_of, page_data, replayed, stored


def traced(loss, params=None, **backward_args):
    with dg.trace_backward(loss, params=params) as bt:
        loss.backward(**backward_args)
    return bt


def first_runs(bt):
    """Node id -> position of its first run in ``bt.order``."""
    first = {}
    for k, nid in enumerate(bt.order):
        first.setdefault(nid, k)
    return first


def leaf(bt, label):
    (node,) = [n for n in bt.nodes if n.name == "AccumulateGrad" and n.label == label]
    return node.id


def one(bt, src, dst):
    """The norm of the one edge from ``src`` to ``dst`` (there must be exactly one)."""
    (value,) = [v for (a, b, _), v in bt.edge_norms.items() if (a, b) == (src, dst)]
    return value


def pairs(by_edge):
    """``{(src, dst): how many edges}`` of a trace's ``edge_norms`` or ``notes``."""
    return Counter((src, dst) for src, dst, _ in by_edge)


def consumers(bt, nid):
    return [dst for src, dst in bt.edges if src == nid]


def mlp():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2), nn.Tanh(), nn.Linear(2, 1))
    return model, model(torch.randn(5, 3)).pow(2).mean()


def diamond():
    x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    a = x * 2
    return None, (a.exp() * a.sin() + a).sum()


@pytest.mark.parametrize("factory", [mlp, diamond])
def test_every_node_runs_after_all_its_consumers(factory):
    model, loss = factory()
    bt = traced(loss, params=model)
    first = first_runs(bt)
    assert set(first) == {n.id for n in bt.nodes if n.kind != "output"}
    assert len(bt.order) == len(first)  # one pass: each node once
    for src, dst in bt.edges:
        if dst in first:  # the output node has no autograd node
            assert first[dst] < first[src], (bt.nodes[src].name, bt.nodes[dst].name)


def test_graph_title_that_is_no_string_raises_at_once():
    x = torch.ones(2, requires_grad=True)
    y = (2 * x).sum()
    with dg.trace_backward(y) as bt:
        y.backward()
    with pytest.raises(TypeError, match="title must be a string; got int"):
        bt.graph(title=3)  # was an AttributeError from the DOT writer when the picture was made
    assert bt.graph(title="doubled").title == "doubled"


def test_parameters_accumulate_grad_is_in_the_order():
    model, loss = mlp()
    bt = traced(loss, params=model)
    ran = [bt.nodes[i].label for i in bt.order if bt.nodes[i].kind == "parameter"]
    assert sorted(ran) == sorted(name for name, _ in model.named_parameters())


def test_edge_norm_from_a_leaf_is_its_grad_norm():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    w = torch.tensor([3.0, -1.0], requires_grad=True)
    bt = traced((x * w).sum() * 2, params={"x": x, "w": w})
    for name, t in (("x", x), ("w", w)):
        (dst,) = consumers(bt, leaf(bt, name))
        assert one(bt, leaf(bt, name), dst) == pytest.approx(t.grad.norm().item())
    assert x.grad.norm().item() == pytest.approx(2 * 10 ** 0.5)  # 2 * |w|
    assert pairs(bt.edge_norms) == Counter(bt.edges)


def test_edge_norms_of_parameters_match_their_grads():
    model, loss = mlp()
    bt = traced(loss, params=model)
    for name, p in model.named_parameters():
        (dst,) = consumers(bt, leaf(bt, name))
        assert one(bt, leaf(bt, name), dst) == pytest.approx(p.grad.norm().item(), rel=1e-6)
    assert pairs(bt.edge_norms) == Counter(bt.edges)


def test_edge_into_the_output_carries_the_seed_gradient():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = 2 * x
    bt = traced(y, gradient=torch.tensor([3.0, 4.0]))
    (out,) = [n.id for n in bt.nodes if n.kind == "output"]
    (src,) = [s for s, d in bt.edges if d == out]
    assert one(bt, src, out) == pytest.approx(5.0)
    assert one(bt, leaf(bt, "input"), src) == pytest.approx(10.0)


def test_leaf_used_twice_by_one_op_gets_one_norm_per_edge_and_their_sum_merged():
    """``x * x`` sends ``x`` one gradient per input (each ``x``, here (1, 2)); ``x.grad``
    is their sum (2x): each edge is labelled with its own, the merged view with the sum."""
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    bt = traced((x * x).sum(), params={"x": x})
    (dst,) = set(consumers(bt, leaf(bt, "x")))
    each = {slot: v for (src, d, slot), v in bt.edge_norms.items() if (src, d) == (leaf(bt, "x"), dst)}
    assert each == {0: pytest.approx(x.norm().item()), 1: pytest.approx(x.norm().item())}
    assert bt.merged_norms[(leaf(bt, "x"), dst)] == pytest.approx(x.grad.norm().item())  # |2x|


def test_x_times_x_plus_3x_labels_the_edges_into_x_2_2_and_3():
    """The replay lesson 01 draws: at x = 2 the edges into x carry 2, 2 and 3, which add up
    to x.grad = 7 (the merged edge from x * x would carry 4)."""
    x = torch.tensor([2.0], requires_grad=True)
    y = x * x + 3 * x
    bt = traced(y, params={"x": x})
    into_x = sorted(v for (src, _, _), v in bt.edge_norms.items() if src == leaf(bt, "x"))
    assert into_x == [2.0, 2.0, 3.0] and sum(into_x) == x.grad.item() == 7.0
    labels = [float(t) for t in re.findall(r"<TD>([^<]*)</TD>", bt.to_dot())]
    assert sorted(labels) == [1.0, 1.0, 1.0, 2.0, 2.0, 3.0]  # 4 nowhere: each edge its own
    texts = [t for t, _ in bt._overlays().steps]
    assert texts[-1] == "x.grad += the gradient from 3 uses, \u2016g\u2016 = 2, 2, 3"


def test_parallel_edges_drawn_as_one_carry_the_merged_norm():
    """A rolled picture draws the two edges from ``x`` into the loop's ``x * x`` as one
    edge: it is labelled with the norm of their sum (what ``x`` got from that mul), never
    with one edge's own norm; drawn unrolled, each edge has its own."""
    x = torch.tensor([1.0], requires_grad=True)
    h = x
    for _ in range(30):
        h = h * h * 0.5 + 0.5  # stays 1, and so does its gradient: each edge from x carries 0.5
    bt = traced(h, params={"x": x})
    (mul,) = set(consumers(bt, leaf(bt, "x")))
    each = sorted(v for (src, dst, _), v in bt.edge_norms.items() if (src, dst) == (leaf(bt, "x"), mul))
    merged = bt.merged_norms[(leaf(bt, "x"), mul)]
    assert len(each) == 2 and each[0] == each[1] and each[0] == 0.5 and merged == 1.0
    pic = _picture.picture(record_of(bt.graph()), roll=True)
    assert pic.graph.blocks and pic.graph.blocks[0].repeats == 30
    drawn, _ = _picture._mapped(pic, bt._overlays())
    x_edge = pic.edge((leaf(bt, "x"), mul))
    assert Counter(pic.graph.edges)[x_edge] == 1  # the two edges drawn as one
    labels = dict(zip(pic.graph.edges, _dot._edge_norms(pic.graph.edges, drawn)))
    assert labels[x_edge] == merged
    full = _picture.picture(record_of(bt.graph()), roll=False, max_nodes=None)
    drawn, _ = _picture._mapped(full, bt._overlays())
    from_x = [v for e, v in zip(full.graph.edges, _dot._edge_norms(full.graph.edges, drawn)) if e == (leaf(bt, "x"), mul)]
    assert from_x == each


def test_two_outputs_of_one_node_are_two_edges_and_taken_together_merged():
    x = torch.tensor([3.0, 4.0], requires_grad=True)
    a, b = x.unbind()
    bt = traced(a * b)  # d/da = b = 4, d/db = a = 3: the edges carry 4 and 3, (4, 3) together
    unbind = [n.id for n in bt.nodes if n.name == "UnbindBackward0"][0]
    (mul,) = set(consumers(bt, unbind))
    each = {slot: v for (src, dst, slot), v in bt.edge_norms.items() if (src, dst) == (unbind, mul)}
    assert each == {0: pytest.approx(4.0), 1: pytest.approx(3.0)}
    assert bt.merged_norms[(unbind, mul)] == pytest.approx(5.0)


def test_custom_function_runs_and_passes_its_gradient():
    x = torch.tensor([1.0, -3.0], requires_grad=True)
    bt = traced(Square.apply(x).sum(), params={"x": x})
    custom = [n.id for n in bt.nodes if n.kind == "custom"][0]
    assert [bt.nodes[i].name for i in bt.order] == ["SumBackward0", bt.nodes[custom].name,
                                                    "AccumulateGrad"]
    assert one(bt, leaf(bt, "x"), custom) == pytest.approx(x.grad.norm().item())
    assert torch.equal(x.grad, 2 * x.detach())


def test_backward_twice_with_retain_graph_doubles_the_order():
    model, loss = mlp()
    once = len(traced(loss, params=model, retain_graph=True).order)
    with dg.trace_backward(loss, params=model) as bt:
        loss.backward(retain_graph=True)
        loss.backward()
    assert len(bt.order) == 2 * once
    assert bt.order[:once] == bt.order[once:]


def test_hooks_are_removed_after_the_block():
    model, loss = mlp()
    bt = traced(loss, params=model, retain_graph=True)
    order, norms = list(bt.order), dict(bt.edge_norms)
    loss.backward()  # runs again over the same nodes, now unhooked
    assert bt.order == order and bt.edge_norms == norms


def test_hooks_are_removed_and_norms_read_when_the_block_raises():
    model, loss = mlp()
    with pytest.raises(RuntimeError, match="boom"):
        with dg.trace_backward(loss, params=model) as bt:
            loss.backward(retain_graph=True)
            raise RuntimeError("boom")
    order = list(bt.order)
    assert pairs(bt.edge_norms) == Counter(bt.edges)
    loss.backward()
    assert bt.order == order


def counted(reads, name, method):
    """``method`` that first notes its ``name`` in ``reads``."""
    def wrapper(self, *args, **kwargs):
        reads.append(name)
        return method(self, *args, **kwargs)
    return wrapper


def test_norms_are_read_with_one_synchronisation(monkeypatch):
    reads = []
    for name in ("tolist", "item", "__float__", "cpu", "numpy"):  # every way to read a value
        monkeypatch.setattr(torch.Tensor, name, counted(reads, name, getattr(torch.Tensor, name)))
    model, loss = mlp()
    with dg.trace_backward(loss, params=model) as bt:
        loss.backward()
        assert reads == [] and bt.edge_norms == {}  # nothing read while backward runs
    assert reads == ["tolist"]
    assert len(bt.edge_norms) == len(bt.edges)


def trace_mlp():
    model, loss = mlp()
    bt = traced(loss, params=model)
    return bt, [weakref.ref(t) for t in (loss, *model.parameters())] + [weakref.ref(model)]


def test_trace_keeps_no_tensor_alive():
    bt, refs = trace_mlp()
    gc.collect()
    assert [r() for r in refs] == [None] * len(refs)
    assert len(bt.order) == len(bt.nodes) - 1


def test_trace_does_not_change_gradients():
    def grads(trace):
        model, loss = mlp()
        if trace:
            traced(loss, params=model)
        else:
            loss.backward()
        return [p.grad for p in model.parameters()]

    assert all(torch.equal(a, b) for a, b in zip(grads(False), grads(True), strict=True))


def test_repr_lists_the_first_runs():
    x = torch.ones(2, requires_grad=True)
    bt = traced((2 * x).sum())
    assert repr(bt) == ("<dynagraph.BackwardTrace: 3 node runs, 3 edge norms>\n"
                        "  SumBackward0 -> MulBackward0 -> AccumulateGrad")
    h = x
    for _ in range(13):
        h = h * 1.0
    long = traced(h.sum())
    assert repr(long).endswith(" ... (+3)")
    assert bt._repr_mimebundle_()[0]["text/plain"] == repr(bt)


def test_picture_marks_order_and_norms():
    x = torch.tensor([3.0, 4.0], requires_grad=True)
    bt = traced((2 * x).sum(), params={"x": x})
    dot = bt.to_dot()
    for k in range(1, len(bt.order) + 1):
        assert f"#{k}" in dot
    for src, dst in bt.edges:
        assert f"{one(bt, src, dst):.3g}" in dot  # |(2, 2)| = 2.83 into x, ...
    assert bt.graph().counts() == dg.draw((2 * x).sum()).counts()


def test_roots_must_be_tensors():
    with pytest.raises(TypeError, match="roots must be a tensor"):
        with dg.trace_backward(3.0):
            pass


# Tensors a real training script has: the trace must never abort the user's backward.

def test_sparse_embedding_backward_finishes_and_is_traced():
    torch.manual_seed(0)
    emb = nn.Embedding(10, 3, sparse=True)
    loss = emb(torch.tensor([1, 2, 2])).pow(2).sum()
    bt = traced(loss, params=emb)
    assert emb.weight.grad is not None and emb.weight.grad.is_sparse
    (dst,) = consumers(bt, leaf(bt, "weight"))
    want = torch.linalg.vector_norm(emb.weight.grad.to_dense().double()).item()
    assert one(bt, leaf(bt, "weight"), dst) == pytest.approx(want, rel=1e-6)
    assert pairs(bt.edge_norms) == Counter(bt.edges) and bt.notes == {}


def test_complex_gradient_norm_keeps_the_imaginary_part():
    z = torch.tensor([2 + 0j], requires_grad=True)
    bt = traced((z * (1 + 1j)).real.sum(), params={"z": z})
    (dst,) = consumers(bt, leaf(bt, "z"))
    want = torch.linalg.vector_norm(z.grad.to(torch.complex128)).item()
    assert want == pytest.approx(2 ** 0.5)
    assert one(bt, leaf(bt, "z"), dst) == pytest.approx(want)


def test_complex_norms_on_every_edge_match_hooks():
    torch.manual_seed(0)
    z = torch.randn(3, dtype=torch.complex64, requires_grad=True)
    bt, sent = replayed((z * z).sin().abs().sum(), {"z": z})  # complex on every edge up to abs
    check_edge_norms(bt, sent, rel=1e-5)  # (the oracle took the real part only, and disagreed)


def test_half_gradient_norm_does_not_overflow():
    w = torch.zeros(100, dtype=torch.float16, requires_grad=True)
    bt = traced((w.float() * 9999.9).sum(), params={"w": w})  # fp16 grads of 9999.9: norm 99,999
    (dst,) = consumers(bt, leaf(bt, "w"))
    want = torch.linalg.vector_norm(w.grad.double()).item()
    assert one(bt, leaf(bt, "w"), dst) == pytest.approx(want, rel=1e-6)


def test_meta_gradients_get_notes_and_backward_finishes():
    model = nn.Linear(3, 2, device="meta")
    loss = model(torch.ones(1, 3, device="meta")).sum()
    bt = traced(loss, params=model)
    assert model.weight.grad is not None and model.weight.grad.device.type == "meta"
    assert pairs(bt.notes) == Counter(bt.edges) and bt.edge_norms == {}
    assert all("meta device" in note for note in bt.notes.values())
    assert f"0 edge norms, {len(bt.edges)} without a norm (see .notes)" in repr(bt)


def test_a_failing_norm_never_aborts_the_backward(monkeypatch):
    def broken(grad):
        raise RuntimeError("no kernel")

    monkeypatch.setattr(backward, "norm_of", broken)
    model, loss = mlp()
    bt = traced(loss, params=model)
    assert all(p.grad is not None for p in model.parameters())
    assert bt.edge_norms == {} and pairs(bt.notes) == Counter(bt.edges)
    assert all("RuntimeError: no kernel" in note for note in bt.notes.values())


def test_block_without_backward_warns():
    model, loss = mlp()
    with pytest.warns(UserWarning, match=r"no backward ran inside the block \(0 node runs\)"):
        with dg.trace_backward(loss, params=model) as bt:
            loss.sum()  # forgot .backward()
    assert bt.order == []


def test_gradients_summed_by_autograd_have_each_edge_norm_before_the_sum():
    """``a`` is used twice: autograd adds the two gradients (in place where it can),
    and each edge still shows the norm of the gradient sent along it."""
    x = torch.linspace(-2, 2, 50, requires_grad=True)
    a = x * 2
    loss = (a.sin() + a.cos()).sum()
    bt = traced(loss, params={"x": x})
    names = {n.id: n.name for n in bt.nodes}
    mul = next(i for i, n in names.items() if n == "MulBackward0")
    got = {names[dst]: v for (src, dst, _), v in bt.edge_norms.items() if src == mul}
    a = a.detach()
    assert got["SinBackward0"] == pytest.approx(torch.linalg.vector_norm(a.cos()).item(), rel=1e-6)
    assert got["CosBackward0"] == pytest.approx(torch.linalg.vector_norm(a.sin()).item(), rel=1e-6)
    assert torch.allclose(x.grad, 2 * (a.cos() - a.sin()))


def test_step_texts_say_what_ran_and_the_norm_of_the_gradient_it_was_sent():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    w = torch.tensor([3.0, 4.0], requires_grad=True)
    y = (x * w + x).sum()
    with dg.trace_backward(y, params={"x": x, "w": w}) as bt:
        y.backward()
    texts = {t.split(" ")[0]: t for t, _ in bt._overlays().steps}
    ones = torch.ones(2).norm().item()  # the gradient of a sum, sent to each op and to x by the add
    assert texts["SumBackward0"] == "SumBackward0 ran: gradient in, \u2016g\u2016 = 1"
    assert texts["AddBackward0"] == f"AddBackward0 ran: gradient in, \u2016g\u2016 = {ones:.2g}"
    # x is used twice: by the add (gradient 1) and by the mul (gradient w); its .grad is their sum
    assert texts["x.grad"] == f"x.grad += the gradient from 2 uses, \u2016g\u2016 = {ones:.2g}, {w.norm().item():.2g}"
    assert texts["w.grad"] == f"w.grad += the gradient, \u2016g\u2016 = {x.norm().item():.2g}"
    assert torch.equal(x.grad, w.detach() + 1) and torch.equal(w.grad, x.detach())


def test_step_texts_and_the_heading_read_in_chinese():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    lin = nn.Linear(2, 1)
    y = (lin(x) + x.sum()).sum()
    with dg.trace_backward(y, params={"x": x, "lin.weight": lin.weight, "lin.bias": lin.bias}) as bt:
        y.backward()
    dg.set_language("zh")
    try:
        texts = [t for t, _ in bt._overlays().steps]
        heading = outputs_of(bt)["steps"]["text/plain"].splitlines()[0]
    finally:
        dg.set_language("en")
    assert heading == (f"反向传播：节点共运行 {len(bt.order)} 次。箭头指向自动微分传递梯度的方向：从输出回到输入")
    assert texts[0] == "SumBackward0 已运行：收到梯度，\u2016g\u2016 = 1"  # names and numbers as they are
    into_x = sorted(v for (src, _, _), v in bt.edge_norms.items() if bt.nodes[src].label == "x")
    assert f"x.grad += 来自 2 处使用的梯度，\u2016g\u2016 = {into_x[1]:.2g}, {into_x[0]:.2g}" in texts
    assert "lin.bias.grad += 梯度，\u2016g\u2016 = 1" in texts  # the gradient of a sum: 1



def test_the_collector_is_paused_during_a_traced_backward_and_on_again_after():
    """The hooks make a tensor per gradient norm: no collection may start among them.
    Paused from the first node to autograd's end-of-pass callback, on again after; on
    again at the block's end when the backward raised; left off when it was off."""
    model, loss = mlp()
    seen = []
    x = next(model.parameters())
    x.register_hook(lambda g: seen.append(gc.isenabled()))
    with dg.trace_backward(loss, params=model):
        loss.backward(retain_graph=True)
        assert gc.isenabled()  # on again as soon as the pass ended, inside the block
        loss.backward()
    assert seen == [False, False] and gc.isenabled()

    class Boom(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1.0

        @staticmethod
        def backward(ctx, g):
            raise RuntimeError("boom")
    model, loss = mlp()
    loss = Boom.apply(loss)
    with pytest.raises(RuntimeError, match="boom"), dg.trace_backward(loss, params=model):
        loss.backward()
    assert gc.isenabled()
    gc.disable()
    try:
        model, loss = mlp()
        traced(loss, params=model)
        assert not gc.isenabled()
    finally:
        gc.enable()


# -- every edge against PyTorch's own hooks, with hooks of the user's ----------------------

def views_model():
    """Views, a transpose, a slice, a select, a negation and a clone, between matmuls."""
    torch.manual_seed(0)
    w = torch.randn(6, 4, requires_grad=True)
    x = torch.randn(3, 2, 4, requires_grad=True)
    h = x.reshape(6, 4) @ w.t()
    h = h.view(3, 2, 6).transpose(1, 2)[:, 1:5].select(2, 0).neg().clone()
    return {"w": w, "x": x}, h.unsqueeze(0).sin().pow(2).sum()


@pytest.mark.parametrize("factory", [views_model, mlp])
def test_every_edge_norm_equals_the_norm_of_what_was_sent(factory):
    """Every edge's norm equals the norm PyTorch's own hooks take of the gradient sent
    along it (views, a transpose, a slice, a select between matmuls; an MLP)."""
    params, loss = factory()
    bt, sent = replayed(loss, params)
    check_edge_norms(bt, sent, rel=1e-5)


def view_of_square():
    """``y = (x * 3).view(4)``: ViewBackward0 gets the gradient MulBackward0 sends it."""
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = (x * 3).view(4)
    return x, y


def view_edge(bt):
    (view,) = [n.id for n in bt.nodes if n.name == "ViewBackward0"]
    (src,) = [s for s, d in bt.edges if d == view]
    return src, view


def test_a_tensor_hook_that_replaces_the_gradient_is_seen():
    x, y = view_of_square()
    z = y * 1.0
    y.register_hook(lambda g: g * 10)  # runs before ViewBackward0: it sends 10x what it got
    loss = z.pow(2).sum()
    bt = traced(loss, params={"x": x})
    assert one(bt, *view_edge(bt)) == pytest.approx((2 * z * 10).norm().item())


def test_a_tensor_hook_that_changes_the_gradient_in_place_is_seen():
    x, y = view_of_square()
    z = y * 1.0
    y.register_hook(lambda g: g.mul_(10))  # the same tensor, changed: its version counter moves
    loss = z.pow(2).sum()
    bt = traced(loss, params={"x": x})
    assert one(bt, *view_edge(bt)) == pytest.approx((2 * z * 10).norm().item())


def test_a_backward_over_other_roots_that_adds_to_the_gradient_is_seen():
    x, y = view_of_square()
    traced_part, other = (y * 1.0).pow(2).sum(), (y * 5.0).sum()  # other: not in the traced graph
    with dg.trace_backward(traced_part, params={"x": x}) as bt:
        (traced_part + other).backward()
    want = (2 * y.detach() + 5.0).norm().item()  # what ViewBackward0 got: both consumers' gradients
    assert one(bt, *view_edge(bt)) == pytest.approx(want)


def test_a_post_hook_of_someone_else_on_the_node_is_seen():
    x, y = view_of_square()
    z = y * 1.0
    y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: (grad_inputs[0] * 10,))  # runs first
    loss = z.pow(2).sum()
    bt = traced(loss, params={"x": x})
    assert one(bt, *view_edge(bt)) == pytest.approx((2 * z * 10).norm().item())
    assert x.grad.norm().item() == pytest.approx((2 * z * 10 * 3).norm().item())


def test_no_gradient_is_kept_alive_when_backward_raises():
    x, y = view_of_square()
    loss = (y * 1.0).pow(2).sum()
    got = []

    def fail(g):  # runs after MulBackward0 sent g, before ViewBackward0
        got.append(weakref.ref(g))
        raise RuntimeError("stop")

    y.register_hook(fail)
    with pytest.raises(RuntimeError, match="stop"), dg.trace_backward(loss, params={"x": x}):
        loss.backward()
    gc.collect()
    assert got and got[0]() is None


def test_a_hook_that_changes_the_gradient_through_data_is_seen():
    """Found by fuzzing a reuse of the consumer's norm for view-like nodes (reverted): a
    change through ``.data`` does not move the version counter, so only a norm taken
    of what the node sends is right."""
    x = torch.ones(3, 4, requires_grad=True)
    y = x.t()

    def scale(g):  # changes g in place through .data, returns None
        g.data.mul_(10)

    y.register_hook(scale)
    loss = (y * 1.0).sum()
    bt = traced(loss, params={"x": x})
    (t,) = [n.id for n in bt.nodes if n.name == "TBackward0"]
    assert one(bt, leaf(bt, "x"), t) == pytest.approx(x.grad.norm().item())  # 34.6, not 3.46


def test_an_inference_mode_gradient_gets_norms():
    """Also found by that fuzzing: a gradient made under ``inference_mode`` has no
    version counter to read; every edge still gets its norm."""
    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        @torch.inference_mode()
        def backward(ctx, g):
            return g * 2

    x = torch.ones(3, 4, requires_grad=True)
    loss = Double.apply(x.t().unsqueeze(0)).sum()
    bt = traced(loss, params={"x": x})
    assert not bt.notes
    assert len(bt.edge_norms) == len(bt.edges)


def test_a_replay_of_a_long_loop_stays_under_the_output_budget():
    """12,000 iterations of a tiny loop: the weight's step listed the 12,000 norms it was
    sent, and each loop edge's norm per iteration went to the page in full: a 313 KB
    output (40,000 iterations: 546 KB)."""
    w = torch.tensor([0.9], requires_grad=True)
    y = torch.ones(1, requires_grad=True)
    for _ in range(12_000):
        y = torch.tanh(y * w) + 0.1
    loss = y.sum()
    with dg.trace_backward(loss, params={"w": w}) as bt:
        loss.backward()
    assert stored(bt) < _page.MAX_BYTES
    data = page_data(html_of(bt))
    assert 0 < sum(map(len, data["norms"].values())) <= _picture.MAX_SERIES_VALUES
    (w_step,) = [text for text in data["texts"] if text.startswith("w.grad")]
    assert w_step.split(" = ")[1].count(", ") == backward.LISTED_NORMS and "\u2026" in w_step, w_step
    assert w_step.startswith("w.grad += the gradient from 12000 uses")


def test_listed_norms_keep_the_first_ones_and_the_last():
    assert backward._listed([1.0, 0.5]) == "1, 0.5"
    assert backward._listed([float(k) for k in range(1, 11)]) == "1, 2, 3, 4, 5, \u2026, 10"


def test_merged_norms_follow_the_last_pass_as_edge_norms_do():
    """Two passes over one graph (``retain_graph``) with different seeds: every norm, per
    edge and merged, is the last pass's (a single edge's merged norm kept the first)."""
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * x + 3 * x
    with dg.trace_backward(y, params={"x": x}) as bt:
        y.backward(torch.ones(2), retain_graph=True)
        y.backward(torch.full((2,), 10.0))
    for (src, dst), v in bt.merged_norms.items():
        each = [n for (a, b, _), n in bt.edge_norms.items() if (a, b) == (src, dst)]
        if len(each) == 1:
            assert v == each[0]
    (out,) = [n.id for n in bt.nodes if n.kind == "output"]
    (add,) = [src for src, dst in bt.edges if dst == out]
    assert bt.merged_norms[(add, out)] == pytest.approx(torch.full((2,), 10.0).norm().item())
    (square,) = [dst for (src, dst), n in Counter(bt.edges).items() if src == leaf(bt, "x") and n == 2]
    assert bt.merged_norms[(leaf(bt, "x"), square)] == pytest.approx((10 * 2 * x.detach()).norm().item())


def test_a_one_node_trace_says_1_node_run():
    x = torch.ones(3, requires_grad=True)
    loss = x.sum()
    with dg.trace_backward(loss) as one:
        torch.autograd.grad(loss, x)  # (no AccumulateGrad: SumBackward0 alone runs)
    many = traced(x.exp().sum())
    assert len(one.order) == 1 and len(many.order) > 1
    assert one._caption().startswith("backward: 1 node run. The arrows")
    assert many._caption().startswith(f"backward: {len(many.order)} node runs. The arrows")
    assert repr(one).startswith("<dynagraph.BackwardTrace: 1 node run, ")  # the repr counts as the caption
    assert repr(many).startswith(f"<dynagraph.BackwardTrace: {len(many.order)} node runs, ")
    dg.set_language("zh")
    try:
        said = one._caption(), repr(one), many._caption()
    finally:
        dg.set_language("en")
    assert said[0].startswith("反向传播：节点共运行 1 次。") and said[1].startswith("<dynagraph.BackwardTrace：节点共运行 1 次，")
    assert said[2].startswith(f"反向传播：节点共运行 {len(many.order)} 次。")


class _Swish(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(x)  # x read by two ops of this module


class _Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return x + torch.tanh(self.fc(x))  # x read by the add and the Linear


def _received(root, params):
    """The oracle, in float64, from plain hooks: ``{(src id, dst id): gradient}`` that node
    ``dst`` sent ``src`` (slots of one output added up; several outputs joined)."""
    from dynagraph.capture import named_roots, param_names_of, walk
    _, _, fns = walk(named_roots(root), param_names_of(params)[0])
    ids = {fn: nid for nid, fn in enumerate(fns) if fn is not None}
    sent, handles = {}, []
    for fn, nid in ids.items():
        def hook(grad_inputs, grad_outputs, nid=nid, fn=fn):
            for (child, out), g in zip(fn.next_functions, grad_inputs):
                if child is not None and g is not None:
                    key = (ids[child], nid, out)
                    sent[key] = sent[key] + g.double() if key in sent else g.double()
        handles.append(fn.register_hook(hook))
    return sent, handles


def test_an_edge_drawn_for_several_edges_carries_all_they_carry_together():
    """A module box reads its input in two ops (x * sigmoid(x), x + f(x)): its drawn edge
    stood for two autograd edges and was labelled with one of them (0.156 where the
    Linear's output was sent 0.652 in all). Each labelled edge must carry the norm of
    all the gradient its autograd edges carry, each source's gradients summed (as its
    .grad would be), the sources' taken as one vector."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), _Swish(), _Residual(), _Swish(), nn.Linear(4, 1))
    with dg.track_modules(model):
        loss = model(torch.randn(5, 4)).sum()
    with dg.trace_backward(loss, params=model, overview=True) as bt:
        sent, handles = _received(loss, model)
        loss.backward()
    for handle in handles:
        handle.remove()
    pic, dot, _ = _picture.drawing(record_of(bt.graph()), bt._overlays())
    assert any(n.kind == "module" for n in pic.graph.nodes)  # (drawn as boxes)
    stands_for = {}
    for src, dst in set(bt.edges):
        new = pic.edge((src, dst))
        if new[0] != new[1] and bt.nodes[dst].kind != "output":
            stands_for.setdefault(new, set()).add((src, dst))
    several = 0
    for (a, b), pairs_ in stands_for.items():
        (label,) = re.findall(rf'n{a} -> n{b} \[[^\n]*?<TD>([^<]+)</TD>', dot)
        by_src = {}
        for (src, dst, out), g in sent.items():
            if (src, dst) in pairs_:
                key = (src, out)
                by_src[key] = by_src[key] + g if key in by_src else g
        want = sum(torch.linalg.vector_norm(g).item() ** 2 for g in by_src.values()) ** 0.5
        assert float(label) == pytest.approx(want, rel=6e-3), (a, b)
        several += len(pairs_) > 1
    assert several >= 2  # (the two swishes' boxes, the residual's)


class _SinCos(nn.Module):
    def forward(self, h):
        self.sin_out = h.sin()  # (kept: a second pass runs back from it alone)
        return self.sin_out + h.cos()


def test_a_drawn_edge_of_edges_from_different_passes_shows_no_norm():
    """Two passes in one block, the second back from the sine alone: the box's input edge
    stands for the edges into sin (its norm from pass 2) and cos (pass 1). It showed what
    the Linear received in pass 2 (the sine's gradient alone), which no pass sent along
    both: now it shows no norm. An edge of one autograd pair keeps its last pass's norm,
    and a single pass draws as before (the box edge labelled with what was received)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), _SinCos(), nn.Linear(4, 1))
    x = torch.randn(2, 4)
    with dg.track_modules(model):
        loss = model(x).sum()
    with dg.trace_backward(loss, params=model, overview=True) as one:
        loss.backward(retain_graph=True)
    with dg.trace_backward(loss, params=model, overview=True) as two:
        loss.backward(retain_graph=True)
        model[1].sin_out.backward(torch.full_like(model[1].sin_out, 3.0))
    lin = next(n.id for n in two.nodes if n.module == "0" and n.name == "AddmmBackward0")
    into = {two.nodes[d].name: k for (s, d), k in two.passes.items() if s == lin}
    assert into == {"SinBackward0": 1, "CosBackward0": 0}
    assert one.passes == {} and lin in one.received_norms and lin not in two.received_norms
    sin = next(n.id for n in two.nodes if n.name == "SinBackward0")
    sent_back = 3 * model[0](x).detach().double().cos()  # what sin sent the Linear in pass 2
    assert two.merged_norms[lin, sin] == pytest.approx(sent_back.norm().item(), rel=1e-5)
    for trace, labelled in ((one, True), (two, False)):
        pic, dot, _ = _picture.drawing(record_of(trace.graph()), trace._overlays())
        a, b = pic.edge((lin, sin))
        assert a != b  # (drawn into the box)
        labels = re.findall(rf'n{a} -> n{b} \[[^\n]*?<TD>([^<]+)</TD>', dot)
        assert labels == ([f"{one.received_norms[lin]:.3g}"] if labelled else []), labels
    saved = dg.load_view(_saved(two))
    assert saved.passes == two.passes and saved.received_norms == two.received_norms


def _saved(view):
    import tempfile
    path = tempfile.mkdtemp() + "/v.json"
    dg.save_view(view, path)
    return path


def test_a_pass_that_raised_is_not_run_on_into_the_next():
    """Three passes: all of it, one that raises as it reaches the first Linear (after sin
    and cos sent it their gradients), one back from the sine alone. The raised pass ran no
    end-of-pass callback, so its norms and the third pass's were taken as one pass: the
    box's input edge stood for cos's edge (pass 2) and sin's (pass 3) and showed what the
    Linear received in pass 3. Each pass is now known by autograd's id of its run: cos's
    edge is from pass 1, sin's from pass 2 (0 the first), and that edge shows no norm.
    The collector, paused by the raised pass, runs again when the next pass ends."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), _SinCos(), nn.Linear(4, 1))
    x = torch.randn(2, 4)
    with dg.track_modules(model):
        loss = model(x).sum()
    h = model[1].sin_out.grad_fn.next_functions[0][0]  # the first Linear's node

    def boom(grad_inputs, grad_outputs):
        raise RuntimeError("boom")

    with dg.trace_backward(loss, params=model, overview=True) as bt:
        loss.backward(retain_graph=True)
        handle = h.register_prehook(lambda grad_outputs: boom(None, grad_outputs))
        with pytest.raises(RuntimeError, match="boom"):
            loss.backward(retain_graph=True)
        handle.remove()
        model[1].sin_out.backward(torch.full_like(model[1].sin_out, 3.0))
        assert gc.isenabled()
    lin = next(n.id for n in bt.nodes if n.module == "0" and n.name == "AddmmBackward0")
    into = {bt.nodes[d].name: k for (s, d), k in bt.passes.items() if s == lin}
    assert into == {"SinBackward0": 2, "CosBackward0": 1}
    assert lin not in bt.received_norms
    sin = next(n.id for n in bt.nodes if n.name == "SinBackward0")
    sent_back = 3 * model[0](x).detach().double().cos()  # what sin sent the Linear in pass 3
    assert bt.merged_norms[lin, sin] == pytest.approx(sent_back.norm().item(), rel=1e-5)
    pic, dot, _ = _picture.drawing(record_of(bt.graph()), bt._overlays())
    a, b = pic.edge((lin, sin))
    assert a != b  # (drawn into the box)
    assert re.findall(rf'n{a} -> n{b} \[[^\n]*?<TD>([^<]+)</TD>', dot) == []


def test_a_rolled_edge_of_iterations_from_different_passes_shows_no_norm():
    """Two passes through an RNNCell over 25 steps: all of it, then back from the state
    at step 10 with a gradient 100 times larger. A rolled edge stands for one edge per
    iteration: the first ten's last norms are from pass 2, the rest from pass 1. It was
    labelled with the largest of them all, and the loop's strip ran pass 2's iterations
    into pass 1's (a jump at step 10 no pass made): now neither is drawn. The series keeps
    each iteration's own norm; one pass draws both as before."""
    torch.manual_seed(0)
    cell = nn.RNNCell(3, 3)
    x = torch.randn(2, 3)
    h, states = torch.zeros(2, 3), []
    for _ in range(25):
        h = cell(x, h)
        states.append(h)
    loss = h.sum()
    with dg.trace_backward(loss, params=cell, overview=False) as one:
        loss.backward(retain_graph=True)
    with dg.trace_backward(loss, params=cell, overview=False) as two:
        loss.backward(retain_graph=True)
        states[9].backward(100 * torch.ones_like(states[9]), retain_graph=True)
    for trace, drawn in ((one, True), (two, False)):
        pic, dot, series = _picture.drawing(record_of(trace.graph()), trace._overlays())
        (block,) = pic.graph.blocks
        out, _ = _picture._mapped(pic, trace._overlays())
        assert all((e in out.edge_norms) == drawn for e in block.loops), trace.passes
        assert (0 in out.block_notes) == drawn
        assert series  # (per iteration)
    assert sorted(set(two.passes.values())) == [0, 1]


@pytest.mark.parametrize("run", ["a loss with a term outside the roots", "a gradient penalty", "h a root too"])
def test_a_box_edge_shows_no_received_norm_that_holds_gradient_from_outside_the_graph(run):
    """The first Linear's output h is read by sin and cos (one box) and by a term the
    traced graph does not hold: ``aux = 10 * h`` added to the loss, or the backward graph
    of ``create_graph=True`` that a gradient penalty runs back through. What h's node
    received then held that term too: the box's input edge showed 28.7 where sin and cos
    sent it 0.76 and 0.37 (the penalty: 8.8, where they sent 10.3 and 5.8); so did
    backward([loss, h]), h sent the gradient given for it besides. A run of the engine with a root outside the traced graph now
    keeps no received norm; each pair keeps its own norm, what its consumer sent."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), _SinCos(), nn.Linear(4, 1))
    with dg.track_modules(model):
        h = model[0](torch.randn(2, 4))
        loss = model[2](model[1](h)).sum()
    with dg.trace_backward(loss, params=model, overview=True) as bt:
        sent, handles = _received(loss, model)
        if run == "a gradient penalty":
            gs = torch.autograd.grad(loss, [model[0].weight, model[2].weight], create_graph=True)
            sent.clear()  # (the penalty's pass alone)
            sum((g * g).sum() for g in gs).backward()
        elif run == "h a root too":  # (h is sent 10s directly, besides what sin and cos send)
            torch.autograd.backward([loss, h], [torch.ones_like(loss), torch.full_like(h, 10.0)])
        else:
            (loss + (10 * h).sum()).backward()
    for handle in handles:
        handle.remove()
    lin = next(n.id for n in bt.nodes if n.module == "0" and n.name == "AddmmBackward0")
    assert lin not in bt.received_norms
    into = {(s, d) for s, d in bt.edges if s == lin}
    for pair in into:  # (each pair: what its consumer sent, in float64 from plain hooks)
        assert bt.merged_norms[pair] == pytest.approx(sent[(*pair, 0)].norm().item(), rel=1e-5)
    pic, dot, _ = _picture.drawing(record_of(bt.graph()), bt._overlays())
    a, b = pic.edge(next(iter(into)))
    assert a != b and re.findall(rf'n{a} -> n{b} \[[^\n]*?<TD>([^<]+)</TD>', dot) == []


def test_trace_backward_puts_the_engine_entry_back_whatever_order_blocks_end_in():
    """trace_backward watches the engine's entry (each run's roots) while a block is open;
    overlapping blocks, its own or track_passes', ending in any order leave torch's."""
    torch_entry = torch.autograd._engine_run_backward
    x = torch.randn(3, requires_grad=True)
    y = (x.exp() * x).sum()
    a, b = dg.trace_backward(y), dg.trace_backward(y)
    a.__enter__()
    b.__enter__()
    assert torch.autograd._engine_run_backward is not torch_entry
    y.backward(retain_graph=True)
    a.__exit__(None, None, None)
    b.__exit__(None, None, None)
    assert torch.autograd._engine_run_backward is torch_entry
    with dg.track_passes(), dg.trace_backward(y) as bt:
        y.backward(retain_graph=True)
    assert torch.autograd._engine_run_backward is torch_entry and bt.order


def test_track_passes_and_trace_backward_share_one_watcher_of_the_engine_entry():
    """Both watch the engine's entry; each kept its own wrapper, so a trace_backward that
    ended while a track_passes block was still open left its wrapper (idle) on torch's
    entry until another trace ended. Now one wrapper serves both: while both blocks are
    open, one layer over torch's entry; each block keeps working after the other ends,
    in either order; the last to end puts torch's entry back."""
    torch_entry = torch.autograd._engine_run_backward
    for first_out in ("passes", "trace"):
        x = torch.tensor([0.5, 1.5], requires_grad=True)
        h = x * 2
        y = (h.sin() + h.cos()).sum()
        passes, trace = dg.track_passes(), dg.trace_backward(y)
        passes.__enter__()
        bt = trace.__enter__()
        assert torch.autograd._engine_run_backward.__wrapped__ is torch_entry  # (one layer)
        (passes if first_out == "passes" else trace).__exit__(None, None, None)
        g, = torch.autograd.grad(y, x, create_graph=True)
        (trace if first_out == "passes" else passes).__exit__(None, None, None)
        assert torch.autograd._engine_run_backward is torch_entry
        marks = {n.derivative for n in dg.draw(g).nodes if n.kind == "op"}
        assert marks == ({None} if first_out == "passes" else {0, 1})
        if first_out == "passes":  # the trace saw the pass and its roots (all in its graph)
            mul = next(n.id for n in bt.nodes if n.name == "MulBackward0")
            assert bt.order and mul in bt.received_norms
