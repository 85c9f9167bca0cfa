"""The picture path: every view's outputs (a PNG + the script that draws the SVG, and
a plain step list), the size policy on every view, rolled steppers and their iteration
counter, renderer errors."""

import base64
import io
import itertools
import os
import re
import stat
import struct
import time
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import matplotlib
import pytest
import torch
from torch import nn

import dynagraph as dg
from dynagraph import _dot, _page, _picture, _png, _steps, render
from dynagraph._page import stored_bytes
from dynagraph.graph import record_of

from _helpers import (
    LESSON07_REPLAY,
    expand_steps,
    html_of,
    outputs_of,
    page_data,
    page_steps,
    pictures,
    scripts_data,
    stored,
    svg_texts,
)

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


class Page(HTMLParser):
    """Parses HTML, failing on bad nesting; collects what the checks need."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.stack, self.starts, self.attrs = [], Counter(), []
        self.ids, self.classes, self.li, self.data, self.raw = [], set(), [], [], []
        self._in = None
        self.feed(text)
        self.close()
        assert self.stack == [], f"never closed: {self.stack}"

    def handle_starttag(self, tag, attrs):
        self._start(tag, attrs)
        if tag not in VOID:
            self.stack.append(tag)
        self._in = (tag, dict(attrs))
        if tag == "li":
            self.li.append("")

    def handle_startendtag(self, tag, attrs):  # <path .../> in the SVG
        self._start(tag, attrs)

    def handle_endtag(self, tag):
        assert tag not in VOID, f"</{tag}> closes a void element"
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1:]}>"
        self.stack.pop()

    def handle_data(self, data):
        if self.stack and self.stack[-1] == "li":
            self.li[-1] += data
        if self.stack and self.stack[-1] in ("script", "style"):
            self.raw.append((self.stack[-1], self._in[1], data))

    def _start(self, tag, attrs):
        self.starts[tag] += 1
        self.attrs += [(tag, k, v or "") for k, v in attrs]
        for k, v in attrs:
            if k == "id":
                self.ids.append(v)
            elif k == "class":
                self.classes.update(v.split())

    def payload(self):
        (data,) = scripts_data("".join(d for tag, _, d in self.raw if tag == "script"))
        return data



# The tags that every allowlist sanitizer keeps (bleach as `nbconvert --sanitize-html`
# runs it escapes the rest, so they would show as text): the step list and a diff's table.
PLAIN_TAGS = {"b", "div", "i", "li", "ol", "span", "table", "td", "tr"}


def check(view):
    """What every view's outputs must satisfy; returns the parsed page of its HTML."""
    outs = view._outputs()
    assert _page.stored_bytes(outs) <= _page.MAX_BYTES  # all outputs together
    parts = [o.metadata["dynagraph"] for o in outs]
    assert parts in (["picture", "script"], ["picture", "script", "steps"], ["table", "picture", "script"]), parts
    picture = outs[parts.index("picture")]
    assert set(picture.data) == {"text/plain", "image/png"}
    png = base64.b64decode(picture.data["image/png"])
    assert png.startswith(b"\x89PNG")
    size = picture.metadata["image/png"]
    assert [size["width"], size["height"]] == list(struct.unpack(">II", png[16:24]))  # the script finds it by this
    assert set(outs[parts.index("script")].data) == {"application/javascript"}  # alone: see _page's docstring
    for out in outs:
        if "text/html" in out.data:
            plain = Page(out.data["text/html"])
            assert set(plain.starts) <= PLAIN_TAGS, set(plain.starts) - PLAIN_TAGS
            assert all(i.startswith("dg-hint-") for i in plain.ids), plain.ids  # the one id: the script hides it
    html = html_of(view)
    page = Page(html)
    assert page.starts["svg"] == 0 and page.starts["img"] == 1  # the PNG; the script draws the SVG
    (svg,) = pictures(html)
    svg_texts(svg)  # well-formed XML
    data = page.payload()
    drawn = {int(c[4:]) for c in re.findall(r'class="node [^"]*\b(dg-n\d+)', svg)}
    for _, ids, _, _ in expand_steps(data) if "s" in data else []:
        assert set(ids) <= drawn, ids
    assert set(map(int, data["info"])) <= drawn | {-1}
    for tag, name, value in page.attrs:  # namespaces are URLs; nothing may load from one
        if name != "src":
            assert not re.search(r"https?://", value), (tag, name, value)
    for _, _, text in page.raw:  # (the SVG's namespaces are names, not addresses)
        text = re.sub(r"http://www\.w3\.org/(2000/svg|1999/xlink)", "", text)
        assert not re.search(r"https?://|@import|fetch\(|XMLHttpRequest", text)
    return page


def recording():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with dg.live(params={"x": x}) as rec:
        y = (2 * x + 1).sum()
    return rec, y


def test_recording_output_is_well_formed():
    rec, _ = recording()
    html = html_of(rec)
    page = check(rec)
    data = page.payload()
    assert data["mode"] == "reveal" and len(data["s"]) == len(rec.steps)
    assert [n for _, n in page_steps(html)] == [s.nodes for s in rec.steps]  # small graphs are not rolled
    names = [n.name for n in rec.nodes]
    assert [t for t, _ in page_steps(html)] == [s.text(names) for s in rec.steps]
    assert page.li == [s.text(names) for s in rec.steps]  # the no-JavaScript list, in order


def test_backward_output_steps_in_backward_order():
    rec, y = recording()
    with dg.trace_backward(y) as bt:
        y.backward()
    html = html_of(bt)
    data = check(bt).payload()
    assert [n for _, n in page_steps(html)] == [[i] for i in bt.order]
    assert data["mode"] == "light"
    (svg,) = pictures(html)
    assert {f"#{k}" for k in range(1, len(bt.order) + 1)} <= set(svg_texts(svg))


def test_forward_trace_output_steps_in_run_order_with_forward_arrows():
    import torch.autograd.forward_ad as fwAD
    with dg.trace_forward() as ft, fwAD.dual_level():
        x = fwAD.make_dual(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 0.0]))
        (2 * x + 1).sin().sum()
    html = html_of(ft)
    data = check(ft).payload()
    assert [n for _, n in page_steps(html)] == [[i] for i in ft.order]
    assert data["mode"] == "reveal"
    (svg,) = pictures(html)
    assert {f"#{k}" for k in range(1, len(ft.order) + 1)} <= set(svg_texts(svg))
    assert "dir=back" not in ft.to_dot()  # tangents flow forward: the arrows are not turned


def test_graph_of_a_gradient_hover_names_the_pass():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with dg.track_passes():
        (g,) = torch.autograd.grad((x.sin() * x).sum(), x, create_graph=True)
    graph = dg.draw(g)
    info = check(graph).payload()["info"]
    made = [n.derivative for n in graph.nodes]
    texts = {int(k): v for k, v in info.items()}
    assert 1 in made and 0 in made
    assert all(("made by: the first backward pass" in texts[n.id]) == (d == 1) for n, d in zip(graph.nodes, made))


def test_step_text_cannot_break_out_of_the_page():
    x = torch.ones(1, requires_grad=True)
    weird = "x < 2 </script><script>alert(1)</script> & <!--"
    with dg.live(params={weird: x}) as rec:
        2 * x
    html = html_of(rec)
    check(rec)
    assert "<script>alert(1)" not in html


def test_the_same_output_twice_in_one_page_has_no_ids_to_clash():
    rec, _ = recording()
    html = html_of(rec)
    assert html == html_of(rec)  # stored outputs are stable for nbval
    (hint,) = Page(html).ids  # the only id: the step list's line that the script hides
    assert hint == page_data(html)["hint"]
    assert "document.currentScript" in html  # each script finds its own output


