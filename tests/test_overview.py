"""The module overview (issue 32): a tagged graph whose op-level picture is over three
screens draws its modules as boxes, whose numbers are the op-level graph's, and the
live view opens a box's ops on a click."""

from __future__ import annotations

import base64
import dataclasses
import re
import xml.etree.ElementTree as ET
from html import unescape

import pytest
import torch
from torch import nn

import dynagraph as dg
from dynagraph import _overview, _page, _picture, memory, render
from dynagraph._records import Node, owner
from dynagraph.graph import record_of

from _helpers import html_of, load_benchmark, outputs_of, page_data, svg_texts

zoo = load_benchmark("zoo")
SVG = "{http://www.w3.org/2000/svg}"


def recorded(name: str, **kwargs):
    case = zoo.MODELS[name]()
    with dg.live(case.model, **kwargs) as rec:
        case.forward()
    return rec


@pytest.fixture(scope="module")
def resnet():
    return recorded("resnet", memory=True)


def boxes_of(pic: _picture.Picture) -> dict[str, Node]:
    """The overview's module boxes by module path (the label's first part)."""
    return {n.label.split(":")[0]: n for n in pic.graph.nodes if n.kind == "module"}


def test_a_tall_tagged_recording_draws_modules_as_boxes_within_three_screens(resnet):
    graph = resnet.graph()
    op_level = _picture.picture(record_of(graph))  # what was drawn before: every op, rolled and merged
    assert _overview.screens(render.pipe(_picture._drawing_of(graph, op_level, None, False)[1])) > 3
    pic, _, _ = _picture.drawing(record_of(graph))
    assert pic.detail is not None and pic.detail_screens > _overview.MAX_SCREENS
    assert list(boxes_of(pic)) == ["stem", *(f"layers.{k}" for k in range(8)), "fc"]
    assert zoo.picture_size(graph)[2] <= _overview.MAX_SCREENS
    # every node of the graph is in the overview: in a box, or as it was (the input, the loss)
    assert set(pic.mapping) == {n.id for n in graph.nodes}
    loose = [n for n in pic.graph.nodes if n.kind != "module"]
    assert all(n.module is None for n in loose) and {n.kind for n in loose} <= {"input", "op", "output"}


def test_the_boxes_numbers_are_the_op_level_graphs(resnet):
    """Each box's op count and node count are those of the op-level graph's nodes in its
    module; its saved bytes, the op-level nodes' bytes (each storage once)."""
    graph = resnet.graph()
    pic, dot, _ = _picture.drawing(record_of(graph))
    drawn = {n.id: n for n in pic.graph.nodes}
    for path, box in boxes_of(pic).items():
        inside = [n for n in graph.nodes if n.module and (n.module == path or n.module.startswith(path + "."))]
        ops = [n for n in inside if n.seq is not None]
        assert box.label.endswith(f"\n{len(ops)} ops") and box.count == len(inside), path
        assert sorted(i for i, new in pic.mapping.items() if new == box.id) == sorted(n.id for n in inside)
        act, leaf = graph.memory.bytes_of([n.id for n in inside])
        assert act > 0
        line = re.search(rf'\bn{box.id} \[[^\n]*? label="([^"]*)"', dot)
        said = f"saves {memory.fmt_bytes(act)} + {memory.fmt_bytes(leaf)} params/inputs"
        assert line is not None and line[1].endswith(said), (path, said)
    assert sum(drawn[b].count for b in pic.boxes) + sum(
        n.count for n in pic.graph.nodes if n.kind != "module") == len(graph.nodes)


def test_a_box_stands_for_exactly_its_op_level_nodes_in_the_op_level_picture(resnet):
    graph = resnet.graph()
    pic, _, _ = _picture.drawing(record_of(graph))
    detail = pic.detail
    for box, ids in pic.boxes.items():
        originals = {old for old, new in pic.mapping.items() if new == box}
        assert set(ids) == {detail.mapping[old] for old in originals}


def test_without_tags_the_op_level_picture_stays():
    case = zoo.resnet()
    graph = dg.draw(case.forward(), params=case.model)  # no track_modules, no live: no tags
    assert not any(n.module for n in graph.nodes)
    pic, _, _ = _picture.drawing(record_of(graph))
    assert pic.detail is None and not any(n.kind == "module" for n in pic.graph.nodes)
    assert zoo.picture_size(graph)[2] > _overview.MAX_SCREENS  # (tall: the rule would apply with tags)


