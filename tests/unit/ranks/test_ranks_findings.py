"""The cross-rank view's findings (inductor_perf.ranks.findings, advice.device.find_job_exposed_comm):
each rank's own findings merged across ranks, and the job's exposed_comm, on hand-built rank traces
whose expected numbers are worked out by hand in the comments, and on the shared GPU ranks."""

from __future__ import annotations

import json
import os
import statistics

import pytest

from inductor_perf import cli
from inductor_perf.advice.advise import advise
from inductor_perf.ranks.digest import digest, rank_findings, view_of
from inductor_perf.ranks.files import cross_rank_files
from inductor_perf.ranks.findings import merge, title_key
from inductor_perf.report.ranks import format_ranks
from inductor_perf.summary.files import summarize_file
from inductor_perf.summary.light import LIGHT_NOTE
from inductor_perf.summary.stream import engine as summary_stream

from test_ranks import GEMM, SHARED, allreduce, kernel, rank_trace, write  # the hand-made ranks (tests/unit/ranks)

FRAME = {"frame": "forward", "file": "/home/me/model.py", "line": 10, "fail_type": None, "fail_reason": None,
         "start_us": 0}


def _recompiled(compile_s: float, in_window: bool) -> dict:
    """A compile record: frame 0 compiled twice, the second time ``compile_s`` seconds."""
    return {"compile": {"frames": [{**FRAME, "compile_id": "0/0", "compile_s": 1.0, "recompile_reason": None,
                                    "in_window": False},
                                   {**FRAME, "compile_id": "0/1", "compile_s": compile_s, "in_window": in_window,
                                    "recompile_reason": "0/0: tensor 'x' size mismatch at index 0. expected 8, actual 9"}],
                        "graph_breaks": [], "recompile_limit": 8}}


def three_ranks(tmp_path):
    """One 1000 µs step per rank (ProfilerStep#1 at 0-1000):

    rank 0: GEMM 100-600, all-reduce 600-900: compute 500, collective 300 all exposed, idle 200
            (0-100, 900-1000); frame 0 recompiled inside the step: 0.0004 s = 400 µs per step (1 step)
    rank 1: GEMM 150-750, all-reduce 750-850: compute 600, collective 100 all exposed, idle 300
            (0-150, 850-1000); frame 0 recompiled outside the steps: 0.003 s once, no per-step saving
    rank 2: GEMM 0-700, all-reduce 700-1000: compute 700, collective 300 all exposed, no idle, no record
    """
    r0 = rank_trace(0, [kernel(GEMM, 100, 500), allreduce(600, 300)], world=3)
    r0["inductor_perf"] = _recompiled(0.0004, True)
    r1 = rank_trace(1, [kernel(GEMM, 150, 600), allreduce(750, 100)], world=3)
    r1["inductor_perf"] = _recompiled(0.003, False)
    r2 = rank_trace(2, [kernel(GEMM, 0, 700), allreduce(700, 300)], world=3)
    return [write(tmp_path / f"j_rank{r}.json.gz", t) for r, t in enumerate((r0, r1, r2))]


def _rows(v: dict) -> dict[str, dict]:
    return {f["kind"]: f for f in v["findings"]}


