"""The recorded window of a capture's raw trace (capture/window.py) and the threads it names.
Hand-built traces; every expected number is worked out beside it."""

from __future__ import annotations

import copy

from inductor_perf.capture.window import marker_threads, shape_window, unrecorded_threads
from inductor_perf.summary.core import summarize


def X(name, ts, dur, cat="cpu_op", pid=1, tid=1, **args):
    ev = {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid}
    if args:
        ev["args"] = args
    return ev


FWD = "## inductor_perf graph=1 fwd ##"
BWD = "## inductor_perf graph=2 bwd ##"


def env_capture_trace():
    """What the env-var session records, on thread (1, 1), in µs:

    - the profiler's run, Kineto's span [0, 400]; a user range "epoch" [5, 400] around every step;
    - warm-up step: its forward call [10, 40] (marker [12, 38]) launches device work (correlation
      9, kernel [105, 115]); backward marker [50, 60]; optimizer [62, 70];
    - step 0 begins with the root call "Torch-Compiled Region" [100, 160]; the session marked the
      step inside it, at 120 (ProfilerStep#0 [120, 220]); markers [125, 150] and [170, 180];
      a launch (correlation 7) at [130, 135] whose kernel runs [330, 340], after the window;
    - step 1: region [200, 260], marked at 220 (ProfilerStep#1 [220, 320]); markers [225, 250],
      [270, 280];
    - the next step's call: region [300, 330], marked at 320 (collection off there), call [305, 325];
    - on thread 2, a range [90, 110] across the window's start.

    Expected: boundaries 120, 220, 320 move back 20 to the regions' starts 100, 200, 300 ("epoch"
    began before the warm-up's last graph call, so it is no part of step 0's call); the window is
    [100, 300]: the warm-up, the next call and thread 2's straddling range are dropped, as is the
    kernel of correlation 9 and its flow; the kernel of correlation 7 stays (its launch is kept)."""
    return {"traceEvents": [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}},
        X("PyTorch Profiler (0)", 0, 400, cat="Trace", pid="Spans", tid="PyTorch Profiler"),
        X("epoch", 5, 395, cat="user_annotation"),
        X("Torch-Compiled Region: 0/0", 10, 30, cat="user_annotation"),
        X(FWD, 12, 26, cat="user_annotation"),
        X("cudaLaunchKernel", 20, 5, cat="cuda_runtime", correlation=9),
        X(BWD, 50, 10, cat="user_annotation"),
        X("Optimizer.step#SGD.step", 62, 8, cat="user_annotation"),
        X("Torch-Compiled Region: 0/0", 100, 60, cat="user_annotation"),
        X("ProfilerStep#0", 120, 100, cat="user_annotation"),
        X(FWD, 125, 25, cat="user_annotation"),
        X("cudaLaunchKernel", 130, 5, cat="cuda_runtime", correlation=7),
        X(BWD, 170, 10, cat="user_annotation"),
        X("Torch-Compiled Region: 0/0", 200, 60, cat="user_annotation"),
        X("ProfilerStep#1", 220, 100, cat="user_annotation"),
        X(FWD, 225, 25, cat="user_annotation"),
        X(BWD, 270, 10, cat="user_annotation"),
        X("Torch-Compiled Region: 0/0", 300, 30, cat="user_annotation"),
        X("## Call CompiledFxGraph k ##", 305, 20, cat="user_annotation"),
        X("loader", 90, 20, tid=2),
        X("gemm", 105, 10, cat="kernel", pid=0, tid=7, correlation=9),
        X("gemm", 330, 10, cat="kernel", pid=0, tid=7, correlation=7),
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 9, "pid": 1, "tid": 1, "ts": 20},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 9, "pid": 0, "tid": 7, "ts": 105, "bp": "e"},
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": 1, "tid": 1, "ts": 130},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": 0, "tid": 7, "ts": 330, "bp": "e"},
    ]}


