"""The streaming summary's pass (:mod:`inductor_perf.summary.stream.engine`) in two processes, as ``augment``
shares its pass (:mod:`inductor_perf.augment.stream.engine`): a worker forked once the file is mapped reads
the windows from a window boundary about half-way (:meth:`traces.windows.Windows.cut_near`) to the
end, numbering its events from 0, while this process reads those before it; the worker then sends what
it kept, in parts (the windows' bookkeeping, the cost join's state, the pass's counts, kernels and
threads), and this process appends it after its own, its event indices raised by the number of events
before the boundary. The windows are exactly those one process reads, so the summary and every error
are the same.

Once the pass is merged, the idle attribution is computed by a second forked process, a helper
(:func:`fork_helper`), while this one places the costs and sums the kernels
(:mod:`inductor_perf.summary.stream.finish`).

One process where ``os.fork`` is missing, for a file under :data:`LARGE_TRACE_BYTES`, for the light
summary (a folder of ranks: its files are summarized in parallel already, :mod:`inductor_perf.ranks.files`)
and inside a process started by :mod:`multiprocessing` (a pool's worker). A worker that dies or fails
before all its parts arrive: this process reads its windows itself. The worker runs under the rules of
:class:`~inductor_perf.augment.stream.worker.Worker` (it imports nothing, never logs, touches no torch).
"""

from __future__ import annotations

import collections
import importlib
import logging
import os
import pickle
from typing import Any, Callable, Iterator

from ...augment.stream.clock import StageClock
from ...augment.stream.worker import Worker, WorkerGone, put
from ...errors import TraceFormatError
from ...traces.engines import LARGE_TRACE_BYTES
from ...traces.windows import Windows, LayoutError, envelope_decoder

log = logging.getLogger(__name__)

HELPER_MAX_BYTES = 400_000_000
"""Trace files whose JSON text is larger than this get no helper (:func:`fork_helper`). A helper starts
sharing this process's memory copy-on-write, but reading Python objects writes their reference counts,
so its pages are soon its own copies: on the 1M-event trace (324 MB) the helper held 329 MB of private
pages beside the parent's ~350 MB. Up to this size (~1.2M events) the two stay under ~0.9 GB; past it
the summary keeps to one process and its bound (the 3M-event trace summarized in under 1 GB)."""

WORKER_SHARE = 0.44
"""The worker's share of the text: a little under half, since after its pass it pickles what it kept
(~0.3 s for the 1M-event trace), which this process then unpickles and appends. On the 1M-event
trace, this process's wait for the parts after its own pass: 0.32–0.35 s with an even split; with
0.47, 0.09–0.77 s (8 runs on a busy machine); with 0.45, 0.05–0.16 s; with 0.44 and below, ~0.04 s
(the time to receive the first part) in 3 of 4 runs."""


class Parts:
    """The worker's parts as they came (pickled): :meth:`next` unpickles the next one and lets its bytes go."""

    def __init__(self, frames: list[bytes]) -> None:
        self.frames = collections.deque(frames)

    def next(self) -> Any:
        return pickle.loads(self.frames.popleft())

    @staticmethod
    def trim() -> None:
        """Once the parts are merged: give the C heap's free pages back (glibc's ``malloc_trim``). The
        pickled parts and the containers merged into this process's were large blocks of that heap;
        the holes they leave are not all reused by what the summary allocates next (its small objects
        live in Python's own arenas), and would stay resident beside it."""
        try:
            import ctypes

            ctypes.CDLL(None).malloc_trim(0)
        except (OSError, AttributeError):  # not glibc
            pass


class PassWorker:
    """The forked worker of one pass: :meth:`receive` its parts, :meth:`close` it."""

    def __init__(self, worker: Worker, cut: int) -> None:
        self.worker = worker
        self.cut = cut
        """Where its windows begin: a window boundary (the end of a separator)."""

    def receive(self) -> Parts | None:
        """All its parts (nothing is merged before the last one is here: a worker that fails midway
        leaves nothing half-merged), kept pickled until the worker has exited (its memory is given back
        before its objects are rebuilt here); None when it died or failed (the caller reads its
        windows). Raises the TraceFormatError or :class:`LayoutError` its windows gave."""
        frames = []
        try:
            while True:
                tag, data = _get(self.worker.rx)
                if tag == _END:
                    break
                if tag == _FORMAT:
                    raise TraceFormatError(pickle.loads(data))
                if tag == _LAYOUT:
                    raise LayoutError(pickle.loads(data))
                frames.append(data)
        except (OSError, EOFError):
            self.close(kill=True)
            return None
        self.close()
        return Parts(frames)

    def close(self, kill: bool = False) -> None:
        """Reap the worker (``kill``: stop it first); once reaped, this does nothing."""
        reaped = self.worker._reaped
        self.worker.close(kill=kill)
        if not reaped:
            log.info("summary worker: peak RSS %s KB", self.worker.maxrss_kb)


# The frames the worker sends: a tag byte, the payload's length (8 bytes), the payload pickled.
_PART, _END, _FORMAT, _LAYOUT = b"p", b"e", b"f", b"l"