def test_track_modules_draws_the_overview_and_asking_for_every_node_draws_every_op():
    case = zoo.resnet()
    with dg.track_modules(case.model):
        loss = case.forward()
    graph = dg.draw(loss, params=case.model)
    pic, _, _ = _picture.drawing(record_of(graph))
    assert pic.detail is not None and len(boxes_of(pic)) == 10
    full, _, _ = _picture.drawing(record_of(graph), full=True)
    assert full.detail is None and not any(n.kind == "module" for n in full.graph.nodes)
    for policy in ({"roll": False}, {"max_nodes": None}):  # every node asked for: no boxes
        with dg.track_modules(case.model):
            loss = case.forward()
        asked = dg.draw(loss, params=case.model, **policy)
        assert _picture.drawing(record_of(asked))[0].detail is None


def test_a_short_tagged_recording_stays_op_level():
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    with dg.live(model) as rec:
        model(torch.ones(2, 3)).sum()
    pic, _, _ = _picture.drawing(record_of(rec.graph()))
    assert pic.detail is None and "modules drawn as boxes" not in outputs_of(rec)["steps"]["text/plain"]


def test_groups_open_the_biggest_module_while_it_holds_over_a_quarter_of_the_ops():
    def op(i, module):
        return Node(id=i, name="AddBackward0", kind="op", label="AddBackward0", module=module, seq=i)
    # "body" holds 8 of 12 ops: it opens; its blocks hold 2 each (under a quarter of 12): they stay
    nodes = ([op(0, "stem"), op(1, "stem"), op(2, "head"), op(3, "head")]
             + [op(4 + k, f"body.{k // 2}.inner.{k % 2}") for k in range(8)])
    where = _overview.groups(nodes)
    assert sorted(set(where.values())) == ["body.0", "body.1", "body.2", "body.3", "head", "stem"]
    # a box is named by the outermost module that holds just its nodes: "a", not its list's "a.list.0"
    # (two boxes at most: "a" opens through its list to "a.list.0", whose x and y would be three)
    tiny = [op(0, "a.list.0.x"), op(1, "a.list.0.y"), op(2, "b")]
    assert set(_overview.groups(tiny, most=2).values()) == {"a", "b"}
    assert set(_overview.groups(tiny).values()) == {"a.list.0.x", "a.list.0.y", "b"}
    assert set(_overview.groups(nodes, most=5).values()) == {"body", "head", "stem"}  # 6 boxes would be too many


def test_the_step_list_says_modules_are_boxes_and_asks_for_nothing(resnet):
    steps = outputs_of(resnet)["steps"]
    pic, _, _ = _picture.drawing(record_of(resnet.graph()))
    said = (f"modules drawn as boxes (the picture of every op fills {pic.detail_screens:.1f} screens at 1:1): "
            "where the picture's script runs, a click on a box opens its ops")
    assert said in steps["text/plain"] and said in unescape(steps["text/html"])
    assert not re.search(r"\b(run the cell|trust the notebook)", steps["text/html"], re.I)


ZOO = [name for name in zoo.available()[0]]


@pytest.mark.parametrize("name", ZOO)
def test_every_zoo_recording_fits_three_screens_and_the_budget(name):
    rec = recorded(name)
    graph = rec.graph()
    assert zoo.picture_size(graph)[2] <= _overview.MAX_SCREENS
    outs = rec._outputs()
    assert _page.stored_bytes(outs) <= _page.MAX_BYTES
    data = page_data(_page.fragment(outs))
    pic, _, _ = _picture.drawing(record_of(graph), own_title=True)
    if pic.detail is not None:  # the op-level picture is in the output, with every box's ids
        assert data["inside"]["boxes"] == {str(b): ids for b, ids in pic.boxes.items()}
        ET.fromstring(base64.b64decode(data["inside"]["svg"]))


