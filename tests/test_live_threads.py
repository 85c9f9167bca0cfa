"""live across threads and blocks: each records its own thread, and torch is restored
exactly when the last open block ends, whatever the order."""

import contextlib
import threading

import pytest
import torch
from torch import nn
from torch.autograd.function import Function

import dynagraph as dg

WAIT = 10  # seconds any thread waits for another before the test fails


def hooks_state():
    m = nn.modules.module
    return (torch._C._len_torch_function_stack(), len(m._global_forward_hooks),
            len(m._global_forward_pre_hooks), len(m._global_forward_hooks_always_called),
            Function.__dict__["apply"])


@pytest.fixture
def clean():
    """torch as it was before the test: no mode, no global hook, the original apply."""
    before = hooks_state()
    assert before[:4] == (0, 0, 0, 0)
    yield before
    assert hooks_state() == before


class Square(Function):
    @staticmethod
    def forward(ctx, x):
        return x * x

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError


class Stall(Function):
    """Holds its thread inside a custom Function until told to go on."""

    inside = threading.Event()
    go_on = threading.Event()

    @staticmethod
    def forward(ctx, x):
        Stall.inside.set()
        assert Stall.go_on.wait(WAIT), "the main thread never let the Function finish"
        return x + 1

    @staticmethod
    def backward(ctx, grad):
        return grad


class Stalling(nn.Module):
    def forward(self, x):
        return Stall.apply(x * 2)


def run_in_thread(target):
    """Start ``target`` in a thread; return (thread, errors) to check after join."""
    errors = []

    def body():
        try:
            target()
        except BaseException as e:  # noqa: BLE001 - reported in the main thread
            errors.append(e)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, errors


def finish(thread, errors):
    thread.join(WAIT)
    assert not thread.is_alive(), "thread did not finish"
    assert errors == []


def ops(rec):
    return [(s.op, s.module) for s in rec.steps]


def test_live_in_one_thread_ignores_ops_of_another(clean):
    Stall.inside.clear()
    Stall.go_on.clear()
    x = torch.ones(2, requires_grad=True)
    with dg.live() as rec:
        thread, errors = run_in_thread(lambda: Stalling()(torch.ones(2, requires_grad=True)))
        assert Stall.inside.wait(WAIT)  # the other thread is inside a module and a Function
        y = x * 3
        z = Square.apply(y)
        Stall.go_on.set()
        finish(thread, errors)
        z.sum()
    assert ops(rec) == [("mul", None), ("Square.apply", None), ("sum", None)]
    assert rec._recorder is None


def test_each_thread_records_its_own_ops(clean):
    opened, done = threading.Barrier(2, timeout=WAIT), threading.Barrier(2, timeout=WAIT)
    first_closed = threading.Event()
    recs = {}

    def worker(name, op, closes_first):
        model = nn.Linear(2, 2)
        with dg.live(model) as rec:
            recs[name] = rec
            opened.wait()
            for _ in range(3):
                op(model(torch.ones(1, 2)))
            Square.apply(torch.ones(1))
            done.wait()
            if not closes_first:
                assert first_closed.wait(WAIT)
        if closes_first:
            first_closed.set()

    a = run_in_thread(lambda: worker("a", torch.relu, closes_first=True))
    b = run_in_thread(lambda: worker("b", torch.tanh, closes_first=False))
    finish(*a)
    finish(*b)
    assert ops(recs["a"]) == [("ones", None), ("linear", None), ("relu", None)] * 3 + [
        ("ones", None), ("Square.apply", None)]
    assert ops(recs["b"]) == [("ones", None), ("linear", None), ("tanh", None)] * 3 + [
        ("ones", None), ("Square.apply", None)]
    assert hooks_state() == clean  # a closed first, b last: everything is back


def test_block_in_a_thread_that_raises_restores_torch(clean):
    def worker():
        with dg.live():
            Square.apply(torch.ones(1))
            raise RuntimeError("boom in thread")

    thread, errors = run_in_thread(worker)
    thread.join(WAIT)
    assert [str(e) for e in errors] == ["boom in thread"]


def test_torch_function_modes_are_per_thread():
    """live relies on it: a block's mode never sees another thread's ops."""
    depth = []
    with dg.live():
        thread, errors = run_in_thread(lambda: depth.append(torch._C._len_torch_function_stack()))
        finish(thread, errors)
        assert torch._C._len_torch_function_stack() == 1
    assert depth == [0]


