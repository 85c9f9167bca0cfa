"""The docstring examples of pure functions run as tests (names, ranges, labels): an
example that no longer holds fails here, as in einops and the graphviz package."""

import doctest
import inspect

import pytest

from dynagraph import _dot, _records, _roll, course, memory
from dynagraph._language import counted
from dynagraph._roll import names

# Every function of _roll.names (pure functions of strings) shows what it makes in an example.
NAMES = [f for f in vars(names).values() if inspect.isfunction(f) and f.__module__ == names.__name__]
EXAMPLES = [*NAMES, _roll._inherited, _dot._edge_norms, _dot._edge_label,
            course.exercise_minutes, course.placed_name, course.placed_links, course.prose_words, memory.mixed,
            _records.dtype_text, _records.producers_of, _records.consumers_of, counted]


@pytest.mark.parametrize("function", EXAMPLES, ids=lambda f: f"{f.__module__}.{f.__name__}")
def test_docstring_examples_hold(function):
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    tests = finder.find(function, function.__name__, globs=vars(__import__(function.__module__, fromlist=["_"])))
    assert tests and any(t.examples for t in tests)
    for test in tests:
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0
