"""live: the steps of small programs with known answers, and a recorder that leaves no trace."""

import contextlib
import gc
import importlib
import inspect
import re
import weakref
from typing import ClassVar

import numpy
import pytest
import torch
from torch import nn
from torch.autograd.function import Function

import dynagraph as dg
from dynagraph import _page, _records, _torch

from _helpers import html_of, outputs_of, page_data, page_steps, pictures, stored, svg_texts

live_module = importlib.import_module("dynagraph.live")  # dg.live is the function
patch_module = importlib.import_module("dynagraph._patch")
recorder_module = importlib.import_module("dynagraph._recorder")


def next_line():
    """The line number just below the caller's line (where the op under test sits)."""
    return inspect.currentframe().f_back.f_lineno + 1


def made(rec, step):
    """Names of the autograd nodes ``step`` created."""
    return [rec.nodes[i].name for i in step.nodes]


class Square(Function):
    """x**2 written as several ops, to check they stay inside one step."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x + 0.0  # two ops the recorder must not show as steps

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


class Branchy(nn.Module):
    """Takes the ReLU path for positive inputs, tanh otherwise; halves once per row."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        h = self.fc(x)
        if x.sum() > 0:
            h = torch.relu(h)
        else:
            h = torch.tanh(h)
        for _ in range(len(x)):
            h = h * 0.5
        return h


# -- steps of small programs ---------------------------------------------------------

def test_two_x_plus_one_is_mul_then_add():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with dg.live(params={"x": x}) as rec:
        line = next_line()
        y = 2 * x + 1
    assert [s.op for s in rec.steps] == ["mul", "add"]
    assert [made(rec, s) for s in rec.steps] == [["MulBackward0", "AccumulateGrad"], ["AddBackward0"]]
    assert [s.index for s in rec.steps] == [0, 1]
    for s in rec.steps:
        assert s.where == f"test_live.py:{line}"
        assert s.code == "y = 2 * x + 1"
        assert s.module is None and s.note == ""
        assert s.inputs == [(2,)] and s.outputs == [(2,)]
    leaf = rec.nodes[rec.steps[0].nodes[1]]
    assert (leaf.kind, leaf.label) == ("input", "x")
    mul, add = rec.steps[0].nodes[0], rec.steps[1].nodes[0]
    assert sorted(rec.edges) == sorted([(leaf.id, mul), (mul, add)])
    assert torch.equal(y, 2 * x.detach() + 1)


@pytest.mark.parametrize("context, needs_grad, note", [
    (torch.enable_grad, False, "no input requires grad"),
    (torch.no_grad, True, "grad disabled: torch.no_grad()"),
    (torch.inference_mode, True, "inference_mode"),
])
def test_op_that_builds_no_graph_says_why(context, needs_grad, note):
    x = torch.ones(3, requires_grad=needs_grad)
    with dg.live() as rec:
        with context():
            y = x * 2
    assert y.grad_fn is None
    (step,) = rec.steps
    assert (step.op, step.nodes, step.note) == ("mul", [], note)
    assert rec.nodes == [] and f"no node ({note})" in repr(rec)


def test_new_leaf_is_not_blamed_on_its_inputs():
    with dg.live() as rec:
        torch.zeros(2, requires_grad=True)
    (step,) = rec.steps
    assert step.nodes == [] and "leaf" in step.note


def test_inplace_op_is_recorded_with_its_node():
    x = torch.ones(2, requires_grad=True)
    with dg.live() as rec:
        z = x.clone()
        z.mul_(3)
    assert [s.op for s in rec.steps] == ["clone", "mul_"]
    assert made(rec, rec.steps[1]) == ["MulBackward0"]
    assert rec.steps[1].outputs == [(2,)]  # z once, though it is both result and target


def test_index_assignment_is_recorded_as_copy_slices():
    x = torch.ones(3, requires_grad=True)
    with dg.live() as rec:
        z = x * 1
        line = next_line()
        z[0] = 5.0
    step = rec.steps[-1]
    assert (step.op, made(rec, step)) == ("setitem", ["CopySlices"])
    assert (step.where, step.code) == (f"test_live.py:{line}", "z[0] = 5.0")
    assert step.outputs == [(3,)]


def test_property_reads_are_named_after_the_property():
    x = torch.ones(2, 3, requires_grad=True)
    with dg.live() as rec:
        x.T
        x.data
    assert [s.op for s in rec.steps] == ["T", "data"]
    assert made(rec, rec.steps[0]) == ["PermuteBackward0", "AccumulateGrad"]


def test_custom_function_is_one_step_of_its_own():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with dg.live() as rec:
        y = Square.apply(x)
        s = y.sum()
    assert [st.op for st in rec.steps] == ["Square.apply", "sum"]
    custom = rec.nodes[rec.steps[0].nodes[0]]
    assert (custom.kind, custom.label) == ("custom", "Square")
    assert made(rec, rec.steps[0]) == [custom.name, "AccumulateGrad"]
    assert made(rec, rec.steps[1]) == ["SumBackward0"]  # the custom node is not credited here
    s.backward()
    assert torch.equal(x.grad, 2 * x.detach())


class _NotAClassmethod:
    """Binds like a classmethod without being one: a torch whose apply live() cannot swap."""

    def __init__(self, method):
        self.method = method

    def __get__(self, obj, cls=None):
        return self.method.__get__(obj, cls)


