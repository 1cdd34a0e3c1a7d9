"""One view of many ranks: per-rank time split, per-kernel spread, collectives and the straggler.

Built on the per-rank :class:`~inductor_perf.summary.rows.Summary` objects (their ``comm`` view,
:mod:`inductor_perf.summary.comm`, holds the collectives); :mod:`inductor_perf.ranks.files` reads
the files, :mod:`inductor_perf.report.ranks` renders the result. Pure and torch-free.

**Per step.** When every rank's trace has ``ProfilerStep#N`` ranges, times are per step (the sum
over the steps divided by their count; kernel rows: the window's total divided by the steps), else
per capture window, and the result says which.

**The straggler.** Clocks of different hosts are not aligned, so arrival times cannot be compared
directly. Each collective ends on all ranks at about the same moment, once the last rank has
arrived; so the rank that arrives last spends the least time in collectives, and every other rank
waits for it. The straggler is the rank with the least collective time per step, named when it
leads the median of the other ranks by at least :data:`STRAGGLER_MIN_PCT` % of the median step
(less is noise: jitter, or uneven message sizes). Where its extra time goes: its compute (by kernel,
module and source line) and idle time (by host activity) minus the other ranks' median.

**Wait time** in a collective op on a rank: its time in that op beyond the least any rank spent in
it (per step); given when every rank ran the op as many times.

**What to fix first.** The ranks' own advisor findings merged across ranks, and the job's
``exposed_comm`` from the per-rank table: :mod:`inductor_perf.ranks.findings`.

**Which ranks go together.** A folder may hold several runs. Ranks are grouped by world size and
backend (the largest group is kept), then by capture time (window starts on the epoch clock, else
our file names' ``YYYYMMDD-HHMMSS`` stamps; runs more than :data:`RUN_GAP_S` apart are separate);
a rank twice in the kept group keeps the capture nearest the others. Everything left out is named.
"""

from __future__ import annotations

import datetime
import re
import statistics
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from ..model import events as evs
from ..model.event_cost import BUS_FACTORS
from ..model.kernel_kinds import KIND_COLLECTIVE
from ..summary.rows import Summary, six_digits, percent, rounded
from .findings import FindingRow, findings_note, findings_section

STRAGGLER_MIN_PCT = 5.0
"""The least lead (% of the median step) at which the rank with the least collective time is named."""
RUN_GAP_S = 300.0
"""Captures further apart than this (seconds) are different runs."""
TOP = 15

_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)
_STAMP_IN_NAME = re.compile(r"_(\d{8}-\d{6})")
_EPOCH_US = 1e15
"""Timestamps above this (2001 in µs since 1970) are on the epoch clock, comparable across hosts."""


@dataclass
class RankInput:
    """One readable trace: its file, rank, and summary."""

    file: str
    summary: Summary
    rank: int | None = None
    rank_source: str | None = None
    """``distributedInfo`` or ``file name``."""
    findings: list[dict[str, Any]] | None = None
    """Its advisor's findings (JSON form, :mod:`inductor_perf.ranks.findings`); None: not read."""


@dataclass
class RankRow:
    rank: int
    file: str
    steps: int
    step_us: float
    busy_pct: float | None
    compute_us: float
    comm_us: float
    exposed_comm_us: float
    idle_us: float
    compute_pct: float | None
    exposed_comm_pct: float | None
    idle_pct: float | None
    collectives: str
    """Where its collectives were found (``device``, ``host``, ``none``)."""


@dataclass
class KernelSpread:
    name: str
    kind: str
    ranks: int
    min_us: float
    median_us: float
    max_us: float
    max_rank: int
    min_rank: int


@dataclass
class CollectiveRank:
    """One collective op on one rank (per step)."""

    op: str
    rank: int
    calls: float
    median_bytes: int | None
    time_us: float
    algbw_gbps: float | None
    busbw_gbps: float | None
    wait_us: float | None


@dataclass
class Straggler:
    rank: int
    lead_us: float
    """The other ranks' median collective time minus the straggler's, per step (or window)."""
    comm_us: float
    others_comm_us: float
    compute_delta_us: float
    idle_delta_us: float
    kernels: list[tuple[str, float]] = field(default_factory=list)
    modules: list[tuple[str, float]] = field(default_factory=list)
    lines: list[tuple[str, float]] = field(default_factory=list)
    idle_hosts: list[tuple[str, float]] = field(default_factory=list)


