"""roofline.roofs.place's TF32 roof and the summary's cache-level note: expected numbers by hand."""

from __future__ import annotations

import json

import pytest

from inductor_perf.devices.spec import DeviceSpec
from inductor_perf.roofline.roofs import ComputeRoof, MemoryRoof, Roofs, place
from inductor_perf.summary.core import summarize

A100_LIKE = Roofs("gpu", (ComputeRoof("float32", 19.5, "matrix", "datasheet"),
                          ComputeRoof("tf32", 156.0, "matrix", "datasheet"),
                          ComputeRoof("float32", 19.5, "vector", "datasheet")),
                  (MemoryRoof("HBM", 1555.0, None, "datasheet"),))


def test_a_tf32_gemm_is_placed_on_the_tf32_roof_and_an_fp32_one_above_its_roof_says_why():
    # 1e12 FLOP in 20 ms = 50 TFLOP/s. Its cost's dtype "tf32" (its name or the capture said so):
    # 50 / 156 = 32.05 % of the TF32 roof. Intensity 1000 FLOP/B x 1555 GB/s = 1555 TFLOP/s > 156: compute.
    p = place(1e12, 1e9, 20_000.0, 10, "tf32", A100_LIKE, matrix=True)
    assert (p.compute_tflops, p.bound, p.compute_roof, p.roof) == (156.0, "compute", "tf32 matrix", "tf32 matrix")
    assert p.pct_of_roof == pytest.approx(100 * 50 / 156) and p.above_roof_reason is None
    # The same GEMM as float32 (nothing said TF32): 50 / 19.5 = 256 % of the fp32 roof, and the reason
    # names the TF32 roof it fits under (32 %), not a guess that moves it there.
    p = place(1e12, 1e9, 20_000.0, 10, "float32", A100_LIKE, matrix=True)
    assert p.compute_tflops == 19.5 and p.pct_of_roof == pytest.approx(100 * 50 / 19.5)
    assert "TF32 tensor cores (roof 156 TFLOP/s, 32 % of it)" in p.above_roof_reason


def test_a_gemm_without_a_dtype_says_the_float32_roof_stood_in_and_names_the_roofs_it_fits_under():
    # 1e12 FLOP in 5 ms = 200 TFLOP/s, no dtype (a trace that records none): placed on float32's 19.5,
    # 1026 %; of the float32-program dtypes only bf16 (312) has a roof that high: TF32's 156 does not.
    roofs = Roofs("gpu", A100_LIKE.compute + (ComputeRoof("bfloat16", 312.0, "matrix", "datasheet"),
                                              ComputeRoof("int8", 624.0, "matrix", "datasheet")), A100_LIKE.memory)
    p = place(1e12, 1e9, 5_000.0, 10, None, roofs, matrix=True)
    assert p.compute_tflops == 19.5 and p.pct_of_roof == pytest.approx(100 * 200 / 19.5)
    assert "records no dtype" in p.above_roof_reason and p.above_roof_reason.endswith(": bfloat16 312 TFLOP/s")
    # the same GEMM said to be float32 keeps the float32 reasons (no TF32 either: 200 > 156)
    said = place(1e12, 1e9, 5_000.0, 10, "float32", roofs, matrix=True)
    assert said.pct_of_roof == p.pct_of_roof and "records no dtype" not in said.above_roof_reason


def test_fp32_gemm_within_the_fp32_roof_and_vector_kernels_keep_the_fp32_roof():
    slow = place(1e12, 1e9, 100_000.0, 10, "float32", A100_LIKE, matrix=True)  # 10 TFLOP/s
    assert slow.compute_tflops == 19.5 and slow.pct_of_roof == pytest.approx(100 * 10 / 19.5)
    vector = place(1e12, 1e9, 20_000.0, 10, "float32", A100_LIKE, matrix=False)  # 50 TFLOP/s, no TF32
    assert vector.compute_tflops == 19.5 and vector.pct_of_roof > 100 and vector.above_roof_reason


def _cpu(l1_gbps: float) -> DeviceSpec:
    return DeviceSpec(name="test cpu", vendor="intel", peak_tflops={"float32": 1.0}, mem_bandwidth_gbs=20.0,
                      device_type="cpu", peak_source="measured",
                      cache_roofs=(("L1", l1_gbps, 64 << 10, "measured"), ("L2", 200.0, 2 << 20, "measured")))


def _trace(name: str, per_launch_bytes: int, launches: int, us: float) -> dict:
    # ``launches`` compiled-graph kernels of ``us`` each, back to back, each moving ``per_launch_bytes``
    return {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": name, "ts": i * us, "dur": us, "pid": 1, "tid": 1,
         "args": {"kernel_flop": 0, "kernel_num_gb": per_launch_bytes / 1e9, "kernel_kind": "generated",
                  "kernel_dtype": "float32"}} for i in range(launches)]}


def test_summary_judges_cpu_kernels_against_their_cache_level_in_text_and_json():
    from inductor_perf.report.text import format_summary

    # 32 KiB per launch x 10 in 1 µs x 10: 327,680 B / 10 µs = 32.8 GB/s, above DRAM's 20 but 8 % of L1's 400.
    s = summarize(_trace("graph_0_cpp_k_l1", 32768, 10, 1.0), device=_cpu(400.0))
    (row,) = s.top_kernels
    assert (row.placement.level, row.placement.bound) == ("L1", "memory")
    assert row.placement.pct_of_roof == pytest.approx(100 * 32.768 / 400) and row.bandwidth_pct == pytest.approx(8.192)
    assert row.placement.above_roof_reason is None and any("cache level" in n for n in s.notes)
    d = json.loads(format_summary(s, "json"))
    assert d["top_kernels"][0]["placement"]["level"] == "L1"
    assert "8.2 % L1" in format_summary(s, "text")
    # With an L1 roof of 10 GB/s the same kernel is at 328 % of it: starred, with its reason in the
    # table's footnote, the notes and the JSON.
    s = summarize(_trace("graph_0_cpp_k_l1", 32768, 10, 1.0), device=_cpu(10.0))
    p = s.top_kernels[0].placement
    assert p.pct_of_roof == pytest.approx(327.68) and p.above_roof_reason
    text = format_summary(s, "text")
    assert "327.7 % L1*" in text and "328 % of L1" in " ".join(s.notes)
    assert "k_l1: 327.7 % of L1," in " ".join(text.split())
