"""The stream engine: augment a trace file without holding every event as a dict.

Pass 1 splits the events array into spans and parses each event's bytes, keeping only what the cost
join reads; pass 2 copies the bytes of unchanged events and re-encodes (or splices args into) the
augmented ones (:mod:`.render`). Large inputs share both passes with a forked worker (:mod:`.worker`,
:data:`~inductor_perf.traces.engines.LARGE_TRACE_BYTES`). Any layout it does not expect makes it return
None, having written nothing: the caller then loads the whole trace.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ...model.event_cost import AugmentStats, EventCost
from ...traces import files as tf
from ...traces.engines import LARGE_TRACE_BYTES
from ..args import device_from_trace, roofline_classify
from .clock import StageClock
from .gzip_out import write_gzip_parts
from .parse import join_range
from .render import Pieces, emit, worker_device
from .worker import Worker, WorkerGone, add_counts, worker_main

if TYPE_CHECKING:  # pragma: no cover
    from .progress import Progress

log = logging.getLogger(__name__)

# A large trace (traces.engines.LARGE_TRACE_BYTES) is worked on by two processes where ``os.fork``
# exists: a forked worker parses and indexes the later part of the events, then renders and writes (or
# compresses, for ``.gz`` output) the later part of the output, while this process does the earlier parts.

_JOIN_SHARE = 0.47
"""The worker's share of the events to parse: a little under half, since it also pickles its index."""
_WRITE_SHARE = 0.47
"""The worker's share of the augmented events to write: under half, since it starts rendering only
once this process has sent it the costs, and writes its part after this one's (measured on the
1M-event bench trace: at 0.59 this process waited 0.25-0.60 s for the worker at the end, at 0.47
0.06-0.18 s, and the whole augment took a median 0.945 of the time; docs/benchmarks.md)."""
_WRITE_SHARE_GZ = 0.53
"""The same for ``.gz`` output, where compressing dominates the write."""


def augment_file_stream(src: str, dst: str, device: Any, show: "Progress") -> AugmentStats | None:
    """Augment ``src`` into ``dst`` without holding every event as a dict, or None (nothing written)
    when the file's layout is not the one :func:`traces.files.split_trace_file` expects.

    ``device`` None: the GPU the trace names. The stats carry the worker's peak RSS
    (``worker_maxrss_kb``) and the stages each process reached (``stage_marks``).
    """
    clock = StageClock()
    with tf.gc_paused():
        show("loading")
        read = tf.read_trace_bytes(src, map_file=True)
        if read is None:
            return None
        raw, gz = read
        try:
            return _augment_raw(raw, gz, src, dst, device, show, clock)
        finally:
            if not isinstance(raw, bytes):
                with contextlib.suppress(BufferError):  # a view still open: the map goes with the last one
                    raw.close()


def _augment_raw(raw: Any, gz: bool, src: str, dst: str, device: Any, show: "Progress",
                 clock: StageClock) -> AugmentStats | None:
    """:func:`augment_file_stream` on the text of ``src`` (bytes, or a read-only map of the file)."""
    import orjson

    from ...costs.from_shapes import CostJoin

    # The text "traceEvents" must occur once: this process looks for a second one up to the cut,
    # the worker after it.
    start = tf.events_array_start(raw, unique=False)
    if start is None:
        return None
    clock.mark("read")
    worker, cut = _fork_worker(raw, gz, start, CostJoin, clock)
    forked = worker
    try:
        spans = _split(raw, start, worker, cut)
        if spans is None:
            return None
        starts, ends, end = spans
        clock.mark("split")
        show("attributing")
        mid = len(starts)
        loads = orjson.loads
        join = CostJoin(load=lambda i: loads(raw[starts[i]:ends[i]]))
        hints: dict = {}  # what rendering needs of the kernels, taken as they are parsed
        if not join_range(raw, starts, ends, 0, mid, join, 0, hints):
            return None
        clock.mark("indexed")
        if worker is not None:
            got = _take_worker_index(raw, cut, worker, starts, ends, mid, join, clock, hints)
            if got is None:
                return None
            end, worker = got
        split = tf.framed_split(raw, gz, start, end, starts, ends)
        if split is None:
            return None
        n = len(split)
        note = None
        if device is None:
            device, note = device_from_trace(split.header)
        if not n:
            log.warning("%s: the trace has no events", src)
        costs, stats = join.finish(n, split.header.get("distributedInfo"))
        labels = join.labels
        clock.mark("joined")
        show("augmenting")
        astats = AugmentStats(events=n)
        astats.device_name = getattr(device, "name", None) if device is not None else None
        # Freeing the join's index takes a while: done while the worker writes its part.
        output = _Output(raw, starts, ends, mid, costs, device, astats, worker, show, clock, dst.endswith(".gz"),
                         held=[join], labels=labels, hints=hints)
        del join, hints
        # write() compresses .gz itself
        tf.write_atomic(dst, output.write, inputs=[src], with_path=True, compress=False)
        clock.mark("renamed")
        worker = output.worker
        if worker is not None:
            worker.close()
            worker = None
    finally:
        if worker is not None:  # given up on (fallback or error): stop it now (a no-op once reaped)
            worker.close(kill=True)
    astats.worker_maxrss_kb = forked.maxrss_kb if forked is not None else None
    astats.stage_marks = tuple(clock.marks)
    return astats.add_attribution(stats, note)


