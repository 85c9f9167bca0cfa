"""Repository-wide pytest set-up: what must not depend on the working directory."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent


def pytest_configure(config):
    """``--nbval-sanitize-with`` in pyproject's addopts names a file relative to the
    repository root; resolve it there when pytest runs from another folder."""
    path = getattr(config.option, "nbval_sanitize_with", None)
    if path and not Path(path).exists() and (ROOT / path).exists():
        config.option.nbval_sanitize_with = str(ROOT / path)
