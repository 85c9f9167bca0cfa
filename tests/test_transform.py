"""collapse and fold: smaller pictures that still account for every autograd node."""

from collections import Counter

import pytest
import torch
from torch import nn

import dynagraph as dg
from dynagraph import _transform
from dynagraph._picture import MAX_NODES
from dynagraph._records import Node


def check_edges(graph):
    """Every edge joins two existing nodes, once, and never a node to itself."""
    ids = {n.id for n in graph.nodes}
    assert all(a in ids and b in ids and a != b for a, b in graph.edges)
    assert len(ids) == len(graph.nodes)


def accounted(graph):
    """Autograd nodes a graph stands for: module and fold nodes count their members."""
    return sum(n.count for n in graph.nodes if n.kind != "output")


@pytest.fixture(scope="module", params=["train", "eval"])
def encoder(request):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
    model = getattr(nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), request.param)()
    with dg.track_modules(model):
        out = model(torch.randn(2, 5, 8)).sum()
    return model, out


def test_collapse_depth_two_gives_one_node_per_layer(encoder):
    model, out = encoder
    full = dg.draw(out, params=model, max_nodes=None)
    graph = dg.draw(out, params=model, depth=2, max_nodes=None)
    modules = [n for n in graph.nodes if n.kind == "module"]
    assert sorted(n.label.split("\n")[0] for n in modules) == [
        "layers.0: TransformerEncoderLayer", "layers.1: TransformerEncoderLayer"]
    assert {n.name for n in modules} == {"TransformerEncoderLayer"}
    assert {n.module for n in modules} == {"layers"}  # drawn inside the ModuleList's frame
    for node in modules:
        path = node.label.split(":")[0]
        members = [n for n in full.nodes if n.module and (n.module + ".").startswith(path + ".")]
        assert node.count == len(members)
        ops = sum(n.seq is not None for n in members)
        assert node.label.endswith(f"\n{ops} ops")
    assert accounted(graph) == accounted(full) == len(full) - 1  # all but the output
    check_edges(graph)


def test_collapse_depth_one_gives_the_module_list(encoder):
    model, out = encoder
    graph = dg.draw(out, params=model, depth=1, max_nodes=None)
    [module] = [n for n in graph.nodes if n.kind == "module"]
    assert module.name == "ModuleList" and module.label.startswith("layers: ModuleList\n")
    assert accounted(graph) == len(dg.draw(out, params=model, max_nodes=None)) - 1
    check_edges(graph)


def test_collapsed_graph_renders(encoder):
    model, out = encoder
    svg = dg.draw(out, params=model, depth=2).svg()
    assert "layers.0: TransformerEncoderLayer" in svg


def test_collapse_without_module_tags_changes_nothing():
    x = torch.ones(2, requires_grad=True)
    nodes = dg.draw((x * 2).sum()).nodes
    with pytest.warns(UserWarning, match="collapsed nothing"):
        collapsed = dg.draw((x * 2).sum(), depth=1)
    assert [n.kind for n in collapsed.nodes] == [n.kind for n in nodes]


def test_collapse_deeper_than_any_module_changes_nothing():
    model = nn.Sequential(nn.Linear(2, 2))
    with dg.track_modules(model):
        loss = model(torch.ones(1, 2)).sum()
    with pytest.warns(UserWarning, match=r"depth=3\) collapsed nothing"):
        graph = dg.draw(loss, params=model, depth=3)
    assert "module" not in {n.kind for n in graph.nodes}


def test_remap_drops_self_loops_and_repeats():
    assert _transform.remap([(1, 2), (2, 3), (1, 3), (4, 3)], {1: 9, 2: 9}) == [(9, 3), (4, 3)]


@pytest.fixture(scope="module")
def deep():
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(2, 2) for _ in range(60)])
    return model, model(torch.randn(1, 2)).sum()


