"""Execute notebooks in place and store their outputs, ready to commit.

    .venv/bin/python tools/run_notebooks.py notebooks/01_simple_backward.ipynb [...]
    .venv/bin/python tools/run_notebooks.py --all
    .venv/bin/python tools/run_notebooks.py --cold notebooks/08_jit_and_graph_capture.ipynb

Runs each notebook top to bottom in a fresh kernel of this Python (as nbval does),
with its folder as the working directory. Each run's wall time is written to
run_times.json in the notebook's folder (notebooks/ for the English course,
notebooks/zh/ for the Chinese one), which that folder's index notebook shows (so run
00_index last: ``--all`` runs both courses, each index after its notebooks).
``--cold`` runs with an empty torch.compile cache, as on a new machine, and records
that time apart. Cells tagged ``raises-exception`` may
fail; any other error stops with the cell's message. Afterwards volatile metadata
is dropped and the file is checked for absolute paths and size, so that what is
committed is small, stable and free of this machine's paths.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
MAX_BYTES = 300_000
# Absolute paths that must never be committed (home, temp, site-packages, checkouts).
ABS_PATH = re.compile(r"(/(home|root|tmp|work|usr|opt|Users)/[\w.-]+|[A-Z]:\\\\Users)")
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def clean(nb) -> None:
    """Drop metadata that changes from run to run; use the plain python3 kernelspec."""
    nb.metadata = {"kernelspec": KERNELSPEC,
                   "language_info": {"name": "python", "pygments_lexer": "ipython3"}}
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        cell.metadata.pop("ExecuteTime", None)


def problems(path: Path) -> list[str]:
    """What would make this notebook unfit to commit."""
    text = path.read_text()
    found = []
    if len(text.encode()) > MAX_BYTES:
        found.append(f"{path.name} is {len(text.encode()):,} bytes (limit {MAX_BYTES:,})")
    for m in sorted(set(ABS_PATH.findall(text))):
        found.append(f"{path.name} contains an absolute path: {m[0]!r}")
    return found


def run(path: Path, timeout: int = 120) -> float:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    clean(nb)
    nbformat.write(nb, path)
    return seconds


def record(path: Path, seconds: float, cold: bool) -> None:
    """Store one notebook's run time in run_times.json beside it (seconds, one decimal)."""
    times_file = path.parent / "run_times.json"
    try:
        times = json.loads(times_file.read_text())
    except (OSError, ValueError):  # none yet (or a half-written one: start again)
        times = {}
    times["cpu_cores"] = os.cpu_count()  # of the machine that measured (the index says so)
    entry = times.setdefault(path.name, {})
    entry["cold_seconds" if cold else "seconds"] = round(seconds, 1)
    times_file.write_text(json.dumps(dict(sorted(times.items())), indent=1) + "\n")


def in_run_order(paths: list[Path]) -> list[Path]:
    """Folder by folder, each index last: it shows the other notebooks' run times."""
    return sorted(paths, key=lambda p: (str(p.parent), p.name.startswith("00_"), p.name))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--all", action="store_true", help="every notebooks/*.ipynb and notebooks/zh/*.ipynb")
    parser.add_argument("--check", action="store_true", help="only check, do not execute")
    parser.add_argument("--cold", action="store_true", help="run with an empty torch.compile cache")
    args = parser.parse_args(argv)
    every = [*(ROOT / "notebooks").glob("*.ipynb"), *(ROOT / "notebooks" / "zh").glob("*.ipynb")]
    paths = in_run_order(every if args.all else args.paths)
    bad = []
    for path in paths:
        if not args.check:
            if args.cold:  # the kernel inherits this: inductor and Triton caches start empty
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-")
            seconds = run(path)
            print(f"{path.name}: {seconds:.1f} s", file=sys.stderr)
            if not path.name.startswith("00_"):
                record(path, seconds, args.cold)
        bad += problems(path)
    for line in bad:
        print("problem:", line, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
