"""The median of step times, wherever we print one: of an even count, the mean of the middle two.
Expected values by hand."""

from __future__ import annotations

from inductor_perf.comparison.rows import Comparison, SideTotals
from inductor_perf.comparison.runner import _add_unprofiled_times
from inductor_perf.summary.core import summarize
from inductor_perf.summary.steps import median


def X(name, ts, dur, cat="kernel", pid=0, tid=7):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid}


def test_median_of_an_even_count_is_the_mean_of_the_middle_two():
    assert median([3.0, 1.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 10.0]) == 3.5  # middle two: 3 and 4
    assert median([5.0, 1.0, 3.0]) == 3.0
    assert median([]) is None


def test_slowest_step_note_prints_the_mean_median_of_two_steps():
    """Steps of 100 and 50 µs: median 75 µs = 0.075 ms (not 0.1 ms, the longer one)."""
    trace = {"traceEvents": [
        X("ProfilerStep#1", 0, 100, cat="user_annotation", pid=1, tid=1),
        X("ProfilerStep#2", 100, 50, cat="user_annotation", pid=1, tid=1),
        X("gemm", 10, 30), X("gemm", 110, 30)]}
    notes = [n for n in summarize(trace).notes if n.startswith("slowest step")]
    assert notes == ["slowest step: ProfilerStep#1 (100 µs; median 75 µs)"]


def test_compare_unprofiled_step_time_is_the_mean_median_of_two_runs():
    """compare(timing=True) with 2 timed steps: eager 10 and 30 µs -> 20 µs; compiled 4 and 8 -> 6."""
    side = dict(steps=2, steps_from="step ranges", step_us=20.0, attributed_us=0.0, compiled=False,
                has_module_info=False, has_source_info=False)
    c = Comparison(by="module", a=SideTotals(label="eager", **side), b=SideTotals(label="compiled", **side), rows=[])
    _add_unprofiled_times(c, [30.0, 10.0], [8.0, 4.0])
    assert (c.a.unprofiled_step_us, c.b.unprofiled_step_us) == (20.0, 6.0)
