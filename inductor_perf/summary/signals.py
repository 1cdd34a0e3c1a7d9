"""What the advisor (:mod:`inductor_perf.advice`) reads of a trace beyond the summary's tables: device
idle time split by what the host was doing (the data loader, syncs, compiled-graph calls, eager
work), the host-device syncs, the optimizer's step and the pageable copies.

Computed by :func:`advice_signals` in :func:`inductor_perf.summary.core.assemble`, from the parts
both engines hand it (the kernels, the host threads' forests, the busy window), so that a loaded
trace and a streamed one give the same signals. Pure and torch-free; all times in µs over the whole
window (the advisor divides by the steps).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Callable, Iterable, Iterator, Mapping

from ..devices.peaks import dtype_peak
from ..model import events as evs
from ..model.markers import CALL_PREFIX, MARKER_PREFIX, is_library_path, parse_call_marker
from .comm import merge_spans, span_overlap
from .idle_split import launch_times
from .kernels import DEF_GPU, GRAPH_CALL_PREFIX, TraceKernels

Span = tuple[float, float]

LOADER_PREFIX = "enumerate(DataLoader)#"
"""torch's range around each ``next()`` of a DataLoader iterator (``..._SingleProcessDataLoaderIter.__next__``,
``..._MultiProcessingDataLoaderIter.__next__``)."""
COMPILED_PREFIXES = ("Torch-Compiled Region", "CompiledFunction", GRAPH_CALL_PREFIX, MARKER_PREFIX)
"""Host ranges around a call of compiled code (Dynamo's frame, AOTAutograd's forward and backward,
Inductor's graph call, our marker): the kernels they launch are what ``mode="reduce-overhead"`` replays
as one CUDA graph."""
SYNC_NAMES = frozenset({"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy",
                        "hipStreamSynchronize", "hipDeviceSynchronize", "hipEventSynchronize", "hipMemcpy",
                        "aten::_local_scalar_dense"})
"""Host calls that wait for the device (``.item()``, ``.cpu()``, ``nonzero``, a blocking copy)."""
OPTIMIZER_PREFIX = "Optimizer.step#"
FUSED_MARKS = ("_foreach_", "_fused_")
"""Op names of a multi-tensor (``foreach=True``) or fused (``fused=True``) optimizer step."""
PAGEABLE = re.compile(r"HtoD.*Pageable", re.IGNORECASE)
"""Kineto's name of a host-to-device copy from pageable memory: ``Memcpy HtoD (Pageable -> Device)``."""
_FRAME = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): ")
"""A python stack event's name: ``path/train.py(42): step``."""
_PROFILER_CATS = frozenset({"overhead", "trace"})
"""The profiler's own events (``Activity Buffer Request``): not the user's host activity."""


@dataclass
class CopySite:
    """The host-to-device copies from pageable memory made at one place in the user's code."""

    source: str | None
    """``file.py:LINE`` of the call that made them (our capture's call marker or a python stack event
    around the copy's runtime call); None: unknown."""
    count: int = 0
    us: float = 0.0
    """The copies' time on the device."""


@dataclass
class SyncSite:
    """The host-device syncs of one place in the user's code."""

    source: str | None
    """``file.py:LINE`` (the python stack around the sync or our capture's call marker, else, inside
    compiled code, the last kernel's tag); None: unknown."""
    what: str
    """The sync calls (``aten::_local_scalar_dense``, ``cudaStreamSynchronize``, ...), most frequent first."""
    count: int = 0
    host_us: float = 0.0
    """Time the host spent blocked in them."""
    drain_us: float = 0.0
    """Device idle from each sync's start until the next kernel after it: the drained queue refilling."""
    after: str | None = None
    """Where :attr:`source` is unknown (a sync outside compiled code, and neither a python stack nor a
    call marker around it): the tag of the last kernel launched before it, which names the compiled
    code the sync waited for, not the sync."""