def test_env_capture_window_steps_run_from_call_start_to_call_start():
    trace = env_capture_trace()
    shape = shape_window(trace, align_to_calls=True, drop_partial=False)
    assert (shape.steps, shape.start_us, shape.end_us) == (2, 100, 300)
    assert shape.moved_boundaries == [20, 20, 20]
    events = trace["traceEvents"]
    steps = {e["name"]: (e["ts"], e["dur"]) for e in events if e["name"].startswith("ProfilerStep#")}
    assert steps == {"ProfilerStep#0": (100, 100), "ProfilerStep#1": (200, 100)}
    host = sorted((e["ts"], e["name"]) for e in events if e.get("ph") == "X" and e["cat"] not in ("kernel", "Trace"))
    assert host == sorted([(100, "Torch-Compiled Region: 0/0"), (100, "ProfilerStep#0"), (125, FWD),
                           (130, "cudaLaunchKernel"), (170, BWD), (200, "Torch-Compiled Region: 0/0"),
                           (200, "ProfilerStep#1"), (225, FWD), (270, BWD)])
    assert [(e["ts"], e["args"]["correlation"]) for e in events if e.get("cat") == "kernel"] == [(330, 7)]
    assert sorted((e["ph"], e["id"]) for e in events if e.get("cat") == "ac2g") == [("f", 7), ("s", 7)]
    assert [e["name"] for e in events if e.get("cat") == "Trace"] == ["PyTorch Profiler (0)"]  # whole run
    assert [e["ts"] for e in events if e.get("cat") == "Trace"] == [0]
    assert any(e.get("ph") == "M" for e in events)
    assert shape.dropped_events == len(env_capture_trace()["traceEvents"]) - len(events)


def test_env_capture_window_summary_counts_the_two_steps_only():
    trace = env_capture_trace()
    shape_window(trace, align_to_calls=True, drop_partial=False)
    s = summarize(trace)
    assert [(r.name, r.dur_us) for r in s.steps] == [("ProfilerStep#0", 100), ("ProfilerStep#1", 100)]
    # the window: [100, 300] of host ranges, and the kept kernel's end at 340
    assert s.wall_us == 240 and s.kernel_count == 1


def test_the_last_step_stays_when_its_rounded_end_lies_past_the_window():
    """Kineto's microsecond timestamps near 4e12 carry 3 decimals, so a moved boundary's duration,
    rounded to them, can end one float step past the window's end: here step 1 moves back from
    ...590580.635 to the call's start ...590558.429, and ...590558.429 + round(83762.951, 3) is
    ...674321.3800000001 > ...674321.38 (checked below). The step is the window: it must stay."""
    a, b, c, call = 4093859586774.235, 4093859590580.635, 4093859674321.38, 4093859590558.429
    assert call + round(c - call, 3) > c  # the float fact the case stands on
    trace = {"traceEvents": [
        X("ProfilerStep#0", a, round(b - a, 3), cat="user_annotation"),
        X("ProfilerStep#1", b, round(c - b, 3), cat="user_annotation"),
        X("forward", call, round(b + 10 - call, 3), cat="user_annotation"),
    ]}
    shape = shape_window(trace, align_to_calls=True, drop_partial=False)
    steps = sorted(e["name"] for e in trace["traceEvents"] if e["name"].startswith("ProfilerStep#"))
    assert shape.steps == 2 and steps == ["ProfilerStep#0", "ProfilerStep#1"]
    assert [r.name for r in summarize(trace).steps] == ["ProfilerStep#0", "ProfilerStep#1"]


def test_a_moved_step_ends_at_the_ns_the_next_step_begins():
    """Kineto writes ns as µs with 3 decimals; near 5e12 µs the floats are ~0.001 µs coarse. Step 0
    moves back to its call's start ...618.637 and step 1 to ...992.526: 1373.889 µs apart (decimal
    subtraction by hand), while the float difference rounds to 1373.890, so step 0 would end 1 ns
    into step 1's call (seen in a CI run: "ProfilerStep#0 crosses forward"). In whole ns, the end of
    step 0 is the start of step 1 and of its call."""
    a, b = 5067474120618.637, 5067474121992.526
    assert round(b - a, 3) == 1373.89  # the float fact the case stands on
    trace = {"traceEvents": [
        X("ProfilerStep#0", a + 5, round(b - a, 3), cat="user_annotation"),
        X("ProfilerStep#1", b + 5, 500.0, cat="user_annotation"),
        X("forward", a, 100.0, cat="user_annotation"),
        X("forward", b, 100.0, cat="user_annotation"),
    ]}
    shape_window(trace, align_to_calls=True, drop_partial=False)
    steps = {e["name"]: e for e in trace["traceEvents"] if e["name"].startswith("ProfilerStep#")}

    def ns(v):
        return round(v * 1000)

    s0, s1 = steps["ProfilerStep#0"], steps["ProfilerStep#1"]
    assert (ns(s0["ts"]), ns(s1["ts"])) == (5067474120618637, 5067474121992526)
    assert ns(s0["ts"]) + ns(s0["dur"]) == 5067474121992526  # 5067474120618637 + 1373889
    assert s0["dur"] == 1373.889 and s0["ts"] + s0["dur"] <= s1["ts"]


