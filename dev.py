#!/usr/bin/env python3
"""Developer entry point for dynagraph (standard library only).

    python3 dev.py lab  [jupyter lab args...]   # e.g. --no-browser
    python3 dev.py test [pytest args...]        # e.g. -k autograd -x

Both first ensure the environment: a virtual environment in .venv/ holding
requirements.txt and an editable install of this package. The install runs
only when requirements.txt or pyproject.toml changed since the last one (a
hash stamp inside .venv/), so later runs start at once.
"""
import hashlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
VENV_PY = VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
STAMP = VENV / ".dynagraph-install-stamp"
INPUTS = ("requirements.txt", "pyproject.toml")


def log(msg):
    print(f"dev.py: {msg}", file=sys.stderr, flush=True)


def run(*cmd):
    """Run a command from the repo root; exit with its status if it fails."""
    rc = subprocess.call([str(c) for c in cmd], cwd=ROOT)
    if rc:
        log(f"failed (exit {rc}): {' '.join(map(str, cmd))}")
        sys.exit(rc)


def inputs_hash():
    h = hashlib.sha256()
    for name in INPUTS:
        h.update(name.encode() + b"\0" + (ROOT / name).read_bytes() + b"\0")
    return h.hexdigest()


def ensure_venv():
    if not VENV_PY.exists():
        log(f"creating {VENV.name}/ with {sys.executable}")
        run(sys.executable, "-m", "venv", VENV)


def ensure_python_deps():
    """pip-install requirements.txt and the package (editable) when their inputs changed."""
    digest = inputs_hash()
    if STAMP.exists() and STAMP.read_text().strip() == digest:
        return
    log("installing requirements.txt (first run or changed inputs) ...")
    pip = (VENV_PY, "-m", "pip", "--disable-pip-version-check")
    # With setuptools in the venv the editable install needs no isolated build
    # env, so it downloads nothing more.
    run(*pip, "install", "-r", "requirements.txt", "setuptools>=64")
    log("installing dynagraph (editable) ...")
    run(*pip, "install", "--no-deps", "--no-build-isolation", "-e", ".")
    STAMP.write_text(digest + "\n")
    log("environment ready")


def ensure_env():
    """Everything both commands need. System packages (e.g. a browser for
    `browser` tests) get their own ensure_* function, called from here."""
    if sys.version_info < (3, 10):
        sys.exit("dev.py: needs Python >= 3.10")
    ensure_venv()
    ensure_python_deps()


def call_venv(*args):
    """Run the venv's python with args; Ctrl-C goes to it alone (jupyter asks to confirm)."""
    proc = subprocess.Popen([str(VENV_PY), *args], cwd=ROOT)
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:
            pass


def cmd_lab(args):
    (ROOT / "notebooks").mkdir(exist_ok=True)
    if hasattr(os, "geteuid") and os.geteuid() == 0 and "--allow-root" not in args:
        args = ["--allow-root", *args]  # containers and CI machines often run as root
    return call_venv("-m", "jupyter", "lab", "notebooks/", *args)


def cmd_test(args):
    return call_venv("-m", "pytest", *args)


COMMANDS = {"lab": cmd_lab, "test": cmd_test}


def main(argv):
    if not argv or argv[0] not in COMMANDS:
        print(__doc__, file=sys.stderr)
        return 2
    ensure_env()
    return COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
