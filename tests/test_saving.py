"""save_view / load_view: a view written in one process opens in another as the same view."""

import dataclasses
import json
import re
import subprocess
import sys

import pytest
import torch
from torch import nn

import dynagraph as dg

from _helpers import outputs_of


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))


def _views():
    model = _mlp()
    x = torch.randn(5, 3)
    with dg.live(model, memory=True) as rec:
        loss = model(x).pow(2).mean()
    with dg.trace_backward(loss, params=model) as bt:
        loss.backward(retain_graph=True)
    y = torch.tensor([2.0], requires_grad=True)
    graph = dg.draw({"out": (y * y + model(x).sum()) * 3}, params=model, title="a title", memory=True)
    rolled = dg.draw(_chain(), roll=True)
    return {"recording": rec, "backward": bt, "graph": graph, "rolled picture": rolled.picture()}


def _chain():
    x = torch.ones(2, requires_grad=True)
    for _ in range(12):
        x = torch.tanh(x * 2)
    return x.sum()


@pytest.mark.parametrize("kind", ["recording", "backward", "graph", "rolled picture"])
def test_saved_and_loaded_view_renders_the_same_outputs(tmp_path, kind):
    view = _views()[kind]
    loaded = dg.load_view(dg.save_view(view, tmp_path / "v.json"))
    assert type(loaded) is type(view)
    assert outputs_of(loaded) == outputs_of(view)
    assert repr(loaded) == repr(view)
    # (a leaf's tensor number and a node's module number name objects of this process: not saved)
    unsaved = [dataclasses.replace(n, tensor=None, module_number=None) for n in view.nodes]
    assert loaded.nodes == unsaved and loaded.edges == view.edges


def test_loaded_trace_has_the_same_numbers(tmp_path):
    bt = _views()["backward"]
    loaded = dg.load_view(dg.save_view(bt, tmp_path / "bt.json"))
    assert loaded.order == bt.order
    assert loaded.edge_norms == bt.edge_norms and loaded.merged_norms == bt.merged_norms
    assert loaded.to_dot() == bt.to_dot()


def test_a_view_saved_in_another_process_opens_here(tmp_path):
    path = tmp_path / "rec.json"
    script = ("import torch, dynagraph as dg\n"
              "x = torch.tensor([1.0, 2.0], requires_grad=True)\n"
              "with dg.live() as rec:\n    y = (2 * x + 1).sum()\n"
              f"dg.save_view(rec, {str(path)!r})\nprint(repr(rec))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    rec = dg.load_view(path)
    assert repr(rec) == done.stdout.rstrip("\n")
    assert [s.op for s in rec.steps] == ["mul", "add", "sum"]


def test_save_view_of_another_object_raises(tmp_path):
    with pytest.raises(TypeError, match="save_view takes a Graph, Recording or BackwardTrace; got Tensor"):
        dg.save_view(torch.ones(1), tmp_path / "x.json")


def test_a_path_that_is_no_file_name_raises_naming_it(tmp_path):
    x = torch.ones(2, requires_grad=True)
    for bad in (3, None, ["view.json"]):  # pathlib's "expected str, bytes or os.PathLike object" named no argument
        with pytest.raises(TypeError, match=r"path must be a file name, a str or a pathlib\.Path such as "
                                            rf"'view\.json'; got {re.escape(repr(bad))}"):
            dg.save_view(dg.draw(2 * x), bad)
        with pytest.raises(TypeError, match="path must be a file name"):
            dg.load_view(bad)


def test_load_view_of_a_binary_file_raises(tmp_path):
    path = tmp_path / "picture.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")  # was a UnicodeDecodeError
    with pytest.raises(ValueError, match=r"picture\.png' is not a saved view: not JSON"):
        dg.load_view(path)


def test_load_view_of_a_damaged_view_raises(tmp_path):
    x = torch.ones(2, requires_grad=True)
    path = dg.save_view(dg.draw(2 * x), tmp_path / "g.json")
    good = json.loads(path.read_text())
    damaged = {"no kind": {k: v for k, v in good.items() if k != "kind"}, "unknown kind": {**good, "kind": "chart"},
               "no nodes": {k: v for k, v in good.items() if k != "nodes"}, "nodes a str": {**good, "nodes": "x"}}
    for data in damaged.values():  # each was a KeyError or Python's dict-update message
        path.write_text(json.dumps(data))
        with pytest.raises(ValueError, match=r"g\.json' is a damaged saved view \(.*\); save it again with "
                                             r"dg\.save_view"):
            dg.load_view(path)


def test_load_view_of_other_json_raises(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"format": "something/2"}))
    with pytest.raises(ValueError, match="format 'something/2'"):
        dg.load_view(path)
    path.write_text("not json")
    with pytest.raises(ValueError, match="not a saved view: not JSON"):
        dg.load_view(path)
