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

from .. import events as evs
from .. import trace_format as tf
from ..eager import parse_module_range, parse_phase_range, parse_step_range
from ..markers import MARKER_PREFIX, parse_marker

# Keys of rows that are not a module / line / op of the user's code.
OUTSIDE_MODEL = "(outside model)"
RUNTIME = "(runtime overhead)"
GRAD_ACCUM = "(grad accumulation)"
NO_KEY = "(unknown)"
SPECIAL_KEYS = (OUTSIDE_MODEL, RUNTIME, GRAD_ACCUM, NO_KEY)

_EVAL_FN = "autograd::engine::evaluate_function: "
_ACCUMULATE_GRAD = "torch::autograd::AccumulateGrad"
_PROFILER_STEP = "ProfilerStep#"
# Ops that only re-describe memory; they are left out of the fusion map when a kernel has real work.
VIEW_OPS = frozenset({
    "aten::view", "aten::reshape", "aten::_unsafe_view", "aten::permute", "aten::transpose", "aten::t",
    "aten::expand", "aten::squeeze", "aten::unsqueeze", "aten::slice", "aten::select", "aten::split",
    "aten::split_with_sizes", "aten::alias", "aten::as_strided", "aten::detach", "aten::unbind",
    "getitem", "operator.getitem",
})
# The host-side events units are cut from: ops and our ranges (CPU_SCOPE_CATS), plus Python frames,
# which are transparent (their ops still count) but must nest like the rest.
_CPU_CATS = evs.CPU_SCOPE_CATS | {"python_function"}
HOST_CATS = frozenset(_CPU_CATS)
"""The (lower-cased) categories of the events units are cut from."""
UNIT_ARGS = ("Sequence number", evs.MODULE_PATH, evs.SOURCE, evs.EAGER_OPS, evs.KERNEL_FLOP, evs.ACHIEVED_FLOPS_PCT)
"""The only args of a host event that cutting units reads."""


# --- units: the outermost op / kernel events of a trace ------------------------------------------
@dataclass(slots=True)
class Unit:
    """One outermost op or compiled-kernel call."""

    name: str
    ts: float
    dur: float
    phase: str
    """``forward`` or ``backward``."""
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


@dataclass(frozen=True)
class _Scope:
    """What the containers around an event say about it."""

    module: str | None = None
    """The innermost ``## inductor_perf module=`` range (eager runs)."""
    phase: str | None = None
    """The innermost phase range: forward, loss or backward."""
    graph: str | None = None
    """``fwd`` / ``bwd`` inside a compiled-graph marker."""
    in_compiled: bool = False
    """Inside an op that holds a graph marker (Torch-Compiled Region, CompiledFunction, ...)."""
    in_model: bool = False
    """Inside the forward phase range."""


