"""capture: the records must match autograd's own graph, walked here independently."""

import dataclasses
import sys
from collections import Counter, deque

import pytest
import torch
from torch import nn

import dynagraph as dg
from dynagraph._records import Node
from dynagraph.capture import capture, node_name

from _helpers import Square


def oracle(roots):
    """Walk ``grad_fn`` breadth-first: ``(name, in-degree, out-degree)`` of every autograd node.

    In-degree counts the inputs an op consumes (its non-None ``next_functions``),
    out-degree the ops and outputs that consume it: edges point producer -> consumer.
    """
    starts = []
    for r in roots:
        fn = r.grad_fn if r.grad_fn is not None else torch.autograd.graph.get_gradient_edge(r).node
        starts.append(fn)
    outdeg = Counter(starts)
    seen, queue, order = set(starts), deque(starts), []
    while queue:
        fn = queue.popleft()
        order.append(fn)
        for child, _ in fn.next_functions:
            if child is None:
                continue
            outdeg[child] += 1
            if child not in seen:
                seen.add(child)
                queue.append(child)
    name = lambda fn: fn.name().removeprefix("torch::autograd::")  # noqa: E731
    indeg = {fn: sum(c is not None for c, _ in fn.next_functions) for fn in order}
    return Counter((name(fn), indeg[fn], outdeg[fn]) for fn in order)


def names_only(degree_counts):
    """The multiset of names in an :func:`oracle` result."""
    names = Counter()
    for (name, _, _), k in degree_counts.items():
        names[name] += k
    return names


def degrees(graph):
    """``(name, in-degree, out-degree)`` of every non-output record of ``graph``."""
    ins, outs = Counter(), Counter()
    for src, dst in graph.edges:
        outs[src] += 1
        ins[dst] += 1
    return Counter((n.name, ins[n.id], outs[n.id]) for n in graph.nodes if n.kind != "output")


def roots_list(roots):
    if isinstance(roots, torch.Tensor):
        return [roots]
    return list(roots.values()) if isinstance(roots, dict) else list(roots)


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(5, 4)
        self.out = nn.Linear(4, 5, bias=False)
        self.out.weight = self.emb.weight  # tied: one parameter, two uses

    def forward(self, idx):
        return self.out(self.emb(idx))


def _mlp():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    return model, model(torch.randn(2, 4)).sum()


def _conv():
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(2 * 3 * 3, 3))
    return model, model(torch.randn(2, 1, 8, 8)).sum()


def _lstm():
    model = nn.LSTM(3, 4, num_layers=2, batch_first=True)
    out, (h, c) = model(torch.randn(2, 5, 3))
    return model, [out, h, c]


def _lstm_cell_loop():
    model = nn.LSTMCell(3, 4)
    h = c = torch.zeros(2, 4)
    for x in torch.randn(3, 2, 3):
        h, c = model(x, (h, c))
    return model, h.sum()


def _attention():
    model = nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(2, 5, 8)
    return model, model(x, x, x)  # tuple root: (output, weights)


def _encoder(mode):
    def make():
        layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
        model = getattr(nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), mode)()
        return model, model(torch.randn(2, 5, 8)).sum()
    return make


def _custom():
    model = nn.Linear(3, 3)
    return model, Square.apply(model(torch.randn(2, 3))).sum()


def _tied():
    model = Tied()
    return model, model(torch.tensor([[0, 1, 2]])).sum()


def _views_inplace():
    model = nn.Linear(4, 4)
    h = model(torch.randn(2, 4)).clone()
    h[:, 1:3].mul_(2)  # in-place on a view: CopySlices
    h.transpose(0, 1)[0].add_(1)
    return model, h.sum()


def _dict_outputs():
    model = nn.Linear(3, 2)
    h = model(torch.randn(4, 3))
    return model, {"loss": h.pow(2).mean(), "aux": h.abs().sum(), "raw": h}


def _list_outputs():
    model = nn.Linear(3, 2)
    h = model(torch.randn(4, 3))
    return model, [h.sum(), h.mean()]


CASES = {
    "mlp": _mlp,
    "conv": _conv,
    "lstm": _lstm,
    "lstm_cell_loop": _lstm_cell_loop,
    "multihead_attention": _attention,
    "encoder_train": _encoder("train"),
    "encoder_eval": _encoder("eval"),
    "custom_function": _custom,
    "tied_weights": _tied,
    "views_inplace": _views_inplace,
    "dict_outputs": _dict_outputs,
    "list_outputs": _list_outputs,
}


@pytest.fixture(params=sorted(CASES))
def case(request):
    torch.manual_seed(0)
    model, roots = CASES[request.param]()
    return request.param, model, roots


