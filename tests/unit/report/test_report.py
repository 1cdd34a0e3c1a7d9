"""report/text.py formatting and the ``inductor-perf summary`` command."""

from __future__ import annotations

import gzip
import json

import pytest

from inductor_perf.cli import main
from inductor_perf.report.text import (fmt_flop, fmt_gb, fmt_gbps, fmt_pct, fmt_si, fmt_tflops, fmt_time_us,
                                  format_summary, render_table)
from inductor_perf.summary.core import summarize


def X(name, ts, dur, cat="cpu_op", pid=1, tid=1, **args):
    ev = {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid}
    if args:
        ev["args"] = args
    return ev


LONG = "graph_0_cpp_fused_" + "_".join(["native_layer_norm"] * 6) + "_17"


def trace():
    # Busy: [0, 10] + [20, 30] of the 40 µs step (the window) = 50.0 %. FLOPs 2e9 over 20 µs = 100 TFLOP/s.
    return {"traceEvents": [
        X("ProfilerStep#1", 0, 40, cat="user_annotation"),
        X("## Call CompiledFxGraph k ##", 0, 40, cat="user_annotation"),
        X("aten::mm", 0, 10, kernel_flop=2_000_000_000, kernel_num_gb=0.5, module_path="enc.fc1",
          source="/very/long/path/to/the/project/model.py:42"),
        X(LONG, 20, 10, module_path="enc." + "deep." * 20 + "norm", source="model.py:43"),
    ], "distributedInfo": {"rank": 0, "world_size": 2}}


@pytest.mark.parametrize("fn,value,text", [
    (fmt_time_us, 0.31, "0.310 µs"), (fmt_time_us, 12.34, "12.3 µs"), (fmt_time_us, 1440, "1.44 ms"),
    (fmt_time_us, 2.05e6, "2.05 s"), (fmt_time_us, None, "-"), (fmt_time_us, float("nan"), "-"),
    (fmt_flop, 201_326_592, "201 MFLOP"), (fmt_flop, 1_610_612_736, "1.61 GFLOP"), (fmt_flop, 2e12, "2.00 TFLOP"),
    (fmt_gb, 0.0032, "3.20 MB"), (fmt_gb, 1.5, "1.50 GB"),
    (fmt_tflops, 1.234, "1.23 TFLOP/s"), (fmt_tflops, 0.456, "456 GFLOP/s"),
    (fmt_gbps, 12.3, "12.3 GB/s"), (fmt_gbps, 1200, "1.20 TB/s"),
    (fmt_pct, 36.21, "36.2 %"), (fmt_si, 4_867_200, "4.87M"), (fmt_si, 12, "12.0"),
])
def test_units(fn, value, text):
    assert fn(value) == text


def test_render_table_text_markdown_json():
    rows = [["x", 1, None], ["a|b", 22, 0.5]]
    text = render_table(["name", "n", "v"], rows, "text")
    # floats show 3 significant digits; numeric columns are right-aligned
    assert text.splitlines() == ["name   n      v", "----  --  -----", "x      1      -", "a|b   22  0.500"]
    md = render_table(["name", "n", "v"], rows, "markdown")
    assert md.splitlines()[1] == "|:---|---:|---:|"
    assert "| a\\|b | 22 | 0.500 |" in md
    assert json.loads(render_table(["name", "n", "v"], rows, "json")) == [
        {"name": "x", "n": 1, "v": None}, {"name": "a|b", "n": 22, "v": 0.5}]
    assert json.loads(render_table(["v"], [[float("inf")]], "json")) == [{"v": None}]
    with pytest.raises(ValueError, match="expected 2"):
        render_table(["a", "b"], [[1]], "text")
    with pytest.raises(ValueError, match="text, markdown, json"):
        render_table(["a"], [[1]], "html")


