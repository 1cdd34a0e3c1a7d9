"""``inductor-perf summary DIR`` of traces that are not (only) the ranks of one job: one row per run,
a cross-rank view per set of ranks, what was done with each file said, and one-line errors for a
folder without traces. Expected numbers are hand arithmetic on the events written here, or counted
from the shared real traces' JSON directly."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from inductor_perf import cli
from inductor_perf.ranks import files as ranks_files
from inductor_perf.report import ranks as report_ranks

TRACES = Path(os.environ.get("INDUCTOR_PERF_SHARED_TRACES",
                             Path(__file__).resolve().parents[3] / ".." / "shared" / "traces"))
MM = {"Input Dims": [[4, 8], [8, 16]], "Input type": ["float", "float"]}  # 2*4*8*16 = 1024 FLOPs


def ev(name: str, ts: float, dur: float, cat: str = "cpu_op", **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": 1, "args": dict(args)}


def compiled_run(mm_us: float, relu_us: float) -> dict:
    """A compiled graph's call (0..40 µs) running an aten::mm (1..1+mm_us) and a generated kernel
    (20..20+relu_us): the summary's CPU kernels of a compiled graph (cpu-compiled-kernels)."""
    return {"traceEvents": [ev("## Call CompiledFxGraph fabc ##", 0, 40, cat="user_annotation"),
                            ev("aten::mm", 1, mm_us, **MM), ev("graph_0_cpp_fused_relu_0", 20, relu_us)]}


def write(path: Path, trace: dict) -> str:
    if path.suffix == ".gz":
        with gzip.open(path, "wt") as f:
            json.dump(trace, f)
    else:
        path.write_text(json.dumps(trace))
    return str(path)


def rank_trace(rank: int, world: int, kernels_us: float) -> dict:
    step = ev("ProfilerStep#1", 0, 100, cat="user_annotation")
    k = {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0, "tid": 7, "ts": 10,
         "dur": kernels_us, "args": {"stream": 7}}
    return {"traceEvents": [step, k], "distributedInfo": {"rank": rank, "world_size": world, "backend": "nccl"}}


