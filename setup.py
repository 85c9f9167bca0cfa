"""Build hook (the rest is in pyproject.toml): a wheel carries the course's notebooks in
dynagraph/course_files/, so `python -m dynagraph.course DIR` can place them outside a clone."""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

NOTEBOOKS = Path(__file__).resolve().parent / "notebooks"
PATTERNS = ("*.ipynb", "glossary.md", "run_times.json")  # as dynagraph/course.py's PATTERNS
EDITIONS = ("", "zh")  # as dynagraph/course.py's EDITIONS: the Chinese edition in zh/


class BuildPyWithCourse(build_py):
    """build_py, then the course files into the built package (not the source tree); an
    editable install reads notebooks/ in place instead (dynagraph/course.py)."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        files = sorted(f for edition in EDITIONS for p in PATTERNS for f in (NOTEBOOKS / edition).glob(p))
        if not files:
            raise FileNotFoundError(f"no course files in {NOTEBOOKS}: build from a clone or the sdist")
        target = Path(self.build_lib) / "dynagraph" / "course_files"
        shutil.rmtree(target, ignore_errors=True)  # build/ outlives a build: no renamed notebook stays
        for f in files:
            out = target / f.relative_to(NOTEBOOKS)
            out.parent.mkdir(parents=True, exist_ok=True)
            self.copy_file(str(f), str(out))


setup(cmdclass={"build_py": BuildPyWithCourse})
