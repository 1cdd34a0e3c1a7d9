"""Map tasks that misbehave on purpose, for the tests of inductor_perf.ranks.executors: importable by
name on a Dask worker whose PYTHONPATH has tests/unit (tests/unit/ranks/test_ranks_dask.py starts them so)."""

from __future__ import annotations

import os
import time

from inductor_perf.ranks.digest import Digest, digest


def sleepy(path: str, *args: object) -> Digest:
    """A task of 2 s that reads nothing."""
    time.sleep(2.0)
    return Digest(path, None, "slept")


def kill_worker_on_rank_1(path: str, *args: object) -> Digest:
    """The digest, except that the process running it dies on rank 1's file (as a worker killed by
    the OOM killer does; a Dask nanny then starts another)."""
    if path.endswith("sampled_rank-1.json.gz"):
        os._exit(3)
    return digest(path, *args)