def test_over_the_budget_the_op_level_picture_goes_first(resnet, monkeypatch):
    full = _page.stored_bytes(resnet._outputs())
    inside = len(page_data(html_of(resnet))["inside"]["svg"])
    monkeypatch.setattr(_page, "MAX_BYTES", full - inside // 2)
    outs = resnet._outputs()
    data = page_data(_page.fragment(outs))
    assert "inside" not in data and data["s"]  # the boxes and every step stay
    assert "a click on a box" not in outputs_of(resnet)["steps"]["text/plain"]


@pytest.mark.browser
def test_a_click_on_a_box_opens_its_ops_in_the_browser(resnet, tmp_path):
    from _chromium import chromium, open_html
    html = html_of(resnet)
    data = page_data(html)
    pic, _, _ = _picture.drawing(record_of(resnet.graph()), own_title=True)
    box = boxes_of(pic)["layers.2"]
    detail = base64.b64decode(data["inside"]["svg"]).decode()
    names = {int(m[1]): m[0] for m in re.finditer(r'class="node[^"]*\bdg-n(\d+)', detail)}
    assert set(data["inside"]["boxes"][str(box.id)]) <= set(names)
    with chromium() as browser:
        watch, page = open_html(browser, html, tmp_path, name="overview.html")
        assert page.locator(".dg-inside").is_hidden()
        page.locator(f"svg g.node.dg-n{box.id}").first.click()
        panel = page.locator(".dg-inside")
        assert panel.is_visible()
        assert panel.locator(".dg-inside-name").text_content() == "layers.2: BasicBlock"
        lit = panel.evaluate("p => [...p.querySelectorAll('g.node.dg-lit')].map(g => g.getAttribute('class'))")
        view = panel.evaluate("p => { const s = p.querySelector('svg'); const v = s.viewBox.baseVal;"
                              " return [v.x, v.y, v.width, v.height]; }")
        inside = panel.evaluate("p => { const s = p.querySelector('svg'), r = s.getBoundingClientRect();"
                                " return [...s.querySelectorAll('g.node.dg-lit')].every(g => {"
                                " const b = g.getBoundingClientRect(); return b.left >= r.left - 1 &&"
                                " b.right <= r.right + 1 && b.top >= r.top - 1 && b.bottom <= r.bottom + 1; }); }")
        panel.locator("button").first.click()
        closed = panel.is_hidden()
        watch.close()
    ids = sorted(int(re.search(r"dg-n(\d+)", c)[1]) for c in lit)
    assert ids == sorted(data["inside"]["boxes"][str(box.id)])
    width, height = (float(v) for v in re.search(r'viewBox="[\d.-]+ [\d.-]+ ([\d.]+) ([\d.]+)"', detail).groups())
    assert view[2] < width or view[3] < height  # cut to the box's ops
    assert inside and closed
    assert watch.errors == [] and watch.blocked == []
    # what the panel lights is the block's ops: its convolutions, norms, the add and the relu
    texts = " ".join(svg_texts(detail))
    assert "Convolution" in texts


def test_in_chinese_the_overview_says_it_in_chinese(resnet):
    dg.set_language("zh")
    try:
        outs = outputs_of(resnet)
        words = page_data(html_of(resnet))["words"]
    finally:
        dg.set_language("en")
    assert "模块画成方框" in outs["steps"]["text/plain"] and "点击方框" in outs["steps"]["text/plain"]
    assert words["label"]["open"] == "点击模块方框即可打开其中的操作" and words["title"]["close"] == "关闭"


@pytest.mark.browser
def test_a_click_opens_a_box_where_the_script_gets_its_element_as_in_jupyterlab(resnet, tmp_path):
    """JupyterLab runs the script with the output's element as ``element`` (no
    ``document.currentScript``), and may attach that element to the page later."""
    from _chromium import chromium, open_html
    outs = resnet._outputs()
    script = next(o for o in outs if o.metadata["dynagraph"] == "script").data["application/javascript"]
    data = page_data(_page.fragment(outs))
    box = next(iter(data["inside"]["boxes"]))
    with chromium() as browser:
        watch, page = open_html(browser, "", tmp_path, name="lab.html")
        page.evaluate("js => { const out = document.createElement('div');"
                      " new Function('element', js)(out); document.body.append(out); }", script)
        page.locator(f"svg g.node.dg-n{box}").first.click()
        lit = page.locator(".dg-inside g.node.dg-lit").count()
        hint = page.locator(".dg-hint").text_content()
        watch.close()
    assert lit == len(data["inside"]["boxes"][box]) > 0
    assert hint == "a click on a module box opens its ops"
    assert watch.errors == [] and watch.blocked == []


def test_measuring_a_tagged_picture_for_the_overview_rasterizes_nothing(monkeypatch):
    """A tagged picture is laid out to measure it as SVG alone: where the overview replaces
    it (the ResNet's recording) its PNG would be wasted (a third to a half of the view's
    time); where it stays (the 2-layer GPT-2's recording, 2.9 screens), its SVG and PNG
    then come from one run of their own."""
    pytest.importorskip("transformers", reason="the 2-layer GPT-2 is Hugging Face's: pip install transformers")
    rec = recorded("gpt2-2")
    render.clear_cache()
    runs = []
    run = render._communicate
    monkeypatch.setattr(render, "_communicate", lambda args, *rest: (runs.append(args), run(args, *rest))[1])
    outs = rec._outputs()
    formats = [[a for a in args if a.startswith("-T")] for args in runs]
    assert "inside" not in page_data(_page.fragment(outs)) and formats == [["-Tsvg"], ["-Tsvg", "-Tpng"]]
    runs.clear()
    render.clear_cache()
    resnet = recorded("resnet")._outputs()  # an overview: the op level measured, then the boxes drawn
    formats = [[a for a in args if a.startswith("-T")] for args in runs]
    assert "inside" in page_data(_page.fragment(resnet)) and formats == [["-Tsvg"], ["-Tsvg", "-Tpng"]]


def test_overview_false_draws_every_op_of_a_tall_tagged_recording(monkeypatch):
    case = zoo.MODELS["resnet"]()
    with dg.live(case.model, overview=False) as rec:
        case.forward()
    graph = rec.graph()
    assert rec.overview is False and graph.overview is False
    pic, dot, _ = _picture.drawing(record_of(graph))
    assert pic.detail is None and not any(n.kind == "module" for n in pic.graph.nodes)
    monkeypatch.setattr(_overview, "MAX_SCREENS", float("inf"))  # the op level as the rule would draw it
    graph.overview = None
    assert dot == _picture.drawing(record_of(graph))[1]
    assert "inside" not in page_data(html_of(rec))
    assert "modules drawn as boxes" not in outputs_of(rec)["steps"]["text/plain"]


def test_overview_false_and_true_in_draw_and_trace_backward():
    case = zoo.resnet()
    with dg.track_modules(case.model):
        loss = case.forward()
    assert _picture.drawing(record_of(dg.draw(loss, params=case.model)))[0].detail is not None  # automatic: boxes
    assert _picture.drawing(record_of(dg.draw(loss, params=case.model, overview=False)))[0].detail is None
    with dg.trace_backward(loss, params=case.model, overview=False) as bt:
        loss.backward()
    assert bt.graph().overview is False and _picture.drawing(record_of(bt.graph()))[0].detail is None
    assert "inside" not in page_data(html_of(bt))


def test_overview_true_draws_boxes_for_a_short_tagged_recording():
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    with dg.live(model, overview=True) as rec:
        model(torch.ones(2, 3)).sum()
    pic, _, _ = _picture.drawing(record_of(rec.graph()))
    assert pic.detail is not None and sorted(boxes_of(pic)) == ["0", "1", "2"]
    assert "modules drawn as boxes" in outputs_of(rec)["steps"]["text/plain"]
    untagged = dg.draw(model(torch.ones(2, 3)).sum(), overview=True)  # no tags: every op, as it is
    assert _picture.drawing(record_of(untagged))[0].detail is None


@pytest.mark.parametrize("bad", ["yes", 1, 0, "auto"])
def test_a_bad_overview_is_refused_naming_it(bad):
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match=rf"overview must be None .* got {re.escape(repr(bad))}"):
        dg.draw(x * 2, overview=bad)
    with pytest.raises(ValueError, match=rf"got {re.escape(repr(bad))}"):
        with dg.live(overview=bad):
            pass
    with pytest.raises(ValueError, match=rf"got {re.escape(repr(bad))}"):
        with dg.trace_backward(x * 2, overview=bad):
            pass
    with pytest.raises(ValueError, match=rf"got {re.escape(repr(bad))}"):
        dg.Graph([], [], overview=bad)


