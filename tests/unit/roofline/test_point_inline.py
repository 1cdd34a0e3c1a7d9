"""The inline form of roofline.point.classify (binding_roof, inline_pcts, inline_sums), which the
per-event loops of the large-trace engines use, against classify itself: the same floats and bounds
wherever inline_takes() says the inline form applies, on edge cases (zero bytes, zero FLOPs, both,
the ridge point exactly, the latency rule's edges, the ends of the ranges) and on a seeded random
sweep. Outside that domain the callers use classify (inline_takes is False there)."""

from __future__ import annotations

import math
import random

import pytest

from inductor_perf.roofline.point import (
    DEFAULT_LATENCY_BYTES,
    DEFAULT_LATENCY_US,
    INLINE_INT_LIMIT,
    INLINE_RANGE,
    LATENCY,
    binding_roof,
    classify,
    inline_pcts,
    inline_sums,
    inline_takes,
)

LO, HI = INLINE_RANGE
# H100 SXM: 67 TFLOP/s FP32 and 3,350 GB/s of HBM put the ridge at 67e12 / 3350e9 = 20 FLOP/byte exactly
H100_F32, H100_HBM = 67.0, 3350.0


def _check_one(flops, nbytes, dur, peak, bw):
    assert inline_takes(flops, nbytes, peak, bw)
    roof = binding_roof(flops, nbytes, peak, bw)
    p = classify(flops, nbytes, dur, peak, bw)
    assert inline_pcts(flops, nbytes, dur, peak, bw, roof) == (p.flops_pct, p.bandwidth_pct, p.bound)
    # the roof alone: classify with the latency rule switched off
    plain = classify(flops, nbytes, dur, peak, bw, latency_pct=0.0).bound
    assert roof == (None if plain == LATENCY else plain)
    return roof, p.bound


EDGE_COUNTS = [0, 1, 2, 1000, DEFAULT_LATENCY_BYTES - 1, DEFAULT_LATENCY_BYTES, 3_350_000, 2 * 4096 ** 3,
               INLINE_INT_LIMIT - 1]
EDGE_DURS = [LO, 0.5, math.nextafter(DEFAULT_LATENCY_US, 0.0), DEFAULT_LATENCY_US, 10.001, 200.0, HI]
EDGE_PEAKS = [(H100_F32, H100_HBM), (989.5, 3350.0), (LO, HI), (HI, LO), (LO, LO), (HI, HI)]


def test_inline_equals_classify_on_the_edges():
    roofs, bounds = set(), set()
    for peak, bw in EDGE_PEAKS:
        for flops in EDGE_COUNTS:
            for nbytes in EDGE_COUNTS:
                for dur in EDGE_DURS:
                    roof, bound = _check_one(flops, nbytes, dur, peak, bw)
                    roofs.add(roof)
                    bounds.add(bound)
    assert roofs == {None, "compute", "memory"} and bounds == {"compute", "memory", "latency"}


def test_zero_bytes_zero_flops_and_nothing_at_all():
    # no bytes: the memory roof is infinitely far (compute); no FLOPs: the compute roof is (memory)
    assert binding_roof(10**9, 0, H100_F32, H100_HBM) == "compute"
    assert binding_roof(0, 10**9, H100_F32, H100_HBM) == "memory"
    assert binding_roof(0, 0, H100_F32, H100_HBM) is None
    # nothing measurable done in a measured time: latency, at 0 % of both roofs
    assert inline_pcts(0, 0, 5.0, H100_F32, H100_HBM, None) == (0.0, 0.0, "latency")
    # 1e9 B in 1000 µs = 1000 GB/s = 29.85 % of HBM, no FLOPs: memory-bound (above 25 %)
    fpct, bpct, bound = inline_pcts(0, 10**9, 1000.0, H100_F32, H100_HBM, "memory")
    assert (fpct, bound) == (0.0, "memory") and bpct == pytest.approx(100 * 1000 / 3350)
    for flops, nbytes in ((10**9, 0), (0, 10**9), (0, 0)):
        for dur in EDGE_DURS:
            _check_one(flops, nbytes, dur, H100_F32, H100_HBM)


