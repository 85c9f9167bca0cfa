"""The Chinese edition speaks Chinese: no English words in what its stored outputs show.

Every stored output of notebooks/zh/*.ipynb is scanned: printed lines, tables, picture
titles, hover details and the stepper's words (the data of each picture's script), and the
text Graphviz draws in each picture (its SVG). A word is English when it is three or more
Latin letters and it is none of these:

- code: a name or string that the notebook's own code cells hold (``loop``, ``verdict``,
  a dict key it prints), or a code-like token (``grad_fn``, ``nn.Linear``, ``MulBackward0``,
  ``float32``, ``CamelCase``);
- a quoted PyTorch message: error outputs, warnings, text in quotes or backticks, and a
  printed line with no Chinese in it (a PyTorch, Dynamo or IPython message, a graph dump,
  a tensor) — but no output may hold the English of one of dynagraph's own messages (the
  keys of its Chinese catalogs), so dynagraph's English is found on such lines too, and
  a dynagraph object's repr (``<dynagraph.Graph: …>``, printed or stored as the plain text
  beside a picture) is read as text;
- a name from :data:`NAMES` (units, devices, library and op names, what Graphviz draws in
  nodes: it has no Chinese glyphs, so node labels are code names).
"""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path

import pytest

ZH = Path(__file__).resolve().parent.parent / "notebooks" / "zh"
NOTEBOOKS = sorted(ZH.glob("*.ipynb"))

# Names a Chinese output may show as they are: what no cell's code spells out.
NAMES = frozenset("""
    cpu cuda mps float float16 float32 float64 bfloat16 int int64 bool tensor tensors dtype
    nan inf none true false pytorch torch python jupyter jupyterlab numpy matplotlib graphviz
    autograd backward forward grad relu tanh sigmoid softmax gelu dropout lstm gru rnn mlp
    adam sgd jit script trace compile dynamo inductor eager aot oneDNN onednn mkldnn vmap
    layernorm batchnorm kaiming glorot xavier gloo nccl
    output input parameter parameters module fold custom op ops node nodes
    checkpoint hooks iter function
    zeros unbind getitem add mul pow
""".split())  # noqa: SIM905 - a list of words, read as a list
# Latin-letter units and tokens that are not words (a size, a ratio, "A/A noise")
_UNITS = re.compile(r"\b(?:\d+(?:\.\d+)?\s*(?:[KMGT]?B|ms|µs|us|ns|s|x)\b)")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.'/-]*")
_QUOTED = re.compile(r"`[^`]*`|\"[^\"\n]*\"|'[^'\n]*'|“[^”]*”|‘[^’]*’"
                     r"|(?:(?<=Error)|(?<=Warning)|(?<=报错)|(?<=警告))[：: ].*")  # after an error's name: PyTorch's
_SVG_TEXT = re.compile(r"<text[^>]*>([^<]*)</text>")
_CJK = re.compile(r"[\u3400-\u9fff]")
_CODE = re.compile(r"\w+(?:[._]\w+)+|\w+::\w+|(?<![\w.])\.\w+|\{\w*\}")  # dotted, snake_case, aten::ops, .attributes, {fields}
_REPR = "<dynagraph."  # how the repr of each of dynagraph's objects starts
# The settings in a picture's data that are not text (a stepper's mode, a theme)
_NOT_TEXT = ("svg", "png", "hint", "frames", "norms", "css", "mode", "theme", "kind", "style")


def code_words(nb: dict) -> set[str]:
    """Every word the notebook's code cells spell: names, and the words of their strings."""
    words: set[str] = set()
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"])
        words.update(w.lower() for w in re.findall(r"[A-Za-z]+", src))
    return words


def _script_texts(js: str) -> list[str]:
    """The learner-facing text in a picture's script output: its data's title, hover details,
    words and steps, and the text its SVG draws."""
    start = js.rfind("dynagraphView(")
    data, _ = json.JSONDecoder().raw_decode(js, js.index("{", start))
    texts: list[str] = []

    def walk(value: object, key: str = "") -> None:
        if key in _NOT_TEXT:
            return
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, str):
            texts.append(value)

    walk(data)
    if "svg" in data:
        svg = base64.b64decode(data["svg"]).decode()
        texts += [html.unescape(t) for t in _SVG_TEXT.findall(svg)]
    return texts


