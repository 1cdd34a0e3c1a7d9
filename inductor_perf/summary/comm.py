"""The communication view of one rank's trace: which collectives ran, what each moved and how fast,
how much collective time compute hid, and the compute time by module and source line, so the
cross-rank view (:mod:`inductor_perf.ranks.view`) can say where a straggler's extra time goes.

One pure function, :func:`comm_view`, whose inputs are the summary's kernels, their kinds, the host
events (for the ``ProfilerStep#N`` ranges and gloo's annotations) and the window start; the
in-memory summary (:func:`inductor_perf.summary.core.summarize`) and the streaming engine call it alike.

Which events are collectives:

- **device** (NCCL / RCCL): the kernels of kind ``collective`` (:mod:`inductor_perf.model.kernel_kinds`), sized by the
  ``comm_op`` / ``comm_bytes`` / ``group_size`` args costing wrote (:mod:`inductor_perf.costs.comm`);
- **host** (gloo, CPU runs): without device collectives, the ``gloo:<collective>`` annotations that
  gloo records around each collective on its worker thread, sized from their ``Input Dims`` /
  ``Input type`` as an ``nccl:*`` annotation is. The span covers the whole collective, its waiting
  included, as a device collective kernel's does.

Times: *compute* is the union of the non-collective kernels, *comm* the union of the collectives,
*exposed* the comm time no compute overlaps (what a step waits for), *active* the union of both.
Per step when the trace has ``ProfilerStep#N`` ranges (each clipped to its step), else over the
collectives' and kernels' own span. Pure and torch-free.
"""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass, field
from typing import Iterable

from ..costs import comm as comm_costs
from ..model import events as evs
from ..model.event_cost import BUS_FACTORS
from ..model.kernel_kinds import KIND_COLLECTIVE
from .kernels import ParsedEvent, _num
from .rows import six_digits, rounded
from .steps import profiler_steps

HOST_PREFIXES = ("gloo:",)
"""Host annotations that are themselves collectives (a backend with no device kernels)."""

TOP_GROUPS = 50
"""How many modules / source lines of compute time a rank keeps (most time first)."""


@dataclass
class CollectiveRow:
    """The calls of one collective of one message size on one rank."""

    op: str
    comm_bytes: int | None
    """S per call (nccl-tests' definition, :mod:`inductor_perf.costs.comm`); None when unsized."""
    group_size: int | None
    count: int
    total_us: float
    min_us: float
    median_us: float
    max_us: float
    algbw_gbps: float | None
    """count x S / total time."""
    busbw_gbps: float | None
    """algbw x the collective's bus factor (None without a group size)."""


@dataclass
class CommView:
    """One rank's collectives and how much of their time compute hid (µs; per-step lists follow
    the summary's ``steps``)."""

    source: str
    """``device`` (collective kernels), ``host`` (gloo annotations) or ``none``."""
    comm_us: float
    exposed_comm_us: float
    compute_us: float
    active_us: float
    collectives: list[CollectiveRow] = field(default_factory=list)
    step_comm_us: list[float] = field(default_factory=list)
    step_exposed_us: list[float] = field(default_factory=list)
    step_compute_us: list[float] = field(default_factory=list)
    compute_by_module: dict[str, float] = field(default_factory=dict)
    """Non-collective kernel time by module path (the top :data:`TOP_GROUPS`)."""
    compute_by_line: dict[str, float] = field(default_factory=dict)


