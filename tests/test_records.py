"""_records: the plain records, and the walk up a graph of their ids."""

import pytest
import torch

from dynagraph._records import (
    consumers_of,
    dtype_text,
    longest_chain,
    owner,
    producers_of,
    shape_text,
    upstream,
)


def test_upstream_follows_producers_once_each():
    producers = {3: [1, 2], 2: [0], 1: [0]}
    assert upstream([3], producers.get) == {0, 1, 2, 3}
    assert upstream([1, 2], producers.get) == {0, 1, 2}
    assert upstream([0], producers.get) == {0}


def test_upstream_gives_up_past_most():
    chain = {i: [i - 1] for i in range(1, 10)}
    assert upstream([3], chain.get, most=4) == {0, 1, 2, 3}
    assert upstream([4], chain.get, most=4) is None


def test_owner_is_the_dotted_prefix():
    assert owner("layers.0.weight") == "layers.0" and owner("weight") is None


def test_longest_chain_counts_nodes_on_the_longest_path():
    assert longest_chain(4, [(0, 1), (1, 2), (0, 2), (3, 2)]) == 3
    assert longest_chain(0, []) == 0


@pytest.mark.parametrize("shape", [(), (48,), (3, 16), (2, 3, 4)])
def test_shape_text_writes_a_shape_as_python_writes_its_tuple(shape):
    assert shape_text(torch.empty(shape).shape) == str(tuple(torch.empty(shape).shape))


def test_shape_text_writes_a_range_without_quotes_and_no_shape_as_nested():
    assert shape_text(("1\u20133", 16)) == "(1\u20133, 16)"
    assert shape_text(None) == "nested"


@pytest.mark.parametrize("value", [torch.float32, torch.bfloat16, torch.int64, torch.device("cpu"),
                                   torch.device("cuda", 1)])
def test_dtype_text_is_torch_s_name_without_its_prefix(value):
    text = dtype_text(value)
    assert not text.startswith("torch.")
    assert getattr(torch, text) is value if isinstance(value, torch.dtype) else torch.device(text) == value


def test_producers_and_consumers_of_keep_every_edge_in_edge_order():
    edges = [(0, 3), (1, 3), (0, 2), (2, 3), (0, 3), (3, 4)]  # (0, 3) twice: an op that reads x twice
    producers, consumers = producers_of(edges), consumers_of(edges)
    assert [(src, dst) for dst in producers for src in producers[dst]] == sorted(edges, key=lambda e: (
        list(producers).index(e[1])))  # grouped by consumer, each group in edge order
    assert [(src, dst) for src in consumers for dst in consumers[src]] == sorted(edges, key=lambda e: (
        list(consumers).index(e[0])))
    assert set(producers) == {dst for _, dst in edges} and set(consumers) == {src for src, _ in edges}
    assert list(producers) == list(dict.fromkeys(dst for _, dst in edges))  # keys in first-seen order