def _pickled(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def _send(f: Any, tag: bytes, data: bytes) -> None:
    f.write(tag + len(data).to_bytes(8, "little"))
    f.write(data)
    f.flush()


def _put(f: Any, tag: bytes, obj: Any) -> None:
    _send(f, tag, _pickled(obj))


def _get(f: Any) -> tuple[bytes, bytes]:
    """The next frame :func:`_put` sent: (tag, pickled payload); EOFError when the pipe closed first."""
    head = f.read(9)
    if len(head) != 9:
        raise EOFError("pipe closed")
    size = int.from_bytes(head[1:], "little")
    data = f.read(size)
    if len(data) != size:
        raise EOFError("pipe closed")
    return head[:1], data


def start_worker(events: Windows, light: bool, read_part: Callable[[Windows], Iterator[Any]]) -> PassWorker | None:
    """Fork the worker of ``events``' later windows, which runs ``read_part`` on them and sends each
    part it yields, and stop ``events`` at the boundary; None (one process) in the cases the module
    docstring names, or when the file has too few windows to share."""
    import multiprocessing

    if light or not hasattr(os, "fork") or len(events.raw) < LARGE_TRACE_BYTES:
        return None
    if multiprocessing.parent_process() is not None:
        return None  # a pool's worker: its siblings have the other cores (and a daemon cannot fork safely)
    cut = events.cut_near(1.0 - WORKER_SHARE)
    if cut is None:
        return None
    for name in ("orjson", "inductor_perf.costs.from_shapes", "inductor_perf.costs.ops.meta"):
        importlib.import_module(name)  # before the fork: the worker imports nothing (Worker's rules)
    envelope_decoder()  # msgspec too, where it is installed
    from ...costs.from_shapes import before_fork

    before_fork()  # the op-cost cache's file found (it reads torch's version) before the fork too
    try:
        worker = Worker(_worker_main, StageClock(), events.raw, events.path, events.window, events.typed, cut,
                        read_part)
    except OSError as e:
        log.info("no summary worker (%s); reading in one process", e)
        return None
    events.stop = cut
    return PassWorker(worker, cut)


def _worker_main(clock: StageClock, raw: Any, path: str, window: int, typed: bool, cut: int,
                 read_part: Callable[[Windows], Iterator[Any]], rx: Any, tx: Any) -> None:
    """In the forked worker: ``read_part`` over the windows from ``cut``; each part it yields is
    pickled, then all are sent, then the end; or the error its windows raised (a TraceFormatError's
    message; the layout is not the engine's). Exits at once after the end: freeing what it kept would
    only delay giving its memory back.

    The parts are pickled before any is sent: a pipe holds 64 KB, so a part sent as it is pickled
    would keep the worker waiting for this process, which reads only once its own pass is done; pickled
    first, they are ready then (~25 MB and ~0.3 s for the 1M-event trace: :data:`WORKER_SHARE`)."""
    parts = read_part(Windows(raw, path, window, begin=cut - 1, typed=typed))
    try:
        first = next(parts)
    except TraceFormatError as e:
        _put(tx, _FORMAT, str(e))
        return
    except LayoutError as e:
        _put(tx, _LAYOUT, str(e))
        return
    frames = [_pickled(first)]
    del first
    for part in parts:
        frames.append(_pickled(part))
        del part
    for data in frames:
        _send(tx, _PART, data)
    _put(tx, _END, None)
    os._exit(0)


class Helper:
    """A forked process computing one value for this one (:func:`fork_helper`)."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    def result(self) -> Any | None:
        """The value, once the helper has sent it (it is reaped then); None when it died or failed:
        the caller computes the value itself."""
        try:
            got = self.worker.recv()
        except WorkerGone:
            self.worker.close(kill=True)
            log.info("the summary helper failed; computing its part here")
            return None
        self.worker.close()
        return got

    def close(self) -> None:
        """Stop and reap the helper if its value is no longer wanted (a no-op once reaped)."""
        self.worker.close(kill=True)


def fork_helper(size: int, main: Callable[..., Any], *args: Any) -> Helper | None:
    """A helper forked now, computing ``main(*args)`` from this process's memory as it is at the fork,
    for a trace of ``size`` bytes of text; None (the caller computes it) where ``os.fork`` is missing,
    for a size under :data:`LARGE_TRACE_BYTES` or over :data:`HELPER_MAX_BYTES`, inside a pool's worker,
    or when the fork fails. ``main`` runs under the rules of :class:`~inductor_perf.augment.stream.worker.Worker`:
    every module it uses imported before this call, no logging."""
    import multiprocessing

    if not hasattr(os, "fork") or not LARGE_TRACE_BYTES <= size <= HELPER_MAX_BYTES:
        return None
    if multiprocessing.parent_process() is not None:
        return None  # a pool's worker: its siblings have the other cores
    try:
        return Helper(Worker(_helper_main, StageClock(), main, *args))
    except OSError as e:
        log.info("no summary helper (%s); computing in one process", e)
        return None


def _helper_main(clock: StageClock, main: Callable[..., Any], *args: Any) -> None:
    """In the forked helper: send ``main(*args)`` (``args`` end with the helper's ends of the pipes)."""
    *call, _rx, tx = args
    put(tx, main(*call))