@dataclass
class CrossRankSummary:
    """The cross-rank view. ``to_dict()`` is strict-JSON safe."""

    per: str
    """``step`` or ``window``: what the times are per."""
    world_size: int | None
    backend: str | None
    ranks_present: list[int]
    missing_ranks: list[int]
    ranks: list[RankRow]
    kernels: list[KernelSpread]
    collectives: list[CollectiveRank]
    straggler: Straggler | None
    straggler_note: str
    notes: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    """Files not summarized: ``{"file", "reason"}`` (unreadable, another run, no rank)."""
    findings: list[FindingRow] = field(default_factory=list)
    """What to fix first, across ranks (:mod:`inductor_perf.ranks.findings`), largest saving first."""
    findings_read: list[int] = field(default_factory=list)
    """The ranks whose own findings were read (the others were streamed as light summaries)."""
    findings_note: str = ""
    """How the findings were merged and ranked, and whose were not read."""

    def to_dict(self) -> dict[str, Any]:
        return evs.strict_json(asdict(self))


# --- Which files go together ------------------------------------------------------------------------
def rank_of(summary: Summary, file: str) -> tuple[int | None, str | None]:
    """The rank from ``distributedInfo``, else from a ``rank<N>`` / ``rank-<N>`` in the file name."""
    dist = summary.distributed or {}
    r = dist.get("rank")
    if isinstance(r, (int, float)) and not isinstance(r, bool) and r >= 0 and r == int(r):
        return int(r), "distributedInfo"
    m = _RANK_IN_NAME.search(file.rsplit("/", 1)[-1])
    return (int(m.group(1)), "file name") if m else (None, None)


def _when_s(inp: RankInput) -> float | None:
    """When the capture ran, in epoch seconds: the window start on the epoch clock, else our name stamp."""
    ws = inp.summary.window_start_us
    if ws is not None and ws > _EPOCH_US:
        return ws / 1e6
    m = _STAMP_IN_NAME.search(inp.file.rsplit("/", 1)[-1])
    if m:
        dt = datetime.datetime.strptime(m.group(1), "%Y%m%d-%H%M%S")
        return dt.replace(tzinfo=datetime.timezone.utc).timestamp()
    return None


def _keep_largest(groups: dict[Any, list[RankInput]], why: Any, skipped: list[dict[str, str]]) -> list[RankInput]:
    """The group with the most ranks (ties: the latest capture); the others go to ``skipped``."""
    def order(key: Any) -> tuple[int, float]:
        return len(groups[key]), max((_when_s(i) or 0.0) for i in groups[key])
    best = max(groups, key=order)
    for key, members in groups.items():
        if key != best:
            skipped.extend({"file": i.file, "reason": why(key, best)} for i in members)
    return groups[best]


def _by_time(inputs: list[RankInput], skipped: list[dict[str, str]]) -> list[RankInput]:
    timed = sorted((w, n) for n, i in enumerate(inputs) if (w := _when_s(i)) is not None)
    if len(timed) < 2:
        return inputs
    runs: list[list[int]] = [[timed[0][1]]]
    for (w0, _), (w1, n) in zip(timed, timed[1:]):
        if w1 - w0 > RUN_GAP_S:
            runs.append([])
        runs[-1].append(n)
    if len(runs) == 1:
        return inputs
    groups = {k: [inputs[n] for n in run] for k, run in enumerate(runs)}
    return _keep_largest(groups, lambda k, b: f"another run (captured more than {RUN_GAP_S:.0f} s apart "
                                              "from the ranks summarized)", skipped)


def _dedupe(inputs: list[RankInput], skipped: list[dict[str, str]]) -> list[RankInput]:
    """One file per rank: the one whose capture time is nearest the median of all."""
    times = [w for i in inputs if (w := _when_s(i)) is not None]
    mid = statistics.median(times) if times else 0.0
    by_rank: dict[int, list[RankInput]] = {}
    for i in inputs:
        by_rank.setdefault(i.rank, []).append(i)  # type: ignore[arg-type]
    kept = []
    for rank, members in sorted(by_rank.items()):
        members.sort(key=lambda i: (abs((_when_s(i) or mid) - mid), i.file))
        kept.append(members[0])
        skipped.extend({"file": i.file, "reason": f"rank {rank} again (kept {members[0].file})"}
                       for i in members[1:])
    return kept


