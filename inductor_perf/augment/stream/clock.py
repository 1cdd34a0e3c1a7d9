"""The stream engine's stage clock: seconds since the engine began at each stage, per process, kept
for :attr:`AugmentStats.stage_marks` and logged at debug level (``inductor-perf -v augment``)."""

from __future__ import annotations

import logging
import time
from typing import Iterable

log = logging.getLogger(__name__)


class StageClock:
    """One per run of the engine. The forked worker gets a copy with the fork and calls
    :meth:`in_worker`: from then on it keeps its marks without logging (see :class:`worker.Worker`)
    and sends them back with its part; the parent logs them and adds them to its own."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.who = "main"
        self.marks: list[tuple[str, float, str]] = []

    def mark(self, what: str) -> None:
        """Note that this process reached stage ``what`` now (perf_counter is one clock for both)."""
        t = time.perf_counter() - self.t0
        self.marks.append((self.who, t, what))
        if self.who == "main" and log.isEnabledFor(logging.DEBUG):
            log.debug("fast path [main] %.3f s: %s", t, what)

    def in_worker(self) -> None:
        """In the forked worker, right after the fork: its own marks only, never logged."""
        self.who = "worker"
        self.marks = []

    def add_worker_marks(self, marks: Iterable[tuple[str, float, str]] | None) -> None:
        """Log the marks the worker sent back and keep them after this process's."""
        for who, t, what in marks or ():
            log.debug("fast path [%s] %.3f s: %s", who, t, what)
            self.marks.append((who, t, what))
