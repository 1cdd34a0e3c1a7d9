"""When the device sat idle, and what the host was doing meanwhile: the time analysis of
:func:`inductor_perf.summary.core.summarize`.

The kernels' intervals are merged into busy spans; the spans between them (and before the first and
after the last kernel) are the gaps. Each gap is attributed to the host events of the thread that
launched the kernel next to it, down to the deepest event covering each instant, which gives the
gap table and the idle time rolled up by host activity. Pure and torch-free.
"""

from __future__ import annotations

import bisect
import heapq
from collections import defaultdict
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Iterator, NamedTuple

from ..model import events as evs
from .kernels import DEF_GPU, DEF_NONE, TraceKernels, ParsedEvent, _hashable
from .rows import GapRow, IdleRow, _dominant, percent, rounded
from .steps import profiler_steps


# --- Interval helpers ------------------------------------------------------------------------------
_start, _end = attrgetter("ts"), attrgetter("end")


def _merge(kernels: list[ParsedEvent]) -> tuple[list[tuple[float, float, ParsedEvent, ParsedEvent]], float]:
    """Union of kernel intervals: (start, end, first kernel, kernel that ends last) per span, and
    their total time. The total adds each span's first duration and then how far each later kernel
    extends it, as ``summary.core._union_us`` adds up a row's busy time, not ``end - start``. At the
    magnitude of a trace's microsecond timestamps, ``(ts + dur) - ts`` loses the last bits of
    ``dur`` (a 1.76 us kernel of the A100 example measured 1.7598 us), so a row of every kernel read
    100.013 % of this busy time."""
    out: list[tuple[float, float, ParsedEvent, ParsedEvent]] = []
    busy = 0.0
    # sorted by (ts, -end), stably: by end descending, then stably by start (no tuple per kernel)
    for k in sorted(sorted(kernels, key=_end, reverse=True), key=_start):
        if out and k.ts <= out[-1][1]:
            s, e, first, last = out[-1]
            if k.end > e:
                out[-1] = (s, k.end, first, k)
                busy += k.end - e
        else:
            out.append((k.ts, k.end, k, k))
            busy += k.dur
    return out, busy


class _Attributor:
    """Splits a time span on one thread among the deepest host events covering each instant."""

    def __init__(self, roots: list[ParsedEvent]) -> None:
        self.roots = roots
        self.root_starts = [r.ts for r in roots]
        self._starts: dict[int, list[float]] = {id(None): self.root_starts}
        """``id`` of an event (None: the thread) -> its children's start times (the events are
        alive as long as this is)."""

    def outside(self, a: float, b: float) -> bool:
        """Whether :meth:`attribute` finds no top-level event in [a, b), so that all of it is the
        thread's own (``{None: b - a}`` when over a nanosecond, and no overlaps): the same test as
        its first step, for the gaps in which the thread did nothing, most of them."""
        end = bisect.bisect_left(self.root_starts, b)
        return end == 0 or self.roots[end - 1].end <= a

    def attribute(self, a: float, b: float) -> tuple[dict[ParsedEvent | None, float], dict[ParsedEvent, float]]:
        """(innermost event -> time, top-level event -> overlap) within [a, b)."""
        inner: dict[ParsedEvent | None, float] = {}  # a dict's get(key, 0.0) + t: defaultdict(float)'s floats
        outer: dict[ParsedEvent, float] = {}
        starts_of = self._starts
        todo: list[tuple[ParsedEvent | None, list[ParsedEvent], float, float]] = [(None, self.roots, a, b)]
        while todo:
            owner, children, lo, hi = todo.pop()
            if not children:  # a leaf: all its time is its own ((hi - lo) - 0.0 == hi - lo)
                if hi - lo > 1e-9:
                    inner[owner] = inner.get(owner, 0.0) + (hi - lo)
                continue
            starts = starts_of.get(id(owner))
            if starts is None:
                starts = starts_of[id(owner)] = [c.ts for c in children]
            covered = 0.0
            cursor = lo
            # _overlapping(children, starts, lo, hi), inlined: this runs once or twice a gap
            end = bisect.bisect_left(starts, hi)
            first = end
            while first > 0 and children[first - 1].end > lo:
                first -= 1
            for c in children[first:end]:
                if c.end <= lo:
                    continue
                s, e = max(cursor, c.ts), min(hi, c.end)
                if e <= s:
                    continue
                if owner is None:
                    outer[c] = outer.get(c, 0.0) + (e - s)
                if c.is_kernel:
                    # A kernel overlapping a gap belongs to another timeline's union; count as itself.
                    inner[c] = inner.get(c, 0.0) + (e - s)
                else:
                    todo.append((c, c.children, s, e))
                covered += e - s
                cursor = e
            rest = (hi - lo) - covered
            if rest > 1e-9:
                inner[owner] = inner.get(owner, 0.0) + rest
        return inner, outer


