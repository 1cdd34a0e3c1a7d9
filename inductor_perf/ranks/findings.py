"""The findings section of the cross-rank view: each rank's advisor findings merged across ranks, and
the job's ``exposed_comm`` (docs/ranks.md, "What to fix first, across ranks").

- **Each rank's findings** come with its digest (:func:`inductor_perf.ranks.digest.digest`: the JSON
  dicts of :func:`inductor_perf.advice.advise.attach`, the summary path's one function); a rank read as a
  light summary has none (None: not read, as the light summary lacks what the advisor reads).
- **Merged** (:func:`merge`): one row per (kind, source, title with its numbers masked), with the ranks
  that have it, the median and the max of their ``saving_us_per_step`` (a rank without the finding, or
  without a per-step saving for it, is not counted: not taken as 0), the worst rank (the largest saving)
  and that rank's title, fix and evidence.
- **exposed_comm** is the job's, not each rank's: each rank's own exposed collective time holds its wait
  for the last rank to arrive, which is that rank's lateness, not communication. One row
  (:func:`inductor_perf.advice.device.find_job_exposed_comm`) takes the place of the ranks' own.
- **Order**: by the figure each row saves per step: the median over its ranks (the job's loss for the
  job's row), then the number of ranks that have it.

Pure and torch-free: dicts in, rows out.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from ..advice.device import find_job_exposed_comm
from ..summary.rows import percent, rounded

SCOPE_RANKS = "ranks"
"""A row merged from the ranks' own findings."""
SCOPE_JOB = "job"
"""A row the view computes for the whole job (``exposed_comm``)."""
_NUMBER = re.compile(r"\d[\d.,]*(?:e[-+]?\d+)?(?:\s*(?:µs|ms|s|x)\b|\s*%)?")
_KEY = re.compile(r"([^\s()]+\.py:\d+)|" + _NUMBER.pattern)
"""A line of code (``file.py:LINE``, kept: group 1), else a number (masked)."""


@dataclass
class FindingRow:
    """One finding across the ranks (module docstring)."""

    kind: str
    scope: str
    """``ranks`` (merged from the ranks' own findings) or ``job`` (computed from the view)."""
    title: str
    """The worst rank's title (the job's, for a ``job`` row)."""
    source: str | None
    module: str | None
    ranks: list[int]
    """The ranks whose findings have it (a ``job`` row: the ranks that ran collectives)."""
    counted: int
    """Of those, the ranks with a per-step saving: the median and max are over them."""
    median_saving_us: float | None
    """Median over the counted ranks of their saving per step (µs); None when none has one."""
    max_saving_us: float | None
    worst_rank: int | None
    """The rank with the largest saving (without one: the largest one-time cost)."""
    job_saving_us: float | None
    """A ``job`` row: what the job loses per step (what it is ranked by); None for a ``ranks`` row."""
    saving_pct_of_step: float | None
    """The row's ranking figure (the median, or the job's loss) as a % of the median step over the ranks."""
    one_time_s: float | None
    """The largest one-time cost (compiles) over the ranks, in seconds; None when there is none."""
    evidence: str
    """The worst rank's evidence (the job's, for a ``job`` row)."""
    fix: str

    @property
    def saving_us(self) -> float | None:
        """What the row is ranked by."""
        return self.job_saving_us if self.scope == SCOPE_JOB else self.median_saving_us


def title_key(title: str) -> str:
    """``title`` with every number (and its unit) as ``#``, but for the lines of code it names
    (``file.py:LINE``): the same problem reads alike on every rank, and two places stay two."""
    return _KEY.sub(lambda m: m.group(1) or "#", title)


def _sum(found: list[dict[str, Any]], key: str) -> float | None:
    vals = [f[key] for f in found if f.get(key) is not None]
    return sum(vals) if vals else None


