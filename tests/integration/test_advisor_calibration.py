"""The advisor's calibration (docs/advisor.md, bench/advisor_calibration.py): a training loop with a
problem planted, compiled with backend="inductor_perf" and captured with INDUCTOR_PERF_TRACE_DIR set
(a child process); the capture's finding of the planted kind ranks in the top 3, and its estimated
saving is within 0.5-2x of the gain measured by timing the loop with the problem and with the fix
(paired rounds, medians of time.perf_counter around each step): in microseconds a step (the capture
states them against the step it timed without the profiler) and as shares of the step."""

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
    r = case()
    if r.kind == "precision" and r.rank is None:
        # a CPU without a faster bfloat16 path (no AMX, no AVX512_BF16): the finding is rightly absent
        # only if the fix indeed buys little there. Where it fires the faster roof is 1.5x or more, so
        # its compute-bound matmuls (most of this step) would save a third of the step or more.
        assert r.measured_pct < 33, (f"no precision finding, yet autocast bfloat16 saved {r.measured_pct:.0f} % "
                                     f"of the step: {r}")
        return
    assert_calibrated(r)


def assert_calibrated(r: cal.Result) -> None:
    """The planted kind ranks in the top 3, and its estimate is within 0.5-2x of the measured gain, in
    microseconds a step and in shares of the step (also the GPU cases': test_advisor_calibration_gpu.py)."""
    assert r.rank is not None and r.rank <= 3, f"{r.kind} not in the top 3 (rank {r.rank})"
    assert r.measured_us > 0, f"the fix measured no gain: {r}"
    assert 0.5 <= r.ratio_us <= 2.0, (f"estimate {r.estimate_us:.0f} µs a step vs measured "
                                      f"{r.measured_us:.0f} µs: {r}")
    assert 0.5 <= r.ratio <= 2.0, (f"estimate {r.estimate_pct:.0f} % of the step vs measured "
                                   f"{r.measured_pct:.0f} %: {r}")
