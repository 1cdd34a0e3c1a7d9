"""Trace files -> :class:`~inductor_perf.summary.rows.Summary`: the one path by which ``inductor-perf
summary`` and ``inductor-perf report`` read a trace, a directory of traces, or a loaded trace dict.

A trace of any origin is accepted: its device comes from its ``deviceProperties``
(:func:`inductor_perf.augment.args.device_from_trace`) unless one is given, and a raw trace is costed in
memory by augment's own code (:func:`inductor_perf.augment.in_memory.with_costs`), so the numbers are
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

from ..errors import InductorPerfError

log = logging.getLogger(__name__)

_OUTPUTS = (".summary.json", ".summary.json.gz")
"""Our own outputs that sit beside traces in a capture directory: not inputs."""


@dataclass(frozen=True)
class CostedTrace:
    """One trace ready to render: the (costed) trace dict, its summary, and the device used."""

    trace: dict | None
    """None when the trace was summarized in a streaming pass (:mod:`inductor_perf.summary.stream.engine`)."""
    summary: Any
    device: Any


def trace_files(path: str) -> list[str]:
    """The trace files ``path`` names: itself, or the ``*.json`` / ``*.json.gz`` files of a directory
    (our ``.summary.json`` outputs left out); a URL (``s3://…``) is listed through fsspec
    (:mod:`inductor_perf.traces.urls`). Raises InductorPerfError when there are none."""
    from ..traces.urls import is_url, list_traces

    if is_url(path):
        listed = list_traces(path, (".json", ".json.gz"), _OUTPUTS)
        if listed is None:
            return [path]
        if not listed:
            raise InductorPerfError(f"{path}: no *.json or *.json.gz trace files in this folder")
        return listed
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
    from ..augment.args import device_from_trace
    from .core import summarize
    from ..augment.in_memory import with_costs

    note = None
    if device is None:
        device, note = device_from_trace(trace)
    costed, costs_note = with_costs(trace, device)
    summary = summarize(costed, device=device, label=label, device_note=note, costs_note=costs_note, top=top)
    return CostedTrace(costed, summary, device)


def summarize_file(f: str, *, device: Any = None, top: int = 20, engine: str = "full",
                   stage: Callable[[str], None] | None = None, which: str | None = None,
                   light: bool = False) -> CostedTrace:
    """One trace file, summarized by ``engine`` (:data:`~inductor_perf.traces.engines.ENGINES`):
    ``"full"`` loads the whole trace (:func:`summarize_trace`, which keeps the costed trace for the
    report page); ``"stream"`` summarizes it in one streaming pass (:mod:`inductor_perf.summary.stream.engine`:
    the same numbers, bounded memory, no trace kept), falling back to the full load for traces it does
    not take; ``"auto"`` streams a large file. InductorPerfError when it is not a readable trace. ``which`` names it in the progress lines ``stage`` is told. ``light``: when the
    file is streamed, only the fields the cross-rank view reads (:mod:`inductor_perf.summary.light`);
    a file loaded whole gets the full summary (the same values in those fields). A URL ``f``
    (``s3://…``) is copied to a local file first, and the copy removed after."""
    from ..traces.engines import streams
    from ..traces.files import load_trace
    from ..traces.urls import is_url, local_copy

    if is_url(f):
        with local_copy(f) as local:
            try:
                return summarize_file(local, device=device, top=top, engine=engine, stage=stage,
                                      which=which or os.path.basename(f), light=light)
            except InductorPerfError as e:  # name the user's URL, not our copy
                raise InductorPerfError(str(e).replace(local, f)) from None

    which = which or os.path.basename(f)
    if streams(f, engine):
        from .stream.engine import summarize_file_stream

        if stage:
            stage(f"summarizing {which}")
        name = os.path.basename(f)
        got = summarize_file_stream(f, device=device, top=top, stage=stage,
                                    label_of=lambda header: trace_label(header, name), light=light)
        if got is not None:
            return CostedTrace(None, *got)
        log.info("%s: not streamed (a CPU trace, or a layout the streaming pass does not take): loading it", f)
    if stage:
        stage(f"loading {which}")
    trace = load_trace(f)
    if stage:
        stage(f"summarizing {which}")
    return summarize_trace(trace, label=trace_label(trace, os.path.basename(f)), device=device, top=top)


def summarize_path(path: str, *, device: Any = None, top: int = 20, engine: str = "full",
                   stage: Callable[[str], None] | None = None) -> Iterator[CostedTrace]:
    """Each trace of ``path`` (:func:`trace_files`), summarized (:func:`summarize_file`). A file
    that is not a trace is an error when ``path`` names it alone, else it is skipped with a warning;
    raises InductorPerfError when none is readable. ``stage`` is told what is being done (a progress
    line)."""
    from ..traces.engines import check_engine

    check_engine(engine, "summary")
    files = trace_files(path)
    done = 0
    for n, f in enumerate(files, 1):
        which = os.path.basename(f) + (f" ({n} of {len(files)})" if len(files) > 1 else "")
        try:
            got = summarize_file(f, device=device, top=top, engine=engine, stage=stage, which=which)
        except InductorPerfError as e:
            if len(files) == 1:
                raise
            log.warning("skipping %s: %s", f, e)
            continue
        done += 1
        yield got
    if not done:
        raise InductorPerfError(f"{path}: none of the {len(files)} JSON files is a readable trace")
