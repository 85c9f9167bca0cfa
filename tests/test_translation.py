"""The Chinese edition (notebooks/zh/) stays in step with the English notebooks.

Each translated cell records the English cell it translates and a hash of that cell's
source (tools/translation.py). These tests fail, naming the cells, when an English cell
changed after its translation, when a notebook has no twin, or when a twin's structure
(cells, kinds, tags, code) differs from the English.
"""

import copy
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EN = ROOT / "notebooks"
ZH = EN / "zh"
ENGLISH = sorted(p.name for p in EN.glob("*.ipynb"))

_spec = importlib.util.spec_from_file_location("translation", ROOT / "tools" / "translation.py")
translation = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(translation)


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_every_english_notebook_has_a_chinese_twin():
    assert sorted(p.name for p in ZH.glob("*.ipynb")) == ENGLISH


@pytest.mark.parametrize("name", ENGLISH)
def test_chinese_notebook_is_in_step_with_the_english(name):
    en, zh = load(EN / name), load(ZH / name)
    assert translation.problems(en, zh) == [], f"{name}: structure differs from the English"
    stale = translation.stale(en, zh)
    assert not stale, (f"{name}: English cells changed since they were translated: {stale}. Retranslate "
                       f"them, then: tools/translation.py stamp {name} {' '.join(stale)}")
    assert translation.untranslated(en, zh) == [], f"{name}: cells still in English"


def test_editing_one_english_markdown_cell_makes_its_translation_stale():
    en, zh = load(EN / "05_dynamic_depth.ipynb"), load(ZH / "05_dynamic_depth.ipynb")
    assert translation.stale(en, zh) == []
    edited = copy.deepcopy(en)
    cell = next(c for c in edited["cells"] if c["cell_type"] == "markdown")
    cell["source"] = translation.source(cell) + "\nOne more sentence."
    assert translation.stale(edited, zh) == [cell["id"]]
    assert translation.problems(edited, zh) == []  # the structure still matches


def test_a_code_change_beyond_comments_and_strings_is_a_structure_problem():
    en, zh = load(EN / "05_dynamic_depth.ipynb"), load(ZH / "05_dynamic_depth.ipynb")
    k, cell = next((k, c) for k, c in enumerate(zh["cells"]) if c["cell_type"] == "code"
                   and "torch.manual_seed(0)" in translation.source(c))
    renamed = copy.deepcopy(zh)
    renamed["cells"][k]["source"] = translation.source(cell).replace("torch.manual_seed(0)", "torch.manual_seed(1)")
    assert translation.problems(en, renamed) == [f"cell {k} ({cell['id']}): its code differs from the English "
                                                 "beyond comments and strings"]
    commented = copy.deepcopy(zh)
    commented["cells"][k]["source"] = "# 一行新的注释\n" + translation.source(cell)
    assert translation.problems(en, commented) == []


def test_a_missing_or_reordered_cell_is_a_structure_problem():
    en, zh = load(EN / "05_dynamic_depth.ipynb"), load(ZH / "05_dynamic_depth.ipynb")
    short = copy.deepcopy(zh)
    del short["cells"][3]
    found = translation.problems(en, short)
    assert found[0] == f"{len(zh['cells']) - 1} cells, the English has {len(en['cells'])}"
    assert any("records that it translates cell" in p for p in found)


def test_code_shape_ignores_comments_strings_and_set_language_only():
    shape = translation.code_shape
    assert shape('import dynagraph as dg\nprint(f"x = {x}")  # x') == shape(
        'import dynagraph as dg\ndg.set_language("zh")\nprint(f"x 等于 {x}")  # 横坐标')
    assert shape('print(f"{a} {b}")') != shape('print(f"{b} {a}")')  # fields in order
    assert shape("%xmode Minimal\nx = 1") == shape("%xmode Minimal\nx = 1  # 一")
    assert shape("x = 1") != shape("x = 2")


def test_the_two_indexes_link_each_other():
    en_index = "".join(translation.source(c) for c in load(EN / "00_index.ipynb")["cells"])
    zh_index = "".join(translation.source(c) for c in load(ZH / "00_index.ipynb")["cells"])
    assert "(zh/00_index.ipynb)" in en_index and "(../00_index.ipynb)" in zh_index
    assert "(../glossary.md)" in zh_index


def test_status_lists_nothing_when_every_translation_is_current(capsys):
    assert translation.main(["status"]) == 0
    assert "in step with the English" in capsys.readouterr().out