@dataclass
class OptimizerStep:
    """The ``Optimizer.step#<Class>.step`` ranges of the trace."""

    name: str
    calls: int
    time_us: float
    """Their summed duration on the host."""
    top_ops: int
    """Ops run directly under the ranges (per call, summed)."""
    per_param: int | None
    """Parameters the step updated one at a time: the most common count among the op names (None: no op)."""
    fused: bool
    """Whether a multi-tensor or fused op (:data:`FUSED_MARKS`) ran in it."""
    op_time_us: dict[str, float] = field(default_factory=dict)
    """The ops' time by name (on a CPU trace they are kernels of the summary too)."""


@dataclass
class AdviceSignals:
    """Everything :mod:`inductor_perf.advice` needs beyond the summary's tables (:mod:`summary.signals`)."""

    on_device: bool
    """The kernels are a device's (a GPU trace), not the host's own work (a CPU trace)."""
    graph_launches: bool
    """Kernels were replayed by CUDA graphs."""
    input_wait_us: float = 0.0
    """Idle time (device, or the CPU's kernels) while the host was inside a DataLoader ``next()``."""
    loader_us: float = 0.0
    loader_calls: int = 0
    loader_name: str | None = None
    compiled_calls: int = 0
    """Host ranges of compiled-graph calls (:data:`COMPILED_PREFIXES`): 0 for an eager trace."""
    launch_gap_us: float = 0.0
    """Device idle while the host was inside a compiled-graph call (and not in a loader or a sync)."""
    eager_idle_us: dict[str, float] = field(default_factory=dict)
    """Device idle outside compiled calls, loaders and syncs, by the host's outermost activity below
    the step (:data:`evs.NO_HOST_EVENT` where none), most first; threads overlap, so these can add up
    to more than :attr:`eager_idle_total_us`."""
    eager_idle_total_us: float = 0.0
    """That idle time itself (once, whatever the threads did)."""
    syncs: list[SyncSite] = field(default_factory=list)
    optimizer: OptimizerStep | None = None
    pageable: list[CopySite] = field(default_factory=list)
    """The host-to-device copies from pageable memory by the line that made them, most time first (one
    site of source None for those whose line is not known)."""
    peaks: dict[str, float | None] = field(default_factory=dict)
    """The device's matmul roofs (TFLOP/s) for float32, tf32, bfloat16 and float16."""
    record: Mapping[str, Any] | None = None
    """The trace's own record (:data:`inductor_perf.devices.props.RECORD_KEY`), for the compile findings."""


# --- Intervals -----------------------------------------------------------------------------------------
def minus(a: list[Span], b: list[Span]) -> list[Span]:
    """``a`` less ``b`` (both merged and sorted; of each item of ``b`` only its first two, start and
    end, are read)."""
    out: list[Span] = []
    j = 0
    for s, e in a:
        while j < len(b) and b[j][1] <= s:
            j += 1
        k, cur = j, s
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            out.append((cur, e))
    return out


def gaps_of(window: Any) -> list[Span]:
    """The idle spans of a busy window: its [start, end] less its kernels' merged spans (whose
    first two items, start and end, are all :func:`minus` reads: no copy of them)."""
    return minus([(window.start, window.end)], window.merged) if window.end > window.start else []


# --- Host events -----------------------------------------------------------------------------------------
def _walk(nodes: Iterable[Any]) -> Iterator[Any]:
    stack = list(nodes)[::-1]
    while stack:
        e = stack.pop()
        yield e
        kids = e.children
        if kids:
            stack.extend(reversed(kids))


def _below_steps(roots: Iterable[Any]) -> Iterator[Any]:
    """A thread's outermost events, looking through ``ProfilerStep#N`` ranges and our call markers. A
    step range with nothing in it is no host activity (torch.profiler may record it on a thread of its
    own, spanning the whole step): the idle under it has no host event."""
    for e in roots:
        if e.name.startswith("ProfilerStep#") or e.name.startswith(CALL_PREFIX) and e.children:
            yield from _below_steps(e.children)
        else:
            yield e


def user_frame(name: str) -> str | None:
    """``file.py:LINE`` (the path as recorded, as our tags' ``source``) of a python stack event's name,
    when it is outside torch and installed libraries; else None."""
    m = _FRAME.match(name)
    if m is None or is_library_path(m["file"]):
        return None
    return f"{m['file']}:{m['line']}"


