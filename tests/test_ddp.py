"""trace_backward on DistributedDataParallel: two real gloo processes under torchrun, checked
against DDP's own reducer and an untraced twin model."""

import json
import re
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import dynagraph as dg
from dynagraph import ddp, ddp_worker

from _helpers import outputs_of

LAUNCH_TIMEOUT = 240  # seconds: two processes on a loaded 2-core machine take about 10


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """What each rank of one two-process run of the lesson's worker wrote."""
    out = tmp_path_factory.mktemp("ddp")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
           "-m", "dynagraph.ddp_worker", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    traces = [{s: dg.load_view(out / f"rank{r}_step{s}.json") for s in seen[r]["traced_steps"]} for r in (0, 1)]
    return seen, traces


def test_traced_and_untraced_gradients_are_equal(ranks):
    seen, _ = ranks
    for rank in seen:  # steps 1 and 2 traced, step 3 with the hook left behind
        assert len(rank["grads"]) == 3
        for traced, plain in zip(rank["grads"], rank["plain_grads"]):
            assert traced.keys() == plain.keys() and len(traced) == 8
            for name in traced:
                assert torch.equal(torch.tensor(traced[name]), torch.tensor(plain[name])), name


def test_every_rank_holds_the_whole_batch_gradient(ranks):
    seen, _ = ranks
    for step, (g0, g1) in enumerate(zip(seen[0]["grads"], seen[1]["grads"]), start=1):
        model = ddp_worker.make_model()
        x, y = (torch.cat(t) for t in zip(*(ddp_worker.batch(step, r) for r in (0, 1))))
        (model(x) - y).pow(2).mean().backward()
        for name, p in model.named_parameters():
            assert torch.equal(torch.tensor(g0["module." + name]), torch.tensor(g1["module." + name]))
            torch.testing.assert_close(torch.tensor(g0["module." + name]), p.grad)


def test_recorded_buckets_are_ddps_own(ranks):
    seen, traces = ranks
    for r in (0, 1):
        for step, trace in traces[r].items():
            recorded = [launch.params for launch in sorted(trace.launches, key=lambda b: b.bucket)]
            assert [launch.bucket for launch in sorted(trace.launches, key=lambda b: b.bucket)] == list(
                range(len(recorded)))
            assert recorded == seen[r]["reducer_buckets"][step - 1]
    assert len(traces[0][1].launches) == 1 and len(traces[0][2].launches) == 3  # rebuilt after step 1


def test_each_bucket_launches_after_all_its_gradients_landed(ranks):
    _, traces = ranks
    for trace in [t for rank in traces for t in rank.values()]:
        acc = {n.label: n.id for n in trace.nodes if n.kind == "parameter"}
        for launch in trace.launches:
            assert set(launch.params) <= set(launch.landed)
            runs = [k for k, nid in enumerate(trace.order) if nid in {acc[p] for p in launch.params}]
            assert launch.after == max(runs)  # one pass: the last of its AccumulateGrad runs
        assert [b.bucket for b in trace.launches] == sorted(b.bucket for b in trace.launches)


def test_rebuilt_buckets_overlap_backward(ranks):
    _, traces = ranks
    trace = traces[0][2]
    first = trace.launches[0]
    later = trace.order[first.after + 1:]
    assert any(trace.nodes[nid].kind == "op" for nid in later)  # backward went on after the launch
    assert traces[0][1].launches[0].after == len(traces[0][1].order) - 1  # step 1: one bucket, at the end


def test_trace_draws_buckets_and_launch_steps(ranks):
    _, traces = ranks
    trace = traces[0][2]
    steps = outputs_of(trace)["steps"]["text/html"]
    assert "bucket 0 launched (4 parameters)" in steps
    overlay = trace._overlays()
    texts = [text for text, _ in overlay.steps]
    assert len(texts) == len(trace.order) + 3
    assert texts.index("bucket 0 launched (4 parameters): all-reduce of their gradients") == first_after(trace) + 1
    acc = {n.label: n.id for n in trace.nodes if n.kind == "parameter"}
    assert overlay.notes[acc["module.0.weight"]] == "bucket 2"
    assert re.search(r'label="module\.0\.weight\\n\(16, 8\)\\nbucket 2" .*fillcolor="#99e9f2"\]', trace.to_dot())


