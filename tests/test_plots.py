"""plots: assert on the artists (bars, markers, labels, scales), never on pixels."""

import math

import matplotlib

matplotlib.use("Agg")  # before pyplot: no display needed

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

import dynagraph as dg  # noqa: E402
from dynagraph import norms  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture
def model():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    net(torch.randn(16, 4)).pow(2).mean().backward()
    return net


def bar_heights(ax):
    return [p.get_height() for p in ax.patches]


def tick_labels(ax, axis="x"):
    ticks = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
    return [t.get_text() for t in ticks]


def test_plot_grad_norms_per_module_bars_on_log_scale(model):
    ax = dg.plot_grad_norms(model)
    assert ax.get_yscale() == "log"
    assert tick_labels(ax) == ["0", "2"]
    want = norms.per_module(dg.grad_norms(model))
    assert bar_heights(ax) == pytest.approx([want["0"], want["2"]])
    assert ax.get_title() == "gradient norm per module"
    assert ax.get_ylabel() == "gradient norm (log)"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["L2 norm"]


def test_plot_grad_norms_per_parameter_adds_mean_and_max_markers(model):
    ax = dg.plot_grad_norms(model, per="parameter", title="grads")
    names = [n for n, _ in model.named_parameters()]
    assert tick_labels(ax) == names and ax.get_title() == "grads"
    grads = [p.grad for p in model.parameters()]
    assert bar_heights(ax) == pytest.approx([g.norm().item() for g in grads])
    mean, peak = ax.collections
    assert (mean.get_label(), peak.get_label()) == ("mean |grad|", "max |grad|")
    assert list(mean.get_offsets()[:, 1]) == pytest.approx([g.abs().mean().item() for g in grads])
    assert list(peak.get_offsets()[:, 1]) == pytest.approx([g.abs().max().item() for g in grads])
    assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == [
        "L2 norm", "max |grad|", "mean |grad|"]


def test_plot_grad_norms_marks_missing_nonfinite_and_zero(model):
    model[0].bias.grad = None
    model[2].weight.grad[0, 0] = math.inf
    model[2].bias.grad.zero_()
    ax = dg.plot_grad_norms(model, per="parameter")
    marks = {tick_labels(ax)[round(t.xy[0])]: t.get_text() for t in ax.texts}
    assert marks == {"0.bias": "no grad", "2.weight": "inf/nan", "2.bias": "zero"}
    heights = bar_heights(ax)
    assert all(math.isnan(heights[i]) for i in (1, 2, 3)) and heights[0] > 0  # log axis: no bar


def test_plot_grad_norms_module_with_missing_grad_says_no_grad(model):
    model[2].bias.grad = None
    ax = dg.plot_grad_norms(model)
    assert [(round(t.xy[0]), t.get_text()) for t in ax.texts] == [(1, "no grad")]


def test_plot_grad_norms_takes_a_dict_of_norms_and_an_axes(model):
    fig, ax = plt.subplots()
    result = dg.plot_grad_norms({"a.weight": 0.5, "b.weight": 2.0}, per="parameter", ax=ax)
    assert result is ax and len(fig.axes) == 1
    assert bar_heights(ax) == pytest.approx([0.5, 2.0])
    assert len(ax.collections) == 0  # plain norms: no mean/max markers


def test_plot_grad_norms_bad_per_raises(model):
    with pytest.raises(ValueError, match="per must be 'module' or 'parameter'; got 'layer'"):
        dg.plot_grad_norms(model, per="layer")


@pytest.fixture
def history(model):
    hist = dg.GradHistory(model)
    for step in range(3):
        model.zero_grad()
        torch.manual_seed(step)
        model(torch.randn(16, 4)).pow(2).mean().backward()
        hist.record()
    return hist


def test_plot_grad_history_lines_one_per_parameter(history):
    ax = dg.plot_grad_history(history)
    assert ax.get_yscale() == "log" and ax.get_xlabel() == "step"
    assert [line.get_label() for line in ax.lines] == history.names
    for line, series in zip(ax.lines, history.norms.values()):
        assert list(line.get_xdata()) == [0, 1, 2]
        assert list(line.get_ydata()) == pytest.approx(series)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == history.names
    assert ax.get_title() == "gradient norm per parameter over steps"


def test_plot_grad_history_heatmap_is_log10_with_colorbar(history):
    ax = history.plot(kind="heatmap")
    [image] = ax.images
    want = np.log10(np.array(list(history.norms.values())))
    np.testing.assert_allclose(np.asarray(image.get_array()), want)
    assert tick_labels(ax, "y") == history.names
    assert len(ax.figure.axes) == 2  # the colorbar
    assert ax.figure.axes[1].get_ylabel() == "log10 gradient norm"


def test_plot_grad_history_per_module_lines(model):
    hist = dg.GradHistory(model, per="module")
    hist.record()
    ax = hist.plot()
    assert [line.get_label() for line in ax.lines] == ["0", "2"]
    assert ax.get_title() == "gradient norm per module over steps"


def test_plot_grad_history_bad_kind_raises(history):
    with pytest.raises(ValueError, match="kind must be 'lines' or 'heatmap'; got 'bars'"):
        dg.plot_grad_history(history, kind="bars")


def test_plot_grad_history_empty_raises(model):
    with pytest.raises(ValueError, match=r"the history is empty: call history\.record\(\)"):
        dg.plot_grad_history(dg.GradHistory(model))
