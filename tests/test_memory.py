"""Saved-tensor memory (draw(memory=True), live(memory=True)) against an oracle: the
storages saved_tensors_hooks sees packed during the same forward, each counted once."""

import re
import time

import pytest
import torch
import torch.nn.functional as F
import torch.utils.checkpoint as cp
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

import dynagraph as dg
from dynagraph import _torch, memory
from dynagraph.memory import fmt_bytes, node_fill

from _helpers import Square, html_of, outputs_of, page_data, stored

# What a tensor of each sparse layout holds besides its values (indices, pointers).
SPARSE_PARTS = {torch.sparse_coo: ("_indices", "_values"),
                torch.sparse_csr: ("crow_indices", "col_indices", "values"),
                torch.sparse_bsr: ("crow_indices", "col_indices", "values"),
                torch.sparse_csc: ("ccol_indices", "row_indices", "values"),
                torch.sparse_bsc: ("ccol_indices", "row_indices", "values")}


def held(t):
    """``{(device, storage id): bytes}`` of what tensor ``t`` holds: its storage; a sparse
    tensor's indices and values; a wrapper subclass's inner tensors (a jagged nested
    tensor's values and offsets). A storage at data pointer 0 (meta, empty) is told
    apart by the address of the storage object itself."""
    if t.layout in SPARSE_PARTS:
        parts = [getattr(t, name)() for name in SPARSE_PARTS[t.layout]]
    elif hasattr(t, "__tensor_flatten__"):
        parts = [getattr(t, name) for name in t.__tensor_flatten__()[0]]
    else:
        storage = t.untyped_storage()
        return {(str(t.device), storage.data_ptr() or storage._cdata): storage.nbytes()}
    return {k: v for p in parts if isinstance(p, torch.Tensor) for k, v in held(p).items()}


def packed_storages(fn):
    """Run ``fn`` under a hook recording what each packed tensor holds: the oracle."""
    seen = {}

    def pack(t):
        seen.update(held(t))
        return t  # keep the tensor itself: nothing copied

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return out, seen


class OpLog(TorchDispatchMode):
    """Every aten op that runs while it is on."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def mlp():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    x = torch.randn(8, 16)
    return lambda: model(x).sum()


def conv_net():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(8 * 7 * 7, 10))
    x = torch.randn(4, 3, 16, 16)
    return lambda: model(x).sum()


def lstm_loop(steps=20):
    torch.manual_seed(0)
    cell = nn.LSTMCell(8, 16)
    xs = torch.randn(steps, 4, 8)

    def run():
        h = c = torch.zeros(4, 16)
        for x in xs:
            h, c = cell(x, (h, c))
        return h.sum()
    return run


def sdpa():
    torch.manual_seed(0)
    q = torch.randn(2, 4, 10, 8, requires_grad=True)
    two = torch.tensor(2.0)  # a tensor, not a Python number (see the wrapped-number test)
    return lambda: F.scaled_dot_product_attention(q, q * two, q.exp()).sum()


def multihead():
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(16, 4, batch_first=True)
    x = torch.randn(2, 5, 16)
    return lambda: mha(x, x, x)[0].sum()


def in_place():
    w = torch.linspace(-1, 1, 10, requires_grad=True)
    three = torch.tensor(3.0)

    def run():
        y = w * three
        y.relu_()
        y.mul_(three)
        z = y.sigmoid()
        z.add_(1)
        return (z * y).sum()
    return run


def checkpointed(reentrant):
    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 16), nn.Tanh())
    head = nn.Linear(16, 16)
    x = torch.randn(8, 16)
    return lambda: head(cp.checkpoint(block, head(x), use_reentrant=reentrant)).sum()


def custom_function():
    x = torch.arange(6.0, requires_grad=True)
    return lambda: Square.apply(x.exp()).sum()


def view_in_place(change):
    """``change`` (an in-place op) on a view: autograd wraps the op's node in a
    ``CopySlices`` node, which keeps what the op saved (issue 18)."""
    torch.manual_seed(0)
    x = torch.randn(1000, requires_grad=True)
    w = torch.randn(500, requires_grad=True)

    def run():
        base = x * 1.0
        change(base[:500], w)
        return base.sum()
    return run


def dropout_after_flatten():
    """efficientnet's head: an in-place dropout on the view that flatten returns."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Dropout(0.2, inplace=True), nn.Linear(8, 4))
    x = torch.randn(16, 3, 8, 8)
    return lambda: model(x).sum()


