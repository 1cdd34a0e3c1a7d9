"""The per-step view of :func:`inductor_perf.summary.core.summarize`: for each ``ProfilerStep#N`` of the
trace, how long it took, how busy the device was, and what kept it busy.

A step's window is its host ``ProfilerStep#N`` range (what ``torch.profiler``'s ``schedule`` records
around each ``prof.step()``). Within it, every instant counts once, in the first of these that
holds:

- **matmul**: a matmul / conv / attention kernel runs (:data:`~inductor_perf.model.kernel_kinds.MATMUL_LIKE`);
- **other**: another compute kernel, copy or fill runs;
- **comm**: only collectives run (exposed communication: a collective hidden under compute counts
  as compute);
- **idle**: no device event runs.

So busy = matmul + other + comm is the union of device activity over all streams (never a sum of
kernel times), and the four shares add up to 100 % of the step. Pure and torch-free.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Any, Iterable

from ..model import events as evs
from ..model.kernel_kinds import KIND_COLLECTIVE, MATMUL_LIKE
from .kernels import ParsedEvent
from .rows import percent, rounded

_STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")


@dataclass
class StepRow:
    """One profiler step: its time and how the device spent it (shares of the step, adding to 100)."""

    name: str
    start_us: float
    """Offset from the trace window's start."""
    dur_us: float
    kernel_count: int
    """Device events that overlap the step."""
    busy_us: float
    busy_pct: float | None
    matmul_pct: float | None
    other_pct: float | None
    comm_pct: float | None
    idle_pct: float | None
    model_flop: float | None = None
    """Matmul-class FLOPs of the kernels that start in the step, recompute excluded
    (:mod:`inductor_perf.summary.utilization`); None: none is costed."""
    hardware_flop: float | None = None
    """Every FLOP of the compute kernels that start in the step."""
    mfu_pct: float | None = None
    """``model_flop`` / step time / the summary's peak (its ``peak.peak_tflops``)."""
    hfu_pct: float | None = None
    """``hardware_flop`` / step time / the same peak."""


def _union(spans: Iterable[tuple[float, float]]) -> float:
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(spans):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        elif e > cur_e:
            cur_e = e
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def profiler_steps(host_events: list[ParsedEvent]) -> list[ParsedEvent]:
    """The host ``ProfilerStep#N`` ranges, one per step (the first seen of duplicates), by start."""
    seen: dict[str, ParsedEvent] = {}
    for e in host_events:
        if _STEP_NAME.match(e.name) and not evs.is_device_side(e.cat) and e.name not in seen:
            seen[e.name] = e
    return sorted(seen.values(), key=lambda e: e.ts)


def step_rows(host_events: list[ParsedEvent], kernels: list[ParsedEvent], kinds: dict[int, str],
              window_start: float) -> list[StepRow]:
    """One :class:`StepRow` per ``ProfilerStep#N``; ``kinds`` maps ``id(kernel)`` to its kind."""
    steps = profiler_steps(host_events)
    if not steps:
        return []
    ordered = sorted(kernels, key=lambda k: k.ts)
    starts = [k.ts for k in ordered]
    longest = max((k.dur for k in ordered), default=0.0)
    rows = []
    for st in steps:
        a, b = st.ts, st.end
        lo = bisect.bisect_left(starts, a - longest)
        hi = bisect.bisect_left(starts, b)
        ranks: list[list[tuple[float, float]]] = [[], [], []]
        count = 0
        for k in ordered[lo:hi]:
            s, e = max(k.ts, a), min(k.end, b)
            if e <= s:
                continue
            count += 1
            kind = kinds.get(id(k))
            ranks[0 if kind in MATMUL_LIKE else 2 if kind == KIND_COLLECTIVE else 1].append((s, e))
        u0 = _union(ranks[0])
        u01 = _union(ranks[0] + ranks[1])
        busy = _union(ranks[0] + ranks[1] + ranks[2])
        dur = b - a
        rows.append(StepRow(
            name=st.name, start_us=rounded(a - window_start), dur_us=rounded(dur), kernel_count=count, busy_us=rounded(busy),
            busy_pct=percent(busy, dur), matmul_pct=percent(u0, dur), other_pct=percent(u01 - u0, dur),
            comm_pct=percent(busy - u01, dur), idle_pct=percent(max(0.0, dur - busy), dur)))
    return rows


def with_flops(rows: list[StepRow], flops: list[Any]) -> None:
    """Set each row's FLOPs and MFU / HFU from its :class:`~inductor_perf.summary.utilization.StepFlops`
    (both lists one per ``ProfilerStep#N``, in time order)."""
    for r, f in zip(rows, flops):
        r.model_flop, r.hardware_flop, r.mfu_pct, r.hfu_pct = f.model_flop, f.hardware_flop, f.mfu_pct, f.hfu_pct


def median(values: Iterable[float]) -> float | None:
    """The median of ``values``: the middle one, or the mean of the two middle ones of an even count
    (two steps give their mean, not the longer of them); None when there are none. Every median of
    step times we print is this one."""
    v = sorted(values)
    if not v:
        return None
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def slowest_step(rows: list[StepRow]) -> str | None:
    """The name of the longest step (the first of equals), or None without steps."""
    return max(rows, key=lambda r: r.dur_us).name if rows else None


def duration_text(us: float) -> str:
    """A step's or a finding's duration given in µs, for notes and findings: ``48 µs``, ``14.6 ms``,
    ``13.3 s`` (three significant digits)."""
    if us >= 1e6:
        return f"{us / 1e6:.3g} s"
    if us >= 1e3:
        return f"{us / 1e3:.3g} ms"
    return f"{us:.3g} µs"
