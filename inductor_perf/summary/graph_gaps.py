"""The time between compiled pieces inside each step: what a graph break costs while the model runs.

A graph break splits a model into several compiled graphs with eager Python, eager ops and Dynamo's
guard checks between them. Each call of a compiled graph is one of our markers
(``## inductor_perf graph=N fwd ##``, :mod:`inductor_perf.model.markers`). Within each
``ProfilerStep#N`` range, per thread and direction (forward, backward), the calls are taken in time
order and every positive gap from one call's end to the next call's start counts; time before the
first call and after the last (the loss, the optimizer, the data) does not. Calls nested in another
call are skipped.

The profiler's own cost inflates a gap: each range it records there (Dynamo's cache lookup, the
eager ops, AOTAutograd's wrappers) costs about a microsecond more than unprofiled. So the events
that begin inside the gaps are counted, and the cost of recording one range is read off the trace:
the median time from the start of Inductor's ``## Call CompiledFxGraph`` range to the start of our
marker right inside it, which holds nothing but the recording of a range and one Python call.
Both summary engines feed it: :func:`graph_gaps` from a loaded trace's host events,
:func:`graph_gaps_of_columns` from the streaming pass's per-thread columns. Pure and torch-free.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from ..model.markers import MARKER_PREFIX, parse_marker
from .kernels import GRAPH_CALL_PREFIX
from .rows import rounded
from .steps import median


@dataclass
class GraphGaps:
    """The gaps between compiled pieces, per step, over the steps that ran compiled graphs: times are
    medians over those steps (as every step time we print, robust to a step slowed by the machine),
    counts are means."""

    steps: int
    """Steps with at least one compiled-graph call inside."""
    calls_per_step: float
    """Compiled-graph calls (forward and backward) per step."""
    gaps_per_step: float
    """Gaps counted per step (one fewer than the calls of each thread and direction, at most)."""
    gap_us_per_step: float
    """The median of each step's total gap time (µs); the medians of its forward and backward parts
    follow, which need not add up to it."""
    fwd_gap_us_per_step: float
    bwd_gap_us_per_step: float
    events_in_gaps_per_step: float | None = None
    """Host events (profiler ranges) that begin inside the gaps, per step; None when not counted."""
    record_cost_us: float | None = None
    """The profiler's cost of recording one range, read off the trace (see above); None when the
    trace has no marker inside a ``## Call CompiledFxGraph`` range."""


Call = tuple[float, float, Any, bool]
"""(start, end, thread, is_backward) of one compiled-graph call."""


def gaps_in_steps(steps: Iterable[tuple[float, float]], calls: Iterable[Call],
                  starts: Mapping[Any, Sequence[float]] | None = None, offsets: Iterable[float] = ()) -> GraphGaps | None:
    """:class:`GraphGaps` of ``calls`` within the ``steps`` ((start, end) each); None when no step
    holds a call. ``starts``: each thread's host event starts, any order (to count those inside the
    gaps); ``offsets``: each marker's start less that of the ``## Call CompiledFxGraph`` around it.

    >>> g = gaps_in_steps([(0, 100)], [(10, 30, 1, False), (50, 70, 1, False)])
    >>> g.gap_us_per_step, g.calls_per_step
    (20.0, 2.0)
    """
    spans = sorted(steps)
    ordered = sorted(calls, key=lambda c: (c[0], -c[1]))
    n_steps = n_calls = n_gaps = 0
    per_step: list[list[float]] = []  # (forward, backward) gap time of each step
    spans_of: dict[Any, list[tuple[float, float]]] = defaultdict(list)
    i = 0
    for a, b in spans:
        while i < len(ordered) and ordered[i][0] < a:
            i += 1
        inside: dict[tuple[Any, bool], list[tuple[float, float]]] = defaultdict(list)
        j = i
        while j < len(ordered) and ordered[j][0] < b:
            s, e, thread, bwd = ordered[j]
            if e <= b:
                inside[(thread, bwd)].append((s, e))
            j += 1
        if not inside:
            continue
        n_steps += 1
        gap = [0.0, 0.0]
        per_step.append(gap)
        for (thread, bwd), seq in inside.items():
            end = None
            for s, e in seq:  # by start; a call inside the one before (nested) is skipped
                if end is not None and e <= end:
                    continue
                n_calls += 1
                if end is not None and s > end:
                    gap[bwd] += s - end
                    n_gaps += 1
                    spans_of[thread].append((end, s))
                end = e if end is None else max(end, e)
    if not n_steps:
        return None
    inside_gaps = None if starts is None else sum(_count_inside(spans, starts.get(t, ())) for t, spans in spans_of.items())
    return GraphGaps(steps=n_steps, calls_per_step=rounded(n_calls / n_steps), gaps_per_step=rounded(n_gaps / n_steps),
                     gap_us_per_step=rounded(median(f + b for f, b in per_step)),
                     fwd_gap_us_per_step=rounded(median(f for f, _ in per_step)),
                     bwd_gap_us_per_step=rounded(median(b for _, b in per_step)),
                     events_in_gaps_per_step=None if inside_gaps is None else rounded(inside_gaps / n_steps),
                     record_cost_us=rounded(median(o for o in offsets if o >= 0)))


