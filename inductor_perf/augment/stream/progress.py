"""Stage messages on stderr while a long command runs (augment's engines, the CLI's summary/diff)."""

from __future__ import annotations

import sys
import time


class Progress:
    """Stage messages on stderr, only for a TTY and only once the work has taken more than ~2 s."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.t0 = time.monotonic()
        self.shown = False

    def __call__(self, stage: str, fraction: float | None = None) -> None:
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.t0
        if elapsed < 2.0:
            return
        pct = f" {fraction * 100:3.0f}%" if fraction is not None else ""
        sys.stderr.write(f"\rinductor-perf: {stage}{pct} ({elapsed:.0f} s)\x1b[K")
        sys.stderr.flush()
        self.shown = True

    def done(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
