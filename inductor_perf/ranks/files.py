"""A folder of per-rank traces -> :class:`~inductor_perf.ranks.view.CrossRankSummary`: the map
(:func:`inductor_perf.ranks.digest.digest`, one rank's trace -> its digest) run by an executor
(:mod:`inductor_perf.ranks.executors`: a local process pool by default, or a Dask cluster's), then
the reduce (:func:`inductor_perf.ranks.digest.view_of`). An unreadable trace is named and skipped.

The tasks return only the digest (never the trace), and the results are put back in file order, so
every executor gives what the sequential path gives. A streamed trace gets the light summary
(:mod:`inductor_perf.summary.light`: only what the view reads).

>>> from inductor_perf.ranks.files import ranks_view          # doctest: +SKIP
>>> from distributed import Client                             # doctest: +SKIP
>>> with Client("tcp://scheduler:8786") as client:             # doctest: +SKIP
...     view = ranks_view(["s3://bucket/run/rank0.json.gz", "s3://bucket/run/rank1.json.gz"],
...                       executor=client.get_executor())
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
from typing import Any, Callable

from ..errors import InductorPerfError
from .digest import digest, split_digests, view_of
from .executors import map_digests
from .view import CrossRankSummary, FolderSummary, folder_view, split_runs

log = logging.getLogger(__name__)


def ranks_view(paths: list[str], executor: concurrent.futures.Executor | None = None, *, device: Any = None,
               stage: Callable[[str], None] | None = None) -> CrossRankSummary:
    """The cross-rank view of the trace files ``paths`` (local paths or fsspec URLs, one per rank),
    each summarized by ``executor`` (any ``concurrent.futures.Executor``, e.g. a Dask client's
    ``client.get_executor()``; default: a local process pool). A rank that cannot be read, or whose
    worker dies, is named in the view and skipped; InductorPerfError when none is readable.
    :func:`inductor_perf.report.ranks.format_ranks` renders it (text, markdown, JSON)."""
    return view_of(map_digests(list(paths), executor=executor, device=device, stage=stage))


def cross_rank_files(files: list[str], *, device: Any = None, workers: int | None = None,
                     stage: Callable[[str], None] | None = None, light: bool = True,
                     executor: concurrent.futures.Executor | None = None) -> CrossRankSummary:
    """The cross-rank view of ``files``; raises InductorPerfError when none is a readable trace.
    ``workers``: the local pool's processes (1: this process); ``executor``: another executor.
    ``light=False`` builds it from full per-rank summaries (the same view, more work)."""
    return view_of(map_digests(files, executor=executor, workers=workers, stage=stage, device=device, light=light))


def folder_files(path: str, files: list[str], *, device: Any = None, workers: int | None = None,
                 stage: Callable[[str], None] | None = None,
                 executor: concurrent.futures.Executor | None = None) -> CrossRankSummary | FolderSummary:
    """``summary DIR`` of the trace files ``files`` of folder ``path``: the cross-rank view when they
    are the ranks of one job (:func:`cross_rank_files`' view), else one row per run of its own and
    a view per set of ranks (:func:`ranks.view.split_runs`). A run's row reads its full summary (a
    streamed trace is summarized again without ``light``: by ``executor`` when given, else in this
    process). InductorPerfError naming ``path`` when none is a readable trace."""
    digests = map_digests(files, executor=executor, workers=workers, stage=stage, device=device)
    inputs, bad = split_digests(digests)
    if not inputs:
        raise InductorPerfError(f"{path}: none of the {len(files)} trace files is readable: " + bad[0]["reason"])
    from ..summary.light import LIGHT_NOTE

    sets, singles = split_runs(inputs)
    light = [i for i, _ in singles if LIGHT_NOTE in i.summary.notes]  # streamed: the runs table reads its rates
    if light and executor is not None:  # where the map ran: the workers see the files
        fulls = map_digests([i.file for i in light], executor=executor, stage=stage, device=device, light=False)
    else:
        fulls = []
        for i in light:
            if stage:
                stage(f"summarizing {os.path.basename(i.file)} whole")
            fulls.append(digest(i.file, device, light=False))
    for i, full in zip(light, fulls):
        i.summary = full.summary if full.summary is not None else i.summary
    return folder_view(path, sets, singles, bad)