def first_after(trace):
    return trace.launches[0].after


def test_no_sync_launches_nothing_until_the_last_micro_batch(ranks):
    seen, _ = ranks
    assert seen[0]["no_sync_launches"] == [0, 0, 0, 1]
    assert seen[0]["no_sync_forward_only_launches"] == 0  # DDP reads no_sync() in forward


def test_unused_parameter_fails_the_next_step_and_find_unused_fixes_it(ranks):
    seen, _ = ranks
    assert "Expected to have finished reduction in the prior iteration" in seen[0]["unused_error"]
    counts = seen[0]["find_unused"]
    assert counts["mlp"]["all_reduces"] == counts["mlp"]["buckets"] == [1, 3, 3, 3]  # one per bucket
    flagged = counts["mlp, find_unused"]
    assert flagged["all_reduces"] == [n + 1 for n in flagged["buckets"]]  # and one for the map of used ones
    assert "module.down.weight" in counts["branchy, find_unused"]["with_grad"][1]


def test_find_unused_buckets_by_the_cap_from_step_1_and_never_rebuilds(ranks):
    seen, _ = ranks  # torch's compute_bucket_size_limits: one unbounded first bucket only when DDP rebuilds
    counts = seen[0]["find_unused"]
    assert counts["mlp"]["buckets"][0] == 1 and counts["mlp"]["rebuilt"][-1]  # DDP logs it a step late
    assert counts["mlp, find_unused"]["buckets"] == [3] * 4
    assert not any(counts["mlp, find_unused"]["rebuilt"])


@pytest.fixture
def one_rank(tmp_path):
    """A one-process gloo group, destroyed at the end."""
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_model_with_its_own_hook_raises(one_rank):
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    model = DDP(nn.Linear(2, 1))
    model.register_comm_hook(None, allreduce_hook)
    loss = model(torch.ones(1, 2)).sum()
    with pytest.raises(RuntimeError, match=r"already has one .* Pass params=model\.module"):
        with dg.trace_backward(loss, params=model):
            loss.backward()
    with dg.trace_backward(loss, params=model.module) as bt:  # the way out: no buckets
        loss.backward()
    assert bt.order and not bt.launches


def test_hook_stays_and_second_trace_reuses_it(one_rank):
    model = DDP(nn.Linear(2, 1))
    for _ in range(2):
        loss = model(torch.ones(1, 2)).sum()
        with dg.trace_backward(loss, params=model) as bt:
            loss.backward()
        assert sorted(b.bucket for b in bt.launches) == [0]
        assert sorted(bt.launches[0].params) == ["module.bias", "module.weight"]
    assert ddp.is_ddp(model) and not ddp.is_ddp(model.module)


def test_a_saved_ddp_trace_opens_as_the_same_view(one_rank, tmp_path):
    model = DDP(nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1)))
    loss = model(torch.ones(4, 2)).sum()
    with dg.trace_backward(loss, params=model) as bt:
        loss.backward()
    loaded = dg.load_view(dg.save_view(bt, tmp_path / "bt.json"))
    assert loaded.launches == bt.launches and len(bt.launches) == 1
    assert outputs_of(loaded) == outputs_of(bt)
    assert "bucket 0 launched (4 parameters)" in outputs_of(loaded)["steps"]["text/html"]


def test_chinese_trace_draws_bucket_indices_without_chinese_in_graphviz(ranks):
    _, traces = ranks
    trace = traces[0][2]
    dg.set_language("zh")
    try:
        overlay = trace._overlays()
        dot = trace.to_dot()
    finally:
        dg.set_language("en")
    acc = {n.label: n.id for n in trace.nodes if n.kind == "parameter"}
    assert overlay.notes[acc["module.0.weight"]] == "[2]"  # Graphviz draws Chinese as boxes
    assert [t for t, _ in overlay.steps][first_after(trace) + 1] == "桶 0 已启动（4 个参数）：对它们的梯度做全归约"
    labels = re.findall(r'label="([^"]*)"', dot)
    assert not [t for t in labels if re.search(r"[\u3400-\u9fff]", t)], labels
