"""track_modules: tag each autograd node with the submodule that made it, then clean up."""

import re

import pytest
import torch
from torch import nn

import dynagraph as dg


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x) * 2  # the Mul belongs to the block, the Addmm to block.lin


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = nn.Linear(3, 1)

    def forward(self, x):
        return self.head(torch.tanh(self.block(x)))  # tanh: the top level, no submodule


def all_hooks(model):
    return [h for m in model.modules() for h in (*m._forward_hooks.values(),
                                                 *m._forward_pre_hooks.values())]


def modules_by_name(graph):
    return {n.name: n.module for n in graph.nodes if n.kind == "op"}


def test_ops_are_tagged_with_the_module_that_made_them():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    with dg.track_modules(model):
        loss = model(torch.randn(5, 3)).sum()
    graph = dg.draw(loss, params=model)
    tags = sorted((n.name, n.module) for n in graph.nodes if n.kind == "op")
    assert tags == [("AddmmBackward0", "0"), ("AddmmBackward0", "2"), ("ReluBackward0", "1"),
                    ("SumBackward0", None), ("TBackward0", "0"), ("TBackward0", "2")]
    params = {n.label: n.module for n in graph.nodes if n.kind == "parameter"}
    assert params == {"0.weight": "0", "0.bias": "0", "2.weight": "2", "2.bias": "2"}
    dot = graph.to_dot()
    assert 'subgraph "cluster_0"' in dot and 'label="0: Linear"' in dot


def test_nested_modules_tag_their_own_ops():
    torch.manual_seed(0)
    model = Net()
    with dg.track_modules(model):
        out = model(torch.randn(2, 3))
    graph = dg.draw(out, params=model)
    tags = modules_by_name(graph)
    assert tags["MulBackward0"] == "block"
    assert tags["TanhBackward0"] is None
    assert sorted(n.module for n in graph.nodes if n.name == "AddmmBackward0") == ["block.lin", "head"]
    dot = graph.to_dot()
    assert dot.index('subgraph "cluster_block" {') < dot.index('subgraph "cluster_block.lin" {')


class Picky(nn.Module):
    """Raises when told to, after an op of its own (its caller catches the error)."""

    def __init__(self, fails):
        super().__init__()
        self.fails = fails

    def forward(self, x):
        y = x * 3
        if self.fails:
            raise ValueError("picky")
        return y


class Catches(nn.Module):
    """An op of its own, then a child that may raise (caught here), then another op."""

    def __init__(self, fails):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.child = Picky(fails)

    def forward(self, x):
        h = torch.tanh(self.lin(x))  # the block's own op, made before the child runs
        try:
            self.child(h)
        except ValueError:
            pass
        return h.exp()


@pytest.mark.parametrize("wrapped", [False, True])
def test_a_child_that_raises_and_is_caught_changes_no_tag(wrapped):
    """The parent's ops keep the parent's tag whether or not its child raised (the oracle:
    the same forward with a child that does not raise)."""
    def tags(fails):
        model = nn.Sequential(Catches(fails)) if wrapped else Catches(fails)
        with dg.track_modules(model):
            out = model(torch.ones(1, 3))
        return sorted((n.name, n.module) for n in dg.draw(out, params=model).nodes if n.kind == "op")

    assert tags(fails=True) == tags(fails=False)


def test_prefix_is_prepended():
    model = nn.Sequential(nn.Linear(2, 2))
    with dg.track_modules(model, prefix="net"):
        loss = model(torch.ones(1, 2)).sum()
    assert modules_by_name(dg.draw(loss))["AddmmBackward0"] == "net.0"


@pytest.mark.parametrize("bad", [3, None, ["net"]])
def test_prefix_that_is_no_str_raises_saying_what_to_pass(bad):
    model = nn.Sequential(nn.Linear(2, 2))
    with pytest.raises(TypeError, match=r"prefix must be a str, the dotted name of the model in a bigger one "
                       r"\(such as 'encoder'\); got " + re.escape(f"{bad!r}")):
        with dg.track_modules(model, prefix=bad):
            pass
    assert not model[0]._forward_pre_hooks  # nothing was added


def test_shared_submodule_tags_each_call():
    lin = nn.Linear(2, 2)
    model = nn.ModuleDict({"lin": lin})
    with dg.track_modules(model):
        loss = lin(lin(torch.ones(1, 2))).sum()
    graph = dg.draw(loss)
    assert [n.module for n in graph.nodes if n.name == "AddmmBackward0"] == ["lin", "lin"]


def test_tracking_does_not_change_outputs():
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(4, 3)
    plain = model(x)
    with dg.track_modules(model) as tracked:
        assert tracked is model
        assert torch.equal(model(x), plain)


def test_forward_under_no_grad_inside_tracking_is_fine():
    model = nn.Sequential(nn.Linear(2, 2))
    with dg.track_modules(model), torch.no_grad():
        out = model(torch.ones(1, 2))
    assert out.grad_fn is None


def test_hooks_are_removed_after_the_block():
    model = Net()
    with dg.track_modules(model):
        assert all_hooks(model)  # installed while inside
        model(torch.ones(1, 3))
    assert all_hooks(model) == []


def test_hooks_are_removed_when_the_body_raises():
    model = Net()
    with pytest.raises(ZeroDivisionError):
        with dg.track_modules(model):
            model(torch.ones(1, 3))
            1 / 0
    assert all_hooks(model) == []


def test_hooks_are_removed_when_the_forward_raises():
    model = Net()
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        with dg.track_modules(model):
            model(torch.ones(1, 5))  # wrong width
    assert all_hooks(model) == []


def test_user_hooks_are_kept():
    model = nn.Sequential(nn.Linear(2, 2))
    handle = model[0].register_forward_hook(lambda m, a, out: None)
    with dg.track_modules(model):
        pass
    assert list(model[0]._forward_hooks) == [handle.id]


@pytest.mark.parametrize("thing", [lambda x: x, torch.ones(2), "model", None])
def test_non_module_raises(thing):
    with pytest.raises(TypeError, match=r"track_modules needs an nn\.Module; got"):
        with dg.track_modules(thing):
            pass
