"""Build dynagraph's wheel for the `slow` packaging tests, from a clean copy of what git tracks.

`pip wheel .` in a checkout builds in place, and setuptools keeps its `build/` folder from
one build to the next: a module that became a package (`dynagraph/_torch.py` became
`dynagraph/_torch/`) stayed in `build/lib/` and shipped beside its successor. So the wheel
is built from a copy of the tracked files (as they are in the work tree, edits included)
in a fresh folder, and :func:`untracked_in` names whatever in it git does not track.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COURSE = "dynagraph/course_files/"  # setup.py copies notebooks/ here in the built package


def tracked() -> set[str]:
    """The paths git tracks in this checkout (relative, with ``/``), those deleted in the work tree left out."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60).stdout
    return {p for p in out.decode().split("\0") if p and (ROOT / p).is_file()}


def build_wheel(tmp_path: Path) -> Path:
    """The wheel ``pip wheel`` builds from a copy of the tracked files in ``tmp_path / "src"``
    (no ``build/`` or ``*.egg-info`` from an earlier build can reach it), written to
    ``tmp_path / "dist"``."""
    src = tmp_path / "src"
    for path in sorted(tracked()):
        (src / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, src / path)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           str(src), "-w", str(tmp_path / "dist")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("dynagraph-*.whl")
    return wheel


def untracked_in(wheel: Path) -> list[str]:
    """The files in ``wheel`` that are not a file git tracks: each of ``dynagraph/`` must be
    one (a course file one of ``notebooks/``), each licence in ``.dist-info/licenses/`` too;
    the rest of ``.dist-info/`` is the wheel's own metadata."""
    known = tracked()
    odd = []
    for name in zipfile.ZipFile(wheel).namelist():
        _, _, rest = name.partition(".dist-info/")
        if rest:
            if rest.startswith("licenses/") and rest.removeprefix("licenses/") not in known:
                odd.append(name)
            continue
        source = "notebooks/" + name.removeprefix(COURSE) if name.startswith(COURSE) else name
        if source not in known:
            odd.append(name)
    return odd