def test_counts_match_independent_grad_fn_walk(case):
    _, model, roots = case
    graph = dg.draw(roots, params=model, max_nodes=None)
    expected = oracle(roots_list(roots))
    assert graph.counts() == names_only(expected)
    assert degrees(graph) == expected  # same nodes, same fan-in and fan-out: same edges


def test_parameter_labels_are_the_named_parameters(case):
    _, model, roots = case
    graph = dg.draw(roots, params=model, max_nodes=None)
    labels = [n.label for n in graph.nodes if n.kind == "parameter"]
    assert sorted(labels) == sorted(dict(model.named_parameters()))  # each once


def test_one_output_node_per_root(case):
    _, model, roots = case
    graph = dg.draw(roots, params=model, max_nodes=None)
    outputs = [n for n in graph.nodes if n.kind == "output"]
    assert len(outputs) == len(roots_list(roots))
    if isinstance(roots, dict):
        assert [n.label for n in outputs] == list(roots)


def test_edges_point_from_producer_to_consumer(case):
    _, model, roots = case
    graph = dg.draw(roots, params=model, max_nodes=None)
    sources = {src for src, _ in graph.edges}
    targets = {dst for _, dst in graph.edges}
    for node in graph.nodes:
        if node.kind == "output":
            assert node.id not in sources and node.id in targets
        if node.name == "AccumulateGrad":
            assert node.id in sources and node.id not in targets


def test_tied_weight_is_one_node_with_two_consumers():
    torch.manual_seed(0)
    model, root = _tied()
    graph = dg.draw(root, params=model)
    [weight] = [n for n in graph.nodes if n.kind == "parameter"]
    assert weight.label == "emb.weight"
    assert len({dst for src, dst in graph.edges if src == weight.id}) == 2


def test_views_and_inplace_show_copyslices():
    torch.manual_seed(0)
    model, root = _views_inplace()
    assert dg.draw(root, params=model).counts()["CopySlices"] == 2


def test_known_answer_two_x_plus_one():
    x = torch.tensor([3.0], requires_grad=True)
    y = 2 * x + 1
    graph = dg.draw(y, params={"x": x})
    assert set(graph.counts()) == {"AddBackward0", "MulBackward0", "AccumulateGrad"}
    by_name = {n.name: n.id for n in graph.nodes}
    assert set(graph.edges) == {(by_name["AccumulateGrad"], by_name["MulBackward0"]),
                                (by_name["MulBackward0"], by_name["AddBackward0"]),
                                (by_name["AddBackward0"], by_name["output"])}
    assert graph.node(by_name["AccumulateGrad"]).label == "x"
    y.backward()
    assert x.grad.item() == 2.0  # dy/dx = 2: the graph drawn is the one backward used


def test_custom_function_node_is_kind_custom_labelled_with_class_name():
    x = torch.ones(3, requires_grad=True)
    graph = dg.draw(Square.apply(x))
    [node] = [n for n in graph.nodes if n.kind == "custom"]
    assert node.label == "Square"
    assert node.name == "SquareBackward"


def test_node_name_drops_cpp_namespace():
    x = torch.ones(2, requires_grad=True)
    acc = (x * 1).grad_fn.next_functions[0][0]
    assert acc.name() == "torch::autograd::AccumulateGrad"
    assert node_name(acc) == "AccumulateGrad"


def test_leaf_root_shares_its_node_with_other_uses():
    x = torch.ones(2, requires_grad=True)
    graph = dg.draw([x, 2 * x], params={"x": x})
    leaves = [n for n in graph.nodes if n.name == "AccumulateGrad"]
    assert [n.label for n in leaves] == ["x"]  # drawn once, feeding output[0] and the Mul
    assert len([e for e in graph.edges if e[0] == leaves[0].id]) == 2
    assert degrees(graph) == oracle([x, 2 * x])


def test_unnamed_leaves_are_inputs():
    x = torch.ones(2, requires_grad=True)
    graph = dg.draw((x * x).sum())
    [leaf] = [n for n in graph.nodes if n.name == "AccumulateGrad"]
    assert (leaf.kind, leaf.label) == ("input", "input")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_op_metadata_is_the_forward_tensors(dtype):
    torch.manual_seed(0)
    lin = nn.Linear(3, 4).to(dtype)
    h = lin(torch.randn(2, 3, dtype=dtype))
    r = torch.relu(h).sum()
    graph = dg.draw(r, params=lin)
    meta = {n.name: (n.shape, n.dtype, n.device) for n in graph.nodes}
    want_dtype = str(dtype).removeprefix("torch.")
    assert meta["AddmmBackward0"] == (tuple(h.shape), want_dtype, "cpu")
    assert meta["SumBackward0"] == ((), want_dtype, "cpu")
    assert meta["output"] == ((), want_dtype, "cpu")
    weight = next(n for n in graph.nodes if n.label == "weight")
    assert weight.shape == tuple(lin.weight.shape) and weight.kind == "parameter"
    r.backward()
    after = {n.name: (n.shape, n.dtype, n.device) for n in dg.draw(r, params=lin).nodes}
    assert after == meta  # metadata survives backward(), unlike saved tensors


