"""grad_norms, GradHistory, grad_stats, per_module: torch's own norms are the oracle."""

import math

import numpy as np
import pytest
import torch
from torch import nn

import dynagraph as dg
from dynagraph import norms

from _helpers import load_benchmark


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def backward(model, seed=0):
    torch.manual_seed(seed)
    model(torch.randn(16, 4)).pow(2).mean().backward()


@pytest.fixture
def host_reads(monkeypatch):
    """Count the ways a tensor reaches the host: stack_on_host, tolist, item."""
    counts = {"stack_on_host": 0, "tolist": 0, "item": 0}

    def counting(key, real):
        def wrapper(*args, **kwargs):
            counts[key] += 1
            return real(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(norms, "stack_on_host", counting("stack_on_host", norms.stack_on_host))
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
    with pytest.warns(UserWarning, match="no parameter has a gradient"):
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
    with load_benchmark("gpu_check").syncs_forbidden() as calls:  # only tolist may sync
        result = dg.grad_norms(model)
        hist = dg.GradHistory(model)
        hist.record()
        model[0].bias.grad = None
        hist.record()  # a missing grad must not sync either
    assert calls == ["cuda"]
    torch.testing.assert_close(torch.tensor(list(result.values())), want)
    assert hist.norms["0.weight"] == pytest.approx([want[0].item()] * 2, rel=1e-5)
    assert math.isnan(hist.norms["0.bias"][1])


# Tensors a real training script has: sparse, complex, half, nested, meta. The oracle
# is torch's own norm of the dense gradient, in float64.

def oracle(grad):
    """float64 L2 norm of any gradient, by torch (sparse made dense, nested padded with 0)."""
    if grad.is_sparse:
        grad = grad.to_dense()
    if grad.is_nested:
        grad = torch.nested.to_padded_tensor(grad, 0.0)
    return torch.linalg.vector_norm(grad.to(torch.complex128 if grad.is_complex() else torch.float64)).item()


def sparse_embedding():
    torch.manual_seed(0)
    emb = nn.Embedding(10, 3, sparse=True)
    emb(torch.tensor([1, 2, 2, 7])).pow(2).sum().backward()  # index 2 twice: uncoalesced grad
    return emb


def test_sparse_embedding_grad_norm_matches_torch():
    emb = sparse_embedding()
    assert emb.weight.grad.is_sparse and not emb.weight.grad.is_coalesced()
    result = dg.grad_norms(emb)
    assert result["weight"] == pytest.approx(oracle(emb.weight.grad), rel=1e-6)
    assert result.missing == [] and result.nonfinite == [] and result.notes == {}


def test_sparse_embedding_stats_count_the_unstored_zeros():
    emb = sparse_embedding()
    dense = emb.weight.grad.to_dense().double()
    got = norms.grad_stats(emb)["weight"]
    assert got == pytest.approx((dense.norm().item(), dense.abs().mean().item(),
                                 dense.abs().max().item()), rel=1e-6)


def test_sparse_embedding_history_records_and_counts_steps():
    emb = sparse_embedding()
    hist = dg.GradHistory(emb)
    hist.record()
    hist.record()
    assert hist.steps == [0, 1]
    assert hist.norms["weight"] == pytest.approx([oracle(emb.weight.grad)] * 2, rel=1e-6)


def test_a_failed_record_does_not_count_a_step(monkeypatch):
    model = mlp()
    backward(model)
    hist = dg.GradHistory(model)

    def broken(grads):
        raise RuntimeError("boom")

    monkeypatch.setattr(norms, "device_norms", broken)
    with pytest.raises(RuntimeError, match="boom"):
        hist.record()
    monkeypatch.undo()
    hist.record()
    assert hist.steps == [0] and len(hist.norms["0.weight"]) == 1


def test_complex_grad_norm_keeps_the_imaginary_part():
    z = torch.tensor([1 + 1j], requires_grad=True)
    z.grad = torch.tensor([1 + 1j])
    assert dg.grad_norms({"z": z})["z"] == pytest.approx(oracle(z.grad)) == pytest.approx(2 ** 0.5)
    stats = norms.grad_stats({"z": z})["z"]
    assert stats == pytest.approx((2 ** 0.5,) * 3)


@pytest.mark.parametrize("dtype, value", [(torch.float16, 9999.9), (torch.bfloat16, 3e4)])
def test_half_grads_are_summed_without_overflow(dtype, value):
    w = torch.zeros(100, dtype=dtype, requires_grad=True)
    w.grad = torch.full((100,), value, dtype=dtype)  # every value finite, the norm is not in fp16
    want = oracle(w.grad)
    result = dg.grad_norms({"w": w})
    assert result["w"] == pytest.approx(want, rel=1e-6) and result.nonfinite == []
    hist = dg.GradHistory({"w": w})
    hist.record()
    assert hist.norms["w"] == pytest.approx([want], rel=1e-6)


def nested_param():
    nt = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], requires_grad=True)
    torch.nested.to_padded_tensor(nt * torch.tensor(3.0), 0.0).sum().backward()
    return nt


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors is in prototype stage")
def test_strided_nested_grad_norm_matches_torch():
    nt = nested_param()
    assert nt.grad.is_nested
    result = dg.grad_norms({"nt": nt})
    assert result["nt"] == pytest.approx(oracle(nt.grad)) == pytest.approx(3 * 5 ** 0.5)
    assert norms.grad_stats({"nt": nt})["nt"] == pytest.approx((3 * 5 ** 0.5, 3.0, 3.0))
    hist = dg.GradHistory({"nt": nt})
    hist.record()
    assert hist.norms["nt"] == pytest.approx([3 * 5 ** 0.5])