def test_the_checker_catches_bad_nesting():
    for bad in ("<div><span></div></span>", "<div><b>open", "<ol><li>x</ol>", "<input></input>"):
        with pytest.raises(AssertionError):
            Page(bad)
    Page('<div><input type="range"><svg><path d=""/></svg></div>')


def test_the_checker_catches_a_tag_a_sanitizer_escapes(monkeypatch):
    rec, _ = recording()
    check(rec)
    listing = _steps.listing
    monkeypatch.setattr(_steps, "listing", lambda *a: (listing(*a)[0].replace("<ol>", "<details><ol>")
                                                       .replace("</ol>", "</ol></details>"), ""))
    with pytest.raises(AssertionError, match="details"):
        check(rec)


# -- size policy: every view of a real RNN rolls, stays small and fast -------------------

def lstm_loop(steps, seed=0):
    torch.manual_seed(seed)
    cell = nn.LSTMCell(8, 16)
    xs = torch.randn(steps, 2, 8)
    h = c = torch.zeros(2, 16)
    for t in range(steps):
        h, c = cell(xs[t], (h, c))
    return cell, h.sum()


def views(steps):
    """Output of draw, live recording, backward replay and diff of an LSTMCell loop."""
    torch.manual_seed(0)
    cell = nn.LSTMCell(8, 16)
    xs = torch.randn(steps, 2, 8)
    with dg.live(cell) as rec:
        h = c = torch.zeros(2, 16)
        for t in range(steps):
            h, c = cell(xs[t], (h, c))
        loss = h.sum()
    short = dg.draw(lstm_loop(steps // 2)[1])
    with dg.trace_backward(loss, params=cell) as bt:
        loss.backward()
    return {"draw": dg.draw(lstm_loop(steps)[1], params=cell), "live": rec, "backward": bt,
            "diff": dg.diff(short, dg.draw(lstm_loop(steps)[1]))}


@pytest.fixture(scope="module")
def lstm200():
    return views(200)


@pytest.mark.parametrize("view", ["draw", "live", "backward", "diff"])
def test_every_view_of_a_200_step_lstm_rolls_into_one_block(lstm200, view):
    start = time.perf_counter()
    html = html_of(lstm200[view])
    seconds = time.perf_counter() - start
    check(lstm200[view])
    (svg,) = pictures(html)
    titles = [t for t in svg_texts(svg) if t.startswith("\u00d7")]
    assert len(titles) == 1 and titles[0].startswith("\u00d7200 "), titles
    assert svg.count('class="node') < 60  # 3,000 autograd nodes drawn as one iteration
    print(f"{view}: {len(html) / 1024:.0f} KB, {seconds:.2f} s")


def test_rolled_recording_counts_iterations(lstm200):
    rec = lstm200["live"]
    data = page_data(html_of(rec))
    assert data["blocks"] == [200]
    steps = expand_steps(data)
    rolled = [(b, k) for _, _, b, k in steps if b >= 0]
    assert sorted({k for _, k in rolled}) == list(range(200))  # every iteration is played
    per_iteration = Counter(k for _, k in rolled)
    assert len(set(per_iteration.values())) == 1  # each iteration has the same steps
    assert len(steps) == len(rec.steps)  # every step is played
    assert len(data["kinds"]) < 40  # the iterations share their step kinds
    # the steps of iteration 137 light the same drawn nodes as those of iteration 1;
    # iteration 0 also creates the weights' leaf nodes, at their first use
    lit = lambda k: [n for _, n, _, kk in steps if kk == k]  # noqa: E731
    assert lit(137) == lit(1)
    assert {i for n in lit(0) for i in n} > {i for n in lit(1) for i in n}


def test_rolled_backward_sends_per_iteration_norms_along_the_loop(lstm200):
    bt = lstm200["backward"]
    html = html_of(bt)
    data = page_data(html)
    (svg,) = pictures(html)
    loop_series = [s for key, s in data["norms"].items() if len(s) == 199]
    assert loop_series, "the h and c state edges carry one norm per iteration step"
    (title,) = [t for t in svg_texts(svg) if "along the loop" in t]
    assert re.search(f"[{_picture._SPARK}]{{8,}}", title)  # the sparkline
    # each value is the norm PyTorch computed for that iteration's edge
    edge_values = sorted(round(v, 3) for v in bt.edge_norms.values() if v > 1e-3)
    page_values = sorted(round(v, 3) for s in data["norms"].values() for v in s if v and v > 1e-3)
    assert set(page_values) <= {float(f"{v:.3g}") for v in edge_values} | set(page_values)
    assert len([v for s in loop_series for v in s]) == 199 * len(loop_series)


def test_a_loop_whose_batch_shrinks_sends_a_norm_for_every_iteration_of_its_loop_edges():
    """Where the state is sliced (3 rows -> 2 -> 1), the gradient passes through the slice,
    drawn as the loop edge: its norm belongs to the iteration the state leaves. (It was
    filed under the next iteration, over that one's own value, leaving a gap.)"""
    torch.manual_seed(0)
    cell = nn.GRUCell(4, 8)
    h = torch.zeros(3, 8, requires_grad=True)
    for b in (3, 3, 3, 2, 2, 2, 1, 1, 1):
        h = cell(torch.randn(b, 4), h[:b] if b < h.shape[0] else h)
    loss = h.sum()
    with dg.trace_backward(loss, params=cell) as bt:
        loss.backward()
    (block,) = bt.graph().picture().blocks
    assert block.repeats == 9 and block.note.startswith("batch 1\u20133")
    data = page_data(html_of(bt))
    loops = [data["norms"][f"{a}-{b}"] for a, b in block.loops if f"{a}-{b}" in data["norms"]]
    assert loops and all(len(s) == 8 for s in loops), loops  # iterations 0..7 pass state on
    assert all(v is not None and v > 0 for s in loops for v in s), loops


def test_default_policy_draws_small_graphs_in_full():
    x = torch.ones(2, requires_grad=True)
    h = x
    for _ in range(5):
        h = torch.tanh(h * 2)
    g = dg.draw(h.sum())
    assert len(g) <= _picture.ROLL_ABOVE
    assert g.picture().blocks == [] and len(g.picture()) == len(g)


def test_roll_false_and_max_nodes_none_draw_everything():
    cell, loss = lstm_loop(60)
    g = dg.draw(loss, roll=False, max_nodes=None)
    assert len(g.picture()) == len(g) and g.picture().blocks == []
    rolled = dg.draw(loss).picture()
    assert len(rolled.blocks) == 1 and rolled.blocks[0].repeats == 60
    assert rolled.counts() == g.counts()  # a rolled node counts once per iteration


def test_bad_roll_option_raises():
    with pytest.raises(ValueError, match="roll must be 'auto', True or False; got 'yes'"):
        dg.draw(torch.ones(1, requires_grad=True) * 2, roll="yes")


def test_output_over_the_byte_budget_folds_further(monkeypatch):
    monkeypatch.setattr(_page, "MAX_BYTES", 40_000)
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(4 + k, 5 + k) for k in range(60)])  # no two layers alike
    g = dg.draw(model(torch.randn(1, 4)).sum(), params=model)
    html = html_of(g)
    assert stored(g) <= 40_000  # all outputs together
    (svg,) = pictures(html)
    assert any("nodes folded" in t for t in svg_texts(svg))