def _output_texts(out: dict, every_line: bool = False) -> list[str]:
    """What a learner reads in one stored output (error outputs and warnings are PyTorch's)."""
    kind = out["output_type"]
    if kind == "error":
        return []
    if kind == "stream":
        if out["name"] == "stderr":  # a warning: PyTorch's message, quoted as it is
            return []
        # a line with no Chinese is printed as it is: a message, a graph, a tensor
        lines = "".join(out["text"]).splitlines()
        return ["\n".join(line for line in lines if every_line or _CJK.search(line) or line.startswith(_REPR))]
    data = out.get("data", {})
    texts = []
    if data.get("text/plain", [""])[0].startswith("Exception reporting mode:"):  # IPython's %xmode
        return []
    if "application/javascript" in data:
        texts += _script_texts("".join(data["application/javascript"]))
    if "text/html" in data:
        texts.append(html.unescape(re.sub(r"<[^>]+>", " ", "".join(data["text/html"]))))
    elif "text/plain" in data:
        plain = "".join(data["text/plain"])
        if plain.startswith(_REPR) or not {"image/png", "image/svg+xml"} & data.keys():  # a picture's repr too
            texts.append(plain)
    return texts


def english_words(text: str, allowed: set[str]) -> list[str]:
    """The English words of ``text``: see the module's docstring."""
    text = _UNITS.sub(" ", _CODE.sub(" ", _QUOTED.sub(" ", text)))
    found = []
    for token in _WORD.findall(text):
        token = token.strip(".'/-")
        if len(token) < 3 or not token.isalpha() or token.lower() in allowed or token.lower() in NAMES:
            continue
        if token[1:] != token[1:].lower():  # CamelCase, UPPER: a name
            continue
        found.append(token)
    return found


def dynagraph_english() -> list[str]:
    """The start (up to its first field) of each of dynagraph's English messages that has
    three words or more: none may appear in a Chinese output."""
    from dynagraph import _language
    starts = {re.split(r"\{", key)[0].strip() for key in _language.catalog("zh")}
    return sorted(s for s in starts if len(s.split()) >= 3)


