"""dynagraph/course.py: the course placed in a folder outside a clone, from a clone and
from the built wheel (which carries the notebooks; setup.py's build hook)."""

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from dynagraph import course

ROOT = Path(__file__).resolve().parent.parent
NAMES = sorted(p.name for pattern in course.PATTERNS for p in (ROOT / "notebooks").glob(pattern))
ZH_NAMES = sorted(f"zh/{p.name}" for pattern in course.PATTERNS for p in (ROOT / "notebooks" / "zh").glob(pattern))
PLACED_ZH = [course.placed_name(name) for name in ZH_NAMES]  # zh/01_simple_backward_zh.ipynb
STORED_LANGUAGE_INFO = {"name": "python", "pygments_lexer": "ipython3"}  # what the repository's notebooks keep


def test_place_copies_the_notebooks_glossary_and_run_times(tmp_path):
    paths = course.place(tmp_path / "my-course")
    placed = [p.relative_to(tmp_path / "my-course").as_posix() for p in paths]
    assert placed == NAMES + PLACED_ZH and {"00_index.ipynb", "glossary.md", "run_times.json"} <= set(NAMES)
    assert {"zh/00_index_zh.ipynb", "zh/05_dynamic_depth_zh.ipynb"} <= set(PLACED_ZH)  # in zh/, named apart
    for p, name in zip(paths, NAMES + ZH_NAMES):
        assert _unplaced(p) == (ROOT / "notebooks" / name).read_bytes(), name


