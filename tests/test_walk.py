"""_walk.reach: the one walk of the autograd graph; a plain recursive grad_fn walk is the oracle."""

import torch

from dynagraph._walk import reach


def diamond():
    """x -> (a, b) -> c: the MulBackward of x is met twice, AccumulateGrad below it."""
    x = torch.tensor([2.0], requires_grad=True)
    y = x * 3
    return (y.exp() + y.sin()).sum()


def all_nodes(fn, out=None):
    """Every node below ``fn``, by plain recursion (the oracle)."""
    out = set() if out is None else out
    if fn is not None and fn not in out:
        out.add(fn)
        for child, _ in fn.next_functions:
            all_nodes(child, out)
    return out


def test_reach_enters_every_node_once():
    loss = diamond()
    entered = []
    reach([loss.grad_fn, loss.grad_fn], lambda fn: entered.append(fn) is None)
    assert len(entered) == len(set(entered)) == len(all_nodes(loss.grad_fn))


def test_reach_breadth_first_enters_nodes_in_the_order_they_were_met():
    loss = diamond()
    names = []
    reach([loss.grad_fn], lambda fn: names.append(fn.name()) is None, breadth_first=True)
    assert names[:2] == ["SumBackward0", "AddBackward0"]
    assert names[-1] == "torch::autograd::AccumulateGrad"


def test_reach_depth_first_goes_down_the_last_input_first():
    loss = diamond()
    names = []
    reach([loss.grad_fn], lambda fn: names.append(fn.name()) is None)
    assert names[:3] == ["SumBackward0", "AddBackward0", "SinBackward0"]


def test_reach_does_not_go_below_a_node_enter_refuses():
    loss = diamond()
    entered = []

    def enter(fn):
        entered.append(fn.name())
        return fn.name() != "AddBackward0"

    reach([loss.grad_fn], enter)
    assert entered == ["SumBackward0", "AddBackward0"]
