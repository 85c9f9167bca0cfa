"""_records: the plain records, and the walk up a graph of their ids."""

from dynagraph._records import longest_chain, owner, upstream


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
