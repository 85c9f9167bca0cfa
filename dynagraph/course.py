"""The course outside a clone: copy the notebooks into a folder (``python -m dynagraph.course DIR``)."""

from __future__ import annotations

import argparse
import json
import posixpath
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

__all__ = ["StudyTime", "course_files", "place", "prose_words", "study_time"]

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


def place(folder: str | Path, force: bool = False, missing: bool = False) -> list[Path]:
    """Copy the course's notebooks, glossary and run times into ``folder`` (made if missing),
    the Chinese edition into ``folder/zh``.

    Each placed notebook carries the ``language_info`` that this Python's Jupyter kernel
    reports (:func:`kernel_language_info`), so JupyterLab, which fills it in on opening,
    finds nothing to change: a lesson opened and closed without running is not modified.
    The Chinese notebooks are placed with the suffix ``_zh`` (``zh/01_simple_backward_zh.ipynb``),
    so that their tabs differ from the English ones; links to them follow.

    Args:
        folder: where the course goes; open ``00_index.ipynb`` there first.
        force: overwrite files already there (a learner's edited notebooks among them).
        missing: place only the files that are not there yet and keep the others (a
            deleted lesson comes back fresh; ``force`` is then ignored).

    Returns:
        The paths written.

    Raises:
        FileExistsError: a course file is already in ``folder`` and neither ``force`` nor
            ``missing`` is given; nothing is written then.
        NotADirectoryError: ``folder`` or a folder the course needs in it is a file;
            nothing is written then.
        IsADirectoryError: a folder is where a course file goes (even with ``force``);
            nothing is written then.

    Example:
        >>> paths = place("my-course")  # doctest: +SKIP
    """
    folder = Path(folder)
    files = [(placed_name(name), name, f) for name, f in course_files()]
    _check_room(folder, [name for name, _, _ in files])
    taken = [folder / name for name, _, _ in files if (folder / name).exists()]
    if taken and not (force or missing):
        raise FileExistsError(
            f"{taken[0]} already exists ({len(taken)} of the {len(files)} course files are there): "
            "choose an empty folder, move them away, or pass --force (force=True) to overwrite them")
    if missing:
        files = [item for item in files if folder / item[0] not in taken]
    info = kernel_language_info()
    written = []
    for name, source, f in files:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(placed_bytes(source, f.read_bytes(), info))
        written.append(folder / name)
    return written


ZH_SUFFIX = "_zh"  # the Chinese notebooks' names end in it once placed (two tabs, two names)


def placed_name(name: str) -> str:
    """The name a course file gets in a course folder: a Chinese notebook's stem gains ``_zh``.

    Example:
        >>> placed_name("zh/01_simple_backward.ipynb"), placed_name("01_simple_backward.ipynb")
        ('zh/01_simple_backward_zh.ipynb', '01_simple_backward.ipynb')
    """
    if name.startswith("zh/") and name.endswith(".ipynb"):
        return name[:-len(".ipynb")] + ZH_SUFFIX + ".ipynb"
    return name


_NOTEBOOK_REF = re.compile(r"[\w./-]+\.ipynb")


def placed_links(name: str, text: str) -> str:
    """``text`` of the course file ``name`` with each relative reference to a Chinese
    notebook (a link, a name in the index's code, a key of the run times) renamed as
    :func:`placed_name` renames the notebook.

    Example:
        >>> placed_links("00_index.ipynb", "[zh/00_index.ipynb](zh/00_index.ipynb), 01_simple_backward.ipynb")
        '[zh/00_index_zh.ipynb](zh/00_index_zh.ipynb), 01_simple_backward.ipynb'
        >>> placed_links("zh/00_index.ipynb", "'05_dynamic_depth.ipynb' (../00_index.ipynb)")
        "'05_dynamic_depth_zh.ipynb' (../00_index.ipynb)"
    """
    here = posixpath.dirname(name)

    def rename(match: re.Match[str]) -> str:
        ref = match.group(0)
        target = posixpath.normpath(posixpath.join(here, ref))
        if not target.startswith("zh/") or placed_name(target) == target:
            return ref
        return ref[:-len(".ipynb")] + ZH_SUFFIX + ".ipynb"
    return _NOTEBOOK_REF.sub(rename, text)


