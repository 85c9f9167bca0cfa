"""requirements.txt and environment.yml must list the same packages with the same pins."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONDA_TO_PIP = {"python-graphviz": "graphviz"}  # conda-forge name -> PyPI name
NOT_PACKAGES = {"python", "pip"}  # conda-only entries with no requirements.txt line


def parse(lines):
    """Map normalized package name -> set of version clauses, from 'name>=1,<2  # comment' lines."""
    deps = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*([<>=!~].*)?", line)
        if not line or line.startswith("-") or not m:
            continue
        name = m.group(1).lower().replace("_", "-")
        name = CONDA_TO_PIP.get(name, name)
        if name not in NOT_PACKAGES:
            deps[name] = {c.strip() for c in (m.group(2) or "").split(",") if c.strip()}
    return deps


def pip_deps():
    return parse((ROOT / "requirements.txt").read_text().splitlines())


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
