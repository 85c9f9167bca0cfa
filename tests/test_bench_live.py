"""benchmarks/bench_live.py runs end to end on tiny models (no timing assertions)."""

import pytest
import torch

import dynagraph as dg

from _helpers import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("bench_live")


def test_quick_run_prints_a_table_and_verdicts(bench, capsys):
    threads = torch.get_num_threads()
    rows = bench.main(["--quick", "--threads", "1,2"])
    assert torch.get_num_threads() == threads  # restored
    out = capsys.readouterr().out
    names = [name for name, *_ in rows]
    assert names == [n for n in ("MLP 10x256", "TransformerEncoderLayer", "GPT 4 blocks", "LSTMCell x50")
                     for _ in (1, 2)]
    assert [t for _, t, _, _ in rows] == [1, 2] * 4
    assert all(ops > 0 and nodes > ops / 2 for _, _, (ops, nodes), _ in rows)
    assert all(t[v] > 0 for *_, t in rows for v in bench.VARIANTS)
    assert "| model | threads | ops | nodes | plain | live / plain | µs per op |" in out
    verdicts = [line for line in out.splitlines() if line.startswith(("PASS", "MISS"))]
    assert len(verdicts) == 16 and all("(target <= 1.5x)" in v for v in verdicts)


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
    torch.manual_seed(0)
    model, x = bench.mlp(depth=2, width=4, batch=2)
    grads = []
    for variant in bench.VARIANTS:
        bench.iteration(variant, model, x)
        grads.append([p.grad.clone() for p in model.parameters()])
    assert all(torch.equal(a, b) for g in grads[1:] for a, b in zip(grads[0], g))
    with pytest.raises(ValueError, match="unknown variant: 'fast'"):
        bench.iteration("fast", model, x)
