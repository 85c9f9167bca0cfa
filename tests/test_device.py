"""device(): CUDA when there is one, CPU otherwise, DYNAGRAPH_DEVICE to override."""

import pytest
import torch

import dynagraph as dg
from dynagraph._device import ENV


@pytest.fixture
def env(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    return monkeypatch


def test_default_follows_cuda_availability(env):
    want = "cuda" if torch.cuda.is_available() else "cpu"
    assert dg.device() == torch.device(want)


def test_default_without_cuda_is_cpu(env):
    env.setattr(torch.cuda, "is_available", lambda: False)
    assert dg.device() == torch.device("cpu")


@pytest.mark.parametrize("value", ["cpu", " cpu ", "cpu:0"])
def test_override_to_cpu(env, value):
    env.setenv(ENV, value)
    assert dg.device().type == "cpu"


def test_blank_override_is_ignored(env):
    env.setenv(ENV, "  ")
    env.setattr(torch.cuda, "is_available", lambda: False)
    assert dg.device() == torch.device("cpu")


@pytest.mark.parametrize("value", ["gpu", "cuda:x", "tpu0"])
def test_unknown_device_raises(env, value):
    env.setenv(ENV, value)
    with pytest.raises(ValueError, match=rf"DYNAGRAPH_DEVICE='{value}' is not a torch device \(try 'cpu'"):
        dg.device()


def test_cuda_without_cuda_raises(env):
    env.setenv(ENV, "cuda:1")
    env.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="DYNAGRAPH_DEVICE='cuda:1' but CUDA is not available here"):
        dg.device()


@pytest.mark.gpu
def test_cuda_override_on_a_cuda_machine(env):
    env.setenv(ENV, "cuda")
    assert dg.device() == torch.device("cuda")
    assert torch.ones(1, device=dg.device()).is_cuda


@pytest.fixture
def no_accelerators(env):
    for kind in ("cuda", "mps", "xpu"):
        env.setattr(getattr(torch, kind), "is_available", lambda: False)
    return env


@pytest.mark.parametrize("value, name", [("mps", "MPS"), ("mps:0", "MPS"), ("xpu", "XPU"), ("xpu:1", "XPU")])
def test_unavailable_mps_or_xpu_raises_listing_what_there_is(no_accelerators, value, name):
    no_accelerators.setenv(ENV, value)
    with pytest.raises(ValueError, match=rf"DYNAGRAPH_DEVICE='{value}' but {name} is not available here "
                                         r"\(available: cpu\): unset it or use one of those"):
        dg.device()


def test_available_xpu_is_used(no_accelerators):
    no_accelerators.setattr(torch.xpu, "is_available", lambda: True)
    no_accelerators.setattr(torch.xpu, "device_count", lambda: 1)
    no_accelerators.setenv(ENV, "xpu")
    assert dg.device() == torch.device("xpu")


def test_cuda_index_past_the_last_gpu_raises(no_accelerators):
    no_accelerators.setattr(torch.cuda, "is_available", lambda: True)
    no_accelerators.setattr(torch.cuda, "device_count", lambda: 2)
    no_accelerators.setenv(ENV, "cuda:2")
    with pytest.raises(ValueError, match=r"DYNAGRAPH_DEVICE='cuda:2' but this machine has 2 CUDA devices "
                                         r"\(available: cpu, cuda:0, cuda:1\)"):
        dg.device()


@pytest.mark.gpu
def test_cuda_index_past_the_last_gpu_raises_on_a_cuda_machine(env):
    env.setenv(ENV, f"cuda:{torch.cuda.device_count()}")
    with pytest.raises(ValueError, match=rf"this machine has {torch.cuda.device_count()} CUDA device"):
        dg.device()
    env.setenv(ENV, f"cuda:{torch.cuda.device_count() - 1}")
    assert torch.ones(1, device=dg.device()).is_cuda
