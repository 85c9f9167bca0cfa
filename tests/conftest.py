"""Skip tests whose marker names something this machine lacks, saying what to install."""

import importlib.util
import shutil
from pathlib import Path

import pytest
import torch

from dynagraph import render

CHROMIUM = Path("/usr/bin/chromium")


def _missing_dot():
    if shutil.which("dot") is None:
        return "needs the system Graphviz `dot`: apt install graphviz (or brew/conda install graphviz)"
    return None


def _missing_gpu():
    if not torch.cuda.is_available():
        return ("needs a CUDA device and a CUDA build of torch: pip install torch==2.13.0 "
                "--index-url https://download.pytorch.org/whl/cu126 (CONTRIBUTING.md, 'CUDA')")
    return None


def _missing_browser():
    if not CHROMIUM.exists():
        return f"needs a headless Chromium at {CHROMIUM}: apt install chromium"
    if importlib.util.find_spec("playwright") is None:
        return "needs playwright: pip install playwright"
    return None


CHECKS = {"dot": _missing_dot, "gpu": _missing_gpu, "browser": _missing_browser}


def pytest_collection_modifyitems(config, items):
    long_selected = "long" in (config.getoption("markexpr") or "")
    reasons = {}  # marker -> skip reason, computed once per run
    for item in items:
        for marker, check in CHECKS.items():
            if item.get_closest_marker(marker) is None:
                continue
            if marker not in reasons:
                reasons[marker] = check()
            if reasons[marker]:
                item.add_marker(pytest.mark.skip(reason=reasons[marker]))
        if item.get_closest_marker("long") and not long_selected:
            item.add_marker(pytest.mark.skip(reason="a long property-based run: select it with -m long"))


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """The docs built as `python3 dev.py docs` builds them, once for the run (test_docs.py
    and test_viewers.py read it), into a temporary folder; its html/ folder (Sphinx's
    warnings beside it in warnings.txt)."""
    import subprocess
    import sys
    out = tmp_path_factory.mktemp("docs")
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-d", out / "doctrees", "docs", out / "html"],
        cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True, timeout=300,
    )
    if proc.returncode:
        pytest.fail(f"sphinx-build failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    (out / "warnings.txt").write_text(proc.stderr)
    return out / "html"


@pytest.fixture
def fresh_renderer(monkeypatch):
    """No DYNAGRAPH_DOT and no cached renderer lookup or output, before and after."""
    monkeypatch.delenv("DYNAGRAPH_DOT", raising=False)
    render.clear_cache()
    yield monkeypatch
    render.clear_cache()