def test_fold_makes_one_node_that_accounts_for_the_rest(deep):
    model, loss = deep
    full = dg.draw(loss, params=model, max_nodes=None)
    graph = dg.draw(loss, params=model, max_nodes=50, roll=False).picture()
    [fold] = [n for n in graph.nodes if n.kind == "fold"]
    kept = [n for n in graph.nodes if n.kind != "fold"]
    assert fold.count + len(kept) == len(full)
    assert len(graph) < len(full)
    assert f"{fold.count:,} nodes folded" in fold.label and "max_nodes=None" in fold.label
    check_edges(graph)


def test_fold_keeps_the_ends_and_hides_the_middle(deep):
    model, loss = deep
    graph = dg.draw(loss, params=model, max_nodes=50, roll=False).picture()
    labels = {n.label for n in graph.nodes}
    assert {"0.weight", "59.weight", "SumBackward0", "output"} <= labels
    assert "30.weight" not in labels
    fold = next(n for n in graph.nodes if n.kind == "fold")
    into = {a for a, b in graph.edges if b == fold.id}
    out_of = {b for a, b in graph.edges if a == fold.id}
    assert into and out_of  # the fold sits between the kept ends


def test_fold_hides_leaves_whose_consumers_are_all_hidden(deep):
    model, loss = deep
    graph = dg.draw(loss, params=model, max_nodes=50, roll=False).picture()
    fold = next(n for n in graph.nodes if n.kind == "fold")
    for leaf in (n for n in graph.nodes if n.kind == "parameter"):
        assert {b for a, b in graph.edges if a == leaf.id} - {fold.id}


def test_fold_under_the_limit_changes_nothing():
    nodes = [Node(id=0, name="output", kind="output", label="y"),
             Node(id=1, name="MulBackward0", kind="op", label="MulBackward0", seq=0)]
    edges = [(1, 0)]
    assert _transform.fold(nodes, edges, 2) == (nodes, edges, {})
    assert _transform.fold(nodes, edges, None) == (nodes, edges, {})


def test_collapse_then_fold_still_accounts_for_everything():
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(2, 2), nn.Tanh()) for _ in range(30)])
    with dg.track_modules(model):
        loss = model(torch.randn(1, 2)).sum()
    full = dg.draw(loss, params=model, max_nodes=None)
    graph = dg.draw(loss, params=model, depth=1, max_nodes=12, roll=False).picture()
    kinds = Counter(n.kind for n in graph.nodes)
    assert kinds["fold"] == 1 and kinds["module"] >= 2
    assert accounted(graph) == len(full) - 1
    check_edges(graph)


def test_fold_bounds_3000_roots_outputs_included():
    x = torch.ones(3, requires_grad=True)
    roots = [(x * i).sum() for i in range(3000)]
    full = dg.draw(roots, max_nodes=None)
    graph = dg.draw(roots, max_nodes=500, roll=False).picture()
    assert len(graph) <= 500 < len(full)
    [fold] = [n for n in graph.nodes if n.kind == "fold"]
    assert fold.count + len(graph) - 1 == len(full)  # every node kept or folded
    assert Counter(n.kind for n in graph.nodes)["output"] > 100  # outputs kept with their ops
    check_edges(graph)


def test_fold_bounds_a_rolled_picture_of_3000_roots():
    x = torch.ones(3, requires_grad=True)
    graph = dg.draw([(x * i).sum() for i in range(3000)]).picture()  # rolled, then folded
    assert len(graph) <= MAX_NODES
    check_edges(graph)