def nested_view_in_place():
    """An in-place op on a view of a view, then on another view of the same base."""
    torch.manual_seed(0)
    x = torch.randn(10, 100, requires_grad=True)
    noise = torch.rand(100)

    def run():
        base = x.exp()
        base.view(1000)[200:300].mul_(noise)
        base[5].sin_()
        return base.sum()
    return run


CASES = {"mlp": mlp, "conv": conv_net, "lstm_cell": lstm_loop, "sdpa": sdpa, "mha": multihead,
         "in_place": in_place, "checkpoint_reentrant": lambda: checkpointed(True),
         "checkpoint_non_reentrant": lambda: checkpointed(False), "custom": custom_function,
         "view_mul_noise": lambda: view_in_place(lambda v, w: v.mul_(torch.rand(500))),
         "view_mul_weight": lambda: view_in_place(lambda v, w: v.mul_(w)),
         "view_exp": lambda: view_in_place(lambda v, w: v.exp_()),
         "view_of_view": nested_view_in_place, "dropout_after_flatten": dropout_after_flatten}
VIEW_CASES = {"view_mul_noise", "view_mul_weight", "view_exp", "view_of_view", "dropout_after_flatten"}


@pytest.mark.parametrize("case", sorted(set(CASES) - VIEW_CASES))  # views: see the test below
def test_total_equals_storages_packed_by_saved_tensors_hooks(case):
    run = CASES[case]()
    out, seen = packed_storages(run)
    mem = dg.draw(out, memory=True).memory
    # Python numbers autograd wraps into 0-dim tensors (MHA's scaling) skip the hooks:
    # 8-byte constants, counted with the inputs
    unseen = {s.storage: s for lst in mem.saved.values() for s in lst if s.storage not in {*seen, None}}
    assert all(s.nbytes == 8 and s.leaf and not s.note for s in unseen.values()), unseen
    assert mem.total - 8 * len(unseen) == sum(seen.values()) > 0
    assert set(mem.storages()) - set(unseen) == set(seen)  # the same storages: none copied


@pytest.mark.parametrize("case", sorted(CASES))
def test_total_without_hooks_equals_the_oracle_run(case):
    run = CASES[case]()
    hooked, seen = packed_storages(run)
    wrapped = sum(s.nbytes for lst in dg.draw(hooked, memory=True).memory.saved.values()
                  for s in lst if s.storage not in {*seen, None})  # as above
    plain = dg.draw(run(), memory=True).memory  # the same forward, no hooks at all
    assert plain.total == sum(seen.values()) + wrapped


def wrapped_bytes(mem):
    """Bytes that only the CopySlices nodes of ``mem`` keep (what their in-place ops saved)."""
    others = {nid for nid, lst in mem.saved.items() if not any(s.name.startswith("wrapped op") for s in lst)}
    return mem.total - mem.subset(others).total


@pytest.mark.parametrize("case", sorted(VIEW_CASES))
def test_in_place_ops_on_views_under_hooks_are_not_counted_and_say_so(case):
    run = CASES[case]()
    hooked, seen = packed_storages(run)
    graph = dg.draw(hooked, memory=True)
    mem, plain = graph.memory, dg.draw(run(), memory=True).memory
    unseen = sum(s.nbytes for lst in mem.saved.values() for s in lst if s.storage not in {*seen, None})
    missing = wrapped_bytes(plain)  # torch shows no packed value of a wrapped op
    assert missing > 0 and mem.total - unseen + missing == sum(seen.values())
    packed_elsewhere = any(s.note.startswith("packed:") for lst in mem.saved.values() for s in lst)
    assert bool(mem.unread()) == packed_elsewhere == ("not counted: what" in repr(graph))