def _cpu_events_by_thread(events: Iterable[tuple[int, dict, float, float]], with_index: bool = True
                          ) -> tuple[dict[tuple[Any, Any], list[tuple[dict, float, float]]], dict[int, int]]:
    """The named host events of each (pid, tid), and (``with_index``) each event's index in the
    trace (by ``id``)."""
    by_thread: dict[tuple[Any, Any], list[tuple[dict, float, float]]] = defaultdict(list)
    index_of: dict[int, int] = {}
    host: dict[Any, bool] = {}  # category -> whether units read it (evs.category, once per category)
    for i, ev, ts, dur in events:
        cat = ev.get("cat")
        if not isinstance(cat, str):
            continue
        keep = host.get(cat)
        if keep is None:
            keep = host[cat] = cat.lower() in _CPU_CATS
        if not keep or not isinstance(ev.get("name"), str):
            continue
        if with_index:
            index_of[id(ev)] = i
        by_thread[(ev.get("pid"), ev.get("tid"))].append((ev, ts, dur))
    return by_thread, index_of


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

    def visit(self, n: _Node, scope: _Scope) -> None:
        name: str = n.ev["name"]
        cat = evs.category(n.ev)
        if n.ours:  # a container: our ranges, markers, profiler steps, and the events around them
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
        elif n.marker and cat in evs.CPU_OP_CATS and not _is_ours(name):
            scope = dataclasses.replace(scope, in_compiled=True)  # Torch-Compiled Region, CompiledFunction[Backward], ...
        return scope

    def _unit(self, n: _Node, name: str, scope: _Scope) -> None:
        args = evs.event_args(n.ev)
        subtree = _names(n)
        self.all_names.update(subtree)
        is_bwd_event = name.startswith(_EVAL_FN)
        if scope.graph is not None:
            unit_phase = "backward" if scope.graph == "bwd" else "forward"
        elif scope.phase is not None:
            unit_phase = "backward" if scope.phase == "backward" else "forward"
        else:
            unit_phase = "backward" if is_bwd_event else "forward"
        if scope.graph is not None:
            self.units.append(self._kernel_unit(n, name, args, unit_phase, subtree))
        else:
            self._eager_unit(n, name[len(_EVAL_FN):] if is_bwd_event else name, args, unit_phase, subtree, scope)

    def _kernel_unit(self, n: _Node, name: str, args: dict, unit_phase: str, subtree: tuple[str, ...]) -> Unit:
        """A compiled kernel call: module, source and ops from ``kernel_info`` (the tags), else from args."""
        info = self.kernel_info(self.index_of[id(n.ev)]) if self.kernel_info is not None else None
        mod = info.get("module") if info else args.get(evs.MODULE_PATH)
        src = info.get("source") if info else args.get(evs.SOURCE)
        ops_arg = info.get("ops") if info else args.get(evs.EAGER_OPS)
        if isinstance(ops_arg, str):
            ops = tuple(o.strip() for o in ops_arg.split(",") if o.strip())
        elif ops_arg:
            ops = tuple(ops_arg)
        else:
            ops = (name,) if not name.startswith("graph_") else ()
        if not isinstance(mod, str):
            mod = None
        if isinstance(mod, str):
            self.has_module = True
        if isinstance(src, str):
            self.has_source = True
        else:
            src = None
        # The event's own name (graph_0_cpp_fused_gelu_0, aten::addmm): what other tools show.
        return Unit(name=name, ts=n.ts, dur=n.end - n.ts, phase=unit_phase,
                    module=mod if mod is not None else NO_KEY, source=src, ops=ops, compiled=True,
                    flops=evs.number(args.get(evs.KERNEL_FLOP)),
                    achieved_pct=evs.number(args.get(evs.ACHIEVED_FLOPS_PCT)),
                    also_modules=tuple((info or {}).get("also_modules", ())), subtree_names=subtree,
                    node_keys=tuple((info or {}).get("node_keys", ())))

    def _eager_unit(self, n: _Node, op: str, args: dict, unit_phase: str, subtree: tuple[str, ...],
                    scope: _Scope) -> None:
        """An eager op: its module range, else a special row; backward ops wait for their forward op's module."""
        u = Unit(name=op, ts=n.ts, dur=n.end - n.ts, phase=unit_phase, module=None, source=None, ops=(op,),
                 compiled=False, subtree_names=subtree)
        if scope.module is not None:
            u.module = scope.module
            if unit_phase == "forward":
                self.fwd_units.append((n, scope.module))
        elif scope.in_compiled:
            u.module = RUNTIME
        elif scope.in_model and unit_phase == "forward":
            u.module = RUNTIME
        elif op == _ACCUMULATE_GRAD:
            u.module = GRAD_ACCUM
        elif unit_phase == "backward":
            seq = args.get("Sequence number")
            self.pending_bwd.append((u, [seq] if isinstance(seq, int) else []))
        else:
            u.module = OUTSIDE_MODEL
            if unit_phase == "forward":
                self.fwd_units.append((n, None))
        self.units.append(u)

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


def _keep_in_steps(units: list[Unit], steps: list[tuple[float, float]]) -> tuple[list[Unit], list[float]]:
    """The units inside the steps, numbered by step, and each step's wall time (no steps: all units
    and one span covering them)."""
    if steps:
        starts = [a for a, _ in steps]
        kept = []
        for u in units:
            k = bisect.bisect_right(starts, u.ts) - 1
            if k >= 0 and u.ts < steps[k][1]:
                u.step = k
                kept.append(u)
        return kept, [b - a for a, b in steps]
    if units:
        return units, [max(u.ts + u.dur for u in units) - min(u.ts for u in units)]
    return units, []