def leftovers(path: Path) -> list[str]:
    """``"cell N: word, word (text…)"`` for each output with English words."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    shown = "\n".join(text for cell in nb["cells"] for out in cell.get("outputs", [])
                      for text in _output_texts(out, every_line=True))
    problems = [f"dynagraph's English message {s!r}" for s in dynagraph_english() if s in shown]
    allowed = code_words(nb)
    for i, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []):
            for text in _output_texts(out):
                words = english_words(text, allowed)
                if words:
                    problems.append(f"cell {i}: {', '.join(dict.fromkeys(words))} in {text.strip()[:80]!r}")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_chinese_notebooks_outputs_hold_no_english(path):
    problems = leftovers(path)
    assert not problems, f"{path.name}: English in stored outputs:\n" + "\n".join(problems[:20])


def test_the_scan_finds_english():
    allowed = {"loop"}
    assert english_words("计时：batched 的速度是 loop 的 3.9 倍", allowed) == ["batched"]
    assert english_words("keeps 1.4 MB alive for backward", allowed) == ["keeps", "alive", "for"]
    assert english_words("AccumulateGrad (input)", allowed) == []  # a name, a node kind
    assert english_words("报错 `Trying to backward through the graph`", allowed) == []  # quoted
    assert english_words("×100  step 1–100: TBackward0 … TanhBackward0", allowed) == ["step"]
    assert english_words("长度 5: new vs 长度 2 in red", allowed) == ["new", "red"]


def test_the_chinese_glossary_explains_every_term_in_chinese():
    """notebooks/zh/glossary.md: every term of the English glossary, with a Chinese meaning."""
    def rows(path: Path) -> list[list[str]]:
        return [[part.strip() for part in line.strip("|").split(" | ")]
                for line in path.read_text(encoding="utf-8").splitlines()
                if line.startswith("| ") and not line.startswith(("| term", "| 术语", "| ---"))]
    english = [term for term, _, _ in rows(ZH.parent / "glossary.md")]
    chinese = rows(ZH / "glossary.md")
    assert [en for _, _, en in chinese] == english, "the same terms, in the same order"
    for term, meaning, _ in chinese:
        assert _CJK.search(term) and len(_CJK.findall(meaning)) >= 8, (term, meaning)
    zh_index = (ZH / "00_index.ipynb").read_text(encoding="utf-8")
    assert "](glossary.md)" in zh_index and "zh.d2l.ai" in (ZH / "glossary.md").read_text(encoding="utf-8")


def _drawn_texts(out: dict) -> list[str]:
    """The text Graphviz drew in one stored picture (its SVG)."""
    js = "".join(out.get("data", {}).get("application/javascript", ""))
    if "dynagraphView(" not in js:
        return []
    data, _ = json.JSONDecoder().raw_decode(js, js.index("{", js.rfind("dynagraphView(")))
    svg = base64.b64decode(data["svg"]).decode() if "svg" in data else ""
    return [html.unescape(t) for t in _SVG_TEXT.findall(svg)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_graphviz_draws_no_chinese(path):
    """Graphviz's renderer has no Chinese glyphs (boxes instead): what it draws in a node
    must be words-free in Chinese (dynagraph/_zh.py's DRAWN_BY_GRAPHVIZ)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    drawn = [t for cell in nb["cells"] for out in cell.get("outputs", []) for t in _drawn_texts(out)]
    assert not [t for t in drawn if _CJK.search(t)], f"{path.name}: Graphviz draws Chinese as boxes"


# -- The reprs a learner reads as text --------------------------------------------------


def _reprs() -> dict[str, str]:
    """The repr (or str) of each of dynagraph's objects that a notebook shows as text,
    made in the current language: a graph (with its memory summary and a rolled block),
    a recording longer than its repr lists, backward and forward replays (one with edges
    that have no norm), gradient histories, a step's memory, a diff's title, a timing."""
    import dataclasses
    from types import SimpleNamespace

    import torch
    import torch.autograd.forward_ad as fwAD
    from torch import nn

    import dynagraph as dg
    from dynagraph.live import REPR_STEPS

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    x = torch.randn(2, 3)
    out: dict[str, str] = {"graph": repr(dg.draw(model(x).sum(), params=model, memory=True))}
    h = x.requires_grad_()
    with dg.live() as rec:
        for _ in range(REPR_STEPS + 1):
            h = torch.tanh(h)
    out["recording"] = repr(rec)
    rolled = dg.draw(h.sum())
    rolled.blocks = [SimpleNamespace(label="tanh", repeats=REPR_STEPS + 1)]  # what the repr reads of a block
    out["rolled"] = repr(rolled)
    with dg.trace_backward(h.sum()) as bt:
        h.sum().backward()
    out["backward"] = repr(bt)
    meta = nn.Linear(3, 2, device="meta")
    loss = meta(torch.ones(1, 3, device="meta")).sum()
    with dg.trace_backward(loss, params=meta) as bt:
        loss.backward()
    out["backward without norms"] = repr(bt)
    with dg.trace_forward() as ft, fwAD.dual_level():
        torch.tanh(fwAD.make_dual(torch.ones(2), torch.ones(2))).sum()
    out["forward"] = repr(ft)
    for per in ("parameter", "module"):
        hist = dg.GradHistory(model, per=per)
        model(x).sum().backward()
        hist.record()
        out[f"history per {per}"] = repr(hist)

    def step() -> None:
        model.zero_grad(set_to_none=True)
        model(x).pow(2).sum().backward()

    memory = dg.step_memory(step, device="cpu")
    out["step memory"] = repr(memory)
    out["step memory on a GPU"] = repr(dataclasses.replace(memory, allocator_peak=4096))  # (its allocator's peak)
    y = torch.tensor([1.0, 2.0], requires_grad=True)
    diff = dg.diff(dg.draw(y.sin().sum()), dg.draw((y.exp().sin() + y.tanh().sin()).sum()))
    out["diff"] = f"{diff!r}\n{diff._graph().title}"
    out["timing"] = str(dg.compare(lambda: None, lambda: None, names=("plain", "batched"), rounds=3,
                                min_run_time=0.01))
    return out


def test_the_reprs_a_notebook_prints_are_in_chinese():
    import inspect

    import dynagraph as dg

    code = inspect.getsource(_reprs).replace(_reprs.__doc__ or "", "")
    allowed = {w.lower() for w in re.findall(r"[A-Za-z]+", code)}  # the names its code spells
    dg.set_language("zh")
    try:
        reprs = _reprs()
    finally:
        dg.set_language("en")
    english = {what: english_words(text, allowed) for what, text in reprs.items()}
    assert not any(english.values()), {what: (words, reprs[what]) for what, words in english.items() if words}
    assert all(_CJK.search(text) for text in reprs.values() if text), reprs
    starts = [s for s in dynagraph_english() if any(s in text for text in reprs.values())]
    assert not starts, f"dynagraph's English in a Chinese repr: {starts}"


def test_the_reprs_stay_english_in_english():
    reprs = _reprs()
    assert reprs["graph"].startswith("<dynagraph.Graph: 11 nodes, 10 edges (op 6, output 1, parameter 4); keeps ")
    assert reprs["recording"].startswith("<dynagraph.Recording: 31 steps, ")
    assert not any(_CJK.search(text) for text in reprs.values()), reprs
