"""The cross-rank view (inductor_perf.ranks.view, ranks.files, report.ranks, summary.comm): hand-built
rank traces whose expected numbers are worked out by hand in the comments, and the shared GPU ranks."""

from __future__ import annotations

import gzip
import json
import os

import pytest

from inductor_perf import cli
from inductor_perf.model.kernel_kinds import KIND_COLLECTIVE, KIND_MATMUL
from inductor_perf.ranks.files import cross_rank_files
from inductor_perf.report.ranks import format_ranks
from inductor_perf.summary.comm import comm_view
from inductor_perf.summary.kernels import ParsedEvent

SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "traces", "two_ranks")
EPOCH = 1.7e15  # µs since 1970 (Nov 2023): the epoch clock, as GPU traces have
GEMM = "ampere_sgemm_128x64_nn"
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"


def kernel(name, ts, dur, stream=7, **args):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": EPOCH + ts, "dur": dur,
            "args": {"stream": stream, **args}}


def allreduce(ts, dur):
    # 1000 floats on 2 ranks: S = 4000 B (costs.comm: max(in, out) nelems x 4 bytes)
    return kernel(NCCL, ts, dur, stream=9, **{"Collective name": "allreduce", "In msg nelems": 1000,
                                              "Out msg nelems": 1000, "dtype": "Float", "Group size": 2})


def rank_trace(rank, kernels, world=2, start=0.0):
    step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
            "ts": EPOCH + start, "dur": 1000.0, "args": {}}
    for k in kernels:
        k["ts"] += start
    return {"traceEvents": [step] + kernels,
            "distributedInfo": {"rank": rank, "world_size": world, "backend": "nccl"}}


def write(path, trace):
    with gzip.open(path, "wt") as f:
        json.dump(trace, f)
    return str(path)


def two_ranks(tmp_path):
    """One 1000 µs step per rank. Rank 0: GEMM 100-400, a second GEMM 450-550 on another stream,
    all-reduce 400-900 (it waits). Rank 1 (late): GEMM 100-800, all-reduce 800-900."""
    r0 = rank_trace(0, [kernel(GEMM, 100, 300), kernel("ampere_sgemm_64x64_nn", 450, 100, stream=8),
                        allreduce(400, 500)])
    r1 = rank_trace(1, [kernel(GEMM, 100, 700), allreduce(800, 100)])
    return [write(tmp_path / "a_rank0.json.gz", r0), write(tmp_path / "a_rank1.json.gz", r1)]


def test_straggler_and_split_by_hand(tmp_path):
    v = cross_rank_files(two_ranks(tmp_path), workers=1).to_dict()
    assert v["per"] == "step" and v["ranks_present"] == [0, 1] and v["missing_ranks"] == []
    r0, r1 = v["ranks"]
    # rank 0: compute = 300 + 100 = 400; comm 500, of which 450-500 ... 450-550 overlaps 100 -> exposed 400;
    # idle = 1000 - 400 - 400 = 200
    assert (r0["compute_us"], r0["comm_us"], r0["exposed_comm_us"], r0["idle_us"]) == (400, 500, 400, 200)
    # rank 1: compute 700, comm 100 all exposed, idle 200
    assert (r1["compute_us"], r1["comm_us"], r1["exposed_comm_us"], r1["idle_us"]) == (700, 100, 100, 200)
    st = v["straggler"]
    assert st["rank"] == 1 and st["lead_us"] == 400  # 500 - 100
    assert st["compute_delta_us"] == 300  # 700 - 400
    assert st["kernels"][0] == [GEMM, 400]  # 700 - 300
    coll = {c["rank"]: c for c in v["collectives"]}
    assert coll[0]["op"] == "all_reduce" and coll[0]["median_bytes"] == 4000
    assert coll[0]["wait_us"] == 400 and coll[1]["wait_us"] == 0
    # algbw = 4000 B / 100 µs = 0.04 GB/s; busbw = algbw x 2(n-1)/n = 0.04 for n = 2
    assert coll[1]["algbw_gbps"] == pytest.approx(0.04) and coll[1]["busbw_gbps"] == pytest.approx(0.04)
    assert coll[0]["algbw_gbps"] == pytest.approx(0.008)
    # the slowest GEMM is rank 1's
    top = v["kernels"][0]
    assert top["name"] == GEMM and top["max_rank"] == 1 and (top["min_us"], top["max_us"]) == (300, 700)


def test_text_and_markdown_name_the_straggler(tmp_path):
    v = cross_rank_files(two_ranks(tmp_path), workers=1)
    text = format_ranks(v, "text")
    assert "Straggler: rank 1" in text and "Collectives" in text
    assert "**Straggler: rank 1**" in format_ranks(v, "markdown")


def test_parallel_equals_sequential(tmp_path):
    files = two_ranks(tmp_path)
    assert cross_rank_files(files, workers=2).to_dict() == cross_rank_files(files, workers=1).to_dict()


def test_no_straggler_when_ranks_wait_alike(tmp_path):
    files = [write(tmp_path / f"r{r}.json.gz", rank_trace(r, [kernel(GEMM, 100, 300), allreduce(400, 200 + 10 * r)]))
             for r in range(2)]
    v = cross_rank_files(files, workers=1).to_dict()
    # a 10 µs lead is 1 % of the 1000 µs step: under the 5 % bar
    assert v["straggler"] is None and "no rank stands out" in v["straggler_note"]


