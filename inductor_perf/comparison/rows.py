"""Rows: two traces' units joined on (phase, key), with the per-side totals and the fusion map (pure).

:func:`compare_units` groups each side's units by module, source line, eager op group or kernel
name within each phase, and joins the two sides; :class:`Comparison` holds the result. Rendering it
as text or markdown is :mod:`inductor_perf.report.text`'s job.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..errors import InductorPerfError
from ..model import events as evs
from ..report.text import format_comparison
from ..model.events import NO_KEY, PHASE_ORDER, SPECIAL_KEYS
from .units import VIEW_OPS, TraceUnits, Unit

BY = ("module", "line", "op", "kernel")


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
    work = [o for o in ops if o not in VIEW_OPS]
    return work or list(ops)


def _op_groups(sides: Sequence[TraceUnits]) -> Callable[[Unit], str]:
    """A by-op key function: ops fused into one compiled kernel share a group; an eager op joins the
    group of the first op in its own call tree that a compiled kernel computes (``aten::linear`` ->
    ``aten::addmm``), so eager and compiled rows line up."""
    finds: dict[str, _UnionFind] = defaultdict(_UnionFind)
    universe: dict[str, set[str]] = defaultdict(set)
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
        return lambda u: u.source or (u.module if u.module in SPECIAL_KEYS else evs.NO_SOURCE_INFO)
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
        text += f" (also nodes of {', '.join(m or evs.ROOT_MODULE for m in u.also_modules)})"
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
    """Mean time per step of the rows (their sum)."""
    compiled: bool
    has_module_info: bool
    has_source_info: bool
    unprofiled_step_us: float | None = None
    """Median step time measured without the profiler (compare() only)."""
    covered_us: float | None = None
    """Mean time per step that the rows cover together (ops of two threads, or kernels of two streams,
    that run at once count once); None: the rows' sum."""
    time: str = "host"
    """What a row's time is: ``host`` (the op or CPU kernel events' time on their thread) or
    ``device`` (the device events' own time: ``by="kernel"`` on a trace with device events)."""

    @property
    def overlap_us(self) -> float:
        """Time per step in the rows twice or more: rows that ran at the same time (threads, streams)."""
        return self.attributed_us - self.covered_us if self.covered_us is not None else 0.0

    @property
    def unattributed_us(self) -> float:
        """The step time no row covers: ``step_us`` minus the time the rows cover, never below zero
        (rows are cut to the steps: :mod:`.kernels`)."""
        return self.step_us - (self.covered_us if self.covered_us is not None else self.attributed_us)

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "steps": self.steps, "steps_from": self.steps_from,
                "step_us": self.step_us, "attributed_us": self.attributed_us,
                "covered_us": self.covered_us if self.covered_us is not None else self.attributed_us,
                "overlap_us": self.overlap_us, "unattributed_us": self.unattributed_us, "time": self.time,
                "compiled": self.compiled, "has_module_info": self.has_module_info,
                "has_source_info": self.has_source_info, "unprofiled_step_us": self.unprofiled_step_us}


@dataclass
class Comparison:
    """Eager vs compiled (or trace A vs trace B), row by row. ``to_text`` / ``to_markdown`` /
    ``to_json`` render it (through :func:`inductor_perf.report.text.format_comparison`); ``to_dict`` is
    strict-JSON-safe."""

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

    @property
    def rows_are(self) -> str:
        """What one row stands for under this grouping (said in the JSON and the text)."""
        return _ROWS_ARE[self.by]

    def to_dict(self) -> dict[str, Any]:
        """Strict-JSON-safe dict (no NaN / Infinity; None where a value is unknown)."""
        d = {"by": self.by, "rows_are": self.rows_are, "a": self.a.to_dict(), "b": self.b.to_dict(),
             "speedup": self.speedup, "unprofiled_speedup": self.unprofiled_speedup,
             "rows": [r.to_dict() for r in self.rows], "notes": list(self.notes)}
        return evs.strict_json(d)

    def to_json(self) -> str:
        return format_comparison(self, "json")

    def to_text(self) -> str:
        return format_comparison(self, "text")

    def to_markdown(self) -> str:
        return format_comparison(self, "markdown")

    def _repr_html_(self) -> str:
        """A notebook cell shows the comparison as the report page does (the text's lines and tables)."""
        from ..report.html_tables import comparison_html

        return comparison_html(self)

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