def summary_json(path: Path, capsys) -> dict:
    assert cli.main(["summary", str(path), "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_two_runs_make_a_table_of_runs_by_hand(tmp_path, capsys):
    write(tmp_path / "before.json", compiled_run(10, 5))
    write(tmp_path / "after.json.gz", compiled_run(4, 2))
    d = summary_json(tmp_path, capsys)
    assert d["rank_sets"] == [] and [r["file"] for r in d["runs"]] == ["after.json.gz", "before.json"]
    after, before = d["runs"]
    # before: no steps, so the window is the kernels' span (docs/summary.md), mm 1..11 to relu 20..25:
    # 24 µs; kernels 10 + 5 = 15 µs busy: 62.5 %; the top kernel (mm) runs 10 of the 15 busy µs:
    # 66.7 %; 1024 FLOPs over the kernels' 15 µs: 68.3 MFLOP/s
    assert (before["window_us"], before["kernels"], before["busy_pct"]) == (24, 2, pytest.approx(62.5))
    assert before["top_kernel"] == "aten::mm" and before["top_kernel_busy_pct"] == pytest.approx(100 * 10 / 15, abs=0.1)
    assert before["flop"] == 1024 and before["achieved_tflops"] == pytest.approx(1024 / 15e-6 / 1e12, rel=1e-5)
    # after: mm 1..5, relu 20..22: a 21 µs window, 4 + 2 = 6 µs busy: 28.6 %; 1024 FLOPs / 6 µs
    assert after["window_us"] == 21
    assert (after["busy_pct"], after["achieved_tflops"]) == (pytest.approx(100 * 6 / 21, abs=0.01),
                                                              pytest.approx(1024 / 6e-6 / 1e12, rel=1e-5))
    assert all("no rank" in r["why"] for r in d["runs"]) and after["rank"] is None
    for fmt in ("text", "markdown"):
        assert cli.main(["summary", str(tmp_path), "--format", fmt]) == 0
        out = capsys.readouterr().out
        assert "before.json" in out and "after.json.gz" in out and "62.5 %" in out
        assert "cross-rank" not in out and "0 ranks" not in out


def test_mixed_folder_says_what_was_done_with_each(tmp_path, capsys):
    write(tmp_path / "job_r0.json", rank_trace(0, 2, 30))
    write(tmp_path / "job_r1.json", rank_trace(1, 2, 50))
    write(tmp_path / "other_job.json", rank_trace(3, 8, 20))  # rank 3 of 8: alone here
    write(tmp_path / "plain.json", compiled_run(10, 5))
    (tmp_path / "broken.json").write_text("{not json")
    d = summary_json(tmp_path, capsys)
    (view,) = d["rank_sets"]
    assert view["ranks_present"] == [0, 1] and view["world_size"] == 2
    # rank 0: one 30 µs kernel in a 100 µs step; rank 1: 50 µs
    assert [r["compute_us"] for r in view["ranks"]] == [30, 50]
    why = {r["file"]: r["why"] for r in d["runs"]}
    assert set(why) == {"other_job.json", "plain.json"}
    assert "rank 3 of 8: no other rank of its job" in why["other_job.json"] and "no rank" in why["plain.json"]
    assert {r["file"]: r["rank"] for r in d["runs"]} == {"other_job.json": 3, "plain.json": None}
    notes = "\n".join(d["notes"])
    assert "broken.json: left out, unreadable" in notes and "job_r0.json, job_r1.json: ranks 0-1 of 2" in notes
    assert cli.main(["summary", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "Runs (2)" in text and "cross-rank summary: 2 of 2 ranks" in text and "What was done with each" in text


def test_ranks_of_one_job_are_unchanged(tmp_path, capsys):
    files = [write(tmp_path / f"job_rank{r}.json", rank_trace(r, 2, 30 + 20 * r)) for r in range(2)]
    got = ranks_files.folder_files(str(tmp_path), files, workers=1).to_dict()
    assert got == ranks_files.cross_rank_files(files, workers=1).to_dict()
    d = summary_json(tmp_path, capsys)
    assert "runs" not in d and d["ranks_present"] == [0, 1]


@pytest.mark.parametrize("content", [None, {"notes.txt": "hello"}, {"a.json": "[]", "b.json": "{}"}])
def test_folder_without_traces_is_a_one_line_error_naming_it(tmp_path, capsys, content):
    d = tmp_path / "captures"
    d.mkdir()
    for name, text in (content or {}).items():
        (d / name).write_text(text)
    assert cli.main(["summary", str(d)]) == 1
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert captured.out == "" and err[-1].startswith("inductor-perf: error: ") and str(d) in err[-1]


def test_format_folder_takes_the_dict_too(tmp_path):
    files = [write(tmp_path / "a.json", compiled_run(10, 5)), write(tmp_path / "b.json", compiled_run(3, 5))]
    view = ranks_files.folder_files(str(tmp_path), files, workers=1)
    for fmt in ("text", "markdown", "json"):
        assert report_ranks.format_folder(view, fmt) == report_ranks.format_folder(view.to_dict(), fmt)


def _device_events(path: Path) -> int:
    with gzip.open(path, "rt") as f:
        return sum(1 for e in json.load(f)["traceEvents"]
                   if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e.get("dur", 0) > 0)


def test_shared_ranks_of_two_jobs_are_two_runs(tmp_path, capsys):
    names = ["a100_ranks8_r3_control.json.gz", "v100_ranks2_r1_test.json.gz"]
    if not all((TRACES / n).exists() for n in names):
        pytest.skip(f"{TRACES} lacks {names} (the shared real traces are not checked in)")
    for n in names:
        (tmp_path / n).symlink_to((TRACES / n).resolve())
    d = summary_json(tmp_path, capsys)
    assert d["rank_sets"] == []
    rows = {r["file"]: r for r in d["runs"]}
    # rank 3 of 8 and rank 1 of 2: two jobs, one rank each
    assert (rows[names[0]]["rank"], rows[names[0]]["world_size"]) == (3, 8)
    assert (rows[names[1]]["rank"], rows[names[1]]["world_size"]) == (1, 2)
    for n in names:
        assert rows[n]["kernels"] == _device_events(TRACES / n)  # every device event with a duration
        assert "no other rank of its job" in rows[n]["why"] and rows[n]["steps"] > 0


def test_two_env_var_captures_are_two_runs(tmp_path, capsys):
    """Two captures of `INDUCTOR_PERF_TRACE_DIR=out python train.py` run twice (tests/fixtures/captures):
    no rank, so two runs; each row's steps and mean step from the trace's ProfilerStep#N ranges."""
    fixtures = Path(__file__).resolve().parents[2] / "fixtures" / "captures"
    for n in (1, 2):
        (tmp_path / f"run{n}.trace.json.gz").symlink_to(fixtures / f"run{n}.trace.json.gz")
    d = summary_json(tmp_path, capsys)
    assert d["rank_sets"] == [] and [r["file"] for r in d["runs"]] == ["run1.trace.json.gz", "run2.trace.json.gz"]
    for row in d["runs"]:
        with gzip.open(fixtures / row["file"], "rt") as f:
            steps = [e["dur"] for e in json.load(f)["traceEvents"]
                     if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]
        assert row["steps"] == len(steps) == 2 and row["step_us"] == pytest.approx(sum(steps) / 2, rel=1e-3)
        assert row["kernels"] > 0 and row["top_kernel"] and row["rank"] is None
