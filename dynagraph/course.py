"""The course outside a clone: copy the notebooks into a folder (``python -m dynagraph.course DIR``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:
    from importlib.abc import Traversable

__all__ = ["course_files", "place"]

# What a course folder holds; setup.py copies the same files into the wheel.
PATTERNS = ("*.ipynb", "glossary.md", "run_times.json")
_PACKAGED = "course_files"  # inside the package, from a wheel (setup.py's build hook)
_CLONE = Path(__file__).resolve().parent.parent / "notebooks"  # an editable or clone install


def course_files() -> list[Traversable]:
    """The course's files: the copy inside an installed wheel, else a clone's ``notebooks/``.

    Returns:
        The notebooks, the glossary and the run times, sorted by name.

    Raises:
        FileNotFoundError: neither is there (a package built without its notebooks).

    Example:
        >>> sorted(f.name for f in course_files())[:2]
        ['00_index.ipynb', '01_simple_backward.ipynb']
    """
    packaged = resources.files("dynagraph") / _PACKAGED
    folder: Traversable = packaged if packaged.is_dir() else _CLONE
    found = sorted((f for f in folder.iterdir() if any(Path(f.name).match(p) for p in PATTERNS)),
                   key=lambda f: f.name) if folder.is_dir() else []
    if not found:
        raise FileNotFoundError(
            f"no course files in {packaged} or {_CLONE}: install dynagraph from a wheel or a git URL "
            "(pip install 'dynagraph[lab] @ git+https://...'), or run from a clone of the repository")
    return found


def place(folder: str | Path, force: bool = False) -> list[Path]:
    """Copy the course's notebooks, glossary and run times into ``folder`` (made if missing).

    Args:
        folder: where the course goes; open ``00_index.ipynb`` there first.
        force: overwrite files already there (a learner's edited notebooks among them).

    Returns:
        The paths written.

    Raises:
        FileExistsError: a course file is already in ``folder`` and ``force`` is false;
            nothing is written then.

    Example:
        >>> paths = place("my-course")  # doctest: +SKIP
    """
    folder = Path(folder)
    files = course_files()
    taken = [folder / f.name for f in files if (folder / f.name).exists()]
    if taken and not force:
        raise FileExistsError(
            f"{taken[0]} already exists ({len(taken)} of the {len(files)} course files are there): "
            "choose an empty folder, move them away, or pass --force (force=True) to overwrite them")
    folder.mkdir(parents=True, exist_ok=True)
    for f in files:
        (folder / f.name).write_bytes(f.read_bytes())
    return [folder / f.name for f in files]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m dynagraph.course DIR [--force]``: place the course; 1 with the reason if it cannot."""
    parser = argparse.ArgumentParser(prog="python -m dynagraph.course", description=place.__doc__)
    parser.add_argument("folder", help="where the notebooks go (made if missing), e.g. . or my-course")
    parser.add_argument("--force", action="store_true", help="overwrite course files already there")
    args = parser.parse_args(argv)
    try:
        paths = place(args.folder, force=args.force)
    except (FileExistsError, FileNotFoundError) as e:
        print(f"dynagraph.course: {e}", file=sys.stderr)
        return 1
    print(f"placed {len(paths)} files in {Path(args.folder).resolve()}; "
          f"open {Path(args.folder) / '00_index.ipynb'} first, then 01")
    return 0


if __name__ == "__main__":
    sys.exit(main())
