"""MFU and HFU (summary/utilization.py) on hand-built traces, against hand arithmetic: which kernels a
step's figure counts, matmul-class FLOPs vs all executed FLOPs, recompute left out of the model
FLOPs, and unknown (never 0) where a figure cannot be known."""

from __future__ import annotations

import json

import pytest

from inductor_perf.summary.core import summarize

DEVICE = {"name": "Test GPU", "peak_tflops": {"bfloat16": 100.0}, "mem_bandwidth_gbs": 1000.0,
          "peak_source": "datasheet"}


def _kernel(name: str, ts: float, dur: float, **args) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": 7,
            "args": {"kernel_dtype": "bfloat16", **args}}


def _step(i: int, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "ts": ts, "dur": dur, "pid": 1,
            "tid": 1, "args": {}}


def _trace(*kernels: dict) -> dict:
    # two steps of 1000 µs; kernels start inside one or the other
    return {"traceEvents": [_step(0, 0, 1000), _step(1, 1000, 1000), *kernels]}


def test_step_counts_the_kernels_that_start_in_it_matmul_part_for_mfu_all_for_hfu():
    s = summarize(_trace(
        _kernel("gemm_a", 100, 200, kernel_flop=2e10, kernel_matmul_flop=2e10, launch_op="aten::mm"),
        _kernel("triton_poi_fused_add_0", 400, 50, kernel_flop=1e9, kernel_matmul_flop=0, kernel_kind="generated"),
        _kernel("gemm_b", 1900, 300, kernel_flop=4e10, kernel_matmul_flop=4e10, launch_op="aten::mm"),
    ), device=DEVICE, dtype="bfloat16")
    s0, s1 = s.steps
    # step 0: 2e10 model FLOPs in 1000 µs = 20 TFLOP/s of a 100 TFLOP/s peak; HFU adds the 1e9 pointwise
    assert s0.mfu_pct == pytest.approx(20.0) and s0.hfu_pct == pytest.approx(21.0)
    # step 1: gemm_b starts at 1900 (inside it) and runs past its end: counted whole, in step 1
    assert s1.mfu_pct == pytest.approx(40.0) and s1.hfu_pct == pytest.approx(40.0)
    assert s.model_flop_per_step == pytest.approx((2e10 + 4e10) / 2)
    assert s.hardware_flop_per_step == pytest.approx((2e10 + 1e9 + 4e10) / 2)
    # the window: 2000 µs of steps, the last kernel running to 2200 µs
    assert s.wall_us == pytest.approx(2200)
    assert s.mfu_pct == pytest.approx(100 * 6e10 / 2200e-6 / 100e12, abs=1e-3)
    assert "recompute" in s.mfu_note


def test_recompute_is_left_out_of_model_flops_only():
    s = summarize(_trace(
        _kernel("gemm_bwd", 100, 500, kernel_flop=3e10, kernel_matmul_flop=3e10, kernel_recompute_flop=1e10,
                launch_op="aten::mm"),
    ), device=DEVICE, dtype="bfloat16")
    assert s.steps[0].mfu_pct == pytest.approx(20.0) and s.steps[0].hfu_pct == pytest.approx(30.0)
    assert s.mfu_note is None


def test_unknown_without_a_matmul_class_cost_or_without_a_peak():
    only_pointwise = summarize(_trace(
        _kernel("triton_poi_fused_add_0", 100, 50, kernel_flop=1e9, kernel_matmul_flop=0, kernel_kind="generated"),
    ), device=DEVICE, dtype="bfloat16")
    assert only_pointwise.mfu_pct is None and only_pointwise.hfu_pct is None
    assert only_pointwise.steps[0].mfu_pct is None
    assert "no costed matmul-class kernel" in only_pointwise.mfu_note
    no_peak = summarize(_trace(_kernel("gemm_a", 100, 200, kernel_flop=2e10, kernel_matmul_flop=2e10,
                                       launch_op="aten::mm")), dtype="bfloat16")
    assert no_peak.mfu_pct is None and no_peak.steps[0].mfu_pct is None
    assert no_peak.model_flop_per_step == pytest.approx(1e10)  # the FLOPs are known; the peak is not
    assert "peak" in no_peak.mfu_note


def test_above_100_percent_carries_its_reason():
    # 2e11 FLOPs in a 1000 µs step: 200 TFLOP/s, twice the peak
    s = summarize(_trace(_kernel("gemm_a", 100, 100, kernel_flop=2e11, kernel_matmul_flop=2e11,
                                 launch_op="aten::mm")), device=DEVICE, dtype="bfloat16")
    assert s.steps[0].mfu_pct == pytest.approx(200.0)
    assert "above 100 %" in s.mfu_note


def test_json_keys():
    d = summarize(_trace(_kernel("gemm_a", 100, 200, kernel_flop=2e10, kernel_matmul_flop=2e10,
                                 launch_op="aten::mm")), device=DEVICE, dtype="bfloat16").to_dict()
    for key in ("mfu_pct", "hfu_pct", "model_flop_per_step", "hardware_flop_per_step", "mfu_note"):
        assert key in d
    assert {"mfu_pct", "hfu_pct", "model_flop", "hardware_flop"} <= set(d["steps"][0])


def test_mfu_of_the_step_without_the_profiler(tmp_path):
    # steps of 1000 µs under the profiler; the capture timed the step at 400 µs without it. Model FLOPs
    # per step (2e10 + 4e10) / 2 = 3e10 in 400 µs = 75 TFLOP/s: 75 % of the 100 TFLOP/s peak
    kernels = (_kernel("gemm_a", 100, 200, kernel_flop=2e10, kernel_matmul_flop=2e10, launch_op="aten::mm"),
               _kernel("gemm_b", 1100, 300, kernel_flop=4e10, kernel_matmul_flop=4e10, launch_op="aten::mm"))
    s = summarize({**_trace(*kernels), "inductor_perf": {"unprofiled_step_us": 400.0}}, device=DEVICE,
                  dtype="bfloat16")
    assert s.mfu_unprofiled_pct == pytest.approx(75.0)
    assert s.to_dict()["mfu_unprofiled_pct"] == pytest.approx(75.0)
    assert summarize(_trace(*kernels), device=DEVICE, dtype="bfloat16").mfu_unprofiled_pct is None
    from inductor_perf.summary.files import summarize_file

    path = tmp_path / "t.json"
    path.write_text(json.dumps({**_trace(*kernels), "inductor_perf": {"unprofiled_step_us": 400.0}}))
    for engine in ("full", "stream"):
        got = summarize_file(str(path), engine=engine, device=DEVICE).summary
        assert got.mfu_unprofiled_pct == pytest.approx(75.0), engine