def test_render_table_fits_width_and_keeps_name_ends():
    rows = [[LONG, 1.0]]
    text = render_table(["kernel", "t"], rows, "text", width=40)
    assert max(len(line) for line in text.splitlines()) <= 40
    assert text.splitlines()[2].startswith("graph_0_cpp") and "_17" in text  # index suffix stays visible


def test_text_fits_100_columns_and_headline_first():
    text = format_summary(summarize(trace(), label="r0.json"), "text")
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert lines[0] == "inductor_perf summary: r0.json"
    assert lines[2].startswith("Window") and "40.0 µs  (1 recorded step(s);" in lines[2]
    assert lines[3].startswith("Device busy") and "50.0 %" in lines[3]
    assert "100 TFLOP/s" in text  # 2e9 FLOP / 20 µs
    assert text.index("Device busy") < text.index("\nTop kernels")
    assert "model.py:42" in text and "/very/long" not in text  # basename in text, full path in JSON
    assert "rank 0, world_size 2" in text


def test_formats_carry_the_same_numbers():
    s = summarize(trace(), label="r0.json")
    d = json.loads(format_summary(s, "json"))
    assert d == json.loads(json.dumps(s.to_dict()))
    assert d["busy_pct"] == 50.0 and d["achieved_tflops"] == 100.0
    assert d["top_kernels"][0]["source"] == "/very/long/path/to/the/project/model.py:42"
    text, md = format_summary(s, "text"), format_summary(s, "markdown")
    for out in (text, md):
        for shown in (fmt_pct(d["busy_pct"]), fmt_time_us(d["wall_us"]), fmt_time_us(d["busy_us"]),
                      fmt_time_us(d["idle_us"]), fmt_tflops(d["achieved_tflops"]), fmt_gbps(d["achieved_gbps"]),
                      fmt_pct(d["time_split_pct"]["generated"]), fmt_pct(d["modules"][0]["share_of_busy_pct"])):
            assert shown in out, shown
    assert "50.0 %" in md and "25.0 TB/s" in md  # 0.5e9 B / 20e-6 s = 2.5e13 B/s, by hand
    assert md.startswith("## inductor_perf summary: r0.json")
    with pytest.raises(ValueError):
        format_summary(s, "yaml")


def test_format_empty_summary():
    for fmt in ("text", "markdown", "json"):
        out = format_summary(summarize({"traceEvents": []}), fmt)
        assert out.strip()


# --- CLI -----------------------------------------------------------------------------------------
def test_cli_summary_directory(tmp_path, capsys):
    t0 = trace()
    t1 = trace()
    t1["distributedInfo"] = {"rank": 1, "world_size": 2}
    (tmp_path / "rank0.json").write_text(json.dumps(t0))
    with gzip.open(tmp_path / "rank1.trace.json.gz", "wt") as f:
        json.dump(t1, f)
    (tmp_path / "rank0.summary.json").write_text("{}")  # our own output: must be skipped
    # --per-rank: each trace's own summary (a directory's default is the cross-rank view, test_ranks.py)
    assert main(["summary", str(tmp_path), "--per-rank", "--format", "json"]) == 0
    docs = json.loads(capsys.readouterr().out)
    assert [d["label"] for d in docs] == ["rank0.json (rank 0 of 2)", "rank1.trace.json.gz (rank 1 of 2)"]
    assert all(d["busy_pct"] == 50.0 for d in docs)
    assert main(["summary", str(tmp_path), "--per-rank"]) == 0
    out = capsys.readouterr().out
    assert out.count("inductor_perf summary:") == 2


def test_cli_summary_single_file_and_errors(tmp_path, capsys):
    p = tmp_path / "t.json"
    p.write_text(json.dumps(trace()))
    assert main(["summary", str(p), "--format", "markdown"]) == 0
    assert "| Device busy | 50.0 %" in capsys.readouterr().out
    assert main(["summary", str(tmp_path / "missing.json")]) == 1
    assert "no such file" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert main(["summary", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("inductor-perf: error:") and len(err.strip().splitlines()) == 1
