"""Eager vs compiled (and trace vs trace), matched by what the user wrote: nn.Module path, source line
or eager op, never by kernel name (except ``by="kernel"``, for two compiled runs of the same code).

Upstream's trace diff joins by kernel name, which cannot work between eager (aten ops) and compiled
(fused kernels). Here each trace is cut into *units*: the outermost op or kernel events of each thread
(an ``aten::linear`` counts once, not again for the ``aten::addmm`` inside it; a compiled graph's
kernels count one by one). Each unit gets

- a phase: forward or backward (compiled kernels: their graph; eager autograd ops: the
  ``autograd::engine::evaluate_function`` events of the backward pass);
- a module: the innermost ``## inductor_perf module=<fqn> ##`` range around an eager op
  (:mod:`inductor_perf.eager`); for an eager backward op, the module of the forward op with the same
  autograd ``Sequence number``; for a compiled kernel, its ``module_path`` arg (augmented traces);
- a source line (compiled kernels only: eager traces carry none);
- the eager ops it stands for: its own name for eager units; for compiled kernels, the
  ``original_aten`` ops of the FX nodes it computes (``eager_ops`` arg).

Rows group units by key within each phase and join the two traces on (phase, key). Module rows are
leaf-level: each unit counts in exactly one row (its innermost module), and a parent row holds only
the work done directly in the parent's own ``forward``. A compiled kernel that fuses nodes of several
modules counts in the module with most of its (non-view) nodes; the fusion map names the others.

Time per row is per step (mean over the recorded steps). The totals row is the measured step time
(from the step ranges); whatever no unit covers (Python between ops, hooks, the profiler itself) is
the "(unattributed)" row, so the rows add up to the measured step time exactly.
"""

from __future__ import annotations

import bisect
import json
import logging
import math
import os
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from . import trace_format as tf
from .eager import parse_module_range, parse_phase_range, parse_step_range
from .errors import InductorPerfError
from .markers import MARKER_PREFIX, parse_marker
from .tags import aten_op_name

log = logging.getLogger(__name__)

BY = ("module", "line", "op", "kernel")

# Extra arg compare writes on compiled kernel events: the eager ops the kernel's FX nodes came from,
# comma-separated ("aten::gelu, aten::native_layer_norm").
EAGER_OPS = tf.EAGER_OPS

# Keys of rows that are not a module / line / op of the user's code.
OUTSIDE_MODEL = "(outside model)"
RUNTIME = "(runtime overhead)"
GRAD_ACCUM = "(grad accumulation)"
UNATTRIBUTED = "(unattributed)"
NO_KEY = "(unknown)"
_SPECIAL_KEYS = (OUTSIDE_MODEL, RUNTIME, GRAD_ACCUM, NO_KEY)

_EVAL_FN = "autograd::engine::evaluate_function: "
_ACCUMULATE_GRAD = "torch::autograd::AccumulateGrad"
_PROFILER_STEP = "ProfilerStep#"
# Ops that only re-describe memory; they are left out of the fusion map when a kernel has real work.
_VIEW_OPS = frozenset({
    "aten::view", "aten::reshape", "aten::_unsafe_view", "aten::permute", "aten::transpose", "aten::t",
    "aten::expand", "aten::squeeze", "aten::unsqueeze", "aten::slice", "aten::select", "aten::split",
    "aten::split_with_sizes", "aten::alias", "aten::as_strided", "aten::detach", "aten::unbind",
    "getitem", "operator.getitem",
})
_CPU_CATS = frozenset({"cpu_op", "operator", "user_annotation", "python_function"})


# --- units: the outermost op / kernel events of a trace ------------------------------------------
@dataclass
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


@dataclass
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


def _names(n: _Node) -> Iterable[str]:
    yield n.ev.get("name", "")
    for c in n.children:
        yield from _names(c)


def _seqs(n: _Node) -> Iterable[int]:
    s = tf.event_args(n.ev).get("Sequence number")
    if isinstance(s, int) and not isinstance(s, bool):
        yield s
    for c in n.children:
        yield from _seqs(c)


def _num(v: Any) -> float | None:
    return tf.number(v)


