"""A folder of per-rank traces -> :class:`~inductor_perf.ranks.view.CrossRankSummary`: each trace is
summarized by :func:`inductor_perf.summary.files.summarize_file` (in worker processes when there
are several files and cores), an unreadable one is named and skipped, then :func:`ranks.view.cross_rank`.

The workers return only the :class:`~inductor_perf.summary.rows.Summary` (never the trace), and the
results are put back in file order, so the parallel path gives what the sequential one gives. A
streamed trace gets the light summary (:mod:`inductor_perf.summary.light`: only what the view reads).
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
from typing import Any, Callable

from ..errors import InductorPerfError
from .view import CrossRankSummary, FolderSummary, RankInput, cross_rank, folder_view, split_runs

log = logging.getLogger(__name__)


def summarize_one(path: str, device: Any = None, top: int = 20, light: bool = True) -> tuple[str, Any, str | None]:
    """(path, its Summary or None, why it could not be read or None). Never raises for a bad file:
    one rank's broken trace must not stop the view of the others. ``light``: a streamed trace gets
    the light summary, only what :func:`ranks.view.cross_rank` reads (:mod:`inductor_perf.summary.light`)."""
    from ..summary.files import summarize_file

    try:
        # "auto": a large rank's trace is read in one streaming pass (summary.stream.engine), in bounded memory
        return path, summarize_file(path, device=device, top=top, engine="auto", light=light).summary, None
    except (InductorPerfError, OSError, ValueError) as e:
        return path, None, str(e)
    except Exception as e:  # a trace that breaks the summary: name it, keep the other ranks
        log.debug("summarizing %s failed", path, exc_info=True)
        return path, None, f"{type(e).__name__}: {e}"


def summarize_files(files: list[str], *, device: Any = None, top: int = 20, workers: int | None = None,
                    stage: Callable[[str], None] | None = None,
                    light: bool = True) -> list[tuple[str, Any, str | None]]:
    """:func:`summarize_one` of each file, in file order; ``workers`` processes (default: one per
    file up to the cores; 1: in this process); ``light=False``: full summaries."""
    if workers is None:
        workers = min(len(files), os.cpu_count() or 1)
    if workers <= 1 or len(files) <= 1:
        out = []
        for n, f in enumerate(files, 1):
            if stage:
                stage(f"summarizing {os.path.basename(f)} ({n} of {len(files)})")
            out.append(summarize_one(f, device, top, light))
        return out
    results: dict[str, tuple[str, Any, str | None]] = {}
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(summarize_one, f, device, top, light) for f in files]
        for fut in concurrent.futures.as_completed(futures):
            path, summary, err = fut.result()
            results[path] = (path, summary, err)
            if stage:
                stage(f"summarized {len(results)} of {len(files)} ranks")
    return [results[f] for f in files]


def cross_rank_files(files: list[str], *, device: Any = None, workers: int | None = None,
                     stage: Callable[[str], None] | None = None, light: bool = True) -> CrossRankSummary:
    """The cross-rank view of ``files``; raises InductorPerfError when none is a readable trace.
    ``light=False`` builds it from full per-rank summaries (the same view, more work)."""
    done = summarize_files(files, device=device, workers=workers, stage=stage, light=light)
    inputs = [RankInput(file=p, summary=s) for p, s, _ in done if s is not None]
    bad = [{"file": p, "reason": f"unreadable ({err})"} for p, s, err in done if s is None]
    for b in bad:
        log.warning("skipping %s: %s", b["file"], b["reason"])
    if not inputs:
        raise InductorPerfError(f"none of the {len(files)} trace files is readable: " + bad[0]["reason"])
    return cross_rank(inputs, bad)


def folder_files(path: str, files: list[str], *, device: Any = None, workers: int | None = None,
                 stage: Callable[[str], None] | None = None) -> CrossRankSummary | FolderSummary:
    """``summary DIR`` of the trace files ``files`` of folder ``path``: the cross-rank view when they
    are the ranks of one job (:func:`cross_rank_files`' view), else one row per run of its own and
    a view per set of ranks (:func:`ranks.view.split_runs`). A run's row reads its full summary (a
    streamed trace is summarized again without ``light``). InductorPerfError naming ``path`` when
    none is a readable trace."""
    done = summarize_files(files, device=device, workers=workers, stage=stage)
    inputs = [RankInput(file=p, summary=s) for p, s, _ in done if s is not None]
    bad = [{"file": p, "reason": f"unreadable ({err})"} for p, s, err in done if s is None]
    for b in bad:
        log.warning("skipping %s: %s", b["file"], b["reason"])
    if not inputs:
        raise InductorPerfError(f"{path}: none of the {len(files)} trace files is readable: " + bad[0]["reason"])
    from ..summary.light import LIGHT_NOTE

    sets, singles = split_runs(inputs)
    for i, _ in singles:
        if LIGHT_NOTE in i.summary.notes:  # a streamed trace: the runs table reads its rates and peaks
            if stage:
                stage(f"summarizing {os.path.basename(i.file)} whole")
            _, full, _ = summarize_one(i.file, device, light=False)
            i.summary = full if full is not None else i.summary
    return folder_view(path, sets, singles, bad)
