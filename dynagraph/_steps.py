"""The text beside a view's picture: the stepper's data, the step list that needs no
script (HTML of tags every sanitizer keeps, and plain text) and a diff's table.

What a learner reads here follows :func:`dynagraph.set_language`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape, unescape
from typing import TYPE_CHECKING, Any

from . import memory
from ._dot import Overlay, StepText
from ._language import tr

if TYPE_CHECKING:
    from ._picture import Picture

__all__ = ["FILL", "LISTED_STEPS", "MAX_STEPS", "diff_table", "listing", "plain_table", "played", "stepper"]

# Steps listed in the plain step list under a stepper (no sanitizer keeps a
# collapsible list, so it is short).
LISTED_STEPS = 20
# Steps a stepper plays, at most: the first and last halves of a longer recording
# (80,000 steps would be ~650 KB of step data); the page says what it left out. An
# output still over its budget (_page.MAX_BYTES), with its step data the bigger
# part, plays fewer.
MAX_STEPS = 20_000
# Where a step text's varying part (its module's name) goes: loops over many
# modules of one class then share one text (see _dot.StepText).
FILL = "\x00"


def stepper(pic: Picture, overlay: Overlay, max_steps: int) -> dict[str, Any]:
    """The stepper's data in drawn ids (keys ``mode texts kinds s k blocks``, and
    ``fills f`` and ``mem`` when used), for at most ``max_steps`` steps (the first and
    last halves, and a ``gap`` key saying what is left out): the format is ``assets/DATA.md``."""
    texts: dict[str, int] = {}
    fills: dict[str, int] = {}
    kinds: dict[tuple[int, tuple[int, ...], int], int] = {}
    s: list[int] = []
    k: list[int] = []
    f: list[int] = []
    kept, gap = _kept(len(overlay.steps), max_steps)
    mapping, iteration = pic.mapping, pic.iteration
    for i in kept:
        text, ids = overlay.steps[i]
        template, fill = text if isinstance(text, tuple) else (text, None)
        drawn: tuple[int, ...]
        if len(ids) == 1:  # (most steps make one node)
            drawn = (mapping[ids[0]],) if ids[0] in mapping else ()
            block, it = iteration.get(ids[0], (-1, -1))
        else:
            drawn = tuple(dict.fromkeys(mapping[i] for i in ids if i in mapping))
            block, it = next((iteration[i] for i in ids if i in iteration), (-1, -1))
        kind = (texts.setdefault(template, len(texts)), drawn, block)
        s.append(kinds.setdefault(kind, len(kinds)))
        k.append(it)
        f.append(-1 if fill is None else fills.setdefault(fill, len(fills)))
    data: dict[str, Any]
    data = {"mode": overlay.mode, "texts": list(texts), "kinds": [[t, list(n), b] for t, n, b in kinds],
            "s": s, "k": k, "blocks": [block.repeats for block in pic.graph.blocks]}
    if fills:
        data.update(fills=list(fills), f=f)
    if overlay.totals:  # the running total of saved bytes, shown beside the step number
        data["mem"] = [overlay.totals[i] for i in kept]
    if gap:
        data["gap"] = gap
    return data


def played(n: int) -> set[int] | range:
    """The indices of the steps of ``n`` that an output may play or list: views need
    step texts only for these (a 300,000-step recording plays 20,000)."""
    kept = _kept(n, MAX_STEPS)[0]
    return kept if isinstance(kept, range) else set(kept)


def _kept(n: int, most: int) -> tuple[range | list[int], list[int]]:
    """The indices of the steps the stepper plays (all, or the first and last halves of
    ``most``), and ``[where, how many]`` were left out (empty: none)."""
    if n <= most:
        return range(n), []
    head = most // 2
    return [*range(head), *range(n - (most - head), n)], [head, n - most]


# The step list's own colours: a light card like the picture's, readable in dark themes
# (kept by JupyterLab's sanitizer and the docs; allowlist sanitizers drop it, and their
# viewers' own colours apply).
_CARD = ("color:#212529;background:#ffffff;padding:2px 6px;font:12px/1.4 system-ui,sans-serif;"
         "border-radius:3px")


def listing(steps: Sequence[tuple[StepText, list[int]]], totals: Sequence[int], gap: list[int] | None,
            caption: str, hint: str) -> tuple[str, str]:
    """The step list that needs no script, as HTML of tags every sanitizer keeps and as
    plain text: ``caption``; with a ``gap``, a line that says which steps the output
    holds; then what only a reader without the live stepper needs, which the script
    hides (the element with id ``hint`` and all after it): a line that says where the
    picture steps (this one cannot: no request to run or trust what cannot be run or
    trusted here), the first :data:`LISTED_STEPS` steps, each with the bytes the graph
    keeps after it when ``totals`` are given, and how many more there are."""
    kept = [" \u00b7 " + tr("the graph keeps {bytes} for backward", bytes=memory.fmt_bytes(t))
            for t in totals[:LISTED_STEPS]]
    lines = [_filled(text) + (kept[i] if kept else "") for i, (text, _) in enumerate(steps[:LISTED_STEPS])]
    n, more = f"{len(steps):,}", len(steps) - LISTED_STEPS
    tail = ("" if more <= 0 else tr("\u2026 and 1 more step") if more == 1 else
            tr("\u2026 and {more} more steps", more=f"{more:,}"))
    held = "" if not gap else tr(
        "The output holds the first {first} and the last {last} of the {n} steps, so that it stays small.",
        first=f"{gap[0]:,}", last=f"{len(steps) - gap[0] - gap[1]:,}", n=n)
    where = (tr("The picture cannot step here. In Jupyter, once this cell has run or the notebook is "
                "trusted, it plays its 1 step.") if len(steps) == 1 else
             tr("The picture cannot step here. In Jupyter, once this cell has run or the notebook is "
                "trusted, it plays its {n} steps.", n=n))
    html = (f'<div class="dg-steps" style="{_CARD}">' + (f"<b>{escape(caption)}</b>" if caption else "")
            + (f"<div>{escape(held)}</div>" if held else "")
            + f'<div id="{hint}"><i>{escape(where)}</i></div>'
            + "<ol>" + "".join(f"<li>{escape(t)}</li>" for t in lines) + "</ol>"
            + (f"<div>{escape(tail)}</div>" if tail else "") + "</div>")
    plain = "\n".join([*([caption] if caption else []), *([held] if held else []),
                        *(f"{i}. {t}" for i, t in enumerate(lines, 1)), *([tail] if tail else [])])
    return html, plain


def _filled(text: StepText) -> str:
    """A step text: a plain string, or ``(template, fill)`` with one :data:`FILL` mark."""
    return text[0].replace(FILL, text[1]) if isinstance(text, tuple) else text


def diff_table(rows: Sequence[tuple[str, int, int]], labels: Sequence[str], total: tuple[int, int],
               notes: Sequence[str] = ()) -> str:
    """A diff's node counts as an HTML table: ``(name, count in a, count in b)`` per row,
    then a row for each of ``notes`` (what it could not place)."""
    la, lb = map(escape, labels)
    head = "".join(f"<td><b>{c}</b></td>" for c in (escape(tr("node")), la, lb, escape(tr("change"))))
    head = f"<tr>{head}</tr>"
    body = "".join(f"<tr><td>{escape(n)}</td><td>{x}</td><td>{y}</td><td>{y - x:+d}</td></tr>"
                   for n, x, y in rows)
    ta, tb = total
    foot = "".join(f"<td><b>{c}</b></td>" for c in (escape(tr("total")), ta, tb, f"{tb - ta:+d}"))
    foot = f"<tr>{foot}</tr>" + "".join(f'<tr><td colspan="4">{escape(n)}</td></tr>' for n in notes)
    return f'<table class="dg-diff" style="{_CARD}">{head}{body}{foot}</table>'


def plain_table(html: str) -> str:
    """A table of :func:`diff_table` as text: one row per line, cells split by two spaces."""
    rows = re.findall(r"<tr>(.*?)</tr>", html)
    cells = (re.findall(r"<td[^>]*>(.*?)</td>", r) for r in rows)  # (a note's cell spans the row)
    return "\n".join("  ".join(unescape(re.sub(r"<[^>]+>", "", c)) for c in row) for row in cells)
