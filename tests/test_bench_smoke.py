"""benchmarks/bench_draw.py and bench_views.py run end to end on tiny models (no timing assertions)."""

import re
import subprocess
import sys
import time

import pytest
import torch

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
                "dg_full_layout", "tv_layout", "tv_dot", "dg_full_dot", "dot_ratio"):
        assert isinstance(result[key], float) and result[key] > 0, (key, result[key])
    line = bench.table_line(result)
    assert line.startswith("| MLP depth 2 | 11 |")
    assert line.count("|") == bench.table_header().splitlines()[0].count("|")
    assert [passed for _, passed, _ in bench.verdicts([result])] == [
        result["dg_build"] <= result["tv_build"], result["dg_layout"] <= bench.LAYOUT_TARGET,
        result["dg_full_dot"] <= result["tv_dot"]]


def test_deep_runs_what_the_default_stack_cannot_and_restores_the_limit(bench):
    def chain(n):
        return 0 if n == 0 else 1 + chain(n - 1)

    limit = sys.getrecursionlimit()
    with pytest.raises(RecursionError):
        chain(50_000)
    assert bench.deep(lambda: chain(50_000)) == 50_000
    assert sys.getrecursionlimit() == limit
    with pytest.raises(ZeroDivisionError):  # an error in the thread reaches the caller
        bench.deep(lambda: 1 / 0)


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


# -- benchmarks/bench_views.py ---------------------------------------------------------------

@pytest.fixture(scope="module")
def views():
    return load_benchmark("bench_views")


def test_views_quick_run_prints_both_tables(views, capsys):
    threads = torch.get_num_threads()
    try:
        result = views.main(["--quick"])
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    header = views.table_header().splitlines()[0]
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    table = rows[1:rows.index("| loop | s | / plain | / live | displays | verdict |")]
    # 4 RNNs x (draw, live, backward, diff) + GPT, ResNet, MLP x (draw, live, backward)
    assert header in out and len(table) == len(result["views"]) == 4 * 4 + 3 * 3
    assert all(line.count("|") == header.count("|") for line in table)
    verdicts = [line.rsplit("|", 2)[1].strip() for line in table]
    assert all(v == "PASS" or v.startswith("FAIL (") for v in verdicts), verdicts
    assert set(result["overhead"]) == set(views.LOOP_VARIANTS)
    assert "whole `with` block timed (final redraw included)" in out
    assert "not judged (20 steps: the final redraw alone costs more than the loop)" in out  # (--quick's loop)
    assert "live(view=True): not judged" in out.splitlines()[-1]
    # the long recording (2,000 steps with --quick): timed, sized, judged
    assert set(result["long"]) == {2_000} and result["long"][2_000]["kb"] > 0
    assert any(line.startswith("| 2,000 steps | ") and "(<= 2 s, <= 300 KB)" in line for line in rows)
    assert "long recordings: " in out.splitlines()[-1]
    # the zoo beside torchviz (one model with --quick): its three views and their ratios
    zoo = [line for line in rows if line.startswith("| unet | ")]
    assert [line.split(" | ")[1] for line in zoo] == ["draw", "live", "backward"]
    assert all(re.search(r"\| [\d.]+x \| (PASS|MISS) \|$", line) for line in zoo), zoo
    # each beside the same view without its PNG: its seconds and ratio, no more than the view's
    assert all(re.search(r"\| [\d.]+x \| [\d.]+ \| [\d.]+x \| [\d.]+ \|", line) for line in zoo), zoo
    assert isinstance(result["zoo"], bool) and "zoo beside torchviz: " in out.splitlines()[-1]


def test_the_zoo_summary_counts_the_views_within_the_ratio_in_seconds_and_cpu(views):
    line = views.ratio_summary([(1.2, 2.0), (3.0, 1.4), (0.5, 0.4), (1.5, float("inf"))])
    assert "in seconds 3 of 4 (0.50-3.00x)" in line and "in CPU seconds 2 of 4 (0.40-infx)" in line
    assert "torchviz finished on none" in views.ratio_summary([])
    # with each view's ratio without its PNG: counted apart
    line = views.ratio_summary([(3.0, 3.1, 0.5), (2.0, 2.2, 1.6)])
    assert line.endswith("; without the PNG: in seconds 1 of 2 (0.50-1.60x)"), line


def test_long_lines_fail_a_recording_over_either_target(views):
    lines, passed = views.long_lines({80_000: {"s": 1.0, "kb": 200.0}})
    assert passed and "PASS" in lines[-1]
    lines, passed = views.long_lines({80_000: {"s": 1.0, "kb": 301.0}})
    assert not passed and "FAIL" in lines[-1]
    lines, passed = views.long_lines({300_000: {"s": 2.5, "kb": 100.0}, 80_000: {"s": 1.0, "kb": 1.0}})
    assert not passed and "| 300,000 steps | 2.50 | 100 KB | FAIL" in lines[2]
    lines, passed = views.long_lines({80_000: "> 30 s"})
    assert not passed and lines[-1] == "| 80,000 steps | > 30 s | - | FAIL |"


