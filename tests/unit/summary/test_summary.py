"""summarize(): expected numbers are worked out by hand in the comments next to each trace."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from inductor_perf.model import events as evs
from inductor_perf.errors import TraceFormatError
from inductor_perf.summary.core import (DEF_CPU_COMPILED, DEF_CPU_EAGER, DEF_GPU, DEF_NONE, KINDS, kernel_kind,
                                   summarize)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def X(name, ts, dur, cat="cpu_op", pid=1, tid=1, **args):
    ev = {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid}
    if args:
        ev["args"] = args
    return ev


def strict(summary):
    d = summary.to_dict()
    json.dumps(d, allow_nan=False)  # raises on NaN / Infinity
    return d


# --- busy % --------------------------------------------------------------------------------------
def gpu_trace(step="ProfilerStep#1"):
    # Host thread 1: a step [0, 40]; launches at 1, 2 and 16 (correlations 1, 2, 3).
    # Kernels: k1 [0, 10] stream 7, k2 [5, 15] stream 8 (overlaps k1), k3 [20, 30] stream 7.
    # The window is the recorded step [0, 40] (``step`` a ProfilerStep#N), else the device work [0, 30].
    # Union = [0, 15] + [20, 30] = 25 µs of a 40 µs window -> 62.5 % busy; idle 15 µs:
    # gap [15, 20] (host in cudaLaunchKernel [16, 19] for 3 µs, in the step for 2 µs) and trailing
    # [30, 40] (host in the step). A thread-9 event during the gap must not be credited.
    return {"traceEvents": [
        X(step, 0, 40, cat="user_annotation", tid=1),
        X("cudaLaunchKernel", 1, 0.5, cat="cuda_runtime", tid=1, correlation=1),
        X("cudaLaunchKernel", 2, 0.5, cat="cuda_runtime", tid=1, correlation=2),
        X("cudaLaunchKernel", 16, 3, cat="cuda_runtime", tid=1, correlation=3),
        X("other_thread_work", 14, 8, cat="cpu_op", tid=9),
        X("k1", 0, 10, cat="kernel", pid=0, tid=7, correlation=1),
        X("k2", 5, 10, cat="kernel", pid=0, tid=8, correlation=2),
        X("k3", 20, 10, cat="kernel", pid=0, tid=7, correlation=3),
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "ts": -100, "dur": 500, "pid": 1, "tid": 1},
    ]}


def test_busy_pct_with_overlapping_gpu_kernels():
    s = summarize(gpu_trace())
    assert s.kernel_definition == DEF_GPU
    assert s.window_basis == "steps"
    assert s.wall_us == pytest.approx(40)  # the profiler's own "Trace" span is not counted
    assert s.busy_us == pytest.approx(25)
    assert s.busy_pct == pytest.approx(62.5)
    assert s.idle_us == pytest.approx(15)
    assert s.kernel_time_us == pytest.approx(30)
    assert s.timelines == 2
    assert any("overlap" in n for n in s.notes)


def test_without_steps_the_window_is_the_device_work():
    # The same trace, its host range not a ProfilerStep: the window is k1's start to k3's end,
    # [0, 30]: 25 busy of 30 -> 83.333 %, idle only the gap [15, 20]; the host's [30, 40] is no
    # device idle time.
    s = summarize(gpu_trace(step="step"))
    assert (s.window_basis, s.wall_us, s.busy_us, s.idle_us) == ("kernels", 30, 25, 5)
    assert s.busy_pct == pytest.approx(83.333)
    assert [(g.position, g.start_us, g.dur_us) for g in s.gaps] == [("between", 15, 5)]
    assert any(n.startswith("window = the device work") for n in s.notes)


def test_gpu_gap_attribution_uses_launching_thread():
    s = summarize(gpu_trace())
    assert s.gap_count == 2
    longest, second = s.gaps
    assert (longest.position, longest.dur_us, longest.start_us) == ("trailing", 10, 30)
    assert longest.host_innermost == "ProfilerStep#1" and longest.prev_kernel == "k3"
    assert (second.position, second.dur_us, second.start_us) == ("between", 5, 15)
    assert second.host_innermost == "cudaLaunchKernel"
    assert second.host_outermost == "ProfilerStep#1"
    assert (second.prev_kernel, second.next_kernel) == ("k2", "k3")
    idle = {r.host: r for r in s.idle_by_host}
    assert set(idle) == {"ProfilerStep#1", "cudaLaunchKernel"}
    assert idle["ProfilerStep#1"].idle_us == pytest.approx(12)  # 2 in the gap + 10 trailing
    assert idle["cudaLaunchKernel"].idle_us == pytest.approx(3)
    assert idle["ProfilerStep#1"].share_of_idle_pct == pytest.approx(80.0)  # 12 / 15


# --- CPU compiled kernels, idle attribution --------------------------------------------------------
def cpu_compiled_trace():
    # One compiled-graph call [0, 100] on thread 1 with kernels graph_0_cpp_fused_a_0 [10, 30] and
    # aten::mm [50, 70] (its child resolve_conj is not a kernel). In the gap [30, 50] the host runs
    # python frame "model.py(12): forward" [32, 48] with a user_annotation "my_region" [35, 40].
    # Busy 40 / 100. Gaps: leading [0, 10] (Call), between [30, 50] (Call 4, frame 11, region 5),
    # trailing [70, 100] (Call 30). An aten op outside any call is not a kernel. The recorded step
    # [0, 125] is the window.
    return {"traceEvents": [
        X("ProfilerStep#1", 0, 125, cat="user_annotation"),
        X("## Call CompiledFxGraph abc ##", 0, 100, cat="user_annotation"),
        X("graph_0_cpp_fused_a_0", 10, 20),
        X("model.py(12): forward", 32, 16, cat="python_function"),
        X("my_region", 35, 5, cat="user_annotation"),
        X("aten::mm", 50, 20),
        X("aten::resolve_conj", 52, 1),
        X("aten::add_", 120, 5),  # outside the call: host work, not a compiled kernel
    ]}


def test_cpu_compiled_kernels_and_idle_attribution():
    s = summarize(cpu_compiled_trace())
    assert s.kernel_definition == DEF_CPU_COMPILED
    assert s.kernel_count == 2
    assert s.wall_us == pytest.approx(125)
    assert s.busy_us == pytest.approx(40)
    assert s.busy_pct == pytest.approx(32.0)
    idle = {r.host: r for r in s.idle_by_host}
    # trailing gap [70, 125]: Call covers [70, 100], aten::add_ [120, 125], the step alone [100, 120]
    assert idle["## Call CompiledFxGraph abc ##"].idle_us == pytest.approx(10 + 4 + 30)
    assert idle["## Call CompiledFxGraph abc ##"].gaps == 3
    assert idle["model.py(12): forward"].idle_us == pytest.approx(11)
    assert idle["model.py(12): forward"].source == "model.py(12): forward"
    assert idle["my_region"].idle_us == pytest.approx(5)
    assert idle["my_region"].source == "model.py(12): forward"  # its enclosing Python frame
    assert idle["aten::add_"].idle_us == pytest.approx(5)
    assert idle["ProfilerStep#1"].idle_us == pytest.approx(20)
    between = [g for g in s.gaps if g.position == "between"]
    assert len(between) == 1
    g = between[0]
    assert (g.start_us, g.dur_us) == (30, 20)
    assert g.host_innermost == "model.py(12): forward"
    assert g.host_outermost == "ProfilerStep#1"
    assert g.source == "model.py(12): forward"
    assert (g.prev_kernel, g.next_kernel) == ("graph_0_cpp_fused_a_0", "aten::mm")
    assert sum(x.dur_us for x in s.gaps) == pytest.approx(s.idle_us)  # 10 + 20 + 55 = 85


def test_eager_cpu_trace_uses_outermost_aten_ops():
    # aten::linear [0, 10] with child aten::addmm [1, 9]; aten::relu [12, 15]: busy 13 of 15.
    s = summarize({"traceEvents": [X("aten::linear", 0, 10), X("aten::addmm", 1, 8), X("aten::relu", 12, 3)]})
    assert s.kernel_definition == DEF_CPU_EAGER
    assert s.kernel_count == 2
    assert s.busy_pct == pytest.approx(100 * 13 / 15, abs=1e-3)
    assert [r.name for r in s.top_kernels] == ["aten::linear", "aten::relu"]
    assert s.top_kernels[0].kind == "extern_matmul"


# --- roll-ups, split, top kernels, peaks ---------------------------------------------------------------
def augmented_cpu_trace():
    # Back to back inside one call:
    #   a  [0, 10], [10, 20]  module enc.fc1, m.py:10, 1000 FLOP each, 1e-6 GB each, 50 % / 20 %
    #   mm [20, 40]           module enc.fc1, m.py:11, 4e6 FLOP, bound compute
    #   b  [40, 45]           module enc.fc2, m.py:10, no FLOPs
    # busy 45. enc.fc1: 40 µs (88.889 %), 3 calls, 4_002_000 FLOP; enc.fc2: 5 µs (11.111 %).
    # m.py:10: 25 µs, 3 calls, 2000 FLOP over 20 µs -> 1e8 FLOP/s = 1e-4 TFLOP/s.
    # m.py:11: 20 µs, 4e6 FLOP -> 2e11 FLOP/s = 0.2 TFLOP/s.
    # Overall 4_002_000 FLOP / 45 µs = 0.08893333 TFLOP/s; GB 2e-6 + 3e-6 (bytes args on b).
    a = dict(kernel_flop=1000, kernel_num_gb=1e-6, module_path="enc.fc1", source="m.py:10",
             kernel_kind="generated", achieved_flops_pct=50.0, achieved_bandwidth_pct=20.0,
             roofline_bound="memory")
    return {"traceEvents": [
        X("## Call CompiledFxGraph k ##", 0, 45, cat="user_annotation"),
        X("graph_0_cpp_fused_a_0", 0, 10, **a),
        X("graph_0_cpp_fused_a_0", 10, 10, **a),
        X("aten::mm", 20, 20, kernel_flop=4_000_000, module_path="enc.fc1", source="m.py:11",
          kernel_kind="extern", roofline_bound="compute"),
        X("graph_0_cpp_fused_b_1", 40, 5, module_path="enc.fc2", source="m.py:10",
          kernel_bytes_read=2000, kernel_bytes_written=1000),
    ], "distributedInfo": {"rank": 1, "world_size": 2, "backend": "gloo"}}


def test_module_and_line_rollups():
    s = summarize(augmented_cpu_trace())
    mods = {r.key: r for r in s.modules}
    assert mods["enc.fc1"].total_us == pytest.approx(40)
    assert mods["enc.fc1"].count == 3
    assert mods["enc.fc1"].flop == 4_002_000
    assert mods["enc.fc1"].share_of_busy_pct == pytest.approx(88.889, abs=1e-3)
    assert mods["enc.fc2"].total_us == pytest.approx(5)
    assert mods["enc.fc2"].flop is None
    assert [r.key for r in s.modules] == ["enc.fc1", "enc.fc2"]
    lines = {r.key: r for r in s.lines}
    assert lines["m.py:10"].total_us == pytest.approx(25)
    assert lines["m.py:10"].count == 3
    assert lines["m.py:10"].flop == 2000
    assert lines["m.py:10"].achieved_tflops == pytest.approx(1e-4)
    assert lines["m.py:11"].achieved_tflops == pytest.approx(0.2)
    assert s.distributed == {"rank": 1, "world_size": 2, "backend": "gloo"}


def test_totals_and_peaks_from_device():
    class Dev:  # duck-typed DeviceSpec: peak keys compared by dtype name
        name = "Test CPU"
        peak_tflops = {"torch.float32": 1.0, "torch.bfloat16": 2.0}
        mem_bandwidth_gbs = 10.0
        peak_source = "user"

    s = summarize(augmented_cpu_trace(), device=Dev())
    assert s.flop == 4_002_000
    assert s.gb == pytest.approx(5e-6)
    assert s.achieved_tflops == pytest.approx(0.0889333, rel=1e-5)
    assert s.achieved_gbps == pytest.approx(5e-6 / 45e-6, rel=1e-5)  # 0.1111 GB/s (6 significant digits)
    assert s.flops_pct_of_peak == pytest.approx(8.893, abs=1e-3)
    assert s.bandwidth_pct_of_peak == pytest.approx(1.111, abs=1e-3)
    assert (s.peak.device, s.peak.peak_tflops, s.peak.peak_source) == ("Test CPU", 1.0, "user")
    assert s.flop_coverage_pct == pytest.approx(100 * 40 / 45, abs=1e-3)
    bf = summarize(augmented_cpu_trace(), device=Dev(), dtype="bfloat16")
    assert bf.flops_pct_of_peak == pytest.approx(4.447, abs=1e-3)
    # Each row against the roof that binds it: a: 2000 FLOP and 2000 B in 20 µs (1e-4 TFLOP/s, 0.1 GB/s):
    # 0.01 % of the 1 TFLOP/s float32 roof, 1 % of the 10 GB/s memory roof; intensity 1 FLOP/B x 10 GB/s
    # = 0.01 TFLOP/s < 1: memory-bound, and at 1 % with 1000 B a launch: latency. mm: 4e6 FLOP in 20 µs
    # = 0.2 TFLOP/s, no bytes: 20 % of the float32 roof, compute-bound, and below 25 %: latency.
    mm, a, _ = s.top_kernels
    assert (a.flops_pct, a.bandwidth_pct) == (pytest.approx(0.01), pytest.approx(1.0))
    assert (a.placement.bound, a.placement.level, a.bound) == ("memory", "HBM", "latency")
    assert (mm.flops_pct, mm.placement.bound, mm.placement.pct_of_roof, mm.bound) == (
        pytest.approx(20.0), "compute", pytest.approx(20.0), "latency")


def test_headline_peak_is_the_one_each_kernel_is_measured_against():
    """The headline's peak is looked up as augmenting looks up each kernel's (devices.peaks): a
    kernel_dtype spelled "torch.float32" names float32's roof there too (it read "unknown" before).
    One 100 µs GEMM of 3.35e9 FLOPs on an H100 SXM: 33.5 TFLOP/s, 50 % of the 67 TFLOP/s FP32
    datasheet peak; "tf32" names the 494.5 TFLOP/s TF32 roof (989 with sparsity): 6.775 %."""
    from inductor_perf.devices.table import lookup

    def trace(dtype):
        return {"traceEvents": [X("sm90_xmma_gemm", 0, 100, cat="kernel", pid=0, tid=7, kernel_flop=3_350_000_000,
                                  kernel_matmul_flop=3_350_000_000, kernel_dtype=dtype)]}

    h100 = lookup("NVIDIA H100 80GB HBM3")
    s = summarize(trace("torch.float32"), device=h100)
    assert (s.peak.dtype, s.peak.peak_tflops) == ("torch.float32", 67.0)
    assert s.achieved_tflops == pytest.approx(33.5) and s.flops_pct_of_peak == pytest.approx(50.0)
    t = summarize(trace("tf32"), device=h100)
    assert t.peak.peak_tflops == 494.5 and t.flops_pct_of_peak == pytest.approx(100 * 33.5 / 494.5, abs=1e-3)


def test_top_kernel_rows_and_ordering():
    s = summarize(augmented_cpu_trace())
    assert [r.name for r in s.top_kernels] == ["aten::mm", "graph_0_cpp_fused_a_0", "graph_0_cpp_fused_b_1"]
    mm, a, b = s.top_kernels
    assert (a.count, a.total_us, a.mean_us, a.flop) == (2, 20, 10, 2000)
    assert a.gb == pytest.approx(2e-6)
    # No device: no roof to name, so no % of one (the args' 50 % / 20 % were against a roof this summary
    # cannot name); the bound is the trace's own
    assert (a.flops_pct, a.bandwidth_pct, a.placement) == (None, None, None)
    assert (a.bound, a.source, a.module_path, a.kind) == ("memory", "m.py:10", "enc.fc1", "generated")
    assert mm.achieved_tflops == pytest.approx(0.2)
    assert mm.kind == "extern_matmul" and mm.bound == "compute"
    assert b.gb == pytest.approx(3e-6)  # (2000 + 1000) bytes
    # ties on total time are broken by name
    t = summarize({"traceEvents": [X("graph_0_z", 0, 5), X("graph_0_y", 5, 5), X("graph_0_x", 10, 6)]})
    assert [r.name for r in t.top_kernels] == ["graph_0_x", "graph_0_y", "graph_0_z"]
    assert summarize(augmented_cpu_trace(), top=1).top_kernels[0].name == "aten::mm"
    assert summarize(augmented_cpu_trace(), top=1).distinct_kernels == 3


def test_time_split_by_kind():
    # generated: triton_poi_fused_convolution_0 (4; "conv" in its name must not matter) + graph kernel (1)
    # extern matmul: aten::convolution (2), cuBLAS kernel tagged extern with matmul FLOPs (8)
    # other: aten::index tagged extern (3); memcpy: a gpu_memcpy (2), its own kind since real traces
    s = summarize({"traceEvents": [
        X("triton_poi_fused_convolution_0", 0, 4, cat="kernel"),
        X("graph_3_cpp_fused_add_1", 4, 1, cat="kernel", kernel_kind="generated"),
        X("aten::convolution", 5, 2, cat="kernel"),
        X("sm90_xmma_gemm_f32f32", 7, 8, cat="kernel", kernel_kind="extern", kernel_matmul_flop=100),
        X("index_elementwise_kernel", 15, 3, cat="kernel", kernel_kind="extern"),
        X("Memcpy HtoD", 18, 2, cat="gpu_memcpy"),
    ]})
    nonzero = {k: v for k, v in s.time_split_us.items() if v}
    assert nonzero == {"generated": 5, "extern_matmul": 10, "other": 3, "memcpy": 2}
    assert s.time_split_pct["generated"] == 25.0 and s.time_split_pct["extern_matmul"] == 50.0
    assert s.time_split_pct["other"] == 15.0 and s.time_split_pct["memcpy"] == 10.0
    assert list(s.time_split_us) == list(KINDS)  # every kind, always, in one order (a stable JSON schema)


@pytest.mark.parametrize("name,args,kind", [
    ("triton_poi_fused_convolution_0", None, "generated"),
    ("triton_tem_fused_mm_0", None, "generated"),
    ("graph_12_cpp_fused_conv_backward_3", None, "generated"),
    ("aten::addmm", None, "extern_matmul"),
    ("aten::_scaled_dot_product_flash_attention_for_cpu", None, "extern_matmul"),
    ("aoti_torch_cpu_addmm_out", None, "extern_matmul"),
    ("aten::convolution_backward", None, "extern_matmul"),
    ("aten::conv_something_new", None, "other"),
    ("my_attention_helper", None, "other"),
    ("aten::add", None, "other"),
    ("aten::mm", {"kernel_kind": "generated"}, "generated"),
    ("whatever", {"kernel_kind": "extern", "kernel_matmul_flop": "nan?"}, "other"),
])
def test_kernel_kind_exact_names(name, args, kind):
    assert kernel_kind(name, args) == kind


# --- robustness, strict JSON ------------------------------------------------------------------------
def test_malformed_events_are_counted_not_fatal():
    s = summarize({"traceEvents": [
        X("graph_0_ok", 0, 10, kernel_flop="lots", kernel_num_gb=float("nan"), achieved_flops_pct=float("inf")),
        {"ph": "X", "name": "graph_0_no_dur", "ts": 1, "pid": 1, "tid": 1},
        {"ph": "X", "name": "graph_0_no_ts", "dur": 1, "pid": 1, "tid": 1},
        X("graph_0_zero", 3, 0),
        X("graph_0_neg", 3, -2),
        X("graph_0_str", "abc", 1),
        X("graph_0_nan", float("nan"), 1),
        "not an event",
        {"ph": "M", "name": "thread_name", "args": {"name": "x"}},  # metadata: ignored, not skipped
        X("graph_0_ok2", 20, 5, args_are="fine"),
        {"ph": "X", "name": None, "ts": 30, "dur": 1, "args": [1, 2]},  # odd name / args types
    ]})
    # no dur, no ts, a negative dur, a string ts, a NaN ts: one rule (model.events.event_time)
    assert s.skipped == {evs.BAD_TIME: 5, "zero dur": 1, "not an object": 1}
    assert s.bad_args == 3
    assert s.kernel_count == 2 and s.flop is None
    assert s.events_total == 11 and s.events_used == 3
    strict(s)


@pytest.mark.parametrize("trace", [{}, {"traceEvents": []}, {"traceEvents": [{"ph": "M"}]}])
def test_empty_traces(trace):
    s = summarize(trace)
    d = strict(s)
    assert s.kernel_definition == DEF_NONE
    assert (s.wall_us, s.busy_us, s.kernel_count, s.gap_count) == (0, 0, 0, 0)
    assert d["busy_pct"] is None


def test_bad_input_types_raise_trace_format_error():
    with pytest.raises(TraceFormatError, match="traceEvents"):
        summarize([])  # type: ignore[arg-type]
    with pytest.raises(TraceFormatError, match="list"):
        summarize({"traceEvents": {"a": 1}})


def test_to_dict_is_strict_json_even_with_infinite_peaks():
    dev = {"name": "odd", "peak_tflops": {"float32": float("inf")}, "mem_bandwidth_gbs": float("nan"),
           "peak_source": "user"}
    s = summarize(augmented_cpu_trace(), device=dev)
    d = strict(s)
    assert d["flops_pct_of_peak"] is None and d["bandwidth_pct_of_peak"] is None

    def walk(o):
        if isinstance(o, float):
            assert math.isfinite(o)
        elif isinstance(o, dict):
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
    walk(strict(summarize(gpu_trace())))
    walk(strict(summarize(cpu_compiled_trace())))


# --- a real trace ---------------------------------------------------------------------------------
def test_real_cpu_trace_fixture():
    # tests/fixtures/make_mlp_cpu_trace.py: 2 profiled fwd+bwd steps of a compiled 2-layer MLP.
    # Counted by reading the trace: per step the forward runs addmm, gelu_0, addmm, sum_1 and the
    # backward expand_mm_t_0, mm, expand_mm_t_0, mm, gelu_backward_sum_1, mm, sum_2 -> 11 kernels.
    trace = json.loads((FIXTURES / "mlp_cpu_compiled.trace.json").read_text())
    s = summarize(trace)
    assert s.kernel_definition == DEF_CPU_COMPILED
    assert s.kernel_count == 22
    counts = {r.name: r.count for r in s.top_kernels}
    assert counts["aten::mm"] == 6 and counts["aten::addmm"] == 4
    assert counts["graph_0_cpp_fused_expand_mm_t_0"] == 4
    assert s.time_split_us["other"] == 0  # every kernel is either generated or an extern matmul
    assert 0 < s.busy_pct < 100
    assert sum(g.dur_us for g in s.gaps) <= s.idle_us + 1e-6
    # no ProfilerStep#N: the window runs from the first kernel's start to the last kernel's end
    # (kernels read from the raw events: graph_* and the aten ops inside the compiled calls), not from
    # the first op (TorchDynamo Cache Lookup) nor the profiler's own "PyTorch Profiler (0)" span
    evs = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    calls = [(e["ts"], e["ts"] + e["dur"]) for e in evs if e["name"].startswith("## Call CompiledFxGraph")]
    kernels = [e for e in evs if e["name"].startswith("graph_")
               or (e["name"].startswith("aten::") and any(a <= e["ts"] < b for a, b in calls))]
    assert s.window_basis == "kernels"
    assert s.wall_us == pytest.approx(max(e["ts"] + e["dur"] for e in kernels) - min(e["ts"] for e in kernels),
                                      abs=1e-2)
    strict(s)


def test_root_module_and_unknown_module_are_kept_apart():
    # Three 10 µs kernels: one in the root module's own forward (module_path ""), one in "fc",
    # one whose module is unknown (no arg).
    trace = {"traceEvents": [
        X("graph_0_cpp_fused_relu_0", 0, 10, kernel_flop=10, module_path=""),
        X("graph_0_cpp_fused_add_1", 20, 10, kernel_flop=10, module_path="fc"),
        X("graph_0_cpp_fused_mul_2", 40, 10, kernel_flop=10),
    ]}
    rows = {r["key"]: r["total_us"] for r in strict(summarize(trace))["modules"]}
    assert rows == {"(root module)": 10, "fc": 10, "(no module)": 10}


def test_eager_work_between_compiled_pieces_counts_in_its_module():
    """A graph break: inside the root frame's Torch-Compiled Region, aten::cumsum runs eagerly
    between two compiled graph calls (kernels of gate.fc and gate); its backward runs between two
    compiled backward graphs of the same backward pass. The AOT wrapper's own view op, the loss's
    backward before the first compiled backward, and gradient accumulation do not count."""
    call = "## Call CompiledFxGraph abc ##"
    bwd = "autograd::engine::evaluate_function: CompiledFunctionBackward"
    events = [
        X("Torch-Compiled Region: 0/0", 0, 100, cat="user_annotation"),
        X("CompiledFunction", 1, 30, cat="user_annotation"),
        X(call, 2, 20, cat="user_annotation"),
        X("graph_0_cpp_fused_0", 3, 10, kernel_flop=10, module_path="gate.fc"),
        X("aten::_unsafe_view", 25, 2),                      # the wrapper's output view: not counted
        X("aten::cumsum", 40, 10),                           # eager, between the pieces
        X("Torch-Compiled Region: 1/0", 60, 30, cat="user_annotation"),
        X(call, 61, 20, cat="user_annotation"),
        X("graph_1_cpp_fused_relu_0", 62, 10, kernel_flop=5, module_path="gate"),
        X("autograd::engine::evaluate_function: NllLossBackward0", 200, 5),   # the loss: before
        X("aten::nll_loss_backward", 201, 3),
        X(bwd, 210, 20),
        X(call, 211, 15, cat="user_annotation"),
        X("graph_2_cpp_fused_threshold_backward_0", 212, 5, kernel_flop=5, module_path="gate"),
        X("autograd::engine::evaluate_function: CumsumBackward0", 240, 10),
        X("aten::flip", 241, 4),
        X("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 252, 2),
        X("aten::add_", 252.5, 1),
        X(bwd, 260, 20),
        X(call, 261, 15, cat="user_annotation"),
        X("graph_3_cpp_fused_sum_0", 262, 5, kernel_flop=5, module_path="gate.fc"),
    ]
    s = summarize({"traceEvents": events})
    rows = {r.name: r for r in s.top_kernels}
    assert s.kernel_definition == DEF_CPU_COMPILED
    assert set(rows) == {"graph_0_cpp_fused_0", "graph_1_cpp_fused_relu_0", "graph_2_cpp_fused_threshold_backward_0",
                         "graph_3_cpp_fused_sum_0", "aten::cumsum", "aten::flip"}
    assert rows["aten::cumsum"].module_path == "gate" and rows["aten::flip"].module_path == "gate"


# --- unknown is not zero ---------------------------------------------------------------------------------
def no_shapes_gpu_trace():
    # Two kernels launched by aten::mm (no shapes recorded: not costed, not_costed "no_shapes"): the
    # GEMM [0, 10] and the memset beside it [10, 11] (kind matmul: launched by a matmul op), which,
    # like the device copy [20, 30], carries its own bytes and 0 FLOPs. No compute kernel carries a
    # FLOP count: FLOP total, FLOP/s and compute % of peak are unknown, not 0; bytes are known
    # (1e6 + 4e6 B over the 21 µs busy = 238.095 GB/s).
    return {"traceEvents": [
        X("aten::mm", 0, 12, tid=1),
        X("cudaLaunchKernel", 1, 1, cat="cuda_runtime", tid=1, correlation=1),
        X("cudaMemsetAsync", 2, 1, cat="cuda_runtime", tid=1, correlation=2),
        X("cudaMemcpyAsync", 14, 1, cat="cuda_runtime", tid=1, correlation=3),
        X("volta_sgemm_128x32_nt", 0, 10, cat="kernel", pid=0, tid=7, correlation=1,
          launch_op="aten::mm", not_costed="no_shapes"),
        X("Memset (Device)", 10, 1, cat="gpu_memset", pid=0, tid=7, correlation=2, launch_op="aten::mm",
          kernel_flop=0, kernel_num_gb=0.001, cost_source="shapes"),
        X("Memcpy DtoD (Device -> Device)", 20, 10, cat="gpu_memcpy", pid=0, tid=7, correlation=3,
          kernel_flop=0, kernel_num_gb=0.004, cost_source="shapes"),
    ]}


def test_flops_without_a_costed_compute_kernel_are_unknown_not_zero():
    from inductor_perf.devices.table import lookup
    from inductor_perf.report.text import format_summary

    s = summarize(no_shapes_gpu_trace(), device=lookup("Tesla V100-SXM2-16GB"))
    assert (s.flop, s.achieved_tflops, s.flops_pct_of_peak) == (None, None, None)
    assert s.flops_unknown.startswith("no compute kernel carries a FLOP count (no_shapes:")
    assert "record_shapes=True" in s.flops_unknown
    assert s.achieved_gbps == pytest.approx(238.095) and s.bandwidth_pct_of_peak is not None
    assert s.flop_coverage_pct == 0.0  # of the GEMM's and memset's 11 µs of compute-kind time
    d = json.loads(format_summary(s, "json"))
    assert d["flop"] is None and d["achieved_tflops"] is None and d["flops_pct_of_peak"] is None
    for fmt in ("text", "markdown"):
        out = format_summary(s, fmt)
        assert "n/a FLOP/s" in out and "n/a of 15.7 TFLOP/s" in out and "record_shapes=True" in out
        assert "0 FLOP/s" not in out and "0.0 % of 15.7" not in out
    rows = {r.name: r for r in s.all_kernels}
    assert rows["Memcpy DtoD (Device -> Device)"].flop == 0  # a copy's own row says its 0 FLOPs
    assert [g.flop for g in s.modules] == [None]  # the roll-up of uncosted work with copies: unknown


def test_flops_unknown_on_the_page(tmp_path):
    from inductor_perf.devices.table import lookup
    from inductor_perf.report.html import render_report

    page = render_report(no_shapes_gpu_trace(), device=lookup("Tesla V100-SXM2-16GB"))
    head = page[page.index("<dl class='head'>"):page.index("</dl>")]
    assert "n/a FLOP/s" in head and "n/a of 15.7 TFLOP/s" in head and "record_shapes=True" in head
    assert "0 FLOP/s" not in head


def test_a_real_trace_without_shapes_says_why_its_flops_are_unknown(tmp_path):
    v100 = FIXTURES.parents[1] / ".." / "shared" / "traces" / "v100_ranks2_r1_test.json.gz"
    if not v100.exists():
        pytest.skip(f"{v100} absent (the shared real traces are not checked in)")
    from inductor_perf.traces import files as tf
    from inductor_perf.summary.files import summarize_file

    trace = tf.load_trace(str(v100))
    for e in trace["traceEvents"]:  # the same trace as recorded with record_shapes=False
        for k in ("Input Dims", "Input type", "Input Strides", "Concrete Inputs"):
            (e.get("args") or {}).pop(k, None)
    path = tmp_path / "no_shapes.json"
    path.write_text(json.dumps(trace))
    for engine in ("full", "stream"):
        s = summarize_file(str(path), engine=engine).summary
        assert (s.flop, s.achieved_tflops, s.flops_pct_of_peak) == (None, None, None), engine
        assert "(no_shapes:" in s.flops_unknown and s.achieved_gbps > 0