def test_the_ridge_point_exactly():
    # intensity 20 FLOP/byte is the ridge: compute-bound (classify: intensity >= ridge); one FLOP less
    # is left of it: memory-bound
    nbytes = 3 * 2**20
    assert binding_roof(20 * nbytes, nbytes, H100_F32, H100_HBM) == "compute"
    assert binding_roof(20 * nbytes - 1, nbytes, H100_F32, H100_HBM) == "memory"
    assert binding_roof(2 * 5000, 5000, 2.0, 1000.0) == "compute"  # 2 TFLOP/s over 1000 GB/s: ridge 2
    for flops in (20 * nbytes - 1, 20 * nbytes, 20 * nbytes + 1):
        for dur in EDGE_DURS:
            _check_one(flops, nbytes, dur, H100_F32, H100_HBM)


def test_unknown_or_out_of_range_peaks_and_counts_are_not_taken():
    assert inline_takes(1, 1, LO, HI) and inline_takes(INLINE_INT_LIMIT - 1, INLINE_INT_LIMIT - 1, HI, LO)
    for peak, bw in ((None, 3350.0), (67.0, None), (None, None), (0.0, 3350.0), (67.0, 0.0),
                     (LO / 10, 3350.0), (67.0, HI * 10), (math.nan, 3350.0), (67.0, math.inf), (-1.0, 3350.0)):
        assert not inline_takes(1000, 1000, peak, bw), (peak, bw)
    for flops, nbytes in ((-1, 0), (0, -1), (INLINE_INT_LIMIT, 0), (0, INLINE_INT_LIMIT)):
        assert not inline_takes(flops, nbytes, 67.0, 3350.0), (flops, nbytes)


def _log_uniform(rng, lo, hi):
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def _count(rng):
    pick = rng.random()
    if pick < 0.1:
        return 0
    if pick < 0.2:
        return rng.randrange(1, 100)
    return min(int(_log_uniform(rng, 1, INLINE_INT_LIMIT)), INLINE_INT_LIMIT - 1)


def test_inline_equals_classify_on_a_random_sweep():
    rng = random.Random(20261128)
    bounds = set()
    for _ in range(20_000):
        peak, bw = _log_uniform(rng, LO, HI), _log_uniform(rng, LO, HI)
        if rng.random() < 0.5:  # real devices' figures, where the latency rule's edges are reached
            peak, bw = rng.choice([(H100_F32, H100_HBM), (989.5, 3350.0), (19.5, 2039.0), (0.33, 20.0)])
        flops, nbytes = _count(rng), _count(rng)
        dur = rng.choice([_log_uniform(rng, LO, HI), rng.uniform(0.5, 20.0)])
        bounds.add(_check_one(flops, nbytes, dur, peak, bw)[1])
    assert bounds == {"compute", "memory", "latency"}


def _classify_summed(durs, flops, nbytes, peak, bw):
    """What inline_sums stands for: each kernel classified, its % x duration and duration by bound added in order."""
    time = fp = bp = 0.0
    bounds: dict[str, float] = {}
    for d in durs:
        p = classify(flops, nbytes, d, peak, bw)
        time += d
        fp += p.flops_pct * d
        bp += p.bandwidth_pct * d
        bounds[p.bound] = bounds.get(p.bound, 0.0) + d
    return time, fp, bp, bounds


def test_inline_sums_equal_classify_summed_kernel_by_kernel():
    rng = random.Random(7)
    mib2 = 2 * DEFAULT_LATENCY_BYTES  # 2 MiB in d µs: 62.6 / d % of HBM, latency-bound for 2.5 < d < 10
    cases = [(0, mib2, [5.0, 1.0, 40.0]), (0, mib2, [1.0, 5.0, 40.0]), (1000, 64, [5.0, 7.5, 1.6]),
             (0, 0, [1.0, 2.0]), (2 * 4096**3, 6 * 4096**2, [150.0, 160.0, 1e5]),
             (20 * mib2, mib2, EDGE_DURS)]  # on the ridge, every duration edge
    for _ in range(2000):
        n = rng.randrange(1, 12)
        durs = [rng.choice([_log_uniform(rng, LO, HI), rng.uniform(0.5, 20.0), DEFAULT_LATENCY_US]) for _ in range(n)]
        cases.append((_count(rng), rng.choice([_count(rng), mib2, DEFAULT_LATENCY_BYTES - 1]), durs))
    splits = set()
    for flops, nbytes, durs in cases:
        roof = binding_roof(flops, nbytes, H100_F32, H100_HBM)
        got = inline_sums(durs, flops, nbytes, H100_F32, H100_HBM, roof)
        want = _classify_summed(durs, flops, nbytes, H100_F32, H100_HBM)
        assert got == want and list(got[3]) == list(want[3]), (flops, nbytes, durs)
        splits.add(tuple(got[3]))
    assert ("latency", "memory") in splits and ("memory", "latency") in splits and ("latency",) in splits
