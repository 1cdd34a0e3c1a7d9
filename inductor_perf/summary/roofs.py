"""Each kernel row of a summary against the roof that binds it: one placement (:func:`roofline.roofs.place`)
per row, made once by :func:`inductor_perf.summary.core.assemble` (both engines) and read by the text,
the JSON and the page alike, so that a kernel is judged against the same roof everywhere: on a CPU
the cache level its working set fits, a float32 GEMM that ran on TF32 tensor cores the TF32 roof
(its ``kernel_dtype``), a host copy the host link, a collective the interconnect. Every figure above
100 % of its roof carries the reason (:attr:`~inductor_perf.roofline.roofs.Placement.above_roof_reason`).
Pure and torch-free.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any, Mapping

from ..model.kernel_kinds import KIND_COLLECTIVE
from ..model.kernel_names import short_name
from ..roofline.point import DEFAULT_LATENCY_BYTES, DEFAULT_LATENCY_PCT, DEFAULT_LATENCY_US, LATENCY
from ..roofline.roofs import LINK_LEVELS, MATRIX_KINDS, Placement, Roofs, place, roofs_for


def device_roofs(device: Any) -> Roofs | None:
    """:func:`roofline.roofs.roofs_for` of a summary's ``device`` (an object, or a mapping of its fields)."""
    if isinstance(device, Mapping):
        device = SimpleNamespace(**device)
    return roofs_for(device)


def row_placement(flop: float | None, gb: float | None, flop_time: float, gb_time: float, count: int,
                  dtype: str | None, kind: str, memory_roof: str | None, roofs: Roofs | None,
                  bus_pct: float | None) -> Placement | None:
    """The placement of one kernel row: its FLOPs and bytes over the time of the calls that carry
    them (bytes scaled to the FLOPs' calls when fewer calls carry them: the rate is the row's), its
    ``count`` launches, ``dtype`` ("tf32" for TF32 tensor cores), matrix unit when its kind is
    GEMM-like, link when ``memory_roof`` names one. A collective, which moves no counted bytes,
    keeps its bus bandwidth's % of the interconnect (``bus_pct``, time-weighted from its args).
    None without roofs or without anything to place."""
    if roofs is None:
        return None
    if flop is None and gb is None:
        link = roofs.link("interconnect")
        if kind != KIND_COLLECTIVE or bus_pct is None or link is None:
            return None
        reason = None
        if bus_pct > 100.0:
            reason = (f"unexplained: {bus_pct - 100.0:.0f} % above the interconnect roof ({link.source}, "
                      f"{link.gbps:g} GB/s a direction); the roof or the collective's counted size is wrong")
        return Placement(link.level, link.gbps, None, "memory", round(bus_pct, 3), reason)
    time = flop_time if flop is not None else gb_time
    nbytes = None
    if gb is not None and gb_time > 0:
        nbytes = gb * 1e9 * (time / gb_time)
    p = place(flop, nbytes, time, count, dtype, roofs, matrix=kind in MATRIX_KINDS,
              memory_roof=memory_roof if memory_roof in LINK_LEVELS else None)
    # rounded as every row figure is: the engines sum a row's times in different orders
    return p if p.pct_of_roof is None else replace(p, pct_of_roof=round(p.pct_of_roof, 3))


def row_bound(p: Placement | None, mean_us: float, nbytes: float | None, count: int, fallback: Any) -> Any:
    """A row's Bound: the roof that binds it (compute or memory), or latency when it reaches less
    than 25 % of that roof and its launches are short or small (:mod:`inductor_perf.roofline.point`'s rule,
    on the row's mean launch); ``fallback`` (the trace's own ``roofline_bound`` args) without a
    placement."""
    if p is None or p.bound not in ("compute", "memory") or p.level in LINK_LEVELS.values():
        return fallback  # a collective or host copy: the trace's own bound (its args), if any
    per_launch = nbytes / count if nbytes is not None and count else 0.0
    if p.pct_of_roof is not None and p.pct_of_roof < DEFAULT_LATENCY_PCT and (
            mean_us < DEFAULT_LATENCY_US or per_launch < DEFAULT_LATENCY_BYTES):
        return LATENCY
    return p.bound


def roof_notes(roofs: Roofs | None, rows: list[Any]) -> list[str]:
    """What the reader must know of the rows' roofs: on a CPU, that a kernel's roof is its cache
    level; how many kernels read above their roof, one named with its reason (every one has its reason
    in the JSON and the 'Above their roof' table)."""
    notes = []
    if roofs is not None and len(roofs.memory) > 1:
        notes.append("a CPU kernel's memory roof is the cache level its working set (bytes per launch) fits, "
                     "in the text, the JSON and on the page alike (docs/roofline.md)")
    over = [r for r in rows if r.placement is not None and r.placement.above_roof_reason]
    if over:
        r = over[0]
        notes.append(f"{len(over)} kernel(s) above their roof, each with its reason (e.g. {short_name(r.name)}, "
                     f"{r.placement.pct_of_roof:.0f} % of {r.placement.roof}: {r.placement.above_roof_reason})")
    return notes


def above_peak_reason(flops_pct: float | None, bandwidth_pct: float | None, peak_dtype: str | None,
                      roofs: Roofs | None, rows: list[Any]) -> str | None:
    """Why the headline's overall % of peak reads above 100 %, when it does: the rows behind it
    (their own placements, reasons included), or None."""
    why = []
    if flops_pct is not None and flops_pct > 100.0:
        over = [r for r in rows if r.placement is not None and r.placement.bound == "compute"
                and r.placement.above_roof_reason]
        why.append(f"FLOP/s above the {peak_dtype} peak: "
                   + (f"{len(over)} kernel(s) above their compute roof ({over[0].placement.above_roof_reason})"
                      if over else "kernels of other dtypes or units (TF32, a faster dtype) ran faster than "
                                   "this dtype's roof"))
    if bandwidth_pct is not None and bandwidth_pct > 100.0:
        main = roofs.main_memory().level if roofs is not None and roofs.main_memory() else "memory"
        cached = roofs is not None and len(roofs.memory) > 1
        over = [r for r in rows if r.placement is not None and r.placement.bound == "memory"
                and r.placement.level == main and r.placement.above_roof_reason]
        why.append(f"bandwidth above the {main} roof: "
                   + (f"{len(over)} kernel(s) above it ({over[0].placement.above_roof_reason})" if over else
                      "the counted bytes include data served from "
                      + ("the cache levels the kernels' working sets fit" if cached else "the on-chip caches")
                      + " (inputs read more than once count each time)"))
    return "; ".join(why) or None
