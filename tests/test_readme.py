"""The README is a learner's page: short, its one command first, and true to the code.
README.zh-CN.md follows it step by step."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
README_ZH = (ROOT / "README.zh-CN.md").read_text(encoding="utf-8")
MAX_WORDS = 1_000  # everything counted, tables and code included (as `wc -w`)


def _blocks(text):
    return re.findall(r"```[a-z]*\n(.*?)```", text, re.S)


def test_the_readme_is_at_most_1000_words():
    words = len(README.split())
    assert words <= MAX_WORDS, f"README.md has {words} words; move what is for contributors to CONTRIBUTING.md"


def test_the_one_command_comes_first_in_both_readmes():
    for text in (README, README_ZH):
        assert _blocks(text)[0].strip() == "python3 dev.py lab"
        before = text[:text.index("python3 dev.py lab")]
        assert "pip install" not in before and "venv" not in before  # no torch step before it


def _font_requirement():
    """The lab extra's Chinese font, as pyproject.toml pins it ("pylopdf-fonts-zh-cn>=0.1.1,<0.2")."""
    return re.search(r'"(pylopdf-fonts-zh-cn[^"]*)"', (ROOT / "pyproject.toml").read_text()).group(1)


def test_the_chinese_readme_has_the_same_sections_and_commands():
    """The same sections, and the English commands in the same order. The Chinese README adds
    blocks of its own (a pip mirror, torch before dev.py) and, for Colab, the font that draws
    Chinese (without it every Chinese plot title is boxes) and `%cd zh`."""
    heads = [re.findall(r"^## ", t, re.M) for t in (README, README_ZH)]
    assert len(heads[0]) == len(heads[1])
    font = _font_requirement()
    colab = [b for b in _blocks(README_ZH) if b.startswith("!pip install")]
    assert len(colab) == 1 and f'"{font}"' in colab[0] and colab[0].endswith("%cd zh\n"), colab
    zh_blocks = iter(b.replace(f' "{font}"', "").replace("%cd zh\n", "") for b in _blocks(README_ZH))
    missing = [b for b in _blocks(README) if b not in zh_blocks]  # in order: `in` consumes the iterator
    assert not missing, f"README.zh-CN.md lacks, or has out of order, {missing}"
    assert "PIP_INDEX_URL" in README_ZH and "pip config set global.index-url" in README_ZH  # pip's own mirror setting
    assert ".venv\\Scripts\\" in README_ZH and "py dev.py lab" in README_ZH  # Windows beside Linux/macOS
    assert not re.search(r"https?://(?!download\.pytorch\.org|zh\.d2l\.ai|pytorch\.org)[^ )]*(mirror|tuna|aliyun|douban|ustc)",
                         README_ZH, re.I), "no mirror host is written into the project"
    for text in (README, README_ZH):
        assert "apt install fonts-noto-cjk" in text  # Chinese in the browser on Linux
        assert "_zh" in text and "course/" in text


def test_the_pip_line_takes_the_tested_torch():
    pin = next(line.split("#")[0].strip() for line in (ROOT / "requirements-lab.txt").read_text().splitlines()
               if line.startswith("torch=="))
    assert f'"{pin}" --extra-index-url https://download.pytorch.org/whl/cpu' in README


def test_what_the_readme_says_about_timing_asserts_holds():
    """Lessons 02, 03, 05 and 08 assert a comparison's fastest rounds, and no other lesson
    asserts a dg.compare result; the README says so and no longer says 'never asserted'."""
    timed = sorted(p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")
                   if re.search(r"assert min\(c\.[ab]\) > 2 \* min\(c\.[ab]\)", p.read_text(encoding="utf-8")))
    assert timed == ["02", "03", "05", "08"]
    assert "Lessons 02, 03, 05 and 08 assert one thing about time" in README
    assert "never asserted" not in README + README_ZH and "从不断言" not in README_ZH
