"""Test helper: the traces the engine-equality tests run every engine on (test_summary_stream,
test_summary_fork): the GPU fixtures and the real traces in ../shared/traces (or
$INDUCTOR_PERF_SHARED_TRACES)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
TRACES = Path(os.environ.get("INDUCTOR_PERF_SHARED_TRACES", ROOT / ".." / "shared" / "traces"))
SHARED = ["a100_ranks8_r3_control.json.gz", "v100_ranks2_r1_test.json.gz", "mi250_minitoy_train_rocm6.json.gz",
          "a100_triton_example.json.gz", "two_ranks/sampled_rank-0.json.gz", "two_ranks/sampled_rank-1.json.gz"]
GPU_FIXTURES = sorted(p.name for p in (FIXTURES / "gpu").glob("*.trace.json.gz"))


def generated_trace(folder: Path, events: int = 3000) -> Path:
    """A Kineto-layout trace of about ``events`` events from the bench generator (bench/gen_trace.py:
    one host thread), written in ``folder``."""
    p = folder / "kineto.json"
    subprocess.run([sys.executable, str(ROOT / "bench" / "gen_trace.py"), str(events), str(p)], check=True,
                   capture_output=True)
    return p
