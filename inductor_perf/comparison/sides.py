"""One side of a trace diff: a trace file reduced to the few aggregated units its rows need
(:func:`side_of_file`), and the two sides of ``inductor-perf diff`` computed at once, the second
in a worker process (:func:`two_sides`). Then :func:`rows.compare_units` joins them as it joins
whole traces' units.

A side is the trace's units (:func:`units.units_from_events`) grouped by everything the row join
reads (:func:`units.aggregate_units`): a few thousand units for a million events, whatever the
file's size, so only that crosses between processes. A large file (``engine="auto"``:
:data:`~inductor_perf.summary_stream.STREAM_MIN_BYTES` of JSON text or more) is read as the
streaming summary reads it (:class:`summary_stream.Windows`: orjson windows of the mapped text):
only its host events are kept, slimmed to the args units read, while the cost join sees every
event, as :func:`inductor_perf.summary_raw.with_costs` costs a loaded trace (both fed by the
summary's fused per-event loop, :func:`inductor_perf.summary_pass.read_batch`). Anything that engine
does not take (no orjson, another layout, NaN literals) is loaded whole, as before.
"""

from __future__ import annotations

import logging
import os
from types import SimpleNamespace
from typing import Any, Mapping

from .. import events as evs
from .. import trace_format as tf
from ..markers import MARKER_PREFIX
from .units import HOST_CATS, UNIT_ARGS, TraceUnits, aggregate_units, trace_units, units_from_events

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
    """The aggregated units of the trace file ``path`` (:func:`units.aggregate_units`) and the
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
    skipped: dict[str, int] = {}
    units = trace_units(trace, skipped=skipped)
    return units, _with_bad_time(note, skipped.get(evs.BAD_TIME, 0))


def _with_bad_time(note: str | None, bad: int) -> str | None:
    """A side's note, with the count of events skipped for their times (:func:`events.bad_time_note`)."""
    if not bad:
        return note
    return evs.bad_time_note(bad) if note is None else f"{note}; {evs.bad_time_note(bad)}"


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
            # the summary's fused loop: the cost join sees every event, _Kept the host events
            i = _read_batch(batch, i, join, kept, routes, windows)
        batch = None  # the last window, freed before the costs are placed
        note = _with_bad_time(_place_costs(join, kept.costed, kept.marked, kept.host, i, windows.header or {}),
                              kept.bad_time)
        del join
        # still without the cyclic GC: cutting units makes an object or more per host event, and
        # each collection would walk the host events again (~4 s of a 1M-event side)
        return aggregate_units(units_from_events(kept.host)), note


class _Kept:
    """What a side keeps of a trace's events, fed by the streaming summary's fused loop
    (:func:`~inductor_perf.summary_pass.read_batch`) in the place of its ``_Pass``: each complete host
    event that cutting units reads, slimmed (:func:`_host_event`), whether the trace is costed (an
    event's args carry a cost mark) and whether it has our graph markers. The loop hands it those
    events through :meth:`unit` (the others through :meth:`add` / :meth:`add_other`, as the dicts
    they are); it keeps no device event."""

    def __init__(self) -> None:
        from ..summary_pass import UNIT

        self.host: list[tuple[int, dict, float, float]] = []
        self.bad_time = 0
        """Complete events skipped for their times (:func:`events.event_time`), of any category."""
        self.costed = self.marked = False
        self._unit, self._cats = UNIT, {}
        self.used, self.w0, self.w1 = 0, float("inf"), float("-inf")  # what the loop adds up (unread here)

    def _classify(self, cat: str) -> int:
        """:data:`~inductor_perf.summary_pass.UNIT` for a category units are cut from, else 0 (nothing)."""
        c = self._cats.get(cat)
        if c is None:
            c = self._cats[cat] = self._unit if cat.lower() in HOST_CATS else 0
        return c

    def unit(self, i: int, name: str, cat: str, pid: Any, tid: Any, ts: float, dur: float, args: dict) -> None:
        """Keep complete event ``i`` (its fields Kineto's plain types: :func:`_host_event` of it)."""
        kept = {k: args[k] for k in UNIT_ARGS if k in args}
        self.host.append((i, {"name": name, "cat": cat, "pid": pid, "tid": tid, "args": kept or _NO_ARGS}, ts, dur))
        if not self.marked and name.startswith(MARKER_PREFIX):
            self.marked = True

    def add(self, i: int, ev: dict) -> None:
        """Complete event ``i`` whose fields are not all plain: kept when cutting units reads it."""
        self.add_other(ev)  # its cost marks
        t = evs.event_time(ev.get("ts"), ev.get("dur"))
        if t is None:
            self.bad_time += 1
            return
        cat = ev.get("cat")
        if type(cat) is str and self._classify(cat):
            slim = _host_event(i, ev, cat, ev.get("args"), t)
            if slim is not None:
                self.host.append(slim)
                self.marked = self.marked or slim[1]["name"].startswith(MARKER_PREFIX)

    def add_other(self, ev: Any) -> None:
        """Any other event: only its cost marks are read."""
        args = ev.get("args") if type(ev) is dict else None
        if not self.costed and type(args) is dict and (_MARKS[0] in args or _MARKS[1] in args or _MARKS[2] in args):
            self.costed = True


def _host_event(i: int, ev: dict, cat: str, args: Any, time: tuple[float, float]
                ) -> tuple[int, dict, float, float] | None:
    """``(i, slim event, ts, dur)`` of a complete host event (category ``cat``, times ``time`` from
    :func:`events.event_time`) that cutting units reads (one with a name), else None. The slim event
    keeps the name, category, pid, tid and only the args of :data:`units.UNIT_ARGS`."""
    name = ev.get("name")
    if not isinstance(name, str):
        return None
    kept = {k: args[k] for k in UNIT_ARGS if k in args} if type(args) is dict else _NO_ARGS
    slim = {"name": name, "cat": cat, "pid": ev.get("pid"), "tid": ev.get("tid"), "args": kept or _NO_ARGS}
    return i, slim, time[0], time[1]


def _place_costs(join: Any, costed: bool, marked: bool, host: list[tuple[int, dict, float, float]],
                 n_events: int, header: dict) -> str | None:
    """Cost the trace as :func:`inductor_perf.summary_raw.with_costs` does a loaded one and return
    its note. Only a compiled kernel's unit reads the args costs write (``kernel_flop``,
    ``achieved_flops_pct``), and kernel units are the host events inside a graph marker: without a
    marker the costs only make the note. Peaks never apply to host events (``device_events_only``),
    so no device is looked up."""
    from ..cost_args import augment_event
    from ..event_cost import AugmentStats
    from ..summary_stream_finish import _costs

    seen = SimpleNamespace(costed=costed, total=n_events)  # what _costs reads of the summary's pass
    costs, _, note, apply = _costs(seen, join, header)
    if apply and marked:
        stats, cache = AugmentStats(), {}
        for k, (i, slim, ts, dur) in enumerate(host):
            c = costs.get(i)
            if c is not None:
                # a zero duration reads as none, as it does on the event itself
                new = augment_event({"cat": slim["cat"], "dur": dur, "args": slim["args"]}, c, None, True, cache,
                                    None, stats)
                host[k] = (i, {**slim, "args": new["args"]}, ts, dur)
    return note


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