@pytest.mark.parametrize("max_nodes", [2, 3, 50])
def test_fold_bounds_leaves_that_ride_along_with_one_op(max_nodes):
    nodes = [Node(id=0, name="output", kind="output", label="y"),
             Node(id=1, name="StackBackward0", kind="op", label="StackBackward0", seq=0)]
    nodes += [Node(id=k, name="AccumulateGrad", kind="input", label=f"x{k}") for k in range(2, 3002)]  # 3,000 leaves
    edges = [(1, 0)] + [(k, 1) for k in range(2, 3002)]
    kept, kept_edges, mapping = _transform.fold(nodes, edges, max_nodes)
    assert len(kept) == max_nodes and len(mapping) == len(nodes) - max_nodes + 1
    assert "StackBackward0" in {n.label for n in kept}  # leaves go first, from the middle
    assert ("y" in {n.label for n in kept}) == (max_nodes == 50)
    ids = {n.id for n in kept}
    assert all(a in ids and b in ids and a != b for a, b in kept_edges)


# -- chains of shape ops, merged in big pictures ----------------------------------------

def _chain_records():
    """leaf -> mm -> view -> transpose -> expand -> tanh -> output; a second view of mm
    feeds the tanh's partner add."""
    def op(i, name, shape=(2, 3)):
        return Node(id=i, name=name, kind="op", label=name, shape=shape, seq=100 - i)
    nodes = [Node(id=0, name="output", kind="output", label="output"), op(1, "TanhBackward0"),
             op(2, "ExpandBackward0"), op(3, "TransposeBackward0"), op(4, "ViewBackward0"),
             op(5, "MmBackward0"), Node(id=6, name="AccumulateGrad", kind="parameter", label="w")]
    edges = [(1, 0), (2, 1), (3, 2), (4, 3), (5, 4), (6, 5)]
    return nodes, edges


def test_merge_chains_draws_a_chain_of_shape_ops_as_one_node():
    nodes, edges = _chain_records()
    kept, new_edges, mapping = _transform.merge_chains(nodes, edges, {n.id: None for n in nodes})
    assert mapping == {4: 2, 3: 2}  # view and transpose stand with the last op of the chain
    merged = next(n for n in kept if n.id == 2)
    assert merged.label == "View \u2192 Transpose \u2192 Expand" and merged.count == 3
    assert merged.name == "ExpandBackward0" and merged.shape == (2, 3)
    assert new_edges == [(1, 0), (2, 1), (5, 2), (6, 5)]
    assert sum(n.count for n in kept) == sum(n.count for n in nodes)


def test_merge_chains_stops_at_a_branch_a_frame_and_a_kept_node():
    nodes, edges = _chain_records()
    branched = edges + [(3, 1)]  # the transpose feeds a second op: the chain ends there
    _, _, mapping = _transform.merge_chains(nodes, branched, {n.id: None for n in nodes})
    assert mapping == {4: 3}
    frames = {n.id: "a" for n in nodes} | {2: "b"}  # the expand is in another frame
    assert _transform.merge_chains(nodes, edges, frames)[2] == {4: 3}
    assert _transform.merge_chains(nodes, edges, {n.id: None for n in nodes}, keep={3})[2] == {}


def test_a_big_picture_merges_shape_chains_and_a_small_one_keeps_every_op():
    torch.manual_seed(0)
    attention = nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(2, 5, 8, requires_grad=True)
    out = attention(x, torch.tanh(x), torch.sigmoid(x))[0].sum()
    full = dg.draw(out, params=attention, roll=False, max_nodes=None)
    pic = dg.draw(out, params=attention).picture()
    assert len(full.nodes) > 40 and len(pic.nodes) < len(full.nodes)
    shape_ops = {n.id for n in full.nodes if n.name in _transform.SHAPE_OPS}
    assert any("\u2192" in n.label for n in pic.nodes)
    assert sum(n.count for n in pic.nodes if n.kind != "output") == len(full.nodes) - 1  # every node counted
    assert len([n for n in pic.nodes if n.name in _transform.SHAPE_OPS]) < len(shape_ops)
    x = torch.tensor([1.0], requires_grad=True)
    small = dg.draw(x.view(1, 1).t().view(1) * 2)  # 3 shape ops in a row, in a small graph
    assert [n.label for n in small.picture().nodes if n.kind == "op"] == \
        [n.label for n in small.nodes if n.kind == "op"]


