#!/usr/bin/env python3
"""Developer entry point for dynagraph (standard library only).

    python3 dev.py lab  [jupyter lab args...]   # e.g. --no-browser
    python3 dev.py test [pytest args...]        # e.g. -k autograd -x
    python3 dev.py test --fast [pytest args...] # unit tests only (no notebooks, browsers, slow)
    python3 dev.py docs [sphinx-build args...]  # e.g. -W; site in docs/_build/html

All first ensure the environment: a virtual environment in .venv/ holding
an editable install of this package and one of two lanes of requirements:
`lab` installs requirements-lab.txt (what the notebooks need: torch, JupyterLab,
matplotlib, the renderer); `test` and `docs` install requirements.txt (the lab
lane plus the test, docs, lint and benchmark tools). Each lane installs only when
its files or pyproject.toml changed since its last install (a hash stamp per lane
inside .venv/), so later runs start at once; `lab` after `test` installs nothing.
Before the lab lane, torch is installed on its own (ensure_torch): the CPU build
from PyTorch's index where no NVIDIA GPU answers `nvidia-smi -L`, the CUDA build
from PyPI where one does; if PyTorch's index cannot be reached, plain PyPI, and it
says so. `lab` places the lessons in course/ (git-ignored; files already there are
kept: delete one to get a fresh copy) and starts JupyterLab there, so the
repository's notebooks/ stay as they are. `python3 dev.py lab --version` installs
the lab lane and exits without starting a server or placing the course. `lab`
starts JupyterLab without its "news" pop-up (see LAB_CONFIG). `test`
also makes sure Chromium is there for the `browser` tests (installing it with
apt-get as root), and both test lanes first run `ruff check` and `mypy`, stopping
if either complains.
"""
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
VENV_PY = VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
# Each lane: the requirements file pip installs, the files its hash stamp covers, the
# stamp. The full lane holds the lab lane (requirements.txt starts with
# `-r requirements-lab.txt`), so a current full stamp satisfies `lab` too.
LAB = ("requirements-lab.txt", ("requirements-lab.txt", "pyproject.toml"), VENV / ".dynagraph-lab-stamp")
FULL = ("requirements.txt", ("requirements.txt", "requirements-lab.txt", "pyproject.toml"),
        VENV / ".dynagraph-install-stamp")
# Jupyter config folder `lab` adds to JUPYTER_CONFIG_PATH: its labconfig/
# default_setting_overrides.json answers JupyterLab's "get notified about official
# Jupyter news?" prompt with no (fetchNews "false"; a learner's own setting still wins).
# --LabApp.news_url=None also keeps the server from fetching the feed; alone it does not
# stop the prompt in JupyterLab 4.6.
LAB_CONFIG = ROOT / "tools" / "jupyter_config"
LAB_ARGS = ("--LabApp.news_url=None",)
# Where `lab` places the learner's copies of the lessons (git-ignored): opening a lesson
# must change no tracked file, so that `git pull` always works.
COURSE = "course"
# `lab` with one of these only asks jupyter something and exits: no course is placed
INFO_ARGS = ("--version", "-V", "--help", "-h", "--help-all")
# torch on its own, before the lab lane: PyTorch's index for the CPU build (plain pip on
# Linux picks the CUDA build, with GBs of NVIDIA libraries). One short try: an index
# that cannot be reached costs seconds, not pip's retries.
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
INDEX_TRY = ("--timeout", "10", "--retries", "0")
CHROMIUM = Path("/usr/bin/chromium")  # Debian's package `chromium`; the browser tests drive it
DOCS_OUT = Path("docs/_build/html")


def log(msg):
    print(f"dev.py: {msg}", file=sys.stderr, flush=True)


def run(*cmd):
    """Run a command from the repo root; exit with its status if it fails."""
    rc = subprocess.call([str(c) for c in cmd], cwd=ROOT)
    if rc:
        log(f"failed (exit {rc}): {' '.join(map(str, cmd))}")
        sys.exit(rc)


