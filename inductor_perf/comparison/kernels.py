"""What a comparison side reads of a trace besides cutting its units (:mod:`.units`): which events it
keeps (:class:`SideEvents`: host events, device events, launches; the autograd engine's threads),
which events are its kernels, which unit each kernel belongs to, and how much of the steps the units
(or kernels) cover.

- **Kernels** are what the summary counts as kernels (:func:`inductor_perf.summary.kernels.select_kernels`):
  the device events when the trace has any (kernels, memcpy, memset: ``gpu-kernels``), else the CPU
  kernels of compiled graphs (``cpu-compiled-kernels``), else the outermost aten ops
  (``cpu-eager-aten``). ``diff --by kernel`` keys its rows by them, never by CPU ops.
- **Whose kernel**: a CPU kernel is the unit's own event or nested in it, on its thread; a device event
  names the runtime call that launched it by ``correlation``, and that call sits on a CPU thread inside
  the unit that launched it (:class:`Places` finds the unit at a place on a thread); when the trace
  lacks that call, the op whose ``External id`` the device event carries is the place (as the cost
  join's :class:`~inductor_perf.costs.launch.LaunchIndex` does). A launch on a counted thread outside
  any unit (a CUDA graph replayed in a compiled graph's marker, an optimizer's kernels launched from
  its annotation) makes a kernel of the phase there.
- **Covered time**: units and kernels are clipped to the steps (a range the step marks cut in two
  counts on each side, time outside every step not at all), and the time they cover is the union of
  their intervals: ops of two threads (the autograd thread beside the main one) or kernels of two
  streams that run at once are each a row's time, but cover the step once. So a side's rows minus
  that overlap, plus what nothing covers (``(unattributed)``), is the measured step time, and
  ``(unattributed)`` is never negative.

Pure and torch-free: events and intervals in, numbers out.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Any, Generic, Iterable, Mapping, Sequence, TypeVar

from ..costs.launch import id_key
from ..model import events as evs

HOST_EVENT, DEVICE_EVENT, LAUNCH_EVENT, OTHER_EVENT = 1, 2, 3, 0
"""What a comparison side keeps of an event, by its category (:func:`category_kind`)."""
_HOST_CATS = evs.CPU_SCOPE_CATS | {"python_function"}
"""The categories units are cut from: ops and our ranges, plus Python frames, which are transparent
(their ops still count) but must nest like the rest."""
DEVICE_ARGS = ("correlation", "External id", evs.MODULE_PATH, evs.SOURCE, evs.EAGER_OPS, evs.KERNEL_FLOP,
               evs.ACHIEVED_FLOPS_PCT)
"""The only args of a device event a side reads: its launch, and what augmenting wrote on it."""

EVAL_FN = "autograd::engine::evaluate_function: "
"""The name prefix of the autograd engine's nodes (``...: AddmmBackward0``)."""

T = TypeVar("T")


def category_kind(cat: str) -> int:
    """:data:`HOST_EVENT` (units are cut from it), :data:`DEVICE_EVENT` (a kernel, memcpy or memset),
    :data:`LAUNCH_EVENT` (a runtime call: only its ``correlation`` and place are read) or
    :data:`OTHER_EVENT`.

    >>> [category_kind(c) for c in ("cpu_op", "Kernel", "cuda_driver", "gpu_user_annotation")]
    [1, 2, 3, 0]
    """
    c = cat.lower()
    if c in _HOST_CATS:
        return HOST_EVENT
    if c in evs.DEVICE_CATS:
        return DEVICE_EVENT
    return LAUNCH_EVENT if c in evs.RUNTIME_CATS else OTHER_EVENT


def correlation_key(corr: Any) -> Any:
    """The key a launch and its device events are matched on (the cost join's, ``costs.launch.id_key``)."""
    return id_key(corr)


def cpu_kernels(threads: dict[tuple[Any, Any], list[tuple[dict, float, float]]]
                ) -> list[tuple[tuple[Any, Any], dict, float, float]]:
    """The CPU kernels among the host events of ``threads`` ((pid, tid) -> (event, ts, dur)), as the
    summary chooses them (:func:`inductor_perf.summary.kernels.select_kernels` of a trace without
    device events): ``(thread, event, ts, dur)`` each, the event's args as the summary reads them (an
    outermost eager op with the summed costs of the costed ops inside it)."""
    from ..summary.kernels import ParsedEvent, select_kernels

    parsed: list[ParsedEvent] = []
    source: dict[int, tuple[tuple[Any, Any], dict]] = {}
    for key, items in threads.items():
        for ev, ts, dur in items:
            if dur > 0:  # the summary's reading: an event without a duration is no kernel
                e = ParsedEvent(ev["name"], ev.get("cat") or "", key[0], key[1], ts, dur, evs.event_args(ev))
                source[id(e)] = (key, ev)
                parsed.append(e)
    # a kernel's args as the summary reads them: an eager op carries the costs of the ops inside it
    return [(source[id(k)][0], {**source[id(k)][1], "args": k.args}, k.ts, k.dur)
            for k in select_kernels(parsed).kernels]


