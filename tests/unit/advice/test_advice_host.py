"""The host-side detectors (input_wait, host_bound, sync, optimizer, memcpy) on hand-built traces whose
savings are hand arithmetic (advice_traces.py), on both summary engines."""

from __future__ import annotations

import gzip
import json

import pytest
from advice_traces import cpu_optimizer_trace, gpu_trace, stepped_loader_trace

from inductor_perf.advice.advise import advise
from inductor_perf.summary.core import summarize
from inductor_perf.summary.files import summarize_file


def _by_kind(trace: dict) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in advise(summarize(trace)):
        out.setdefault(f.kind, []).append(f)
    return out


def test_gpu_patterns_hand_arithmetic():
    got = _by_kind(gpu_trace())
    assert [f.saving_us_per_step for f in got["input_wait"]] == [100.0]
    launch, eager = sorted(got["host_bound"], key=lambda f: "reduce-overhead" not in f.fix)
    assert launch.saving_us_per_step == 50.0 and 'mode="reduce-overhead"' in launch.fix
    assert eager.saving_us_per_step == 48.0 and "reduce-overhead" not in eager.fix
    (sync,) = got["sync"]  # the host waited 52 µs, the device then idled 50: the lesser
    assert sync.saving_us_per_step == 50.0 and sync.source == "train.py:42"
    assert "cudaStreamSynchronize" in sync.title
    assert [f.saving_us_per_step for f in got["memcpy"]] == [40.0]
    # no steps: the window (350 µs) is the step
    assert got["input_wait"][0].saving_pct_of_step == round(100 * 100 / 350, 2)


def test_ranked_by_saving():
    savings = [f.saving_us_per_step for f in advise(summarize(gpu_trace()))]
    assert savings == sorted(savings, reverse=True)
    assert savings[:5] == [100.0, 50.0, 50.0, 48.0, 40.0]


def test_per_step_and_median_step():
    (f,) = [f for f in advise(summarize(stepped_loader_trace())) if f.kind == "input_wait"]
    assert f.saving_us_per_step == 200.0
    assert f.saving_pct_of_step == 66.67


def test_optimizer_unfused_hand_arithmetic():
    (f,) = [f for f in advise(summarize(cpu_optimizer_trace())) if f.kind == "optimizer"]
    # 500 ops for 100 parameters: 5 a parameter, 15 tensor passes; fused AdamW: 7 (param, grad in; param
    # out; 2 states in and out); saving 1000 x (1 - 7/15)
    assert f.saving_us_per_step == pytest.approx(1000 * (1 - 7 / 15), abs=1e-3)
    assert "fused=True" in f.fix and "100 parameters" in f.title


def test_optimizer_fused_or_few_params_is_quiet():
    assert not [f for f in advise(summarize(cpu_optimizer_trace(fused=True))) if f.kind == "optimizer"]
    assert not [f for f in advise(summarize(cpu_optimizer_trace(params=4))) if f.kind == "optimizer"]


def test_cpu_trace_gets_no_device_only_kinds():
    kinds = {f.kind for f in advise(summarize(cpu_optimizer_trace()))}
    assert not kinds & {"host_bound", "sync", "memcpy"}


def test_both_engines_same_findings(tmp_path):
    pytest.importorskip("orjson")
    from inductor_perf.summary.stream.engine import summarize_file_stream

    p = tmp_path / "t.json.gz"
    record = {"compile": {"graphs": 2}}  # the trace's own record reaches the detectors (compile's)
    with gzip.open(p, "wt") as f:
        json.dump({**gpu_trace(), "inductor_perf": record}, f)
    loaded = summarize_file(str(p), engine="full").summary
    full = [x.to_dict() for x in advise(loaded)]
    streamed = summarize_file_stream(str(p))
    assert streamed is not None
    assert [x.to_dict() for x in advise(streamed[0])] == full
    assert len(full) >= 5
    assert loaded.signals.record == streamed[0].signals.record == record


def test_saving_above_the_median_step_is_a_share_of_the_mean_step():
    # steps of 100, 100 and 700 µs (median 100, mean 300); the loader holds the device idle 600 µs in
    # the last: 200 µs a step, above the median step, so 200 / 300 of the mean step, with the reason
    from advice_traces import LOADER, host, kernel

    trace = {"traceEvents": [
        host("ProfilerStep#1", 0, 100, "user_annotation"), kernel("k1", 0, 100),
        host("ProfilerStep#2", 100, 100, "user_annotation"), kernel("k2", 100, 100),
        host("ProfilerStep#3", 200, 700, "user_annotation"), host(LOADER, 200, 600, "user_annotation"),
        kernel("k3", 800, 100)]}
    (f,) = [f for f in advise(summarize(trace)) if f.kind == "input_wait"]
    assert f.saving_us_per_step == 200.0
    assert f.saving_pct_of_step == 66.67
    assert "mean step (300 µs)" in f.evidence