def _frame_of(e: Any) -> str | None:
    """The user's line around host event ``e``: the innermost of it and its ancestors that is a user
    python frame (a trace with a python stack) or our call marker (:func:`model.markers.call_marker_name`)."""
    up = e
    while up is not None:
        if up.cat == "python_function":
            got = user_frame(up.name)
            if got is not None:
                return got
        elif up.name.startswith(CALL_PREFIX):
            call = parse_call_marker(up.name)
            if call is not None:
                return call[1]
        up = up.parent
    return None


class _Collect:
    """One walk over every host thread's forest, keeping the spans the signals read."""

    def __init__(self) -> None:
        self.loader: list[Span] = []
        self.loader_names: dict[str, int] = {}
        self.compiled: list[Span] = []
        self.syncs: list[tuple[Any, float, float]] = []
        self.optimizer: list[Any] = []
        self.outer: list[Any] = []
        """The outermost events below the steps (the events themselves: no tuple each)."""
        self.roles: dict[str, int] = {}

    def thread(self, roots: list[Any]) -> None:
        for e in _below_steps(roots):
            if e.cat.lower() not in _PROFILER_CATS:
                self.outer.append(e)
        role_of, roles = self.roles.get, self.roles
        for e in _walk(roots):
            name = e.name
            role = role_of(name)
            if role is None:
                role = roles[name] = _role(name)
            if not role:
                continue
            if role == _LOADER:
                self.loader.append((e.ts, e.end))
                self.loader_names[name] = self.loader_names.get(name, 0) + 1
            elif role == _COMPILED:
                self.compiled.append((e.ts, e.end))
            elif role == _SYNC:
                if not _in_sync(e):
                    self.syncs.append((e, e.ts, e.end))
            else:
                self.optimizer.append(e)


_LOADER, _COMPILED, _SYNC, _OPTIMIZER = 1, 2, 3, 4


def _role(name: str) -> int:
    """What :class:`_Collect` keeps of a host event of this name (0: nothing); asked once a name."""
    return (_LOADER if name.startswith(LOADER_PREFIX) else _COMPILED if name.startswith(COMPILED_PREFIXES)
            else _SYNC if name in SYNC_NAMES else _OPTIMIZER if name.startswith(OPTIMIZER_PREFIX) else 0)


def _under(e: Any, test: Callable[[str], bool]) -> bool:
    """Whether an ancestor of host event ``e`` has a name ``test`` takes."""
    up = e.parent
    while up is not None:
        if test(up.name):
            return True
        up = up.parent
    return False


def _in_sync(e: Any) -> bool:
    return _under(e, SYNC_NAMES.__contains__)


def _threads(roots: Any) -> Iterator[list[Any]]:
    for key in list(roots):
        yield roots[key]


# --- The signals -----------------------------------------------------------------------------------------
def advice_signals(tk: TraceKernels, window: Any, graph_launches: bool, device: Any,
                   record: Mapping[str, Any] | None, copy_calls: Mapping[int, tuple[Any, float]] | None = None,
                   launcher: Mapping[int, Any] | None = None) -> AdviceSignals:
    """The :class:`AdviceSignals` of a trace's parts (:class:`inductor_perf.summary.core.SummaryParts`).
    ``copy_calls``: :func:`copy_launches` of the pageable copies (the streaming engine's), else made from
    ``launcher`` (each kernel's launching thread, the in-memory engine's); with neither, the copies'
    lines are unknown."""
    got = _Collect()
    for roots in _threads(tk.roots):
        got.thread(roots)
    on_device = tk.definition == DEF_GPU
    gaps = gaps_of(window)
    loader = merge_spans(got.loader)
    sync_spans = merge_spans((s, e) for _, s, e in got.syncs)
    sig = AdviceSignals(on_device=on_device, graph_launches=graph_launches, record=record)
    sig.input_wait_us = span_overlap(gaps, loader)
    sig.loader_us = sum(e - s for s, e in loader)
    sig.loader_calls = sum(got.loader_names.values())
    sig.loader_name = max(got.loader_names, key=got.loader_names.__getitem__) if got.loader_names else None
    if on_device:
        other = merge_spans(loader + sync_spans)
        compiled = minus(merge_spans(got.compiled), other)
        sig.launch_gap_us = span_overlap(gaps, compiled)
        sig.compiled_calls = len(got.compiled)
        taken = merge_spans(got.compiled + other)
        rest = minus(gaps, taken) if taken else gaps  # (minus(gaps, []) is gaps)
        sig.eager_idle_us = _eager_idle(rest, got.outer)
        sig.eager_idle_total_us = sum(e - s for s, e in rest)
        del rest
        sig.syncs = _sync_sites(got.syncs, gaps, window, tk.kernels)
        copies = pageable_copies(tk.kernels)
        if copies and copy_calls is None and launcher is not None:
            copy_calls = copy_launches(copies, launcher, launch_times(tk.host_events, copies))
        sig.pageable = _copy_sites(copies, copy_calls or {}, tk.roots) if copies else []
    sig.optimizer = _optimizer(got.optimizer)
    sig.peaks = {dt: dtype_peak(device, dt, True) for dt in ("float32", "tf32", "bfloat16", "float16")}
    return sig


