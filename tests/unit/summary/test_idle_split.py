"""Per-stream idle split (summary/idle_split.py, HTA's idle time breakdown) on a hand-built GPU trace
whose gaps are known by construction, in both engines."""

from __future__ import annotations

import json

import pytest

from inductor_perf.summary.core import summarize
from inductor_perf.summary.files import summarize_file
from inductor_perf.summary.stream import engine as summary_stream


def _launch(corr: int, ts: float) -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts, "dur": 1.0, "pid": 1, "tid": 1,
            "args": {"correlation": corr}}


def _kernel(corr: int | None, ts: float, dur: float, tid: int = 7) -> dict:
    args = {"correlation": corr} if corr is not None else {}
    return {"ph": "X", "cat": "kernel", "name": f"k{corr}", "ts": ts, "dur": dur, "pid": 0, "tid": tid, "args": args}


# Stream 0/7: k1 [0, 10]; k2 launched at 5, before k1 ends, starts at 30: a 20 µs gap under the
# 30 µs threshold (launch delay); k3 launched at 40, after k2 ends at 35, starts at 45: 10 µs of host
# wait (35 to 45); k4 launched at 42, before k3 ends at 50, starts at 100: 50 µs, over the threshold: other
# (queued, waiting); k5 has no launch call and starts 35 µs after k4 ends at 105, over the threshold:
# other. Stream 0/8: one kernel, no gap. Idle of 0/7: 20 + 10 + 50 + 35 = 115 µs over its span [0, 145].
TRACE = {"traceEvents": [
    _launch(1, -5), _kernel(1, 0, 10),
    _launch(2, 5), _kernel(2, 30, 5),
    _launch(3, 40), _kernel(3, 45, 5),
    _launch(4, 42), _kernel(4, 100, 5),
    _kernel(None, 140, 5),
    _launch(6, 1), _kernel(6, 3, 4, tid=8),
]}


def _by_stream(d: dict) -> dict:
    return {r["stream"]: r for r in d["idle_by_stream"]}


def test_gaps_filed_by_launch_time():
    rows = _by_stream(summarize(TRACE).to_dict())
    s = rows["0/7"]
    assert s["kernels"] == 5 and s["span_us"] == pytest.approx(145)
    assert s["host_wait_us"] == pytest.approx(10)
    assert s["launch_delay_us"] == pytest.approx(20)
    assert s["other_us"] == pytest.approx(85)
    assert s["idle_us"] == pytest.approx(115)
    assert s["host_wait_pct"] == pytest.approx(100 * 10 / 115, abs=1e-3)
    assert s["host_wait_pct"] + s["launch_delay_pct"] + s["other_pct"] == pytest.approx(100, abs=1e-2)
    assert rows["0/8"]["idle_us"] == 0 and rows["0/8"]["host_wait_pct"] is None  # no gap: no shares
    assert list(rows) == ["0/7", "0/8"]  # most idle first


def test_same_in_the_streaming_engine(tmp_path):
    p = tmp_path / "gaps.json"
    p.write_text(json.dumps(TRACE))
    full = summarize_file(str(p), engine="full").summary.to_dict()
    streamed = summary_stream.summarize_file_stream(str(p))[0].to_dict()
    assert full["idle_by_stream"] == streamed["idle_by_stream"]
    assert _by_stream(streamed)["0/7"]["host_wait_us"] == pytest.approx(10)


def test_cpu_trace_has_no_rows():
    cpu = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 10, "pid": 1, "tid": 1},
                           {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 20, "dur": 10, "pid": 1, "tid": 1}]}
    assert summarize(cpu).idle_by_stream == []


def test_gap_counts_from_the_latest_end_so_far():
    # Stream 0/7: k1 [0, 100]; k2 [10, 20] runs inside it; k3 (launched at 5) starts at 50 while k1
    # still runs: no idle (a gap taken from the previous kernel's end, k2's 20, as HTA does, would be
    # 30 µs); k3 ends at 110; k4, launched at 120 after the stream went idle, starts at 130: 20 µs of
    # host wait from the latest end so far. Idle: 20 µs, all host wait; span [0, 135].
    trace = {"traceEvents": [_launch(1, -5), _kernel(1, 0, 100), _launch(2, -3), _kernel(2, 10, 10),
                             _launch(3, 5), _kernel(3, 50, 60), _launch(4, 120), _kernel(4, 130, 5)]}
    s = _by_stream(summarize(trace).to_dict())["0/7"]
    assert s["idle_us"] == pytest.approx(20) and s["host_wait_us"] == pytest.approx(20)
    assert s["span_us"] == pytest.approx(135)
