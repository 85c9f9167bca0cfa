"""Timing two versions of one computation fairly: interleaved blocks and an A/A baseline.

Two timings taken one after the other on a shared machine can differ by 2x or more
even for the *same* function (other programs, CPU clock changes, caches). So
:func:`compare` never times A and then B. It runs short blocks of A, B and A again,
in a rotating order, for several rounds. The two A blocks of a round give an A/A
ratio: how much one function differs from itself here and now. B is called faster
only when every round's A/B ratio lies beyond the largest A/A ratio, and the median
A/B ratio is at least :data:`MIN_GAIN`. Otherwise the verdict is "no clear
difference here". An A/A pair (the same function twice) is never called faster.

Load does not decide the verdict. By default the functions run on one intra-op
thread (``threads=1``), and each block is timed in CPU time (``clock="cpu"``): the
time the CPU spent running this process, which leaves out the time it waited while
other programs ran. On a shared 2-core machine with two busy programs beside it
(load average about 8), wall-clock time made lesson 05's 10x "batched is faster"
come out as "no clear difference", and its fastest rounds 1.1x apart; in CPU time the
same comparison gave 10.2-10.7x, with A/A noise of at most 1.2x. With two intra-op
threads, an op also waits until the second thread gets a core. CPU time adds up
every thread's work, so ``clock="wall"`` is what shows a second thread's gain in
waiting time. When CUDA is in use, the GPU's work is not CPU time: the blocks are
timed by the wall clock instead, and the line says so.

Example:
    >>> import dynagraph as dg
    >>> c = dg.compare(lambda: sum(range(20_000)), lambda: sum(range(1_000)),
    ...                names=("long sum", "short sum"))
    >>> c.verdict
    'faster'
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import permutations
from typing import Any

import torch

from ._language import tr

__all__ = ["Comparison", "compare"]

MIN_GAIN = 1.1  # a median ratio below this is not worth calling faster, however steady
# Each round runs its three blocks in one of these orders, in turn, so no version is
# always first (warm caches) or always last.
_ORDERS = tuple(permutations(range(3)))
# The verdict line starts with "timing: " (计时： in Chinese): tests/nbval_sanitize.cfg masks
# the line from there, as it differs between runs.


@dataclass(frozen=True)
class Comparison:
    """The result of :func:`compare`: seconds per call of each version in each round.

    ``ratio`` > 1 means B took less time than A. ``noise`` is the largest A/A ratio
    seen (1.0 would be a perfectly quiet machine). ``verdict`` is "faster" (B is
    faster than A), "slower" (B is slower) or "no clear difference".
    """

    names: tuple[str, str]
    a: tuple[float, ...]
    b: tuple[float, ...]
    a_again: tuple[float, ...]
    threads: int
    clock: str = "wall"  # "cpu": CPU time of the process; "wall": wall-clock time

    @property
    def ratios(self) -> list[float]:
        """A/B time ratio per round (> 1: B was faster in that round)."""
        return [x / y for x, y in zip(self.a, self.b)]

    @property
    def ratio(self) -> float:
        """Median A/B ratio over the rounds."""
        return statistics.median(self.ratios)

    @property
    def noise(self) -> float:
        """The largest disagreement of A with itself in one round, as a factor >= 1."""
        return max(max(x / y, y / x) for x, y in zip(self.a, self.a_again))

    @property
    def verdict(self) -> str:
        return verdict(self.ratios, self.noise)

    @property
    def seconds(self) -> tuple[float, float]:
        """Median seconds per call of A and of B."""
        return statistics.median(self.a), statistics.median(self.b)

    def __str__(self) -> str:
        """The verdict line, in the current language (the names as they are)."""
        (a, b), (sec_a, sec_b) = self.names, self.seconds
        times = tr("{a} {time_a}, {b} {time_b} per call", a=a, time_a=_ms(sec_a), b=b, time_b=_ms(sec_b))
        noise, rounds = f"{self.noise:.2f}", len(self.a)
        if self.threads != 1:
            how = tr("A/A noise up to {noise}x; {rounds} interleaved rounds, {threads} threads",
                     noise=noise, rounds=rounds, threads=self.threads)
        else:
            how = tr("A/A noise up to {noise}x; {rounds} interleaved rounds, 1 thread",
                     noise=noise, rounds=rounds)
        if self.clock == "cpu":
            how = tr("{how}, CPU time", how=how)
        if self.verdict == "faster":
            head = tr("{b} is {ratio}x faster than {a}", a=a, b=b, ratio=f"{self.ratio:.1f}")
        elif self.verdict == "slower":
            head = tr("{b} is {ratio}x slower than {a}", a=a, b=b, ratio=f"{1 / self.ratio:.1f}")
        else:
            head = tr("no clear difference here between {a} and {b} ({ratio}x)", a=a, b=b,
                      ratio=f"{self.ratio:.2f}")
        return tr("timing: ") + tr("{verdict} ({times}; {how})", verdict=head, times=times, how=how)

    __repr__ = __str__


def verdict(ratios: Sequence[float], noise: float) -> str:
    """The rule :class:`Comparison` uses: "faster" only when every round's A/B ratio is
    beyond the A/A noise and the median gain is at least MIN_GAIN (and the mirror
    rule for "slower"); otherwise "no clear difference"."""
    med = statistics.median(ratios)
    if min(ratios) > noise and med >= MIN_GAIN:
        return "faster"
    if max(ratios) < 1 / noise and med <= 1 / MIN_GAIN:
        return "slower"
    return "no clear difference"


def compare(a: Callable[[], Any], b: Callable[[], Any], *, names: tuple[str, str] = ("A", "B"),
            rounds: int = 7, min_run_time: float = 1.0, threads: int | None = 1,
            clock: str = "cpu") -> Comparison:
    """Time ``a()`` and ``b()`` in interleaved blocks, with ``a`` timed twice per round.

    Args:
        a, b: functions of no arguments: the two versions (``a`` is the baseline).
        names: what to call them in the verdict.
        rounds: how many rounds of three blocks (at least 3).
        min_run_time: the whole comparison's time budget in seconds, about.
        threads: torch's intra-op thread count while ``a`` and ``b`` run (warm-up
            included); the count before is restored afterwards, also when a function
            raises or the run is interrupted. ``None`` keeps the current count
            (``torch.get_num_threads()``). The default, 1, keeps a busy machine from
            making small ops wait for a second thread.
        clock: ``"cpu"`` times each block in CPU time of this process
            (:func:`time.process_time`): the work, without the time spent waiting
            while other programs ran, so load does not decide the verdict. It adds up
            every thread's work. ``"wall"`` uses the wall clock
            (:func:`time.perf_counter`). When CUDA is in use, ``"cpu"`` falls back to
            the wall clock (the GPU's work is not CPU time); ``Comparison.clock`` and
            the printed line say which clock was read.

    Returns:
        A :class:`Comparison`; printing it gives the verdict, both medians, the A/A
        noise, the thread count and the clock. It synchronises CUDA around each block
        when CUDA is in use.

    Raises:
        TypeError: ``a`` or ``b`` is not callable.
        ValueError: ``rounds`` < 3, ``min_run_time`` <= 0, ``threads`` not a positive
            int or None, ``clock`` neither "cpu" nor "wall", or ``names`` not two names.
    """
    for label, fn in (("a", a), ("b", b)):
        if not callable(fn):
            raise TypeError(f"compare() needs functions of no arguments; {label}={fn!r} is not "
                            f"callable (wrap the code: lambda: ...)")
    if not isinstance(rounds, int) or rounds < 3:
        raise ValueError(f"rounds={rounds!r}: use an int of at least 3 (A/A noise needs several rounds)")
    if not (isinstance(min_run_time, (int, float)) and math.isfinite(min_run_time) and min_run_time > 0):
        raise ValueError(f"min_run_time={min_run_time!r}: use a positive number of seconds")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads={threads!r}: use an int of at least 1 (the default, 1, times on one "
                         f"thread), or None to keep torch's current count ({torch.get_num_threads()})")
    if clock not in _CLOCKS:
        raise ValueError(f"clock={clock!r}: use \"cpu\" (CPU time, the default: load does not change it) "
                         f"or \"wall\" (wall-clock time)")
    if isinstance(names, str) or not isinstance(names, Sequence) or len(names) != 2:
        raise ValueError(f"names={names!r}: pass two names, the first for a and the second for b, "
                         f"e.g. names=(\"loop\", \"batched\")")
    names = (str(names[0]), str(names[1]))
    block = min_run_time / (3 * rounds)
    fns = (a, b, a)
    if _cuda_in_use():
        clock = "wall"  # the GPU's work is not CPU time
    read = _CLOCKS[clock]
    before = torch.get_num_threads()
    try:
        if threads is not None:
            torch.set_num_threads(threads)
        used = torch.get_num_threads()
        number = [_calls_per_block(fn, block, read) for fn in (a, b)]
        number.append(number[0])
        times: list[list[float]] = [[], [], []]
        for r in range(rounds):
            for i in _ORDERS[r % len(_ORDERS)]:
                times[i].append(_block(fns[i], number[i], read))
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)
    return Comparison(names, tuple(times[0]), tuple(times[1]), tuple(times[2]), used, clock)


# The clocks compare() can read, by name (looked up at each call, so tests can replace them).
_CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.process_time, "wall": time.perf_counter}


def _cuda_in_use() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_initialized()


def _sync() -> None:
    if _cuda_in_use():
        torch.cuda.synchronize()


def _block(fn: Callable[[], Any], number: int, read: Callable[[], float]) -> float:
    """Seconds per call over ``number`` calls, on the clock ``read``."""
    _sync()
    start = read()
    for _ in range(number):
        fn()
    _sync()
    return (read() - start) / number


def _calls_per_block(fn: Callable[[], Any], block: float, read: Callable[[], float]) -> int:
    """Warm ``fn`` up, then how many calls fill about ``block`` seconds (at least 1)."""
    fn()  # first call: lazy initialisation, caches
    once = _block(fn, 1, read)
    number = 1
    while once * number < block and number < 1_000_000:
        number *= 2
        once = _block(fn, number, read)
    return max(1, round(block / max(once, 1e-9)))


def _ms(seconds: float) -> str:
    if seconds >= 0.1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-4:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"