def test_in_place_op_on_a_view_counts_what_its_op_saved():
    run = CASES["view_mul_noise"]()  # issue 18's example: reported 8 B
    mem = dg.draw(run(), memory=True).memory
    assert mem.total == 500 * 4 + 8  # the noise, and the wrapped 1.0 of x * 1.0
    assert wrapped_bytes(mem) == 2000 and not mem.unread()


def test_measuring_an_in_place_op_on_a_view_runs_no_backward():
    torch.manual_seed(0)
    x, w = torch.randn(6, requires_grad=True), torch.randn(3, requires_grad=True)

    def run():
        base = x * x  # saves x, which the in-place op does not change
        base[:3].mul_(w)
        return (base * base).sum()
    expected = torch.autograd.grad(run(), [x, w])
    out = run()
    graph = dg.draw(out, memory=True)
    assert graph.memory.total > 0 and x.grad is None and w.grad is None  # nothing accumulated
    assert all(torch.equal(a, b) for a, b in zip(torch.autograd.grad(out, [x, w]), expected))
    assert dg.draw(out, memory=True).memory.freed  # the wrapped op's tensors freed too


def test_live_counts_in_place_ops_on_views_as_draw_does():
    run = CASES["dropout_after_flatten"]()
    with dg.live(memory=True) as rec:
        out = run()
    drawn = dg.draw(out, memory=True).memory
    assert rec.graph().memory.total == drawn.total and wrapped_bytes(drawn) == 16 * 8 * 4  # the mask


def test_without_compiled_autograd_a_view_op_is_not_counted(monkeypatch):
    monkeypatch.setattr(torch._C, "_dynamo", None, raising=False)
    monkeypatch.setattr(_torch.features, "MISSING", set())
    with pytest.warns(RuntimeWarning, match="has no compiled_autograd"):
        mem = dg.draw(CASES["view_mul_noise"]()(), memory=True).memory
    assert mem.total == 8 and any(s.note == memory.UNREAD for lst in mem.saved.values() for s in lst)


@pytest.mark.parametrize("case", ["mlp", "lstm_cell", "sdpa", "checkpoint_non_reentrant", "custom"])
def test_measuring_copies_and_moves_nothing(case):
    out = CASES[case]()()
    with OpLog() as log:
        graph = dg.draw(out, memory=True)
    assert graph.memory.total > 0
    # unpacking a saved output to see its grad_fn aliases it; nothing else runs
    assert set(log.ops) <= {"detach", "alias"}, log.ops


def test_storage_saved_by_three_nodes_counts_once():
    x = torch.ones(1000, requires_grad=True)
    h = x.exp()  # 4,000 bytes, saved by exp (its result) and by each mul
    out = (h * h * h).sum()
    mem = dg.draw(out, memory=True).memory
    savers = [nid for nid, entries in mem.saved.items() if any(s.nbytes == 4000 for s in entries)]
    assert len(savers) == 3
    assert mem.activations == 4000 + 4000  # h, and h*h (saved by the second mul)
    assert mem.parameters_and_inputs == 0


def test_view_of_a_saved_tensor_counts_its_storage_once():
    x = torch.ones(10, 100, requires_grad=True)
    h = x.exp()
    out = (h[0].sin() + h[1:].cos().sum(0) + h.tanh().sum(0)).sum()
    mem = dg.draw(out, memory=True).memory
    assert mem.storages()[_torch.storage_of(h)[0]] == (4000, False)


def test_parameters_and_inputs_are_counted_apart_from_activations():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    x = torch.randn(32, 64)
    mem = dg.draw(model(x).sum(), params=model, memory=True).memory
    relu_out = 32 * 128 * 4
    assert mem.activations == relu_out  # saved by ReLU and the second Linear, once
    assert mem.parameters_and_inputs == x.nbytes + model[2].weight.nbytes
    assert mem.total == relu_out + x.nbytes + model[2].weight.nbytes


