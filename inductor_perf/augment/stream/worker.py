"""The forked worker of the stream engine: the process and its pipe protocol (:class:`Worker`,
:func:`put` / :func:`get`) and what it does (:func:`worker_main`): index the later part of the events,
then render and write (or compress) the later part of the output."""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import signal
import warnings
from array import array
from typing import Any, Callable

from ...model.event_cost import AugmentStats
from ...traces import files as tf
from .clock import StageClock
from .parse import join_range
from .render import Pieces, crc_and_size, emit

log = logging.getLogger(__name__)


class WorkerGone(Exception):
    """The worker died or closed its pipe before answering."""


_FORK_WARNING = r"This process \(pid=\d+\) is multi-threaded, use of fork\(\) may lead to deadlocks"
"""The start of the DeprecationWarning Python 3.12+ gives for ``os.fork()`` with other threads alive."""


class Worker:
    """A forked helper for :func:`stream.augment_file_stream`; see :func:`worker_main` for what it does.

    The input bytes and span arrays are shared with it copy-on-write; what goes back and forth
    (its join index, the costs of its events and their peaks, three counters) is pickled through two
    pipes.

    It is forked whatever other threads run (torch 2.15 starts some when imported; callers have their
    own). The child has only the thread that forked, and a lock another thread held at the fork stays
    held in the child for good, so the child runs only code that needs no such lock:

    - it loads no module: all it uses is imported before the fork (the augment.stream modules' imports,
      orjson and CostJoin in :func:`stream._augment_raw`, classify in :func:`stream._fork_worker`), so
      an import statement it runs is a lookup in ``sys.modules`` (CPython takes a module's lock only
      while that module is being imported);
    - it never logs: its :class:`clock.StageClock` keeps its marks for the parent, and logging is
      disabled in it for other modules' debug lines (a handler could need a lock of its own or its
      stream's; the logging lock that disabling takes is reinitialised in the child by logging's own
      fork hook);
    - it looks up no device (the device table has a lock and logs; the TF32 switches are torch's): the
      parent sends it the peaks it needs (:class:`render.WorkerDevice`). It touches no torch;
    - it ends in ``os._exit`` (no atexit handlers, no flushing of buffers it inherited), without
      leaving the ``catch_warnings`` block around the fork (which would restore the filters).
    """

    def __init__(self, main: Callable[..., None], clock: StageClock, *args: Any) -> None:
        """Fork; the child runs ``main(clock, *args, rx, tx)`` with its copy of ``clock`` and its ends
        of the pipes, then exits. :attr:`maxrss_kb` is its peak RSS once :meth:`close` reaped it."""
        p2c_r, p2c_w = os.pipe()
        c2p_r, c2p_w = os.pipe()
        with warnings.catch_warnings():
            # The child is safe with other threads alive (above): no warning about them.
            warnings.filterwarnings("ignore", _FORK_WARNING, DeprecationWarning)
            try:
                pid = os.fork()
            except OSError:
                for fd in (p2c_r, p2c_w, c2p_r, c2p_w):
                    os.close(fd)
                raise
            if pid == 0:  # the worker: never returns into the caller's code
                code = 1
                try:
                    clock.in_worker()
                    logging.disable(logging.CRITICAL)
                    os.close(p2c_w)
                    os.close(c2p_r)
                    with os.fdopen(p2c_r, "rb") as rx, os.fdopen(c2p_w, "wb") as tx:
                        main(clock, *args, rx, tx)
                    code = 0
                except BaseException:  # noqa: BLE001 - the parent sees the pipe close and does the work
                    pass
                finally:
                    os._exit(code)
        os.close(p2c_r)
        os.close(c2p_w)
        self.pid = pid
        self.tx = os.fdopen(p2c_w, "wb")
        self.rx = os.fdopen(c2p_r, "rb")
        self.maxrss_kb: int | None = None
        self._reaped = False

    def send(self, obj: Any) -> None:
        try:
            put(self.tx, obj)
        except (OSError, pickle.PicklingError, TypeError) as e:  # BrokenPipeError: the worker is gone
            raise WorkerGone() from e

    def recv(self) -> Any:
        try:
            return get(self.rx)
        except (OSError, EOFError) as e:
            raise WorkerGone() from e

    def close(self, kill: bool = False) -> None:
        """Close both pipes (a worker waiting for work then exits) and reap the worker; ``kill``
        first stops it (its work is no longer wanted). Once reaped, closing again does nothing."""
        if self._reaped:
            return
        if kill:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
        for f in (self.tx, self.rx):
            try:
                f.close()
            except OSError:
                pass
        _pid, status, usage = os.wait4(self.pid, 0)
        self._reaped = True
        self.maxrss_kb = usage.ru_maxrss
        if status != 0:
            log.info("fast-path worker exited with status %s", status)


