"""draw() and Graph: display in Jupyter, save to files, and render without system Graphviz."""

import base64
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import dynagraph as dg
from dynagraph import render
from dynagraph._picture import MAX_NODES

from _helpers import html_of, pictures, svg_texts

ADDRESS = re.compile(r"0x[0-9a-f]{6,}")


@pytest.fixture
def graph():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    return dg.draw(model(torch.randn(5, 3)).sum(), params=model, title="MLP")


def test_draw_returns_graph_with_counts_and_summary(graph):
    assert isinstance(graph, dg.Graph)
    assert graph.counts() == {"AccumulateGrad": 4, "AddmmBackward0": 2, "TBackward0": 2,
                              "ReluBackward0": 1, "SumBackward0": 1}
    assert len(graph) == 11  # those ten and the output
    assert repr(graph) == "<dynagraph.Graph: 11 nodes, 10 edges (op 6, output 1, parameter 4)>"


def test_graph_node_looks_up_by_id(graph):
    assert graph.node(0).kind == "output"
    with pytest.raises(KeyError, match="no node with id 99"):
        graph.node(99)


def test_outputs_are_plain_text_png_and_the_script_without_addresses(graph):
    bundle, metadata = graph._repr_mimebundle_()  # (a viewer that asks for one bundle: the picture)
    assert set(bundle) == {"text/plain", "image/png"}
    assert metadata["dynagraph"] == "picture"
    assert not ADDRESS.search(bundle["text/plain"])
    assert bundle["text/plain"].startswith("<dynagraph.Graph: 11 nodes")
    assert base64.b64decode(bundle["image/png"]).startswith(b"\x89PNG\r\n\x1a\n")
    (script,) = [o.data for o in graph._outputs() if o.metadata["dynagraph"] == "script"]
    assert not ADDRESS.search(script["application/javascript"])


def test_repr_html_picture_parses_and_shows_labels(graph):
    (svg,) = pictures(html_of(graph))
    assert {"MLP", "0.weight", "2.bias", "AddmmBackward0"} <= set(svg_texts(svg))


def test_svg_is_deterministic(graph):
    assert graph.svg() == graph.svg()
    render._run.cache_clear()
    first = graph.svg()
    render._run.cache_clear()
    assert graph.svg() == first  # stored notebook outputs compare equal


MAGIC = {".svg": b"<?xml", ".png": b"\x89PNG\r\n\x1a\n", ".PNG": b"\x89PNG\r\n\x1a\n",
         ".jpg": b"\xff\xd8\xff", ".dot": b"digraph", ".gv": b"digraph"}


@pytest.mark.parametrize("suffix", sorted(MAGIC))
def test_save_writes_format_from_suffix(graph, tmp_path, suffix):
    path = graph.save(tmp_path / f"g{suffix}")
    assert path == tmp_path / f"g{suffix}"
    assert path.read_bytes().startswith(MAGIC[suffix])


def test_save_dot_is_to_dot(graph, tmp_path):
    assert graph.save(str(tmp_path / "g.dot")).read_text() == graph.to_dot()


def test_save_unknown_suffix_raises(graph, tmp_path):
    with pytest.raises(ValueError, match=r"unknown format: '\.bmp' in .*g\.bmp.*must be one of"):
        graph.save(tmp_path / "g.bmp")
    with pytest.raises(ValueError, match=r"unknown format: ''"):
        graph.save(tmp_path / "noext")
    assert not (tmp_path / "g.bmp").exists()


def test_save_pdf_needs_system_graphviz(graph, tmp_path, fresh_renderer):
    if shutil.which("dot"):
        assert graph.save(tmp_path / "g.pdf").read_bytes().startswith(b"%PDF")
    else:
        with pytest.raises(dg.RendererNotFoundError, match="install Graphviz"):
            graph.save(tmp_path / "g.pdf")


def test_to_graphviz_is_a_source_of_the_dot(graph):
    source = graph.to_graphviz()
    assert source.source == graph.to_dot()


def test_title_is_drawn(graph):
    assert 'label="MLP"' in graph.to_dot()


def test_missing_renderer_fails_with_install_hint(graph, fresh_renderer):
    fresh_renderer.setenv("DYNAGRAPH_DOT", "/nonexistent/dot")
    with pytest.raises(dg.RendererNotFoundError, match="pip install graphviz-pure"):
        graph.svg()
    with pytest.raises(dg.RendererNotFoundError, match="pip install graphviz-pure"):
        graph._repr_mimebundle_()
    assert graph.to_dot().startswith("digraph")  # DOT needs no renderer