class Places(Generic[T]):
    """The items (units) of each thread by their intervals, to find the one at a place: the last
    one starting at or before it that has not ended (units of a thread do not nest)."""

    def __init__(self) -> None:
        self._items: dict[tuple[Any, Any], list[tuple[float, float, T]]] = {}
        self._starts: dict[tuple[Any, Any], list[float]] = {}

    def add(self, thread: tuple[Any, Any], ts: float, dur: float, item: T) -> None:
        self._items.setdefault(thread, []).append((ts, ts + max(dur, 0.0), item))

    def freeze(self) -> "Places[T]":
        for key, items in self._items.items():
            items.sort(key=lambda x: (x[0], -x[1]))
            self._starts[key] = [x[0] for x in items]
        return self

    def at(self, thread: tuple[Any, Any], t: float) -> T | None:
        """The item on ``thread`` whose interval holds ``t`` (its end excluded, but an item without
        a duration holds its own start), or None."""
        starts = self._starts.get(thread)
        if not starts:
            return None
        k = bisect.bisect_right(starts, t) - 1
        if k < 0:
            return None
        ts, end, item = self._items[thread][k]
        return item if t < end or t == ts else None


def merge(windows: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """``windows`` as sorted, disjoint intervals (their union). Windows that only touch stay apart:
    steps one after the other keep their own windows, so the time covered in each is at most its
    length, exactly, also in floats (:func:`clip`).

    >>> merge([(5.0, 8.0), (0.0, 2.0), (1.0, 3.0), (3.0, 4.0)])
    [(0.0, 3.0), (3.0, 4.0), (5.0, 8.0)]
    """
    out: list[tuple[float, float]] = []
    for a, b in sorted(windows):
        if out and a < out[-1][1]:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def clip(intervals: Sequence[tuple[float, float]], windows: Sequence[tuple[float, float]]
         ) -> tuple[list[float | None], float]:
    """Each interval ``(ts, dur)``'s time inside ``windows`` (sorted, disjoint: :func:`merge`), None
    when it has none (a zero-length interval inside a window has 0.0), and the time all of them
    cover together (their union inside the windows).

    >>> clip([(0.0, 10.0), (5.0, 10.0), (30.0, 5.0)], [(2.0, 20.0)])
    ([8.0, 10.0, None], 13.0)
    """
    starts = [a for a, _ in windows]
    inside: list[float | None] = []
    pieces: list[tuple[float, float]] = []
    for ts, dur in intervals:
        end = ts + dur
        k = max(bisect.bisect_right(starts, ts) - 1, 0)
        got: float | None = None
        while k < len(windows) and windows[k][0] <= end:
            a, b = windows[k]
            lo, hi = max(ts, a), min(end, b)
            if hi > lo:
                got = (got or 0.0) + (hi - lo)
                pieces.append((lo, hi))
            elif dur <= 0 and a <= ts < b and got is None:
                got = 0.0
            k += 1
        inside.append(got)
    covered = 0.0
    for (a, b), inside_window in zip(windows, _per_window(merge(pieces), starts)):
        # the union inside one window is at most the window (float sums of its parts may pass it by
        # an ulp or so: held to it, so that the time nothing covers is never below zero)
        covered += min(inside_window, b - a)
    return inside, covered


def _per_window(union: list[tuple[float, float]], starts: list[float]) -> list[float]:
    """The measure of ``union`` (disjoint pieces, each inside one window) inside each window (by
    the windows' ``starts``)."""
    covered = [0.0] * len(starts)
    for lo, hi in union:
        covered[max(bisect.bisect_right(starts, lo) - 1, 0)] += hi - lo
    return covered


PEAK_ARG = "(peak_tflops)"
"""A private arg of a device event a streamed side costed itself: the peak its achieved % is measured
against (that side writes no achieved % per event: :func:`kernel_cost` computes it)."""


def kernel_cost(args: dict, dur: float) -> tuple[float | None, float | None]:
    """(``kernel_flop``, ``achieved_flops_pct``) of an event of ``args`` and ``dur``: the args', or
    the achieved % from :data:`PEAK_ARG` with :func:`roofline.point.classify`'s arithmetic (so a streamed
    side gives what augmenting writes).

    >>> kernel_cost({"kernel_flop": 2e9, PEAK_ARG: 100.0}, 40.0)
    (2000000000.0, 50.0)
    """
    flops = evs.number(args.get(evs.KERNEL_FLOP))
    pct = evs.number(args.get(evs.ACHIEVED_FLOPS_PCT))
    if pct is None and flops is not None and PEAK_ARG in args and dur > 0:
        achieved = evs.number(flops / dur / 1e6)  # FLOP/µs -> TFLOP/s
        pct = evs.number(100.0 * achieved / args[PEAK_ARG]) if achieved is not None else None
    return flops, pct


def combine_costs(parts: Iterable[tuple[float | None, float | None]]) -> tuple[float | None, float | None]:
    """(FLOPs, achieved % of peak) of several costed events (``(kernel_flop, achieved_flops_pct)``
    each): the FLOPs summed (None when none is known) and the FLOP-weighted peak share, their FLOPs
    over the time they would take at 100 % (None unless every event with FLOPs has a share).

    >>> combine_costs([(1000.0, 10.0), (3000.0, 30.0), (0.0, 0.0), (None, None)])
    (4000.0, 20.0)
    """
    flops: float | None = None
    den = 0.0
    shares = True
    for f, pct in parts:
        if f is None:
            continue
        flops = (flops or 0.0) + f
        if f > 0:
            if pct is not None and pct > 0:
                den += f / pct
            else:
                shares = False
    pct_all = flops / den if flops and shares and den > 0 else None
    return flops, pct_all


def ops_by_external_id(ops: Iterable[tuple[Any, Any, Any, float]]) -> dict[Any, tuple[Any, Any, float]]:
    """The place (pid, tid, ts) of each CPU op by its ``External id`` (``(ext, pid, tid, ts)`` in
    file order); an id two ops carry names neither (the cost join's rule for duplicates)."""
    out: dict[Any, tuple[Any, Any, float]] = {}
    dup: set[Any] = set()
    for ext, pid, tid, ts in ops:
        k = id_key(ext)
        if k in out or k in dup:
            dup.add(k)
            out.pop(k, None)
        else:
            out[k] = (pid, tid, ts)
    return out


Device = tuple[int, str, float, float, Any, Any, dict]
"""A device event as a side keeps it: (index, name, ts, dur, correlation, External id, its args)."""


class SideEvents:
    """A trace's complete events as a side reads them: the named host events of each (pid, tid), each
    one's index in the trace (by ``id``, when asked), the device events (a name and a duration) and
    the place (pid, tid, ts) of each launch, by correlation (a later launch of one correlation wins,
    as in the cost join)."""

    def __init__(self, events: Iterable[tuple[int, dict, float, float]], with_index: bool = True) -> None:
        self.by_thread: dict[tuple[Any, Any], list[tuple[dict, float, float]]] = defaultdict(list)
        self.index_of: dict[int, int] = {}
        self.device: list[Device] = []
        self.launches: dict[Any, tuple[Any, Any, float]] = {}
        self.op_exts: list[tuple[Any, Any, Any, float]] = []
        """(External id, pid, tid, ts) of each CPU op that carries one (:func:`ops_by_external_id`)."""
        kinds: dict[Any, int] = {}  # category -> what is read of it (category_kind, once per category)
        for i, ev, ts, dur in events:
            cat = ev.get("cat")
            if not isinstance(cat, str):
                continue
            kind = kinds.get(cat)
            if kind is None:
                kind = kinds[cat] = category_kind(cat)
            if kind == HOST_EVENT:
                if not isinstance(ev.get("name"), str):
                    continue
                if with_index:
                    self.index_of[id(ev)] = i
                self.by_thread[(ev.get("pid"), ev.get("tid"))].append((ev, ts, dur))
                ext = evs.event_args(ev).get("External id")
                if ext is not None and cat.lower() in evs.CPU_OP_CATS:
                    self.op_exts.append((ext, ev.get("pid"), ev.get("tid"), ts))
            elif kind == DEVICE_EVENT:
                if isinstance(ev.get("name"), str) and dur > 0:
                    args = evs.event_args(ev)
                    self.device.append((i, ev["name"], ts, dur, args.get("correlation"), args.get("External id"),
                                        args))
            elif kind == LAUNCH_EVENT:
                corr = evs.event_args(ev).get("correlation")
                if corr is not None:
                    self.launches[correlation_key(corr)] = (ev.get("pid"), ev.get("tid"), ts)


def autograd_threads(by_thread: Mapping[tuple[Any, Any], list[tuple[dict, float, float]]],
                     step_threads: set[tuple[Any, Any]]) -> set[tuple[Any, Any]]:
    """The threads, of a process that has step threads, where the autograd engine ran backward ops
    (``autograd::engine::evaluate_function: ...``) and that mark no step themselves."""
    pids = {p for p, _ in step_threads}
    return {key for key, items in by_thread.items()
            if key not in step_threads and key[0] in pids and any(ev["name"].startswith(EVAL_FN) for ev, _, _ in items)}
