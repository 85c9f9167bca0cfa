"""benchmarks/bench_live.py runs end to end on tiny models (no timing assertions)."""

import pytest
import torch

import dynagraph as dg

from _helpers import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("bench_live")


TORCH_ROWS = ("MLP 10x256", "TransformerEncoderLayer", "GPT 4 blocks", "LSTMCell x50",
              "GRU 2 layers, packed")


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
    assert ("| model | threads | ops | nodes | plain | mode / plain | live / plain | "
            "live cost / floor cost | µs per op | hook / plain | hook + norms / plain | trace / plain | "
            "trace cost / floor cost | µs per node |") in out
    verdicts = [line for line in out.splitlines() if line.startswith(("PASS", "MISS", "FLOOR-PASS"))]
    assert len(verdicts) == 2 * len(rows)
    assert all("(target <= 1.5x)" in v or "FLOOR: " in v for v in verdicts)


def test_without_transformers_the_zoo_rows_are_skipped_with_one_line(bench, monkeypatch, capsys):
    monkeypatch.setattr(bench, "_transformers", lambda: None)
    assert [name for name, _ in bench.models(quick=True)] == list(TORCH_ROWS)
    rows = bench.main(["--quick", "--threads", "1", "--only", "MLP"])
    assert [name for name, *_ in rows] == ["MLP 10x256"]
    skipped = [line for line in capsys.readouterr().out.splitlines() if "pip install transformers" in line]
    assert skipped == ["skipped GPT-2 2 layers (HF), Llama 2 layers (HF), BERT 4 layers (HF): "
                       "transformers is not importable (pip install transformers to get these rows)"]


def test_table_and_verdicts_compare_each_recorder_with_its_floor(bench):
    # live's floor adds 1% of plain (noise: no quotient); trace's floor is above TARGET,
    # so trace is held to 2x the floor's added cost: 1.5x passes, 2.5x misses
    t = {"plain": 1.0, "mode": 1.01, "live": 1.4, "hook": 2.0, "norms": 2.2, "trace": 2.5}
    rows = [("m", 1, (10, 20), t), ("m", 2, (10, 20), dict(t, live=1.6, trace=3.5))]
    assert bench.table(rows).splitlines()[2] == (
        "| m | 1 | 10 | 20 | 1000.00 ms | 1.01x | 1.40x | - | 40000.0 | 2.00x | 2.20x | 2.50x | 1.50x | 75000.0 |")
    assert [(line.split(":")[0], passed) for line, passed in bench.verdicts(rows)] == [
        ("PASS", True), ("FLOOR-PASS", True), ("MISS", False), ("MISS", False)]
    lines = [line for line, _ in bench.verdicts(rows)]
    assert lines[0] == "PASS: live on m, 1 thread: 1.40x plain (target <= 1.5x)"
    assert lines[3] == ("MISS: trace on m, 2 threads: 3.50x plain; FLOOR: hook alone is 2.00x "
                        "(above 1.5x), so it may add <= 2x the floor's added cost: 2.50x "
                        "(hook + norms alone: 2.20x)")


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
    assert bench.VARIANTS == ("plain", "mode", "live", "hook", "norms", "trace")
    torch.manual_seed(0)
    model, x = bench.mlp(depth=2, width=4, batch=2)
    grads = []
    for variant in bench.VARIANTS:
        bench.iteration(variant, model, x)
        grads.append([p.grad.clone() for p in model.parameters()])
    assert all(torch.equal(a, b) for g in grads[1:] for a, b in zip(grads[0], g))
    with pytest.raises(ValueError, match="unknown variant: 'fast'"):
        bench.iteration("fast", model, x)


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
