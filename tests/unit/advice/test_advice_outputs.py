"""One truth for the findings: `inductor-perf summary` (JSON and text), `inductor-perf advise` (text and
JSON, a file and a directory of ranks) and the report page carry the same findings, in the same order;
the text summary and the page open with them."""

from __future__ import annotations

import gzip
import json
import re

from advice_traces import gpu_trace
from engine_inputs import FIXTURES

from inductor_perf.advice.advise import advise
from inductor_perf.cli import main
from inductor_perf.report.html import render_report
from inductor_perf.summary.core import summarize


def _write(tmp_path, name="t.json.gz", trace=None):
    p = tmp_path / name
    with gzip.open(p, "wt") as f:
        json.dump(trace or gpu_trace(), f)
    return p


def test_summary_json_and_advise_json_agree(tmp_path, capsys):
    p = _write(tmp_path)
    expected = [f.to_dict() for f in advise(summarize(gpu_trace()))]
    assert main(["summary", str(p), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["findings"] == expected
    assert main(["advise", str(p), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == expected


def test_text_summary_opens_with_the_top_findings(tmp_path, capsys):
    p = _write(tmp_path)
    assert main(["summary", str(p)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2] == "What to fix first"
    assert out[3].startswith("1. [input_wait] saves ~100 µs/step")
    assert out.index("What to fix first") < min(i for i, line in enumerate(out) if line.startswith("Window"))


def test_advise_text_lists_all_with_evidence(tmp_path, capsys):
    p = _write(tmp_path)
    assert main(["advise", str(p)]) == 0
    out = capsys.readouterr().out
    n = len(advise(summarize(gpu_trace())))
    assert f"{n}. [" in out and f"{n + 1}. [" not in out
    assert out.count("why: ") == n and "train.py:42" in out
    # advise prints no table: the input_wait finding's idle tables are named where they are
    assert "see: Idle time by host activity, Idle time by stream (in inductor-perf summary)" in out


def test_advise_directory_of_ranks_gives_each_rank(tmp_path, capsys):
    d = tmp_path / "ranks"
    d.mkdir()
    for r in (0, 1):
        _write(d, f"rank{r}.json.gz", {**gpu_trace(), "distributedInfo": {"rank": r, "world_size": 2}})
    assert main(["advise", str(d), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [x["label"] for x in doc] == ["rank0.json.gz (rank 0 of 2)", "rank1.json.gz (rank 1 of 2)"]
    assert doc[0]["findings"] == doc[1]["findings"] == [f.to_dict() for f in advise(summarize(gpu_trace()))]


def test_page_opens_with_the_findings(tmp_path):
    page = render_report(str(_write(tmp_path)))
    head = page.index("What to fix first")
    assert head < page.index("<dl class='head'>")
    assert "input_wait" in page[head:page.index("<dl class='head'>")]


def test_no_finding_prints_no_section(tmp_path, capsys):
    quiet = {"traceEvents": [{"ph": "X", "name": "k", "cat": "kernel", "ts": 0, "dur": 10, "pid": 0, "tid": 7,
                              "args": {}}]}
    p = _write(tmp_path, trace=quiet)
    assert main(["summary", str(p)]) == 0
    assert "What to fix first" not in capsys.readouterr().out
    assert main(["advise", str(p)]) == 0
    assert "no finding with a measurable saving" in capsys.readouterr().out


def test_savings_are_written_in_the_tables_units():
    # a saving of 1.1 s a step reads in seconds, as the tables write a duration, not "1.1e+03 ms"
    from inductor_perf.report.findings import findings_text

    f = {"kind": "exposed_comm", "title": "t", "fix": "x", "evidence": "e", "saving_us_per_step": 1_102_980.6,
         "saving_pct_of_step": 86.0}
    assert findings_text([f])[0] == "1. [exposed_comm] saves ~1.10 s/step (86 %): t"
    assert findings_text([{**f, "saving_us_per_step": 70.0}])[0].startswith("1. [exposed_comm] saves ~70.0 µs/step")


# --- the tables a finding stands on, beside it -----------------------------------------------------------
GPT = FIXTURES / "gpu" / "gpt_bf16.trace.json.gz"  # launch-bound: host_bound, headroom and sync findings


def test_text_findings_name_the_tables_printed_below_them(capsys):
    assert main(["summary", str(GPT)]) == 0
    out = capsys.readouterr().out
    head, tables = out.split("\nWindow ", 1)
    sees = {line.split("[")[1].split("]")[0]: None for line in head.splitlines() if line[:1].isdigit()}
    assert {"host_bound", "headroom"} <= set(sees)
    named = [line.strip().removeprefix("see: ").removesuffix(" (below)").split(", ")
             for line in head.splitlines() if line.strip().startswith("see: ")]
    assert named and ["Idle time by stream", "Idle time by host activity", "Longest idle gaps"] in named
    titles = [line for line in tables.splitlines() if line and not line.startswith((" ", "-", "|"))]
    for name in {n for names in named for n in names}:  # each named table is printed, with rows under it
        (title,) = [t for t in titles if t.startswith(name)]
        lines = tables.splitlines()
        assert lines[lines.index(title) + 2].strip(), title
    # the idle split the host_bound savings stand on: host wait and launch delay of the one stream
    stream = tables.split("Idle time by stream")[1].splitlines()
    assert stream[1].split()[:5] == ["Stream", "Kernels", "Idle", "Host", "wait"]


def test_page_findings_link_to_tables_on_the_page(tmp_path):
    # two traces: the second section's ids carry its suffix, and its links follow
    d = tmp_path / "two"
    d.mkdir()
    for name in ("a", "b"):
        (d / f"{name}.trace.json.gz").write_bytes(GPT.read_bytes())
    page = render_report(str(d))
    ids = set(re.findall(r"id='([^']+)'", page))
    sections = page.split("<section>")[1:]
    assert len(sections) == 2
    for n, sec in enumerate(sections):
        box = sec[:sec.index("<dl class='head'>")]
        links = re.findall(r"<a href='#([^']+)'>", box)
        suffix = "" if n == 0 else f"-{n}"
        assert f"idle-by-stream{suffix}" in links and f"kernels{suffix}" in links
        assert set(links) <= ids, set(links) - ids
        # the linked table is the section's own: its id sits in this section
        assert all(f"id='{x}'" in sec for x in links)