def _count_inside(spans: list[tuple[float, float]], starts: Iterable[float]) -> int:
    """How many of ``starts`` lie strictly inside one of the (disjoint) ``spans``."""
    spans.sort()
    lo = [s for s, _ in spans]
    n = 0
    for t in starts:
        k = bisect.bisect_right(lo, t) - 1
        if k >= 0 and lo[k] < t < spans[k][1]:
            n += 1
    return n


def graph_gaps(steps: list[Any], host_events: Iterable[Any]) -> GraphGaps | None:
    """:func:`gaps_in_steps` of a loaded trace: ``steps`` the ``ProfilerStep#N`` ranges
    (:func:`~inductor_perf.summary.steps.profiler_steps`), ``host_events`` its parsed host events."""
    calls, offsets = [], []
    starts: dict[Any, list[float]] = defaultdict(list)
    for e in host_events:
        starts[(e.pid, e.tid)].append(e.ts)
        if e.name.startswith(MARKER_PREFIX):
            parsed = parse_marker(e.name)
            if parsed is not None:
                calls.append((e.ts, e.end, (e.pid, e.tid), parsed[1]))
                parent = e.parent
                if parent is not None and parent.name.startswith(GRAPH_CALL_PREFIX):
                    offsets.append(e.ts - parent.ts)
    return gaps_in_steps([(s.ts, s.end) for s in steps], calls, starts, offsets) if calls else None


def graph_gaps_of_columns(steps: list[Any], names: Mapping[str, int],
                          cols: Mapping[Any, tuple[Any, ...]]) -> GraphGaps | None:
    """The same from the streaming summary's host events: ``names`` interned name -> id, ``cols``
    thread -> (starts, durations, name ids, category ids, ...) (``summary.stream.engine._Threads``)."""
    marker_ids, call_ids = {}, set()
    for name, i in names.items():
        if name.startswith(MARKER_PREFIX):
            parsed = parse_marker(name)
            if parsed is not None:
                marker_ids[i] = parsed[1]
        elif name.startswith(GRAPH_CALL_PREFIX):
            call_ids.add(i)
    if not marker_ids:
        return None
    calls, offsets = [], []
    for thread, (ts, dur, ids, *_) in cols.items():
        ranges = []
        for k, n in enumerate(ids):
            bwd = marker_ids.get(n)
            if bwd is not None:
                calls.append((ts[k], ts[k] + dur[k], thread, bwd))
            elif n in call_ids:
                ranges.append((ts[k], ts[k] + dur[k]))
        offsets += _offsets([c for c in calls if c[2] == thread], ranges)
    return gaps_in_steps([(s.ts, s.end) for s in steps], calls, {t: c[0] for t, c in cols.items()},
                         offsets) if calls else None


def _offsets(markers: list[Call], ranges: list[tuple[float, float]]) -> list[float]:
    """Each marker's start less that of the innermost ``## Call CompiledFxGraph`` range holding it
    (the latest one to start before it, as the forest of the full load makes it the parent)."""
    ranges.sort()
    lo = [s for s, _ in ranges]
    out = []
    for s, e, _, _ in markers:
        k = bisect.bisect_right(lo, s) - 1
        if k >= 0 and ranges[k][1] >= e:
            out.append(s - lo[k])
    return out
