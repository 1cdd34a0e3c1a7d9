"""Every ``INDUCTOR_PERF_*`` environment variable, read here and nowhere else.

Each constant names a variable; the functions below read it when called (never at import), so a
test or a launcher can set the environment after importing inductor_perf.
"""

from __future__ import annotations

import os

# Directory to write augmented traces and summaries to; setting it turns automatic capture on.
TRACE_DIR = "INDUCTOR_PERF_TRACE_DIR"
# Steps to skip before the profiling window opens (compile and warm-up; the profiler starts in the
# last of them, which it traces and we drop); a step is one call of the root compiled frame,
# whichever of its compiled variants runs (capture.auto.AutoCapture).
SKIP_STEPS = "INDUCTOR_PERF_SKIP"
# Steps to record once the window is open.
RECORD_STEPS = "INDUCTOR_PERF_STEPS"
# Seconds rank 0 waits, after its own capture, for every rank's trace before it writes the
# cross-rank summary with what it has (ranks.after_capture; default 60).
RANKS_WAIT_S = "INDUCTOR_PERF_RANKS_WAIT_S"
# Address of a Dask scheduler (tcp://host:8786, or a scheduler file) on which `inductor-perf summary DIR`
# summarizes the ranks, as --dask ADDRESS does (ranks.executors; unset: local processes).
DASK = "INDUCTOR_PERF_DASK"
# JSON or TOML file of device rows that override or extend the built-in device table.
DEVICE_FILE = "INDUCTOR_PERF_DEVICE_FILE"
# Directory for per-machine calibration results (default: ~/.cache/inductor_perf).
CACHE_DIR = "INDUCTOR_PERF_CACHE_DIR"
# Set to 1 to disable kernel tagging entirely (the backend then behaves exactly like "inductor").
DISABLE_TAGGING = "INDUCTOR_PERF_DISABLE_TAGGING"
# Testing aid: the tagging hook raises, to exercise the fallback path.
INJECT_TAGGING_FAILURE = "INDUCTOR_PERF_INJECT_TAGGING_FAILURE"

ALL_VARIABLES = (TRACE_DIR, SKIP_STEPS, RECORD_STEPS, RANKS_WAIT_S, DASK, DEVICE_FILE, CACHE_DIR, DISABLE_TAGGING,
                 INJECT_TAGGING_FAILURE)


def get_str(name: str) -> str | None:
    """The variable's value, or None when unset or empty."""
    value = os.environ.get(name, "").strip()
    return value or None


def get_flag(name: str) -> bool:
    """True when the variable is set to 1/true/yes/on (case-insensitive)."""
    return (get_str(name) or "").lower() in ("1", "true", "yes", "on")


def get_int(name: str, default: int, minimum: int = 0) -> int:
    """An integer variable; raises ValueError naming the variable when it is not one."""
    raw = get_str(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: expected an integer >= {minimum}") from None
    if value < minimum:
        raise ValueError(f"{name}={raw!r}: expected an integer >= {minimum}")
    return value