def test_sparkline_glyphs_are_drawn_in_the_still_picture():
    """Each level of a sparkline is a glyph the renderer's fonts have: its PNG (what viewers
    without scripts show) differs from the empty box it draws for a missing glyph."""
    def png(text):
        return render.svg_and_png(f'digraph {{ a [shape=plaintext label="{text}"] }}', 96)[1]
    missing = png("\ue000")  # a private-use character: no font has it
    assert all(png(level) != missing for level in _picture._SPARK)


def test_sparkline_follows_the_values_on_a_log_scale():
    assert _picture.sparkline([1e-6, 1e-4, 1e-2, 1.0], width=4).startswith("\u2591\u2592\u2593\u2588")
    assert _picture.sparkline([]) == ""
    assert len(_picture.sparkline([1.0] * 500, width=32).split()[0]) == 32


# -- the renderer: a timeout is dynagraph's error, and leaves no process ----------------

def test_renderer_timeout_raises_our_error_and_kills_the_renderer(fresh_renderer, tmp_path):
    pidfile = tmp_path / "pid"
    slow = tmp_path / "slow-dot"
    slow.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nsleep 30\n")
    slow.chmod(slow.stat().st_mode | stat.S_IXUSR)
    fresh_renderer.setenv("DYNAGRAPH_DOT", str(slow))
    start = time.perf_counter()
    with pytest.raises(render.RenderTimeoutError, match=r"did not lay out a graph of 2 nodes .* within 0.5 s.*Draw less"):
        render.pipe('digraph {\n  n0 [label="a"]\n  n1 [label="b"]\n  n0 -> n1\n}', "svg", timeout=0.5)
    assert time.perf_counter() - start < 10
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the renderer is gone (killed and reaped)


def test_failing_renderer_message_is_bounded(fresh_renderer, tmp_path):
    noisy = tmp_path / "noisy-dot"
    noisy.write_text("#!/bin/sh\nhead -c 100000 /dev/zero | tr '\\0' x >&2\nexit 3\n")
    noisy.chmod(noisy.stat().st_mode | stat.S_IXUSR)
    fresh_renderer.setenv("DYNAGRAPH_DOT", str(noisy))
    with pytest.raises(RuntimeError, match="noisy-dot -Tsvg failed") as info:
        render.pipe("digraph { a }", "svg")
    assert len(str(info.value)) < 2100


def step_to(page, k: int) -> None:
    """Move the page's (first) stepper slider to step index ``k``, as a drag would."""
    page.evaluate("k => { const s = document.querySelector('input[type=range]'); s.value = k;"
                  " s.dispatchEvent(new Event('input')); }", k)


@pytest.mark.browser
def test_outputs_sharing_a_page_each_step_on_their_own(tmp_path):
    from _chromium import check_stepper, chromium, open_html
    rec, _ = recording()
    x = torch.ones(3, requires_grad=True)
    with dg.live() as other:
        torch.tanh(x * 2).sum()
    html = html_of(rec)
    body = html + html + html_of(other) + html_of(dg.draw((x * 3).sum()))
    with chromium() as browser:
        watch, page = open_html(browser, body, tmp_path)
        steppers = page.locator("div.dg-stepper")
        assert steppers.count() == 3
        for k in range(3):  # each starts at its last step, whatever the others did
            assert check_stepper(steppers.nth(k))["steps"] == len(rec.steps)
        assert page.locator("div.dg-out svg g.node[aria-label]").count() > 0  # every picture: SVG with details
        zoom = page.locator("div.dg-out").nth(3)
        zoom.locator('button[data-act="zin"]').click()
        assert zoom.locator(".dg-zoom").text_content() == "125%"
        watch.close()
    assert watch.errors == [] and watch.blocked == []


def test_a_loop_over_many_layers_shares_step_texts_and_stays_small():
    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(300) for m in (nn.Linear(8, 8), nn.ReLU())])
    with dg.live(model) as rec:
        model(torch.randn(2, 8)).sum()
    html = html_of(rec)
    data = check(rec).payload()
    names = [n.name for n in rec.nodes]
    assert [t for t, _ in page_steps(html)] == [s.text(names, rec.module_types) for s in rec.steps]
    assert len(data["texts"]) < 10 and len(data["fills"]) == 600  # one text per op, a name per layer
    assert stored_bytes(rec._outputs()) < 100_000


@pytest.mark.browser
def test_rolled_stepper_counts_iterations_in_the_page(lstm200, tmp_path):
    from _chromium import chromium, open_html
    rec = lstm200["live"]
    data = page_data(html_of(rec))
    middle = next(i for i, k in enumerate(data["k"]) if k == 137)  # a step of iteration 138
    with chromium() as browser:
        watch, page = open_html(browser, html_of(rec), tmp_path, name="rolled.html")
        step_to(page, middle)
        info = page.locator(".dg-info").text_content()
        lit = page.locator("g.node.dg-lit").count()
        watch.close()
    assert info == f"step {middle + 1} / {len(rec.steps)} \u00b7 iteration 138 of 200", info
    assert lit == len(expand_steps(data)[middle][1]) > 0  # the representative's nodes light
    assert watch.errors == []


def test_static_html_holds_no_controls_only_the_hint_and_the_steps():
    rec, _ = recording()
    static = outputs_of(rec)["steps"]["text/html"]
    assert "<button" not in static and "<input" not in static and "<script" not in static  # the script builds them
    assert (f"The picture cannot step here. In Jupyter, once this cell has run or the notebook is trusted, "
            f"it plays its {len(rec.steps):,} steps.") in static
    assert list(outputs_of(rec.graph())) == ["picture", "script"]  # a picture without steps has nothing to step


# Words in the step list that ask a reader to do what cannot be done where it shows
# (GitHub's preview, nbconvert --sanitize-html: no cell to run, no notebook to trust),
# or that speak of a stepper where there is none.
ASKS = re.compile(r"\b(run the cell|trust the notebook|the stepper plays|请运行|或者信任)", re.I)


@pytest.mark.parametrize("n, tail", [(1, ""), (20, ""), (21, "\u2026 and 1 more step"),
                                     (22, "\u2026 and 2 more steps"), (1021, "\u2026 and 1,001 more steps")])
def test_the_static_step_list_says_where_it_steps_and_counts_the_rest(n, tail):
    """The list shows where no script runs: it says where the picture steps, asks for
    nothing, and counts what it leaves out in the right number."""
    rec = _long_recording(n)
    out = outputs_of(rec)["steps"]
    where = ("The picture cannot step here. In Jupyter, once this cell has run or the notebook is trusted, "
             + ("it plays its 1 step." if n == 1 else f"it plays its {n:,} steps."))
    page = Page(out["text/html"])
    assert len(page.li) == min(n, _steps.LISTED_STEPS)
    assert where in out["text/html"] and not ASKS.search(out["text/html"] + out["text/plain"])
    lines = out["text/plain"].splitlines()  # the caption, then each step (two lines: op and shapes)
    assert [int(line.split(".")[0]) for line in lines if re.match(r"\d+\. ", line)] == list(range(1, len(page.li) + 1))
    assert (lines[-1] == tail) if tail else not lines[-1].startswith("\u2026")
    html = out["text/html"]
    assert html.endswith(f"</ol><div>{tail}</div></div>" if tail else "</ol></div>")
    # The script hides the element with the hint's id and all after it: the line, the list, the count.
    (hint,) = page.ids
    assert re.search(f'<div id="{hint}"><i>[^<]*</i></div><ol>', html)