def test_mixed_runs_unreadable_and_missing_ranks(tmp_path):
    files = two_ranks(tmp_path)
    files.append(write(tmp_path / "b_rank0.json.gz",
                       rank_trace(0, [kernel(GEMM, 0, 10)], world=4)))  # another job: world size 4
    files.append(write(tmp_path / "c_rank1.json.gz",
                       rank_trace(1, [kernel(GEMM, 0, 10), allreduce(10, 10)], start=3600e6)))  # an hour later
    bad = tmp_path / "d_rank1.json"
    bad.write_text("{not json")
    files.append(str(bad))
    v = cross_rank_files(files, workers=1).to_dict()
    assert v["ranks_present"] == [0, 1] and v["straggler"]["rank"] == 1
    why = {os.path.basename(s["file"]): s["reason"] for s in v["skipped"]}
    assert set(why) == {"b_rank0.json.gz", "c_rank1.json.gz", "d_rank1.json"}
    assert "world size 4" in why["b_rank0.json.gz"] and "unreadable" in why["d_rank1.json"]
    assert "another run" in why["c_rank1.json.gz"]
    assert any("d_rank1.json" in n for n in v["notes"])


def test_missing_ranks_and_rank_from_file_name(tmp_path):
    files = []
    for r in (0, 2):
        t = rank_trace(r, [kernel(GEMM, 100, 300), allreduce(400, 100)], world=4)
        del t["distributedInfo"]["rank"]
        files.append(write(tmp_path / f"trace_rank-{r}.json.gz", t))
    v = cross_rank_files(files, workers=1).to_dict()
    assert v["ranks_present"] == [0, 2] and v["missing_ranks"] == [1, 3]
    assert any("2 of 4 ranks present" in n for n in v["notes"])
    assert any("rank taken from the file name" in n for n in v["notes"])


def test_comm_view_host_collectives_by_hand():
    """gloo: the collective is the ``gloo:all_reduce`` annotation on gloo's thread."""
    mm = ParsedEvent("addmm", "cpu_op", 1, 1, 0.0, 50.0, {})
    step = ParsedEvent("ProfilerStep#3", "user_annotation", 1, 1, 0.0, 200.0, {})
    gloo = ParsedEvent("gloo:all_reduce", "user_annotation", 1, 2, 40.0, 100.0,
               {"Input Dims": [[676]], "Input type": ["float"]})
    v = comm_view([mm], {id(mm): KIND_MATMUL}, [step, gloo, mm], 0.0)
    assert v.source == "host"
    # comm 40-140 overlaps addmm 0-50 for 10 µs: exposed 90; active = 50 + 100 - 10
    assert (v.comm_us, v.exposed_comm_us, v.compute_us, v.active_us) == (100, 90, 50, 140)
    assert v.step_comm_us == [100] and v.step_exposed_us == [90] and v.step_compute_us == [50]
    row = v.collectives[0]
    assert (row.op, row.comm_bytes, row.count) == ("all_reduce", 676 * 4, 1)


def test_comm_view_device_wins_over_host_annotations():
    k = ParsedEvent(NCCL, "kernel", 0, 9, 0.0, 10.0, {"comm_op": "all_reduce", "comm_bytes": 8, "group_size": 2})
    gloo = ParsedEvent("gloo:all_reduce", "user_annotation", 1, 2, 0.0, 100.0, {})
    v = comm_view([k], {id(k): KIND_COLLECTIVE}, [gloo], 0.0)
    assert v.source == "device" and v.comm_us == 10 and v.collectives[0].busbw_gbps == pytest.approx(8 / 10e3)


def test_cli_dir_gives_one_view_and_per_rank_keeps_the_old(tmp_path, capsys):
    two_ranks(tmp_path)
    assert cli.main(["summary", str(tmp_path), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["straggler"]["rank"] == 1
    assert cli.main(["summary", str(tmp_path), "--format", "json", "--per-rank"]) == 0
    docs = json.loads(capsys.readouterr().out)
    assert isinstance(docs, list) and len(docs) == 2


def test_cli_dir_of_unreadable_traces_is_one_line_error(tmp_path, capsys):
    for n in range(2):
        (tmp_path / f"x{n}.json").write_text("[]")
    assert cli.main(["summary", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"inductor-perf: error: {tmp_path}: none of the 2 trace files is readable")


@pytest.mark.skipif(not os.path.isdir(SHARED), reason="../shared/traces/two_ranks is absent (real GPU traces)")
def test_shared_two_gpu_ranks():
    files = sorted(os.path.join(SHARED, f) for f in os.listdir(SHARED))
    v = cross_rank_files(files, workers=1).to_dict()
    assert v["ranks_present"] == [0, 1] and v["world_size"] == 128 and v["backend"] == "nccl"
    assert [r["collectives"] for r in v["ranks"]] == ["device", "device"]
    # both ranks record two ProfilerStep ranges (~607 and ~623 ms on rank 0, per the trace's own events)
    assert v["per"] == "step" and 600e3 < v["ranks"][0]["step_us"] < 640e3
    assert {c["rank"] for c in v["collectives"]} == {0, 1}
    assert all(c["busbw_gbps"] and c["busbw_gbps"] > 0 for c in v["collectives"] if c["op"] == "all_gather")
    assert any("126 missing" in n for n in v["notes"])
