"""benchmarks/bench_live.py runs end to end on tiny models (no timing assertions)."""

import pytest
import torch

import dynagraph as dg

from _helpers import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("bench_live")


TORCH_ROWS = ("MLP 10x64", "MLP 10x256", "TransformerEncoderLayer", "GPT 4 blocks", "LSTMCell x50",
              "causal encoder 4 layers", "GRU 2 layers, packed")


def test_quick_run_prints_a_table_and_verdicts(bench, capsys):
    threads = torch.get_num_threads()
    rows = bench.main(["--quick", "--threads", "1,2"])
    assert torch.get_num_threads() == threads  # restored
    out = capsys.readouterr().out
    expected = TORCH_ROWS + (bench.ZOO if bench._transformers() else ())
    assert [name for name, *_ in rows] == [n for n in expected for _ in (1, 2)]
    assert [t for _, t, _, _ in rows] == [1, 2] * len(expected)
    assert all(ops > 0 and nodes > ops / 2 for _, _, (ops, nodes), _ in rows)
    assert all(t[v] > 0 for *_, t in rows for v in bench.VARIANTS)
    assert ("| model | threads | ops | nodes | plain | mode | floor | live | live cost / floor cost | "
            "µs per op | hook | hook + norms | trace | trace / hook + norms | µs per node |") in out
    verdicts = [line for line in out.splitlines() if line.startswith(("PASS", "MISS", "FLOOR-PASS"))]
    assert len(verdicts) == 2 * len(rows)
    assert all("(target <= 1.5x; its floor alone " in v or "FLOOR: " in v for v in verdicts[::2])
    assert all("its hook + norms floor (target <= 1.3x" in v for v in verdicts[1::2])


def test_baseline_runs_an_earlier_checkout_beside_this_one(bench, capsys):
    """--baseline imports another checkout's dynagraph beside this one (here: this one
    again) and adds its live and trace to every row, and "before" to every verdict."""
    import os
    root = os.path.dirname(os.path.dirname(os.path.abspath(dg.__file__)))
    rows = bench.main(["--quick", "--threads", "1", "--only", "MLP 10x64", "--baseline", root, "--stat", "min"])
    assert [name for name, *_ in rows] == ["MLP 10x64"]
    assert all(t[v] > 0 for *_, t in rows for v in bench.VARIANTS + bench.BASELINE)
    out = capsys.readouterr().out
    assert "| live before |" in out and "| trace before |" in out
    verdicts = [line for line in out.splitlines() if line.startswith(("PASS", "MISS", "FLOOR-PASS"))]
    assert len(verdicts) == 2 and all("(before: " in v for v in verdicts)
    with pytest.raises(SystemExit, match=r"no dynagraph/__init__\.py there"):
        bench.main(["--quick", "--baseline", os.path.join(root, "tests")])


def test_without_transformers_the_zoo_rows_are_skipped_with_one_line(bench, monkeypatch, capsys):
    monkeypatch.setattr(bench, "_transformers", lambda: None)
    assert [name for name, _ in bench.models(quick=True)] == list(TORCH_ROWS)
    rows = bench.main(["--quick", "--threads", "1", "--only", "MLP 10x2"])
    assert [name for name, *_ in rows] == ["MLP 10x256"]
    skipped = [line for line in capsys.readouterr().out.splitlines() if "pip install transformers" in line]
    assert skipped == ["skipped GPT-2 2 layers (HF), Llama 2 layers (HF), BERT 4 layers (HF): "
                       "transformers is not importable (pip install transformers to get these rows)"]


def test_table_and_verdicts_compare_each_recorder_with_its_floor(bench):
    # live's floor adds 1% of plain (noise: no quotient); trace is held to 1.3x its hook +
    # norms floor (2.2x plain here, above 1.2x, so not also to 1.5x plain)
    t = {"plain": 1.0, "mode": 1.005, "floor": 1.01, "live": 1.4, "hook": 2.0, "norms": 2.2, "trace": 2.5}
    rows = [("m", 1, (10, 20), t), ("m", 2, (10, 20), dict(t, live=1.6, trace=3.5)),
            ("m", 1, (10, 20), dict(t, floor=1.6, live=2.6, norms=1.1, trace=1.4)),
            ("m", 2, (10, 20), dict(t, floor=1.6, live=2.0, norms=1.1, trace=1.6))]
    assert bench.table(rows).splitlines()[2] == (
        "| m | 1 | 10 | 20 | 1000.00 ms | 1.00x | 1.01x | 1.40x | - | 40000.0 | 2.00x | 2.20x | 2.50x | "
        "1.14x | 75000.0 |")
    assert [(line.split(":")[0], passed) for line, passed in bench.verdicts(rows)] == [
        ("PASS", True), ("PASS", True), ("MISS", False), ("MISS", False),
        ("MISS", False), ("PASS", True), ("FLOOR-PASS", True), ("MISS", False)]
    lines = [line for line, _ in bench.verdicts(rows)]
    assert lines[0] == "PASS: live on m, 1 thread: 1.40x plain (target <= 1.5x; its floor alone 1.01x)"
    assert lines[1] == ("PASS: trace on m, 1 thread: 2.50x plain, 1.14x its hook + norms floor "
                        "(target <= 1.3x; the floor alone is 2.20x)")
    assert lines[4] == ("MISS: live on m, 1 thread: 2.60x plain; FLOOR: its floor alone is 1.60x (above "
                        "1.5x), so it may add <= 2x the floor's added cost: 2.67x")
    assert lines[7] == ("MISS: trace on m, 2 threads: 1.60x plain, 1.45x its hook + norms floor "
                        "(target <= 1.3x, and <= 1.5x plain: the floor is 1.10x, under 1.2x)")


