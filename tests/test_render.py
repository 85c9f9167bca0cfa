"""render: finding and running a layout program, checking and caching its output."""

import os
import sys
from pathlib import Path

import pytest
import torch

import dynagraph as dg
from dynagraph import render

from _helpers import svg_texts

# Finding and running the renderer.

def test_default_renderer_is_graphviz_pure(fresh_renderer):
    assert Path(render.find_renderer()).name == "graphviz-pure"


def test_missing_renderer_says_how_to_install(fresh_renderer):
    fresh_renderer.setenv("DYNAGRAPH_DOT", "/nonexistent/dot-program")
    with pytest.raises(render.RendererNotFoundError,
                       match=r"DYNAGRAPH_DOT='/nonexistent/dot-program'.*pip install graphviz-pure"):
        render.find_renderer()


def test_no_renderer_anywhere_says_how_to_install(fresh_renderer, tmp_path):
    fresh_renderer.setenv("PATH", str(tmp_path))
    fresh_renderer.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    with pytest.raises(render.RendererNotFoundError,
                       match=r"no Graphviz program found.*pip install graphviz-pure"):
        render.pipe("digraph { a -> b }", "svg")


@pytest.mark.parametrize("fmt", ["bmp", "dot", ""])
def test_pipe_unknown_format_raises(fmt):
    with pytest.raises(ValueError, match=f"unknown format: '{fmt}' \\(must be one of"):
        render.pipe("digraph { a -> b }", fmt)


def test_failed_renderer_lookup_is_retried(fresh_renderer, tmp_path):
    installed = Path(sys.executable).parent / "graphviz-pure"  # this venv's, wherever the checkout is
    fresh_renderer.setenv("PATH", str(tmp_path))
    fresh_renderer.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    with pytest.raises(render.RendererNotFoundError, match=r"pip install graphviz-pure"):
        render.find_renderer()
    (tmp_path / "graphviz-pure").symlink_to(installed)
    assert render.find_renderer() == str(tmp_path / "graphviz-pure")  # installed: no restart needed


def test_pdf_without_system_graphviz_raises(fresh_renderer, tmp_path):
    fresh_renderer.setenv("PATH", str(tmp_path))  # graphviz-pure still found beside python
    with pytest.raises(render.RendererNotFoundError,
                       match=r"PDF output needs the system Graphviz.*save as \.svg or \.png"):
        render.pipe("digraph { a -> b }", "pdf")


def test_renderer_failure_carries_its_message():
    with pytest.raises(RuntimeError, match=r"-Tsvg failed: .*syntax error"):
        render.pipe("digraph {", "svg")


def fake_renderer(monkeypatch, tmp_path, script: str) -> Path:
    """A ``fake-dot`` shell script used as the renderer (``DYNAGRAPH_DOT``)."""
    exe = tmp_path / "fake-dot"
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(0o755)
    monkeypatch.setenv("DYNAGRAPH_DOT", str(exe))
    return exe


def test_failing_renderer_message_keeps_first_and_last_five_lines(fresh_renderer, tmp_path):
    fake_renderer(fresh_renderer, tmp_path, "for i in $(seq 1 30); do echo line$i >&2; done\nexit 1\n")
    with pytest.raises(RuntimeError, match=r"fake-dot -Tsvg failed: line1\n") as info:
        render.pipe("digraph { a }", "svg")
    kept = [f"line{i}" for i in (*range(1, 6), *range(26, 31))]
    assert str(info.value).split("failed: ")[1].splitlines() == kept[:5] + ["… 20 lines …"] + kept[5:]


def test_failing_renderer_message_cuts_long_lines():
    summary = render._stderr_summary(b"x" * 100_000 + b"\nlast\n")
    assert summary == "x" * 200 + "…\nlast"


