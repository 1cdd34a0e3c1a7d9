"""Pure roofline arithmetic for one kernel: intensity, the roof that binds it, and how close it got.

No torch, no I/O. Every number returned is finite or None, so it can go straight into a strict-JSON
trace arg (see INTEROP.md: NaN/Infinity break Catapult and Chrome's trace engine).

The latency rule (documented in docs/devices.md): a kernel is *latency-bound* when it reaches less
than ``latency_pct`` % of the roof that binds it AND it is either shorter than ``latency_us`` or
moves fewer than ``latency_bytes`` bytes. Why these defaults:

* 25 %: a kernel at a quarter of its roof is not limited by that roof in any useful sense; above it,
  calling it compute- or memory-bound still tells the user which resource to look at.
* 10 µs: launch overhead plus ramp-up and tail of a GPU grid are a few µs each (a kernel launch alone
  is ~2-5 µs of CPU time and ~1-2 µs of GPU time); on CPU, waking the OpenMP pool and joining it
  costs a few µs too. A kernel shorter than ~10 µs is dominated by those fixed costs.
* 1 MiB: by Little's law a GPU needs bandwidth × DRAM latency bytes in flight to reach its peak
  bandwidth (3.35 TB/s × ~0.6 µs ≈ 2 MB on an H100); a kernel that moves less than ~1 MiB in total
  cannot fill the memory pipeline, however well it is written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import reduce
from itertools import compress
from operator import add, mul
from typing import Iterable

from ..model import events as evs

COMPUTE = "compute"
MEMORY = "memory"
LATENCY = "latency"
UNKNOWN = "unknown"

# Defaults of the latency rule; the module docstring says why.
DEFAULT_LATENCY_PCT = 25.0
DEFAULT_LATENCY_US = 10.0
DEFAULT_LATENCY_BYTES = 1 << 20

# Where the inline form of classify's arithmetic (binding_roof, inline_pcts, inline_sums, below) gives
# classify's answer, as the fast paths check before taking it (inline_takes, and each duration within
# INLINE_RANGE): FLOP and byte counts below INLINE_INT_LIMIT, durations and peaks within INLINE_RANGE.
INLINE_INT_LIMIT = 1 << 53  # below this every int converts to float exactly
INLINE_RANGE = (1e-6, 1e12)  # durations (µs) and peaks (TFLOP/s, GB/s) the inline roofline takes


@dataclass(frozen=True)
class RooflinePoint:
    """One kernel placed on the roofline. Every field is a finite number, a bound name, or None.

    ``intensity``: FLOP per byte moved (None when nothing was moved). ``ridge``: the intensity at
    which the compute and memory roofs meet (None when either peak is unknown). ``bound``: "compute",
    "memory", "latency" or "unknown". ``achieved_tflops`` / ``achieved_gbps``: None without a
    positive duration. ``flops_pct`` / ``bandwidth_pct``: achieved as % of the peak (None when that
    peak or the duration is unknown). ``pct_of_binding_roof``: achieved as % of the attainable
    performance min(peak, intensity × bandwidth) — the roof that binds this kernel.
    """

    intensity: float | None
    ridge: float | None
    bound: str
    achieved_tflops: float | None
    achieved_gbps: float | None
    flops_pct: float | None
    bandwidth_pct: float | None
    pct_of_binding_roof: float | None


def _positive(x: float | None) -> float | None:
    """x when it is a finite positive number, else None (unknown)."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) and x > 0 else None


