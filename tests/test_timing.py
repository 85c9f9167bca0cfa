"""dynagraph.timing: interleaved A/B timing with an A/A baseline; the same function is never "faster"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import dynagraph as dg
from dynagraph import timing


def _work(n: int):
    x = torch.ones(n)
    return lambda: (x * 2).sum()


def test_verdict_rule_needs_every_round_beyond_the_noise():
    assert timing.verdict([2.0, 2.1, 1.9, 2.2, 2.0], noise=1.2) == "faster"
    # one round inside the noise: not called faster, however large the median
    assert timing.verdict([2.0, 2.1, 1.1, 2.2, 2.0], noise=1.2) == "no clear difference"
    assert timing.verdict([0.5, 0.4, 0.5, 0.45, 0.5], noise=1.2) == "slower"
    # steady but tiny gains are not worth calling faster
    assert timing.verdict([1.05] * 5, noise=1.01) == "no clear difference"


def test_same_function_twice_is_never_called_faster_or_slower():
    fn = _work(2_000)
    verdicts = [dg.compare(fn, fn, rounds=5, min_run_time=0.05).verdict for _ in range(20)]
    assert verdicts == ["no clear difference"] * 20


def test_two_equal_functions_are_never_called_faster():
    x = torch.ones(2_000)  # one tensor: two tensors of one size can really differ (memory placement)
    a, b = (lambda: (x * 2).sum()), (lambda: (x * 2).sum())
    verdicts = {dg.compare(a, b, rounds=5, min_run_time=0.05).verdict for _ in range(10)}
    assert verdicts == {"no clear difference"}


def test_much_less_work_is_called_faster_and_the_mirror_slower():
    slow, fast = _work(2_000_000), _work(1_000)
    c = dg.compare(slow, fast, names=("big", "small"), rounds=5, min_run_time=0.3)
    assert c.verdict == "faster" and c.ratio > 5
    assert str(c).startswith("timing: small is ") and "faster than big" in str(c)
    assert dg.compare(fast, slow, rounds=5, min_run_time=0.3).verdict == "slower"


def test_comparison_reports_both_medians_rounds_threads_and_noise():
    fn = _work(1_000)
    c = dg.compare(fn, fn, names=("x", "y"), rounds=4, min_run_time=0.02)
    assert len(c.a) == len(c.b) == len(c.a_again) == 4
    assert c.noise >= 1.0 and c.threads == 1   # one thread by default (see the tests below)
    text = repr(c)
    assert re.match(r"timing: no clear difference here between x and y \(\d+\.\d\dx\)", text), text
    assert f"4 interleaved rounds, {c.threads} thread" in text
    assert "\n" not in text  # one line: tests/nbval_sanitize.cfg masks it whole


def test_each_round_runs_the_three_blocks_in_a_rotating_order():
    calls: list[str] = []
    dg.compare(lambda: calls.append("a"), lambda: calls.append("b"), rounds=3, min_run_time=1e-6)
    # warm-up and calibration first (a, then b), then per round one call per block
    rounds = calls[-9:]
    assert [rounds[i:i + 3] for i in (0, 3, 6)] == [["a", "b", "a"], ["a", "a", "b"], ["b", "a", "a"]]


def test_the_stored_output_sanitizer_masks_a_timing_line():
    cfg = (Path(__file__).parent / "nbval_sanitize.cfg").read_text(encoding="utf-8")
    m = re.search(r"\[timing\]\nregex: (.*)\nreplace: (.*)", cfg)
    assert m, "tests/nbval_sanitize.cfg needs a [timing] section"
    fn = _work(100)
    one = re.sub(m.group(1), m.group(2), "before\n" + str(dg.compare(fn, fn, rounds=3, min_run_time=0.01)) + "\nafter")
    assert one == f"before\n{m.group(2)}\nafter"


@pytest.fixture
def chinese():
    dg.set_language("zh")
    yield
    dg.set_language("en")


def test_the_verdict_reads_in_chinese_after_the_chinese_timing_tag(chinese):
    """In Chinese the line starts with ``计时：`` (tests/nbval_sanitize.cfg masks both tags)
    and has one bracket, whatever the verdict."""
    fast = timing.Comparison(("loop", "batched"), (4.0, 4.2, 3.9), (1.0, 1.1, 1.0), (4.1, 4.0, 4.0), 1)
    assert str(fast) == ("计时：batched 的速度是 loop 的 3.9 倍（每次调用：loop 4.00 s，batched 1.00 s；"
                         "A/A 噪声最大 1.05x；交替进行 3 轮，1 个线程）")
    slow = timing.Comparison(("a", "b"), (1.0, 1.0, 1.0), (3.0, 3.0, 3.0), (1.0, 1.0, 1.0), 4)
    assert str(slow).startswith("计时：b 的耗时是 a 的 3.0 倍（") and str(slow).endswith("，4 个线程）")
    same = timing.Comparison(("x", "y"), (1.0, 1.0, 1.0), (1.0, 1.0, 1.0), (1.0, 1.0, 1.0), 2)
    assert str(same).startswith("计时：在这台机器上，x 和 y 之间没有明显差异，比值 1.00x（")
    assert str(same).count("（") == 1
    sanitizer = (Path(__file__).parent / "nbval_sanitize.cfg").read_text(encoding="utf-8")
    assert "regex: 计时：[^\\n]*" in sanitizer and "regex: timing: [^\\n]*" in sanitizer
    assert same.verdict == "no clear difference"  # data: English in every language


def test_the_stored_output_sanitizer_masks_a_chinese_timing_line(chinese):
    cfg = (Path(__file__).parent / "nbval_sanitize.cfg").read_text(encoding="utf-8")
    m = re.search(r"\[timing zh\]\nregex: (.*)\nreplace: (.*)", cfg)
    fn = _work(100)
    line = str(dg.compare(fn, fn, rounds=3, min_run_time=0.01))
    assert "\n" not in line and re.search("[\u4e00-\u9fff]", line)
    assert re.sub(m.group(1), m.group(2), f"before\n{line}\nafter") == f"before\n{m.group(2)}\nafter"


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"rounds": 2}, r"rounds=2: use an int of at least 3"),
    ({"rounds": 3.5}, r"rounds=3\.5"),
    ({"min_run_time": 0}, r"min_run_time=0: use a positive number"),
    ({"min_run_time": float("nan")}, r"min_run_time=nan"),
])
def test_compare_rejects_bad_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        dg.compare(lambda: None, lambda: None, **kwargs)


def test_compare_rejects_what_is_not_callable():
    with pytest.raises(TypeError, match=r"b=3 is not callable \(wrap the code: lambda: \.\.\.\)"):
        dg.compare(lambda: None, 3)


def _seen_threads():
    """A function for compare() that records torch's thread count at each call."""
    seen: list[int] = []
    return seen, lambda: seen.append(torch.get_num_threads())