def _eager_idle(rest: list[Span], outer: list[Any]) -> dict[str, float]:
    """Idle time in ``rest`` (the gaps less the time taken by loaders, syncs and compiled calls), by
    the outermost host event over it (``outer``: all threads')."""
    if not rest:
        return {}
    ends = [e for _, e in rest]
    acc: dict[str, float] = {}
    covered = []
    for ev in outer:
        name, s, e = ev.name, ev.ts, ev.end
        t = 0.0
        i = bisect.bisect_right(ends, s)  # the first idle span that ends after the event starts
        while i < len(rest) and rest[i][0] < e:
            lo, hi = max(rest[i][0], s), min(rest[i][1], e)
            if hi > lo:
                t += hi - lo
            i += 1
        if t > 0:
            acc[name] = acc.get(name, 0.0) + t
            covered.append(ev)
    lone = sum(b - a for a, b in minus(rest, merge_spans((ev.ts, ev.end) for ev in covered)))
    if lone > 0:
        acc[evs.NO_HOST_EVENT] = lone
    return dict(sorted(acc.items(), key=lambda kv: (-kv[1], kv[0])))


def pageable_copies(kernels: Iterable[Any]) -> list[Any]:
    """The device events that are host-to-device copies from pageable memory (:data:`PAGEABLE`)."""
    return [k for k in kernels if k.cat.lower() in ("gpu_memcpy", "memcpy") and PAGEABLE.search(k.name)]


def copy_launches(copies: Iterable[Any], launcher: Mapping[int, Any], times: Mapping[int, float]
                  ) -> dict[int, tuple[Any, float]]:
    """(launching thread, start of the runtime call) of each copy with both known, by ``id`` of the copy:
    the in-memory engine's, from its launcher and launch-time maps (the streaming engine reads the same
    from its pass)."""
    out = {}
    for k in copies:
        thread, ts = launcher.get(id(k)), times.get(id(k))
        if thread is not None and ts is not None:
            out[id(k)] = (thread, ts)
    return out


def _copy_sites(copies: list[Any], launches: Mapping[int, tuple[Any, float]], roots: Any) -> list[CopySite]:
    """The copies grouped by the user's line around the runtime call that started each: the innermost
    host event at that call's start on its thread, and its ancestors (:func:`_frame_of`)."""
    sites: dict[str | None, CopySite] = {}
    for k in copies:
        got = launches.get(id(k))
        src = None
        if got is not None and got[0] in roots:
            call = _innermost_at(roots[got[0]], got[1])
            src = _frame_of(call) if call is not None else None
        site = sites.get(src) or sites.setdefault(src, CopySite(src))
        site.count += 1
        site.us += k.dur
    return sorted(sites.values(), key=lambda c: (-c.us, c.source or ""))


def _innermost_at(nodes: list[Any], ts: float) -> Any:
    """The innermost event of a thread's forest (``nodes``: its roots, by start) that starts at or before
    ``ts`` and ends at or after it; None where none does."""
    found = None
    while nodes:
        i = bisect.bisect_right(nodes, ts, key=attrgetter("ts")) - 1
        if i < 0 or nodes[i].end < ts:
            break
        found = nodes[i]
        nodes = found.children or []
    return found


