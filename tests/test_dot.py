"""_dot: DOT text (golden files), labels, quoting and escaping.

Golden DOT files live in tests/golden/; after an intended change to the DOT output,
rewrite them with ``DYNAGRAPH_UPDATE_GOLDEN=1 python3 dev.py test tests/test_dot.py``
and review the diff.
"""

import os
import re
from pathlib import Path

import pytest
import torch
from torch import nn

import dynagraph as dg
from dynagraph import _dot, _picture, render
from dynagraph._records import KINDS, Node
from dynagraph.graph import record_of

from _helpers import Square, frame_rows, html_of, pictures, svg_texts

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("DYNAGRAPH_UPDATE_GOLDEN") == "1"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.dot"
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no golden file {path}: run with DYNAGRAPH_UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(), (
        f"DOT differs from {path}; if the change is intended, rerun with DYNAGRAPH_UPDATE_GOLDEN=1"
    )


# Golden DOT text.

def test_golden_two_x_plus_one():
    x = torch.tensor([1.0], requires_grad=True)
    check_golden("two_x_plus_one", dg.draw(2 * x + 1, params={"x": x}).to_dot())


def test_golden_two_layer_mlp():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    loss = model(torch.zeros(5, 3)).sum()
    check_golden("mlp2", dg.draw(loss, params=model, title="2-layer MLP").to_dot())


def test_golden_custom_function_show_saved():
    x = torch.ones(3, requires_grad=True)
    y = (Square.apply(x) * x).sum()  # x feeds two ops: drawn as two copies
    check_golden("custom_saved", dg.draw(y, params={"x": x}, show_saved=True).to_dot())


# DOT text from hand-made records.

def _records():
    nodes = [
        Node(id=0, name="output", kind="output", label="loss", shape=(), dtype="float32", device="cpu"),
        Node(id=1, name="AddmmBackward0", kind="op", label="AddmmBackward0", shape=(2, 4),
             dtype="float32", device="cpu", module="enc.layer", seq=1),
        Node(id=2, name="AccumulateGrad", kind="parameter", label="enc.layer.weight", shape=(4, 4),
             dtype="float32", device="cpu", module="enc.layer"),
        Node(id=3, name="MulBackward0", kind="op", label="MulBackward0", shape=(2, 4),
             dtype="float32", device="cpu", seq=2),
    ]
    edges = [(2, 1), (1, 3), (2, 3), (3, 0)]
    return nodes, edges


def test_to_dot_nests_module_clusters_with_class_names():
    nodes, edges = _records()
    dot = _dot.to_dot(nodes, edges, {"enc": "Encoder", "enc.layer": "Linear"})
    outer = dot.index('subgraph "cluster_enc" {')
    inner = dot.index('subgraph "cluster_enc.layer" {')
    assert outer < inner
    assert 'label="enc: Encoder"' in dot and 'label="enc.layer: Linear"' in dot
    assert dot.index("n1 [") > inner  # the op sits in its module's frame


def test_to_dot_splits_a_shared_leaf_per_consumer():
    nodes, edges = _records()
    dot = _dot.to_dot(nodes, edges, split_leaves=1)
    assert "n2_0 [" in dot and "n2_1 [" in dot and "  n2 [" not in dot
    assert "n2_0 -> n1" in dot and "n2_1 -> n3" in dot
    single = _dot.to_dot(nodes, edges, split_leaves=None)
    assert "  n2 [" in single and "n2_0" not in single


def test_to_dot_keeps_a_leaf_with_few_consumers_whole():
    nodes, edges = _records()  # n2 feeds two ops: under the default threshold
    dot = _dot.to_dot(nodes, edges)
    assert "  n2 [" in dot and "n2_0" not in dot


def test_to_dot_splits_an_rnn_weight_used_at_every_step():
    cell = nn.RNNCell(2, 3)
    h = torch.zeros(1, 3)
    for _ in range(5):
        h = cell(torch.ones(1, 2), h)
    dot = dg.draw(h.sum(), params=cell).to_dot()
    copies = [line for line in dot.splitlines() if 'label="weight_hh' in line]
    assert len(copies) == 5