def trace_units(trace: Mapping[str, Any], *, kernel_info: Callable[[int], dict[str, Any] | None] | None = None
                ) -> TraceUnits:
    """Cut a Kineto trace into :class:`Unit` s (pure).

    ``kernel_info(event_index)`` may supply ``module``, ``source``, ``ops``, ``kernel``, ``also_modules``
    for compiled kernel events (what :func:`compare` knows from the tags); otherwise they come from
    the events' args (``module_path``, ``source``, ``eager_ops``).
    """
    tf.validate_trace(dict(trace))
    by_thread: dict[tuple[Any, Any], list[tuple[dict, float, float]]] = defaultdict(list)
    index_of: dict[int, int] = {}
    for i, ev, ts, dur in tf.complete_events(dict(trace)):
        if tf.category(ev) not in _CPU_CATS:
            continue
        if not isinstance(ev.get("name"), str):
            continue
        index_of[id(ev)] = i
        by_thread[(ev.get("pid"), ev.get("tid"))].append((ev, ts, dur))

    forests = {k: _forest(v) for k, v in by_thread.items()}
    for roots in forests.values():
        for r in roots:
            _mark_ours(r)

    # Steps: ours, else ProfilerStep#N, else one span.
    steps: list[tuple[float, float]] = []
    steps_from = "span"
    step_threads: set[tuple[Any, Any]] = set()
    for kind, parse in (("inductor_perf", parse_step_range),
                        ("ProfilerStep", lambda nm: 0 if nm.startswith(_PROFILER_STEP) else None)):
        for key, evs in by_thread.items():
            for ev, ts, dur in evs:
                if parse(ev["name"]) is not None:
                    steps.append((ts, ts + dur))
                    step_threads.add(key)
        if steps:
            steps_from = kind
            break
    steps.sort()

    units: list[Unit] = []
    fwd_seq_module: dict[int, str | None] = {}
    pending_bwd: list[tuple[Unit, list[int]]] = []
    has_module = has_source = compiled_trace = False
    all_names: set[str] = set()

    def visit(n: _Node, module: str | None, phase: str | None, graph: str | None,
              in_compiled: bool, in_model: bool) -> None:
        nonlocal has_module, has_source, compiled_trace
        ev = n.ev
        name: str = ev["name"]
        cat = tf.category(ev)
        if n.ours:  # a container: our ranges, markers, profiler steps, and the events around them
            fqn = parse_module_range(name)
            if fqn is not None:
                module, has_module = fqn, True
            ph = parse_phase_range(name)
            if ph is not None:
                phase, in_model = ph, ph == "forward"
            if name.startswith(MARKER_PREFIX):
                parsed = parse_marker(name)
                graph = ("bwd" if parsed[1] else "fwd") if parsed else "fwd"
                compiled_trace = True
            elif n.marker and cat in ("cpu_op", "operator") and not _is_ours(name):
                in_compiled = True  # Torch-Compiled Region, CompiledFunction[Backward], ...
            for c in n.children:
                visit(c, module, phase, graph, in_compiled, in_model)
            return
        if cat not in ("cpu_op", "operator"):
            # python_function, Optimizer.step#..., other annotations: transparent, not work units
            for c in n.children:
                visit(c, module, phase, graph, in_compiled, in_model)
            return
        # A unit.
        args = tf.event_args(ev)
        subtree = tuple(_names(n))
        all_names.update(subtree)
        is_bwd_event = name.startswith(_EVAL_FN)
        if graph is not None:
            unit_phase = "backward" if graph == "bwd" else "forward"
        elif phase is not None:
            unit_phase = "backward" if phase == "backward" else "forward"
        else:
            unit_phase = "backward" if is_bwd_event else "forward"
        info = kernel_info(index_of[id(ev)]) if (kernel_info is not None and graph is not None) else None
        if graph is not None:
            mod = info.get("module") if info else args.get(tf.MODULE_PATH)
            src = info.get("source") if info else args.get(tf.SOURCE)
            ops_arg = info.get("ops") if info else args.get(EAGER_OPS)
            if isinstance(ops_arg, str):
                ops = tuple(o.strip() for o in ops_arg.split(",") if o.strip())
            elif ops_arg:
                ops = tuple(ops_arg)
            else:
                ops = (name,) if not name.startswith("graph_") else ()
            if not isinstance(mod, str):
                mod = None
            if isinstance(mod, str):
                has_module = True
            if isinstance(src, str):
                has_source = True
            else:
                src = None
            # The event's own name (graph_0_cpp_fused_gelu_0, aten::addmm): what other tools show.
            u = Unit(name=name, ts=n.ts, dur=n.end - n.ts, phase=unit_phase,
                     module=mod if mod is not None else NO_KEY, source=src, ops=ops, compiled=True,
                     flops=_num(args.get(tf.KERNEL_FLOP)), achieved_pct=_num(args.get(tf.ACHIEVED_FLOPS_PCT)),
                     also_modules=tuple((info or {}).get("also_modules", ())), subtree_names=subtree,
                     node_keys=tuple((info or {}).get("node_keys", ())))
            units.append(u)
            return
        op = name[len(_EVAL_FN):] if is_bwd_event else name
        u = Unit(name=op, ts=n.ts, dur=n.end - n.ts, phase=unit_phase, module=None, source=None, ops=(op,),
                 compiled=False, subtree_names=subtree)
        if module is not None:
            u.module = module
            if unit_phase == "forward":
                for s in _seqs(n):
                    fwd_seq_module[s] = module
        elif in_compiled:
            u.module = RUNTIME
        elif in_model and unit_phase == "forward":
            u.module = RUNTIME
        elif op == _ACCUMULATE_GRAD:
            u.module = GRAD_ACCUM
        elif unit_phase == "backward":
            seq = args.get("Sequence number")
            pending_bwd.append((u, [seq] if isinstance(seq, int) else []))
        else:
            u.module = OUTSIDE_MODEL
            if unit_phase == "forward":
                for s in _seqs(n):
                    fwd_seq_module.setdefault(s, None)
        units.append(u)

    for key, roots in forests.items():
        if step_threads and key not in step_threads:
            continue  # other threads overlap the step in time; their work is not the step's
        for r in roots:
            visit(r, None, None, None, False, False)
    for u, seqs in pending_bwd:
        mod = next((fwd_seq_module[s] for s in seqs if s in fwd_seq_module), None)
        u.module = mod if mod is not None else OUTSIDE_MODEL

    # Keep units of the step threads inside steps; number them by step.
    if steps:
        starts = [a for a, _ in steps]
        kept = []
        for u in units:
            k = bisect.bisect_right(starts, u.ts) - 1
            if k >= 0 and u.ts < steps[k][1]:
                u.step = k
                kept.append(u)
        units = kept
        walls = [b - a for a, b in steps]
    else:
        if units:
            walls = [max(u.ts + u.dur for u in units) - min(u.ts for u in units)]
        else:
            walls = []
    return TraceUnits(units=units, step_walls_us=walls, steps_from=steps_from, has_module_info=has_module,
                      has_source_info=has_source, compiled=compiled_trace,
                      eager_op_names=frozenset(all_names))