def consistent_ranks(inputs: list[RankInput]) -> tuple[list[RankInput], list[dict[str, str]]]:
    """The ranks that belong to one run (module docstring), and the files left out with why."""
    skipped: list[dict[str, str]] = []
    ranked = []
    for i in inputs:
        i.rank, i.rank_source = rank_of(i.summary, i.file)
        if i.rank is None:
            skipped.append({"file": i.file, "reason": "no rank (no distributedInfo, no rank<N> in its name)"})
        else:
            ranked.append(i)
    if not ranked:
        return [], skipped

    def world(i: RankInput) -> Any:
        return (i.summary.distributed or {}).get("world_size")

    def backend(i: RankInput) -> Any:
        return (i.summary.distributed or {}).get("backend")

    groups: dict[Any, list[RankInput]] = {}
    for i in ranked:
        groups.setdefault((world(i), backend(i)), []).append(i)
    kept = _keep_largest(groups, lambda k, b: f"another run (world size {k[0]}, backend {k[1]}; "
                                              f"summarized: world size {b[0]}, backend {b[1]})", skipped)
    kept = _dedupe(_by_time(kept, skipped), skipped)
    return sorted(kept, key=lambda i: i.rank), skipped  # type: ignore[arg-type,return-value]


# --- Per-rank figures -------------------------------------------------------------------------------
def _per_step(inputs: list[RankInput]) -> bool:
    return all(i.summary.steps and i.summary.comm is not None and i.summary.comm.step_comm_us for i in inputs)


def _rank_row(i: RankInput, per_step: bool) -> RankRow:
    s, c = i.summary, i.summary.comm
    if per_step:
        n = len(s.steps)
        step = sum(r.dur_us for r in s.steps) / n
        compute, comm = sum(c.step_compute_us) / n, sum(c.step_comm_us) / n
        exposed = sum(c.step_exposed_us) / n
        idle = max(0.0, step - compute - exposed)
    else:
        n, step = 0, s.wall_us
        compute, comm, exposed = (c.compute_us, c.comm_us, c.exposed_comm_us) if c else (s.busy_us, 0.0, 0.0)
        idle = max(0.0, step - compute - exposed)
    return RankRow(rank=i.rank, file=i.file.rsplit("/", 1)[-1], steps=n, step_us=rounded(step),  # type: ignore[arg-type]
                   busy_pct=s.busy_pct, compute_us=rounded(compute), comm_us=rounded(comm), exposed_comm_us=rounded(exposed),
                   idle_us=rounded(idle), compute_pct=percent(compute, step), exposed_comm_pct=percent(exposed, step),
                   idle_pct=percent(idle, step), collectives=c.source if c else "none")


def _divisor(row: RankRow) -> int:
    return row.steps or 1


def _kernel_spread(inputs: list[RankInput], rows: dict[int, RankRow]) -> list[KernelSpread]:
    """Each kernel's time per step on every rank (absent = 0), by the spread max - min."""
    times: dict[str, dict[int, float]] = {}
    kinds: dict[str, str] = {}
    for i in inputs:
        for k in i.summary.all_kernels or i.summary.top_kernels:
            times.setdefault(k.name, {})[i.rank] = k.total_us / _divisor(rows[i.rank])  # type: ignore[index]
            kinds[k.name] = k.kind
    out = []
    ranks = [i.rank for i in inputs]
    for name, per in times.items():
        vals = [(per.get(r, 0.0), r) for r in ranks]
        lo, hi = min(vals), max(vals, key=lambda v: (v[0], -v[1]))  # type: ignore[type-var]
        out.append(KernelSpread(name, kinds[name], len(per), rounded(lo[0]), rounded(statistics.median(v for v, _ in vals)),
                                rounded(hi[0]), hi[1], lo[1]))  # type: ignore[arg-type]
    out.sort(key=lambda k: (-(k.max_us - k.min_us), k.name))
    return out[:TOP]