def _python_frame(ev: ParsedEvent | None) -> str | None:
    while ev is not None:
        if ev.cat == "python_function":
            return ev.name
        ev = ev.parent
    return None


# --- Busy window -----------------------------------------------------------------------------------
WINDOW_STEPS = "steps"
WINDOW_KERNELS = "kernels"
WINDOW_EVENTS = "events"
WINDOW_BASES = {
    WINDOW_STEPS: "the recorded steps (first ProfilerStep#N start to last end, and any kernel running past them)",
    WINDOW_KERNELS: "the device work (first kernel start to last kernel end)",
    WINDOW_EVENTS: "every event (no kernel in the trace)",
}
"""What a summary's window (the denominator of busy and idle) spans, by :attr:`BusyWindow.basis`:
host-only time before the first or after the last step or kernel (profiler start-up, data loading
before the loop, a script's tail) is not device idle time."""


@dataclass(frozen=True)
class BusyWindow:
    """The trace's time window (:data:`WINDOW_BASES`) and its kernels' union."""

    start: float
    end: float
    merged: list[tuple[float, float, ParsedEvent, ParsedEvent]]
    """Busy spans, as :func:`_merge` returns them."""
    busy: float
    basis: str = WINDOW_EVENTS
    """Which span the window is: a key of :data:`WINDOW_BASES`."""

    @property
    def wall(self) -> float:
        return self.end - self.start

    @property
    def idle(self) -> float:
        return max(0.0, self.wall - self.busy)


def busy_window(events: list[ParsedEvent], kernels: list[ParsedEvent], steps: list[ParsedEvent] | None = None) -> BusyWindow:
    """:func:`window_of` a trace's ``ProfilerStep#N`` ranges (:func:`profiler_steps` of ``steps``,
    default ``events``), ``kernels``, and the span of ``events``."""
    if events:
        w0 = min(e.ts for e in events)
        w1 = max(e.end for e in events)
    else:
        w0 = w1 = 0.0
    return window_of(w0, w1, kernels, profiler_steps(events if steps is None else steps))


def window_of(first: float, last: float, kernels: list[ParsedEvent], steps: list[ParsedEvent] = ()) -> BusyWindow:
    """The window (:data:`WINDOW_BASES`) of a trace whose events span [first, last), with these
    ``ProfilerStep#N`` ranges (``steps``: :func:`profiler_steps`) and ``kernels``, and the time at least one kernel runs:
    the steps, widened to the kernels that run outside them (a step's last kernels end after its
    host range); without steps, first kernel start to last kernel end; without kernels, every event."""
    merged, busy = _merge(kernels)
    if steps:
        start, end = min(st.ts for st in steps), max(st.end for st in steps)
        if merged:
            start, end = min(start, merged[0][0]), max(end, max(e for _, e, _, _ in merged))
        return BusyWindow(start, end, merged, busy, WINDOW_STEPS)
    if merged:
        return BusyWindow(merged[0][0], max(e for _, e, _, _ in merged), merged, busy, WINDOW_KERNELS)
    return BusyWindow(first, last, merged, busy, WINDOW_EVENTS)


def launching_threads(tk: TraceKernels) -> tuple[dict[int, tuple[Any, Any] | None], bool]:
    """The (pid, tid) that launched each kernel, by ``id`` of the kernel: its own thread on CPU, the
    runtime call's thread (joined by correlation id) on GPU. Also whether the trace replays CUDA graphs,
    whose per-kernel launches are hidden."""
    launcher: dict[int, tuple[Any, Any] | None] = {}
    graph_launches = False
    if tk.definition == DEF_GPU:
        by_corr: dict[Any, tuple[Any, Any]] = {}
        for e in tk.host_events:
            corr = e.args.get("correlation")
            if corr is not None and evs.is_runtime(e.cat):
                by_corr[_hashable(corr)] = (e.pid, e.tid)
            if "GraphLaunch" in e.name and evs.replays_cuda_graph(e.cat, e.name):
                graph_launches = True
        for k in tk.kernels:
            launcher[id(k)] = by_corr.get(_hashable(k.args.get("correlation")))
    else:
        for k in tk.kernels:
            launcher[id(k)] = (k.pid, k.tid)
    return launcher, graph_launches