def meta_linear():
    model = nn.Linear(3, 2, device="meta")
    model(torch.ones(1, 3, device="meta")).sum().backward()
    return model


def test_meta_grads_get_a_note_not_a_crash():
    model = meta_linear()
    result = dg.grad_norms(model)
    assert all(math.isnan(v) for v in result.values())
    assert list(result.notes) == ["weight", "bias"] and result.missing == []
    assert "meta device" in result.notes["weight"] and "to_empty" in result.notes["weight"]
    assert "notes={'weight'" in repr(result)
    assert norms.grad_stats(model) == {}


def test_meta_grads_in_a_history_are_nan_with_a_note():
    model = meta_linear()
    hist = dg.GradHistory(model)
    hist.record()
    assert all(math.isnan(s[0]) for s in hist.norms.values())
    assert "meta device" in hist.notes["bias"]


def test_mixed_plain_and_odd_grads_keep_their_order():
    model = mlp()
    backward(model)
    odd = {"a": model[0].weight, "z": torch.zeros(1, dtype=torch.complex64, requires_grad=True),
           "b": model[2].bias}
    odd["z"].grad = torch.tensor([3 + 4j])
    result = dg.grad_norms(odd)
    assert list(result) == ["a", "z", "b"]
    assert [result[k] for k in result] == pytest.approx([oracle(t.grad) for t in odd.values()], rel=1e-6)


@pytest.mark.parametrize("bad", [1.5, "3", float("nan"), True])
def test_history_record_step_that_is_no_int_raises_saying_what_to_pass(bad):
    hist = dg.GradHistory({"w": torch.ones(2, requires_grad=True)})
    with pytest.raises(TypeError, match=r"step must be an int \(the step's number, such as the loop's i\) or None"):
        hist.record(bad)  # int() gave Python's own message for "3" and nan, and rounded 1.5 down
    hist.record()
    assert hist.steps == [0] and len(hist.norms["w"]) == 1  # nothing stored for the refused step


def test_history_record_step_takes_numpy_and_torch_integers():
    hist = dg.GradHistory({"w": torch.ones(2, requires_grad=True)})
    hist.record(np.int64(4))
    hist.record(torch.tensor(7))
    assert hist.steps == [4, 7] and all(type(s) is int for s in hist.steps)


def test_record_before_backward_warns():
    hist = dg.GradHistory(mlp())
    with pytest.warns(UserWarning, match=r"no parameter has a gradient.*record\(\) after loss\.backward"):
        hist.record()
    assert hist.steps == [0]


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta state")
@pytest.mark.parametrize("layout", ["jagged", "csr", "empty"])
def test_norm_and_stats_of_other_layouts_match_torch(layout):
    dense = torch.tensor([[0.0, 3.0], [4.0, 0.0]])
    grad = {"jagged": torch.nested.nested_tensor([dense[0], dense[1]], layout=torch.jagged),
            "csr": dense.to_sparse_csr(), "empty": torch.zeros(0)}[layout]
    if layout == "empty":
        dense = torch.zeros(0)
    want = (dense.norm().item(), dense.abs().mean().nan_to_num().item(),
            dense.abs().amax().item() if dense.numel() else 0.0)
    assert norms.norm_of(grad).item() == pytest.approx(want[0])
    assert norms._stats(grad).tolist() == pytest.approx(want)


