"""advice.compile.find on hand-built compile records and summaries, with hand arithmetic."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from inductor_perf.advice.compile import find
from inductor_perf.advice.finding import ranked
from inductor_perf.summary.graph_gaps import GraphGaps

ITEM = ("Unsupported Tensor.item() call with capture_scalar_outputs=False\n  Explanation: ...\n"
        "  Hint: Set `torch._dynamo.config.capture_scalar_outputs = True`")
PRINT = "Failed to trace builtin operator\n  Hint: Avoid calling builtin `print` in the compiled code"


def _summary(step_us=(1000.0, 1200.0, 1100.0, 1000.0), gap_us=300.0, events=None, cost=None):
    steps = [SimpleNamespace(dur_us=d) for d in step_us]
    gaps = GraphGaps(steps=len(steps), calls_per_step=3.0, gaps_per_step=2.0, gap_us_per_step=gap_us,
                     fwd_gap_us_per_step=gap_us, bwd_gap_us_per_step=0.0, events_in_gaps_per_step=events,
                     record_cost_us=cost)
    return SimpleNamespace(steps=steps, graph_gaps=gaps)


def _frame(cid, compile_s, reason=None, in_window=False, frame="forward", line=10):
    return {"compile_id": cid, "frame": frame, "file": "/home/me/model.py", "line": line, "compile_s": compile_s,
            "recompile_reason": reason, "fail_type": None, "fail_reason": None, "start_us": 0,
            "in_window": in_window}


def _break(reason, line, count=1):
    return {"reason": reason, "file": "/home/me/model.py", "line": line, "frame": "forward", "count": count,
            "source": f"/home/me/model.py:{line}"}


def test_no_record_no_findings() -> None:
    assert find(None, _summary()) == []
    assert find({"device": None}, _summary()) == []


def test_graph_break_saving_is_the_gap_per_step() -> None:
    record = {"compile": {"frames": [_frame("0/0", 2.0), _frame("1/0", 1.0, frame="resume")],
                          "graph_breaks": [_break(ITEM, 12)], "recompile_limit": 8}}
    (f,) = find(record, _summary())
    assert f.kind == "graph_break"
    assert f.source == "/home/me/model.py:12"
    assert f.saving_us_per_step == pytest.approx(300.0)
    # median step of 1000, 1000, 1100, 1200 is (1000 + 1100) / 2 = 1050; 300 / 1050 = 28.571 %
    assert f.saving_pct_of_step == pytest.approx(28.571, abs=1e-3)
    assert "capture_scalar_outputs" in f.fix and "one graph with no gap" in f.evidence
    assert f.one_time_s is None


def test_profiler_recording_cost_is_taken_off() -> None:
    record = {"compile": {"frames": [], "graph_breaks": [_break(ITEM, 12)]}}
    (f,) = find(record, _summary(gap_us=300.0, events=20.0, cost=1.5))
    assert f.saving_us_per_step == pytest.approx(300.0 - 20 * 1.5)  # 270
    assert "less 30.0 us" in f.evidence
    (g,) = find(record, _summary(gap_us=10.0, events=20.0, cost=1.5))  # never below zero
    assert g.saving_us_per_step == 0.0 and not g.measurable


def test_two_breaks_split_the_gap_evenly() -> None:
    record = {"compile": {"frames": [], "graph_breaks": [_break(ITEM, 12), _break(PRINT, 20)]}}
    fs = find(record, _summary(gap_us=300.0))
    assert [f.saving_us_per_step for f in fs] == [pytest.approx(150.0), pytest.approx(150.0)]
    assert "print" in fs[1].fix and "evenly" in fs[1].evidence


def test_graph_break_without_steps_is_not_measured() -> None:
    record = {"compile": {"frames": [], "graph_breaks": [_break(ITEM, 12)]}}
    (f,) = find(record, SimpleNamespace(steps=[], graph_gaps=None))
    assert f.saving_us_per_step is None and not f.measurable
    assert ranked([f]) == []


def test_recompile_counts_guards_and_seconds() -> None:
    frames = [_frame("0/0", 2.0),
              _frame("0/1", 0.5, "0/0: tensor 'x' size mismatch at index 0. expected 8, actual 9"),
              _frame("0/2", 0.7, "0/1: tensor 'x' size mismatch at index 0. expected 9, actual 10", in_window=True),
              _frame("0/3", 0.9, "0/2: tensor 'x' size mismatch at index 0. expected 10, actual 11", in_window=True),
              _frame("1/0", 1.0, frame="other", line=30)]
    (f,) = find({"compile": {"frames": frames, "graph_breaks": [], "recompile_limit": 8}}, _summary())
    assert f.kind == "recompile"
    assert f.title.startswith("forward (model.py:10) compiled 4 times")
    assert f.one_time_s == pytest.approx(0.5 + 0.7 + 0.9)
    # in the window: 0.7 + 0.9 s over 4 steps = 0.4 s = 400000 us per step
    assert f.saving_us_per_step == pytest.approx(400000.0)
    assert f.saving_pct_of_step == pytest.approx(100.0 * 400000 / 1050, abs=1e-3)
    assert "size mismatch at index 0. expected 8, actual 9" in f.evidence
    assert f.evidence.count("size mismatch") == 1  # one guard of each kind
    assert "mark_dynamic" in f.fix and "dynamic=True" in f.fix
    assert "recompile limit" not in f.evidence


def test_recompile_outside_the_window_is_one_time_only_and_limit_is_said() -> None:
    frames = [_frame("0/0", 1.0)] + [_frame(f"0/{i}", 0.25, f"0/{i - 1}: tensor 'x' size mismatch") for i in range(1, 4)]
    (f,) = find({"compile": {"frames": frames, "graph_breaks": [], "recompile_limit": 4}}, _summary())
    assert f.saving_us_per_step is None and f.one_time_s == pytest.approx(0.75)
    assert f.measurable
    assert "recompile limit (4)" in f.evidence


def test_recompile_on_a_python_value_gets_its_own_fix() -> None:
    frames = [_frame("1/0", 0.5, frame="resume"),
              _frame("1/1", 0.2, "1/0: ___stack0 == 0.22880780696868896  # if y.mean().item() > 0.5:", frame="resume")]
    (f,) = find({"compile": {"frames": frames, "graph_breaks": []}}, _summary())
    assert "Python number" in f.fix and "mark_dynamic" not in f.fix
    other = [_frame("2/0", 0.5), _frame("2/1", 0.2, "2/0: ___check_obj_id(L['self'].mode, 140)")]
    (g,) = find({"compile": {"frames": other, "graph_breaks": []}}, _summary())
    assert "failed guard" in g.fix


def test_on_a_gpu_trace_the_evidence_says_the_gap_is_an_upper_bound() -> None:
    record = {"compile": {"frames": [], "graph_breaks": [_break(ITEM, 12)]}}
    gpu = _summary()
    gpu.kernel_definition = "gpu-kernels"
    assert "upper bound" in find(record, gpu)[0].evidence
    assert "upper bound" not in find(record, _summary())[0].evidence
