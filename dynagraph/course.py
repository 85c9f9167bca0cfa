"""The course outside a clone: copy the notebooks into a folder (``python -m dynagraph.course DIR``)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:
    from importlib.abc import Traversable

__all__ = ["StudyTime", "course_files", "place", "study_time"]

# What a course folder holds; setup.py copies the same files into the wheel. The
# Chinese edition's notebooks and run times go in its subfolder (zh/), as in a clone.
PATTERNS = ("*.ipynb", "glossary.md", "run_times.json")
EDITIONS = ("", "zh")  # the English course at the top, the Chinese one in zh/
_PACKAGED = "course_files"  # inside the package, from a wheel (setup.py's build hook)
_CLONE = Path(__file__).resolve().parent.parent / "notebooks"  # an editable or clone install


def course_files() -> list[tuple[str, Traversable]]:
    """The course's files: the copy inside an installed wheel, else a clone's ``notebooks/``.

    Returns:
        ``(path in the course folder, file)`` for the notebooks, the glossary and the run
        times, sorted by path: the English course's at the top, the Chinese edition's in
        ``zh/``.

    Raises:
        FileNotFoundError: neither is there (a package built without its notebooks).

    Example:
        >>> [path for path, _ in course_files()][:2]
        ['00_index.ipynb', '01_simple_backward.ipynb']
    """
    packaged = resources.files("dynagraph") / _PACKAGED
    folder: Traversable = packaged if packaged.is_dir() else _CLONE
    found = []
    for edition in EDITIONS:
        where = folder.joinpath(edition) if edition else folder
        if where.is_dir():
            found += [(f"{edition}/{f.name}" if edition else f.name, f) for f in where.iterdir()
                      if f.is_file() and any(Path(f.name).match(p) for p in PATTERNS)]
    if not found:
        raise FileNotFoundError(
            f"no course files in {packaged} or {_CLONE}: install dynagraph from a wheel or a git URL "
            "(pip install 'dynagraph[lab] @ git+https://...'), or run from a clone of the repository")
    return sorted(found, key=lambda item: (item[0].count("/"), item[0]))


def place(folder: str | Path, force: bool = False) -> list[Path]:
    """Copy the course's notebooks, glossary and run times into ``folder`` (made if missing),
    the Chinese edition into ``folder/zh``.

    Args:
        folder: where the course goes; open ``00_index.ipynb`` there first.
        force: overwrite files already there (a learner's edited notebooks among them).

    Returns:
        The paths written.

    Raises:
        FileExistsError: a course file is already in ``folder`` and ``force`` is false;
            nothing is written then.
        NotADirectoryError: ``folder`` or a folder the course needs in it is a file;
            nothing is written then.
        IsADirectoryError: a folder is where a course file goes (even with ``force``);
            nothing is written then.

    Example:
        >>> paths = place("my-course")  # doctest: +SKIP
    """
    folder = Path(folder)
    files = course_files()
    _check_room(folder, [name for name, _ in files])
    taken = [folder / name for name, _ in files if (folder / name).exists()]
    if taken and not force:
        raise FileExistsError(
            f"{taken[0]} already exists ({len(taken)} of the {len(files)} course files are there): "
            "choose an empty folder, move them away, or pass --force (force=True) to overwrite them")
    for name, f in files:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(f.read_bytes())
    return [folder / name for name, _ in files]


def _check_room(folder: Path, names: list[str]) -> None:
    """Raise, before anything is written, where a course file cannot go: a file stands
    where a folder must be (``folder``, a folder above it, ``zh``), or a folder stands
    where a course file goes."""
    folders = {folder, *folder.parents} | {(folder / name).parent for name in names}
    for path in sorted(folders, key=lambda p: len(p.parts)):  # the outermost file first
        if path.exists() and not path.is_dir():
            raise NotADirectoryError(
                f"{path} is a file, not a folder, so the course cannot go in {folder}: "
                "choose another folder, or move that file away")
    for name in names:
        if (folder / name).is_dir():
            raise IsADirectoryError(
                f"{folder / name} is a folder, where the course file {name} goes (--force "
                "overwrites files, never folders): move that folder away, or choose another folder")


WORDS_PER_MINUTE = 150  # English prose
HANZI_PER_MINUTE = 300  # Chinese prose, counted in characters (no spaces part the words)
_HANZI = re.compile(r"[\u4e00-\u9fff]")
_SOLUTION = re.compile(r"```python\n(.*?)```", re.S)


@dataclass(frozen=True)
class StudyTime:
    """How long a notebook takes a learner, in minutes (see :func:`study_time`).

    Attributes:
        reading: Reading its prose once.
        lesson: Reading, running and looking at every output: twice the reading time.
        exercises: The exercises that are not marked optional, by the length of their
            solutions.
        optional: The exercises marked optional.
    """

    reading: float
    lesson: float
    exercises: float
    optional: float

    @property
    def total(self) -> float:
        """The lesson with its exercises, the optional ones aside."""
        return self.lesson + self.exercises


def exercise_minutes(solution_lines: int) -> int:
    """An estimate of one exercise's time from the length of its folded solution: 5
    minutes for at most 5 lines of code, 10 for at most 15, 20 for a longer one.

    Example:
        >>> [exercise_minutes(n) for n in (1, 5, 6, 15, 45)]
        [5, 5, 10, 10, 20]
    """
    return 5 if solution_lines <= 5 else 10 if solution_lines <= 15 else 20


def study_time(path: str | Path) -> StudyTime:
    """How long the notebook at ``path`` takes: its prose read at 150 words (or 300 Chinese
    characters) a minute, twice that to run it and look at each output, and each exercise
    by :func:`exercise_minutes` of its solution's lines (comments and blank lines aside).
    An exercise whose stub cell has the tag ``exercise-optional`` counts apart."""
    cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    tags = [c.get("metadata", {}).get("tags", []) for c in cells]
    text = " ".join("".join(c["source"]) for c, t in zip(cells, tags)
                    if c["cell_type"] == "markdown" and "exercise-solution" not in t)
    words, hanzi = len(_HANZI.sub(" ", text).split()), len(_HANZI.findall(text))
    reading = words / WORDS_PER_MINUTE + hanzi / HANZI_PER_MINUTE
    core = optional = 0.0
    stub_optional = False
    for c, t in zip(cells, tags):
        if "exercise-stub" in t:
            stub_optional = "exercise-optional" in t
        elif "exercise-solution" in t:
            code = _SOLUTION.search("".join(c["source"]))
            lines = [line for line in (code.group(1) if code else "").splitlines()
                     if line.strip() and not line.strip().startswith("#")]
            if stub_optional:
                optional += exercise_minutes(len(lines))
            else:
                core += exercise_minutes(len(lines))
    return StudyTime(reading=reading, lesson=2 * reading, exercises=core, optional=optional)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m dynagraph.course DIR [--force]``: place the course; 1 with the reason if it cannot."""
    parser = argparse.ArgumentParser(prog="python -m dynagraph.course", description=place.__doc__)
    parser.add_argument("folder", help="where the notebooks go (made if missing), e.g. . or my-course")
    parser.add_argument("--force", action="store_true", help="overwrite course files already there")
    args = parser.parse_args(argv)
    try:
        paths = place(args.folder, force=args.force)
    except (FileExistsError, FileNotFoundError, NotADirectoryError, IsADirectoryError) as e:
        print(f"dynagraph.course: {e}", file=sys.stderr)
        return 1
    print(f"placed {len(paths)} files in {Path(args.folder).resolve()}; "
          f"open {Path(args.folder) / '00_index.ipynb'} first, then 01 "
          f"(中文版：{Path(args.folder) / 'zh' / '00_index.ipynb'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