@pytest.mark.parametrize("dtype, value", [(torch.float32, 1e20), (torch.float32, 1e-30), (torch.bfloat16, 1e25),
                                          (torch.bfloat16, -1e-30), (torch.float64, 1e200),
                                          (torch.complex64, 1e20 + 1e20j)])
def test_norms_whose_squares_leave_the_range_are_rescaled(dtype, value):
    # torch.linalg.vector_norm gives inf (or 0) here, where every value and the norm fit
    w = torch.zeros(7, dtype=dtype, requires_grad=True)
    w.grad = torch.full((7,), value, dtype=dtype)
    want = abs(complex(w.grad[0].item())) * math.sqrt(7)  # all equal: |g| sqrt(n), no squares taken
    result = dg.grad_norms({"w": w})
    assert result["w"] == pytest.approx(want, rel=1e-6, abs=0) and result.nonfinite == []
    assert math.isinf(torch.linalg.vector_norm(w.grad).item()) or torch.linalg.vector_norm(w.grad).item() == 0


def test_rescaling_keeps_zeros_inf_and_nan_as_they_are():
    grads = {"zero": torch.zeros(3), "inf": torch.tensor([1.0, math.inf]), "nan": torch.tensor([1e20, math.nan])}
    params = {n: torch.zeros_like(g, requires_grad=True) for n, g in grads.items()}
    for n, p in params.items():
        p.grad = grads[n]
    result = dg.grad_norms(params)
    assert result["zero"] == 0.0 and result["inf"] == math.inf and math.isnan(result["nan"])
    assert result.nonfinite == ["inf", "nan"]


def test_rescaling_reads_the_host_once_more_for_all(host_reads):
    params = {f"w{i}": torch.zeros(3, requires_grad=True) for i in range(4)}
    for p in params.values():
        p.grad = torch.full((3,), 1e25)
    dg.grad_norms(params)
    assert host_reads == {"stack_on_host": 2, "tolist": 2, "item": 0}


def test_float64_norms_keep_float64_precision():
    torch.manual_seed(0)
    w = torch.zeros(50, dtype=torch.float64, requires_grad=True)
    w.grad = torch.randn(50, dtype=torch.float64) / 3
    want = torch.linalg.vector_norm(w.grad).item()
    assert dg.grad_norms({"w": w})["w"] == pytest.approx(want, rel=1e-14, abs=0)  # float32 is off by ~1e-8
    hist = dg.GradHistory({"w": w, "v": torch.zeros(2, requires_grad=True)})
    hist.record()
    assert hist.norms["w"] == pytest.approx([want], rel=1e-14, abs=0)


def test_a_norm_summed_from_subnormal_squares_is_rescaled():
    # squares near 1e-46 are float32 subnormals: few bits left, torch's norm is half the true one
    torch.manual_seed(0)
    w = torch.zeros(50, requires_grad=True)
    w.grad = torch.randn(50) * 1e-23
    want = oracle(w.grad)
    assert torch.linalg.vector_norm(w.grad).item() != pytest.approx(want, rel=1e-3, abs=0)
    assert dg.grad_norms({"w": w})["w"] == pytest.approx(want, rel=1e-6, abs=0)


def test_per_module_of_huge_and_tiny_float64_norms_stays_finite_and_nonzero():
    # a module of one float64 gradient of norm 1e200 (or 1e-170) is that norm, not inf (or 0)
    big, small = 1e200, 1e-170
    result = norms.per_module({"fc.weight": big, "fc.bias": big, "ln.weight": small, "k.w": 3.0, "k.b": 4.0})
    assert result["fc"] == pytest.approx(big * math.sqrt(2), rel=1e-15, abs=0)
    assert result["ln"] == small and result["k"] == 5.0
    assert math.isnan(norms.per_module({"h.w": math.inf, "h.b": math.nan})["h"])  # missing: nan, as before


def test_record_without_a_step_after_a_numbered_one_takes_the_next_step():
    model = mlp()
    backward(model)
    hist = dg.GradHistory(model)
    hist.record()
    hist.record(10)
    hist.record()  # was step 2: drawn left of step 10, the line ran backwards
    assert hist.steps == [0, 10, 11]
