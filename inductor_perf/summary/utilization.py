"""MFU and HFU: the step's useful matmul work, and all the work the device did, over what its peak
could have done in the step's time.

- **Model FLOPs** of a kernel: its matmul-class FLOPs (``kernel_matmul_flop``; a kernel without that
  arg counts its ``kernel_flop`` when it is of a matmul / conv / attention kind), less the FLOPs of
  forward matmuls the backward recomputes (``kernel_recompute_flop``, tagged at compile time from the
  AOTAutograd partitioner's marks; docs/summary.md).
- **Hardware FLOPs** of a kernel: every FLOP it executed (``kernel_flop`` of any compute kernel,
  matmul or not, recompute included).

A step's figure sums the kernels that *start* in its ``ProfilerStep#N`` range; MFU (HFU) is that sum
over the step's duration x the summary's peak (:attr:`rows.PeakInfo.peak_tflops`: the device's dense
matmul roof for the headline dtype, :func:`devices.peaks.dtype_peak`). The window's figure sums
every kernel over the window's wall time. Unknown (None, never 0) without a peak or without a
costed matmul-class kernel; :attr:`Utilization.note` says why. Pure and torch-free; both summary
engines feed it the groups :class:`~inductor_perf.summary.core._Totals` collects.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any, Iterable

from .rows import percent, six_digits

FlopGroup = tuple  # (kernels: list[ParsedEvent], flop per kernel, model flop per kernel or None)
"""Kernels sharing one cost: each executed ``flop`` FLOPs, of which ``model`` are model FLOPs (None:
no matmul-class FLOPs known for them)."""


@dataclass
class StepFlops:
    """One step's FLOPs and MFU / HFU (None: unknown)."""

    model_flop: float | None = None
    hardware_flop: float | None = None
    mfu_pct: float | None = None
    hfu_pct: float | None = None


@dataclass
class Utilization:
    """The window's and each step's MFU / HFU."""

    mfu_pct: float | None = None
    hfu_pct: float | None = None
    model_flop: float | None = None
    """The window's model FLOPs."""
    hardware_flop: float | None = None
    model_flop_per_step: float | None = None
    """Mean over the recorded steps of each step's model FLOPs; None without steps."""
    hardware_flop_per_step: float | None = None
    mfu_unprofiled_pct: float | None = None
    """MFU of a step as long as the step the capture timed without the profiler (the trace's
    ``unprofiled_step_us``): ``model_flop_per_step`` over it; None when the trace has none."""
    note: str | None = None
    """Why the figures are unknown, or what they leave out; None when nothing needs saying."""
    steps: list[StepFlops] = field(default_factory=list)


def _pct(flop: float | None, us: float, peak_tflops: float | None) -> float | None:
    if flop is None or peak_tflops is None or us <= 0:
        return None
    return percent(flop / us / 1e6, peak_tflops)


def utilization(groups: Iterable[FlopGroup], steps: list[Any], wall_us: float, peak_tflops: float | None,
                peak_dtype: str | None, recompute_tagged: bool, above_reason: str | None = None,
                costed_pct: float | None = None, record: Any = None) -> Utilization:
    """:class:`Utilization` of the kernels of ``groups`` (:data:`FlopGroup`) in a window of
    ``wall_us`` and its ``steps`` (the ``ProfilerStep#N`` host events, by start) against
    ``peak_tflops`` (of ``peak_dtype``). ``recompute_tagged``: whether any kernel's recompute is
    known (else model FLOPs include recomputed forward matmuls, and the note says so).
    A figure above 100 % gets its reason in the note: ``above_reason`` (the summary's own, why its
    FLOP/s read above the peak) or, without one, what can cause it. ``costed_pct``: the share of
    kernel time that carries a cost; below 100 the figures are lower bounds, and the note says so.
    ``record``: the trace's own record; its ``unprofiled_step_us`` gives :attr:`Utilization.mfu_unprofiled_pct`."""
    starts = [s.ts for s in steps]
    n = len(steps)
    model = [0.0] * n
    hw = [0.0] * n
    has_model = [False] * n
    total_model = total_hw = 0.0
    any_model = False
    for members, flop, mflop in groups:
        k = len(members)
        total_hw += flop * k
        if mflop is not None:
            total_model += mflop * k
            any_model = True
        if not n:
            continue
        for e in members:
            i = bisect.bisect_right(starts, e.ts) - 1
            if i < 0 or e.ts >= steps[i].end:
                continue
            hw[i] += flop
            if mflop is not None:
                model[i] += mflop
                has_model[i] = True
    out = Utilization()
    if not any_model:
        out.note = "unknown: no costed matmul-class kernel (matmul, conv or attention with a FLOP count)"
    elif peak_tflops is None:
        out.note = f"unknown: the summary states no {peak_dtype} peak"
    elif not recompute_tagged:
        out.note = ("recompute unknown (no kernel carries our compile-time tags): model FLOPs include any "
                    "recomputed forward matmuls, so MFU is HFU's matmul part")
    if any_model:
        out.model_flop, out.hardware_flop = six_digits(total_model), six_digits(total_hw)
        out.mfu_pct = _pct(total_model, wall_us, peak_tflops)
        out.hfu_pct = _pct(total_hw, wall_us, peak_tflops)
    for i, st in enumerate(steps):
        row = StepFlops()
        if has_model[i]:
            row.model_flop, row.hardware_flop = six_digits(model[i]), six_digits(hw[i])
            row.mfu_pct = _pct(model[i], st.dur, peak_tflops)
            row.hfu_pct = _pct(hw[i], st.dur, peak_tflops)
        out.steps.append(row)
    if n and any_model:
        out.model_flop_per_step = six_digits(sum(model) / n)
        out.hardware_flop_per_step = six_digits(sum(hw) / n)
        bare = record.get("unprofiled_step_us") if isinstance(record, dict) else None
        if isinstance(bare, (int, float)) and bare > 0 and peak_tflops is not None:
            out.mfu_unprofiled_pct = _pct(sum(model) / n, bare, peak_tflops)
    if any_model and costed_pct is not None and costed_pct < 99.95:
        low = f"a lower bound: {100 - costed_pct:.1f} % of kernel time carries no cost (its FLOPs are not counted)"
        out.note = f"{out.note}; {low}" if out.note else low
    figures = [out.mfu_pct, out.hfu_pct] + [v for r in out.steps for v in (r.mfu_pct, r.hfu_pct)]
    if any(v is not None and v > 100 for v in figures):
        why = above_reason or ("the FLOPs counted exceed what the peak allows in the time: the kernels ran "
                               "on faster units than the dtype's peak assumes, or their counts exceed the work")
        above = f"above 100 % of the {peak_dtype} peak: {why}"
        out.note = f"{out.note}; {above}" if out.note else above
    return out
