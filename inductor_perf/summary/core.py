"""Utilization summary of an (augmented) Kineto trace: pure data in, data out.

``summarize(trace_dict)`` answers: how busy was the device, on which kernels, how close to the peak,
which modules and source lines cost the time, and what the host was doing while the device sat idle.
No file I/O here; :mod:`inductor_perf.report.text` renders the result, :mod:`inductor_perf.cli` loads files.

The stages, each in the module named for what it produces:

- :mod:`inductor_perf.summary.kernels`: events -> per-thread forest -> the kernels and their kinds;
- this module: kernels -> rows per kernel, module and source line, the device's peaks, the headline;
- :mod:`inductor_perf.summary.idle`: busy window, gaps, idle time by host activity;
- :mod:`inductor_perf.summary.rows`: the row dataclasses and :class:`Summary` they end up in.

Example::

    >>> s = summarize({"traceEvents": [
    ...     {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 10, "pid": 1, "tid": 1}]})
    >>> s.busy_pct
    100.0
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from typing import Any, Mapping

from ..devices.peaks import dtype_peak
from ..devices.props import recorded_block
from ..model import events as evs
from ..model.kernel_kinds import (KIND_COLLECTIVE, KIND_EXTERN_MATMUL, KIND_GENERATED,
                                  KIND_OTHER, KINDS, MATMUL_LIKE, kernel_kind)
from ..roofline.roofs import Roofs
from .comm import ComputeSums, comm_view
from .coverage import CoverageFigures, coverage, flops_unknown
from .idle import WINDOW_BASES, BusyWindow, IdleTables, busy_window, idle_tables, launching_threads
from .kernels import (DEF_CPU_COMPILED, DEF_CPU_EAGER, DEF_GPU, DEF_NONE, GRAPH_CALL_PREFIX, KERNEL_DEFINITIONS,
                      NOT_COMPUTE, TraceKernels, ParsedEvent, _num, _parse, counts_flops, headline_dtype,
                      select_kernels)
from .signals import advice_signals
from .roofs import above_peak_reason, device_roofs, roof_notes, row_bound, row_placement
from .rows import GapRow, GroupRow, IdleRow, KernelRow, PeakInfo, Summary, _dominant, six_digits, percent, rounded
from .graph_gaps import GraphGaps, graph_gaps
from .steps import duration_text, median, profiler_steps, slowest_step, step_rows, with_flops
from .idle_split import StreamIdleRow, launch_times, stream_idle
from .op_shapes import OpShapeSums, fill_launch_dtypes, launch_dtypes_note, shape_keys, shape_sums
from .utilization import utilization

__all__ = [
    "DEF_CPU_COMPILED", "DEF_CPU_EAGER", "DEF_GPU", "DEF_NONE", "GRAPH_CALL_PREFIX", "KERNEL_DEFINITIONS",
    "KIND_EXTERN_MATMUL", "KIND_GENERATED", "KIND_OTHER", "KINDS", "GapRow", "GroupRow", "IdleRow",
    "KernelRow", "PeakInfo", "Summary", "headline_dtype", "kernel_kind", "summarize",
]


# --- Peaks ---------------------------------------------------------------------------------------------
def _device_peaks(device: Any, dtype: str) -> PeakInfo:
    """The headline's peaks: ``device``'s matmul roof for ``dtype`` (:func:`devices.peaks.dtype_peak`,
    the figure each kernel's own % is measured against) and its memory bandwidth."""
    if device is None:
        return PeakInfo(None, None, None, None, None)

    def get(attr: str) -> Any:
        if isinstance(device, Mapping):
            return device.get(attr)
        return getattr(device, attr, None)

    bw = _num(get("mem_bandwidth_gbs"))
    name = get("name")
    src = get("peak_source")
    return PeakInfo(str(name) if name is not None else None, dtype, dtype_peak(device, dtype, True),
                    bw if bw and bw > 0 else None, str(src) if src is not None else None)


# --- Per-kernel, per-module and per-line sums ------------------------------------------------------------

@dataclass
class _Acc:
    """Running sums over the calls of one kernel name, module path or source line."""

    count: int = 0
    time: float = 0.0
    flop: float | int | None = None
    flop_time: float = 0.0
    gb: float | None = None
    gb_time: float = 0.0
    members: list[ParsedEvent] = field(default_factory=list)
    """The calls themselves: a row's share of busy time is the union of their intervals."""


def _weights() -> defaultdict[Any, float]:
    return defaultdict(float)


@dataclass
class _KernelAcc(_Acc):
    """:class:`_Acc` of one kernel name, plus the time-weighted args its row reports."""

    kind: str = KIND_OTHER
    fpct: list[float] = field(default_factory=lambda: [0.0, 0.0])
    """(sum of ``achieved_flops_pct`` x dur, sum of dur) over the calls that carry it."""
    bpct: list[float] = field(default_factory=lambda: [0.0, 0.0])
    bound: defaultdict[str, float] = field(default_factory=_weights)
    source: defaultdict[str, float] = field(default_factory=_weights)
    module: defaultdict[str, float] = field(default_factory=_weights)
    dtype: defaultdict[str, float] = field(default_factory=_weights)
    memory_roof: defaultdict[str, float] = field(default_factory=_weights)


class _Totals:
    """Everything :func:`summarize` sums over the kernels, in one pass."""

    def __init__(self) -> None:
        self.split: dict[str, float] = {kind: 0.0 for kind in KINDS}
        self.flop: float = 0
        self.gb = 0.0
        self.flop_known_time = 0.0
        self.any_flop = self.any_gb = False
        self.kernels: dict[str, _KernelAcc] = {}
        self.modules: dict[str, _Acc] = {}
        self.lines: dict[str, _Acc] = {}
        self.bad_args = 0
        """Kernel args present but not finite numbers."""
        self.kinds: dict[int, str] = {}
        """``id(kernel)`` -> its kind, for the per-step view."""
        self.flop_groups: list[tuple] = []
        """The compute kernels with a FLOP count, as :data:`~inductor_perf.summary.utilization.FlopGroup`s."""
        self.recompute_tagged = False
        """Whether any kernel's recompute is known (``kernel_recompute_flop``, or a tag's cost without it: 0)."""
        self._kind_memo: dict[tuple[Any, ...], str] = {}

    def kind(self, k: ParsedEvent) -> str:
        """:meth:`kind_of` the kernel's name, category and args."""
        return self.kind_of(k.name, k.cat, k.args)

    def kind_of(self, name: str, cat: str, args: Mapping[str, Any]) -> str:
        """:func:`kernel_kind` of a kernel, remembered per everything it reads (name, category and the
        four args it looks at): a trace has few distinct kernels and many calls."""
        tagged = args.get(evs.KERNEL_KIND)
        if tagged != "generated" and tagged != "extern":
            tagged = None
        mm = evs.number(args.get(evs.KERNEL_MATMUL_FLOP)) if tagged == "extern" else None
        launch = args.get(evs.LAUNCH_OP)
        key = (name, cat, tagged, mm is not None and mm > 0, isinstance(args.get(evs.COMM_OP), str),
               launch if isinstance(launch, str) else None)
        kind = self._kind_memo.get(key)
        if kind is None:
            kind = self._kind_memo[key] = kernel_kind(name, args, cat)
        return kind

    def add(self, k: ParsedEvent) -> None:
        args = k.args
        fpct, bad = _parsed(args, evs.ACHIEVED_FLOPS_PCT)
        bpct, bad2 = _parsed(args, evs.ACHIEVED_BANDWIDTH_PCT)
        self.bad_args += bad + bad2
        self.add_parts(k, self.kind(k), static_sums(args), fpct, bpct, args.get(evs.ROOFLINE_BOUND))

    def add_parts(self, k: ParsedEvent, kind: str, st: tuple, fpct: float | int | None, bpct: float | int | None,
                  bound: Any, accs: tuple[_KernelAcc, _Acc, _Acc] | None = None) -> None:
        """Sum kernel ``k`` of ``kind`` from what :meth:`add` reads of its args: ``st``, the parts
        that do not depend on its duration (:func:`static_sums`; kernels sharing a cost share them),
        and those that do (its achieved % of each peak, its roofline bound). ``accs``: its
        :meth:`accs`, when the caller has them."""
        dur = k.dur
        self.kinds[id(k)] = kind
        self.add_group(kind, st, accs if accs is not None else self.accs(k.name, kind, st[6], st[7]), 1, dur,
                       None if fpct is None else fpct * dur, None if bpct is None else bpct * dur,
                       {bound: dur} if isinstance(bound, str) and bound else None, [k])

    def add_group(self, kind: str, st: tuple, accs: tuple[_KernelAcc, _Acc, _Acc], n: int, time: float,
                  fp: float | None, bp: float | None, bounds: dict[str, float] | None, members: list[ParsedEvent],
                  fp_time: float | None = None, bp_time: float | None = None) -> None:
        """Sum ``n`` kernels of one name, ``kind`` and :func:`static_sums` ``st`` at once (``members``,
        which the caller has put in :attr:`kinds`): ``time`` their total duration; ``fp`` / ``bp`` the
        sums of achieved % x duration over those that carry it (None: none does), whose durations
        sum to ``fp_time`` / ``bp_time`` (default ``time``); ``bounds`` the duration by roofline
        bound. The same sums as adding them one by one, but for the order of the float additions."""
        self.split[kind] += time
        flop, gb, bad, source, module, dtype, _, _, memory_roof, mm, rc = st
        self.bad_args += bad * n
        # A copy's or a collective's 0 FLOPs say nothing of the compute: only a compute kernel's
        # count makes FLOP totals and rates known (else they are unknown, not 0).
        compute = counts_flops(flop, kind, members[0].cat if members else None)
        if compute:
            self.flop += flop * n
            self.flop_known_time += time
            self.any_flop = True
            if mm is None and kind in MATMUL_LIKE:
                mm = flop
            if rc is not None:
                self.recompute_tagged = True
            self.flop_groups.append((members, flop, mm - (rc or 0) if mm is not None and mm > 0 else None))
        if gb is not None:
            self.gb += gb * n
            self.any_gb = True
        a, g, line = accs
        if fp is not None:
            a.fpct[0] += fp
            a.fpct[1] += time if fp_time is None else fp_time
        if bp is not None:
            a.bpct[0] += bp
            a.bpct[1] += time if bp_time is None else bp_time
        for bound, t in (bounds or {}).items():
            a.bound[bound] += t
        if source is not None:
            a.source[source] += time
        if module is not None:
            a.module[module] += time
        if dtype is not None:
            a.dtype[dtype] += time
        if memory_roof is not None:
            a.memory_roof[memory_roof] += time
        for acc in (a, g, line):  # each one's running sums, inline: no call per sum
            acc.count += n
            acc.time += time
            acc.members += members
            if compute or (flop is not None and acc is a):  # a copy's row says its own 0 FLOPs
                acc.flop = (acc.flop or 0) + flop * n
                acc.flop_time += time
            if gb is not None:
                acc.gb = (acc.gb or 0.0) + gb * n
                acc.gb_time += time

    def accs(self, name: str, kind: str, mkey: str, lkey: str) -> tuple[_KernelAcc, _Acc, _Acc]:
        """The sums a kernel adds to: its name's (made with ``kind`` on first use), its module's
        and its source line's (:func:`static_sums`' keys)."""
        a = self.kernels.get(name)
        if a is None:
            a = self.kernels[name] = _KernelAcc(kind=kind)
        g = self.modules.get(mkey)
        if g is None:
            g = self.modules[mkey] = _Acc()
        line = self.lines.get(lkey)
        if line is None:
            line = self.lines[lkey] = _Acc()
        return a, g, line


def _parsed(args: Mapping[str, Any], key: str) -> tuple[float | int | None, int]:
    """(the number at ``key`` of a kernel's args or None, 1 when present but not a finite number)."""
    if key not in args:
        return None, 0
    v = _num(args[key])
    return v, v is None


def _text(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def static_sums(args: Mapping[str, Any]) -> tuple:
    """What :meth:`_Totals.add` reads of a kernel's args apart from the achieved figures: (FLOPs,
    GB moved (``kernel_num_gb`` else the byte counts), how many args were not finite numbers,
    source, module path, dtype, module-table key, line-table key, memory roof, matmul FLOPs, recomputed
    matmul FLOPs: 0 for a compile-time tag's cost without the arg, which is written only above 0);
    None where unknown."""
    flop, bad = _parsed(args, evs.KERNEL_FLOP)
    if flop is not None and flop < 0:
        flop = None
    gb, b = _parsed(args, evs.KERNEL_NUM_GB)
    bad += b
    if gb is None:
        (rd, b1), (wr, b2) = _parsed(args, evs.KERNEL_BYTES_READ), _parsed(args, evs.KERNEL_BYTES_WRITTEN)
        bad += b1 + b2
        if rd is not None or wr is not None:
            gb = ((rd or 0) + (wr or 0)) / 1e9
    if gb is not None and gb < 0:
        gb = None
    mod = args.get(evs.MODULE_PATH)
    src = args.get(evs.SOURCE)
    return (flop, gb, int(bad), _text(src), _text(mod), _text(args.get(evs.KERNEL_DTYPE)), evs.module_row(mod),
            evs.line_row(src), _text(args.get(evs.MEMORY_ROOF)), _nonneg(args, evs.KERNEL_MATMUL_FLOP),
            _nonneg(args, evs.KERNEL_RECOMPUTE_FLOP) if evs.KERNEL_RECOMPUTE_FLOP in args
            else 0 if args.get(evs.COST_SOURCE) == "tag" else None)


def _nonneg(args: Mapping[str, Any], key: str) -> float | int | None:
    """The non-negative number at ``key`` of a kernel's args, else None (counted bad by the FLOP sums)."""
    v = _num(args[key]) if key in args else None
    return v if v is not None and v >= 0 else None


def _totals(kernels: list[ParsedEvent]) -> _Totals:
    totals = _Totals()
    for k in kernels:
        totals.add(k)
    return totals


def _rate_tflops(flop: Any, us: float) -> float | None:
    return six_digits(flop / us / 1e6) if flop is not None and us > 0 else None


def _rate_gbps(gb: Any, us: float) -> float | None:
    return six_digits(gb / us * 1e6) if gb is not None and us > 0 else None


_start, _dur = attrgetter("ts"), attrgetter("dur")


def _union_us(kernels: list[ParsedEvent]) -> float:
    """The time at least one of ``kernels`` runs (their intervals merged)."""
    total, end = 0.0, None
    for k in sorted(kernels, key=_start):
        if end is None or k.ts >= end:
            total += k.dur
            end = k.end
        elif k.end > end:
            total += k.end - end
            end = k.end
    return total


def _ranked(table: Mapping[str, Any]) -> list[str]:
    """The keys of a kernel, module or line table in its rows' order: most time (as shown, rounded)
    first, then by key."""
    return sorted(table, key=lambda key: (-rounded(table[key].time), key))


def top_unions(totals: _Totals, top: int) -> dict[int, float]:
    """The busy time of the kernels of each of the ``top`` kernel, module and line rows (their
    intervals merged: the numerator of the row's share of busy time), by ``id`` of the row's
    members list. The streaming summary computes them before it waits for its helper's busy window
    (:func:`inductor_perf.summary.stream.finish.finish`), the denominator, and passes them to
    :func:`assemble`."""
    out: dict[int, float] = {}
    for table in (totals.kernels, totals.modules, totals.lines):
        for key in _ranked(table)[:top]:
            members = table[key].members
            out[id(members)] = _union_us(members)
    return out


def _share(members: list[ParsedEvent], busy: float, unions: Mapping[int, float] | None) -> float | None:
    got = unions.get(id(members)) if unions is not None else None
    return percent(_union_us(members) if got is None else got, busy)


def _kernel_rows(table: dict[str, _KernelAcc], busy: float, roofs: Roofs | None, top: int,
                 unions: Mapping[int, float] | None = None) -> list[KernelRow]:
    """Every kernel name's row, most time first, placed against ``roofs``
    (:func:`~inductor_perf.summary.roofs.row_placement`: its % of peak and bound are those of the
    roof that binds it); the share of busy time for the ``top`` ones (``unions``: :func:`top_unions`,
    when computed already)."""
    rows: list[KernelRow] = []
    for name in _ranked(table):
        a = table[name]
        tflops = _rate_tflops(a.flop, a.flop_time)
        gbps = _rate_gbps(a.gb, a.gb_time)
        dtype = _dominant(a.dtype)
        p = row_placement(a.flop, a.gb, a.flop_time, a.gb_time, a.count, dtype, a.kind, _dominant(a.memory_roof),
                          roofs, (a.bpct[0] / a.bpct[1]) if a.bpct[1] else None)
        fpct = percent(tflops, p.compute_tflops) if p is not None else None
        if p is not None and a.gb is None and a.flop is None:  # a collective: its bus bandwidth's %
            bpct = p.pct_of_roof
        else:
            bpct = percent(gbps, p.memory_gbps) if p is not None else None
        rows.append(KernelRow(
            name=name, kind=a.kind, count=a.count, total_us=rounded(a.time),
            mean_us=rounded(a.time / a.count), share_of_busy_pct=None,
            flop=a.flop, gb=six_digits(a.gb), achieved_tflops=tflops, achieved_gbps=gbps,
            flops_pct=rounded(fpct), bandwidth_pct=rounded(bpct),
            bound=row_bound(p, a.time / a.count, a.gb * 1e9 if a.gb is not None else None, a.count,
                            _dominant(a.bound)),
            source=_dominant(a.source), module_path=_dominant(a.module), dtype=dtype,
            above_roof_reason=p.above_roof_reason if p is not None else None, placement=p))
    for r in rows[:top]:
        r.share_of_busy_pct = _share(table[r.name].members, busy, unions)
    return rows


def _group_rows(table: dict[str, _Acc], busy: float, top: int,
                unions: Mapping[int, float] | None = None) -> list[GroupRow]:
    """The ``top`` module or source-line rows, most time first (``unions``: as :func:`_kernel_rows`)."""
    out = []
    for key in _ranked(table)[:top]:
        g = table[key]
        out.append(GroupRow(key=key, count=g.count, total_us=rounded(g.time),
                            share_of_busy_pct=_share(g.members, busy, unions), flop=g.flop, gb=six_digits(g.gb),
                            achieved_tflops=_rate_tflops(g.flop, g.flop_time)))
    return out


# --- Headline ------------------------------------------------------------------------------------------
def distributed_info(trace: Mapping[str, Any]) -> dict[str, Any] | None:
    """Rank, world size and backend from the trace's ``distributedInfo``, when it has them."""
    dist = trace.get("distributedInfo")
    distributed = None
    if isinstance(dist, Mapping):
        distributed = {k: dist[k] for k in ("rank", "world_size", "backend") if k in dist
                       and isinstance(dist[k], (str, int, float)) and not isinstance(dist[k], bool)}
        distributed = distributed or None
    return distributed


def _notes(tk: TraceKernels, graph_launches: bool, totals: _Totals, kernel_time: float, busy: float,
           device: Any, peak: PeakInfo, skipped: dict[str, int], window_basis: str) -> list[str]:
    """What the reader must know to trust the numbers: the busy definition, then every caveat found."""
    notes = [f"busy = {KERNEL_DEFINITIONS[tk.definition]}", f"window = {WINDOW_BASES[window_basis]}"]
    if graph_launches:
        notes.append("CUDA graphs replay kernels: per-kernel launches are hidden, so idle "
                     "attribution sees only the graph launch")
    if kernel_time > busy * 1.001 and busy > 0:
        notes.append(f"kernels overlap: summed kernel time is {kernel_time / busy:.2f}x the busy time; "
                     "each row's Busy share is the union of its kernels' time (never above 100 %), "
                     "but the rows can add up to more than 100 %")
    if device is None and totals.any_flop:
        notes.append("no device given: overall % of peak is unknown")
    elif device is not None and peak.peak_tflops is None:
        notes.append(f"device has no {peak.dtype} peak: compute % of peak is unknown")
    if skipped.get(evs.BAD_TIME):
        notes.append(evs.bad_time_note(skipped[evs.BAD_TIME]))
    other = sorted((why, n) for why, n in skipped.items() if n and why != evs.BAD_TIME)
    if other:
        notes.append("skipped events: " + ", ".join(f"{n} {why}" for why, n in other))
    if totals.bad_args:
        notes.append(f"{totals.bad_args} kernel args were not finite numbers and were ignored")
    return notes


def _trace_events(trace: Any) -> list[Any]:
    """The trace's event list; raises TraceFormatError when ``trace`` is not a trace dict."""
    from ..errors import TraceFormatError

    if not isinstance(trace, Mapping):
        raise TraceFormatError(f"expected a trace dict with 'traceEvents', got {type(trace).__name__}")
    raw_events = trace.get("traceEvents", [])
    if not isinstance(raw_events, list):
        raise TraceFormatError("expected 'traceEvents' to be a list of event objects")
    return raw_events


def summarize(trace: Mapping[str, Any], *, device: Any = None, dtype: str | None = None,
              top: int = 20, label: str | None = None, device_note: str | None = None,
              costs_note: str | None = None) -> Summary:
    """Summarize one Kineto / Chrome trace dict (one rank).

    ``device``: an object or mapping with ``name``, ``peak_tflops`` (dict keyed by torch.dtype or dtype
    name), ``mem_bandwidth_gbs`` and ``peak_source``; when given, overall and per-kernel achieved
    figures are compared with its ``dtype`` peak (default: :func:`headline_dtype` of the trace).
    ``top`` bounds each table's rows. ``device_note`` (how the device was recognised, or why not)
    and ``costs_note`` (set when the caller computed the costs, :mod:`inductor_perf.summary.files`) are shown in
    the header. Never raises on odd events: they are counted in ``skipped`` / ``bad_args`` instead.

    The steps: parse events and choose the kernels (:mod:`inductor_perf.summary.kernels`), find each kernel's
    launching thread and the busy window, sum per kernel / module / line, then :func:`assemble`:
    the gap and idle tables (:mod:`inductor_perf.summary.idle`), the headline figures and notes. The streaming
    engine (:mod:`inductor_perf.summary.stream`) reaches :func:`assemble` with the same
    :class:`SummaryParts`, built without holding the events.
    """
    raw_events = _trace_events(trace)
    skipped: dict[str, int] = defaultdict(int)
    tk = select_kernels(_parse(raw_events, skipped))
    launcher, graph_launches = launching_threads(tk)
    window = busy_window(tk.events, tk.kernels)
    keys = shape_keys(tk)
    filled = fill_launch_dtypes(tk.kernels, keys)
    if dtype is None:
        dtype = headline_dtype(k.args for k in tk.kernels)
    totals = _totals(tk.kernels)
    kernel_time = sum(map(_dur, tk.kernels))
    return assemble(SummaryParts(
        kernels=tk, counts=Counts(len(raw_events), len(tk.events), dict(skipped)), window=window,
        launcher=launcher, graph_launches=graph_launches, distributed=distributed_info(trace), totals=totals,
        coverage=coverage(tk.kernels, kernel_time, top), dtype=dtype, device=device, top=top, label=label,
        device_note=device_note, costs_note=costs_note, record=recorded_block(trace),
        graph_gaps=graph_gaps(profiler_steps(tk.host_events), tk.host_events),
        op_shapes=shape_sums(tk, totals.kinds, static_sums, keys), dtypes_note=launch_dtypes_note(filled)))


@dataclass(frozen=True)
class Counts:
    """How many events a trace has, how many the summary used, and why it skipped the others."""

    total: int
    used: int
    skipped: dict[str, int]


@dataclass(frozen=True)
class SummaryParts:
    """What both engines hand to :func:`assemble`: :func:`summarize` from a loaded trace, the
    streaming one (:func:`inductor_perf.summary.stream.finish.finish`) from one pass over a file
    that keeps no events. A new table is fed by a field here, which both must fill."""

    kernels: TraceKernels
    """The trace's kernels and host events (:func:`~inductor_perf.summary.kernels.select_kernels`)."""
    counts: Counts
    window: BusyWindow
    """The busy window (:func:`~inductor_perf.summary.idle.busy_window`)."""
    launcher: dict[int, Any] | None
    """Each kernel's launching thread by ``id`` (None when ``idle`` is given)."""
    graph_launches: bool
    """Whether the kernels were launched by CUDA graph replays."""
    distributed: dict[str, Any] | None
    """:func:`distributed_info` of the trace."""
    totals: _Totals
    """The per-kernel, module and line sums."""
    coverage: CoverageFigures
    dtype: str
    """The headline dtype (:func:`~inductor_perf.summary.kernels.headline_dtype`)."""
    device: Any = None
    top: int = 20
    label: str | None = None
    device_note: str | None = None
    costs_note: str | None = None
    idle: IdleTables | None = None
    """The idle tables of the same, when computed already (by the streaming summary's helper process)."""
    unions: Mapping[int, float] | None = None
    """:func:`top_unions` of ``totals``, when computed already (likewise)."""
    idle_by_stream: list[StreamIdleRow] | None = None
    """The idle split by stream (:func:`~.idle_split.stream_idle`, its ``top`` rows), when computed already (by
    the streaming summary, which lets each kernel's launch time go before the tables that follow); None: made here."""
    record: Mapping[str, Any] | None = None
    """The trace's own record (:data:`inductor_perf.devices.props.RECORD_KEY`), for the advisor."""
    graph_gaps: GraphGaps | None = None
    """The time between compiled pieces inside the steps (:mod:`inductor_perf.summary.graph_gaps`)."""
    op_shapes: OpShapeSums | None = None
    """The op x shape table's sums (:mod:`~.op_shapes`), filled as the kernels are summed; None: no table."""
    dtypes_note: str | None = None
    """How many costed kernels took their dtype from their launching op (:func:`~.op_shapes.launch_dtypes_note`)."""
    copy_calls: Mapping[int, tuple[Any, float]] | None = None
    """The pageable copies' launches (:func:`~.signals.advice_signals`), when known already; None: made here."""


def assemble(parts: SummaryParts) -> Summary:
    """The :class:`Summary` of a trace's parts: the tables, the headline figures and the notes."""
    tk, counts, window, launcher, totals, device, top = (parts.kernels, parts.counts, parts.window, parts.launcher,
                                                        parts.totals, parts.device, parts.top)
    dtype, graph_launches, idle, unions = parts.dtype, parts.graph_launches, parts.idle, parts.unions
    kernels = tk.kernels
    busy, kernel_time = window.busy, sum(map(_dur, kernels))
    peak = _device_peaks(device, dtype)
    roofs = device_roofs(device) if device is not None else None
    rows = _kernel_rows(totals.kernels, busy, roofs, top, unions)
    gap_rows, gap_count, idle_rows = idle if idle is not None else idle_tables(tk, window, launcher, top)
    achieved_tflops = _rate_tflops(totals.flop if totals.any_flop else None, busy)
    compute_time = kernel_time - sum(totals.split[k] for k in NOT_COMPUTE)
    achieved_gbps = _rate_gbps(totals.gb if totals.any_gb else None, busy)
    flops_pct, bandwidth_pct = percent(achieved_tflops, peak.peak_tflops), percent(achieved_gbps, peak.mem_bandwidth_gbs)
    split = totals.split
    costed_pct, uncosted, lower_pct = parts.coverage
    steps = step_rows(tk.host_events, kernels, totals.kinds, window.start)
    above = above_peak_reason(flops_pct, bandwidth_pct, peak.dtype, roofs, rows)
    util = utilization(totals.flop_groups, profiler_steps(tk.host_events), window.wall, peak.peak_tflops, peak.dtype,
                       totals.recompute_tagged, above, parts.coverage[0], parts.record)
    with_flops(steps, util.steps)
    notes = _notes(tk, graph_launches, totals, kernel_time, busy, device, peak, counts.skipped, window.basis)
    if parts.dtypes_note:
        notes.append(parts.dtypes_note)
    notes += roof_notes(roofs, rows)
    slowest = slowest_step(steps)
    if slowest is not None and len(steps) > 1:
        dur = max(r.dur_us for r in steps)
        notes.append(f"slowest step: {slowest} ({duration_text(dur)}; median "
                     f"{duration_text(median(r.dur_us for r in steps) or 0.0)})")
    return Summary(
        label=parts.label,
        kernel_definition=tk.definition, kernel_definition_text=KERNEL_DEFINITIONS[tk.definition],
        window_start_us=rounded(window.start) if counts.used else None, wall_us=rounded(window.wall), busy_us=rounded(busy),
        busy_pct=percent(busy, window.wall), idle_us=rounded(window.idle), kernel_count=len(kernels),
        kernel_time_us=rounded(kernel_time), timelines=len({(k.pid, k.tid) for k in kernels}),
        time_split_us={k: rounded(v) for k, v in split.items()},
        time_split_pct={k: percent(v, kernel_time) for k, v in split.items()},
        flop=totals.flop if totals.any_flop else None, gb=six_digits(totals.gb) if totals.any_gb else None,
        flop_coverage_pct=percent(totals.flop_known_time, compute_time) if compute_time > 0 else None,
        achieved_tflops=achieved_tflops, achieved_gbps=achieved_gbps, peak=peak,
        flops_pct_of_peak=flops_pct, bandwidth_pct_of_peak=bandwidth_pct,
        top_kernels=rows[:top], distinct_kernels=len(rows), all_kernels=rows,
        modules=_group_rows(totals.modules, busy, top, unions), distinct_modules=len(totals.modules),
        lines=_group_rows(totals.lines, busy, top, unions), distinct_lines=len(totals.lines),
        gaps=gap_rows, gap_count=gap_count, idle_by_host=idle_rows[:top],
        distributed=parts.distributed, events_total=counts.total, events_used=counts.used,
        skipped=dict(counts.skipped), bad_args=totals.bad_args, notes=notes, device_note=parts.device_note,
        costs_note=parts.costs_note, costed_time_pct=costed_pct, lower_bound_pct=lower_pct, uncosted=uncosted,
        steps=steps, graph_gaps=parts.graph_gaps,
        slowest_step=slowest, window_basis=window.basis,
        flops_unknown=None if totals.any_flop else flops_unknown(kernels, compute_time, uncosted, parts.costs_note),
        above_peak_reason=above,
        comm=comm_view(kernels, totals.kinds, tk.host_events, window.start, _compute_sums(totals, window)),
        idle_by_stream=(parts.idle_by_stream if parts.idle_by_stream is not None else
                        stream_idle(kernels, launch_times(tk.host_events, kernels), tk.definition)[:top]),
        mfu_pct=util.mfu_pct, hfu_pct=util.hfu_pct, model_flop_per_step=util.model_flop_per_step,
        hardware_flop_per_step=util.hardware_flop_per_step, mfu_note=util.note,
        mfu_unprofiled_pct=util.mfu_unprofiled_pct,
        signals=advice_signals(tk, window, graph_launches, device, parts.record, parts.copy_calls, launcher),
        ops_by_shape=parts.op_shapes.rows(roofs, top) if parts.op_shapes is not None else None)


def _compute_sums(totals: _Totals, window: Any) -> ComputeSums | None:
    """The kernels' busy spans and time by module and line, when no kernel is a collective (the
    communication view's compute time is then all of it: :class:`ComputeSums`)."""
    if KIND_COLLECTIVE in totals.kinds.values():
        return None
    # the busy window's spans are the union of all the kernels, as comm_view would merge them
    merged = window.merged
    return ComputeSums(list(zip(map(itemgetter(0), merged), map(itemgetter(1), merged))),
                       {k: g.time for k, g in totals.modules.items()},
                       {k: g.time for k, g in totals.lines.items()}, window.busy)
