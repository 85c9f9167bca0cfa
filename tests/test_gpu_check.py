"""benchmarks/gpu_check.py: skips cleanly without CUDA, passes with it."""

import pytest
import torch

from _helpers import load_benchmark


@pytest.fixture(scope="module")
def gpu_check():
    return load_benchmark("gpu_check")


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
