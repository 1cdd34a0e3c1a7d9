"""One side of a trace diff: a trace file reduced to the few aggregated units its rows need
(:func:`side_of_file`), and the two sides of ``inductor-perf diff`` computed at once, the second
in a worker process (:func:`two_sides`). Then :func:`rows.compare_units` joins them as it joins
whole traces' units.

A side is the trace's units (:func:`units.units_from_events`) grouped by everything the row join
reads (:func:`aggregate_units`): a few thousand units for a million events, whatever the
file's size, so only that crosses between processes. A large file (``engine="auto"``:
:data:`~inductor_perf.traces.engines.LARGE_TRACE_BYTES` of JSON text or more) is read as the
streaming summary reads it (:class:`summary.stream.engine.Windows`: orjson windows of the mapped text):
only its host events are kept, slimmed to the args units read, while the cost join sees every
event, as :func:`inductor_perf.augment.in_memory.with_costs` costs a loaded trace (both fed by the
summary's fused per-event loop, :func:`inductor_perf.summary.stream.loop.read_batch`). Anything that engine
does not take (no orjson, another layout, NaN literals) is loaded whole, as before.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from sys import intern
from types import SimpleNamespace
from typing import Any, Mapping

from ..model import events as evs
from ..traces import engines, files as tf
from .kernels import DEVICE_ARGS, DEVICE_EVENT, HOST_EVENT, PEAK_ARG, Device, category_kind, correlation_key
from .units import UNIT_ARGS, TraceUnits, Unit, trace_units, units_from_events

log = logging.getLogger(__name__)

PARALLEL_MIN_BYTES = 16_000_000
"""Both files at least this large (on disk): the second side is worked on by a worker process
while this one works on the first. Below, starting a Python process costs more than it saves."""

_NO_ARGS: dict[str, Any] = {}
"""The args of every slim host event that keeps none (shared: nothing mutates a slim event's args;
costing one replaces them)."""


def side_of_file(path: str | os.PathLike, engine: str = "auto", kernels: bool = True
                 ) -> tuple[TraceUnits, str | None]:
    """The aggregated units of the trace file ``path`` (:func:`aggregate_units`) and the
    note on its costs (:func:`inductor_perf.augment.in_memory.with_costs`'s); TraceFormatError with one
    line for a file that is not a readable trace. ``engine`` (:data:`~inductor_perf.traces.engines.ENGINES`):
    ``full`` loads the trace whole (the path ``diff`` always took, :func:`runner.diff_traces`);
    ``stream`` reads it in windows (falling back to a whole load for a file that engine does not
    take); ``auto`` streams a large file. ``kernels=False``: without the kernels (only ``by="kernel"``
    reads them)."""
    p = os.fspath(path)
    if engines.streams(p, engines.check_engine(engine, "diff")):
        got = _streamed_side(p, kernels)
        if got is not None:
            return got
        log.info("%s: not streamed (a layout the streaming pass does not take): loading it", p)
    units, note = costed_units(tf.load_trace(p), kernels)
    return aggregate_units(units), note


def costed_units(trace: Mapping[str, Any], kernels: bool = True) -> tuple[TraceUnits, str | None]:
    """The comparison units of ``trace``, costed first when ``augment`` has not costed it (the same
    code, in memory: :func:`inductor_perf.augment.in_memory.with_costs`), and the note saying so."""
    from ..augment.args import device_from_trace
    from ..augment.in_memory import with_costs

    note = None
    if isinstance(trace, dict):
        trace, note = with_costs(trace, device_from_trace(trace)[0])
    skipped: dict[str, int] = {}
    units = trace_units(trace, kernels=kernels, skipped=skipped)
    return units, _with_bad_time(note, skipped.get(evs.BAD_TIME, 0))


def _with_bad_time(note: str | None, bad: int) -> str | None:
    """A side's note, with the count of events skipped for their times (:func:`model.events.bad_time_note`)."""
    if not bad:
        return note
    return evs.bad_time_note(bad) if note is None else f"{note}; {evs.bad_time_note(bad)}"


def _streamed_side(path: str, kernels: bool = True) -> tuple[TraceUnits, str | None] | None:
    """:func:`side_of_file` in one pass over the file's windows; None when the streaming engine
    does not take the file."""
    from ..summary.stream.engine import LayoutError

    if tf.orjson_or_none() is None:
        return None
    try:
        return _stream(path, kernels)
    except LayoutError as e:
        log.info("%s: not streamed (%s)", path, str(e) or "a layout the streaming pass does not take")
        return None


def _stream(path: str, kernels: bool = True) -> tuple[TraceUnits, str | None]:
    from ..costs.from_shapes import CostJoin
    from ..summary.stream.engine import Windows, read_window_batch, mapped_text

    with mapped_text(path) as raw, tf.gc_paused():
        windows = Windows(raw, path, typed=True)
        join = CostJoin(windows.load)
        kept = _Kept()
        routes: dict[str, tuple[int, int]] = {}
        i = 0
        for batch in windows:
            # the summary's fused loop: the cost join sees every event, _Kept what units read
            i = read_window_batch(batch, i, join, kept, routes, windows)
        batch = None  # the last window, freed before the costs are placed
        note = _with_bad_time(_place_costs(join, kept, i, windows.header or {}), kept.bad_time)
        launches, by_ext = _launch_places(join, kept.device)
        del join
        # still without the cyclic GC: cutting units makes an object or more per host event, and
        # each collection would walk the host events again (~4 s of a 1M-event side)
        return aggregate_units(units_from_events(kept.host, launches=launches, ops_by_ext=by_ext,
                                                 device=kept.device, kernels=kernels)), note


def _launch_places(join: Any, device: list[Device]) -> tuple[dict[Any, tuple[Any, Any, float]],
                                                             dict[Any, tuple[Any, Any, float]]]:
    """(the place (pid, tid, ts) of each launch the ``device`` events name, by correlation; of each
    CPU op by External id, for those whose launch the trace lacks: :func:`kernels.ops_by_external_id`),
    from the cost join's index (its launches by correlation, ops by External id and threads'
    columns), which the streaming loop built as :class:`kernels.SideEvents` reads a loaded trace."""
    runtime: dict[int, Any] = {}
    ops: dict[int, Any] = {}
    by_corr, ext_to_op, dup = join.runtime_by_corr, join.ext_to_op, join.dup_ext
    for _, _, _, _, corr, ext, _ in device:
        r = by_corr.get(correlation_key(corr)) if corr is not None else None
        if r is not None:
            runtime[r] = correlation_key(corr)
        elif ext is not None:
            k = correlation_key(ext)
            op = ext_to_op.get(k) if k not in dup else None
            if op is not None:
                ops[op] = k
    launches: dict[Any, tuple[Any, Any, float]] = {}
    by_ext: dict[Any, tuple[Any, Any, float]] = {}
    if runtime or ops:
        for (pid, tid), (starts, _, index) in join.by_thread.items():
            for ts, i in zip(starts, index):
                k = runtime.get(i)
                if k is not None:
                    launches[k] = (pid, tid, ts)
                k = ops.get(i)
                if k is not None:
                    by_ext[k] = (pid, tid, ts)
    return launches, by_ext


class _Kept:
    """What a side keeps of a trace's events, fed by the streaming summary's fused loop
    (:func:`~inductor_perf.summary.stream.loop.read_batch`) in the place of its ``_Pass``: each complete host
    and device event that cutting units reads, slimmed (:func:`_slim`; a device event as a
    :data:`kernels.Device`), whether the trace is costed (an event's args carry a cost mark). The loop
    hands it those events through :meth:`unit` (the others through :meth:`add` / :meth:`add_other`,
    as the dicts they are). The launches' places come from the cost join's index afterwards
    (:func:`_launch_places`)."""

    def __init__(self) -> None:
        from ..summary.stream.loop import UNIT

        self.host: list[tuple[int, dict, float, float]] = []
        self.device: list[Device] = []
        self.bad_time = 0
        """Complete events skipped for their times (:func:`model.events.event_time`), of any category."""
        self.costed = False
        self._unit, self._cats, self._kinds = UNIT, {}, {}
        self.used, self.w0, self.w1 = 0, float("inf"), float("-inf")  # what the loop adds up (unread here)

    def _classify(self, cat: str) -> int:
        """:data:`~inductor_perf.summary.stream.loop.UNIT` for a category a side reads (:func:`kernels.category_kind`),
        else 0 (nothing)."""
        c = self._cats.get(cat)
        if c is None:
            kind = self._kinds[cat] = category_kind(cat)
            c = self._cats[cat] = self._unit if kind == HOST_EVENT or kind == DEVICE_EVENT else 0
        return c

    def unit(self, i: int, name: str, cat: str, pid: Any, tid: Any, ts: float, dur: float, args: dict) -> None:
        """Keep complete event ``i`` (its fields Kineto's plain types: :func:`_slim` of it)."""
        kind = self._kinds[cat]
        if kind == HOST_EVENT:
            kept = {k: args[k] for k in UNIT_ARGS if k in args}
            self.host.append((i, {"name": name, "cat": cat, "pid": pid, "tid": tid, "args": kept or _NO_ARGS}, ts, dur))
        elif dur > 0:  # a device event (its name interned: kernels repeat, each decoded anew)
            self.device.append((i, intern(name), ts, dur, args.get("correlation"), args.get("External id"),
                                _device_args(args)))

    def add(self, i: int, ev: dict) -> None:
        """Complete event ``i`` whose fields are not all plain: kept when a side reads it."""
        self.add_other(ev)  # its cost marks
        t = evs.event_time(ev.get("ts"), ev.get("dur"))
        if t is None:
            self.bad_time += 1
            return
        cat = ev.get("cat")
        if type(cat) is str and self._classify(cat):
            _slim(self, i, ev, cat, self._kinds[cat], t)

    def add_other(self, ev: Any) -> None:
        """Any other event: only its cost marks are read."""
        args = ev.get("args") if type(ev) is dict else None
        if not self.costed and evs.has_cost_mark(args):
            self.costed = True


def _slim(kept: _Kept, i: int, ev: dict, cat: str, kind: int, time: tuple[float, float]) -> None:
    """Keep complete event ``i`` (category ``cat`` of kind ``kind``, times ``time`` from
    :func:`model.events.event_time`) in ``kept`` when a side reads it, as :class:`kernels.SideEvents` reads a
    loaded trace's: a host or device event needs a name, a device event a duration. The slim host
    event keeps the name, category, pid, tid and only the args of :data:`units.UNIT_ARGS`; a device
    event is kept as a :data:`kernels.Device` (the args of :data:`kernels.DEVICE_ARGS`)."""
    name = ev.get("name")
    if not isinstance(name, str):
        return
    args = evs.event_args(ev)
    ts, dur = time
    if kind == HOST_EVENT:
        slim = {"name": name, "cat": cat, "pid": ev.get("pid"), "tid": ev.get("tid"),
                "args": {k: args[k] for k in UNIT_ARGS if k in args} or _NO_ARGS}
        kept.host.append((i, slim, ts, dur))
    elif dur > 0:
        kept.device.append((i, intern(name), ts, dur, args.get("correlation"), args.get("External id"),
                            _device_args(args)))


def _device_args(args: dict) -> dict:
    """The args of a device event that kernels read beside its launch (:data:`kernels.DEVICE_ARGS`):
    what augmenting wrote on it, most often nothing (the shared empty dict)."""
    kept = None
    for k in _COST_KEYS:
        if k in args:
            if kept is None:
                kept = {}
            kept[k] = args[k]
    return kept if kept is not None else _NO_ARGS


_COST_KEYS = tuple(k for k in DEVICE_ARGS if k not in ("correlation", "External id"))
"""The device event args kept besides its launch (its place)."""


def _place_costs(join: Any, kept: _Kept, n_events: int, header: dict) -> str | None:
    """Cost the trace as :func:`inductor_perf.augment.in_memory.with_costs` does a loaded one (the device's
    peaks on device events only) and return its note. Only the events kept are costed, and only with
    the args a side reads (:func:`_read_args`)."""
    from ..augment.args import device_from_trace
    from ..summary.stream.finish import pass_costs

    seen = SimpleNamespace(costed=kept.costed, total=n_events)  # what pass_costs reads of the summary's pass
    costs, _, note, apply = pass_costs(seen, join, header)
    if not apply:
        return note
    device = device_from_trace(header)[0] if kept.device else None
    cache: dict[Any, Any] = {}
    host = kept.host
    for k, (i, slim, ts, dur) in enumerate(host):
        c = costs.get(i)
        if c is not None and c.comm is None:  # a collective's args carry no FLOPs
            host[k] = (i, {**slim, "args": {**slim["args"], **_read_args(c, dur, None, cache)}}, ts, dur)
    dev = kept.device
    for k, (i, name, ts, dur, corr, ext, args) in enumerate(dev):
        c = costs.get(i)
        if c is not None and c.comm is None:
            # the cost's args, shared by its kernels: each one's achieved % follows from its duration
            # and the peak they carry (kernels.kernel_cost); a dict per kernel would cost ~250 B
            shared = _read_args(c, None, device, cache, peak=True)
            dev[k] = (i, name, ts, dur, corr, ext, shared if args is _NO_ARGS else {**args, **shared})
    return note


def _read_args(cost: Any, dur: float | None, device: Any, cache: dict[Any, Any], peak: bool = False
               ) -> dict[str, Any]:
    """Of the args :func:`~inductor_perf.augment.args.augment_event` writes for ``cost`` (``device``: its
    peaks, None on a host event, which has none), those a side reads: ``kernel_flop``, the cost's
    module, source, fused ops and kind; and ``peak=True``: the peak the achieved % is measured
    against (:data:`kernels.PEAK_ARG`, from which :func:`kernels.kernel_cost` computes it as
    :func:`roofline.point.classify` does). Kernels share costs (one per op signature): the dict is made
    once per cost and shared."""
    from ..augment.args import static_args
    from ..devices.peaks import dtype_peak

    key = (id(cost), device is not None)  # a cost may be shared by a host event and device events
    got = cache.get(key)
    if got is None:
        head, tail = static_args(cost)
        fixed = {k: v for k, v in {**head, **tail}.items() if k in _READ}
        nbytes = int(cost.bytes_read) + int(cost.bytes_written)
        top = dtype_peak(device, cost.dtype, cost.matmul_flops > 0) if device is not None else None
        # classify refuses negative counts: no achieved % then
        with_peak = {**fixed, PEAK_ARG: top} if top is not None and int(cost.flops) >= 0 and nbytes >= 0 else fixed
        got = cache[key] = (cost, fixed, with_peak)  # (the cost kept: ids stay unique)
    return got[2] if peak else got[1]


_READ = frozenset({evs.KERNEL_FLOP, evs.ACHIEVED_FLOPS_PCT, evs.MODULE_PATH, evs.SOURCE, evs.EAGER_OPS,
                   evs.KERNEL_KIND, evs.COST_SOURCE})
"""The cost args that units and kernels read (:data:`units.UNIT_ARGS`, :data:`kernels.DEVICE_ARGS`)."""


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
def two_sides(path_a: str | os.PathLike, path_b: str | os.PathLike, engine: str = "auto", kernels: bool = True
              ) -> tuple[tuple[TraceUnits, str | None], tuple[TraceUnits, str | None]]:
    """(:func:`side_of_file` of ``path_a``, of ``path_b``): for two large files the second in a
    worker process (started fresh: ``spawn``) while this process works on the first.

    Errors are the ones a single process gives, in the same order: ``a``'s first (the worker is then
    stopped), then ``b``'s, which the worker sends back. A worker that dies or cannot start makes
    this process work on ``b`` itself: it never waits on a worker that is gone."""
    if not _parallel(path_a, path_b):
        return side_of_file(path_a, engine, kernels), side_of_file(path_b, engine, kernels)
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    rx, tx = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_worker, args=(os.fspath(path_b), engine, tx, kernels), daemon=True,
                       name="inductor-perf-diff-side")
    try:
        proc.start()
    except OSError as e:
        log.info("diff: no worker process (%s): one side after the other", e)
        rx.close()
        tx.close()
        return side_of_file(path_a, engine, kernels), side_of_file(path_b, engine, kernels)
    tx.close()  # ours: the worker's end alone is left, so its exit is seen as EOF
    try:
        a = side_of_file(path_a, engine, kernels)
        try:
            kind, got = rx.recv()
        except (EOFError, OSError) as e:
            log.info("diff: the worker for %s stopped without an answer (%r): working on it here", path_b, e)
            return a, side_of_file(path_b, engine, kernels)
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


def _worker(path: str, engine: str, tx: Any, kernels: bool = True) -> None:
    """The worker process: one side, sent back as ``("ok", side)``; a readable-trace error as
    ``("error", exception)`` for the parent to raise. Anything else ends the worker without an
    answer (the parent then works on the side itself and meets the error there)."""
    from ..errors import InductorPerfError

    try:
        try:
            got: tuple[str, Any] = ("ok", side_of_file(path, engine, kernels))
        except InductorPerfError as e:
            got = ("error", e)
        tx.send(got)
    finally:
        tx.close()
