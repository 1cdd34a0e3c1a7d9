"""The recorded window of a capture's raw trace: its ``ProfilerStep#N`` ranges made whole, what lies
outside them dropped, and the threads that ran compiled graphs without being recorded.

A capture (:mod:`inductor_perf.capture.session`) runs the profiler a little longer than the steps it
records: the env-var session starts it one step early, so that the profiler's own start-up (the
first ops it sees run several times slower) lands in a step that is dropped, and it turns
collection off at the call that begins the step after the last, inside that compiled call. So
:func:`shape_window`:

- drops the last ``ProfilerStep#N`` range when it is a partial step (``drop_partial``: what an
  explicit ``profile()`` block ran after its last ``p.step()``; the block's events all stay);
- with ``align_to_calls`` (the env-var session's steps, whose boundaries are marked inside compiled
  calls), moves each boundary back to the start of the outermost range that encloses it on that
  thread (``Torch-Compiled Region``, or the user's own range around the call): every
  ``ProfilerStep#N`` then runs from the start of one call of the root frame to the start of the
  next, and nests cleanly with the calls' ranges. Then it drops the host events not inside [first
  step's start, last step's end] (the warm-up step, and the ranges of the next step's call that
  were open when collection went off; a range of another thread needs only to start inside the
  window), the device events those dropped events launched, and flows,
  counters and instants outside the window. Kineto's own ``Trace`` span (``PyTorch Profiler (0)``,
  ignored by the summaries) keeps the profiler's whole run, warm-up included.

:func:`unrecorded_threads` names the threads that ran compiled graphs during the capture but have no
graph-call marker in the trace (torch.profiler records only the thread that started it, and the
tasks that thread hands to others). Pure and torch-free: trace dicts in, trace dicts out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..model import events as evs
from ..model.markers import MARKER_PREFIX

STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")
_TRACE_CAT = "trace"  # Kineto's own span of the profiler's run (summaries ignore it)


@dataclass
class WindowShape:
    """What :func:`shape_window` did: the window kept and what it dropped."""

    steps: int = 0
    """``ProfilerStep#N`` ranges left in the trace."""
    start_us: float | None = None
    end_us: float | None = None
    dropped_events: int = 0
    partial_dropped: bool = False
    moved_boundaries: list[float] = field(default_factory=list)
    """How far (µs) each boundary moved back to the start of the call it was marked in."""


def _is_step(e: Any) -> bool:
    return (isinstance(e, dict) and e.get("ph") == "X" and isinstance(e.get("name"), str)
            and STEP_NAME.match(e["name"]) is not None and not evs.is_device_side(e.get("cat")))


def _span(e: dict) -> tuple[float, float] | None:
    ts, dur = evs.number(e.get("ts")), evs.number(e.get("dur"))
    if ts is None:
        return None
    return ts, ts + (dur if dur is not None and dur > 0 else 0.0)


def _host_ranges(events: list[Any], thread: tuple[Any, Any]) -> list[tuple[float, float, bool]]:
    """(start, end, is a graph-call marker) of the host ranges on ``thread``, step ranges left out."""
    out = []
    for e in events:
        if (isinstance(e, dict) and e.get("ph") == "X" and (e.get("pid"), e.get("tid")) == thread
                and not _is_step(e) and not evs.is_device_side(e.get("cat"))):
            span = _span(e)
            if span is not None:
                out.append((span[0], span[1], str(e.get("name", "")).startswith(MARKER_PREFIX)))
    return out


def _outermost_start(ranges: list[tuple[float, float, bool]], point: float, after: float) -> float:
    """The start of the outermost range that is open at ``point`` and began after ``after`` and after
    the last graph call that ended before ``point`` (a range opened before that call is no part of
    the call that begins this step, like a user's range around several steps); ``point`` itself
    when there is none."""
    after = max([after] + [end for _, end, marker in ranges if marker and end <= point])
    starts = [start for start, end, _ in ranges if after < start < point < end]
    return min(starts, default=point)


def _ns_apart(start: float, end: float) -> float:
    """A duration for a range from ``start`` to ``end`` (µs) that no reader sees past ``end``. Kineto's
    timestamps are whole ns written as µs with 3 decimals, and near 5e12 µs a float is ~0.001 µs
    coarse, so ``round(end - start, 3)`` can be 1 ns long (...618.637 to ...992.526 gives 1373.89,
    not 1373.889): the step would end 1 ns into the next one's first range, a crossing for a reader
    that counts in ns (Perfetto). The difference in whole ns is exact there, but in floats
    ``start + it`` can still pass ``end`` by an ulp (a reader that adds floats, as ours and pandas
    do, would nest the next step in this one); then the range ends 1 ns earlier."""
    ns = round(end * 1000) - round(start * 1000)
    return ns / 1000 if start + ns / 1000 <= end else (ns - 1) / 1000