def _spy_on_renderer(monkeypatch):
    """Record the program each renderer subprocess runs."""
    calls = []
    real = subprocess.Popen

    def spy(args, *a, **kw):
        calls.append(args[0])
        return real(args, *a, **kw)

    monkeypatch.setattr(render.subprocess, "Popen", spy)
    return calls


@pytest.mark.parametrize("how", ["venv_bin_only", "symlink_on_path"])
def test_draw_svg_works_without_system_dot(fresh_renderer, tmp_path, how):
    venv_bin = Path(sys.executable).parent
    pure = shutil.which("graphviz-pure", path=str(venv_bin))
    if pure is None:
        pytest.skip("graphviz-pure is not installed beside this Python: pip install graphviz-pure")
    if how == "venv_bin_only":
        if shutil.which("dot", path=str(venv_bin)):
            pytest.skip(f"{venv_bin} holds a `dot` too (a conda env): the symlink case covers it")
        fresh_renderer.setenv("PATH", str(venv_bin))
    else:  # found only through PATH: a symlink in a temp dir, python moved elsewhere
        (tmp_path / "graphviz-pure").symlink_to(pure)
        fresh_renderer.setenv("PATH", str(tmp_path))
        fresh_renderer.setattr(sys, "executable", str(tmp_path / "elsewhere" / "python"))
    assert shutil.which("dot") is None  # system Graphviz is hidden
    calls = _spy_on_renderer(fresh_renderer)
    x = torch.tensor([1.0], requires_grad=True)
    svg = dg.draw(2 * x + 1).svg()
    assert "<svg" in svg and "AddBackward0" in svg
    assert [Path(c).name for c in calls] == ["graphviz-pure"]
    raw = render.pipe(dg.draw(2 * x + 1).to_dot(), "svg").decode()
    assert "(graphviz-pure)" in raw  # its own banner in the SVG it wrote


@pytest.mark.dot
def test_draw_renders_with_system_dot(fresh_renderer):
    fresh_renderer.setenv("DYNAGRAPH_DOT", "dot")
    calls = _spy_on_renderer(fresh_renderer)
    x = torch.tensor([1.0], requires_grad=True)
    assert "AddBackward0" in dg.draw(2 * x + 1).svg()
    assert [Path(c).name for c in calls] == ["dot"]


def test_default_max_nodes_folds_big_graphs():
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(2, 2) for _ in range(400)])
    loss = model(torch.randn(1, 2)).sum()
    assert 1 + 1 + 4 * 400 > MAX_NODES
    graph = dg.draw(loss, params=model, roll=False)
    assert len(graph) == 1 + 1 + 4 * 400  # the records hold every node
    assert [n.kind for n in graph.picture().nodes].count("fold") == 1
    assert len(dg.draw(loss, params=model, max_nodes=None, roll=False).picture()) == 1 + 1 + 4 * 400


def test_depth_zero_raises():
    x = torch.ones(1, requires_grad=True)
    with pytest.raises(ValueError, match=r"depth must be an int >= 1 .*got 0"):
        dg.draw(x * 2, depth=0)


@pytest.mark.parametrize("bad", [0, True, 1.5])
def test_depth_that_is_no_positive_int_raises(bad):
    x = torch.ones(1, requires_grad=True)
    with pytest.raises(ValueError, match=rf"depth must be an int >= 1 .*got {bad!r}"):
        dg.draw(x * 2, depth=bad)  # True was taken as depth 1, as max_nodes=True is not


def test_numpy_and_torch_integers_are_taken_as_ints(tmp_path):
    # (a loop over np.arange gives np.int64: it was refused as "must be an int")
    import numpy as np

    torch.manual_seed(0)
    model = nn.Sequential(nn.Sequential(nn.Linear(2, 2), nn.Tanh()), nn.Linear(2, 1))
    with dg.track_modules(model):
        loss = model(torch.ones(1, 2)).sum()
    want = dg.draw(loss, params=model, depth=1, max_nodes=10)
    for depth, max_nodes in ((np.int64(1), np.int32(10)), (torch.tensor(1), torch.tensor(10))):
        g = dg.draw(loss, params=model, depth=depth, max_nodes=max_nodes)
        assert type(g.max_nodes) is int and g.to_dot() == want.to_dot()
        assert g.collapsed(np.int64(1))[0].to_dot() == want.collapsed(1)[0].to_dot()
        dg.save_view(g, tmp_path / "v.json")  # (JSON takes an int, not an np.int64)
    with pytest.raises(ValueError, match="depth must be an int >= 1"):
        dg.draw(loss, depth=np.float64(1))