def test_overview_survives_saving(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh())
    with dg.live(model, overview=True) as rec:
        model(torch.ones(2, 3)).sum()
    for view in (rec, rec.graph()):
        path = dg.save_view(view, tmp_path / "v.json")
        assert dg.load_view(path).overview is True


class _Tied(nn.Module):
    """T5's tying: ``shared`` runs no op; its weight is the encoder's embedding and the head's."""

    def __init__(self):
        super().__init__()
        self.shared = nn.Embedding(10, 4)
        self.embed = nn.Embedding(10, 4)
        self.body = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
        self.head = nn.Linear(4, 10, bias=False)
        self.embed.weight = self.head.weight = self.shared.weight

    def forward(self, ids):
        return self.head(self.body(self.embed(ids))).sum()


def test_a_shared_weight_whose_module_runs_no_op_is_no_box_of_0_ops():
    torch.manual_seed(0)
    model = _Tied()
    with dg.live(model, overview=True) as rec:
        model(torch.tensor([[1, 2, 3]]))
    graph = rec.graph()
    pic, _, _ = _picture.drawing(record_of(graph))
    counts = _overview.op_counts(graph.nodes)
    boxes = boxes_of(pic)
    assert "shared" not in boxes and {"embed", "head"} <= set(boxes)  # ("shared" ran no op)
    assert all(box.module == owner(path) for path, box in boxes.items())  # each in its module's frame
    for path, box in boxes.items():  # each box's op count is the op-level graph's, never 0
        assert counts[path] > 0 and box.label.endswith(f"\n{counts[path]} op" + "s" * (counts[path] > 1))
    weight = next(n for n in pic.graph.nodes if n.label == "shared.weight")
    assert weight.kind == "parameter" and weight.module is None  # drawn as it is, in no frame
    users = {boxes[p].id for p in ("embed", "head")}
    drawn_users = {dst for src, dst in pic.graph.edges if src == weight.id}
    original = next(n.id for n in graph.nodes if n.label == "shared.weight")
    assert drawn_users == users == {pic.mapping[dst] for src, dst in graph.edges if src == original}


