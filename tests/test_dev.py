"""dev.py and the pytest set-up: tests run from any folder; the fast lane selects unit tests."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_a_notebook_passes_under_pytest_run_from_its_own_folder():
    done = subprocess.run([sys.executable, "-m", "pytest", "00_index.ipynb", "-q", "-p", "no:cacheprovider"],
                          cwd=ROOT / "notebooks", capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "2 passed" in done.stdout


@pytest.mark.slow
def test_fast_lane_collects_unit_tests_only():
    sys.path.insert(0, str(ROOT))
    try:
        import dev
    finally:
        sys.path.pop(0)
    done = subprocess.run([sys.executable, "-m", "pytest", *dev.FAST, "--collect-only", "-q",
                           "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    assert len(ids) > 300 and all(i.startswith("tests/") for i in ids)  # no notebook cells
    browsers = ("test_untrusted.py::test_untrusted", "test_docs.py::", "test_jupyterlab.py::")
    assert not any(i.startswith(f"tests/{b}") or b in i for i in ids for b in browsers)


@pytest.mark.slow
def test_wheel_ships_the_page_assets_and_the_licence(tmp_path):
    import zipfile
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "-q", str(ROOT), "-w", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = tmp_path.glob("dynagraph-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {"dynagraph/assets/view.js", "dynagraph/assets/view.css"} <= set(names)
    assert any(n.endswith("licenses/LICENSE") for n in names)
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("/METADATA"))).decode()
    assert "License-Expression: MIT" in meta and "Requires-Dist: torch>=2.13" in meta
