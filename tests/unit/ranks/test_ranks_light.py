"""The light per-rank summary (:mod:`inductor_perf.summary.light`) gives the cross-rank view the full
per-rank summaries give, exactly: on the hand-made rank traces of ``test_ranks``, on the shared GPU
ranks (../shared/traces/two_ranks) and on ranks from ``bench/gen_trace.py --world-size`` (raw traces
costed from their shapes, NCCL kernels, steps). The streaming windows are made tiny (4 KB) so every
trace spans many of them, as a large one does."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from inductor_perf.summary.stream import engine as summary_stream
from inductor_perf.traces import engines
from inductor_perf.ranks.view import RankInput, cross_rank
from inductor_perf.ranks.files import cross_rank_files
from inductor_perf.report.ranks import format_ranks
from inductor_perf.summary.files import summarize_file
from inductor_perf.summary.light import LIGHT_NOTE

from test_ranks import GEMM, allreduce, kernel, rank_trace, two_ranks, write  # the hand-made ranks (tests/unit)

ROOT = Path(__file__).resolve().parents[3]
SHARED = ROOT / ".." / "shared" / "traces" / "two_ranks"


@pytest.fixture(autouse=True)
def small_windows(monkeypatch):
    monkeypatch.setattr(summary_stream, "WINDOW_BYTES", 4096)
    monkeypatch.setattr(summary_stream.Windows.__init__, "__defaults__", (4096,))


def _views(files: list[str]) -> tuple[dict, dict, dict]:
    """The cross-rank JSON from light streamed, full streamed and fully loaded per-rank summaries."""
    out = []
    for engine, light in (("stream", True), ("stream", False), ("full", False)):
        summaries = [summarize_file(f, engine=engine, light=light).summary for f in files]
        if light:  # the light pass ran (no fall-back to the full load): the comparison means something
            assert all(s.notes == [LIGHT_NOTE] for s in summaries)
        out.append(cross_rank([RankInput(file=f, summary=s) for f, s in zip(files, summaries)]).to_dict())
    return out[0], out[1], out[2]


def _assert_same(files: list[str]) -> dict:
    light, streamed, loaded = _views(files)
    assert light == streamed
    # today's small ranks are loaded whole: the light view is that one too, in every format
    assert light == loaded
    for fmt in ("text", "markdown", "json"):
        assert format_ranks(light, fmt) == format_ranks(loaded, fmt)
    return light


def test_hand_made_ranks(tmp_path):
    v = _assert_same(two_ranks(tmp_path))
    assert v["straggler"]["rank"] == 1 and v["straggler"]["kernels"][0] == [GEMM, 400]  # test_ranks' numbers


def test_hand_made_ranks_without_straggler_and_window(tmp_path):
    files = [write(tmp_path / f"r{r}.json.gz", rank_trace(r, [kernel(GEMM, 100, 300), allreduce(400, 200 + 10 * r)]))
             for r in range(2)]
    assert _assert_same(files)["straggler"] is None
    # no ProfilerStep: per capture window
    plain = []
    for r in range(3):
        t = rank_trace(r, [kernel(GEMM, 100, 300 + 50 * r), allreduce(500, 400 - 100 * r)], world=3)
        t["traceEvents"] = t["traceEvents"][1:]
        plain.append(write(tmp_path / f"w_rank{r}.json.gz", t))
    v = _assert_same(plain)
    assert v["per"] == "window" and v["straggler"]["rank"] == 2


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/traces/two_ranks is absent (real GPU traces)")
def test_shared_two_gpu_ranks():
    v = _assert_same(sorted(str(SHARED / f) for f in os.listdir(SHARED)))
    assert v["ranks_present"] == [0, 1]


@pytest.fixture(scope="module")
def generated_ranks(tmp_path_factory):
    """Three ranks of ~4,000 events from the bench generator (rank 2 arrives last), one gzipped."""
    d = tmp_path_factory.mktemp("ranks")
    files = []
    for r in range(3):
        p = d / f"rank{r}.json"
        subprocess.run([sys.executable, str(ROOT / "bench" / "gen_trace.py"), "4000", str(p), "--world-size", "3",
                        "--rank", str(r)], check=True, capture_output=True)
        if r == 1:
            gz = d / "rank1.json.gz"
            gz.write_bytes(gzip.compress(p.read_bytes()))
            p.unlink()
            p = gz
        files.append(str(p))
    return files


def test_generated_ranks(generated_ranks):
    v = _assert_same(generated_ranks)
    assert v["per"] == "step" and v["world_size"] == 3
    # all-reduces of 262144 floats: S = 1 MiB on every rank; rank 2's take 100 µs, the others' 300 µs
    assert {c["median_bytes"] for c in v["collectives"]} == {1 << 20}
    assert v["straggler"]["rank"] == 2
    # the kinds come from the ops the kernels' launches join to (launch_op), as in the full summary
    kinds = {k["name"]: k["kind"] for k in v["kernels"]}
    assert kinds.get("ncclDevKernel_AllReduce_Sum_f32_RING_LL") == "collective"


def test_cross_rank_files_light_equals_full(generated_ranks, monkeypatch):
    # every rank streamed, as large ranks are: the light workers' view is the full workers' view
    monkeypatch.setattr(engines, "LARGE_TRACE_BYTES", 0)
    light = cross_rank_files(generated_ranks, workers=1).to_dict()
    full = cross_rank_files(generated_ranks, workers=1, light=False).to_dict()
    # the ranks' own findings need what the light summary leaves out (the advisor's signals, the roofline
    # placements): a light rank's are not read, and the view says so; the rest of the view is the same,
    # the job's exposed_comm row (from the per-rank table) included
    assert light["findings_read"] == [] and full["findings_read"] == [0, 1, 2]
    assert "were not read (ranks 0, 1, 2)" in light["findings_note"] and "not read" not in full["findings_note"]
    job = [f for f in full["findings"] if f["scope"] == "job"]
    assert light["findings"] == job and len(job) == 1
    drop = ("findings", "findings_read", "findings_note")
    assert {k: v for k, v in light.items() if k not in drop} == {k: v for k, v in full.items() if k not in drop}