# --- rows ------------------------------------------------------------------------------------------
@dataclass
class Row:
    """One (phase, key) row. Times and counts are per step (means over the recorded steps)."""

    phase: str
    key: str
    a_us: float = 0.0
    b_us: float = 0.0
    a_count: float = 0.0
    """Eager ops (or kernels, for a compiled trace) per step."""
    b_count: float = 0.0
    flops: float | None = None
    """FLOPs per step, from the compiled side's ``kernel_flop`` args (B, else A)."""
    achieved_pct: float | None = None
    """The compiled side's FLOP/s as % of the compute peak (from ``achieved_flops_pct`` args)."""
    fusion: list[str] = field(default_factory=list)
    """``"aten::gelu, aten::add → cpp_fused_add_gelu_3"``: which eager ops fused into which kernels."""

    @property
    def speedup(self) -> float | None:
        """A time / B time (> 1: B is faster); None when either side has no time."""
        if self.a_us > 0 and self.b_us > 0:
            return self.a_us / self.b_us
        return None

    @property
    def delta_us(self) -> float:
        """B time minus A time, per step."""
        return self.b_us - self.a_us

    def to_dict(self) -> dict[str, Any]:
        return {"phase": self.phase, "key": self.key, "a_us": self.a_us, "b_us": self.b_us,
                "speedup": self.speedup, "delta_us": self.delta_us, "a_count": self.a_count,
                "b_count": self.b_count, "flops": self.flops, "achieved_pct": self.achieved_pct,
                "fusion": list(self.fusion)}


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _work_ops(ops: Sequence[str]) -> list[str]:
    """The ops of a kernel without pure view ops (all of them when it has nothing else)."""
    work = [o for o in ops if o not in _VIEW_OPS]
    return work or list(ops)


def _op_groups(sides: Sequence[TraceUnits]) -> Callable[[Unit], str]:
    """A by-op key function: ops fused into one compiled kernel share a group; an eager op joins the
    group of the first op in its own call tree that a compiled kernel computes (``aten::linear`` ->
    ``aten::addmm``), so eager and compiled rows line up."""
    finds: dict[str, _UnionFind] = {"forward": _UnionFind(), "backward": _UnionFind()}
    universe: dict[str, set[str]] = {"forward": set(), "backward": set()}
    for side in sides:
        for u in side.units:
            if not u.compiled:
                continue
            ops = _work_ops(u.ops) or [u.name]
            uf = finds[u.phase]
            for o in ops:
                uf.find(o)
                universe[u.phase].add(o)
            for o in ops[1:]:
                uf.union(ops[0], o)
    members: dict[tuple[str, str], set[str]] = defaultdict(set)
    for ph, uf in finds.items():
        for o in universe[ph]:
            members[(ph, uf.find(o))].add(o)

    def label(phase: str, root: str) -> str:
        return " + ".join(sorted(members[(phase, root)])) or root

    def key(u: Unit) -> str:
        uni = universe[u.phase]
        uf = finds[u.phase]
        if u.compiled:
            ops = _work_ops(u.ops) or [u.name]
            return label(u.phase, uf.find(ops[0]))
        for name in u.subtree_names:
            if name in uni:
                return label(u.phase, uf.find(name))
        return u.name

    return key


def _key_fn(by: str, sides: Sequence[TraceUnits]) -> Callable[[Unit], str]:
    if by == "module":
        return lambda u: u.module if u.module is not None else NO_KEY
    if by == "line":
        return lambda u: u.source or (u.module if u.module in _SPECIAL_KEYS else "(no source info)")
    if by == "kernel":
        return lambda u: u.name
    if by == "op":
        return _op_groups(sides)
    raise InductorPerfError(f"unknown grouping by={by!r}; expected one of {', '.join(BY)}")


def _fusion_entry(u: Unit) -> str:
    ops = _work_ops(u.ops)
    if not ops or list(ops) == [u.name]:
        text = f"{u.name} (not fused)"
    else:
        text = f"{', '.join(sorted(set(ops)))} → {u.name}"
    if u.also_modules:
        text += f" (also nodes of {', '.join(m or '(root module)' for m in u.also_modules)})"
    return text


@dataclass
class SideTotals:
    """What one trace measured."""

    label: str
    steps: int
    steps_from: str
    step_us: float
    """Mean measured step time (step ranges)."""
    attributed_us: float
    """Mean time per step covered by units (rows)."""
    compiled: bool
    has_module_info: bool
    has_source_info: bool
    unprofiled_step_us: float | None = None
    """Median step time measured without the profiler (compare() only)."""

    @property
    def unattributed_us(self) -> float:
        return self.step_us - self.attributed_us

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "steps": self.steps, "steps_from": self.steps_from,
                "step_us": self.step_us, "attributed_us": self.attributed_us,
                "unattributed_us": self.unattributed_us, "compiled": self.compiled,
                "has_module_info": self.has_module_info, "has_source_info": self.has_source_info,
                "unprofiled_step_us": self.unprofiled_step_us}