def test_to_dot_overlay_and_title():
    nodes, edges = _records()
    overlay = _dot.Overlay(badges={3: "#1 <a&b>"}, highlight={1}, edge_norms={(3, 0): 0.5, (1, 3): 2.0})
    dot = _dot.to_dot(nodes, edges, title="my graph", overlay=overlay)
    assert 'label="my graph"' in dot

    def line(start: str) -> str:
        return next(ln for ln in dot.splitlines() if ln.strip().startswith(start))

    assert '<FONT COLOR="#c92a2a">#1 &lt;a&amp;b&gt;</FONT>' in line("n3 [")
    assert 'color="#e03131" penwidth=2.5' in line("n1 [")
    assert "<TD>0.5</TD>" in line("n3 -> n0") and "dir=back" in line("n3 -> n0")
    thin, thick = (float(re.search(r"penwidth=([\d.]+)", line(e))[1]) for e in ("n3 -> n0", "n1 -> n3"))
    assert thin < thick  # width grows with the norm


def test_every_kind_has_a_style():
    assert set(_dot.STYLE) == set(KINDS)


def test_quote_shows_text_literally():
    assert _dot.quote('a"b') == r'"a\"b"'
    assert _dot.quote("\\N") == r'"\\N"'  # not Graphviz's node-name escape
    assert _dot.quote("one\ntwo\r") == r'"one\ntwo"'


def test_quote_writes_ampersand_as_an_entity():
    assert _dot.quote("a &lt; b & c") == '"a &amp;lt; b &amp; c"'  # Graphviz reads entities


@pytest.mark.parametrize("text, shown", [("a\x00b", r"a\x00b"), ("\ud800", r"\ud800"), ("\uffff", r"\uffff"),
                                         ("tab\t", r"tab\x09"), ("\x7f\x85", r"\x7f\x85")])
def test_quote_and_html_text_escape_what_cannot_be_drawn(text, shown):
    assert _dot.quote(text) == _dot.quote(shown)  # the escape's backslash shown, not read
    assert _dot._html_text(text) == _dot._html_text(shown)


# Every character a Python string can hold, as far as a picture goes: all of
# Latin-1 and beyond, controls, lone surrogates, XML's forbidden U+FFFE/U+FFFF, an
# emoji, entities and Graphviz escapes (a newline or CR would split or drop the line).
ODD = ("".join(chr(i) for i in range(0x200) if chr(i) not in "\n\r")
       + "\ud800\udfff\ufffe\uffff\U0001f600 a &lt; b &#60; &amp; \\N \\G \\")


def test_labels_with_any_character_render_literally():
    nodes = [Node(id=0, name="output", kind="output", label=ODD),
             Node(id=1, name="MulBackward0", kind="op", label=ODD, seq=0)]
    dot = _dot.to_dot(nodes, [(1, 0)], {}, title=ODD, overlay=_dot.Overlay(badges={1: ODD}))
    shown = _dot._visible(ODD)  # controls and surrogates as \x00, \ud800
    assert "\\x00" in shown and "\\ud800" in shown and "a &lt; b" in shown
    assert svg_texts(render.pipe(dot, "svg").decode()) == [shown] * 4  # title, 2 labels, badge


def test_html_entities_in_names_are_shown_not_interpreted():
    x = torch.ones(2, requires_grad=True)
    graph = dg.draw((2 * x).sum(), params={"a &lt; b": x}, title="&amp;")
    texts = svg_texts(graph.svg())
    assert "a &lt; b" in texts and "&amp;" in texts and "a < b" not in texts


def test_node_label_lists_label_meta_and_saved():
    node = Node(id=1, name="SquareBackward", kind="custom", label="Square", shape=(3,), dtype="float64",
                device="cuda:0", saved=[("tensors[0]", "(3,) float64")])
    assert _dot.node_label(node) == (
        "Square\n(custom Function)\n(3,) float64 cuda:0\nsaved tensors[0]: (3,) float64"
    )
    plain = Node(id=2, name="MulBackward0", kind="op", label="MulBackward0", shape=(2, 2),
                 dtype="float32", device="cpu")
    assert _dot.node_label(plain) == "MulBackward0\n(2, 2)"  # float32/cpu go unsaid
    module = Node(id=3, name="Linear", kind="module", label="fc: Linear\n3 ops", shape=(2, 2),
                  dtype="float32", device="cpu")
    assert _dot.node_label(module) == "fc: Linear\n3 ops"


def test_special_characters_render_literally_and_svg_parses():
    weird = '<b>&"\\N'
    model = nn.Sequential()
    model.add_module(weird, nn.Linear(2, 2))
    with dg.track_modules(model):
        loss = model(torch.ones(1, 2)).sum()
    graph = dg.draw(loss, params=model, title=weird)
    texts = svg_texts(render.pipe(graph.to_dot(), "svg").decode())
    assert weird in texts  # the title: \N not replaced by a node name
    assert f"{weird}: Linear" in texts  # the module frame
    assert f"{weird}.weight" in texts and f"{weird}.bias" in texts
    (svg,) = pictures(html_of(graph))
    assert weird in svg_texts(svg)