@pytest.mark.parametrize("fmt, output, what", [
    ("svg", "", "nothing"),
    ("svg", "hello", r"5 bytes that are not SVG \(b'hello'…\)"),
    ("svg", '<?xml version="1.0"?>\n<svg width="1pt">', "39 bytes that are not SVG"),  # cut short
    ("png", "GIF89a", "6 bytes that are not PNG"),
    ("jpg", "PNG", "3 bytes that are not JPG"),
    ("pdf", "%!PS", "4 bytes that are not PDF"),
])
def test_renderer_output_that_is_not_the_format_raises(fresh_renderer, tmp_path, fmt, output, what):
    fake_renderer(fresh_renderer, tmp_path, f"cat >/dev/null\nprintf '%s' '{output}'\n")
    with pytest.raises(RuntimeError, match=rf"fake-dot -T{fmt} wrote {what}.*reinstall it "
                                           r"\(`pip install --force-reinstall graphviz-pure`\)"):
        render.pipe("digraph { a }", fmt)


def test_renderer_output_error_carries_its_stderr(fresh_renderer, tmp_path):
    fake_renderer(fresh_renderer, tmp_path, "cat >/dev/null\necho 'out of fonts' >&2\n")
    with pytest.raises(RuntimeError, match=r"fake-dot -Tpng wrote nothing; it said: out of fonts\. "):
        render.pipe("digraph { a }", "png")


def test_output_check_accepts_a_comment_before_svg():
    render._check_output("dot", "svg", b'<?xml version="1.0"?>\n<!-- by dot\n -->\n<svg>\n</svg>\n', b"")


# The cache of rendered output.

BIG_SVG = "<?xml version='1.0'?>\n<svg>" + "<!--" + "x" * 2**20 + "-->" + "</svg>\n"  # about 1 MB


@pytest.fixture
def counting_renderer(fresh_renderer, tmp_path):
    """A renderer that writes BIG_SVG and counts its runs in ``runs`` (read with ``runs()``)."""
    (tmp_path / "big.svg").write_text(BIG_SVG)
    log = tmp_path / "runs"
    log.write_text("")
    fake_renderer(fresh_renderer, tmp_path, f"cat >/dev/null\necho run >> {log}\ncat {tmp_path / 'big.svg'}\n")
    return lambda: len(log.read_text().splitlines())


def test_cache_returns_the_same_picture_without_running_again(counting_renderer):
    first = render.pipe("digraph { a }", "svg")
    assert render.pipe("digraph { a }", "svg") is first and counting_renderer() == 1


def test_cache_is_bounded_by_bytes_dropping_the_least_recently_used(counting_renderer):
    for k in range(40):  # about 40 MB of pictures
        render.pipe(f"digraph {{ n{k} }}", "svg")
        render.pipe("digraph { n0 }", "svg")  # kept in use: never the oldest
    entries, held = render._run.cache_info()
    assert held <= render.CACHE_BYTES and 20 < entries < 40
    runs = counting_renderer()
    render.pipe("digraph { n0 }", "svg")
    render.pipe("digraph { n39 }", "svg")
    assert counting_renderer() == runs  # the most recent stayed
    render.pipe("digraph { n1 }", "svg")
    assert counting_renderer() == runs + 1  # the oldest was dropped


def test_cache_does_not_keep_a_picture_bigger_than_its_bound(counting_renderer, monkeypatch):
    monkeypatch.setattr(render._run, "max_bytes", 2**19)
    assert render.pipe("digraph { a }", "svg") == BIG_SVG.encode()
    assert render._run.cache_info() == (0, 0)


def test_clear_cache_empties_the_cache(counting_renderer):
    render.pipe("digraph { a }", "svg")
    render.clear_cache()
    assert render._run.cache_info() == (0, 0)
    render.pipe("digraph { a }", "svg")
    assert counting_renderer() == 2


@pytest.mark.parametrize("fmt, magic", [("svg", b"<?xml"), ("png", b"\x89PNG\r\n\x1a\n"),
                                        ("jpg", b"\xff\xd8\xff")])
def test_pipe_writes_each_format(fmt, magic):
    assert render.pipe("digraph { a -> b }", fmt).startswith(magic)