def test_findings_merged_across_ranks_by_hand(tmp_path):
    v = cross_rank_files(three_ranks(tmp_path), workers=1).to_dict()
    # the per-rank table the rows rest on (docstring of three_ranks)
    assert [(r["comm_us"], r["exposed_comm_us"], r["idle_us"]) for r in v["ranks"]] == [(300, 300, 200), (100, 100, 300),
                                                                                       (300, 300, 0)]
    assert v["findings_read"] == [0, 1, 2] and "not read" not in v["findings_note"]
    rows = _rows(v)
    assert [f["kind"] for f in v["findings"]] == ["recompile", "host_bound", "exposed_comm"]
    # recompile: on ranks 0 and 1; only rank 0's has a per-step saving (400 µs), rank 1's is one-time only:
    # median and max over rank 0 alone; 400 / 1000 = 40 %; the largest one-time cost is rank 1's 0.003 s
    rc = rows["recompile"]
    assert rc["ranks"] == [0, 1] and rc["counted"] == 1 and rc["worst_rank"] == 0
    assert (rc["median_saving_us"], rc["max_saving_us"], rc["saving_pct_of_step"]) == (400, 400, 40)
    assert rc["one_time_s"] == pytest.approx(0.003) and rc["source"] == "/home/me/model.py:10"
    # host_bound: idle 200 on rank 0, 300 on rank 1; rank 2 has none and is not counted (not taken as 0):
    # median (200 + 300) / 2 = 250 = 25 % of the 1000 µs step, max 300 on rank 1
    hb = rows["host_bound"]
    assert hb["scope"] == "ranks" and hb["ranks"] == [0, 1] and hb["counted"] == 2
    assert (hb["median_saving_us"], hb["max_saving_us"], hb["worst_rank"], hb["saving_pct_of_step"]) == (250, 300, 1, 25)
    assert "300 µs" in hb["title"]  # the worst rank's own title
    # exposed_comm is the job's: rank 1 has the least collective time (100 < 300), so it arrives last and
    # waits for no one: the job loses its 100 µs exposed = 10 % of the step. The ranks' own exposed time:
    # median of 300, 100, 300 = 300, max 300 on rank 0 (the lower of the tie); their excess, 200, is waiting
    ec = rows["exposed_comm"]
    assert ec["scope"] == "job" and ec["ranks"] == [0, 1, 2]
    assert (ec["job_saving_us"], ec["saving_pct_of_step"]) == (100, 10)
    assert (ec["median_saving_us"], ec["max_saving_us"], ec["worst_rank"]) == (300, 300, 0)
    assert "rank 1" in ec["title"] and "200 µs, is waiting for it" in ec["evidence"]
    assert "slowest rank" in ec["evidence"]  # the model it rests on
    assert sum(f["kind"] == "exposed_comm" for f in v["findings"]) == 1  # the ranks' own exposed_comm: replaced


def test_a_rank_whose_findings_were_not_read(tmp_path):
    files = three_ranks(tmp_path)
    digests = [digest(f) for f in files]
    digests[1].findings = None  # as a light digest's
    v = view_of(digests).to_dict()
    assert v["findings_read"] == [0, 2] and "the findings of 1 rank(s) were not read (ranks 1)" in v["findings_note"]
    hb = _rows(v)["host_bound"]
    # rank 0's 200 µs alone
    assert (hb["ranks"], hb["median_saving_us"], hb["max_saving_us"], hb["worst_rank"]) == ([0], 200, 200, 0)
    assert "1 of 2 ranks" in format_ranks(v, "text")
    assert _rows(v)["exposed_comm"]["job_saving_us"] == 100  # the job's row reads the per-rank table, every rank


def test_a_light_summary_gives_no_findings(tmp_path, monkeypatch):
    # windows of 4 KB, so the streaming pass takes this small trace (as test_ranks_light does)
    monkeypatch.setattr(summary_stream, "WINDOW_BYTES", 4096)
    monkeypatch.setattr(summary_stream.Windows.__init__, "__defaults__", (4096,))
    f = three_ranks(tmp_path)[2]
    light = summarize_file(f, engine="stream", light=True).summary
    assert light.notes == [LIGHT_NOTE] and rank_findings(light) is None
    # the full summary of the same rank: its 300 µs of exposed collectives
    (full,) = rank_findings(summarize_file(f, engine="full").summary)
    assert (full["kind"], full["saving_us_per_step"]) == ("exposed_comm", 300)