# Frames: rolled blocks inside their modules, numbered as frames() says.

def frames_in_dot(dot: str) -> dict[int, set[int]]:
    """Frame number -> ids of the nodes drawn inside it (nested frames included), read from DOT."""
    stack: list[int | None] = []
    members: dict[int, set[int]] = {}
    for line in dot.splitlines():
        text = line.strip()
        if text.startswith("subgraph "):
            stack.append(None)
        elif (m := re.match(r'id="f(\d+)"', text)) and stack and stack[-1] is None:
            stack[-1] = int(m[1])
            members[int(m[1])] = set()
        elif text == "}" and stack:
            stack.pop()
        elif m := re.match(r"n(\d+)(?:_\d+)? \[id=", text):
            for frame in stack:
                members[frame].add(int(m[1]))
    return members


def tracked_gpt2():
    from test_roll_leaves import GPT2
    torch.manual_seed(0)
    model = GPT2(layers=4)
    with dg.track_modules(model):
        out = model(torch.randn(1, 5, 16)).sum()
    return dg.draw(out, params=model, overview=False)  # op level: its frames and rolled block


def test_a_long_parameter_name_breaks_after_a_dot_and_a_short_one_stays():
    name = "encoder.block.{0\u20261}.layer.0.SelfAttention.q.weight.T"
    leaf = Node(id=1, name="AccumulateGrad", kind="parameter", label=name, shape=(64, 64))
    lines = _dot.node_label(leaf).split("\n")
    assert "".join(lines[:-1]) == name and lines[-1] == "(64, 64)"
    assert len(lines) > 2 and all(line.endswith(".") for line in lines[:-2])
    assert all(len(line) <= _dot.NAME_LINE + len("weight.T") for line in lines)
    grouped = Node(id=2, name="AccumulateGrad", kind="parameter", label=f"{name} (64, 64)\nfc.bias (4,)")
    assert _dot.node_label(grouped).split("\n")[-1] == "fc.bias (4,)"  # each line of a group on its own
    assert "(64, 64)" in _dot.node_label(grouped).split("\n")[-2]
    short = Node(id=3, name="AccumulateGrad", kind="parameter", label="fc1.weight", shape=(4, 4))
    assert _dot.node_label(short) == "fc1.weight\n(4, 4)"


def test_a_frame_that_holds_one_frame_and_no_node_is_not_drawn():
    """``enc: Encoder`` holds only ``enc.layer: Linear``: it adds a margin and a title row
    and says nothing the inner title does not. A frame with a node of its own stays."""
    nodes, edges = _records()
    types = {"enc": "Encoder", "enc.layer": "Linear"}
    dot = _dot.to_dot(nodes, edges, types, prune=True)
    assert 'subgraph "cluster_enc" {' not in dot and 'subgraph "cluster_enc.layer" {' in dot
    assert _dot.frames(nodes, edges, prune=True) == [[1, 2]]
    assert 'subgraph "cluster_enc" {' in _dot.to_dot(nodes, edges, types)  # only in compact pictures
    assert _dot.frames(nodes, edges) == [[1, 2], [1, 2]]
    nodes.append(Node(id=4, name="TanhBackward0", kind="op", label="TanhBackward0", shape=(2, 4),
                      module="enc", seq=3))
    edges.append((3, 4))
    dot = _dot.to_dot(nodes, edges, types, prune=True)
    assert 'subgraph "cluster_enc" {' in dot and 'subgraph "cluster_enc.layer" {' in dot


def test_in_a_tall_recording_frames_list_what_the_pruned_dot_holds():
    """The page lights frames by number: in a compact picture, whose frames holding one
    frame alone are left out, the numbers must still match the DOT's."""
    torch.manual_seed(0)
    widths = range(2, 17)  # each layer its own width: nothing rolls, and the picture is tall
    model = nn.Sequential(*(nn.Sequential(nn.Sequential(nn.Sequential(nn.Linear(a, a + 1))), nn.Tanh())
                            for a in widths))
    with dg.live(model, overview=False) as rec:  # op level: its frames
        model(torch.randn(2, 2)).sum()
    graph = rec.graph()
    pic = _picture.picture(record_of(graph))
    assert pic.compact and not pic.graph.blocks
    listed = _dot.frames(pic.graph.nodes, pic.graph.edges, pic.graph.blocks, prune=True)
    assert {k: set(ids) for k, ids in enumerate(listed)} == frames_in_dot(graph.to_dot())
    assert len(listed) < len(_dot.frames(pic.graph.nodes, pic.graph.edges, pic.graph.blocks))