@pytest.mark.parametrize("engine", ["full", "stream"])
def test_saving_over_work_past_the_steps_is_a_share_of_the_window(tmp_path, engine):
    # one step of 100 µs (0..100); the host runs aten::add 100..900, past the step, and the window runs to
    # k3's end at 1000. The device idles 50..60 (aten::mm, before k2) and 600..900: 310 µs, counted over
    # the window, so 310 / 1000 per step (31 %), not 310 % of the 100 µs step
    from advice_traces import host, kernel

    trace = {"traceEvents": [
        host("ProfilerStep#1", 0, 100, "user_annotation"), kernel("k1", 0, 50), host("aten::mm", 40, 20),
        kernel("k2", 60, 540), host("aten::add", 100, 800), kernel("k3", 900, 100)]}
    (f,) = [f for f in advise(_summary(trace, engine, tmp_path)) if f.kind == "host_bound"]
    assert f.saving_us_per_step == 310.0
    assert f.saving_pct_of_step == 31.0
    assert "window's time per step (1 ms)" in f.evidence and "runs past its 1 recorded step(s)" in f.evidence


@pytest.mark.parametrize("engine", ["full", "stream"])
def test_idle_under_a_bare_step_range_has_no_host_event(tmp_path, engine):
    # torch.profiler recorded ProfilerStep#1 (0..1000) on a thread of its own, with nothing in it; the
    # work ran on another thread: a compiled call 0..50 launching k1 (10..40). The device then idles
    # 50..990 (until k2) with no op on the host: 940 µs of unrecorded host time, not "eager work" to
    # compile (the range is no host activity), and the finding says so
    from advice_traces import ev, kernel

    trace = {"traceEvents": [
        ev("ProfilerStep#1", "user_annotation", 0, 1000, {"pid": 1, "tid": 2}),
        ev("## Call CompiledFxGraph abc", "user_annotation", 0, 50, {"pid": 1, "tid": 1}),
        kernel("k1", 10, 30), kernel("k2", 990, 10)]}
    (f,) = [f for f in advise(_summary(trace, engine, tmp_path)) if f.kind == "host_bound" and "no recorded op" in f.title]
    assert f.saving_us_per_step == 940.0
    assert "(no host event) 940 µs" in f.evidence and "ProfilerStep" not in f.evidence
    assert "compile" not in f.fix and "with_stack=True" in f.fix


@pytest.mark.parametrize("inside", [True, False])
def test_sync_without_python_stack_takes_the_compiled_kernels_source_inside_compiled_code_only(inside):
    # no python stack events: the sync at 20..30 waits for k1 (0..25), tagged model.py:9; the device is
    # idle 25..60 until k2 (35 µs), the host waited 10 µs: the saving is the lesser, 10 µs. Inside a
    # compiled frame (a graph break's .item()) k1's line is the sync's code; outside it (loss.item() in
    # the training loop) it is only the code the sync waited for.
    from advice_traces import HOST, ev, kernel

    frame = [ev("Torch-Compiled Region: 0/0", "user_annotation", 15, 20, HOST)] if inside else []
    trace = {"traceEvents": [
        kernel("triton_poi_fused_0", 0, 25, source="model.py:9"), *frame,
        ev("cudaDeviceSynchronize", "cuda_runtime", 20, 10, HOST),
        kernel("triton_poi_fused_1", 60, 10, source="model.py:11")]}
    (f,) = [f for f in advise(summarize(trace)) if f.kind == "sync"]
    assert f.saving_us_per_step == 10.0
    if inside:
        assert f.source == "model.py:9" and "unknown" not in f.title
    else:
        assert f.source is None and "unknown line (after the kernels of model.py:9)" in f.title
        assert "with_stack=True" in f.evidence


def test_syncs_outside_compiled_code_after_different_lines_stay_apart():
    # two syncs with no python stack and no compiled frame: after model.py:9's kernel (host 20..30, idle
    # 25..60) and after model.py:11's (host 80..90, idle 85..120): 10 µs each, two findings
    from advice_traces import HOST, ev, kernel

    trace = {"traceEvents": [
        kernel("triton_poi_fused_0", 0, 25, source="model.py:9"),
        ev("cudaDeviceSynchronize", "cuda_runtime", 20, 10, HOST),
        kernel("triton_poi_fused_1", 60, 25, source="model.py:11"),
        ev("aten::_local_scalar_dense", "cpu_op", 80, 10, HOST),
        kernel("triton_poi_fused_2", 120, 10, source="model.py:12")]}
    got = sorted(f.title for f in advise(summarize(trace)) if f.kind == "sync")
    assert len(got) == 2
    assert "after the kernels of model.py:11) (aten::_local_scalar_dense)" in got[0]
    assert "after the kernels of model.py:9) (cudaDeviceSynchronize)" in got[1]