class _Twice(nn.Module):
    """A shared block applied twice: ``self.block(self.block(x))``."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(4, 4)
        self.block = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
        self.out = nn.Linear(4, 1)

    def forward(self, x):
        return self.out(self.block(self.block(self.inp(x)))).sum()


def _calls_said(label: str) -> tuple[str, int | None, int | None]:
    """A box's module path, and its call's number and how many calls (``None``: one call)."""
    found = re.match(r"([^:]+): \w+(?:, call (\d+) of (\d+))?\n", label)
    assert found is not None, label
    return found[1], *(None if v is None else int(v) for v in found.groups()[1:])


def _check_boxes_per_call(graph, pic):
    """Each box stands for the op-level nodes of its module's call: its op count, its
    nodes, and as many boxes as the module had calls (oracle: the op-level records)."""
    boxes = [n for n in pic.graph.nodes if n.kind == "module"]
    per_path: dict[str, list[int]] = {}
    for box in boxes:
        path, k, n = _calls_said(box.label)
        per_path.setdefault(path, []).append(k or 1)
        inside = [m for m in graph.nodes if m.module and (m.module + ".").startswith(path + ".") and m.seq]
        numbers = sorted({m.calls[path.count(".")] for m in inside})
        assert len(numbers) == (n or 1)
        mine = [m for m in inside if n is None or m.calls[path.count(".")] == numbers[k - 1]]
        ops = sum(m.count for m in mine)
        assert box.label.endswith(f"\n{ops} op" + "s" * (ops > 1)), box.label
        stands = {old for old, new in pic.mapping.items() if new == box.id}
        assert {m.id for m in mine} <= stands and all(
            m.seq is None for m in graph.nodes if m.id in stands - {m.id for m in mine})  # (and its leaves)
    return per_path


def test_a_module_called_twice_is_a_box_per_call_with_its_own_ops():
    torch.manual_seed(0)
    model = _Twice()
    with dg.live(model, overview=True) as rec:
        model(torch.ones(2, 4))
    graph = rec.graph()
    pic, _, _ = _picture.drawing(record_of(graph))
    per_path = _check_boxes_per_call(graph, pic)
    assert per_path == {"inp": [1], "block.0": [1, 2], "block.1": [1, 2], "out": [1]}
    assert "a module called more than once is one box per call" in outputs_of(rec)["steps"]["text/plain"]
    # the same boxes from dg.draw's capture under track_modules
    with dg.track_modules(model):
        loss = model(torch.ones(2, 4))
    drawn = dg.draw(loss, params=model, overview=True)
    assert sorted(n.label for n in _picture.drawing(record_of(drawn))[0].graph.nodes if n.kind == "module") == sorted(
        n.label for n in pic.graph.nodes if n.kind == "module")
    # a closed box of the block (few boxes allowed): a box per call of the block itself
    nodes, _, mapping = _overview.boxes(graph.nodes, graph.edges, graph.module_types, most=3)
    labels = sorted(n.label for n in nodes if n.kind == "module")
    assert labels == ["block: Sequential, call 1 of 2\n3 ops", "block: Sequential, call 2 of 2\n3 ops",
                      "inp: Linear\n2 ops", "out: Linear\n2 ops"]
    first = {mapping[n.id] for n in graph.nodes if n.module and n.module.startswith("block.") and n.calls
             and n.calls[0] == 1}
    assert len(first) == 1  # call 1's ops are one box, and its ops only


def test_calls_of_reads_each_part_of_a_module_path():
    from dynagraph import _tags
    assert _tags.calls_of({"block": 2, "block.0": 3}, "block.0") == (2, 3)
    assert _tags.calls_of({"layers.0": 1}, "layers.0") == (None, 1)  # ("layers" is a list: not called)
    assert _tags.calls_of({}, "block") is None and _tags.calls_of({"a": 1}, None) is None


@pytest.mark.browser
def test_a_click_on_a_calls_box_lights_that_calls_ops_only(tmp_path):
    from _chromium import chromium, open_html
    torch.manual_seed(0)
    model = _Twice()
    with dg.live(model, overview=True) as rec:
        model(torch.ones(2, 4))
    html = html_of(rec)
    data = page_data(html)
    pic, _, _ = _picture.drawing(record_of(rec.graph()), own_title=True)
    second = next(n for n in pic.graph.nodes if n.label.startswith("block.0: Linear, call 2 of 2"))
    first = next(n for n in pic.graph.nodes if n.label.startswith("block.0: Linear, call 1 of 2"))
    ids = data["inside"]["boxes"]
    assert not set(ids[str(first.id)]) & set(ids[str(second.id)])  # each call its own op-level nodes
    with chromium() as browser:
        watch, page = open_html(browser, html, tmp_path, name="calls.html")
        page.locator(f"svg g.node.dg-n{second.id}").first.click()
        name = page.locator(".dg-inside-name").text_content()
        lit = page.evaluate("() => [...document.querySelectorAll('.dg-inside g.node.dg-lit')]"
                            ".map(g => +g.getAttribute('class').match(/dg-n(\\d+)/)[1])")
        watch.close()
    assert name == "block.0: Linear, call 2 of 2"
    assert sorted(lit) == sorted(ids[str(second.id)])
    assert watch.errors == [] and watch.blocked == []


class _Loop(nn.Module):
    """A cell called at every step of a loop."""

    def __init__(self):
        super().__init__()
        self.inp, self.cell, self.head = nn.Linear(8, 16), nn.GRUCell(16, 16), nn.Linear(16, 1)

    def forward(self, x):
        h = torch.zeros(2, 16)
        for t in range(x.shape[0]):
            h = self.cell(torch.tanh(self.inp(x[t])), h)
        return self.head(h).sum()


def test_a_loop_of_calls_rolls_its_boxes_and_says_which_calls():
    torch.manual_seed(0)
    model = _Loop()
    with dg.live(model, overview=True) as rec:
        model(torch.randn(30, 2, 8))  # (over 40 boxes: they roll)
    graph = rec.graph()
    pic, _, _ = _picture.drawing(record_of(graph))
    repeats = {i: b.repeats for b in pic.graph.blocks for i in b.nodes}
    said: dict[str, int] = {}  # ops per module path: each box's ops times the calls it is drawn for
    calls_of = {}
    for box in (n for n in pic.graph.nodes if n.kind == "module"):
        found = re.match(r"(\w+): \w+(?:, calls? (\d+)(?:\u2013(\d+))? of (\d+))?\n(\d+) ops?$", box.label)
        assert found is not None, box.label
        path, first, last, _, ops = found.groups()
        drawn_for = 1 if first is None else int(last or first) - int(first) + 1
        assert drawn_for == repeats.get(box.id, 1), box.label  # the range is the calls the frame rolls
        said[path] = said.get(path, 0) + int(ops) * drawn_for
        calls_of.setdefault(path, []).append((first, last))
    counts = _overview.op_counts(graph.nodes)
    assert said == {p: counts[p] for p in ("inp", "cell", "head")}
    assert calls_of["cell"] == [("1", None), ("2", "30")]
    assert _overview.per_call("cell: GRUCell, calls 2\u201312 of 12\n16 ops")
    assert not _overview.per_call("head: Linear\n2 ops")


def test_each_calls_box_says_the_bytes_its_own_ops_saved():
    torch.manual_seed(0)
    model = _Twice()
    with dg.live(model, overview=True, memory=True) as rec:
        model(torch.ones(2, 4))
    graph = rec.graph()
    pic, dot, _ = _picture.drawing(record_of(graph))
    tanh = [n for n in pic.graph.nodes if n.label.startswith("block.1: Tanh, call ")]
    assert len(tanh) == 2
    for box in tanh:
        mine = [old for old, new in pic.mapping.items() if new == box.id]
        act, leaf = graph.memory.bytes_of(mine)
        assert act > 0
        line = re.search(rf'\bn{box.id} \[[^\n]*? label="([^"]*)"', dot)
        said = f"saves {memory.fmt_bytes(act)}"
        assert line is not None and said in line[1], (box.label, said)


class _TwoKinds(nn.Module):
    def __init__(self, neg: bool) -> None:
        super().__init__()
        self.lin, self.neg = nn.Linear(4, 4), neg

    def forward(self, h):
        h = self.lin(h)
        return -h * 2 if self.neg else torch.tanh(h) * 2  # same op count, other ops


def test_boxes_of_one_class_and_op_count_roll_only_when_they_hold_the_same_ops():
    # Four Blocks, two of them Linear-Tanh-Mul and two Linear-Neg-Mul (4 ops each): they
    # were drawn as one "0: Block, 4 ops x4" box, a repeat that the ops do not make (the
    # op-level picture rolls nothing). Found by a fuzz of pictures against their graphs.
    torch.manual_seed(0)
    model = nn.Sequential(*[_TwoKinds(k >= 2) for k in range(4)])
    with dg.track_modules(model):
        out = model(torch.randn(3, 4)).sum()
    g = dg.draw(out, params=model, roll=False, max_nodes=None, overview=False)
    for rec in (dataclasses.replace(record_of(g), roll=True, max_nodes=None, overview=True),
                record_of(dg.draw(out, params=model, depth=1, roll=True, max_nodes=None))):
        pic = _picture.picture(rec, roll=True, max_nodes=None)
        boxes = [n for n in pic.graph.nodes if n.kind == "module"]
        if rec.overview:
            pic = _picture.drawing(rec, layout=lambda d: b'<svg xmlns="http://www.w3.org/2000/svg" '
                                                         b'width="9000pt" height="9000pt"/>')[0]
            boxes = [n for n in pic.graph.nodes if n.kind == "module"]
        assert pic.graph.blocks == [] and len(boxes) == 4, [(b.label, b.repeats) for b in pic.graph.blocks]
    same = nn.Sequential(*[_TwoKinds(False) for _ in range(4)])  # the same ops: they still roll
    with dg.track_modules(same):
        out = same(torch.randn(3, 4)).sum()
    pic = _picture.picture(record_of(dg.draw(out, params=same, depth=1, roll=True, max_nodes=None)),
                           roll=True, max_nodes=None)
    assert [b.repeats for b in pic.graph.blocks] == [4]