def _collectives(inputs: list[RankInput], rows: dict[int, RankRow], world: int | None) -> list[CollectiveRank]:
    """Per collective op and rank: calls, typical size, time, bandwidths and wait, per step."""
    out: dict[str, list[CollectiveRank]] = {}
    for i in inputs:
        c = i.summary.comm
        if c is None:
            continue
        d = _divisor(rows[i.rank])  # type: ignore[index]
        ops: dict[str, list[Any]] = {}
        for r in c.collectives:
            ops.setdefault(r.op, []).append(r)
        for op, rs in ops.items():
            sized = [r for r in rs if r.comm_bytes is not None]
            nbytes = sum(r.comm_bytes * r.count for r in sized)
            sized_us = sum(r.total_us for r in sized)
            algbw = nbytes / (sized_us * 1e3) if sized and sized_us > 0 else None
            group = next((r.group_size for r in rs if r.group_size), None) or world
            factor = BUS_FACTORS.get(op)
            sizes = sorted(r.comm_bytes for r in sized for _ in range(r.count))
            out.setdefault(op, []).append(CollectiveRank(
                op=op, rank=i.rank, calls=rounded(sum(r.count for r in rs) / d),  # type: ignore[arg-type]
                median_bytes=sizes[len(sizes) // 2] if sizes else None, time_us=rounded(sum(r.total_us for r in rs) / d),
                algbw_gbps=six_digits(algbw), busbw_gbps=six_digits(algbw * factor(group)) if algbw and factor and group else None,
                wait_us=None))
    flat = []
    for op, per in sorted(out.items(), key=lambda kv: -sum(r.time_us for r in kv[1])):
        if len(per) == len(inputs) and len({r.calls for r in per}) == 1:
            least = min(r.time_us for r in per)
            for r in per:
                r.wait_us = rounded(r.time_us - least)
        flat.extend(sorted(per, key=lambda r: r.rank))
    return flat


# --- The straggler ----------------------------------------------------------------------------------
def _deltas(mine: dict[str, float], others: list[dict[str, float]], n: int = 5) -> list[tuple[str, float]]:
    """Keys where ``mine`` exceeds the others' median the most (positive differences only)."""
    out = []
    for key in mine:
        d = mine[key] - statistics.median(o.get(key, 0.0) for o in others)
        if d > 0:
            out.append((key, rounded(d)))
    out.sort(key=lambda kv: (-kv[1], kv[0]))
    return out[:n]  # type: ignore[return-value]


def _compute_maps(i: RankInput, d: int) -> tuple[dict[str, float], dict[str, float], dict[str, float], dict[str, float]]:
    s, c = i.summary, i.summary.comm
    kernels = {k.name: k.total_us / d for k in (s.all_kernels or s.top_kernels) if k.kind != KIND_COLLECTIVE}
    modules = {k: v / d for k, v in (c.compute_by_module if c else {}).items()}
    lines = {k: v / d for k, v in (c.compute_by_line if c else {}).items()}
    idle = {r.host: r.idle_us / d for r in s.idle_by_host}
    return kernels, modules, lines, idle


def find_straggler(inputs: list[RankInput], rows: dict[int, RankRow]) -> tuple[Straggler | None, str]:
    """The straggler by the rule of the module docstring, and a sentence saying what was found."""
    with_comm = [i for i in inputs if rows[i.rank].comm_us > 0]  # type: ignore[index]
    if len(with_comm) < 2:
        return None, "no straggler can be named: fewer than two ranks ran collectives"
    comm = {i.rank: rows[i.rank].comm_us for i in with_comm}  # type: ignore[index]
    slow = min(with_comm, key=lambda i: (comm[i.rank], i.rank))
    others = [i for i in with_comm if i is not slow]
    others_comm = statistics.median(comm[i.rank] for i in others)
    lead = others_comm - comm[slow.rank]
    step = statistics.median(r.step_us for r in rows.values())
    per = "step" if rows[slow.rank].steps else "window"  # type: ignore[index]
    if lead <= 0 or percent(lead, step) is None or percent(lead, step) < STRAGGLER_MIN_PCT:  # type: ignore[operator]
        return None, (f"no rank stands out: the rank with the least collective time (rank {slow.rank}) spends "
                      f"{lead / 1e3:.3g} ms per {per} less in them than the others' median, under "
                      f"{STRAGGLER_MIN_PCT:g} % of the median {per} ({step / 1e3:.3g} ms)")
    d = _divisor(rows[slow.rank])  # type: ignore[index]
    mine = _compute_maps(slow, d)
    theirs = [_compute_maps(i, _divisor(rows[i.rank])) for i in others]  # type: ignore[index]
    row = rows[slow.rank]  # type: ignore[index]
    st = Straggler(
        rank=slow.rank, lead_us=rounded(lead), comm_us=rounded(comm[slow.rank]), others_comm_us=rounded(others_comm),  # type: ignore[arg-type]
        compute_delta_us=rounded(row.compute_us - statistics.median(rows[i.rank].compute_us for i in others)),  # type: ignore[index]
        idle_delta_us=rounded(row.idle_us - statistics.median(rows[i.rank].idle_us for i in others)),  # type: ignore[index]
        kernels=_deltas(mine[0], [t[0] for t in theirs]), modules=_deltas(mine[1], [t[1] for t in theirs]),
        lines=_deltas(mine[2], [t[2] for t in theirs]), idle_hosts=_deltas(mine[3], [t[3] for t in theirs]))
    return st, (f"rank {slow.rank} arrives last at collectives: it spends {lead / 1e3:.3g} ms less per {per} in "
                f"them than the other ranks' median ({comm[slow.rank] / 1e3:.3g} vs {others_comm / 1e3:.3g} ms), "
                "which is the time the others wait for it")


# --- Everything -------------------------------------------------------------------------------------
def _range_text(ranks: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``0-2, 5``."""
    parts: list[list[int]] = []
    for r in ranks:
        if parts and r == parts[-1][1] + 1:
            parts[-1][1] = r
        else:
            parts.append([r, r])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in parts)


def _consistency_notes(kept: list[RankInput], skipped: list[dict[str, str]], world: int | None,
                       missing: list[int]) -> list[str]:
    notes = []
    present = [i.rank for i in kept]
    if world is not None and missing:
        notes.append(f"{len(present)} of {world} ranks present ({_range_text(present)}); "  # type: ignore[arg-type]
                     f"{len(missing)} missing ({_range_text(missing)}): figures cover the ranks present")
    for why in sorted({s["reason"].split(" (")[0] for s in skipped}):
        files = [s["file"].rsplit("/", 1)[-1] for s in skipped if s["reason"].split(" (")[0] == why]
        notes.append(f"left out, {why}: " + ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else ""))
    by_name = [i.rank for i in kept if i.rank_source == "file name"]
    if by_name:
        notes.append(f"rank taken from the file name (no distributedInfo): {_range_text(by_name)}")  # type: ignore[arg-type]
    return notes


def cross_rank(inputs: list[RankInput], unreadable: list[dict[str, str]] | None = None) -> CrossRankSummary:
    """The cross-rank view of the readable ranks ``inputs``; ``unreadable``: files that could not be
    summarized, ``{"file", "reason"}``, named in the result. Raises nothing on odd inputs."""
    kept, skipped = consistent_ranks(inputs)
    skipped = list(unreadable or []) + skipped
    dist = (kept[0].summary.distributed or {}) if kept else {}
    world = dist.get("world_size") if isinstance(dist.get("world_size"), int) else None
    backend = dist.get("backend") if isinstance(dist.get("backend"), str) else None
    present = [i.rank for i in kept]
    missing = [r for r in range(world) if r not in set(present)] if world else []  # type: ignore[arg-type]
    per_step = bool(kept) and _per_step(kept)
    rows = {i.rank: _rank_row(i, per_step) for i in kept}
    straggler, note = find_straggler(kept, rows) if kept else (None, "no readable rank")  # type: ignore[arg-type]
    notes = _consistency_notes(kept, skipped, world, missing)
    if not per_step and kept:
        notes.append("times are per capture window: not every rank's trace has ProfilerStep#N ranges")
    per = "step" if per_step else "window"
    own = [(i.rank, i.findings) for i in kept]
    return CrossRankSummary(
        per=per, world_size=world, backend=backend, ranks_present=present,  # type: ignore[arg-type]
        missing_ranks=missing, ranks=[rows[r] for r in present], kernels=_kernel_spread(kept, rows),  # type: ignore[index]
        collectives=_collectives(kept, rows, world), straggler=straggler, straggler_note=note, notes=notes,  # type: ignore[arg-type]
        skipped=skipped, findings=findings_section(own, [rows[r] for r in present], per),  # type: ignore[arg-type,index]
        findings_read=[r for r, f in own if f is not None], findings_note=findings_note(own, per) if kept else "")  # type: ignore[misc]


# --- A folder of traces that are not all ranks of one job ----------------------------------------------
@dataclass
class RunRow:
    """One trace of a folder summarized as a run of its own (not a rank of a job that the folder
    holds other ranks of): the headline figures of its summary."""

    file: str
    why: str
    """Why it is a run of its own: no rank, or no other rank of its job in the folder."""
    rank: int | None
    world_size: int | None
    device: str | None
    kernel_definition: str
    steps: int
    step_us: float | None
    """Mean ``ProfilerStep#N`` duration (None without steps)."""
    window_us: float
    busy_pct: float | None
    kernels: int
    flop: float | None
    achieved_tflops: float | None
    flops_pct_of_peak: float | None
    peak_dtype: str | None
    top_kernel: str | None
    top_kernel_busy_pct: float | None
    """% of the busy time during which the top kernel (most time) ran."""


@dataclass
class FolderSummary:
    """``summary DIR`` of a folder that is not (only) the ranks of one job: one row per trace that
    is a run of its own, one cross-rank view per set of ranks of one job. ``to_dict()`` is strict JSON."""

    path: str
    runs: list[RunRow]
    rank_sets: list[CrossRankSummary]
    unreadable: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return evs.strict_json({"path": self.path, "runs": [asdict(r) for r in self.runs],
                                "rank_sets": [v.to_dict() for v in self.rank_sets],
                                "unreadable": self.unreadable, "notes": self.notes})


def split_runs(inputs: list[RankInput]) -> tuple[list[list[RankInput]], list[tuple[RankInput, str]]]:
    """(the sets of two or more ranks of one job, each as :func:`consistent_ranks` keeps them; every
    other trace with why it is a run of its own). Ranks of one job: a rank each (``distributedInfo``
    or ``rank<N>`` in the name), distinct, the same world size and backend, captured within
    :data:`RUN_GAP_S` of each other. After a set is taken, what it left out is grouped again."""
    sets: list[list[RankInput]] = []
    singles: list[tuple[RankInput, str]] = []
    pool = []
    for i in inputs:
        if rank_of(i.summary, i.file)[0] is None:
            singles.append((i, "no rank (no distributedInfo, no rank<N> in its name)"))
        else:
            pool.append(i)
    while pool:
        kept, skipped = consistent_ranks(pool)
        if len(kept) >= 2:
            sets.append(kept)
        else:
            world = (kept[0].summary.distributed or {}).get("world_size")
            singles += [(i, f"rank {i.rank}{f' of {world}' if world else ''}: no other rank of its job in "
                            "this folder") for i in kept]
        left = {s["file"] for s in skipped}
        pool = [i for i in pool if i.file in left]
    order = {i.file: n for n, i in enumerate(inputs)}
    singles.sort(key=lambda s: order[s[0].file])
    return sets, singles


def run_row(i: RankInput, why: str) -> RunRow:
    """The :class:`RunRow` of a trace's (full) summary."""
    s = i.summary
    dist = s.distributed or {}
    rank, _ = rank_of(s, i.file)
    top = (s.top_kernels or s.all_kernels or [None])[0]
    return RunRow(file=i.file.rsplit("/", 1)[-1], why=why, rank=rank,
                  world_size=dist.get("world_size") if isinstance(dist.get("world_size"), int) else None,
                  device=s.peak.device, kernel_definition=s.kernel_definition, steps=len(s.steps),
                  step_us=rounded(sum(r.dur_us for r in s.steps) / len(s.steps)) if s.steps else None,
                  window_us=rounded(s.wall_us), busy_pct=s.busy_pct, kernels=s.kernel_count, flop=s.flop,
                  achieved_tflops=s.achieved_tflops, flops_pct_of_peak=s.flops_pct_of_peak,
                  peak_dtype=s.peak.dtype if s.peak.peak_tflops is not None else None,
                  top_kernel=top.name if top else None, top_kernel_busy_pct=top.share_of_busy_pct if top else None)


def folder_view(path: str, sets: list[list[RankInput]], singles: list[tuple[RankInput, str]],
                unreadable: list[dict[str, str]] | None = None) -> CrossRankSummary | FolderSummary:
    """What ``summary DIR`` shows (:func:`split_runs`' parts; ``singles`` with full summaries): the
    cross-rank view when the folder is one job's ranks, else a :class:`FolderSummary`."""
    if len(sets) == 1 and not singles:
        return cross_rank(sets[0], unreadable)
    notes = [f"{i.file.rsplit('/', 1)[-1]}: a run of its own (a row of the table): {why}" for i, why in singles]
    views = [cross_rank(s) for s in sets]
    for v, members in zip(views, sets):
        names = [i.file.rsplit("/", 1)[-1] for i in members]
        notes.append(f"{', '.join(names[:4])}{f' and {len(names) - 4} more' if len(names) > 4 else ''}: ranks "
                     f"{_range_text(v.ranks_present)}{f' of {v.world_size}' if v.world_size else ''} of one job "
                     "(a cross-rank view)")
    notes += [f"{b['file'].rsplit('/', 1)[-1]}: left out, {b['reason']}" for b in unreadable or []]
    notes.append("each run's whole summary: --per-rank, or `inductor-perf summary FILE`")
    return FolderSummary(path=path, runs=[run_row(i, why) for i, why in singles], rank_sets=views,
                         unreadable=list(unreadable or []), notes=notes)
