"""The report page (inductor_perf.report.html): one point per costed kernel, table links that resolve,
nothing fetched, the tables without matplotlib, the CLI and the capture.

Expected kernel counts come from the augmented trace's own event fields (distinct names of the
kernels whose ``kernel_flop`` or ``kernel_num_gb`` is > 0), found here without the summary's code.
"""

from __future__ import annotations

import json
import shutil
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from inductor_perf.cli import main
from inductor_perf.report.html import default_report_path, render_report, write_report
from inductor_perf.augment.in_memory import with_costs
from inductor_perf.traces.files import load_trace

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
CPU = FIXTURES / "mlp_cpu_compiled.trace.json"
TRACES = Path(__file__).resolve().parents[3] / ".." / "shared" / "traces"
A100 = TRACES / "a100_ranks8_r3_control.json.gz"
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}


class _Page(HTMLParser):
    """Every id, href/src, <link>/<script src>, and each data-kernel element's <title> text."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.refs: list[str] = []
        self.fetching: list[str] = []
        self.points: dict[str, str] = {}
        self.point_ids: dict[str, str] = {}
        self.titles: dict[str, str] = {}
        self._title_of: str | None = None
        self._want_title: str | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.append(a["id"])
        for k in ("href", "src", "xlink:href"):
            if k in a:
                self.refs.append(a[k])
        if tag == "link" or (tag == "script" and "src" in a):
            self.fetching.append(tag)
        if "data-kernel" in a:
            key = a["data-kernel"]
            assert key not in self.points, f"two elements for kernel {key}"
            self.points[key] = tag
            self.point_ids[key] = a.get("id", "")
            self._want_title = key
        elif tag == "title" and self._want_title:
            self._title_of, self._want_title = self._want_title, None

    def handle_data(self, data):
        if self._title_of:
            self.titles[self._title_of] = self.titles.get(self._title_of, "") + data

    def handle_endtag(self, tag):
        if tag == "title":
            self._title_of = None


def _costed_kernel_names(trace: dict) -> set[str]:
    """Distinct names of the kernels with FLOPs or bytes > 0, from raw event fields: device events
    when the trace has any; else CPU events inside a compiled graph's call (``## Call
    CompiledFxGraph``) not nested in another costed event of their thread (a copy_ inside addmm is
    part of it). An eager op outside the calls (gradient accumulation's add_) is no compiled kernel,
    whether or not its cost was computed from its shapes."""
    def num(v):
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) else 0

    evs = [e for e in trace["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"
           and num(e.get("dur")) > 0]
    costed = [e for e in evs if num((e.get("args") or {}).get("kernel_flop")) > 0
              or num((e.get("args") or {}).get("kernel_num_gb")) > 0]
    device = [e for e in costed if e.get("cat") in DEVICE_CATS]
    if any(e.get("cat") in DEVICE_CATS for e in evs):
        return {e["name"] for e in device}

    def inside(e, o):
        return (o is not e and o["tid"] == e["tid"] and o["pid"] == e["pid"] and o["ts"] <= e["ts"]
                and e["ts"] + e["dur"] <= o["ts"] + o["dur"])

    calls = [e for e in evs if e["name"].startswith("## Call CompiledFxGraph")]
    return {e["name"] for e in costed if not any(inside(e, o) for o in costed) and any(inside(e, c) for c in calls)}


def _check_contract(text: str) -> _Page:
    page = _Page(text)
    for key, pid in page.point_ids.items():
        assert pid == f"pt-{key}"
    assert len(set(page.ids)) == len(page.ids), "duplicate ids"
    for ref in page.refs:
        assert not ref.startswith(("http://", "https://", "//")), ref
        if ref.startswith("#"):
            assert ref[1:] in page.ids, f"link {ref} resolves to nothing"
    assert not page.fetching
    return page


@pytest.fixture(scope="module")
def cpu_page() -> str:
    return render_report(str(CPU))


def test_cpu_page_has_one_point_per_costed_kernel(cpu_page):
    costed, _ = with_costs(load_trace(CPU))
    names = _costed_kernel_names(costed)
    assert len(names) == 2  # aten::mm, addmm: checked by hand against the trace
    page = _check_contract(cpu_page)
    assert len(page.points) == len(names)
    assert {t.split("\n")[0] for t in page.titles.values()} == names
    assert all(tag == "g" for tag in page.points.values())
    # each point is linked from the kernel table
    assert {r for r in page.refs if r.startswith("#pt-")} == {f"#pt-{k}" for k in page.points}


def test_cpu_page_lists_the_kernels_off_the_chart(cpu_page):
    # graph_0_cpp_* kernels carry no cost in this tag-less trace: 5 distinct names (hand count)
    assert "Not on the chart: 5 kernel(s)" in cpu_page
    assert "graph_0_cpp_fused_gelu_0" in cpu_page
    for heading in ("By module", "By source line", "Idle time by host activity", "Kernels by total time"):
        assert f"<h3>{heading}" in cpu_page  # the table itself, not a finding's link to it


def test_a100_page_has_one_point_per_costed_kernel():
    if not A100.exists():
        pytest.skip(f"{A100} absent (the shared real traces are not checked in)")
    text = render_report(str(A100))
    costed, _ = with_costs(load_trace(A100))
    names = _costed_kernel_names(costed)
    page = _check_contract(text)
    assert len(page.points) == len(names) > 100
    assert {t.split("\n")[0] for t in page.titles.values()} == names
    # roofs of the recognised A100 are drawn and labelled; steps exist in this trace
    assert "HBM: 1.55 TB/s" in text and "bfloat16/float16 matrix: 312 TFLOP/s" in text
    assert "<h3>Steps (" in text
    # a kernel above its roof says so with the reason, in its hover text
    assert any("above its roof" in t for t in page.titles.values())


def _synthetic() -> dict:
    """Four GPU kernels: a normal one, FLOPs without bytes, bytes without FLOPs, and no cost."""
    def k(name, ts, args):
        return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": 10, "pid": 0, "tid": 7, "args": args}

    return {"deviceProperties": [{"name": "NVIDIA A100-SXM4-40GB"}], "traceEvents": [
        k("normal", 0, {"kernel_flop": 10**9, "kernel_num_gb": 0.001}),
        k("flops_only", 20, {"kernel_flop": 10**9, "kernel_num_gb": 0}),
        k("bytes_only", 40, {"kernel_flop": 0, "kernel_num_gb": 0.002}),
        k("nothing", 60, {"not_costed": "unknown_op"})]}


def test_edge_points_are_drawn_and_named_in_the_legend():
    text = render_report(_synthetic())
    page = _check_contract(text)
    assert {t.split("\n")[0] for t in page.titles.values()} == {"normal", "flops_only", "bytes_only"}
    assert "no bytes: right edge" in text and "no FLOPs: left edge" in text
    assert "Not on the chart: 1 kernel(s)" in text


def test_without_matplotlib_the_page_has_the_tables_and_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    text = render_report(str(CPU))
    page = _check_contract(text)
    assert "no-chart" in page.ids and not page.points
    assert "matplotlib could not be imported" in text
    assert "By module" in text and "id='kernels'" in text
    assert "#pt-" not in text  # no link to a point that is not there


def test_directory_gives_one_section_per_trace_with_page_wide_keys(tmp_path):
    for n in (1, 2):
        shutil.copy(CPU, tmp_path / f"run{n}.json")
    text = render_report(str(tmp_path))
    page = _check_contract(text)
    assert len(page.points) == 4 and text.count("<section>") == 2  # aten::mm and addmm in each


def test_summary_json_keeps_its_shape():
    from inductor_perf.summary.core import summarize

    s = summarize(with_costs(load_trace(CPU))[0], top=2)
    # 5 graph_0_cpp_* kernel names, aten::addmm and aten::mm inside the compiled calls (by hand)
    assert len(s.top_kernels) == 2 and len(s.all_kernels) == s.distinct_kernels == 7
    assert "all_kernels" not in s.to_dict()


def test_cli_writes_the_page(tmp_path, capsys):
    out = tmp_path / "page.html"
    assert main(["report", str(CPU), "-o", str(out)]) == 0
    assert out.read_text().startswith("<!DOCTYPE html>")
    src = tmp_path / "copy.trace.json"
    shutil.copy(CPU, src)
    assert main(["report", str(src)]) == 0
    assert (tmp_path / "copy.trace.report.html").exists()
    assert default_report_path(str(tmp_path / "x.json.gz")) == str(tmp_path / "x.report.html")


@pytest.mark.parametrize("content", [None, json.dumps({"a": 1})])
def test_cli_bad_input_is_one_line_and_exit_1(tmp_path, capsys, content):
    path = tmp_path / "in.json"
    if content is not None:
        path.write_text(content)
    assert main(["report", str(path), "-o", str(tmp_path / "o.html")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("inductor-perf: error:") and "\n" not in err
    assert not (tmp_path / "o.html").exists()


def test_write_report_is_atomic_and_returns_the_path(tmp_path):
    out = tmp_path / "r.html"
    assert write_report(str(CPU), out) == str(out)
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]


def test_capture_writes_the_page(tmp_path):
    from inductor_perf.capture.session import process_trace

    r = process_trace(str(CPU), str(tmp_path / "cap"))
    assert r.report_path == str(tmp_path / "cap.report.html")
    text = Path(r.report_path).read_text()
    _check_contract(text)
    assert "cap" in text and "By module" in text


def test_capture_survives_a_page_that_cannot_be_written(tmp_path, monkeypatch, caplog):
    from inductor_perf.capture import session as capture
    from inductor_perf.report import html as report_html

    def boom(*a, **k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(report_html, "write_report", boom)
    r = capture.process_trace(str(CPU), str(tmp_path / "cap"))
    assert r.report_path is None and any("disk on fire" in w for w in r.warnings)
    assert Path(r.trace_path).exists() and Path(r.summary_json_path).exists()
    assert sum("could not write the report page" in m for m in caplog.messages) == 1