@pytest.mark.dot
def test_system_dot_renders_when_asked(fresh_renderer):
    fresh_renderer.setenv("DYNAGRAPH_DOT", "dot")
    assert Path(render.find_renderer()).name == "dot"
    x = torch.ones(2, requires_grad=True)
    svg = render.pipe(dg.draw((2 * x).sum()).to_dot(), "svg").decode()
    assert "graphviz-pure" not in svg
    assert "MulBackward0" in svg_texts(svg)


@pytest.mark.dot
def test_pdf_with_system_dot(fresh_renderer):
    assert render.pipe("digraph { a -> b }", "pdf").startswith(b"%PDF")


def test_graphviz_pure_wins_over_a_system_dot_on_path(fresh_renderer, tmp_path):
    # Stored notebook SVGs must not depend on whether a machine also has Graphviz.
    fake = tmp_path / "dot"
    fake.write_text("#!/bin/sh\necho 'system dot must not be used' >&2\nexit 3\n")
    fake.chmod(0o755)
    fresh_renderer.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert Path(render.find_renderer()).name == "graphviz-pure"
    assert b"graphviz-pure" in render.pipe("digraph { a -> b }", "svg")


# -- one layout, two pictures --------------------------------------------------------------

def _dots():
    """DOT texts of many sizes: the golden files and drawings of chains whose nodes'
    labels and counts vary (so the page's size in points takes many fractions)."""
    dots = [p.read_text() for p in sorted((Path(__file__).parent / "golden").glob("*.dot"))]
    for k in range(1, 25):
        x = torch.ones(k % 5 + 1, requires_grad=True)
        y = x
        for i in range(k):
            y = y.sin() if i % 2 else y * (i + 1)
        dots.append(dg.draw(y.sum(), params={"x" * k: x}, roll=False).to_dot())
    return dots


def test_svg_and_png_writes_the_svg_pipe_writes_and_a_png_at_the_dpi(monkeypatch):
    import io
    import re

    from PIL import Image
    dots = _dots()
    fallbacks = []
    real = render._unscaled
    monkeypatch.setattr(render, "_unscaled", lambda svg, dpi: real(svg, dpi) or fallbacks.append(svg))
    render.clear_cache()
    for dot in dots:
        svg, png = render.svg_and_png(dot, 96)
        assert svg == render.pipe(dot, "svg")
        w, h = (int(v) for v in re.search(rb'<svg width="(\d+)pt" height="(\d+)pt"', svg).groups())
        size = Image.open(io.BytesIO(png)).size
        assert abs(size[0] - w * 4 / 3) <= 1.5 and abs(size[1] - h * 4 / 3) <= 1.5  # 96 dpi: 4/3 px a point
    assert len(fallbacks) < len(dots) // 4  # (laid out again only near a .5)


def test_png_top_rasterizes_the_top_rows_of_the_whole_png_and_no_more():
    import io

    from PIL import Image, ImageChops
    checked = 0
    for dot in _dots()[::3]:
        svg = render.pipe(dot, "svg")
        whole = Image.open(io.BytesIO(render.png_top(dot, svg, 96))).convert("RGB")
        if whole.height < 60:
            continue
        for rows in (whole.height // 3, whole.height // 2 + 1):
            top = Image.open(io.BytesIO(render.png_top(dot, svg, 96, rows))).convert("RGB")
            assert top.width == whole.width and abs(top.height - rows) <= 1, (top.size, rows, whole.size)
            diff = ImageChops.difference(top, whole.crop((0, 0, *top.size))).convert("L")
            off = sum(1 for v in diff.getdata() if v > 48)  # (antialiasing may differ by a level)
            assert off <= 0.002 * top.width * top.height, (off, top.size)
            checked += 1
    assert checked >= 4
    assert render.png_top(dot, b"<svg>", 96, 5) == render.png_top(dot, svg, 96)  # no page: the whole


def test_svg_and_png_lays_out_again_where_the_size_cannot_be_told(monkeypatch):
    dot = _dots()[0]
    monkeypatch.setattr(render, "_unscaled", lambda svg, dpi: None)
    render.clear_cache()
    assert render.svg_and_png(dot, 96)[0] == render.pipe(dot, "svg")
