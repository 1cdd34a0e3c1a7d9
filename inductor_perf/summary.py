"""Utilization summary of an (augmented) Kineto trace: pure data in, data out.

``summarize(trace_dict)`` answers: how busy was the device, on which kernels, how close to the peak,
which modules and source lines cost the time, and what the host was doing while the device sat idle.
No file I/O here; :mod:`inductor_perf.report` renders the result, :mod:`inductor_perf.cli` loads files.

Example::

    >>> s = summarize({"traceEvents": [
    ...     {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 10, "pid": 1, "tid": 1}]})
    >>> s.busy_pct
    100.0
"""

from __future__ import annotations

import bisect
import logging
import math
import re
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping

from . import trace_format as tf

log = logging.getLogger(__name__)

# --- Which events are kernels ---------------------------------------------------------------------
GPU_KERNEL_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"})
"""Device-side activity categories (older Kineto wrote ``Kernel`` / ``Memcpy`` / ``Memset``)."""

# The profiler's own whole-window span; counting it would stretch the window to profiler start-up.
_IGNORED_CATS = frozenset({"trace"})

GRAPH_CALL_PREFIX = "## Call CompiledFxGraph"

DEF_GPU = "gpu-kernels"
DEF_CPU_COMPILED = "cpu-compiled-kernels"
DEF_CPU_EAGER = "cpu-eager-aten"
DEF_NONE = "none"
KERNEL_DEFINITIONS = {
    DEF_GPU: "GPU device events (cat kernel / gpu_memcpy / gpu_memset)",
    DEF_CPU_COMPILED: ("CPU kernels launched by compiled graphs: events with kernel_flop, graph_<N>_* "
                       "events, and outermost aten ops inside '## Call CompiledFxGraph' calls"),
    DEF_CPU_EAGER: "outermost aten:: ops on each CPU thread (no compiled-graph kernels in this trace)",
    DEF_NONE: "no kernel events found",
}

# --- Time split ---------------------------------------------------------------------------------------
KIND_GENERATED = "generated"
KIND_EXTERN_MATMUL = "extern_matmul"
KIND_OTHER = "other"
KINDS = (KIND_GENERATED, KIND_EXTERN_MATMUL, KIND_OTHER)

_GENERATED_NAME = re.compile(r"^(graph_\d+_|triton_)")
_GRAPH_KERNEL_NAME = re.compile(r"^graph_\d+_")

# Exact op names (namespace "aten::" stripped) of matmul / conv / attention externs. Exact names,
# never substrings: "triton_poi_fused_convolution_0" must not count as a convolution.
_MATMUL_OPS = frozenset({
    "mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "_int_mm", "_scaled_mm",
    "conv1d", "conv2d", "conv3d", "convolution", "_convolution", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "convolution_backward", "cudnn_convolution", "cudnn_convolution_transpose",
    "mkldnn_convolution", "mkldnn::_convolution_pointwise", "mkldnn::_convolution_transpose_pointwise",
    "mkldnn::_linear_pointwise", "mkl::_mkl_linear",
    "scaled_dot_product_attention", "_scaled_dot_product_attention_math",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention_for_cpu_backward",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_efficient_attention_backward",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_cudnn_attention_backward",
    "_flash_attention_forward", "_flash_attention_backward",
    "_efficient_attention_forward", "_efficient_attention_backward",
})
# cpp_wrapper calls externs through C shims such as ``aoti_torch_cpu_addmm_out``.
_SHIM_NAME = re.compile(r"^aoti_torch_(?:cpu|cuda|xpu|mps)_(.+?)(?:_out)?$")


def kernel_kind(name: str, args: Mapping[str, Any] | None = None) -> str:
    """Bucket of one kernel: ``generated``, ``extern_matmul`` or ``other``.

    The ``kernel_kind`` arg (written by augmentation) wins; otherwise the name decides, by prefix for
    generated kernels and by exact op name for externs.

    >>> kernel_kind("graph_0_cpp_fused_convolution_0"), kernel_kind("aten::convolution")
    ('generated', 'extern_matmul')
    """
    args = args or {}
    kind = args.get(tf.KERNEL_KIND)
    if kind == "generated":
        return KIND_GENERATED
    if kind == "extern":
        matmul_flop = _num(args.get(tf.KERNEL_MATMUL_FLOP))
        if _is_matmul_name(name) or (matmul_flop is not None and matmul_flop > 0):
            return KIND_EXTERN_MATMUL
        return KIND_OTHER
    if _GENERATED_NAME.match(name):
        return KIND_GENERATED
    return KIND_EXTERN_MATMUL if _is_matmul_name(name) else KIND_OTHER


