"""The advisor's calibration (docs/advisor.md, bench/advisor_calibration.py): a training loop with a
problem planted, compiled with backend="inductor_perf" and captured with INDUCTOR_PERF_TRACE_DIR set
(a child process); the capture's finding of the planted kind ranks in the top 3, and its estimated
saving is within 0.5-2x of the gain measured by timing the loop with the problem and with the fix
(paired rounds, medians of time.perf_counter around each step): in microseconds a step (the capture
states them against the step it timed without the profiler) and as shares of the step. A case that
misses only in times (its shares within bounds) is measured once more, and that run must pass."""

from __future__ import annotations

import os
import sys

import pytest

pytestmark = pytest.mark.slow

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import advisor_calibration as cal  # noqa: E402


@pytest.fixture(autouse=True)
def one_thread():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)  # two threads on a shared two-core machine wait on each other
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("case", cal.CASES, ids=lambda c: c.__name__)
def test_planted_problem_ranks_and_estimate_within_2x(case):
    r = rerun_if_only_the_times_drifted(case, case())
    if r.kind == "precision" and r.rank is None and r.measured_pct >= 33:
        # no finding, yet the fix paid: the roofs this process measured once (one 5 s calibration
        # on a shared machine) decide whether bfloat16 is faster here. Measured again, roofs included.
        print(f"\nprecision: no finding, {r.measured_pct:.0f} % measured; roofs: {cal.measured_roofs()}")
        cal.remeasure_roofs()
        r = case()
    if r.kind == "precision" and r.rank is None:
        # a CPU without a faster bfloat16 path (no AMX, no AVX512_BF16): the finding is rightly absent
        # only if the fix indeed buys little there. Where it fires the faster roof is 1.5x or more, so
        # its compute-bound matmuls (most of this step) would save a third of the step or more.
        assert r.measured_pct < 33, (f"no precision finding, yet autocast bfloat16 saved {r.measured_pct:.0f} % "
                                     f"of the step: {r}; roofs: {cal.measured_roofs()}")
        return
    assert_calibrated(r)


def rerun_if_only_the_times_drifted(case, r: cal.Result) -> cal.Result:
    """``r``, or a second run of ``case`` when ``r`` misses only on the ratio of times. The capture (the
    estimate, in µs) and the timed rounds (the measured gain) run in different processes at different
    moments; on a shared machine the whole step can run 1.5x slower in one than in the other (the
    headroom case, DRAM-bound, once measured 19.4 -> 9.2 ms against 12.2 -> 3.0 ms, estimate 20.8 ms:
    2.04x in times, 1.59x in shares). The ratio of shares is immune to that, and is never retried."""
    if r.rank is not None and r.rank <= 3 and r.measured_us > 0 and 0.5 <= r.ratio <= 2.0 \
            and not 0.5 <= r.ratio_us <= 2.0:
        print(f"\n{r.kind}: {r.ratio_us:.2f}x in times, {r.ratio:.2f}x in shares; measuring again: {r}")
        return case()
    return r


def assert_calibrated(r: cal.Result) -> None:
    """The planted kind ranks in the top 3, and its estimate is within 0.5-2x of the measured gain, in
    microseconds a step and in shares of the step (also the GPU cases': test_advisor_calibration_gpu.py)."""
    assert r.rank is not None and r.rank <= 3, f"{r.kind} not in the top 3 (rank {r.rank})"
    assert r.measured_us > 0, f"the fix measured no gain: {r}"
    assert 0.5 <= r.ratio_us <= 2.0, (f"estimate {r.estimate_us:.0f} µs a step vs measured "
                                      f"{r.measured_us:.0f} µs: {r}")
    assert 0.5 <= r.ratio <= 2.0, (f"estimate {r.estimate_pct:.0f} % of the step vs measured "
                                   f"{r.measured_pct:.0f} %: {r}")