def _sync_sites(syncs: list[tuple[Any, float, float]], gaps: list[Span], window: Any,
                kernels: list[Any]) -> list[SyncSite]:
    """The syncs grouped by source: each one's host time, and the device idle from its start to the
    first kernel that starts after it returns (the queue it drained, refilling)."""
    starts = [s for s, *_ in window.merged]
    by_start = sorted(kernels, key=lambda k: k.ts)
    kstarts = [k.ts for k in by_start]
    sites: dict[tuple[str | None, str | None], SyncSite] = {}
    names: dict[tuple[str | None, str | None], dict[str, int]] = {}
    for e, s, end in sorted(syncs, key=lambda x: x[1]):
        i = bisect.bisect_left(starts, end)
        refill = starts[i] if i < len(starts) else end
        drain = span_overlap(gaps, [(s, max(refill, end))])
        src = _frame_of(e)
        after = None
        if src is None:
            last = _last_source(by_start, bisect.bisect_right(kstarts, s))
            # inside compiled code (a graph break's .item(), a nonzero in the graph) the last kernel is of
            # the same code; outside it (loss.item() in the loop), of code the sync only waited for
            src, after = (last, None) if _in_compiled(e) else (None, last)
        key = (src, after)
        site = sites.get(key)
        if site is None:
            site = sites[key] = SyncSite(src, "", after=after)
            names[key] = {}
        site.count += 1
        site.host_us += end - s
        site.drain_us += drain
        names[key][e.name] = names[key].get(e.name, 0) + 1
    for key, site in sites.items():
        site.what = ", ".join(n for n, _ in sorted(names[key].items(), key=lambda kv: (-kv[1], kv[0])))
    return sorted(sites.values(), key=lambda x: -x.drain_us)


def _in_compiled(e: Any) -> bool:
    """Whether host event ``e`` runs inside a call of compiled code (an ancestor of
    :data:`COMPILED_PREFIXES`)."""
    return _under(e, lambda name: name.startswith(COMPILED_PREFIXES))


def _last_source(by_start: list[Any], before: int) -> str | None:
    """The source tag of the latest of the (up to 64) kernels started before index ``before``: where a
    sync has no python stack, the compiled code's line it waits for."""
    for k in reversed(by_start[max(0, before - 64):before]):
        got = k.args.get(evs.SOURCE)
        if isinstance(got, str) and got:
            return got
    return None


def _optimizer(ranges: list[Any]) -> OptimizerStep | None:
    """The optimizer's steps: their time, the ops directly under them, and whether one fused."""
    if not ranges:
        return None
    names: dict[str, int] = {}
    op_time: dict[str, float] = {}
    top = 0
    fused = False
    for r in ranges:
        for e in _walk(r.children or ()):
            if e.name.startswith(OPTIMIZER_PREFIX):
                continue
            if any(m in e.name for m in FUSED_MARKS):
                fused = True
        for e in _top_ops(r):
            top += 1
            names[e.name] = names.get(e.name, 0) + 1
            op_time[e.name] = op_time.get(e.name, 0.0) + (e.end - e.ts)
    counts: dict[int, int] = {}
    for n in names.values():
        counts[n] = counts.get(n, 0) + 1
    per_param = max(counts, key=lambda n: (counts[n], n)) if counts else None
    by_name: dict[str, int] = {}
    for r in ranges:
        by_name[r.name] = by_name.get(r.name, 0) + 1
    return OptimizerStep(max(by_name, key=by_name.__getitem__), len(ranges), sum(r.end - r.ts for r in ranges),
                         top, per_param // len(ranges) if per_param else None, fused, op_time)


def _top_ops(r: Any) -> Iterator[Any]:
    """The ops directly under range ``r`` (through any annotation ranges, not into an op)."""
    stack = list(r.children or ())
    while stack:
        e = stack.pop()
        if e.cat in evs.CPU_OP_CATS:
            yield e
        elif e.children:
            stack.extend(e.children)