def inputs_hash(inputs):
    h = hashlib.sha256()
    for name in inputs:
        h.update(name.encode() + b"\0" + (ROOT / name).read_bytes() + b"\0")
    return h.hexdigest()


def ensure_venv():
    if not VENV_PY.exists():
        log(f"creating {VENV.name}/ with {sys.executable}")
        run(sys.executable, "-m", "venv", VENV)


def stamped(lane):
    """Whether the lane's stamp matches its input files now."""
    _, inputs, stamp = lane
    return stamp.exists() and stamp.read_text().strip() == inputs_hash(inputs)


def ensure_python_deps(lane):
    """pip-install the lane's requirements and the package (editable) when their inputs
    changed; `lab` is also satisfied by a current full install."""
    if stamped(lane) or (lane is LAB and stamped(FULL)):
        return
    requirements, inputs, stamp = lane
    log(f"installing {requirements} (first run or changed inputs) ...")
    pip = (VENV_PY, "-m", "pip", "--disable-pip-version-check")
    ensure_torch()
    # With setuptools in the venv the editable install needs no isolated build
    # env, so it downloads nothing more.
    run(*pip, "install", "-r", requirements, "setuptools>=77")
    log("installing dynagraph (editable) ...")
    run(*pip, "install", "--no-deps", "--no-build-isolation", "-e", ".")
    stamp.write_text(inputs_hash(inputs) + "\n")
    log("environment ready")


def torch_pin():
    """The torch requirement of the lab lane, e.g. 'torch==2.13.0' (requirements-lab.txt pins it)."""
    for line in (ROOT / LAB[0]).read_text().splitlines():
        req = line.split("#", 1)[0].strip()
        if req.startswith("torch=="):
            return req
    raise SystemExit(f"dev.py: no torch==... line in {LAB[0]}")


def has_nvidia_gpu():
    """Whether an NVIDIA GPU answers: `nvidia-smi -L` runs and lists one."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        done = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and "GPU" in done.stdout


def torch_plan(pin, gpu, platform=sys.platform):
    """The pip installs to try for torch, in order: [(pip args, what to say)]; the
    first that succeeds is kept. Only Linux needs PyTorch's index for the CPU build:
    PyPI's torch is the CUDA build there, the CPU build on macOS and Windows."""
    version = pin.split("==", 1)[1]
    pypi = ((pin,), f"installing {pin} from PyPI")
    if gpu:
        what = "the CUDA build" if platform.startswith("linux") else "PyPI's build for this system"
        return [((pin,), f"an NVIDIA GPU answered nvidia-smi: installing {what} of torch {version} "
                          "from PyPI")]
    if not platform.startswith("linux"):
        return [pypi]
    return [((pin, "--index-url", TORCH_CPU_INDEX, *INDEX_TRY),
             f"no NVIDIA GPU found (nvidia-smi): installing the CPU build of torch {version} "
             f"from {TORCH_CPU_INDEX}"),
            ((pin,), f"no {pin} from {TORCH_CPU_INDEX} (cannot be reached?): installing it from PyPI "
                     "instead (on Linux that is the CUDA build, with NVIDIA's libraries)")]


