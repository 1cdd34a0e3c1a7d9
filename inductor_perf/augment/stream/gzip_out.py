"""gzip output in two parts: this process compresses the first part of the augmented text while the
forked worker compresses the rest as a deflate stream of its own; :func:`write_gzip_parts` stitches
them into one gzip member."""

from __future__ import annotations

import contextlib
import logging
import zlib
from typing import Any, Callable

from ...model.event_cost import AugmentStats
from ...traces import files as tf
from .clock import StageClock
from .render import Pieces, crc_and_size
from .worker import Worker, WorkerGone, add_counts

log = logging.getLogger(__name__)


def write_gzip_parts(out: Any, pieces: list, worker: Worker, emit_rest: Callable[[Any], int], raw: Any,
                     astats: AugmentStats, clock: StageClock, while_waiting: Callable[[], None]) -> None:
    """Write one gzip member holding ``pieces`` (this process's part of the output) followed by the
    worker's part, which the worker compresses meanwhile as a deflate stream of its own: this part
    ends with a sync flush, the worker's with the final block, and the trailer's CRC runs over both
    (the worker continues it from this part's). If the worker fails, its part is rendered
    (``emit_rest(sink)`` returns where the input still to copy begins) and compressed here."""
    crc, size = crc_and_size(pieces)
    with contextlib.suppress(WorkerGone):  # noticed at recv() below
        worker.send(crc)
    deflate = tf.deflate_raw()
    out.write(tf.GZIP_HEADER)
    for p in pieces:
        out.write(deflate.compress(p))
    pieces.clear()
    clock.mark("compressed the first part")
    while_waiting()
    try:
        body, crc_all, size_rest, counts, marks = worker.recv()
    except WorkerGone:
        log.warning("the fast-path worker failed; writing its part here")
        rest = Pieces()
        rest.write(memoryview(raw)[emit_rest(rest):])
        crc, size_rest = crc_and_size(rest, crc)
        size += size_rest
        out.writelines(deflate.compress(p) for p in rest)
        out.write(deflate.flush())
    else:
        out.write(deflate.flush(zlib.Z_SYNC_FLUSH))
        out.write(body)
        crc, size = crc_all, size + size_rest
        add_counts(astats, counts)
        clock.add_worker_marks(marks)
        clock.mark("appended the worker's compressed part")
    out.write(tf.gzip_trailer(crc, size))