def test_many_threads_opening_and_closing_blocks_leave_torch_clean(clean):
    start = threading.Barrier(4, timeout=WAIT)
    recs = {}

    def worker(k):
        x = torch.full((2,), float(k), requires_grad=True)
        start.wait()
        for i in range(20):
            with dg.live() as rec:
                Square.apply(x * (i + 1)).sum()
            recs[k, i] = rec

    workers = [run_in_thread(lambda k=k: worker(k)) for k in range(4)]
    for w in workers:
        finish(*w)
    assert len(recs) == 80
    assert {tuple(s.op for s in rec.steps) for rec in recs.values()} == {("mul", "Square.apply", "sum")}
    assert all(len(rec.nodes) == 4 for rec in recs.values())  # x's leaf, mul, Square, sum


def enter(block):
    return block, block.__enter__()


@pytest.mark.parametrize("order", ["outer first", "inner first"])
def test_blocks_may_end_in_any_order(clean, order):
    x = torch.ones(2, requires_grad=True)
    (a, rec_a), (b, rec_b) = enter(dg.live()), enter(dg.live())
    x * 2
    first, second = (a, b) if order == "outer first" else (b, a)
    first.__exit__(None, None, None)
    Square.apply(x)
    assert torch._C._len_torch_function_stack() == 1 and hooks_state() != clean
    second.__exit__(None, None, None)
    assert hooks_state() == clean
    x * 3  # recorded by neither
    Square.apply(x)
    still_open = rec_b if order == "outer first" else rec_a
    closed = rec_a if order == "outer first" else rec_b
    assert [s.op for s in closed.steps] == ["mul"]
    assert [s.op for s in still_open.steps] == ["mul", "Square.apply"]


def test_generators_interleaving_blocks_restore_torch(clean):
    x = torch.ones(2, requires_grad=True)

    def recorder(factor):
        with dg.live() as rec:
            yield rec
            x * factor
            yield rec

    one, two = recorder(2), recorder(3)
    rec_one, rec_two = next(one), next(two)
    next(one)
    next(two)
    with pytest.raises(StopIteration):
        next(one)  # ends the first block while the second is open
    assert hooks_state() != clean
    with pytest.raises(StopIteration):
        next(two)
    assert [s.op for s in rec_one.steps] == [s.op for s in rec_two.steps] == ["mul", "mul"]


def test_generator_closed_in_another_thread_stops_its_block(clean):
    """The block ends in the closing thread: it records nothing more and torch's patch and
    hooks go. Its mode cannot leave the opening thread's stack from there (torch keeps one
    stack per thread); it feeds nothing, and the opening thread's next block takes it off."""
    x = torch.ones(2, requires_grad=True)

    def recorder():
        with dg.live() as rec:
            yield rec

    gen = recorder()
    rec = next(gen)
    x * 2
    finish(*run_in_thread(gen.close))
    x * 3
    Square.apply(x)
    assert [s.op for s in rec.steps] == ["mul"]
    assert hooks_state()[1:] == clean[1:]  # no global hook, torch's own apply
    with dg.live() as again:
        x * 4
        Square.apply(x)
    assert [s.op for s in again.steps] == ["mul", "Square.apply"]
    assert hooks_state() == clean


def test_exit_stack_with_a_user_mode_between_blocks(clean):
    class Count(torch.overrides.TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.calls += 1
            return func(*args, **(kwargs or {}))

    x = torch.ones(2, requires_grad=True)
    stack = contextlib.ExitStack()
    rec = stack.enter_context(dg.live())
    count = Count().__enter__()  # a mode pushed above live's, left on when the block ends
    stack.close()
    assert torch._C._len_torch_function_stack() == 1  # only the user's mode is left
    x * 2
    count.__exit__(None, None, None)
    assert hooks_state() == clean
    assert count.calls == 1 and rec.steps == []


def test_exception_in_overlapping_blocks_restores_torch(clean):
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="boom"):
        with contextlib.ExitStack() as stack:
            outer = stack.enter_context(dg.live(nn.Linear(2, 2)))
            inner = stack.enter_context(dg.live())
            Square.apply(x)
            raise RuntimeError("boom")
    assert [s.op for s in outer.steps] == [s.op for s in inner.steps] == ["Square.apply"]
    assert outer._recorder is None and inner._recorder is None