def test_in_chinese_the_static_step_list_says_where_it_steps_and_counts_the_rest(chinese):
    for n, where, tail in [(1, "图会播放这 1 步。", None), (21, "图会逐步播放这 21 步。", "……还有 1 步"),
                           (22, "图会逐步播放这 22 步。", "……还有 2 步")]:
        out = outputs_of(_long_recording(n))["steps"]
        assert f"这里的图不能逐步播放。在 Jupyter 中，运行本单元格或信任此笔记本之后，{where}" in out["text/html"]
        assert not ASKS.search(out["text/html"] + out["text/plain"])
        assert tail is None or out["text/plain"].splitlines()[-1] == tail


def _long_recording(n):
    x = torch.ones(1, requires_grad=True)
    with dg.live(memory=True) as rec:
        y = x
        for _ in range(n):
            y = y * 1.0
    return rec


def test_a_recording_over_the_step_budget_keeps_its_first_and_last_steps_and_says_so(monkeypatch):
    monkeypatch.setattr(_steps, "MAX_STEPS", 10)
    monkeypatch.setattr(_steps, "LISTED_STEPS", 4)
    rec = _long_recording(50)
    html = html_of(rec)
    data = page_data(html)
    assert data["gap"] == [5, 40] and len(data["s"]) == len(data["k"]) == len(data["mem"]) == 10
    totals = rec.saved_by_step()
    assert data["mem"] == totals[:5] + totals[-5:]  # the same steps as the texts
    texts = [t for t, _ in page_steps(html)]
    names = [n.name for n in rec.nodes]
    want = [s.text(names) for s in rec.steps]
    assert texts == want[:5] + want[-5:]
    steps = outputs_of(rec)["steps"]
    held = "The output holds the first 5 and the last 5 of the 50 steps, so that it stays small."
    assert f"<b>50 steps</b><div>{held}</div><div id=" in steps["text/html"]  # before the part the script hides
    assert steps["text/plain"].splitlines()[:2] == ["50 steps", held]


def test_an_output_whose_step_data_is_over_the_budget_plays_fewer_steps_and_says_so(monkeypatch):
    """Thousands of steps with texts all different (a backward's norms): the stepper
    keeps its first and last steps, the picture is not folded, the whole output fits."""
    # all 602 steps: 37.5 KB of outputs; 2 steps, 30 KB (and 15 % of the budget kept for the PNG)
    monkeypatch.setattr(_page, "MAX_BYTES", 36_000)
    torch.manual_seed(0)
    x = torch.randn(4, requires_grad=True)
    y = x
    for _ in range(300):
        y = torch.sin(y) * 1.5
    loss = y.sum()
    with dg.trace_backward(loss, params={"x": x}) as bt:
        loss.backward()
    html = html_of(bt)
    data = page_data(html)
    assert stored(bt) <= 36_000
    head, left_out = data["gap"]
    assert left_out > 0 and len(data["s"]) == len(bt.order) - left_out
    assert (f"The output holds the first {head:,} and the last {len(bt.order) - head - left_out:,} of the "
            f"{len(bt.order):,} steps") in outputs_of(bt)["steps"]["text/html"]
    (svg,) = pictures(html)
    assert not any("nodes folded" in t for t in svg_texts(svg))  # the steps shrank, not the picture


@pytest.mark.slow
def test_an_80k_step_recording_stays_under_the_output_budget():
    rec = _long_recording(80_000)
    html = html_of(rec)
    assert stored(rec) < _page.MAX_BYTES
    data = page_data(html)
    played = len(data["s"])
    assert 10_000 <= played <= _steps.MAX_STEPS and data["gap"] == [played // 2, 80_000 - played]


# What of a step list shows: its caption, the line on what the output holds, the line on
# where the picture steps, the listed steps and the count of the rest.
_LIST_SHOWN_JS = """() => [...document.querySelectorAll('.dg-steps')].map(d => {
  const shown = e => !!e && e.checkVisibility();
  const divs = [...d.children].filter(e => e.tagName === 'DIV');
  return {caption: shown(d.querySelector('b')), held: shown(divs[0]), where: shown(d.querySelector('i')),
          steps: [...d.querySelectorAll('li')].filter(shown).length, rest: shown(divs[divs.length - 1])};
})"""


@pytest.mark.browser
def test_the_script_builds_the_controls_removes_the_hint_and_numbers_steps_across_a_gap(monkeypatch, tmp_path):
    """Where the script runs, the steps show once: in the stepper. It hides the plain
    list (and the line on where the picture steps, and the count of the rest), not the
    caption nor what the output holds; with JavaScript off, the page shows them all."""
    from _chromium import VIEWPORT, chromium, open_html
    monkeypatch.setattr(_steps, "MAX_STEPS", 10)
    rec = _long_recording(50)
    with chromium() as browser:
        watch, page = open_html(browser, html_of(rec), tmp_path, name="gap.html")
        hints = page.locator("[id^=dg-hint-]:visible").count()
        live = page.evaluate(_LIST_SHOWN_JS)
        acts = page.evaluate("() => [...document.querySelectorAll('button[data-act]')].map(b => b.dataset.act)")
        infos = []
        for k in (4, 5, 9):
            step_to(page, k)
            infos.append(page.locator(".dg-info").text_content())
        watch.close()
        context = browser.new_context(viewport=VIEWPORT, java_script_enabled=False)
        still = context.new_page()
        still.goto((tmp_path / "gap.html").as_uri())
        without = still.evaluate(_LIST_SHOWN_JS)
        context.close()
    assert hints == 0
    assert live == [{"caption": True, "held": True, "where": False, "steps": 0, "rest": False}]
    assert without == [{"caption": True, "held": True, "where": True, "steps": _steps.LISTED_STEPS, "rest": True}]
    assert acts == ["first", "prev", "play", "next", "last", "zout", "fit", "one", "zin"]
    assert [i.split(" \u00b7 ")[0] for i in infos] == ["step 5 / 50", "step 46 / 50", "step 50 / 50"]
    assert watch.errors == []


def test_a_rolled_parameter_lists_every_iteration_by_name_and_shape_on_hover():
    torch.manual_seed(0)
    layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(14))
    h = torch.randn(2, 4)
    for layer in layers:
        h = torch.tanh(layer(h))
    g = dg.draw(h.sum(), params=layers)
    info = page_data(html_of(g))["info"]
    (weight,) = [text for text in info.values() if "{0…13}.weight" in text]
    listed = [line.strip() for line in weight.splitlines() if line.startswith("  ")]
    names = [name for name, _ in layers.named_parameters() if name.endswith("weight")]
    want = [f"{k}: {name} (4, 4)" for k, name in enumerate(names, 1)]
    assert listed == want[:_page.LISTED_ITERATIONS] + [f"\u2026 and {14 - _page.LISTED_ITERATIONS} more"]
    (tanh,) = [text for text in info.values() if text.startswith("TanhBackward0")]
    assert "iteration: node" not in tanh  # the same op each time: nothing to list


@pytest.mark.browser
@pytest.mark.parametrize("touch", [False, True])
def test_node_details_show_at_once_on_hover_and_on_a_tap(tmp_path, touch):
    from _chromium import VIEWPORT, chromium, html_page
    rec, _ = recording()
    info = page_data(html_of(rec))["info"]
    path = tmp_path / "tip.html"
    path.write_text(html_page(html_of(rec)), encoding="utf-8")
    with chromium() as browser:
        context = browser.new_context(viewport=VIEWPORT, has_touch=touch)
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(path.as_uri())
        tip = page.locator(".dg-tip")
        assert tip.is_hidden()
        node = page.locator("div.dg-out svg g.node").first
        nid = re.search(r"dg-n(\d+)", node.get_attribute("class")).group(1)
        box = node.bounding_box()
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        if touch:
            page.touchscreen.tap(x, y)
        else:
            page.mouse.move(x, y)
        shown = tip.is_visible() and tip.text_content()  # at once: no wait, unlike an SVG <title>
        if touch:
            page.touchscreen.tap(box["x"] + box["width"] + 300, y)  # a tap on nothing hides it
        else:
            page.mouse.move(1, 1)
        hidden = tip.is_hidden()
        context.close()
    assert shown == info[nid]
    assert hidden and errors == []