def test_without_patchable_apply_a_custom_function_shows_its_inner_ops(monkeypatch):
    monkeypatch.setattr(importlib.import_module("dynagraph._torch.features"), "MISSING", set())
    unpatchable = _NotAClassmethod(Function.__dict__["apply"])
    monkeypatch.setattr(Function, "apply", unpatchable)
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with pytest.warns(RuntimeWarning, match="has no Function.apply"), dg.live() as rec:
        Square.apply(x).sum()
    assert [st.op for st in rec.steps] == ["mul", "add", "sum"]  # the Function's own ops
    assert Function.__dict__["apply"] is unpatchable  # nothing patched, nothing undone


def test_custom_function_inside_a_module_is_one_step():
    class Sq(nn.Module):
        def forward(self, x):
            return Square.apply(x)

    model = nn.Sequential(nn.Linear(2, 2), Sq())
    with dg.live(model) as rec:
        model(torch.ones(1, 2))
    assert [(s.op, s.module) for s in rec.steps] == [("ones", None), ("linear", "0"),
                                                    ("Square.apply", "1")]


def test_steps_name_modules_by_path_when_given_the_model():
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    with dg.live(model) as rec:
        model(torch.ones(4, 2)).sum()
    assert [(s.op, s.module) for s in rec.steps] == [
        ("ones", None), ("linear", "0"), ("relu", "1"), ("sum", None)]
    assert rec.module_types == {"0": "Linear", "1": "ReLU"}
    assert {rec.nodes[i].module for i in rec.steps[1].nodes} == {"0"}
    assert "linear in 0 (Linear)" in repr(rec)


def test_nested_module_paths():
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    model = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    with dg.live(model) as rec:
        model(torch.zeros(1, 3, 8))
    linears = [s.module for s in rec.steps if s.op == "linear"]
    assert linears == ["layers.0.linear1", "layers.0.linear2", "layers.1.linear1", "layers.1.linear2"]


def test_steps_name_modules_by_class_without_the_model():
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    with dg.live() as rec:
        model(torch.ones(4, 2))
    assert [(s.op, s.module) for s in rec.steps] == [("ones", None), ("linear", "Linear"),
                                                    ("relu", "ReLU")]
    assert all(n.module is None for n in rec.nodes)


def test_ops_of_the_model_itself_belong_to_no_module():
    model = Branchy()
    with dg.live(model) as rec:
        model(torch.ones(1, 3))
    assert [s.module for s in rec.steps if s.op in ("relu", "mul")] == [None, None]
    assert rec.module_types == {"fc": "Linear"}


@pytest.mark.parametrize("x, branch, rows", [
    (torch.ones(2, 3), "relu", 2),
    (-torch.ones(3, 3), "tanh", 3),
])
def test_branch_and_loop_record_only_the_path_taken(x, branch, rows):
    model = Branchy()
    with dg.live(model) as rec:
        model(x)
    assert [s.op for s in rec.steps] == ["linear", "sum", "gt", branch] + ["mul"] * rows
    names = rec.graph().counts()
    assert names["ReluBackward0"] == (branch == "relu")
    assert names["TanhBackward0"] == (branch == "tanh")
    assert names["MulBackward0"] == rows
    assert [s.note for s in rec.steps[1:3]] == ["no input requires grad"] * 2


def test_nodes_built_before_the_block_are_drawn_but_not_credited():
    x = torch.ones(2, requires_grad=True)
    h = x * 2
    with dg.live() as rec:
        y = h + 1
    (step,) = rec.steps
    assert made(rec, step) == ["AddBackward0"]
    before = [n for n in rec.nodes if n.id not in step.nodes]
    assert [(n.name, n.label) for n in before] == [("MulBackward0", "MulBackward0\n(before live)")]
    assert len(rec.graph(upto=0)) == 2
    del y


def test_graph_upto_a_step():
    x = torch.ones(2, requires_grad=True)
    with dg.live() as rec:
        (2 * x + 1).sum()
    assert [sorted(rec.graph(upto=k).counts()) for k in range(3)] == [
        ["AccumulateGrad", "MulBackward0"],
        ["AccumulateGrad", "AddBackward0", "MulBackward0"],
        ["AccumulateGrad", "AddBackward0", "MulBackward0", "SumBackward0"]]
    assert len(rec.graph(upto=0).edges) == 1


def test_nested_recordings_both_see_every_op():
    x = torch.ones(2, requires_grad=True)
    with dg.live() as outer:
        with dg.live() as inner:
            Square.apply(2 * x)
    assert [s.op for s in inner.steps] == [s.op for s in outer.steps] == ["mul", "Square.apply"]
    assert inner.graph().counts() == outer.graph().counts()


def test_repr_is_a_table_of_steps():
    x = torch.tensor([1.0], requires_grad=True)
    with dg.live(params={"x": x}) as rec:
        line = next_line()
        2 * x + 1
    assert repr(rec).splitlines() == [
        "<dynagraph.Recording: 2 steps, 3 nodes>",
        f"  1 mul  [test_live.py:{line}] 2 * x + 1",  # steps count from 1, as in the slider and the list
        "  (1,) -> (1,)  + MulBackward0, AccumulateGrad",
        f"  2 add  [test_live.py:{line}] 2 * x + 1",
        "  (1,) -> (1,)  + AddBackward0",
    ]
    outs = outputs_of(rec)
    assert outs["picture"]["text/plain"] == repr(rec)
    assert [text for text, _ in page_steps(html_of(rec))] == [
        f"mul  [test_live.py:{line}] 2 * x + 1\n  (1,) -> (1,)  + MulBackward0, AccumulateGrad",
        f"add  [test_live.py:{line}] 2 * x + 1\n  (1,) -> (1,)  + AddBackward0"]


