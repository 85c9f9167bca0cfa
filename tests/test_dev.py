"""dev.py and the pytest set-up: tests run from any folder; the fast lane selects unit tests;
lint and type check run first; nbval options apply only where nbval is installed;
`lab` and `test` each install their lane once, and `lab` starts JupyterLab without the news prompt."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_a_notebook_passes_under_pytest_run_from_its_own_folder():
    done = subprocess.run([sys.executable, "-m", "pytest", "00_index.ipynb", "-q", "-p", "no:cacheprovider"],
                          cwd=ROOT / "notebooks", capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    cells = json.loads((ROOT / "notebooks" / "00_index.ipynb").read_text())["cells"]
    assert f"{sum(c['cell_type'] == 'code' for c in cells)} passed" in done.stdout  # one test per code cell


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
def test_wheel_ships_the_page_assets_and_the_licence_and_only_tracked_files(tmp_path):
    import zipfile

    from _wheel import build_wheel, untracked_in
    wheel = build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    assert {"dynagraph/assets/view.js", "dynagraph/assets/view.css", "dynagraph/py.typed"} <= set(names)
    assert "dynagraph/_torch/__init__.py" in names and "dynagraph/_torch.py" not in names  # a package now
    assert untracked_in(wheel) == []  # nothing from an earlier build (a stale build/) or an untracked file
    assert any(n.endswith("licenses/LICENSE") for n in names)
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("/METADATA"))).decode()
    assert "License-Expression: MIT" in meta and "Requires-Dist: torch>=2.13" in meta


def _load(name, path):
    """A module from a file that is not on sys.path (dev.py, the root conftest.py)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("lane", [[], ["--fast"]])
def test_both_test_lanes_run_ruff_and_mypy_before_pytest(monkeypatch, lane):
    dev = _load("dev", ROOT / "dev.py")
    ran = []
    monkeypatch.setattr(dev, "call_venv", lambda *args: ran.append(args[1]) or 0)  # args: "-m", tool, ...
    monkeypatch.setattr(dev, "ensure_chromium", lambda: None)
    assert dev.cmd_test(lane) == 0
    assert ran == ["ruff", "mypy", "pytest"]


def test_a_failed_check_stops_before_pytest(monkeypatch):
    dev = _load("dev", ROOT / "dev.py")
    ran = []
    monkeypatch.setattr(dev, "call_venv", lambda *args: ran.append(args[1]) or (3 if args[1] == "mypy" else 0))
    assert dev.cmd_test(["--fast"]) == 3
    assert ran == ["ruff", "mypy"]


def _configured(args=(), nbval_installed=True, **given):
    """The options the root conftest.py leaves, from nbval's defaults plus ``given``."""
    option = {"nbval": False, "nbval_lax": False, "nbval_current_env": False, "nbval_kernel_name": None,
              "nbval_cell_timeout": 2000, "nbval_sanitize_with": None, **given}
    config = SimpleNamespace(pluginmanager=SimpleNamespace(hasplugin=lambda name: nbval_installed),
                             option=SimpleNamespace(**option),
                             invocation_params=SimpleNamespace(args=tuple(args)))
    _load("root_conftest", ROOT / "conftest.py").pytest_configure(config)
    return config.option


def test_nbval_runs_the_notebooks_strictly_where_installed():
    opt = _configured()
    assert opt.nbval and not opt.nbval_lax and opt.nbval_current_env and opt.nbval_cell_timeout == 120
    assert Path(opt.nbval_sanitize_with).resolve() == ROOT / "tests" / "nbval_sanitize.cfg"


def test_nbval_options_given_on_the_command_line_win():
    opt = _configured(["--nbval-lax", "--nbval-cell-timeout=5", "--nbval-kernel-name", "py"],
                      nbval_lax=True, nbval_cell_timeout=5.0, nbval_kernel_name="py")
    assert not opt.nbval and opt.nbval_cell_timeout == 5.0 and not opt.nbval_current_env


def test_nothing_names_nbval_where_it_is_not_installed():
    assert _configured(nbval_installed=False).nbval is False
    tomllib = pytest.importorskip("tomllib")
    addopts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]
    assert not any("nbval" in a for a in addopts)  # pytest would reject them without the plugin