def classify(flops: int, bytes_moved: int, duration_us: float, peak_tflops: float | None,
             bandwidth_gbs: float | None, *, latency_pct: float = DEFAULT_LATENCY_PCT,
             latency_us: float = DEFAULT_LATENCY_US,
             latency_bytes: int = DEFAULT_LATENCY_BYTES) -> RooflinePoint:
    """Place a kernel on the roofline of a device with ``peak_tflops`` and ``bandwidth_gbs``.

    A zero, negative or non-finite duration means "not measured": the achieved numbers are None but
    the bound still follows from intensity vs ridge. A missing (None or non-positive) peak makes
    the percentages against it None. Negative counts are a caller bug and raise ValueError.

    >>> p = classify(2 * 4096**3, 3 * 2 * 4096**2, 200.0, 989.5, 3350.0)
    >>> p.bound, round(p.flops_pct, 1)
    ('compute', 69.4)
    """
    if flops < 0 or bytes_moved < 0:
        raise ValueError(f"classify: expected flops >= 0 and bytes_moved >= 0, got {flops}, {bytes_moved}")
    peak = _positive(peak_tflops)
    bw = _positive(bandwidth_gbs)
    dur = _positive(duration_us)

    intensity = evs.number(flops / bytes_moved) if bytes_moved > 0 else None
    # ridge in FLOP/byte: (TFLOP/s * 1e12) / (GB/s * 1e9)
    ridge = evs.number(peak * 1e3 / bw) if peak is not None and bw is not None else None

    achieved_tflops = evs.number(flops / dur / 1e6) if dur is not None else None  # FLOP/µs → TFLOP/s
    achieved_gbps = evs.number(bytes_moved / dur / 1e3) if dur is not None else None  # B/µs → GB/s
    flops_pct = (evs.number(100.0 * achieved_tflops / peak)
                 if achieved_tflops is not None and peak is not None else None)
    bandwidth_pct = (evs.number(100.0 * achieved_gbps / bw)
                     if achieved_gbps is not None and bw is not None else None)

    # Which roof binds: memory when the kernel's intensity is left of the ridge. With no bytes
    # the memory roof is infinitely far (compute); with no FLOPs the compute roof is (memory).
    roof: str | None
    if flops == 0 and bytes_moved == 0:
        roof = None
    elif bytes_moved == 0:
        roof = COMPUTE if peak is not None else None
    elif flops == 0:
        roof = MEMORY if bw is not None else None
    elif ridge is not None and intensity is not None:
        roof = COMPUTE if intensity >= ridge else MEMORY
    else:
        roof = None

    pct_binding = flops_pct if roof == COMPUTE else bandwidth_pct if roof == MEMORY else None

    small = (dur is not None and dur < latency_us) or bytes_moved < latency_bytes
    if flops == 0 and bytes_moved == 0:
        # Time spent doing nothing measurable is pure overhead.
        bound = LATENCY if dur is not None else UNKNOWN
    elif roof is None:
        bound = UNKNOWN
    elif pct_binding is not None and pct_binding < latency_pct and small:
        bound = LATENCY
    else:
        bound = roof
    return RooflinePoint(intensity=intensity, ridge=ridge, bound=bound,
                         achieved_tflops=achieved_tflops, achieved_gbps=achieved_gbps,
                         flops_pct=flops_pct, bandwidth_pct=bandwidth_pct,
                         pct_of_binding_roof=pct_binding)


# --- The inline form ------------------------------------------------------------------------------
# classify's arithmetic without building a RooflinePoint, for the per-event loops: augmenting a large
# trace (augment.stream.render) and summing its kernels (summary.stream.finish). Where inline_takes()
# and every duration is within INLINE_RANGE, no ratio can overflow or underflow to 0 (classify's
# evs.number() checks are then no-ops) and these give classify's floats exactly: the same expressions
# in the same order (tests/unit/roofline/test_point_inline.py checks it on a sweep). Elsewhere the
# callers use classify itself. Why a copy at all: augment.args.args_for (classify) costs 3.0 µs an
# event against 0.64 µs inline (timeit, 2-core x86 VM); on bench/gen_trace.py's 300k-event trace (44k
# kernels augmented) the stream engine in one process takes 1.37 s of CPU with it against 1.48 s
# without (-8 %; mean of 5 alternating runs).
def inline_takes(flops: int, nbytes: int, peak_tflops: float | None, bandwidth_gbs: float | None) -> bool:
    """Whether the inline form gives :func:`classify`'s answer for these counts and peaks (for any
    duration within :data:`INLINE_RANGE`): both peaks known and within it, counts in ``[0, 2**53)``."""
    lo, hi = INLINE_RANGE
    return (peak_tflops is not None and bandwidth_gbs is not None and lo <= peak_tflops <= hi
            and lo <= bandwidth_gbs <= hi and 0 <= flops < INLINE_INT_LIMIT and 0 <= nbytes < INLINE_INT_LIMIT)


