"""The picture of a graph's record: Picture's id maps, and records in, records out."""

import dataclasses

import torch

import dynagraph as dg
from dynagraph import _dot, _picture, _transform
from dynagraph._records import Block, GraphRecord, Node
from dynagraph.graph import Graph, record_of


def chain(n: int) -> GraphRecord:
    """A record of ``n`` ops in a row, ids 0..n-1."""
    nodes = [Node(id=i, name=f"Op{i}", kind="op", label=f"Op{i}", seq=i) for i in range(n)]
    return GraphRecord(nodes, [(i, i + 1) for i in range(n - 1)])


def test_moved_sends_each_original_node_where_its_drawn_node_went():
    pic = _picture.Picture(chain(3), {1: 0, 2: 0, 3: 1, 4: 2}, iteration={1: (0, 0), 2: (0, 1)},
                           through={3: (0, 0)})
    after = chain(2)
    moves = {0: 5, 2: 6}  # drawn id -> its id after the transform (1 stays)
    moved = pic.moved(after, moves)
    assert moved.graph is after
    assert moved.mapping == {old: moves.get(new, new) for old, new in pic.mapping.items()}
    assert (moved.iteration, moved.through) == (pic.iteration, pic.through)  # (no block in either)
    assert pic.mapping == {1: 0, 2: 0, 3: 1, 4: 2}  # (the picture it came from is as it was)


def test_moved_drops_the_iterations_once_a_block_is_lost():
    block = Block("cell", 2, [0], [])
    pic = _picture.Picture(dataclasses.replace(chain(3), blocks=[block]), {1: 0, 2: 0, 3: 1},
                           iteration={1: (0, 0), 2: (0, 1)}, through={3: (0, 0)})
    kept = pic.moved(dataclasses.replace(chain(3), blocks=[block]), {})
    lost = pic.moved(chain(3), {})
    assert (kept.iteration, kept.through) == (pic.iteration, pic.through)
    assert (lost.iteration, lost.through) == ({}, {})


def test_folded_record_is_fold_of_its_nodes_and_keeps_only_untouched_blocks():
    record = chain(30)
    whole, cut = Block("head", 2, [0, 1], []), Block("middle", 2, [14, 15], [])
    record = dataclasses.replace(record, blocks=[whole, cut], title="t", roll=False, max_nodes=7)
    folded, mapping = _transform.folded(record, 6)
    nodes, edges, expected = _transform.fold(record.nodes, record.edges, 6)
    assert (folded.nodes, folded.edges, mapping) == (nodes, edges, expected)
    assert folded.blocks == [whole]
    assert (folded.title, folded.roll, folded.max_nodes, folded.memory) == ("t", False, 7, None)


def test_a_graph_hands_down_its_fields_as_they_are_now():
    x = torch.ones(2, requires_grad=True)
    graph = dg.draw((x * 2).sum(), memory=True)
    graph.title = "set after"
    record = record_of(graph)
    assert isinstance(record, GraphRecord) and not isinstance(record, Graph)
    assert [getattr(record, f.name) for f in dataclasses.fields(record)] == [
        getattr(graph, f.name) for f in dataclasses.fields(record)]


def test_graph_transforms_still_return_graphs_with_their_memory():
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(30)])
    graph = dg.draw(mlp(torch.randn(2, 4)).sum(), params=mlp, memory=True)
    folded, mapping = graph.folded(10)
    pic = graph.picture()
    assert type(folded) is Graph and type(pic) is Graph
    assert folded.memory is not None and folded.memory.saved == graph.memory.remap(mapping).saved
    assert pic.memory is not None and pic.memory.total == graph.memory.total


def test_a_fold_that_keeps_some_rolled_blocks_keeps_their_iterations():
    """A fold that cuts one rolled loop and keeps two: the two keep their iterations (each
    original op of theirs in its iteration, numbered by the block's place in what is
    drawn), so their loop edges keep a norm per iteration and their sparkline."""
    x = torch.randn(3, requires_grad=True)
    h = x
    for _ in range(6):
        h = torch.tanh(h * 2)
    for _ in range(30):
        h = torch.sigmoid(h + 1)
    for _ in range(30):
        h = torch.relu(h - 1) * 3
    record = record_of(dg.draw(h.sum(), roll=False, max_nodes=None))
    whole = _picture.picture(record, roll=True, max_nodes=None)
    cut = _picture.picture(record, roll=True, max_nodes=len(whole.graph.nodes) - 1)
    assert 0 < len(cut.graph.blocks) < len(whole.graph.blocks)  # (the fold cut one: the case asked about)
    for k, block in enumerate(cut.graph.blocks):
        inside = [old for old, new in cut.mapping.items() if new in block.nodes]
        assert inside and all(cut.iteration[old][0] == k for old in inside)
        assert {cut.iteration[old][1] for old in inside} == set(range(block.repeats))
    loops = {(a, b) for a, b in record.edges if cut.edge((a, b)) in {e for b in cut.graph.blocks for e in b.loops}}
    overlay = _dot.Overlay(edge_norms={edge: 1.0 for edge in loops})
    assert sorted(_picture._mapped(cut, overlay)[0].block_notes) == list(range(len(cut.graph.blocks)))