def test_repr_counts_one_step_and_one_node_in_the_singular(chinese):
    x = torch.ones(2, requires_grad=True)
    y = x.exp()  # made before the block: the block's one op adds one node, SinBackward0
    with dg.live() as rec:
        y.sin()
    with dg.live() as two:
        y.sin()
        y.cos()
    own = dg.Recording(rec.steps, [n for n in rec.nodes if n.id in rec.steps[0].nodes], [])  # that node alone
    assert (len(own.steps), len(own.nodes), len(rec.nodes), len(two.steps), len(two.nodes)) == (1, 1, 2, 2, 3)
    zh = [repr(r).splitlines()[0] for r in (own, rec, two)]
    dg.set_language("en")
    en = [repr(r).splitlines()[0] for r in (own, rec, two)]
    assert en == ["<dynagraph.Recording: 1 step, 1 node>", "<dynagraph.Recording: 1 step, 2 nodes>",
                  "<dynagraph.Recording: 2 steps, 3 nodes>"]
    assert zh == ["<dynagraph.Recording：1 步，1 个节点>", "<dynagraph.Recording：1 步，2 个节点>",
                  "<dynagraph.Recording：2 步，3 个节点>"]


def test_empty_recording_displays_as_text_only():
    with dg.live() as rec:
        pass
    assert [out.data for out in rec._outputs()] == [{"text/plain": "<dynagraph.Recording: 0 steps, 0 nodes>"}]


# -- the recording's graph is autograd's graph -----------------------------------------

def mlp():
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 1)), (5, 4)


def encoder_layer():
    return nn.TransformerEncoderLayer(8, 2, 16, batch_first=True).train(), (2, 5, 8)


@pytest.mark.parametrize("factory", [mlp, encoder_layer])
def test_recorded_graph_equals_drawn_graph(factory):
    torch.manual_seed(0)
    model, shape = factory()
    with dg.live(model) as rec:
        out = model(torch.randn(shape)).sum()
    drawn = dg.draw(out, params=model, max_nodes=None)
    assert rec.graph().counts() == drawn.counts()
    assert len(rec.edges) == len(drawn.edges) - 1  # draw adds the edge into its output node
    assert sum(len(s.nodes) for s in rec.steps) == len(rec.nodes)  # every node credited once


def test_draw_groups_by_the_modules_live_tagged():
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    with dg.live(model):
        out = model(torch.ones(1, 2)).sum()
    collapsed = dg.draw(out, params=model, depth=1)
    assert sorted(n.label.split(":")[0] for n in collapsed.nodes if n.kind == "module") == ["0", "1", "2"]


# -- what must hold after the block ------------------------------------------------------

def hooks_state():
    m = nn.modules.module
    return (torch._C._len_torch_function_stack(), len(m._global_forward_hooks),
            len(m._global_forward_pre_hooks), len(m._global_forward_hooks_always_called),
            Function.__dict__["apply"])


@pytest.mark.parametrize("where", ["body", "forward"])
def test_exit_restores_torch_even_when_the_block_raises(where):
    class Boom(nn.Module):
        def forward(self, x):
            raise RuntimeError("boom in forward")

    model = nn.Sequential(nn.Linear(2, 2), Boom()) if where == "forward" else nn.Linear(2, 2)
    before = hooks_state()
    with pytest.raises(RuntimeError, match="boom"):
        with dg.live(model) as rec:
            Square.apply(model(torch.ones(1, 2)))
            raise RuntimeError("boom in body")
    assert hooks_state() == before
    assert hooks_state()[:4] == (0, 0, 0, 0)
    assert rec._recorder is None  # dropped: its running modules with it
    x = torch.ones(1, requires_grad=True)
    (x * 2).sum()  # not recorded any more
    ran = ["ones", "linear"] + (["Square.apply"] if where == "body" else [])
    assert [s.op for s in rec.steps] == ran


def test_exit_restores_torch_after_a_clean_block():
    before = hooks_state()
    with dg.live(nn.Linear(1, 1)):
        assert torch._C._len_torch_function_stack() == 1
        assert Function.__dict__["apply"] is not before[-1]
    assert hooks_state() == before


def record_mlp():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    x = torch.randn(2, 3, requires_grad=True)
    with dg.live(model) as rec:
        out = Square.apply(model(x)).sum()
    return rec, [weakref.ref(t) for t in (x, out, *model.parameters())] + [weakref.ref(model)]


def test_recording_keeps_no_tensor_alive():
    rec, refs = record_mlp()
    gc.collect()
    assert [r() for r in refs] == [None] * len(refs)
    assert len(rec.steps) == 5 and rec.graph().counts()["AccumulateGrad"] == 5


def test_recording_does_not_change_results():
    torch.manual_seed(0)
    model = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True).train()  # dropout draws
    x = torch.randn(2, 5, 8)

    def run(record):
        model.zero_grad(set_to_none=True)
        torch.manual_seed(1)
        if record:
            with dg.live(model):
                out = model(x)
                out.sum().backward()
        else:
            out = model(x)
            out.sum().backward()
        return out.detach(), [p.grad.clone() for p in model.parameters()]

    (out_a, grads_a), (out_b, grads_b) = run(False), run(True)
    assert torch.equal(out_a, out_b)
    assert all(torch.equal(a, b) for a, b in zip(grads_a, grads_b, strict=True))


