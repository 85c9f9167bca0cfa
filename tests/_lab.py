"""A throwaway JupyterLab server for the `browser` tests (test_jupyterlab, test_untrusted).

It runs on 127.0.0.1 (a free port, a token) with its own config, data, runtime,
settings and workspace folders, so nothing of the user's (trust database, open
tabs, extensions' settings) leaks in, and it is shut down (its kernels too) on exit.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from _chromium import free_port

START_TIMEOUT = 60  # s, server up
# Settings for this run only: every cell attached to the page (no windowing, so
# off-screen outputs are in the DOM to check) and no news or update checks.
SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "checkForUpdates": False, "fetchNews": "false"},
}


ISOLATED = ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "JUPYTERLAB_SETTINGS_DIR",
            "JUPYTERLAB_WORKSPACES_DIR", "IPYTHONDIR")


@contextmanager
def serve(folder: Path, tmp: Path, page_config: dict | None = None):
    """`jupyter lab` serving ``folder``; yields ``(base URL, port, token, env)``.

    ``page_config`` goes to labconfig/page_config.json (e.g. ``notebookStartsKernel``).
    """
    env = dict(os.environ)
    for var in ISOLATED:
        env[var] = str(tmp / var.lower())
    for rel, values in SETTINGS.items():
        path = tmp / "jupyterlab_settings_dir" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    if page_config:
        path = tmp / "jupyter_config_dir" / "labconfig" / "page_config.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(page_config))
    port, token = free_port(), secrets.token_hex(16)
    log = (tmp / "lab.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root",
         "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={folder}",
         "--LabApp.expose_app_in_browser=True",  # window.jupyterapp, to run commands
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(proc, f"{base}/api/status?token={token}", tmp / "lab.log")
        yield base, port, token, env
    finally:
        _stop(proc, f"{base}/api/shutdown?token={token}")
        log.close()


def _wait_until_up(proc, url, log: Path):
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"jupyter lab exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    pytest.fail(f"jupyter lab did not answer within {START_TIMEOUT} s:\n{log.read_text()[-3000:]}")


def _stop(proc, shutdown_url):
    """Ask the server to shut down (it stops its kernels); kill its process group if it won't."""
    if proc.poll() is None:
        try:
            urllib.request.urlopen(urllib.request.Request(shutdown_url, method="POST"), timeout=5)
            proc.wait(timeout=15)
        except (OSError, subprocess.TimeoutExpired):
            pass
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