def test_a_moved_step_ends_1_ns_early_where_float_addition_would_pass_the_next_step():
    """The other side of the same coarseness: ...777.524 + 1204.439 (their exact distance: decimal
    subtraction by hand) adds up, in floats, to one ulp past ...981.963, so a reader that adds floats
    would nest step 1 in step 0. The step then ends 1 ns before the next begins, and crosses nothing
    in either reading."""
    a, b = 5067474128777.524, 5067474129981.963
    assert a + 1204.439 > b  # the float fact the case stands on
    trace = {"traceEvents": [
        X("ProfilerStep#0", a + 5, 1204.439, cat="user_annotation"),
        X("ProfilerStep#1", b + 5, 500.0, cat="user_annotation"),
        X("forward", a, 100.0, cat="user_annotation"),
        X("forward", b, 100.0, cat="user_annotation"),
    ]}
    shape_window(trace, align_to_calls=True, drop_partial=False)
    s0, s1 = sorted((e for e in trace["traceEvents"] if e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"])
    assert s0["dur"] == 1204.438 and s0["ts"] + s0["dur"] <= s1["ts"] == b
    assert round(s0["ts"] * 1000) + round(s0["dur"] * 1000) == round(b * 1000) - 1


def test_another_threads_range_that_starts_inside_stays_when_it_ends_after_the_window():
    """gloo completes an all-reduce's future before it closes its ``gloo:all_reduce`` range, so on a
    loaded machine the step's thread can reach the next call (the window's end, 300) while the range
    of step 1's all-reduce, on gloo's thread 3, is still open: [230, 303]. It ran in the window and
    stays (the summary's comm view clips it to its step). Thread 3's range of the next step, [305,
    320], and thread 1's range across the end, [290, 310], still go."""
    trace = env_capture_trace()
    trace["traceEvents"] += [X("gloo:all_reduce", 230, 73, cat="user_annotation", tid=3),
                             X("gloo:all_reduce", 305, 15, cat="user_annotation", tid=3),
                             X("late", 290, 20, cat="user_annotation")]
    shape = shape_window(trace, align_to_calls=True, drop_partial=False)
    assert (shape.start_us, shape.end_us) == (100, 300)
    kept = [(e["ts"], e["tid"]) for e in trace["traceEvents"] if e["name"] in ("gloo:all_reduce", "late")]
    assert kept == [(230, 3)]
    assert [r.name for r in summarize(trace).steps] == ["ProfilerStep#0", "ProfilerStep#1"]


def test_explicit_block_drops_only_the_partial_last_step():
    """profile(): ProfilerStep#0 [0, 100) and #1 [100, 200) end at p.step() calls; #2 [200, 230)
    was still open at the block's end. It goes; the block's events after the last step stay."""
    trace = {"traceEvents": [
        X("ProfilerStep#0", 0, 100, cat="user_annotation"), X(FWD, 10, 20, cat="user_annotation"),
        X("ProfilerStep#1", 100, 100, cat="user_annotation"), X(FWD, 110, 20, cat="user_annotation"),
        X("ProfilerStep#2", 200, 30, cat="user_annotation"), X(FWD, 205, 20, cat="user_annotation"),
        X("ProfilerStep#2", 200, 30, cat="gpu_user_annotation", pid=0, tid=7),
    ]}
    before = copy.deepcopy(trace)
    shape = shape_window(trace, align_to_calls=False, drop_partial=True)
    assert shape.steps == 2 and shape.partial_dropped and shape.dropped_events == 0
    assert trace["traceEvents"] == [e for e in before["traceEvents"] if e["name"] != "ProfilerStep#2"]
    assert [r.name for r in summarize(trace).steps] == ["ProfilerStep#0", "ProfilerStep#1"]


def test_no_step_ranges_leave_the_trace_as_it_is():
    trace = {"traceEvents": [X("ProfilerStep#0", 0, 50, cat="user_annotation"), X(FWD, 10, 20)]}
    shape = shape_window(trace, align_to_calls=True, drop_partial=True)  # the one range was partial
    assert shape.steps == 0 and trace["traceEvents"] == [X(FWD, 10, 20)]


def test_threads_that_ran_graphs_but_left_no_marker_are_named():
    trace = {"traceEvents": [X(FWD, 0, 10, tid=100), X("aten::mm", 0, 5, tid=300),
                             X(FWD, 0, 10, cat="gpu_user_annotation", tid=200)]}
    assert marker_threads(trace) == {100}  # a device-side copy is no thread of ours
    seen = {100: "MainThread", 200: "worker", 300: "loader"}
    line = unrecorded_threads(marker_threads(trace), seen, (100, "MainThread"))
    assert line is not None
    assert "threads 'worker' (tid 200), 'loader' (tid 300)" in line
    assert "records only thread 'MainThread' (tid 100)" in line
    assert unrecorded_threads({100, 200, 300}, seen, (100, "MainThread")) is None