# -- in Chinese: the words a learner reads, and a title Graphviz cannot draw -------------

@pytest.fixture
def chinese():
    dg.set_language("zh")
    yield
    dg.set_language("en")


def test_an_english_output_carries_no_words_and_draws_its_title_in_graphviz():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    g = dg.draw(2 * x + 1, params={"x": x}, title="compute graph")
    data = page_data(html_of(g))
    assert "words" not in data and "title" not in data  # view.js writes its English itself
    (svg,) = pictures(html_of(g))
    assert "compute graph" in svg_texts(svg)


def test_in_chinese_the_stepper_data_carries_the_words_and_the_step_list_reads_in_chinese(monkeypatch, chinese):
    monkeypatch.setattr(_steps, "LISTED_STEPS", 4)
    rec = _long_recording(6)
    words = page_data(html_of(rec))["words"]
    assert words["label"] == {"prev": "\u2039 上一步", "play": "播放", "next": "下一步 \u203a", "fit": "适应宽度"}
    assert set(words["title"]) == {"first", "prev", "play", "next", "last", "zout", "fit", "one", "zin"}
    assert (words["step"], words["iteration"]) == ("第 {k} / {n} 步", "第 {k} 次迭代（共 {n} 次）")
    assert words["keeps"] == "计算图为反向传播保留了 {bytes}"
    steps = outputs_of(rec)["steps"]
    assert "这里的图不能逐步播放。在 Jupyter 中，运行本单元格或信任此笔记本之后，图会逐步播放这 6 步。" in steps["text/html"]
    lines = steps["text/plain"].splitlines()  # a heading, then two lines a step
    assert lines[0] == "6 步" and lines[-1] == "……还有 2 步"
    assert lines[1].startswith("1. mul  [test_page.py:") and lines[2].endswith(" · 计算图为反向传播保留了 8 B")
    assert set(page_data(html_of(rec.graph()))["words"]) == {"label", "title"}  # no stepper: the zoom's
    check(rec)


def test_hover_details_read_in_chinese_with_names_and_shapes_as_they_are(chinese):
    torch.manual_seed(0)
    layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(14))
    h = torch.randn(2, 4)
    for layer in layers:
        h = torch.tanh(layer(h))
    info = page_data(html_of(dg.draw(h.sum(), params=layers)))["info"]
    (weight,) = [text for text in info.values() if "{0…13}.weight" in text]
    assert "\n张量：(4, 4) float32 cpu\n只画一次，代表 14 次迭代\n迭代：节点\n  1: 0.weight (4, 4)\n" in weight
    assert weight.endswith(f"\n  ……还有 {14 - _page.LISTED_ITERATIONS} 个")
    x = torch.ones(2, requires_grad=True)
    saved = page_data(html_of(dg.draw(x.exp().sum(), show_saved=True)))["info"].values()
    assert any(line.startswith("保存的“result”：") for text in saved for line in text.splitlines())
    model = nn.Sequential(nn.Linear(2, 2))
    with dg.live(model) as rec:
        model(torch.ones(1, 2)).sum()
    texts = page_data(html_of(rec))["info"].values()
    assert any("模块：0" in t.splitlines() for t in texts)


def _ink(im, box=None):
    """The dark pixels of ``im`` (or its ``box``), cropped to where they are, as 0/255."""
    from PIL import ImageOps
    gray = ImageOps.grayscale(im.crop(box) if box else im)
    mask = gray.point(lambda v: 255 if v < 128 else 0)
    return mask.crop(mask.getbbox())


def _same_ink(a, b) -> float:
    """How much two ink masks agree (intersection over union, after resizing ``b`` to ``a``)."""
    from PIL import ImageChops
    b = b.resize(a.size)
    both = ImageChops.logical_and(a.convert("1"), b.convert("1")).histogram()[-1]
    either = ImageChops.logical_or(a.convert("1"), b.convert("1")).histogram()[-1]
    return both / either


def _font_render(text, font):
    """``text`` drawn by Pillow in ``font``, black on white."""
    from PIL import Image, ImageDraw
    im = Image.new("RGB", (400, 60), "white")
    ImageDraw.Draw(im).text((10, 10), text, fill="black", font=font)
    return im


def test_a_chinese_title_is_drawn_above_the_png_by_pillow_and_above_the_svg_by_the_script():
    fonts = pytest.importorskip("pylopdf_fonts_zh_cn")
    from PIL import Image, ImageFont
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    title = "计算图，批量 64"
    g = dg.draw(2 * x + 1, params={"x": x}, title=title)
    outs = outputs_of(g)
    data = page_data(html_of(g))
    (svg,) = pictures(html_of(g))
    assert data["title"] == title and title not in "".join(svg_texts(svg))  # the script shows it
    assert f'label="{title}"' in g.to_dot()  # to_dot, .svg() and .save() keep it in the DOT
    png = Image.open(io.BytesIO(base64.b64decode(outs["picture"]["image/png"]))).convert("RGB")
    plain = Image.open(io.BytesIO(base64.b64decode(outputs_of(dg.draw(2 * x + 1, params={"x": x}))
                                                   ["picture"]["image/png"]))).convert("RGB")
    strip = png.height - plain.height
    assert strip > 8 and data["png"] == list(png.size)
    drawn = _ink(png, (0, 0, png.width, strip))
    size = round(_png.TITLE_PT * _png.PNG_DPI / 72)
    noto = _ink(_font_render(title, ImageFont.truetype(str(fonts.sans_path()), size)))
    dejavu = _ink(_font_render(title, ImageFont.truetype(
        str(Path(matplotlib.get_data_path()) / "fonts/ttf/DejaVuSans.ttf"), size)))  # no Chinese: boxes
    assert abs(drawn.width - noto.width) <= 2 and abs(drawn.height - noto.height) <= 2
    assert _same_ink(drawn, noto) > 0.8 > 0.5 > _same_ink(drawn, dejavu)


def _raster(dot, dpi):
    """``dot`` drawn by Graphviz at ``dpi`` as an RGB Pillow image."""
    from PIL import Image
    return Image.open(io.BytesIO(render.svg_and_png(dot, dpi)[1])).convert("RGB")


def test_an_english_title_drawn_by_pillow_reads_as_graphviz_draws_it():
    """A title with Chinese in it may hold English too (a memory line, a batch size):
    Pillow draws it at Graphviz's size and place."""
    pytest.importorskip("pylopdf_fonts_zh_cn")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    title = "compute graph, batch 64"
    by_graphviz = _raster(_page._drawn(record_of(dg.draw(2 * x + 1, title=title)), _dot.Overlay()).dot, 72)
    untitled = _raster(_page._drawn(record_of(dg.draw(2 * x + 1)), _dot.Overlay()).dot, 72)
    by_pillow = _png._titled(untitled, title, 72)
    assert by_pillow.height == by_graphviz.height  # the same room above the picture
    rows = by_graphviz.height - untitled.height
    a, b = (im.convert("L").point(lambda v: 255 if v < 128 else 0).crop((0, 0, im.width, rows)).getbbox()
            for im in (by_graphviz, by_pillow))
    assert abs(a[1] - b[1]) <= 2 and abs(a[3] - b[3]) <= 2  # the same lines: top and foot of the ink
    assert abs((a[2] - a[0]) - (b[2] - b[0])) <= 0.1 * (a[2] - a[0])  # about as wide


