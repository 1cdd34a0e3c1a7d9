"""Pure augmentation: trace + per-event costs + device -> a new trace whose kernel events carry FLOPs,
bytes, achieved throughput, roofline bound and source attribution.

``augment_trace`` never touches files and never mutates its input; ``augment_file`` is the thin
I/O glue the CLI uses. Costs come from compile-time tags (:mod:`inductor_perf.tagging`) or, for
plain torch.profiler traces, from recorded shapes (:func:`costs_from_shapes`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import pickle
import re
import signal
import sys
import threading
import time
import warnings
import zlib
from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from . import trace_format as tf
from .errors import TraceFormatError
from .event_cost import COST_SOURCES, AugmentStats, EventCost  # noqa: F401  (re-exported)
from .roofline import DEFAULT_LATENCY_BYTES as _LATENCY_BYTES
from .roofline import DEFAULT_LATENCY_PCT as _LATENCY_PCT
from .roofline import DEFAULT_LATENCY_US as _LATENCY_US

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from .devices import DeviceSpec

log = logging.getLogger(__name__)

# --- the pure core -------------------------------------------------------------------------------
def augment_trace(trace: dict, costs: Mapping[int, EventCost], device: "DeviceSpec | None", *,
                  device_events_only: bool = False) -> tuple[dict, AugmentStats]:
    """A new trace in which ``traceEvents[i]`` for each ``i`` in ``costs`` carries our args.

    The input is not modified: the result shares every event it does not change; changed events
    get a new dict and a new ``args`` dict. Events keep their order and count. ``device`` gives the
    peaks for ``achieved_*_pct`` and ``roofline_bound``; without it those are omitted / "unknown".
    With ``device_events_only`` the device's peaks apply only to device-side events (a GPU row
    says nothing about CPU ops in the same trace).

    >>> new, stats = augment_trace(trace, {3: EventCost(2_000, 2_000, 48, 16)}, None)  # doctest: +SKIP
    """
    tf.validate_trace(trace)
    events = trace["traceEvents"]
    stats = AugmentStats(events=len(events))
    stats.device_name = getattr(device, "name", None) if device is not None else None
    new_events = list(events)
    peak_cache: dict[tuple[Any, bool], float | None] = {}
    bandwidth = _bandwidth(device)
    for i, cost in costs.items():
        if not isinstance(i, int) or not 0 <= i < len(events):
            raise IndexError(f"cost for event {i!r}: the trace has {len(events)} events")
        ev = events[i]
        if not isinstance(ev, dict):
            continue
        new_events[i] = _augment_event(ev, cost, device, device_events_only, peak_cache, bandwidth, stats)
    new_trace = dict(trace)
    new_trace["traceEvents"] = new_events
    return new_trace, stats


def _augment_event(ev: dict, cost: EventCost, device: Any, device_events_only: bool,
                   peak_cache: dict[tuple[Any, bool], float | None], bandwidth: float | None,
                   stats: AugmentStats) -> dict:
    """A copy of ``ev`` whose new ``args`` dict carries ``cost``'s args; counts it in ``stats``."""
    use_device = device is not None and (not device_events_only or tf.category(ev) not in tf.CPU_SCOPE_CATS)
    peak = None
    if use_device:
        key = (cost.dtype, cost.matmul_flops > 0)
        if key not in peak_cache:
            peak_cache[key] = _peak(device, cost.dtype, cost.matmul_flops > 0)
        peak = peak_cache[key]
    args = dict(tf.event_args(ev))
    dur = tf.number(ev.get("dur"))
    if dur is None or dur <= 0:
        stats.nonpositive_dur += 1
        dur = None
    args.update(_cost_args(cost, dur, peak, bandwidth if use_device else None))
    new_ev = dict(ev)
    new_ev["args"] = args
    stats.events_augmented += 1
    if peak is not None:
        stats.peaks_known = True
    return new_ev


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _ratio(num: float, den: float) -> float | None:
    try:
        return _finite(num / den)
    except (OverflowError, ZeroDivisionError):
        return None


def _cost_args(cost: EventCost, dur_us: float | None, peak_tflops: float | None,
               bandwidth_gbs: float | None) -> dict[str, Any]:
    head, tail = _static_args(cost)
    return _args_for(head, tail, int(cost.flops), int(cost.bytes_read) + int(cost.bytes_written), dur_us,
                     peak_tflops, bandwidth_gbs)


def _static_args(cost: EventCost) -> tuple[dict[str, Any], dict[str, Any]]:
    """The args of ``cost`` that do not depend on the event: those before the achieved numbers,
    and those after ``roofline_bound`` (None values left out)."""
    nbytes = int(cost.bytes_read) + int(cost.bytes_written)
    head: dict[str, Any] = {
        tf.KERNEL_FLOP: int(cost.flops),
        tf.KERNEL_MATMUL_FLOP: int(cost.matmul_flops),
        tf.KERNEL_NUM_GB: _ratio(nbytes, 1e9),
    }
    if cost.cost_source != "triton":
        head[tf.KERNEL_BYTES_READ] = int(cost.bytes_read)
        head[tf.KERNEL_BYTES_WRITTEN] = int(cost.bytes_written)
    tail = {
        tf.SOURCE: cost.source,
        tf.MODULE_PATH: cost.module_path,
        tf.NODE_NAMES: ", ".join(cost.node_names) if cost.node_names else None,
        tf.STACK_TRACE: cost.stack_trace,
        tf.KERNEL_KIND: cost.kind,
        tf.GRAPH_ID: cost.graph_id,
        tf.IS_BACKWARD: cost.is_backward,
        tf.COST_SOURCE: cost.cost_source,
        tf.EAGER_OPS: ", ".join(cost.eager_ops) if cost.eager_ops else None,
        tf.KERNEL_DTYPE: str(cost.dtype).removeprefix("torch.") if cost.dtype is not None else None,
    }
    return ({k: v for k, v in head.items() if v is not None}, {k: v for k, v in tail.items() if v is not None})