@pytest.fixture
def four_threads():
    """Start from 4 threads (a count no default gives), so that a restore is visible."""
    before = torch.get_num_threads()
    torch.set_num_threads(4)
    yield 4
    torch.set_num_threads(before)


def test_compare_runs_both_functions_on_one_thread_and_restores_the_count(four_threads):
    seen_a, a = _seen_threads()
    seen_b, b = _seen_threads()
    c = dg.compare(a, b, rounds=3, min_run_time=1e-4)
    assert set(seen_a) == set(seen_b) == {1}          # warm-up, calibration and every block
    assert c.threads == 1 and str(c).endswith("3 interleaved rounds, 1 thread, CPU time)")
    assert torch.get_num_threads() == four_threads


def test_compare_takes_another_thread_count_or_none_for_the_current_one(four_threads):
    seen, fn = _seen_threads()
    assert dg.compare(fn, fn, rounds=3, min_run_time=1e-4, threads=2).threads == 2
    assert set(seen) == {2} and torch.get_num_threads() == four_threads
    seen.clear()
    assert dg.compare(fn, fn, rounds=3, min_run_time=1e-4, threads=None).threads == four_threads
    assert set(seen) == {four_threads}


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
def test_compare_restores_the_thread_count_when_a_function_raises(four_threads, error):
    calls = []

    def fails_on_the_third_call():
        calls.append(torch.get_num_threads())
        if len(calls) == 3:
            raise error

    with pytest.raises(type(error)):
        dg.compare(lambda: None, fails_on_the_third_call, rounds=3, min_run_time=1e-4)
    assert calls == [1, 1, 1] and torch.get_num_threads() == four_threads


