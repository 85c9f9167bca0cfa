"""Every view stored in the lessons publishes at most 300 KB in all its outputs together
(_page.MAX_BYTES): its picture's PNG, its script and its step list."""

import json
from pathlib import Path

import pytest

from dynagraph import _page

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def views(nb: dict) -> list[tuple[str, list[dict]]]:
    """``(cell id, outputs)`` of each view stored in ``nb``: a run of outputs with the
    ``dynagraph`` metadata key that starts at a table or a picture."""
    found = []
    for cell in nb["cells"]:
        for out in cell.get("outputs", ()):
            part = out.get("metadata", {}).get("dynagraph")
            after_table = bool(found) and found[-1][0] == cell["id"] and \
                found[-1][1][-1]["metadata"]["dynagraph"] == "table"  # (a diff: its table, then its picture)
            if part == "table" or (part == "picture" and not after_table):
                found.append((cell["id"], [out]))
            elif part:
                found[-1][1].append(out)
    return found


def view_bytes(outs: list[dict]) -> int:
    """Bytes of ``outs`` as the notebook stores them (as _page.stored_bytes counts)."""
    return sum(len(json.dumps(o["data"])) + len(json.dumps(o["metadata"])) for o in outs)


def test_views_groups_a_table_its_picture_script_and_steps():
    parts = ["table", "picture", "script", "steps", "picture", "script"]
    nb = {"cells": [{"id": "a", "outputs": [{"data": {}, "metadata": {"dynagraph": p}} for p in parts]}]}
    assert [[o["metadata"]["dynagraph"] for o in outs] for _, outs in views(nb)] == [parts[:4], parts[4:]]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_stored_view_is_at_most_the_budget_in_all(path):
    nb = json.loads(path.read_text())
    over = {cell: view_bytes(outs) for cell, outs in views(nb) if view_bytes(outs) > _page.MAX_BYTES}
    assert over == {}, f"views over {_page.MAX_BYTES:,} bytes in all (cell id: bytes): {over}"