def _resolve_by(a: TraceUnits, b: TraceUnits, by: str, labels: tuple[str, str], notes: list[str]) -> str:
    """The grouping the two traces support (``by``, or ``op`` when they lack module / source info),
    with a note for each fallback. ``by="line"`` gives eager sides the lines of compiled nodes."""
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
                             f"is in '{evs.NO_SOURCE_INFO}'")
    if by == "kernel" and not (a.compiled and b.compiled):
        notes.append("by kernel name only lines up two compiled runs of the same code")
    return by


def _new_stats() -> dict[str, Any]:
    return {"flops": 0.0, "flops_known": False, "pct_num": 0.0, "pct_den": 0.0, "fusion": defaultdict(float)}


def _fill_rows(sides: Sequence[TraceUnits], key: Callable[[Unit], str], by: str
               ) -> tuple[dict[tuple[str, str], Row], dict[tuple[Any, ...], dict[str, Any]], list[float]]:
    """Rows keyed (phase, key) with both sides' times and counts per step; per (side, phase, key)
    FLOP / peak / fusion statistics; each side's time per step in the rows. ``by="kernel"`` reads
    the sides' kernels, any other grouping their units."""
    table: dict[tuple[str, str], Row] = {}
    stats: dict[tuple[Any, ...], dict[str, Any]] = defaultdict(_new_stats)
    attributed = []
    for side_i, side in enumerate(sides):
        n = max(side.steps, 1)
        total = 0.0
        for u in sorted(side.kernels if by == "kernel" else side.units, key=lambda u: u.ts):
            k = (u.phase, key(u))
            row = table.get(k)
            if row is None:
                row = table[k] = Row(phase=u.phase, key=k[1])
            total += u.dur
            if side_i == 0:
                row.a_us += u.dur / n
                row.a_count += u.count / n
            else:
                row.b_us += u.dur / n
                row.b_count += u.count / n
            st = stats[(side_i,) + k]
            if u.flops is not None:
                st["flops"] += u.flops / n
                st["flops_known"] = True
                if u.achieved_pct and u.achieved_pct > 0 and u.flops > 0:
                    st["pct_num"] += u.flops
                    st["pct_den"] += u.flops / u.achieved_pct
            if u.compiled and not (by == "kernel" and _work_ops(u.ops) in ([], [u.name])):
                st["fusion"][_fusion_entry(u)] += u.dur  # (a kernel row of a kernel that fused nothing: no news)
        attributed.append(total / n)
    return table, stats, attributed


def _finish_rows(table: dict[tuple[str, str], Row], stats: dict[tuple[Any, ...], dict[str, Any]]) -> None:
    """Each row's FLOPs and peak % (from the candidate's kernels when it has them, else the
    baseline's) and its fusion map entries, longest first."""
    for k, row in table.items():
        for side_i in (1, 0):
            st = stats.get((side_i,) + k)
            if st and st["flops_known"]:
                row.flops = st["flops"]
                row.achieved_pct = st["pct_num"] / st["pct_den"] if st["pct_den"] > 0 else None
                break
        entries: dict[str, float] = defaultdict(float)
        for side_i in (1, 0):
            st = stats.get((side_i,) + k)
            if st:
                for e, t in st["fusion"].items():
                    entries[e] += t
        row.fusion = [e for e, _ in sorted(entries.items(), key=lambda kv: -_rounded(kv[1]))]


def _ordered_rows(table: dict[tuple[str, str], Row], by: str) -> list[Row]:
    phase_order = {ph: i for i, ph in enumerate(PHASE_ORDER)}

    def phase(r: Row) -> int:
        return phase_order.get(r.phase, len(PHASE_ORDER))

    if by in ("module", "line"):
        # Execution order (first call on side A, then B) reads like the model; special rows last.
        order = {k: n for n, k in enumerate(table)}
        return sorted(table.values(), key=lambda r: (phase(r), r.key in SPECIAL_KEYS, order[(r.phase, r.key)]))
    return sorted(table.values(), key=lambda r: (phase(r), -_rounded(max(r.a_us, r.b_us)), r.key))