def _unplaced(path: Path) -> bytes:
    """A placed file's bytes as the repository holds it: the Chinese names back, and the
    stored ``language_info`` (the placed one is the kernel's)."""
    text = path.read_text(encoding="utf-8").replace(course.ZH_SUFFIX + ".ipynb", ".ipynb")
    if path.suffix != ".ipynb":
        return text.encode("utf-8")
    nb = json.loads(text)
    nb["metadata"]["language_info"] = STORED_LANGUAGE_INFO
    return (json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")


def test_placed_notebooks_carry_the_language_info_the_kernel_reports(tmp_path):
    """JupyterLab sets metadata.language_info to the kernel's reply when a notebook opens and
    marks the notebook modified only where that changes it (deep equality)."""
    ipkernel = pytest.importorskip("ipykernel.ipkernel")
    info = ipkernel.IPythonKernel.language_info
    assert info["version"] == sys.version.split()[0] and info["name"] == "python"
    for path in course.place(tmp_path):
        if path.suffix == ".ipynb":
            assert json.loads(path.read_text(encoding="utf-8"))["metadata"]["language_info"] == info, path


def test_placed_links_reach_placed_files(tmp_path):
    """Every relative .ipynb or .md reference in a placed notebook names a placed file."""
    import re
    placed = course.place(tmp_path)
    for path in placed:
        if path.suffix != ".ipynb":
            continue
        for ref in set(re.findall(r"\]\(([\w./-]+\.(?:ipynb|md))\)", path.read_text(encoding="utf-8"))):
            assert (path.parent / ref).is_file(), f"{path.relative_to(tmp_path)} links to {ref}"
    times = json.loads((tmp_path / "zh" / "run_times.json").read_text(encoding="utf-8"))
    assert {k for k in times if k.endswith(".ipynb")} == {p.name for p in (tmp_path / "zh").glob("[0-9][0-9]*.ipynb") if not p.name.startswith("00_")}


def test_place_missing_keeps_every_file_there_and_restores_a_deleted_one(tmp_path):
    course.place(tmp_path)
    (tmp_path / "01_simple_backward.ipynb").write_text("my answers")
    (tmp_path / "zh" / "05_dynamic_depth_zh.ipynb").unlink()
    assert course.place(tmp_path, missing=True) == [tmp_path / "zh" / "05_dynamic_depth_zh.ipynb"]
    assert (tmp_path / "01_simple_backward.ipynb").read_text() == "my answers"
    assert course.place(tmp_path, missing=True, force=True) == []  # missing wins: nothing is overwritten


def test_the_help_is_a_plain_description(capsys):
    with pytest.raises(SystemExit):
        course.main(["--help"])
    out = capsys.readouterr().out
    assert "Copy the course" in out and "--missing" in out
    assert not any(word in out for word in ("Args:", "Raises:", "doctest", ">>>"))


def test_place_over_a_course_file_raises_and_writes_nothing(tmp_path):
    (tmp_path / "01_simple_backward.ipynb").write_text("my answers")
    with pytest.raises(FileExistsError, match=r"01_simple_backward.ipynb already exists .*pass --force"):
        course.place(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["01_simple_backward.ipynb"]


def test_place_with_force_overwrites(tmp_path):
    (tmp_path / "glossary.md").write_text("old")
    course.place(tmp_path, force=True)
    assert (tmp_path / "glossary.md").read_bytes() == (ROOT / "notebooks" / "glossary.md").read_bytes()


def test_place_under_a_file_raises_before_writing_anything(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    for folder in (tmp_path / "notes.txt", tmp_path / "notes.txt" / "course"):
        with pytest.raises(NotADirectoryError, match=r"notes.txt is a file, not a folder, so the course cannot "
                           r"go in .*: choose another folder, or move that file away"):
            course.place(folder)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "zh").write_text("a file where the Chinese edition goes")
    with pytest.raises(NotADirectoryError, match=r"zh is a file, not a folder"):
        course.place(tmp_path / "c", force=True)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["c", "notes.txt", "zh"]


def test_place_with_force_onto_a_folder_named_like_a_course_file_raises_before_writing(tmp_path):
    (tmp_path / "zh" / "run_times.json").mkdir(parents=True)  # the last file placed: all others would be written
    with pytest.raises(IsADirectoryError, match=r"run_times.json is a folder, where the course file zh/run_times.json "
                       r"goes \(--force overwrites files, never folders\): move that folder away"):
        course.place(tmp_path, force=True)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == ["zh", "zh/run_times.json"]


def test_main_says_in_one_line_why_a_folder_cannot_take_the_course(tmp_path, capsys):
    (tmp_path / "f").write_text("")
    (tmp_path / "d" / "00_index.ipynb").mkdir(parents=True)
    for argv in ([str(tmp_path / "f" / "course")], [str(tmp_path / "d"), "--force"]):
        assert course.main(argv) == 1
        err = capsys.readouterr().err
        assert err.startswith("dynagraph.course: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["00_index.ipynb"]


def test_main_refuses_an_empty_folder_name(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for blank in ("", " "):  # "" placed the course in the current folder; " " in a folder named by a space
        assert course.main([blank]) == 1
        err = capsys.readouterr().err
        assert err == (f"dynagraph.course: the folder name {blank!r} is empty: pass a folder, such as my-course, "
                       "or . for the current folder\n")
    assert list(tmp_path.iterdir()) == []
    assert course.main(["."]) == 0 and (tmp_path / "00_index.ipynb").exists()  # "." still means here


def test_course_files_missing_raises_with_how_to_get_them(monkeypatch, tmp_path):
    monkeypatch.setattr(course, "_PACKAGED", "no_such_folder")
    monkeypatch.setattr(course, "_CLONE", tmp_path / "notebooks")
    with pytest.raises(FileNotFoundError, match=r"no course files in .*install dynagraph from a wheel or a git URL"):
        course.course_files()


def test_main_says_where_the_course_went_and_why_it_stopped(tmp_path, capsys):
    assert course.main([str(tmp_path)]) == 0
    assert "00_index.ipynb first" in capsys.readouterr().out
    assert course.main([str(tmp_path)]) == 1
    assert "already exists" in capsys.readouterr().err
    assert course.main([str(tmp_path), "--force"]) == 0


@pytest.mark.slow
def test_the_wheel_places_and_runs_the_course_in_a_clean_venv(tmp_path):
    """Build the wheel (from a copy of the tracked files: tests/_wheel.py), install it alone into a new venv (its dependencies come from this
    environment's site-packages through a .pth file: offline and fast), place the course
    from there and run 00_index.ipynb, which reads every placed notebook and run_times.json."""
    from _wheel import build_wheel, untracked_in
    wheel = build_wheel(tmp_path)  # from a clean copy of the tracked files
    assert untracked_in(wheel) == []
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True, timeout=60)
    py = tmp_path / "venv" / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = Path(subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q",
                              str(wheel)], capture_output=True, text=True, timeout=120)
    assert install.returncode == 0, install.stderr[-3000:]
    (site / "zz_deps.pth").write_text(sysconfig.get_path("purelib") + "\n")  # after the wheel's own dynagraph
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join([str(py.parent), env.get("PATH", ""), str(Path(sys.executable).parent)])  # graphviz-pure
    where = subprocess.run([py, "-m", "dynagraph.course", "course"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=60)
    assert where.returncode == 0, where.stderr[-3000:]
    assert sorted(p.name for p in (tmp_path / "course").iterdir() if p.is_file()) == NAMES
    assert sorted(f"zh/{p.name}" for p in (tmp_path / "course" / "zh").iterdir()) == sorted(PLACED_ZH)
    for folder, index in (("course", "00_index.ipynb"), ("course/zh", "00_index_zh.ipynb")):
        run = subprocess.run([py, "-c", RUN_INDEX.format(index=index)], cwd=tmp_path / folder, env=env,
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
        assert Path(run.stdout.splitlines()[0]).is_relative_to(site)  # the wheel's dynagraph, not the clone's
        n = sum(name.endswith(".ipynb") and name != "00_index.ipynb" for name in NAMES)  # what the index lists
        assert f"{n} of {n} notebooks found" in run.stdout or f"找到了 {n} 个笔记本（共 {n} 个）" in run.stdout, \
            run.stdout[-2000:]


RUN_INDEX = """
import dynagraph, nbclient, nbformat
print(dynagraph.__file__)
nb = nbformat.read("{index}", as_version=4)
nbclient.NotebookClient(nb, timeout=60, kernel_name="python3").execute()
print("".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs))
"""


# -- how long a notebook takes (study_time) --------------------------------------------------

def _notebook(tmp_path, cells):
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    return path


def _md(text, tags=()):
    return {"cell_type": "markdown", "metadata": {"tags": list(tags)}, "source": [text]}


def _solution(lines):
    code = "\n".join(f"x{k} = {k}" for k in range(lines))
    return _md(f"<details><summary>Show a solution</summary>\n\n```python\n# a comment\n\n{code}\n```\n</details>",
               ("exercise-solution",))


def _stub(optional=False):
    tags = ["exercise-stub"] + (["exercise-optional"] if optional else [])
    return {"cell_type": "code", "metadata": {"tags": tags}, "source": ["def f():\n    raise NotImplementedError"]}


def test_study_time_reads_twice_over_and_times_each_exercise_by_its_solution(tmp_path):
    words = _md(" ".join(["word"] * 300))  # 2 minutes of reading
    path = _notebook(tmp_path, [words, _stub(), _solution(5), _stub(), _solution(6), _stub(), _solution(16),
                                _stub(optional=True), _solution(45)])
    t = course.study_time(path)
    assert (t.reading, t.lesson, t.exercises, t.optional, t.total) == (2, 4, 5 + 10 + 20, 20, 4 + 35)


def test_study_time_counts_chinese_by_characters(tmp_path):
    t = course.study_time(_notebook(tmp_path, [_md("汉" * 600 + " and three words")]))
    assert t.reading == pytest.approx(600 / 300 + 3 / 150)


def test_the_readme_and_the_index_state_the_time_a_lesson_takes():
    """The README's and the index's '30 to 60 minutes' with the exercises (the optional
    one aside, '20' more) hold for every lesson of both editions."""
    lessons = [p for d in ("notebooks", "notebooks/zh") for p in (ROOT / d).glob("[0-9][0-9]_*.ipynb") if not p.name.startswith("00_")]
    times = [course.study_time(p) for p in lessons]
    assert 30 <= min(t.total for t in times) and max(t.total for t in times) <= 60
    assert {t.optional for t in times} == {0, 20}
    assert "30 to 60 minutes with its\nexercises (one optional exercise adds 20)" in (ROOT / "README.md").read_text()
    assert "连同练习需要 30 到 60 分钟（一道选做练习另加 20 分钟）" in (ROOT / "README.zh-CN.md").read_text()
    for index in ("notebooks/00_index.ipynb", "notebooks/zh/00_index.ipynb"):
        text = (ROOT / index).read_text(encoding="utf-8")
        assert "30 to 60 minutes" in text or "30 到 60 分钟" in text