def test_without_the_font_a_chinese_title_stays_in_graphviz(monkeypatch):
    from dynagraph import _fonts
    monkeypatch.setattr(_fonts, "cjk_font", lambda: None)
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    data = page_data(html_of(dg.draw(2 * x + 1, title="计算图")))
    assert "title" not in data and "计算图" in svg_texts(base64.b64decode(data["svg"]).decode())


@pytest.mark.browser
def test_a_chinese_stepper_shows_its_words_and_title_in_the_page(tmp_path, chinese):
    pytest.importorskip("pylopdf_fonts_zh_cn")
    from _chromium import chromium, open_html
    torch.manual_seed(0)
    cell = nn.RNNCell(2, 2)
    with dg.live(cell, memory=True) as rec:
        h = torch.zeros(1, 2)
        for _ in range(40):
            h = cell(torch.ones(1, 2), h)
    data = page_data(html_of(rec.graph(title="循环")))
    body = html_of(rec) + html_of(rec.graph(title="循环"))
    steps = expand_steps(page_data(html_of(rec)))
    k = next(i for i, (_, _, b, it) in enumerate(steps) if b >= 0 and it == 9)
    with chromium() as browser:
        watch, page = open_html(browser, body, tmp_path, name="zh.html")
        step_to(page, k)
        info = page.locator(".dg-info").first.text_content()
        now = page.locator(".dg-now").first.text_content()
        buttons = page.evaluate("() => [...document.querySelectorAll('.dg-stepper button')]"
                                ".map(b => [b.textContent, b.title])")
        captions = [(t.text_content(), t.is_visible(), t.evaluate("e => getComputedStyle(e).fontSize"))
                    for t in page.locator(".dg-title").all()]
        watch.close()
    assert info == f"第 {k + 1} / {len(steps)} 步 · 第 10 次迭代（共 {page_data(html_of(rec))['blocks'][0]} 次）"
    assert re.search(r"  · 计算图为反向传播保留了 [\d.]+ [KMG]?B$", now), now
    assert buttons[:5] == [["\u00ab", "第一步"], ["\u2039 上一步", "上一步"], ["播放", "播放或暂停"],
                           ["下一步 \u203a", "下一步"], ["\u00bb", "最后一步"]]
    assert buttons[6] == ["适应宽度", "按宽度缩放图片"]
    # one caption per view, drawn outside Graphviz (no Chinese glyphs there): the recording's
    # memory summary, and the graph's title above its own
    assert [text.split("计算图")[0].strip() for text, _, _ in captions] == ["", "循环"], captions
    assert all(visible and size == "13.3333px" for _, visible, size in captions)  # 10 pt, as Graphviz's title
    assert data["title"].startswith("循环\n计算图为反向传播保留了") and watch.errors == []


# -- a tall stepper keeps what it lights in view ----------------------------------------

def lesson07_replay():
    """Lesson 07's backward replay (_helpers.LESSON07_REPLAY): 21 steps, a picture taller
    than its canvas."""
    names = {}
    exec(LESSON07_REPLAY, names)  # the test's own source text
    return names["bt"]


# Where each lit node of a stepper is, and whether a reader sees all of it: its box is
# inside the canvas's inside (no scroll bars) and the window, and the point at each of
# its corners (2 px in) and at its centre hits the canvas, not something over it (the
# bar and the step's line stick over the canvas when the page scrolls); its centre hits
# the node. Measured by hit tests, not by view.js's own sums.
_LIT_SEEN_JS = """root => {
  const canvas = root.querySelector('.dg-canvas'), c = canvas.getBoundingClientRect();
  const inside = {left: c.left + canvas.clientLeft, top: c.top + canvas.clientTop};
  inside.right = inside.left + canvas.clientWidth; inside.bottom = inside.top + canvas.clientHeight;
  const W = document.documentElement.clientWidth, H = document.documentElement.clientHeight;
  return [...root.querySelectorAll('g.node.dg-lit')].map(g => {
    const b = g.getBoundingClientRect();
    const within = b.left >= Math.max(inside.left, 0) && b.right <= Math.min(inside.right, W)
                   && b.top >= Math.max(inside.top, 0) && b.bottom <= Math.min(inside.bottom, H);
    const hits = [[b.left + 2, b.top + 2], [b.right - 2, b.top + 2], [b.left + 2, b.bottom - 2],
                  [b.right - 2, b.bottom - 2]].map(([x, y]) => document.elementFromPoint(x, y));
    const centre = document.elementFromPoint((b.left + b.right) / 2, (b.top + b.bottom) / 2);
    return {node: (g.getAttribute('class').match(/dg-n\\d+/) || ['?'])[0],
            box: [b.left, b.top, b.right, b.bottom].map(Math.round),
            canvas: [inside.left, inside.top, inside.right, inside.bottom].map(Math.round),
            seen: within && hits.every(h => h && canvas.contains(h)) && !!centre && g.contains(centre)};
  });
}"""


def _check_taller_than_canvas(stepper) -> None:
    """The stepper's picture is much taller than its canvas (what the follow tests need)."""
    sizes = stepper.locator(".dg-canvas").evaluate("c => [c.scrollHeight, c.clientHeight]")
    assert sizes[0] > 1.4 * sizes[1], f"the picture ({sizes[0]} px) is not much taller than its canvas ({sizes[1]})"


def _lit_problems(stepper, where: str) -> list[str]:
    """What a reader cannot see of the stepper's lit nodes now (empty: all of it)."""
    lit = stepper.evaluate(_LIT_SEEN_JS)
    at = stepper.locator(".dg-info").text_content()
    if not lit:
        return [f"{where}, {at}: no node lit"]
    return [f"{where}, {at}: lit node {n['node']} at {n['box']} is not all in view (canvas {n['canvas']})"
            for n in lit if not n["seen"]]


# Three layouts: the page scrolls (the docs), or a box inside it does (JupyterLab's
# notebook), scrolled so that the stepper's bar and step line stick over the top of its
# canvas; and `jupyter nbconvert --to html` of a notebook holding the outputs.
_LAYOUTS = {
    "page": "<p style='height:300px'>prose</p>{outputs}<p style='height:1500px'>more prose</p>",
    "scroller": ("<div class='scroller' style='height:100vh;overflow:auto'><p style='height:300px'>prose</p>"
                 "{outputs}<p style='height:1500px'>more prose</p></div>"),
    "nbconvert": None,
}


def _tall_page(tmp_path, layout: str, view) -> Path:
    """A page holding ``view``'s outputs in ``layout`` (see _LAYOUTS)."""
    from _chromium import html_page
    if layout != "nbconvert":
        path = tmp_path / "tall.html"
        path.write_text(html_page(_LAYOUTS[layout].format(outputs=html_of(view)), body_style="margin:0"),
                        encoding="utf-8")
        return path
    import subprocess
    import sys

    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
    outs = [new_output("display_data", data=o.data, metadata=o.metadata) for o in view._outputs()]
    nb = new_notebook(cells=[new_markdown_cell("prose " * 200), new_code_cell("bt", outputs=outs),
                             new_markdown_cell("more prose " * 400)])
    nbformat.write(nb, tmp_path / "tall.ipynb")
    proc = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "tall.ipynb"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp_path / "tall.html"


