"""Exercise every CUDA path of dynagraph once; print a short report.

Run from the repo root on a machine with a GPU (a few seconds):

    .venv/bin/python benchmarks/gpu_check.py

Checks: the sync detector itself works; ``draw`` of a CUDA model shows the device in
its labels and renders; ``grad_norms`` matches torch with exactly one host-device
synchronisation; ``GradHistory.record`` makes none (also with a missing gradient);
``plot_grad_norms`` and ``plot_grad_history`` write PNGs. Synchronisations are
caught with ``torch.cuda.set_sync_debug_mode("error")``: any sync raises, except in
``Tensor.tolist``, which is let through and counted (the one read a call may make).

Exits 1 if any check fails; without CUDA prints "no CUDA device: skipped" and exits 0.
"""

from __future__ import annotations

import contextlib
import math
import sys
import tempfile
from pathlib import Path

import torch
from torch import nn

PNG = b"\x89PNG\r\n\x1a\n"


@contextlib.contextmanager
def syncs_forbidden():
    """Raise on any host-device sync except ``Tensor.tolist``; yields the list of tolist calls."""
    real = torch.Tensor.tolist
    calls = []

    def counted_tolist(self):
        calls.append(self.device.type)
        torch.cuda.set_sync_debug_mode(0)
        try:
            return real(self)
        finally:
            torch.cuda.set_sync_debug_mode("error")

    torch.Tensor.tolist = counted_tolist
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield calls
    finally:
        torch.cuda.set_sync_debug_mode(0)
        torch.Tensor.tolist = real


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.LayerNorm(8),
                         nn.Linear(8, 3, bias=False)).cuda()


def backward(model, seed=0):
    torch.manual_seed(seed)
    model.zero_grad()
    model(torch.randn(16, 4, device="cuda")).pow(2).mean().backward()


def torch_norms(model):
    return [p.grad.norm().item() for p in model.parameters()]


def check_sync_detector():
    x = torch.ones(3, device="cuda")
    with syncs_forbidden() as calls:
        try:
            x.sum().item()
        except RuntimeError:
            pass
        else:
            raise AssertionError("item() did not raise under set_sync_debug_mode('error')")
        x.tolist()
    assert calls == ["cuda"], calls
    return "item() raises, tolist() is counted"


def check_draw(dg):
    model = make_model()
    x = torch.randn(16, 4, device="cuda")
    with dg.track_modules(model):
        loss = model(x).pow(2).mean()
    graph = dg.draw(loss, params=model, show_saved=True)
    addmm = [n for n in graph.nodes if n.name == "AddmmBackward0"]
    assert addmm and all(n.device == "cuda:0" for n in addmm), addmm
    assert {n.device for n in graph.nodes} == {"cuda:0"}, {n.device for n in graph.nodes}
    assert "(16, 8) cuda:0" in graph.to_dot()
    svg = graph.svg()
    assert "cuda:0" in svg and "<svg" in svg
    collapsed = dg.draw(loss, params=model, depth=1)
    assert any(n.kind == "module" for n in collapsed.nodes)
    return f"{len(graph)} nodes, device cuda:0 in labels and SVG"


def check_grad_norms(dg):
    model = make_model()
    backward(model)
    want = torch_norms(model)
    with syncs_forbidden() as calls:
        norms = dg.grad_norms(model)
    assert calls == ["cuda"], f"expected exactly one tolist, got {calls}"
    got = list(norms.values())
    assert all(math.isclose(a, b, rel_tol=1e-5) for a, b in zip(got, want)), (got, want)
    model[0].bias.grad[0] = math.inf
    model[3].weight.grad = None
    with syncs_forbidden() as calls:
        norms = dg.grad_norms(model)
    assert calls == ["cuda"], calls
    assert norms.nonfinite == ["0.bias"] and norms.missing == ["3.weight"], norms
    return "matches torch, 1 sync per call, inf and missing listed"


def check_history(dg):
    model = make_model()
    hist = dg.GradHistory(model)
    per_module = dg.GradHistory(model, per="module")
    want = []
    for step in range(3):
        backward(model, seed=step)
        if step == 2:
            model[0].bias.grad = None  # a missing grad must not sync either
        want.append([p.grad.norm().item() if p.grad is not None else math.nan
                     for p in model.parameters()])
        with syncs_forbidden() as calls:
            hist.record()
            per_module.record()
        assert calls == [], f"record() synchronised: {calls}"
    got = list(zip(*hist.norms.values()))
    for row_got, row_want in zip(got, want):
        for a, b in zip(row_got, row_want):
            assert (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-5), (a, b)
    assert per_module.names == ["0", "2", "3"], per_module.names
    return "3 steps recorded with 0 syncs, values match torch"


def check_plots(dg, out: Path):
    import matplotlib.pyplot as plt

    model = make_model()
    backward(model)
    ax = dg.plot_grad_norms(model)
    assert ax.get_yscale() == "log" and len(ax.patches) == 3
    ax.figure.savefig(out / "norms.png")
    ax = dg.plot_grad_norms(model, per="parameter")
    assert len(ax.collections) == 2  # mean and max markers from grad_stats
    ax.figure.savefig(out / "params.png")
    hist = dg.GradHistory(model)
    for step in range(2):
        backward(model, seed=step)
        hist.record()
    hist.plot(kind="heatmap").figure.savefig(out / "history.png")
    plt.close("all")
    for name in ("norms.png", "params.png", "history.png"):
        assert (out / name).read_bytes().startswith(PNG), name
    return "3 PNGs written"


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device: skipped")
        return 0
    import matplotlib

    matplotlib.use("Agg")
    import dynagraph as dg

    print(f"dynagraph gpu check on {torch.cuda.get_device_name()} (torch {torch.__version__})")
    assert dg.device().type == "cuda"
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        checks = [("sync detector", check_sync_detector), ("draw", lambda: check_draw(dg)),
                  ("grad_norms", lambda: check_grad_norms(dg)),
                  ("GradHistory", lambda: check_history(dg)),
                  ("plots", lambda: check_plots(dg, Path(tmp)))]
        for name, check in checks:
            try:
                print(f"ok    {name}: {check()}")
            except Exception as e:  # noqa: BLE001 - report every check, then fail at the end
                failures += 1
                print(f"FAIL  {name}: {type(e).__name__}: {e}")
    print(f"{len(checks) - failures}/{len(checks)} checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
