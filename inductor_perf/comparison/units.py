"""A trace cut into units: the outermost op or compiled-kernel events of each thread, each with its
phase, module, source line and the eager ops it stands for (see :mod:`inductor_perf.comparison`).

Pure: takes a trace dict (and, from compare(), what the tags say about each compiled kernel event)
and returns :class:`TraceUnits`; the matching of two traces' units into rows is in ``rows.py``.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from ..model import events as evs
from ..model.events import GRAD_ACCUM, NO_KEY, OUTSIDE_MODEL, RUNTIME_OVERHEAD  # row labels
from ..model.events import OPTIMIZER_PHASE, OTHER_PHASE  # phases
from ..model.markers import MARKER_PREFIX, parse_marker
from ..traces import files as tf
from .eager import parse_module_range, parse_phase_range, parse_step_range
from .kernels import (EVAL_FN, Device, Places, SideEvents, autograd_threads, clip, combine_costs, correlation_key,
                      cpu_kernels, kernel_cost, merge, ops_by_external_id)
_OPTIMIZER_RANGES = ("Optimizer.step#", "Optimizer.zero_grad#")

_EVAL_FN = EVAL_FN
_ACCUMULATE_GRAD = "torch::autograd::AccumulateGrad"
_PROFILER_STEP = "ProfilerStep#"
# Ops that only re-describe memory; they are left out of the fusion map when a kernel has real work.
VIEW_OPS = frozenset({
    "aten::view", "aten::reshape", "aten::_unsafe_view", "aten::permute", "aten::transpose", "aten::t",
    "aten::expand", "aten::squeeze", "aten::unsqueeze", "aten::slice", "aten::select", "aten::split",
    "aten::split_with_sizes", "aten::alias", "aten::as_strided", "aten::detach", "aten::unbind",
    "getitem", "operator.getitem",
})
UNIT_ARGS = ("Sequence number", evs.MODULE_PATH, evs.SOURCE, evs.EAGER_OPS, evs.KERNEL_FLOP, evs.ACHIEVED_FLOPS_PCT,
             evs.KERNEL_KIND, evs.COST_SOURCE)
"""The only args of a host event that cutting units (and choosing the CPU kernels) reads."""


# --- units: the outermost op / kernel events of a trace ------------------------------------------
@dataclass(slots=True)
class Unit:
    """One outermost op or compiled-kernel call."""

    name: str
    ts: float
    dur: float
    phase: str
    """``forward``, ``backward`` or ``optimizer`` (:data:`~inductor_perf.model.events.PHASE_ORDER`)."""
    module: str | None
    source: str | None
    ops: tuple[str, ...]
    """The eager ops this unit stands for (compiled: the fused FX nodes' original aten ops)."""
    compiled: bool
    step: int = 0
    flops: float | None = None
    achieved_pct: float | None = None
    also_modules: tuple[str, ...] = ()
    """Other modules whose nodes a fused kernel computes."""
    node_keys: tuple[tuple[str | None, str, str | None], ...] = ()
    """(module, eager op, source line) of each FX node of a compiled kernel, when the tags are at hand."""
    source_inferred: bool = False
    """An eager unit's source line, taken from a compiled node of the same module and op."""
    subtree_names: tuple[str, ...] = ()
    count: int = 1
    """How many calls this unit stands for: 1, or for a unit of :func:`aggregate_units` the calls it
    sums (``dur`` their total, ``ts`` the first one's start, ``flops`` their total)."""


@dataclass
class TraceUnits:
    """A trace cut into units, with its measured steps."""

    units: list[Unit]
    step_walls_us: list[float]
    """Wall time of each recorded step (step ranges), or one span covering all units."""
    steps_from: str
    """``inductor_perf`` (our step ranges), ``ProfilerStep`` or ``span`` (no step marks)."""
    has_module_info: bool
    has_source_info: bool
    compiled: bool
    eager_op_names: frozenset[str] = frozenset()
    """Every op event name in the trace (for checks of the fusion map)."""
    kernels: list[Unit] = field(default_factory=list)
    """The trace's kernels as the summary counts them (device events; on a CPU trace the kernels of
    compiled graphs, else the outermost aten ops), each with its unit's phase and module: the rows
    of ``by="kernel"`` (:mod:`.kernels`)."""
    kernels_read: bool = True
    """Whether :attr:`kernels` were read (``units_from_events(kernels=False)`` leaves them out)."""
    kernel_time: str = "host"
    """What a kernel's time is: ``device`` (device events) or ``host`` (CPU kernels)."""
    covered_us: float = 0.0
    """The time the units cover, all steps together: the union of their intervals (threads that run
    at once count once), inside the steps."""
    kernels_covered_us: float = 0.0
    """The same of :attr:`kernels`."""
    unlinked: tuple[int, float] = (0, 0.0)
    """Device events whose launching op is on no counted thread (or not found): (count, time in the
    steps); kernels of phase :data:`OTHER_PHASE`, in no row of units."""

    @property
    def steps(self) -> int:
        return len(self.step_walls_us)


@dataclass(slots=True)
class _Node:
    ev: dict
    ts: float
    end: float
    children: list["_Node"] = field(default_factory=list)
    ours: bool = False
    """This event or a descendant is one of our ranges / graph markers: a container, never a unit."""
    marker: bool = False
    """A descendant is a compiled-graph marker."""


def _forest(events: Iterable[tuple[dict, float, float]]) -> list[_Node]:
    nodes = sorted((_Node(ev, ts, ts + dur) for ev, ts, dur in events), key=lambda n: (n.ts, -n.end))
    roots: list[_Node] = []
    stack: list[_Node] = []
    for n in nodes:
        while stack and n.ts >= stack[-1].end - 1e-6 and not (n.ts == stack[-1].ts and n.end <= stack[-1].end):
            stack.pop()
        # a partial overlap (clock skew) becomes a sibling, not a child
        while stack and n.end > stack[-1].end + 1e-3:
            stack.pop()
        (stack[-1].children if stack else roots).append(n)
        stack.append(n)
    return roots


def _is_ours(name: str) -> bool:
    return name.startswith("## inductor_perf ") or name.startswith(_PROFILER_STEP)


def _mark_ours(n: _Node) -> None:
    n.ours = _is_ours(n.ev.get("name", ""))
    for c in n.children:
        _mark_ours(c)
        n.ours |= c.ours
        n.marker |= c.marker or c.ev.get("name", "").startswith(MARKER_PREFIX)


def _names(n: _Node) -> tuple[str, ...]:
    """The names of ``n`` and its descendants, in preorder."""
    if not n.children:  # most units: a lone op
        return (n.ev.get("name", ""),)
    out: list[str] = []
    _add_names(n, out)
    return tuple(out)


def _add_names(n: _Node, out: list[str]) -> None:
    out.append(n.ev.get("name", ""))
    for c in n.children:
        _add_names(c, out)


def _seqs(n: _Node) -> Iterable[int]:
    """The autograd sequence numbers of ``n`` and its descendants, in preorder."""
    s = evs.event_args(n.ev).get("Sequence number")
    own = (s,) if isinstance(s, int) and not isinstance(s, bool) else ()
    if not n.children:
        return own
    out = list(own)
    for c in n.children:
        out.extend(_seqs(c))
    return out


def _costs(n: _Node) -> list[tuple[float | None, float | None]]:
    """(``kernel_flop``, ``achieved_flops_pct``) of the outermost costed events at or below ``n``
    (the cost join costs an op once: an event inside a costed one is not costed again)."""
    args = evs.event_args(n.ev)
    flops = evs.number(args.get(evs.KERNEL_FLOP))
    if flops is not None:
        return [(flops, evs.number(args.get(evs.ACHIEVED_FLOPS_PCT)))]
    out: list[tuple[float | None, float | None]] = []
    for c in n.children:
        out.extend(_costs(c))
    return out


@dataclass(frozen=True)
class _Scope:
    """What the containers around an event say about it."""

    module: str | None = None
    """The innermost ``## inductor_perf module=`` range (eager runs)."""
    phase: str | None = None
    """The innermost phase range: forward, loss or backward; ``optimizer`` inside torch.optim's ranges."""
    graph: str | None = None
    """``fwd`` / ``bwd`` inside a compiled-graph marker."""
    in_compiled: bool = False
    """Inside an op that holds a graph marker (Torch-Compiled Region, CompiledFunction, ...)."""
    in_model: bool = False
    """Inside the forward phase range."""


def _find_steps(by_thread: Mapping[tuple[Any, Any], list[tuple[dict, float, float]]]
                ) -> tuple[list[tuple[float, float]], str, set[tuple[Any, Any]]]:
    """(sorted step spans, where they came from, the threads that hold them). Steps are our step
    ranges, else ``ProfilerStep#N``, else none (``span``: the caller takes one span)."""
    steps: list[tuple[float, float]] = []
    steps_from = "span"
    step_threads: set[tuple[Any, Any]] = set()
    for kind, parse in (("inductor_perf", parse_step_range),
                        ("ProfilerStep", lambda nm: 0 if nm.startswith(_PROFILER_STEP) else None)):
        for key, thread_evs in by_thread.items():
            for ev, ts, dur in thread_evs:
                if parse(ev["name"]) is not None:
                    steps.append((ts, ts + dur))
                    step_threads.add(key)
        if steps:
            steps_from = kind
            break
    steps.sort()
    return steps, steps_from, step_threads


class _UnitCollector:
    """Walks the event trees of the step threads and collects their units (the state of one
    :func:`trace_units` call)."""

    def __init__(self, kernel_info: Callable[[int], dict[str, Any] | None] | None, index_of: Mapping[int, int]):
        self.kernel_info = kernel_info
        self.index_of = index_of
        self.units: list[Unit] = []
        self.fwd_units: list[tuple[_Node, str | None]] = []
        """Forward units whose autograd sequence numbers name a module for backward ops, in visit
        order: (node, its module; None: outside the model, which a module never overrides). Their
        sequence numbers are read only when a backward op waits for one (:meth:`resolve_backward`)."""
        self.pending_bwd: list[tuple[Unit, list[int]]] = []
        self.has_module = self.has_source = self.compiled_trace = False
        self.all_names: set[str] = set()
        self.thread: tuple[Any, Any] = (None, None)
        """The thread being visited."""
        self.threads: set[tuple[Any, Any]] = set()
        """The threads visited: the step's."""
        self.places: Places[Unit] = Places()
        """Each unit by its thread and interval: whose kernel is a kernel (:func:`_kernel_units`)."""
        self.markers: Places[str] = Places()
        """Each compiled-graph marker by its thread and interval, with its phase: a CUDA graph's
        replay (``cudaGraphLaunch``) sits in one outside any op."""
        self.optimizer: Places[bool] = Places()
        """torch.optim's ranges by thread and interval: a launch there in no op is the optimizer's."""

    def _add(self, u: Unit) -> None:
        self.units.append(u)
        self.places.add(self.thread, u.ts, u.dur, u)

    def visit(self, n: _Node, scope: _Scope) -> None:
        name: str = n.ev["name"]
        cat = evs.category(n.ev)
        if name.startswith(_OPTIMIZER_RANGES):  # torch.optim's annotation (around a compiled step too)
            scope = dataclasses.replace(scope, phase=OPTIMIZER_PHASE, in_model=False)
            self.optimizer.add(self.thread, n.ts, n.end - n.ts, True)
        elif n.ours:  # a container: our ranges, markers, profiler steps, and the events around them
            scope = self._enter(n, name, cat, scope)
        elif cat in evs.CPU_OP_CATS:
            self._unit(n, name, scope)
            return
        # containers, python_function, Optimizer.step#..., other annotations: not work units
        for c in n.children:
            self.visit(c, scope)

    def _enter(self, n: _Node, name: str, cat: str, scope: _Scope) -> _Scope:
        """The scope inside container ``n``."""
        fqn = parse_module_range(name)
        if fqn is not None:
            scope = dataclasses.replace(scope, module=fqn)
            self.has_module = True
        ph = parse_phase_range(name)
        if ph is not None:
            scope = dataclasses.replace(scope, phase=ph, in_model=ph == "forward")
        if name.startswith(MARKER_PREFIX):
            parsed = parse_marker(name)
            scope = dataclasses.replace(scope, graph=("bwd" if parsed[1] else "fwd") if parsed else "fwd")
            self.compiled_trace = True
            self.markers.add(self.thread, n.ts, n.end - n.ts, OPTIMIZER_PHASE if scope.phase == OPTIMIZER_PHASE
                             else "backward" if scope.graph == "bwd" else "forward")
        elif n.marker and cat in evs.CPU_OP_CATS and not _is_ours(name):
            scope = dataclasses.replace(scope, in_compiled=True)  # Torch-Compiled Region, CompiledFunction[Backward], ...
        return scope

    def _unit(self, n: _Node, name: str, scope: _Scope) -> None:
        args = evs.event_args(n.ev)
        subtree = _names(n)
        self.all_names.update(subtree)
        is_bwd_event = name.startswith(_EVAL_FN)
        if scope.phase == OPTIMIZER_PHASE:  # a compiled optimizer's graph too
            unit_phase = OPTIMIZER_PHASE
        elif scope.graph is not None:
            unit_phase = "backward" if scope.graph == "bwd" else "forward"
        elif scope.phase is not None:
            unit_phase = "backward" if scope.phase == "backward" else "forward"
        else:
            unit_phase = "backward" if is_bwd_event else "forward"
        if scope.graph is not None:
            self._add(self._kernel_unit(n, name, args, unit_phase, subtree))
        else:
            self._eager_unit(n, name[len(_EVAL_FN):] if is_bwd_event else name, args, unit_phase, subtree, scope)

    def _kernel_unit(self, n: _Node, name: str, args: dict, unit_phase: str, subtree: tuple[str, ...]) -> Unit:
        """A compiled kernel call: module, source and ops from ``kernel_info`` (the tags), else from args."""
        info = self.kernel_info(self.index_of[id(n.ev)]) if self.kernel_info is not None else None
        mod = info.get("module") if info else args.get(evs.MODULE_PATH)
        src = info.get("source") if info else args.get(evs.SOURCE)
        ops = _ops_of(info.get("ops") if info else args.get(evs.EAGER_OPS))
        if not ops:
            ops = (name,) if not name.startswith("graph_") else ()
        if not isinstance(mod, str):
            mod = None
        if isinstance(mod, str):
            self.has_module = True
        if isinstance(src, str):
            self.has_source = True
        else:
            src = None
        flops, pct = combine_costs(_costs(n))
        # The event's own name (graph_0_cpp_fused_gelu_0, aten::addmm): what other tools show.
        return Unit(name=name, ts=n.ts, dur=n.end - n.ts, phase=unit_phase,
                    module=mod if mod is not None else NO_KEY, source=src, ops=ops, compiled=True,
                    flops=flops, achieved_pct=pct,
                    also_modules=tuple((info or {}).get("also_modules", ())), subtree_names=subtree,
                    node_keys=tuple((info or {}).get("node_keys", ())))

    def _eager_unit(self, n: _Node, op: str, args: dict, unit_phase: str, subtree: tuple[str, ...],
                    scope: _Scope) -> None:
        """An eager op: its module range, else a special row; backward ops wait for their forward op's module."""
        flops, pct = combine_costs(_costs(n))
        u = Unit(name=op, ts=n.ts, dur=n.end - n.ts, phase=unit_phase, module=None, source=None, ops=(op,),
                 compiled=False, subtree_names=subtree, flops=flops, achieved_pct=pct)
        if scope.module is not None:
            u.module = scope.module
            if unit_phase == "forward":
                self.fwd_units.append((n, scope.module))
        elif scope.in_compiled:
            u.module = RUNTIME_OVERHEAD
        elif scope.in_model and unit_phase == "forward":
            u.module = RUNTIME_OVERHEAD
        elif op == _ACCUMULATE_GRAD:
            u.module = GRAD_ACCUM
        elif unit_phase == "backward":
            seq = args.get("Sequence number")
            self.pending_bwd.append((u, [seq] if isinstance(seq, int) else []))
        else:
            u.module = OUTSIDE_MODEL
            if unit_phase == "forward":
                self.fwd_units.append((n, None))
        self._add(u)

    def resolve_backward(self) -> None:
        """Give each eager backward op the module of the forward op with its autograd sequence number."""
        if not self.pending_bwd:
            return
        fwd_seq_module: dict[int, str | None] = {}
        for n, module in self.fwd_units:
            for s in _seqs(n):
                if module is not None:
                    fwd_seq_module[s] = module
                else:
                    fwd_seq_module.setdefault(s, None)
        for u, seqs in self.pending_bwd:
            mod = next((fwd_seq_module[s] for s in seqs if s in fwd_seq_module), None)
            u.module = mod if mod is not None else OUTSIDE_MODEL


def _keep_in_steps(items: list[Unit], windows: list[tuple[float, float]],
                   steps: list[tuple[float, float]]) -> tuple[list[Unit], float]:
    """The units (or kernels) with time inside the ``windows`` (the steps' union, :func:`kernels.merge`),
    each one's ``dur`` cut to that time and ``step`` the step it starts in (or the first it reaches),
    and the time they cover together (:func:`kernels.clip`)."""
    inside, covered = clip([(u.ts, u.dur) for u in items], windows)
    starts = [a for a, _ in steps]
    kept = []
    for u, t in zip(items, inside):
        if t is None:
            continue
        u.dur = t
        u.step = max(bisect.bisect_right(starts, u.ts) - 1, 0)
        kept.append(u)
    return kept, covered


def trace_units(trace: Mapping[str, Any], *, kernel_info: Callable[[int], dict[str, Any] | None] | None = None,
                kernels: bool = True, skipped: dict[str, int] | None = None) -> TraceUnits:
    """Cut a Kineto trace into :class:`Unit` s (pure).

    ``kernel_info(event_index)`` may supply ``module``, ``source``, ``ops``, ``kernel``, ``also_modules``
    for compiled kernel events (what :func:`compare` knows from the tags); otherwise they come from
    the events' args (``module_path``, ``source``, ``eager_ops``). ``kernels=False``: without the
    kernels (:func:`units_from_events`). ``skipped``: where :func:`model.events.complete_events` counts the
    events skipped for their times.
    """
    tf.validate_trace(dict(trace))
    return units_from_events(evs.complete_events(dict(trace), skipped=skipped), kernel_info=kernel_info,
                             kernels=kernels)


def units_from_events(events: Iterable[tuple[int, dict, float, float]], *,
                      kernel_info: Callable[[int], dict[str, Any] | None] | None = None,
                      launches: Mapping[Any, tuple[Any, Any, float]] | None = None,
                      ops_by_ext: Mapping[Any, tuple[Any, Any, float]] | None = None,
                      device: list[Device] | None = None, kernels: bool = True) -> TraceUnits:
    """:func:`trace_units` of a trace's complete events, given as :func:`model.events.complete_events`
    yields them (``(index, event, ts, dur)`` in file order). Read are the host events (categories
    ``cpu_op``, ``operator``, ``user_annotation``, ``python_function``) with a string name, and of
    each only its name, category, pid, tid and the args a unit takes (:data:`UNIT_ARGS`); the device
    events (:data:`kernels.DEVICE_ARGS`); the launches' correlations and places. A caller may pass
    those events alone, slimmed, with the launches as ``launches`` (correlation -> (pid, tid, ts)), the
    device events as ``device`` (:data:`Device` tuples) and the CPU ops' places by External id as
    ``ops_by_ext`` (:func:`kernels.ops_by_external_id`; for the device events whose launch is not in
    ``launches``) (:mod:`inductor_perf.comparison.sides` does). ``kernels=False``: no kernels (only
    ``by="kernel"`` reads them; units still take their FLOPs from the device events)."""
    got = SideEvents(events, with_index=kernel_info is not None)
    if launches is not None:
        got.launches.update(launches)
    if device is not None:
        got.device.extend(device)
    by_ext = ops_by_ext if ops_by_ext is not None else ops_by_external_id(got.op_exts)
    steps, steps_from, step_threads = _find_steps(got.by_thread)
    collector = _UnitCollector(kernel_info, got.index_of)
    autograd = autograd_threads(got.by_thread, step_threads)
    for key, thread_evs in got.by_thread.items():
        if step_threads and key not in step_threads and key not in autograd:
            continue  # other threads overlap the step in time; their work is not the step's
        # step marks are not nested with the rest (a mark placed inside a compiled call cuts it):
        # they only say where steps begin and end (_find_steps)
        roots = _forest((e for e in thread_evs if not _is_step(e[0]["name"])))
        collector.thread = key
        collector.threads.add(key)
        for r in roots:
            _mark_ours(r)
            # the autograd engine's thread runs backward ops only (torch runs them apart from the
            # thread that called backward() when a device is involved)
            collector.visit(r, _Scope(phase="backward") if key in autograd else _Scope())
    collector.resolve_backward()
    kernel_units, kernel_time, unlinked = _kernel_units(got, by_ext, collector, autograd, kernels)
    units = collector.units
    if steps:
        windows = merge(steps)
        walls = [b - a for a, b in steps]
    else:  # no step marks: one step spanning every unit and kernel
        spans = [(u.ts, u.ts + u.dur) for u in units] + [(d[2], d[2] + d[3]) for d in got.device]
        windows = [(min(a for a, _ in spans), max(b for _, b in spans))] if spans else []
        walls = [b - a for a, b in windows]
    units, covered = _keep_in_steps(units, windows, steps)
    kernel_units, kernels_covered = _keep_in_steps(kernel_units, windows, steps)
    lost = clip([(ts, dur) for ts, dur in unlinked], windows)[0]
    return TraceUnits(units=units, step_walls_us=walls, steps_from=steps_from,
                      has_module_info=collector.has_module, has_source_info=collector.has_source,
                      compiled=collector.compiled_trace, eager_op_names=frozenset(collector.all_names),
                      kernels=kernel_units, kernels_read=kernels, kernel_time=kernel_time, covered_us=covered,
                      kernels_covered_us=kernels_covered,
                      unlinked=(sum(t is not None for t in lost), sum(t for t in lost if t is not None)))


def _is_step(name: str) -> bool:
    return name.startswith(_PROFILER_STEP) or parse_step_range(name) is not None


def _kernel_units(got: SideEvents, by_ext: Mapping[Any, tuple[Any, Any, float]], collector: "_UnitCollector",
                  autograd: set[tuple[Any, Any]], want: bool) -> tuple[list[Unit], str, list[tuple[float, float]]]:
    """(each kernel as a unit of the unit it belongs to (:mod:`.kernels`; none unless ``want``),
    ``device`` or ``host``, the device events launched from no thread of the step: (ts, dur)). A host
    unit whose device events carry FLOPs takes their sum (and their peak share); a compiled one
    without a module of its own takes its kernels' (augmented GPU traces carry them on the device
    events)."""
    places, markers, optimizer = collector.places.freeze(), collector.markers.freeze(), collector.optimizer.freeze()
    out: list[Unit] = []
    unlinked: list[tuple[float, float]] = []
    if not got.device:
        if want:
            for thread, ev, ts, dur in cpu_kernels({k: v for k, v in got.by_thread.items() if k in collector.threads}):
                u = places.at(thread, ts)
                if u is not None:
                    out.append(_kernel_of(ev["name"], evs.event_args(ev), ts, dur, u))
        return out, "host", unlinked
    launched: dict[int, list[Device]] = defaultdict(list)
    threads, launches, at = collector.threads, got.launches, places.at
    for dev in got.device:
        _, name, ts, dur, corr, ext, args = dev
        place = None if corr is None else launches.get(corr if type(corr) is int else correlation_key(corr))
        if place is None and ext is not None:  # no launch recorded: the op of its External id
            place = by_ext.get(ext if type(ext) is int else correlation_key(ext))
        thread = (place[0], place[1]) if place is not None else None
        if thread is None or thread not in threads:
            unlinked.append((ts, dur))  # still a kernel of the device's time: in phase "other"
            if want:
                out.append(_kernel_of(name, args, ts, dur, Unit("", ts, dur, OTHER_PHASE, NO_KEY, None, (), False)))
            continue
        u = at(thread, place[2])  # type: ignore[index]
        if u is None:
            # launched in no op: a CUDA graph replayed in a compiled graph's marker, an optimizer's
            # kernels from its annotation: a kernel of the phase there
            if want:
                phase = markers.at(thread, place[2])  # type: ignore[index]
                default = (OPTIMIZER_PHASE if optimizer.at(thread, place[2])  # type: ignore[index]
                           else "backward" if thread in autograd else "forward")
                out.append(_kernel_of(name, args, ts, dur, Unit("", ts, dur, phase or default,
                                                                RUNTIME_OVERHEAD if phase else OUTSIDE_MODEL, None, (),
                                                                phase is not None)))
            continue
        launched[id(u)].append(dev)
        if want:
            out.append(_kernel_of(name, args, ts, dur, u))
    for u in collector.units:
        devs = launched.get(id(u))
        if devs:
            _from_kernels(u, devs, collector)
    return out, "device", unlinked


def _kernel_of(name: str, args: dict, ts: float, dur: float, u: Unit) -> Unit:
    """Kernel event ``name`` (of ``args``) as a unit: its own name, time, cost and (when augmenting
    wrote them) module, source and fused ops; else its unit's phase, module and source."""
    mod, src, ops = args.get(evs.MODULE_PATH), args.get(evs.SOURCE), _ops_of(args.get(evs.EAGER_OPS))
    flops, pct = combine_costs([kernel_cost(args, dur)])
    return Unit(name=name, ts=ts, dur=dur, phase=u.phase, module=mod if isinstance(mod, str) else u.module,
                source=src if isinstance(src, str) else u.source, ops=ops or (name,), compiled=u.compiled,
                flops=flops, achieved_pct=pct, subtree_names=(name,))


def _from_kernels(u: Unit, devs: list[Device], collector: "_UnitCollector") -> None:
    """What host unit ``u`` takes from the device events it launched, ``devs``."""
    costs = [kernel_cost(d[6], d[3]) for d in devs if d[6]]
    if any(f is not None for f, _ in costs):
        u.flops, u.achieved_pct = combine_costs(costs)
    if u.compiled and u.module == NO_KEY:
        lead = max((d for d in devs if isinstance(d[6].get(evs.MODULE_PATH), str)), key=lambda d: d[3], default=None)
        if lead is not None:
            u.module, collector.has_module = lead[6][evs.MODULE_PATH], True
            src = lead[6].get(evs.SOURCE)
            if u.source is None and isinstance(src, str):
                u.source, collector.has_source = src, True
            if not u.ops or u.ops == (u.name,):
                u.ops = _ops_of(lead[6].get(evs.EAGER_OPS)) or (lead[1],)


def _ops_of(ops_arg: Any) -> tuple[str, ...]:
    """The eager ops of an ``eager_ops`` arg (a comma-separated string, or a list)."""
    if isinstance(ops_arg, str):
        return tuple(o.strip() for o in ops_arg.split(",") if o.strip())
    return tuple(o for o in ops_arg if isinstance(o, str)) if isinstance(ops_arg, (list, tuple)) else ()
