"""requirements.txt and environment.yml must list the same packages with the same pins:
pyproject.toml's extras as they are, and its dependencies at versions their ranges allow.
requirements-lab.txt (the light lane, included by requirements.txt) lists the
dependencies and the `lab` extra only."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONDA_TO_PIP = {"python-graphviz": "graphviz"}  # conda-forge name -> PyPI name
NOT_PACKAGES = {"python", "pip"}  # conda-only entries with no requirements.txt line


def parse(lines):
    """Map normalized package name -> set of version clauses, from 'name>=1,<2  # comment' lines
    (and the lines of a requirements file they include with '-r FILE')."""
    deps = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            deps.update(requirements(line[3:].strip()))
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*([<>=!~].*)?", line)
        if not line or line.startswith("-") or not m:
            continue
        name = m.group(1).lower().replace("_", "-")
        name = CONDA_TO_PIP.get(name, name)
        if name not in NOT_PACKAGES:
            deps[name] = {c.strip() for c in (m.group(2) or "").split(",") if c.strip()}
    return deps


def requirements(name):
    return parse((ROOT / name).read_text().splitlines())


def pip_deps():
    return requirements("requirements.txt")


def conda_deps():
    text = (ROOT / "environment.yml").read_text().split("dependencies:", 1)[1]
    items = re.findall(r"^\s*-\s+(.+)$", text, re.MULTILINE)
    return parse(item for item in items if not item.rstrip().endswith(":"))


def test_same_package_names():
    pip, conda = pip_deps(), conda_deps()
    assert pip.keys() == conda.keys(), (
        f"only in requirements.txt: {sorted(pip.keys() - conda.keys())}; "
        f"only in environment.yml: {sorted(conda.keys() - pip.keys())}"
    )


def test_same_pins():
    pip, conda = pip_deps(), conda_deps()
    differ = {n: (sorted(pip[n]), sorted(conda[n])) for n in pip.keys() & conda.keys() if pip[n] != conda[n]}
    assert not differ, f"pins differ (requirements.txt, environment.yml): {differ}"


def test_torch_pinned_exactly_in_both():
    for source, deps in (("requirements.txt", pip_deps()), ("environment.yml", conda_deps())):
        pins = deps.get("torch", set())
        assert len(pins) == 1 and next(iter(pins)).startswith("=="), f"{source}: torch must be pinned with ==, got {pins}"
    assert pip_deps()["torch"] == conda_deps()["torch"]


def pyproject_deps(only=None):
    """``(dependencies, extras)`` of pyproject.toml, each parsed like the files above
    (the ``dev`` extra's ``dynagraph[test,docs]`` names no package of its own); the
    extras named in ``only``, else all."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = [line for name, lines in project["optional-dependencies"].items()
              if only is None or name in only for line in lines]
    return parse(project["dependencies"]), parse(extras)


def lowest(clauses):
    """The lowest version a pin allows: ``2.13.0`` of ``==2.13.0``, ``0.21`` of ``>=0.21,<0.22``."""
    found = [c.lstrip("=>") for c in clauses if c.startswith(("==", ">="))]
    assert len(found) == 1, f"expected one == or >= clause in {sorted(clauses)}"
    return found[0]


@pytest.mark.parametrize("source", ["requirements.txt", "environment.yml"])
def test_lists_exactly_pyproject_dependencies_and_extras(source):
    listed = pip_deps() if source == "requirements.txt" else conda_deps()
    runtime, extras = pyproject_deps()
    wanted = runtime.keys() | extras.keys()
    assert listed.keys() == wanted, (
        f"only in {source}: {sorted(listed.keys() - wanted)}; "
        f"only in pyproject.toml: {sorted(wanted - listed.keys())}"
    )


def test_extras_pinned_as_in_requirements():
    _, extras = pyproject_deps()
    pip = pip_deps()
    differ = {n: (sorted(extras[n]), sorted(pip[n])) for n in extras if extras[n] != pip.get(n)}
    assert not differ, f"pins differ (pyproject.toml extras, requirements.txt): {differ}"


def test_tested_versions_satisfy_pyproject_dependencies():
    from packaging.specifiers import SpecifierSet
    runtime, _ = pyproject_deps()
    pip = pip_deps()
    outside = {n: (lowest(pip[n]), ",".join(sorted(runtime[n]))) for n in runtime
               if lowest(pip[n]) not in SpecifierSet(",".join(runtime[n]))}
    assert not outside, f"requirements.txt tests versions pyproject.toml does not allow: {outside}"


def test_lab_lane_lists_exactly_pyproject_dependencies_and_the_lab_extra():
    runtime, lab = pyproject_deps(only={"lab"})
    listed, wanted = requirements("requirements-lab.txt"), runtime.keys() | lab.keys()
    assert listed.keys() == wanted, (
        f"only in requirements-lab.txt: {sorted(listed.keys() - wanted)}; "
        f"only in pyproject.toml: {sorted(wanted - listed.keys())}"
    )


def test_the_lab_lane_brings_the_font_the_chinese_notebooks_need():
    """dg.set_language("zh") draws Chinese in plots and picture titles with Noto Sans SC
    from this wheel (dynagraph/_fonts.py); without it Chinese shows as boxes."""
    assert "pylopdf-fonts-zh-cn" in requirements("requirements-lab.txt")
    _, lab = pyproject_deps(only={"lab"})  # (skips on Python 3.10: no tomllib)
    assert "pylopdf-fonts-zh-cn" in lab