@pytest.mark.browser
@pytest.mark.parametrize("layout", list(_LAYOUTS))
def test_a_tall_stepper_keeps_what_it_lights_in_view(tmp_path, layout):
    """Lesson 07's replay draws a picture taller than its canvas (70% of the window):
    at every step, going forward from the first and back from the last, every lit node
    is all in view, on load too; a drag still pans and a zoom still zooms, and a step
    whose node is in view does not move the picture."""
    from _chromium import ARTIFACTS, chromium, open_file
    bt = lesson07_replay()
    assert len(bt.order) == 21
    path = _tall_page(tmp_path, layout, bt)
    problems = []
    with chromium() as browser:
        watch, page = open_file(browser, path)
        stepper = page.locator("div.dg-stepper")
        canvas = stepper.locator(".dg-canvas")
        _check_taller_than_canvas(stepper)
        page.wait_for_timeout(100)
        problems += _lit_problems(stepper, "on load")
        moved = page.evaluate("() => [scrollY, (document.querySelector('.scroller') || {}).scrollTop || 0]")
        assert moved == [0, 0], f"the page scrolled on load: {moved}"  # only a reader's step may move it
        if layout != "scroller":
            stepper.evaluate("r => r.scrollIntoView({block: 'start'})")
        else:  # the output's top 250 px above the box's: the bar and step line stick over the canvas
            page.evaluate("() => { const s = document.querySelector('.scroller'), r = document.querySelector('.dg-out');"
                          " s.scrollTop += r.getBoundingClientRect().top + 250; }")
            stuck = page.evaluate("() => document.querySelector('.dg-now').getBoundingClientRect().bottom"
                                  " > document.querySelector('.dg-canvas').getBoundingClientRect().top")
            assert stuck, "the step line does not stick over the canvas: the layout tests nothing"
        stepper.locator('button[data-act="first"]').click()
        problems += _lit_problems(stepper, "first")
        for _ in range(20):
            stepper.locator('button[data-act="next"]').click()
            problems += _lit_problems(stepper, "next")
        for _ in range(20):
            stepper.locator('button[data-act="prev"]').click()
            problems += _lit_problems(stepper, "prev")
        # A step whose lit node is in view moves nothing: stepping on from the first
        # step, the picture moves fewer times than there are steps.
        tops = []
        stepper.locator('button[data-act="first"]').click()
        for _ in range(20):
            tops.append(canvas.evaluate("c => c.scrollTop"))
            stepper.locator('button[data-act="next"]').click()
        moves = sum(a != b for a, b in itertools.pairwise(tops))
        # The reader's own pan (a drag) and zoom still work, and stay until a step needs another place.
        stepper.locator('button[data-act="first"]').click()
        before = canvas.evaluate("c => c.scrollTop")
        box = canvas.bounding_box()
        up = 1 if before > 200 else -1  # (drag the picture down: it scrolls up)
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        page.mouse.move(x, y)
        page.mouse.down()
        page.mouse.move(x, y + up * 120, steps=5)
        page.mouse.up()
        dragged = canvas.evaluate("c => c.scrollTop")
        page.wait_for_timeout(300)
        kept = canvas.evaluate("c => c.scrollTop")
        stepper.locator('button[data-act="zin"]').click()
        zoom = stepper.locator(".dg-zoom").text_content()
        stepper.locator('button[data-act="next"]').click()
        problems += _lit_problems(stepper, "next after a drag and a zoom")
        # (nbconvert's page loads require.js and MathJax from a CDN: blocked here)
        errors = [e for e in watch.errors if not (watch.blocked and "net::ERR_FAILED" in e)]
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"tall-stepper-{layout}.png"))
        watch.close()
    assert not problems, f"{len(problems)} steps light nodes out of view:\n" + "\n".join(problems)
    assert 0 < moves < 19, f"the picture moved at {moves} of 19 steps: it should move only when the lit node is out of view"
    assert abs(dragged - before) > 100 and kept == dragged, (before, dragged, kept)
    assert zoom == "125%" and errors == []


# -- a view's budget is all it publishes; the PNG is as readable as the SVG at 1:1 ---------

def _png_image(outs):
    from PIL import Image
    (pic,) = [o for o in outs if o.metadata["dynagraph"] == "picture"]
    return Image.open(io.BytesIO(base64.b64decode(pic.data["image/png"]))).convert("RGB")


def _svg_size_px(outs):
    """The size of the view's SVG at 1:1 in CSS pixels (1 pt = 4/3 px), as its script draws it."""
    svg = base64.b64decode(data_of(outs)["svg"]).decode()
    w, h = re.search(r'<svg width="(\d+)pt" height="(\d+)pt"', svg).groups()
    return round(int(w) * 4 / 3), round(int(h) * 4 / 3)


def test_the_png_draws_the_picture_at_the_size_the_svg_shows_at_1_to_1():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    g = dg.draw((2 * x + 1).sum(), params={"x": x})
    outs = g._outputs()
    png, (w, h) = _png_image(outs), _svg_size_px(outs)
    assert abs(png.width - w) <= 1 and abs(png.height - h) <= 1  # (72 dpi drew it at 3/4 of this)


def test_a_tall_picture_is_cropped_not_shrunk_and_says_so(monkeypatch):
    monkeypatch.setattr(_page, "MAX_BYTES", 80_000)
    x = torch.ones(3, requires_grad=True)
    y = x
    for k in range(40):  # a chain of 80 ops, one node wide
        y = (y.sin() if k % 3 else y.exp()) * (k + 1)
    g = dg.draw(y.sum(), params={"x": x}, roll=False, max_nodes=None)
    outs = g._outputs()
    assert stored_bytes(outs) <= 80_000
    png, (w, h) = _png_image(outs), _svg_size_px(outs)
    assert abs(png.width - w) <= 1 and png.height < 0.8 * h  # as wide as at 1:1: its top only
    strip = [png.getpixel((x, png.height - 3)) for x in range(png.width)]
    note = [c for c in strip if max(abs(a - b) for a, b in zip(c, (255, 243, 191))) <= 4]  # (its palette's)
    assert len(note) > 0.5 * png.width  # the note's strip at its foot
    ink = png.crop((0, png.height - 30, png.width, png.height)).convert("L").point(lambda v: 255 if v < 100 else 0)
    assert ink.getbbox() is not None  # with text in it
    data = page_data(html_of(g))
    assert data["png"] == list(png.size)  # the script still finds and hides it


def test_the_crop_note_is_a_strip_under_the_shown_part_that_wraps_to_its_width(monkeypatch):
    from PIL import Image
    notes = []
    real = _png.tr
    monkeypatch.setattr(_png, "tr", lambda text, **kw: notes.append(real(text, **kw)) or notes[-1])
    top = Image.new("RGB", (300, 200), "white")
    tall = _png._cropped(top.copy(), (300, 900))
    wide = _png._cropped(top.copy(), (900, 900))
    assert notes == ["Cropped: the top 200 px of a 300 x 900 px picture. The whole picture shows in Jupyter once this "
                     "cell has run or the notebook is trusted.",
                     "Cropped: the top 300 x 200 px of a 900 x 900 px picture. The whole picture shows in Jupyter "
                     "once this cell has run or the notebook is trusted."]
    assert tall.width == wide.width == 300 and tall.crop((0, 0, 300, 200)).getcolors() == [(60_000, (255, 255, 255))]
    assert tall.height - 200 > 3 * round(_png.CROP_NOTE_PT * _png.PNG_DPI / 72)  # wrapped: several lines


