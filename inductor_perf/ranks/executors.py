"""Who runs the map (:func:`inductor_perf.ranks.digest.digest`, one task per rank): any
``concurrent.futures.Executor``. We grow no scheduler of our own: by default a local process pool
(one process per file up to the cores; in this process for one file or one core), or a cluster's
executor: ``dask.distributed`` (:func:`dask_executor`, ``client.get_executor()``), Ray's or any other.

:func:`run_map` submits one task per path and waits for them:

- **progress**: ``stage`` is told ``summarized N of M ranks, ETA S s`` as they finish (the CLI shows it
  on stderr when that is a terminal, :class:`inductor_perf.cli._Ticker`);
- **faults**: a task whose worker died (Dask's ``KilledWorker``: the scheduler already retried it on
  other workers; a local pool's ``BrokenProcessPool``) or that raised gives a digest without a summary,
  named in the view with the reason. A dying worker takes with it the other ranks it held, so every
  rank lost that way runs again, alone: only a rank whose own run kills its worker is lost;
- **Ctrl-C** (``KeyboardInterrupt`` while waiting): every task not yet finished is cancelled
  (``Future.cancel``: on a Dask cluster that cancels the cluster's task) before it is raised again.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import logging
import os
import time
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Iterator

from ..errors import InductorPerfError
from .digest import Digest, digest

log = logging.getLogger(__name__)

POLL_S = 0.5
"""How often the wait wakes to update the progress line (and so to see a Ctrl-C)."""
DASK_HINT = "pip install 'inductor-perf[dask]'"
Stage = Callable[[str], None]


STALLED_S = 30.0
"""After this long with no rank finished, the progress line says so (workers gone, busy or stuck: the
wait has no limit of its own, as a rank may take long; Ctrl-C cancels)."""


def progress_text(done: int, total: int, elapsed_s: float, quiet_s: float = 0.0) -> str:
    """``summarized 3 of 16 ranks, ETA 40 s``: the ETA at the mean rate so far, once a rank is done;
    ``quiet_s``: seconds since a rank last finished (the start, before the first), named from
    :data:`STALLED_S` on."""
    text = f"summarized {done} of {total} ranks"
    if 0 < done < total:
        text += f", ETA {elapsed_s / done * (total - done):.0f} s"
    if done < total and quiet_s >= STALLED_S:
        text += f"; none finished in the last {quiet_s:.0f} s (Ctrl-C cancels)"
    return text


def _lost(path: str, fut: cf.Future) -> Digest:
    """The digest of a task that gave no digest: cancelled, its worker died, or it raised."""
    if fut.cancelled():
        return Digest(path, None, "its task was cancelled", reason="cancelled")
    e = fut.exception()
    why = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}".rstrip(": ")
    died = isinstance(e, BrokenProcessPool) or type(e).__name__ == "KilledWorker"
    return Digest(path, None, why, reason="worker died" if died else "failed")


def run_map(executor: cf.Executor, paths: list[str], *, stage: Stage | None = None,
            fn: Callable[..., Digest] = digest, args: tuple = ()) -> list[Digest]:
    """``fn(path, *args)`` for each path on ``executor``; the digests in ``paths``' order (a task
    that gave none: :func:`_lost`'s). A KeyboardInterrupt (or any exception) while waiting cancels
    every unfinished task, then propagates."""
    futures = {executor.submit(fn, p, *args): p for p in paths}
    out: dict[str, Digest] = {}
    t0 = last = time.monotonic()
    try:
        pending = set(futures)
        while pending:
            finished, pending = cf.wait(pending, timeout=POLL_S, return_when=cf.FIRST_COMPLETED)
            now = time.monotonic()
            for fut in finished:
                path = futures[fut]
                out[path] = fut.result() if not fut.cancelled() and fut.exception() is None else _lost(path, fut)
                last = now
            if stage:
                stage(progress_text(len(out), len(paths), now - t0, now - last))
    except BaseException:
        for fut in futures:
            fut.cancel()
        raise
    return [out[p] for p in paths]


class Again:
    """``fn`` under another name for the executor: a cluster that names a task by its function and
    arguments (Dask's ``pure`` keys) would otherwise hand back the lost task's failed future."""

    def __init__(self, fn: Callable[..., Digest]) -> None:
        self.fn = fn

    def __call__(self, path: str, *args: Any) -> Digest:
        return self.fn(path, *args)


def run_again_alone(got: list[Digest], executor: Callable[[], Any], *, fn: Callable[..., Digest] = digest,
                    args: tuple = ()) -> list[Digest]:
    """``got`` with each rank lost to a dying worker run again, one at a time, on ``executor()``'s
    executor (a context manager): a worker that dies takes with it the other ranks it held (queued,
    or their results not yet fetched), so a death is pinned on a rank only when it recurs while that
    rank runs alone."""
    for n, d in enumerate(got):
        if d.reason == "worker died":
            log.info("%s: its worker died (%s): running it again alone", d.file, d.error)
            with executor() as alone:
                got[n] = run_map(alone, [d.file], fn=Again(fn), args=args)[0]
    return got


def run_local(paths: list[str], workers: int, *, stage: Stage | None = None, fn: Callable[..., Digest] = digest,
              args: tuple = ()) -> list[Digest]:
    """:func:`run_map` on a local pool of ``workers`` processes; ranks lost to a broken pool (one
    process died, and the pool with it) run again alone, each in a pool of its own (:func:`run_again_alone`)."""
    pool = cf.ProcessPoolExecutor(max_workers=workers)
    try:
        got = run_map(pool, paths, stage=stage, fn=fn, args=args)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return run_again_alone(got, lambda: cf.ProcessPoolExecutor(max_workers=1), fn=fn, args=args)


def run_on(executor: cf.Executor, paths: list[str], *, stage: Stage | None = None,
           fn: Callable[..., Digest] = digest, args: tuple = ()) -> list[Digest]:
    """:func:`run_map` on a caller's executor (a cluster's: Dask retries a task whose worker died on
    other workers, then gives up with KilledWorker); ranks lost with a dying worker run again alone
    on it (:func:`run_again_alone`)."""
    got = run_map(executor, paths, stage=stage, fn=fn, args=args)
    return run_again_alone(got, lambda: contextlib.nullcontext(executor), fn=fn, args=args)


def map_digests(paths: list[str], *, executor: cf.Executor | None = None, workers: int | None = None,
                stage: Stage | None = None, device: Any = None, top: int = 20, light: bool = True) -> list[Digest]:
    """The digest of each path, in ``paths``' order. ``executor``: who runs them (None: a local pool
    of ``workers`` processes, default one per path up to the cores; 1: in this process)."""
    args = (device, top, light)
    if executor is not None:
        return run_on(executor, paths, stage=stage, args=args)
    if workers is None:
        workers = min(len(paths), os.cpu_count() or 1)
    if workers > 1 and len(paths) > 1:
        return run_local(paths, workers, stage=stage, args=args)
    out = []
    for n, f in enumerate(paths, 1):
        if stage:
            stage(f"summarizing {os.path.basename(f)} ({n} of {len(paths)})")
        out.append(digest(f, *args))
    return out


@contextlib.contextmanager
def dask_executor(address: str) -> Iterator[cf.Executor]:
    """A ``concurrent.futures`` executor on the Dask scheduler at ``address`` (``tcp://host:8786``, or a
    scheduler file's path), closed on exit. InductorPerfError in one line when dask.distributed is
    not installed (with the command that installs it) or the scheduler does not answer."""
    try:
        from distributed import Client
    except ImportError:
        raise InductorPerfError(f"--dask {address}: running on a Dask cluster needs dask.distributed: "
                                f"{DASK_HINT}") from None
    kw = {"scheduler_file": address} if os.path.isfile(address) else {"address": address}
    try:
        client = Client(timeout="20s", **kw)
    except (OSError, TimeoutError, ValueError) as e:
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InductorPerfError(f"--dask {address}: no Dask scheduler answered there ({why})") from None
    try:
        if not client.scheduler_info().get("workers"):
            log.warning("--dask %s: the scheduler has no workers yet: the ranks wait until one joins "
                        "(`dask worker %s` starts one)", address, client.scheduler.address)
        yield client.get_executor()
    finally:
        client.close()