def _is_matmul_name(name: str) -> bool:
    op = name[len("aten::"):] if name.startswith("aten::") else name
    shim = _SHIM_NAME.match(op)
    if shim:
        op = shim.group(1)
    return op in _MATMUL_OPS


# --- Result data model ----------------------------------------------------------------------------
@dataclass
class KernelRow:
    """One kernel name, aggregated over its calls."""

    name: str
    kind: str
    count: int
    total_us: float
    mean_us: float
    share_of_busy_pct: float | None
    flop: float | None
    """Sum of ``kernel_flop`` over the calls that carry it; None when none do."""
    gb: float | None
    achieved_tflops: float | None
    achieved_gbps: float | None
    flops_pct: float | None
    """% of the compute peak: time-weighted ``achieved_flops_pct`` args, else computed from ``device``."""
    bandwidth_pct: float | None
    bound: str | None
    source: str | None
    module_path: str | None


@dataclass
class GroupRow:
    """A roll-up of kernels sharing a module path or a source line."""

    key: str
    count: int
    total_us: float
    share_of_busy_pct: float | None
    flop: float | None
    gb: float | None
    achieved_tflops: float | None


@dataclass
class GapRow:
    """One idle span of the device (no kernel running on any kernel timeline)."""

    start_us: float
    """Offset from the window start."""
    dur_us: float
    position: str
    """``leading`` (before the first kernel), ``between`` or ``trailing``."""
    prev_kernel: str | None
    next_kernel: str | None
    host_innermost: str | None
    """The deepest host event on the launching thread that covers most of the gap."""
    host_outermost: str | None
    """The top-level host event on the launching thread that overlaps most of the gap."""
    source: str | None
    """A Python frame around the host activity when the trace has one, else the next kernel's source."""


@dataclass
class IdleRow:
    """Idle time rolled up by what the host was doing (innermost host event name)."""

    host: str
    idle_us: float
    gaps: int
    share_of_idle_pct: float | None
    source: str | None


@dataclass
class PeakInfo:
    device: str | None
    dtype: str | None
    peak_tflops: float | None
    mem_bandwidth_gbs: float | None
    peak_source: str | None


@dataclass
class Summary:
    """Utilization summary of one trace (one rank). ``to_dict()`` is strict-JSON safe."""

    label: str | None
    kernel_definition: str
    kernel_definition_text: str
    window_start_us: float | None
    wall_us: float
    busy_us: float
    busy_pct: float | None
    idle_us: float
    kernel_count: int
    kernel_time_us: float
    """Sum of kernel durations (larger than ``busy_us`` when kernels overlap)."""
    timelines: int
    time_split_us: dict[str, float]
    time_split_pct: dict[str, float | None]
    flop: float | None
    gb: float | None
    flop_coverage_pct: float | None
    """Share of kernel time spent in kernels that carry ``kernel_flop``."""
    achieved_tflops: float | None
    achieved_gbps: float | None
    peak: PeakInfo
    flops_pct_of_peak: float | None
    bandwidth_pct_of_peak: float | None
    top_kernels: list[KernelRow]
    distinct_kernels: int
    modules: list[GroupRow]
    distinct_modules: int
    lines: list[GroupRow]
    distinct_lines: int
    gaps: list[GapRow]
    gap_count: int
    idle_by_host: list[IdleRow]
    distributed: dict[str, Any] | None
    events_total: int
    events_used: int
    skipped: dict[str, int]
    bad_args: int
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict; non-finite floats become None."""
        return _finite(asdict(self))


# --- Parsing --------------------------------------------------------------------------------------
class _Ev:
    __slots__ = ("name", "cat", "pid", "tid", "ts", "dur", "end", "args", "parent", "children",
                 "is_kernel")

    def __init__(self, name: str, cat: str, pid: Any, tid: Any, ts: float, dur: float,
                 args: dict[str, Any]) -> None:
        self.name = name
        self.cat = cat
        self.pid = pid
        self.tid = tid
        self.ts = ts
        self.dur = dur
        self.end = ts + dur
        self.args = args
        self.parent: _Ev | None = None
        self.children: list[_Ev] = []
        self.is_kernel = False


def _num(value: Any) -> float | int | None:
    """A finite number from a trace value, or None (bools, strings that are not numbers, NaN...)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            f = float(value)
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