# -- the live view and bad arguments ---------------------------------------------------

def test_view_outside_ipython_records_and_prints_nothing(capsys):
    x = torch.ones(2, requires_grad=True)
    with dg.live(view=True, interval=1e-9) as rec:
        2 * x + 1
    assert [s.op for s in rec.steps] == ["mul", "add"]
    assert capsys.readouterr().out == ""


class FakeHandle:
    def __init__(self):
        self.updates = []

    def update(self, obj, metadata=None, raw=False):
        assert raw, "the view hands IPython a ready mime bundle"
        self.updates.append(obj)


def test_view_shows_the_finished_graph_at_exit(monkeypatch):
    import IPython
    import IPython.display
    handle = FakeHandle()
    shown = []
    monkeypatch.setattr(IPython, "get_ipython", lambda: object())
    monkeypatch.setattr(IPython.display, "display",
                        lambda obj, raw=False, display_id=None: shown.append(obj) or handle)
    x = torch.ones(2, requires_grad=True)
    with dg.live(view=True, interval=3600) as rec:  # no redraw before the end
        2 * x + 1
    assert len(shown) == 2 and "recording" in shown[0]["text/plain"]  # the picture's output, then its script's
    assert len(handle.updates) == 2
    picture, script = handle.updates
    (svg,) = pictures(script["application/javascript"])
    assert "image/png" in picture  # the last redraw stays in the notebook: with its PNG
    assert "2 steps so far" in svg_texts(svg)
    assert rec._recorder is None  # the view went with it


def test_view_without_a_renderer_fails_before_recording(monkeypatch, tmp_path):
    import IPython
    monkeypatch.setattr(IPython, "get_ipython", lambda: object())
    monkeypatch.setenv("DYNAGRAPH_DOT", str(tmp_path / "no-such-dot"))
    with pytest.raises(dg.RendererNotFoundError, match="pip install graphviz-pure"):
        with dg.live(view=True):
            pass
    assert hooks_state()[:4] == (0, 0, 0, 0)


def test_interval_must_be_positive():
    for bad in (0, -1.0, float("nan"), "1", None, True):  # a str or None gave Python's '<=' not supported
        with pytest.raises(ValueError, match="interval must be > 0 seconds; got"):
            with dg.live(interval=bad):
                pass


def test_model_and_params_together_raise():
    model, x = nn.Linear(2, 1), torch.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match=r"pass a model or params=, not both \(with a model, params= was ignored\)"):
        with dg.live(model, params={"x": x}):  # the names in params= were dropped without a word
            pass
    assert torch._C._len_torch_function_stack() == 0


def test_graph_title_that_is_no_string_raises_at_once():
    x = torch.ones(2, requires_grad=True)
    with dg.live(params={"x": x}) as rec:
        (2 * x).sum()
    with pytest.raises(TypeError, match="title must be a string; got int"):
        rec.graph(title=3)  # was an AttributeError from the DOT writer when the picture was made
    assert rec.graph(title="doubled").title == "doubled"


def test_model_must_be_a_module():
    with pytest.raises(TypeError, match=r"model must be an nn.Module .* got str"):
        with dg.live("x"):
            pass
    assert torch._C._len_torch_function_stack() == 0


def test_step_text_without_names_counts_nodes():
    step = live_module.Step(0, "mul", "f.py:1", "y = 2 * x", None, [(2,)], [(2,)], [0, 1])
    assert step.text() == "mul  [f.py:1] y = 2 * x\n  (2,) -> (2,)  + 2 nodes"


@pytest.fixture
def chinese():
    dg.set_language("zh")
    yield
    dg.set_language("en")


def test_step_texts_read_in_chinese_with_names_shapes_and_code_as_they_are(chinese):
    names = [f"N{i}" for i in range(3000)]
    step = live_module.Step(0, "gru", "this cell, line 3", "out = rnn(x)", "rnn", [(3, 2)], [(3, 4)],
                            list(range(3000)))
    assert step.text(names, {"rnn": "GRU"}) == ("gru 位于 rnn（GRU）  [本单元格，第 3 行] out = rnn(x)\n"
                                                "  (3, 2) -> (3, 4)  + N0, N1, N2, N3, N4, N5, …（共 3,000 个节点）")
    counted = live_module.Step(0, "mul", "f.py:1", "y = 2 * x", None, [(2,)], [(2,)], [0, 1])
    assert counted.text() == "mul  [f.py:1] y = 2 * x\n  (2,) -> (2,)  + 2 个节点"
    x = torch.ones(3)
    with dg.live() as rec:
        x * 2
    (none,) = rec.steps
    assert none.note == "no input requires grad"  # data: English in every language
    assert none.text().endswith("  没有节点（没有输入需要梯度）")
    with dg.live() as rec:
        with torch.no_grad():
            torch.ones(3, requires_grad=True) * 2
    assert rec.steps[-1].text().endswith("没有节点（梯度记录已关闭：torch.no_grad()）")


def test_a_loop_over_many_layers_shares_one_text_per_op_in_chinese(chinese):
    """The page marks a step's module in its text (live._template), so that the steps
    of a loop over many layers share one text: in Chinese too."""
    model = nn.Sequential(*[m for _ in range(50) for m in (nn.Linear(4, 4), nn.ReLU())])
    with dg.live(model) as rec:
        model(torch.ones(2, 4)).sum()
    data = page_data(html_of(rec))
    names = [n.name for n in rec.nodes]
    assert [t for t, _ in page_steps(html_of(rec))] == [s.text(names, rec.module_types) for s in rec.steps]
    assert len(data["texts"]) < 6 and len(data["fills"]) == 100  # one text per op, a name per layer
    assert any(t.startswith("linear 位于 \x00（Linear）") for t in data["texts"])