def test_a_title_of_400000_characters_is_drawn_cut_and_says_how_long_it_was():
    # (Graphviz set it for over 60 s, then the error blamed the graph's size)
    from dynagraph._picture import TITLE_CHARS

    x = torch.ones(2, requires_grad=True)
    title = "loss of " + "x" * 400_000
    dot = dg.draw((x * 2).sum(), title=title).to_dot()
    (label,) = re.findall(r"labelloc=t label=(.*)", dot)
    assert title[:TITLE_CHARS] in label and title[:TITLE_CHARS + 1] not in label
    assert "\u2026(400,008 characters)" in label
    short = dg.draw((x * 2).sum(), title="x" * TITLE_CHARS).to_dot()
    assert "characters)" not in short


def test_max_nodes_one_raises():
    x = torch.ones(1, requires_grad=True)
    with pytest.raises(ValueError, match=r"max_nodes must be an int >= 2 or None .*got 1"):
        dg.draw(x * 2 + 1, max_nodes=1)


@pytest.mark.gpu
def test_cuda_tensors_show_device_in_labels():
    torch.manual_seed(0)
    model = nn.Linear(3, 2).cuda()
    graph = dg.draw(model(torch.randn(4, 3, device="cuda")).sum(), params=model)
    addmm = next(n for n in graph.nodes if n.name == "AddmmBackward0")
    assert addmm.device == "cuda:0" and addmm.shape == (4, 2)
    assert "(4, 2) cuda:0" in graph.to_dot()
    assert {n.device for n in graph.nodes} == {"cuda:0"}
    assert "cuda:0" in graph.svg()



def test_depth_without_module_tags_warns_that_nothing_collapsed():
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    loss = model(torch.ones(1, 2)).sum()  # no track_modules: no op knows its module
    with pytest.warns(UserWarning, match=r"depth=1\) collapsed nothing.*dg.track_modules"):
        graph = dg.draw(loss, params=model, depth=1)
    assert "module" not in {n.kind for n in graph.nodes}


@pytest.mark.parametrize("bad", ["False", "yes", 1, None])
def test_show_saved_that_is_no_bool_raises_at_draw(bad):
    with pytest.raises(TypeError, match=rf"show_saved must be True or False; got {bad!r}"):
        dg.draw(torch.ones(1, requires_grad=True) * 2, show_saved=bad)  # "False" listed the saved tensors


def test_non_string_title_raises_at_draw():
    with pytest.raises(TypeError, match="title must be a string; got int"):
        dg.draw(torch.ones(1, requires_grad=True) * 2, title=3)


@pytest.mark.parametrize("suffix", [".jpg", ".jpeg", ".JPEG"])
def test_save_jpeg_under_either_suffix(graph, tmp_path, suffix):
    data = graph.save(tmp_path / f"g{suffix}").read_bytes()
    assert data[:3] == b"\xff\xd8\xff"  # JPEG magic


def test_save_unknown_suffix_lists_jpeg():
    g = dg.draw(torch.ones(1, requires_grad=True) * 2)
    with pytest.raises(ValueError, match=r"unknown format: '\.bmp'.*'jpeg'"):
        g.save("g.bmp")


def test_save_to_no_file_name_raises_naming_it(tmp_path):
    g = dg.draw(torch.ones(1, requires_grad=True) * 2)
    for bad in (3, None, b"g.svg"):
        with pytest.raises(TypeError, match=r"path must be a file name, a str or a pathlib\.Path such as "
                                            r"'graph\.svg'; got .* \((int|NoneType|bytes)\)"):
            g.save(bad)
    assert g.save(tmp_path / "g.dot").read_text().startswith("digraph")


def test_graph_made_by_hand_refuses_a_bad_policy_or_title():
    g = dg.draw(torch.ones(1, requires_grad=True) * 2)
    with pytest.raises(ValueError, match="roll must be 'auto', True or False; got 'x'"):
        dg.Graph(g.nodes, g.edges, roll="x")
    with pytest.raises(ValueError, match="max_nodes must be an int >= 2 or None"):
        dg.Graph(g.nodes, g.edges, max_nodes=1)
    with pytest.raises(TypeError, match="title must be a string; got int"):
        dg.Graph(g.nodes, g.edges, title=3)
    assert len(dg.Graph(g.nodes, g.edges, roll=False, max_nodes=None, title="t").nodes) == len(g.nodes)