# -- pictures still too tall: chains of any ops, weights drawn with their op ---------------

def _op(i, name, shape=(2, 3), kind="op"):
    return Node(id=i, name=name, kind=kind, label=name, shape=shape, seq=100 - i)


def _leaf(i, label, shape=(3, 3)):
    return Node(id=i, name="AccumulateGrad", kind="parameter", label=label, shape=shape)


def test_merge_chains_of_any_ops_reads_through_weights_and_cuts_even_parts():
    """x -> mm(w) -> add(b) -> tanh -> mul -> sigmoid -> output: five ops that each feed only
    the next, two reading a weight. With any_op they merge as 3 + 2 (never 4 + 1); shape-only
    merging leaves them all."""
    nodes = [Node(id=0, name="output", kind="output", label="output"), _op(1, "SigmoidBackward0"),
             _op(2, "MulBackward0"), _op(3, "TanhBackward0"), _op(4, "AddBackward0"),
             _op(5, "MmBackward0"), _leaf(6, "w"), _leaf(7, "b", (3,))]
    edges = [(1, 0), (2, 1), (3, 2), (4, 3), (5, 4), (6, 5), (7, 4)]
    frames = {n.id: None for n in nodes}
    assert _transform.merge_chains(nodes, edges, frames)[2] == {}
    kept, new_edges, mapping = _transform.merge_chains(nodes, edges, frames, any_op=True)
    assert mapping == {5: 3, 4: 3, 2: 1}
    labels = {n.id: n.label for n in kept}
    assert labels[3] == "Mm \u2192 Add \u2192 Tanh" and labels[1] == "Mul \u2192 Sigmoid"
    assert sorted(new_edges) == [(1, 0), (3, 1), (6, 3), (7, 3)]  # the weights now feed the merged op
    assert sum(n.count for n in kept) == sum(n.count for n in nodes)


def test_merge_chains_of_any_ops_leaves_custom_functions_and_kept_nodes_apart():
    nodes = [Node(id=0, name="output", kind="output", label="output"), _op(1, "TanhBackward0"),
             _op(2, "SquareBackward", kind="custom"), _op(3, "MulBackward0"), _op(4, "AddBackward0")]
    edges = [(1, 0), (2, 1), (3, 2), (4, 3)]
    frames = {n.id: None for n in nodes}
    assert _transform.merge_chains(nodes, edges, frames, any_op=True)[2] == {4: 3}
    assert _transform.merge_chains(nodes, edges, frames, keep={3}, any_op=True)[2] == {}


def test_a_merged_label_breaks_into_short_lines():
    label = _transform._wrapped(["NativeLayerNorm", "View", "Addmm", "View"])
    assert label == "NativeLayerNorm \u2192 View \u2192\nAddmm \u2192 View"
    assert all(len(line) <= _transform.LINE + 2 for line in label.split("\n"))


def test_a_merged_label_that_lists_a_chain_breaks_at_each_name():
    """A chain of shape ops merged first (one line) and merged again, or left alone in a
    tall picture: its names break into short lines too (T5's ``View → Mm → UnsafeView →
    View → Transpose → Expand → Clone → UnsafeView`` was one line 400 px wide)."""
    chain = " \u2192 ".join(["UnsafeView", "View", "Transpose", "Expand", "Clone", "UnsafeView"])
    label = _transform._wrapped(["Mm", chain])
    assert label.replace("\n", " ").split(" \u2192 ") == ["Mm", *chain.split(" \u2192 ")]
    assert all(len(line) <= _transform.LINE + 2 for line in label.split("\n"))
    nodes = [Node(id=0, name="output", kind="output", label="output"),
             _op(1, "UnsafeViewBackward0"), _op(2, "TanhBackward0")]
    nodes[1].label = chain
    short = _op(3, "CloneBackward0")
    short.label = "View \u2192 Clone"
    nodes.append(short)
    edges = [(1, 0), (2, 1), (3, 2)]
    frames = {n.id: None for n in nodes}
    nodes[2] = Node(id=2, name="CustomBackward", kind="custom", label="Custom", seq=98)  # nothing merges
    kept, _, mapping = _transform.merge_chains(nodes, edges, frames, any_op=True)
    assert mapping == {}
    labels = {n.id: n.label for n in kept}
    assert labels[1] == _transform._wrapped([chain]) and "\n" in labels[1]
    assert labels[3] == "View \u2192 Clone"  # short: left on one line