def shape_window(trace: dict, *, align_to_calls: bool, drop_partial: bool) -> WindowShape:
    """Make ``trace``'s ``ProfilerStep#N`` ranges the recorded window, in place (see the module
    docstring): with ``align_to_calls`` (the env-var session, whose step boundaries are marked inside
    compiled calls) move the boundaries to the calls' starts and drop what lies outside the steps;
    with ``drop_partial``, first drop the last step range (a partial step). Without step ranges
    (after ``drop_partial``) nothing else changes."""
    events = trace.get("traceEvents")
    if not isinstance(events, list):
        return WindowShape()
    steps = sorted((e for e in events if _is_step(e)), key=lambda e: int(STEP_NAME.match(e["name"]).group(1)))
    shape = WindowShape()
    if drop_partial and steps:
        last = steps.pop()
        events[:] = [e for e in events if not (isinstance(e, dict) and e.get("name") == last["name"])]
        shape.partial_dropped = True
    shape.steps = len(steps)
    if not steps or not align_to_calls:
        return shape
    spans = [_span(e) or (0.0, 0.0) for e in steps]
    raw = [s for s, _ in spans] + [spans[-1][1]]
    bounds = list(raw)
    ranges = _host_ranges(events, (steps[0].get("pid"), steps[0].get("tid")))
    for i, point in enumerate(raw):
        bounds[i] = _outermost_start(ranges, point, raw[i - 1] if i else float("-inf"))
        shape.moved_boundaries.append(round(point - bounds[i], 3))
    for i, e in enumerate(steps):
        e["ts"], e["dur"] = bounds[i], _ns_apart(bounds[i], bounds[i + 1])
    # ts + dur of the last step never passes bounds[-1] (_ns_apart), so no step lies "outside".
    shape.start_us, shape.end_us = bounds[0], bounds[-1]
    before = len(events)
    events[:] = _inside(events, shape.start_us, shape.end_us, (steps[0].get("pid"), steps[0].get("tid")))
    shape.dropped_events = before - len(events)
    return shape


def _inside(events: list[Any], start: float, end: float, step_thread: tuple[Any, Any]) -> list[Any]:
    """The events of the window [start, end]: the host ranges of the steps' thread wholly inside it,
    those of other threads that start inside it, the device events that kept host events launched
    (by ``correlation``; by time when none says), flows, counters and instants that fall in it;
    metadata and Kineto's ``Trace`` span always.

    Another thread's range may end after the window: gloo completes a collective's future before it
    closes its ``gloo:<collective>`` range, so the step's thread can be in the next call while the
    range of the last step's all-reduce is still open (seen on a loaded machine: the rank then had no
    collective at all). Ranges of the next step's work on other threads start after the window's end."""
    kept_corr: set[Any] = set()
    dropped_corr: set[Any] = set()
    host: list[tuple[int, bool]] = []
    for i, e in enumerate(events):
        if (not isinstance(e, dict) or e.get("ph") != "X" or evs.is_device_side(e.get("cat"))
                or evs.category(e) == _TRACE_CAT):
            continue
        span = _span(e)
        keep = span is not None and start <= span[0] and (
            span[1] <= end if (e.get("pid"), e.get("tid")) == step_thread else span[0] < end)
        host.append((i, keep))
        corr = evs.event_args(e).get("correlation")
        if corr is not None and not isinstance(corr, (dict, list)):
            (kept_corr if keep else dropped_corr).add(corr)
    keep_host = dict(host)
    out = []
    for i, e in enumerate(events):
        if i in keep_host:
            if keep_host[i]:
                out.append(e)
            continue
        if not isinstance(e, dict) or e.get("ph") == "M" or evs.category(e) == _TRACE_CAT:
            out.append(e)
            continue
        corr = evs.event_args(e).get("correlation") if e.get("ph") == "X" else (
            e.get("id") if evs.category(e) in evs.FLOW_CATS else None)
        if corr is not None and not isinstance(corr, (dict, list)) and (corr in kept_corr or corr in dropped_corr):
            if corr in kept_corr:
                out.append(e)
            continue
        ts = evs.number(e.get("ts"))
        if ts is not None and start <= ts <= end:
            out.append(e)
    return out


def marker_threads(trace: dict) -> set[Any]:
    """The tids of host threads with a graph-call marker (``## inductor_perf graph=``) in ``trace``."""
    out = set()
    for e in trace.get("traceEvents") or ():
        if isinstance(e, dict) and isinstance(e.get("name"), str) and e["name"].startswith(MARKER_PREFIX) \
                and not evs.is_device_side(e.get("cat")):
            out.add(e.get("tid"))
    return out


def unrecorded_threads(recorded: set[Any], seen: Mapping[int, str], owner: tuple[int, str] | None) -> str | None:
    """One line naming the threads of ``seen`` (native thread id -> name: those that ran compiled
    graphs during the capture) that are not in ``recorded`` (:func:`marker_threads` of the trace);
    None when every one is. ``owner``: (native id, name) of the thread that started the profiler."""
    lost = [(tid, name) for tid, name in sorted(seen.items()) if tid not in recorded]
    if not lost:
        return None
    names = ", ".join(f"'{name}' (tid {tid})" for tid, name in lost)
    who = f"thread '{owner[1]}' (tid {owner[0]})" if owner else "the thread that started it"
    return (f"compiled graphs ran on thread{'s' if len(lost) > 1 else ''} {names} during the capture, "
            f"but the profiler records only {who} and the work it hands to other threads: "
            f"{'their' if len(lost) > 1 else 'its'} graph calls are not in this trace; open the capture "
            "in the thread that runs the model (one at a time), or run one model per process")
