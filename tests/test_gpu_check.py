"""benchmarks/gpu_check.py: skips cleanly without CUDA, passes with it."""

import importlib.util
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "gpu_check.py"


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_without_cuda_prints_skipped_and_exits_zero(gpu_check, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_check.main() == 0
    assert capsys.readouterr().out == "no CUDA device: skipped\n"


@pytest.mark.gpu
def test_every_check_passes_on_cuda(gpu_check, capsys):
    rc = gpu_check.main()
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "5/5 checks passed" in out