def installed_torch():
    """The version of torch in .venv/ ('2.13.0+cpu'), or None."""
    done = subprocess.run([str(VENV_PY), "-c", "import importlib.metadata as m; print(m.version('torch'))"],
                          capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def ensure_torch():
    """Install the pinned torch, the build that fits this machine, unless .venv/ has that
    version already (any build: one installed by hand from PyTorch's index is kept)."""
    pin = torch_pin()
    have = installed_torch()
    if have and have.split("+")[0] == pin.split("==", 1)[1]:
        return
    for args, say in torch_plan(pin, has_nvidia_gpu()):
        log(say)
        if subprocess.call([str(VENV_PY), "-m", "pip", "--disable-pip-version-check", "install", *args],
                           cwd=ROOT) == 0:
            return
    log(f"could not install {pin}; the next step tries once more and says why")


def ensure_env(lane):
    """Everything all commands need, with the lane's requirements. System packages
    that one command needs get their own ensure_* function, called from that command."""
    if sys.version_info < (3, 10):  # noqa: UP036 - dev.py runs under any python3; say why it stops
        sys.exit("dev.py: needs Python >= 3.10")
    ensure_venv()
    ensure_python_deps(lane)


def ensure_chromium():
    """Install Debian's Chromium for the `browser` tests when it is missing and we
    are root with apt-get; otherwise say how (those tests then skip)."""
    if CHROMIUM.exists():
        return
    is_root = hasattr(os, "geteuid") and os.geteuid() == 0
    if not (is_root and shutil.which("apt-get")):
        log(f"no {CHROMIUM}: `browser` tests will be skipped; install it with "
            "`sudo apt-get install chromium` (Debian/Ubuntu)")
        return
    log("installing chromium for the browser tests (apt-get) ...")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
        if subprocess.call(cmd, cwd=ROOT, env=env):
            log(f"`{' '.join(cmd)}` failed: `browser` tests will be skipped")
            return


def call_venv(*args, env=None):
    """Run the venv's python with args (and env, else ours); Ctrl-C goes to it alone
    (jupyter asks to confirm)."""
    proc = subprocess.Popen([str(VENV_PY), *args], cwd=ROOT, env=env)
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:
            pass


def cmd_lab(args):
    if hasattr(os, "geteuid") and os.geteuid() == 0 and "--allow-root" not in args:
        args = ["--allow-root", *args]  # containers and CI machines often run as root
    if not any(a in INFO_ARGS for a in args):
        # The learner's copies, outside the tracked files: what Lab and the learner write stays there.
        rc = call_venv("-m", "dynagraph.course", COURSE, "--missing")
        if rc:
            return rc
        log(f"the lessons are in {COURSE}/ (your copies; delete one and run this again for a fresh one)")
    return call_venv("-m", "jupyter", "lab", f"{COURSE}/", *LAB_ARGS, *args, env=lab_env())


def lab_env():
    """Our environment with LAB_CONFIG first on JUPYTER_CONFIG_PATH."""
    path = os.pathsep.join(p for p in (str(LAB_CONFIG), os.environ.get("JUPYTER_CONFIG_PATH")) if p)
    return {**os.environ, "JUPYTER_CONFIG_PATH": path}


# The fast lane: the unit tests in tests/, without the notebooks (nbval), the real
# browsers, the slow subprocess tests or a GPU; well under a minute on 2 cores.
FAST = ("tests", "-m", "not browser and not slow and not long and not gpu")
# Lint and type check (configured in pyproject.toml) before either lane: seconds, and
# what they print says what to fix.
CHECKS = (("-m", "ruff", "check", "."), ("-m", "mypy"))


def run_checks():
    """Run each of CHECKS in the venv; the exit status of the first that fails, else 0."""
    for check in CHECKS:
        rc = call_venv(*check)
        if rc:
            log(f"failed (exit {rc}): python {' '.join(check)}; the tests did not run")
            return rc
    return 0


def cmd_test(args):
    rc = run_checks()
    if rc:
        return rc
    if "--fast" in args:
        args = [a for a in args if a != "--fast"]
        return call_venv("-m", "pytest", *FAST, *args)
    ensure_chromium()
    return call_venv("-m", "pytest", *args)


def cmd_docs(args):
    """Build the website (notebooks with their stored outputs + API) with Sphinx."""
    rc = call_venv("-m", "sphinx", "-b", "html", "-q", *args, "docs", DOCS_OUT)
    if rc == 0:
        print(DOCS_OUT / "index.html")
    return rc


COMMANDS = {"lab": cmd_lab, "test": cmd_test, "docs": cmd_docs}
LANES = {"lab": LAB, "test": FULL, "docs": FULL}


def main(argv):
    if not argv or argv[0] not in COMMANDS:
        print(__doc__, file=sys.stderr)
        return 2
    ensure_env(LANES[argv[0]])
    return COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
