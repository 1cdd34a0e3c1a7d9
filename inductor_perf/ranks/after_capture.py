"""At the end of a capture window under torch.distributed, rank 0 writes the cross-rank summary
(:mod:`inductor_perf.ranks.view`) beside the per-rank files: ``<base>.ranks.summary.txt`` and
``.ranks.summary.json``.

Rank 0 does not wait in the training loop: a thread polls the output folder until every rank's
trace of this capture is there (``*_rank<N>_*.trace.json.gz`` written since rank 0's window opened,
less :data:`SLACK_S`) or ``INDUCTOR_PERF_RANKS_WAIT_S`` seconds (default 60) have passed, then
summarizes what it has, in this process (no worker processes are forked from a training job). A
rank that stopped early, or wrote to another host's folder, is named as missing. The thread is not a
daemon, so the interpreter lets it finish at exit; its wait is bounded, so a job whose ranks stopped
early ends at most that much later, never hangs. Every failure is a warning.
"""

from __future__ import annotations

import glob
import logging
import os
import re
import threading
import time
from typing import Any

from .. import config as env

log = logging.getLogger(__name__)

SLACK_S = 120.0
"""Ranks open their windows at about the same step; a trace older than rank 0's window start by
more than this belongs to an earlier capture."""
POLL_S = 0.5
_RANK_FILE = re.compile(r"_rank(\d+)(?:_[^/]*)?\.trace\.json\.gz$")


def rank_files(out_dir: str, world: int, since: float) -> dict[int, str]:
    """The newest trace per rank < ``world`` in ``out_dir`` written at or after ``since`` (epoch s)."""
    found: dict[int, tuple[float, str]] = {}
    for path in glob.glob(os.path.join(out_dir, "*.trace.json.gz")):
        m = _RANK_FILE.search(os.path.basename(path))
        if not m or int(m.group(1)) >= world:
            continue
        try:
            mtime = os.path.getmtime(path)
        except OSError:
            continue
        r = int(m.group(1))
        if mtime >= since and (r not in found or mtime > found[r][0]):
            found[r] = (mtime, path)
    return {r: p for r, (_, p) in found.items()}


def write_cross_rank(out_dir: str, base: str, world: int, since: float, wait_s: float) -> str | None:
    """Wait (at most ``wait_s``) for every rank's trace, then write the cross-rank summary; the
    path of the text file, or None when there was nothing to compare."""
    from .files import cross_rank_files
    from ..report.ranks import format_ranks
    from ..traces.files import write_atomic

    deadline = time.monotonic() + wait_s
    files = rank_files(out_dir, world, since)
    while len(files) < world and time.monotonic() < deadline:
        time.sleep(POLL_S)
        files = rank_files(out_dir, world, since)
    if len(files) < 2:
        log.warning("inductor_perf: no cross-rank summary: only %d of %d ranks wrote a trace to %s "
                    "within %.0f s", len(files), world, out_dir, wait_s)
        return None
    view = cross_rank_files([files[r] for r in sorted(files)], workers=1)
    if len(files) < world:
        view.notes.insert(0, f"written after waiting {wait_s:.0f} s ({env.RANKS_WAIT_S}) with {len(files)} of "
                             f"{world} ranks' traces: the others stopped early or wrote elsewhere")
    txt, js = base + ".ranks.summary.txt", base + ".ranks.summary.json"
    inputs = list(files.values())
    write_atomic(txt, lambda f: f.write(format_ranks(view, "text").encode()), inputs=inputs)
    write_atomic(js, lambda f: f.write(format_ranks(view, "json").encode()), inputs=inputs)
    print(f"inductor_perf: wrote {txt} and .json (cross-rank summary of {len(files)} of {world} ranks)")
    return txt


class CrossRankWriter:
    """Started by rank 0 once its own files are written (a non-daemon thread: finished at exit)."""

    def __init__(self, out_dir: str, base: str, world: int, since: float) -> None:
        try:
            self.wait_s = float(env.get_int(env.RANKS_WAIT_S, 60))
        except ValueError as e:
            log.warning("inductor_perf: %s; waiting 60 s", e)
            self.wait_s = 60.0
        self.thread = threading.Thread(target=self._run, args=(out_dir, base, world, since - SLACK_S),
                                       name="inductor-perf-ranks", daemon=False)

    def _run(self, *args: Any) -> None:
        try:
            write_cross_rank(*args, wait_s=self.wait_s)
        except Exception as e:  # never break the user's job
            log.warning("inductor_perf: could not write the cross-rank summary (%s: %s)", type(e).__name__, e)

    def start(self) -> "CrossRankWriter":
        self.thread.start()
        return self


def after_capture(out_dir: str, base: str | None, since: float) -> CrossRankWriter | None:
    """On rank 0 of a group of several ranks with a written trace: start the writer; else None."""
    try:
        import torch.distributed as dist

        if base is None or not (dist.is_available() and dist.is_initialized()):
            return None
        if dist.get_rank() != 0 or dist.get_world_size() < 2:
            return None
        return CrossRankWriter(out_dir, base, dist.get_world_size(), since).start()
    except Exception as e:
        log.warning("inductor_perf: no cross-rank summary (%s)", e)
        return None