def _fork_worker(raw: Any, gz: bool, start: int, join_type: Callable[..., Any],
                 clock: StageClock) -> tuple[Worker | None, int | None]:
    """The worker and where its part of the events array begins, for inputs of
    :data:`~inductor_perf.traces.engines.LARGE_TRACE_BYTES` or more where ``os.fork`` exists; (None,
    None): one process."""
    if not hasattr(os, "fork") or len(raw) < LARGE_TRACE_BYTES:
        return None, None
    # The worker splits and parses the events after the cut; this process, those before it.
    cut = tf.event_cut(raw, start, 1.0 - _JOIN_SHARE)
    if cut is None:
        return None, None
    from ...costs.from_shapes import before_fork

    roofline_classify()  # imported here, as orjson and CostJoin by the caller: the worker imports nothing
    before_fork()  # the op-cost cache's file found (it reads torch's version) before the fork too
    try:
        return Worker(worker_main, clock, raw, gz, start, cut, join_type), cut
    except OSError as e:
        log.info("no fast-path worker (%s); working in one process", e)
        return None, None


def _split(raw: Any, start: int, worker: Worker | None, cut: int | None) -> tuple[Any, Any, int] | None:
    """This process's event spans and where the events array ends (-1: the worker finds it); with a
    worker, only the spans before the cut, and the worker is told how many they are. None: the
    layout is not the expected one."""
    if worker is None or cut is None:
        if tf.events_key_in(raw, start, len(raw)):
            return None
        return tf.split_last_events(raw, start)
    if tf.events_key_in(raw, start, cut - 1):
        return None
    starts, ends = tf.split_events(raw, start, cut)
    with contextlib.suppress(WorkerGone):  # a dead worker shows at recv() later
        worker.send(len(starts))
    return starts, ends, -1


def _take_worker_index(raw: Any, cut: Any, worker: Worker, starts: Any, ends: Any, mid: int, join: Any,
                       clock: StageClock, hints: dict) -> tuple[int, Worker | None] | None:
    """Append the worker's spans to ``starts``/``ends`` and merge its index into ``join``; if it
    died, split and parse its part here (its kernels' hints into ``hints``) and close it. Where the
    events array ends, and the worker if it is still there; None: the layout is not the expected
    one."""
    try:
        got = worker.recv()
    except WorkerGone:
        log.warning("the fast-path worker failed; parsing its part here")
        worker.close()
        last = None if tf.events_key_in(raw, cut - 1, len(raw)) else tf.split_last_events(raw, cut - 1)
        if last is None:
            return None
        starts.extend(last[0])
        ends.extend(last[1])
        if not join_range(raw, starts, ends, mid, len(starts), join, 0, hints):
            return None
        return last[2], None
    if got is None:
        return None
    end = got[0]
    starts.frombytes(got[1])
    ends.frombytes(got[2])
    clock.mark("received the worker's index")
    join.merge(got[3])
    del got
    clock.mark("merged")
    return end, worker