def test_sizes_counts_the_recorded_ops_and_nodes(bench):
    model, x = bench.mlp(depth=2, width=4, batch=2)
    ops, nodes = bench.sizes(model, x)
    # linear, relu, linear, relu, then the loss: float, pow, mean
    assert ops == 7
    # 4 parameters; each linear is TBackward0 + AddmmBackward0, each relu one node, the
    # loss pow + mean (float() of a float32 makes none); x needs no grad
    graph = dg.draw(bench._loss(model(x)), roll=False, max_nodes=None)
    assert nodes == len([n for n in graph.nodes if n.kind != "output"]) == 12


def test_iteration_is_the_same_computation_in_every_variant(bench):
    assert bench.VARIANTS == ("plain", "mode", "floor", "live", "hook", "norms", "trace")
    torch.manual_seed(0)
    model, x = bench.mlp(depth=2, width=4, batch=2)
    grads = []
    for variant in bench.VARIANTS + bench.BASELINE:
        bench.iteration(variant, model, x, package=dg)
        grads.append([p.grad.clone() for p in model.parameters()])
    assert all(torch.equal(a, b) for g in grads[1:] for a, b in zip(grads[0], g))
    with pytest.raises(ValueError, match="unknown variant: 'fast'"):
        bench.iteration("fast", model, x)
    with pytest.raises(ValueError, match="'live0' needs package="):
        bench.iteration("live0", model, x)


def test_floor_puts_in_place_what_live_does_and_takes_it_out(bench):
    """The ``floor`` variant has the mode, both global module hooks and the Function.apply
    patch in place while the step runs (as live() has), and none of them afterwards."""
    from torch.autograd.function import Function
    from torch.nn.modules import module as torch_module
    apply = Function.__dict__["apply"]
    seen = []
    with bench._bare_live():
        seen.append((torch._C._len_torch_function_stack(), Function.__dict__["apply"] is not apply,
                     bench._noop_pre_hook in torch_module._global_forward_pre_hooks.values(),
                     bench._noop_post_hook in torch_module._global_forward_hooks.values()))
    assert seen == [(1, True, True, True)]
    assert torch._C._len_torch_function_stack() == 0 and Function.__dict__["apply"] is apply
    assert bench._noop_pre_hook not in torch_module._global_forward_pre_hooks.values()
    assert bench._noop_post_hook not in torch_module._global_forward_hooks.values()


def test_hook_floor_hooks_every_node_and_leaves_no_hook(bench, monkeypatch):
    calls = []
    monkeypatch.setattr(bench, "_noop_hook", lambda grad_inputs, grad_outputs: calls.append(1))
    torch.manual_seed(0)
    model, x = bench.mlp(depth=2, width=4, batch=2)
    kept = bench._loss(model(x))  # shares the parameters' AccumulateGrad nodes with the iteration's graph
    bench.iteration("hook", model, x)
    assert len(calls) == bench.sizes(model, x)[1] == 12  # each node's post-hook ran once
    kept.backward()
    assert len(calls) == 12  # the hooks on the shared nodes were removed


def test_zoo_rows_run_every_variant_to_the_same_grads(bench):
    pytest.importorskip("transformers")
    zoo = [(name, factory) for name, factory in bench.models(quick=True) if name in bench.ZOO]
    assert [name for name, _ in zoo] == list(bench.ZOO)
    for name, factory in zoo:
        torch.manual_seed(0)
        model, x = factory()
        assert model.training, name
        ops, nodes = bench.sizes(model, x)
        assert ops > 0 and nodes > 0, name
        grads = []
        for variant in bench.VARIANTS:
            torch.manual_seed(1)  # the same dropout masks in every variant
            bench.iteration(variant, model, x)
            grads.append([p.grad.clone() for p in model.parameters() if p.grad is not None])
        assert grads[0] and all(len(g) == len(grads[0]) for g in grads), name
        assert all(torch.equal(a, b) for g in grads[1:] for a, b in zip(grads[0], g)), name


def test_norms_floor_takes_the_norms_a_trace_shows(bench):
    """The ``norms`` variant takes the same norms as trace_backward's edges (all but the
    output's), so what it costs is the least a trace that shows them can cost."""
    torch.manual_seed(0)
    model, x = bench.mlp(depth=2, width=4, batch=2)
    loss = bench._loss(model(x))
    norms = []
    handles = bench.hook_every_node(loss, bench._norm_hook(norms))
    loss.backward(retain_graph=True)
    for handle in handles:
        handle.remove()
    with dg.trace_backward(loss, params=model) as bt:
        loss.backward()
    outputs = {n.id for n in bt.nodes if n.kind == "output"}
    traced = sorted(v for (src, dst, _), v in bt.edge_norms.items() if dst not in outputs)
    assert len(norms) == len(traced) == 11  # 12 nodes; each edge into a consumer once
    assert sorted(torch.stack(norms).tolist()) == pytest.approx(traced, rel=1e-6)


def test_only_picks_rows_by_part_or_exact_name(bench):
    assert bench._picked("lstmcell x50", "lstmcell x500")  # a part of the name
    assert bench._picked("=lstmcell x50", "lstmcell x50")
    assert not bench._picked("=lstmcell x50", "lstmcell x500")  # "=": that row only
    assert [name for name, _ in bench.models(quick=True) if any(
        bench._picked(p, name.lower()) for p in ("=mlp 10x64", "gru"))] == ["MLP 10x64", "GRU 2 layers, packed"]