def test_backward_frees_and_the_picture_says_so():
    run = mlp()
    out = run()
    assert not dg.draw(out, memory=True).memory.freed
    out.backward()
    graph = dg.draw(out, memory=True)
    assert graph.memory.freed and graph.memory.total == 0
    assert "freed by backward()" in graph.to_dot() and "saved: freed" in graph.to_dot()
    assert "freed by backward()" in repr(graph)


def test_retain_graph_keeps_saved_tensors():
    out = mlp()()
    before = dg.draw(out, memory=True).memory.total
    out.backward(retain_graph=True)
    assert dg.draw(out, memory=True).memory.total == before


def test_custom_function_after_backward_is_freed():
    out = custom_function()()
    out.backward()
    mem = dg.draw(out, memory=True).memory
    assert mem.freed


def test_title_and_nodes_show_bytes_and_share_colours():
    run = mlp()
    graph = dg.draw(run(), memory=True, title="MLP")
    dot = graph.to_dot()
    assert re.search(r'label="MLP\\nkeeps \d+\.\d KB alive for backward\\n\(\d', dot)
    assert "saves 1.0 KB" in dot  # the ReLU's output, (8, 32) float32
    assert node_fill(0.5) in dot
    outs = outputs_of(graph)
    assert "keeps" in outs["picture"]["text/plain"] and "image/png" in outs["picture"]


def test_rolled_nodes_sum_all_iterations_and_say_so():
    run = lstm_loop(60)
    graph = dg.draw(run(), memory=True)
    dot = graph.to_dot()
    assert "\u00d760" in dot and "(all \u00d760 iterations)" in dot
    picture = graph.picture()
    assert picture.memory.total == graph.memory.total  # the same storages, by drawn ids


def test_folded_and_collapsed_graphs_keep_the_total():
    graph = dg.draw(lstm_loop(30)(), memory=True, roll=False, max_nodes=20)
    folded, _ = graph.folded(20)
    assert folded.memory.total == graph.memory.total
    assert "keeps" in graph.to_dot()


def test_lstm_cell_500_steps_is_quick():
    out = lstm_loop(500)()
    start = time.perf_counter()
    graph = dg.draw(out, memory=True)
    size = stored(graph)
    assert time.perf_counter() - start < 20  # about 1 s here (draw 0.3 s, picture 0.3 s)
    assert graph.counts()["AddmmBackward0"] == 1000
    assert size < 300_000


def test_fused_gru_100_steps():
    torch.manual_seed(0)
    gru = nn.GRU(8, 16)
    _, seen = packed_storages(lambda: gru(torch.randn(100, 2, 8))[0].sum())
    torch.manual_seed(0)
    gru = nn.GRU(8, 16)
    graph = dg.draw(gru(torch.randn(100, 2, 8))[0].sum(), params=gru, memory=True)
    assert graph.memory.total == sum(seen.values())
    assert stored(graph) < 300_000


def test_python_numbers_autograd_wraps_are_counted_though_hooks_miss_them():
    x = torch.ones(3, requires_grad=True)
    out, seen = packed_storages(lambda: (x * 2).sum())
    assert seen == {}  # saved_tensors_hooks never see the wrapped 2
    mem = dg.draw(out, memory=True).memory
    assert mem.parameters_and_inputs == 8 and mem.activations == 0  # a 0-dim int64, a constant


def test_hooks_that_pack_to_half_change_the_numbers():
    torch.manual_seed(0)
    x = torch.randn(1000, requires_grad=True)
    plain = dg.draw(x.exp().sum(), memory=True).memory
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t.half(), lambda t: t.float()):
        out = x.exp().sum()
    half = dg.draw(out, memory=True)
    assert plain.activations == 4000 and half.memory.total == plain.total // 2 == 2000
    assert any("packed: float16 cpu" in s.note for lst in half.memory.saved.values() for s in lst)


def test_hooks_that_pack_other_objects_count_nothing():
    x = torch.ones(100, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: "kept elsewhere", lambda s: torch.ones(100)):
        out = x.exp().sum()
    mem = dg.draw(out, memory=True).memory
    assert mem.total == 0 and not mem.freed
    (entry,) = [s for lst in mem.saved.values() for s in lst]
    assert entry.note == "packed: str"