def test_the_step_list_heading_counts_steps_and_faint_nodes_in_chinese(chinese):
    lstm = nn.LSTM(2, 3)
    with dg.live(lstm) as rec:
        out, _ = lstm(torch.ones(4, 1, 2))
        out.pow(2).mean()
    last, unused = rec.unused()
    caption = rec._caption(last, unused)
    assert caption.startswith(f"{len(rec.steps)} 步；画成浅色的 {len(unused)} 个节点不参与计算第 {last.index + 1} 步")
    assert caption.endswith("rec.feeding(tensor) 只画出计算某个张量所用的部分")


def test_a_step_that_made_many_nodes_names_the_first_and_counts_them():
    names = [f"N{i}" for i in range(3000)]
    step = live_module.Step(0, "gru", "f.py:1", "out = rnn(x)", "rnn", [(3, 2)], [(3, 4)], list(range(3000)))
    assert step.text(names) == ("gru in rnn  [f.py:1] out = rnn(x)\n  (3, 2) -> (3, 4)  "
                                "+ N0, N1, N2, N3, N4, N5, \u2026 (3,000 nodes)")
    few = live_module.Step(0, "mul", "f.py:1", "y = 2 * x", None, [(2,)], [(2,)], [3, 7])
    assert few.text(names).endswith("+ N3, N7")


def test_the_repr_of_an_nn_gru_recording_stays_small():
    torch.manual_seed(0)
    rnn = nn.GRU(4, 8, num_layers=2)
    with dg.live(rnn) as rec:
        rnn(torch.randn(50, 2, 4))[0].sum()
    (gru,) = [s for s in rec.steps if s.op == "gru"]
    assert len(gru.nodes) > 200  # one op, hundreds of nodes
    assert len(repr(rec)) < 2_000


# -- torch.compile inside a block ------------------------------------------------------

class CountGraphs:
    """A torch.compile backend that runs each graph as FX wrote it and counts them."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward


def compiled_twice(fullgraph, record):
    """Compile an MLP afresh, call it twice (inside ``live`` if ``record``); return
    (outputs, the ops of each graph made, recording or None)."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model, backend = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)), CountGraphs()
    fast = torch.compile(model, backend=backend, fullgraph=fullgraph)
    x = torch.ones(1, 2)
    with dg.live(model) if record else contextlib.nullcontext() as rec:
        outs = [fast(x), fast(x)]
    torch._dynamo.reset()
    ops = [[n.target for n in gm.graph.nodes if n.op == "call_function"] for gm in backend.graphs]
    return outs, ops, rec


@pytest.mark.filterwarnings("ignore:Using `torch.compile\\(module\\)` when there are global hooks")
@pytest.mark.parametrize("fullgraph", [True, False])
def test_compiled_model_runs_as_outside_and_is_one_step_per_call(fullgraph):
    (plain, plain_graphs, _), (outs, graphs, rec) = (compiled_twice(fullgraph, False),
                                                    compiled_twice(fullgraph, True))
    assert len(plain_graphs) == 1 and graphs == plain_graphs
    assert all(torch.equal(a, b) for a, b in zip(plain, outs, strict=True))
    assert [(s.op, s.module) for s in rec.steps] == [("compiled", None)] * 2
    assert rec.steps[0].where == rec.steps[1].where and "fast(x)" in rec.steps[0].code
    assert rec.steps[0].outputs == [(1, 1)] and (1, 2) in rec.steps[0].inputs
    assert sorted(made(rec, rec.steps[0])) == sorted(
        ["AddmmBackward0", "TBackward0", "AccumulateGrad", "AccumulateGrad", "ReluBackward0",
         "AddmmBackward0", "TBackward0", "AccumulateGrad", "AccumulateGrad"])
    assert sorted(made(rec, rec.steps[1])) == sorted(
        ["AddmmBackward0", "TBackward0", "ReluBackward0", "AddmmBackward0", "TBackward0"])


@pytest.mark.filterwarnings("ignore:Using `torch.compile\\(module\\)` when there are global hooks")
def test_compiled_function_with_autograd_is_one_custom_step():
    torch._dynamo.reset()
    model = nn.Linear(2, 1)
    fast = torch.compile(model, backend="aot_eager", fullgraph=True)
    with dg.live(model) as rec:
        out = fast(torch.ones(1, 2))
    torch._dynamo.reset()
    assert [s.op for s in rec.steps] == ["ones", "CompiledFunction.apply"]
    assert made(rec, rec.steps[1])[0] == "CompiledFunctionBackward"
    assert out.grad_fn.name() == "CompiledFunctionBackward"


# -- a user's own TorchFunctionMode ----------------------------------------------------

