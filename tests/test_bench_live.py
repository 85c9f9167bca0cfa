"""benchmarks/bench_live.py runs end to end on tiny models (no timing assertions)."""

import pytest
import torch

from _helpers import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("bench_live")


def test_quick_run_prints_a_table_and_verdicts(bench, capsys):
    threads = torch.get_num_threads()
    try:
        rows = bench.main(["--quick"])
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert [name for name, _ in rows] == ["MLP 10x256", "TransformerEncoderLayer"]
    assert all(t[v] > 0 for _, t in rows for v in bench.VARIANTS)
    assert "| model | plain | live | live / plain | trace_backward | trace / plain |" in out
    verdicts = [line for line in out.splitlines() if line.startswith(("PASS", "MISS"))]
    assert len(verdicts) == 4 and all("(target <= 1.5x)" in v for v in verdicts)


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
