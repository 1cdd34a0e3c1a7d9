"""One side of a trace diff: a trace file reduced to the few aggregated units its rows need
(:func:`side_of_file`), and the two sides of ``inductor-perf diff`` computed at once, the second
in a worker process (:func:`two_sides`). Then :func:`rows.compare_units` joins them as it joins
whole traces' units.

A side is the trace's units (:func:`units.units_from_events`) grouped by everything the row join
reads (:func:`aggregate_units`): a few thousand units for a million events, whatever the
file's size, so only that crosses between processes. A large file (``engine="auto"``:
:data:`~inductor_perf.summary_stream.STREAM_MIN_BYTES` of JSON text or more) is read as the
streaming summary reads it (:class:`summary_stream.Windows`: orjson windows of the mapped text):
only its host events are kept, slimmed to the args units read, while the cost join sees every
event, as :func:`inductor_perf.summary_raw.with_costs` costs a loaded trace (both fed by the
summary's fused per-event loop, :func:`inductor_perf.summary_pass.read_batch`). Anything that engine
does not take (no orjson, another layout, NaN literals) is loaded whole, as before.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from types import SimpleNamespace
from typing import Any, Mapping

from .. import events as evs
from .. import trace_format as tf
from .kernels import (DEVICE_ARGS, DEVICE_EVENT, HOST_EVENT, LAUNCH_EVENT, OTHER_EVENT, category_kind,
                      correlation_key)
from .units import UNIT_ARGS, TraceUnits, Unit, trace_units, units_from_events

log = logging.getLogger(__name__)

ENGINES = ("auto", "full", "stream")
"""``full``: load each trace whole (the path ``diff`` always took, :func:`runner.diff_traces`);
``stream``: read each in windows (falling back to a whole load for a file that engine does not take);
``auto``: stream files of :data:`~inductor_perf.summary_stream.STREAM_MIN_BYTES` or more."""

PARALLEL_MIN_BYTES = 16_000_000
"""Both files at least this large (on disk): the second side is worked on by a worker process
while this one works on the first. Below, starting a Python process costs more than it saves."""

_NO_ARGS: dict[str, Any] = {}
"""The args of every slim host event that keeps none (shared: nothing mutates a slim event's args;
costing one replaces them)."""
_MARKS = (evs.KERNEL_FLOP, evs.COST_SOURCE, evs.LAUNCH_OP)
"""What makes a trace costed (:func:`inductor_perf.summary_raw.is_costed`)."""


def side_of_file(path: str | os.PathLike, engine: str = "auto") -> tuple[TraceUnits, str | None]:
    """The aggregated units of the trace file ``path`` (:func:`aggregate_units`) and the
    note on its costs (:func:`inductor_perf.summary_raw.with_costs`'s); TraceFormatError with one
    line for a file that is not a readable trace."""
    p = os.fspath(path)
    if engine not in ENGINES:
        raise ValueError(f"unknown diff engine {engine!r}; expected one of {', '.join(map(repr, ENGINES))}")
    if engine == "stream" or engine == "auto" and _large(p):
        got = _streamed_side(p)
        if got is not None:
            return got
        log.info("%s: not streamed (a layout the streaming pass does not take): loading it", p)
    units, note = costed_units(tf.load_trace(p))
    return aggregate_units(units), note


def costed_units(trace: Mapping[str, Any]) -> tuple[TraceUnits, str | None]:
    """The comparison units of ``trace``, costed first when ``augment`` has not costed it (the same
    code, in memory: :func:`inductor_perf.summary_raw.with_costs`), and the note saying so."""
    from ..cost_args import device_from_trace
    from ..summary_raw import with_costs

    note = None
    if isinstance(trace, dict):
        trace, note = with_costs(trace, device_from_trace(trace)[0])
    return trace_units(trace), note


def _large(path: str) -> bool:
    from ..summary_stream import STREAM_MIN_BYTES

    try:
        return tf.text_size(path) >= STREAM_MIN_BYTES
    except OSError:
        return False  # the whole load says what is wrong


def _streamed_side(path: str) -> tuple[TraceUnits, str | None] | None:
    """:func:`side_of_file` in one pass over the file's windows; None when the streaming engine
    does not take the file."""
    from ..summary_stream import _Layout

    if tf._orjson() is None:
        return None
    try:
        return _stream(path)
    except _Layout as e:
        log.info("%s: not streamed (%s)", path, e or "layout")
        return None


def _stream(path: str) -> tuple[TraceUnits, str | None]:
    from ..op_costs import CostJoin
    from ..summary_stream import Windows, _read_batch, mapped_text

    with mapped_text(path) as raw, tf.gc_paused():
        windows = Windows(raw, path, typed=True)
        join = CostJoin(windows.load)
        kept = _Kept()
        routes: dict[str, tuple[int, int]] = {}
        i = 0
        for batch in windows:
            # the summary's fused loop: the cost join sees every event, _Kept what units read
            i = _read_batch(batch, i, join, kept, routes, windows)
        batch = None  # the last window, freed before the costs are placed
        note = _place_costs(join, kept, i, windows.header or {})
        by_ext = _ops_by_ext(join, kept)
        del join
        # still without the cyclic GC: cutting units makes an object or more per host event, and
        # each collection would walk the host events again (~4 s of a 1M-event side)
        return aggregate_units(units_from_events(kept.host + kept.device, launches=kept.launches,
                                                 ops_by_ext=by_ext)), note


def _ops_by_ext(join: Any, kept: "_Kept") -> dict[Any, tuple[Any, Any, float]]:
    """:func:`kernels.ops_by_external_id` for the External ids of the device events whose launch
    the trace lacks, from the cost join's index (its ops by External id, its threads' columns)."""
    want: dict[int, Any] = {}
    for _, ev, _, _ in kept.device:
        args = ev["args"]
        corr, ext = args.get("correlation"), args.get("External id")
        if ext is not None and (corr is None or correlation_key(corr) not in kept.launches):
            k = correlation_key(ext)
            op = join.ext_to_op.get(k) if k not in join.dup_ext else None
            if op is not None:
                want[op] = k
    out: dict[Any, tuple[Any, Any, float]] = {}
    if want:
        for (pid, tid), (starts, _, index) in join.by_thread.items():
            for ts, i in zip(starts, index):
                k = want.get(i)
                if k is not None:
                    out[k] = (pid, tid, ts)
    return out


class _Kept:
    """What a side keeps of a trace's events, fed by the streaming summary's fused loop
    (:func:`~inductor_perf.summary_pass.read_batch`) in the place of its ``_Pass``: each complete host
    and device event that cutting units reads, slimmed (:func:`_slim`), the place of each launch by
    correlation, whether the trace is costed (an event's args carry a cost mark). The loop hands it
    those events through :meth:`unit` (the others through :meth:`add` / :meth:`add_other`, as the
    dicts they are)."""

    def __init__(self) -> None:
        from ..summary_pass import UNIT

        self.host: list[tuple[int, dict, float, float]] = []
        self.device: list[tuple[int, dict, float, float]] = []
        self.launches: dict[Any, tuple[Any, Any, float]] = {}
        self.costed = False
        self._unit, self._cats, self._kinds = UNIT, {}, {}
        self.used, self.w0, self.w1 = 0, float("inf"), float("-inf")  # what the loop adds up (unread here)

    def _classify(self, cat: str) -> int:
        """:data:`~inductor_perf.summary_pass.UNIT` for a category a side reads (:func:`kernels.category_kind`),
        else 0 (nothing)."""
        c = self._cats.get(cat)
        if c is None:
            kind = self._kinds[cat] = category_kind(cat)
            c = self._cats[cat] = self._unit if kind != OTHER_EVENT else 0
        return c

    def unit(self, i: int, name: str, cat: str, pid: Any, tid: Any, ts: float, dur: float, args: dict) -> None:
        """Keep complete event ``i`` (its fields Kineto's plain types: :func:`_slim` of it)."""
        kind = self._kinds[cat]
        if kind == HOST_EVENT:
            kept = {k: args[k] for k in UNIT_ARGS if k in args}
            self.host.append((i, {"name": name, "cat": cat, "pid": pid, "tid": tid, "args": kept or _NO_ARGS}, ts, dur))
        elif kind == DEVICE_EVENT:
            if dur > 0:
                kept = {k: args[k] for k in DEVICE_ARGS if k in args}
                self.device.append((i, {"name": name, "cat": cat, "args": kept or _NO_ARGS}, ts, dur))
        else:
            corr = args.get("correlation")
            if corr is not None:
                self.launches[correlation_key(corr)] = (pid, tid, ts)

    def add(self, i: int, ev: dict) -> None:
        """Complete event ``i`` whose fields are not all plain: kept when a side reads it."""
        self.add_other(ev)  # its cost marks
        cat = ev.get("cat")
        if type(cat) is str and self._classify(cat):
            _slim(self, i, ev, cat, self._kinds[cat])

    def add_other(self, ev: Any) -> None:
        """Any other event: only its cost marks are read."""
        args = ev.get("args") if type(ev) is dict else None
        if not self.costed and type(args) is dict and (_MARKS[0] in args or _MARKS[1] in args or _MARKS[2] in args):
            self.costed = True


def _slim(kept: _Kept, i: int, ev: dict, cat: str, kind: int) -> None:
    """Keep complete event ``i`` (category ``cat`` of kind ``kind``) in ``kept`` when a side reads it,
    as :class:`units._Events` reads a loaded trace's: a host or device event needs a name and a finite
    start (:func:`events.complete_events`), a device event a duration, a launch its correlation. The
    slim event keeps the name, category, pid, tid and only the args of :data:`units.UNIT_ARGS`
    (device events: :data:`kernels.DEVICE_ARGS`)."""
    ts = evs.number(ev.get("ts"))
    if ts is None:
        return
    args = evs.event_args(ev)
    if kind == LAUNCH_EVENT:
        corr = args.get("correlation")
        if corr is not None:
            kept.launches[correlation_key(corr)] = (ev.get("pid"), ev.get("tid"), ts)
        return
    name = ev.get("name")
    if not isinstance(name, str):
        return
    dur = evs.number(ev.get("dur"))
    dur = dur if dur is not None else 0.0
    keys = UNIT_ARGS if kind == HOST_EVENT else DEVICE_ARGS
    slim = {"name": name, "cat": cat, "pid": ev.get("pid"), "tid": ev.get("tid"),
            "args": {k: args[k] for k in keys if k in args} or _NO_ARGS}
    if kind == HOST_EVENT:
        kept.host.append((i, slim, ts, dur))
    elif dur > 0:
        kept.device.append((i, slim, ts, dur))


def _place_costs(join: Any, kept: _Kept, n_events: int, header: dict) -> str | None:
    """Cost the trace as :func:`inductor_perf.summary_raw.with_costs` does a loaded one (the device's
    peaks on device events only) and return its note. Only the events kept are costed: the args
    costs write that a side reads (``kernel_flop``, ``achieved_flops_pct``) are on them."""
    from ..cost_args import augment_event, device_bandwidth, device_from_trace
    from ..event_cost import AugmentStats
    from ..summary_stream_finish import _costs

    seen = SimpleNamespace(costed=kept.costed, total=n_events)  # what _costs reads of the summary's pass
    costs, _, note, apply = _costs(seen, join, header)
    if not apply:
        return note
    device = device_from_trace(header)[0] if kept.device else None
    stats, cache, bandwidth = AugmentStats(), {}, device_bandwidth(device)
    for events in (kept.host, kept.device):
        for k, (i, slim, ts, dur) in enumerate(events):
            c = costs.get(i)
            if c is not None:
                # a missing, zero or non-finite duration reads as none, as it does on the event itself
                new = augment_event({"cat": slim["cat"], "dur": dur, "args": slim["args"]}, c, device, True, cache,
                                    bandwidth, stats)
                events[k] = (i, {**slim, "args": new["args"]}, ts, dur)
    return note


# --- aggregated units ------------------------------------------------------------------------------
def aggregate_units(tu: TraceUnits) -> TraceUnits:
    """``tu`` with its units (and, apart, its kernels) grouped by everything the rows read of a unit
    (phase, module, source, name, eager ops, call-tree names, fusion modules and FX node keys,
    whether its FLOPs and peak % are known): one unit per group, its :attr:`Unit.count` the calls,
    ``dur`` and ``flops`` their totals, ``ts`` the first one's start, ``achieved_pct`` the
    FLOP-weighted mean. The groups keep the order of their first unit. :func:`rows.compare_units`
    gives the same rows for both, within float rounding. Groups grow with the distinct calls, not
    the calls: 5,807 units of a real A100 trace make 100 groups, the million events of
    ``bench/gen_trace.py`` 5.

    >>> u = Unit("aten::mm", 5.0, 2.0, "forward", "fc", None, ("aten::mm",), False)
    >>> v = dataclasses.replace(u, ts=9.0, dur=3.0)
    >>> [(g.count, g.ts, g.dur) for g in aggregate_units(TraceUnits([u, v], [10.0], "span", True, False, False)).units]
    [(2, 5.0, 5.0)]
    """
    return dataclasses.replace(tu, units=_aggregate(tu.units), kernels=_aggregate(tu.kernels))


def _aggregate(units: list[Unit]) -> list[Unit]:
    groups: dict[tuple[Any, ...], Unit] = {}
    den: dict[tuple[Any, ...], float] = {}
    for u in units:
        pct = u.flops is not None and bool(u.achieved_pct) and u.achieved_pct > 0 and u.flops > 0
        key = (u.phase, u.module, u.source, u.source_inferred, u.name, u.ops, u.compiled, u.subtree_names,
               u.also_modules, u.node_keys, u.flops is not None, pct)
        g = groups.get(key)
        if g is None:
            groups[key] = dataclasses.replace(u, achieved_pct=None)
            den[key] = u.flops / u.achieved_pct if pct else 0.0
            continue
        g.count += u.count
        g.dur += u.dur
        if u.ts < g.ts:
            g.ts = u.ts
        if u.flops is not None:
            g.flops = (g.flops or 0.0) + u.flops
        if pct:
            den[key] += u.flops / u.achieved_pct
    for key, g in groups.items():
        if key[-1]:  # peak % of the group: its FLOPs over the time they would take at 100 %
            g.achieved_pct = g.flops / den[key]
    return list(groups.values())


# --- the two sides at once -------------------------------------------------------------------------
def two_sides(path_a: str | os.PathLike, path_b: str | os.PathLike, engine: str = "auto"
              ) -> tuple[tuple[TraceUnits, str | None], tuple[TraceUnits, str | None]]:
    """(:func:`side_of_file` of ``path_a``, of ``path_b``): for two large files the second in a
    worker process (started fresh: ``spawn``) while this process works on the first.

    Errors are the ones a single process gives, in the same order: ``a``'s first (the worker is then
    stopped), then ``b``'s, which the worker sends back. A worker that dies or cannot start makes
    this process work on ``b`` itself: it never waits on a worker that is gone."""
    if not _parallel(path_a, path_b):
        return side_of_file(path_a, engine), side_of_file(path_b, engine)
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    rx, tx = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_worker, args=(os.fspath(path_b), engine, tx), daemon=True,
                       name="inductor-perf-diff-side")
    try:
        proc.start()
    except OSError as e:
        log.info("diff: no worker process (%s): one side after the other", e)
        rx.close()
        tx.close()
        return side_of_file(path_a, engine), side_of_file(path_b, engine)
    tx.close()  # ours: the worker's end alone is left, so its exit is seen as EOF
    try:
        a = side_of_file(path_a, engine)
        try:
            kind, got = rx.recv()
        except (EOFError, OSError) as e:
            log.info("diff: the worker for %s stopped without an answer (%r): working on it here", path_b, e)
            return a, side_of_file(path_b, engine)
        if kind == "error":
            raise got
        return a, got
    finally:
        rx.close()
        if proc.is_alive():
            proc.kill()
        proc.join()


def _parallel(path_a: str | os.PathLike, path_b: str | os.PathLike) -> bool:
    try:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        small = min(os.path.getsize(path_a), os.path.getsize(path_b))
    except OSError:
        return False  # a missing file: the first side says so
    return cores >= 2 and small >= PARALLEL_MIN_BYTES


def _worker(path: str, engine: str, tx: Any) -> None:
    """The worker process: one side, sent back as ``("ok", side)``; a readable-trace error as
    ``("error", exception)`` for the parent to raise. Anything else ends the worker without an
    answer (the parent then works on the side itself and meets the error there)."""
    from ..errors import InductorPerfError

    try:
        try:
            got: tuple[str, Any] = ("ok", side_of_file(path, engine))
        except InductorPerfError as e:
            got = ("error", e)
        tx.send(got)
    finally:
        tx.close()