class _Output:
    """Writes the augmented text into the file :func:`traces.files.write_atomic` opens (:meth:`write`):
    in this process alone, or this process the earlier part and the worker the later one."""

    def __init__(self, raw: Any, starts: Any, ends: Any, mid: int, costs: Mapping[int, EventCost], device: Any,
                 astats: AugmentStats, worker: Worker | None, show: "Progress", clock: StageClock, gz_out: bool,
                 held: list, labels: Mapping[int, Mapping[str, Any]], hints: dict) -> None:
        self.raw, self.starts, self.ends, self.mid = raw, starts, ends, mid
        self.costs, self.labels, self.device, self.astats = costs, labels, device, astats
        self.todo = sorted(costs.keys() | labels.keys())
        self.worker = worker
        """The worker while it may still be used; None once closed here."""
        self.show, self.clock, self.gz_out = show, clock, gz_out
        self.held = held
        """The join's index, freed while the worker writes its part."""
        self.hints = hints
        """What rendering needs of the kernels this process parsed (:data:`render.Hint`)."""

    def _emit(self, todo: list[int], out: Any, at: int, show: "Progress | None") -> int:
        return emit(self.raw, self.starts, self.ends, todo, self.costs, self.device, self.astats, out, at, show,
                    self.hints, labels=self.labels)

    def write(self, out: Any, path: str) -> None:
        """Write the whole output to ``out`` (the file at ``path``), compressing it for ``.gz``."""
        todo, worker = self.todo, self.worker
        k = len(todo)
        if worker is not None and k >= 2:
            k -= int(k * (_WRITE_SHARE_GZ if self.gz_out else _WRITE_SHARE))
            costs, labels = self.costs, self.labels
            later = {i: costs[i] for i in todo[k:] if i in costs}
            later_labels = {i: labels[i] for i in todo[k:] if i in labels}
            try:
                # its part may begin before the cut: it gets the spans it lacks
                worker.send((later, later_labels, self.starts[:self.mid].tobytes(), self.ends[:self.mid].tobytes(),
                             self.gz_out, worker_device(self.device, later.values())))
            except WorkerGone:
                k = len(todo)
            self.clock.mark("sent the worker its costs")
        if worker is None or k == len(todo):
            if worker is not None:
                with contextlib.suppress(WorkerGone):
                    worker.send(None)  # nothing for it to do
                worker.close()
                self.worker = None
            with tf.gzip_writer(out) if self.gz_out else contextlib.nullcontext(out) as sink:
                at = self._emit(todo, sink, 0, self.show)
                sink.write(memoryview(self.raw)[at:])
            return
        # Both processes write: this process renders its part first, while the worker renders
        # its own.
        pieces = Pieces()
        at = self._emit(todo[:k], pieces, 0, self.show)
        pieces.write(memoryview(self.raw)[at:self.starts[todo[k]]])
        if self.gz_out:
            write_gzip_parts(out, pieces, worker, lambda sink: self._emit(todo[k:], sink, -1, None), self.raw,
                             self.astats, self.clock, while_waiting=self.held.clear)
            return
        self._write_plain_parts(out, path, pieces, k)

    def _write_plain_parts(self, out: Any, path: str, pieces: Pieces, k: int) -> None:
        """Plain JSON: write ``pieces`` (events ``todo[:k]``); the worker writes its part into the output
        file where this one ends."""
        worker = self.worker
        offset = out.tell() + sum(map(len, pieces))
        with contextlib.suppress(WorkerGone):  # noticed at recv() below
            worker.send((path, offset))
        out.writelines(pieces)
        pieces.clear()
        self.clock.mark("wrote the first part")
        # While the worker writes: this part starts going to disk (the fsync before the rename
        # then has less left to wait for), and the join's index is freed.
        out.flush()
        syncing = _start_sync(out.fileno())
        try:
            self.held.clear()
            try:
                counts, marks = worker.recv()
            except WorkerGone:
                log.warning("the fast-path worker failed; writing its part here")
                at = self._emit(self.todo[k:], out, -1, None)
                out.write(memoryview(self.raw)[at:])
            else:
                add_counts(self.astats, counts)
                self.clock.add_worker_marks(marks)
                self.clock.mark("the worker wrote its part")
        finally:
            syncing.join()  # before the file is closed


def _start_sync(fd: int) -> threading.Thread:
    """Start writing the file's data so far to disk in a thread (errors are left to the final fsync)."""

    def sync() -> None:
        with contextlib.suppress(OSError):
            getattr(os, "fdatasync", os.fsync)(fd)

    t = threading.Thread(target=sync, name="inductor-perf-sync", daemon=True)
    t.start()
    return t
