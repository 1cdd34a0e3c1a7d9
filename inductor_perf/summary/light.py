"""The light summary of one rank: only the :class:`~inductor_perf.summary.rows.Summary` fields the
cross-rank view (:mod:`inductor_perf.ranks.view`) reads, computed as the full summary computes them.

What the cross-rank view reads of a rank (and so what this keeps):

- ``distributed`` (rank, world size, backend), ``window_start_us`` (which captures go together);
- ``wall_us``, ``busy_us``, ``busy_pct`` (the busy window: every kernel's interval);
- ``steps`` (each ``ProfilerStep#N``'s duration) and ``comm`` (:func:`~inductor_perf.summary.comm.comm_view`:
  collectives, their sizes, compute / collective / exposed time per step, compute by module and line);
- ``all_kernels``: each kernel name's kind and total time (the per-kernel spread, the straggler's
  kernels);
- ``idle_by_host`` (the straggler's idle time by host activity).

What it leaves out, so the streaming pass's end does less per kernel: each kernel's achieved
FLOP/s, bandwidth and roofline bound (``augment.args.args_for``), the FLOP / byte / dtype sums and the
device peaks, the module and source-line tables and each row's share of busy time, the gap table and
the Python frame of each idle activity, the cost coverage table and the notes. Those fields are None or empty in a light summary; the per-kernel
kind still sees every arg it reads (``launch_op``, ``comm_op``, ``kernel_kind``, ``kernel_matmul_flop``),
so kinds, and everything the view derives from them, are the full summary's.

Pure and torch-free. :func:`inductor_perf.summary.stream.finish.finish` builds it (``light=True``).
"""

from __future__ import annotations

from typing import Any

from .comm import comm_view
from .core import Counts, _KernelAcc, _Totals
from .idle import idle_tables
from .kernels import KERNEL_DEFINITIONS, TraceKernels, ParsedEvent
from .rows import KernelRow, PeakInfo, Summary, percent, rounded
from .steps import slowest_step, step_rows

LIGHT_NOTE = "light summary: only what the cross-rank view reads (docs/ranks.md)"


class LightTotals(_Totals):
    """:class:`~inductor_perf.summary.core._Totals` reduced to what the light summary reads: each
    kernel's kind (by ``id``, for the per-step and communication views), the time per kind, and per
    kernel name its calls and time. No FLOP / byte parsing, no module or line sums, no member lists."""

    def add(self, k: ParsedEvent) -> None:
        kind = self.kind(k)
        self.split[kind] += k.dur
        self.kinds[id(k)] = kind
        a = self.kernels.get(k.name)
        if a is None:
            a = self.kernels[k.name] = _KernelAcc(kind=kind)
        a.count += 1
        a.time += k.dur


def _kernel_rows(totals: LightTotals) -> list[KernelRow]:
    rows = [KernelRow(name=name, kind=a.kind, count=a.count, total_us=rounded(a.time), mean_us=rounded(a.time / a.count),
                      share_of_busy_pct=None, flop=None, gb=None, achieved_tflops=None, achieved_gbps=None,
                      flops_pct=None, bandwidth_pct=None, bound=None, source=None, module_path=None)
            for name, a in totals.kernels.items()]
    rows.sort(key=lambda r: (-r.total_us, r.name))  # the full summary's order
    return rows


def assemble_light(tk: TraceKernels, counts: Counts, window: Any, launcher: dict[int, Any], totals: LightTotals,
                   distributed: dict[str, Any] | None, *, top: int, label: str | None) -> Summary:
    """The light :class:`Summary` (module docstring) of a trace's kernels ``tk``, busy ``window``,
    launching threads and :class:`LightTotals`; the fields it computes equal
    :func:`inductor_perf.summary.core.assemble`'s."""
    kernels = tk.kernels
    busy, kernel_time = window.busy, sum(k.dur for k in kernels)
    rows = _kernel_rows(totals)
    _, gap_count, idle_rows = idle_tables(tk, window, launcher, top, light=True)
    steps = step_rows(tk.host_events, kernels, totals.kinds, window.start)
    return Summary(
        label=label, kernel_definition=tk.definition, kernel_definition_text=KERNEL_DEFINITIONS[tk.definition],
        window_start_us=rounded(window.start) if counts.used else None, wall_us=rounded(window.wall), busy_us=rounded(busy),
        busy_pct=percent(busy, window.wall), idle_us=rounded(window.idle), kernel_count=len(kernels),
        kernel_time_us=rounded(kernel_time), timelines=len({(k.pid, k.tid) for k in kernels}),
        time_split_us={k: rounded(v) for k, v in totals.split.items()},
        time_split_pct={k: percent(v, kernel_time) for k, v in totals.split.items()},
        flop=None, gb=None, flop_coverage_pct=None, achieved_tflops=None, achieved_gbps=None,
        peak=PeakInfo(None, None, None, None, None), flops_pct_of_peak=None, bandwidth_pct_of_peak=None,
        top_kernels=rows[:top], distinct_kernels=len(rows), all_kernels=rows,
        modules=[], distinct_modules=0, lines=[], distinct_lines=0,
        gaps=[], gap_count=gap_count, idle_by_host=idle_rows[:top],
        distributed=distributed, events_total=counts.total, events_used=counts.used,
        skipped=dict(counts.skipped), bad_args=0, notes=[LIGHT_NOTE], steps=steps, slowest_step=slowest_step(steps),
        window_basis=window.basis, flops_unknown=LIGHT_NOTE,
        comm=comm_view(kernels, totals.kinds, tk.host_events, window.start))