def put(f: Any, obj: Any) -> None:
    """Send ``obj`` pickled, after its length."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(len(data).to_bytes(8, "little"))
    f.write(data)
    f.flush()


def get(f: Any) -> Any:
    """The next object :func:`put` sent; EOFError when the pipe closed first."""
    head = f.read(8)
    if len(head) != 8:
        raise EOFError("pipe closed")
    size = int.from_bytes(head, "little")
    data = f.read(size)
    if len(data) != size:
        raise EOFError("pipe closed")
    return pickle.loads(data)


def worker_main(clock: StageClock, raw: bytes, gz: bool, start: int, cut: int, join_type: Callable[..., Any],
                rx: Any, tx: Any) -> None:
    """In the forked worker: split the events array from ``cut`` (:func:`traces.files.event_cut`)
    to its end, take the number of events before the cut from the parent, index its events under
    their global numbers in a ``join_type`` (:class:`costs.from_shapes.CostJoin`), keeping what rendering needs
    of its kernels (:data:`render.Hint`), and send back the spans and the join state (None: the layout
    is not the expected one); then, if asked, render the later part of the output with the peaks the
    parent sends and write it into the output file where the parent's part ends (for ``.gz`` output:
    compress it and send it to the parent). :class:`Worker` says what it must not do."""
    clock.mark("worker started")
    last = None if tf.events_key_in(raw, cut - 1, len(raw)) else tf.split_last_events(raw, cut - 1)
    clock.mark("worker split")
    base = get(rx)
    if last is None:
        put(tx, None)
        return
    starts, ends, end = last
    from ...costs.ops.meta import defer_torch  # loaded before the fork, with costs.from_shapes

    defer_torch()  # ops that need torch's shape rules go to the parent with the state
    part = join_type(load=lambda i: None)  # never finished here: the parent reads events back
    pre: dict = {}  # what rendering needs of its kernels, taken as they are parsed
    if not join_range(raw, starts, ends, 0, len(starts), part, base, pre):
        put(tx, None)
        return
    clock.mark("worker indexed")
    put(tx, (end, starts.tobytes(), ends.tobytes(), part.state()))
    del part
    clock.mark("worker sent index")
    job = get(rx)
    if job is None:
        return
    costs, labels, starts_before, ends_before, gz, roofs = job
    starts_all, ends_all = array("q"), array("q")
    starts_all.frombytes(starts_before)
    ends_all.frombytes(ends_before)
    if len(starts_all) != base:
        raise AssertionError("span count mismatch")  # the parent then writes this part itself
    starts_all.extend(starts)
    ends_all.extend(ends)
    starts, ends, base = starts_all, ends_all, 0
    del starts_before, ends_before
    clock.mark("worker got costs")
    astats = AugmentStats()
    pieces = Pieces()
    at = emit(raw, starts, ends, sorted(costs.keys() | labels.keys()), costs, roofs, astats, pieces, -1, None, pre,
              base, labels)
    pieces.write(memoryview(raw)[at:])
    del pre
    clock.mark("worker rendered its part")
    counts = (astats.events_augmented, astats.nonpositive_dur, astats.peaks_known, astats.events_labelled)
    if gz:
        # A deflate stream of its own; the parent puts it after its part, and the CRC of the whole
        # text continues from the parent's.
        deflate = tf.deflate_raw()
        body = [deflate.compress(p) for p in pieces]
        body.append(deflate.flush())
        crc, size = crc_and_size(pieces, get(rx))
        clock.mark("worker compressed its part")
        put(tx, (b"".join(body), crc, size, counts, clock.marks))
        return
    where = get(rx)  # the output file, and where in it the parent's part ends
    if where is None:
        return
    path, offset = where
    with open(path, "r+b", buffering=tf.WRITE_BUFFER_BYTES) as out:
        out.seek(offset)
        out.writelines(pieces)
    clock.mark("worker wrote its part")
    put(tx, (counts, clock.marks))


def add_counts(astats: AugmentStats, counts: tuple[int, int, bool, int]) -> None:
    """Add the worker's counts (events augmented, durations not positive, peaks known, events
    labelled) to ``astats``."""
    astats.events_augmented += counts[0]
    astats.nonpositive_dur += counts[1]
    astats.peaks_known = astats.peaks_known or counts[2]
    astats.events_labelled += counts[3]