def _hashable(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, type(None))) else repr(value)


def _parse(events: Iterable[Any], skipped: dict[str, int]) -> list[_Ev]:
    out: list[_Ev] = []
    for raw in events:
        if not isinstance(raw, dict):
            skipped["not an object"] += 1
            continue
        if raw.get("ph") != "X":
            continue  # metadata, flows, counters, instants: not durations, not errors
        cat = raw.get("cat")
        cat = cat if isinstance(cat, str) else ""
        if cat.lower() in _IGNORED_CATS:
            continue
        if "ts" not in raw or "dur" not in raw:
            skipped["missing ts/dur"] += 1
            continue
        ts, dur = _num(raw.get("ts")), _num(raw.get("dur"))
        if ts is None or dur is None:
            skipped["non-numeric ts/dur"] += 1
            continue
        if dur < 0:
            skipped["negative dur"] += 1
            continue
        if dur == 0:
            # An instant carries no time; keeping it would only add zero-width kernels.
            skipped["zero dur"] += 1
            continue
        args = raw.get("args")
        name = raw.get("name")
        out.append(_Ev(name if isinstance(name, str) else str(name), cat, _hashable(raw.get("pid")),
                       _hashable(raw.get("tid")), float(ts), float(dur),
                       args if isinstance(args, dict) else {}))
    return out


def _build_forest(events: list[_Ev]) -> dict[tuple[Any, Any], list[_Ev]]:
    """Nest each thread's events by time; returns the roots per (pid, tid).

    Children of one node never overlap in the attribution below; an event that only partly overlaps
    an open one (a malformed trace) is attached to the nearest ancestor that contains it.
    """
    by_thread: dict[tuple[Any, Any], list[_Ev]] = defaultdict(list)
    for e in events:
        by_thread[(e.pid, e.tid)].append(e)
    roots: dict[tuple[Any, Any], list[_Ev]] = {}
    for key, evs in by_thread.items():
        evs.sort(key=lambda e: (e.ts, -e.dur))
        stack: list[_Ev] = []
        top: list[_Ev] = []
        for e in evs:
            while stack and not (e.ts < stack[-1].end and e.end <= stack[-1].end + 1e-6):
                stack.pop()
            if stack:
                e.parent = stack[-1]
                stack[-1].children.append(e)
            else:
                top.append(e)
            stack.append(e)
        roots[key] = top
    return roots


def _walk(nodes: list[_Ev]) -> Iterable[_Ev]:
    todo = list(reversed(nodes))
    while todo:
        n = todo.pop()
        yield n
        todo.extend(reversed(n.children))


def _select_cpu_kernels(roots: dict[tuple[Any, Any], list[_Ev]]) -> tuple[list[_Ev], str]:
    compiled: list[_Ev] = []
    # (node, inside a compiled-graph call, below an aten op); iterative: real traces nest deeply.
    todo: list[tuple[_Ev, bool, bool]] = [(r, False, False) for top in roots.values() for r in top]
    while todo:
        node, in_call, under_op = todo.pop()
        is_op = node.name.startswith("aten::") or node.name.startswith("aoti_torch_")
        if (tf.KERNEL_FLOP in node.args or tf.KERNEL_KIND in node.args
                or _GRAPH_KERNEL_NAME.match(node.name) or (in_call and is_op and not under_op)):
            compiled.append(node)
            continue  # only the outermost kernel counts; its children are its own work
        in_call = in_call or node.name.startswith(GRAPH_CALL_PREFIX)
        todo.extend((c, in_call, under_op or is_op) for c in node.children)
    if compiled:
        return compiled, DEF_CPU_COMPILED
    eager: list[_Ev] = []
    for top in roots.values():
        for n in _walk(top):
            if n.name.startswith("aten::"):
                p = n.parent
                while p is not None and not p.name.startswith("aten::"):
                    p = p.parent
                if p is None:
                    eager.append(n)
    return eager, (DEF_CPU_EAGER if eager else DEF_NONE)