def test_merge_parallel_draws_like_ops_between_the_same_nodes_as_one():
    """A packed RNN slices off each finished sequence's last state into one cat: seven
    ``SliceBackward0`` side by side made the picture wide. Ops with another consumer, a
    loop edge's end, or another frame stay apart."""
    nodes = [Node(id=0, name="output", kind="output", label="output"), _op(1, "CatBackward0", shape=(8, 16)),
             _op(2, "AddBackward0", shape=(8, 16)), _op(3, "SliceBackward0", shape=(1, 16)),
             _op(4, "SliceBackward0", shape=(2, 16)), _op(5, "SliceBackward0", shape=(1, 16)),
             _op(6, "SliceBackward0", shape=(1, 16)), _op(7, "TanhBackward0", shape=(1, 16))]
    edges = [(1, 0), (2, 3), (2, 4), (2, 5), (2, 6), (3, 1), (4, 1), (5, 1), (6, 7), (7, 1)]
    frames = {n.id: None for n in nodes}
    kept, new_edges, mapping = _transform.merge_parallel(nodes, edges, frames)
    assert mapping == {4: 3, 5: 3}
    merged = next(n for n in kept if n.id == 3)
    assert (merged.label, merged.shape, merged.count) == ("SliceBackward0 \u00d73", ("\u2026", 16), 3)
    assert sorted(new_edges) == sorted({(1, 0), (2, 3), (2, 6), (3, 1), (6, 7), (7, 1)})
    assert _transform.merge_parallel(nodes, edges, frames, keep={4})[2] == {5: 3}
    frames[5] = "other"
    assert _transform.merge_parallel(nodes, edges, frames)[2] == {4: 3}


def test_lift_leaf_ops_draws_a_transposed_weight_in_its_leaf():
    """w -> T -> mm: the T is drawn in w's node (``w.T``, with the T's shape); a weight
    that two ops read, or a T in another frame, stays as it is."""
    nodes = [Node(id=0, name="output", kind="output", label="output"), _op(1, "MmBackward0"),
             _op(2, "TBackward0", shape=(4, 3)), _leaf(3, "fc.weight", (3, 4)), _op(4, "ViewBackward0")]
    edges = [(1, 0), (2, 1), (3, 2), (4, 1)]
    frames = {n.id: None for n in nodes}
    kept, new_edges, mapping = _transform.lift_leaf_ops(nodes, edges, frames)
    assert mapping == {2: 3}
    (weight,) = [n for n in kept if n.id == 3]
    assert weight.label == "fc.weight.T" and weight.shape == (4, 3) and weight.count == 2
    assert sorted(new_edges) == [(1, 0), (3, 1), (4, 1)]
    assert _transform.lift_leaf_ops(nodes, edges + [(3, 4)], frames)[2] == {}
    assert _transform.lift_leaf_ops(nodes, edges, frames | {2: "block"})[2] == {}