def test_non_reentrant_checkpoint_nodes_say_recomputed():
    out = checkpointed(False)()
    graph = dg.draw(out, memory=True)
    dot = graph.to_dot()
    assert "keeps nothing: recomputed in backward" in dot and memory.RECOMPUTED_FILL in dot
    assert re.search(r"\d+ checkpointed nodes recomputed in backward", repr(graph))
    notes = [s.note for lst in graph.memory.saved.values() for s in lst]
    assert "checkpoint input" in notes


def test_reentrant_checkpoint_is_its_own_node():
    graph = dg.draw(checkpointed(True)(), memory=True)
    assert "CheckpointFunctionBackward" in graph.counts()


def test_checkpointing_keeps_less_than_the_plain_model():
    torch.manual_seed(0)
    layers = nn.Sequential(*[nn.Sequential(nn.Linear(64, 64), nn.Tanh()) for _ in range(8)])
    x = torch.randn(128, 64)
    plain = dg.draw(layers(x).sum(), memory=True).memory
    h = cp.checkpoint(layers[:4], x, use_reentrant=False)  # two segments of four layers
    h = cp.checkpoint(layers[4:], h, use_reentrant=False)
    kept = dg.draw(h.sum(), memory=True).memory
    one = 128 * 64 * 4  # bytes of one layer's output
    assert plain.activations == 8 * one  # each Tanh's output (the next Linear's input)
    assert kept.activations == one  # the second segment's input; all else is recomputed


def test_live_recording_measures_and_totals_each_step():
    run = lstm_loop(5)
    with dg.live(memory=True) as rec:
        out = run()
    totals = rec.saved_by_step()
    assert len(totals) == len(rec.steps) and totals == sorted(totals)
    assert totals[-1] == rec.graph().memory.total == dg.draw(out, memory=True).memory.total
    data = page_data(html_of(rec))
    assert data["mem"] == totals
    assert f"the graph keeps {fmt_bytes(totals[-1])} for backward</li>" in html_of(rec)
    assert rec.graph(upto=2).memory.total == totals[2]


def test_live_without_memory_has_none_and_saved_by_step_raises():
    x = torch.ones(2, requires_grad=True)
    with dg.live() as rec:
        (x * x).sum()
    assert rec.memory is None and rec.graph().memory is None
    html = html_of(rec)
    assert '"mem":' not in html and "alive for backward" not in repr(rec.graph())
    with pytest.raises(ValueError, match=r"live\(\.\.\., memory=True\)"):
        rec.saved_by_step()


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_draw_memory_must_be_a_bool(bad):
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match="memory must be True or False"):
        dg.draw(x * x, memory=bad)


def test_live_memory_must_be_a_bool():
    with pytest.raises(TypeError, match="memory must be True or False"), dg.live(memory="on"):
        pass


def test_fmt_bytes_and_fills():
    assert [fmt_bytes(n) for n in (0, 999, 1000, 41_200_000, 1_500_000_000)] == \
        ["0 B", "999 B", "1.0 KB", "41.2 MB", "1.5 GB"]
    assert node_fill(1.0) == "#ff8787" and node_fill(0.0) == "#fff4e6"


def test_without_raw_saved_tensors_nothing_is_counted(monkeypatch):
    monkeypatch.setattr(_torch.features, "RAW_SAVED", "_no_such_prefix_")
    _torch.saved._class_attrs.cache_clear()
    _torch.saved._exposes_saved.cache_clear()
    monkeypatch.setattr(_torch.features, "MISSING", set())
    try:
        with pytest.warns(RuntimeWarning, match="memory=True counts nothing"):
            mem = dg.draw(mlp()(), memory=True).memory
        assert mem.total == 0
    finally:
        _torch.saved._class_attrs.cache_clear()
        _torch.saved._exposes_saved.cache_clear()


