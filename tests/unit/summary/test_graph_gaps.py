"""The time between compiled pieces inside each step (summary.graph_gaps), on hand-built traces with
hand arithmetic, from both summary engines (the full load and the streaming pass)."""

from __future__ import annotations

import json

import pytest

from inductor_perf.summary.core import summarize
from inductor_perf.summary.graph_gaps import gaps_in_steps
from inductor_perf.summary.stream import engine as summary_stream


def _x(name, ts, dur, tid=1, cat="cpu_op", **args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid, "args": args}


def _trace() -> dict:
    """Two steps of a model broken in two: fwd pieces graph 0 and 1, then their backward on thread 2.

    step 0 [0, 1000): fwd 0 [100, 300), fwd 1 [340, 500)        -> fwd gap 40
                      bwd 1 [600, 700), bwd 0 [760, 900) (tid 2) -> bwd gap 60
    step 1 [1000, 2000): fwd 0 [1100, 1300), fwd 1 [1400, 1500) -> fwd gap 100
                         bwd 1 [1600, 1700), bwd 0 [1720, 1900) -> bwd gap 20
    A call nested in another (fwd 1 inside fwd 0 at [150, 160)) is skipped; a call outside any step
    ([2100, 2200)) and the time before the first and after the last call do not count.
    Medians of two steps are their means: fwd (40 + 100) / 2 = 70, bwd (60 + 20) / 2 = 40, total
    (100 + 120) / 2 = 110; 2 gaps, 4 calls per step.
    Each call but the nested one sits in Inductor's ``## Call CompiledFxGraph`` range, which starts
    1.5 us before it (the recording cost read off the trace). Events starting inside the gaps: the
    Call ranges of the second piece of each gap (4) plus a cache lookup at 310 and an aten::item at
    1320: 6 over 2 steps, 3 per step.
    """
    ev = [_x("ProfilerStep#0", 0, 1000, cat="user_annotation"), _x("ProfilerStep#1", 1000, 1000, cat="user_annotation")]
    for s, e, g, d, tid in ((100, 300, 0, "fwd", 1), (150, 160, 1, "fwd", 1), (340, 500, 1, "fwd", 1),
                            (600, 700, 1, "bwd", 2), (760, 900, 0, "bwd", 2),
                            (1100, 1300, 0, "fwd", 1), (1400, 1500, 1, "fwd", 1),
                            (1600, 1700, 1, "bwd", 2), (1720, 1900, 0, "bwd", 2), (2100, 2200, 0, "fwd", 1)):
        ev.append(_x(f"## inductor_perf graph={g} {d} ##", s, e - s, tid=tid))
        if (s, e) != (150, 160):
            ev.append(_x("## Call CompiledFxGraph abc ##", s - 1.5, e - s + 2, tid=tid, cat="user_annotation"))
        ev.append(_x("triton_poi_fused_0", s + 1, 5, tid=tid))
        ev.append(_x("cuLaunchKernel", s + 2, 2, tid=tid, cat="cuda_driver", correlation=s))
        ev.append(_x("triton_poi_fused_0", s + 10, e - s - 20, tid=7, cat="kernel", correlation=s, device=0,
                     stream=7))
    ev += [_x("TorchDynamo Cache Lookup", 310, 3), _x("aten::item", 1320, 2)]
    return {"traceEvents": ev, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]}


def test_gaps_hand_arithmetic() -> None:
    g = summarize(_trace()).graph_gaps
    assert g is not None
    assert (g.steps, g.calls_per_step, g.gaps_per_step) == (2, 4.0, 2.0)
    assert g.fwd_gap_us_per_step == pytest.approx(70.0)
    assert g.bwd_gap_us_per_step == pytest.approx(40.0)
    assert g.gap_us_per_step == pytest.approx(110.0)
    assert g.events_in_gaps_per_step == pytest.approx(3.0)
    assert g.record_cost_us == pytest.approx(1.5)


def test_streaming_engine_gives_the_same(tmp_path) -> None:
    path = tmp_path / "broken.trace.json"
    path.write_text(json.dumps(_trace()))
    streamed = summary_stream.summarize_file_stream(str(path))
    assert streamed is not None, "the streaming engine did not take this GPU trace"
    assert streamed[0].to_dict()["graph_gaps"] == summarize(_trace()).to_dict()["graph_gaps"]


def test_no_calls_or_no_steps_is_unknown() -> None:
    assert summarize({"traceEvents": [_x("ProfilerStep#0", 0, 100, cat="user_annotation"),
                                      _x("aten::mm", 10, 10)]}).graph_gaps is None
    assert gaps_in_steps([], [(0, 10, 1, False)]) is None


def test_gap_time_is_the_median_step() -> None:
    # three steps with gaps of 10, 1000 (a step slowed by the machine) and 20: the median is 20
    calls = [(0, 5, 1, False), (15, 20, 1, False), (100, 105, 1, False), (1105, 1110, 1, False),
             (3000, 3005, 1, False), (3025, 3030, 1, False)]
    g = gaps_in_steps([(0, 50), (100, 2000), (3000, 3100)], calls)
    assert g.gap_us_per_step == 20.0 and g.gaps_per_step == 1.0


def test_one_piece_per_step_has_no_gap() -> None:
    g = gaps_in_steps([(0, 100), (100, 200)], [(10, 50, 1, False), (110, 150, 1, False)])
    assert (g.steps, g.gaps_per_step, g.gap_us_per_step) == (2, 0.0, 0.0)