def test_group_leaves_lists_the_weights_of_one_op_in_one_node():
    """An op's weight and bias, read by nothing else, stand in one node, a line each; a
    weight that a second op reads stays apart."""
    nodes = [Node(id=0, name="output", kind="output", label="output"), _op(1, "AddmmBackward0"),
             _leaf(2, "fc.weight", (3, 4)), _leaf(3, "fc.bias", (3,)), _op(4, "MulBackward0"),
             _leaf(5, "scale", (3,))]
    edges = [(1, 0), (2, 1), (3, 1), (4, 1), (5, 1), (5, 4)]
    frames = {n.id: None for n in nodes}
    kept, new_edges, mapping = _transform.group_leaves(nodes, edges, frames)
    assert mapping == {3: 2}
    (group,) = [n for n in kept if n.id == 2]
    assert group.label == "fc.weight (3, 4)\nfc.bias (3,)" and group.shape is None and group.count == 2
    assert sorted(new_edges) == [(1, 0), (2, 1), (4, 1), (5, 1), (5, 4)]
    assert _transform.group_leaves(nodes, edges, frames | {3: "other"})[2] == {}


def _deep_tanh_mlp(depth):
    torch.manual_seed(0)
    model = nn.Sequential(*[m for k in range(depth) for m in (nn.Linear(3 + k, 4 + k), nn.Tanh())])
    return model, model(torch.randn(2, 3)).sum()


def test_a_tall_picture_merges_op_chains_and_a_shorter_one_only_shape_chains():
    """A 16-layer MLP whose layers all differ (nothing rolls) has a longest path of 34 nodes
    (a weight, 32 ops, the output), over TALL: its picture merges chains of ops and lists
    each layer's weights in one node, and still stands for every autograd node. With 13
    layers (28 nodes on its longest path) only shape ops would merge: it has none."""
    from dynagraph import _picture
    model, out = _deep_tanh_mlp(16)
    full = dg.draw(out, params=model, roll=False, max_nodes=None)
    pic = dg.draw(out, params=model).picture()
    assert 28 <= _picture.TALL < 34
    assert len(pic.nodes) < len(full.nodes) // 3
    assert any(n.label.startswith("Addmm \u2192 Tanh") for n in pic.nodes)
    assert any(n.kind == "parameter" and "0.weight.T" in n.label and "0.bias" in n.label for n in pic.nodes)
    assert accounted(pic) == accounted(full)
    check_edges(pic)
    model, out = _deep_tanh_mlp(13)
    shorter = dg.draw(out, params=model)
    assert len(shorter.nodes) > _picture.ROLL_ABOVE
    assert [n.label for n in shorter.picture().nodes] == [n.label for n in shorter.nodes]


def test_open_leaf_modules_moves_the_nodes_of_innermost_modules_to_their_parent():
    def at(i, module):
        return Node(id=i, name="MulBackward0", kind="op", label="MulBackward0", module=module, seq=i)
    nodes = [at(1, "layers.0.conv"), at(2, "layers.0.norm"), at(3, "layers.0"), at(4, "fc"),
             at(5, None), at(6, "a.b.c"), at(7, "a")]
    moved = {n.id: n.module for n in _transform.open_leaf_modules(nodes)}
    # layers.0 holds others, so it stays; fc is top-level; a holds a.b.c through a.b
    assert moved == {1: "layers.0", 2: "layers.0", 3: "layers.0", 4: "fc", 5: None, 6: "a.b", 7: "a"}


def test_a_grouped_leaf_line_says_what_its_own_box_said():
    """Shape, and the dtype where it is not float32 (as _dot draws a leaf alone)."""
    op = Node(id=0, name="MulBackward0", kind="op", label="MulBackward0", seq=1)
    half = Node(id=1, name="AccumulateGrad", kind="parameter", label="w", shape=(3,), dtype="bfloat16")
    plain = Node(id=2, name="AccumulateGrad", kind="parameter", label="b", shape=(3,), dtype="float32")
    kept, _, _ = _transform.group_leaves([op, half, plain], [(1, 0), (2, 0)], {})
    assert [n.label for n in kept if n.id == 1] == ["w (3,) bfloat16\nb (3,)"]