def _merged_row(by_rank: dict[int, list[dict[str, Any]]], step_us: float | None) -> FindingRow:
    saving = {r: _sum(fs, "saving_us_per_step") for r, fs in by_rank.items()}
    known = {r: s for r, s in saving.items() if s is not None}
    once = {r: s for r, fs in by_rank.items() if (s := _sum(fs, "one_time_s")) is not None}
    if known:
        worst = max(known, key=lambda r: (known[r], -r))
    elif once:
        worst = max(once, key=lambda r: (once[r], -r))
    else:
        worst = min(by_rank)
    f = max(by_rank[worst], key=lambda x: (x.get("saving_us_per_step") or 0.0, x.get("one_time_s") or 0.0))
    median = rounded(statistics.median(known.values())) if known else None
    return FindingRow(
        kind=f["kind"], scope=SCOPE_RANKS, title=f["title"], source=f.get("source"), module=f.get("module"),
        ranks=sorted(by_rank), counted=len(known), median_saving_us=median,
        max_saving_us=rounded(max(known.values())) if known else None, worst_rank=worst, job_saving_us=None,
        saving_pct_of_step=percent(median, step_us), one_time_s=rounded(max(once.values()), 6) if once else None,
        evidence=f["evidence"], fix=f["fix"])


def merge(per_rank: Iterable[tuple[int, list[dict[str, Any]] | None]], step_us: float | None) -> list[FindingRow]:
    """The ranks' own findings (``(rank, findings or None)``) merged into rows (module docstring), less
    ``exposed_comm`` (the job's row replaces it); ``step_us``: the median step over the ranks."""
    groups: dict[tuple[str, str, str, str], dict[int, list[dict[str, Any]]]] = {}
    for rank, found in per_rank:
        for f in found or ():
            if f["kind"] == "exposed_comm":
                continue
            # a finding with no source line may be a module's (headroom): its path, digits and all, tells them apart
            source = f.get("source") or ""
            key = (f["kind"], source, "" if source else f.get("module") or "", title_key(f["title"]))
            groups.setdefault(key, {}).setdefault(rank, []).append(f)
    return [_merged_row(by_rank, step_us) for by_rank in groups.values()]


def job_row(rows: Sequence[Any], per: str) -> FindingRow | None:
    """The job's ``exposed_comm`` row from the view's per-rank rows (``rank``, ``step_us``, ``comm_us``,
    ``exposed_comm_us``); with the ranks' own exposed collective time (median, max) beside it."""
    f = find_job_exposed_comm(rows, per)
    if f is None:
        return None
    with_comm = [r for r in rows if r.comm_us > 0]
    worst = max(with_comm, key=lambda r: (r.exposed_comm_us, -r.rank))
    return FindingRow(
        kind=f.kind, scope=SCOPE_JOB, title=f.title, source=None, module=None, ranks=sorted(r.rank for r in with_comm),
        counted=len(with_comm), median_saving_us=rounded(statistics.median(r.exposed_comm_us for r in with_comm)),
        max_saving_us=worst.exposed_comm_us, worst_rank=worst.rank, job_saving_us=f.saving_us_per_step,
        saving_pct_of_step=f.saving_pct_of_step, one_time_s=None, evidence=f.evidence, fix=f.fix)


def findings_section(per_rank: list[tuple[int, list[dict[str, Any]] | None]], rows: Sequence[Any],
                     per: str) -> list[FindingRow]:
    """The view's findings: :func:`merge` of the ranks' own and :func:`job_row`, largest saving first
    (module docstring)."""
    step = statistics.median(r.step_us for r in rows) if rows else None
    out = merge(per_rank, step)
    job = job_row(rows, per)
    if job is not None:
        out.append(job)
    out.sort(key=lambda r: (-(r.saving_us or 0.0), -len(r.ranks), -(r.one_time_s or 0.0), r.kind, r.title))
    return out


def findings_note(per_rank: list[tuple[int, list[dict[str, Any]] | None]], per: str) -> str:
    """What the section covers: whose findings were read, and how the median and max are taken."""
    read = [r for r, f in per_rank if f is not None]
    unread = [r for r, f in per_rank if f is None]
    note = (f"savings per {per}; a row merges one finding of the ranks' own advisors (same kind, source and "
            f"title but its numbers); k of {len(read)} ranks: how many of the ranks whose findings were read have "
            "it; median and max over those with a per-step saving (a rank without the finding is not counted, not "
            "taken as 0); ranked by the median (a typical rank's saving, which one slow rank does not inflate); "
            "exposed_comm is the job's: the exposed collective time of the rank that arrives last (docs/ranks.md)")
    if unread:
        note += (f"; the findings of {len(unread)} rank(s) were not read (ranks {', '.join(map(str, unread))}): "
                 "a streamed trace gets the light summary, which lacks what the advisor reads; only the job's "
                 "exposed_comm covers them")
    return note