def merge_spans(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of ``spans`` as sorted, disjoint spans (empty ones dropped)."""
    out: list[tuple[float, float]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        elif e > s:
            out.append((s, e))
    return out


def _length(merged: list[tuple[float, float]]) -> float:
    return sum(e - s for s, e in merged)


def span_overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Total time of the intersection of two merged, sorted span lists (two-pointer walk)."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if e > s:
            total += e - s
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def _clip(spans: list[tuple[float, float]], starts: list[float], a: float,
          b: float) -> list[tuple[float, float]]:
    """The merged ``spans`` (``starts`` their start times) cut to [a, b)."""
    lo = max(0, bisect.bisect_right(starts, a) - 1)  # merged spans do not overlap: one may start before a
    hi = bisect.bisect_left(starts, b)
    return [(max(s, a), min(e, b)) for s, e in spans[lo:hi] if min(e, b) > max(s, a)]


def _host_collective(e: ParsedEvent) -> tuple[str, int | None] | None:
    """(op, S) of a ``gloo:*`` annotation; None when it is not one."""
    if not e.name.startswith(HOST_PREFIXES) or evs.is_device_side(e.cat):
        return None
    # costs.comm reads "nccl:<op>" annotations; gloo's carry the same Input Dims / Input type.
    info = comm_costs.from_annotation("nccl:" + e.name.split(":", 1)[1], e.args)
    if info.op is None:
        return None
    return info.op, info.nbytes


def _collectives(kernels: list[ParsedEvent], kinds: dict[int, str],
                 host_events: list[ParsedEvent]) -> tuple[str, list[tuple[ParsedEvent, str, int | None, int | None]]]:
    """The collectives as (event, op, S, group size), and where they were found. ``kernels`` empty:
    none is a collective (the caller knows)."""
    found = []
    for k in kernels:
        if kinds.get(id(k)) == KIND_COLLECTIVE:
            op = k.args.get(evs.COMM_OP)
            op = op if isinstance(op, str) else comm_costs.normalize_op(k.name) or "collective"
            size, group = _num(k.args.get(evs.COMM_BYTES)), _num(k.args.get(evs.GROUP_SIZE))
            found.append((k, op, int(size) if size is not None else None, int(group) if group else None))
    if found:
        return "device", found
    for e in host_events:
        hc = _host_collective(e)
        if hc is not None:
            found.append((e, hc[0], hc[1], None))
    return ("host" if found else "none"), found


def _rows(found: list[tuple[ParsedEvent, str, int | None, int | None]]) -> list[CollectiveRow]:
    groups: dict[tuple[str, int | None, int | None], list[float]] = {}
    for ev, op, size, group in found:
        groups.setdefault((op, size, group), []).append(ev.dur)
    rows = []
    for (op, size, group), durs in groups.items():
        total = sum(durs)
        algbw = size * len(durs) / (total * 1e3) if size is not None and total > 0 else None
        factor = BUS_FACTORS.get(op)
        busbw = algbw * factor(group) if algbw is not None and factor and group else None
        rows.append(CollectiveRow(op, size, group, len(durs), rounded(total), rounded(min(durs)),
                                  rounded(statistics.median(durs)), rounded(max(durs)), six_digits(algbw), six_digits(busbw)))
    rows.sort(key=lambda r: (-r.total_us, r.op, r.comm_bytes or 0))
    return rows


def _by_key(kernels: list[ParsedEvent], kinds: dict[int, str], key: str) -> dict[str, float]:
    """The time of the non-collective kernels by the row of the summary's module table
    (``key`` ``module_path``) or line table (``source``) each falls in."""
    row = evs.module_row if key == evs.MODULE_PATH else evs.line_row
    acc: dict[str, float] = {}
    for k in kernels:
        if kinds.get(id(k)) == KIND_COLLECTIVE:
            continue
        name = row(k.args.get(key))
        acc[name] = acc.get(name, 0.0) + k.dur
    return _top(acc)


def _top(acc: dict[str, float]) -> dict[str, float]:
    top = sorted(acc.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_GROUPS]
    return {name: rounded(us) for name, us in top}


@dataclass(frozen=True)
class ComputeSums:
    """What the summary already knows of the kernels' time when none is a collective: their busy
    spans merged and their total length (summed in the spans' order, as :func:`comm_view` would sum
    it), and their time by module and by source line (the summary's tables' sums)."""

    merged: list[tuple[float, float]]
    by_module: dict[str, float]
    by_line: dict[str, float]
    busy: float


def comm_view(kernels: list[ParsedEvent], kinds: dict[int, str], host_events: list[ParsedEvent],
              window_start: float, known: ComputeSums | None = None) -> CommView:
    """The :class:`CommView` of one rank: ``kinds`` maps ``id(kernel)`` to its kind (the summary's
    totals), ``host_events`` hold the ``ProfilerStep#N`` ranges and any gloo annotations.
    ``window_start`` is accepted for the streaming engine's symmetry (step offsets are the summary's).
    ``known``: given when no kernel is a collective, the compute time is not summed again."""
    del window_start  # spans are compared with each other only
    source, found = _collectives(kernels if known is None else [], kinds, host_events)
    comm = merge_spans((ev.ts, ev.end) for ev, *_ in found)
    compute = (known.merged if known is not None else
               merge_spans((k.ts, k.end) for k in kernels if kinds.get(id(k)) != KIND_COLLECTIVE))
    comm_us, compute_us = _length(comm), (known.busy if known is not None else _length(compute))
    overlap = span_overlap(comm, compute)
    view = CommView(source=source, comm_us=rounded(comm_us), exposed_comm_us=rounded(comm_us - overlap),
                    compute_us=rounded(compute_us), active_us=rounded(comm_us + compute_us - overlap),
                    collectives=_rows(found),
                    compute_by_module=(_top(known.by_module) if known is not None else
                                       _by_key(kernels, kinds, evs.MODULE_PATH)),
                    compute_by_line=(_top(known.by_line) if known is not None else
                                     _by_key(kernels, kinds, evs.SOURCE)))
    steps = profiler_steps(host_events)
    comm_starts, compute_starts = ([s for s, _ in comm], [s for s, _ in compute]) if steps else ([], [])
    for st in steps:
        c, k = _clip(comm, comm_starts, st.ts, st.end), _clip(compute, compute_starts, st.ts, st.end)
        cu = _length(c)
        view.step_comm_us.append(rounded(cu))
        view.step_exposed_us.append(rounded(cu - span_overlap(c, k)))
        view.step_compute_us.append(rounded(_length(k)))
    return view