def test_compare_restores_a_count_that_a_timed_function_changed(four_threads):
    dg.compare(lambda: torch.set_num_threads(3), lambda: None, rounds=3, min_run_time=1e-4)
    assert torch.get_num_threads() == four_threads


@pytest.mark.parametrize(("threads", "match"), [
    (0, r"threads=0: use an int of at least 1 \(the default, 1, times on one thread\), or None"),
    (-2, r"threads=-2: use an int of at least 1"),
    (1.5, r"threads=1\.5: use an int of at least 1"),
    ("2", r"threads='2': use an int of at least 1"),
    (True, r"threads=True: use an int of at least 1"),
])
def test_compare_rejects_a_bad_thread_count_and_changes_nothing(four_threads, threads, match):
    with pytest.raises(ValueError, match=match):
        dg.compare(lambda: None, lambda: None, threads=threads)
    assert torch.get_num_threads() == four_threads


@pytest.mark.parametrize(("names", "match"), [
    (("A",), r"names=\('A',\): pass two names, the first for a and the second for b, "
             r"e\.g\. names=\(\"loop\", \"batched\"\)"),
    (("a", "b", "c"), r"names=\('a', 'b', 'c'\): pass two names"),
    ("ab", r"names='ab': pass two names"),
    (None, r"names=None: pass two names"),
])
def test_compare_needs_exactly_two_names(names, match):
    with pytest.raises(ValueError, match=match):
        dg.compare(lambda: None, lambda: None, names=names)


def test_compare_takes_names_as_a_list():
    c = dg.compare(lambda: None, lambda: None, names=["x", "y"], rounds=3, min_run_time=1e-4)
    assert c.names == ("x", "y")


def _ticking():
    """A fake clock that moves 1 second each time it is read, and counts its reads."""
    reads = []

    def read():
        reads.append(1)
        return float(len(reads))
    return reads, read


def test_compare_reads_cpu_time_by_default_and_the_wall_clock_when_asked(monkeypatch):
    cpu_reads, cpu = _ticking()
    wall_reads, wall = _ticking()
    monkeypatch.setattr(timing, "_CLOCKS", {"cpu": cpu, "wall": wall})
    c = dg.compare(lambda: None, lambda: None, rounds=3, min_run_time=1e-4)
    assert c.clock == "cpu" and cpu_reads and not wall_reads
    assert str(c).endswith("3 interleaved rounds, 1 thread, CPU time)")
    cpu_reads.clear()
    c = dg.compare(lambda: None, lambda: None, rounds=3, min_run_time=1e-4, clock="wall")
    assert c.clock == "wall" and wall_reads and not cpu_reads
    assert str(c).endswith("3 interleaved rounds, 1 thread)")


def test_compare_times_by_the_wall_clock_when_cuda_is_in_use(monkeypatch):
    """The GPU's work is not CPU time: with CUDA in use, "cpu" falls back to the wall clock."""
    cpu_reads, cpu = _ticking()
    wall_reads, wall = _ticking()
    monkeypatch.setattr(timing, "_CLOCKS", {"cpu": cpu, "wall": wall})
    monkeypatch.setattr(timing, "_cuda_in_use", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    c = dg.compare(lambda: None, lambda: None, rounds=3, min_run_time=1e-4)
    assert c.clock == "wall" and wall_reads and not cpu_reads


def test_the_cpu_time_note_reads_in_chinese(chinese):
    c = timing.Comparison(("a", "b"), (1.0, 1.0, 1.0), (1.0, 1.0, 1.0), (1.0, 1.0, 1.0), 1, "cpu")
    assert str(c).endswith("交替进行 3 轮，1 个线程，CPU 时间）")


@pytest.mark.parametrize("clock", ["CPU", "process", None, 1])
def test_compare_rejects_an_unknown_clock(clock):
    with pytest.raises(ValueError, match=r"clock=.*: use \"cpu\" \(CPU time, the default: load does not change it\) "
                                         r"or \"wall\" \(wall-clock time\)"):
        dg.compare(lambda: None, lambda: None, clock=clock)
