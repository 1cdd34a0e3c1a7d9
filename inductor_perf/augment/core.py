"""Pure augmentation: trace + per-event costs + device -> a new trace whose kernel events carry FLOPs,
bytes, achieved throughput, roofline bound and source attribution.

``augment_trace`` never touches files and never mutates its input; ``augment_file`` is the thin
I/O glue the CLI uses: it picks an engine (the whole trace loaded here, or :mod:`inductor_perf.augment.stream`
streaming large files) and calls it. Costs come from compile-time tags (:mod:`inductor_perf.tagging.collector`)
or, for plain torch.profiler traces, from recorded shapes (:func:`costs_from_shapes`). The args one
event gets are :mod:`inductor_perf.augment.args`'s.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Mapping

from ..model import events as evs
from ..model.event_cost import COST_SOURCES, AugmentStats, EventCost  # noqa: F401  (re-exported)
from ..traces import engines, files as tf
from .args import augment_event, device_bandwidth
from .args import device_from_trace as device_from_trace  # noqa: F401  (re-exported)
from .stream.progress import Progress

if TYPE_CHECKING:  # pragma: no cover
    from ..devices.resolve import DeviceSpec

log = logging.getLogger(__name__)

# --- the pure core -------------------------------------------------------------------------------
def augment_trace(trace: dict, costs: Mapping[int, EventCost], device: "DeviceSpec | None", *,
                  device_events_only: bool = False,
                  labels: Mapping[int, Mapping[str, Any]] | None = None) -> tuple[dict, AugmentStats]:
    """A new trace in which ``traceEvents[i]`` for each ``i`` in ``costs`` carries our args.

    The input is not modified: the result shares every event it does not change; changed events
    get a new dict and a new ``args`` dict. Events keep their order and count. ``device`` gives the
    peaks for ``achieved_*_pct`` and ``roofline_bound``; without it those are omitted / "unknown".
    With ``device_events_only`` the device's peaks apply only to device-side events (a GPU row
    says nothing about CPU ops in the same trace). ``labels`` (:attr:`costs.from_shapes.CostJoin.labels`)
    adds ``launch_op`` / ``not_costed`` to device events, after their cost's args. An event whose
    times fail :func:`model.events.event_time` is left as it is, counted in ``bad_time``.

    >>> new, stats = augment_trace(trace, {3: EventCost(2_000, 2_000, 48, 16)}, None)  # doctest: +SKIP
    """
    tf.validate_trace(trace)
    events = trace["traceEvents"]
    stats = AugmentStats(events=len(events))
    stats.device_name = getattr(device, "name", None) if device is not None else None
    new_events = list(events)
    peak_cache: dict[tuple[Any, bool], float | None] = {}
    bandwidth = device_bandwidth(device)
    labels = labels or {}
    for i in (costs.keys() | labels.keys()) if labels else costs:
        if not isinstance(i, int) or not 0 <= i < len(events):
            raise IndexError(f"cost for event {i!r}: the trace has {len(events)} events")
        ev = events[i]
        if not isinstance(ev, dict):
            continue
        if evs.event_time(ev.get("ts"), ev.get("dur")) is None:
            stats.bad_time += 1  # skipped, as the joins skip it (costs from elsewhere may name it)
            continue
        new_events[i] = augment_event(ev, costs.get(i), device, device_events_only, peak_cache, bandwidth, stats,
                                      labels.get(i))
    new_trace = dict(trace)
    new_trace["traceEvents"] = new_events
    return new_trace, stats


# --- offline attribution -------------------------------------------------------------------------
def costs_from_shapes(trace: dict) -> tuple[dict[int, EventCost], AugmentStats]:
    """Costs of a plain torch.profiler trace (``record_shapes=True``) from recorded op shapes.

    See :func:`inductor_perf.costs.from_shapes.costs_from_shapes`.
    """
    from ..costs.from_shapes import costs_from_shapes as _impl

    return _impl(trace)


# --- file glue -----------------------------------------------------------------------------------
def default_output_path(in_path: str | os.PathLike) -> str:
    """``run.pt.trace.json.gz`` -> ``run.pt.trace.augmented.json.gz`` (same directory)."""
    p = os.fspath(in_path)
    for ext in (".json.gz", ".json"):
        if p.endswith(ext):
            return p[: -len(ext)] + ".augmented" + ext
    return p + ".augmented.json"


def augment_file(in_path: str | os.PathLike, out_path: str | os.PathLike | None = None,
                 device: "DeviceSpec | None" = None, *, progress: bool = False, engine: str | None = None,
                 fast: bool | None = None) -> AugmentStats:
    """Load ``in_path``, attribute costs from recorded shapes, augment, and write ``out_path``.

    ``out_path`` defaults to :func:`default_output_path`; it may never be the input file. The
    device defaults to the GPU named in the trace's ``deviceProperties``. ``engine`` picks how:

    - ``"full"``: load the whole trace as dicts, :func:`augment_trace`, save;
    - ``"stream"``: :func:`inductor_perf.augment.stream.engine.augment_file_stream` (needs orjson): parse events
      one at a time from the file's bytes, copy unchanged events' bytes, share the work with a
      forked worker for large files. It falls back to the full load whenever the file's layout is
      not the one it expects, and writes the same JSON;
    - ``"auto"`` (or None, the default): "stream" for a large file
      (:data:`~inductor_perf.traces.engines.LARGE_TRACE_BYTES` of JSON text or more), else "full".

    ``fast`` is the older spelling: True means "stream", False "full", None "auto"; giving both
    ``fast`` and an ``engine`` that disagree raises ValueError, as does an unknown engine name.

    >>> augment_file("run.pt.trace.json.gz", engine="stream").events_augmented  # doctest: +SKIP
    1234
    """
    engine = _engine(engine, fast)
    src = os.fspath(in_path)
    dst = os.fspath(out_path) if out_path is not None else default_output_path(src)
    tf.output_target(dst, [src])  # the output is not the input, nor a device: said before any work
    show = Progress(progress)
    from ..costs.from_shapes import warm_up

    warm_up()
    try:
        if engines.streams(src, engine):
            from .stream import engine as stream_engine

            result = stream_engine.augment_file_stream(src, dst, device, show)
            if result is not None:
                return _noted(result)
            log.info("%s: layout not the expected one; loading the whole trace", src)
        return _noted(_augment_file_full(src, dst, device, show))
    finally:
        show.done()


def _noted(stats: AugmentStats) -> AugmentStats:
    """``stats`` with the note on events skipped for their times (:func:`model.events.bad_time_note`)."""
    if stats.bad_time:
        stats.notes.append(evs.bad_time_note(stats.bad_time))
    return stats


def _engine(engine: str | None, fast: bool | None) -> str:
    """The engine ``augment_file(engine=..., fast=...)`` asks for; ValueError for an unknown name or
    a disagreement."""
    if engine is not None:
        engines.check_engine(engine, "augment")
    if fast is None:
        return engine or "auto"
    implied = "stream" if fast else "full"
    if engine is not None and engine != implied:
        raise ValueError(f"augment_file(engine={engine!r}, fast={fast!r}) disagree: fast={fast!r} means "
                         f"engine={implied!r}; give only engine")
    return implied


def _augment_file_full(src: str, dst: str, device: Any, show: Progress) -> AugmentStats:
    show("loading")
    loaded = tf.read_trace(src)
    with tf.gc_paused():
        # Attribution and augmentation create many small dicts and free none of them.
        show("attributing")
        from ..costs.from_shapes import costs_and_labels

        costs, labels, stats = costs_and_labels(loaded.trace)
        note = None
        if device is None:
            device, note = device_from_trace(loaded.trace)
        show("augmenting")
        new, astats = augment_trace(loaded.trace, costs, device, device_events_only=True, labels=labels)
        show("writing", 0.0)
        tf.save_trace(new, dst, inputs=[src], progress=lambda f: show("writing", f))
    return astats.add_attribution(stats, note, loaded.non_finite)