@dataclass
class Comparison:
    """Eager vs compiled (or trace A vs trace B), row by row. ``to_text`` / ``to_markdown`` /
    ``to_dict`` (strict-JSON-safe) render it."""

    by: str
    """What rows are keyed by: ``module`` (leaf-level), ``line``, ``op`` or ``kernel``."""
    a: SideTotals
    b: SideTotals
    rows: list[Row]
    notes: list[str] = field(default_factory=list)

    def row(self, key: str, phase: str = "forward") -> Row | None:
        """The row with this key in this phase, or None."""
        return next((r for r in self.rows if r.key == key and r.phase == phase), None)

    def phase_total(self, phase: str) -> tuple[float, float]:
        """(A, B) time per step of all rows of one phase."""
        rs = [r for r in self.rows if r.phase == phase]
        return sum(r.a_us for r in rs), sum(r.b_us for r in rs)

    @property
    def speedup(self) -> float | None:
        """Measured step time A / B (from the profiled steps)."""
        if self.a.step_us > 0 and self.b.step_us > 0:
            return self.a.step_us / self.b.step_us
        return None

    @property
    def unprofiled_speedup(self) -> float | None:
        a, b = self.a.unprofiled_step_us, self.b.unprofiled_step_us
        return a / b if a and b else None

    def to_dict(self) -> dict[str, Any]:
        """Strict-JSON-safe dict (no NaN / Infinity; None where a value is unknown)."""
        d = {"by": self.by, "rows_are": _ROWS_ARE[self.by], "a": self.a.to_dict(), "b": self.b.to_dict(),
             "speedup": self.speedup, "unprofiled_speedup": self.unprofiled_speedup,
             "rows": [r.to_dict() for r in self.rows], "notes": list(self.notes)}
        return _json_safe(d)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False)

    def to_text(self) -> str:
        return _render(self, "text")

    def to_markdown(self) -> str:
        return _render(self, "markdown")

    def format(self, fmt: str) -> str:
        """``text``, ``markdown`` or ``json``."""
        if fmt == "json":
            return self.to_json() + "\n"
        if fmt == "text":
            return self.to_text()
        if fmt == "markdown":
            return self.to_markdown()
        raise InductorPerfError(f"unknown format {fmt!r}; expected text, markdown or json")


_ROWS_ARE = {
    "module": "leaf-level: each op/kernel counts once, in its innermost nn.Module (a parent row holds "
              "only work done directly in its own forward)",
    "line": "source line of the user's code (compiled: from the kernels' FX nodes; eager: inferred "
            "from a compiled node of the same module and op)",
    "op": "eager op groups: ops that a compiled kernel fused together share one row",
    "kernel": "kernel / op event name (meaningful between two compiled runs of the same code)",
}


