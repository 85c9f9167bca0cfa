"""dg.step_memory against the sizes of the tensors themselves: parameters, gradients,
optimizer state (numel * element_size), and the activations a pack hook sees saved."""

import importlib
import itertools
import os

import matplotlib
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import dynagraph as dg

sm = importlib.import_module("dynagraph.step_memory")  # (dg.step_memory is the function)

matplotlib.use("Agg")


def nbytes(tensors):
    """Bytes of the storages ``tensors`` hold, each storage once."""
    seen = {}
    for t in tensors:
        s = t.untyped_storage()
        seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


def state_tensors(opt):
    return [v for state in opt.state.values() for v in state.values() if isinstance(v, torch.Tensor)]


def setup(make_opt, batch=32, seed=0):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = make_opt(model.parameters())
    x, y = torch.randn(batch, 64), torch.randint(0, 10, (batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return model, opt, (x, y), step


OPTIMIZERS = {"sgd": lambda p: torch.optim.SGD(p, lr=0.1),
              "momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
              "adam": lambda p: torch.optim.Adam(p, lr=1e-3)}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_parameters_gradients_and_state_equal_the_tensors_sizes(name):
    model, opt, _, step = setup(OPTIMIZERS[name])
    step()  # the first step makes the optimizer's state
    mem = dg.step_memory(step)
    params = list(model.parameters())
    end = mem.at_end
    assert end["parameters"] == nbytes(params) == 4 * sum(p.numel() for p in params)
    assert end["gradients"] == nbytes([p.grad for p in params]) == end["parameters"]
    assert end["optimizer state"] == nbytes(state_tensors(opt))
    assert mem.most("optimizer state") == end["optimizer state"]
    expected = {"sgd": 0, "momentum": end["parameters"], "adam": 2 * end["parameters"] + 4 * len(params)}
    assert end["optimizer state"] == expected[name]  # Adam: exp_avg, exp_avg_sq, a float32 step each


def test_the_first_adam_step_makes_its_state_in_the_optimizer_step():
    model, opt, _, step = setup(OPTIMIZERS["adam"])
    mem = dg.step_memory(step)
    state = mem.kinds["optimizer state"]
    made = [i for i in range(1, len(state)) if state[i] > state[i - 1]]
    assert state[0] == 0 and made and {mem.phases[i] for i in made} == {"optimizer step"}
    assert mem.at_end["optimizer state"] == nbytes(state_tensors(opt)) > 0


def saved_activations(model, x, y):
    """Bytes of the storages the forward saves for backward that are not leaves: the oracle."""
    leaves = {t.untyped_storage().data_ptr() for t in (*model.parameters(), x, y)}
    seen = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in leaves:
            seen[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = F.cross_entropy(model(x), y)
    return sum(seen.values()), loss


@pytest.mark.parametrize("batch", [8, 64, 256])
def test_activations_when_backward_starts_are_what_the_forward_saved(batch):
    model, opt, (x, y), step = setup(OPTIMIZERS["sgd"], batch)
    step()
    oracle, loss = saved_activations(model, x, y)
    mem = dg.step_memory(step)
    first = mem.phases.index("backward")
    # what the forward saved, and the loss itself (a 0-dim float32) with its gradient's seed
    extra = mem.at(first - 1)["activations"] - oracle
    assert 0 <= extra <= 16, (mem.at(first - 1), oracle)
    assert mem.at_end["activations"] == 0  # backward freed them
    assert oracle > 32 * batch * 4  # (the ReLU's output, saved once)


def test_totals_peak_and_where_it_fell():
    _, _, _, step = setup(OPTIMIZERS["adam"])
    step()
    mem = dg.step_memory(step)
    assert mem.peak == max(mem.totals) == sum(mem.at_peak.values())
    assert mem.totals[mem.peak_index] == mem.peak and mem.peak_phase in sm.PHASES
    assert mem.peak_phase == "optimizer step" and mem.peak_op.startswith("aten::")
    assert f"peak {dg.memory.fmt_bytes(mem.peak)} in the optimizer step" in repr(mem)
    phases = [p for p, _ in itertools.groupby(mem.phases)]
    assert phases[:3] == ["before the step", "forward", "backward"] and phases[-1] == "optimizer step"


def test_a_big_batch_with_sgd_peaks_before_the_optimizer_step():
    _, _, _, step = setup(OPTIMIZERS["sgd"], batch=2048)
    step()
    mem = dg.step_memory(step)
    assert mem.peak_phase in ("forward", "backward") and mem.at_peak["activations"] > 0


def test_the_same_program_gives_the_same_timeline():
    runs = []
    for _ in range(2):
        _, _, _, step = setup(OPTIMIZERS["momentum"])
        step()
        runs.append(dg.step_memory(step))
    assert runs[0].kinds == runs[1].kinds and runs[0].phases == runs[1].phases


def test_an_optimizer_step_in_backward_is_the_optimizer_step():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    opts = {p: torch.optim.SGD([p], lr=0.1, momentum=0.9) for p in model.parameters()}

    def hook(p):
        opts[p].step()
        p.grad = None  # freed as soon as it is used

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(hook)
    x = torch.randn(32, 64)
    mem = dg.step_memory(lambda: model(x).sum().backward())
    assert "optimizer step" in mem.phases and mem.at_end["gradients"] == 0  # (the first makes the momentum)
    assert mem.at_end["optimizer state"] == nbytes([s["momentum_buffer"] for o in opts.values()
                                                    for s in o.state.values()])
    # never all gradients at once: each is freed once its parameter stepped
    assert 0 < mem.most("gradients") < nbytes(list(model.parameters()))


def test_plot_stacks_the_kinds_and_names_the_phases():
    _, _, _, step = setup(OPTIMIZERS["adam"])
    step()
    ax = dg.step_memory(step).plot()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["parameters", "gradients", "optimizer state", "inputs", "activations", "temporaries",
                      "other"][:len(labels)] or set(labels) <= set(sm.KINDS)
    assert "optimizer step" in [t.get_text() for t in ax.texts]
    assert any(t.get_text().startswith("peak ") for t in ax.texts)
    assert dg.plot_step_memory is dg.plots.plot_step_memory


def test_plot_reads_chinese_in_the_chinese_edition():
    _, _, _, step = setup(OPTIMIZERS["adam"])
    step()
    mem = dg.step_memory(step)
    dg.set_language("zh")
    try:
        ax = mem.plot()
    finally:
        dg.set_language("en")
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    shown = [k for k in sm.KINDS if any(mem.kinds[k])]
    assert labels == [{"parameters": "参数", "gradients": "梯度", "optimizer state": "优化器状态", "inputs": "输入",
                       "activations": "激活值", "temporaries": "临时张量", "other": "其他"}[k] for k in shown]
    texts = [t.get_text() for t in ax.texts]
    assert "优化器步" in texts and any(t.startswith("峰值 ") for t in texts)
    assert ax.get_xlabel() == "这一步中的内存事件（分配或释放）"
    english = [t.get_text() for t in mem.plot().get_legend().get_texts()]
    assert english == shown                      # English unchanged


@pytest.mark.parametrize("bad", [None, 3, "step"])
def test_step_must_be_callable(bad):
    with pytest.raises(TypeError, match="step must be a function of no arguments"):
        dg.step_memory(bad)


def test_device_must_be_cpu_or_cuda():
    with pytest.raises(ValueError, match="unknown device: 'tpu'"):
        dg.step_memory(lambda: None, device="tpu")


def test_device_takes_what_dg_device_returns():
    for device in (dg.device(), torch.device("cpu"), "cpu:0"):  # each was "unknown device"
        want = "cuda" if torch.device(device).type == "cuda" else "cpu"
        assert dg.step_memory(lambda: torch.ones(10), device=device).device == want
    for bad in (torch.device("meta"), "meta", 0):
        with pytest.raises(ValueError, match=r"unknown device: .* \(must be 'cpu' or 'cuda', or a torch\.device "
                                             r"of either, such as dg\.device\(\)\)"):
            dg.step_memory(lambda: None, device=bad)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_cuda_without_a_gpu_says_so():
    with pytest.raises(ValueError, match="torch sees no GPU here"):
        dg.step_memory(lambda: None, device="cuda")
    with pytest.raises(ValueError, match=r"device=device\(type='cuda'\) but torch sees no GPU here"):
        dg.step_memory(lambda: None, device=torch.device("cuda"))


def test_unknown_kind_is_refused():
    mem = dg.step_memory(lambda: torch.ones(10))
    with pytest.raises(ValueError, match="unknown kind: 'weights'"):
        mem.most("weights")


def test_at_an_event_that_is_not_there_is_refused_naming_it():
    mem = dg.step_memory(lambda: torch.ones(10))
    n = len(mem.phases)
    assert mem.at(-1) == mem.at_end and mem.at(-n) == mem.at(0)
    with pytest.raises(IndexError, match=f"index={n} names no event: this step has {n} memory events"):
        mem.at(n)  # was Python's "list index out of range"
    with pytest.raises(IndexError, match="names no event"):
        mem.at(-n - 1)
    for bad in (1.5, "0", None, True):
        with pytest.raises(TypeError, match=r"index must be an event number, an int such as 0 or -1"):
            mem.at(bad)


def test_inside_another_profiler_is_refused():
    with torch.profiler.profile(), pytest.raises(RuntimeError, match="another torch profiler is running"):
        dg.step_memory(lambda: None)


def test_a_step_that_raises_leaves_no_profiler_behind():
    def step():
        torch.ones(100).sum()
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom") as info:
        dg.step_memory(step)
    assert any("profiler was stopped" in n for n in getattr(info.value, "__notes__", ["profiler was stopped"]))
    assert not torch.autograd._profiler_enabled()
    assert dg.step_memory(lambda: torch.ones(100)).at_end["other"] == 0  # a new profile runs


def test_a_step_that_allocates_nothing_is_one_point():
    mem = dg.step_memory(lambda: None)
    assert mem.peak == 0 and mem.phases == ["before the step"]


def test_without_the_memory_profiler_it_says_so(monkeypatch):
    monkeypatch.setattr(dg._torch, "memory_events", lambda prof, device: None)
    with pytest.raises(RuntimeError, match="has no memory profiler"):
        dg.step_memory(lambda: None)


@pytest.mark.gpu
def test_cuda_timeline_and_allocator_peak():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 10)).cuda()
    opt = torch.optim.Adam(model.parameters())
    x, y = torch.randn(512, 256, device="cuda"), torch.randint(0, 10, (512,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
    step()
    mem = dg.step_memory(step, device="cuda")
    params = list(model.parameters())
    assert mem.device == "cuda" and mem.at_end["parameters"] == nbytes(params)
    assert mem.at_end["optimizer state"] == nbytes(state_tensors(opt))
    assert mem.allocator_peak is not None and mem.allocator_peak >= mem.peak * 0.9


def test_the_profilers_chatter_is_dropped_and_the_steps_own_stderr_kept(capfd):
    def step():
        torch.ones(100).sum()
        os.write(2, b"the step's own line\n")

    dg.step_memory(step)
    err = capfd.readouterr().err
    assert "the step's own line" in err and "USDT" not in err and "profiler_st" not in err


def test_stderr_is_put_back_when_the_step_raises(capfd):
    with pytest.raises(ValueError, match="bad"):
        dg.step_memory(lambda: (os.write(2, b"before\n"), int("bad")))
    os.write(2, b"after\n")
    err = capfd.readouterr().err
    assert "before" in err and "after" in err
