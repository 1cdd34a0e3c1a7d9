"""The advisor's GPU kinds against measured fixes (docs/advisor.md, bench/advisor_calibration_gpu.py), on a
CUDA device: host_bound (a launch-bound MLP, fixed by mode="reduce-overhead"), sync (loss.item() each
step), memcpy (a pageable batch, fixed by a pinned non_blocking copy) and precision (float32 matmuls,
fixed by TF32). As the CPU cases (test_advisor_calibration.py): the capture's finding of the planted
kind ranks in the top 3 and its estimate is within 0.5-2x of the gain measured by timing the loop with
the problem and with the fix (paired rounds, medians), in microseconds and in shares of the step.
Each case prints its row of docs/advisor.md's table (run with -s). Skipped with a reason without CUDA
(tests/conftest.py); tools/gpu_check.sh's advisor phase runs it."""

from __future__ import annotations

import os
import sys

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import advisor_calibration as cal  # noqa: E402
import advisor_calibration_gpu as gpu_cal  # noqa: E402
from test_advisor_calibration import (assert_calibrated,  # noqa: E402  (pytest puts this folder on sys.path)
                                      rerun_if_only_the_times_drifted)


@pytest.mark.parametrize("case", gpu_cal.CASES, ids=lambda c: c.__name__)
def test_gpu_planted_problem_ranks_and_estimate_within_2x(case):
    r = rerun_if_only_the_times_drifted(case, case())
    print("\n" + cal.table([r]).splitlines()[-1])
    assert_calibrated(r)
