"""The map and the reduce of the cross-rank view.

**Map** (:func:`digest`): one trace path (local, or an fsspec URL such as ``s3://bucket/run/rank3.json.gz``)
-> a :class:`Digest`, everything the view reads of that rank: its light summary
(:mod:`inductor_perf.summary.light`; a trace small enough to be loaded whole gets the full summary,
the same values in those fields) and, from a full summary, its advisor's ranked findings (their JSON
dicts, :func:`rank_findings`), or why it could not be read. A pure function of the path: it
reads one file, in bounded memory (the streaming engine's bound for a large trace), and keeps no
state, so any ``concurrent.futures.Executor`` can run it on any machine that sees the file
(:mod:`inductor_perf.ranks.executors`). A digest holds no event; it pickles to a few kB per kernel
name and collective op of its rank (docs/ranks.md, "Memory").

**Reduce** (:func:`view_of`): digests -> :class:`~inductor_perf.ranks.view.CrossRankSummary`
(:func:`inductor_perf.ranks.view.cross_rank`), reading the digests only.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from ..errors import InductorPerfError
from .view import CrossRankSummary, RankInput, cross_rank

log = logging.getLogger(__name__)


@dataclass
class Digest:
    """What the cross-rank view reads of one rank's trace: its (light) summary, or why there is none."""

    file: str
    """The path or URL the trace was read from, as given."""
    summary: Any
    """A :class:`~inductor_perf.summary.rows.Summary`, or None when the file could not be read."""
    error: str | None = None
    """Why there is no summary: the reader's one-line message."""
    reason: str = "unreadable"
    """How it was lost: ``unreadable`` (the file), or ``worker died`` / ``failed`` (where it ran)."""
    findings: list[dict[str, Any]] | None = None
    """The rank's ranked findings, their JSON form (:func:`inductor_perf.advice.advise.attach`); None when
    not read: no summary, or a light one (it lacks what the advisor reads)."""


def rank_findings(summary: Any) -> list[dict[str, Any]] | None:
    """The findings of one rank's summary, as the summary path gives them
    (:func:`inductor_perf.advice.advise.attach`); None for a light summary."""
    from ..advice.advise import attach
    from ..summary.light import LIGHT_NOTE

    if LIGHT_NOTE in (summary.notes or ()):
        return None
    return attach(summary).findings


def digest(path: str, device: Any = None, top: int = 20, light: bool = True) -> Digest:
    """The :class:`Digest` of the trace at ``path`` (a local path or an fsspec URL). Never raises
    for a bad file: one rank's broken trace must not stop the view of the others. ``light``: a
    streamed trace gets the light summary (only what the view reads); False: full summaries."""
    from ..summary.files import summarize_file

    try:
        # "auto": a large rank's trace is read in one streaming pass (summary.stream.engine), in bounded memory
        summary = summarize_file(path, device=device, top=top, engine="auto", light=light).summary
        return Digest(path, summary, findings=rank_findings(summary))
    except (InductorPerfError, OSError, ValueError) as e:
        return Digest(path, None, str(e))
    except Exception as e:  # a trace that breaks the summary: name it, keep the other ranks
        log.debug("summarizing %s failed", path, exc_info=True)
        return Digest(path, None, f"{type(e).__name__}: {e}")


def split_digests(digests: list[Digest]) -> tuple[list[RankInput], list[dict[str, str]]]:
    """(the readable ranks, in order; ``{"file", "reason"}`` of each digest without a summary),
    each of the latter logged as a warning."""
    inputs = [RankInput(file=d.file, summary=d.summary, findings=d.findings) for d in digests if d.summary is not None]
    bad = [{"file": d.file, "reason": f"{d.reason} ({d.error})"} for d in digests if d.summary is None]
    for b in bad:
        log.warning("skipping %s: %s", b["file"], b["reason"])
    return inputs, bad


def view_of(digests: list[Digest], where: str | None = None) -> CrossRankSummary:
    """The reduce: the cross-rank view of ``digests`` (each one without a summary named in it).
    InductorPerfError (naming ``where`` when given) when none has a summary."""
    inputs, bad = split_digests(digests)
    if not inputs:
        raise InductorPerfError(f"{where + ': ' if where else ''}none of the {len(digests)} trace files is "
                                "readable: " + (bad[0]["reason"] if bad else "no file given"))
    return cross_rank(inputs, bad)