# --- Gaps and idle time by host activity --------------------------------------------------------------
_Gap = tuple[float, float, str, ParsedEvent | None, ParsedEvent | None]
"""(start, end, position, kernel before, kernel after)."""


def _gap_spans(window: BusyWindow, definition: str) -> Iterator[_Gap]:
    merged, w0, w1 = window.merged, window.start, window.end
    if merged:
        if merged[0][0] > w0:
            yield (w0, merged[0][0], "leading", None, merged[0][2])
        for j in range(1, len(merged)):
            yield (merged[j - 1][1], merged[j][0], "between", merged[j - 1][3], merged[j][2])
        if w1 > merged[-1][1]:
            yield (merged[-1][1], w1, "trailing", merged[-1][3], None)
    elif window.wall > 0 and definition != DEF_NONE:
        yield (w0, w1, "leading", None, None)


@dataclass
class _HostIdle:
    """Running idle time of one host activity, and the Python frames around it."""

    time: float = 0.0
    gaps: int = 0
    frames: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))

    def add(self, t: float, frame: str | None) -> None:
        self.time += t
        self.gaps += 1
        if frame:
            self.frames[frame] += t


class _IdleByHost:
    """The idle time by innermost host activity, summed gap by gap. What an event adds to is looked
    up once per event: the gaps of a trace fall, again and again, in the same few host events."""

    def __init__(self, frames: bool) -> None:
        self.rows: dict[str, _HostIdle] = {}
        self.frames = frames
        self.known: dict[ParsedEvent | None, tuple[_HostIdle, str | None]] = {}
        """Each innermost event seen -> :meth:`of` it."""

    def host(self, name: str) -> _HostIdle:
        acc = self.rows.get(name)
        if acc is None:
            acc = self.rows[name] = _HostIdle()
        return acc

    def of(self, ev: ParsedEvent | None) -> tuple[_HostIdle, str | None]:
        """The row an innermost event's idle time adds to, and its Python frame (looked up once)."""
        got = self.known.get(ev)
        if got is None:
            got = self.known[ev] = (self.host(ev.name if ev is not None else evs.NO_HOST_EVENT),
                                    _python_frame(ev) if self.frames else None)
        return got


_UNSEEN = object()
_OUTSIDE: Any = object()
"""A gap's attribution when it is outside every event of its thread (:meth:`_Attributor.outside`),
until a row needs it as dicts."""


class IdleTables(NamedTuple):
    """What :func:`idle_tables` finds: the gap rows, how many gaps there are, the idle time by host activity."""

    gaps: list[GapRow]
    gap_count: int
    idle_by_host: list[IdleRow]


