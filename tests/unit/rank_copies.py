"""Many ranks made from the two real ones of ``../shared/traces/two_ranks`` (ranks 0 and 1 of 128, nccl,
sampled from a large GPU job): rank ``r`` is a copy of ``sampled_rank-{r % 2}`` whose
``distributedInfo.rank`` says ``r``, written into a test's own folder (the shared traces are read in
place, never copied into the repository)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

TWO_RANKS = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces" / "two_ranks"


def rank_copies(folder: Path, n: int) -> list[str]:
    """``n`` rank files ``sampled_rank-<r>.json.gz`` in ``folder`` (created), sorted by rank; the test
    skips, as the other tests of the shared traces do, where ../shared/traces is absent."""
    if not TWO_RANKS.is_dir():
        pytest.skip("../shared/traces/two_ranks is absent (real GPU traces)")
    folder.mkdir(parents=True, exist_ok=True)
    sources = [json.loads(gzip.decompress((TWO_RANKS / f"sampled_rank-{r}.json.gz").read_bytes())) for r in (0, 1)]
    out = []
    for r in range(n):
        trace = dict(sources[r % 2], distributedInfo=dict(sources[r % 2]["distributedInfo"], rank=r))
        path = folder / f"sampled_rank-{r}.json.gz"
        path.write_bytes(gzip.compress(json.dumps(trace).encode(), compresslevel=1))
        out.append(str(path))
    return out