def _summary(trace: dict, engine: str, tmp_path) -> object:
    """The summary of ``trace`` by the in-memory engine ("full") or the streaming one, from a file."""
    if engine == "full":
        return summarize(trace)
    from inductor_perf.summary.stream.engine import summarize_file_stream

    p = tmp_path / "t.json"
    p.write_text(json.dumps(trace))
    return summarize_file_stream(str(p))[0]


@pytest.mark.parametrize("engine", ["full", "stream"])
def test_a_call_marker_around_a_sync_gives_it_the_users_line(tmp_path, engine):
    # the capture's range around loss.item() (capture/sync_calls.py) names /w/train.py:42; the sync in
    # it (20..30, after model.py:9's kernel, the device idle 25..60) takes that line, not "unknown"; a
    # second marked call (a .to() at line 50, 75..78) holds no sync and is no finding, and the eager idle
    # (30..35 in the aten op under the marker) is named by the op, not by our marker
    from advice_traces import HOST, ev, kernel

    from inductor_perf.model.markers import call_marker_name

    trace = {"traceEvents": [
        kernel("triton_poi_fused_0", 0, 25, source="model.py:9"),
        ev(call_marker_name("item", "/w/train.py:42"), "user_annotation", 19, 17, HOST),
        ev("aten::item", "cpu_op", 19.5, 16, HOST),
        ev("aten::_local_scalar_dense", "cpu_op", 20, 10, HOST),
        ev("cudaStreamSynchronize", "cuda_runtime", 21, 8, HOST),
        kernel("triton_poi_fused_1", 60, 10, source="model.py:11"),
        ev(call_marker_name("to", "/w/train.py:50"), "user_annotation", 75, 3, HOST),
        ev("aten::to", "cpu_op", 75.5, 2, HOST),
        kernel("triton_poi_fused_2", 80, 10, source="model.py:12")]}
    summary = _summary(trace, engine, tmp_path)
    (f,) = [f for f in advise(summary) if f.kind == "sync"]
    assert f.source == "/w/train.py:42"
    assert f.title.startswith("host-device sync at /w/train.py:42 (")
    assert "unknown" not in f.title and "with_stack" not in f.evidence
    assert f.saving_us_per_step == 10.0  # the host waited 10 µs (the outermost sync call), idle 35: the lesser
    assert not [k for k in summary.signals.eager_idle_us if "inductor_perf" in k]


@pytest.mark.parametrize("engine", ["full", "stream"])
def test_pageable_copies_are_found_per_line_of_the_call_that_made_them(tmp_path, engine):
    # the capture's ranges around x.to() (line 57) and x.cuda() (line 58, twice) hold the runtime calls
    # whose correlation ids start the pageable copies (30 µs; 10 + 12 µs); a copy whose runtime call is in
    # no range (5 µs) has no known line: three findings, ranked by their copies' time (no steps: the
    # window is the step)
    from advice_traces import DEVICE, HOST, ev, kernel

    from inductor_perf.model.markers import call_marker_name

    copy = "Memcpy HtoD (Pageable -> Device)"
    trace = {"traceEvents": [
        kernel("triton_poi_fused_0", 0, 10),
        ev(call_marker_name("to", "/w/train.py:57"), "user_annotation", 12, 6, HOST),
        ev("aten::to", "cpu_op", 12.5, 5, HOST),
        ev("cudaMemcpyAsync", "cuda_runtime", 13.5, 3, HOST, correlation=7),
        ev(copy, "gpu_memcpy", 15, 30, DEVICE, correlation=7),
        ev(call_marker_name("cuda", "/w/train.py:58"), "user_annotation", 50, 6, HOST),
        ev("cudaMemcpyAsync", "cuda_runtime", 51, 3, HOST, correlation=8),
        ev(copy, "gpu_memcpy", 52, 10, DEVICE, correlation=8),
        ev(call_marker_name("cuda", "/w/train.py:58"), "user_annotation", 68, 6, HOST),
        ev("cudaMemcpyAsync", "cuda_runtime", 69, 3, HOST, correlation=9),
        ev(copy, "gpu_memcpy", 70, 12, DEVICE, correlation=9),
        ev("cudaMemcpyAsync", "cuda_runtime", 90, 3, HOST, correlation=10),
        ev(copy, "gpu_memcpy", 91, 5, DEVICE, correlation=10),
        kernel("triton_poi_fused_1", 110, 10)]}
    summary = _summary(trace, engine, tmp_path)
    got = [(f.source, f.saving_us_per_step) for f in advise(summary) if f.kind == "memcpy"]
    assert got == [("/w/train.py:57", 30.0), ("/w/train.py:58", 22.0), (None, 5.0)]
    titles = [f.title for f in advise(summary) if f.kind == "memcpy"]
    assert titles[1].startswith("2 host-to-device copies from pageable memory at /w/train.py:58 take 22")
    unknown = [f.evidence for f in advise(summary) if f.kind == "memcpy" and f.source is None]
    assert "not in the trace" in unknown[0]


