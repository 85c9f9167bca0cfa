"""diff: node counts of two graphs, per op, with the analytic change as the oracle."""

import re
from collections import Counter

import pytest
import torch
from torch import nn

import dynagraph as dg

from _helpers import html_of, pictures, svg_texts


@pytest.fixture(scope="module")
def rnn():
    """Unroll an RNNCell for ``n`` steps; returns the loss tensor."""
    torch.manual_seed(0)
    cell, xs = nn.RNNCell(3, 4), torch.randn(6, 2, 3)

    def unroll(n, scale=1.0):
        h = torch.zeros(2, 4)
        for t in range(n):
            h = cell(scale * xs[t], h)
        return h.sum()
    unroll.cell = cell
    return unroll


def per_step(rnn):
    """What one more RNN step adds to the graph."""
    return dg.draw(rnn(3)).counts() - dg.draw(rnn(2)).counts()


def test_longer_unroll_adds_per_step_nodes_for_each_extra_step(rnn):
    d = dg.diff(dg.draw(rnn(2)), dg.draw(rnn(5)), labels=("2 steps", "5 steps"))
    step = per_step(rnn)
    assert step == Counter({"AddmmBackward0": 2, "TBackward0": 2, "TanhBackward0": 1, "AddBackward0": 1})
    assert {name: b - a for name, a, b in d.rows} == {
        **{name: 3 * k for name, k in step.items()}, "AccumulateGrad": 0, "SumBackward0": 0}
    assert d.total == (1 + 4 + 2 * 6, 1 + 4 + 5 * 6)  # sum, 4 weights, 6 nodes a step
    changes = [b - a for _, a, b in d.rows]
    assert changes == sorted(changes, reverse=True)


def test_new_nodes_are_the_latest_of_each_name(rnn):
    step, b = per_step(rnn), dg.draw(rnn(5))
    d = dg.diff(dg.draw(rnn(2)), b)
    assert Counter(b.node(i).name for i in d.new) == Counter({k: 3 * v for k, v in step.items()})
    for name in {b.node(i).name for i in d.new}:
        group = sorted((n for n in b.nodes if n.name == name), key=lambda n: n.seq)
        latest = {n.id for n in group[-3 * step[name]:]}
        assert latest == {i for i in d.new if b.node(i).name == name}


def test_same_structure_has_no_change(rnn):
    d = dg.diff(dg.draw(rnn(3)), dg.draw(rnn(3, scale=2.0)))
    assert all(a == b for _, a, b in d.rows) and d.new == []
    assert repr(d).splitlines()[-1].endswith("+0")


def test_new_layer_lights_its_own_parameters():
    torch.manual_seed(0)
    two = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    three = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2), nn.Linear(2, 2))
    x = torch.ones(1, 2)
    b = dg.draw(three(x).sum(), params=three)
    d = dg.diff(dg.draw(two(x).sum(), params=two), b)
    new_leaves = sorted(b.node(i).label for i in d.new if b.node(i).kind == "parameter")
    assert new_leaves == ["2.bias", "2.weight"]


def test_recordings_and_traces_compare_like_graphs(rnn):
    with dg.live(rnn.cell) as short:
        rnn(2)
    with dg.live(rnn.cell) as long:
        loss = rnn(4)
    d, two_steps = dg.diff(short, long), {k: 2 * v for k, v in per_step(rnn).items()}
    assert {name: b - a for name, a, b in d.rows if b != a} == two_steps
    assert Counter(long.nodes[i].name for i in d.new) == Counter(two_steps)
    with dg.trace_backward(loss) as bt:
        loss.backward()
    assert all(a == b for _, a, b in dg.diff(long, bt).rows)


def test_repr_is_a_table():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    d = dg.diff(dg.draw(2 * x), dg.draw((2 * x + 1).exp()))
    assert repr(d) == (
        "node                a      b  change\n"
        "AddBackward0        0      1      +1\n"
        "ExpBackward0        0      1      +1\n"
        "AccumulateGrad      1      1      +0\n"
        "MulBackward0        1      1      +0\n"
        "total               2      4      +2"
    )
    assert dg.diff(dg.draw(2 * x), dg.draw(2 * x), labels=("before", "after")).__repr__().startswith(
        "node           before  after  change\n")


def test_the_table_header_reads_in_chinese_and_stays_aligned():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    d = dg.diff(dg.draw(2 * x), dg.draw((2 * x).exp()), labels=("之前", "after"))
    dg.set_language("zh")
    try:
        text, html = repr(d), html_of(d)
    finally:
        dg.set_language("en")
    assert text == (
        "节点             之前  after  变化量\n"   # a Chinese character takes two columns
        "ExpBackward0        0      1      +1\n"
        "AccumulateGrad      1      1      +0\n"
        "MulBackward0        1      1      +0\n"
        "总计                2      3      +1"
    )
    assert "<tr><td><b>节点</b></td><td><b>之前</b></td><td><b>after</b></td><td><b>变化量</b></td></tr>" in html
    assert "<td><b>总计</b></td>" in html


def test_picture_outlines_the_new_nodes():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    d = dg.diff(dg.draw(2 * x), dg.draw((2 * x + 1).exp()), labels=("<short>", "long & new"))
    dot = d.to_dot()
    for node in d.b.nodes:
        (line,) = [ln for ln in dot.splitlines() if re.match(rf"\s*n{node.id} \[", ln)]
        assert ("#e03131" in line) == (node.id in d.new), line
    html = html_of(d)
    assert "<td><b>&lt;short&gt;</b></td><td><b>long &amp; new</b></td>" in html
    assert "<th" not in html  # (an allowlist sanitizer such as nbconvert's shows <th> as text)
    assert "<td>AddBackward0</td><td>0</td><td>1</td><td>+1</td>" in html
    (svg,) = pictures(html)
    assert "long & new: new vs <short> in red" in svg_texts(svg)


def test_bad_input_raises():
    g = dg.draw(2 * torch.ones(1, requires_grad=True))
    with pytest.raises(TypeError, match="a must be a dynagraph Graph or Recording; got Tensor"):
        dg.diff(torch.ones(1), g)
    with pytest.raises(TypeError, match="b must be a dynagraph Graph or Recording; got str"):
        dg.diff(g, "graph")
    with pytest.raises(ValueError, match="labels must be two names; got"):
        dg.diff(g, g, labels=("only one",))