class Seen(torch.overrides.TorchFunctionMode):
    """Lists the ops it is shown."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.ops.append(patch_module._op_name(func))
        return func(*args, **(kwargs or {}))


def test_user_mode_around_the_block_sees_only_its_own_calls():
    x = torch.ones(2, requires_grad=True)
    model = nn.Linear(2, 2)
    with Seen() as alone:
        Square.apply(model(x * 2)).sum()
    with Seen() as seen:
        with dg.live(model) as rec:
            Square.apply(model(x * 2)).sum()
    assert seen.ops == alone.ops
    assert [s.op for s in rec.steps] == ["mul", "linear", "Square.apply", "sum"]


def test_user_mode_inside_the_block_keeps_the_users_line():
    x = torch.ones(2, requires_grad=True)
    with dg.live() as rec:
        with Seen() as seen:
            line = next_line()
            y = x * 2
    assert seen.ops == ["mul"]
    (step,) = rec.steps
    assert (step.op, step.where, step.code) == ("mul", f"test_live.py:{line}", "y = x * 2")
    assert made(rec, step) == ["MulBackward0", "AccumulateGrad"]
    del y


def test_compiled_function_is_one_step_at_the_callers_line():
    torch._dynamo.reset()
    backend = CountGraphs()

    def f(x):
        return Square.apply(x * 2).sum()

    fast = torch.compile(f, backend=backend, fullgraph=True)
    x = torch.ones(3, requires_grad=True)
    with dg.live() as rec:
        line = next_line()
        loss = fast(x)
    torch._dynamo.reset()
    (step,) = rec.steps
    assert (step.op, step.where, step.code) == ("compiled", f"test_live.py:{line}", "loss = fast(x)")
    assert sorted(made(rec, step)) == ["AccumulateGrad", "ApplyTemplateBackward", "MulBackward0",
                                       "SumBackward0"]
    assert len(backend.graphs) == 1
    loss.backward()
    assert torch.equal(x.grad, 8 * x.detach())  # d/dx sum((2x)^2)


def test_graph_upto_counts_from_the_end_like_python():
    x = torch.tensor([1.0], requires_grad=True)
    with dg.live(params={"x": x}) as rec:
        (2 * x + 1).exp()
    assert rec.graph(upto=-1).counts() == rec.graph().counts()
    assert rec.graph(upto=-3).counts() == rec.graph(upto=0).counts()
    for bad in (3, -4):
        with pytest.raises(IndexError, match=f"upto={bad} names no step: the recording has 3 steps"):
            rec.graph(upto=bad)


@pytest.mark.parametrize("bad", [1.5, "1", True])
def test_graph_upto_that_is_no_step_number_raises_saying_what_to_pass(bad):
    x = torch.tensor([1.0], requires_grad=True)
    with dg.live(params={"x": x}) as rec:
        (2 * x + 1).exp()
    with pytest.raises(TypeError, match=r"upto must be a step number, an int such as 0 or -1 .*; got "
                       + re.escape(f"{bad!r} ({type(bad).__name__})")):
        rec.graph(upto=bad)
    assert rec.graph(upto=numpy.int64(1)).counts() == rec.graph(upto=1).counts()  # numpy ints are ints


def test_a_step_in_a_jupyter_cell_names_the_cell_by_what_it_defines():
    """``[cell defining f, line 2]``: the same on every run (a cell's temporary file
    name and execution count are not), so stored outputs stay stable."""
    import linecache

    from dynagraph import _source

    cell = "ipykernel_4242/123456789.py"  # (the shape of a cell's file name; no real file)
    text = "# a comment\n\ndef forward_with_a_rather_long_name(x):\n    return x * 2\n"
    linecache.cache[cell] = (len(text), None, text.splitlines(True), cell)
    try:
        assert _source.describe(cell, 4) == ("cell defining forward_with_a_rather_long_name, line 4",
                                             "return x * 2")
        linecache.cache[cell] = (1, None, ["\n"], cell)
        assert _source.describe(cell, 1)[0] == "another cell, line 1"  # nothing to name it by
    finally:
        del linecache.cache[cell]


def test_a_failing_walk_at_the_end_still_lets_everything_go(monkeypatch):
    """The nodes are walked when the block ends: if that walk fails, the error is
    raised, and the recording still holds no node or tensor, and torch is restored."""
    def broken(self, todo):
        raise RuntimeError("walk failed")

    x = torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="walk failed"):
        with dg.live(params={"x": x}) as rec:
            recorder = rec._recorder
            monkeypatch.setattr(recorder_module.Recorder, "_credit", broken)
            y = (x * 2).sum()
    monkeypatch.undo()
    assert rec._recorder is None
    assert recorder._todo == [] and recorder._held == [] and recorder._roots == []
    assert Function.__dict__["apply"] is patch_module._TORCH_APPLY
    assert torch._C._len_torch_function_stack() == 0
    assert y.grad_fn is not None


@pytest.mark.parametrize("error", [RuntimeError("renderer crashed"), dg.RenderTimeoutError("layout ran past 60 s")])
def test_a_failed_redraw_never_reaches_the_loop_and_says_why(monkeypatch, error):
    import IPython
    import IPython.display

    from dynagraph import _page
    handle = FakeHandle()
    monkeypatch.setattr(IPython, "get_ipython", lambda: object())
    monkeypatch.setattr(IPython.display, "display", lambda obj, raw=False, display_id=None: handle)
    calls = []

    def broken(*args, **kwargs):
        calls.append(1)
        raise error
    monkeypatch.setattr(_page, "outputs", broken)
    x = torch.ones(2, requires_grad=True)
    with dg.live(view=True, interval=1e-9) as rec:  # a redraw is due at every op
        y = x
        for _ in range(150):
            y = y * 1.0
    assert len(rec.steps) == 150  # the loop ran to the end
    assert len(calls) == 1  # one failed redraw, then no more tries
    (note,) = handle.updates
    assert set(note) == {"text/plain"}
    text = note["text/plain"]
    assert "stopped redrawing at step 1 " in text and type(error).__name__ in text and str(error) in text
    assert "the recording goes on" in text
    monkeypatch.undo()
    assert "MulBackward0" in rec.graph().counts()  # the recording still draws afterwards


# -- what a recording is drawn for: nodes that do not feed it are faint -----------------

def lstm_recording():
    torch.manual_seed(0)
    lstm = nn.LSTM(3, 4, dtype=torch.float64)  # float64: every step recorded (oneDNN is float32 only)
    x = torch.randn(5, 2, 3, dtype=torch.float64)
    with dg.live(lstm) as rec:
        out, (h, c) = lstm(x)
        loss = out.pow(2).mean()
    return rec, out, h, c, loss


def test_nodes_that_do_not_feed_the_last_result_are_drawn_faint_and_counted():
    rec, out, h, c, loss = lstm_recording()
    last, unused = rec.unused()
    assert last.op == "mean" and last is rec.steps[-1]
    full = dg.draw(loss, params=None, roll=False, max_nodes=None)
    assert len(rec.nodes) - len(unused) == len(full.nodes) - 1  # what feeds the loss: draw's graph (less its output)
    names = {n.id: n.name for n in rec.nodes}
    assert sorted(names[i] for i in unused) == ["StackBackward0", "StackBackward0"]  # h_n and c_n
    html = html_of(rec)  # the picture draws them faint, the step list says so
    assert f"{len(unused)} nodes drawn faint do not feed the result of step {len(rec.steps)} (mean)" in html
    (svg,) = pictures(html)
    faint = re.findall(r'<g class="node dg-op dg-n(\d+)">\s*<(?:rect|polygon) fill="#f8f9fa"', svg)
    assert sorted(int(i) for i in faint) == sorted(unused)


def test_a_recording_where_everything_feeds_the_result_has_nothing_faint():
    x = torch.tensor([1.0], requires_grad=True)
    with dg.live(params={"x": x}) as rec:
        (2 * x + 1).sum()
    assert rec.unused()[1] == set() and "faint" not in html_of(rec)


def test_feeding_restricts_a_recording_to_what_a_tensor_is_computed_from():
    rec, out, h, c, loss = lstm_recording()
    only_h = rec.feeding(h)
    full = dg.draw(h.sum(), roll=False, max_nodes=None)
    assert len(only_h.nodes) == len(full.nodes) - 2  # draw's graph less its sum and output
    assert [s.op for s in only_h.steps] == ["lstm"] and [s.index for s in only_h.steps] == [0]
    assert set(only_h.steps[0].nodes) == {n.id for n in only_h.nodes}  # the lstm made them all
    assert only_h.unused()[1] == set()
    for_loss = rec.feeding(loss)
    assert {n.id for n in for_loss.nodes} == {n.id for n in rec.nodes} - rec.unused()[1]
    assert [s.op for s in for_loss.steps] == [s.op for s in rec.steps if s.nodes] == ["lstm", "pow", "mean"]
    assert len(rec.nodes) == len(for_loss.nodes) + 2  # the recording itself is unchanged


def test_feeding_a_feeding_narrows_it_again_and_a_recording_is_built_from_records():
    rec, out, h, c, loss = lstm_recording()
    for_loss = rec.feeding(loss)
    only_out = for_loss.feeding(out)  # the same nodes as straight from the recording
    assert [n.id for n in only_out.nodes] == [n.id for n in rec.feeding(out).nodes]
    assert [s.op for s in only_out.steps] == ["lstm"] and len(only_out.nodes) < len(for_loss.nodes)
    with pytest.raises(ValueError, match=r"its node .* was not made in this block"):
        for_loss.feeding(c)  # c does not feed the loss: not in for_loss
    built = dg.Recording(rec.steps, rec.nodes, rec.edges, rec.module_types)  # as load_view makes one
    assert repr(built) == repr(rec) and built.memory is None
    with pytest.raises(ValueError, match="not made in this block"):
        built.feeding(loss)  # it knows no node of a live graph


def test_feeding_a_tensor_not_made_in_the_block_raises():
    rec, out, h, c, loss = lstm_recording()
    with pytest.raises(ValueError, match=r"not computed inside the live\(\) block: a leaf \(no grad_fn\)"):
        rec.feeding(torch.ones(2, requires_grad=True))
    with pytest.raises(ValueError, match="its node MulBackward0 was not made in this block"):
        rec.feeding(loss * 2)
    with pytest.raises(TypeError, match="feeding\\(\\) takes a tensor made inside the block; got list"):
        rec.feeding([loss])


def test_deep_forward_only_recordings_are_freed_when_dropped():
    """A deep recording that runs no backward (a forward, an evaluation) was held for good:
    its hold was rooted at the newest outputs, alive only because later ops saved them."""
    torch.manual_seed(0)
    cell = nn.LSTMCell(8, 16)
    states = []  # weak references to every hidden state: each one an op of the next step saved
    for k in range(20):
        h = c = torch.zeros(1, 16)
        with dg.live(cell) as rec:
            for _ in range(300):
                h, c = cell(torch.ones(1, 8), (h, c))
                states.append(weakref.ref(h))
        if k == 0:
            assert _records.longest_chain(len(rec.nodes), rec.edges) >= _torch.SAFE_DEPTH  # deep: held
        del h, c, rec
        gc.collect()
    assert sum(ref() is not None for ref in states) == 0, "hidden states kept alive by a held graph"
    assert _torch.deep._holds == {} and _torch.deep._pending == [] and _torch.deep._owned == []


@pytest.mark.parametrize("after", ["a dropped result", "70 unrelated steps"])
def test_a_deep_recording_is_held_whatever_its_newest_steps_left_alive(after):
    """The hold was rooted only at the newest outputs that no op consumed. When the last
    op's result was dropped (a loss printed, or a result an interrupt cut off before its
    assignment), or the newest 64 steps made other graphs, nothing held the deep chain: it
    was left to torch's recursive free, which kills the process when the chain is deep
    (tests/test_torch_internals.py shows the crash with 45,000 nodes)."""
    x, w = torch.ones(1, requires_grad=True), torch.ones(1, requires_grad=True)
    y = x
    holds, owned = len(_torch.deep._holds), len(_torch.deep._owned)
    with dg.live() as rec:
        for _ in range(_torch.SAFE_DEPTH + 10):
            y = y * w
        if after == "a dropped result":
            (y * 2).sum()  # consumes y; dies at once
        else:
            for _ in range(70):
                torch.ones(1, requires_grad=True) * 2
    saved = weakref.ref(y.grad_fn._saved_self)  # kept alive by the graph only
    if after == "a dropped result":
        assert len(_torch.deep._holds) == holds + 1  # rooted at y
    else:
        assert len(_torch.deep._owned) == owned + 1  # held until nothing owns it
    del y, rec
    gc.collect()
    assert saved() is None and _torch.deep._pending == [] and _torch.deep._owned == []


def test_a_long_source_line_is_cut_in_step_texts_saying_how_long_it_is(tmp_path, monkeypatch):
    """A model called on a pasted 5,000-number literal: each step's text carried the 38 KB
    line, and the recording's outputs were 244-528 KB."""
    numbers = ", ".join(f"{k % 97 / 7:.6f}" for k in range(5_000))
    line = f"    return model(torch.tensor([[{numbers}]])[:, :4]).relu().sum()"
    (tmp_path / "pasted.py").write_text(f"import torch\n\n\ndef run(model):\n{line}\n")
    monkeypatch.syspath_prepend(tmp_path)
    pasted = importlib.import_module("pasted")
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    with dg.live(model) as rec:
        pasted.run(model)
    code = line.strip()
    assert len(rec.steps) >= 4 and all(s.code == code for s in rec.steps)  # the step keeps the whole line
    cut = f"{code[:recorder_module.CODE_CHARS]}\u2026({len(code):,} characters)"
    assert all(cut in s.text() and code not in s.text() for s in rec.steps)
    assert cut in repr(rec) and len(code) > 38_000
    assert stored(rec) < _page.MAX_BYTES
    assert all(cut in text for text, _ in page_steps(html_of(rec)))