def test_text_markdown_and_the_command_show_them(tmp_path, capsys):
    files = three_ranks(tmp_path)
    v = cross_rank_files(files, workers=1)
    text = " ".join(format_ranks(v, "text").split())  # the lines wrap at 100 characters
    assert "What to fix first, across ranks (saving per step)" in text
    assert "1. [recompile] median 400 µs/step (40 %), max 400 µs on rank 0, 0.003 s once at most; 2 of 3 ranks, 1 " \
           "with a per-step saving:" in text
    assert "3. [exposed_comm, the job] 100 µs/step (10 %)" in text
    assert text.index("What to fix first") < text.index("Ranks (3)") < text.index("Collectives")
    md = format_ranks(v, "markdown")
    assert "### What to fix first, across ranks" in md and "2. [host_bound] median 250 µs/step (25 %)" in md
    assert cli.main(["summary", str(tmp_path), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["findings"] == v.to_dict()["findings"] and len(doc["findings"]) == 3


def test_title_key_masks_numbers_and_units():
    a = "launch-bound: the device idles 341 ms a step while the host runs the model eagerly"
    b = "launch-bound: the device idles 999 µs a step while the host runs the model eagerly"
    assert title_key(a) == title_key(b) == "launch-bound: the device idles # a step while the host runs the model eagerly"
    assert title_key("3 kernel(s) of x.py:12 run at 12.5 % of their roof") == "# kernel(s) of x.py:12 run at # of their roof"
    # a line of code named in the title is a place, not a figure: two lines of one file stay two
    after = "host-device sync at an unknown line (after the kernels of /m/model.py:{}) holds the host 5 µs"
    assert title_key(after.format(9)) == "host-device sync at an unknown line (after the kernels of /m/model.py:9) " \
                                         "holds the host #"
    assert title_key(after.format(9)) != title_key(after.format(11))
    assert title_key("tf32 runs 1.5x faster") == "tf# runs # faster"


def test_headroom_of_two_modules_stays_two_rows_across_ranks():
    # no source line: the module path tells the findings apart, though their titles mask alike
    def found(module: str, us: float) -> dict:
        return {"kind": "headroom", "title": f"1 kernel(s) of module {module} run at 12 % of their roof",
                "source": None, "module": module, "saving_us_per_step": us, "saving_pct_of_step": 1.0,
                "one_time_s": None, "evidence": "e", "fix": "f"}
    rows = merge([(0, [found("layers.0", 10.0), found("layers.1", 30.0)]),
                  (1, [found("layers.0", 20.0), found("layers.1", 40.0)])], step_us=1000.0)
    assert sorted((r.module, r.ranks, r.median_saving_us) for r in rows) == [("layers.0", [0, 1], 15.0),
                                                                              ("layers.1", [0, 1], 35.0)]


@pytest.mark.skipif(not os.path.isdir(SHARED), reason="../shared/traces/two_ranks is absent (real GPU traces)")
def test_shared_two_gpu_ranks_findings():
    files = sorted(os.path.join(SHARED, f) for f in os.listdir(SHARED))
    v = cross_rank_files(files, workers=1).to_dict()
    assert v["findings_read"] == [0, 1]
    # each row against each rank's own advisor, run here on its own summary
    own = {r: [f.to_dict() for f in advise(summarize_file(p).summary)] for r, p in enumerate(files)}
    for row in v["findings"]:
        if row["scope"] == "job":
            continue
        having = {r: [f for f in fs if f["kind"] == row["kind"] and title_key(f["title"]) == title_key(row["title"])]
                  for r, fs in own.items()}
        having = {r: fs for r, fs in having.items() if fs}
        assert row["ranks"] == sorted(having)
        savings = [sum(f["saving_us_per_step"] for f in fs) for fs in having.values()]
        assert row["median_saving_us"] == pytest.approx(statistics.median(savings))
        assert row["max_saving_us"] == pytest.approx(max(savings))
    kinds = [f["kind"] for f in v["findings"]]
    assert "host_bound" in kinds and kinds.count("exposed_comm") == 1
    # the job's exposed_comm: the exposed time of the rank with the least collective time in the per-rank table
    # (rank 1: 190 ms of collectives against rank 0's 198 ms); 150 ms of a ~617 ms step
    last = min(v["ranks"], key=lambda r: r["comm_us"])
    job = next(f for f in v["findings"] if f["scope"] == "job")
    assert last["rank"] == 1 and job["job_saving_us"] == last["exposed_comm_us"]
    assert 140e3 < job["job_saving_us"] < 160e3 and 20 < job["saving_pct_of_step"] < 30
    # ranked by the row's saving, largest first
    key = [f["job_saving_us"] if f["scope"] == "job" else f["median_saving_us"] for f in v["findings"]]
    assert key == sorted(key, reverse=True)


def test_no_collectives_no_job_row_and_per_window(tmp_path):
    # no ProfilerStep (per window) and no collective: rank r runs a GEMM 100-400 and another 500-600+100r,
    # so its kernels' window is 500 + 100r µs with a 100 µs gap in it (the device idle while the host
    # runs the model eagerly: host_bound 100 µs on both ranks), and no exposed_comm row at all
    files = []
    for r in range(2):
        t = rank_trace(r, [kernel(GEMM, 100, 300), kernel(GEMM, 500, 100 + 100 * r)])
        t["traceEvents"] = t["traceEvents"][1:]
        files.append(write(tmp_path / f"w_rank{r}.json.gz", t))
    v = cross_rank_files(files, workers=1).to_dict()
    assert v["per"] == "window" and all(r["comm_us"] == 0 for r in v["ranks"])
    assert [f["kind"] for f in v["findings"]] == ["host_bound"]
    hb = v["findings"][0]
    assert (hb["ranks"], hb["median_saving_us"], hb["max_saving_us"]) == ([0, 1], 100, 100)
    # windows of 500 and 600 µs: median 550; 100 / 550 = 18.182 %
    assert hb["saving_pct_of_step"] == pytest.approx(18.182)
    assert "median 100 µs/window" in format_ranks(v, "text")