@pytest.mark.parametrize("budget", [6_000, 20_000, 60_000])
def test_every_view_fits_the_budget_in_all_its_outputs_whatever_it_holds(monkeypatch, budget):
    """Nothing left to shrink (a few nodes with a 40,000-character title; a long loop's
    norms; many steps): the view still publishes at most the budget in all, its
    picture's text first."""
    monkeypatch.setattr(_page, "MAX_BYTES", budget)
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    titled = dg.draw((2 * x + 1).sum(), params={"x": x}, title="t" * 40_000)
    y = x
    for _ in range(200):
        y = torch.sin(y) * 1.5
    loss = y.sum()
    with dg.trace_backward(loss, params={"x": x}) as bt:
        loss.backward()
    with dg.live() as rec:
        z = x
        for _ in range(300):
            z = z * 1.01
    for view in (titled, bt, rec):
        outs = view._outputs()
        assert stored_bytes(outs) <= budget, (view, [stored_bytes([o]) for o in outs])
        assert any(o.metadata["dynagraph"] == "picture" and o.data["text/plain"] for o in outs)


def test_a_view_runs_the_renderer_once_for_its_svg_and_png(monkeypatch):
    runs = []
    real = render._communicate
    monkeypatch.setattr(render, "_communicate", lambda args, *rest: runs.append(args) or real(args, *rest))
    render.clear_cache()
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    outs = dg.draw((2 * x + 1).sum(), params={"x": x})._outputs()
    assert len(runs) == 1 and "-Tsvg" in runs[0] and "-Tpng" in runs[0]
    assert data_of(outs)["svg"] and _png_image(outs).width > 0


def test_a_big_dot_lays_out_its_svg_alone_then_rasterizes_its_png_from_the_same_text(monkeypatch):
    monkeypatch.setattr(_png, "ONE_RUN_DOT", 100)  # (as a picture too big for one run)
    runs = []
    real = render._communicate
    monkeypatch.setattr(render, "_communicate", lambda args, text, *rest: runs.append((args, text)) or
                        real(args, text, *rest))
    render.clear_cache()
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    outs = dg.draw((2 * x + 1).sum(), params={"x": x})._outputs()
    assert [args[1:] for args, _ in runs] == [["-Tsvg"], ["-Tpng"]]
    (_, svg_text), (_, png_text) = runs
    assert png_text.replace("\n  dpi=96;", "", 1) == svg_text  # (the whole picture: no viewport)
    assert data_of(outs)["svg"] and _png_image(outs).width > 0
    one_run = _png_image(outs)
    monkeypatch.undo()
    render.clear_cache()
    assert _png_image(dg.draw((2 * x + 1).sum(), params={"x": x})._outputs()).tobytes() == one_run.tobytes()


def test_one_run_or_two_is_decided_by_the_pictures_nodes_not_its_dots_length(monkeypatch):
    runs = []
    real = render._communicate
    monkeypatch.setattr(render, "_communicate", lambda args, *rest: runs.append(args[1:]) or real(args, *rest))
    render.clear_cache()
    few = "digraph {\n  a [label=a]\n  b [label=b]\n  a -> b\n  // " + "x" * 25_000 + "\n}\n"
    svg, png = _png.laid_out(few)  # a long DOT (a replay's carries each step's ids) of two nodes
    assert len(runs) == 1 and "-Tpng" in runs[0] and png.startswith(b"\x89PNG")
    runs.clear()
    many = "digraph {\n" + "".join(f"  n{i} [label={i}]\n" for i in range(_png.ONE_RUN_NODES + 1)) + "}\n"
    svg, png = _png.laid_out(many)  # a short DOT of many nodes: its PNG may be cropped, made later
    assert runs == [["-Tsvg"]] and png == b"" and svg.rstrip().endswith(b"</svg>")


def test_the_pngs_palette_keeps_a_thin_strip_at_its_foot():
    from PIL import Image
    im = Image.new("RGB", (40, 100), "white")
    im.paste((217, 72, 15), (0, 43, 40, 45))  # a 2-px line between the rows the palette samples
    im.paste((30, 60, 200), (0, 0, 40, 20))
    shown = Image.open(io.BytesIO(base64.b64decode(_png._encoded(im, foot=100 - 43)))).convert("RGB")
    assert shown.getpixel((5, 43)) == (217, 72, 15) and shown.getpixel((5, 44)) == (217, 72, 15)
    assert shown.getpixel((5, 5)) == (30, 60, 200) and shown.getpixel((5, 80)) == (255, 255, 255)


def test_the_png_is_the_renderers_picture_in_its_palette():
    from PIL import Image, ImageChops
    x = torch.ones(3, requires_grad=True)
    y = x
    for k in range(6):
        y = (y.sin() if k % 2 else y.exp()) * (k + 1)
    g = dg.draw(y.sum(), params={"x": x}, roll=False)
    outs = g._outputs()
    png = _png_image(outs)
    (pic,) = [o for o in outs if o.metadata["dynagraph"] == "picture"]
    stored = Image.open(io.BytesIO(base64.b64decode(pic.data["image/png"])))
    assert stored.mode == "P" and len(stored.getcolors(256)) <= _png.PNG_COLOURS
    raw = Image.open(io.BytesIO(render.svg_and_png(_page._drawn(record_of(g), _dot.Overlay(), True).dot, _png.PNG_DPI)[1]))
    diff = ImageChops.difference(png, raw.convert("RGB")).convert("L")
    assert png.size == raw.size
    assert sum(1 for v in diff.get_flattened_data() if v > 24) <= 0.001 * png.width * png.height  # (64 colours)


def test_a_cropped_picture_rasterizes_about_the_rows_it_keeps_and_they_are_the_whole_pictures(monkeypatch):
    from PIL import Image, ImageChops
    monkeypatch.setattr(_page, "MAX_BYTES", 80_000)
    monkeypatch.setattr(_png, "ONE_RUN_DOT", 100)  # (as a picture too big for one run)
    x = torch.ones(3, requires_grad=True)
    y = x
    for k in range(40):  # a chain of 80 ops, one node wide
        y = (y.sin() if k % 3 else y.exp()) * (k + 1)
    g = dg.draw(y.sum(), params={"x": x}, roll=False, max_nodes=None)
    rasters = []
    real = render.png_top
    monkeypatch.setattr(render, "png_top", lambda *a, **k: rasters.append(a) or real(*a, **k))
    render.clear_cache()
    outs = g._outputs()
    png, (w, h) = _png_image(outs), _svg_size_px(outs)
    rows = [a[3] for a in rasters]
    assert rows and all(r is not None and r < 0.6 * h for r in rows), (rows, h)
    kept = png.height - 60  # (at most the note's strip under it)
    assert kept <= max(rows) <= 2 * png.height, (rows, png.size)
    dot, svg = rasters[-1][:2]
    whole = Image.open(io.BytesIO(real(dot, svg, 96))).convert("RGB")
    diff = ImageChops.difference(png.convert("RGB").crop((0, 0, w, kept)), whole.crop((0, 0, w, kept)))
    assert sum(1 for v in diff.convert("L").getdata() if v > 64) <= 0.002 * w * kept  # (64 colours)


def data_of(outs):
    (script,) = [o for o in outs if o.metadata["dynagraph"] == "script"]
    return page_data(f"<script>{script.data['application/javascript']}</script>")


def test_a_raster_too_big_for_pillow_leaves_the_picture_its_text(monkeypatch):
    from PIL import Image
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1_000)  # (Pillow refuses twice this: a "decompression bomb")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    outs = dg.draw((2 * x + 1).sum(), params={"x": x})._outputs()
    (pic,) = [o for o in outs if o.metadata["dynagraph"] == "picture"]
    assert set(pic.data) == {"text/plain"} and "png" not in data_of(outs)
