"""grad_norms, GradHistory, grad_stats, per_module: torch's own norms are the oracle."""

import math

import pytest
import torch
from torch import nn

import dynagraph as dg
from dynagraph import norms


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def backward(model, seed=0):
    torch.manual_seed(seed)
    model(torch.randn(16, 4)).pow(2).mean().backward()


@pytest.fixture
def host_reads(monkeypatch):
    """Count the ways a tensor reaches the host: _stack_on_host, tolist, item."""
    counts = {"stack_on_host": 0, "tolist": 0, "item": 0}

    def counting(key, real):
        def wrapper(*args, **kwargs):
            counts[key] += 1
            return real(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(norms, "_stack_on_host", counting("stack_on_host", norms._stack_on_host))
    monkeypatch.setattr(torch.Tensor, "tolist", counting("tolist", torch.Tensor.tolist))
    monkeypatch.setattr(torch.Tensor, "item", counting("item", torch.Tensor.item))
    return counts


def test_grad_norms_equal_torch_norms():
    model = mlp()
    backward(model)
    result = dg.grad_norms(model)
    assert isinstance(result, dg.GradNorms)
    assert list(result) == [n for n, _ in model.named_parameters()]
    got = torch.tensor(list(result.values()))
    want = torch.stack([p.grad.norm() for p in model.parameters()])
    torch.testing.assert_close(got, want)
    assert result.missing == [] and result.nonfinite == []


@pytest.mark.parametrize("as_", ["mapping", "pairs", "generator"])
def test_grad_norms_accepts_mappings_and_pairs(as_):
    model = mlp()
    backward(model)
    source = {"mapping": dict(model.named_parameters()), "pairs": list(model.named_parameters()),
              "generator": model.named_parameters()}[as_]
    assert dg.grad_norms(source) == dg.grad_norms(model)


def test_missing_grads_are_nan_and_listed():
    model = mlp()
    model[0].weight.requires_grad_(False)  # frozen: never gets a grad
    backward(model)
    model[2].bias.grad = None
    result = dg.grad_norms(model)
    assert result.missing == ["0.weight", "2.bias"]
    assert math.isnan(result["0.weight"]) and math.isnan(result["2.bias"])
    assert result["0.bias"] == pytest.approx(model[0].bias.grad.norm().item(), rel=1e-6)


def test_nonfinite_grads_are_listed():
    model = mlp()
    backward(model)
    model[0].bias.grad[0] = math.inf
    model[2].weight.grad[1, 1] = math.nan
    result = dg.grad_norms(model)
    assert result.nonfinite == ["0.bias", "2.weight"]
    assert result["0.bias"] == math.inf and math.isnan(result["2.weight"])
    assert result.missing == []


def test_no_grads_at_all():
    result = dg.grad_norms(mlp())
    assert result.missing == list(result) and all(math.isnan(v) for v in result.values())


def test_grad_norms_reads_the_host_once(host_reads):
    model = mlp()
    backward(model)
    host_reads.update(stack_on_host=0, tolist=0, item=0)
    dg.grad_norms(model)
    assert host_reads == {"stack_on_host": 1, "tolist": 1, "item": 0}


def test_grad_norms_leaves_grads_alone():
    model = mlp()
    backward(model)
    before = [p.grad.clone() for p in model.parameters()]
    dg.grad_norms(model)
    assert all(torch.equal(a, p.grad) for a, p in zip(before, model.parameters()))


def test_grad_norms_repr_names_missing_and_nonfinite():
    text = repr(dg.GradNorms({"w": 1.5, "b": math.nan}, missing=["b"]))
    assert text == "GradNorms({'w': 1.5, 'b': nan}, missing=['b'], nonfinite=[])"


@pytest.mark.parametrize("source", [torch.ones(3), 3, "model", None])
def test_grad_norms_on_a_non_module_raises(source):
    with pytest.raises(TypeError, match=r"expected an nn\.Module, a mapping name -> tensor"):
        dg.grad_norms(source)


def test_grad_norms_on_bad_pairs_raises():
    with pytest.raises(TypeError, match=r"expected \(name, tensor\) pairs"):
        dg.grad_norms([torch.ones(2)])
    with pytest.raises(TypeError, match=r"expected \(name, tensor\) pairs"):
        dg.grad_norms({"w": 1.0})


def test_grad_stats_equal_torch():
    model = mlp()
    backward(model)
    model[2].bias.grad = None
    stats = norms.grad_stats(model)
    assert list(stats) == ["0.weight", "0.bias", "2.weight"]
    for name, p in model.named_parameters():
        if p.grad is None:
            continue
        want = torch.stack([p.grad.norm(), p.grad.abs().mean(), p.grad.abs().max()])
        torch.testing.assert_close(torch.tensor(stats[name]), want)


def test_per_module_combines_weight_and_bias():
    assert norms.per_module({"fc.weight": 3.0, "fc.bias": 4.0, "out.weight": 2.0, "scale": 1.0}) == {
        "fc": 5.0, "out": 2.0, "scale": 1.0}
    assert math.isnan(norms.per_module({"fc.weight": 3.0, "fc.bias": math.nan})["fc"])


def layered():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4, bias=False), nn.LayerNorm(4), nn.Linear(4, 2))