@pytest.mark.gpu
def test_cuda_activations_are_what_backward_frees():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU()).cuda()
    x = torch.randn(128, 256, device="cuda")
    out = model(x).sum()
    mem = dg.draw(out, params=model, memory=True).memory
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    grads = torch.autograd.grad(out, list(model.parameters()))
    del grads  # the gradients come and go; what stays freed is what the graph kept
    torch.cuda.synchronize()
    freed = before - torch.cuda.memory_allocated()
    assert freed == mem.activations  # sizes are multiples of 512 B: no allocator rounding
    assert dg.draw(out, memory=True).memory.freed


def test_without_the_checkpoint_frame_region_inputs_are_not_counted(monkeypatch):
    monkeypatch.setattr(_torch.features, "CHECKPOINT_ARGS", "_no_such_attribute_")
    monkeypatch.setattr(_torch.features, "MISSING", set())
    with pytest.warns(RuntimeWarning, match="checkpoint region's inputs"):
        mem = dg.draw(checkpointed(False)(), memory=True).memory
    assert not any(s.note == "checkpoint input" for lst in mem.saved.values() for s in lst)
    assert any(mem.recomputed(nid) for nid in mem.saved)


def test_output_over_the_byte_budget_keeps_the_memory_title(monkeypatch):
    from dynagraph import _page

    from _helpers import pictures, svg_texts
    monkeypatch.setattr(_page, "MAX_BYTES", 60_000)  # unfolded: 238 KB
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(4 + k, 5 + k) for k in range(60)])  # no two layers alike
    g = dg.draw(model(torch.randn(1, 4)).sum(), params=model, memory=True)
    html = html_of(g)
    assert stored(g) <= 60_000
    (svg,) = pictures(html)
    assert any("alive for backward" in t for t in svg_texts(svg))


# -- memory by dtype: mixed precision, against the dtypes the pack hook sees --------------

def packed_dtypes(fn):
    """Run ``fn`` under a hook recording each packed storage's bytes and dtype: the oracle."""
    seen = {}

    def pack(t):
        for key, nbytes in held(t).items():
            seen.setdefault(key, (nbytes, str(t.dtype).removeprefix("torch.")))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return out, seen


def by_dtype(seen):
    out = {}
    for nbytes, dtype in seen.values():
        out[dtype] = out.get(dtype, 0) + nbytes
    return out


AUTOCAST_CASES = {"mlp": mlp, "conv": conv_net, "mha": multihead, "lstm_cell": lambda: lstm_loop(5)}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case", sorted(AUTOCAST_CASES))
def test_bytes_by_dtype_under_autocast_equal_what_the_pack_hook_sees(case, dtype):
    run = AUTOCAST_CASES[case]()
    with torch.autocast("cpu", dtype=dtype):
        out, seen = packed_dtypes(run)
    mem = dg.draw(out, memory=True).memory
    unseen = {s.storage: s for lst in mem.saved.values() for s in lst if s.storage not in {*seen, None}}
    assert all(s.nbytes == 8 and s.leaf for s in unseen.values()), unseen  # wrapped Python numbers
    found = mem.by_dtype()
    for s in unseen.values():
        found[s.dtype] -= s.nbytes
    assert {d: n for d, n in found.items() if n} == by_dtype(seen)
    half = str(dtype).removeprefix("torch.")
    assert found[half] > 0 and sum(found.values()) == mem.total - 8 * len(unseen)


def test_autocast_title_records_and_hover_give_each_dtype():
    run = mlp()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, seen = packed_dtypes(run)
    graph = dg.draw(out, memory=True)
    sizes = by_dtype(seen)
    line = "by dtype: " + ", ".join(f"{d} {fmt_bytes(n)}" for d, n in sorted(sizes.items()))
    assert f'\\n{line}"' in graph.to_dot()  # the title's last line
    assert line in repr(graph)
    entries = [s for lst in graph.memory.saved.values() for s in lst if s.storage]
    assert {s.dtype for s in entries} == set(sizes)
    info = page_data(html_of(graph))["info"].values()
    hovered = [line for text in info for line in text.split("\n") if line.startswith("saved ")]
    assert sorted(hovered) == sorted(f"saved {s.name}: {s.dtype}, {fmt_bytes(s.nbytes)}" for s in entries)