@pytest.mark.parametrize("own_session", [False, True])  # dynagraph's renderer runs in its own
def test_views_timeout_kills_the_child_and_its_subprocesses(views, tmp_path, own_session):
    pid_file = tmp_path / "pid"

    def hang():
        proc = subprocess.Popen(["sleep", "60"], start_new_session=own_session)
        pid_file.write_text(str(proc.pid))
        time.sleep(60)

    start = time.perf_counter()
    assert views.run_case(hang, (), timeout=1) == "> 1 s"
    assert time.perf_counter() - start < 10
    pid = int(pid_file.read_text())
    deadline = time.time() + 5
    while time.time() < deadline and _alive(pid):
        time.sleep(0.05)
    assert not _alive(pid)


def _alive(pid):
    """True while ``pid`` runs (a zombie, exited but unreaped, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_views_failures_print_the_error_class_name(views):
    def deep(n=0):
        return deep(n + 1)

    assert views.run_case(deep, (), timeout=30) == "RecursionError"
    assert views.run_case(dict, (), timeout=30) == {}
    assert views.verdict("RecursionError") == "FAIL (RecursionError)"
    assert views.cells("> 30 s") == ("> 30 s", "-")


def test_views_without_dot_peers_print_na(views):
    spec = views.models(quick=True)[0]
    assert views.peer_results(spec, 1, 1, dot=None) == (views.NO_DOT, views.NO_DOT)
    line = views.table_line(spec.name, {"nodes": 65}, "draw", {"s": 0.5, "kb": 12.0},
                            (views.NO_DOT, views.NO_DOT))
    assert line == "| LSTMCell 4 steps | 65 | draw | 0.500 | 12.0 | n/a (no dot) | - | n/a (no dot) | - | PASS |"


def test_views_verdicts_against_the_targets(views):
    assert views.verdict({"s": 2.0, "kb": 300.0}) == "PASS"
    assert views.verdict({"s": 2.1, "kb": 10.0}) == "FAIL (time)"
    assert views.verdict({"s": 9.0, "kb": 301.0}) == "FAIL (time, size)"
    assert views.verdict("> 30 s") == "FAIL (> 30 s)"
    lines, passed = views.overhead_lines(600, {"plain": {"s": 1.0, "displays": 0},
                                               "live": {"s": 1.0, "displays": 0},
                                               "view": {"s": 1.6, "displays": 2}})
    assert not passed and "| view | 1.60 | 1.60x | 1.60x | 2 | FAIL (target <= 1.5x the live loop) |" in lines
    lines, passed = views.overhead_lines(600, {"plain": {"s": 1.0, "displays": 0},
                                               "live": {"s": 1.2, "displays": 0},
                                               "view": {"s": 1.6, "displays": 2}})
    assert passed and "| view | 1.60 | 1.60x | 1.33x | 2 | PASS (target <= 1.5x the live loop) |" in lines
    lines, passed = views.overhead_lines(20, {"plain": {"s": 0.005, "displays": 0},  # (--quick's loop)
                                              "live": {"s": 0.01, "displays": 0},
                                              "view": {"s": 0.2, "displays": 1}})
    assert passed is None and any("| not judged (20 steps: the final redraw alone" in ln for ln in lines)


def test_views_models_cover_the_brief(views):
    names = [s.name for s in views.models(quick=False)]
    assert names == ["LSTMCell 50 steps", "LSTMCell 200 steps", "LSTMCell 500 steps",
                     "GRUCell 100 steps", "nn.GRU 1 layer, 100 steps", "nn.GRU 2 layers, 100 steps",
                     "GPT 4 blocks", "ResNet-18-like", "MLP depth 1000"]
    assert [s.name for s in views.select(views.models(), ["gru"])] == [
        "GRUCell 100 steps", "nn.GRU 1 layer, 100 steps", "nn.GRU 2 layers, 100 steps"]
    with pytest.raises(SystemExit, match="matches no model"):
        views.select(views.models(), ["vgg"])


def test_views_models_run_and_count_their_nodes(views):
    torch.manual_seed(0)
    shapes = {"LSTMCell": (4, 64), "GRUCell": (4, 64), "nn.GRU": (4, 4, 64), "GPT": (1, 16, 64),
              "ResNet": (1, 10), "MLP": (4, 32)}
    for spec in views.models(quick=True):
        model, x = spec.build()
        out = model(x)
        assert out.shape == next(s for k, s in shapes.items() if spec.name.startswith(k)), spec.name
    model, x = views.mlp(2, width=4, batch=2)
    assert views.autograd_nodes(model(x).sum()) == 11  # 2 x (Addmm, T, 2 AccumulateGrad, ReLU) + Sum
    with pytest.raises(ValueError, match="unknown variant: 'fast'"):
        views.watcher("fast", model)


def test_views_made_without_png_leave_out_only_the_png_and_the_switch_is_undone(views):
    import dynagraph as dg
    x = torch.ones(3, requires_grad=True)
    graph = dg.draw((x * 2).sum())
    with views._without_png():
        bare = graph._outputs()
    whole = graph._outputs()
    assert not any("image/png" in o.data for o in bare)
    assert any("image/png" in o.data for o in whole)
    assert [o.metadata.get("dynagraph") for o in bare] == [o.metadata.get("dynagraph") for o in whole]
    with pytest.raises(KeyboardInterrupt), views._without_png():
        raise KeyboardInterrupt
    assert any("image/png" in o.data for o in graph._outputs())
