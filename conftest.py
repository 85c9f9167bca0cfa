"""Repository-wide pytest set-up: what must not depend on the working directory, or on nbval."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
# How the notebooks run where nbval is installed: outputs compared (``--nbval``, not
# ``--nbval-lax``) in this environment's kernel, 120 s a cell, volatile outputs
# masked. Set here rather than in pyproject's addopts, which would make every pytest
# run fail where nbval is missing (then the notebooks are simply not collected).
# An option given on the command line wins.
NBVAL_OPTIONS = {
    "nbval_current_env": True,
    "nbval_cell_timeout": 120.0,
    "nbval_sanitize_with": "tests/nbval_sanitize.cfg",  # relative to the repository root
}


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    if not config.pluginmanager.hasplugin("nbval"):
        return
    opt = config.option
    given = {str(a).split("=", 1)[0] for a in config.invocation_params.args}
    opt.nbval = opt.nbval or not opt.nbval_lax
    for name, value in NBVAL_OPTIONS.items():
        if "--" + name.replace("_", "-") in given:
            continue
        if name == "nbval_current_env" and opt.nbval_kernel_name:
            continue  # a kernel was named instead
        setattr(opt, name, value)
    # The sanitize file names a path relative to the repository root; resolve it
    # there when pytest runs from another folder.
    path = opt.nbval_sanitize_with
    if path and not Path(path).exists() and (ROOT / path).exists():
        opt.nbval_sanitize_with = str(ROOT / path)
