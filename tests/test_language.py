"""dg.set_language and the message catalogs: every message the package passes to tr()
has a translation, every translation a message, with the same fields."""

import ast
import re
import string
from pathlib import Path

import pytest
import torch

import dynagraph as dg
from dynagraph import _language as language
from dynagraph._zh import DRAWN_BY_GRAPHVIZ

PACKAGE = Path(__file__).resolve().parent.parent / "dynagraph"
CJK = re.compile(r"[\u4e00-\u9fff]")


def tr_calls() -> dict[str, list[str]]:
    """``{message: [file:line, ...]}`` for every ``tr(...)`` call in the package, and every
    ``N_(...)`` (a message marked where it is defined, translated where it is shown);
    a call whose first argument is not a string literal is listed under ``""``."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute)
                    and (node.func.id if isinstance(node.func, ast.Name) else node.func.attr) in ("tr", "N_")):
                arg = node.args[0] if node.args else None
                key = arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else ""
                found.setdefault(key, []).append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    return found


def fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


@pytest.fixture
def chinese():
    dg.set_language("zh")
    yield
    dg.set_language("en")


def test_counted_says_one_in_the_singular_and_more_in_the_plural(chinese):
    one, many = language.N_("1 edge norm"), language.N_("{n} edge norms")
    zh = [language.counted(n, one, many) for n in (0, 1, 2, 1200)]
    dg.set_language("en")
    en = [language.counted(n, one, many) for n in (0, 1, 2, 1200)]
    assert en == ["0 edge norms", "1 edge norm", "2 edge norms", "1,200 edge norms"]
    assert zh == ["0 条边有范数", "1 条边有范数", "2 条边有范数", "1,200 条边有范数"]


def test_every_tr_call_passes_a_literal():
    calls = tr_calls()
    assert "" not in calls, f"tr() and N_() need a string literal (the catalog key), at {calls.get('')}"


def test_every_message_has_a_translation_and_every_translation_a_message():
    used, zh = set(tr_calls()), language.catalog("zh")
    missing = sorted(used - set(zh))
    unused = sorted(set(zh) - used)
    assert not missing, f"{len(missing)} messages have no Chinese translation, e.g. {missing[:3]}"
    assert not unused, f"{len(unused)} Chinese translations translate no message, e.g. {unused[:3]}"


def test_translations_keep_the_fields_and_are_chinese():
    for english, chinese in language.catalog("zh").items():
        assert fields(chinese) == fields(english), f"fields differ: {english!r} -> {chinese!r}"
        # ({kind}) and {norms} name fields, dynagraph.Recording a class (code reads the same in
        # every language): no words
        words = re.sub(r"\{[^{}]*\}|dynagraph\.[A-Z]\w*", "", english)
        if english in DRAWN_BY_GRAPHVIZ:  # Graphviz draws Chinese as boxes: no words at all
            assert not CJK.search(chinese) and not re.search(r"[A-Za-z]{3}", re.sub(r"\{[^{}]*\}|\(checkpoint\)", "", chinese)), \
                f"{english!r} is drawn by Graphviz, which has no Chinese glyphs: {chinese!r}"
            continue
        assert CJK.search(chinese) or not re.search(r"[A-Za-z]{3}", words), \
            f"no Chinese in the translation of {english!r}: {chinese!r}"


def test_english_is_the_default_and_set_language_switches(chinese):
    assert dg.language() == "zh"
    dg.set_language("en")
    assert dg.language() == "en"
    assert language.tr("{n} widgets", n=3) == "3 widgets"   # not in a catalog: the English, filled in


def test_a_translated_message_reads_in_chinese(chinese):
    english, chinese_text = next(iter(language.catalog("zh").items()), (None, None))
    if english is None:
        pytest.skip("no message is translated yet")
    assert language.tr(english) == chinese_text


def test_n_marks_a_message_and_returns_it_unchanged(chinese):
    assert language.N_("{n} widgets") == "{n} widgets"   # unchanged in any language: it only marks


def test_translated_looks_up_a_message_held_in_a_variable(chinese):
    marked = language.N_("{n} widgets")                # not in a catalog: the English, filled in
    assert language.translated(marked, n=3) == "3 widgets"
    assert language.translated(marked) == "{n} widgets"
    english, chinese_text = next(iter(language.catalog("zh").items()), (None, None))
    if english is None:
        pytest.skip("no message is translated yet")
    held = str(english)                              # a variable, not a literal
    assert language.translated(held) == language.tr(english) == chinese_text
    dg.set_language("en")
    assert language.translated(held) == english


def test_set_language_rejects_an_unknown_language():
    with pytest.raises(ValueError, match=r"unknown language 'fr': use one of 'en', 'zh'"):
        dg.set_language("fr")
    assert dg.language() == "en"


def test_chinese_fields_are_not_set_apart_by_the_templates_spaces(chinese):
    """A template puts spaces around its fields ("{b} 的速度是 {a} 的 {ratio} 倍"); filled with
    Chinese names they read as gaps, so a space between two Chinese characters goes, and one
    beside a digit or a Latin name stays."""
    line = language.tr("{b} is {ratio}x faster than {a}", b="打包", a="循环", ratio="9.4")
    assert "打包的速度" in line and "循环的 9.4" in line, line
    assert language.tr("{b} is {ratio}x faster than {a}", b="packed", a="loop", ratio="9.4").startswith("packed 的")
    dg.set_language("en")
    assert language.tr("{b} is {ratio}x faster than {a}", b="打包", a="循环", ratio="9.4") == "打包 is 9.4x faster than 循环"


def test_graph_repr_counts_one_edge_in_the_singular_and_thousands_with_commas(chinese):
    w = torch.ones(2, requires_grad=True)
    leaf = dg.draw(w)  # a leaf alone: its input node and the output node, one edge
    y = w
    for _ in range(1_100):
        y = y * 1.0
    long = dg.draw(y)
    assert (len(leaf.nodes), len(leaf.edges), len(long.nodes), len(long.edges)) == (2, 1, 1_102, 1_101)
    zh = [repr(leaf), repr(long)]
    dg.set_language("en")
    assert [repr(leaf), repr(long)] == ["<dynagraph.Graph: 2 nodes, 1 edge (input 1, output 1)>",
                                        "<dynagraph.Graph: 1,102 nodes, 1,101 edges (input 1, op 1,100, output 1)>"]
    assert zh == ["<dynagraph.Graph：2 个节点，1 条边（输入 1、输出 1）>",
                  "<dynagraph.Graph：1,102 个节点，1,101 条边（输入 1、操作 1,100、输出 1）>"]