def test_show_saved_lists_tensors_then_says_freed():
    torch.manual_seed(0)
    lin = nn.Linear(3, 4)
    x = torch.randn(2, 3)
    loss = lin(x).sum()
    before = dg.draw(loss, params=lin, show_saved=True)
    addmm = next(n for n in before.nodes if n.name == "AddmmBackward0")
    assert ("mat1", "(2, 3) float32") in addmm.saved
    loss.backward()
    after = dg.draw(loss, params=lin, show_saved=True)
    addmm = next(n for n in after.nodes if n.name == "AddmmBackward0")
    assert ("mat1", "freed") in addmm.saved
    assert "saved mat1: freed" in after.to_dot()


def test_show_saved_custom_function_lists_ctx_tensors_then_freed():
    x = torch.ones(3, requires_grad=True)
    y = Square.apply(x)
    node = next(n for n in dg.draw(y, show_saved=True).nodes if n.kind == "custom")
    assert node.saved == [("tensors[0]", "(3,) float32")]
    y.sum().backward()
    node = next(n for n in dg.draw(y, show_saved=True).nodes if n.kind == "custom")
    assert node.saved == [("tensors", "freed")]


def test_show_saved_off_by_default():
    x = torch.ones(3, requires_grad=True)
    assert all(n.saved == [] for n in dg.draw((x * x).sum()).nodes)


def _stack_depth():
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    return depth


def test_thousand_layer_mlp_needs_no_recursion():
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(2, 2) for _ in range(1000)])
    loss = model(torch.randn(1, 2)).sum()
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(_stack_depth() + 100)  # far below the graph's 4000-node depth
    try:
        graph = dg.draw(loss, params=model, max_nodes=None)
        folded = dg.draw(loss, params=model)
        dot = folded.to_dot()
    finally:
        sys.setrecursionlimit(old)
    assert graph.counts()["AddmmBackward0"] == 1000
    assert len(graph) == 1 + 1 + 3 * 1000 + 1000  # output, sum, (addmm, t, bias), weight
    assert dot.startswith("digraph")


def _snapshot(model, x):
    return ({k: v.detach().clone() for k, v in model.state_dict().items()},
            {k: (p.requires_grad, p.device, p.grad) for k, p in model.named_parameters()},
            x.detach().clone(), x.requires_grad, x.device)


def test_nothing_the_user_passed_is_modified():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    x = torch.randn(5, 3, requires_grad=True)
    y = model(x)
    with dg.track_modules(model):
        z = model(x).sum()
    before = _snapshot(model, x)  # after the forward passes: BatchNorm updates its stats
    dg.draw({"y": y, "z": z, "x": x}, params=model, depth=1, show_saved=True).to_dot()
    after = _snapshot(model, x)
    for key, value in before[0].items():
        assert torch.equal(value, after[0][key]), key
    assert before[1] == after[1]  # requires_grad, device, and .grad still None
    assert torch.equal(before[2], after[2]) and before[3:] == after[3:]
    assert x.grad is None


def test_records_hold_no_torch_objects():
    torch.manual_seed(0)
    model, root = _mlp()
    nodes, edges, types = capture(root, params=model, show_saved=True)
    plain = (str, int, float, tuple, list, type(None))
    for node in nodes:
        assert all(isinstance(getattr(node, f.name), plain) for f in dataclasses.fields(node)), node
    assert all(isinstance(a, int) and isinstance(b, int) for a, b in edges)


def test_params_mapping_names_leaves():
    a = torch.ones(2, requires_grad=True)
    w = nn.Parameter(torch.ones(2))
    graph = dg.draw(a * w, params={"a": a, "w": w})
    leaves = {n.label: n.kind for n in graph.nodes if n.name == "AccumulateGrad"}
    assert leaves == {"a": "input", "w": "parameter"}  # plain tensors stay inputs


def test_module_types_name_submodules():
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    _, _, types = capture(model(torch.ones(1, 2)), params=model)
    assert types == {"0": "Linear", "1": "ReLU"}


