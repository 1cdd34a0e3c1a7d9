"""Trace files -> :class:`~inductor_perf.summary_rows.Summary`: the one path by which ``inductor-perf
summary`` and ``inductor-perf report`` read a trace, a directory of traces, or a loaded trace dict.

A trace of any origin is accepted: its device comes from its ``deviceProperties``
(:func:`inductor_perf.cost_args.device_from_trace`) unless one is given, and a raw trace is costed in
memory by augment's own code (:func:`inductor_perf.summary_raw.with_costs`), so the numbers are
those of ``augment`` then ``summary``.

>>> trace_files("no/such/path")  # doctest: +SKIP
Traceback (most recent call last):
InductorPerfError: no/such/path: no such file or directory; expected a trace file or a directory of traces
"""

from __future__ import annotations

import glob
import logging
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from .errors import InductorPerfError

log = logging.getLogger(__name__)

_OUTPUTS = (".summary.json", ".summary.json.gz")
"""Our own outputs that sit beside traces in a capture directory: not inputs."""


@dataclass(frozen=True)
class CostedTrace:
    """One trace ready to render: the (costed) trace dict, its summary, and the device used."""

    trace: dict
    summary: Any
    device: Any


def trace_files(path: str) -> list[str]:
    """The trace files ``path`` names: itself, or the ``*.json`` / ``*.json.gz`` files of a directory
    (our ``.summary.json`` outputs left out). Raises InductorPerfError when there are none."""
    if os.path.isdir(path):
        files = sorted({f for pat in ("*.json", "*.json.gz") for f in glob.glob(os.path.join(path, pat))
                        if not f.endswith(_OUTPUTS)})
        if not files:
            raise InductorPerfError(f"{path}: no *.json or *.json.gz trace files in this directory")
        return files
    if os.path.exists(path):
        return [path]
    raise InductorPerfError(f"{path}: no such file or directory; expected a trace file or a directory of traces")


def trace_label(trace: dict, name: str) -> str:
    """``name``, with the rank and world size when the trace's ``distributedInfo`` has them."""
    dist = trace.get("distributedInfo")
    if isinstance(dist, dict) and "rank" in dist:
        name += f" (rank {dist.get('rank')} of {dist.get('world_size', '?')})"
    return name


def summarize_trace(trace: dict, *, label: str | None = None, device: Any = None, top: int = 20) -> CostedTrace:
    """Cost ``trace`` when it is raw and summarize it. ``device``: the peaks to use (default: the
    trace's own GPU; a CPU trace may come from another machine, so no guess is made for it)."""
    from .cost_args import device_from_trace
    from .summary import summarize
    from .summary_raw import with_costs

    note = None
    if device is None:
        device, note = device_from_trace(trace)
    costed, costs_note = with_costs(trace, device)
    summary = summarize(costed, device=device, label=label, device_note=note, costs_note=costs_note, top=top)
    return CostedTrace(costed, summary, device)


def summarize_path(path: str, *, device: Any = None, top: int = 20,
                   stage: Callable[[str], None] | None = None) -> Iterator[CostedTrace]:
    """Each trace of ``path`` (:func:`trace_files`), summarized. A file that is not a trace is an
    error when ``path`` names it alone, else it is skipped with a warning; raises InductorPerfError
    when none is readable. ``stage`` is told what is being done (a progress line)."""
    from .trace_format import load_trace

    files = trace_files(path)
    done = 0
    for n, f in enumerate(files, 1):
        which = os.path.basename(f) + (f" ({n} of {len(files)})" if len(files) > 1 else "")
        if stage:
            stage(f"loading {which}")
        try:
            trace = load_trace(f)
        except InductorPerfError as e:
            if len(files) == 1:
                raise
            log.warning("skipping %s: %s", f, e)
            continue
        if stage:
            stage(f"summarizing {which}")
        done += 1
        yield summarize_trace(trace, label=trace_label(trace, os.path.basename(f)), device=device, top=top)
        del trace
    if not done:
        raise InductorPerfError(f"{path}: none of the {len(files)} JSON files is a readable trace")
