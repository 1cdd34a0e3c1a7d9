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

from ..model import events as evs

COMPUTE = "compute"
MEMORY = "memory"
LATENCY = "latency"
UNKNOWN = "unknown"

# Defaults of the latency rule; the module docstring says why.
DEFAULT_LATENCY_PCT = 25.0
DEFAULT_LATENCY_US = 10.0
DEFAULT_LATENCY_BYTES = 1 << 20

# Where an inline copy of classify's arithmetic (augment.stream.render.binding_roof / args_inline, the
# streaming summary's sums in summary.stream.finish) gives classify's answer, as the fast paths check
# before taking it: FLOP and byte counts below INLINE_INT_LIMIT, durations and peaks within INLINE_RANGE.
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