@pytest.mark.slow
def test_pytest_runs_without_nbval():
    done = subprocess.run([sys.executable, "-m", "pytest", "tests/test_requirements.py", "-q",
                           "-p", "no:nbval", "-p", "no:cacheprovider"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def test_lab_starts_jupyterlab_without_the_news_prompt(monkeypatch, tmp_path):
    dev = _load("dev", ROOT / "dev.py")
    ran = []
    monkeypatch.setattr(dev, "call_venv", lambda *args, env=None: ran.append((args, env)) or 0)
    monkeypatch.setattr(dev, "log", lambda msg: None)
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", "/elsewhere")
    assert dev.cmd_lab(["--no-browser"]) == 0
    (place, _), (args, env) = ran
    assert place == ("-m", "dynagraph.course", "course", "--missing")  # the learner's copies, kept if there
    assert args[:4] == ("-m", "jupyter", "lab", "course/") and args[-1] == "--no-browser"
    assert "--LabApp.news_url=None" in args  # the server fetches no feed
    assert env["JUPYTER_CONFIG_PATH"].split(os.pathsep) == [str(dev.LAB_CONFIG), "/elsewhere"]
    # the prompt itself: JupyterLab asks while fetchNews is "none"; the config folder says "false"
    settings_utils = pytest.importorskip("jupyterlab_server.settings_utils")
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", env["JUPYTER_CONFIG_PATH"])
    overrides, error = settings_utils._get_overrides(str(tmp_path))
    assert not error
    assert overrides["@jupyterlab/apputils-extension:notification"] == {"fetchNews": "false", "checkForUpdates": False}


def test_lab_version_places_no_course_and_a_failed_placing_stops(monkeypatch):
    dev = _load("dev", ROOT / "dev.py")
    ran = []
    monkeypatch.setattr(dev, "call_venv", lambda *args, env=None: ran.append(args[1]) or (1 if args[1] == "dynagraph.course" else 0))
    monkeypatch.setattr(dev, "log", lambda msg: None)
    assert dev.cmd_lab(["--version"]) == 0 and ran == ["jupyter"]
    assert dev.cmd_lab([]) == 1 and ran == ["jupyter", "dynagraph.course"]  # course/ a file: the reason is printed


def test_the_course_folder_is_ignored_by_git():
    assert "/course/" in (ROOT / ".gitignore").read_text().splitlines()
    done = subprocess.run(["git", "check-ignore", "-q", "course/00_index.ipynb"], cwd=ROOT)
    assert done.returncode == 0


# -- torch: the build that fits the machine -----------------------------------------------

def _torch_setup(dev, monkeypatch, gpu, have=None, pip_rc=()):
    """dev with the GPU probe, the installed torch and pip faked: the pip installs tried
    (their arguments) and the lines said."""
    monkeypatch.setattr(dev, "has_nvidia_gpu", lambda: gpu)
    monkeypatch.setattr(dev, "installed_torch", lambda: have)
    said, tried, rcs = [], [], list(pip_rc)
    monkeypatch.setattr(dev, "log", said.append)
    def call(cmd, cwd=None):
        tried.append(tuple(cmd[cmd.index("install") + 1:]))
        return rcs.pop(0) if rcs else 0
    monkeypatch.setattr(dev.subprocess, "call", call)
    return tried, said


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the CPU index is for Linux")
def test_no_gpu_installs_the_cpu_build_from_pytorchs_index_with_one_short_try(monkeypatch):
    dev = _load("dev", ROOT / "dev.py")
    tried, said = _torch_setup(dev, monkeypatch, gpu=False)
    dev.ensure_torch()
    assert tried == [("torch==2.13.0", "--index-url", "https://download.pytorch.org/whl/cpu",
                      "--timeout", "10", "--retries", "0")]
    assert said == ["no NVIDIA GPU found (nvidia-smi): installing the CPU build of torch 2.13.0 "
                    "from https://download.pytorch.org/whl/cpu"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the CPU index is for Linux")
def test_an_unreachable_index_falls_back_to_pypi_with_the_pin_and_says_so(monkeypatch):
    dev = _load("dev", ROOT / "dev.py")
    tried, said = _torch_setup(dev, monkeypatch, gpu=False, pip_rc=[1, 0])
    dev.ensure_torch()
    assert [t[0] for t in tried] == ["torch==2.13.0", "torch==2.13.0"] and tried[1] == ("torch==2.13.0",)
    assert len(said) == 2 and said[1].startswith("no torch==2.13.0 from https://download.pytorch.org/whl/cpu "
                                                "(cannot be reached?): installing it from PyPI instead")


def test_a_gpu_gets_the_cuda_build_from_pypi(monkeypatch):
    dev = _load("dev", ROOT / "dev.py")
    tried, said = _torch_setup(dev, monkeypatch, gpu=True)
    dev.ensure_torch()
    assert tried == [("torch==2.13.0",)] and "NVIDIA GPU" in said[0]
    assert dev.torch_plan("torch==2.13.0", gpu=True, platform="linux")[0][1].endswith(
        "installing the CUDA build of torch 2.13.0 from PyPI")


def test_torch_already_there_in_the_pinned_version_is_kept(monkeypatch):
    dev = _load("dev", ROOT / "dev.py")
    for have in ("2.13.0+cpu", "2.13.0+cu126", "2.13.0"):
        tried, _ = _torch_setup(dev, monkeypatch, gpu=False, have=have)
        dev.ensure_torch()
        assert tried == []
    tried, _ = _torch_setup(dev, monkeypatch, gpu=False, have="2.14.1")
    dev.ensure_torch()
    assert tried  # another version: the pin is installed


def test_the_pin_comes_from_requirements_lab_and_other_systems_take_pypi():
    dev = _load("dev", ROOT / "dev.py")
    assert dev.torch_pin() == "torch==2.13.0"
    for platform in ("darwin", "win32"):
        assert [args for args, _ in dev.torch_plan("torch==2.13.0", gpu=False, platform=platform)] == [("torch==2.13.0",)]


def test_the_gpu_probe_is_false_without_nvidia_smi_or_when_it_fails(monkeypatch):
    dev = _load("dev", ROOT / "dev.py")
    monkeypatch.setattr(dev.shutil, "which", lambda name: None)
    assert dev.has_nvidia_gpu() is False
    monkeypatch.setattr(dev.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    answers = iter([SimpleNamespace(returncode=9, stdout=""),
                    SimpleNamespace(returncode=0, stdout="GPU 0: NVIDIA H200 (UUID: GPU-x)\n")])
    monkeypatch.setattr(dev.subprocess, "run", lambda *a, **k: next(answers))
    assert dev.has_nvidia_gpu() is False  # the driver is not loaded
    assert dev.has_nvidia_gpu() is True


def _lanes(dev, monkeypatch, tmp_path):
    """dev with its stamps in tmp_path and pip calls recorded instead of run: the list of them."""
    monkeypatch.setattr(dev, "LAB", (*dev.LAB[:2], tmp_path / "lab-stamp"))
    monkeypatch.setattr(dev, "FULL", (*dev.FULL[:2], tmp_path / "full-stamp"))
    monkeypatch.setattr(dev, "log", lambda msg: None)
    monkeypatch.setattr(dev, "ensure_torch", lambda: None)  # tested apart, below
    installs = []
    monkeypatch.setattr(dev, "run", lambda *cmd: installs.append(cmd[cmd.index("install") + 1:]))
    return installs


def test_lab_installs_the_lab_requirements_once(monkeypatch, tmp_path):
    dev = _load("dev", ROOT / "dev.py")
    installs = _lanes(dev, monkeypatch, tmp_path)
    dev.ensure_python_deps(dev.LAB)
    dev.ensure_python_deps(dev.LAB)
    assert [i[:2] for i in installs] == [("-r", "requirements-lab.txt"), ("--no-deps", "--no-build-isolation")]


def test_lab_after_test_installs_nothing_and_test_after_lab_installs_the_rest(monkeypatch, tmp_path):
    dev = _load("dev", ROOT / "dev.py")
    installs = _lanes(dev, monkeypatch, tmp_path)
    dev.ensure_python_deps(dev.FULL)
    dev.ensure_python_deps(dev.LAB)  # the full lane holds the lab lane: nothing to do
    assert [i[1] for i in installs if i[0] == "-r"] == ["requirements.txt"]
    (tmp_path / "full-stamp").unlink()
    dev.ensure_python_deps(dev.LAB)
    dev.ensure_python_deps(dev.FULL)
    assert [i[1] for i in installs if i[0] == "-r"] == ["requirements.txt", "requirements-lab.txt", "requirements.txt"]


def test_each_command_picks_its_lane():
    dev = _load("dev", ROOT / "dev.py")
    assert dev.LANES == {"lab": dev.LAB, "test": dev.FULL, "docs": dev.FULL}
    assert dev.LAB[0] in dev.FULL[1] and "pyproject.toml" in dev.LAB[1]  # the full stamp covers the lab file


def test_requirements_txt_includes_the_lab_lane():
    lines = [line.split("#", 1)[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    assert "-r requirements-lab.txt" in lines