def test_frames_lists_what_each_numbered_frame_of_the_dot_holds():
    graph = tracked_gpt2()
    pic = graph.picture()
    listed = _dot.frames(pic.nodes, pic.edges, pic.blocks)
    assert {k: set(ids) for k, ids in enumerate(listed)} == frames_in_dot(graph.to_dot())


def test_a_rolled_block_sits_inside_the_frame_of_its_module_list():
    """One 'transformer' frame holds the block and the final LayerNorm alike: a second
    copy of it inside the block made Graphviz draw the two side by side."""
    dot = tracked_gpt2().to_dot()
    titles = {label: int(f) for f, label in re.findall(r'id="f(\d+)" class="dg-frame[^"]*" label="([^"]*)"', dot)}
    assert [t for t in titles if t.startswith("transformer:")] == ["transformer: Module"]
    assert [t for t in titles if t.startswith("transformer.h:")] == ["transformer.h: ModuleList"]
    members = frames_in_dot(dot)
    block = members[titles["\u00d74  transformer.h.0\u20133: GPT2Block"]]
    assert block <= members[titles["transformer.h: ModuleList"]] < members[titles["transformer: Module"]]
    assert members[titles["transformer.ln_f: LayerNorm"]] < members[titles["transformer: Module"]]


def test_an_edge_into_a_frame_leaves_a_rank_for_its_leaves_and_ops_keep_a_straight_chain():
    dot = tracked_gpt2().to_dot()
    entering = re.findall(r"(n\d+) -> (n\d+) \[[^\]]*minlen=2", dot)
    assert entering, "edges into module frames get minlen=2"
    leaf_edges = re.findall(r'n\d+(?:_\d+)? -> n\d+ \[id="e\d+" class="dg-edge dg-from-(\d+)[^\]]*\]', dot)
    parameters = {int(m) for m in re.findall(r'n(\d+)(?:_\d+)? \[id="n\d+(?:_\d+)?" class="dg-parameter', dot)}
    for line in dot.splitlines():
        if " -> " in line:
            src = int(re.search(r"dg-from-(\d+)", line)[1])
            assert ("weight=4" in line) == (src not in parameters and "constraint=false" not in line), line
    assert leaf_edges


# -- a block under the block it reads (an encoder and a decoder) ---------------------------

def two_loops(reads: bool = True, own_input: bool = True):
    """An encoder loop, then a decoder loop: the decoder starts from its own input ``y``
    (or from the encoder's result) and, when ``reads``, reads the encoder's result at
    every step, as a Transformer decoder's cross-attention does."""
    torch.manual_seed(0)
    we, wd, wc = (torch.randn(8, 8, requires_grad=True) for _ in range(3))
    x, y = torch.randn(2, 8), torch.randn(2, 8, requires_grad=True)
    h = x.tanh()
    for _ in range(4):
        h = torch.tanh(h @ we) + h
    memory = h * 2.0
    d = y.sin() * 1.5 if own_input else memory * 1.5
    for _ in range(4):
        d = torch.tanh(d @ wd + (memory @ wc if reads else 0.0)) + d
    loss = d.pow(2).mean() + (0.0 if reads else memory.sum())
    return dg.draw(loss, params={"we": we, "wd": wd, "wc": wc}, roll=True)


def test_a_block_that_reads_another_blocks_result_is_drawn_under_it():
    """T5's decoder stack started at the top, beside the encoder, its layers pushed down
    to meet the encoder's output: 2,250 x 3,150 px, half empty. An invisible edge from
    the encoder's result to the decoder's input puts one stack under the other."""
    graph = two_loops()
    dot = graph.to_dot()
    assert len(re.findall(r"\[style=invis weight=\d+\]", dot)) == 1
    (enc, dec) = sorted(frame_rows(graph.svg()).items())
    assert dec[1][0] > enc[1][1], (enc, dec)  # the decoder's frame starts below the encoder's


@pytest.mark.parametrize(("reads", "own_input"), [(False, True), (True, False)])
def test_no_stacking_edge_where_the_blocks_are_already_in_line_or_independent(reads, own_input):
    """Two loops that share nothing, or a decoder that starts from the encoder's result
    (it is drawn under it anyway): no invisible edge."""
    assert "style=invis" not in two_loops(reads, own_input).to_dot()