# Bad input: each error says what to do.

def test_root_without_grad_fn_raises():
    with pytest.raises(ValueError, match=r"does not require grad.*requires_grad=True.*no_grad"):
        dg.draw(torch.ones(3) * 2)


def test_root_inside_vmap_raises_saying_to_draw_what_vmap_returns():
    x = torch.ones(2, 3, requires_grad=True)  # it requires grad, outside no_grad: the old advice did not fit
    with pytest.raises(ValueError, match=r"Inside torch\.vmap no tensor shows its graph: draw what the vmap "
                                         r"call returns"):
        torch.vmap(lambda w: dg.draw((w * 2).sum()))(x)
    assert dg.draw(torch.vmap(lambda w: (w * 2).sum())(x)).counts()["MulBackward0"] == 1  # as the message says


def test_root_that_is_a_dataclass_raises_naming_its_fields():
    @dataclasses.dataclass
    class Out:  # what a model's forward may return (transformers' outputs are dicts, and are drawn)
        logits: torch.Tensor
        loss: torch.Tensor

    x = torch.ones(2, requires_grad=True)
    out = Out(x * 2, (x * 2).sum())
    with pytest.raises(TypeError, match=r"got Out \(a dataclass with fields logits, loss: pass one of its "
                                        r"tensors, such as out\.logits\)"):
        dg.draw(out)
    assert dg.draw(out.loss).counts()["SumBackward0"] == 1


def test_root_made_under_no_grad_raises():
    x = torch.ones(3, requires_grad=True)
    with torch.no_grad():
        y = x * 2
    with pytest.raises(ValueError, match=r"root 'output' has no grad_fn.*torch\.no_grad\(\)"):
        dg.draw(y)


def test_root_made_under_inference_mode_raises():
    x = torch.ones(3, requires_grad=True)
    with torch.inference_mode():
        y = x * 2
    with pytest.raises(ValueError, match="inference_mode"):
        dg.draw(y)


@pytest.mark.parametrize("roots", [3.0, "loss", None])
def test_non_tensor_root_raises(roots):
    with pytest.raises(TypeError, match="roots must be a tensor, or a list, tuple or dict"):
        dg.draw(roots)


def test_non_tensor_in_root_list_raises():
    x = torch.ones(1, requires_grad=True)
    with pytest.raises(TypeError, match=r"root 'output\[1\]' is a int, not a tensor"):
        dg.draw([x * 2, 3])


@pytest.mark.parametrize("roots", [[], (), {}])
def test_empty_roots_raise(roots):
    with pytest.raises(ValueError, match="roots is empty"):
        dg.draw(roots)


@pytest.mark.parametrize("params", [[torch.ones(1)], "model", 3])
def test_params_of_wrong_type_raise(params):
    x = torch.ones(1, requires_grad=True)
    with pytest.raises(TypeError, match=r"params must be an nn.Module or a mapping name -> tensor"):
        dg.draw(x * 2, params=params)


def test_params_mapping_with_non_tensor_raises():
    x = torch.ones(1, requires_grad=True)
    with pytest.raises(TypeError, match=r"params\['w'\] is a float, not a tensor"):
        dg.draw(x * 2, params={"w": 1.0})


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_nested_tensor_graph_draws_records_and_replays():
    a = torch.randn(2, 3, requires_grad=True)
    b = torch.randn(4, 3, requires_grad=True)
    nt = torch.nested.as_nested_tensor([a, b], layout=torch.strided)
    y = nt * 2
    graph = dg.draw(y)
    assert graph.counts()["MulBackward0"] == 1
    assert next(n for n in graph.nodes if n.kind == "output").shape is None  # no single shape
    assert "image/png" in graph._repr_mimebundle_()[0]
    with dg.live() as rec:
        nt * 3
    assert rec.steps[0].outputs == [None] and "nested -> nested" in repr(rec)
    grad = torch.nested.as_nested_tensor([torch.ones(2, 3), torch.ones(4, 3)], layout=torch.strided)
    with dg.trace_backward(y) as bt:
        y.backward(grad)
    leaf = {n.id for n in bt.nodes if n.kind == "input"}
    norms = sorted(v for (src, _, _), v in bt.edge_norms.items() if src in leaf)
    expected = sorted(torch.linalg.vector_norm(t.grad).item() for t in (a, b))
    assert norms == pytest.approx(expected)


def test_node_records_are_built_by_keyword():
    with pytest.raises(TypeError):
        Node(0, "output", "output", "y")  # positional: which field is which is not said
    node = Node(id=0, name="output", kind="output", label="y")
    assert (node.shape, node.count) == (None, 1)