def test_cpu_optimizer_ops_are_not_headroom_too():
    # the optimizer's ops are the CPU trace's kernels: 1 kB in 1.5 µs each (0.67 GB/s), far under any
    # roof; their time is the optimizer finding's, not headroom's as well
    from inductor_perf.devices.table import lookup

    trace = cpu_optimizer_trace(gb=1e-6)
    kinds = [f.kind for f in advise(summarize(trace, device=lookup("NVIDIA H100 80GB HBM3")))]
    assert "optimizer" in kinds and "headroom" not in kinds
    fused = [f.kind for f in advise(summarize(cpu_optimizer_trace(fused=True, gb=1e-6),
                                              device=lookup("NVIDIA H100 80GB HBM3")))]
    assert "headroom" in fused and "optimizer" not in fused  # fused: the ops are nobody else's finding


def test_host_savings_are_shares_of_the_unprofiled_step():
    """The capture timed the step without the profiler (the record's ``unprofiled_step_us``): steps of 200
    and 400 µs under it (median 300), 150 µs without. The loader's idle, 200 µs a step (66.67 % of the
    profiled step), is then 66.67 % of 150 = 100 µs; the share stays, the evidence says why."""
    record = {"unprofiled_step_us": 150.0, "unprofiled_steps": 1}
    (f,) = [f for f in advise(summarize({**stepped_loader_trace(), "inductor_perf": record})) if f.kind == "input_wait"]
    assert f.saving_us_per_step == pytest.approx(200 * 150 / 300, abs=1e-3)
    assert f.saving_pct_of_step == 66.67
    assert "without it the step took 150 µs (median of 1 step(s) before the profiler started)" in f.evidence


def test_kernel_time_kinds_and_slower_unprofiled_steps_are_left_as_measured():
    # memcpy is kernel time (a copy runs as fast under the profiler): not scaled; and an un-profiled step
    # longer than the profiled one (a one-off in it) scales nothing
    window = 350.0  # gpu_trace() has no steps: its window is the step
    slower = advise(summarize({**gpu_trace(), "inductor_perf": {"unprofiled_step_us": 2 * window}}))
    faster = advise(summarize({**gpu_trace(), "inductor_perf": {"unprofiled_step_us": window / 2}}))
    assert [f.to_dict() for f in slower] == [f.to_dict() for f in advise(summarize(gpu_trace()))]
    got = {f.kind: f.saving_us_per_step for f in faster}
    assert got["memcpy"] == 40.0 and got["input_wait"] == 50.0  # 100 µs x 175 / 350


def test_a_sync_saves_the_lesser_of_the_hosts_wait_and_the_devices_idle():
    """Device-bound: the sync (10..110) waits 100 µs for k1 (0..110); the host then launches k2 at 120:
    the device idles 110..120, 10 µs, what the step loses. Host-bound: the sync (100..102) finds the
    device done since 60 and waits 2 µs; the device idles 60..300 between launches either way."""
    from advice_traces import HOST, ev, kernel

    device_bound = {"traceEvents": [kernel("k1", 0, 110), ev("cudaStreamSynchronize", "cuda_runtime", 10, 100, HOST),
                                    kernel("k2", 120, 50)]}
    host_bound = {"traceEvents": [kernel("k1", 0, 60), ev("cudaStreamSynchronize", "cuda_runtime", 100, 2, HOST),
                                  kernel("k2", 300, 10)]}
    assert [f.saving_us_per_step for f in advise(summarize(device_bound)) if f.kind == "sync"] == [10.0]
    assert [f.saving_us_per_step for f in advise(summarize(host_bound)) if f.kind == "sync"] == [2.0]