def placed_bytes(name: str, data: bytes, language_info: dict | None) -> bytes:
    """The bytes the course file ``name`` is placed with: links renamed (:func:`placed_links`)
    and, for a notebook, ``metadata.language_info`` replaced by ``language_info`` (when
    given), written as Jupyter writes a notebook."""
    text = data.decode("utf-8")
    if not name.endswith(".ipynb"):
        return placed_links(name, text).encode("utf-8") if name.startswith("zh/") else data
    nb = json.loads(placed_links(name, text))
    if language_info is not None:
        nb.setdefault("metadata", {})["language_info"] = language_info
    return (json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")


def kernel_language_info() -> dict | None:
    """What the Jupyter kernel of this Python (ipykernel) reports as ``language_info``
    (name, version of this Python, mimetype, codemirror_mode, pygments_lexer,
    nbconvert_exporter, file_extension); None where ipykernel is not installed (the
    stored ``language_info`` is kept then)."""
    try:
        from ipykernel.ipkernel import IPythonKernel
    except ImportError:
        return None
    return json.loads(json.dumps(IPythonKernel.language_info))  # a plain copy, as JSON holds it


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


def prose_words(cells: list[dict]) -> tuple[int, int]:
    """What a learner reads in a notebook's ``cells``: ``(words, hanzi)``, the words of
    its markdown cells (the folded exercise solutions, which are code, aside) and apart
    from them the Chinese characters, since no spaces part Chinese words.

    Example:
        >>> prose_words([{"cell_type": "markdown", "source": ["Read ", "三个字 twice"]},
        ...              {"cell_type": "code", "source": "x = 1"}])
        (2, 3)
    """
    text = " ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown"
                    and "exercise-solution" not in c.get("metadata", {}).get("tags", []))
    return len(_HANZI.sub(" ", text).split()), len(_HANZI.findall(text))


def study_time(path: str | Path) -> StudyTime:
    """How long the notebook at ``path`` takes: its prose (:func:`prose_words`) read at 150
    words (or 300 Chinese characters) a minute, twice that to run it and look at each output,
    and each exercise by :func:`exercise_minutes` of its solution's lines (comments and blank
    lines aside).
    An exercise whose stub cell has the tag ``exercise-optional`` counts apart."""
    cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    tags = [c.get("metadata", {}).get("tags", []) for c in cells]
    words, hanzi = prose_words(cells)
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


DESCRIPTION = """Copy the course (the lessons, the deep dives, the glossary and the run times)
into FOLDER, the Chinese edition into FOLDER/zh with names ending in _zh. Then start
JupyterLab there (jupyter lab FOLDER) and open 00_index.ipynb first. A file already in
FOLDER is never replaced unless you pass --force. With --missing, only the files that
are not there yet are placed: delete a lesson and run it again to get a fresh copy."""


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m dynagraph.course DIR [--force | --missing]``: place the course; 1 with the
    reason if it cannot."""
    parser = argparse.ArgumentParser(prog="python -m dynagraph.course", description=DESCRIPTION)
    parser.add_argument("folder", help="where the notebooks go (made if missing), e.g. . or my-course")
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--force", action="store_true", help="overwrite course files already there")
    how.add_argument("--missing", action="store_true",
                     help="place only the course files not there yet; keep the others")
    args = parser.parse_args(argv)
    if not args.folder.strip():  # Path("") is the current folder: the course would land there unasked
        print(f"dynagraph.course: the folder name {args.folder!r} is empty: "
              "pass a folder, such as my-course, or . for the current folder", file=sys.stderr)
        return 1
    try:
        paths = place(args.folder, force=args.force, missing=args.missing)
    except (FileExistsError, FileNotFoundError, NotADirectoryError, IsADirectoryError) as e:
        print(f"dynagraph.course: {e}", file=sys.stderr)
        return 1
    folder = Path(args.folder)
    kept = len(course_files()) - len(paths)
    print(f"placed {len(paths)} files in {folder.resolve()}"
          + (f" ({kept} already there were kept; delete one to get a fresh copy)" if kept else "")
          + f"; open {folder / '00_index.ipynb'} first, then 01 "
          f"(中文版：{folder / 'zh' / placed_name('zh/00_index.ipynb').split('/')[-1]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
