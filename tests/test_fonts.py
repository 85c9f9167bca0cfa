"""The font that draws Chinese (Noto Sans SC from pylopdf-fonts-zh-cn): matplotlib's fallback
after set_language("zh"), undone by set_language("en"), and a warning that says how to
install it where it is missing. Rendering with it: tests/test_plots.py and test_page.py."""

import warnings

import matplotlib
import pytest

import dynagraph as dg
from dynagraph import _fonts


@pytest.fixture(autouse=True)
def english_after():
    yield
    dg.set_language("en")


def test_chinese_puts_noto_sans_sc_after_dejavu_sans_and_english_takes_it_away(monkeypatch):
    pytest.importorskip("pylopdf_fonts_zh_cn")
    from matplotlib import font_manager
    monkeypatch.setitem(matplotlib.rcParams, "font.family", ["sans-serif"])  # matplotlib's default
    dg.set_language("zh")
    assert matplotlib.rcParams["font.family"] == ["DejaVu Sans", "Noto Sans SC"]
    assert _fonts.CJK_FAMILY in {f.name for f in font_manager.fontManager.ttflist}
    dg.set_language("zh")  # again: nothing more
    assert matplotlib.rcParams["font.family"] == ["DejaVu Sans", "Noto Sans SC"]
    dg.set_language("en")
    assert matplotlib.rcParams["font.family"] == ["sans-serif"]


def test_a_font_family_of_the_users_own_comes_first(monkeypatch):
    pytest.importorskip("pylopdf_fonts_zh_cn")
    monkeypatch.setitem(matplotlib.rcParams, "font.family", ["serif"])
    dg.set_language("zh")
    assert matplotlib.rcParams["font.family"] == ["serif", "Noto Sans SC"]
    dg.set_language("en")
    assert matplotlib.rcParams["font.family"] == ["serif"]


def test_without_the_font_chinese_works_and_says_once_how_to_install_it(monkeypatch):
    monkeypatch.setattr(_fonts, "cjk_font", lambda: None)
    monkeypatch.setattr(_fonts, "_warned", [False])
    family = list(matplotlib.rcParams["font.family"])
    with pytest.warns(UserWarning, match=r"pip install pylopdf-fonts-zh-cn") as said:
        dg.set_language("zh")
    assert "方框" in str(said[0].message)  # in Chinese: only a learner of the Chinese edition sees it
    assert dg.language() == "zh" and list(matplotlib.rcParams["font.family"]) == family
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dg.set_language("zh")  # once is enough
    assert _fonts.pillow_font.__wrapped__(10) is None


def test_a_missing_wheel_is_found_missing(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "pylopdf_fonts_zh_cn", None)  # import raises ImportError
    assert _fonts.cjk_font() is None


@pytest.mark.parametrize(("text", "needs"), [
    ("计算图", True), ("MLP，批量 64", True), ("（", True),
    ("compute graph", False), ("‖W.grad‖ × 3 — é", False), ("αβ", False),
])
def test_chinese_needs_the_font_and_latin_text_does_not(text, needs):
    assert _fonts.needs_cjk_font(text) is needs