def _args_for(head: dict[str, Any], tail: dict[str, Any], flops: int, nbytes: int, dur_us: float | None,
              peak_tflops: float | None, bandwidth_gbs: float | None) -> dict[str, Any]:
    a = dict(head)
    bound = "unknown"
    if dur_us is not None:
        # flop / µs / 1e6 = TFLOP/s; byte / µs / 1e3 = GB/s
        v = _ratio(flops, dur_us * 1e6)
        if v is not None:
            a[tf.ACHIEVED_TFLOPS] = v
        v = _ratio(nbytes, dur_us * 1e3)
        if v is not None:
            a[tf.ACHIEVED_GBPS] = v
    if (peak_tflops or bandwidth_gbs) and flops >= 0 and nbytes >= 0:
        point = _classify(flops, nbytes, dur_us or 0.0, peak_tflops, bandwidth_gbs)
        if point is not None:
            v = tf.number(point.flops_pct)
            if v is not None:
                a[tf.ACHIEVED_FLOPS_PCT] = v
            v = tf.number(point.bandwidth_pct)
            if v is not None:
                a[tf.ACHIEVED_BANDWIDTH_PCT] = v
            bound = str(point.bound) if point.bound else "unknown"
    a[tf.ROOFLINE_BOUND] = bound
    a.update(tail)
    return a


_SAFE_INT = 1 << 53  # below this every int converts to float exactly
_IN_RANGE = (1e-6, 1e12)  # durations (µs) and peaks (TFLOP/s, GB/s) the inline roofline takes


def _roof(flops: int, nbytes: int, peak_tflops: float, bandwidth_gbs: float) -> str | None:
    """The roof that binds a kernel under :func:`roofline.classify`'s rule (peaks within
    :data:`_IN_RANGE`, counts in ``[0, 2**53)``): None (nothing done), "compute" or "memory"."""
    if flops == 0 and nbytes == 0:
        return None
    if nbytes == 0:
        return "compute"
    if flops == 0:
        return "memory"
    return "compute" if flops / nbytes >= peak_tflops * 1e3 / bandwidth_gbs else "memory"


def _args_inline(head: dict[str, Any], tail: dict[str, Any], flops: int, nbytes: int, dur_us: float,
                 peak_tflops: float, bandwidth_gbs: float, roof: str | None) -> dict[str, Any]:
    """:func:`_args_for` for the common case, without building a :class:`roofline.RooflinePoint`:
    ``dur_us`` and both peaks within :data:`_IN_RANGE`, counts in ``[0, 2**53)`` (so every ratio
    is finite), ``roof`` from :func:`_roof`. Same arithmetic, in the same order, as :func:`roofline.classify`
    (tests/unit/test_fast_path.py checks it against classify on a sweep)."""
    a = dict(head)
    a[tf.ACHIEVED_TFLOPS] = flops / (dur_us * 1e6)
    a[tf.ACHIEVED_GBPS] = nbytes / (dur_us * 1e3)
    # classify's own expressions (FLOP/µs/1e6 = TFLOP/s, B/µs/1e3 = GB/s), for identical floats
    flops_pct = 100.0 * (flops / dur_us / 1e6) / peak_tflops
    bandwidth_pct = 100.0 * (nbytes / dur_us / 1e3) / bandwidth_gbs
    a[tf.ACHIEVED_FLOPS_PCT] = flops_pct
    a[tf.ACHIEVED_BANDWIDTH_PCT] = bandwidth_pct
    if roof is None:
        bound = "latency"  # nothing measurable done in a measured time: pure overhead
    else:
        pct = flops_pct if roof == "compute" else bandwidth_pct
        small = dur_us < _LATENCY_US or nbytes < _LATENCY_BYTES
        bound = "latency" if pct < _LATENCY_PCT and small else roof
    a[tf.ROOFLINE_BOUND] = bound
    a.update(tail)
    return a


# --- device peaks --------------------------------------------------------------------------------
def _bandwidth(device: Any) -> float | None:
    if device is None:
        return None
    bw = tf.number(getattr(device, "mem_bandwidth_gbs", None))
    return bw if bw and bw > 0 else None


def _tf32_now() -> bool:
    """Whether float32 matmuls count at the TF32 roof, as :func:`devices.tf32_enabled` says; without
    importing torch when nothing has: its switches are then at their defaults (off) unless the
    environment overrides cuBLAS."""
    if "torch" in sys.modules:
        from .devices import tf32_enabled

        return tf32_enabled()
    return os.environ.get("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "").strip() == "1"


def _peak(device: Any, dtype: Any, matmul: bool) -> float | None:
    """The roof for ``dtype`` (torch.dtype or its name) on ``device`` (rows keyed either way); the
    rules of :func:`devices.matmul_peak_tflops` / :func:`devices.vector_peak_tflops`, by name."""
    from .device_table import dtype_name, matmul_peak_tflops, vector_peak_tflops

    if dtype is None:
        return None
    try:
        name = dtype_name(dtype)
        value = (matmul_peak_tflops(device, name, tf32=name == "float32" and _tf32_now()) if matmul
                 else vector_peak_tflops(device, name))
    except (KeyError, LookupError, ValueError, TypeError, AttributeError):
        value = None
    value = tf.number(value)
    return value if value and value > 0 else None


@functools.lru_cache(maxsize=None)
def _roofline_classify() -> Callable[..., Any]:
    # Looked up once: an import statement per augmented event costs ~10% of augmenting.
    from .roofline import classify

    return classify


def _classify(flops: int, nbytes: int, dur_us: float, peak_tflops: float | None,
              bandwidth_gbs: float | None) -> Any:
    try:
        return _roofline_classify()(flops, nbytes, dur_us, peak_tflops, bandwidth_gbs)
    except (ValueError, ZeroDivisionError, OverflowError) as e:
        log.debug("roofline.classify failed: %s", e)
        return None


# --- offline attribution -------------------------------------------------------------------------
def costs_from_shapes(trace: dict) -> tuple[dict[int, EventCost], AugmentStats]:
    """Costs of a plain torch.profiler trace (``record_shapes=True``) from recorded op shapes.

    See :func:`inductor_perf.op_costs.costs_from_shapes`.
    """
    from .op_costs import costs_from_shapes as _impl

    return _impl(trace)


# --- file glue -----------------------------------------------------------------------------------
def default_output_path(in_path: str | os.PathLike) -> str:
    """``run.pt.trace.json.gz`` -> ``run.pt.trace.augmented.json.gz`` (same directory)."""
    p = os.fspath(in_path)
    for ext in (".json.gz", ".json"):
        if p.endswith(ext):
            return p[: -len(ext)] + ".augmented" + ext
    return p + ".augmented.json"


def device_from_trace(trace: dict) -> tuple[Any, str | None]:
    """The device row for the trace's GPU (from ``deviceProperties``) and a note when there is none.

    Without torch imported the row is :func:`device_table.lookup`'s (peaks keyed by dtype name), so
    offline augmenting never imports torch; with torch imported it is :func:`devices.lookup_device`'s
    (keyed by torch.dtype). Same row, same numbers."""
    props = trace.get("deviceProperties")
    names = []
    if isinstance(props, list):
        names = [d.get("name") for d in props if isinstance(d, dict) and isinstance(d.get("name"), str)]
    if not names:
        return None, ("no GPU in the trace's deviceProperties: achieved % left out (peaks of the machine "
                      "that recorded a CPU trace are unknown)")
    name = names[0]
    if "torch" in sys.modules:
        from .devices import lookup_device
    else:
        from .device_table import lookup as lookup_device

    try:
        spec = lookup_device(name)
    except (KeyError, LookupError, ValueError) as e:
        log.debug("lookup_device(%r): %s", name, e)
        spec = None
    if spec is None:
        return None, f"unknown device {name!r}: achieved % left out"
    return spec, None


class _Progress:
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


_ARGS_MEMBER = re.compile(rb'"args"\s*:\s*\{')
_ADDED_KEYS = frozenset(tf.ADDED_ARG_KEYS)

FAST_PATH_MIN_BYTES = 50_000_000
"""Traces whose JSON text is at least this large (:func:`trace_format.text_size`: a ``.gz`` file
counts uncompressed) are augmented by :func:`_augment_file_fast` when orjson is installed: events
are parsed one at a time and only the augmented ones are re-encoded."""


def augment_file(in_path: str | os.PathLike, out_path: str | os.PathLike | None = None,
                 device: "DeviceSpec | None" = None, *, progress: bool = False,
                 fast: bool | None = None) -> AugmentStats:
    """Load ``in_path``, attribute costs from recorded shapes, augment, and write ``out_path``.

    ``out_path`` defaults to :func:`default_output_path`; it may never be the input file. The
    device defaults to the GPU named in the trace's ``deviceProperties``. ``fast`` picks the
    streaming path (None: for files of :data:`FAST_PATH_MIN_BYTES` or more); it falls back to the
    full load whenever the file's layout is not the one it expects, and writes the same JSON.
    """
    src = os.fspath(in_path)
    dst = os.fspath(out_path) if out_path is not None else default_output_path(src)
    if os.path.abspath(src) == os.path.abspath(dst) or (
            os.path.exists(dst) and os.path.exists(src) and os.path.samefile(src, dst)):
        raise TraceFormatError(f"{dst}: the output must not be the input trace")
    show = _Progress(progress)
    from .op_costs import warm_up

    warm_up()
    if fast is None:
        try:
            fast = tf.text_size(src) >= FAST_PATH_MIN_BYTES  # a .gz file by its JSON's size
        except OSError:
            fast = False  # let the normal path say what is wrong with the path
    try:
        if fast:
            with tf.gc_paused():
                result = _augment_file_fast(src, dst, device, show)
            if result is not None:
                return result
            log.info("%s: layout not the expected one; loading the whole trace", src)
        return _augment_file_full(src, dst, device, show)
    finally:
        show.done()


def _augment_file_full(src: str, dst: str, device: Any, show: _Progress) -> AugmentStats:
    show("loading")
    loaded = tf.read_trace(src)
    with tf.gc_paused():
        # Attribution and augmentation create many small dicts and free none of them.
        show("attributing")
        costs, stats = costs_from_shapes(loaded.trace)
        note = None
        if device is None:
            device, note = device_from_trace(loaded.trace)
        show("augmenting")
        new, astats = augment_trace(loaded.trace, costs, device, device_events_only=True)
        show("writing", 0.0)
        tf.save_trace(new, dst, progress=lambda f: show("writing", f))
    return _final_stats(astats, stats, note, loaded.non_finite)


def _final_stats(astats: AugmentStats, stats: AugmentStats, note: str | None, non_finite: int) -> AugmentStats:
    astats.merge_from(stats)
    astats.events = stats.events
    astats.non_finite_inputs += non_finite
    if note and astats.events_augmented:
        astats.notes.append(note)
    return astats


PARALLEL_MIN_BYTES = FAST_PATH_MIN_BYTES
"""On the fast path, traces whose JSON text is at least this large are worked on by two processes where
``os.fork`` exists: a forked worker parses and indexes the later part of the events, then renders
and writes (or compresses, for ``.gz`` output) the later part of the output, while this process
does the earlier parts."""

_JOIN_SHARE = 0.47
"""The worker's share of the events to parse: a little under half, since it also pickles its index."""
_WRITE_SHARE = 0.57
"""The worker's share of the augmented events to write."""
_WRITE_SHARE_GZ = 0.53
"""The same for ``.gz`` output, where compressing dominates the write."""

WORKER_MAXRSS_KB: list[int] = []
"""Peak RSS (KB, from ``wait4``) of the workers forked by the latest fast-path run. A forked worker's
RSS also counts the pages it still shares with its parent, so the parent's peak plus these is an
upper bound on what the two used together."""


_CLOCK: dict[str, Any] = {"t0": 0.0, "who": "main", "marks": None}
"""When the fast path began, which process this is (the worker sets "who" after the fork), and the
worker's stage marks ("marks": a list in the worker when the parent logs at debug level, else None)."""


def _mark(what: str) -> None:
    """Debug log of the fast path's stages (``inductor-perf -v augment``): seconds since it began, per
    process. The worker never logs (see :class:`_Worker`): it keeps its marks for the parent to log."""
    if _CLOCK["who"] == "worker":
        marks = _CLOCK["marks"]
        if marks is not None:
            marks.append((time.perf_counter() - _CLOCK["t0"], what))
    elif log.isEnabledFor(logging.DEBUG):
        log.debug("fast path [main] %.3f s: %s", time.perf_counter() - _CLOCK["t0"], what)


def _log_worker_marks(marks: list[tuple[float, str]] | None) -> None:
    """Log the marks the worker sent back (perf_counter is one clock for both processes)."""
    for t, what in marks or ():
        log.debug("fast path [worker] %.3f s: %s", t, what)


class _WorkerGone(Exception):
    """The worker died or closed its pipe before answering."""


_FORK_WARNING = r"This process \(pid=\d+\) is multi-threaded, use of fork\(\) may lead to deadlocks"
"""The start of the DeprecationWarning Python 3.12+ gives for ``os.fork()`` with other threads alive."""


class _Worker:
    """A forked helper for :func:`_augment_file_fast`; see :func:`_worker_main` for what it does.

    The input bytes and span arrays are shared with it copy-on-write; what goes back and forth
    (its join index, the costs of its events and their peaks, three counters) is pickled through two
    pipes.

    It is forked whatever other threads run (torch 2.15 starts some when imported; callers have their
    own). The child has only the thread that forked, and a lock another thread held at the fork stays
    held in the child for good, so the child runs only code that needs no such lock:

    - it loads no module: all it uses is imported before the fork (this module's imports, and orjson,
      CostJoin and classify in :func:`_augment_raw`), so an import statement it runs is a lookup in
      ``sys.modules`` (CPython takes a module's lock only while that module is being imported);
    - it never logs: :func:`_mark` keeps its marks for the parent, and logging is disabled in it for
      other modules' debug lines (a handler could need a lock of its own or its stream's; the logging
      lock that disabling takes is reinitialised in the child by logging's own fork hook);
    - it looks up no device (the device table has a lock and logs; the TF32 switches are torch's): the
      parent sends it the peaks it needs (:class:`_Roofs`). It touches no torch;
    - it ends in ``os._exit`` (no atexit handlers, no flushing of buffers it inherited), without
      leaving the ``catch_warnings`` block around the fork (which would restore the filters).
    """

    def __init__(self, main: Callable[..., None], *args: Any) -> None:
        """Fork; the child runs ``main(*args, rx, tx)`` with its ends of the pipes, then exits."""
        p2c_r, p2c_w = os.pipe()
        c2p_r, c2p_w = os.pipe()
        _CLOCK["marks"] = [] if log.isEnabledFor(logging.DEBUG) else None  # the child's copy fills
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
                    _CLOCK["who"] = "worker"
                    logging.disable(logging.CRITICAL)
                    os.close(p2c_w)
                    os.close(c2p_r)
                    with os.fdopen(p2c_r, "rb") as rx, os.fdopen(c2p_w, "wb") as tx:
                        main(*args, rx, tx)
                    code = 0
                except BaseException:  # noqa: BLE001 - the parent sees the pipe close and does the work
                    pass
                finally:
                    os._exit(code)
        _CLOCK["marks"] = None
        os.close(p2c_r)
        os.close(c2p_w)
        self.pid = pid
        self.tx = os.fdopen(p2c_w, "wb")
        self.rx = os.fdopen(c2p_r, "rb")

    def send(self, obj: Any) -> None:
        try:
            _put(self.tx, obj)
        except (OSError, pickle.PicklingError, TypeError) as e:  # BrokenPipeError: the worker is gone
            raise _WorkerGone() from e

    def recv(self) -> Any:
        try:
            return _get(self.rx)
        except (OSError, EOFError) as e:
            raise _WorkerGone() from e

    def close(self, kill: bool = False) -> None:
        """Close both pipes (a worker waiting for work then exits) and reap the worker; ``kill``
        first stops it (its work is no longer wanted)."""
        if kill:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
        for f in (self.tx, self.rx):
            try:
                f.close()
            except OSError:
                pass
        _pid, status, usage = os.wait4(self.pid, 0)
        WORKER_MAXRSS_KB.append(usage.ru_maxrss)
        if status != 0:
            log.info("fast-path worker exited with status %s", status)


def _put(f: Any, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(len(data).to_bytes(8, "little"))
    f.write(data)
    f.flush()


def _get(f: Any) -> Any:
    head = f.read(8)
    if len(head) != 8:
        raise EOFError("pipe closed")
    size = int.from_bytes(head, "little")
    data = f.read(size)
    if len(data) != size:
        raise EOFError("pipe closed")
    return pickle.loads(data)


@dataclass(frozen=True)
class _Roofs:
    """Stands in for the device in the worker's :func:`_emit`: the bandwidth (:func:`_bandwidth`) and,
    looked up by the parent, the peak of each ``(dtype, matmul)`` key of the costs it renders."""

    mem_bandwidth_gbs: float | None
    peaks: dict[tuple[Any, bool], float | None]


def _roofs(device: Any, costs: Iterable[EventCost]) -> _Roofs | None:
    """The :class:`_Roofs` of ``device`` for ``costs`` (None without a device)."""
    if device is None:
        return None
    keys = {(c.dtype, c.matmul_flops > 0) for c in costs}
    return _Roofs(_bandwidth(device), {k: _peak(device, k[0], k[1]) for k in keys})


def _worker_main(raw: bytes, gz: bool, start: int, cut: int, join_type: Callable[..., Any], rx: Any,
                 tx: Any) -> None:
    """In the forked worker: split the events array from ``cut`` (:func:`trace_format.event_cut`)
    to its end, take the number of events before the cut from the parent, index its events under
    their global numbers in a ``join_type`` (:class:`op_costs.CostJoin`) and send back the spans
    and the join state (None: the layout is not the expected one); then parse its kernels while the
    parent finishes the join and, if asked, render the later part of the output with the peaks the
    parent sends and write it into the output file where the parent's part ends (for ``.gz`` output:
    compress it and send it to the parent). :class:`_Worker` says what it must not do."""
    _mark("worker started")
    last = None if tf.events_key_in(raw, cut - 1, len(raw)) else tf.split_last_events(raw, cut - 1)
    _mark("worker split")
    base = _get(rx)
    if last is None:
        _put(tx, None)
        return
    starts, ends, end = last
    part = join_type(load=lambda i: None)  # never finished here: the parent reads events back
    if not _join_range(raw, starts, ends, 0, len(starts), part, base):
        _put(tx, None)
        return
    _mark("worker indexed")
    _put(tx, (end, starts.tobytes(), ends.tobytes(), part.state()))
    _mark("worker sent index")
    # While the parent merges and finishes the join: parse the kernels, which most augmented
    # events are, for the write.
    pre = _preparse(raw, starts, ends, part.kernels, base)
    del part
    _mark("worker pre-parsed kernels")
    job = _get(rx)
    if job is None:
        return
    costs, starts_before, ends_before, gz, roofs = job
    starts_all, ends_all = array("q"), array("q")
    starts_all.frombytes(starts_before)
    ends_all.frombytes(ends_before)
    if len(starts_all) != base:
        raise AssertionError("span count mismatch")  # the parent then writes this part itself
    starts_all.extend(starts)
    ends_all.extend(ends)
    starts, ends, base = starts_all, ends_all, 0
    del starts_before, ends_before
    _mark("worker got costs")
    astats = AugmentStats()
    pieces = _Pieces()
    at = _emit(raw, starts, ends, sorted(costs), costs, roofs, astats, pieces, -1, None, pre, base)
    pieces.write(memoryview(raw)[at:])
    del pre
    _mark("worker rendered its part")
    counts = (astats.events_augmented, astats.nonpositive_dur, astats.peaks_known)
    if gz:
        # A deflate stream of its own; the parent puts it after its part, and the CRC of the whole
        # text continues from the parent's.
        deflate = tf.deflate_raw()
        body = [deflate.compress(p) for p in pieces]
        body.append(deflate.flush())
        crc, size = _crc_and_size(pieces, _get(rx))
        _mark("worker compressed its part")
        _put(tx, (b"".join(body), crc, size, counts, _CLOCK["marks"]))
        return
    where = _get(rx)  # the output file, and where in it the parent's part ends
    if where is None:
        return
    path, offset = where
    with open(path, "r+b", buffering=tf._WRITE_BUFFER) as out:
        out.seek(offset)
        out.writelines(pieces)
    _mark("worker wrote its part")
    _put(tx, (counts, _CLOCK["marks"]))


def _join_range(raw: bytes, starts: Any, ends: Any, lo: int, hi: int, join: Any, base: int = 0) -> bool:
    """Parse events ``lo..hi-1`` of the spans and feed them to ``join`` as events ``base + i``; False
    when one is not a JSON object (a split inside a string, NaN/Infinity...: the full path decides)."""
    import orjson

    loads = orjson.loads
    add, later = join.add, join.flows_later
    try:
        for i in range(lo, hi):
            ev = loads(raw[starts[i]:ends[i]])
            if type(ev) is not dict:
                return False
            ph = ev.get("ph")
            if ph == "X":
                add(i + base, ev)
            elif ph == "s" or ph == "f":
                later.append(i + base)  # parsed again in finish() only if a kernel needs flows
    except orjson.JSONDecodeError:
        return False
    return True


def _augment_file_fast(src: str, dst: str, device: Any, show: _Progress) -> AugmentStats | None:
    """Augment ``src`` into ``dst`` without holding every event as a dict, or None (nothing written)
    when the file's layout is not the one :func:`trace_format.split_trace_file` expects.

    Pass 1 parses each event's bytes and keeps only what the cost join reads; pass 2 copies the
    bytes of unchanged events and re-encodes the augmented ones. Large inputs share both passes
    with a forked worker (:data:`PARALLEL_MIN_BYTES`).
    """
    _CLOCK.update(t0=time.perf_counter(), who="main")
    show("loading")
    read = tf.read_trace_bytes(src, map_file=True)
    if read is None:
        return None
    raw, gz = read
    try:
        return _augment_raw(raw, gz, src, dst, device, show)
    finally:
        if not isinstance(raw, bytes):
            with contextlib.suppress(BufferError):  # a view still open: the map goes with the last one
                raw.close()


def _augment_raw(raw: Any, gz: bool, src: str, dst: str, device: Any, show: _Progress) -> AugmentStats | None:
    """:func:`_augment_file_fast` on the text of ``src`` (bytes, or a read-only map of the file)."""
    import orjson

    from .op_costs import CostJoin

    # The text "traceEvents" must occur once: this process looks for a second one up to the cut,
    # the worker after it.
    start = tf.events_array_start(raw, unique=False)
    if start is None:
        return None
    _mark("read")
    WORKER_MAXRSS_KB.clear()
    worker = None
    cut = None
    if hasattr(os, "fork") and len(raw) >= PARALLEL_MIN_BYTES:
        # The worker splits and parses the events after the cut; this process, those before it.
        cut = tf.event_cut(raw, start, 1.0 - _JOIN_SHARE)
        if cut is not None:
            _roofline_classify()  # imported here, as orjson and CostJoin above: the worker imports nothing
            try:
                worker = _Worker(_worker_main, raw, gz, start, cut, CostJoin)
            except OSError as e:
                log.info("no fast-path worker (%s); working in one process", e)
    try:
        loads = orjson.loads
        if worker is None or cut is None:
            if tf.events_key_in(raw, start, len(raw)):
                return None
            last = tf.split_last_events(raw, start)
            if last is None:
                return None
            starts, ends, end = last
        else:
            if tf.events_key_in(raw, start, cut - 1):
                return None
            starts, ends = tf.split_events(raw, start, cut)
            end = -1
            with contextlib.suppress(_WorkerGone):  # a dead worker shows at recv() below
                worker.send(len(starts))
        _mark("split")
        show("attributing")
        mid = len(starts)
        join = CostJoin(load=lambda i: loads(raw[starts[i]:ends[i]]))
        if not _join_range(raw, starts, ends, 0, mid, join):
            return None
        _mark("indexed")
        if worker is not None and cut is not None:
            try:
                got = worker.recv()
            except _WorkerGone:
                log.warning("the fast-path worker failed; parsing its part here")
                worker.close()
                worker = None
                last = None if tf.events_key_in(raw, cut - 1, len(raw)) else tf.split_last_events(raw, cut - 1)
                if last is None:
                    return None
                starts.extend(last[0])
                ends.extend(last[1])
                end = last[2]
                if not _join_range(raw, starts, ends, mid, len(starts), join):
                    return None
            else:
                if got is None:
                    return None
                end = got[0]
                starts.frombytes(got[1])
                ends.frombytes(got[2])
                _mark("received the worker's index")
                join.merge(got[3])
                del got
                _mark("merged")
        split = tf.framed_split(raw, gz, start, end, starts, ends)
        if split is None:
            return None
        n = len(split)
        note = None
        if device is None:
            device, note = device_from_trace(split.header)
        if not n:
            log.warning("%s: the trace has no events", src)
        costs, stats = join.finish(n)
        _mark("joined")
        # Freeing the join's index takes a while: done while the worker writes its part.
        held = [join]
        del join
        show("augmenting")
        astats = AugmentStats(events=n)
        astats.device_name = getattr(device, "name", None) if device is not None else None
        todo = sorted(costs)
        gz_out = dst.endswith(".gz")

        def write(out: Any, path: str) -> None:
            nonlocal worker
            k = len(todo)
            if worker is not None and k >= 2:
                k -= int(k * (_WRITE_SHARE_GZ if gz_out else _WRITE_SHARE))
                later = {i: costs[i] for i in todo[k:]}
                try:
                    # its part may begin before the cut: it gets the spans it lacks
                    worker.send((later, starts[:mid].tobytes(), ends[:mid].tobytes(), gz_out,
                                 _roofs(device, later.values())))
                except _WorkerGone:
                    k = len(todo)
                _mark("sent the worker its costs")
            if worker is None or k == len(todo):
                if worker is not None:
                    with contextlib.suppress(_WorkerGone):
                        worker.send(None)  # nothing for it to do
                    worker.close()
                    worker = None
                with tf.gzip_writer(out) if gz_out else contextlib.nullcontext(out) as sink:
                    at = _emit(raw, starts, ends, todo, costs, device, astats, sink, 0, show)
                    sink.write(memoryview(raw)[at:])
                return
            # Both processes write: this process renders its part first, while the worker renders
            # its own.
            pieces = _Pieces()
            at = _emit(raw, starts, ends, todo[:k], costs, device, astats, pieces, 0, show)
            pieces.write(memoryview(raw)[at:starts[todo[k]]])
            if gz_out:
                _write_gzip_parts(out, pieces, worker, lambda sink: _emit(
                    raw, starts, ends, todo[k:], costs, device, astats, sink, -1, None), raw, astats,
                    while_waiting=held.clear)
                return
            # Plain JSON: the worker writes its part into the output file where this one ends.
            offset = out.tell() + sum(map(len, pieces))
            with contextlib.suppress(_WorkerGone):  # noticed at recv() below
                worker.send((path, offset))
            out.writelines(pieces)
            del pieces
            _mark("wrote the first part")
            # While the worker writes: this part starts going to disk (the fsync before the rename
            # then has less left to wait for), and the join's index is freed.
            out.flush()
            syncing = _start_sync(out.fileno())
            try:
                held.clear()
                try:
                    counts, marks = worker.recv()
                except _WorkerGone:
                    log.warning("the fast-path worker failed; writing its part here")
                    at = _emit(raw, starts, ends, todo[k:], costs, device, astats, out, -1, None)
                    out.write(memoryview(raw)[at:])
                else:
                    _add_counts(astats, counts)
                    _log_worker_marks(marks)
                    _mark("the worker wrote its part")
            finally:
                syncing.join()  # before the file is closed

        tf.write_atomic(dst, write, with_path=True, compress=False)  # write() compresses .gz itself
        _mark("renamed")
        if worker is not None:
            worker.close()
            worker = None
    finally:
        if worker is not None:  # given up on (fallback or error): stop it now
            worker.close(kill=True)
    return _final_stats(astats, stats, note, 0)


def _add_counts(astats: AugmentStats, counts: tuple[int, int, bool]) -> None:
    """Add the worker's counts (events augmented, durations not positive, peaks known) to ``astats``."""
    astats.events_augmented += counts[0]
    astats.nonpositive_dur += counts[1]
    astats.peaks_known = astats.peaks_known or counts[2]


def _crc_and_size(pieces: list, crc: int = 0) -> tuple[int, int]:
    """CRC-32 of the pieces' bytes, continued from ``crc``, and their total length."""
    for p in pieces:
        crc = zlib.crc32(p, crc)
    return crc, sum(map(len, pieces))


def _write_gzip_parts(out: Any, pieces: list, worker: "_Worker", emit_rest: Callable[[Any], int], raw: Any,
                      astats: AugmentStats, while_waiting: Callable[[], None]) -> None:
    """Write one gzip member holding ``pieces`` (this process's part of the output) followed by the
    worker's part, which the worker compresses meanwhile as a deflate stream of its own: this part
    ends with a sync flush, the worker's with the final block, and the trailer's CRC runs over both
    (the worker continues it from this part's). If the worker fails, its part is rendered
    (``emit_rest(sink)`` returns where the input still to copy begins) and compressed here."""
    crc, size = _crc_and_size(pieces)
    with contextlib.suppress(_WorkerGone):  # noticed at recv() below
        worker.send(crc)
    deflate = tf.deflate_raw()
    out.write(tf.GZIP_HEADER)
    for p in pieces:
        out.write(deflate.compress(p))
    pieces.clear()
    _mark("compressed the first part")
    while_waiting()
    try:
        body, crc_all, size_rest, counts, marks = worker.recv()
    except _WorkerGone:
        log.warning("the fast-path worker failed; writing its part here")
        rest = _Pieces()
        rest.write(memoryview(raw)[emit_rest(rest):])
        crc, size_rest = _crc_and_size(rest, crc)
        size += size_rest
        out.writelines(deflate.compress(p) for p in rest)
        out.write(deflate.flush())
    else:
        out.write(deflate.flush(zlib.Z_SYNC_FLUSH))
        out.write(body)
        crc, size = crc_all, size + size_rest
        _add_counts(astats, counts)
        _log_worker_marks(marks)
        _mark("appended the worker's compressed part")
    out.write(tf.gzip_trailer(crc, size))


def _start_sync(fd: int) -> threading.Thread:
    """Start writing the file's data so far to disk in a thread (errors are left to the final fsync)."""

    def sync() -> None:
        with contextlib.suppress(OSError):
            getattr(os, "fdatasync", os.fsync)(fd)

    t = threading.Thread(target=sync, name="inductor-perf-sync", daemon=True)
    t.start()
    return t


class _Pieces(list):
    """Stands in for a file in :func:`_emit`: keeps what is written (views of the input and
    encoded args), so that its length is known before any of it is written."""

    write = list.append


def _args_close(raw: bytes, ev: dict, s0: int, e0: int) -> int:
    """Where the closing brace of the args dict of event ``ev`` (``raw[s0:e0]``) is in ``raw``, or -1
    unless the args are a dict written as the event's last member (then our args can be spliced
    in there)."""
    import orjson

    args = ev.get("args")
    if type(args) is not dict or next(reversed(ev)) != "args" or not _ADDED_KEYS.isdisjoint(args):
        return -1
    close = raw.rfind(b"}", s0, e0 - 1)
    if close <= s0 or raw[close + 1:e0 - 1].strip():
        return -1
    # The object ending there must be the value of a last `"args":` member and parse to the same
    # dict (a duplicated key or a nested "args" fails this and the event is re-encoded instead).
    k = raw.rfind(b'"args"', s0, close)
    m = _ARGS_MEMBER.match(raw, k) if k > s0 and raw[k - 1] != 0x5C else None
    if m is None:
        return -1
    try:
        same = orjson.loads(raw[m.end() - 1:close + 1]) == args
    except orjson.JSONDecodeError:
        return -1
    return close if same else -1


def _preparse(raw: bytes, starts: Any, ends: Any, indices: Any, base: int = 0) -> dict[int, tuple[dict, int]]:
    """``{i: (event, _args_close(...))}`` for the events ``indices``: the worker does this for its
    kernels while it waits for the costs (most of them get augmented)."""
    import orjson

    loads = orjson.loads
    out = {}
    for i in indices:
        s0, e0 = starts[i - base], ends[i - base]
        ev = loads(raw[s0:e0])
        out[i] = (ev, _args_close(raw, ev, s0, e0))
    return out


def _emit(raw: bytes, starts: Any, ends: Any, todo: list[int], costs: Mapping[int, EventCost], device: Any,
          astats: AugmentStats, out: Any, at: int, show: _Progress | None,
          pre: Mapping[int, tuple[dict, int]] | None = None, base: int = 0) -> int:
    """Write the augmented events ``todo`` (ascending indices) to ``out`` with the input bytes
    between them, starting from ``raw[at:]`` (``at`` -1: from the first event's start); return
    where the input bytes still to copy begin. ``pre`` has some events already parsed (:func:`_preparse`); the spans of
    event ``i`` are at ``i - base``."""
    import orjson

    loads = orjson.loads
    # The worker's device is a _Roofs: every peak it asks for is in the cache already.
    peak_cache: dict[tuple[Any, bool], float | None] = dict(device.peaks) if type(device) is _Roofs else {}
    bandwidth = _bandwidth(device)
    enc = tf._encoder()
    static: dict[int, tuple[EventCost, dict[str, Any], dict[str, Any], int, int]] = {}
    roofs: dict[tuple[int, float], str | None] = {}
    # The inline roofline is used where no ratio can overflow or underflow to 0 (classify's
    # _finite() checks are then no-ops); anything else goes through classify itself.
    bw_ok = bandwidth is not None and _IN_RANGE[0] <= bandwidth <= _IN_RANGE[1]
    scope_cats = tf.CPU_SCOPE_CATS

    def spliced(ev: dict, cost: EventCost) -> bytes:
        """Our args for ``ev`` as the bytes to insert before its args' closing brace."""
        args = ev["args"]
        entry = static.get(id(cost))
        if entry is None:
            head, tail = _static_args(cost)
            entry = static[id(cost)] = (cost, head, tail, int(cost.flops),
                                        int(cost.bytes_read) + int(cost.bytes_written))
        _c, head, tail, flops, nbytes = entry
        cat = ev.get("cat")
        use_device = device is not None and not (isinstance(cat, str) and cat.lower() in scope_cats)
        peak = None
        if use_device:
            key = (cost.dtype, cost.matmul_flops > 0)
            if key not in peak_cache:
                peak_cache[key] = _peak(device, cost.dtype, cost.matmul_flops > 0)
            peak = peak_cache[key]
            if peak is not None:
                astats.peaks_known = True
        dur = ev.get("dur")
        if type(dur) is not float or not dur > 0.0 or dur - dur != 0.0:
            dur = tf.number(dur)
            if dur is None or dur <= 0:
                astats.nonpositive_dur += 1
                dur = None
        astats.events_augmented += 1
        if (dur is not None and peak is not None and bw_ok and use_device and 0 <= flops < _SAFE_INT
                and 0 <= nbytes < _SAFE_INT and _IN_RANGE[0] <= dur <= _IN_RANGE[1]
                and _IN_RANGE[0] <= peak <= _IN_RANGE[1]):
            rkey = (id(cost), peak)
            roof = roofs.get(rkey, roofs)
            if roof is roofs:
                roof = roofs[rkey] = _roof(flops, nbytes, peak, bandwidth)
            body = enc(_args_inline(head, tail, flops, nbytes, dur, peak, bandwidth, roof))
        else:
            body = enc(_args_for(head, tail, flops, nbytes, dur, peak, bandwidth if use_device else None))
        # body is "{...}": its inside goes in, after a comma unless the event's args are empty
        return body[1:-1] if not args else b"," + body[1:-1]

    # Everything between two augmented events is copied from the input as it is. An augmented
    # event whose args come last gets our args spliced in before the args' closing brace (same
    # JSON as re-encoding it, without copying the event); others are re-encoded one at a time
    # (orjson's output keeps its ~4 KB buffer alive, so holding 150k of them would cost more
    # than the whole input).
    view = memoryview(raw)
    if at < 0:
        at = starts[todo[0] - base] if todo else 0
    for done, i in enumerate(todo):
        s0, e0 = starts[i - base], ends[i - base]
        got = pre.get(i) if pre else None
        if got is None:
            ev = loads(raw[s0:e0])
            close = _args_close(raw, ev, s0, e0)
        else:
            ev, close = got
        cost = costs[i]
        if close >= 0:
            out.write(view[at:close])
            out.write(spliced(ev, cost))
            at = close
        else:
            out.write(view[at:s0])
            # a tight copy: orjson's output keeps its ~4 KB buffer, and _Pieces holds what it is given
            out.write(memoryview(enc(_augment_event(ev, cost, device, True, peak_cache, bandwidth, astats))).tobytes())
            at = e0
        if show is not None and done % 20_000 == 0:
            show("writing", done / len(todo))
    view.release()
    return at
