"""roofs.place's TF32 rule and the summary's cache-level note: expected numbers by hand."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from inductor_perf.device_spec import DeviceSpec
from inductor_perf.roofs import ComputeRoof, MemoryRoof, Roofs, place
from inductor_perf.summary import _cache_level_notes

A100_LIKE = Roofs("gpu", (ComputeRoof("float32", 19.5, "matrix", "datasheet"),
                          ComputeRoof("tf32", 156.0, "matrix", "datasheet"),
                          ComputeRoof("float32", 19.5, "vector", "datasheet")),
                  (MemoryRoof("HBM", 1555.0, None, "datasheet"),))


def test_fp32_gemm_faster_than_the_fp32_roof_is_placed_on_the_tf32_roof():
    # 1e12 FLOP in 20 ms = 50 TFLOP/s > 19.5: TF32 units; 50 / 156 = 32.05 %. Intensity 1000 FLOP/B
    # x 1555 GB/s = 1555 TFLOP/s above 156: compute-bound.
    p = place(1e12, 1e9, 20_000.0, 10, "float32", A100_LIKE, matrix=True)
    assert p.compute_tflops == 156.0 and p.bound == "compute"
    assert p.pct_of_roof == pytest.approx(100 * 50 / 156)
    assert p.above_roof_reason is None


def test_fp32_gemm_within_the_fp32_roof_and_vector_kernels_keep_the_fp32_roof():
    slow = place(1e12, 1e9, 100_000.0, 10, "float32", A100_LIKE, matrix=True)  # 10 TFLOP/s
    assert slow.compute_tflops == 19.5 and slow.pct_of_roof == pytest.approx(100 * 10 / 19.5)
    vector = place(1e12, 1e9, 20_000.0, 10, "float32", A100_LIKE, matrix=False)  # 50 TFLOP/s, no TF32
    assert vector.compute_tflops == 19.5 and vector.pct_of_roof > 100 and vector.above_roof_reason


def _cpu(l1_gbps: float) -> DeviceSpec:
    return DeviceSpec(name="test cpu", vendor="intel", peak_tflops={"float32": 1.0}, mem_bandwidth_gbs=20.0,
                      device_type="cpu", peak_source="measured",
                      cache_roofs=(("L1", l1_gbps, 64 << 10, "measured"), ("L2", 200.0, 2 << 20, "measured")))


def _row(name: str, gb: float, total_us: float, count: int) -> SimpleNamespace:
    return SimpleNamespace(name=name, flop=0, gb=gb, total_us=total_us, count=count, dtype="float32",
                           kind="generated")


def test_summary_notes_judge_cpu_kernels_against_their_cache_level():
    # 32 KiB per launch x 10 in 1 µs x 10: 327,680 B / 10 µs = 32.8 GB/s, above DRAM's 20 but 8 % of L1's 400.
    rows = [_row("k_l1", 10 * 32768 / 1e9, 10.0, 10)]
    notes = _cache_level_notes(_cpu(400.0), rows)
    assert len(notes) == 1 and "cache level" in notes[0]
    # With an L1 roof of 10 GB/s the same kernel is at 328 % of it: named, with a reason.
    notes = _cache_level_notes(_cpu(10.0), rows)
    assert len(notes) == 2 and "k_l1" in notes[1] and "328 % of L1" in notes[1]
