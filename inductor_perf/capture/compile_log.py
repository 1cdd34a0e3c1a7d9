"""What Dynamo did at compile time, kept for the trace: each graph break and each (re)compile of a frame.

Dynamo keeps its own records (read through :mod:`inductor_perf.compat`): the last 64 frame compiles
(``get_compilation_metrics()``) and every graph-break reason. Each compile with our backend calls
:meth:`CompileLog.note`, which copies what is new into the process's :data:`COMPILE_LOG` (a few
fields each: 7 µs a call with 8 compiles held, torch 2.13 CPU), so compiles before the profiling
window, and more than Dynamo's 64, are kept; a capture writes :meth:`CompileLog.record` into its
trace's ``"inductor_perf"`` block under ``"compile"`` (docs/advisor.md gives its fields). The log is process-wide like the tag registry
(``model.tags.REGISTRY``) because compiles happen before any session exists.

It reads Dynamo's records of every compile in the process, whatever its backend. Without the
internal, nothing is recorded (``compat.backend_support`` has warned once, at the first compile).
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

from .. import compat

log = logging.getLogger(__name__)

_FRAME_ID = re.compile(r"(\d+)/(\d+)")


def frame_of(compile_id: str | None) -> tuple[int, int] | None:
    """(frame id, compile count of the frame) of Dynamo's compile id text, or None.

    >>> frame_of("2/3")
    (2, 3)
    """
    m = _FRAME_ID.search(compile_id or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


class CompileLog:
    """The process's frame compiles and graph breaks, as plain data."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.frames: dict[tuple[Any, Any], dict[str, Any]] = {}
        """(compile id, start) -> the frame compile (:func:`compat.dynamo_frame_compiles`'s form)."""
        self.breaks: dict[tuple[Any, ...], dict[str, Any]] = {}
        """(reason, file, line, frame) -> the graph break with ``count``, the times a graph ended in it."""
        self._breaks_seen = 0
        self.available = True
        self.armed = False
        """Whether a compile of ours noted the records: a process that never compiled with our backend
        (an eager capture) records nothing, and never runs the backend's checks of torch for it."""

    def note(self) -> None:
        """Copy Dynamo's new records (called at each compile of ours, and by :meth:`record`); never raises."""
        self.armed = True
        try:
            self._note()
        except Exception as e:  # a record lost is no reason to fail the user's compile
            log.debug("inductor_perf: could not read Dynamo's compile records (%s)", e)

    def _note(self) -> None:
        frames = compat.dynamo_frame_compiles()
        got = compat.dynamo_graph_breaks(self._breaks_seen)
        with self._lock:
            if frames is None or got is None:
                self.available = False
                return
            for f in frames:
                self.frames.setdefault((f["compile_id"], f["start_us"]), f)
            n, breaks = got  # after torch._dynamo.reset() emptied its list, compat reads it whole
            self._breaks_seen = n
            for b in breaks:
                key = (b["reason"], b["file"], b["line"], b["frame"])
                held = self.breaks.get(key)
                if held is None:
                    held = self.breaks[key] = dict(b, count=0)
                held["count"] += 1

    def record(self, window: tuple[float, float, bool] | None = None) -> dict[str, Any] | None:
        """The ``"compile"`` value of a trace's ``"inductor_perf"`` block, or None when this torch
        keeps no records. ``window``: (start, end, by_end), seconds since the epoch: each compile
        then says whether it ran inside the recorded steps (``in_window``): whether its start (its
        end, with ``by_end``) lies in (start, end]. None too when no
        compile of ours ran in this process."""
        if not self.armed:
            return None
        self.note()
        with self._lock:
            if not self.available:
                return None
            frames = sorted(self.frames.values(), key=lambda f: (f["start_us"] or 0))
            breaks = list(self.breaks.values())
        out_frames = []
        for f in frames:
            row = {k: f[k] for k in ("compile_id", "frame", "file", "line", "compile_s", "recompile_reason",
                                     "fail_type", "fail_reason", "start_us")}
            row["in_window"] = _inside(f, window)
            out_frames.append(row)
        out_breaks = [dict(b, source=source_of(b["file"], b["line"])) for b in breaks]
        return {"frames": out_frames, "graph_breaks": out_breaks, "recompile_limit": compat.dynamo_recompile_limit(),
                "window_wall_s": list(window[:2]) if window is not None else None}


def _inside(frame: dict[str, Any], window: tuple[float, float, bool] | None) -> bool | None:
    """Whether the compile ran inside the recorded steps (see :meth:`CompileLog.record`); None unknown."""
    if window is None or frame["start_us"] is None:
        return None
    at = frame["start_us"] / 1e6
    if window[2]:
        if frame["compile_s"] is None:
            return None
        at += frame["compile_s"]
    return window[0] < at <= window[1]


def source_of(path: str | None, line: int | None) -> str | None:
    """``path:LINE`` as our kernel tags name a user's line (``tagging.collector.innermost_frame``).

    >>> source_of("/home/me/model.py", 12)
    '/home/me/model.py:12'
    """
    if not path or line is None:
        return None
    return f"{path}:{line}"


COMPILE_LOG = CompileLog()
"""The process's log: compiles happen before any capture session exists, so it outlives them."""
