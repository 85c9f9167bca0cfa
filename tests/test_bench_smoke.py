"""benchmarks/bench_draw.py runs end to end on a tiny model (no timing assertions)."""

import pytest

from dynagraph import render

from _helpers import load_benchmark

pytest.importorskip("torchviz")
# torchviz 0.0.3 compares versions with distutils' LooseVersion
pytestmark = pytest.mark.filterwarnings("ignore:distutils Version classes:DeprecationWarning")


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("bench_draw")


@pytest.fixture(scope="module")
def exe():
    try:
        return render.find_renderer()
    except render.RendererNotFoundError as exc:
        pytest.skip(str(exc))


def test_row_on_tiny_mlp(bench, exe):
    result = bench.row("MLP depth 2", lambda: bench.mlp(2, width=4, batch=2), exe,
                       quick=True, timeout=30)
    # 2 x (Addmm, T, 2 AccumulateGrad, ReLU) + Sum
    assert result["model"] == "MLP depth 2"
    assert result["nodes"] == 11
    for key in ("fwd_bwd", "tv_build", "dg_build", "ratio", "dg_layout",
                "dg_full_layout", "tv_layout"):
        assert isinstance(result[key], float) and result[key] > 0, (key, result[key])
    line = bench.table_line(result)
    assert line.startswith("| MLP depth 2 | 11 |")
    assert line.count("|") == bench.table_header().splitlines()[0].count("|")
    assert [passed for _, passed, _ in bench.verdicts([result])] == [
        result["dg_build"] <= result["tv_build"], result["dg_layout"] <= bench.LAYOUT_TARGET]


def test_failures_print_as_text(bench):
    assert bench.cell("tv_build", "RecursionError") == "RecursionError"
    assert bench.cell("tv_layout", "n/a") == "n/a"
    assert bench.cell("ratio", None) == "n/a"
    assert bench.cell("dg_build", 0.0123) == "12.3 ms"
    assert bench.cell("dg_layout", 2.5) == "2.50 s"


def test_models_cover_the_brief(bench):
    names = [name for name, _ in bench.models(quick=False)]
    assert names == ["MLP depth 10", "MLP depth 100", "MLP depth 1000",
                     "Transformer 2 layers", "Transformer 6 layers", "Transformer 12 layers",
                     "LSTMCell 50 steps", "LSTMCell 500 steps"]
