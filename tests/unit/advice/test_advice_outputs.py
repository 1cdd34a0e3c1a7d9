"""One truth for the findings: `inductor-perf summary` (JSON and text), `inductor-perf advise` (text and
JSON, a file and a directory of ranks) and the report page carry the same findings, in the same order;
the text summary and the page open with them."""

from __future__ import annotations

import gzip
import json

from advice_traces import gpu_trace

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