def trace_units(trace: Mapping[str, Any], *, kernel_info: Callable[[int], dict[str, Any] | None] | None = None,
                skipped: dict[str, int] | None = None) -> TraceUnits:
    """Cut a Kineto trace into :class:`Unit` s (pure).

    ``kernel_info(event_index)`` may supply ``module``, ``source``, ``ops``, ``kernel``, ``also_modules``
    for compiled kernel events (what :func:`compare` knows from the tags); otherwise they come from
    the events' args (``module_path``, ``source``, ``eager_ops``). ``skipped``: where
    :func:`events.complete_events` counts the events skipped for their times.
    """
    tf.validate_trace(dict(trace))
    return units_from_events(evs.complete_events(dict(trace), skipped=skipped), kernel_info=kernel_info)


def units_from_events(events: Iterable[tuple[int, dict, float, float]], *,
                      kernel_info: Callable[[int], dict[str, Any] | None] | None = None) -> TraceUnits:
    """:func:`trace_units` of a trace's complete events, given as :func:`events.complete_events`
    yields them (``(index, event, ts, dur)`` in file order). Only the host events (categories
    ``cpu_op``, ``operator``, ``user_annotation``, ``python_function``) with a string name are read,
    and of each only its name, category, pid, tid and the args a unit takes (``Sequence number``,
    ``module_path``, ``source``, ``eager_ops``, ``kernel_flop``, ``achieved_flops_pct``): a caller
    may pass those events alone, slimmed (:mod:`inductor_perf.comparison.sides` does)."""
    by_thread, index_of = _cpu_events_by_thread(events, with_index=kernel_info is not None)
    forests = {k: _forest(v) for k, v in by_thread.items()}
    for roots in forests.values():
        for r in roots:
            _mark_ours(r)
    steps, steps_from, step_threads = _find_steps(by_thread)
    collector = _UnitCollector(kernel_info, index_of)
    for key, roots in forests.items():
        if step_threads and key not in step_threads:
            continue  # other threads overlap the step in time; their work is not the step's
        for r in roots:
            collector.visit(r, _Scope())
    collector.resolve_backward()
    units, walls = _keep_in_steps(collector.units, steps)
    return TraceUnits(units=units, step_walls_us=walls, steps_from=steps_from,
                      has_module_info=collector.has_module, has_source_info=collector.has_source,
                      compiled=collector.compiled_trace, eager_op_names=frozenset(collector.all_names))


def aggregate_units(tu: TraceUnits) -> TraceUnits:
    """``tu`` with its units grouped by everything the rows read of a unit (phase, module, source,
    name, eager ops, call-tree names, fusion modules and FX node keys, whether its FLOPs and peak %
    are known): one unit per group, its :attr:`Unit.count` the calls, ``dur`` and ``flops`` their
    totals, ``ts`` the first one's start, ``achieved_pct`` the FLOP-weighted mean. The groups keep
    the order of their first unit. :func:`rows.compare_units` gives the same rows for both, within
    float rounding. Groups grow with the distinct calls, not the calls: 5,807 units of a real A100
    trace make 100 groups, the million events of ``bench/gen_trace.py`` 5.

    >>> u = Unit("aten::mm", 5.0, 2.0, "forward", "fc", None, ("aten::mm",), False)
    >>> v = dataclasses.replace(u, ts=9.0, dur=3.0)
    >>> [(g.count, g.ts, g.dur) for g in aggregate_units(TraceUnits([u, v], [10.0], "span", True, False, False)).units]
    [(2, 5.0, 5.0)]
    """
    groups: dict[tuple[Any, ...], Unit] = {}
    den: dict[tuple[Any, ...], float] = {}
    for u in tu.units:
        pct = u.flops is not None and bool(u.achieved_pct) and u.achieved_pct > 0 and u.flops > 0
        key = (u.phase, u.module, u.source, u.source_inferred, u.name, u.ops, u.compiled, u.subtree_names,
               u.also_modules, u.node_keys, u.flops is not None, pct)
        g = groups.get(key)
        if g is None:
            groups[key] = dataclasses.replace(u, achieved_pct=None)
            den[key] = u.flops / u.achieved_pct if pct else 0.0
            continue
        g.count += u.count
        g.dur += u.dur
        if u.ts < g.ts:
            g.ts = u.ts
        if u.flops is not None:
            g.flops = (g.flops or 0.0) + u.flops
        if pct:
            den[key] += u.flops / u.achieved_pct
    for key, g in groups.items():
        if key[-1]:  # peak % of the group: its FLOPs over the time they would take at 100 %
            g.achieved_pct = g.flops / den[key]
    return dataclasses.replace(tu, units=list(groups.values()))