def _json_safe(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    return v


def compare_units(a: TraceUnits, b: TraceUnits, *, by: str = "module", labels: tuple[str, str] = ("A", "B"),
                  ) -> Comparison:
    """Join two traces' units into rows (pure). ``a`` is the baseline (eager), ``b`` the candidate."""
    if by not in BY:
        raise InductorPerfError(f"unknown grouping by={by!r}; expected one of {', '.join(BY)}")
    notes: list[str] = []
    sides = (a, b)
    if by == "module" and not (a.has_module_info and b.has_module_info):
        which = " and ".join(lbl for lbl, s in zip(labels, sides) if not s.has_module_info)
        notes.append(f"{which} has no module info (no module_path args and no '## inductor_perf module=' "
                     "ranges); rows are by op instead")
        by = "op"
    if by == "line" and not (a.has_source_info or b.has_source_info):
        notes.append("neither trace has source lines; rows are by op instead")
        by = "op"
    elif by == "line":
        for lbl, s, other in ((labels[0], a, b), (labels[1], b, a)):
            if not s.has_source_info:
                n_inf, n_all = _infer_sources(s, other)
                notes.append(f"{lbl} has no source lines of its own: {n_inf} of {n_all} of its ops in modules "
                             f"got the line of a compiled FX node of the same module and op; the rest "
                             "is in '(no source info)'")
    if by == "kernel" and not (a.compiled and b.compiled):
        notes.append("by kernel name only lines up two compiled runs of the same code")
    key = _key_fn(by, sides)
    table: dict[tuple[str, str], Row] = {}
    stats: dict[tuple[str, str], dict[str, Any]] = defaultdict(lambda: {"flops": 0.0, "flops_known": False,
                                                                         "pct_num": 0.0, "pct_den": 0.0,
                                                                         "fusion": defaultdict(float)})
    attributed = []
    for side_i, side in enumerate(sides):
        n = max(side.steps, 1)
        total = 0.0
        for u in sorted(side.units, key=lambda u: u.ts):
            k = (u.phase, key(u))
            row = table.get(k)
            if row is None:
                row = table[k] = Row(phase=u.phase, key=k[1])
            total += u.dur
            if side_i == 0:
                row.a_us += u.dur / n
                row.a_count += 1 / n
            else:
                row.b_us += u.dur / n
                row.b_count += 1 / n
            st = stats[(side_i,) + k]  # type: ignore[operator]
            if u.flops is not None:
                st["flops"] += u.flops / n
                st["flops_known"] = True
                if u.achieved_pct and u.achieved_pct > 0 and u.flops > 0:
                    st["pct_num"] += u.flops
                    st["pct_den"] += u.flops / u.achieved_pct
            if u.compiled:
                st["fusion"][_fusion_entry(u)] += u.dur
        attributed.append(total / n)
    for k, row in table.items():
        # FLOPs from the candidate's kernels when it has them, else the baseline's.
        for side_i in (1, 0):
            st = stats.get((side_i,) + k)  # type: ignore[operator]
            if st and st["flops_known"]:
                row.flops = st["flops"]
                row.achieved_pct = st["pct_num"] / st["pct_den"] if st["pct_den"] > 0 else None
                break
        entries: dict[str, float] = defaultdict(float)
        for side_i in (1, 0):
            st = stats.get((side_i,) + k)  # type: ignore[operator]
            if st:
                for e, t in st["fusion"].items():
                    entries[e] += t
        row.fusion = [e for e, _ in sorted(entries.items(), key=lambda kv: -kv[1])]
    phase_order = {"forward": 0, "backward": 1}
    if by in ("module", "line"):
        # Execution order (first call on side A, then B) reads like the model; special rows last.
        order = {k: n for n, k in enumerate(table)}
        rows = sorted(table.values(), key=lambda r: (phase_order.get(r.phase, 2), r.key in _SPECIAL_KEYS,
                                                     order[(r.phase, r.key)]))
    else:
        rows = sorted(table.values(), key=lambda r: (phase_order.get(r.phase, 2), -max(r.a_us, r.b_us), r.key))
    totals = []
    for lbl, side, att in zip(labels, sides, attributed):
        n = max(side.steps, 1)
        step_us = sum(side.step_walls_us) / n if side.step_walls_us else att
        totals.append(SideTotals(label=lbl, steps=side.steps, steps_from=side.steps_from, step_us=step_us,
                                 attributed_us=att, compiled=side.compiled, has_module_info=side.has_module_info,
                                 has_source_info=side.has_source_info))
        # Our invariant: units are disjoint in time on the step thread(s), so they fit in the steps.
        if side.steps_from != "span" and att > step_us * 1.001 + 1.0:
            notes.append(f"{lbl}: ops cover {att:.1f} µs per step but steps last {step_us:.1f} µs "
                         "(overlapping threads?)")
    if a.steps != b.steps:
        notes.append(f"{labels[0]} recorded {a.steps} step(s), {labels[1]} {b.steps}: times are per step")
    return Comparison(by=by, a=totals[0], b=totals[1], rows=rows, notes=notes)


def _infer_sources(target: TraceUnits, compiled: TraceUnits) -> tuple[int, int]:
    """Give ``target``'s eager units the source line of a compiled FX node with the same phase, module
    and op (the first op of the unit's call tree that has one: ``aten::linear`` -> its ``aten::addmm``).
    Returns (units given a line, eager units in modules)."""
    from collections import Counter

    table: dict[tuple[str, str, str], Counter] = defaultdict(Counter)
    for u in compiled.units:
        if not u.compiled:
            continue
        keys = u.node_keys or tuple((u.module, op, u.source) for op in _work_ops(u.ops))
        for module, op, src in keys:
            if module is not None and src and op not in _VIEW_OPS:
                table[(u.phase, module, op)][src] += 1
    done = total = 0
    for u in target.units:
        if u.compiled or u.source is not None or u.module is None or u.module in _SPECIAL_KEYS:
            continue
        total += 1
        for name in u.subtree_names:
            hit = table.get((u.phase, u.module, name))
            if hit:
                u.source = hit.most_common(1)[0][0]
                u.source_inferred = True
                done += 1
                break
    return done, total


def diff_traces(a: Mapping[str, Any], b: Mapping[str, Any], *, by: str = "module",
                labels: tuple[str, str] = ("A", "B")) -> Comparison:
    """Compare two trace dicts (eager vs compiled, or two compiled runs), matched ``by`` module path,
    source line, op or kernel name (pure).

    >>> c = diff_traces(load_trace("eager.json.gz"), load_trace("compiled.json.gz"))  # doctest: +SKIP
    >>> print(c.to_text())  # doctest: +SKIP
    """
    return compare_units(trace_units(a), trace_units(b), by=by, labels=labels)


def diff_files(path_a: str | os.PathLike, path_b: str | os.PathLike, *, by: str = "module") -> Comparison:
    """:func:`diff_traces` of two ``.json`` / ``.json.gz`` trace files."""
    a, b = tf.load_trace(path_a), tf.load_trace(path_b)
    ua, ub = trace_units(a), trace_units(b)
    la = os.path.basename(os.fspath(path_a))
    lb = os.path.basename(os.fspath(path_b))
    if la == lb:
        la, lb = os.fspath(path_a), os.fspath(path_b)
    return compare_units(ua, ub, by=by, labels=(la, lb))


# --- rendering -------------------------------------------------------------------------------------
def _render(c: Comparison, fmt: str) -> str:
    from .report import fmt_pct, fmt_si, fmt_time_us, render_table

    a, b = c.a, c.b
    short = ("eager", "compiled") if (a.label, b.label) == ("eager", "compiled") else ("A", "B")
    md = fmt == "markdown"
    out: list[str] = []
    title = f"inductor_perf compare: {a.label} vs {b.label}, by {c.by}"
    out += [f"## {title}", ""] if md else [title, "=" * min(100, len(title))]
    if short == ("A", "B"):
        out.append(f"A = {a.label}{'  ' if md else ''}")
        out.append(f"B = {b.label}{'  ' if md else ''}")
    sp = c.speedup

    def x(v: float | None) -> str:
        return f"{v:.2f}x" if v is not None and math.isfinite(v) else "-"

    out.append(f"Step time (profiled, mean of {a.steps} / {b.steps} steps): {short[0]} {fmt_time_us(a.step_us)}, "
               f"{short[1]} {fmt_time_us(b.step_us)}, speedup {x(sp)}{'  ' if md else ''}")
    if c.unprofiled_speedup is not None:
        out.append(f"Step time (no profiler, median): {short[0]} {fmt_time_us(a.unprofiled_step_us)}, "
                   f"{short[1]} {fmt_time_us(b.unprofiled_step_us)}, speedup {x(c.unprofiled_speedup)}"
                   f"{'  ' if md else ''}")
    out.append(f"Rows: {_ROWS_ARE[c.by]}. Times per step; Ops/Kernels: calls per step; Peak: compiled "
               "FLOP/s as % of the compute peak.")
    headers = ["Module" if c.by == "module" else c.by.capitalize(), short[0], short[1], "Speedup",
               "Ops" if not a.compiled else "A calls", "Kernels" if b.compiled else "B calls", "FLOP", "Peak"]
    fusion_lines: list[str] = []
    for phase in ("forward", "backward"):
        rows = [r for r in c.rows if r.phase == phase]
        if not rows:
            continue
        cells = []
        for r in rows:
            key = r.key if c.by != "line" else r.key.replace("\\", "/").rsplit("/", 1)[-1]
            cells.append([key if key else "(root module)", fmt_time_us(r.a_us), fmt_time_us(r.b_us), x(r.speedup),
                          _count(r.a_count), _count(r.b_count), fmt_si(r.flops), fmt_pct(r.achieved_pct)])
            if r.fusion:
                fusion_lines.append(f"[{phase}] {key or '(root module)'}: " + "; ".join(r.fusion))
        ta, tb = c.phase_total(phase)
        cells.append([f"{phase} total", fmt_time_us(ta), fmt_time_us(tb), x(ta / tb if ta > 0 and tb > 0 else None),
                      "", "", "", ""])
        out += ["", f"### {phase.capitalize()}" if md else phase.capitalize(), ""] if md else ["", phase.capitalize()]
        out.append(render_table(headers, cells, fmt, align=list("lrrrrrrr")))
    # Totals: rows + unattributed = measured step time, on each side.
    tot = [["rows (all phases)", fmt_time_us(a.attributed_us), fmt_time_us(b.attributed_us)],
           [f"{UNATTRIBUTED}: Python, hooks, profiler, gaps", fmt_time_us(a.unattributed_us),
            fmt_time_us(b.unattributed_us)],
           ["measured step time", fmt_time_us(a.step_us), fmt_time_us(b.step_us)]]
    out += ["", "### Totals" if md else "Totals (per step)", ""] if md else ["", "Totals (per step)"]
    out.append(render_table(["", short[0], short[1]], tot, fmt, align=list("lrr")))
    if fusion_lines:
        out += ["", "### Fusion map" if md else "Fusion map (eager ops → compiled kernel, longest first)"]
        if md:
            out.append("")
        out += [("- " if md else "  ") + line for line in fusion_lines]
    if c.notes:
        out += ["", "### Notes" if md else "Notes"]
        if md:
            out.append("")
        out += [("- " if md else "- ") + n for n in c.notes]
    return "\n".join(out) + "\n"


def _count(n: float) -> str:
    if n == 0:
        return "0"
    return f"{n:.0f}" if abs(n - round(n)) < 1e-9 else f"{n:.1f}"


# --- compare(): profile eager and compiled runs of one model ---------------------------------------
def _dominant_module(tag: Any) -> tuple[str | None, tuple[str, ...]]:
    """The module with most of a kernel's non-view nodes, and the other modules it has nodes of."""
    counts: dict[str, int] = {}
    for node in tag.nodes:
        op = aten_op_name(node.original_aten or node.target)
        if node.module_path is None or op in _VIEW_OPS:
            continue
        counts[node.module_path] = counts.get(node.module_path, 0) + 1
    if not counts:
        return tag.module_path, ()
    best = max(counts, key=lambda m: counts[m])  # first of the most frequent (dicts keep order)
    return best, tuple(m for m in counts if m != best)


def _kernel_infos(trace: dict, costs: Mapping[int, Any]) -> dict[int, dict[str, Any]]:
    """Per kernel event index: module (dominant), ops, kernel name, from the tags of this trace's graphs."""
    from .tags import REGISTRY

    tags: dict[tuple[Any, ...], Any] = {}
    for ev in trace.get("traceEvents", ()):
        if isinstance(ev, dict) and isinstance(ev.get("name"), str) and ev["name"].startswith(MARKER_PREFIX):
            parsed = parse_marker(ev["name"])
            graph = REGISTRY.get(parsed[0]) if parsed else None
            if graph is None:
                continue
            for t in graph.kernels:
                tags[(t.graph_id, t.is_backward, t.profiler_name, tuple(n.name for n in t.nodes))] = t
    infos: dict[int, dict[str, Any]] = {}
    events = trace["traceEvents"]
    for i, cost in costs.items():
        t = tags.get((cost.graph_id, cost.is_backward, events[i].get("name"), tuple(cost.node_names)))
        if t is None:
            continue
        module, also = _dominant_module(t)
        node_keys = tuple((n.module_path, aten_op_name(n.original_aten or n.target) or "", n.source) for n in t.nodes)
        infos[i] = {"module": module, "also_modules": also, "ops": t.eager_ops, "kernel": t.kernel_name,
                    "node_keys": node_keys,
                    "source": t.source}
    return infos


def _as_tuple(example_inputs: Any) -> tuple[Any, ...]:
    if isinstance(example_inputs, tuple):
        return example_inputs
    if isinstance(example_inputs, list):
        return tuple(example_inputs)
    return (example_inputs,)


def _default_loss(out: Any) -> Any:
    import torch

    if isinstance(out, torch.Tensor):
        return out.float().sum() if not out.is_floating_point() else out.sum()
    tensors = [t for t in (out.values() if isinstance(out, dict) else out if isinstance(out, (list, tuple)) else ())
               if isinstance(t, torch.Tensor) and t.is_floating_point() and t.requires_grad]
    if not tensors:
        raise InductorPerfError(f"the model returned {type(out).__name__}; pass loss_fn=(output -> scalar "
                                "tensor) to compare the backward, or backward=False")
    return sum(t.sum() for t in tensors)


class _SavedState:
    """Everything a compare run could change on the user's model, restored on exit: .grad objects,
    training flags, buffers (BatchNorm running stats) and the CPU RNG state (dropout)."""

    def __init__(self, model: Any) -> None:
        import torch

        self.model = model
        self.params = list(model.parameters())
        self.grads = [p.grad for p in self.params]
        self.training = [(m, m.training) for m in model.modules()]
        self.buffers = [(b, b.detach().clone()) for b in model.buffers()]
        self.rng = torch.get_rng_state()

    def clear_grads(self) -> None:
        # Fresh .grad tensors for our runs; the user's own .grad objects are never written to.
        for p in self.params:
            p.grad = None

    def restore(self) -> None:
        import torch

        for p, g in zip(self.params, self.grads):
            p.grad = g
        for m, flag in self.training:
            m.training = flag
        with torch.no_grad():
            for b, saved in self.buffers:
                b.copy_(saved)
        torch.set_rng_state(self.rng)


def _run_steps(fn: Any, inputs: tuple[Any, ...], n: int, backward: bool, loss_fn: Any,
               state: _SavedState, *, marks: bool, first_index: int = 0,
               after_step: Callable[[], None] | None = None) -> list[float]:
    """Run ``n`` steps (forward, loss, backward), returning each step's wall time in µs."""
    import torch

    from .eager import phase_range, step_range

    times = []
    for k in range(n):
        state.clear_grads()
        t0 = time.perf_counter()
        with step_range(first_index + k) if marks else _null():
            if backward:
                with phase_range("forward") if marks else _null():
                    out = fn(*inputs)
                with phase_range("loss") if marks else _null():
                    loss = (loss_fn or _default_loss)(out)
                    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
                        raise InductorPerfError(f"loss_fn must return a scalar tensor, got {type(loss).__name__}"
                                                f"{tuple(loss.shape) if isinstance(loss, torch.Tensor) else ''}")
                    if not loss.requires_grad:
                        raise InductorPerfError("the loss does not require grad (no parameters with "
                                                "requires_grad, or the model ran under no_grad); use backward=False")
                with phase_range("backward") if marks else _null():
                    loss.backward()
            else:
                with torch.no_grad(), phase_range("forward") if marks else _null():
                    fn(*inputs)
        times.append((time.perf_counter() - t0) * 1e6)
        if after_step is not None:
            after_step()
    return times


def _null() -> Any:
    import contextlib

    return contextlib.nullcontext()


def _flat_tensors(inputs: Any) -> list[Any]:
    import torch
    from torch.utils._pytree import tree_flatten

    return [x for x in tree_flatten(inputs)[0] if isinstance(x, torch.Tensor)]


def compare(model: Any, example_inputs: Any, *, backward: bool = True, steps: int = 3, warmup: int = 2,
            by: str = "module", loss_fn: Callable[[Any], Any] | None = None,
            options: Mapping[str, Any] | None = None, mode: str | None = None,
            trace_dir: str | os.PathLike | None = None, timing: bool = True) -> Comparison:
    """Profile eager and compiled runs of ``model`` under the same conditions and compare them.

    Both runs do ``warmup`` untimed steps (the compiled run compiles there), then ``steps`` profiled
    steps of forward, ``loss_fn(output)`` (default ``output.sum()``) and backward (``backward=False``:
    forward only, under no_grad). No optimizer step. The model is compiled through a wrapper
    (``torch.compile`` returns a new module), and its ``.grad``s, training flags, buffers and the RNG
    state are restored afterwards. ``options`` / ``mode`` go to ``torch.compile``; ``trace_dir`` keeps
    the two traces (``eager.trace.json.gz``, ``compiled.trace.json.gz``) for ``inductor-perf diff``.
    With ``timing``, each side also runs ``steps`` steps without the profiler (the speed you get).

    >>> c = inductor_perf.compare(model, (x,))  # doctest: +SKIP
    >>> print(c.to_text())  # doctest: +SKIP
    """
    import torch

    from .augment import augment_trace
    from .eager import module_ranges
    from .tag_join import costs_from_tags
    from .tags import REGISTRY

    if not isinstance(model, torch.nn.Module):
        raise InductorPerfError(f"compare() needs an nn.Module, got {type(model).__name__}")
    if by not in ("module", "line", "op"):
        raise InductorPerfError(f"compare(by={by!r}): expected 'module', 'line' or 'op' "
                                "(by='kernel' is for diffs of two compiled traces)")
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise InductorPerfError(f"steps must be an integer >= 1, got {steps!r}")
    if not isinstance(warmup, int) or isinstance(warmup, bool) or warmup < 1:
        raise InductorPerfError(f"warmup must be an integer >= 1 (the compiled run compiles there), got {warmup!r}")
    tensors = [t for t in (*model.parameters(), *model.buffers(), *_flat_tensors(example_inputs))
               if isinstance(t, torch.Tensor)]
    if any(t.device.type != "cpu" for t in tensors):
        # Timing a GPU model needs synchronization and CUDA activities; until compare() has them,
        # refuse rather than report launch times as kernel times.
        raise InductorPerfError("compare() supports CPU models and inputs for now; move the model and "
                                "inputs to CPU, or profile GPU runs with inductor_perf.profile() and "
                                "compare the traces with 'inductor-perf diff'")
    inputs = _as_tuple(example_inputs)
    opts = {"inductor_perf.kernel_profile": True, **dict(options or {})}
    state = _SavedState(model)
    notes: list[str] = []
    tmp = tempfile.mkdtemp(prefix="inductor_perf_compare_")
    try:
        # --- eager ---
        with module_ranges(model) as n_modules:
            _run_steps(model, inputs, warmup, backward, loss_fn, state, marks=False)
            eager_path = os.path.join(tmp, "eager.json")
            _profile_to(eager_path, model, inputs, steps, backward, loss_fn, state)
        eager_times = _run_steps(model, inputs, steps, backward, loss_fn, state, marks=False) if timing else []
        # --- compiled ---
        compiled = torch.compile(model, backend="inductor_perf", options=opts, mode=mode)
        _run_steps(compiled, inputs, warmup, backward, loss_fn, state, marks=False)
        compiled_path = os.path.join(tmp, "compiled.json")
        _profile_to(compiled_path, compiled, inputs, steps, backward, loss_fn, state)
        compiled_times = _run_steps(compiled, inputs, steps, backward, loss_fn, state, marks=False) if timing else []
        eager_trace = tf.load_trace(eager_path)
        raw = tf.load_trace(compiled_path)
    finally:
        state.restore()
        for f in ("eager.json", "compiled.json"):
            p = os.path.join(tmp, f)
            if os.path.exists(p):
                os.unlink(p)
        os.rmdir(tmp)

    costs, jstats = costs_from_tags(raw, REGISTRY.get)
    notes += jstats.warnings()
    if not costs:
        notes.append("no compiled kernel was joined to its tags: is the inductor_perf backend installed "
                     "(entry point) and did the model compile?")
    infos = _kernel_infos(raw, costs)
    # The augmented trace carries the same attribution the table uses (dominant module, eager ops).
    import dataclasses

    costs = {i: dataclasses.replace(c, module_path=infos[i]["module"]) if i in infos else c
             for i, c in costs.items()}
    device = None
    try:
        from .devices import resolve_device

        device = resolve_device("cpu")
    except Exception as e:  # peaks are optional
        log.warning("inductor_perf: no device peaks (%s); achieved %% left out", e)
    compiled_trace, _ = augment_trace(raw, costs, device)  # writes eager_ops from the tags too
    ua = trace_units(eager_trace)
    ub = trace_units(compiled_trace, kernel_info=infos.get)
    result = compare_units(ua, ub, by=by, labels=("eager", "compiled"))
    result.notes = notes + result.notes
    result.notes.append(f"eager module ranges on {n_modules} modules cost ~1 µs each per call; they are in "
                        f"the eager side's {UNATTRIBUTED} time")
    if timing and eager_times and compiled_times:
        result.a.unprofiled_step_us = sorted(eager_times)[len(eager_times) // 2]
        result.b.unprofiled_step_us = sorted(compiled_times)[len(compiled_times) // 2]
        ra = result.a.step_us / result.a.unprofiled_step_us
        rb = result.b.step_us / result.b.unprofiled_step_us
        if max(ra, rb) > 2 * min(ra, rb):
            result.notes.append(
                f"the profiler slowed eager steps {ra:.1f}x and compiled steps {rb:.1f}x: the profiled "
                "speedups are distorted; trust the unprofiled step times (on an oversubscribed CPU, "
                "OpenMP threads waiting for each other inflate profiled eager ops: try "
                "torch.set_num_threads)")
    if trace_dir is not None:
        d = os.fspath(trace_dir)
        os.makedirs(d, exist_ok=True)
        tf.save_trace(eager_trace, os.path.join(d, "eager.trace.json.gz"))
        tf.save_trace(compiled_trace, os.path.join(d, "compiled.trace.json.gz"))
    return result


def _profile_to(path: str, fn: Any, inputs: tuple[Any, ...], steps: int, backward: bool, loss_fn: Any,
                state: _SavedState) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    if torch.autograd.profiler._is_profiler_enabled:
        raise InductorPerfError("compare() runs its own profiler; call it outside torch.profiler.profile()")
    # The first profiler session of a process pays one-time set-up inside the first ops it records;
    # a throw-away one-step session keeps that out of both measured sessions.
    with profile(activities=[ProfilerActivity.CPU], record_shapes=False):
        _run_steps(fn, inputs, 1, backward, loss_fn, state, marks=False)
    # record_shapes off: it costs µs per op and would tax eager (more ops) more than compiled.
    with profile(activities=[ProfilerActivity.CPU], record_shapes=False) as prof:
        _run_steps(fn, inputs, steps, backward, loss_fn, state, marks=True)
    prof.export_chrome_trace(path)


# --- model files (inductor-perf compare FILE.py) --------------------------------------------------
def load_model_file(path: str | os.PathLike) -> tuple[Any, tuple[Any, ...], Callable[[Any], Any] | None]:
    """(model, inputs, loss_fn or None) from a file defining ``make_model()`` and ``make_inputs()``
    (a tuple of positional inputs; a single tensor is accepted) and optionally ``loss_fn(output)``."""
    import runpy

    p = os.fspath(path)
    if not os.path.isfile(p):
        raise InductorPerfError(f"{p}: no such file; expected a Python file defining make_model() and make_inputs()")
    try:
        ns = runpy.run_path(p, run_name="__inductor_perf_model__")
    except InductorPerfError:
        raise
    except Exception as e:
        raise InductorPerfError(f"{p}: running the file failed: {type(e).__name__}: {e}") from e
    missing = [f for f in ("make_model", "make_inputs") if not callable(ns.get(f))]
    if missing:
        raise InductorPerfError(f"{p}: defines no {' or '.join(f + '()' for f in missing)}; expected "
                                "make_model() -> nn.Module and make_inputs() -> tuple of inputs")
    loss_fn = ns.get("loss_fn")
    if loss_fn is not None and not callable(loss_fn):
        raise InductorPerfError(f"{p}: loss_fn must be a function output -> scalar tensor")
    return ns["make_model"](), _as_tuple(ns["make_inputs"]()), loss_fn


def compare_file(path: str | os.PathLike, **kwargs: Any) -> Comparison:
    """:func:`compare` on the model of a model file (see :func:`load_model_file`)."""
    model, inputs, loss_fn = load_model_file(path)
    if loss_fn is not None:
        kwargs.setdefault("loss_fn", loss_fn)
    return compare(model, inputs, **kwargs)