def test_autocast_title_and_hover_read_chinese_in_the_chinese_edition():
    torch.manual_seed(0)
    model, x, y = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)), torch.randn(8, 16), torch.arange(8) % 4
    with torch.autocast("cpu", dtype=torch.bfloat16):  # cross_entropy runs and saves in float32
        out, seen = packed_dtypes(lambda: F.cross_entropy(model(x), y))
    assert len(by_dtype(seen)) >= 2                     # a list of dtypes, with separators
    dg.set_language("zh")
    try:
        graph = dg.draw(out, memory=True)
        info = page_data(html_of(graph))["info"].values()
        title = graph.memory.dtype_line()
    finally:
        dg.set_language("en")
    assert title == "按数据类型：" + "、".join(f"{d} {fmt_bytes(n)}" for d, n in sorted(by_dtype(seen).items()))
    entries = [s for lst in graph.memory.saved.values() for s in lst if s.storage]
    hovered = [line for text in info for line in text.split("\n") if line.startswith("保存的")]
    assert sorted(hovered) == sorted(f"保存的“{s.name}”：{s.dtype}，{fmt_bytes(s.nbytes)}" for s in entries)


def test_float32_graphs_draw_no_dtype_line_and_no_hover_lines():
    graph = dg.draw(mlp()(), memory=True)
    assert graph.memory.by_dtype() == {"float32": graph.memory.total}
    assert "by dtype" not in graph.to_dot() and "by dtype" not in repr(graph)
    assert not any("saved " in text for text in page_data(html_of(graph))["info"].values())


def test_half_pack_hook_is_mixed_and_int_indices_are_not():
    x = torch.randn(4, 1, 8, 8, requires_grad=True)
    pooled = dg.draw(F.max_pool2d(x.exp(), 2).sum(), memory=True).memory  # saves int64 indices
    assert set(pooled.by_dtype()) == {"float32", "int64"} and not pooled.dtype_line()
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t.half(), lambda t: t.float()):
        out = x.exp().sum()
    half = dg.draw(out, memory=True).memory
    assert half.by_dtype() == {"float16": 4 * 64 * 2} and half.dtype_line() == "by dtype: float16 512 B"


def test_freed_mixed_graph_says_freed_without_dtypes():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = mlp()()
    out.backward()
    graph = dg.draw(out, memory=True)
    assert graph.memory.freed and graph.memory.by_dtype() == {} and "by dtype" not in graph.to_dot()


def test_many_saved_tensors_in_one_hover_are_cut_with_a_count():
    mem = memory.SavedMemory({0: [memory.SavedTensor(f"t{i}", ("cpu", i + 1), 2, False, "", "bfloat16")
                                  for i in range(12)]})
    text = mem.dtype_notes({})[0]
    assert text.count(": bfloat16, 2 B") == memory.HOVER_LINES
    assert text.endswith("\u2026 and 4 more saved tensors")


def test_live_recording_under_autocast_gives_bytes_by_dtype():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    x = torch.randn(8, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with dg.live(model, memory=True) as rec:
            out = model(x).float().sum()
        _, seen = packed_dtypes(lambda: model(x).float().sum())
    assert rec.memory.by_dtype() == by_dtype(seen) and "bfloat16" in rec.memory.by_dtype()
    assert "\\nby dtype: bfloat16" in rec.graph().to_dot()  # the recording's picture says it too
    assert out.dtype == torch.float32


def test_mixed_tells_floating_point_dtypes_by_name_as_torch_does():
    """memory.py imports no torch: it tells a floating-point dtype by its name. Torch is the oracle."""
    dtypes = {d for d in vars(torch).values() if isinstance(d, torch.dtype)}
    assert any(d.is_floating_point for d in dtypes) and any(not d.is_floating_point for d in dtypes)
    for d in dtypes:
        name = str(d).removeprefix("torch.")
        assert memory.mixed([name]) == (d.is_floating_point and d is not torch.float32), name
