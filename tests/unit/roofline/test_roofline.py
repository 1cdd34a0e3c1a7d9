"""Roofline classification on hand-made kernels. Device numbers: H100 SXM datasheet, dense
(989.5 TFLOP/s bf16, 3350 GB/s); every expected value is hand arithmetic written next to it."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inductor_perf.roofline.point import RooflinePoint, classify

PEAK, BW = 989.5, 3350.0
RIDGE = 989.5e12 / 3350e9  # 295.37 FLOP/byte


def _finite_or_none(p: RooflinePoint) -> bool:
    vals = (p.intensity, p.ridge, p.achieved_tflops, p.achieved_gbps, p.flops_pct, p.bandwidth_pct,
            p.pct_of_binding_roof)
    return all(v is None or (isinstance(v, float) and math.isfinite(v)) for v in vals)


def test_big_gemm_is_compute_bound():
    n = 4096
    flops, nbytes = 2 * n**3, 3 * 2 * n * n  # bf16 A, B, C once each
    p = classify(flops, nbytes, 200.0, PEAK, BW)
    assert p.ridge == pytest.approx(RIDGE)
    assert p.intensity == pytest.approx(137_438_953_472 / 100_663_296)  # 1365.3
    assert p.bound == "compute"
    assert p.achieved_tflops == pytest.approx(137_438_953_472 / 200e-6 / 1e12)  # 687.19
    assert p.flops_pct == pytest.approx(100 * 687.194767 / 989.5)  # 69.45 %
    assert p.pct_of_binding_roof == p.flops_pct


def test_streaming_add_is_memory_bound():
    n = 1 << 26
    p = classify(n, 3 * 4 * n, 300.0, PEAK, BW)  # fp32 a + b -> c
    assert p.bound == "memory"
    assert p.achieved_gbps == pytest.approx(805_306_368 / 300e-6 / 1e9)  # 2684.35
    assert p.bandwidth_pct == pytest.approx(100 * 2684.354560 / 3350)  # 80.13 %
    assert p.pct_of_binding_roof == p.bandwidth_pct


def test_tiny_kernel_is_latency_bound():
    p = classify(1024, 12 * 1024, 3.0, PEAK, BW)  # 4.1 GB/s = 0.12 % of 3350, 3 µs, 12 KiB
    assert p.bound == "latency"
    assert p.bandwidth_pct == pytest.approx(100 * 12288 / 3e-6 / 1e9 / 3350)


def test_slow_but_long_and_large_kernel_stays_memory_bound():
    # 8 % of the roof, but 3 ms and 805 MB: the roof binds, the kernel is just bad at it.
    n = 1 << 26
    p = classify(n, 12 * n, 3000.0, PEAK, BW)
    assert p.bandwidth_pct == pytest.approx(100 * 268.435456 / 3350)
    assert p.bound == "memory"


def test_short_but_efficient_kernel_is_not_latency_bound():
    nbytes = 2 << 20
    p = classify(nbytes // 12, nbytes, 1.0, PEAK, BW)  # 2097 GB/s in 1 µs = 62.6 %
    assert p.bound == "memory"


def test_latency_thresholds_are_parameters():
    n = 1 << 26
    p = classify(n, 12 * n, 3000.0, PEAK, BW, latency_pct=10.0, latency_us=5000.0)
    assert p.bound == "latency"  # 8 % < 10 % and 3 ms < 5 ms
    p = classify(1024, 12 * 1024, 3.0, PEAK, BW, latency_pct=0.01)
    assert p.bound == "memory"  # 0.12 % is not below 0.01 %


def test_zero_duration_zero_bytes_zero_flops():
    p = classify(1000, 1000, 0.0, PEAK, BW)
    assert p.achieved_tflops is None and p.flops_pct is None and p.pct_of_binding_roof is None
    assert p.bound == "memory"  # intensity 1 < ridge 295, known without a duration
    p = classify(10**9, 0, 2.0, PEAK, BW)  # 500 TFLOP/s = 50.5 % of the compute roof
    assert p.intensity is None and p.bound == "compute" and p.bandwidth_pct == 0.0
    # the same work in 5 µs reaches 20.2 % and moves < 1 MiB: latency-bound by the rule
    assert classify(10**9, 0, 5.0, PEAK, BW).bound == "latency"
    p = classify(0, 10**9, 500.0, PEAK, BW)
    assert p.intensity == 0.0 and p.bound == "memory"
    assert classify(0, 0, 5.0, PEAK, BW).bound == "latency"
    assert classify(0, 0, 0.0, PEAK, BW).bound == "unknown"
    for p in (classify(0, 0, 0.0, None, None), classify(1, 1, float("nan"), PEAK, BW),
              classify(1, 1, float("inf"), PEAK, BW), classify(1, 1, -3.0, PEAK, BW)):
        assert _finite_or_none(p)


def test_unknown_peaks():
    p = classify(10**9, 10**6, 100.0, None, None)
    assert p.bound == "unknown" and p.ridge is None and p.flops_pct is None and p.bandwidth_pct is None
    assert p.achieved_tflops == pytest.approx(10**9 / 100e-6 / 1e12)
    p = classify(10**9, 10**6, 100.0, PEAK, None)
    assert p.flops_pct == pytest.approx(100 * 10 / 989.5) and p.bound == "unknown"
    assert classify(0, 10**9, 100.0, None, BW).bound == "memory"
    assert classify(10**9, 10**6, 100.0, 0.0, -5.0).ridge is None


def test_negative_counts_are_rejected():
    with pytest.raises(ValueError, match="flops >= 0"):
        classify(-1, 10, 1.0, PEAK, BW)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10**16), st.integers(0, 10**14),
       st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.just(0.0)),
       st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
       st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)))
def test_never_nan_or_infinite(flops, nbytes, dur, peak, bw):
    p = classify(flops, nbytes, dur, peak, bw)
    assert _finite_or_none(p)
    assert p.bound in ("compute", "memory", "latency", "unknown")