def binding_roof(flops: int, nbytes: int, peak_tflops: float, bandwidth_gbs: float) -> str | None:
    """The roof that binds a kernel under :func:`classify`'s rule, where :func:`inline_takes`: None
    (nothing done), "compute" or "memory"."""
    if flops == 0 and nbytes == 0:
        return None
    if nbytes == 0:
        return COMPUTE
    if flops == 0:
        return MEMORY
    return COMPUTE if flops / nbytes >= peak_tflops * 1e3 / bandwidth_gbs else MEMORY


def inline_pcts(flops: int, nbytes: int, dur_us: float, peak_tflops: float, bandwidth_gbs: float,
                roof: str | None) -> tuple[float, float, str]:
    """:func:`classify`'s ``(flops_pct, bandwidth_pct, bound)`` of one kernel lasting ``dur_us``
    (within :data:`INLINE_RANGE`), where :func:`inline_takes`; ``roof``: its :func:`binding_roof`."""
    # classify's own expressions (FLOP/µs/1e6 = TFLOP/s, B/µs/1e3 = GB/s), for identical floats
    flops_pct = 100.0 * (flops / dur_us / 1e6) / peak_tflops
    bandwidth_pct = 100.0 * (nbytes / dur_us / 1e3) / bandwidth_gbs
    if roof is None:
        return flops_pct, bandwidth_pct, LATENCY  # nothing measurable done in a measured time: pure overhead
    pct = flops_pct if roof == COMPUTE else bandwidth_pct
    small = dur_us < DEFAULT_LATENCY_US or nbytes < DEFAULT_LATENCY_BYTES
    return flops_pct, bandwidth_pct, LATENCY if pct < DEFAULT_LATENCY_PCT and small else roof


def _added(values: Iterable[float]) -> float:
    """``values`` added left to right, as ``+=`` adds them kernel by kernel. (Not ``sum()``: from Python
    3.12 it compensates the rounding of each addition, so its floats differ from the loop's in the last
    bits, and the two summary engines would not give the same floats.)"""
    return reduce(add, values, 0.0)


def inline_sums(durs: list[float], flops: int, nbytes: int, peak_tflops: float, bandwidth_gbs: float,
                roof: str | None) -> tuple[float, float, float, dict[str, float]]:
    """Of kernels of one cost lasting ``durs`` µs (each within :data:`INLINE_RANGE`), where
    :func:`inline_takes`: (total duration, the sum of their :func:`inline_pcts` flops % x duration,
    the same of bandwidth %, duration by bound in the order the bounds first come). The same floats as
    adding up :func:`classify` kernel by kernel in ``durs``' order."""
    time = _added(durs)
    fpcts = [100.0 * (flops / d / 1e6) / peak_tflops for d in durs]
    bpcts = [100.0 * (nbytes / d / 1e3) / bandwidth_gbs for d in durs]
    fp, bp = _added(map(mul, fpcts, durs)), _added(map(mul, bpcts, durs))
    if roof is None:  # nothing measurable done in a measured time: all latency
        return time, fp, bp, {LATENCY: time}
    pcts = fpcts if roof == COMPUTE else bpcts
    if nbytes < DEFAULT_LATENCY_BYTES:  # every kernel is small: latency-bound below the latency %
        latent = [p < DEFAULT_LATENCY_PCT for p in pcts]
    else:
        latent = [p < DEFAULT_LATENCY_PCT and d < DEFAULT_LATENCY_US for p, d in zip(pcts, durs)]
    if not any(latent):
        return time, fp, bp, {roof: time}
    if all(latent):
        return time, fp, bp, {LATENCY: time}
    lat = _added(compress(durs, latent))
    rest = _added(d for d, is_lat in zip(durs, latent) if not is_lat)
    return time, fp, bp, {LATENCY: lat, roof: rest} if latent[0] else {roof: rest, LATENCY: lat}
