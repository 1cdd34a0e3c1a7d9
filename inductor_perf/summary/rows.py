"""The result data model of :func:`inductor_perf.summary.core.summarize`: one row type per table, the
:class:`Summary` that holds them, and the rounding every row value goes through.

Rows are plain dataclasses so that :mod:`inductor_perf.report.text` can render either the objects or
their ``to_dict()`` (strict JSON: non-finite floats become None).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Mapping

from ..model import events as evs


@dataclass
class KernelRow:
    """One kernel name, aggregated over its calls."""

    name: str
    kind: str
    count: int
    total_us: float
    mean_us: float
    share_of_busy_pct: float | None
    """% of the device-busy time during which a call of this kernel ran (union over its calls, so
    never above 100; rows overlap when streams run in parallel)."""
    flop: float | None
    """Sum of ``kernel_flop`` over the calls that carry it; None when none do."""
    gb: float | None
    achieved_tflops: float | None
    achieved_gbps: float | None
    flops_pct: float | None
    """% of the compute roof of :attr:`placement` (its dtype's, on the matrix or vector unit)."""
    bandwidth_pct: float | None
    bound: str | None
    source: str | None
    module_path: str | None
    dtype: str | None = None
    """The dtype whose roof the kernel is judged against (``kernel_dtype``, time-weighted; "tf32" for
    float32 GEMMs that ran on TF32 tensor cores)."""
    above_roof_reason: str | None = None
    """Why ``flops_pct`` or ``bandwidth_pct`` reads above 100 % (its placement's reason: the binding
    roof's % is the larger of the two), beside them; None when neither does."""
    placement: Any = None
    """:class:`inductor_perf.roofline.roofs.Placement`: the roof that binds the kernel (its memory level, link or
    compute roof), its % of it (``pct_of_roof``, the text's Peak column) and, above 100 %, why
    (``above_roof_reason``); None without device roofs. ``flops_pct`` and ``bandwidth_pct`` are
    against this placement's compute and memory roofs."""


@dataclass
class GroupRow:
    """A roll-up of kernels sharing a module path or a source line."""

    key: str
    count: int
    total_us: float
    share_of_busy_pct: float | None
    """% of the device-busy time during which a kernel of this group ran (union over its kernels:
    never above 100, though the rows can add up to more when streams overlap)."""
    flop: float | None
    gb: float | None
    achieved_tflops: float | None


@dataclass
class GapRow:
    """One idle span of the device (no kernel running on any kernel timeline)."""

    start_us: float
    """Offset from the window start."""
    dur_us: float
    position: str
    """``leading`` (before the first kernel), ``between`` or ``trailing``."""
    prev_kernel: str | None
    next_kernel: str | None
    host_innermost: str | None
    """The deepest host event on the launching thread that covers most of the gap."""
    host_outermost: str | None
    """The top-level host event on the launching thread that overlaps most of the gap."""
    source: str | None
    """A Python frame around the host activity when the trace has one, else the next kernel's source."""


@dataclass
class IdleRow:
    """Idle time rolled up by what the host was doing (innermost host event name)."""

    host: str
    idle_us: float
    gaps: int
    share_of_idle_pct: float | None
    source: str | None


@dataclass
class PeakInfo:
    device: str | None
    dtype: str | None
    peak_tflops: float | None
    mem_bandwidth_gbs: float | None
    peak_source: str | None


@dataclass
class Summary:
    """Utilization summary of one trace (one rank). ``to_dict()`` is strict-JSON safe."""

    label: str | None
    kernel_definition: str
    kernel_definition_text: str
    window_start_us: float | None
    wall_us: float
    busy_us: float
    busy_pct: float | None
    idle_us: float
    kernel_count: int
    kernel_time_us: float
    """Sum of kernel durations (larger than ``busy_us`` when kernels overlap)."""
    timelines: int
    time_split_us: dict[str, float]
    time_split_pct: dict[str, float | None]
    flop: float | None
    gb: float | None
    flop_coverage_pct: float | None
    """Share of compute-kernel time (kinds other than memcpy, memset and collective) spent in kernels
    that carry ``kernel_flop``; None without compute kernels."""
    achieved_tflops: float | None
    achieved_gbps: float | None
    peak: PeakInfo
    flops_pct_of_peak: float | None
    bandwidth_pct_of_peak: float | None
    top_kernels: list[KernelRow]
    distinct_kernels: int
    modules: list[GroupRow]
    distinct_modules: int
    lines: list[GroupRow]
    distinct_lines: int
    gaps: list[GapRow]
    gap_count: int
    idle_by_host: list[IdleRow]
    distributed: dict[str, Any] | None
    events_total: int
    events_used: int
    skipped: dict[str, int]
    bad_args: int
    notes: list[str] = field(default_factory=list)
    device_note: str | None = None
    """How the device was found (e.g. recognised from its properties), or why it was not."""
    costs_note: str | None = None
    """Set when the summary computed the costs itself (a trace ``augment`` had not costed)."""
    costed_time_pct: float | None = None
    """Share of kernel time in kernels that carry a cost (FLOPs, bytes, or a collective's size)."""
    lower_bound_pct: float | None = None
    """Share of that costed time whose cost is a lower bound (``kernel_cost_bound: "lower"``: the
    op's record left out values that change its cost; docs/costs.md). None: nothing costed."""
    uncosted: list[Any] = field(default_factory=list)
    """:class:`inductor_perf.summary.coverage.UncostedRow`: the uncosted ops / kernels, most time first."""
    steps: list[Any] = field(default_factory=list)
    """:class:`inductor_perf.summary.steps.StepRow`, one per ``ProfilerStep#N``, in time order."""
    slowest_step: str | None = None
    graph_gaps: Any = None
    """:class:`inductor_perf.summary.graph_gaps.GraphGaps`: time between compiled pieces per step."""
    comm: Any = None
    """:class:`inductor_perf.summary.comm.CommView`: the rank's collectives, exposed collective time,
    compute by module / line (what the cross-rank view, :mod:`inductor_perf.ranks.view`, reads)."""
    above_peak_reason: str | None = None
    """Why ``flops_pct_of_peak`` or ``bandwidth_pct_of_peak`` reads above 100 %, when one does."""
    flops_unknown: str | None = None
    """Why ``flop``, ``achieved_tflops`` and ``flops_pct_of_peak`` are None (unknown, never 0): no
    compute kernel carries a FLOP count, and what the trace lacks; None when they are known."""
    window_basis: str | None = None
    """What the window (``wall_us``, the denominator of busy and idle) spans: "steps" (the recorded
    ``ProfilerStep#N`` ranges), "kernels" (first to last kernel) or "events" (no kernel);
    :data:`inductor_perf.summary.idle.WINDOW_BASES`."""
    mfu_pct: float | None = None
    """Model FLOPs utilization of the window: matmul-class FLOPs, recompute excluded, over the window's
    wall time x ``peak.peak_tflops`` (:mod:`inductor_perf.summary.utilization`); None: unknown
    (``mfu_note`` says why)."""
    hfu_pct: float | None = None
    """Hardware FLOPs utilization of the window: every executed FLOP over the same."""
    model_flop_per_step: float | None = None
    """Mean model FLOPs of a recorded step; None without steps or matmul-class costs."""
    hardware_flop_per_step: float | None = None
    mfu_note: str | None = None
    """Why MFU / HFU are unknown, or what they leave out."""
    mfu_unprofiled_pct: float | None = None
    """MFU of a step as long as the one the env-var capture timed without the profiler (the trace's
    ``unprofiled_step_us``): ``model_flop_per_step`` over it x the peak; None when not timed."""
    idle_by_stream: list[Any] = field(default_factory=list)
    """:class:`inductor_perf.summary.idle_split.StreamIdleRow`: each device stream's idle time between
    its kernels split into host wait, launch delay and other, most idle first; empty on CPU traces."""
    findings: list[dict[str, Any]] = field(default_factory=list)
    """What to fix first, largest saving first (:func:`inductor_perf.advice.advise.attach`; the JSON form
    of :class:`inductor_perf.advice.finding.Finding`); empty until the advisor has run."""
    ops_by_shape: list[Any] | None = None
    """:class:`inductor_perf.summary.op_shapes.OpShapeRow`: time by (op, input shapes, input dtypes),
    most time first, the top ones; None where the engine does not build it (the streaming engine)."""
    signals: Any = field(default=None, repr=False)
    """:class:`inductor_perf.summary.signals.AdviceSignals`: what the advisor reads beyond the tables;
    left out of ``to_dict()``."""
    all_kernels: list[KernelRow] = field(default_factory=list, repr=False)
    """Every kernel row, most time first (``top_kernels`` is its head), for the report page's
    roofline; left out of ``to_dict()`` so the JSON summary keeps its size."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict; non-finite floats become None."""
        d = asdict(replace(self, all_kernels=[], signals=None))
        del d["all_kernels"], d["signals"]
        # Every dict in a Summary is keyed by str, so strict_json's keys are already JSON keys.
        return evs.strict_json(d)


# --- Row values -------------------------------------------------------------------------------------
def percent(part: float | None, whole: float | None) -> float | None:
    if part is None or not whole:
        return None
    return round(100.0 * part / whole, 3)


def rounded(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(x, nd)


def six_digits(x: float | None) -> float | None:
    """Six significant digits: rates and sizes span many orders of magnitude (CPU MFLOP/s to GPU PFLOP/s)."""
    return None if x is None or not math.isfinite(x) else float(f"{x:.6g}")


def _dominant(weights: Mapping[Any, float]) -> Any:
    best, best_w = None, -1.0
    for k, w in weights.items():
        if w > best_w:
            best, best_w = k, w
    return best