def module_norms(model):
    """Oracle: sqrt of the summed squared grad norms of each module's own parameters."""
    return {name: math.sqrt(sum(p.grad.norm().item() ** 2 for p in m.parameters(recurse=False)))
            for name, m in model.named_modules() if list(m.parameters(recurse=False))}


def test_grad_history_records_per_step_norms():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hist = dg.GradHistory(model)
    want = {n: [] for n, _ in model.named_parameters()}
    for step in range(3):
        opt.zero_grad()
        backward(model, seed=step)
        hist.record()
        for n, p in model.named_parameters():
            want[n].append(p.grad.norm().item())
        opt.step()
    assert hist.steps == [0, 1, 2]
    got = hist.norms
    assert list(got) == list(want)
    for name in want:
        assert got[name] == pytest.approx(want[name], rel=1e-6)
    assert repr(hist) == "<dynagraph.GradHistory: 3 steps x 4 parameters>"


def test_grad_history_per_module_with_bias_free_and_norm_layers():
    model = layered()
    hist = dg.GradHistory(model, per="module")
    backward(model)
    hist.record(step=10)
    assert hist.names == ["0", "1", "2"]  # Linear without bias, LayerNorm, Linear
    assert hist.steps == [10]
    got = {name: series[0] for name, series in hist.norms.items()}
    want = module_norms(model)
    assert got == pytest.approx(want, rel=1e-6)
    assert got["0"] == pytest.approx(model[0].weight.grad.norm().item(), rel=1e-6)


def test_grad_history_records_nan_for_missing_grads():
    model = mlp()
    hist = dg.GradHistory(model)
    hist.record()  # before any backward
    backward(model)
    hist.record()
    assert all(math.isnan(series[0]) and math.isfinite(series[1]) for series in hist.norms.values())


def test_grad_history_records_without_reading_the_host(host_reads):
    model = mlp()
    hist = dg.GradHistory(model)
    for step in range(3):
        backward(model, seed=step)
        hist.record()
    model[0].bias.grad = None
    hist.record()
    assert host_reads == {"stack_on_host": 0, "tolist": 0, "item": 0}
    assert len(hist.norms["0.weight"]) == 4
    assert host_reads["tolist"] == 1  # all pending steps in one read
    hist.norms
    assert host_reads["tolist"] == 1  # nothing pending: nothing read


def test_grad_history_bad_per_raises():
    with pytest.raises(ValueError, match="per must be 'parameter' or 'module'; got 'layer'"):
        dg.GradHistory(mlp(), per="layer")


@pytest.mark.gpu
def test_grad_norms_on_cuda_match_and_sync_once():
    model = mlp().cuda()
    torch.manual_seed(0)
    model(torch.randn(16, 4, device="cuda")).pow(2).mean().backward()
    want = torch.stack([p.grad.norm() for p in model.parameters()]).cpu()
    real_tolist = torch.Tensor.tolist
    calls = []

    def allowed_tolist(self):  # the one synchronisation grad_norms may make
        calls.append(self.device.type)
        torch.cuda.set_sync_debug_mode(0)
        try:
            return real_tolist(self)
        finally:
            torch.cuda.set_sync_debug_mode("error")

    torch.Tensor.tolist = allowed_tolist
    torch.cuda.set_sync_debug_mode("error")  # any other sync raises
    try:
        result = dg.grad_norms(model)
        hist = dg.GradHistory(model)
        hist.record()
        model[0].bias.grad = None
        hist.record()  # a missing grad must not sync either
    finally:
        torch.cuda.set_sync_debug_mode(0)
        torch.Tensor.tolist = real_tolist
    assert calls == ["cuda"]
    torch.testing.assert_close(torch.tensor(list(result.values())), want)
    assert hist.norms["0.weight"] == pytest.approx([want[0].item()] * 2, rel=1e-5)
    assert math.isnan(hist.norms["0.bias"][1])