def test_the_step_list_heading_says_1_step_not_1_steps():
    x = torch.ones(3, requires_grad=True)
    with dg.live() as one:
        x.exp()
    with dg.live() as two:
        x.exp().sin()
    assert (len(one.steps), len(two.steps)) == (1, 2)
    assert one._caption(None, set()) == "1 step"
    assert two._caption(None, set()) == "2 steps"


def test_the_step_list_heading_says_1_step_in_chinese(chinese):
    x = torch.ones(3, requires_grad=True)
    with dg.live() as one:
        x.exp()
    assert one._caption(None, set()) == "1 步"


def test_a_live_view_over_a_budget_its_script_cannot_fit_redraws_its_text(monkeypatch):
    """A redraw whose script alone is over the budget (here 2 KB) publishes the picture's
    text and an empty script, and goes on redrawing: it never stops the live view."""
    import IPython
    import IPython.display

    from dynagraph import _page
    handle = FakeHandle()
    monkeypatch.setattr(IPython, "get_ipython", lambda: object())
    monkeypatch.setattr(IPython.display, "display", lambda obj, raw=False, display_id=None: handle)
    monkeypatch.setattr(_page, "MAX_BYTES", 2_000)
    x = torch.ones(2, requires_grad=True)
    with dg.live(view=True, interval=1e-9) as rec:
        y = x
        for _ in range(20):
            y = y * 1.0
    assert len(rec.steps) == 20
    assert not any("stopped redrawing" in str(u) for u in handle.updates), handle.updates
    assert {"application/javascript": ""} in handle.updates


class Logged(torch.Tensor):
    """A tensor subclass that lists the torch calls it is shown."""

    calls: ClassVar[list[str]] = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.calls.append(patch_module._op_name(func))
        return super().__torch_function__(func, types, args, kwargs or {})


@pytest.mark.parametrize("make", [lambda x: x.as_subclass(Logged) * 2,  # a subclass among the inputs
                                  lambda x: (x * 2).as_subclass(Logged)],  # plain inputs, a subclass out
                         ids=["input", "output"])
def test_tensor_subclass_sees_only_the_users_calls(make):
    """The recording reads each op's tensors (grad_fn, shape) with torch function off
    wherever a subclass or another mode could see it; plain ops skip that guard."""
    x = torch.ones(2, requires_grad=True)
    Logged.calls = []
    alone = make(x).sum()
    expected, Logged.calls = Logged.calls, []
    with dg.live() as rec:
        inside = make(x).sum()
    assert Logged.calls == expected and expected
    assert [s.op for s in rec.steps] == ["mul", "sum"]
    assert torch.equal(alone, inside)