def _rounded(us: float) -> float:
    """A time to order rows by: to the picosecond, so that two times equal but for float rounding
    (sums of the same durations in another order or grouping: whole traces' units vs aggregated ones)
    tie, and the tie is broken the same way (by key, or first seen)."""
    return round(us, 6)


def _side_totals(labels: tuple[str, str], sides: Sequence[TraceUnits], attributed: Sequence[float], by: str,
                 notes: list[str]) -> list[SideTotals]:
    totals = []
    for lbl, side, att in zip(labels, sides, attributed):
        n = max(side.steps, 1)
        step_us = sum(side.step_walls_us) / n if side.step_walls_us else att
        kernels = by == "kernel"
        t = SideTotals(label=lbl, steps=side.steps, steps_from=side.steps_from, step_us=step_us,
                       attributed_us=att, compiled=side.compiled, has_module_info=side.has_module_info,
                       has_source_info=side.has_source_info,
                       covered_us=(side.kernels_covered_us if kernels else side.covered_us) / n,
                       time=side.kernel_time if kernels else "host")
        totals.append(t)
        if t.overlap_us > max(1e-6 * att, 1e-3):
            what = "kernels of different streams" if t.time == "device" else "ops of different threads"
            notes.append(f"{lbl}: {t.overlap_us:,.1f} µs per step of the rows ran beside each other ({what}: "
                         "each counts in its row, once in the time the rows cover)")
        count, lost = side.unlinked
        if count:
            where = "the rows of phase 'other'" if kernels else "no row (--by kernel shows them)"
            notes.append(f"{lbl}: {count:,} device event(s), {lost / n:,.1f} µs per step, were launched from no "
                         f"thread of the step, or the trace lacks their launch: in {where}")
    return totals


def compare_units(a: TraceUnits, b: TraceUnits, *, by: str = "module", labels: tuple[str, str] = ("A", "B"),
                  ) -> Comparison:
    """Join two traces' units into rows (pure). ``a`` is the baseline (eager), ``b`` the candidate."""
    if by not in BY:
        raise InductorPerfError(f"unknown grouping by={by!r}; expected one of {', '.join(BY)}")
    if by == "kernel" and not (a.kernels_read and b.kernels_read):
        raise ValueError("by='kernel' needs the kernels: units read with kernels=False have none")
    notes: list[str] = []
    sides = (a, b)
    by = _resolve_by(a, b, by, labels, notes)
    table, stats, attributed = _fill_rows(sides, _key_fn(by, sides), by)
    _finish_rows(table, stats)
    rows = _ordered_rows(table, by)
    totals = _side_totals(labels, sides, attributed, by, notes)
    if a.steps != b.steps:
        notes.append(f"{labels[0]} recorded {a.steps} step(s), {labels[1]} {b.steps}: times are per step")
    over = [r for r in rows if r.achieved_pct is not None and r.achieved_pct > 100.0]
    if over:
        notes.append(f"{len(over)} row(s) above 100 % of the compute peak (marked *, e.g. {over[0].key}): their "
                     "kernels' FLOPs over their time exceed the peak their dtype's roof gives, so the peak is too "
                     "low for them (a faster unit than it assumes, such as TF32 tensor cores against the float32 "
                     "roof) or their FLOPs are an overestimate; `inductor-perf summary` names the kernels")
    return Comparison(by=by, a=totals[0], b=totals[1], rows=rows, notes=notes)


def _infer_sources(target: TraceUnits, compiled: TraceUnits) -> tuple[int, int]:
    """Give ``target``'s eager units the source line of a compiled FX node with the same phase, module
    and op (the first op of the unit's call tree that has one: ``aten::linear`` -> its ``aten::addmm``).
    Returns (units given a line, eager units in modules)."""
    table: dict[tuple[str, str, str], Counter] = defaultdict(Counter)
    for u in compiled.units:
        if not u.compiled:
            continue
        keys = u.node_keys or tuple((u.module, op, u.source) for op in _work_ops(u.ops))
        for module, op, src in keys:
            if module is not None and src and op not in VIEW_OPS:
                table[(u.phase, module, op)][src] += u.count
    done = total = 0
    for u in target.units:
        if u.compiled or u.source is not None or u.module is None or u.module in SPECIAL_KEYS:
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
