"""stepper: the HTML parsed back and checked: nesting, steps, SVG classes, ids, no network."""

import json
import re
from collections import Counter
from html.parser import HTMLParser

import pytest
import torch
from torch import nn

import dynagraph as dg
from dynagraph.stepper import stepper_html

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
        (data,) = [d for tag, a, d in self.raw if tag == "script" and a.get("class") == "dg-data"]
        return json.loads(data)


def check(html, steps):
    """Everything a stepper page must satisfy; returns the parsed page."""
    page = Page(html)
    payload = page.payload()
    assert payload["steps"] == steps
    assert page.li == [s["text"] for s in steps]  # the no-JavaScript list, in order
    assert page.starts["svg"] == 1 and html.count("<svg") == 1
    for s in steps:
        for nid in s["nodes"]:
            assert f"dg-n{nid}" in page.classes, nid
    for tag, name, value in page.attrs:  # namespaces are URLs; nothing may load from one
        if re.search(r"https?://", value):
            assert name.startswith("xmlns"), (tag, name, value)
    for _, _, text in page.raw:
        assert not re.search(r"https?://|@import|fetch\(|XMLHttpRequest", text)
    assert len(page.ids) == len(set(page.ids)), Counter(page.ids).most_common(3)
    return page


def recording():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with dg.live(params={"x": x}) as rec:
        y = (2 * x + 1).sum()
    return rec, y


def steps_of(rec):
    names = [n.name for n in rec.nodes]
    return [{"text": f"{s.index}: {s.text(names, rec.module_types)}", "nodes": s.nodes} for s in rec.steps]


def test_recording_stepper_is_well_formed():
    rec, _ = recording()
    page = check(rec.stepper(title="2x + 1"), steps_of(rec))
    assert page.payload()["mode"] == "reveal"
    assert sorted(int(c[4:]) for c in page.classes if re.fullmatch(r"dg-n\d+", c)) == \
        [n.id for n in rec.nodes]


def test_backward_stepper_is_well_formed():
    rec, y = recording()
    with dg.trace_backward(y) as bt:
        y.backward()
    html = bt.stepper()
    page = Page(html)
    steps = page.payload()["steps"]
    assert [s["nodes"] for s in steps] == [[i] for i in bt.order]
    assert page.payload()["mode"] == "light"
    check(html, steps)


def test_step_text_cannot_break_out_of_the_page():
    svg = '<svg xmlns="http://www.w3.org/2000/svg"><g id="n0" class="node dg-n0"></g></svg>'
    steps = [{"text": "y = x < 2 </script><script>alert(1)</script> & <!--", "nodes": [0]}]
    html = stepper_html(svg, steps, title="<b>title</b>")
    check(html, steps)
    assert "<b>&lt;b&gt;title&lt;/b&gt;</b>" in html


def test_two_steppers_in_one_page_share_no_id():
    rec, y = recording()
    x = torch.ones(2, requires_grad=True)
    with dg.live() as other:  # same size as ``rec``: same node ids
        (3 * x - 1).sum()
    assert (len(other.steps), len(other.nodes)) == (len(rec.steps), len(rec.nodes))
    page = rec.stepper() + other.stepper() + rec.stepper()  # the same recording shown twice
    ids = Page(page).ids
    assert len(ids) == len(set(ids)), Counter(ids).most_common(3)
    roots = re.findall(r'<div class="dg-stepper" id="([^"]+)"', page)
    assert len(set(roots)) == 3
    for uid in roots:  # each script finds its own stepper
        assert f"getElementById({json.dumps(uid)})" in page


def test_stepper_of_a_50_node_30_step_graph_is_small():
    torch.manual_seed(0)
    layers = [nn.Linear(4, 4) for _ in range(9)]
    with dg.live() as rec:
        h = torch.randn(2, 4)
        for layer in layers:
            h = torch.relu(layer(h)) * 0.5
        h.sum()
    html = rec.stepper()
    print(f"\nstepper: {len(rec.nodes)} nodes, {len(rec.steps)} steps, {len(html) / 1024:.1f} KB")
    assert 45 <= len(rec.nodes) <= 60 and 25 <= len(rec.steps) <= 35
    check(html, steps_of(rec))
    assert len(html.encode()) < 100 * 1024


def test_bad_mode_raises():
    with pytest.raises(ValueError, match="mode must be 'reveal' or 'light'; got 'fade'"):
        stepper_html("<svg></svg>", [{"text": "a", "nodes": []}], mode="fade")


def test_no_steps_raises():
    with pytest.raises(ValueError, match="nothing to step through: the recording has no steps"):
        stepper_html("<svg></svg>", [])


def test_the_checker_catches_bad_nesting():
    for bad in ("<div><span></div></span>", "<div><b>open", "<ol><li>x</ol>", "<input></input>"):
        with pytest.raises(AssertionError):
            Page(bad)
    Page('<div><input type="range"><svg><path d=""/></svg></div>')


@pytest.mark.browser
def test_steppers_sharing_a_page_each_step_on_their_own(tmp_path):
    from _chromium import Watch, check_stepper, chromium
    rec, _ = recording()
    x = torch.ones(3, requires_grad=True)
    with dg.live() as other:
        torch.tanh(x * 2).sum()
    path = tmp_path / "page.html"
    path.write_text("<!doctype html><html><head><meta charset='utf-8'></head><body>"
                    + rec.stepper() + rec.stepper() + other.stepper() + "</body></html>")
    with chromium() as browser:
        watch = Watch(browser)
        page = watch.new_page()
        page.goto(path.as_uri())
        steppers = page.locator("div.dg-stepper")
        assert steppers.count() == 3
        for k in range(3):  # each starts at its last step, whatever the others did
            assert check_stepper(steppers.nth(k))["steps"] == 3
        watch.close()
    assert watch.errors == [] and watch.blocked == []