# --- Interval helpers ------------------------------------------------------------------------------
def _merge(kernels: list[_Ev]) -> list[tuple[float, float, _Ev, _Ev]]:
    """Union of kernel intervals: (start, end, first kernel, kernel that ends last)."""
    out: list[tuple[float, float, _Ev, _Ev]] = []
    for k in sorted(kernels, key=lambda e: (e.ts, -e.end)):
        if out and k.ts <= out[-1][1]:
            s, e, first, last = out[-1]
            if k.end > e:
                out[-1] = (s, k.end, first, k)
        else:
            out.append((k.ts, k.end, k, k))
    return out


def _overlapping(children: list[_Ev], starts: list[float], a: float, b: float) -> list[_Ev]:
    """Children (sorted by start, non-nested siblings) that overlap [a, b)."""
    hi = bisect.bisect_left(starts, b)
    lo = hi
    # Walk back while an earlier sibling may still reach past ``a``; siblings rarely overlap.
    while lo > 0 and children[lo - 1].end > a:
        lo -= 1
    return [c for c in children[lo:hi] if c.end > a]


class _Attributor:
    """Splits a time span on one thread among the deepest host events covering each instant."""

    def __init__(self, roots: list[_Ev]) -> None:
        self.roots = roots
        self._starts: dict[int, list[float]] = {}

    def _starts_of(self, owner: _Ev | None, children: list[_Ev]) -> list[float]:
        key = id(owner)
        if key not in self._starts:
            self._starts[key] = [c.ts for c in children]
        return self._starts[key]

    def attribute(self, a: float, b: float) -> tuple[dict[_Ev | None, float], dict[_Ev, float]]:
        """(innermost event -> time, top-level event -> overlap) within [a, b)."""
        inner: dict[_Ev | None, float] = defaultdict(float)
        outer: dict[_Ev, float] = {}
        todo: list[tuple[_Ev | None, list[_Ev], float, float]] = [(None, self.roots, a, b)]
        while todo:
            owner, children, lo, hi = todo.pop()
            covered = 0.0
            cursor = lo
            for c in _overlapping(children, self._starts_of(owner, children), lo, hi):
                s, e = max(cursor, c.ts), min(hi, c.end)
                if e <= s:
                    continue
                if owner is None:
                    outer[c] = outer.get(c, 0.0) + (e - s)
                if c.is_kernel:
                    # A kernel overlapping a gap belongs to another timeline's union; count as itself.
                    inner[c] += e - s
                else:
                    todo.append((c, c.children, s, e))
                covered += e - s
                cursor = e
            rest = (hi - lo) - covered
            if rest > 1e-9:
                inner[owner] += rest
        return inner, outer


# --- The summary ---------------------------------------------------------------------------------
def _device_peaks(device: Any, dtype: str) -> PeakInfo:
    if device is None:
        return PeakInfo(None, None, None, None, None)

    def get(attr: str) -> Any:
        if isinstance(device, Mapping):
            return device.get(attr)
        return getattr(device, attr, None)

    peaks = get("peak_tflops")
    peak = None
    if isinstance(peaks, Mapping):
        for k, v in peaks.items():
            # Keys are torch.dtype objects (or their names); compare by name to stay torch-free.
            if str(k).removeprefix("torch.") == dtype:
                peak = _num(v)
    elif _num(peaks) is not None:
        peak = _num(peaks)
    bw = _num(get("mem_bandwidth_gbs"))
    name = get("name")
    src = get("peak_source")
    return PeakInfo(str(name) if name is not None else None, dtype, peak if peak and peak > 0 else None,
                    bw if bw and bw > 0 else None, str(src) if src is not None else None)