def idle_tables(tk: TraceKernels, window: BusyWindow, launcher: dict[int, tuple[Any, Any] | None],
                top: int | None = None, light: bool = False,
                after: list[ParsedEvent | None] | None = None) -> IdleTables:
    """The ``top`` longest gaps (all without ``top``), how many gaps there are, and the idle time by
    innermost host activity (most first). Only the ``top`` gaps become rows (a bounded heap): a
    trace has a gap between almost every two kernels. ``light`` (:mod:`inductor_perf.summary.light`): no gap
    rows and no Python frame per activity (``source`` None), the same idle times.

    ``after`` (a list, filled here): the kernel after each gap row, in the rows' order, and a row's
    ``source`` is its Python frame alone (None without one), not yet the next kernel's source line
    (:func:`with_next_sources` adds it): for a process that attributes the idle time before the
    kernels' costs, hence their source lines, are known (:mod:`inductor_perf.summary.stream.finish`)."""
    attributors: dict[tuple[Any, Any] | None, Any] = {}
    heap: list[tuple[float, float, int, GapRow, Any]] = []  # (-(-dur), -start, -seq, row, next kernel): worst on top
    count = 0
    idle = _IdleByHost(not light)
    known = idle.known.get
    nothing: _HostIdle | None = None  # the row of a thread outside its events: (no host event)
    roots, w0 = tk.roots, window.start
    for s, e, position, prev_k, next_k in _gap_spans(window, tk.definition):
        ref = next_k if next_k is not None else prev_k
        thread = launcher.get(id(ref)) if ref is not None else None
        inner = outer = None
        att = attributors.get(thread, _UNSEEN)
        if att is _UNSEEN:  # each thread looked up once (None: no host events)
            att = attributors[thread] = (_Attributor(roots[thread]) if thread is not None and thread in roots
                                         else None)
        if att is not None and att.outside(s, e):  # the thread was idle too: no dicts for the usual gap
            if e - s > 1e-9:
                if nothing is None:
                    nothing = idle.of(None)[0]
                nothing.time += e - s
                nothing.gaps += 1
            inner = outer = _OUTSIDE
        elif att is not None:
            inner, outer = att.attribute(s, e)
            for ev, t in inner.items():  # _HostIdle.add of each event's row, inlined
                got = known(ev)
                acc, frame = got if got is not None else idle.of(ev)
                acc.time += t
                acc.gaps += 1
                if frame:
                    acc.frames[frame] += t
        else:
            idle.host(evs.LAUNCHER_UNKNOWN).add(e - s, None)
        if light:
            count += 1
            continue
        dur_r = round(e - s, 3)  # rounded(), inlined: once a gap
        full = top is not None and len(heap) >= top
        if full and dur_r < heap[0][0]:  # shorter than every row kept: its key is below them all
            count += 1
            continue
        start_r = round(s - w0, 3)
        key = (dur_r, -start_r, -count)  # the row sorted last: shortest, then latest, then last seen
        count += 1
        if full and key <= heap[0][:3]:
            continue
        if inner is _OUTSIDE:  # what attribute() gives for such a gap
            inner, outer = ({None: e - s} if e - s > 1e-9 else {}), {}
        row = _gap_row(start_r, dur_r, position, prev_k, next_k, inner, outer, after is None)
        if top is None or len(heap) < top:
            heapq.heappush(heap, (*key, row, next_k))
        else:
            heapq.heapreplace(heap, (*key, row, next_k))
    ranked = sorted(heap, key=lambda item: item[:3], reverse=True)
    gap_rows = [item[3] for item in ranked]
    if after is not None:
        after.extend(item[4] for item in ranked)
    idle_rows = [IdleRow(host=h, idle_us=rounded(v.time), gaps=v.gaps, share_of_idle_pct=percent(v.time, window.idle),
                         source=_dominant(v.frames))
                 for h, v in idle.rows.items()]
    idle_rows.sort(key=lambda r: (-r.idle_us, r.host))
    return IdleTables(gap_rows, count, idle_rows)


def _gap_row(start_r: float, dur_r: float, position: str, prev_k: ParsedEvent | None, next_k: ParsedEvent | None,
             inner: dict[ParsedEvent | None, float] | None, outer: dict[ParsedEvent, float] | None,
             next_source: bool = True) -> GapRow:
    """The row of a gap whose time :meth:`_Attributor.attribute` split into ``inner`` and ``outer``
    (None: the launching thread is unknown). ``next_source`` False: without the next kernel's source
    line (:func:`with_next_sources`)."""
    inner_name = outer_name = frame = None
    if inner is not None and outer is not None:
        dom = _dominant(inner)
        inner_name = dom.name if dom is not None else evs.NO_HOST_EVENT
        dom_outer = _dominant(outer)
        outer_name = dom_outer.name if dom_outer is not None else None
        frame = _python_frame(dom)
    next_src = next_k.args.get(evs.SOURCE) if next_k is not None and next_source else None
    return GapRow(
        start_us=start_r, dur_us=dur_r, position=position,
        prev_kernel=prev_k.name if prev_k is not None else None,
        next_kernel=next_k.name if next_k is not None else None,
        host_innermost=inner_name, host_outermost=outer_name,
        source=frame or (next_src if isinstance(next_src, str) and next_src else None))


def with_next_sources(rows: list[GapRow], after: list[ParsedEvent | None]) -> list[GapRow]:
    """The gap rows of ``idle_tables(..., after=after)`` given, where they have no Python frame, the
    source line of the kernel after them, as ``idle_tables`` without ``after`` gives them."""
    for row, next_k in zip(rows, after):
        if row.source is None and next_k is not None:
            src = next_k.args.get(evs.SOURCE)
            row.source = src if isinstance(src, str) and src else None
    return rows