def _pct(part: float | None, whole: float | None) -> float | None:
    if part is None or not whole:
        return None
    return round(100.0 * part / whole, 3)


def _r(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(x, nd)


def _g(x: float | None) -> float | None:
    """Six significant digits: rates and sizes span many orders of magnitude (CPU MFLOP/s to GPU PFLOP/s)."""
    return None if x is None or not math.isfinite(x) else float(f"{x:.6g}")


def _dominant(weights: Mapping[Any, float]) -> Any:
    best, best_w = None, -1.0
    for k, w in weights.items():
        if w > best_w:
            best, best_w = k, w
    return best


def _python_frame(ev: _Ev | None) -> str | None:
    while ev is not None:
        if ev.cat == "python_function":
            return ev.name
        ev = ev.parent
    return None


def headline_dtype(kernels: Iterable[Mapping[str, Any]]) -> str:
    """The dtype whose roof a trace's overall "% of peak" uses: of the ``kernel_dtype`` args the
    augmentation wrote, the one carrying the most matmul FLOPs, then the most FLOPs; float32 when
    no event says (a raw trace).

    >>> headline_dtype([{"kernel_dtype": "bfloat16", "kernel_matmul_flop": 8, "kernel_flop": 8},
    ...                 {"kernel_dtype": "float32", "kernel_matmul_flop": 0, "kernel_flop": 99}])
    'bfloat16'
    """
    totals: dict[str, list[float]] = {}
    for args in kernels:
        name = args.get(tf.KERNEL_DTYPE)
        if not isinstance(name, str):
            continue
        acc = totals.setdefault(name, [0.0, 0.0])
        acc[0] += _num(args.get(tf.KERNEL_MATMUL_FLOP)) or 0
        acc[1] += _num(args.get(tf.KERNEL_FLOP)) or 0
    return max(totals, key=lambda k: tuple(totals[k])) if totals else "float32"


def summarize(trace: Mapping[str, Any], *, device: Any = None, dtype: str | None = None,
              top: int = 20, label: str | None = None) -> Summary:
    """Summarize one Kineto / Chrome trace dict (one rank).

    ``device``: an object or mapping with ``name``, ``peak_tflops`` (dict keyed by torch.dtype or dtype
    name), ``mem_bandwidth_gbs`` and ``peak_source``; when given, overall and per-kernel achieved
    figures are compared with its ``dtype`` peak (default: :func:`headline_dtype` of the trace). ``top`` bounds each table's rows. Never raises on
    odd events: they are counted in ``skipped`` / ``bad_args`` instead.
    """
    from .errors import TraceFormatError

    if not isinstance(trace, Mapping):
        raise TraceFormatError(f"expected a trace dict with 'traceEvents', got {type(trace).__name__}")
    raw_events = trace.get("traceEvents", [])
    if not isinstance(raw_events, list):
        raise TraceFormatError("expected 'traceEvents' to be a list of event objects")
    skipped: dict[str, int] = defaultdict(int)
    events = _parse(raw_events, skipped)
    notes: list[str] = []

    device_events = [e for e in events if e.cat.lower() in GPU_KERNEL_CATS]
    host_events = [e for e in events if e.cat.lower() not in GPU_KERNEL_CATS and not e.cat.lower().startswith("gpu_")]
    roots = _build_forest(host_events)
    if device_events:
        kernels, definition = device_events, DEF_GPU
    else:
        kernels, definition = _select_cpu_kernels(roots)
    for k in kernels:
        k.is_kernel = True

    # Launching thread of each kernel: its own thread on CPU, the runtime call's thread on GPU.
    launcher: dict[int, tuple[Any, Any] | None] = {}
    if definition == DEF_GPU:
        by_corr: dict[Any, tuple[Any, Any]] = {}
        for e in host_events:
            corr = e.args.get("correlation")
            if corr is not None and e.cat in ("cuda_runtime", "cuda_driver", "hip_runtime"):
                by_corr[_hashable(corr)] = (e.pid, e.tid)
            if e.cat in ("cuda_runtime", "cuda_driver") and "GraphLaunch" in e.name:
                if "CUDA graphs" not in " ".join(notes):
                    notes.append("CUDA graphs replay kernels: per-kernel launches are hidden, so idle "
                                 "attribution sees only the graph launch")
        for k in kernels:
            launcher[id(k)] = by_corr.get(_hashable(k.args.get("correlation")))
    else:
        for k in kernels:
            launcher[id(k)] = (k.pid, k.tid)

    # --- window, busy, idle
    if events:
        w0 = min(e.ts for e in events)
        w1 = max(e.end for e in events)
    else:
        w0 = w1 = 0.0
    wall = w1 - w0
    merged = _merge(kernels)
    busy = sum(e - s for s, e, _, _ in merged)
    idle = max(0.0, wall - busy)
    kernel_time = sum(k.dur for k in kernels)
    timelines = len({(k.pid, k.tid) for k in kernels})

    # --- per-kernel numbers
    bad_args = 0

    def arg_num(k: _Ev, key: str) -> float | int | None:
        nonlocal bad_args
        if key not in k.args:
            return None
        v = _num(k.args[key])
        if v is None:
            bad_args += 1
        return v

    if dtype is None:
        dtype = headline_dtype(k.args for k in kernels)
    peak = _device_peaks(device, dtype)
    split: dict[str, float] = {kind: 0.0 for kind in KINDS}
    total_flop: float = 0
    total_gb = 0.0
    flop_known_time = 0.0
    any_flop = any_gb = False
    agg: dict[str, dict[str, Any]] = {}
    mods: dict[str, dict[str, Any]] = {}
    lines: dict[str, dict[str, Any]] = {}

    def group_add(table: dict[str, dict[str, Any]], key: str, k: _Ev, flop: Any, gb: Any) -> None:
        g = table.setdefault(key, {"count": 0, "time": 0.0, "flop": None, "gb": None, "flop_time": 0.0})
        g["count"] += 1
        g["time"] += k.dur
        if flop is not None:
            g["flop"] = (g["flop"] or 0) + flop
            g["flop_time"] += k.dur
        if gb is not None:
            g["gb"] = (g["gb"] or 0.0) + gb

    for k in kernels:
        kind = kernel_kind(k.name, k.args)
        split[kind] += k.dur
        flop = arg_num(k, tf.KERNEL_FLOP)
        if flop is not None and flop < 0:
            flop = None
        gb = arg_num(k, tf.KERNEL_NUM_GB)
        if gb is None:
            rd, wr = arg_num(k, tf.KERNEL_BYTES_READ), arg_num(k, tf.KERNEL_BYTES_WRITTEN)
            if rd is not None or wr is not None:
                gb = ((rd or 0) + (wr or 0)) / 1e9
        if gb is not None and gb < 0:
            gb = None
        if flop is not None:
            total_flop += flop
            flop_known_time += k.dur
            any_flop = True
        if gb is not None:
            total_gb += gb
            any_gb = True
        a = agg.setdefault(k.name, {
            "kind": kind, "count": 0, "time": 0.0, "flop": None, "flop_time": 0.0, "gb": None,
            "gb_time": 0.0, "fpct": [0.0, 0.0], "bpct": [0.0, 0.0], "bound": defaultdict(float),
            "source": defaultdict(float), "module": defaultdict(float)})
        a["count"] += 1
        a["time"] += k.dur
        if flop is not None:
            a["flop"] = (a["flop"] or 0) + flop
            a["flop_time"] += k.dur
        if gb is not None:
            a["gb"] = (a["gb"] or 0.0) + gb
            a["gb_time"] += k.dur
        for key, slot in ((tf.ACHIEVED_FLOPS_PCT, "fpct"), (tf.ACHIEVED_BANDWIDTH_PCT, "bpct")):
            v = arg_num(k, key)
            if v is not None:
                a[slot][0] += v * k.dur
                a[slot][1] += k.dur
        for key, slot in ((tf.ROOFLINE_BOUND, "bound"), (tf.SOURCE, "source"), (tf.MODULE_PATH, "module")):
            v = k.args.get(key)
            if isinstance(v, str) and v:
                a[slot][v] += k.dur
        mod = k.args.get(tf.MODULE_PATH)
        src = k.args.get(tf.SOURCE)
        # "" is the root module (work in the top-level forward itself); a missing arg is unknown.
        group_add(mods, (mod or "(root module)") if isinstance(mod, str) else "(no module)", k, flop, gb)
        group_add(lines, src if isinstance(src, str) and src else "(no source)", k, flop, gb)

    def rate_tflops(flop: Any, us: float) -> float | None:
        return _g(flop / us / 1e6) if flop is not None and us > 0 else None

    def rate_gbps(gb: Any, us: float) -> float | None:
        return _g(gb / us * 1e6) if gb is not None and us > 0 else None

    rows: list[KernelRow] = []
    for name, a in agg.items():
        tflops = rate_tflops(a["flop"], a["flop_time"])
        gbps = rate_gbps(a["gb"], a["gb_time"])
        fpct = (a["fpct"][0] / a["fpct"][1]) if a["fpct"][1] else _pct(tflops, peak.peak_tflops)
        bpct = (a["bpct"][0] / a["bpct"][1]) if a["bpct"][1] else _pct(gbps, peak.mem_bandwidth_gbs)
        rows.append(KernelRow(
            name=name, kind=a["kind"], count=a["count"], total_us=_r(a["time"]),
            mean_us=_r(a["time"] / a["count"]), share_of_busy_pct=_pct(a["time"], busy),
            flop=a["flop"], gb=_g(a["gb"]), achieved_tflops=tflops, achieved_gbps=gbps,
            flops_pct=_r(fpct), bandwidth_pct=_r(bpct), bound=_dominant(a["bound"]),
            source=_dominant(a["source"]), module_path=_dominant(a["module"])))
    rows.sort(key=lambda r: (-r.total_us, r.name))

    def group_rows(table: dict[str, dict[str, Any]]) -> list[GroupRow]:
        out = [GroupRow(key=key, count=g["count"], total_us=_r(g["time"]),
                        share_of_busy_pct=_pct(g["time"], busy), flop=g["flop"], gb=_g(g["gb"]),
                        achieved_tflops=rate_tflops(g["flop"], g["flop_time"]))
               for key, g in table.items()]
        out.sort(key=lambda r: (-r.total_us, r.key))
        return out[:top]

    # --- idle gaps and what the host was doing
    gaps_raw: list[tuple[float, float, str, _Ev | None, _Ev | None]] = []
    if merged:
        if merged[0][0] > w0:
            gaps_raw.append((w0, merged[0][0], "leading", None, merged[0][2]))
        for (_, e1, _, last), (s2, _, first, _) in zip(merged, merged[1:]):
            gaps_raw.append((e1, s2, "between", last, first))
        if w1 > merged[-1][1]:
            gaps_raw.append((merged[-1][1], w1, "trailing", merged[-1][3], None))
    elif wall > 0 and definition != DEF_NONE:
        gaps_raw.append((w0, w1, "leading", None, None))

    attributors: dict[tuple[Any, Any], _Attributor] = {}
    gap_rows: list[GapRow] = []
    idle_host: dict[str, dict[str, Any]] = {}
    for s, e, position, prev_k, next_k in gaps_raw:
        ref = next_k if next_k is not None else prev_k
        thread = launcher.get(id(ref)) if ref is not None else None
        inner_name = outer_name = frame = None
        if thread is not None and thread in roots:
            att = attributors.setdefault(thread, _Attributor(roots[thread]))
            inner, outer = att.attribute(s, e)
            dom = _dominant(inner)
            inner_name = dom.name if dom is not None else "(no host event)"
            dom_outer = _dominant(outer)
            outer_name = dom_outer.name if dom_outer is not None else None
            frame = _python_frame(dom)
            for ev, t in inner.items():
                host = ev.name if ev is not None else "(no host event)"
                h = idle_host.setdefault(host, {"time": 0.0, "gaps": 0, "frames": defaultdict(float)})
                h["time"] += t
                h["gaps"] += 1
                f = _python_frame(ev)
                if f:
                    h["frames"][f] += t
        else:
            h = idle_host.setdefault("(launching thread unknown)",
                                     {"time": 0.0, "gaps": 0, "frames": defaultdict(float)})
            h["time"] += e - s
            h["gaps"] += 1
        next_src = next_k.args.get(tf.SOURCE) if next_k is not None else None
        gap_rows.append(GapRow(
            start_us=_r(s - w0), dur_us=_r(e - s), position=position,
            prev_kernel=prev_k.name if prev_k is not None else None,
            next_kernel=next_k.name if next_k is not None else None,
            host_innermost=inner_name, host_outermost=outer_name,
            source=frame or (next_src if isinstance(next_src, str) and next_src else None)))
    gap_rows.sort(key=lambda g: (-g.dur_us, g.start_us))
    idle_rows = [IdleRow(host=h, idle_us=_r(v["time"]), gaps=v["gaps"], share_of_idle_pct=_pct(v["time"], idle),
                         source=_dominant(v["frames"]))
                 for h, v in idle_host.items()]
    idle_rows.sort(key=lambda r: (-r.idle_us, r.host))

    # --- distributed
    dist = trace.get("distributedInfo")
    distributed = None
    if isinstance(dist, Mapping):
        distributed = {k: dist[k] for k in ("rank", "world_size", "backend") if k in dist
                       and isinstance(dist[k], (str, int, float)) and not isinstance(dist[k], bool)}
        distributed = distributed or None

    achieved_tflops = rate_tflops(total_flop if any_flop else None, busy)
    achieved_gbps = rate_gbps(total_gb if any_gb else None, busy)
    # --- notes
    notes.insert(0, f"busy = {KERNEL_DEFINITIONS[definition]}")
    if kernels and not any_flop:
        notes.append("no kernel_flop args: this trace is not augmented, so FLOP/s and % of peak are unknown")
    if kernel_time > busy * 1.001 and busy > 0:
        notes.append(f"kernels overlap: summed kernel time is {kernel_time / busy:.2f}x the busy time; "
                     "per-kernel shares can add up to more than 100 %")
    if device is None and any_flop:
        notes.append("no device given: overall % of peak is unknown")
    elif device is not None and peak.peak_tflops is None:
        notes.append(f"device has no {dtype} peak: compute % of peak is unknown")
    if sum(skipped.values()):
        notes.append("skipped events: " + ", ".join(f"{n} {why}" for why, n in sorted(skipped.items())))
    if bad_args:
        notes.append(f"{bad_args} kernel args were not finite numbers and were ignored")
    over = [r.name for r in rows if any(p is not None and p > 100.0 for p in (r.flops_pct, r.bandwidth_pct))]
    if over:
        notes.append(f"{len(over)} kernel(s) exceed a roof (e.g. {over[0]}): their data was served from cache, "
                     "or the peaks are too low; 'inductor-perf calibrate' measures this machine's peaks")

    return Summary(
        label=label,
        kernel_definition=definition, kernel_definition_text=KERNEL_DEFINITIONS[definition],
        window_start_us=_r(w0) if events else None, wall_us=_r(wall), busy_us=_r(busy),
        busy_pct=_pct(busy, wall), idle_us=_r(idle), kernel_count=len(kernels),
        kernel_time_us=_r(kernel_time), timelines=timelines,
        time_split_us={k: _r(v) for k, v in split.items()},
        time_split_pct={k: _pct(v, kernel_time) for k, v in split.items()},
        flop=total_flop if any_flop else None, gb=_g(total_gb) if any_gb else None,
        flop_coverage_pct=_pct(flop_known_time, kernel_time) if kernels else None,
        achieved_tflops=achieved_tflops, achieved_gbps=achieved_gbps, peak=peak,
        flops_pct_of_peak=_pct(achieved_tflops, peak.peak_tflops),
        bandwidth_pct_of_peak=_pct(achieved_gbps, peak.mem_bandwidth_gbs),
        top_kernels=rows[:top], distinct_kernels=len(rows),
        modules=group_rows(mods), distinct_modules=len(mods),
        lines=group_rows(lines), distinct_lines=len(lines),
        gaps=gap_rows[:top], gap_count=len(gap_rows), idle_by_host=idle_rows[:top],
        distributed=distributed, events_total=len(raw_events), events_used=len(events),
        skipped=dict(skipped), bad_args=bad_args, notes=notes)


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj
